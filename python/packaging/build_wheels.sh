#!/usr/bin/env bash
# Builds the package's wheels once per test run (CTest fixture python_wheel) into OUT_DIR as a user would
# from a release: the source distribution first (`python -m build --sdist` of the repository: what
# pyproject.toml's sdist takes from the working tree), then `pip wheel` of that unpacked sdist, by the Python
# the build tree's module is for (VIT_BUILD_PYTHON) and by pyenv's Python of each version in
# VIT_WHEEL_PYTHONS (default 3.12) where pyenv has one; test_wheel.py and the Spark test install them, so a
# file the sdist lacks fails the run. Each Python keeps its own CMake build folder under
# OUT_DIR/../wheel-build; the sdist unpacks into the same folder every run with fresh times (its members
# carry one fixed time, which would hide changes from ninja), and ccache, where installed, compiles only
# what changed, with paths relative to that folder (CCACHE_BASEDIR), so a clone elsewhere shares the cache.
#   build_wheels.sh OUT_DIR
set -euo pipefail
out=$1
src=${VIT_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
builds=$(dirname "$out")/wheel-build
build_python=${VIT_BUILD_PYTHON:-python3}
rm -rf "$out" "$builds/sdist"
mkdir -p "$out" "$builds/sdist"
pythons=("$build_python")
for version in ${VIT_WHEEL_PYTHONS-3.12}; do
  found=$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$version".*/bin/python3 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -n "$found" ]; then
    pythons+=("$found")
  else
    echo "no Python $version under pyenv: its wheel is not built (test_wheel.py skips it)"
  fi
done

start=$SECONDS
"$build_python" -m build --sdist --outdir "$out" "$src" >"$builds/sdist.log" 2>&1 || { cat "$builds/sdist.log"; exit 1; }
sdist=$(ls "$out"/vit-*.tar.gz)
tar -xzmf "$sdist" -C "$builds/sdist"
tree=$(ls -d "$builds"/sdist/vit-*)
echo "$(basename "$sdist"): $(tar -tzf "$sdist" | wc -l) files, $(du -k "$sdist" | cut -f1) KiB, in $((SECONDS - start)) s"

# One compiler for every Python (scikit-build-core would take each interpreter's sysconfig CXX: Debian's
# x86_64-linux-gnu-g++, pyenv's g++), so that the second Python's engine objects are the first's from ccache.
export CC=${CC:-gcc} CXX=${CXX:-g++}
settings=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR=$tree
  settings+=(--config-settings=cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache
             --config-settings=cmake.define.CMAKE_C_COMPILER_LAUNCHER=ccache)
fi
for python in "${pythons[@]}"; do
  tag=$("$python" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
  start=$SECONDS
  # A build folder configured for another source folder or compiler starts over.
  cache=$builds/$tag/CMakeCache.txt
  if ! grep -qxF "CMAKE_HOME_DIRECTORY:INTERNAL=$tree" "$cache" 2>/dev/null ||
     ! grep -qxF "CMAKE_CXX_COMPILER:FILEPATH=$(command -v "$CXX")" "$cache"; then
    rm -rf "${builds:?}/$tag"
  fi
  "$python" -m pip wheel --no-deps --disable-pip-version-check -q -w "$out" \
    --config-settings=build-dir="$builds/$tag" "${settings[@]}" "$tree"
  echo "$tag: $(cd "$out" && ls -- *-"$tag"-*.whl) built from the sdist by $python in $((SECONDS - start)) s"
done
