/* check_wgmma: the layouts wgmma.cuh assumes (the swizzled 128-byte tile,
 * its descriptors, the accumulator and register-A fragments), checked on
 * the GPU against a CPU product before kernels rely on them. One
 * warpgroup multiplies 64 x 64 x 64 matrices of small integers (every
 * product and sum exact in float32), in bfloat16 and float16:
 *   ss: D = A B^T, A and B K-major tiles in shared memory;
 *   rs: D = A B, A from registers, B an MN-major tile.
 * Prints one line per case and "check_wgmma: all N cases exact" last (or
 * the first differing element of each failing case); exits 1 on a
 * mismatch, 77 on a GPU without compute capability 9.0.
 * Build: nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -I src
 *        -I src/tensor/cuda/kernels -I include bench/check_wgmma.cu */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wgmma.cuh"

using namespace tcuda_kernels;

enum { N = 64 };

template <typename H> __device__ uint32_t pack2(const H *p)
{
    uint32_t r;
    memcpy(&r, p, 4);
    return r;
}

/* a and b: N x N row-major; d_ss = a b^T, d_rs = a b. */
template <typename H>
__global__ void __launch_bounds__(128) products(const H *a, const H *b, float *d_ss, float *d_rs)
{
    __shared__ __align__(1024) unsigned char sm[2 * N * N * 2];
    int tid = threadIdx.x, lane = tid % 32, w = tid / 32, g = lane / 4, t = lane % 4;
    for (int c = tid; c < N * 8; c += 128) {
        int r = c / 8, ch = c % 8;
        *reinterpret_cast<uint4 *>(sm + wg::sw128(r, ch)) = *reinterpret_cast<const uint4 *>(
            a + r * N + ch * 8);
        *reinterpret_cast<uint4 *>(sm + N * N * 2 + wg::sw128(r, ch)) =
            *reinterpret_cast<const uint4 *>(b + r * N + ch * 8);
    }
    wg::proxy_fence();
    __syncthreads();
    unsigned sa = (unsigned)__cvta_generic_to_shared(sm), sb = sa + N * N * 2;
    float d[8][4];
    wg::fence();
    for (int s = 0; s < N / 16; s++) /* K-major: step s at byte 32 s of each row */
        wg::ss<H, 0>(d, wg::desc(sa + 32 * s), wg::desc(sb + 32 * s), s > 0);
    wg::commit();
    wg::wait<0>();
    wg::hold(d);
    for (int n = 0; n < 8; n++)
        for (int h = 0; h < 2; h++) {
            int row = 16 * w + g + 8 * h, col = 8 * n + 2 * t;
            d_ss[row * N + col] = d[n][2 * h];
            d_ss[row * N + col + 1] = d[n][2 * h + 1];
        }
    float e[8][4];
    wg::fence();
    for (int s = 0; s < N / 16; s++) { /* MN-major B: step s at row 16 s */
        const H *r0 = a + (16 * w + g) * N + 16 * s + 2 * t, *r8 = r0 + 8 * N;
        uint32_t fa[4] = {pack2(r0), pack2(r8), pack2(r0 + 8), pack2(r8 + 8)};
        wg::rs<H, 1>(e, fa, wg::desc(sb + 2048 * s), s > 0);
    }
    wg::commit();
    wg::wait<0>();
    wg::hold(e);
    for (int n = 0; n < 8; n++)
        for (int h = 0; h < 2; h++) {
            int row = 16 * w + g + 8 * h, col = 8 * n + 2 * t;
            d_rs[row * N + col] = e[n][2 * h];
            d_rs[row * N + col + 1] = e[n][2 * h + 1];
        }
}

/* Compares got with want (N x N); prints the first difference. */
static bool same(const char *what, const float *got, const double *want)
{
    for (int i = 0; i < N * N; i++)
        if (got[i] != (float)want[i]) {
            printf("%s: element [%d][%d] is %g, expected %g\n", what, i / N, i % N, got[i],
                   want[i]);
            return false;
        }
    printf("%s: exact\n", what);
    return true;
}

template <typename H> static int run(const char *name)
{
    H ha[N * N], hb[N * N];
    double fa[N * N], fb[N * N], want_ss[N * N], want_rs[N * N];
    srand(7);
    for (int i = 0; i < N * N; i++) {
        fa[i] = (rand() % 9 - 4) / 4.0; /* quarters: exact in every 16-bit type */
        fb[i] = (rand() % 9 - 4) / 4.0;
        ha[i] = (H)(float)fa[i];
        hb[i] = (H)(float)fb[i];
    }
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            double s = 0, r = 0;
            for (int k = 0; k < N; k++) {
                s += fa[i * N + k] * fb[j * N + k];
                r += fa[i * N + k] * fb[k * N + j];
            }
            want_ss[i * N + j] = s;
            want_rs[i * N + j] = r;
        }
    H *da, *db;
    float *dss, *drs;
    cudaMalloc(&da, sizeof ha);
    cudaMalloc(&db, sizeof hb);
    cudaMalloc(&dss, N * N * 4);
    cudaMalloc(&drs, N * N * 4);
    cudaMemcpy(da, ha, sizeof ha, cudaMemcpyHostToDevice);
    cudaMemcpy(db, hb, sizeof hb, cudaMemcpyHostToDevice);
    products<H><<<1, 128>>>(da, db, dss, drs);
    static float got_ss[N * N], got_rs[N * N];
    cudaMemcpy(got_ss, dss, sizeof got_ss, cudaMemcpyDeviceToHost);
    cudaMemcpy(got_rs, drs, sizeof got_rs, cudaMemcpyDeviceToHost);
    cudaError_t err = cudaGetLastError();
    cudaFree(da), cudaFree(db), cudaFree(dss), cudaFree(drs);
    if (err != cudaSuccess) {
        printf("%s: %s\n", name, cudaGetErrorString(err));
        return 2;
    }
    char what[64];
    snprintf(what, sizeof what, "%s ss (A B^T, K-major tiles)", name);
    int bad = !same(what, got_ss, want_ss);
    snprintf(what, sizeof what, "%s rs (A in registers, B MN-major)", name);
    bad += !same(what, got_rs, want_rs);
    return bad;
}

int main(void)
{
    int major = 0, minor = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0) != cudaSuccess ||
        major != 9 || minor != 0) {
        printf("check_wgmma: needs a compute capability 9.0 GPU\n");
        return 77;
    }
    int bad = run<__nv_bfloat16>("bfloat16") + run<__half>("float16");
    if (bad)
        printf("check_wgmma: %d of 4 cases differ\n", bad);
    else
        printf("check_wgmma: all 4 cases exact\n");
    return bad ? 1 : 0;
}
