/* Skinny GEMMs without cuBLAS: C = alpha A B^T + beta C, then optionally a
 * bias and the tanh gelu, for A of at most 16 rows [m, k] and B stored
 * [n, k] (a linear layer's weight, or the keys of attention scores). These
 * are decode's matrix-vector products: every element of B is read once
 * and used m times, so the time is reading B, and at GPT-2's sizes (B of
 * 1-5 MB) mostly the latency of that read. cuBLAS covers such a product
 * with few blocks or a split-k pair of kernels, and its kernels do not wait
 * on programmatic graph edges (runtime/cuda/pdl.cuh), so a graph of decode
 * steps cannot overlap their launches; these kernels do.
 *
 * A block takes a few columns of C and all its rows; its warps split k
 * between them, chunk by chunk in turn so that neighbouring warps read
 * neighbouring bytes of B's rows, and their sums are added in shared memory
 * in a fixed order (the same bits on every run). B is read with 16-byte
 * loads that skip L1 (each is read once), A with cached ones (every block
 * reads it). Two kernels:
 *
 * FMAs (up to 4 rows; float32 past that goes to cuBLAS), full
 * float32 whatever allow_tf32 says (as gemm_small.cu). A lane takes 16
 * bytes of every 512 of k, loads them from each of the block's 1, 2 or 4
 * rows of B (as few as keep the GPU busy), then from each row of A in
 * turn, and keeps m x 4 sums; a warp's lanes are added by shuffles.
 *
 * Tensor cores (16-bit dtypes, 5 to 16 rows), 8 columns a block: each warp
 * step is two mma.sync m16n8k16 products over 32 of k, float32
 * accumulation. A lane loads 16 bytes of B's row n0 + g (g = lane / 4) at
 * k 8 t (t = lane % 4) and the same 16 bytes of A's rows g and g + 8
 * (zeros past m): a dot product does not depend on the order of its k, so
 * the products take k 8t, 8t+1 where the fragment layout says 2t, 2t+1,
 * and so on, in A and B alike (attention_mma.cuh describes the fragments).
 *
 * The epilogue is cuBLASLt's order: alpha * sum + beta * C + bias in
 * float32, that value (rounded) to aux where given, then gelu, rounded
 * once to C. A residual is beta's C read from another tensor (beta 1).
 * The threads that finish read their C and bias values right after the
 * PDL wait, so those loads overlap the product: read after it, they added
 * a memory round trip to the end of every GEMM (BENCHMARKS.md, session
 * 46).
 *
 * The FMA kernel can also normalize A's rows first, as layer_norm does
 * (tc_nn_layer_norm_linear): the block first takes every row's mean and
 * rstd (a warp a row); each element of A is then normalized as it is read
 * and rounded to T, the value layer_norm would have stored. Each block
 * takes the statistics itself, so a wide B (many blocks) pays for them
 * many times: BENCHMARKS.md (session 46) has what that cost GPT-2. */
#include <atomic>
#include <cstdint>

#include "attention_mma.cuh"
#include "nn_kernels.h"
#include "rows.cuh"

namespace tcuda_kernels { /* graph_pdl.c knows tcuda's kernels by this name */
namespace {

typedef int64_t i64;

enum { MAX_WARPS = 8, MAX_M = 16, UNROLL = 4 };

/* launches, for the tests: per thread (the calling thread's count), so that
 * every GEMM does not write one shared cache line, as tensor_nn.c's counts */
thread_local uint64_t runs = 0;
std::atomic<bool> enabled{true}; /* off: cuBLAS's path, for the benchmark */

/* The kernel's parameters: one GEMM of tc__nn_gemm with its prologue
 * (layer_norm of A's rows, where ln) and epilogue. cin: where beta's C is
 * read (c's layout), c itself when NULL. */
struct Skinny {
    const void *a, *b, *bias, *cin, *lnw, *lnb;
    void *c, *aux;
    int m, n, k;
    i64 lda, ldb, ldc, sa, sb, sc;
    float alpha, beta, eps;
    bool gelu, ln;
};

/* 16 bytes of B, read once: not kept in L1. */
__device__ __forceinline__ uint4 ld_stream(const void *p)
{
    uint4 r;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p));
    return r;
}

__device__ __forceinline__ float gelu_tanh(float x)
{
    return 0.5f * x * (1.0f + tanhf(0.79788456080286535588f * (x + 0.044715f * x * x * x)));
}

/* What the epilogue adds to result (i, j) of the batch entry whose C is c:
 * beta's C (from cin where given) and the bias, read right after the PDL
 * wait so that their loads overlap the product instead of following it. */
struct Pre {
    float c, bias;
};

template <typename T>
__device__ __forceinline__ Pre pre_load(const Skinny &p, const T *c, int i, int j)
{
    Pre r = {0.0f, 0.0f};
    if (p.beta != 0.0f) { /* beta 0: C is not read */
        const T *cp = p.cin ? (const T *)p.cin + (c - (const T *)p.c) : c;
        r.c = p.beta * tck::load<float>(cp + (i64)i * p.ldc + j);
    }
    if (p.bias)
        r.bias = tck::load<float>((const T *)p.bias + j);
    return r;
}

/* Result (i, j) of the batch entry whose C is c (aux, if any, beside it),
 * with pre_load's values. */
template <typename T>
__device__ __forceinline__ void finish(const Skinny &p, T *c, T *aux, int i, int j, float sum,
                                       Pre pr)
{
    T *cp = c + (i64)i * p.ldc + j;
    float v = p.alpha * sum;
    if (p.beta != 0.0f)
        v += pr.c;
    if (p.bias)
        v += pr.bias;
    if (aux)
        tck::store(aux + (i64)i * p.n + j, v);
    if (p.gelu)
        v = gelu_tanh(v);
    tck::store(cp, v);
}

/* Eight 16-bit elements (or four floats) of 16 bytes as floats. */
template <typename T> __device__ __forceinline__ void widen(uint4 v, float *f)
{
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
    if constexpr (std::is_same<T, float>::value) {
#pragma unroll
        for (int i = 0; i < 4; i++)
            f[i] = __uint_as_float(w[i]);
    } else if constexpr (std::is_same<T, __nv_bfloat16>::value) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            f[2 * i] = __uint_as_float(w[i] << 16);
            f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
        }
    } else {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            __half2 h;
            memcpy(&h, &w[i], sizeof h);
            float2 x = __half22float2(h);
            f[2 * i] = x.x;
            f[2 * i + 1] = x.y;
        }
    }
}

/* layer_norm's statistics of A's rows (batch entry z) into mean and rstd,
 * as layer_norm.cu's ln_fwd takes them: the mean, then the mean of squared
 * deviations, rstd = 1 / sqrt(that + eps), in float32. A warp a row, 16
 * bytes a lane at a time; the block waits for all of them. */
template <typename T> __device__ void ln_stats(const Skinny &p, int z, float *mean, float *rstd)
{
    constexpr int V = 16 / sizeof(T);
    const int lane = threadIdx.x % 32, w = threadIdx.x / 32, nw = blockDim.x / 32;
    for (int i = w; i < p.m; i += nw) {
        const T *row = (const T *)p.a + z * p.sa + (i64)i * p.lda;
        float s = 0, q = 0, f[V];
        for (int e = V * lane; e < p.k; e += 32 * V) {
            widen<T>(*reinterpret_cast<const uint4 *>(row + e), f);
#pragma unroll
            for (int u = 0; u < V; u++)
                s += f[u];
        }
        const float mu = tck::warp_red<false>(s) / (float)p.k;
        for (int e = V * lane; e < p.k; e += 32 * V) {
            widen<T>(*reinterpret_cast<const uint4 *>(row + e), f);
#pragma unroll
            for (int u = 0; u < V; u++)
                q += (f[u] - mu) * (f[u] - mu);
        }
        const float var = tck::warp_red<false>(q) / (float)p.k;
        if (lane == 0) {
            mean[i] = mu;
            rstd[i] = 1.0f / sqrtf(var + p.eps);
        }
    }
    __syncthreads();
}

/* The layer_norm weight's and bias's 16 bytes at k = e (zeros where there
 * is none), for ln_params. */
template <typename T>
__device__ __forceinline__ void ln_load(const Skinny &p, int e, uint4 &w, uint4 &b)
{
    const uint4 zero = make_uint4(0, 0, 0, 0);
    w = p.lnw ? *reinterpret_cast<const uint4 *>((const T *)p.lnw + e) : zero;
    b = p.lnb ? *reinterpret_cast<const uint4 *>((const T *)p.lnb + e) : zero;
}

/* ln_load's w and b as floats w[V], b[V] (1 and 0 where there is none). */
template <typename T>
__device__ __forceinline__ void ln_params(const Skinny &p, uint4 wv, uint4 bv, float *w, float *b)
{
    constexpr int V = 16 / sizeof(T);
    widen<T>(wv, w);
    widen<T>(bv, b);
    if (!p.lnw)
#pragma unroll
        for (int u = 0; u < V; u++)
            w[u] = 1.0f;
}

/* x[V] normalized in place as ln_fwd writes y: ((x - mu) * rs) * w + b, then
 * rounded to T, so that the product sees what layer_norm would have
 * stored. */
template <typename T>
__device__ __forceinline__ void ln_apply(float *x, float mu, float rs, const float *w,
                                         const float *b)
{
#pragma unroll
    for (int u = 0; u < 16 / (int)sizeof(T); u++) {
        float v = (x[u] - mu) * rs;
        v *= w[u];
        v += b[u];
        T r;
        tck::store(&r, v);
        x[u] = tck::load<float>(&r);
    }
}

template <typename T> __global__ void __launch_bounds__(MAX_WARPS * 32) skinny16_kernel(Skinny p)
{
    tck_pdl_entry();
    __shared__ float part[MAX_WARPS - 1][32][4];
    const int lane = threadIdx.x % 32, w = threadIdx.x / 32, nw = blockDim.x / 32;
    const int g = lane / 4, t = lane % 4, n0 = blockIdx.x * 8, z = blockIdx.y;
    const bool col = n0 + g < p.n, row0 = g < p.m, row1 = g + 8 < p.m;
    /* warp 0 finishes rows g and g + 8, columns j and j + 1 */
    T *cz = (T *)p.c + z * p.sc, *aux = p.aux ? (T *)p.aux + z * (i64)p.m * p.n : NULL;
    const int j = n0 + 2 * t;
    Pre pr[2][2] = {};
    if (w == 0)
        for (int h = 0; h < 2; h++)
            for (int e = 0; e < 2; e++)
                if (g + 8 * h < p.m && j + e < p.n)
                    pr[h][e] = pre_load(p, cz, g + 8 * h, j + e);
    const uint16_t *b = (const uint16_t *)p.b + z * p.sb + (i64)(n0 + g) * p.ldb + 8 * t;
    const uint16_t *a0 = (const uint16_t *)p.a + z * p.sa + (i64)g * p.lda + 8 * t;
    const uint16_t *a1 = a0 + 8 * p.lda;
    const int chunks = (p.k + 31) / 32;
    const uint4 zero = make_uint4(0, 0, 0, 0);
    float d[4] = {0, 0, 0, 0};
    for (int c0 = w; c0 < chunks; c0 += nw * UNROLL) {
        uint4 bv[UNROLL], x0[UNROLL], x1[UNROLL]; /* every load of the step before a product */
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const int c = c0 + u * nw;
            const bool in = c < chunks && c * 32 + 8 * t < p.k;
            bv[u] = in && col ? ld_stream(b + c * 32) : zero;
            x0[u] = in && row0 ? *reinterpret_cast<const uint4 *>(a0 + c * 32) : zero;
            x1[u] = in && row1 ? *reinterpret_cast<const uint4 *>(a1 + c * 32) : zero;
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const uint32_t lo[4] = {x0[u].x, x1[u].x, x0[u].y, x1[u].y};
            const uint32_t hi[4] = {x0[u].z, x1[u].z, x0[u].w, x1[u].w};
            amma::Mma<T>::run(d, lo, bv[u].x, bv[u].y);
            amma::Mma<T>::run(d, hi, bv[u].z, bv[u].w);
        }
    }
    if (w > 0)
#pragma unroll
        for (int r = 0; r < 4; r++)
            part[w - 1][lane][r] = d[r];
    __syncthreads();
    if (w > 0)
        return;
    for (int v = 0; v < nw - 1; v++)
#pragma unroll
        for (int r = 0; r < 4; r++)
            d[r] += part[v][lane][r];
    /* d[0], d[1]: row g, columns 2t, 2t + 1; d[2], d[3]: row g + 8 */
    for (int h = 0; h < 2; h++) {
        const int i = g + 8 * h;
        if (i < p.m && j < p.n)
            finish(p, cz, aux, i, j, d[2 * h], pr[h][0]);
        if (i < p.m && j + 1 < p.n)
            finish(p, cz, aux, i, j + 1, d[2 * h + 1], pr[h][1]);
    }
}

/* FMAs, at most MB rows (m <= MB), nc <= 4 columns a block: every dtype at
 * a few rows, and float32 at any. A lane takes the 16 bytes of k at 16 lane
 * in every chunk of 512 bytes, so that a warp reads 512 contiguous bytes
 * of a row of B at a time. */
template <typename T, int MB>
__global__ void __launch_bounds__(MAX_WARPS * 32) skinny_fma_kernel(Skinny p, int nc)
{
    constexpr int NC = 4, V = 16 / sizeof(T), CHUNK = 32 * V;
    tck_pdl_entry();
    __shared__ float part[MAX_WARPS][MB][NC];
    __shared__ float ln_mean[MB], ln_rstd[MB];
    const int lane = threadIdx.x % 32, w = threadIdx.x / 32, nw = blockDim.x / 32;
    const int n0 = blockIdx.x * nc, z = blockIdx.y;
    /* thread r < MB NC finishes row r / NC, column n0 + r % NC */
    T *cz = (T *)p.c + z * p.sc, *aux = p.aux ? (T *)p.aux + z * (i64)p.m * p.n : NULL;
    const int fi = threadIdx.x / NC, fj = threadIdx.x % NC;
    const bool finishes = threadIdx.x < MB * NC && fi < p.m && fj < nc && n0 + fj < p.n;
    Pre pr = {};
    if (finishes)
        pr = pre_load(p, cz, fi, n0 + fj);
    if (p.ln)
        ln_stats<T>(p, z, ln_mean, ln_rstd);
    const T *b = (const T *)p.b + z * p.sb + (i64)n0 * p.ldb + V * lane;
    const T *a = (const T *)p.a + z * p.sa + V * lane;
    const int chunks = (p.k + CHUNK - 1) / CHUNK;
    float acc[MB][NC] = {};
    for (int c0 = w; c0 < chunks; c0 += nw * 2) {
        uint4 bv[2][NC];
#pragma unroll
        for (int u = 0; u < 2; u++) {
            const int c = c0 + u * nw;
            const bool in = c < chunks && c * CHUNK + V * lane < p.k;
#pragma unroll
            for (int j = 0; j < NC; j++)
                bv[u][j] = in && j < nc && n0 + j < p.n ? ld_stream(b + j * p.ldb + c * CHUNK)
                                                        : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < 2; u++) {
            const int c = c0 + u * nw;
            if (c >= chunks || c * CHUNK + V * lane >= p.k)
                continue;
            float wf[NC][V], lw[V], lb[V];
#pragma unroll
            for (int j = 0; j < NC; j++)
                widen<T>(bv[u][j], wf[j]);
            if (p.ln) {
                uint4 wv, bb;
                ln_load<T>(p, c * CHUNK + V * lane, wv, bb);
                ln_params<T>(p, wv, bb, lw, lb);
            }
#pragma unroll
            for (int i = 0; i < MB; i++) {
                if (i >= p.m)
                    break;
                float x[V];
                widen<T>(*reinterpret_cast<const uint4 *>(a + i * p.lda + c * CHUNK), x);
                if (p.ln)
                    ln_apply<T>(x, ln_mean[i], ln_rstd[i], lw, lb);
#pragma unroll
                for (int j = 0; j < NC; j++) {
                    float s = acc[i][j];
#pragma unroll
                    for (int e = 0; e < V; e++)
                        s = fmaf(x[e], wf[j][e], s);
                    acc[i][j] = s;
                }
            }
        }
    }
#pragma unroll
    for (int i = 0; i < MB; i++)
#pragma unroll
        for (int j = 0; j < NC; j++) {
            float s = acc[i][j];
#pragma unroll
            for (int o = 16; o > 0; o /= 2)
                s += __shfl_xor_sync(0xffffffffu, s, o);
            if (lane == 0)
                part[w][i][j] = s;
        }
    __syncthreads();
    if (finishes) { /* MB NC <= 16 threads, of at least 32 */
        float sum = part[0][fi][fj];
        for (int v = 1; v < nw; v++)
            sum += part[v][fi][fj];
        finish(p, cz, aux, fi, n0 + fj, sum, pr);
    }
}

/* Warps a block: enough to split k into chunks, no more than MAX_WARPS. */
int warps_for(i64 chunks) { return chunks < MAX_WARPS ? (int)chunks : MAX_WARPS; }

/* The tensor core kernel: 8 columns a block. */
template <typename T> void launch_mma(cudaStream_t stream, const tc__nn_gemm *g, Skinny p)
{
    dim3 grid((unsigned)((g->n + 7) / 8), (unsigned)g->batch);
    skinny16_kernel<T><<<grid, 32 * warps_for((g->k + 31) / 32), 0, stream>>>(p);
}

/* The FMA kernel with the fewest columns a block (4, 2 or 1) that still
 * gives the GPU about 16 warps an SM: few columns spread a narrow B over
 * more blocks, more columns read each row of A fewer times. */
template <typename T, int MB>
void launch_fma(cudaStream_t stream, int sms, const tc__nn_gemm *g, Skinny p)
{
    const i64 chunk = 512 / (i64)sizeof(T), nw = warps_for((g->k + chunk - 1) / chunk);
    const i64 want = 16 * (i64)(sms > 0 ? sms : 132);
    int nc = 4;
    while (nc > 1 && (g->n + nc - 1) / nc * g->batch * nw < want)
        nc /= 2;
    dim3 grid((unsigned)((g->n + nc - 1) / nc), (unsigned)g->batch);
    skinny_fma_kernel<T, MB><<<grid, 32 * (unsigned)nw, 0, stream>>>(p, nc);
}

/* The FMA kernel for m rows (1 to 4): MB the power of two at or above m. */
template <typename T>
void launch_fma_rows(cudaStream_t stream, int sms, const tc__nn_gemm *g, Skinny p)
{
    if (g->m <= 1)
        launch_fma<T, 1>(stream, sms, g, p);
    else if (g->m <= 2)
        launch_fma<T, 2>(stream, sms, g, p);
    else
        launch_fma<T, 4>(stream, sms, g, p);
}

} // namespace
} // namespace tcuda_kernels
using namespace tcuda_kernels;

extern "C" bool tc__k_gemm_skinny_fits(const tc__nn_gemm *g)
{
    if (!enabled.load(std::memory_order_relaxed) || g->dtype != g->c_dtype || g->trans_a ||
        !g->trans_b)
        return false;
    if (g->dtype != TC_FLOAT16 && g->dtype != TC_BFLOAT16 && g->dtype != TC_FLOAT32)
        return false;
    const i64 vec = 16 / (i64)tc_dtype_size(g->dtype); /* elements in 16 bytes */
    bool aligned = (uintptr_t)g->a % 16 == 0 && (uintptr_t)g->b % 16 == 0 && g->lda % vec == 0 &&
                   g->ldb % vec == 0 && g->k % vec == 0 &&
                   (g->batch == 1 || (g->stride_a % vec == 0 && g->stride_b % vec == 0));
    /* Where the kernels beat cuBLAS (bench_gemv on an H200, 2026-11-28, in
     * graphs): float32 up to 4 rows (at 8 and 16 its FMA kernel took 1.4 to
     * 2.2 times cuBLAS's time on 4 of GPT-2 small's 5 shapes, 16 rows
     * keeping 64 sums a lane); 16-bit dtypes up to 4 rows at any depth, and
     * to 16 rows where k is at most 3,072 (at k 4,096 the tensor core
     * kernel took 1.4 to 1.5 times cuBLAS's time: each warp's chunks of k
     * wait for their loads in turn; at GPT-2's depths it is at or near
     * cuBLAS's, and 3 times faster on the logits, 50,257 wide) */
    const bool rows_ok = g->dtype == TC_FLOAT32 ? g->m <= 4 : g->m <= 4 || g->k <= 3072;
    return aligned && rows_ok && g->m >= 1 && g->m <= MAX_M && g->n >= 1 && g->k >= 1 &&
           g->k <= (1 << 16) && g->batch >= 1 && g->batch <= 65535 && g->n < ((i64)1 << 31) - 8;
}

extern "C" void tc__k_gemm_skinny(cudaStream_t stream, int sms, const tc__nn_gemm *g,
                                  const tc__nn_fusion *f)
{
    const tc__nn_fusion none = {};
    if (!f)
        f = &none;
    Skinny p = {};
    p.a = g->a;
    p.b = g->b;
    p.bias = f->bias;
    p.cin = f->residual;
    p.lnw = f->ln_weight;
    p.lnb = f->ln_bias;
    p.c = g->c;
    p.aux = f->aux;
    p.m = (int)g->m;
    p.n = (int)g->n;
    p.k = (int)g->k;
    p.lda = g->lda;
    p.ldb = g->ldb;
    p.ldc = g->ldc;
    p.sa = g->stride_a;
    p.sb = g->stride_b;
    p.sc = g->stride_c;
    p.alpha = (float)g->alpha;
    p.beta = f->residual ? 1.0f : (float)g->beta; /* the residual is beta's C */
    p.eps = (float)f->eps;
    p.gelu = f->gelu;
    p.ln = f->ln;
    runs++;
    /* 16-bit: FMAs up to 4 rows, where the tensor cores' 16 would mostly be
     * zeros, the tensor cores past that */
    if (g->dtype == TC_FLOAT32)
        launch_fma_rows<float>(stream, sms, g, p);
    else if (g->m > 4 && g->dtype == TC_BFLOAT16)
        launch_mma<__nv_bfloat16>(stream, g, p);
    else if (g->m > 4)
        launch_mma<__half>(stream, g, p);
    else if (g->dtype == TC_BFLOAT16)
        launch_fma_rows<__nv_bfloat16>(stream, sms, g, p);
    else
        launch_fma_rows<__half>(stream, sms, g, p);
}

extern "C" uint64_t tc__k_gemm_skinny_count(void) { return runs; }

extern "C" void tc__k_gemm_skinny_set_enabled(bool on)
{
    enabled.store(on, std::memory_order_relaxed);
}
