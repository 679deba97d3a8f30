#!/usr/bin/env bash
# The CMake package as users take it in (CTest label cli):
#   package_test.sh install BUILD  `cmake --install BUILD` into a temporary prefix, the installed tree then
#                                  moved elsewhere, tests/consumer built against it there with
#                                  find_package, and run: it must label the tench "tench", as JPEG and as
#                                  WebP, through the OpenCV plugin of the moved package (not the build
#                                  folder's, nor one named by VIT_OPENCV_PLUGIN_DIR)
#   package_test.sh subproject     tests/subproject configured with its own build type and flags, taking vit
#                                  in with add_subdirectory: vit compiles with the parent's flags and none of
#                                  its tests or its Python module are built (configured only: compiling the
#                                  whole engine again would take minutes)
# Without ../shared/data the consumer is built but not run, and the test skips (exit 77); CI=true fails.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source_dir="$(dirname "$here")"
shared="${VIT_SHARED_DATA:-$source_dir/../shared/data}"
cmake="${CMAKE_COMMAND:-cmake}"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/vit-package-XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# Runs a command quietly, showing its output only when it fails.
quiet() {
  "$@" > "$tmp/log" 2>&1 || { cat "$tmp/log" >&2; fail "$*"; }
}

install_test() {
  local build="$1" prefix="$tmp/moved/prefix"
  quiet "$cmake" --install "$build" --prefix "$tmp/installed"
  # A package is relocatable: what it says about itself follows it to wherever it is unpacked.
  mkdir -p "$tmp/moved"
  mv "$tmp/installed" "$prefix"
  local headers="./vit/batcher.h ./vit/bench.h ./vit/class_embeddings.h ./vit/cpu.h ./vit/error.h ./vit/explain.h ./vit/imagenet_classes.h ./vit/limits.h ./vit/load_options.h ./vit/model.h ./vit/model_files.h ./vit/model_kinds.h ./vit/precision.h ./vit/quantize.h ./vit/request.h ./vit/text.h ./vit/threads.h ./vit/topk.h ./vit/vit.h "
  [ "$(cd "$prefix/include" && find . -type f | LC_ALL=C sort | tr '\n' ' ')" = "$headers" ] ||
    fail "installed headers are not exactly $headers: $(cd "$prefix/include" && find . -type f)"
  # Three shared objects: OpenCV's plugins (WebP, TIFF, JPEG 2000; video) and SentencePiece's, never the Python module.
  local objects
  objects="$(cd "$prefix" && find . -name '*.so*' | sort | tr '\n' ' ')"
  [[ "$objects" =~ ^\./(lib[^/]*)/vit/libvit_opencv_image\.so\ \./lib[^/]*/vit/libvit_opencv_video\.so\ \./lib[^/]*/vit/libvit_sentencepiece\.so\ $ ]] ||
    fail "a plain install must install the three plugins and no other shared object (the Python module): $objects"
  local plugins="$prefix/${BASH_REMATCH[1]}/vit"
  # The public headers stand alone on standard headers, in C++17 (the standard vit::vit asks for): each one.
  for h in $headers; do
    echo "#include <${h#./}>" | ${CXX:-c++} -std=c++17 -fsyntax-only -I"$prefix/include" -x c++ - ||
      fail "include/${h#./} does not compile alone"
  done

  quiet "$cmake" -S "$here/consumer" -B "$tmp/consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix"
  grep -q "^vit_DIR:PATH=$prefix/" "$tmp/consumer/CMakeCache.txt" ||
    fail "find_package(vit) did not take the package in $prefix: $(grep '^vit_DIR' "$tmp/consumer/CMakeCache.txt")"
  quiet "$cmake" --build "$tmp/consumer"
  echo "consumer built against the package installed in $prefix"

  local model="$shared/models/deit_tiny_patch16_224.fb_in1k" photo="$shared/images/imagenet-samples/n01440764_tench.JPEG"
  if [ ! -d "$model" ] || [ ! -f "$photo" ]; then
    [ "${CI:-}" = true ] && fail "CI=true but the test data is missing: $shared"
    echo "test data not found at $shared (set VIT_SHARED_DATA); skipping the run"
    exit 77
  fi
  local label
  label="$("$tmp/consumer/consumer" "$model" "$photo")" || fail "the consumer failed"
  [ "$label" = tench ] || fail "the consumer printed '$label' for $photo, expected 'tench'"
  echo "the consumer printed '$label' for $photo"
  # The same photo as WebP, read through the plugin of the moved package: the program says where that is
  # (glibc's LD_DEBUG=files names each library loaded), and the build folder's plugin, which the engine
  # also knows of, is not the one taken.
  /usr/bin/python3 -c "import sys; from PIL import Image; Image.open(sys.argv[1]).save(sys.argv[2], lossless=True)" \
    "$photo" "$tmp/tench.webp" || fail "Debian's python3 with PIL could not write a WebP"
  label="$(env -u VIT_OPENCV_PLUGIN_DIR LD_DEBUG=files LD_DEBUG_OUTPUT="$tmp/ld" \
           "$tmp/consumer/consumer" "$model" "$tmp/tench.webp")" || fail "the consumer failed on a WebP"
  [ "$label" = tench ] || fail "the consumer printed '$label' for the WebP, expected 'tench'"
  local loaded
  loaded="$(cat "$tmp"/ld.* | grep -o 'file=[^ ]*libvit_opencv_image\.so' | sort -u | sed 's/^file=//')"
  [ "$loaded" = "$plugins/libvit_opencv_image.so" ] ||
    fail "the WebP plugin loaded was '$loaded', expected the moved package's $plugins/libvit_opencv_image.so"
  echo "the consumer printed '$label' for the WebP, through the plugin in $plugins"
  # A text tower through the package (ICU and SentencePiece linked from it), on the text tests' CLIP model when the
  # build made them (tests/make_text_models.py: text embeddings of width 32).
  local text_model="$build/text_models/oc_clip"
  if [ -d "$text_model" ]; then
    label="$("$tmp/consumer/consumer" --text "$text_model" "a photo of a tench")" || fail "the consumer failed on a text"
    [ "$label" = 32 ] || fail "the consumer printed '$label' for a text's width, expected 32"
    echo "the consumer embedded a text with $text_model: width $label"
  else
    echo "no text models in $build (the text tests make them): the consumer's --text not run"
  fi
}

# The optimisation, NDEBUG and marker flags in the compile command of the source file named $2.
flags_of() {
  grep -- "-c [^\"]*$2\"" "$1/compile_commands.json" | tr ' ' '\n' | grep -xE -- '-O[0-3gs]?|-DNDEBUG|-DVIT_PARENT_FLAGS' |
    sort | tr '\n' ' '
}

subproject_test() {
  local parent="$tmp/parent" mine theirs
  # Each case: a build type and its flags; vit's sources must compile with exactly the parent's.
  for args in "-DCMAKE_BUILD_TYPE=Release;-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DVIT_PARENT_FLAGS" \
              "-DCMAKE_BUILD_TYPE=;-DCMAKE_CXX_FLAGS=-DVIT_PARENT_FLAGS"; do
    rm -rf "$parent"
    IFS=';' read -r build_type flags <<< "$args"
    quiet "$cmake" -S "$here/subproject" -B "$parent" -G Ninja -DVIT_SOURCE_DIR="$source_dir" \
      -DCMAKE_EXPORT_COMPILE_COMMANDS=ON "$build_type" "$flags"
    theirs="$(flags_of "$parent" tests/consumer/main.cpp)"
    [[ "$theirs" == *-DVIT_PARENT_FLAGS* ]] || fail "the parent's own flags are missing from its command: '$theirs'"
    for file in engine/nn/topk.cpp library/classifier.cpp; do
      mine="$(flags_of "$parent" "$file")"
      [ "$mine" = "$theirs" ] || fail "with $build_type $flags, $file compiles with '$mine', the parent's code with '$theirs'"
    done
    echo "with $build_type $flags vit compiles with the parent's flags: $theirs"
    ! grep -qE '^build vit/(tests|python)/' "$parent/build.ninja" || fail "vit's tests or Python module are built"
  done
  # Asked for, its tests are there: the check above can see them.
  quiet "$cmake" "$parent" -DVIT_BUILD_TESTS=ON
  grep -qE '^build vit/tests/' "$parent/build.ninja" || fail "VIT_BUILD_TESTS=ON did not add vit's tests"
  echo "vit's tests and Python module are built only when asked for"
}

case "${1:-}" in
  install) install_test "${2:?usage: package_test.sh install BUILD_DIR}" ;;
  subproject) subproject_test ;;
  *) fail "usage: package_test.sh install BUILD_DIR | subproject" ;;
esac
