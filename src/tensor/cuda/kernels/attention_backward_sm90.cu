/* The fused attention backward's 16-bit kernels on Hopper (compute
 * capability 9.0, built for sm_90a): attention_backward.cu's dK/dV and dQ
 * kernels, block for block and step for step, with the five products on
 * warpgroup matrix products (wgmma.cuh) instead of each warp's mma.sync.
 * A block is one warpgroup (four warps) and 64 keys (dK, dV) or 64
 * queries (dQ), 16 a warp; a step is 64 queries or keys. The products
 * that read two tiles (S^T = k q^T, dP^T = v dO^T; S = q k^T, dP = dO v^T)
 * read both from shared memory; the ones that read P or dS (dV += P^T dO,
 * dK += dS^T q; dQ += dS k) take them from registers, rounded to the
 * dtype, as the mma.sync kernels do, and the other operand MN-major from
 * the same tile. So every tile is read once per product by the whole
 * warpgroup, where mma.sync has each warp read all of it: on the
 * H100 the mma.sync kernels wait on shared memory more than on their
 * tensor cores.
 *
 * Three blocks an SM (registers capped at 168: the dK/dV kernel took 172
 * uncapped, two blocks; ptxas spills nothing at the cap). Head dims 33 to
 * 64 (tiles of 64 columns, 128-byte rows: the 128-byte swizzle's rows),
 * every operand's rows 16-byte aligned (cp.async); the
 * caller sends nothing else. The masking, the scale and the order of the
 * blocks are the mma.sync kernels'; the sums run in a fixed order, so the
 * result is deterministic, but where dq is summed with atomic adds
 * (BwdArgs::dqacc, tc_use_deterministic_algorithms off): then the dK/dV
 * kernel also stores each step's dS (transposed, by stmatrix) in a tile
 * of its own, adds dS k's 64 x 64 terms to dq's float32 sums, and the dQ
 * kernel does not run. */
#include <stdint.h>

#include <atomic>

#include "attention_backward.cuh"
#include "attention_mma.cuh"
#include "common.cuh"
#include "wgmma.cuh"

using namespace tck;

namespace tcuda_kernels { /* graph_pdl.c knows tcuda's kernels by this name */
namespace {

using namespace abwd;

using wg::TILE;

constexpr int ST = 64; /* queries (dK, dV) or keys (dQ) of a step */
constexpr int NS = 2;  /* the pipeline's buffers */
/* six tiles (the block's two, two buffers each of the step's two), then
 * the dK/dV kernel's lse and D; with dq's atomic sums, a tile more for dS */
constexpr int SMEM = 6 * TILE + 2 * NS * ST * (int)sizeof(float) + wg::ALIGN;
constexpr int SMEM_ADQ = SMEM + TILE;

/* d = a b^T over 64 columns: a's and b's swizzled tiles at shared
 * addresses ta and tb (K-major: step s at byte 32 s). */
template <typename H> __device__ __forceinline__ void abt(float (*d)[4], unsigned ta, unsigned tb)
{
    uint64_t da = wg::desc(ta), db = wg::desc(tb);
#pragma unroll
    for (int s = 0; s < 4; s++)
        wg::ss<H, 0>(d, da + 2 * s, db + 2 * s, s > 0);
}

/* d += f b over 64 rows of b: f from to_a, b's tile at tb (MN-major:
 * step s at row 16 s). */
template <typename H>
__device__ __forceinline__ void fb(float (*d)[4], const uint32_t (*f)[4], unsigned tb)
{
    uint64_t db = wg::desc(tb);
#pragma unroll
    for (int s = 0; s < 4; s++)
        wg::rs<H, 1>(d, f[s], db + 128 * s, 1);
}

/* d = a b over 64 columns of a: a's swizzled tile at ta (K-major: step s
 * at byte 32 s), b's at tb (MN-major: step s at row 16 s). */
template <typename H> __device__ __forceinline__ void ab(float (*d)[4], unsigned ta, unsigned tb)
{
    uint64_t da = wg::desc(ta), db = wg::desc(tb);
#pragma unroll
    for (int s = 0; s < 4; s++)
        wg::ss<H, 1>(d, da + 2 * s, db + 128 * s, s > 0);
}

/* dS, from the warp's dS^T (keys w0.. by the step's 64 queries, rounded:
 * to_a's fragments f), into the swizzled tile at shared address ts as
 * rows of queries, columns of keys: stmatrix's transposing stores, one
 * per 16 queries. Lane l names row l % 8 of 8 x 8 matrix l / 8 of each
 * store: matrix i holds queries 16 s + 8 (i / 2).., keys w0 + 8 (i % 2)..,
 * the fragment register f[s][i]. */
__device__ __forceinline__ void ds_store(unsigned ts, const uint32_t (*f)[4], int w0, int lane)
{
#if __CUDA_ARCH__ >= 900
    int i = lane / 8, r = lane % 8;
#pragma unroll
    for (int s = 0; s < 4; s++) {
        unsigned to = ts + wg::sw128(16 * s + 8 * (i / 2) + r, w0 / 8 + i % 2);
        asm volatile(
            "stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(to),
            "r"(f[s][0]), "r"(f[s][1]), "r"(f[s][2]), "r"(f[s][3])
            : "memory");
    }
#endif
}

/* dq's terms of one step (the warp's accumulators: queries q0 + w0 + g
 * and + 8, columns 8 n + 2 t and + 1) added to its float32 sums, rows
 * past l left out. */
__device__ __forceinline__ void dq_add(const BwdArgs &a, i64 b, int q0, const float (*dq)[4],
                                       int w0, int lane)
{
#if __CUDA_ARCH__ >= 900
    int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        int r = q0 + w0 + g + 8 * h;
        if (r >= a.l)
            continue;
        float *row = a.dqacc + (b * a.l + r) * 64 + 2 * t;
#pragma unroll
        for (int n = 0; n < 8; n++)
            atomicAdd(reinterpret_cast<float2 *>(row + 8 * n),
                      make_float2(dq[n][2 * h], dq[n][2 * h + 1]));
    }
#endif
}

/* dK and dV of keys k0..k0+63 of entry b: warp w's keys k0 + 16w.., the
 * rows of its accumulators; the query steps' columns. ADQ: dq's terms
 * too, dS k over the block's keys, added to a.dqacc (the dQ kernel does
 * not run). */
template <typename H, bool ADQ>
__global__ void __launch_bounds__(NTM, 3) attention_bwd_dkv_sm90(BwdArgs a)
{
#if TC_WGMMA
    tck_pdl_entry();
    extern __shared__ unsigned char smem_w[];
    unsigned char *kt = wg::aligned_smem(smem_w), *vt = kt + TILE, *qs = vt + TILE;
    unsigned char *gs = qs + NS * TILE;                                    /* NS buffers each */
    float(*rs)[2][ST] = reinterpret_cast<float(*)[2][ST]>(gs + NS * TILE); /* [buf]: lse, D */
    unsigned ka = (unsigned)__cvta_generic_to_shared(kt), va = ka + TILE, qa = va + TILE;
    unsigned ga = qa + NS * TILE;
    unsigned dsa = ga + NS * TILE + 2 * NS * ST * (int)sizeof(float); /* ADQ: dS, rows of queries */
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
    int qstart = a.causal ? k0 : 0; /* earlier queries see none of these keys */
    int steps = qstart < a.l ? (a.l - qstart + ST - 1) / ST : 0;

    auto copy = [&](int j, int buf) {
        int q0 = qstart + j * ST, n = min(ST, a.l - q0);
        wg::fill(qs + buf * TILE, q + q0 * a.qs[2], a.qs[2], n, a.e);
        wg::fill(gs + buf * TILE, go + q0 * a.gs[2], a.gs[2], n, a.e);
        rows_async<ST>(rs[buf], lse, dsum, q0, a.l);
    };
    wg::fill(kt, k, a.ks[2], min(RB, a.s - k0), a.e);
    wg::fill(vt, v, a.vs[2], min(RB, a.s - k0), a.e);
    if (steps > 0)
        copy(0, 0);
    cp_commit();

    float dk[8][4], dv[8][4];
    zero<64>(dk);
    zero<64>(dv);
    pipeline<NS, true>(steps, copy, [&](int i, int buf) {
        int q0 = qstart + i * ST;
        unsigned qt = qa + buf * TILE, gt = ga + buf * TILE;

        /* S^T = k q^T and dP^T = v dO^T: 64 keys by 64 queries */
        float st[8][4], dpt[8][4];
        wg::fence();
        abt<H>(st, ka, qt);
        abt<H>(dpt, va, gt);
        wg::commit();
        wg::wait<0>();
        wg::hold(st);
        wg::hold(dpt);

        dkv_probs<ST>(a, st, dpt, rs[buf], q0, k0, keys, t); /* P^T and dS^T */
        /* dV += P^T dO, dK += dS^T q */
        uint32_t pf[4][4], sf[4][4];
        wg::to_a<H>(pf, st);
        wg::to_a<H>(sf, dpt);
        if constexpr (ADQ) {
            ds_store(dsa, sf, w0, lane);
            wg::proxy_fence(); /* the dq product reads dS through the async proxy */
        }
        wg::fence();
        fb<H>(dv, pf, gt);
        fb<H>(dk, sf, qt);
        wg::commit();
        if constexpr (ADQ) {
            /* dq's terms = dS k, once every warp has stored its part of dS
             * (the last step's product read the tile before its wait, which
             * came before this step's first barrier) */
            __syncthreads();
            float dq[8][4];
            wg::fence();
            ab<H>(dq, dsa, ka);
            wg::commit();
            wg::wait<0>();
            wg::hold(dq);
            dq_add(a, b, q0, dq, w0, lane);
        }
        wg::wait<0>(); /* done with the step's tiles before the next barrier */
        wg::hold(dv);
        wg::hold(dk);
    });

    grad_out_mma<H, 64>((uint16_t *)a.dk + batch_offset(a.dks, b, a.inner), a.dks[2], dk, k0 + w0,
                        a.s, a.e, a.scale, lane);
    grad_out_mma<H, 64>((uint16_t *)a.dv + batch_offset(a.dvs, b, a.inner), a.dvs[2], dv, k0 + w0,
                        a.s, a.e, 1.0f, lane);
#endif
}

/* dQ of queries q0..q0+63 of entry b: warp w's queries q0 + 16w.., the
 * rows of its accumulators; the key steps' columns. */
template <typename H> __global__ void __launch_bounds__(NTM, 3) attention_bwd_dq_sm90(BwdArgs a)
{
#if TC_WGMMA
    tck_pdl_entry();
    extern __shared__ unsigned char smem_w[];
    unsigned char *qt = wg::aligned_smem(smem_w), *gt = qt + TILE, *ks = gt + TILE;
    unsigned char *vs = ks + NS * TILE; /* NS buffers each */
    unsigned qa = (unsigned)__cvta_generic_to_shared(qt), ga = qa + TILE, ka = ga + TILE;
    unsigned va = ka + NS * TILE;
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
    int kend = a.causal ? min(a.s, q0 + RB) : a.s; /* later keys are masked for every row */
    int steps = (kend + ST - 1) / ST;

    auto copy = [&](int j, int buf) {
        int kb = j * ST, n = min(ST, a.s - kb);
        wg::fill(ks + buf * TILE, k + kb * a.ks[2], a.ks[2], n, a.e);
        wg::fill(vs + buf * TILE, v + kb * a.vs[2], a.vs[2], n, a.e);
    };
    wg::fill(qt, q, a.qs[2], min(RB, a.l - q0), a.e);
    wg::fill(gt, go, a.gs[2], min(RB, a.l - q0), a.e);
    copy(0, 0);
    cp_commit();

    float dq[8][4];
    zero<64>(dq);
    pipeline<NS, true>(steps, copy, [&](int i, int buf) {
        int kb = i * ST;
        unsigned kt = ka + buf * TILE, vt = va + buf * TILE;

        /* S = q k^T and dP = dO v^T: 64 queries by 64 keys */
        float s[8][4], dp[8][4];
        wg::fence();
        abt<H>(s, qa, kt);
        abt<H>(dp, ga, vt);
        wg::commit();
        wg::wait<0>();
        wg::hold(s);
        wg::hold(dp);

        dq_grads<ST>(a, s, dp, kb, q0, rows, lse2, dd, t); /* dS */
        /* dQ += dS k */
        uint32_t sf[4][4];
        wg::to_a<H>(sf, dp);
        wg::fence();
        fb<H>(dq, sf, kt);
        wg::commit();
        wg::wait<0>(); /* done with the step's tiles before the next barrier */
        wg::hold(dq);
    });

    grad_out_mma<H, 64>((uint16_t *)a.dq + batch_offset(a.dqs, b, a.inner), a.dqs[2], dq, q0 + w0,
                        a.l, a.e, a.scale, lane);
#endif
}

} // namespace

bool abwd::sm90_takes(const BwdArgs &a) { return a.e > 32 && a.e <= 64 && a.vec; }

/* Without an sm_90a build (TCUDA_HAVE_SM90A, CMakeLists.txt) the kernels
 * are empty: never ready. */
template <typename H> bool abwd::sm90_ready(int device, const BwdArgs &a)
{
    static std::atomic<unsigned long long> set_kv{0}, set_q{0}, set_adq{0};
#ifndef TCUDA_HAVE_SM90A
    (void)set_kv, (void)set_q, (void)set_adq;
    return false;
#endif
    if (!sm90_takes(a))
        return false;
    if (a.dqacc)
        return smem_allowed(attention_bwd_dkv_sm90<H, true>, SMEM_ADQ, device, set_adq);
    return smem_allowed(attention_bwd_dkv_sm90<H, false>, SMEM, device, set_kv) &&
           smem_allowed(attention_bwd_dq_sm90<H>, SMEM, device, set_q);
}

template <typename H> void abwd::sm90_launch(cudaStream_t stream, const BwdArgs &a)
{
    unsigned gkv = (unsigned)(a.batch * ((a.s + RB - 1) / RB));
    if (a.dqacc) {
        attention_bwd_dkv_sm90<H, true><<<gkv, NTM, SMEM_ADQ, stream>>>(a);
        dq_round<H>(stream, a);
        return;
    }
    unsigned gq = (unsigned)(a.batch * ((a.l + RB - 1) / RB));
    attention_bwd_dkv_sm90<H, false><<<gkv, NTM, SMEM, stream>>>(a);
    attention_bwd_dq_sm90<H><<<gq, NTM, SMEM, stream>>>(a);
}

template bool abwd::sm90_ready<__half>(int, const BwdArgs &);
template bool abwd::sm90_ready<__nv_bfloat16>(int, const BwdArgs &);
template void abwd::sm90_launch<__half>(cudaStream_t, const BwdArgs &);
template void abwd::sm90_launch<__nv_bfloat16>(cudaStream_t, const BwdArgs &);

} // namespace tcuda_kernels
