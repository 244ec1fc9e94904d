/* Fused attention backward (FlashAttention-2's): the gradients of
 * softmax(scale * q k^T, causal mask optional) v from q, k, v, the
 * forward's output O, its gradient dO and each query row's log-sum-exp
 * (attention.cu writes it), with the [l, s] matrices never in memory.
 *
 *   1. D[i] = rowsum(dO[i] * O[i]), float32, one warp a row (16-bit rows of
 *      whole 16-byte packs: eight lanes a row).
 *   2. dK and dV: a block per (batch entry, block of keys) walks the query
 *      blocks (from the block's first key on when causal: earlier queries
 *      see none of its keys), recomputes P = exp(scale * q k^T - lse) and
 *      dS = P * (dO v^T - D), and accumulates dV += P^T dO and
 *      dK += scale * dS^T q.
 *   3. dQ: a block per (batch entry, block of queries) walks the key blocks
 *      (up to the diagonal when causal), recomputes dS the same way and
 *      accumulates dQ += scale * dS k.
 * Each gradient element is summed by one thread in a fixed order, so the
 * result is deterministic (no atomics), but where dq is summed with
 * atomic adds: with tc_use_deterministic_algorithms off, Hopper's 16-bit
 * kernels and float32's register-tiled one (attention_backward_f32.cu)
 * have step 2's blocks add dS k into float32 sums (zeroed by step 1's
 * kernel; attention_bwd_dq_round then scales and writes dq), and step 3
 * does not run. The paths:
 *
 *   float16, bfloat16 (compute capability 8.0 and newer: the caller,
 *     nn_cuda.c, sends no 16-bit problem to older devices): blocks of four
 *     warps, 64 keys (dK, dV) or 64 queries (dQ) a block, 16 a warp; the
 *     five products on tensor cores (mma.sync m16n8k16, float32
 *     accumulation, attention_mma.cuh). The dK/dV kernel computes the
 *     transposes S^T = k q^T and dP^T = v dO^T, so that each warp's rows
 *     are its own keys and P^T and dS^T go from the accumulator registers
 *     straight into dV's and dK's operand registers, rounded to the input
 *     dtype (as FlashAttention-2 does); the dQ kernel does the same with
 *     S, dP and dS. The other operands go through shared memory, copied
 *     by cp.async into two buffers (the next step's copy runs while this
 *     one computes, one barrier a step) and read into fragments by 32-bit
 *     loads (A) and ldmatrix (B). With the causal mask the blocks start
 *     in the order of their work: the first key blocks walk the most
 *     queries, the last query blocks the most keys.
 *   float16, bfloat16 on compute capability 9.0, head dims 33 to 64 with
 *     16-byte aligned rows: the same blocks and steps with Hopper's
 *     warpgroup products (attention_backward_sm90.cu).
 *   float32 with head dims up to 64 and 16-byte aligned rows, dq summed
 *     with atomic adds: attention_backward_f32.cu's register-tiled kernel.
 *   other float32 (and 16-bit where the test hook asks): 256 threads, 32
 *     keys or queries a block; tiles are converted to float32 in shared
 *     memory and all math is float32 FMAs.
 * Gradients are rounded to the input dtype once, at the end.
 *
 * Operands are read in place through two batch strides and a row stride,
 * as the forward's; the gradients are written dense. Head dims up to 128
 * (tiles of 32, 64 or 128 columns, the tail past e read as zero and never
 * written). The masking rules are the forward's: causal is top-left
 * aligned, query i sees keys j <= i. */
#include <math.h>
#include <stdint.h>

#include <atomic>

#include "attention_backward.cuh"
#include "attention_mma.cuh"
#include "common.cuh"
#include "nn_kernels.h"

using namespace tck;

namespace tcuda_kernels { /* graph_pdl.c knows tcuda's kernels by this name */
namespace {

using namespace amma; /* the 16-bit path's helpers, shared with the forward */
using namespace abwd;

constexpr int T = 32;   /* queries and keys of a tile */
constexpr int NT = 256; /* threads of a block: 8 per tile row */

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

/* Rows [r0, r0 + n) of a [rows, e] gradient (rows `row` apart) from acc
 * (the thread's row r = threadIdx / 8, columns threadIdx % 8 + 8u),
 * rounded to E. */
template <typename E, int D>
__device__ __forceinline__ void grad_out(E *dst, i64 row, const float *acc, int r0, int n, int e)
{
    int r = threadIdx.x / 8, c0 = threadIdx.x % 8;
    if (r >= n)
        return;
#pragma unroll
    for (int u = 0; u < D / 8; u++) {
        int col = c0 + 8 * u;
        if (col < e)
            store(dst + (i64)(r0 + r) * row + col, acc[u]);
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
    if (a.dqacc) /* the row's dq sums start at 0 */
        for (int c = lane; c < 64; c += 32)
            a.dqacc[row * 64 + c] = 0;
}

/* D for 16-bit rows of whole 16-byte packs (a.vec, e a multiple of 8):
 * eight lanes a row, each summing its 16-byte packs (lane 8j + u: columns
 * 8u.., then every 64th on), then across its eight. */
template <typename E> __global__ void __launch_bounds__(NT) attention_bwd_dsum16(BwdArgs a)
{
    tck_pdl_entry();
    i64 row = (i64)blockIdx.x * (NT / 8) + threadIdx.x / 8, rows = a.batch * a.l;
    int u = threadIdx.x % 8;
    float sum = 0;
    if (row < rows) {
        i64 b = row / a.l;
        int i = (int)(row % a.l);
        const E *o = (const E *)a.o + batch_offset(a.os, b, a.inner) + i * a.os[2];
        const E *go = (const E *)a.go + batch_offset(a.gs, b, a.inner) + i * a.gs[2];
        for (int c = 8 * u; c < a.e; c += 64) {
            Pack16<E> x = ld16(o + c), y = ld16(go + c);
#pragma unroll
            for (int k = 0; k < 8; k++)
                sum = fmaf(load<float>(&x.v[k]), load<float>(&y.v[k]), sum);
        }
    }
#pragma unroll
    for (int w = 4; w >= 1; w /= 2) /* the eight lanes of a row: every lane takes part */
        sum += __shfl_xor_sync(0xffffffffu, sum, w);
    if (row < rows && u == 0)
        a.dsum[row] = sum;
    if (row < rows && a.dqacc) { /* the row's dq sums start at 0: 8 a lane */
        float4 *d = reinterpret_cast<float4 *>(a.dqacc + row * 64 + 8 * u);
        d[0] = d[1] = make_float4(0, 0, 0, 0);
    }
}

/* dq = scale * its float32 sums (dq summed with atomic adds), rounded to
 * E: a thread per 8 columns of a row (of batch * l rows, 64 sums each; e
 * columns written), in 16-byte stores where dq's rows allow it
 * (a.dq_vec). */
template <typename E> __global__ void __launch_bounds__(NT) attention_bwd_dq_round(BwdArgs a)
{
    tck_pdl_entry();
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x, row = i / 8, l = (unsigned)a.l;
    int c = 8 * (int)(i % 8);
    if (row >= (unsigned)(a.batch * a.l) || c >= a.e) /* batch * l < 2^31: takes() */
        return;
    const float4 *from = reinterpret_cast<const float4 *>(a.dqacc + (i64)row * 64 + c);
    float4 x = from[0], y = from[1];
    float v[8] = {x.x, x.y, x.z, x.w, y.x, y.y, y.z, y.w};
    E *dq = (E *)a.dq + batch_offset(a.dqs, row / l, a.inner) + (row % l) * a.dqs[2];
    if (a.dq_vec) {
        if constexpr (sizeof(E) == 2) {
            uint4 p;
            p.x = Mma<E>::pack(v[0] * a.scale, v[1] * a.scale);
            p.y = Mma<E>::pack(v[2] * a.scale, v[3] * a.scale);
            p.z = Mma<E>::pack(v[4] * a.scale, v[5] * a.scale);
            p.w = Mma<E>::pack(v[6] * a.scale, v[7] * a.scale);
            *reinterpret_cast<uint4 *>(dq + c) = p;
        } else {
            float4 *to = reinterpret_cast<float4 *>(dq + c);
            to[0] = make_float4(v[0] * a.scale, v[1] * a.scale, v[2] * a.scale, v[3] * a.scale);
            to[1] = make_float4(v[4] * a.scale, v[5] * a.scale, v[6] * a.scale, v[7] * a.scale);
        }
        return;
    }
#pragma unroll
    for (int k = 0; k < 8; k++)
        if (c + k < a.e)
            store(dq + c + k, v[k] * a.scale);
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
    grad_out<E, D>((E *)a.dk + batch_offset(a.dks, b, a.inner), a.dks[2], dk, k0, kn, a.e);
    grad_out<E, D>((E *)a.dv + batch_offset(a.dvs, b, a.inner), a.dvs[2], dv, k0, kn, a.e);
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
    grad_out<E, D>((E *)a.dq + batch_offset(a.dqs, b, a.inner), a.dqs[2], dq, q0, qn, a.e);
}

/* ---- 2 and 3 for float16 and bfloat16: tensor cores ------------------------------------- */

/* Shared memory of attention_bwd_dkv_mma and attention_bwd_dq_mma: the
 * block's two [RB][LD] tiles (keys and values, or queries and dO) and NS
 * buffers each of the other two, [ST][LD] (ST rows a step: by default 64
 * for head dims up to 64, 32 over 64, which keeps dK's and dV's
 * accumulators and the step's in registers; the dK/dV kernel's own below).
 * Rows padded by 16 bytes, so that the 8 rows of an ldmatrix
 * matrix, and the 8 rows of a fragment's 32-bit loads, fall in distinct
 * banks. The steps go through the buffers in turn: step i's copies land
 * in buffer i % NS, issued NS - 1 steps ahead (pipeline()). */
template <int D, int ST_ = (D <= 64 ? 64 : 32), int NS_ = 2> struct MmaSmem {
    static constexpr int LD = D + 8, ST = ST_, NS = NS_;
    static constexpr int rows = 2 * RB + 2 * NS * ST;
    /* then, for the dK/dV kernel, each buffer's queries' lse and
     * D: [buf][2][ST] floats */
    static constexpr int bytes = rows * LD * (int)sizeof(uint16_t) +
                                 2 * NS * ST * (int)sizeof(float);
};

/* The dK/dV kernel's shapes for head dims up to 64: its query step ST,
 * the blocks an SM must hold (MINB: registers capped to fit them; 0
 * leaves them to the compiler) and the buffers of its pipeline (NS, the
 * dQ kernel's too). Variant 0 is the default; the others are there for
 * bench_attention to time beside it (tc__k_nn_attention_backward_set_variant).
 * 32 queries a step with four blocks an SM take 128 registers a thread
 * (40 bytes spilled); 64 queries a step 236 registers (two blocks an
 * SM); 32 with three blocks, 168. On an H100 the whole bfloat16 backward
 * at 8 x 12 heads x 1024 x 64, causal, took 0.296, 0.327, 0.308, 0.305
 * and 0.314 ms with them (bench_attention, 2026-11-27). Holding each
 * warp's A fragments (its keys and values) in registers across the
 * steps, tried that day too, was slower at both three and four blocks an
 * SM. */
struct DkvShape {
    int st, minb, ns;
};
constexpr DkvShape DKV_SHAPES[5] = {{32, 4, 2}, {64, 0, 2}, {32, 3, 2}, {32, 4, 3}, {32, 3, 3}};

/* acc[n] (N/8 accumulators of 16 rows by 8 columns) += the warp's rows of
 * a (a [.][LD] tile, rows r0.., all D columns) times b^T, b's rows
 * [0, N) of a [.][LD] tile: a b^T, over the D columns both have. ldmatrix
 * of b's rows, not transposed: b's [n][k] is the B operand's column-major
 * k by n. */
template <typename H, int D, int N, int LD>
__device__ __forceinline__ void mma_abt(float (*acc)[4], const uint16_t (*a)[LD], int r0,
                                        const uint16_t (*b)[LD], int lane)
{
    int br = ldm_b_nk_row(lane), bc = ldm_b_nk_col(lane);
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
        uint32_t af[4];
        frag_a<LD>(af, a, r0 + lane / 4, kk * 16 + 2 * (lane % 4));
#pragma unroll
        for (int n = 0; n < N / 8; n += 2) {
            uint32_t bf[4];
            ldmatrix4<false>(bf, &b[n * 8 + br][kk * 16 + bc]);
            Mma<H>::run(acc[n], af, bf[0], bf[1]);
            Mma<H>::run(acc[n + 1], af, bf[2], bf[3]);
        }
    }
}

/* acc[n] (D/8 accumulators of 16 rows by 8 columns) += p b: p, 16 rows by
 * K columns, in the accumulator registers of the product that made it
 * (p[j]: columns 8j.., float32), rounded to H in pairs into A fragments;
 * b's rows [0, K) of a [.][LD] tile, row-major k by n, read by ldmatrix
 * transposed. */
template <typename H, int D, int K, int LD>
__device__ __forceinline__ void mma_pb(float (*acc)[4], const float (*p)[4],
                                       const uint16_t (*b)[LD], int lane)
{
    int br = ldm_b_kn_row(lane), bc = ldm_b_kn_col(lane);
#pragma unroll
    for (int j = 0; j < K / 16; j++) {
        uint32_t pa[4]; /* columns 16j..16j+15 of p: accumulators 2j and 2j + 1 */
        pa[0] = Mma<H>::pack(p[2 * j][0], p[2 * j][1]);
        pa[1] = Mma<H>::pack(p[2 * j][2], p[2 * j][3]);
        pa[2] = Mma<H>::pack(p[2 * j + 1][0], p[2 * j + 1][1]);
        pa[3] = Mma<H>::pack(p[2 * j + 1][2], p[2 * j + 1][3]);
#pragma unroll
        for (int n = 0; n < D / 8; n += 2) {
            uint32_t bf[4];
            ldmatrix4<true>(bf, &b[j * 16 + br][n * 8 + bc]);
            Mma<H>::run(acc[n], pa, bf[0], bf[1]);
            Mma<H>::run(acc[n + 1], pa, bf[2], bf[3]);
        }
    }
}

/* dK and dV of keys k0..k0+63 of entry b: warp w's keys k0 + 16w.., the
 * rows of its accumulators; the query steps' columns. */
template <typename H, int D, int ST_, int MINB, int NS>
__global__ void __launch_bounds__(NTM, MINB) attention_bwd_dkv_mma(BwdArgs a)
{
    tck_pdl_entry();
    typedef MmaSmem<D, ST_, NS> L;
    constexpr int LD = L::LD, ST = L::ST;
    typedef uint16_t Row[LD];
    extern __shared__ uint4 smem_h[];
    Row *kt = reinterpret_cast<Row *>(smem_h), *vt = kt + RB;
    Row *qs = vt + RB, *gs = qs + NS * ST; /* NS buffers each: [buf * ST + row] */
    float(*rs)[2][ST] = reinterpret_cast<float(*)[2][ST]>(gs + NS * ST); /* [buf]: lse, D */
    /* causal: the first key blocks (the most queries to walk) first */
    int nkb = (a.s + RB - 1) / RB;
    i64 b = a.causal ? blockIdx.x % a.batch : blockIdx.x / nkb;
    int k0 = (int)(a.causal ? blockIdx.x / a.batch : blockIdx.x % nkb) * RB;
    const uint16_t *q = (const uint16_t *)a.q + batch_offset(a.qs, b, a.inner);
    const uint16_t *go = (const uint16_t *)a.go + batch_offset(a.gs, b, a.inner);
    const uint16_t *k = (const uint16_t *)a.k + batch_offset(a.ks, b, a.inner) + k0 * a.ks[2];
    const uint16_t *v = (const uint16_t *)a.v + batch_offset(a.vs, b, a.inner) + k0 * a.vs[2];
    const float *lse = a.lse + b * a.l, *dsum = a.dsum + b * a.l;
    int lane = threadIdx.x % 32, w0 = (threadIdx.x / 32) * 16, t = lane % 4;
    int keys[2] = {k0 + w0 + lane / 4, k0 + w0 + lane / 4 + 8}; /* accumulator rows 0-1, 2-3 */
    /* queries before k0 see none of these keys when causal */
    int qstart = a.causal ? k0 : 0;
    int steps = qstart < a.l ? (a.l - qstart + ST - 1) / ST : 0;

    /* step j's queries, dO, lse and D into buffer buf */
    auto copy = [&](int j, int buf) {
        int q0 = qstart + j * ST, n = min(ST, a.l - q0);
        fill_tile<ST, D, LD, NTM>(qs + buf * ST, q + q0 * a.qs[2], a.qs[2], n, a.e, a.vec);
        fill_tile<ST, D, LD, NTM>(gs + buf * ST, go + q0 * a.gs[2], a.gs[2], n, a.e, a.vec);
        rows_async<ST>(rs[buf], lse, dsum, q0, a.l);
    };
    /* the block's keys and values and step 0's copies, one group */
    fill_tile<RB, D, LD, NTM>(kt, k, a.ks[2], min(RB, a.s - k0), a.e, a.vec);
    fill_tile<RB, D, LD, NTM>(vt, v, a.vs[2], min(RB, a.s - k0), a.e, a.vec);
    if (steps > 0)
        copy(0, 0);
    cp_commit();

    float dk[D / 8][4], dv[D / 8][4];
    zero<D>(dk);
    zero<D>(dv);
    pipeline<NS>(steps, copy, [&](int i, int buf) {
        int q0 = qstart + i * ST;
        const Row *qt = qs + buf * ST, *gt = gs + buf * ST;

        /* S^T = k q^T and dP^T = v dO^T: the warp's 16 keys by ST queries */
        float st[ST / 8][4], dpt[ST / 8][4];
        zero<ST>(st);
        zero<ST>(dpt);
        mma_abt<H, D, ST, LD>(st, kt, w0, qt, lane);
        mma_abt<H, D, ST, LD>(dpt, vt, w0, gt, lane);

        dkv_probs<ST>(a, st, dpt, rs[buf], q0, k0, keys, t); /* P^T and dS^T */
        /* dV += P^T dO, dK += dS^T q */
        mma_pb<H, D, ST, LD>(dv, st, gt, lane);
        mma_pb<H, D, ST, LD>(dk, dpt, qt, lane);
    });

    grad_out_mma<H, D>((uint16_t *)a.dk + batch_offset(a.dks, b, a.inner), a.dks[2], dk, k0 + w0,
                       a.s, a.e, a.scale, lane);
    grad_out_mma<H, D>((uint16_t *)a.dv + batch_offset(a.dvs, b, a.inner), a.dvs[2], dv, k0 + w0,
                       a.s, a.e, 1.0f, lane);
}

/* dQ of queries q0..q0+63 of entry b: warp w's queries q0 + 16w.., the
 * rows of its accumulators; the key steps' columns. */
template <typename H, int D, int NS>
__global__ void __launch_bounds__(NTM) attention_bwd_dq_mma(BwdArgs a)
{
    tck_pdl_entry();
    typedef MmaSmem<D, (D <= 64 ? 64 : 32), NS> L;
    constexpr int LD = L::LD, ST = L::ST;
    typedef uint16_t Row[LD];
    extern __shared__ uint4 smem_h[];
    Row *qt = reinterpret_cast<Row *>(smem_h), *gt = qt + RB;
    Row *ks = gt + RB, *vs = ks + NS * ST; /* NS buffers each: [buf * ST + row] */
    /* causal: the last query blocks (the most keys to walk) first */
    int nqb = (a.l + RB - 1) / RB;
    i64 b = a.causal ? blockIdx.x % a.batch : blockIdx.x / nqb;
    int q0 = (a.causal ? nqb - 1 - (int)(blockIdx.x / a.batch) : (int)(blockIdx.x % nqb)) * RB;
    const uint16_t *q = (const uint16_t *)a.q + batch_offset(a.qs, b, a.inner) + q0 * a.qs[2];
    const uint16_t *go = (const uint16_t *)a.go + batch_offset(a.gs, b, a.inner) + q0 * a.gs[2];
    const uint16_t *k = (const uint16_t *)a.k + batch_offset(a.ks, b, a.inner);
    const uint16_t *v = (const uint16_t *)a.v + batch_offset(a.vs, b, a.inner);
    int lane = threadIdx.x % 32, w0 = (threadIdx.x / 32) * 16, t = lane % 4;
    int rows[2] = {q0 + w0 + lane / 4, q0 + w0 + lane / 4 + 8}; /* accumulator rows 0-1, 2-3 */
    float lse2[2], dd[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        bool in = rows[h] < a.l;
        lse2[h] = in ? a.lse[b * a.l + rows[h]] * LOG2E : 0.0f;
        dd[h] = in ? a.dsum[b * a.l + rows[h]] : 0.0f;
    }
    /* keys past the block's last query are masked for all of its rows */
    int kend = a.causal ? min(a.s, q0 + RB) : a.s;
    int steps = (kend + ST - 1) / ST;

    /* step j's keys and values into buffer buf */
    auto copy = [&](int j, int buf) {
        int kb = j * ST, n = min(ST, a.s - kb);
        fill_tile<ST, D, LD, NTM>(ks + buf * ST, k + kb * a.ks[2], a.ks[2], n, a.e, a.vec);
        fill_tile<ST, D, LD, NTM>(vs + buf * ST, v + kb * a.vs[2], a.vs[2], n, a.e, a.vec);
    };
    /* the block's queries and dO and step 0's copies, one group */
    fill_tile<RB, D, LD, NTM>(qt, q, a.qs[2], min(RB, a.l - q0), a.e, a.vec);
    fill_tile<RB, D, LD, NTM>(gt, go, a.gs[2], min(RB, a.l - q0), a.e, a.vec);
    copy(0, 0);
    cp_commit();

    float dq[D / 8][4];
    zero<D>(dq);
    pipeline<NS>(steps, copy, [&](int i, int buf) {
        int kb = i * ST;
        const Row *kt = ks + buf * ST, *vt = vs + buf * ST;

        /* S = q k^T and dP = dO v^T: the warp's 16 queries by ST keys */
        float s[ST / 8][4], dp[ST / 8][4];
        zero<ST>(s);
        zero<ST>(dp);
        mma_abt<H, D, ST, LD>(s, qt, w0, kt, lane);
        mma_abt<H, D, ST, LD>(dp, gt, w0, vt, lane);

        dq_grads<ST>(a, s, dp, kb, q0, rows, lse2, dd, t); /* dS */
        /* dQ += dS k */
        mma_pb<H, D, ST, LD>(dq, dp, kt, lane);
    });

    grad_out_mma<H, D>((uint16_t *)a.dq + batch_offset(a.dqs, b, a.inner), a.dqs[2], dq, q0 + w0,
                       a.l, a.e, a.scale, lane);
}

/* ---- launch ------------------------------------------------------------------------------- */

/* Step 1, D, for either path: 16-bit rows of whole 16-byte packs in
 * packs, others a warp a row, element by element. */
template <typename E> void launch_dsum(cudaStream_t stream, const BwdArgs &a)
{
    i64 rows = a.batch * a.l;
    if constexpr (sizeof(E) == 2) {
        if (a.vec && a.out_vec && a.e % 8 == 0) {
            attention_bwd_dsum16<E>
                <<<(unsigned)((rows + NT / 8 - 1) / (NT / 8)), NT, 0, stream>>>(a);
            return;
        }
    }
    attention_bwd_dsum<E><<<(unsigned)((rows + NT / 32 - 1) / (NT / 32)), NT, 0, stream>>>(a);
}

} // namespace

template <typename E> void abwd::dq_round(cudaStream_t stream, const BwdArgs &a)
{
    i64 threads = a.batch * a.l * 8;
    attention_bwd_dq_round<E><<<(unsigned)((threads + NT - 1) / NT), NT, 0, stream>>>(a);
}

template void abwd::dq_round<float>(cudaStream_t, const BwdArgs &);
template void abwd::dq_round<__half>(cudaStream_t, const BwdArgs &);
template void abwd::dq_round<__nv_bfloat16>(cudaStream_t, const BwdArgs &);

namespace {

template <typename E, int D> bool launch(cudaStream_t stream, int device, const BwdArgs &a)
{
    static std::atomic<unsigned long long> set_kv{0}, set_q{0};
    int bytes = Smem<D>::bytes;
    if (!smem_allowed(attention_bwd_dkv<E, D>, bytes, device, set_kv) ||
        !smem_allowed(attention_bwd_dq<E, D>, bytes, device, set_q))
        return false;
    launch_dsum<E>(stream, a);
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

/* The calling thread's runs that summed dq with atomic adds. */
thread_local uint64_t atomic_runs = 0;

/* float32: the register-tiled kernel where a.dqacc is given (the caller
 * checked f32_takes) and the device gives it its shared memory, else the
 * FMA kernels. */
bool launch_float(cudaStream_t stream, int device, const BwdArgs &given)
{
    BwdArgs a = given;
    if (a.dqacc && f32_ready(device)) {
        launch_dsum<float>(stream, a);
        f32_launch(stream, a);
        atomic_runs++;
        return true;
    }
    a.dqacc = nullptr;
    return launch<float>(stream, device, a);
}

/* The tensor core path; false, queuing nothing, where the device will not
 * give the kernels their shared memory. Its grids are no larger than the
 * float32 path's (blocks of 64 rows, not 32). */
std::atomic<int> dkv_variant{0}; /* DKV_SHAPES' index for head dims up to 64 */

/* The dK/dV kernel of shape ST, MINB, and dQ's; false, queuing nothing,
 * where the device will not give them their shared memory. */
template <typename H, int D, int ST, int MINB, int NS>
bool launch_mma_as(cudaStream_t stream, int device, const BwdArgs &a)
{
    static std::atomic<unsigned long long> set_kv{0}, set_q{0};
    int kv_bytes = MmaSmem<D, ST, NS>::bytes;
    int q_bytes = MmaSmem<D, (D <= 64 ? 64 : 32), NS>::bytes;
    if (!smem_allowed(attention_bwd_dkv_mma<H, D, ST, MINB, NS>, kv_bytes, device, set_kv) ||
        !smem_allowed(attention_bwd_dq_mma<H, D, NS>, q_bytes, device, set_q))
        return false;
    launch_dsum<H>(stream, a);
    unsigned gkv = (unsigned)(a.batch * ((a.s + RB - 1) / RB));
    unsigned gq = (unsigned)(a.batch * ((a.l + RB - 1) / RB));
    attention_bwd_dkv_mma<H, D, ST, MINB, NS><<<gkv, NTM, kv_bytes, stream>>>(a);
    attention_bwd_dq_mma<H, D, NS><<<gq, NTM, q_bytes, stream>>>(a);
    return true;
}

template <typename H, int D, int V>
bool launch_variant(cudaStream_t stream, int device, const BwdArgs &a)
{
    constexpr DkvShape sh = DKV_SHAPES[V];
    return launch_mma_as<H, D, sh.st, sh.minb, sh.ns>(stream, device, a);
}

/* The tensor core path; its grids are no larger than the float32 path's
 * (blocks of 64 rows, not 32). */
template <typename H, int D> bool launch_mma(cudaStream_t stream, int device, const BwdArgs &a)
{
    if constexpr (D > 64) {
        return launch_mma_as<H, D, MmaSmem<D>::ST, 0, 2>(stream, device, a);
    } else {
        switch (dkv_variant.load(std::memory_order_relaxed)) {
        case 1: return launch_variant<H, D, 1>(stream, device, a);
        case 2: return launch_variant<H, D, 2>(stream, device, a);
        case 3: return launch_variant<H, D, 3>(stream, device, a);
        case 4: return launch_variant<H, D, 4>(stream, device, a);
        default: return launch_variant<H, D, 0>(stream, device, a);
        }
    }
}

/* tc__k_nn_attention_backward_set_fma's switch, and the calling thread's
 * runs of the tensor core paths. */
std::atomic<bool> force_fma{false};
thread_local uint64_t mma_runs = 0;

/* tc__k_nn_attention_backward_set_sm90's switch: the Hopper kernels where
 * they take the problem (true, the default), or the mma.sync ones. */
std::atomic<bool> sm90_on{true};
thread_local uint64_t sm90_runs = 0;

/* Whether the Hopper kernels would take a 16-bit problem on a device of
 * compute capability 9.0 (hopper), the test hooks' settings included. */
bool sm90_wanted(bool hopper, const BwdArgs &a)
{
    return hopper && !force_fma.load(std::memory_order_relaxed) &&
           sm90_on.load(std::memory_order_relaxed) && sm90_takes(a);
}

/* float16 and bfloat16: the tensor core path unless the test hook says
 * otherwise (or the device refuses its shared memory), else the float32
 * one. On compute capability 9.0 the Hopper kernels take what they can,
 * summing dq with atomic adds where a.dqacc is given; the other kernels
 * never read it. */
template <typename H>
bool launch_half(cudaStream_t stream, int device, bool hopper, const BwdArgs &given)
{
    BwdArgs a = given;
    if (sm90_wanted(hopper, a) && sm90_ready<H>(device, a)) {
        launch_dsum<H>(stream, a);
        sm90_launch<H>(stream, a);
        mma_runs++;
        sm90_runs++;
        atomic_runs += a.dqacc != nullptr;
        return true;
    }
    a.dqacc = nullptr;
    if (!force_fma.load(std::memory_order_relaxed)) {
        bool ran = a.e <= 32   ? launch_mma<H, 32>(stream, device, a)
                   : a.e <= 64 ? launch_mma<H, 64>(stream, device, a)
                               : launch_mma<H, 128>(stream, device, a);
        if (ran) {
            mma_runs++;
            return true;
        }
    }
    return launch<H>(stream, device, a);
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

/* D's bytes in the scratch: dq's float32 sums start on the next 256-byte
 * boundary. */
static size_t d_bytes(const tc__nn_attention_bwd *x)
{
    return ((size_t)(x->batch * x->l) * sizeof(float) + 255) / 256 * 256;
}

/* x as the kernels read it, D in dsum (dqacc NULL). */
static BwdArgs args_of(const tc__nn_attention_bwd *x, float *dsum)
{
    BwdArgs a;
    a.q = x->q, a.k = x->k, a.v = x->v, a.o = x->out, a.go = x->grad_out;
    a.lse = x->lse, a.dsum = dsum, a.dqacc = nullptr;
    a.dq = x->dq, a.dk = x->dk, a.dv = x->dv;
    for (int i = 0; i < 3; i++)
        a.qs[i] = x->q_strides[i], a.ks[i] = x->k_strides[i], a.vs[i] = x->v_strides[i],
        a.os[i] = x->out_strides[i], a.gs[i] = x->go_strides[i], a.dqs[i] = x->dq_strides[i],
        a.dks[i] = x->dk_strides[i], a.dvs[i] = x->dv_strides[i];
    a.inner = x->inner, a.batch = x->batch;
    a.l = (int)x->l, a.s = (int)x->s, a.e = (int)x->e;
    a.scale = (float)x->scale;
    a.scale_log2 = (float)x->scale * LOG2E;
    a.causal = x->causal;
    a.vec = aligned(x->q, x->q_strides, 8) && aligned(x->k, x->k_strides, 8) &&
            aligned(x->v, x->v_strides, 8) && aligned(x->grad_out, x->go_strides, 8);
    a.out_vec = aligned(x->out, x->out_strides, 8);
    a.dq_vec = aligned(x->dq, x->dq_strides, 16 / tc_dtype_size(x->dtype)) && x->e % 8 == 0;
    return a;
}

/* Whether dq is summed with atomic adds, unless tc_use_deterministic_algorithms
 * is on: 16-bit problems on Hopper's kernels, float32 ones on the
 * register-tiled kernel (compute capability 8.0 and newer). */
static bool atomic_dq(const tc__nn_attention_bwd *x, const BwdArgs &a, int cc_major, int cc_minor)
{
    if (x->deterministic)
        return false;
    if (x->dtype == TC_FLOAT32)
        return cc_major >= 8 && f32_takes(a);
    return sm90_wanted(cc_major == 9 && cc_minor == 0, a);
}

extern "C" size_t tc__k_nn_attention_backward_scratch(int cc_major, int cc_minor,
                                                      const tc__nn_attention_bwd *x)
{
    if (!tc__k_nn_attention_backward_takes(x) ||
        !atomic_dq(x, args_of(x, nullptr), cc_major, cc_minor))
        return d_bytes(x);
    return d_bytes(x) + (size_t)(x->batch * x->l) * 64 * sizeof(float);
}

extern "C" bool tc__k_nn_attention_backward(cudaStream_t stream, int device, int cc_major,
                                            int cc_minor, const tc__nn_attention_bwd *x,
                                            void *scratch)
{
    if (!tc__k_nn_attention_backward_takes(x))
        return false;
    BwdArgs a = args_of(x, (float *)scratch);
    if (atomic_dq(x, a, cc_major, cc_minor))
        a.dqacc = (float *)((char *)scratch + d_bytes(x));
    if (x->dtype == TC_FLOAT32)
        return launch_float(stream, device, a);
    bool hopper = cc_major == 9 && cc_minor == 0;
    if (x->dtype == TC_BFLOAT16)
        return launch_half<__nv_bfloat16>(stream, device, hopper, a);
    return launch_half<__half>(stream, device, hopper, a);
}

extern "C" bool tc__k_nn_attention_backward_set_sm90(bool on)
{
    return sm90_on.exchange(on, std::memory_order_relaxed);
}

extern "C" uint64_t tc__k_nn_attention_backward_sm90_count(void) { return sm90_runs; }

extern "C" uint64_t tc__k_nn_attention_backward_atomic_count(void) { return atomic_runs; }

extern "C" void tc__k_nn_attention_backward_set_fma(bool fma)
{
    force_fma.store(fma, std::memory_order_relaxed);
}

extern "C" uint64_t tc__k_nn_attention_backward_mma_count(void) { return mma_runs; }

extern "C" int tc__k_nn_attention_backward_set_variant(int variant)
{
    int n = (int)(sizeof DKV_SHAPES / sizeof *DKV_SHAPES);
    if (variant < 0 || variant >= n)
        return n;
    dkv_variant.store(variant, std::memory_order_relaxed);
    return n;
}
