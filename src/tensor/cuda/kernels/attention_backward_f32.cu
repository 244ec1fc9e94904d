/* The fused attention backward's float32 kernel for head dims up to 64,
 * register-tiled: attention_backward.cu sends it float32 problems whose
 * head dim e is a multiple of 4 up to 64 and whose operands' rows are
 * 16-byte aligned, when dq may be summed with atomic adds
 * (tc_use_deterministic_algorithms off), on compute capability 8.0 and
 * newer where a block may have 154 KiB of shared memory (8.0, 9.0; not
 * 8.6 or 8.9). Everything else in float32 takes attention_backward.cu's
 * FMA kernels.
 *
 * A block of 256 threads (a 16 x 16 grid, thread (ty, tx)) takes 64 keys
 * of one batch entry and walks the query steps of 64 (from its first key
 * on when causal), computing all five products of a step:
 *   1. S^T = k q^T and dP^T = v dO^T, 64 keys by 64 queries, summed over
 *      the head dim: the thread's keys 4 ty.. and queries tx + 16 j, from
 *      16-byte chunks of both operands' rows;
 *   2. P and dS as the FMA kernels compute them (expf of the float32
 *      scores less lse, then P (dP - D)), stored [query][key] and dS also
 *      [key][query];
 *   3. dV += P^T dO and dK += dS^T q (the thread's keys 4 ty.., columns
 *      4 tx..), as outer products over the step's queries; and dq's terms
 *      dS k (queries 4 ty.., columns 4 tx..), added to float32 sums
 *      (BwdArgs::dqacc) with atomic adds, which a last kernel scales and
 *      writes into dq.
 * Per step a thread does 16 multiply-adds per 16-byte shared memory read.
 * Tile rows are 68 floats (272 bytes), so that a quarter warp's 16-byte
 * reads of 8 rows fall in distinct banks. The query tiles and the rows'
 * lse and D come by cp.async into two buffers (abwd::pipeline). dK and dV
 * sum in a fixed order; dq's sums in the order the blocks reach them. */
#include <math.h>
#include <stdint.h>

#include <atomic>

#include "attention_backward.cuh"
#include "common.cuh"

using namespace tck;

namespace tcuda_kernels { /* graph_pdl.c knows tcuda's kernels by this name */
namespace {

using namespace abwd;

constexpr int FB = 64;          /* keys of a block, queries of a step, head columns */
constexpr int FLD = 68;         /* floats of a tile row */
constexpr int FT = 256;         /* threads of a block */
constexpr int FTILE = FB * FLD; /* floats of a tile */
constexpr int FNS = 2;          /* the pipeline's buffers */
/* k and v; q and dO, FNS buffers each; P and dS [query][key], dS^T
 * [key][query]; lse and D of FNS steps */
constexpr int F_SMEM = (2 + 2 * FNS + 3) * FTILE * (int)sizeof(float) +
                       2 * FNS * FB * (int)sizeof(float);

/* Rows [0, n) of src (row stride `row`, e columns, 16-byte aligned) into
 * a tile at dst, zeros below n and right of e (e a multiple of 4):
 * 16-byte cp.async copies left in flight (the caller commits). */
__device__ __forceinline__ void fill(float *dst, const float *src, i64 row, int n, int e)
{
#pragma unroll
    for (int i = 0; i < FB * 16 / FT; i++) {
        int c = threadIdx.x + i * FT, r = c / 16, ch = c % 16;
        int bytes = r < n && ch * 4 < e ? 16 : 0; /* 0: zero-filled */
        amma::cp_async16(dst + r * FLD + ch * 4, bytes ? src + r * row + ch * 4 : src, bytes);
    }
}

__device__ __forceinline__ float4 ld4(const float *p)
{
    return *reinterpret_cast<const float4 *>(p);
}

/* acc += x . y, in the order x, y, z, w */
__device__ __forceinline__ float dot4(float4 x, float4 y, float acc)
{
    acc = fmaf(x.x, y.x, acc);
    acc = fmaf(x.y, y.y, acc);
    acc = fmaf(x.z, y.z, acc);
    return fmaf(x.w, y.w, acc);
}

/* acc[i][j] += x[i] y[j] */
__device__ __forceinline__ void outer(float (*acc)[4], float4 x, float4 y)
{
    const float xs[4] = {x.x, x.y, x.z, x.w}, ys[4] = {y.x, y.y, y.z, y.w};
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
            acc[i][j] = fmaf(xs[i], ys[j], acc[i][j]);
}

/* dq's terms of the thread's queries q0 + 4 ty + i (those below l),
 * columns 4 tx.., added to the sums of entry b. */
__device__ __forceinline__ void dq_add(const BwdArgs &a, i64 b, int q0, const float (*dq)[4],
                                       int ty, int tx)
{
    if (4 * tx >= a.e)
        return;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        int r = q0 + 4 * ty + i;
        if (r >= a.l)
            break;
        float *to = a.dqacc + (b * a.l + r) * 64 + 4 * tx;
#if __CUDA_ARCH__ >= 900
        atomicAdd(reinterpret_cast<float4 *>(to),
                  make_float4(dq[i][0], dq[i][1], dq[i][2], dq[i][3]));
#else
#pragma unroll
        for (int j = 0; j < 4; j++)
            atomicAdd(to + j, dq[i][j]);
#endif
    }
}

/* Keys k0 + 4 ty + i (those below s) of a [s, e] gradient, columns 4 tx +
 * j (those below e), from acc times mul. */
__device__ __forceinline__ void grad_rows(float *dst, i64 ld, const float (*acc)[4], int k0, int s,
                                          int e, float mul, int ty, int tx)
{
#pragma unroll
    for (int i = 0; i < 4; i++) {
        int r = k0 + 4 * ty + i;
        if (r >= s)
            break;
#pragma unroll
        for (int j = 0; j < 4; j++)
            if (4 * tx + j < e)
                dst[(i64)r * ld + 4 * tx + j] = acc[i][j] * mul;
    }
}

/* dK, dV and dq's terms for keys k0..k0+63 of entry b (the block order of
 * attention_bwd_dkv_sm90: when causal, the first key blocks first). */
__global__ void __launch_bounds__(FT, 1) attention_bwd_f32(BwdArgs a)
{
    tck_pdl_entry();
    extern __shared__ float4 smem_f4[];
    float *ks = reinterpret_cast<float *>(smem_f4), *vs = ks + FTILE, *qs = vs + FTILE;
    float *gs = qs + FNS * FTILE, *ps = gs + FNS * FTILE, *ds = ps + FTILE, *dts = ds + FTILE;
    float(*rs)[2][FB] = reinterpret_cast<float(*)[2][FB]>(dts + FTILE); /* [buf]: lse, D */
    int nkb = (a.s + FB - 1) / FB;
    i64 b = a.causal ? blockIdx.x % a.batch : blockIdx.x / nkb;
    int k0 = (int)(a.causal ? blockIdx.x / a.batch : blockIdx.x % nkb) * FB;
    int kn = min(FB, a.s - k0);
    const float *q = (const float *)a.q + batch_offset(a.qs, b, a.inner);
    const float *go = (const float *)a.go + batch_offset(a.gs, b, a.inner);
    const float *lse = a.lse + b * a.l, *dsum = a.dsum + b * a.l;
    int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    int qstart = a.causal ? k0 : 0; /* earlier queries see none of these keys */
    int steps = qstart < a.l ? (a.l - qstart + FB - 1) / FB : 0;

    auto copy = [&](int j, int buf) {
        int q0 = qstart + j * FB, n = min(FB, a.l - q0);
        fill(qs + buf * FTILE, q + q0 * a.qs[2], a.qs[2], n, a.e);
        fill(gs + buf * FTILE, go + q0 * a.gs[2], a.gs[2], n, a.e);
        rows_async<FB>(rs[buf], lse, dsum, q0, a.l);
    };
    fill(ks, (const float *)a.k + batch_offset(a.ks, b, a.inner) + k0 * a.ks[2], a.ks[2], kn, a.e);
    fill(vs, (const float *)a.v + batch_offset(a.vs, b, a.inner) + k0 * a.vs[2], a.vs[2], kn, a.e);
    if (steps > 0)
        copy(0, 0);
    cp_commit();

    float dk[4][4] = {}, dv[4][4] = {};
    pipeline<FNS>(steps, copy, [&](int i, int buf) {
        int q0 = qstart + i * FB, qn = min(FB, a.l - q0);
        const float *qt = qs + buf * FTILE, *gt = gs + buf * FTILE;

        /* 1. S^T and dP^T: keys 4 ty + u, queries tx + 16 j */
        float st[4][4] = {}, dpt[4][4] = {};
#pragma unroll 2
        for (int c = 0; c < a.e; c += 4) {
            float4 kr[4], vr[4], qr[4], gr[4];
#pragma unroll
            for (int u = 0; u < 4; u++) {
                kr[u] = ld4(ks + (4 * ty + u) * FLD + c);
                vr[u] = ld4(vs + (4 * ty + u) * FLD + c);
                qr[u] = ld4(qt + (tx + 16 * u) * FLD + c);
                gr[u] = ld4(gt + (tx + 16 * u) * FLD + c);
            }
#pragma unroll
            for (int u = 0; u < 4; u++)
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    st[u][j] = dot4(kr[u], qr[j], st[u][j]);
                    dpt[u][j] = dot4(vr[u], gr[j], dpt[u][j]);
                }
        }

        /* 2. P and dS, 0 where masked or past l or s */
        bool edge = q0 + FB > a.l || k0 + FB > a.s || (a.causal && q0 < k0 + FB - 1);
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int c = tx + 16 * j, col = q0 + c; /* the query */
            float lse_c = rs[buf][0][c], d_c = rs[buf][1][c];
            float p[4], g[4];
#pragma unroll
            for (int u = 0; u < 4; u++) {
                int key = k0 + 4 * ty + u;
                bool seen = !edge || (col < a.l && key < a.s && !(a.causal && key > col));
                p[u] = seen ? expf(st[u][j] * a.scale - lse_c) : 0.0f;
                g[u] = p[u] * (dpt[u][j] - d_c);
                dts[(4 * ty + u) * FLD + c] = g[u];
            }
            *reinterpret_cast<float4 *>(ps + c * FLD + 4 * ty) = make_float4(p[0], p[1], p[2],
                                                                             p[3]);
            *reinterpret_cast<float4 *>(ds + c * FLD + 4 * ty) = make_float4(g[0], g[1], g[2],
                                                                             g[3]);
        }
        __syncthreads();

        /* 3. dV += P^T dO, dK += dS^T q (keys 4 ty + u, columns 4 tx + j);
         * dq's terms dS k (queries 4 ty + u, columns 4 tx + j) */
#pragma unroll 4
        for (int r = 0; r < qn; r++) {
            float4 g4 = ld4(gt + r * FLD + 4 * tx), q4 = ld4(qt + r * FLD + 4 * tx);
            outer(dv, ld4(ps + r * FLD + 4 * ty), g4);
            outer(dk, ld4(ds + r * FLD + 4 * ty), q4);
        }
        float dq[4][4] = {};
#pragma unroll 4
        for (int r = 0; r < kn; r++)
            outer(dq, ld4(dts + r * FLD + 4 * ty), ld4(ks + r * FLD + 4 * tx));
        dq_add(a, b, q0, dq, ty, tx);
    });

    grad_rows((float *)a.dk + batch_offset(a.dks, b, a.inner), a.dks[2], dk, k0, a.s, a.e, a.scale,
              ty, tx);
    grad_rows((float *)a.dv + batch_offset(a.dvs, b, a.inner), a.dvs[2], dv, k0, a.s, a.e, 1.0f, ty,
              tx);
}

} // namespace

bool abwd::f32_takes(const BwdArgs &a)
{
    auto rows16 = [](const void *p, const i64 *st) {
        return (uintptr_t)p % 16 == 0 && st[0] % 4 == 0 && st[1] % 4 == 0 && st[2] % 4 == 0;
    };
    return a.e <= FB && a.e % 4 == 0 && rows16(a.q, a.qs) && rows16(a.k, a.ks) &&
           rows16(a.v, a.vs) && rows16(a.go, a.gs);
}

bool abwd::f32_ready(int device)
{
    static std::atomic<unsigned long long> set{0};
    return smem_allowed(attention_bwd_f32, F_SMEM, device, set);
}

void abwd::f32_launch(cudaStream_t stream, const BwdArgs &a)
{
    unsigned grid = (unsigned)(a.batch * ((a.s + FB - 1) / FB));
    attention_bwd_f32<<<grid, FT, F_SMEM, stream>>>(a);
    dq_round<float>(stream, a);
}

} // namespace tcuda_kernels
