/* Small float32 GEMMs without cuBLAS: C = alpha op(A) op(B) + beta C for
 * products of at most 2^22 multiply-adds, the size of a small MLP's layers
 * (a batch of 64 through 128 x 256 weights).
 *
 * cuBLAS's kernels for such sizes cover C with 32 x 32 (or 64 x 64 split-K)
 * tiles: 16 blocks for a 64 x 256 result, each walking all of k, and a
 * second kernel to reduce split-K partials. Here every block computes a
 * 16 x 16 tile, so the same result has 64 blocks, and never more than one
 * kernel. k goes in chunks of 128 through shared memory (zero-padded at the
 * edges); each thread issues all its loads of a chunk at once, the next
 * chunk's while the current one is used. Four groups of 64 threads take a
 * quarter of each chunk's k each, every thread four results of a row, and
 * the groups' partial sums are added at the end in a fixed order: shared
 * memory loads, not FMAs, bound this kernel, and one A value and one B quad
 * per k make four FMAs. float32 throughout, FMA
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

/* The threads split each chunk's k among GROUPS groups; in a group, each
 * thread computes one row of four results (16 rows x 4 column quads), from
 * one broadcast load of A and one 16-byte load of B per k. */
enum { GROUPS = THREADS / 64, KG = KC / GROUPS, BPAD = TILE + 4 };

__global__ void __launch_bounds__(THREADS)
    gemm_small_kernel(const float *__restrict__ a, const float *__restrict__ b, float *c, int m,
                      int n, int k, i64 lda, i64 ldb, i64 ldc, i64 sa, i64 sb, i64 sc, bool ta,
                      bool tb, float alpha, float beta)
{
    tck_pdl_entry();
    __shared__ float as[TILE][KC + 1];
    __shared__ __align__(16) float bs[KC][BPAD]; /* rows of 80 bytes: 16-byte aligned quads */
    __shared__ float part[GROUPS][TILE][TILE];
    const int t = threadIdx.x, g = t / 64, ty = t % 64 / 4, tx = t % 4;
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
#pragma unroll 8
        for (int kk = g * KG; kk < (g + 1) * KG; kk++) {
            float av = as[ty][kk];
            float4 bv = *reinterpret_cast<const float4 *>(&bs[kk][4 * tx]);
            acc[0] = fmaf(av, bv.x, acc[0]);
            acc[1] = fmaf(av, bv.y, acc[1]);
            acc[2] = fmaf(av, bv.z, acc[2]);
            acc[3] = fmaf(av, bv.w, acc[3]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int q = 0; q < 4; q++)
        part[g][ty][4 * tx + q] = acc[q];
    __syncthreads();
    int i = t / TILE, j = t % TILE, gi = row0 + i, gj = col0 + j;
    if (gi < m && gj < n) {
        float v = 0;
#pragma unroll
        for (int q = 0; q < GROUPS; q++)
            v += part[q][i][j];
        v *= alpha;
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
