/* Attention over a key/value cache with the cache's update, in one kernel
 * (tc__nn_attention_cache, tensor/nn_internal.h): decode's attention. Each
 * query row reads its head's keys and values once, so the time is that
 * read, and at decode's sizes (a few hundred positions of 64 elements)
 * mostly its latency; one launch replaces the cache writes, the scores
 * GEMM, the masked softmax and the GEMM with v.
 *
 * A block of 8 warps takes one query row (entry, head, new position j) and
 * a share of the positions the row sees; on compute capability 9.0 a
 * cluster of up to 8 blocks splits a row's positions, so that a batch-1
 * step keeps most multiprocessors reading, and the cluster's first block
 * adds the others' partial results through distributed shared memory (no
 * second kernel, no scratch). Positions below the entry's length n are
 * read from the caches, those at n and past from k_new and v_new, so the
 * blocks that copy the new rows into the caches race with no reader.
 *
 * Within a block, a group of G lanes takes a position: each lane holds
 * VEC-element slices of q (scaled by scale log2(e)) and of the output's
 * sum; the group's dot product is added by shuffles. Every group keeps its
 * own running maximum and sum (the online softmax), four positions a step
 * with their loads issued first; the groups, then the cluster's blocks,
 * are combined in a fixed order, so every run gives the same bits. Sums
 * are float32 (double for float64) and 2^x stands in for e^x. */
#include <cooperative_groups.h>

#include "common.cuh"
#include "nn_kernels.h"

namespace tcuda_kernels { /* graph_pdl.c knows tcuda's kernels by this name */
namespace {

namespace cg = cooperative_groups;
typedef int64_t i64;

enum { WARPS = 8, THREADS = WARPS * 32, MAX_SPLIT = 8, MAX_E = 512 };

struct Params {
    const void *q, *kn, *vn, *len;
    void *kc, *vc, *out;
    i64 qs[3], kns[3], vns[3], kcs[3], vcs[3], os[3];
    int h, group, t, t_new, s, e, lanes, split;
    bool len64, per_batch, causal;
    double scale;
    tc__kernel_error *err;
};

/* What a computation type needs: float works in base 2 (ex2), double in
 * base e. */
template <typename C> struct Math;
template <> struct Math<float> {
    static constexpr float LOG_SCALE = tck::LOG2E;
    static __device__ __forceinline__ float ex(float x) { return tck::ex2(x); }
};
template <> struct Math<double> {
    static constexpr double LOG_SCALE = 1.0;
    static __device__ __forceinline__ double ex(double x) { return exp(x); }
};

/* VEC elements of T, loaded as one (16 bytes when VEC > 1: the operand
 * is 16-byte aligned there) and converted only when used, so that a step's
 * loads hold few registers. */
template <typename T, int VEC> struct alignas(VEC * sizeof(T)) Slice {
    T v[VEC];
};

template <typename T, int VEC> __device__ __forceinline__ Slice<T, VEC> ld_slice(const T *p)
{
    return *reinterpret_cast<const Slice<T, VEC> *>(p);
}

/* A cluster's (or a lone block's) partial result, in shared memory. */
template <typename C> struct Partial {
    C m, l;
    C acc[MAX_E];
};

/* The most slices of VEC elements a lane holds: one (head sizes up to 32
 * VEC), or enough for MAX_E. */
template <int VEC> constexpr int most_slices() { return MAX_E / (32 * VEC); }

/* With one slice a lane (NCH 1) the registers leave room for two blocks an
 * SM: launch() sizes its split for that. */
template <typename T, int VEC, int NCH>
__global__ void __launch_bounds__(THREADS, NCH == 1 ? 2 : 1) kv_attention_kernel(Params p)
{
    tck_pdl_entry();
    typedef typename tck::Compute<T>::type C;
    /* positions a group loads before it computes: 4 where the loads are
     * few registers */
    constexpr int STEP = VEC > 1 && NCH * VEC * sizeof(T) <= 32 ? 4 : 1;
    __shared__ C sm_m[THREADS];                  /* a value per group (one lane a group at most) */
    __shared__ C sm_acc[WARPS * 32 * VEC * NCH]; /* every group's slices of the sum */
    __shared__ Partial<C> part;

    const int row = blockIdx.x / p.split, rank = blockIdx.x % p.split;
    const int j = row % p.t, hq = row / p.t % p.h, b = row / (p.t * p.h);
    const int hk = hq / p.group;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int G = p.lanes, per_warp = 32 / G, groups = WARPS * per_warp;
    const int gl = lane % G, gid = warp * per_warp + lane / G;

    /* the entry's length, clamped (and reported) when out of range */
    const int at = p.per_batch ? b : 0;
    i64 n = p.len64 ? ((const i64 *)p.len)[at] : ((const int *)p.len)[at];
    const bool bad = n < 0 || n > p.s - p.t_new;
    if (bad) {
        if (hq == 0 && j == 0 && rank == 0 && threadIdx.x == 0 &&
            atomicCAS(&p.err->kind, TC__KERR_NONE, TC__KERR_WRITING) == TC__KERR_NONE) {
            p.err->v[0] = at, p.err->v[1] = n, p.err->v[2] = p.t_new, p.err->v[3] = p.s;
            __threadfence_system();
            atomicExch(&p.err->kind, TC__KERR_CACHE_LENGTH);
        }
        n = n < 0 ? 0 : p.s - p.t_new;
    }
    const T *kn = (const T *)p.kn, *vn = (const T *)p.vn;
    /* the new row j of kv head hk goes to position n + j, once per kv head */
    if (kn && !bad && rank == 0 && hq % p.group == 0) {
        const T *ks = kn + b * p.kns[0] + hk * p.kns[1] + j * p.kns[2];
        const T *vs = vn + b * p.vns[0] + hk * p.vns[1] + j * p.vns[2];
        T *kd = (T *)p.kc + b * p.kcs[0] + hk * p.kcs[1] + (n + j) * p.kcs[2];
        T *vd = (T *)p.vc + b * p.vcs[0] + hk * p.vcs[1] + (n + j) * p.vcs[2];
        for (int x = threadIdx.x; x < p.e; x += THREADS)
            kd[x] = ks[x], vd[x] = vs[x];
    }
    const i64 seen_end = p.causal ? n + p.t_new - p.t + j + 1 : n + p.t_new;
    const i64 seen = seen_end < 0 ? 0 : seen_end;
    const i64 share = (seen + p.split - 1) / p.split;
    const i64 p0 = rank * share, p1 = p0 + share < seen ? p0 + share : seen;

    /* q's slices, scaled into the exponent's base */
    const T *qp = (const T *)p.q + b * p.qs[0] + hq * p.qs[1] + j * p.qs[2];
    const C qscale = (C)p.scale * Math<C>::LOG_SCALE;
    C qv[NCH][VEC], acc[NCH][VEC];
#pragma unroll
    for (int c = 0; c < NCH; c++) {
        const int d = (c * G + gl) * VEC;
#pragma unroll
        for (int i = 0; i < VEC; i++)
            qv[c][i] = acc[c][i] = 0;
        if (d < p.e) {
            const Slice<T, VEC> x = ld_slice<T, VEC>(qp + d);
#pragma unroll
            for (int i = 0; i < VEC; i++)
                qv[c][i] = tck::load<C>(&x.v[i]) * qscale;
        }
    }
    C m = -INFINITY, l = 0;
    const T *kc = (const T *)p.kc + b * p.kcs[0] + hk * p.kcs[1];
    const T *vc = (const T *)p.vc + b * p.vcs[0] + hk * p.vcs[1];
    const T *knh = kn ? kn + b * p.kns[0] + hk * p.kns[1] : NULL;
    const T *vnh = vn ? vn + b * p.vns[0] + hk * p.vns[1] : NULL;
    /* the warp's lanes step together (their shuffles need every lane): a
     * group whose position is past p1 loads nothing and scores -inf */
    for (i64 base = p0 + (i64)warp * per_warp; base < p1; base += (i64)groups * STEP) {
        Slice<T, VEC> kx[STEP][NCH], vx[STEP][NCH];
        C sc[STEP];
#pragma unroll
        for (int u = 0; u < STEP; u++) {
            const i64 pos = base + lane / G + (i64)u * groups;
            const bool in = pos < p1;
            const T *kr = pos < n ? kc + pos * p.kcs[2] : knh + (pos - n) * p.kns[2];
            const T *vr = pos < n ? vc + pos * p.vcs[2] : vnh + (pos - n) * p.vns[2];
#pragma unroll
            for (int c = 0; c < NCH; c++) {
                const int d = (c * G + gl) * VEC;
                kx[u][c] = vx[u][c] = Slice<T, VEC>{}; /* zeros: they add nothing */
                if (in && d < p.e) {
                    kx[u][c] = ld_slice<T, VEC>(kr + d);
                    vx[u][c] = ld_slice<T, VEC>(vr + d);
                }
            }
        }
        C mnew = m;
#pragma unroll
        for (int u = 0; u < STEP; u++) {
            C dot = 0;
#pragma unroll
            for (int c = 0; c < NCH; c++)
#pragma unroll
                for (int i = 0; i < VEC; i++)
                    dot += qv[c][i] * tck::load<C>(&kx[u][c].v[i]);
            for (int o = G / 2; o > 0; o /= 2)
                dot += __shfl_xor_sync(0xffffffffu, dot, o);
            sc[u] = base + lane / G + (i64)u * groups < p1 ? dot : -INFINITY;
            mnew = sc[u] > mnew ? sc[u] : mnew;
        }
        /* a group with nothing in range yet keeps m = -inf, l = 0 and zero
         * sums: its reference point is then 0, so that no -inf - -inf is taken */
        const C mref = mnew == -INFINITY ? (C)0 : mnew;
        const C corr = Math<C>::ex(m - mref);
        l *= corr;
#pragma unroll
        for (int c = 0; c < NCH; c++)
#pragma unroll
            for (int i = 0; i < VEC; i++)
                acc[c][i] *= corr;
#pragma unroll
        for (int u = 0; u < STEP; u++) {
            const C w = Math<C>::ex(sc[u] - mref);
            l += w;
#pragma unroll
            for (int c = 0; c < NCH; c++)
#pragma unroll
                for (int i = 0; i < VEC; i++)
                    acc[c][i] += w * tck::load<C>(&vx[u][c].v[i]);
        }
        m = mnew;
    }

    /* the groups' results, rescaled to the block's maximum and added in
     * group order; a group that saw nothing has m = -inf and l = 0 */
    if (gl == 0)
        sm_m[gid] = m;
    __syncthreads();
    C bm = -INFINITY;
    for (int g = 0; g < groups; g++)
        bm = sm_m[g] > bm ? sm_m[g] : bm;
    const C f = m == -INFINITY ? (C)0 : Math<C>::ex(m - bm);
    __syncthreads();
    if (gl == 0)
        sm_m[gid] = l * f;
#pragma unroll
    for (int c = 0; c < NCH; c++) {
        const int d = (c * G + gl) * VEC;
#pragma unroll
        for (int i = 0; i < VEC; i++)
            if (d + i < p.e)
                sm_acc[gid * p.e + d + i] = acc[c][i] * f;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        C bl = 0;
        for (int g = 0; g < groups; g++)
            bl += sm_m[g];
        part.m = bm, part.l = bl;
    }
    for (int x = threadIdx.x; x < p.e; x += THREADS) {
        C a = 0;
        for (int g = 0; g < groups; g++)
            a += sm_acc[g * p.e + x];
        part.acc[x] = a;
    }
    __syncthreads();

    T *op = (T *)p.out + b * p.os[0] + hq * p.os[1] + j * p.os[2];
    if (p.split == 1) {
        for (int x = threadIdx.x; x < p.e; x += THREADS)
            tck::store(op + x, part.l > 0 ? part.acc[x] / part.l : (C)0);
        return;
    }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    /* the cluster's blocks, added by its first in rank order */
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();
    if (rank == 0) {
        C cm = -INFINITY, cl = 0;
        for (int r = 0; r < p.split; r++) {
            const Partial<C> *o = cluster.map_shared_rank(&part, r);
            cm = o->m > cm ? o->m : cm;
        }
        for (int r = 0; r < p.split; r++) {
            const Partial<C> *o = cluster.map_shared_rank(&part, r);
            cl += o->m == -INFINITY ? (C)0 : o->l * Math<C>::ex(o->m - cm);
        }
        for (int x = threadIdx.x; x < p.e; x += THREADS) {
            C a = 0;
            for (int r = 0; r < p.split; r++) {
                const Partial<C> *o = cluster.map_shared_rank(&part, r);
                a += o->m == -INFINITY ? (C)0 : o->acc[x] * Math<C>::ex(o->m - cm);
            }
            tck::store(op + x, cl > 0 ? a / cl : (C)0);
        }
    }
    cluster.sync(); /* the others' shared memory stays until the first has read it */
#endif
}

/* Whether every operand's rows start on 16 bytes at every (entry, head,
 * position), so that VEC-element loads may be used. */
bool aligned16(const tc__nn_attention_cache *a, int vec)
{
    if (a->e % vec != 0)
        return false;
    const void *ptrs[6] = {a->q, a->k_new, a->v_new, a->k_cache, a->v_cache, a->out};
    const i64 *st[6] = {a->q_strides,  a->kn_strides, a->vn_strides,
                        a->kc_strides, a->vc_strides, a->out_strides};
    for (int o = 0; o < 6; o++) {
        if (!ptrs[o])
            continue;
        if ((uintptr_t)ptrs[o] % 16 != 0)
            return false;
        for (int i = 0; i < 3; i++)
            if (st[o][i] % vec != 0)
                return false;
    }
    return true;
}

template <typename T>
cudaError_t launch(cudaStream_t stream, int sms, int cc_major, const tc__nn_attention_cache *a,
                   tc__kernel_error *err)
{
    constexpr int VEC = 16 / (int)sizeof(T);
    const bool vec = aligned16(a, VEC);
    const int per = vec ? VEC : 1;
    /* lanes per position: the fewest powers of two that cover e, up to 32 */
    int lanes = 1;
    while (lanes < 32 && lanes * per < a->e)
        lanes *= 2;
    const i64 rows = a->b * a->h * a->t;
    const bool one_slice = a->e <= 32 * per;
    int split = 1;
    if (cc_major >= 9) { /* clusters: as many blocks as fit at once (one wave), at most */
        i64 want = (one_slice ? 2 : 1) * (i64)sms / rows;
        i64 most = (a->s + a->t_new + 63) / 64; /* at least 64 positions a block */
        split = (int)(want < most ? want : most);
        split = split < 1 ? 1 : split > MAX_SPLIT ? MAX_SPLIT : split;
    }
    Params p = {a->q, a->k_new, a->v_new, a->len, a->k_cache, a->v_cache, a->out};
    for (int i = 0; i < 3; i++) {
        p.qs[i] = a->q_strides[i], p.kns[i] = a->kn_strides[i], p.vns[i] = a->vn_strides[i];
        p.kcs[i] = a->kc_strides[i], p.vcs[i] = a->vc_strides[i], p.os[i] = a->out_strides[i];
    }
    p.h = (int)a->h, p.group = (int)(a->h / a->hkv), p.t = (int)a->t, p.t_new = (int)a->t_new;
    p.s = (int)a->s, p.e = (int)a->e, p.lanes = lanes, p.split = split;
    p.len64 = a->len_dtype == TC_INT64, p.per_batch = a->len_per_batch, p.causal = a->causal;
    p.scale = a->scale, p.err = err;
    void (*kernel)(Params);
    if (vec)
        kernel = one_slice ? kv_attention_kernel<T, VEC, 1>
                           : kv_attention_kernel<T, VEC, most_slices<VEC>()>;
    else
        kernel = one_slice ? kv_attention_kernel<T, 1, 1>
                           : kv_attention_kernel<T, 1, most_slices<1>()>;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)(rows * split));
    cfg.blockDim = dim3(THREADS);
    cfg.stream = stream;
    cudaLaunchAttribute attr[1];
    if (split > 1) {
        attr[0].id = cudaLaunchAttributeClusterDimension;
        attr[0].val.clusterDim.x = (unsigned)split;
        attr[0].val.clusterDim.y = 1;
        attr[0].val.clusterDim.z = 1;
        cfg.attrs = attr;
        cfg.numAttrs = 1;
    }
    return cudaLaunchKernelEx(&cfg, kernel, p);
}

} // namespace
} // namespace tcuda_kernels

using namespace tcuda_kernels;

extern "C" bool tc__k_nn_attention_cache_takes(const tc__nn_attention_cache *a)
{
    return a->e <= MAX_E && a->b * a->h * a->t <= 0x7fffffff / MAX_SPLIT && a->s <= 0x7fffffff;
}

extern "C" cudaError_t tc__k_nn_attention_cache(cudaStream_t stream, int sms, int cc_major,
                                                const tc__nn_attention_cache *a,
                                                tc__kernel_error *err)
{
    switch (a->dtype) {
    case TC_FLOAT16: return launch<__half>(stream, sms, cc_major, a, err);
    case TC_BFLOAT16: return launch<__nv_bfloat16>(stream, sms, cc_major, a, err);
    case TC_FLOAT32: return launch<float>(stream, sms, cc_major, a, err);
    default: return launch<double>(stream, sms, cc_major, a, err);
    }
}
