#!/usr/bin/env bash
# A whole GPU call: build for sm_90, every test, the programs named in
# GPU_TESTS under compute-sanitizer (memcheck and racecheck, CS_JOBS at a
# time, 4, each stopped after CS_TIMEOUT s, 420: racecheck of
# test_tensor_parity alone takes 290 s on an H100), the test suite under
# the stream sanitizer (SUITE=0 skips it), DLPack with PyTorch (DLPACK=0 skips
# it), the examples in EXAMPLES, and the benchmarks named in BENCHES (each
# stopped after BENCH_TIMEOUT s, 150; the last TAIL lines of each shown).
# PROFILES names diagnosis scripts, scripts/NAME_profile.sh, each with an
# optional argument after a colon (gpt:float32).
# CTEST_TIMEOUT bounds each test (300 s). Logs go into $OUT/logs.tgz, packed
# also LIMIT - 20 s after the start (LIMIT 590) in case the call's limit
# stops the script. A summary is printed last. Exits 1 on any failure.
set -u
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
L=$(mktemp -d /tmp/gpu-final.XXXX)
# Should the call's time limit (LIMIT seconds) stop this script, the logs
# packed shortly before it still come back.
packer=
if [ -n "${OUT:-}" ]; then
  { sleep $((${LIMIT:-590} - 20)) && tar czf "$OUT/logs.tgz" --exclude=./gpt2 -C "$L" .; } > /dev/null 2>&1 &
  packer=$!
fi
B=build-gpu
cmake -S . -B $B -DTCUDA_WERROR=ON -DTCUDA_CUDA_ARCHS=90 > "$L/configure.log" 2>&1 &&
  cmake --build $B -j 16 > "$L/build.log" 2>&1 ||
  { tail -30 "$L/build.log"; [ -n "$packer" ] && kill $packer; exit 1; }
fail=0
(cd $B && ctest --output-on-failure -j 8 --timeout ${CTEST_TIMEOUT:-300}) > "$L/ctest.log" 2>&1 || fail=1
san() { # tool test
  timeout ${CS_TIMEOUT:-420} compute-sanitizer --tool "$1" --report-api-errors no --target-processes all \
    --error-exitcode 9 "$B/tests/$2" > "$L/cs_$1_$2.log" 2>&1
  echo "$1 $2 rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$L/cs_$1_$2.log" | tail -1)"
}
export -f san; export B L CS_TIMEOUT TCUDA_GPT=$PWD/$B/examples/gpt
for t in ${GPU_TESTS:-}; do echo "memcheck $t"; echo "racecheck $t"; done |
  xargs -r -P ${CS_JOBS:-4} -L 1 bash -c 'san $0 $1' > "$L/cs_summary.txt" 2>&1
grep -v "rc=0 " "$L/cs_summary.txt" && fail=1
[ "${SUITE:-1}" = 1 ] && { OUT=$L timeout 300 bash scripts/sanitizer_suite.sh $B > "$L/san_suite.txt" 2>&1 || fail=1; }
for e in ${EXAMPLES:-}; do
  timeout 120 $B/examples/$e > "$L/example_$e.txt" 2>&1; echo "example $e rc=$?" >> "$L/examples.txt"
done
# DLPack with PyTorch both ways
[ "${DLPACK:-1}" = 1 ] && { timeout 120 python3 scripts/dlpack_torch.py $B/libtcuda.so > "$L/dlpack.txt" 2>&1 || fail=1; }
for b in ${BENCHES:-}; do
  OUT=$L timeout ${BENCH_TIMEOUT:-150} bash bench/run_$b.sh $B > "$L/bench_$b.txt" 2>&1 || echo "bench $b rc=$?" >> "$L/examples.txt"
done
for p in ${PROFILES:-}; do
  n=${p%%:*}; a=; [ "$n" != "$p" ] && a=${p#*:}
  OUT=$L timeout 240 bash scripts/${n}_profile.sh $B $a > "$L/profile_$n$a.txt" 2>&1
done
echo "==== ctest"; grep -E "tests passed|tests failed|\*\*\*Failed|Timeout" "$L/ctest.log"
grep -hE "^FAIL" "$L/ctest.log" | head -20
echo "==== compute-sanitizer"; sort "$L/cs_summary.txt"
[ "${SUITE:-1}" = 1 ] && echo "==== stream sanitizer suite" && grep -vE "(passed|skipped) +sanitizer reports: 0" "$L/san_suite.txt" | tail -8
[ "${DLPACK:-1}" = 1 ] && echo "==== dlpack" && tail -3 "$L/dlpack.txt"
[ -f "$L/examples.txt" ] && { echo "==== examples"; cat "$L/examples.txt"; }
for b in ${BENCHES:-}; do echo "==== bench $b"; tail -${TAIL:-12} "$L/bench_$b.txt"; done
for p in ${PROFILES:-}; do
  n=${p%%:*}; a=; [ "$n" != "$p" ] && a=${p#*:}
  echo "==== profile $p"; head -${PTAIL:-40} "$L/profile_$n$a.txt"
done
[ -n "$packer" ] && kill $packer 2> /dev/null
[ -n "${OUT:-}" ] && tar czf "$OUT/logs.tgz" --exclude=./gpt2 -C "$L" .
exit $fail
