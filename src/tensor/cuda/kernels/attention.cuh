/* What the fused attention forward's kernels share across their files
 * (attention.cu: the mma.sync and float32 kernels; attention_sm90.cu: the
 * 16-bit one on Hopper): the problem as the kernels read it, the blocks'
 * shape and their order. Not installed. */
#ifndef TCUDA_KERNELS_ATTENTION_CUH
#define TCUDA_KERNELS_ATTENTION_CUH

#include "attention_mma.cuh"
#include "common.cuh"

namespace tcuda_kernels { /* graph_pdl.c knows tcuda's kernels by this name */
namespace afwd {

using tck::i64;

constexpr int BM = 64; /* query rows of a block */
constexpr int BN = 64; /* keys of one step */
using tck::LOG2E;
constexpr float LN2 = 0.6931471805599453f;

struct Args {
    const void *q, *k, *v;
    void *o;
    float *lse;                     /* [batch, l], NULL when not wanted */
    i64 qs[3], ks[3], vs[3], os[3]; /* outer, inner and row strides, in elements */
    i64 inner, batch;
    int l, s, e, nqb;
    float scale_log2; /* scale * log2(e): the kernels use exp2 */
    bool causal, vec;
};

__device__ __forceinline__ i64 batch_offset(const i64 *st, i64 b, i64 inner)
{
    return (b / inner) * st[0] + (b % inner) * st[1];
}

/* The block's query block (first row q0; longest causal rows first), its
 * batch entry b, and that entry's q (from row q0), k and v. */
template <typename E>
__device__ __forceinline__ void block_operands(const Args &a, int *q0, i64 *b, const E **q,
                                               const E **k, const E **v)
{
    i64 idx = blockIdx.x;
    *q0 = (int)(a.nqb - 1 - idx / a.batch) * BM;
    *b = idx % a.batch;
    *q = (const E *)a.q + batch_offset(a.qs, *b, a.inner) + *q0 * a.qs[2];
    *k = (const E *)a.k + batch_offset(a.ks, *b, a.inner);
    *v = (const E *)a.v + batch_offset(a.vs, *b, a.inner);
}

/* Keys a query block visits: up to the diagonal when causal. */
__device__ __forceinline__ int key_end(const Args &a, int q0)
{
    return a.causal ? min(a.s, q0 + BM) : a.s;
}

/* One key step's online softmax for a warp's 16 query rows (the 16-bit
 * kernels): s holds the raw scores of rows[0] (accumulator registers 0-1)
 * and rows[1] (2-3) by the BN keys from kb (columns 8n + 2t + r % 2) and
 * becomes P; m and lsum, the rows' running max (raw scores: the scale is
 * positive) and sum, move on; o, the D/8 output accumulators, is rescaled.
 * p = 2^(s * scale_log2 - max * scale_log2), one FFMA and one ex2. */
template <int D>
__device__ __forceinline__ void softmax_step(const Args &a, float (*s)[4], float *m, float *lsum,
                                             float (*o)[4], const int *rows, int kb, int q0, int t)
{
    bool edge = kb + BN > a.s || (a.causal && kb + BN - 1 > q0);
    float mx[2] = {m[0], m[1]};
#pragma unroll
    for (int n = 0; n < BN / 8; n++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            int col = kb + n * 8 + 2 * t + (i & 1);
            if (edge && (col >= a.s || (a.causal && col > rows[i >> 1])))
                s[n][i] = -INFINITY;
            mx[i >> 1] = fmaxf(mx[i >> 1], s[n][i]);
        }
    float base[2], alpha[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
        /* a row with nothing seen yet keeps 0 */
        base[r] = mx[r] == -INFINITY ? 0.0f : mx[r] * a.scale_log2;
        alpha[r] = amma::ex2(fmaf(m[r], a.scale_log2, -base[r]));
        m[r] = mx[r];
        lsum[r] *= alpha[r];
    }
#pragma unroll
    for (int n = 0; n < BN / 8; n++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            float p = amma::ex2(fmaf(s[n][i], a.scale_log2, -base[i >> 1]));
            s[n][i] = p;
            lsum[i >> 1] += p;
        }
#pragma unroll
    for (int n = 0; n < D / 8; n++) {
        o[n][0] *= alpha[0], o[n][1] *= alpha[0];
        o[n][2] *= alpha[1], o[n][3] *= alpha[1];
    }
}

/* The rows' outputs o / l (l: lsum summed over the row's four lanes)
 * rounded to T into out (rows os2 apart, columns past e not written), and
 * their lse where a.lse asks: ln(2^base * l), base the max in log2 units.
 * b: the batch entry. */
template <typename T, int D>
__device__ __forceinline__ void write_rows(const Args &a, uint16_t *out, const float (*o)[4],
                                           const float *m, const float *lsum, const int *rows,
                                           i64 b, int t)
{
#pragma unroll
    for (int r = 0; r < 2; r++) {
        float l = lsum[r];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        if (rows[r] >= a.l)
            continue;
        if (a.lse && t == 0)
            a.lse[b * a.l + rows[r]] = m[r] * a.scale_log2 * LN2 + logf(l);
        float inv = 1.0f / l;
        uint16_t *dst = out + rows[r] * a.os[2];
#pragma unroll
        for (int n = 0; n < D / 8; n++) {
            int col = n * 8 + 2 * t;
            if (col < a.e)
                dst[col] = amma::Mma<T>::bits(o[n][2 * r] * inv);
            if (col + 1 < a.e)
                dst[col + 1] = amma::Mma<T>::bits(o[n][2 * r + 1] * inv);
        }
    }
}

/* The 16-bit kernel on Hopper's warpgroup products (attention_sm90.cu,
 * built for sm_90a), for head dims 33 to 64 with 16-byte aligned rows, on
 * a device of compute capability 9.0: sm90_ready raises its shared memory
 * allowance on `device` (false: the device refuses it, or the problem is
 * not one it takes), sm90_launch queues it, `grid` blocks. T: __half or
 * __nv_bfloat16. */
template <typename T> bool sm90_ready(int device, const Args &a);
template <typename T> void sm90_launch(cudaStream_t stream, const Args &a, unsigned grid);

} // namespace afwd
} // namespace tcuda_kernels

#endif
