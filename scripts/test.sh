#!/usr/bin/env bash
# The second README command: builds everything (tests included) and runs the whole suite through CTest.
# Tests that need ../shared/data skip without it, except under CI=true, where they fail.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build
cd build && ctest --output-on-failure -j "$(nproc)"
