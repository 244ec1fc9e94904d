#!/usr/bin/env bash
# A recorded training trace replayed with GPU work queued (a 20 us kernel
# every 50 allocations), for tcuda (default and expandable segments),
# PyTorch's caching allocator, cudaMallocAsync and cudaMalloc: one table.
#   bench/run_trace.sh [build] [trace]
# Builds bench_trace into ./build (or the folder given) when it is missing;
# the PyTorch rows need the torch package (trace_torch.cpp is compiled here). The default
# trace is bench/traces/transformer.bin.gz, written by bench/torch/record_trace.py.
# Logs go to $OUT/trace_bench if OUT is set.
set -u
B=${1:-build}
TR=${2:-bench/traces/transformer.bin.gz}
LOG=${OUT:-/tmp}/trace_bench
mkdir -p "$LOG"
TRACE=$LOG/trace.bin
case "$TR" in *.gz) gunzip -c "$TR" > "$TRACE" ;; *) cp "$TR" "$TRACE" ;; esac
if [ ! -x "$B/bench/bench_trace" ]; then # build what is missing
    { cmake -S . -B "$B" -DTCUDA_BUILD_TESTS=OFF && cmake --build "$B" -j --target bench_trace; } \
        > "$LOG/build.txt" 2>&1 || { echo "build failed: see $LOG/build.txt"; exit 1; }
fi
PIN=""
command -v taskset >/dev/null && PIN="taskset -c 2"
python3 - "$TRACE" <<'PY'
import struct, sys
d = open(sys.argv[1], "rb").read()
n = struct.unpack_from("<Q", d)[0]
cur = peak = allocs = 0; sz = {}
for i in range(n):
    sid, a, s = struct.unpack_from("<IIQ", d, 8 + 16 * i)
    if a: sz[sid] = s; cur += s; allocs += 1; peak = max(peak, cur)
    else: cur -= sz[sid]
print("trace: %d operations, %d allocations (a 20 us kernel every 50: %.1f ms of GPU work"
      " a pass), peak live %.1f MiB" % (n, allocs, allocs // 50 * 0.02, peak / 2**20))
PY
TORCH=$(python3 -c 'import torch, os; print(os.path.dirname(torch.__file__))' 2>/dev/null)
ABI=$(python3 -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))' 2>/dev/null)
CUDA=${CUDA_HOME:-/usr/local/cuda}
if [ -n "$TORCH" ]; then
    g++ -O2 -std=c++17 -D_GLIBCXX_USE_CXX11_ABI="${ABI:-1}" -Ibench bench/torch/trace_torch.cpp \
        -I"$TORCH/include" -I"$TORCH/include/torch/csrc/api/include" -I"$CUDA/include" \
        -L"$TORCH/lib" -lc10_cuda -lc10 -L"$CUDA/lib64" -lcudart -Wl,-rpath,"$TORCH/lib" \
        -Wl,-rpath,"$CUDA/lib64" -o "$LOG/trace_torch" 2>"$LOG/torch_build.txt" || TORCH=""
fi
echo "host / end-to-end ms per pass (pass 1 cold; warm = median of passes 3-6)"
echo "| allocator                    | pass 1 cold     | pass 2          | warm            | resv/live | host waits"
echo "|------------------------------|-----------------|-----------------|-----------------|---------|"
$PIN "$B/bench/bench_trace" tcuda "$TRACE" 2>>"$LOG/errors.txt" || echo "| tcuda: failed"
TCUDA_ALLOC_CONF=expandable_segments:True $PIN "$B/bench/bench_trace" tcuda "$TRACE" \
    2>>"$LOG/errors.txt" || echo "| tcuda expandable: failed"
if [ -n "$TORCH" ]; then
    $PIN "$LOG/trace_torch" "$TRACE" 2>>"$LOG/errors.txt" || echo "| pytorch: failed"
    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True $PIN "$LOG/trace_torch" "$TRACE" \
        2>>"$LOG/errors.txt" || echo "| pytorch expandable: failed"
else
    echo "| pytorch: not built: $(tail -2 "$LOG/torch_build.txt" 2>/dev/null | tr '\n' ' ')"
fi
$PIN "$B/bench/bench_trace" async "$TRACE" 2>>"$LOG/errors.txt" || echo "| cudaMallocAsync: failed"
$PIN "$B/bench/bench_trace" cudamalloc "$TRACE" 2>>"$LOG/errors.txt" || echo "| cudaMalloc: failed"
[ -s "$LOG/errors.txt" ] && { echo "errors:"; tail -5 "$LOG/errors.txt"; }
exit 0
