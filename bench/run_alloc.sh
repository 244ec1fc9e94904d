#!/usr/bin/env bash
# Allocator benchmark, side by side: tcuda (with and without expandable
# segments), raw cudaMalloc/cudaFree, cudaMallocAsync (default pool, release
# threshold at maximum) and PyTorch's caching allocator, on one trace.
# Run from the repo root after a CUDA build in ./build. Logs go to $OUT if set.
set -u
B=./build/bench/bench_alloc
# Every allocator runs pinned to one core when taskset is there: on a shared
# host an unpinned replay's ns/op moved by up to 40% between runs.
PIN=""
command -v taskset >/dev/null && PIN="taskset -c 2"
LOG=${OUT:-/tmp}/alloc_bench
mkdir -p "$LOG"
TRACE=$LOG/alloc_trace.bin
$B gen "$TRACE" | tee "$LOG/trace.txt"
echo "| allocator                                | cold ns/op | warm ns/op | reserved/live |"
echo "|------------------------------------------|-----------:|-----------:|-------:|"
$PIN $B tcuda 2>>"$LOG/errors.txt" || echo "| tcuda: failed, see $LOG/errors.txt"
TCUDA_ALLOC_CONF=expandable_segments:True $PIN $B tcuda 2>>"$LOG/errors.txt" || echo "| tcuda expandable: failed"
$PIN $B cudamalloc 2>>"$LOG/errors.txt" || echo "| cudaMalloc: failed"
$PIN $B async 2>>"$LOG/errors.txt" || echo "| cudaMallocAsync: failed"
# PyTorch's allocator through its C++ API, compiled here against the torch package.
TORCH=$(python3 -c 'import torch, os; print(os.path.dirname(torch.__file__))' 2>>"$LOG/torch_build.txt")
ABI=$(python3 -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))' 2>>"$LOG/torch_build.txt")
CUDA=${CUDA_HOME:-/usr/local/cuda}
# Built once per log folder (gpu_check.sh runs this script three times).
if [ -n "$TORCH" ] && { [ "$LOG/alloc_torch" -nt bench/torch/alloc_torch.cpp ] || g++ -O2 -std=c++17 -D_GLIBCXX_USE_CXX11_ABI="${ABI:-1}" bench/alloc_torch.cpp \
    -I"$TORCH/include" -I"$TORCH/include/torch/csrc/api/include" -I"$CUDA/include" \
    -L"$TORCH/lib" -lc10_cuda -lc10 -L"$CUDA/lib64" -lcudart -Wl,-rpath,"$TORCH/lib" \
    -Wl,-rpath,"$CUDA/lib64" -o "$LOG/alloc_torch" 2>>"$LOG/torch_build.txt"; }; then
    $PIN "$LOG/alloc_torch" "$TRACE" 2>>"$LOG/errors.txt" || echo "| pytorch: run failed, see $LOG/errors.txt"
else
    echo "| pytorch: build failed: $(tail -3 "$LOG/torch_build.txt" | tr '\n' ' ')"
fi
echo
echo "The algorithm alone on this CPU (bench_alloc_host: fake provider; provider calls cold | warm x3):"
$PIN ./build/bench/bench_alloc_host ""
$PIN ./build/bench/bench_alloc_host expandable_segments:True
$PIN ./build/bench/bench_alloc_host --loop
echo
echo "Virtual-memory driver calls, microseconds (bench_vmm):"
./build/bench/bench_vmm
