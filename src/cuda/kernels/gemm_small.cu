/* Small float32 GEMMs without cuBLAS: C = alpha op(A) op(B) + beta C for
 * products of at most 2^22 multiply-adds, the size of a small MLP's layers
 * (a batch of 64 through 128 x 256 weights).
 *
 * cuBLAS's kernels for such sizes cover C with 32 x 32 (or 64 x 64 split-K)
 * tiles: 16 blocks for a 64 x 256 result, each walking all of k, and a
 * second kernel to reduce split-K partials. Here every block computes a
 * 16 x 16 tile with one result per thread, so the same result has 64 blocks,
 * and never more than one kernel. k goes in chunks of 128 through shared
 * memory (zero-padded at the edges); each thread issues all its loads of a
 * chunk at once, the next chunk's while the current one is used, and keeps
 * four partial sums to break the chain of dependent FMAs. float32 throughout, FMA
 * accumulation, no TF32, as tcuda's matmul promises; the order of the sums
 * differs from cuBLAS's, as cuBLAS's own algorithms differ among themselves.
 *
 * Layout as tc__nn_gemm: row-major, A stored [m, k] (or [k, m] when
 * trans_a) with rows lda apart, B [k, n] (or [n, k]), C [m, n] rows ldc
 * apart, batch entries stride_* apart (0: shared). */
#include <cstdint>

#include "nn_kernels.h"
#include "pdl.cuh"

namespace tcuda_kernels { /* graph_pdl.c knows tcuda's kernels by this name */
namespace {

typedef int64_t i64;

enum { TILE = 16, KC = 128, THREADS = TILE * TILE, PER = TILE * KC / THREADS };

/* Thread t's PER elements of the A and B tiles of the chunk at k0, into
 * registers (all loads issued before any is used). Consecutive threads read
 * consecutive addresses of each operand; outside the matrices, zeros. */
__device__ __forceinline__ void load_chunk(const float *__restrict__ a, const float *__restrict__ b,
                                           int m, int n, int k, i64 lda, i64 ldb, bool ta, bool tb,
                                           int row0, int col0, int k0, float *ra, float *rb)
{
#pragma unroll
    for (int r = 0; r < PER; r++) {
        int e = threadIdx.x + r * THREADS;
        int i = ta ? e % TILE : e / KC, ka = k0 + (ta ? e / TILE : e % KC);
        int j = tb ? e / KC : e % TILE, kb = k0 + (tb ? e % KC : e / TILE);
        int gi = row0 + i, gj = col0 + j;
        ra[r] = gi < m && ka < k ? (ta ? a[(i64)ka * lda + gi] : a[(i64)gi * lda + ka]) : 0.0f;
        rb[r] = gj < n && kb < k ? (tb ? b[(i64)gj * ldb + kb] : b[(i64)kb * ldb + gj]) : 0.0f;
    }
}

__global__ void __launch_bounds__(THREADS)
    gemm_small_kernel(const float *__restrict__ a, const float *__restrict__ b, float *c, int m,
                      int n, int k, i64 lda, i64 ldb, i64 ldc, i64 sa, i64 sb, i64 sc, bool ta,
                      bool tb, float alpha, float beta)
{
    tck_pdl_entry();
    __shared__ float as[TILE][KC + 1];
    __shared__ float bs[KC][TILE + 1];
    const int t = threadIdx.x, tx = t % TILE, ty = t / TILE;
    const int row0 = blockIdx.y * TILE, col0 = blockIdx.x * TILE;
    a += blockIdx.z * sa;
    b += blockIdx.z * sb;
    c += blockIdx.z * sc;
    float ra[PER], rb[PER], acc[4] = {0, 0, 0, 0};
    load_chunk(a, b, m, n, k, lda, ldb, ta, tb, row0, col0, 0, ra, rb);
    for (int k0 = 0; k0 < k; k0 += KC) {
#pragma unroll
        for (int r = 0; r < PER; r++) {
            int e = t + r * THREADS;
            as[ta ? e % TILE : e / KC][ta ? e / TILE : e % KC] = ra[r];
            bs[tb ? e % KC : e / TILE][tb ? e / KC : e % TILE] = rb[r];
        }
        __syncthreads();
        if (k0 + KC < k) /* the next chunk's loads fly while this one is used */
            load_chunk(a, b, m, n, k, lda, ldb, ta, tb, row0, col0, k0 + KC, ra, rb);
#pragma unroll
        for (int kk = 0; kk < KC; kk += 4) {
            acc[0] = fmaf(as[ty][kk], bs[kk][tx], acc[0]);
            acc[1] = fmaf(as[ty][kk + 1], bs[kk + 1][tx], acc[1]);
            acc[2] = fmaf(as[ty][kk + 2], bs[kk + 2][tx], acc[2]);
            acc[3] = fmaf(as[ty][kk + 3], bs[kk + 3][tx], acc[3]);
        }
        __syncthreads();
    }
    int gi = row0 + ty, gj = col0 + tx;
    if (gi < m && gj < n) {
        float v = alpha * ((acc[0] + acc[1]) + (acc[2] + acc[3]));
        float *p = c + (i64)gi * ldc + gj;
        *p = beta == 0.0f ? v : v + beta * *p; /* beta 0: C is not read */
    }
}

} // namespace
} // namespace tcuda_kernels
using namespace tcuda_kernels;

extern "C" bool tc__k_gemm_small_fits(const tc__nn_gemm *g)
{
    return g->dtype == TC_FLOAT32 && g->c_dtype == TC_FLOAT32 && g->m >= 8 && g->n >= 8 &&
           g->k >= 1 && g->k <= 1024 && g->batch >= 1 && g->batch <= 65535 &&
           g->batch * g->m * g->n * g->k <= ((i64)1 << 22);
}

extern "C" void tc__k_gemm_small(cudaStream_t stream, const tc__nn_gemm *g)
{
    dim3 grid((unsigned)((g->n + TILE - 1) / TILE), (unsigned)((g->m + TILE - 1) / TILE),
              (unsigned)g->batch);
    gemm_small_kernel<<<grid, THREADS, 0, stream>>>(
        (const float *)g->a, (const float *)g->b, (float *)g->c, (int)g->m, (int)g->n, (int)g->k,
        g->lda, g->ldb, g->ldc, g->stride_a, g->stride_b, g->stride_c, g->trans_a, g->trans_b,
        (float)g->alpha, (float)g->beta);
}
