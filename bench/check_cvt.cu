/* The GPU's float16/bfloat16 conversions against tcuda's software ones
 * (src/base/half.h), over every float32 bit pattern and every 16-bit one;
 * the paired conversions (cvt.rn.{f16,bf16}x2.f32) and the sign-magnitude
 * order that src/random/cuda/random.cu uses for 16-bit fills, over every
 * pair.
 * The random kernels use the hardware conversions on the premise that they
 * give the same bits as the software (round to nearest even; NaNs handled
 * apart), which is what keeps CPU and GPU fills equal: this checks the
 * premise exhaustively. Built and run by scripts/gpu.sh perf with nvcc:
 *   nvcc -std=c++17 -O3 -arch=sm_90 -I src -I include bench/check_cvt.cu */
#include <cstdio>

#include "base/half.h"

__device__ unsigned long long bad[7];

__device__ uint32_t pack2(bool bf, float lo, float hi)
{
    uint32_t d;
    if (bf)
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
    else
        asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
    return d;
}

__device__ int key16(uint32_t h)
{
    int m = (int)(h & 0x7fffu);
    return (h & 0x8000u) ? -m : m;
}

__global__ void check32(uint32_t base)
{
    uint32_t x = base + blockIdx.x * blockDim.x + threadIdx.x;
    float f = __uint_as_float(x);
    if (tc__f32_to_f16(f) != tc__f32_to_f16_soft(f))
        atomicAdd(&bad[0], 1ull);
    if (tc__f32_to_bf16(f) != tc__f32_to_bf16_soft(f))
        atomicAdd(&bad[1], 1ull);
    /* pairs: (f, g) with g another pattern; NaNs take the kernels' other path */
    float g = __uint_as_float(x * 2654435761u);
    if (f == f && g == g) {
        uint32_t h = pack2(false, f, g), b = pack2(true, f, g);
        if ((h & 0xffff) != tc__f32_to_f16_soft(f) || (h >> 16) != tc__f32_to_f16_soft(g) ||
            (b & 0xffff) != tc__f32_to_bf16_soft(f) || (b >> 16) != tc__f32_to_bf16_soft(g))
            atomicAdd(&bad[3], 1ull);
    }
    /* order: x = two halves (h, m); key order == value order unless a NaN */
    uint32_t h = x & 0xffff, m = x >> 16;
    float hf = tc__f16_to_f32_soft((uint16_t)h), mf = tc__f16_to_f32_soft((uint16_t)m);
    if (hf == hf && mf == mf && (key16(h) > key16(m)) != (hf > mf))
        atomicAdd(&bad[5], 1ull);
    hf = tc__bf16_to_f32((uint16_t)h), mf = tc__bf16_to_f32((uint16_t)m);
    if (hf == hf && mf == mf && (key16(h) > key16(m)) != (hf > mf))
        atomicAdd(&bad[6], 1ull);
}

__global__ void check16()
{
    uint16_t h = (uint16_t)(blockIdx.x * blockDim.x + threadIdx.x);
    if (__float_as_uint(tc__f16_to_f32(h)) != __float_as_uint(tc__f16_to_f32_soft(h)))
        atomicAdd(&bad[2], 1ull);
}

int main()
{
    unsigned long long zero[7] = {0}, got[7];
    cudaMemcpyToSymbol(bad, zero, sizeof zero);
    for (uint64_t base = 0; base < (1ull << 32); base += 1ull << 30)
        check32<<<(1u << 30) / 256, 256>>>((uint32_t)base);
    check16<<<256, 256>>>();
    cudaError_t e = cudaMemcpyFromSymbol(got, bad, sizeof got);
    if (e != cudaSuccess) {
        printf("check_cvt: %s\n", cudaGetErrorString(e));
        return 1;
    }
    printf("check_cvt: mismatches over all inputs: f32->f16 %llu, f32->bf16 %llu, f16->f32 %llu, "
           "pairs %llu, order f16 %llu, bf16 %llu\n",
           got[0], got[1], got[2], got[3], got[5], got[6]);
    int any = 0;
    for (int i = 0; i < 7; i++)
        any |= got[i] != 0;
    return any;
}
