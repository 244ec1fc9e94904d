#!/usr/bin/env bash
# One benchmark topic on a GPU machine: tcuda's program, the raw CUDA floor
# where there is one, and the PyTorch twin from bench/torch/ on the same GPU in
# the same run, joined by bench/compare.py into one table. It builds nothing:
# configure and build with CUDA first (scripts/gpu.sh perf does it all).
#   BUILD=build OUT=/tmp/tcuda-bench bench/run.sh TOPIC [ARGS]
# BUILD is the build folder (default build); each program's output goes to
# $OUT/bench_TOPIC (OUT default /tmp/tcuda-bench), the table to stdout and to
# table.txt there. Topics and their arguments:
#   alloc                 the caching allocator replaying a synthetic trace, beside
#                         cudaMalloc, cudaMallocAsync and PyTorch's (C++ API); then
#                         the algorithm alone on the CPU (that trace, and the
#                         recorded one of `trace`) and the VMM driver calls
#   attention [repeats]   fused attention at GPT-2 small's prefill (51)
#   comm                  all_reduce, broadcast, all_gather, reduce_scatter busbw,
#                         64 KiB to 1 GiB, on 2 and 4 GPUs (those there are): tcuda
#                         (bench_comm dist, stream-ordered and tc_work_wait), raw
#                         NCCL (nccl_floor) and torch.distributed (torchrun
#                         bench_dist_torch.py), each under its launcher; then
#                         tc_comm broadcast/reduce_add against torch.cuda.comm.
#                         One table per op and world size; skips with fewer
#                         than 2 GPUs. The three sides take turns, COMM_RUNS
#                         times (3); each cell keeps each side's best run (at
#                         64 KiB to 1 MiB one run can be 40% off another).
#                         NCCL_NVLS_ENABLE=0 for all; each part bounded by
#                         COMM_PART_TIMEOUT s (300), its time printed.
#                         COMM_WORLDS ("2 4") picks the group sizes;
#                         COMM_QUICK=1 runs tcuda and the floor only.
#   device                host cost of device, stream and event calls
#   gpt                   examples/gpt checked against PyTorch, then tokens/s of
#                         prefill (batch 8 x 512) and decode (batch 1 and 8) beside
#                         PyTorch eager, its CUDA-graph decode and torch.compile
#                         (prefill in default mode, the decode step under
#                         "reduce-overhead", gpt-fast's way), for float32, TF32
#                         and bfloat16; torch.compile's compilation adds about a
#                         minute a dtype, cold (GPT_CHECK_ONLY=1 stops after the
#                         checks; GPT_VARIANTS picks among float32 float32_tf32
#                         bfloat16; GPT_TORCH_ARGS=--no-compile drops compile);
#                         then the decode step's roofline (gpt --roofline: each
#                         op's time and GB/s beside the copy floor; GPT_ROOFLINE=0
#                         leaves it out)
#   kv_attention [samples] decode's attention over a KV cache (one query, the
#                         new key and value written): GB/s beside the copy floor
#                         and PyTorch's index_copy_ + masked SDPA (21)
#   gemv [samples]        linear at 1, 8 and 16 rows (decode's matrix-vector
#                         products): GB/s beside the copy floor, cuBLAS and
#                         PyTorch's F.linear (21)
#   graph                 graph replay and examples/graph_mlp's step
#   history               memory history's cost per allocator operation
#   jit [log2 n] [reps]   jiterator: compile, cache, host and kernel (28 21)
#   loss                  cross_entropy behind queued GPU work
#   nn [repeats]          softmax and layer_norm GB/s (51)
#   nn_backward [repeats] each backward op of nn_backward.h at GPT-2 small's training
#                         shapes beside PyTorch's backward kernel: GPU us (median of
#                         repeats, 51) and host us behind queued work;
#                         NN_BACKWARD_COMPILE=1 adds torch.compile's times
#   random [log2 n] [reps]  random fills (28 21)
#   sanitizer             the stream sanitizer's host cost per op
#   tensor                element-wise, reduction, copy, matmul and host cost rows
#   train                 GPT-2 small training, seq 1024, bfloat16, the largest batch
#                         that fits: examples/train_gpt2 (eager and --graph) beside
#                         PyTorch eager, eager + CUDA graphs, torch.compile default
#                         and max-autotune (tokens/s, peak memory); TRAIN_TORCH_SIDE=0
#                         runs tcuda's rows alone (PyTorch's take some 7 minutes),
#                         TORCH_VARIANTS picks PyTorch's ("eager graphs compile
#                         compile_max_autotune"); max-autotune's compilation takes
#                         some 7 minutes cold: bench/torch/inductor_cache.sh carries
#                         Inductor's cache from one call to the next
#   train_ddp             the same on 1, 2 and 4 GPUs (those there are), each side at
#                         the largest batch a GPU it fits (or DDP_BATCH sequences):
#                         train_gpt2 under tools/tcuda-run (eager and --graph)
#                         beside PyTorch DDP under torchrun; each
#                         row's scaling against its own side's 1-GPU row
#   trace [file]          a recorded training trace (bench/traces/transformer.bin.gz)
#                         replayed with GPU work, for each allocator
# Exits 1 when a tcuda program (or a raw CUDA floor) fails, 2 on bad usage.
# PyTorch's side failing is no failure: its columns stay empty, its log says why.
set -u
usage() { sed -n '2,/^# Exits/p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 1 ] || usage
TOPIC=$1
shift
BUILD=${BUILD:-build}
[ -d "$BUILD" ] && BUILD=$(cd "$BUILD" && pwd)
cd "$(dirname "$0")/.." || exit 2
LOG=${OUT:-/tmp/tcuda-bench}/bench_$TOPIC
mkdir -p "$LOG"
TORCH_DIR=bench/torch
rc=0

# Every program a topic runs must be built; say which is not.
need() {
  for p in "$@"; do
    if [ ! -x "$BUILD/$p" ]; then
      echo "run.sh $TOPIC: missing $BUILD/$p: build first (cmake --build $BUILD, with CUDA)" >&2
      exit 1
    fi
  done
}
# A tcuda program (or a raw CUDA floor): its failure fails the run.
tcuda() { "$@" || { echo "run.sh $TOPIC: $* failed (rc=$?)" >&2; rc=1; }; }
# The PyTorch twin: its output to torch.txt, its errors to torch.err.
twin() { python3 "$TORCH_DIR/$1" "${@:2}" > "$LOG/torch.txt" 2> "$LOG/torch.err" ||
  echo "run.sh $TOPIC: PyTorch's side failed (see $LOG/torch.err)" >&2; }
compare() { python3 bench/compare.py "$TOPIC" "$LOG" "$@" | tee "$LOG/table.txt"; }
# One core for the allocator replays when there is a third: on a shared host
# an unpinned replay's ns/op moved by up to 40% between runs.
PIN=""
taskset -c 2 true 2> /dev/null && PIN="taskset -c 2"
# PyTorch's caching allocator through its C++ API: bench/torch/NAME.cpp
# compiled against the torch package into $LOG/NAME (once per log folder).
build_torch_cpp() {
  local name=$1 torch abi cuda=${CUDA_HOME:-/usr/local/cuda}
  [ "$LOG/$name" -nt "$TORCH_DIR/$name.cpp" ] && return 0
  torch=$(python3 -c 'import torch, os; print(os.path.dirname(torch.__file__))' 2>> "$LOG/torch_build.txt")
  abi=$(python3 -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))' 2>> "$LOG/torch_build.txt")
  [ -n "$torch" ] || return 1
  g++ -O2 -std=c++17 -D_GLIBCXX_USE_CXX11_ABI="${abi:-1}" -Ibench "$TORCH_DIR/$name.cpp" \
    -I"$torch/include" -I"$torch/include/torch/csrc/api/include" -I"$cuda/include" \
    -L"$torch/lib" -lc10_cuda -lc10 -L"$cuda/lib64" -lcudart -Wl,-rpath,"$torch/lib" \
    -Wl,-rpath,"$cuda/lib64" -o "$LOG/$name" 2>> "$LOG/torch_build.txt"
}
torch_gpu() { python3 -c "import torch; assert torch.cuda.is_available()" 2> /dev/null; }

# ---- the topics ----------------------------------------------------------------------

topic_alloc() {
  need bench/bench_alloc bench/bench_alloc_host bench/bench_vmm
  local b=$BUILD/bench/bench_alloc trace=$LOG/alloc_trace.bin
  tcuda "$b" gen "$trace" > "$LOG/trace.txt"
  {
    $PIN "$b" tcuda 2>> "$LOG/errors.txt" || { echo "| tcuda: failed, see $LOG/errors.txt"; rc=1; }
    TCUDA_ALLOC_CONF=expandable_segments:True $PIN "$b" tcuda 2>> "$LOG/errors.txt" ||
      { echo "| tcuda expandable: failed"; rc=1; }
    $PIN "$b" cudamalloc 2>> "$LOG/errors.txt" || { echo "| cudaMalloc: failed"; rc=1; }
    $PIN "$b" async 2>> "$LOG/errors.txt" || { echo "| cudaMallocAsync: failed"; rc=1; }
    if build_torch_cpp alloc_torch; then
      $PIN "$LOG/alloc_torch" "$trace" 2>> "$LOG/errors.txt" || echo "| pytorch: run failed, see $LOG/errors.txt"
    else
      echo "| pytorch: build failed: $(tail -3 "$LOG/torch_build.txt" | tr '\n' ' ')"
    fi
  } > "$LOG/rows.txt"
  compare
  echo
  echo "The algorithm alone on this CPU (bench_alloc_host: fake provider; provider calls cold | warm x3):"
  tcuda $PIN "$BUILD/bench/bench_alloc_host" ""
  tcuda $PIN "$BUILD/bench/bench_alloc_host" expandable_segments:True
  gunzip -c bench/traces/transformer.bin.gz > "$LOG/transformer.bin"
  tcuda $PIN "$BUILD/bench/bench_alloc_host" --trace "$LOG/transformer.bin" ""
  tcuda $PIN "$BUILD/bench/bench_alloc_host" --trace "$LOG/transformer.bin" expandable_segments:True
  tcuda $PIN "$BUILD/bench/bench_alloc_host" --loop
  echo
  echo "Virtual-memory driver calls, microseconds (bench_vmm):"
  tcuda "$BUILD/bench/bench_vmm"
}

topic_attention() {
  local reps=${1:-51}
  need bench/bench_attention
  tcuda "$BUILD/bench/bench_attention" "$reps" > "$LOG/tcuda.txt"
  twin bench_attention_torch.py "$reps"
  compare
}

# The GPUs a program here sees: nvidia-smi's list, or fewer where
# CUDA_VISIBLE_DEVICES names fewer.
gpu_count() {
  local n
  n=$( (nvidia-smi -L 2> /dev/null || true) | grep -c '^GPU')
  if [ -n "${CUDA_VISIBLE_DEVICES+x}" ]; then
    local v
    v=$(echo "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c .)
    [ "$v" -lt "$n" ] && n=$v
  fi
  echo "$n"
}

# The NCCL for tcuda and the raw floor: $TCUDA_NCCL_LIBRARY when set; else the
# one PyTorch loads, so that all three sides run the same NCCL and the ratios
# measure the callers, not two NCCL versions; else the system's, else the
# nvidia-nccl wheel's.
pick_nccl() {
  [ -n "${TCUDA_NCCL_LIBRARY:-}" ] && return
  local lib
  lib=$(python3 -c 'import torch
print(next((l.split()[-1] for l in open("/proc/self/maps") if "libnccl" in l), ""))' 2> /dev/null)
  if [ -n "$lib" ] && [ -f "$lib" ]; then
    export TCUDA_NCCL_LIBRARY="$lib"
  elif ! ldconfig -p 2> /dev/null | grep -q 'libnccl.so.2'; then
    lib=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2> /dev/null)
    [ -n "$lib" ] && [ -f "$lib" ] && export TCUDA_NCCL_LIBRARY="$lib"
  fi
}

# One part of the comm topic: `part SIDE LABEL NAME COMMAND...` runs COMMAND,
# bounded by COMM_PART_TIMEOUT seconds (default 300), its output to
# $LOG/NAME.txt and its errors to $LOG/NAME.err, and says how long it took.
# A failure is reported and the next part runs; on SIDE tcuda (tcuda or the
# raw floor) it fails the run, on SIDE torch it does not.
part() {
  local side=$1 label=$2 name=$3 t0 r ms
  shift 3
  t0=$(date +%s%N)
  timeout -k 10 "${COMM_PART_TIMEOUT:-300}" "$@" > "$LOG/$name.txt" 2> "$LOG/$name.err"
  r=$?
  ms=$((($(date +%s%N) - t0) / 1000000))
  if [ $r = 0 ]; then
    printf '%-18s %6.1f s\n' "$label" "${ms}e-3" | tee -a "$LOG/parts.txt"
  else
    [ $r = 124 ] && label="$label (timed out)"
    # the ranks' own errors reach tools/tcuda-run's output, not its errors
    printf '%-18s %6.1f s  FAILED rc=%d: %s\n' "$label" "${ms}e-3" "$r" \
      "$(cat "$LOG/$name.txt" "$LOG/$name.err" | grep -v -e '^\s*$' -e 'ROW ' -e '# ' | tail -2 |
        tr '\n' ' ')" | tee -a "$LOG/parts.txt" >&2
    if [ "$side" = tcuda ]; then rc=1; fi
  fi
}

topic_comm() {
  need bench/bench_comm bench/nccl_floor
  # NVLink multicast off, for NCCL, PyTorch's symmetric memory and NVSHMEM:
  # our GPU machines require it, for every program started here.
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  local gpus start torchrun=(torchrun)
  gpus=$(gpu_count)
  if [ "$gpus" -lt 2 ]; then
    echo "skipped: the comm benchmark needs 2 or more GPUs, this machine has $gpus"
    return
  fi
  command -v torchrun > /dev/null || torchrun=(python3 -m torch.distributed.run)
  pick_nccl
  echo "NCCL for tcuda and the floor: ${TCUDA_NCCL_LIBRARY:-libnccl.so.2 from the system}" |
    tee "$LOG/nccl.txt"
  # what an earlier run left (with more GPUs, say) would join this run's table
  rm -f "$LOG"/{tcuda,nccl,torch}_{dist2,dist4,comm}*.{txt,err} "$LOG/parts.txt"
  start=$(date +%s)
  local r runs=${COMM_RUNS:-3}
  for r in $(seq "$runs"); do
    for w in ${COMM_WORLDS:-2 4}; do
      [ "$w" -le "$gpus" ] || break
      part tcuda "tcuda dist x$w #$r" "tcuda_dist${w}_$r" tools/tcuda-run -n "$w" \
        --master-port $((29700 + w)) -- "$BUILD/bench/bench_comm" dist
      rm -rf "$LOG/ncclid" && mkdir -p "$LOG/ncclid" # a fresh folder: no stale id
      part tcuda "nccl floor x$w #$r" "nccl_dist${w}_$r" tools/tcuda-run -n "$w" \
        --master-port $((29710 + w)) -- "$BUILD/bench/nccl_floor" "$LOG/ncclid"
      [ "${COMM_QUICK:-0}" = 1 ] ||
        part torch "torch dist x$w #$r" "torch_dist${w}_$r" "${torchrun[@]}" --nproc_per_node "$w" \
          --master_port $((29720 + w)) "$TORCH_DIR/bench_dist_torch.py"
    done
    [ "${COMM_QUICK:-0}" = 1 ] && continue
    part tcuda "tcuda comm #$r" "tcuda_comm_$r" "$BUILD/bench/bench_comm" comm
    part torch "torch comm #$r" "torch_comm_$r" python3 "$TORCH_DIR/bench_comm_torch.py"
  done
  echo "all parts: $(($(date +%s) - start)) s" | tee -a "$LOG/parts.txt"
  echo
  compare
}

topic_device() {
  need bench/bench_device
  tcuda "$BUILD/bench/bench_device" > "$LOG/tcuda.txt"
  twin bench_device_torch.py
  compare
}

topic_gpt() {
  need examples/gpt
  local gpt=$BUILD/examples/gpt model
  model=$(mktemp -d /tmp/tcuda-gpt2.XXXX) # about 500 MB: not kept with the logs
  GPT_MODEL=$model
  trap 'rm -rf "$GPT_MODEL"' EXIT
  if ! python3 "$TORCH_DIR/gpt_torch.py" write "$model" > "$LOG/write.txt" 2>&1; then
    echo "run.sh gpt: PyTorch could not write the model and reference:"
    tail -3 "$LOG/write.txt"
    rc=1
    return
  fi
  : > "$LOG/check.txt"
  for how in "cuda" "cuda --graph" "cpu"; do
    # shellcheck disable=SC2086 # $how is the device and an optional --graph
    "$gpt" "$model/model.safetensors" --device $how --check "$model/ref.safetensors" \
      > "$LOG/check_${how// /_}.txt" 2>&1
    local r=$?
    [ $r = 0 ] || rc=1
    echo "check, $how (rc=$r): $(grep -m1 '^check' "$LOG/check_${how// /_}.txt" || tail -1 "$LOG/check_${how// /_}.txt")" >> "$LOG/check.txt"
  done
  : > "$LOG/rows.txt"
  if [ "${GPT_CHECK_ONLY:-0}" != 1 ]; then
    # float32, float32 with TF32 on both sides (set_float32_matmul_precision("high")), bfloat16;
    # gpt_torch.py prints "torch ROW N" (eager, its CUDA graph) and "compile ROW N" (torch.compile)
    # GPT_VARIANTS picks among them, GPT_TORCH_ARGS goes to gpt_torch.py (--no-compile: no
    # torch.compile rows, minutes less)
    for v in ${GPT_VARIANTS:-float32 float32_tf32 bfloat16}; do
      local dt=${v%_tf32} tf=
      [ "$v" != "$dt" ] && tf=--tf32
      # shellcheck disable=SC2086 # $tf is empty or one flag, GPT_TORCH_ARGS a list
      python3 "$TORCH_DIR/gpt_torch.py" bench "$model" --dtype $dt $tf ${GPT_TORCH_ARGS:-} \
        >> "$LOG/rows.txt" 2>> "$LOG/torch.err" ||
        echo "run.sh gpt: PyTorch's $v bench failed (see $LOG/torch.err)" >&2
      # shellcheck disable=SC2086
      tcuda "$gpt" "$model/model.safetensors" --device cuda --dtype $dt $tf --bench > "$LOG/bench_$v.txt" 2>&1
      grep '^tcuda' "$LOG/bench_$v.txt" >> "$LOG/rows.txt"
      # shellcheck disable=SC2086
      tcuda "$gpt" "$model/model.safetensors" --device cuda --dtype $dt $tf --graph --bench \
        > "$LOG/bench_graph_$v.txt" 2>&1
      grep '^tcuda decode' "$LOG/bench_graph_$v.txt" >> "$LOG/rows.txt"
    done
  fi
  compare
  # the decode step's roofline (gpt --roofline): each op's time and bandwidth beside the copy
  # floor, once per dtype; GPT_ROOFLINE=0 leaves it out
  if [ "${GPT_CHECK_ONLY:-0}" != 1 ] && [ "${GPT_ROOFLINE:-1}" = 1 ]; then
    for dt in float32 bfloat16; do
      tcuda "$gpt" "$model/model.safetensors" --device cuda --dtype "$dt" --roofline \
        > "$LOG/roofline_$dt.txt" 2>&1
      sed -n '/^roofline/,/^| step/p' "$LOG/roofline_$dt.txt" | tee -a "$LOG/table.txt"
    done
  fi
}

topic_graph() {
  need bench/bench_graph examples/graph_mlp
  tcuda "$BUILD/bench/bench_graph" > "$LOG/tcuda.txt"
  tcuda "$BUILD/examples/graph_mlp" > "$LOG/mlp.txt"
  twin bench_graph_torch.py
  compare
  # where the step's time goes, op by op (diagnosis, not in the table)
  if [ -x "$BUILD/bench/bench_graph_ops" ] && "$BUILD/bench/bench_graph_ops" > "$LOG/ops.txt" 2>&1 &&
    [ "$(wc -l < "$LOG/ops.txt")" -gt 1 ]; then
    echo "op by op in a graph (bench_graph_ops):"
    tail -n +2 "$LOG/ops.txt"
  fi
}

topic_history() {
  need bench/bench_history
  tcuda "$BUILD/bench/bench_history" gen "$LOG/trace.bin"
  tcuda $PIN "$BUILD/bench/bench_history" > "$LOG/tcuda.txt" 2> "$LOG/tcuda.err"
  : > "$LOG/torch.txt"
  if torch_gpu; then
    # a Python loop: its own cost is in every row, so it runs pinned too, bounded
    timeout 45 $PIN python3 "$TORCH_DIR/bench_history_torch.py" "$LOG/trace.bin" 2 \
      >> "$LOG/torch.txt" 2> "$LOG/torch.err" || echo "torch,error,0" >> "$LOG/torch.txt"
  else
    echo "torch: not importable or no GPU: PyTorch rows skipped" > "$LOG/torch.err"
  fi
  compare
}

topic_jit() {
  local lg=${1:-28} reps=${2:-21}
  need bench/bench_jit
  tcuda "$BUILD/bench/bench_jit" "$lg" "$reps" > "$LOG/tcuda.txt"
  python3 "$TORCH_DIR/bench_jit_torch.py" "$lg" "$reps" > "$LOG/torch.txt" 2> "$LOG/torch.err" ||
    echo "torch_unavailable,see $LOG/torch.err" > "$LOG/torch.txt"
  compare
}

topic_loss() {
  need bench/bench_loss
  tcuda "$BUILD/bench/bench_loss" > "$LOG/tcuda.txt"
  twin bench_loss_torch.py
  compare
}

topic_nn() {
  local reps=${1:-51}
  need bench/bench_nn
  tcuda "$BUILD/bench/bench_nn" "$reps" > "$LOG/tcuda.txt"
  twin bench_nn_torch.py "$LOG/tcuda.txt" "$reps"
  compare
}

topic_gemv() {
  local samples=${1:-21}
  need bench/bench_gemv
  tcuda "$BUILD/bench/bench_gemv" "$samples" > "$LOG/tcuda.txt"
  twin bench_gemv_torch.py "$LOG/tcuda.txt" "$samples"
  compare
}

topic_kv_attention() {
  local samples=${1:-21}
  need bench/bench_kv_attention
  tcuda "$BUILD/bench/bench_kv_attention" "$samples" > "$LOG/tcuda.txt"
  twin bench_kv_attention_torch.py "$LOG/tcuda.txt" "$samples"
  compare
}

topic_nn_backward() {
  local reps=${1:-51}
  need bench/bench_nn_backward
  tcuda "$BUILD/bench/bench_nn_backward" "$reps" > "$LOG/tcuda.txt"
  twin bench_nn_backward_torch.py "$reps" "${NN_BACKWARD_COMPILE:-0}"
  compare
}

topic_random() {
  local lg=${1:-28} reps=${2:-21}
  need bench/bench_random
  tcuda "$BUILD/bench/bench_random" --csv "$lg" "$reps" > "$LOG/tcuda.txt"
  twin bench_random_torch.py "$lg" "$reps"
  compare "$lg" "$reps"
}

topic_sanitizer() {
  need bench/bench_sanitizer
  tcuda env -u TCUDA_SANITIZER "$BUILD/bench/bench_sanitizer" 20000 7 > "$LOG/tcuda.txt"
  : > "$LOG/torch.txt"
  if torch_gpu; then # PyTorch's sanitizer is slow: fewer iterations
    env -u TORCH_CUDA_SANITIZER timeout 60 python3 "$TORCH_DIR/bench_sanitizer_torch.py" 5000 5 \
      >> "$LOG/torch.txt" 2> "$LOG/torch_off.err" || echo "torch_off,error" >> "$LOG/torch.txt"
    TORCH_CUDA_SANITIZER=1 timeout 60 python3 "$TORCH_DIR/bench_sanitizer_torch.py" 300 3 \
      >> "$LOG/torch.txt" 2> "$LOG/torch_on.err" || echo "torch_on,error" >> "$LOG/torch.txt"
  fi
  compare
}

topic_tensor() {
  need bench/bench_tensor
  tcuda "$BUILD/bench/bench_tensor" > "$LOG/tcuda.txt"
  twin bench_tensor_torch.py
  compare
}

topic_trace() {
  local from=${1:-bench/traces/transformer.bin.gz} trace=$LOG/trace.bin b=$BUILD/bench/bench_trace
  need bench/bench_trace
  case "$from" in *.gz) gunzip -c "$from" > "$trace" ;; *) cp "$from" "$trace" ;; esac
  {
    $PIN "$b" tcuda "$trace" 2>> "$LOG/errors.txt" || { echo "| tcuda: failed"; rc=1; }
    TCUDA_ALLOC_CONF=expandable_segments:True $PIN "$b" tcuda "$trace" 2>> "$LOG/errors.txt" ||
      { echo "| tcuda expandable: failed"; rc=1; }
    if build_torch_cpp trace_torch; then
      $PIN "$LOG/trace_torch" "$trace" 2>> "$LOG/errors.txt" || echo "| pytorch: failed"
      PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True $PIN "$LOG/trace_torch" "$trace" \
        2>> "$LOG/errors.txt" || echo "| pytorch expandable: failed"
    else
      echo "| pytorch: not built: $(tail -2 "$LOG/torch_build.txt" 2> /dev/null | tr '\n' ' ')"
    fi
    $PIN "$b" async "$trace" 2>> "$LOG/errors.txt" || { echo "| cudaMallocAsync: failed"; rc=1; }
    $PIN "$b" cudamalloc "$trace" 2>> "$LOG/errors.txt" || { echo "| cudaMalloc: failed"; rc=1; }
  } > "$LOG/rows.txt"
  compare
  [ -s "$LOG/errors.txt" ] && { echo "errors:"; tail -5 "$LOG/errors.txt"; }
}

topic_train() {
  need examples/train_gpt2
  local exe=$BUILD/examples/train_gpt2
  : > "$LOG/rows.txt"
  tcuda python3 "$TORCH_DIR/train_gpt2_bench.py" tcuda "$exe" "$LOG" >> "$LOG/rows.txt"
  tcuda python3 "$TORCH_DIR/train_gpt2_bench.py" tcuda "$exe" "$LOG" --graph >> "$LOG/rows.txt"
  [ "${TRAIN_TORCH_SIDE:-1}" = 1 ] &&
    { python3 "$TORCH_DIR/train_gpt2_bench.py" torch "$LOG" >> "$LOG/rows.txt" 2> "$LOG/torch.err" ||
      echo "run.sh train: PyTorch's side failed (see $LOG/torch.err)" >&2; }
  compare
}

topic_train_ddp() {
  need examples/train_gpt2
  local exe=$BUILD/examples/train_gpt2 b gpus n tb=""
  local py=$TORCH_DIR/train_gpt2_bench.py
  gpus=$(gpu_count)
  : > "$LOG/rows.txt"
  # a GPU's micro-batch: the largest each side fits (as topic train takes), or DDP_BATCH
  if [ -n "${DDP_BATCH:-}" ]; then
    b=$DDP_BATCH
  else
    local fit
    fit=$(python3 "$py" tcuda_fit "$exe" "$LOG")
    grep '^#' <<< "$fit" >> "$LOG/rows.txt"
    b=$(tail -n 1 <<< "$fit")
    if [ "${b:-0}" = 0 ]; then
      echo "run.sh train_ddp: train_gpt2 fits no batch" >&2
      rc=1
      return
    fi
  fi
  # no NVLink multicast on either side (tools/tcuda-run sets the first too)
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  for n in 1 2 4; do
    [ "$n" -gt "$gpus" ] && break
    tcuda python3 "$py" tcuda_ddp "$exe" "$LOG" "$n" "$b" >> "$LOG/rows.txt"
    tcuda python3 "$py" tcuda_ddp "$exe" "$LOG" "$n" "$b" --graph >> "$LOG/rows.txt"
    # PyTorch: tcuda's batch or the next smaller that runs, found on one GPU
    local try=${tb:-$(python3 "$py" batches_from "$b")} ran=""
    for t in $try; do
      if torchrun --nproc-per-node "$n" --master-port 29511 "$py" torch_ddp "$LOG" "$t" \
        >> "$LOG/rows.txt" 2>> "$LOG/torch.err"; then
        tb=$t ran=1
        break
      fi
      echo "# torch ddp$n: batch $t failed (see torch.err)" >> "$LOG/rows.txt"
    done
    [ -n "$ran" ] || echo "run.sh train_ddp: PyTorch's DDP x$n failed (see $LOG/torch.err)" >&2
  done
  compare
}

case $TOPIC in
  alloc | attention | comm | device | gemv | gpt | kv_attention | graph | history | jit | loss | nn | nn_backward | random | \
    sanitizer | tensor | trace | train | train_ddp) ;;
  *) usage ;;
esac
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2> /dev/null | head -1 > "$LOG/gpu.txt"
"topic_$TOPIC" "$@"
echo "logs in $LOG"
exit $rc
