#!/usr/bin/env bash
# The steps of deploy/Containerfile, one subcommand each, so that the suite runs them as the recipe does:
#   deploy/container.sh build-packages    apt-get install of what building vit needs (a part of scripts/setup.sh's)
#   deploy/container.sh build PREFIX      a release build of vit and its OpenCV plugins (no tests, no Python
#                                         module), installed as PREFIX/vit beside its plugins
#   deploy/container.sh runtime-packages  apt-get install of the libraries the installed vit links at run time
# VIT_APT=simulate: apt-get only works out what it would install and changes nothing (the suite's test of the
# recipe). VIT_BUILD_DIR: the build folder (default: a new temporary one).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_PACKAGES=(g++ cmake ninja-build pkg-config libdnnl-dev ocl-icd-opencl-dev libjpeg-dev libstb-dev libspdlog-dev
  nlohmann-json3-dev libcli11-dev libopencv-dev libavutil-dev libwebp-dev libcsv-dev zlib1g-dev libboost-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc)
RUNTIME_PACKAGES=(libdnnl2 libjpeg62-turbo libspdlog1.10 libfmt9 libgomp1 libopencv-core406 libopencv-imgproc406
  libopencv-imgcodecs406 libopencv-videoio406 libavutil57 libwebpdemux2 libcsv3 libgrpc++1.51 libgrpc29 libprotobuf32)

apt_install() {
  if [ "${VIT_APT:-}" = simulate ]; then
    apt-get install -s -q --no-install-recommends "$@" > /dev/null
  else
    apt-get update -q
    apt-get install -y -q --no-install-recommends "$@"
    rm -rf /var/lib/apt/lists/*
  fi
}

case "${1:-}" in
  build-packages) apt_install "${BUILD_PACKAGES[@]}" ;;
  runtime-packages) apt_install "${RUNTIME_PACKAGES[@]}" ;;
  build)
    prefix="${2:?usage: $0 build PREFIX}"
    build="${VIT_BUILD_DIR:-$(mktemp -d)}"
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DVIT_BUILD_TESTS=OFF -DVIT_BUILD_PYTHON=OFF \
      -DVIT_INSTALL=OFF
    cmake --build "$build" --target vit vit_opencv_image vit_opencv_video
    mkdir -p "$prefix"
    cp "$build/vit" "$build/libvit_opencv_image.so" "$build/libvit_opencv_video.so" "$prefix/"
    ;;
  runtime-package-list) printf '%s\n' "${RUNTIME_PACKAGES[@]}" ;;
  build-package-list) printf '%s\n' "${BUILD_PACKAGES[@]}" ;;
  *) echo "usage: $0 build-packages | build PREFIX | runtime-packages | build-package-list | runtime-package-list" >&2; exit 2 ;;
esac
