/* cross_entropy's kernels: a team per row (a warp for rows of up to 1,024
 * classes, else a block) reads the row once for its online max and sum of
 * exp and gives logsumexp(row) - row[target]; a target out of range gives
 * NaN and is reported through kernel_errors.h. A sum or a mean adds the
 * rows' losses per block, then the blocks' sums in a second kernel, in a
 * fixed order. Values are computed in float for 16-bit dtypes (double for
 * float64). */
#include <math.h>

#include <type_traits>

#include "common.cuh"
#include "nn_kernels.h"
#include "rows.cuh"

using namespace tck;

namespace tcuda_kernels { /* graph_pdl.c knows tcuda's kernels by this name */
namespace {

/* Claims err's slot for a target out of range and says what it was (the
 * first such row of the first kernel to find one; kernel_errors.h). */
__device__ void report_target(tc__kernel_error *err, i64 row, i64 t, i64 c, i64 ignore)
{
    if (atomicCAS(&err->kind, TC__KERR_NONE, TC__KERR_WRITING) != TC__KERR_NONE)
        return;
    err->v[0] = row, err->v[1] = t, err->v[2] = c, err->v[3] = ignore;
    __threadfence_system();
    atomicExch(&err->kind, TC__KERR_CE_TARGET);
}

/* A block's share of a reduced cross_entropy: the sum of its rows' losses
 * and the number of them not ignored. */
struct CePart {
    double sum;
    i64 rows;
};

/* Row `row`'s loss, logsumexp(row) - row[target], for every thread of the
 * row's team (WARP: a warp, else the block), which all call it with the
 * same row: 0 for an ignored row; NaN for a target out of range, reported
 * through err. */
template <typename T, bool WARP>
__device__ typename Compute<T>::type ce_row(const T *x, i64 t, i64 row, i64 c, i64 ignore,
                                            tc__kernel_error *err, typename Compute<T>::type *sh)
{
    typedef typename Compute<T>::type C;
    const int lane = WARP ? threadIdx.x & 31 : threadIdx.x, size = WARP ? 32 : blockDim.x;
    if (t == ignore)
        return 0;
    if (t < 0 || t >= c) {
        if (lane == 0)
            report_target(err, row, t, c, ignore);
        return (C)NAN;
    }
    const T *r = x + row * c;
    C m = ninf<C>(), s = 0;
    for (i64 j = lane; j < c; j += size)
        online(m, s, load<C>(r + j));
    online_red<WARP>(m, s, sh);
    return m + lg(s) - load<C>(r + t);
}

/* cross_entropy's rows, a team per row (WARP: each warp of the block takes
 * a row; else the block does): with `loss`, each row's loss (dtype T);
 * with `part`, each block's CePart of the rows it took, summed per team in
 * row order and then over the teams in order. */
template <typename T, bool WARP>
__global__ void __launch_bounds__(512) ce_rows(const T *x, const i64 *target, T *loss, CePart *part,
                                               i64 n, i64 c, i64 ignore, tc__kernel_error *err)
{
    tck_pdl_entry();
    typedef typename Compute<T>::type C;
    __shared__ C sh[32];
    __shared__ CePart teams_part[16];
    const int teams = WARP ? blockDim.x / 32 : 1, team = WARP ? threadIdx.x / 32 : 0;
    const bool lead = (WARP ? threadIdx.x & 31 : threadIdx.x) == 0;
    CePart mine = {0, 0};
    for (i64 row = (i64)blockIdx.x * teams + team; row < n; row += (i64)gridDim.x * teams) {
        i64 t = target[row];
        C v = ce_row<T, WARP>(x, t, row, c, ignore, err, sh);
        if (lead) {
            if (loss)
                store(loss + row, v);
            mine.sum += (double)v;
            mine.rows += t != ignore;
        }
    }
    if (!part)
        return;
    if (WARP) {
        if (lead)
            teams_part[team] = mine;
        __syncthreads();
        for (int k = 1; threadIdx.x == 0 && k < teams; k++)
            mine.sum += teams_part[k].sum, mine.rows += teams_part[k].rows;
    }
    if (threadIdx.x == 0)
        part[blockIdx.x] = mine;
}

/* out = the parts' sum, or for `mean` the sum over the rows counted (0 / 0,
 * NaN, when none is): one block, summing in a fixed order. */
template <typename T>
__global__ void __launch_bounds__(256) ce_total(const CePart *part, int parts, T *out, bool mean)
{
    tck_pdl_entry();
    __shared__ double ss[256];
    __shared__ i64 sr[256];
    const int t = threadIdx.x;
    double s = 0;
    i64 r = 0;
    for (int i = t; i < parts; i += 256) {
        s += part[i].sum;
        r += part[i].rows;
    }
    ss[t] = s, sr[t] = r;
    __syncthreads();
    for (int o = 128; o > 0; o /= 2) {
        if (t < o)
            ss[t] += ss[t + o], sr[t] += sr[t + o];
        __syncthreads();
    }
    if (t == 0)
        store(out, (typename Compute<T>::type)(mean ? ss[0] / (double)sr[0] : ss[0]));
}

} // namespace
} // namespace tcuda_kernels
using namespace tcuda_kernels;

/* cross_entropy's launch: rows of up to 1,024 classes a warp each, four
 * to a block of 128 threads; longer rows a block of 512 each. A sum or
 * mean has no more blocks than the GPU holds at once (each then takes
 * several rows), so that the blocks' sums stay few. */
struct CeLaunch {
    bool warp;
    int threads;
    unsigned blocks;
};

static CeLaunch ce_launch(int sms, const tc__nn_ce *a)
{
    CeLaunch l;
    l.warp = a->c <= 1024;
    l.threads = l.warp ? 128 : 512;
    i64 blocks = l.warp ? (a->n + 3) / 4 : a->n;
    if (a->reduction != TC_REDUCTION_NONE) {
        i64 most = (i64)(sms > 0 ? sms : 80) * (2048 / l.threads);
        blocks = blocks < most ? blocks : most;
    }
    l.blocks = cap_grid(blocks);
    return l;
}

extern "C" size_t tc__k_nn_cross_entropy_scratch(int sms, const tc__nn_ce *a)
{
    return a->reduction == TC_REDUCTION_NONE ? 0 : sizeof(CePart) * ce_launch(sms, a).blocks;
}

extern "C" void tc__k_nn_cross_entropy(cudaStream_t stream, int sms, const tc__nn_ce *a,
                                       void *scratch, tc__kernel_error *err)
{
    CeLaunch l = ce_launch(sms, a);
    bool reduced = a->reduction != TC_REDUCTION_NONE;
    dispatch_float(a->dtype, [&](auto *tag) {
        typedef typename std::remove_pointer<decltype(tag)>::type T;
        const T *x = (const T *)a->logits;
        const i64 *t = (const i64 *)a->target;
        T *loss = reduced ? nullptr : (T *)a->out;
        CePart *part = reduced ? (CePart *)scratch : nullptr;
        if (l.warp)
            ce_rows<T, true><<<l.blocks, l.threads, 0, stream>>>(x, t, loss, part, a->n, a->c,
                                                                 a->ignore_index, err);
        else
            ce_rows<T, false><<<l.blocks, l.threads, 0, stream>>>(x, t, loss, part, a->n, a->c,
                                                                  a->ignore_index, err);
        if (reduced)
            ce_total<T><<<1, 256, 0, stream>>>(part, (int)l.blocks, (T *)a->out,
                                               a->reduction == TC_REDUCTION_MEAN);
    });
}
