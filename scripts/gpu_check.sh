#!/usr/bin/env bash
# Everything a GPU machine should run, in one call: configure and build,
# make test, the GPU tests under compute-sanitizer (memcheck, racecheck),
# and the benchmarks. Logs go to $OUT (or ./gpu-logs); a short summary is
# printed last. Usage: scripts/gpu_check.sh [tests|bench|all]
# BENCHES picks benchmarks (default: "device random alloc tensor").
# Exits 1 when anything failed: the build, a test, a sanitizer run (errors,
# or a timeout), or a tcuda benchmark; the summary's FAILED lines say which.
# (PyTorch's side of a comparison is not tcuda's failure: it only warns.)
set -u
failures=""
fail() { failures+="FAILED: $*"$'\n'; }
what=${1:-all}
FINAL=${OUT:-}
OUT=$(mktemp -d /tmp/gpu-logs.XXXX)
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1 ||
  fail "nvidia-smi: no GPU seen (GPU tests would only skip)"
cmake -S . -B build -DTCUDA_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$OUT/configure.log" 2>&1 &&
  cmake --build build -j 16 > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/configure.log" "$OUT/build.log" 2>/dev/null; echo "FAILED: build"; exit 1; }
summary=""
if [ "$what" != bench ]; then
  build/tests/test_tensor_parity > "$OUT/parity.log" 2>&1
  rc=$?; echo "parity rc=$rc"; tail -5 "$OUT/parity.log"
  [ $rc = 0 ] || fail "test_tensor_parity rc=$rc"
  # test_tensor_parity ran above (its counts are printed); ctest runs the rest
  (cd build && ctest --output-on-failure -j 4 --timeout 300 -E test_tensor_parity) > "$OUT/ctest.log" 2>&1
  rc=$?; [ $rc = 0 ] || fail "ctest rc=$rc (see ctest.log)"
  summary+="ctest: $(grep -E 'tests passed|tests failed' "$OUT/ctest.log")"$'\n'
  summary+="$(grep -E 'Skipped|Failed|Timeout' "$OUT/ctest.log" | grep -E '^ *[0-9]+/' )"$'\n'
  for t in test_device test_stream test_event test_random_cuda test_memory_gpu test_tensor_parity \
           test_tensor_random_cuda; do
    for tool in memcheck racecheck; do
      [ -x build/tests/$t ] || continue
      timeout 240 compute-sanitizer --tool $tool --report-api-errors no --target-processes all --error-exitcode 9 \
        build/tests/$t > "$OUT/san_${tool}_$t.log" 2>&1
      rc=$?
      summary+="sanitizer $tool $t: rc=$rc $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/san_${tool}_$t.log" | tail -1)"$'\n'
      [ $rc = 0 ] || fail "compute-sanitizer $tool $t rc=$rc"
    done
  done
fi
if [ "$what" != tests ]; then
  for b in ${BENCHES:-device random alloc tensor}; do
    case $b in
      device) build/bench/bench_device > "$OUT/bench_device.txt" 2>&1 || fail "bench_device rc=$?"
              python3 bench/torch/bench_device_torch.py >> "$OUT/bench_device.txt" 2>&1 ||
                summary+="warning: bench_device_torch.py (PyTorch) failed"$'\n' ;;
      random) BUILD=build OUT=$OUT timeout 150 bash bench/run.sh random > "$OUT/bench_random.txt" 2>&1 ||
                fail "bench random rc=$?" ;;
      alloc) for r in 1 2 3; do # three runs: the host's timing noise is large
               echo "== run $r"; BUILD=build OUT=$OUT timeout 200 bash bench/run.sh alloc || echo "run.sh alloc rc=$?"
             done > "$OUT/bench_alloc.txt" 2>&1
             # run.sh alloc goes on after a failed allocator and says so in its table
             grep -qE '^\| (tcuda|tcuda expandable|cudaMalloc|cudaMallocAsync): failed|run.sh alloc rc=' \
               "$OUT/bench_alloc.txt" && fail "bench alloc (see bench_alloc.txt)" ;;
      tensor) BUILD=build OUT=$OUT timeout 200 bash bench/run.sh tensor > "$OUT/bench_tensor.txt" 2>&1 ||
                fail "bench tensor rc=$?" ;;
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
if [ -n "$failures" ]; then
  printf '%s' "$failures"
  exit 1
fi
echo "gpu_check: everything passed"
