/* The GPU's float16/bfloat16 conversions against tcuda's software ones
 * (src/core/philox.h), over every float32 bit pattern and every 16-bit one.
 * The random kernels use the hardware conversions on the premise that they
 * give the same bits as the software (round to nearest even; NaNs handled
 * apart), which is what keeps CPU and GPU fills equal: this checks the
 * premise exhaustively. Built and run by bench/gpu_perf.sh with nvcc:
 *   nvcc -std=c++17 -O3 -arch=sm_90 -I src -I include bench/check_cvt.cu */
#include <cstdio>

#include "core/philox.h"

__device__ unsigned long long bad[3];

__global__ void check32(uint32_t base)
{
    uint32_t x = base + blockIdx.x * blockDim.x + threadIdx.x;
    float f = __uint_as_float(x);
    if (tc__f32_to_f16(f) != tc__f32_to_f16_soft(f))
        atomicAdd(&bad[0], 1ull);
    if (tc__f32_to_bf16(f) != tc__f32_to_bf16_soft(f))
        atomicAdd(&bad[1], 1ull);
}

__global__ void check16()
{
    uint16_t h = (uint16_t)(blockIdx.x * blockDim.x + threadIdx.x);
    if (__float_as_uint(tc__f16_to_f32(h)) != __float_as_uint(tc__f16_to_f32_soft(h)))
        atomicAdd(&bad[2], 1ull);
}

int main()
{
    unsigned long long zero[3] = {0, 0, 0}, got[3];
    cudaMemcpyToSymbol(bad, zero, sizeof zero);
    for (uint64_t base = 0; base < (1ull << 32); base += 1ull << 30)
        check32<<<(1u << 30) / 256, 256>>>((uint32_t)base);
    check16<<<256, 256>>>();
    cudaError_t e = cudaMemcpyFromSymbol(got, bad, sizeof got);
    if (e != cudaSuccess) {
        printf("check_cvt: %s\n", cudaGetErrorString(e));
        return 1;
    }
    printf("check_cvt: mismatches over all inputs: f32->f16 %llu, f32->bf16 %llu, f16->f32 %llu\n",
           got[0], got[1], got[2]);
    return got[0] || got[1] || got[2];
}
