#!/usr/bin/env bash
# A quick GPU pass: build for sm_90 only and run every test once (no
# sanitizers, no benchmarks). Logs under $OUT. Exits non-zero on failure.
set -u
export PATH=/usr/local/cuda/bin:$PATH
L=${OUT:-/tmp}
cmake -S . -B build-gpu -DTCUDA_WERROR=ON -DTCUDA_CUDA_ARCHS=90 -DTCUDA_BUILD_BENCH=OFF > "$L/configure.log" 2>&1 &&
  cmake --build build-gpu -j 16 > "$L/build.log" 2>&1 || { tail -30 "$L/build.log"; exit 1; }
(cd build-gpu && ctest --output-on-failure -j 8 --timeout 300) > "$L/ctest.log" 2>&1
rc=$?
grep -E "tests passed|tests failed|Failed|Skipped|Timeout" "$L/ctest.log"
grep -E "^(FAIL|.*CHECK failed|.*: FAIL)" "$L/ctest.log" | head -40
exit $rc
