/* Fused attention for scaled_dot_product_attention: softmax(scale * q k^T,
 * causal mask optional) v in one kernel, the [l, s] scores never written to
 * memory. A block takes 64 query rows of one batch entry and walks the keys
 * in blocks of 64 (up to the diagonal when causal): keys and values go
 * through shared memory, each query row keeps its running max and sum of
 * exp (online softmax), and the output is divided by the sum once at the
 * end. Blocks of the longest causal rows start first.
 *
 *   float16, bfloat16 (compute capability 8.0 and newer): four warps of 16
 *     query rows, on tensor cores (mma.sync m16n8k16, float32
 *     accumulation); keys and values are copied by cp.async into two
 *     buffers (the next step's copy runs while this one computes) and read
 *     into fragments by ldmatrix. The probabilities go from the scores'
 *     accumulator registers straight into the next product's operand
 *     registers, rounded to the input dtype, as flash attention does.
 *     The helpers (mma, ldmatrix, cp.async) are attention_mma.cuh's,
 *     shared with the backward.
 *   float16, bfloat16 on compute capability 9.0, head dims 33 to 64 with
 *     16-byte aligned rows: the same block and steps with Hopper's
 *     warpgroup products (attention_sm90.cu).
 *   float32: 256 threads, each 4 query rows by 4 keys of the scores and 4
 *     rows by head_dim/16 columns of the output, in float32 FMAs (no TF32:
 *     the math of PyTorch's float32 attention).
 *
 * Operands are read in place through two batch strides and a row stride
 * (the head views of a fused qkv projection need no copy), with 16-byte
 * loads when every row is aligned and element loads otherwise. Head dims up
 * to 128; the column tail past head_dim reads as zero. Where asked, each
 * row's log-sum-exp of its scaled scores (natural log, float32) is written
 * too, for the fused backward (attention_backward.cu). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <atomic>
#include <type_traits>

#include "attention.cuh"
#include "attention_mma.cuh"
#include "common.cuh"
#include "nn_kernels.h"

using namespace tck;

namespace tcuda_kernels { /* graph_pdl.c knows tcuda's kernels by this name */
namespace {

using namespace amma; /* the 16-bit path's helpers, shared with the backward */
using namespace afwd;

/* ---- float16 and bfloat16: tensor cores --------------------------------------------- */

/* Shared memory of attention_mma<T, D>: keys and values, row-major, two
 * buffers each (the next step's copies land in one while the other is
 * read); rows padded by 16 bytes, so that the 8 rows of an ldmatrix
 * matrix fall in distinct banks. */
template <int D> struct MmaSmem {
    static constexpr int LD = D + 8;
    static constexpr int bytes = 2 * 2 * BN * LD * (int)sizeof(uint16_t);
};

/* Four warps of 16 query rows a block, four blocks an SM for head dims up
 * to 64 (registers capped at 128). The arrays keep an m-tile index, MT:
 * two m-tiles a warp (32 rows, each key or value fragment serving two
 * products, blocks of two warps) measured 11% slower at GPT-2's shape
 * (BENCHMARKS.md), fewer warps hiding each other's latency. */
template <typename T, int D>
__global__ void __launch_bounds__(128, D <= 64 ? 4 : 2) attention_mma(Args a)
{
    tck_pdl_entry();
    constexpr int MT = 1, NT = 128, LD = MmaSmem<D>::LD;
    extern __shared__ uint4 smem16[];
    typedef uint16_t Tile[BN][LD];
    Tile *ks = reinterpret_cast<Tile *>(smem16), *vs = ks + 2; /* ks[2], vs[2] */
    int q0;
    i64 b;
    const uint16_t *q, *k, *v;
    block_operands(a, &q0, &b, &q, &k, &v);
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    int w0 = warp * 16 * MT;
    int kend = key_end(a, q0);

    /* the first keys and values in flight; the queries through vs[1] */
    fill_tile<BN, D, LD, NT>(ks[0], k, a.ks[2], min(BN, a.s), a.e, a.vec);
    fill_tile<BN, D, LD, NT>(vs[0], v, a.vs[2], min(BN, a.s), a.e, a.vec);
    cp_commit();
    fill_tile<BM, D, LD, NT>(vs[1], q, a.qs[2], min(BM, a.l - q0), a.e, a.vec);
    cp_commit();
    cp_wait<0>();
    __syncthreads();
    /* the warp's query rows as mma A fragments, kept in registers */
    uint32_t qf[MT][D / 16][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++) {
            int c = kk * 16 + 2 * t, r = w0 + mt * 16 + g;
            frag_a<LD>(qf[mt][kk], vs[1], r, c);
        }
    __syncthreads(); /* vs[1] is free for the second step's values */

    /* this thread's rows: g and g + 8 of each of the warp's m-tiles */
    float o[MT][D / 8][4], m[MT][2], lsum[MT][2];
    int rows[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
#pragma unroll
        for (int n = 0; n < D / 8; n++)
            o[mt][n][0] = o[mt][n][1] = o[mt][n][2] = o[mt][n][3] = 0;
        m[mt][0] = m[mt][1] = -INFINITY;
        lsum[mt][0] = lsum[mt][1] = 0;
        rows[mt][0] = q0 + w0 + mt * 16 + g;
        rows[mt][1] = rows[mt][0] + 8;
    }
    /* ldmatrix row addresses: lane's row and column within the 4 matrices */
    int kr = (lane % 8) + (lane / 16) * 8, kc = ((lane / 8) % 2) * 8; /* keys: [key][d] */
    int vr = (lane % 8) + ((lane / 8) % 2) * 8, vc = (lane / 16) * 8; /* values, transposed */
    for (int kb = 0, buf = 0; kb < kend; kb += BN, buf ^= 1) {
        int nb = kb + BN;
        if (nb < kend) { /* the next step's copies, into the other buffers */
            fill_tile<BN, D, LD, NT>(ks[buf ^ 1], k + nb * a.ks[2], a.ks[2], min(BN, a.s - nb), a.e,
                                     a.vec);
            fill_tile<BN, D, LD, NT>(vs[buf ^ 1], v + nb * a.vs[2], a.vs[2], min(BN, a.s - nb), a.e,
                                     a.vec);
            cp_commit();
            cp_wait<1>();
        } else {
            cp_wait<0>();
        }
        __syncthreads(); /* this step's keys and values are in */
        const Tile &kt = ks[buf], &vt = vs[buf];

        float s[MT][BN / 8][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int n = 0; n < BN / 8; n++)
                s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0;
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++) /* an accumulator's products spaced apart */
#pragma unroll
            for (int n = 0; n < BN / 8; n += 2) {
                uint32_t bf[4]; /* keys n and n + 1 of 8, dims kk of 16 */
                ldmatrix4<false>(bf, &kt[n * 8 + kr][kk * 16 + kc]);
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    Mma<T>::run(s[mt][n], qf[mt][kk], bf[0], bf[1]);
                    Mma<T>::run(s[mt][n + 1], qf[mt][kk], bf[2], bf[3]);
                }
            }
#pragma unroll
        for (int mt = 0; mt < MT; mt++) { /* s becomes P; m, lsum and o move on */
            softmax_step<D>(a, s[mt], m[mt], lsum[mt], o[mt], rows[mt], kb, q0, t);
        }
        /* o += p v: the scores' accumulator layout is the A operand's */
#pragma unroll
        for (int j = 0; j < BN / 16; j++) {
            uint32_t pa[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                pa[mt][0] = Mma<T>::pack(s[mt][2 * j][0], s[mt][2 * j][1]);
                pa[mt][1] = Mma<T>::pack(s[mt][2 * j][2], s[mt][2 * j][3]);
                pa[mt][2] = Mma<T>::pack(s[mt][2 * j + 1][0], s[mt][2 * j + 1][1]);
                pa[mt][3] = Mma<T>::pack(s[mt][2 * j + 1][2], s[mt][2 * j + 1][3]);
            }
#pragma unroll
            for (int n = 0; n < D / 8; n += 2) {
                uint32_t bf[4]; /* keys j of 16, dims n and n + 1 of 8 */
                ldmatrix4<true>(bf, &vt[j * 16 + vr][n * 8 + vc]);
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    Mma<T>::run(o[mt][n], pa[mt], bf[0], bf[1]);
                    Mma<T>::run(o[mt][n + 1], pa[mt], bf[2], bf[3]);
                }
            }
        }
        __syncthreads(); /* done with this step's buffers before they refill */
    }

    uint16_t *out = (uint16_t *)a.o + batch_offset(a.os, b, a.inner);
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
        write_rows<T, D>(a, out, o[mt], m[mt], lsum[mt], rows[mt], b, t);
}

/* ---- float32: FMAs ---------------------------------------------------------------------- */

/* Four floats of row `src` from column `col`, zeros past e. */
__device__ __forceinline__ float4 load4(const float *src, int col, int e, bool vec)
{
    if (vec && col + 4 <= e)
        return *reinterpret_cast<const float4 *>(src + col);
    float4 r;
    r.x = col < e ? src[col] : 0.0f;
    r.y = col + 1 < e ? src[col + 1] : 0.0f;
    r.z = col + 2 < e ? src[col + 2] : 0.0f;
    r.w = col + 3 < e ? src[col + 3] : 0.0f;
    return r;
}

/* rows [0, n) of a 64-row tile, times mul, stored transposed: dst[d * ld + r]. */
template <int D>
__device__ __forceinline__ void tile_cols32(float *dst, int ld, const float *src, i64 row, int n,
                                            int e, bool vec, float mul)
{
    for (int c = threadIdx.x; c < 64 * (D / 4); c += blockDim.x) {
        int r = c % 64, col = (c / 64) * 4;
        float4 v = make_float4(0, 0, 0, 0);
        if (r < n)
            v = load4(src + r * row, col, e, vec);
        dst[(col + 0) * ld + r] = v.x * mul;
        dst[(col + 1) * ld + r] = v.y * mul;
        dst[(col + 2) * ld + r] = v.z * mul;
        dst[(col + 3) * ld + r] = v.w * mul;
    }
}

/* rows [0, n) of a 64-row tile, row-major: dst[r * ld + d]. */
template <int D>
__device__ __forceinline__ void tile_rows32(float *dst, int ld, const float *src, i64 row, int n,
                                            int e, bool vec)
{
    for (int c = threadIdx.x; c < 64 * (D / 4); c += blockDim.x) {
        int r = c / (D / 4), col = (c % (D / 4)) * 4;
        float4 v = make_float4(0, 0, 0, 0);
        if (r < n)
            v = load4(src + r * row, col, e, vec);
        *reinterpret_cast<float4 *>(&dst[r * ld + col]) = v;
    }
}

/* Shared memory of attention_f32<D>, in floats. */
template <int D> struct F32Smem {
    static constexpr int LDT = BM + 4, LDV = D + 4;
    static constexpr int floats = 2 * D * LDT + BN * LDV + BN * LDT;
};

template <int D> __global__ void __launch_bounds__(256) attention_f32(Args a)
{
    tck_pdl_entry();
    typedef F32Smem<D> L;
    constexpr int CW = D / 16; /* output columns of a thread */
    extern __shared__ float4 smem4[];
    float *qt = reinterpret_cast<float *>(smem4); /* [D][LDT]: queries, transposed, scaled */
    float *kt = qt + D * L::LDT;                  /* [D][LDT]: keys, transposed */
    float *vs = kt + D * L::LDT;                  /* [BN][LDV]: values */
    float *ps = vs + BN * L::LDV;                 /* [BN][LDT]: probabilities, key-major */
    int q0;
    i64 b;
    const float *q, *k, *v;
    block_operands(a, &q0, &b, &q, &k, &v);
    int ty = threadIdx.x / 16, tx = threadIdx.x % 16; /* rows ty*4.., keys tx*4.. */
    tile_cols32<D>(qt, L::LDT, q, a.qs[2], min(BM, a.l - q0), a.e, a.vec, a.scale_log2);

    float o[4][CW], m[4], lsum[4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        m[i] = -INFINITY, lsum[i] = 0;
#pragma unroll
        for (int c = 0; c < CW; c++)
            o[i][c] = 0;
    }
    int kend = key_end(a, q0);
    for (int kb = 0; kb < kend; kb += BN) {
        int kv = min(BN, a.s - kb);
        __syncthreads();
        tile_cols32<D>(kt, L::LDT, k + kb * a.ks[2], a.ks[2], kv, a.e, a.vec, 1.0f);
        tile_rows32<D>(vs, L::LDV, v + kb * a.vs[2], a.vs[2], kv, a.e, a.vec);
        __syncthreads();

        float s[4][4];
#pragma unroll
        for (int i = 0; i < 4; i++)
            s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0;
#pragma unroll 8
        for (int d = 0; d < D; d++) {
            float4 qv = *reinterpret_cast<const float4 *>(&qt[d * L::LDT + ty * 4]);
            float4 kv4 = *reinterpret_cast<const float4 *>(&kt[d * L::LDT + tx * 4]);
            float qa[4] = {qv.x, qv.y, qv.z, qv.w}, ka[4] = {kv4.x, kv4.y, kv4.z, kv4.w};
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++)
                    s[i][j] = fmaf(qa[i], ka[j], s[i][j]);
        }
        bool edge = kb + BN > a.s || (a.causal && kb + BN - 1 > q0);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            int row = q0 + ty * 4 + i;
            float mx = m[i];
#pragma unroll
            for (int j = 0; j < 4; j++) {
                int col = kb + tx * 4 + j;
                if (edge && (col >= a.s || (a.causal && col > row)))
                    s[i][j] = -INFINITY;
                mx = fmaxf(mx, s[i][j]);
            }
#pragma unroll
            for (int w = 1; w < 16; w *= 2)
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, w));
            float base = mx == -INFINITY ? 0.0f : mx, alpha = exp2f(m[i] - base);
            m[i] = mx;
            lsum[i] *= alpha;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                s[i][j] = exp2f(s[i][j] - base);
                lsum[i] += s[i][j];
            }
#pragma unroll
            for (int c = 0; c < CW; c++)
                o[i][c] *= alpha;
        }
#pragma unroll
        for (int j = 0; j < 4; j++)
            *reinterpret_cast<float4 *>(&ps[(tx * 4 + j) * L::LDT + ty * 4]) = make_float4(
                s[0][j], s[1][j], s[2][j], s[3][j]);
        __syncthreads();
#pragma unroll 4
        for (int j = 0; j < BN; j++) {
            float4 pv = *reinterpret_cast<const float4 *>(&ps[j * L::LDT + ty * 4]);
            float pa[4] = {pv.x, pv.y, pv.z, pv.w}, va[CW];
#pragma unroll
            for (int c = 0; c < CW; c += 2) {
                float2 w2 = *reinterpret_cast<const float2 *>(&vs[j * L::LDV + tx * CW + c]);
                va[c] = w2.x, va[c + 1] = w2.y;
            }
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int c = 0; c < CW; c++)
                    o[i][c] = fmaf(pa[i], va[c], o[i][c]);
        }
    }

    float *out = (float *)a.o + batch_offset(a.os, b, a.inner);
#pragma unroll
    for (int i = 0; i < 4; i++) {
#pragma unroll
        for (int w = 1; w < 16; w *= 2)
            lsum[i] += __shfl_xor_sync(0xffffffffu, lsum[i], w);
        int row = q0 + ty * 4 + i;
        if (row >= a.l)
            continue;
        if (a.lse && tx == 0) /* the scores are in log2 units (q was scaled by scale_log2) */
            a.lse[b * a.l + row] = m[i] * LN2 + logf(lsum[i]);
        float inv = 1.0f / lsum[i], *dst = out + row * a.os[2];
#pragma unroll
        for (int c = 0; c < CW; c++)
            if (tx * CW + c < a.e)
                dst[tx * CW + c] = o[i][c] * inv;
    }
}

/* ---- launch ------------------------------------------------------------------------------- */

template <int D> bool launch_f32(cudaStream_t stream, int device, const Args &a, unsigned grid)
{
    static std::atomic<unsigned long long> set_on{0};
    int bytes = F32Smem<D>::floats * (int)sizeof(float);
    if (!smem_allowed(attention_f32<D>, bytes, device, set_on))
        return false;
    attention_f32<D><<<grid, 256, bytes, stream>>>(a);
    return true;
}

template <typename T, int D>
bool launch_mma(cudaStream_t stream, int device, const Args &a, unsigned grid)
{
    static std::atomic<unsigned long long> set_on{0};
    if (!smem_allowed(attention_mma<T, D>, MmaSmem<D>::bytes, device, set_on))
        return false;
    attention_mma<T, D><<<grid, 128, MmaSmem<D>::bytes, stream>>>(a);
    return true;
}

template <typename T>
bool launch_mma(cudaStream_t stream, int device, const Args &a, unsigned grid, int d)
{
    return d == 32   ? launch_mma<T, 32>(stream, device, a, grid)
           : d == 64 ? launch_mma<T, 64>(stream, device, a, grid)
                     : launch_mma<T, 128>(stream, device, a, grid);
}

/* tc__k_nn_attention_set_sm90's switch, and the calling thread's runs of
 * Hopper's kernel. */
std::atomic<bool> sm90_on{true};
thread_local uint64_t sm90_runs = 0;

/* 16-bit: Hopper's kernel where the device is one and it takes the
 * problem, else mma.sync's. */
template <typename T>
bool launch_half(cudaStream_t stream, int device, bool hopper, const Args &a, unsigned grid, int d)
{
    if (hopper && sm90_on.load(std::memory_order_relaxed) && sm90_ready<T>(device, a)) {
        sm90_launch<T>(stream, a, grid);
        sm90_runs++;
        return true;
    }
    return launch_mma<T>(stream, device, a, grid, d);
}

} // namespace
} // namespace tcuda_kernels
using namespace tcuda_kernels;

extern "C" bool tc__k_nn_attention_set_sm90(bool on)
{
    return sm90_on.exchange(on, std::memory_order_relaxed);
}

extern "C" uint64_t tc__k_nn_attention_sm90_count(void) { return sm90_runs; }

extern "C" bool tc__k_nn_attention(cudaStream_t stream, int device, int cc_major, int cc_minor,
                                   const tc__nn_attention *x)
{
    bool half = x->dtype == TC_FLOAT16 || x->dtype == TC_BFLOAT16;
    if (!(half && cc_major >= 8) && x->dtype != TC_FLOAT32)
        return false;
    if (x->e < 1 || x->e > 128 || x->l < 1 || x->s < 1 || x->l > INT32_MAX || x->s > INT32_MAX ||
        !(x->scale > 0 && x->scale < HUGE_VAL))
        return false;
    int64_t nqb = (x->l + BM - 1) / BM;
    if (x->batch < 1 || x->inner < 1 || nqb > INT32_MAX / x->batch)
        return false;
    Args a;
    a.q = x->q, a.k = x->k, a.v = x->v, a.o = x->out, a.lse = x->lse;
    for (int i = 0; i < 3; i++)
        a.qs[i] = x->q_strides[i], a.ks[i] = x->k_strides[i], a.vs[i] = x->v_strides[i],
        a.os[i] = x->out_strides[i];
    a.inner = x->inner, a.batch = x->batch;
    a.l = (int)x->l, a.s = (int)x->s, a.e = (int)x->e, a.nqb = (int)nqb;
    a.scale_log2 = (float)x->scale * LOG2E;
    a.causal = x->causal;
    int64_t vec_elems = half ? 8 : 4;
    a.vec = aligned(x->q, x->q_strides, vec_elems) && aligned(x->k, x->k_strides, vec_elems) &&
            aligned(x->v, x->v_strides, vec_elems);
    int d = x->e <= 32 ? 32 : x->e <= 64 ? 64 : 128;
    unsigned grid = (unsigned)(nqb * x->batch);
    if (x->dtype == TC_FLOAT32)
        return d == 32   ? launch_f32<32>(stream, device, a, grid)
               : d == 64 ? launch_f32<64>(stream, device, a, grid)
                         : launch_f32<128>(stream, device, a, grid);
    bool hopper = cc_major == 9 && cc_minor == 0;
    if (x->dtype == TC_BFLOAT16)
        return launch_half<__nv_bfloat16>(stream, device, hopper, a, grid, d);
    return launch_half<__half>(stream, device, hopper, a, grid, d);
}
