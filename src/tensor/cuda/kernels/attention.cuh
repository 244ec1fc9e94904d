/* What the fused attention forward's kernels share across their files
 * (attention.cu: the mma.sync and float32 kernels; attention_sm90.cu: the
 * 16-bit one on Hopper): the problem as the kernels read it, the blocks'
 * shape and their order. Not installed. */
#ifndef TCUDA_KERNELS_ATTENTION_CUH
#define TCUDA_KERNELS_ATTENTION_CUH

#include "common.cuh"

namespace tcuda_kernels { /* graph_pdl.c knows tcuda's kernels by this name */
namespace afwd {

using tck::i64;

constexpr int BM = 64; /* query rows of a block */
constexpr int BN = 64; /* keys of one step */
constexpr float LOG2E = 1.4426950408889634f;
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
