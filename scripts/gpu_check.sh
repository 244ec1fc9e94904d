#!/usr/bin/env bash
# Everything a GPU machine should run, in one call: configure and build,
# make test, the GPU tests under compute-sanitizer (memcheck, racecheck),
# and the benchmarks. Logs go to $OUT (or ./gpu-logs); a short summary is
# printed last. Usage: scripts/gpu_check.sh [tests|bench|all]
# BENCHES picks benchmarks (default: "device random alloc tensor").
set -u
what=${1:-all}
FINAL=${OUT:-}
OUT=$(mktemp -d /tmp/gpu-logs.XXXX)
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1
cmake -S . -B build -DTCUDA_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$OUT/configure.log" 2>&1 &&
  cmake --build build -j 16 > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
summary=""
if [ "$what" != bench ]; then
  build/tests/test_tensor_parity > "$OUT/parity.log" 2>&1; echo "parity rc=$?"; tail -5 "$OUT/parity.log"
  # test_tensor_parity ran above (its counts are printed); ctest runs the rest
  (cd build && ctest --output-on-failure -j 4 --timeout 300 -E test_tensor_parity) > "$OUT/ctest.log" 2>&1
  summary+="ctest: $(grep -E 'tests passed|tests failed' "$OUT/ctest.log")"$'\n'
  summary+="$(grep -E 'Skipped|Failed|Timeout' "$OUT/ctest.log" | grep -E '^ *[0-9]+/' )"$'\n'
  for t in test_device test_stream test_event test_random_cuda test_memory_gpu test_tensor_parity \
           test_tensor_random_cuda; do
    for tool in memcheck racecheck; do
      [ -x build/tests/$t ] || continue
      timeout 240 compute-sanitizer --tool $tool --report-api-errors no --target-processes all --error-exitcode 9 \
        build/tests/$t > "$OUT/san_${tool}_$t.log" 2>&1
      summary+="sanitizer $tool $t: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/san_${tool}_$t.log" | tail -1)"$'\n'
    done
  done
fi
if [ "$what" != tests ]; then
  for b in ${BENCHES:-device random alloc tensor}; do
    case $b in
      device) build/bench/bench_device > "$OUT/bench_device.txt" 2>&1
              python3 bench/bench_device_torch.py >> "$OUT/bench_device.txt" 2>&1 ;;
      random) OUT=$OUT timeout 150 bash bench/run_random.sh build > "$OUT/bench_random.txt" 2>&1 ;;
      alloc) for r in 1 2 3; do # three runs: the host's timing noise is large
               echo "== run $r"; OUT=$OUT timeout 200 bash bench/run_alloc.sh
             done > "$OUT/bench_alloc.txt" 2>&1 ;;
      tensor) OUT=$OUT timeout 200 bash bench/run_tensor.sh > "$OUT/bench_tensor.txt" 2>&1 ;;
    esac
  done
fi
echo "==== $(cat "$OUT/gpu.txt")"
printf '%s' "$summary"
for f in bench_device bench_random bench_alloc bench_tensor; do
  [ -f "$OUT/$f.txt" ] && { echo "==== $f"; tail -25 "$OUT/$f.txt"; }
  [ "$f" = bench_alloc ] && [ -f "$OUT/$f.txt" ] && grep -E '^\| (tcuda|pytorch|async|host)' "$OUT/$f.txt"
done
[ -n "$FINAL" ] && tar czf "$FINAL/logs.tgz" -C "$OUT" .
