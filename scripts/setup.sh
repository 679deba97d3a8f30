#!/usr/bin/env bash
# The first README command: installs the Debian packages, makes a release build in build/, obtains the
# default model and classifies a sample photo with it.
set -euo pipefail
cd "$(dirname "$0")/.."
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends \
  g++ cmake ninja-build make pkg-config curl ca-certificates \
  libdnnl-dev ocl-icd-opencl-dev libjpeg-dev libstb-dev libspdlog-dev nlohmann-json3-dev libcli11-dev libgtest-dev \
  clang libclang-rt-14-dev libomp-14-dev python3-torch python3-torchvision
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build
weights/get_default_model.sh
sample=../shared/data/images/imagenet-samples/n01440764_tench.JPEG
if [ ! -f "$sample" ]; then
  sample=/usr/share/doc/opencv-doc/examples/data/butterfly.jpg
  [ -f "$sample" ] || $sudo apt-get install -y -q opencv-doc
fi
build/vit classify "$sample"
