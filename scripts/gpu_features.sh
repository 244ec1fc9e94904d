#!/usr/bin/env bash
# One GPU call for the feature modules: build for sm_90, every test once, the
# examples, the test suite under the stream sanitizer, and the graph, jit and
# sanitizer benchmarks beside PyTorch. Logs under $OUT; a summary last.
set -u
export PATH=/usr/local/cuda/bin:$PATH
L=${OUT:-/tmp/gpu-features}; mkdir -p "$L"
B=build-gpu
cmake -S . -B $B -DTCUDA_WERROR=ON -DTCUDA_CUDA_ARCHS=90 > "$L/configure.log" 2>&1 &&
  cmake --build $B -j 16 > "$L/build.log" 2>&1 || { tail -30 "$L/build.log"; exit 1; }
fail=0
(cd $B && ctest --output-on-failure -j 8 --timeout 300) > "$L/ctest.log" 2>&1 || fail=1
{ $B/examples/graph_mlp; echo "rc=$?"; $B/examples/jit_ops; echo "rc=$?"; } > "$L/examples.log" 2>&1
OUT=$L timeout 240 bash scripts/sanitizer_suite.sh $B > "$L/san_suite.txt" 2>&1 || fail=1
for b in graph jit sanitizer; do
  BUILD=$B OUT=$L timeout 100 bash bench/run.sh $b > "$L/bench_$b.txt" 2>&1 || echo "bench $b failed rc=$?"
done
echo "==== ctest"; grep -E "tests passed|tests failed|\*\*\*Failed|Timeout" "$L/ctest.log"
grep -hE "^FAIL" "$L/ctest.log" | head -20
echo "==== examples"; grep -E "rc=|losses|speedup|match" "$L/examples.log" | head
echo "==== sanitizer suite"; tail -4 "$L/san_suite.txt"
for b in graph jit sanitizer; do echo "==== bench $b"; tail -14 "$L/bench_$b.txt"; done
exit $fail
