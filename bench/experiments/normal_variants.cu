// Experiment, not part of the build (bench/experiments/run_normal_variants.sh runs it):
// times the normal float32 fill with parts of its work swapped for cheap stand-ins, so the
// cost of Philox, the square root, the logarithm and sin/cos can be read off. The stand-ins
// give wrong numbers; only the times mean something.
#include <cstdio>
#include <cuda_runtime.h>
#include "core/philox.h"

template <int V>
__global__ void __launch_bounds__(256) k(float4 *out, uint64_t nb, uint64_t seed, uint64_t off)
{
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t b = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; b < nb; b += stride) {
        uint32_t w[4];
        tc__philox_block(seed, off + b, 0, 0, w);
        float r[4];
        if (V == 0) { // philox only
            for (int l = 0; l < 4; l++) r[l] = __uint_as_float(w[l]);
        } else {
            for (int l = 0; l < 4; l += 2) {
                float lnu;
                if (V == 3 || V == 4) lnu = __logf((float)((w[l] >> 8) + 1) * 5.9604644775390625e-08f);
                else lnu = tc__ln_u24((w[l] >> 8) + 1);
                float rad = (V == 2 || V == 4) ? __fmul_rn(-2.0f, lnu) : __fsqrt_rn(__fmul_rn(-2.0f, lnu));
                float c, s;
                if (V == 5) { c = rad; s = lnu; }
                else tc__sincos_u24(w[l + 1] >> 8, &c, &s);
                r[l] = __fmaf_rn(rad, c, 0.f);
                r[l + 1] = __fmaf_rn(rad, s, 0.f);
            }
        }
        out[b] = make_float4(r[0], r[1], r[2], r[3]);
    }
}

/* The current normal transform, two Philox blocks per loop iteration. */
__global__ void __launch_bounds__(256) k2(float4 *out, uint64_t nb, uint64_t seed, uint64_t off)
{
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t b = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; b < nb; b += 2 * stride) {
        uint64_t bb[2] = {b, b + stride};
        float r[2][4];
#pragma unroll
        for (int u = 0; u < 2; u++) {
            uint32_t w[4];
            tc__philox_block(seed, off + bb[u], 0, 0, w);
            for (int l = 0; l < 4; l += 2) {
                float rad = __fsqrt_rn(__fmul_rn(-2.0f, tc__ln_u24((w[l] >> 8) + 1)));
                float c, s;
                tc__sincos_u24(w[l + 1] >> 8, &c, &s);
                r[u][l] = __fmaf_rn(rad, c, 0.f);
                r[u][l + 1] = __fmaf_rn(rad, s, 0.f);
            }
        }
        out[b] = make_float4(r[0][0], r[0][1], r[0][2], r[0][3]);
        if (b + stride < nb)
            out[b + stride] = make_float4(r[1][0], r[1][1], r[1][2], r[1][3]);
    }
}

template <int V> float run(float4 *o, uint64_t nb, int sms)
{
    int per = 0;
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, k<V>, 256, 0);
    unsigned grid = sms * per;
    cudaEvent_t a, b;
    cudaEventCreate(&a), cudaEventCreate(&b);
    for (int i = 0; i < 3; i++) k<V><<<grid, 256>>>(o, nb, 1, i * nb);
    float best = 1e9;
    for (int rep = 0; rep < 9; rep++) {
        cudaEventRecord(a);
        k<V><<<grid, 256>>>(o, nb, 1, rep * nb);
        cudaEventRecord(b);
        cudaEventSynchronize(b);
        float ms;
        cudaEventElapsedTime(&ms, a, b);
        best = ms < best ? ms : best;
    }
    return best;
}

float run2(float4 *o, uint64_t nb, int sms)
{
    int per = 0;
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, k2, 256, 0);
    cudaEvent_t a, b;
    cudaEventCreate(&a), cudaEventCreate(&b);
    float best = 1e9;
    for (int rep = 0; rep < 12; rep++) {
        cudaEventRecord(a);
        k2<<<sms * per, 256>>>(o, nb, 1, rep * nb);
        cudaEventRecord(b);
        cudaEventSynchronize(b);
        float ms;
        cudaEventElapsedTime(&ms, a, b);
        best = rep >= 3 && ms < best ? ms : best;
    }
    return best;
}

int main()
{
    uint64_t n = 1ull << 28, nb = n / 4;
    float4 *o;
    cudaMalloc(&o, n * 4);
    int sms;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    const char *names[] = {"philox+store only", "current normal", "no sqrt", "fast log",
                           "fast log, no sqrt", "no sincos", "current, 2 blocks/iter"};
    float t[7] = {run<0>(o, nb, sms), run<1>(o, nb, sms), run<2>(o, nb, sms), run<3>(o, nb, sms),
                  run<4>(o, nb, sms), run<5>(o, nb, sms), run2(o, nb, sms)};
    for (int i = 0; i < 7; i++) printf("%-24s %.3f ms\n", names[i], t[i]);
    return 0;
}
