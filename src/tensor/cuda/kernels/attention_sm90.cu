/* The fused attention forward's 16-bit kernel on Hopper (compute
 * capability 9.0, built for sm_90a): attention.cu's mma.sync kernel, block
 * for block and step for step, with its two products on warpgroup matrix
 * products (wgmma.cuh). A block is one warpgroup (four warps of 16 query
 * rows) and 64 queries; a step is 64 keys. S = q k^T reads the queries and
 * the step's keys from shared memory; o += P v takes P from the scores'
 * accumulator registers, rounded to the dtype as the mma.sync kernel does,
 * and the values MN-major from their tile. Keys and values go through two
 * buffers of cp.async copies, the next step's landing while this one
 * computes.
 *
 * Head dims 33 to 64 (tiles of 64 columns: the 128-byte swizzle's rows),
 * every operand's rows 16-byte aligned; the caller sends nothing else. The
 * online softmax, the masking and the order of the blocks are the mma.sync
 * kernel's, and so is the lse written where asked. */
#include <math.h>
#include <stdint.h>

#include <atomic>

#include "attention.cuh"
#include "attention_mma.cuh"
#include "common.cuh"
#include "wgmma.cuh"

using namespace tck;

namespace tcuda_kernels { /* graph_pdl.c knows tcuda's kernels by this name */
namespace {

using namespace afwd;
using wg::TILE;

/* the queries, then two buffers each of keys and values */
constexpr int SMEM = 5 * TILE + wg::ALIGN;

template <typename T> __global__ void __launch_bounds__(128) attention_sm90(Args a)
{
#if TC_WGMMA
    tck_pdl_entry();
    extern __shared__ unsigned char smem_f[];
    unsigned char *qt = wg::aligned_smem(smem_f), *ks = qt + TILE, *vs = ks + 2 * TILE;
    unsigned qa = (unsigned)__cvta_generic_to_shared(qt), ka = qa + TILE, va = ka + 2 * TILE;
    int q0;
    i64 b;
    const uint16_t *q, *k, *v;
    block_operands(a, &q0, &b, &q, &k, &v);
    int lane = threadIdx.x % 32, w0 = (threadIdx.x / 32) * 16, g = lane / 4, t = lane % 4;
    int kend = key_end(a, q0);

    /* the queries and the first keys and values in flight, one group */
    wg::fill(qt, q, a.qs[2], min(BM, a.l - q0), a.e);
    wg::fill(ks, k, a.ks[2], min(BN, a.s), a.e);
    wg::fill(vs, v, a.vs[2], min(BN, a.s), a.e);
    amma::cp_commit();

    /* this thread's rows: g and g + 8 of the warp's 16 */
    float o[8][4], m[2] = {-INFINITY, -INFINITY}, lsum[2] = {0, 0};
    int rows[2] = {q0 + w0 + g, q0 + w0 + g + 8};
#pragma unroll
    for (int n = 0; n < 8; n++)
        o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0;
    for (int kb = 0, buf = 0; kb < kend; kb += BN, buf ^= 1) {
        int nb = kb + BN;
        if (nb < kend) { /* the next step's copies, into the other buffers */
            wg::fill(ks + (buf ^ 1) * TILE, k + nb * a.ks[2], a.ks[2], min(BN, a.s - nb), a.e);
            wg::fill(vs + (buf ^ 1) * TILE, v + nb * a.vs[2], a.vs[2], min(BN, a.s - nb), a.e);
            amma::cp_commit();
            amma::cp_wait<1>();
        } else {
            amma::cp_wait<0>();
        }
        wg::proxy_fence(); /* the tensor cores read what cp.async wrote */
        __syncthreads();   /* this step's keys and values are in */
        unsigned kt = ka + buf * TILE, vt = va + buf * TILE;

        float s[8][4];
        wg::fence();
#pragma unroll
        for (int st = 0; st < 4; st++)
            wg::ss<T, 0>(s, wg::desc(qa + 32 * st), wg::desc(kt + 32 * st), st > 0);
        wg::commit();
        wg::wait<0>();
        wg::hold(s);

        softmax_step<64>(a, s, m, lsum, o, rows, kb, q0, t); /* s becomes P */
        /* o += p v: the scores' accumulator layout is the A operand's */
        uint32_t pf[4][4];
        wg::to_a<T>(pf, s);
        wg::fence();
#pragma unroll
        for (int st = 0; st < 4; st++)
            wg::rs<T, 1>(o, pf[st], wg::desc(vt + 2048 * st), 1);
        wg::commit();
        wg::wait<0>();
        wg::hold(o);
        __syncthreads(); /* done with this step's buffers before they refill */
    }

    write_rows<T, 64>(a, (uint16_t *)a.o + batch_offset(a.os, b, a.inner), o, m, lsum, rows, b, t);
#endif
}

} // namespace

/* Without an sm_90a build (TCUDA_HAVE_SM90A, CMakeLists.txt) the kernel is
 * empty: never ready. */
template <typename T> bool afwd::sm90_ready(int device, const Args &a)
{
    static std::atomic<unsigned long long> set_on{0};
#ifndef TCUDA_HAVE_SM90A
    (void)set_on;
    return false;
#endif
    if (a.e <= 32 || a.e > 64 || !a.vec)
        return false;
    return smem_allowed(attention_sm90<T>, SMEM, device, set_on);
}

template <typename T> void afwd::sm90_launch(cudaStream_t stream, const Args &a, unsigned grid)
{
    attention_sm90<T><<<grid, 128, SMEM, stream>>>(a);
}

template bool afwd::sm90_ready<__half>(int, const Args &);
template bool afwd::sm90_ready<__nv_bfloat16>(int, const Args &);
template void afwd::sm90_launch<__half>(cudaStream_t, const Args &, unsigned);
template void afwd::sm90_launch<__nv_bfloat16>(cudaStream_t, const Args &, unsigned);

} // namespace tcuda_kernels
