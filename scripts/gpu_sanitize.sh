#!/usr/bin/env bash
# One GPU call: build for sm_90, ctest, every GPU test program under
# compute-sanitizer memcheck and racecheck (four at a time), the test suite
# under tcuda's own stream sanitizer, and the graph benchmark. Logs go into
# $OUT/logs.tgz (one file); a summary is printed last. Exits 1 on any failure.
set -u
export PATH=/usr/local/cuda/bin:$PATH
L=$(mktemp -d /tmp/gpu-san.XXXX)
B=build-gpu
cmake -S . -B $B -DTCUDA_WERROR=ON -DTCUDA_CUDA_ARCHS=90 > "$L/configure.log" 2>&1 &&
  cmake --build $B -j 16 > "$L/build.log" 2>&1 || { tail -30 "$L/build.log"; exit 1; }
fail=0
(cd $B && ctest --output-on-failure -j 8 --timeout 300) > "$L/ctest.log" 2>&1 || fail=1
GPU_TESTS=${GPU_TESTS:-"test_device test_event test_graph test_jit_cuda test_memory_gpu
  test_memory_pluggable test_random_cuda test_sanitizer_cuda test_stream test_tensor_parity
  test_tensor_random_cuda test_tensor_bad_input"}
san() { # tool test
  timeout 300 compute-sanitizer --tool "$1" --report-api-errors no --target-processes all \
    --error-exitcode 9 "$B/tests/$2" > "$L/cs_$1_$2.log" 2>&1
  echo "$1 $2 rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$L/cs_$1_$2.log" | tail -1)"
}
export -f san; export B L
for t in $GPU_TESTS; do echo "memcheck $t"; echo "racecheck $t"; done |
  xargs -P 4 -L 1 bash -c 'san $0 $1' > "$L/cs_summary.txt" 2>&1
grep -v "rc=0 " "$L/cs_summary.txt" && fail=1
OUT=$L timeout 240 bash scripts/sanitizer_suite.sh $B > "$L/san_suite.txt" 2>&1 || fail=1
[ "${BENCH:-1}" = 1 ] && BUILD=$B OUT=$L timeout 100 bash bench/run.sh graph > "$L/bench_graph.txt" 2>&1
echo "==== ctest"; grep -E "tests passed|tests failed|\*\*\*Failed|Timeout" "$L/ctest.log"
grep -hE "^FAIL" "$L/ctest.log" | head -20
echo "==== compute-sanitizer"; sort "$L/cs_summary.txt"
echo "==== stream sanitizer suite"; grep -vE "passed +sanitizer reports: 0|skipped +sanitizer reports: 0" "$L/san_suite.txt" | tail -8
[ -f "$L/bench_graph.txt" ] && { echo "==== bench graph"; tail -12 "$L/bench_graph.txt"; }
[ -n "${OUT:-}" ] && tar czf "$OUT/logs.tgz" -C "$L" .
exit $fail
