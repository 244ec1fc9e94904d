/* What the fused attention backward's kernels share across their files
 * (attention_backward.cu: D, the float32 FMA path and the 16-bit tensor
 * core path; attention_backward_sm90.cu: the 16-bit one on Hopper): the
 * problem as the kernels read it, the blocks' shape, the step pipeline and
 * the asynchronous copy of the query rows' lse and D. Not installed. */
#ifndef TCUDA_KERNELS_ATTENTION_BACKWARD_CUH
#define TCUDA_KERNELS_ATTENTION_BACKWARD_CUH

#include "attention_mma.cuh"
#include "common.cuh"
#include "wgmma.cuh"

namespace tcuda_kernels { /* graph_pdl.c knows tcuda's kernels by this name */
namespace abwd {

using amma::cp_commit;
using amma::cp_wait;
using amma::Mma;
using tck::i64;

/* One backward: operands read in place through two batch strides and a
 * row stride (inner: the second level's size), gradients written dense. */
struct BwdArgs {
    const void *q, *k, *v, *o, *go;
    const float *lse;
    float *dsum;  /* D, [batch, l] */
    float *dqacc; /* NULL, or dq's float32 sums [batch, l, 64], summed with atomic adds */
    void *dq, *dk, *dv;
    i64 qs[3], ks[3], vs[3], os[3], gs[3];
    i64 dqs[3], dks[3], dvs[3]; /* the gradients' strides, as the operands' */
    i64 inner, batch;
    int l, s, e;
    float scale;
    float scale_log2; /* scale * log2(e): the tensor core path uses exp2 */
    bool causal;
    bool vec;     /* every operand's rows are 16-byte aligned (the tensor core paths) */
    bool out_vec; /* and O's, for D's 16-byte packs */
    bool dq_vec;  /* dq's rows are 16-byte aligned and e a multiple of 8: dq_round's packs */
};

__device__ __forceinline__ i64 batch_offset(const i64 *st, i64 b, i64 inner)
{
    return (b / inner) * st[0] + (b % inner) * st[1];
}

constexpr int RB = 64;   /* keys (dK, dV) or queries (dQ) of a block, 16 a warp */
constexpr int NTM = 128; /* threads of a block: four warps */
using tck::LOG2E;

/* The step loop of both gradient kernels, over `steps` steps: before
 * step i, copy(j, buf) has put the copies of step j = i + NS - 1 in flight
 * into buffer buf (nothing past the last step), and run(i, buf) then
 * computes step i from buffer i % NS. The caller has committed one group
 * of copies with its block's own tiles and step 0's. Each step waits for
 * its own group, then one barrier both publishes the step's tiles and
 * tells that every warp is done with the previous step's buffer, the one
 * this step refills: one barrier a step. ASYNC_READS: the step's tiles are
 * read by the async proxy, so each thread fences its copies first. */
template <int NS, bool ASYNC_READS = false, typename Copy, typename Run>
__device__ __forceinline__ void pipeline(int steps, Copy copy, Run run)
{
    /* steps 1 .. NS - 2 in flight before the loop, a group each */
#pragma unroll
    for (int j = 1; j < NS - 1; j++) {
        if (j < steps)
            copy(j, j);
        cp_commit();
    }
    for (int i = 0; i < steps; i++) {
        cp_wait<NS - 2>();         /* step i's group has landed (later ones may not) */
        if constexpr (ASYNC_READS) /* the tensor cores read them through the async proxy */
            wg::proxy_fence();
        __syncthreads();
        int j = i + NS - 1;
        if (j < steps)
            copy(j, j % NS);
        cp_commit(); /* empty past the last step: the group count stays even */
        run(i, i % NS);
    }
    cp_wait<0>(); /* nothing of ours in flight at the exit */
}

/* lse and D of queries q0..q0+ST-1 (0 past l) into rs[0][.] and
 * rs[1][.], by the block's first ST threads, as cp.async copies of 4
 * bytes in the caller's next commit group: a plain load here would hold
 * its thread, and with it the block at the step's barrier, for a global
 * load's latency every step. */
template <int ST>
__device__ __forceinline__ void rows_async(float (*rs)[ST], const float *lse, const float *dsum,
                                           int q0, int l)
{
    for (int r = threadIdx.x; r < ST; r += blockDim.x) {
        int bytes = q0 + r < l ? 4 : 0; /* 0: zero-filled */
        const float *from[2] = {bytes ? lse + q0 + r : lse, bytes ? dsum + q0 + r : dsum};
#pragma unroll
        for (int i = 0; i < 2; i++) {
#if __CUDA_ARCH__ >= 800
            unsigned to = (unsigned)__cvta_generic_to_shared(&rs[i][r]);
            asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(to), "l"(from[i]),
                         "r"(bytes));
#endif
        }
    }
}

/* N/8 accumulators of 16 rows by 8 columns, zeroed. */
template <int N> __device__ __forceinline__ void zero(float (*acc)[4])
{
#pragma unroll
    for (int n = 0; n < N / 8; n++)
        acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0;
}

/* Rows r0 + lane/4 and + 8 of a [rows, e] gradient (rows `ld` apart),
 * those below n, from the warp's accumulators acc (D/8 of 16 rows by 8
 * columns) times mul, rounded to H; columns past e are not written. */
template <typename H, int D>
__device__ __forceinline__ void grad_out_mma(uint16_t *dst, i64 ld, const float (*acc)[4], int r0,
                                             int n, int e, float mul, int lane)
{
    int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        int r = r0 + g + 8 * h;
        if (r >= n)
            continue;
        uint16_t *row = dst + (i64)r * ld;
#pragma unroll
        for (int c = 0; c < D / 8; c++) {
            int col = c * 8 + 2 * t;
            if (col < e)
                row[col] = Mma<H>::bits(acc[c][2 * h] * mul);
            if (col + 1 < e)
                row[col + 1] = Mma<H>::bits(acc[c][2 * h + 1] * mul);
        }
    }
}

/* The dK/dV kernels' step (tensor cores): st holds S^T and dpt dP^T of
 * the warp's 16 keys (accumulator rows 0-1: keys[0], 2-3: keys[1]) by ST
 * queries from q0 (columns 8n + 2t + r % 2), rs the queries' lse and D.
 * Turns them into P^T = 2^(S^T * scale_log2 - lse * log2(e)) (lse is
 * natural log) and dS^T = P^T * (dP^T - D), 0 where masked or past l or
 * s; k0 is the block's first key. The exponentials run for every element
 * and the mask is a select after them on the blocks that have one: a
 * branch an element costs more than the exponential. */
template <int ST>
__device__ __forceinline__ void dkv_probs(const BwdArgs &a, float (*st)[4], float (*dpt)[4],
                                          const float (*rs)[ST], int q0, int k0, const int *keys,
                                          int t)
{
#pragma unroll
    for (int n = 0; n < ST / 8; n++) {
        float2 lse = *reinterpret_cast<const float2 *>(&rs[0][n * 8 + 2 * t]);
        float lse2[2] = {lse.x * LOG2E, lse.y * LOG2E};
#pragma unroll
        for (int r = 0; r < 4; r++) /* r: the accumulator register */
            st[n][r] = amma::ex2(fmaf(st[n][r], a.scale_log2, -lse2[r & 1]));
    }
    if (q0 + ST > a.l || k0 + RB > a.s || (a.causal && q0 < k0 + RB - 1)) {
#pragma unroll
        for (int n = 0; n < ST / 8; n++)
#pragma unroll
            for (int r = 0; r < 4; r++) {
                int col = q0 + n * 8 + 2 * t + (r & 1); /* the query */
                int key = keys[r >> 1];
                bool seen = col < a.l && key < a.s && !(a.causal && key > col);
                st[n][r] = seen ? st[n][r] : 0.0f;
            }
    }
#pragma unroll
    for (int n = 0; n < ST / 8; n++) {
        float2 d = *reinterpret_cast<const float2 *>(&rs[1][n * 8 + 2 * t]);
        float dd[2] = {d.x, d.y};
#pragma unroll
        for (int r = 0; r < 4; r++)
            dpt[n][r] = st[n][r] * (dpt[n][r] - dd[r & 1]);
    }
}

/* The dQ kernels' step: s holds S and dp dP of the warp's 16 queries
 * (accumulator rows 0-1: rows[0], 2-3: rows[1], whose lse * log2(e) and D
 * are lse2 and dd) by ST keys from kb (columns 8n + 2t + r % 2); q0 is the
 * block's first query. Turns dp into dS = P * (dP - D), 0 where masked or
 * past l or s (s is left as it was); the mask is dkv_probs's select. */
template <int ST>
__device__ __forceinline__ void dq_grads(const BwdArgs &a, const float (*s)[4], float (*dp)[4],
                                         int kb, int q0, const int *rows, const float *lse2,
                                         const float *dd, int t)
{
    bool edge = kb + ST > a.s || q0 + RB > a.l || (a.causal && kb + ST - 1 > q0);
#pragma unroll
    for (int n = 0; n < ST / 8; n++)
#pragma unroll
        for (int r = 0; r < 4; r++) {                           /* r: the accumulator register */
            int h = r >> 1, col = kb + n * 8 + 2 * t + (r & 1); /* the key */
            float p = amma::ex2(fmaf(s[n][r], a.scale_log2, -lse2[h]));
            if (edge)
                p = rows[h] < a.l && col < a.s && !(a.causal && col > rows[h]) ? p : 0.0f;
            dp[n][r] = p * (dp[n][r] - dd[h]);
        }
}

/* The 16-bit path on Hopper's warpgroup products (attention_backward_sm90.cu,
 * built for sm_90a), for head dims 33 to 64 with 16-byte aligned rows, on
 * a device of compute capability 9.0: sm90_takes says whether it takes
 * the problem; sm90_ready raises its kernels' shared memory allowance on
 * `device` (false: the device refuses it, or the problem is not one it
 * takes), sm90_launch queues its dK/dV and dQ kernels (D first: the
 * caller's, which also zeroes a.dqacc where it is not NULL: then dK/dV's
 * kernel adds dq's terms there with atomic adds, and a last kernel rounds
 * them into dq). H: __half or __nv_bfloat16. */
bool sm90_takes(const BwdArgs &a);
template <typename H> bool sm90_ready(int device, const BwdArgs &a);
template <typename H> void sm90_launch(cudaStream_t stream, const BwdArgs &a);

/* float32's register-tiled kernel (attention_backward_f32.cu), for head
 * dims up to 64, multiples of 4, with 16-byte aligned rows, dq summed with
 * atomic adds into a.dqacc (zeroed by D's kernel, the caller's): f32_takes
 * says whether it takes the problem, f32_ready raises its shared memory
 * allowance on `device` (false: refused), f32_launch queues it and
 * dq_round. */
bool f32_takes(const BwdArgs &a);
bool f32_ready(int device);
void f32_launch(cudaStream_t stream, const BwdArgs &a);

/* dq = a.scale * a.dqacc's sums, rounded to E and written through dq's
 * strides (attention_backward.cu). E: float, __half or __nv_bfloat16. */
template <typename E> void dq_round(cudaStream_t stream, const BwdArgs &a);

} // namespace abwd
} // namespace tcuda_kernels

#endif
