/* Fused attention backward (FlashAttention-2's): the gradients of
 * softmax(scale * q k^T, causal mask optional) v from q, k, v, the
 * forward's output O, its gradient dO and each query row's log-sum-exp
 * (attention.cu writes it), with the [l, s] matrices never in memory.
 *
 *   1. D[i] = rowsum(dO[i] * O[i]), float32, one warp a row.
 *   2. dK and dV: a block per (batch entry, 32 keys) walks the query blocks
 *      (from the block's first key on when causal: earlier queries see none
 *      of its keys), recomputes P = exp(scale * q k^T - lse) and
 *      dS = P * (dO v^T - D) in shared memory, and accumulates
 *      dV += P^T dO and dK += scale * dS^T q in registers.
 *   3. dQ: a block per (batch entry, 32 queries) walks the key blocks (up to
 *      the diagonal when causal), recomputes dS the same way and accumulates
 *      dQ += scale * dS k.
 * Each gradient element is summed by one thread in a fixed order, so the
 * result is deterministic (no atomics). Every dtype takes the same path:
 * tiles are converted to float32 in shared memory and all math is float32
 * FMAs; gradients are rounded to the input dtype once, at the end.
 *
 * Operands are read in place through two batch strides and a row stride,
 * as the forward's; the gradients are written dense. Head dims up to 128
 * (tiles of 32, 64 or 128 columns, the tail past e read as zero and never
 * written). The masking rules are the forward's: causal is top-left
 * aligned, query i sees keys j <= i. */
#include <math.h>
#include <stdint.h>

#include <atomic>

#include "common.cuh"
#include "nn_kernels.h"

using namespace tck;

namespace tcuda_kernels { /* graph_pdl.c knows tcuda's kernels by this name */
namespace {

constexpr int T = 32;   /* queries and keys of a tile */
constexpr int NT = 256; /* threads of a block: 8 per tile row */

struct BwdArgs {
    const void *q, *k, *v, *o, *go;
    const float *lse;
    float *dsum; /* D, [batch, l] */
    void *dq, *dk, *dv;
    i64 qs[3], ks[3], vs[3], os[3], gs[3];
    i64 inner, batch;
    int l, s, e;
    float scale;
    bool causal;
};

__device__ __forceinline__ i64 batch_offset(const i64 *st, i64 b, i64 inner)
{
    return (b / inner) * st[0] + (b % inner) * st[1];
}

/* Shared memory of the two gradient kernels, in floats: four [T][D + 1]
 * operand tiles (odd rows keep a column's reads in distinct banks), P and
 * dS [T][T + 1], and the query rows' lse and D. */
template <int D> struct Smem {
    static constexpr int LD = D + 1, LP = T + 1;
    static constexpr int floats = 4 * T * LD + 2 * T * LP + 2 * T;
    static constexpr int bytes = floats * (int)sizeof(float);
};

/* Rows [r0, r0 + n) of src (row stride `row`) into dst [T][LD] as float32,
 * zeros below n and right of e. */
template <typename E, int D, int LD>
__device__ __forceinline__ void tile_in(float *dst, const E *src, i64 row, int r0, int n, int e)
{
    for (int c = threadIdx.x; c < T * D; c += NT) {
        int r = c / D, col = c % D;
        dst[r * LD + col] = r < n && col < e ? load<float>(src + (i64)(r0 + r) * row + col) : 0.0f;
    }
}

/* The block's tiles of one (query tile, key tile) pair: qt, got (dO) [T][LD]
 * of queries q0.., kt, vt of keys k0.., lse and D of the query rows. Fills
 * pt with P and dst with dS = P * (dO v^T - D) ([query][key], LP apart),
 * zero where masked or past l or s. */
template <int D>
__device__ __forceinline__ void probs_and_grads(const BwdArgs &a, const float *qt, const float *got,
                                                const float *kt, const float *vt,
                                                const float *lse_s, const float *d_s, float *pt,
                                                float *dst, int q0, int k0)
{
    typedef Smem<D> L;
    int i = threadIdx.x / 8, j0 = threadIdx.x % 8;
    float s[T / 8], dp[T / 8];
#pragma unroll
    for (int u = 0; u < T / 8; u++)
        s[u] = dp[u] = 0;
    for (int d = 0; d < D; d++) {
        float qv = qt[i * L::LD + d], gv = got[i * L::LD + d];
#pragma unroll
        for (int u = 0; u < T / 8; u++) {
            int j = j0 + 8 * u;
            s[u] = fmaf(qv, kt[j * L::LD + d], s[u]);
            dp[u] = fmaf(gv, vt[j * L::LD + d], dp[u]);
        }
    }
    int row = q0 + i;
#pragma unroll
    for (int u = 0; u < T / 8; u++) {
        int j = j0 + 8 * u, col = k0 + j;
        bool seen = row < a.l && col < a.s && !(a.causal && col > row);
        float p = seen ? expf(s[u] * a.scale - lse_s[i]) : 0.0f;
        pt[i * L::LP + j] = p;
        dst[i * L::LP + j] = p * (dp[u] - d_s[i]);
    }
}

/* lse and D of query rows q0.. of entry b into lse_s and d_s (0 past l). */
__device__ __forceinline__ void rows_in(const BwdArgs &a, i64 b, int q0, float *lse_s, float *d_s)
{
    for (int r = threadIdx.x; r < T; r += NT) {
        bool in = q0 + r < a.l;
        lse_s[r] = in ? a.lse[b * a.l + q0 + r] : 0.0f;
        d_s[r] = in ? a.dsum[b * a.l + q0 + r] : 0.0f;
    }
}

/* Rows [r0, r0 + n) of a dense [rows, e] gradient from acc (the thread's
 * row r = threadIdx / 8, columns threadIdx % 8 + 8u), rounded to E. */
template <typename E, int D>
__device__ __forceinline__ void grad_out(E *dst, const float *acc, int r0, int n, int e)
{
    int r = threadIdx.x / 8, c0 = threadIdx.x % 8;
    if (r >= n)
        return;
#pragma unroll
    for (int u = 0; u < D / 8; u++) {
        int col = c0 + 8 * u;
        if (col < e)
            store(dst + (i64)(r0 + r) * e + col, acc[u]);
    }
}

/* ---- 1. D = rowsum(dO * O) ---------------------------------------------------------------- */

template <typename E> __global__ void __launch_bounds__(NT) attention_bwd_dsum(BwdArgs a)
{
    tck_pdl_entry();
    i64 row = (i64)blockIdx.x * (NT / 32) + threadIdx.x / 32, rows = a.batch * a.l;
    if (row >= rows)
        return;
    i64 b = row / a.l;
    int i = (int)(row % a.l), lane = threadIdx.x % 32;
    const E *o = (const E *)a.o + batch_offset(a.os, b, a.inner) + i * a.os[2];
    const E *go = (const E *)a.go + batch_offset(a.gs, b, a.inner) + i * a.gs[2];
    float sum = 0;
    for (int c = lane; c < a.e; c += 32)
        sum = fmaf(load<float>(o + c), load<float>(go + c), sum);
#pragma unroll
    for (int w = 16; w >= 1; w /= 2)
        sum += __shfl_xor_sync(0xffffffffu, sum, w);
    if (lane == 0)
        a.dsum[row] = sum;
}

/* ---- 2. dK and dV ------------------------------------------------------------------------- */

template <typename E, int D> __global__ void __launch_bounds__(NT) attention_bwd_dkv(BwdArgs a)
{
    tck_pdl_entry();
    typedef Smem<D> L;
    extern __shared__ float smem_f[];
    float *qt = smem_f, *got = qt + T * L::LD, *kt = got + T * L::LD, *vt = kt + T * L::LD;
    float *pt = vt + T * L::LD, *dst = pt + T * L::LP, *lse_s = dst + T * L::LP, *d_s = lse_s + T;
    int nkb = (a.s + T - 1) / T;
    i64 b = blockIdx.x / nkb;
    int k0 = (int)(blockIdx.x % nkb) * T, kn = min(T, a.s - k0);
    const E *q = (const E *)a.q + batch_offset(a.qs, b, a.inner);
    const E *go = (const E *)a.go + batch_offset(a.gs, b, a.inner);
    tile_in<E, D, L::LD>(kt, (const E *)a.k + batch_offset(a.ks, b, a.inner), a.ks[2], k0, kn, a.e);
    tile_in<E, D, L::LD>(vt, (const E *)a.v + batch_offset(a.vs, b, a.inner), a.vs[2], k0, kn, a.e);
    /* this thread's key row and columns of dK and dV */
    int r = threadIdx.x / 8, c0 = threadIdx.x % 8;
    float dk[D / 8], dv[D / 8];
#pragma unroll
    for (int u = 0; u < D / 8; u++)
        dk[u] = dv[u] = 0;
    /* queries before k0 see none of these keys when causal */
    int qstart = a.causal ? (k0 / T) * T : 0;
    for (int q0 = qstart; q0 < a.l; q0 += T) {
        int qn = min(T, a.l - q0);
        __syncthreads(); /* the last step is done with the query tiles */
        tile_in<E, D, L::LD>(qt, q, a.qs[2], q0, qn, a.e);
        tile_in<E, D, L::LD>(got, go, a.gs[2], q0, qn, a.e);
        rows_in(a, b, q0, lse_s, d_s);
        __syncthreads();
        probs_and_grads<D>(a, qt, got, kt, vt, lse_s, d_s, pt, dst, q0, k0);
        __syncthreads();
        for (int i = 0; i < T; i++) {
            float p = pt[i * L::LP + r], ds = dst[i * L::LP + r];
#pragma unroll
            for (int u = 0; u < D / 8; u++) {
                int col = c0 + 8 * u;
                dv[u] = fmaf(p, got[i * L::LD + col], dv[u]);
                dk[u] = fmaf(ds, qt[i * L::LD + col], dk[u]);
            }
        }
    }
#pragma unroll
    for (int u = 0; u < D / 8; u++)
        dk[u] *= a.scale;
    i64 off = b * a.s * a.e;
    grad_out<E, D>((E *)a.dk + off, dk, k0, kn, a.e);
    grad_out<E, D>((E *)a.dv + off, dv, k0, kn, a.e);
}

/* ---- 3. dQ -------------------------------------------------------------------------------- */

template <typename E, int D> __global__ void __launch_bounds__(NT) attention_bwd_dq(BwdArgs a)
{
    tck_pdl_entry();
    typedef Smem<D> L;
    extern __shared__ float smem_f[];
    float *qt = smem_f, *got = qt + T * L::LD, *kt = got + T * L::LD, *vt = kt + T * L::LD;
    float *pt = vt + T * L::LD, *dst = pt + T * L::LP, *lse_s = dst + T * L::LP, *d_s = lse_s + T;
    int nqb = (a.l + T - 1) / T;
    i64 b = blockIdx.x / nqb;
    int q0 = (int)(blockIdx.x % nqb) * T, qn = min(T, a.l - q0);
    const E *k = (const E *)a.k + batch_offset(a.ks, b, a.inner);
    const E *v = (const E *)a.v + batch_offset(a.vs, b, a.inner);
    tile_in<E, D, L::LD>(qt, (const E *)a.q + batch_offset(a.qs, b, a.inner), a.qs[2], q0, qn, a.e);
    tile_in<E, D, L::LD>(got, (const E *)a.go + batch_offset(a.gs, b, a.inner), a.gs[2], q0, qn,
                         a.e);
    rows_in(a, b, q0, lse_s, d_s);
    int r = threadIdx.x / 8, c0 = threadIdx.x % 8;
    float dq[D / 8];
#pragma unroll
    for (int u = 0; u < D / 8; u++)
        dq[u] = 0;
    /* keys past the block's last query are masked for all of its rows */
    int kend = a.causal ? min(a.s, q0 + T) : a.s;
    for (int k0 = 0; k0 < kend; k0 += T) {
        int kn = min(T, a.s - k0);
        __syncthreads(); /* the last step is done with the key tiles */
        tile_in<E, D, L::LD>(kt, k, a.ks[2], k0, kn, a.e);
        tile_in<E, D, L::LD>(vt, v, a.vs[2], k0, kn, a.e);
        __syncthreads();
        probs_and_grads<D>(a, qt, got, kt, vt, lse_s, d_s, pt, dst, q0, k0);
        __syncthreads();
        for (int j = 0; j < T; j++) {
            float ds = dst[r * L::LP + j];
#pragma unroll
            for (int u = 0; u < D / 8; u++)
                dq[u] = fmaf(ds, kt[j * L::LD + c0 + 8 * u], dq[u]);
        }
    }
#pragma unroll
    for (int u = 0; u < D / 8; u++)
        dq[u] *= a.scale;
    grad_out<E, D>((E *)a.dq + b * a.l * a.e, dq, q0, qn, a.e);
}

/* ---- launch ------------------------------------------------------------------------------- */

template <typename E, int D> bool launch(cudaStream_t stream, int device, const BwdArgs &a)
{
    static std::atomic<unsigned long long> set_kv{0}, set_q{0};
    int bytes = Smem<D>::bytes;
    if (!smem_allowed(attention_bwd_dkv<E, D>, bytes, device, set_kv) ||
        !smem_allowed(attention_bwd_dq<E, D>, bytes, device, set_q))
        return false;
    i64 rows = a.batch * a.l;
    attention_bwd_dsum<E><<<(unsigned)((rows + NT / 32 - 1) / (NT / 32)), NT, 0, stream>>>(a);
    unsigned gkv = (unsigned)(a.batch * ((a.s + T - 1) / T));
    unsigned gq = (unsigned)(a.batch * ((a.l + T - 1) / T));
    attention_bwd_dkv<E, D><<<gkv, NT, bytes, stream>>>(a);
    attention_bwd_dq<E, D><<<gq, NT, bytes, stream>>>(a);
    return true;
}

template <typename E> bool launch(cudaStream_t stream, int device, const BwdArgs &a)
{
    return a.e <= 32   ? launch<E, 32>(stream, device, a)
           : a.e <= 64 ? launch<E, 64>(stream, device, a)
                       : launch<E, 128>(stream, device, a);
}

} // namespace
} // namespace tcuda_kernels
using namespace tcuda_kernels;

extern "C" bool tc__k_nn_attention_backward_takes(const tc__nn_attention_bwd *x)
{
    if (x->dtype != TC_FLOAT16 && x->dtype != TC_BFLOAT16 && x->dtype != TC_FLOAT32)
        return false;
    if (x->e < 1 || x->e > 128 || x->l < 1 || x->s < 1 || x->l > INT32_MAX || x->s > INT32_MAX ||
        !(x->scale > 0 && x->scale < HUGE_VAL) || x->batch < 1 || x->inner < 1)
        return false;
    /* grids of one block per tile row, and D's warps */
    int64_t tiles = ((x->l > x->s ? x->l : x->s) + T - 1) / T;
    return tiles <= INT32_MAX / x->batch && x->l <= INT32_MAX / x->batch;
}

extern "C" bool tc__k_nn_attention_backward(cudaStream_t stream, int device,
                                            const tc__nn_attention_bwd *x, float *dsum)
{
    if (!tc__k_nn_attention_backward_takes(x))
        return false;
    BwdArgs a;
    a.q = x->q, a.k = x->k, a.v = x->v, a.o = x->out, a.go = x->grad_out;
    a.lse = x->lse, a.dsum = dsum;
    a.dq = x->dq, a.dk = x->dk, a.dv = x->dv;
    for (int i = 0; i < 3; i++)
        a.qs[i] = x->q_strides[i], a.ks[i] = x->k_strides[i], a.vs[i] = x->v_strides[i],
        a.os[i] = x->out_strides[i], a.gs[i] = x->go_strides[i];
    a.inner = x->inner, a.batch = x->batch;
    a.l = (int)x->l, a.s = (int)x->s, a.e = (int)x->e;
    a.scale = (float)x->scale;
    a.causal = x->causal;
    if (x->dtype == TC_FLOAT32)
        return launch<float>(stream, device, a);
    if (x->dtype == TC_BFLOAT16)
        return launch<__nv_bfloat16>(stream, device, a);
    return launch<__half>(stream, device, a);
}
