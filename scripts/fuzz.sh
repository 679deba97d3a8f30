#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) in build-fuzz/, writes their seed corpora and
# runs each for SECONDS (default 60), all at once. A crash leaves its input in build-fuzz/crashes/
# and fails the script; each input found that way goes into tests/fuzz/regressions/<target>/ (replayed
# on every run) and becomes a test in tests/.
#   scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache, as scripts/setup.sh uses it: objects shared between build trees and clones.
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="$PWD" CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
fi
seconds="${1:-60}"
targets=(image checkpoint names opencv)
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVIT_FUZZ=ON \
  -DVIT_BUILD_TESTS=OFF
cmake --build build-fuzz --target "${targets[@]/#/fuzz_}" make_corpus
rm -rf build-fuzz/corpus && build-fuzz/tests/fuzz/make_corpus build-fuzz/corpus
export OMP_NUM_THREADS=1 ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1
# A run over 60 s is a hang. Instrumented preprocessing is ~20x slower than release: a legal 7 x 32771 BMP
# (upscaled 35x to the crop) takes 0.6 s in release and 14 s here, so 20 s was too close on a busy machine.
pids=()
for target in "${targets[@]}"; do
  mkdir -p build-fuzz/crashes build-fuzz/corpus/$target tests/fuzz/regressions/$target
  build-fuzz/tests/fuzz/fuzz_$target -max_total_time="$seconds" -timeout=60 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix=build-fuzz/crashes/$target- build-fuzz/corpus/$target tests/fuzz/regressions/$target \
    >build-fuzz/fuzz_$target.log 2>&1 &
  pids+=($!)
done
status=0
for i in "${!targets[@]}"; do
  target=${targets[$i]}
  if wait "${pids[$i]}"; then
    echo "fuzz_$target: no crash in ${seconds}s ($(grep -o 'stat::number_of_executed_units: [0-9]*' build-fuzz/fuzz_$target.log | grep -o '[0-9]*$') runs)"
  else
    status=1
    echo "fuzz_$target FAILED; log: build-fuzz/fuzz_$target.log"
    tail -40 build-fuzz/fuzz_$target.log
  fi
done
exit $status
