#!/usr/bin/env bash
# Where the normal float32 fill's time goes (issue 4: normal f32 is below
# PyTorch's rate). Run on the GPU machine from the repository root after a
# CUDA build in ./build: times variants of the kernel (see
# normal_variants.cu) and prints the opcode histogram of tcuda's own
# normal float32 kernel. Not part of the build or of CI.
set -u
export PATH=/usr/local/cuda/bin:$PATH
nvcc -arch=sm_90 -O3 -Isrc -Iinclude -o /tmp/normal_variants bench/experiments/normal_variants.cu &&
  /tmp/normal_variants
echo "opcodes of rng_kernel<normal, float32>:"
cuobjdump -sass build/libtcuda.so 2>/dev/null |
  awk '/Function : .*rng_kernelILi1ELi8ELi0E/{f=1;next} /Function :/{f=0} f' |
  grep -oE '^\s+/\*[0-9a-f]{4}\*/\s+[A-Z0-9_.]+' | awk '{print $2}' | sed 's/\..*//' |
  sort | uniq -c | sort -rn | head -25 | tr '\n' ' '
echo
