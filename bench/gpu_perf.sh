#!/usr/bin/env bash
# One lent-GPU session for the random and allocator performance work: build, the
# conversion check, the random and allocator tests, the random benchmark,
# (optionally) a fresh PyTorch trace, the trace replay and the synthetic
# allocator benchmark. Short summary on stdout, logs under $OUT.
#   bench/gpu_perf.sh [record] [alloc] [nopairs]
set -u
OUT=${OUT:-/tmp/gpu_perf}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH
ARGS="$*"
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
cmake -S . -B build -DTCUDA_CUDA_ARCHS=90 -DTCUDA_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=Release \
    > "$OUT/build.log" 2>&1 && cmake --build build -j16 >> "$OUT/build.log" 2>&1 \
    || { echo "BUILD FAILED"; tail -30 "$OUT/build.log"; exit 1; }
echo "built in $(( $(date +%s) - t0 )) s"
nvcc -std=c++17 -O3 -arch=sm_90 -I src -I include bench/check_cvt.cu -o build/check_cvt \
    && build/check_cvt
(cd build && ctest -R 'test_random|test_tensor_random|test_alloc|test_memory' \
    --output-on-failure > "$OUT/ctest.log" 2>&1); echo "ctest: $(grep -E 'tests passed|tests failed' "$OUT/ctest.log")"
grep -E "Failed|\*\*\*" "$OUT/ctest.log" | head -10
bench/run_random.sh build 28 21 > "$OUT/random.txt" 2>&1; grep -vE '^-' "$OUT/random.txt"
# bit-equality of GPU and CPU fills (the test allows 2 ulp for normal): any
# element that differs is printed by the test
build/tests/test_random_cuda 2>&1 | grep -E "differ|FAIL" | head -5
if [[ " $ARGS " == *" nopairs "* ]]; then # A/B: one Philox block per thread and step
    cmake -S . -B build-v -DTCUDA_CUDA_ARCHS=90 -DTCUDA_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_CUDA_FLAGS=-DTCUDA_RNG_PAIRS=0 > "$OUT/build-v.log" 2>&1 \
        && cmake --build build-v -j16 --target bench_random test_random_cuda >> "$OUT/build-v.log" 2>&1 \
        && { echo "with TCUDA_RNG_PAIRS=0:"; build-v/tests/test_random_cuda 2>&1 | grep -E "differ|FAIL|passed" | head -5
             build-v/bench/bench_random 28 21 | grep -E "uniform|normal"; }
fi
if [[ " $ARGS " == *" record "* ]]; then
    PYTHONUNBUFFERED=1 python3 bench/record_trace.py "$OUT/transformer.bin" 20 2> "$OUT/record.log" \
        || tail -5 "$OUT/record.log"
    gzip -9 -k "$OUT/transformer.bin" && mkdir -p bench/traces \
        && cp "$OUT/transformer.bin.gz" bench/traces/ && rm "$OUT/transformer.bin"
fi
OUT=$OUT bench/run_trace.sh build
if [[ " $ARGS " == *" alloc "* ]]; then
    OUT=$OUT bench/run_alloc.sh > "$OUT/alloc.txt" 2>&1; sed -n 1,9p "$OUT/alloc.txt"
fi
echo "total $(( $(date +%s) - t0 )) s"
