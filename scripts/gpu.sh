#!/usr/bin/env bash
# Everything a GPU machine checks, in one call: scripts/gpu.sh PRESET
#   quick     configure for sm_90 (RelWithDebInfo, warnings as errors), build,
#             every test once (the multi-GPU ones included)
#   sanitize  quick, then each GPU test (ctest's labels gpu and gpu_too) under
#             compute-sanitizer memcheck and racecheck, and the test suite under
#             tcuda's own stream sanitizer (ctest -L sanitizer)
#   features  quick, the graph and jit examples, snapshots and the allocator's
#             rounding against PyTorch (tests/torch/snapshot_keys.py,
#             alloc_conf_check.py), the stream sanitizer suite, and the graph,
#             jit and sanitizer benchmarks beside PyTorch
#   perf      the build, the random and allocator tests, bench/check_cvt.cu, the
#             GPU and CPU random fills bit for bit, and the benchmarks device,
#             random, alloc (three runs: the host's timing noise is large),
#             tensor and trace; `perf record` first records a fresh PyTorch
#             trace (bench/torch/record_trace.py), `perf nopairs` adds an A/B
#             build with TCUDA_RNG_PAIRS=0
#   full      all of these, every benchmark topic, the examples, DLPack
#             with PyTorch (tests/torch/dlpack_torch.py) and the memory checks
#   multi     for a machine with 2 or more GPUs: quick (the multi-GPU tests
#             and the fault matrix test_dist_faults included), the multi-GPU
#             tests under compute-sanitizer (not the fault matrix: its
#             aborted kernels are the point), the data_parallel and ddp
#             examples, comm against torch.cuda.comm (tests/torch/
#             comm_check.sh) and the comm benchmark; MULTI_STEPS picks
#             among "ctest cs examples oracle bench" (default: all, in order)
#             and "pair": the multi-GPU tests again with GPUs 0 and 1 alone
#             visible, so one call on a 4-GPU host checks 2 GPUs too
#   train     training's pieces: the build, their tests (TRAIN_TESTS: the
#             backward ops, optimizers, GradScaler, DDP buckets) once, their
#             PyTorch oracles (tests/torch/<name>.py, TRAIN_ORACLES),
#             examples/train_gpt2 against PyTorch (tests/torch/
#             train_gpt2_torch.py; again at GPT-2's vocabulary of 50257,
#             whose 16-bit logits come in padded rows; also --ddp 2 and 4
#             where the GPUs are; TRAIN_TORCH=0 skips it) and each test
#             under compute-sanitizer memcheck and racecheck; on 2 or more
#             GPUs test_ddp runs its ranks.
#             TRAIN_TESTS=none skips the tests (when another call ran them),
#             TRAIN_ORACLES=none the oracles,
#             TRAIN_CS_TESTS names the sanitized ones (none: no sanitizer).
#             TRAIN_BENCH=1 adds, at the end, the benchmarks bench/run.sh
#             nn_backward (each backward op beside PyTorch's), train (GPT-2
#             training tokens/s beside PyTorch) and train_ddp (the same on 2
#             and 4 GPUs beside PyTorch DDP), each bounded by BENCH_TIMEOUT
#             (540 s here); TRAIN_BENCH=only runs the build and those alone
#             (BENCHES picks among them: one call of 10 minutes may not hold all)
#             (the preset without them is already near 10 minutes)
# Logs go to $OUT/logs (OUT is set by the GPU machine; ./gpu-out when unset)
# and are packed into $OUT/logs.tgz, also LIMIT - 20 s after the start (LIMIT
# 590) in case the call's time limit stops the script; when OUT was given the
# loose folder is then removed, so that only a few files come back. The
# summary, one line a step, is printed last and kept in $OUT/summary.txt.
# Exits 1 when a step failed. PyTorch's side of a benchmark failing is no
# failure (its columns stay empty); a missing compute-sanitizer is, and stops
# the run there (sanitize, full); a machine without a GPU is too.
# Knobs: BUILD (build-gpu), BUILD_TYPE (RelWithDebInfo), BUILD_TARGETS (CMake
# targets to build instead of all: "example_train_gpt2" for the train
# benchmarks alone, a minute less of device time), CTEST_TIMEOUT (300 s a
# test), CS_JOBS (4 sanitizer runs at a time), CS_TIMEOUT (420 s each: racecheck
# of test_tensor_parity alone takes 290 s on an H100), CS_TESTS (instead of the
# labelled list), CS_QUICK (1: sanitized tests with a brief mode run it),
# BENCHES (topics of bench/run.sh instead of the preset's), BENCH_TIMEOUT (300 s
# a topic), EXAMPLES (full's examples), PROFILES (names for scripts/profile.sh,
# an argument after a colon: "gpt:float32 mlp").
set -u
cd "$(dirname "$0")/.." || exit 2
PRESET=${1:-}
shift
OPTS=" $* "
case $PRESET in
  quick | sanitize | features | perf | full | multi | train) ;;
  *) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2; exit 2 ;;
esac
export PATH=/usr/local/cuda/bin:$PATH
# NVLink multicast off for NCCL, PyTorch's symmetric memory and NVSHMEM.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
GIVEN_OUT=${OUT:-}
OUT=${OUT:-$PWD/gpu-out}
L=$OUT/logs
mkdir -p "$L"
B=${BUILD:-build-gpu}
T0=$SECONDS
SUMMARY=$L/summary.txt
: > "$SUMMARY"
failed=0

# ---- the summary ----------------------------------------------------------------------

# One step's line: name, pass | fail | skip, and a detail (a CTest summary
# line, a sanitizer's ERROR SUMMARY).
result() {
  local detail=${3:-}
  [ ${#detail} -gt 110 ] && detail="${detail:0:107}..."
  printf '%-32s %-4s  %s\n' "$1" "$2" "$detail" >> "$SUMMARY"
  [ "$2" = fail ] && failed=1
  return 0
}
pack() { tar czf "$OUT/logs.tgz" -C "$L" . 2> /dev/null; }
finish() {
  [ -n "${packer:-}" ] && kill "$packer" 2> /dev/null
  echo "==== gpu.sh $PRESET: $(cat "$L/gpu.txt" 2> /dev/null), $((SECONDS - T0)) s; logs in $OUT/logs.tgz"
  cat "$SUMMARY"
  cp "$SUMMARY" "$OUT/summary.txt"
  pack
  [ -n "$GIVEN_OUT" ] && rm -rf "$L"
  exit $failed
}
packer=
if [ -n "$GIVEN_OUT" ]; then
  { sleep $((${LIMIT:-590} - 20)) && pack; } > /dev/null 2>&1 &
  packer=$!
fi

# ---- the steps ------------------------------------------------------------------------

step_build() {
  local t=$SECONDS
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$L/gpu.txt" 2>&1 ||
    echo "no GPU seen" > "$L/gpu.txt"
  if nvidia-smi -L > /dev/null 2>&1; then
    result gpu pass "$(nvidia-smi -L | grep -c '^GPU') GPU(s): $(head -1 "$L/gpu.txt")"
  else
    result gpu fail "nvidia-smi sees no GPU: the GPU tests only skip"
  fi
  # shellcheck disable=SC2086 # BUILD_TARGETS: a list of target names
  if cmake -S . -B "$B" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" -DTCUDA_WERROR=ON \
    -DTCUDA_CUDA_ARCHS=90 -DTCUDA_SANITIZER_SUITE=ON > "$L/configure.log" 2>&1 &&
    cmake --build "$B" -j "$(nproc)" ${BUILD_TARGETS:+--target $BUILD_TARGETS} \
      > "$L/build.log" 2>&1; then
    result build pass "$B, $((SECONDS - t)) s"
  else
    result build fail "see build.log: $(grep -m1 -E 'error|Error' "$L/configure.log" "$L/build.log" | cut -c1-120)"
    tail -n 30 "$L/configure.log" "$L/build.log"
    finish
  fi
}

# ctest with a name, a log and its arguments: the summary line, the failures.
ctest_step() {
  local name=$1 log=$2
  shift 2
  (cd "$B" && ctest --output-on-failure -j 8 --timeout "${CTEST_TIMEOUT:-300}" "$@") > "$L/$log" 2>&1
  local rc=$? line
  line=$(grep -E 'tests passed|tests failed|No tests were found' "$L/$log" | tail -1)
  if [ $rc = 0 ]; then
    result "$name" pass "$line"
  else
    result "$name" fail "${line:-ctest rc=$rc}"
    while read -r t; do result "  $t" fail; done < <(grep -E \
      '^\s+[0-9]+ - .*\((Failed|Timeout|SEGFAULT|Subprocess|Exception|Not Run)' "$L/$log" | head -20)
  fi
}

step_ctest() {
  ctest_step ctest ctest.log -LE sanitizer
  # test_tensor_parity's counts: how many CPU/GPU comparisons ran
  local counts
  counts=$(awk '/ Testing: / { on = ($3 == "test_tensor_parity") } on' \
    "$B/Testing/Temporary/LastTest.log" 2> /dev/null | grep -E '^[0-9]+ passed, [0-9]+ failed|^skipped' | tail -1)
  case $counts in
    skipped*) result "  test_tensor_parity" skip "$counts" ;;
    *passed*) result "  test_tensor_parity" pass "$counts" ;;
  esac
}

# The GPU tests: those CTest labels gpu (they skip without one) and gpu_too
# (they run on the GPU where there is one); CS_TESTS names others instead.
gpu_tests() {
  if [ -n "${CS_TESTS:-}" ]; then
    echo "$CS_TESTS"
  else
    (cd "$B" && ctest -N -L '^gpu(_too)?$') | sed -n 's/^ *Test *#[0-9]*: //p'
  fi
}

step_compute_sanitizer() {
  if ! command -v compute-sanitizer > /dev/null; then
    result compute-sanitizer fail "not found (looked in PATH and /usr/local/cuda/bin): nothing sanitized"
    finish
  fi
  local tests
  tests=$(gpu_tests)
  san() { # tool test: one line, "tool test rc ERROR SUMMARY ..."
    # TC_TEST_DIST_TIMEOUT: process groups set up far slower under the tools
    # TC_TEST_SKIP_LARGE: test_nn_cuda's 2^31-element GEMM would take minutes;
    # CS_QUICK=1: tests that have a brief mode (TC_TEST_QUICK) run it
    TC_TEST_DIST_TIMEOUT=120 TC_TEST_SKIP_LARGE=1 TC_TEST_QUICK=${CS_QUICK:-0} \
      timeout "$CS_TIMEOUT" compute-sanitizer --tool "$1" \
      --report-api-errors no --target-processes all \
      --error-exitcode 9 "$B/tests/$2" > "$L/cs_$1_$2.log" 2>&1
    local rc=$? log="$L/cs_$1_$2.log" note=""
    # On an H200 racecheck reported a shared-memory race inside cuBLAS's
    # own nvjet_sm90_tst_128x64_64x8_1x2_h_bz_NNT (a float16 GEMM); excluding
    # nvjet (--kernel-name-exclude) crashed the tool. A run whose every race
    # lies in an nvjet kernel passes, and says so; the test itself must pass.
    if [ "$1" = racecheck ] && [ $rc = 9 ] && grep -q "passed, 0 failed" "$log" &&
      ! grep -A1 "Race reported between" "$log" | grep -E "access at" | grep -vq nvjet; then
      rc=0 note="(only in cuBLAS's nvjet kernels)"
    fi
    echo "$1 $2 $rc $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1) $note"
  }
  export -f san
  export B L CS_TIMEOUT=${CS_TIMEOUT:-420} CS_QUICK=${CS_QUICK:-0}
  # test_launch_blocking's kernels write out of bounds on purpose (its point
  # is how the fault is reported): memcheck reports each, racecheck runs it
  for t in $tests; do
    [ "$t" = test_launch_blocking ] || echo "memcheck $t"
    echo "racecheck $t"
  done |
    xargs -r -P "${CS_JOBS:-4}" -L 1 bash -c 'san $0 $1' > "$L/cs_summary.txt" 2>&1
  while read -r tool t rc rest; do
    case $rc in
      0) result "$tool $t" pass "$rest" ;;
      77) result "$tool $t" skip "exit 77 $rest" ;;
      124) result "$tool $t" fail "timed out after $CS_TIMEOUT s $rest" ;;
      *) result "$tool $t" fail "rc=$rc $rest" ;;
    esac
  done < <(sort "$L/cs_summary.txt")
}

step_suite() { ctest_step "stream sanitizer suite" suite.log -L sanitizer; }

step_examples() {
  local gpus
  gpus=$( (nvidia-smi -L 2> /dev/null || true) | grep -c '^GPU')
  for e in "$@"; do
    if [ "$e" = ddp ]; then # one process a GPU, through tools/tcuda-run: 2, and every GPU
      [ "$gpus" -ge 2 ] || { result "example ddp" skip "needs 2 GPUs, $gpus here"; continue; }
      if [ "$gpus" -gt 2 ]; then
        timeout 120 tools/tcuda-run -n "$gpus" -- "$B/examples/ddp" > "$L/example_ddp_$gpus.txt" 2>&1
        local rcn=$?
        if [ $rcn = 0 ]; then
          result "example ddp x$gpus" pass "$(grep -E "losses|match" "$L/example_ddp_$gpus.txt" | tail -1)"
        else
          result "example ddp x$gpus" fail "rc=$rcn $(tail -1 "$L/example_ddp_$gpus.txt")"
        fi
      fi
      timeout 120 tools/tcuda-run -n 2 -- "$B/examples/ddp" > "$L/example_ddp.txt" 2>&1
    else
      timeout 120 "$B/examples/$e" > "$L/example_$e.txt" 2>&1
    fi
    local rc=$? detail
    detail=$(grep -E "losses|speedup|match|did not" "$L/example_$e.txt" | tail -1)
    case $rc in
      0) result "example $e" pass "$detail" ;;
      77) result "example $e" skip "$(tail -1 "$L/example_$e.txt")" ;;
      *) result "example $e" fail "rc=$rc $detail" ;;
    esac
  done
}

# Memory against PyTorch: a snapshot's keys and settings
# (tests/torch/snapshot_keys.py) and the allocator's rounding under the same
# PYTORCH_CUDA_ALLOC_CONF (tests/torch/alloc_conf_check.py).
step_torch_memory() { step_oracles snapshot_keys alloc_conf_check; }

# tests/torch/<name>.py against this build's libtcuda.so, one line each.
# A python check's verdict from its exit status: 0 pass, 77 skip, else fail;
# its last line is the message.
judge() { # NAME LOG RC
  case $3 in
    0) result "$1" pass "$(tail -1 "$2")" ;;
    77) result "$1" skip "$(tail -1 "$2")" ;;
    *) result "$1" fail "rc=$3 $(tail -1 "$2")" ;;
  esac
}

step_oracles() {
  local s
  for s in "$@"; do
    timeout 300 python3 "tests/torch/$s.py" "$B/libtcuda.so" > "$L/$s.txt" 2>&1
    judge "$s" "$L/$s.txt" $?
  done
}

# examples/train_gpt2 against a plain PyTorch training run (20 steps, the
# same initial weights and batches), then with --ddp N on the GPUs there are.
step_train_torch() {
  local n gpus ddp=()
  gpus=$( (nvidia-smi -L 2> /dev/null || true) | grep -c '^GPU')
  for n in 1 2 4; do
    [ "$n" -le "$gpus" ] || break
    ddp=()
    [ "$n" -gt 1 ] && ddp=(--ddp "$n")
    timeout 400 python3 tests/torch/train_gpt2_torch.py --exe "$B/examples/train_gpt2" "${ddp[@]}" \
      > "$L/train_gpt2_torch_$n.txt" 2>&1
    judge "train_gpt2_torch x$n" "$L/train_gpt2_torch_$n.txt" $?
  done
  # GPT-2's vocabulary: bfloat16 logits of 50257 columns come in padded rows
  timeout 400 python3 tests/torch/train_gpt2_torch.py --exe "$B/examples/train_gpt2" \
    --vocab 50257 --batch 8 > "$L/train_gpt2_torch_v50257.txt" 2>&1
  judge "train_gpt2_torch vocab 50257" "$L/train_gpt2_torch_v50257.txt" $?
  # a run cut at step 5 and resumed from its checkpoint, against the whole run and PyTorch
  timeout 400 python3 tests/torch/train_gpt2_resume_torch.py --exe "$B/examples/train_gpt2" \
    > "$L/train_gpt2_resume_torch.txt" 2>&1
  judge train_gpt2_resume_torch "$L/train_gpt2_resume_torch.txt" $?
}

step_dlpack() {
  timeout 120 python3 tests/torch/dlpack_torch.py "$B/libtcuda.so" > "$L/dlpack.txt" 2>&1
  judge dlpack_torch "$L/dlpack.txt" $?
}

# bench/run.sh TOPIC [ARGS]: its table printed now, its status in the summary.
bench() {
  local topic=$1 log=$L/bench_$1.txt
  rm -f "$L/bench_$topic/table.txt"
  BUILD=$B OUT=$L timeout "${BENCH_TIMEOUT:-300}" bash bench/run.sh "$@" >> "$log" 2>&1
  local rc=$?
  # stopped by the timeout: the rows measured so far still make a table
  [ $rc = 124 ] && python3 bench/compare.py "$topic" "$L/bench_$topic" > "$L/bench_$topic/table.txt" 2> /dev/null
  echo "==== bench $*"
  cat "$L/bench_$topic/table.txt" 2> /dev/null || tail -5 "$log"
  if [ $rc = 0 ] && ! grep -q '^|' "$L/bench_$topic/table.txt" 2> /dev/null; then
    result "bench $*" skip "$(head -1 "$L/bench_$topic/table.txt" 2> /dev/null || tail -1 "$log")"
  elif [ $rc = 0 ]; then
    result "bench $*" pass
  else
    result "bench $*" fail "rc=$rc (see bench_$topic.txt)"
  fi
}

step_benches() {
  for b in ${BENCHES:-$*}; do
    if [ "$b" = alloc ]; then # three runs: the host's timing noise is large
      for _ in 1 2 3; do bench alloc; done
    else
      bench "$b"
    fi
  done
}

step_profiles() {
  for p in ${PROFILES:-}; do
    local n=${p%%:*} a=
    [ "$n" != "$p" ] && a=${p#*:}
    # shellcheck disable=SC2086 # no argument when a is empty
    OUT=$L BUILD=$B timeout 240 bash scripts/profile.sh "$n" $a > "$L/profile_$n$a.txt" 2>&1
    echo "==== profile $p"
    head -40 "$L/profile_$n$a.txt"
    result "profile $p" pass "see profile_$n$a.txt"
  done
}

# The layouts of Hopper's warpgroup products that the sm_90a kernels assume
# (bench/check_wgmma.cu): before the tests that run those kernels.
step_check_wgmma() {
  if nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -I src -I src/tensor/cuda/kernels \
    -I include bench/check_wgmma.cu -o "$B/check_wgmma" > "$L/check_wgmma.txt" 2>&1; then
    "$B/check_wgmma" >> "$L/check_wgmma.txt" 2>&1
    case $? in
      0) result check_wgmma pass "$(tail -1 "$L/check_wgmma.txt")" ;;
      77) result check_wgmma skip "$(tail -1 "$L/check_wgmma.txt")" ;;
      *) result check_wgmma fail "$(grep -m1 -v exact "$L/check_wgmma.txt")" ;;
    esac
  else
    result check_wgmma fail "build: $(grep -m1 error "$L/check_wgmma.txt")"
  fi
}

# perf's own checks: the hardware conversions (bench/check_cvt.cu) and the
# GPU's random fills bit for bit against the CPU's.
step_perf_checks() {
  if nvcc -std=c++17 -O3 -arch=sm_90 -I src -I include bench/check_cvt.cu -o "$B/check_cvt" \
    > "$L/check_cvt.txt" 2>&1 && "$B/check_cvt" >> "$L/check_cvt.txt" 2>&1; then
    result check_cvt pass "$(tail -1 "$L/check_cvt.txt")"
  else
    result check_cvt fail "$(tail -1 "$L/check_cvt.txt")"
  fi
  # the test allows 2 ulp for normal: any element that differs is printed
  "$B/tests/test_random_cuda" > "$L/random_bits.txt" 2>&1
  local rc=$? differ
  differ=$(grep -m1 -E "differ" "$L/random_bits.txt")
  case $rc in
    77) result "random bit for bit" skip "$(tail -1 "$L/random_bits.txt")" ;;
    0) result "random bit for bit" pass "${differ:-no element differs from the CPU}" ;;
    *) result "random bit for bit" fail "test_random_cuda rc=$rc $differ" ;;
  esac
  if [[ "$OPTS" == *" nopairs "* ]]; then # A/B: one Philox block per thread and step
    if cmake -S . -B "$B-v" -DTCUDA_CUDA_ARCHS=90 -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CUDA_FLAGS=-DTCUDA_RNG_PAIRS=0 > "$L/build-v.log" 2>&1 &&
      cmake --build "$B-v" -j "$(nproc)" --target bench_random test_random_cuda >> "$L/build-v.log" 2>&1; then
      "$B-v/tests/test_random_cuda" 2>&1 | grep -E "differ|FAIL|passed" | head -5 > "$L/nopairs.txt"
      "$B-v/bench/bench_random" 28 21 | grep -E "uniform|normal" >> "$L/nopairs.txt"
      echo "==== with TCUDA_RNG_PAIRS=0"
      cat "$L/nopairs.txt"
      result "TCUDA_RNG_PAIRS=0" pass "see nopairs.txt"
    else
      result "TCUDA_RNG_PAIRS=0" fail "build failed: see build-v.log"
    fi
  fi
  if [[ "$OPTS" == *" record "* ]]; then # a fresh PyTorch trace for bench/run.sh trace
    if PYTHONUNBUFFERED=1 python3 bench/torch/record_trace.py "$L/transformer.bin" 20 2> "$L/record.log" &&
      gzip -9 -f "$L/transformer.bin" && cp "$L/transformer.bin.gz" bench/traces/ &&
      cp "$L/transformer.bin.gz" "$OUT/"; then
      result "record trace" pass "bench/traces/transformer.bin.gz and $OUT/transformer.bin.gz"
    else
      result "record trace" fail "$(tail -1 "$L/record.log")"
    fi
  fi
}

EVERY_TOPIC="device random alloc tensor trace graph jit sanitizer history loss nn gemv kv_attention attention gpt comm"
# torch.cuda.comm against tc_comm on the same inputs (tests/torch/comm_check.sh),
# on every GPU (at most 4) and on two.
step_comm_oracle() {
  local gpus v
  gpus=$( (nvidia-smi -L 2> /dev/null || true) | grep -c '^GPU')
  for v in all 0,1; do
    [ "$v" = 0,1 ] && [ "$gpus" -le 2 ] && continue
    if [ "$v" = all ]; then
      timeout 300 tests/torch/comm_check.sh "$B/tests/comm_cases" > "$L/comm_check_$v.txt" 2>&1
    else
      CUDA_VISIBLE_DEVICES=$v timeout 300 tests/torch/comm_check.sh "$B/tests/comm_cases" \
        > "$L/comm_check_$v.txt" 2>&1
    fi
    judge "comm = torch.cuda.comm ($v)" "$L/comm_check_$v.txt" $?
  done
}

# (not test_nccl: its own process makes no CUDA call, which compute-sanitizer
# reports as an error; its children only load libraries)
MULTI_GPU_TESTS_ALONE="test_ipc_cuda test_multi_gpu"
MULTI_GPU_TESTS_NCCL="test_dist_cuda test_comm_cuda"
step_build
case $PRESET in
  quick)
    step_ctest
    step_benches ;;
  sanitize)
    step_ctest
    step_compute_sanitizer
    step_suite
    step_benches ;;
  features)
    step_ctest
    step_examples graph_mlp jit_ops
    step_torch_memory
    step_suite
    step_benches graph jit sanitizer ;;
  perf)
    ctest_step "ctest random, alloc, memory" ctest.log -LE sanitizer \
      -R 'test_random|test_tensor_random|test_alloc|test_memory'
    step_perf_checks
    step_benches device random alloc tensor trace ;;
  full)
    step_ctest
    step_compute_sanitizer
    step_suite
    # shellcheck disable=SC2086 # a list of names
    step_examples ${EXAMPLES:-hello_tensors hello_events tensor_demo graph_mlp jit_ops data_parallel ddp}
    step_dlpack
    step_torch_memory
    step_perf_checks
    # shellcheck disable=SC2086
    step_benches $EVERY_TOPIC ;;
  train)
    if [ "${TRAIN_BENCH:-0}" = only ]; then
      BENCH_TIMEOUT=${BENCH_TIMEOUT:-540} step_benches nn_backward train train_ddp
      finish
    fi
    step_check_wgmma
    TRAIN_TESTS=${TRAIN_TESTS:-test_nn_backward test_nn_layers_backward test_attention_backward \
      test_attention_backward_into test_attention_backward_cuda test_nn_cuda test_nn_layer_norm_fused test_nn_linear_gelu \
      test_optim test_amp test_optim_cuda test_ddp test_checkpoint test_checkpoint_cuda \
      test_train_gpt2_grad test_train_gpt2_cuda}
    TRAIN_ORACLES=${TRAIN_ORACLES:-nn_backward_torch nn_layers_torch attention_backward_torch \
      optim_torch checkpoint_torch}
    # shellcheck disable=SC2086 # lists of names; none: the tests ran already (multi's ctest)
    [ "$TRAIN_TESTS" != none ] &&
      ctest_step "ctest training" ctest.log -LE sanitizer -R "^($(echo $TRAIN_TESTS | tr ' ' '|'))\$"
    # shellcheck disable=SC2086 # none: no oracle
    [ "$TRAIN_ORACLES" != none ] && step_oracles $TRAIN_ORACLES
    [ "${TRAIN_TORCH:-1}" = 1 ] && step_train_torch
    # (not test_optim: CPU only, and compute-sanitizer fails a program that
    # makes no CUDA call; test_optim_cuda is its GPU half)
    [ "${TRAIN_CS_TESTS:-}" != none ] &&
      CS_TESTS=${TRAIN_CS_TESTS:-test_nn_backward test_nn_layers_backward test_attention_backward \
        test_attention_backward_cuda test_nn_layer_norm_fused test_nn_linear_gelu test_amp \
        test_optim_cuda test_ddp test_checkpoint_cuda} step_compute_sanitizer
    if [ "${TRAIN_BENCH:-0}" = 1 ]; then
      BENCH_TIMEOUT=${BENCH_TIMEOUT:-540} step_benches nn_backward train train_ddp
    fi ;;
  multi)
    for s in ${MULTI_STEPS:-ctest cs examples oracle bench}; do
      case $s in
        ctest) step_ctest ;;
        pair) CUDA_VISIBLE_DEVICES=0,1 ctest_step "ctest on GPUs 0,1" ctest_pair.log -LE sanitizer \
          -R '^(test_(comm|dist|ipc|ddp|nccl|multi_gpu|pinned_across|train_gpt2)[a-z_0-9]*|comm_torch)$' ;;
        # the NCCL tests one at a time: GPUs time-slice processes, and NCCL
        # kernels that must run together on several GPUs then crawl
        cs) if [ -n "${CS_TESTS:-}" ]; then # the tests named, and no others
              step_compute_sanitizer
            else
              CS_TESTS=$MULTI_GPU_TESTS_ALONE step_compute_sanitizer
              CS_TESTS=$MULTI_GPU_TESTS_NCCL CS_JOBS=1 step_compute_sanitizer
            fi ;;
        examples) step_examples data_parallel ddp ;;
        oracle) step_comm_oracle ;;
        bench) BENCH_TIMEOUT=${BENCH_TIMEOUT:-540} step_benches comm ;; # 3 runs a side
      esac
    done ;;
esac
step_profiles
finish
