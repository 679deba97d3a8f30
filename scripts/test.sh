#!/usr/bin/env bash
# The second README command: builds everything (tests included) and runs the whole suite through CTest.
# Tests that need ../shared/data skip without it, except under CI=true, where they fail.
#   scripts/test.sh             release build in build/; every Python process of the run records what it
#                               imports and runs (tests/record_imports.py), and the dependency audit (label
#                               audit) runs last, checking that scripts/setup.sh installs all of it
#                               (`ctest -L walk`, every architecture name at full size, ~20 minutes, is
#                               left out: the suite walks them all shrunk)
#   scripts/test.sh --sanitize  the same suite built with AddressSanitizer + UBSan in build-asan/
#                               (leak reports and undefined behaviour fail the test that caused them); the
#                               audit, the cluster tests (HAProxy, Ray, the container's release build) and
#                               KServe over gRPC (tritonclient's load and hostile clients) and the text towers
#                               against their Python references are left to the release run
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache, as scripts/setup.sh uses it: objects shared between build trees and clones.
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="$PWD" CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
fi
if [ "${1:-}" = --sanitize ]; then
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVIT_SANITIZE=ON
  cmake --build build-asan
  cd build-asan
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1
  ctest --output-on-failure -j "$(nproc)" -LE 'audit|cluster|grpc|walk'
else
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
  cmake --build build
  cd build
  rm -rf python-imports/log
  export PYTHONUSERBASE="$PWD/python-imports/userbase" VIT_IMPORT_LOG="$PWD/python-imports/log"
  status=0
  ctest --output-on-failure -j "$(nproc)" -LE 'audit|walk' || status=$?
  ctest --output-on-failure -L audit || status=$?
  exit $status
fi
