/* Small float32 GEMMs without cuBLAS: C = alpha op(A) op(B) + beta C for
 * products of at most 2^22 multiply-adds, the size of a small MLP's layers
 * (a batch of 64 through 128 x 256 weights).
 *
 * At these sizes a GEMM's time is latency: the loads of its operands, one
 * pass through shared memory, and as short a chain of FMAs per thread as
 * the block can make. cuBLAS's kernels for such sizes cover C with 32 x 32
 * (or 64 x 64 split-K) tiles: 16 blocks for a 64 x 256 result, each walking
 * all of k, and a second kernel to reduce split-K partials. Here a block of
 * 256 threads computes a TM x TN tile (16 x 16, 8 x 16, 8 x 8 or 4 x 8,
 * chosen per shape so that the grid comes near the GPU's size), never more
 * than one kernel. k goes through shared memory in chunks of KC (zeros
 * past the matrices' edges); each thread computes four results of a row
 * from every G-th k of the chunk (G = 256 / (TM TN / 4) groups, interleaved
 * so that the groups read different banks), and the groups' sums are added
 * by shuffles in a fixed order. float32 throughout, FMA accumulation, no TF32, as tcuda's
 * matmul promises; the order of the sums differs from cuBLAS's, as cuBLAS's
 * own algorithms differ among themselves.
 *
 * Layout as tc__nn_gemm: row-major, A stored [m, k] (or [k, m] when
 * trans_a) with rows lda apart, B [k, n] (or [n, k]), C [m, n] rows ldc
 * apart, batch entries stride_* apart (0: shared). */
#include <cstdint>

#include "nn_kernels.h"
#include "runtime/cuda/pdl.cuh"

namespace tcuda_kernels { /* graph_pdl.c knows tcuda's kernels by this name */
namespace {

typedef int64_t i64;

enum { THREADS = 256 };

/* The kernel's parameters: one GEMM of tc__nn_gemm, in 32-bit sizes. */
struct Small {
    const float *a, *b;
    float *c;
    int m, n, k;
    i64 lda, ldb, ldc, sa, sb, sc;
    bool ta, tb;
    float alpha, beta;
};

template <int TM, int TN, int KC>
__global__ void __launch_bounds__(THREADS) gemm_small_kernel(Small p)
{
    /* Q quads of results, G groups of threads over k per quad; PA and PB
     * elements of A's and B's tiles loaded by each thread; B's rows padded
     * to keep 16-byte quads aligned and apart in banks */
    constexpr int Q = TM * TN / 4, G = THREADS / Q, PA = TM * KC / THREADS, PB = KC * TN / THREADS,
                  BP = TN + 4;
    static_assert(G >= 4 && G <= 32 && PA >= 1 && PB >= 1, "tile");
    tck_pdl_entry();
    __shared__ float as[TM][KC + 1];
    __shared__ __align__(16) float bs[KC][BP];
    const int t = threadIdx.x, q = t / G, g = t % G, i = q / (TN / 4), jq = q % (TN / 4);
    const int row0 = blockIdx.y * TM, col0 = blockIdx.x * TN;
    const float *a = p.a + blockIdx.z * p.sa, *b = p.b + blockIdx.z * p.sb;
    float acc[4] = {0, 0, 0, 0};
    for (int k0 = 0; k0 < p.k; k0 += KC) {
        const int kc = min(KC, p.k - k0);
        float ra[PA], rb[PB]; /* every load of the chunk issued before any is stored */
#pragma unroll
        for (int r = 0; r < PA; r++) {
            int e = t + r * THREADS, ii = p.ta ? e % TM : e / KC, kk = p.ta ? e / TM : e % KC;
            int gi = row0 + ii;
            ra[r] = gi < p.m && kk < kc
                        ? a[p.ta ? (i64)(k0 + kk) * p.lda + gi : (i64)gi * p.lda + k0 + kk]
                        : 0.0f;
        }
#pragma unroll
        for (int r = 0; r < PB; r++) {
            int e = t + r * THREADS, jj = p.tb ? e / KC : e % TN, kk = p.tb ? e % KC : e / TN;
            int gj = col0 + jj;
            rb[r] = gj < p.n && kk < kc
                        ? b[p.tb ? (i64)gj * p.ldb + k0 + kk : (i64)(k0 + kk) * p.ldb + gj]
                        : 0.0f;
        }
        if (k0 > 0)
            __syncthreads(); /* the last chunk is read by all */
#pragma unroll
        for (int r = 0; r < PA; r++) {
            int e = t + r * THREADS;
            as[p.ta ? e % TM : e / KC][p.ta ? e / TM : e % KC] = ra[r];
        }
#pragma unroll
        for (int r = 0; r < PB; r++) {
            int e = t + r * THREADS;
            bs[p.tb ? e % KC : e / TN][p.tb ? e / KC : e % TN] = rb[r];
        }
        __syncthreads();
#pragma unroll 4
        for (int kk = g; kk < kc; kk += G) {
            float av = as[i][kk];
            float4 bv = *reinterpret_cast<const float4 *>(&bs[kk][4 * jq]);
            acc[0] = fmaf(av, bv.x, acc[0]);
            acc[1] = fmaf(av, bv.y, acc[1]);
            acc[2] = fmaf(av, bv.z, acc[2]);
            acc[3] = fmaf(av, bv.w, acc[3]);
        }
    }
    /* a quad's G groups are G neighbouring lanes of one warp */
#pragma unroll
    for (int o = G / 2; o > 0; o /= 2)
#pragma unroll
        for (int r = 0; r < 4; r++)
            acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], o);
    const int gi = row0 + i, gj = col0 + 4 * jq + g; /* lane g of the quad writes result g */
    if (g < 4 && gi < p.m && gj < p.n) {
        float v = (g == 0 ? acc[0] : g == 1 ? acc[1] : g == 2 ? acc[2] : acc[3]) * p.alpha;
        float *c = p.c + blockIdx.z * p.sc + (i64)gi * p.ldc + gj;
        *c = p.beta == 0.0f ? v : v + p.beta * *c; /* beta 0: C is not read */
    }
}

template <int TM, int TN, int KC> void launch(cudaStream_t stream, const tc__nn_gemm *g)
{
    dim3 grid((unsigned)((g->n + TN - 1) / TN), (unsigned)((g->m + TM - 1) / TM),
              (unsigned)g->batch);
    Small p = {(const float *)g->a,
               (const float *)g->b,
               (float *)g->c,
               (int)g->m,
               (int)g->n,
               (int)g->k,
               g->lda,
               g->ldb,
               g->ldc,
               g->stride_a,
               g->stride_b,
               g->stride_c,
               g->trans_a,
               g->trans_b,
               (float)g->alpha,
               (float)g->beta};
    gemm_small_kernel<TM, TN, KC><<<grid, THREADS, 0, stream>>>(p);
}

/* Blocks of a TM x TN tiling of g's results. */
i64 blocks(const tc__nn_gemm *g, int tm, int tn)
{
    return g->batch * ((g->m + tm - 1) / tm) * ((g->n + tn - 1) / tn);
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

/* The largest tile whose grid has about an H100's 132 blocks; failing that,
 * 8 x 8, or for k past 128 the 4 x 8 tile, whose 32 groups per quad keep
 * each thread's chain of FMAs short. Chosen from each tile's time on the
 * five GEMMs of examples/graph_mlp's step on an H100 (BENCHMARKS.md); the
 * 4 x 8 tile reads transposed operands in 16-byte pieces, which is why it
 * is not the choice for short k. */
extern "C" void tc__k_gemm_small(cudaStream_t stream, const tc__nn_gemm *g)
{
    if (blocks(g, 16, 16) >= 96)
        launch<16, 16, 128>(stream, g);
    else if (blocks(g, 8, 16) >= 96)
        launch<8, 16, 128>(stream, g);
    else if (blocks(g, 8, 8) >= 96 || g->k <= 128)
        launch<8, 8, 128>(stream, g);
    else
        launch<4, 8, 256>(stream, g);
}
