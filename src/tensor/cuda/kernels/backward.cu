/* The backward kernels of nn_backward.h: gelu's (element-wise), softmax's
 * and log_softmax's (a team per row: a warp for rows of up to 1,024, else a
 * block; a thread per column along an inner dim) and cross_entropy's
 * gradient (layer_norm's are in layer_norm.cu).
 *
 * Each is one clear kernel per step: a row is read once for its sums and
 * once more to write (the second read mostly from cache; rows of 64 KiB
 * and more keep dy, or the logits, in shared memory for it); a block's
 * long rows go in 16-byte packs. cross_entropy's gradient is llm.c's
 * fused classifier: a team per row takes the row's max and sum of
 * exp in one read (online), then writes (softmax - onehot) * g; the mean's
 * divisor, the rows not ignored, is counted first by one block, and the
 * loss is summed per block then in a second kernel, in a fixed order.
 * Values are computed in float for 16-bit dtypes (double for float64) and
 * rounded once when stored. */
#include <math.h>

#include <atomic>
#include <type_traits>

#include "common.cuh"
#include "nn_kernels.h"
#include "rows.cuh"

using namespace tck;

namespace tcuda_kernels { /* graph_pdl.c knows tcuda's kernels by this name */
namespace {

__device__ __forceinline__ float erf_of(float x) { return erff(x); }
__device__ __forceinline__ double erf_of(double x) { return erf(x); }
__device__ __forceinline__ float tanh_of(float x) { return tanhf(x); }
__device__ __forceinline__ double tanh_of(double x) { return tanh(x); }

/* ---- gelu ------------------------------------------------------------------------ */

/* d gelu / dx with PyTorch's formulas (GeluBackward's CUDA kernel). */
template <typename C> __device__ __forceinline__ C gelu_grad(C x, bool tanh_approx)
{
    if (!tanh_approx) {
        const C alpha = (C)0.70710678118654752440, beta = (C)0.39894228040143267794;
        C cdf = (C)0.5 * ((C)1 + erf_of(x * alpha)), pdf = ex((C)-0.5 * x * x) * beta;
        return cdf + x * pdf;
    }
    const C beta = (C)0.79788456080286535588, kappa = (C)0.044715;
    C x2 = x * x, t = tanh_of(beta * (x + kappa * x2 * x));
    C left = (C)0.5 * x, right = (C)1 + t;
    C inner_d = beta * ((C)1 + (C)3 * kappa * x2);
    return (C)0.5 * right + left * ((C)1 - t * t) * inner_d;
}

template <typename T>
__global__ void __launch_bounds__(256)
    gelu_bwd(const T *dy, const T *x, T *dx, i64 n, bool tanh_approx)
{
    tck_pdl_entry();
    typedef typename Compute<T>::type C;
    const i64 step = (i64)gridDim.x * blockDim.x;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step)
        store(dx + i, load<C>(dy + i) * gelu_grad(load<C>(x + i), tanh_approx));
}

/* gelu_bwd for three pointers that sit alike against 16-byte boundaries
 * (same16): the elements before the first boundary and after the last
 * whole pack one by one, the rest 16 bytes a load and a store. */
template <typename T>
__global__ void __launch_bounds__(256)
    gelu_bwd16(const T *dy, const T *x, T *dx, i64 n, bool tanh_approx)
{
    tck_pdl_entry();
    typedef typename Compute<T>::type C;
    typedef Pack16<T> P;
    const i64 step = (i64)gridDim.x * blockDim.x, tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const i64 h = head16(dx, n), packs = (n - h) / P::V, tail = h + packs * P::V;
    /* the head and the tail: fewer than V elements each */
    i64 i = tid < h ? tid : tail + tid - h;
    if (tid < h + (n - tail))
        store(dx + i, load<C>(dy + i) * gelu_grad(load<C>(x + i), tanh_approx));
    for (i64 p = tid; p < packs; p += step) {
        P g = ld16(dy + h + p * P::V), a = ld16(x + h + p * P::V), o;
#pragma unroll
        for (int k = 0; k < P::V; k++)
            store(&o.v[k], load<C>(&g.v[k]) * gelu_grad(load<C>(&a.v[k]), tanh_approx));
        *reinterpret_cast<P *>(dx + h + p * P::V) = o;
    }
}

/* ---- softmax and log_softmax ------------------------------------------------------ */

/* Rows of STAGE_MIN bytes and more are too long for the cache to keep
 * between the two reads when a whole grid of them is in flight: there
 * (STAGE) a block of 1,024 threads a row keeps its share of dy's row in
 * shared memory from the first read for the second, so that memory sees
 * dy once (and y twice only for softmax, whose sum needs it). Each thread
 * reads back the very elements it staged (the two passes split the row
 * alike), so the stage needs no barrier of its own; it is offset so that
 * stage + j sits against 16 bytes as dy's row + j does. */
constexpr i64 STAGE_MIN = 64 << 10;

/* vec: the three pointers sit alike against 16-byte boundaries (same16),
 * and each row goes in 16-byte packs (row16) between its ragged ends. */
template <typename T, bool LOG, bool WARP, bool STAGE = false>
__global__ void __launch_bounds__(STAGE ? 1024 : 256)
    softmax_bwd_rows(const T *dy, const T *y, T *dx, i64 rows, i64 n, bool vec)
{
    tck_pdl_entry();
    typedef typename Compute<T>::type C;
    typedef Pack16<T> P;
    static_assert(!(STAGE && WARP), "a staged row takes a block");
    extern __shared__ uint4 stage_raw[]; /* STAGE: n + 16 bytes' worth */
    __shared__ C sh[32];
    const Team<WARP> tm;
    for (i64 row = (i64)blockIdx.x * tm.teams + tm.team; row < rows;
         row += (i64)gridDim.x * tm.teams) {
        const T *g = dy + row * n, *o = y + row * n;
        T *d = dx + row * n;
        T *sg = reinterpret_cast<T *>(stage_raw) + (uintptr_t)g % 16 / sizeof(T);
        const T *g2 = STAGE ? sg : g; /* dy for the second pass */
        C s = 0;
        auto add = [&](i64 j) {
            T gv = g[j];
            if constexpr (STAGE)
                sg[j] = gv;
            s += LOG ? load<C>(&gv) : load<C>(&gv) * load<C>(o + j);
        };
        auto add16 = [&](i64 j) {
            P a = ld16(g + j);
            if constexpr (STAGE)
                *reinterpret_cast<P *>(sg + j) = a;
            if constexpr (LOG) {
#pragma unroll
                for (int k = 0; k < P::V; k++)
                    s += load<C>(&a.v[k]);
            } else {
                P b = ld16(o + j);
#pragma unroll
                for (int k = 0; k < P::V; k++)
                    s += load<C>(&a.v[k]) * load<C>(&b.v[k]);
            }
        };
        if (vec)
            row16(g, n, tm.lane, tm.size, add, add16);
        else
            for (i64 j = tm.lane; j < n; j += tm.size)
                add(j);
        s = team_red<false, WARP>(s, sh);
        auto put = [&](i64 j) {
            C gv = load<C>(g2 + j), yv = load<C>(o + j);
            store(d + j, LOG ? gv - ex(yv) * s : yv * (gv - s));
        };
        auto put16 = [&](i64 j) {
            P a = STAGE ? *reinterpret_cast<const P *>(g2 + j) : ld16(g2 + j), b = ld16(o + j), r;
#pragma unroll
            for (int k = 0; k < P::V; k++) {
                C gv = load<C>(&a.v[k]), yv = load<C>(&b.v[k]);
                store(&r.v[k], LOG ? gv - ex(yv) * s : yv * (gv - s));
            }
            *reinterpret_cast<P *>(d + j) = r;
        };
        if (vec)
            row16(g, n, tm.lane, tm.size, put, put16);
        else
            for (i64 j = tm.lane; j < n; j += tm.size)
                put(j);
    }
}

/* Whether a staged row kernel takes rows of `row_bytes`: STAGE_MIN or
 * more, and the current device gives a block the stage (the row and 16
 * bytes) beside the kernel's 1 KiB of static arrays, `kernel` allowed that
 * much (`set_on`: its record of the devices done, smem_allowed's). */
template <typename K>
bool stage_fits(K kernel, i64 row_bytes, std::atomic<unsigned long long> &set_on)
{
    int device = 0;
    if (row_bytes < STAGE_MIN)
        return false;
    if (cudaGetDevice(&device) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    int room = (int)smem_optin(device) - 1024;
    return row_bytes + 16 <= room && smem_allowed(kernel, room, device, set_on);
}

/* Launches the staged softmax_bwd_rows for rows of n when stage_fits;
 * false, queuing nothing, otherwise. */
template <typename T, bool LOG>
bool launch_staged(cudaStream_t stream, const T *dy, const T *y, T *dx, i64 rows, i64 n, bool vec)
{
    static std::atomic<unsigned long long> set_on{0};
    i64 bytes = n * (i64)sizeof(T) + 16;
    if (!stage_fits(softmax_bwd_rows<T, LOG, false, true>, bytes - 16, set_on))
        return false;
    softmax_bwd_rows<T, LOG, false, true>
        <<<cap_grid(rows), 1024, (size_t)bytes, stream>>>(dy, y, dx, rows, n, vec);
    return true;
}

/* Along an inner dim: [outer, n, inner], a thread per column. */
template <typename T, bool LOG>
__global__ void __launch_bounds__(256)
    softmax_bwd_cols(const T *dy, const T *y, T *dx, i64 outer, i64 n, i64 inner)
{
    tck_pdl_entry();
    typedef typename Compute<T>::type C;
    const i64 step = (i64)gridDim.x * blockDim.x;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < outer * inner; i += step) {
        const i64 base = (i / inner) * n * inner + i % inner;
        C s = 0;
        for (i64 j = 0; j < n; j++) {
            i64 k = base + j * inner;
            s += LOG ? load<C>(dy + k) : load<C>(dy + k) * load<C>(y + k);
        }
        for (i64 j = 0; j < n; j++) {
            i64 k = base + j * inner;
            C gv = load<C>(dy + k), yv = load<C>(y + k);
            store(dx + k, LOG ? gv - ex(yv) * s : yv * (gv - s));
        }
    }
}

/* ---- cross_entropy ---------------------------------------------------------------- */

/* Claims err's slot for a target out of range (as loss.cu's kernels do). */
__device__ void report_target(tc__kernel_error *err, i64 row, i64 t, i64 c, i64 ignore)
{
    if (atomicCAS(&err->kind, TC__KERR_NONE, TC__KERR_WRITING) != TC__KERR_NONE)
        return;
    err->v[0] = row, err->v[1] = t, err->v[2] = c, err->v[3] = ignore;
    __threadfence_system();
    atomicExch(&err->kind, TC__KERR_CE_TARGET);
}

/* The rows not ignored, into *count: one block, in a fixed order. */
__global__ void __launch_bounds__(256) ce_count(const i64 *target, i64 n, i64 ignore, i64 *count)
{
    tck_pdl_entry();
    __shared__ i64 s[256];
    i64 k = 0;
    for (i64 i = threadIdx.x; i < n; i += 256)
        k += target[i] != ignore;
    s[threadIdx.x] = k;
    __syncthreads();
    for (int o = 128; o > 0; o /= 2) {
        if ((int)threadIdx.x < o)
            s[threadIdx.x] += s[threadIdx.x + o];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        *count = s[0];
}

/* A block's share of a reduced loss: the sum of its rows' losses and the
 * number of them not ignored. */
struct CePart {
    double sum;
    i64 rows;
};

struct CeArgs {
    const void *x;
    const i64 *target;
    const void *grad;
    bool per_row;
    double scale;
    const i64 *count; /* the mean's divisor (device), NULL for none */
    void *loss;       /* each row's loss, or NULL */
    bool loss_f32;    /* loss is float32 (16-bit logits under autocast), else T */
    CePart *part;     /* each block's CePart, or NULL */
    void *dx;
    i64 n, c, ld, d_ld, ignore; /* x's rows ld apart, dx's d_ld */
    tc__kernel_error *err;
    /* a block a row, every row of x and dx alike against 16-byte
     * boundaries: packs (row16) */
    bool vec;
};

/* One row, for every thread of its team: its loss, and its gradient
 * written (0 for an ignored row, NaN for a target out of range). STAGE (a
 * block a row, as softmax's staged rows): each thread keeps the logits it
 * reads for the max and sum in `stage` and takes them back from there to
 * write, so that memory sees the row once.
 *
 * 16-bit packs (GPT-2's classifier, 50,257 logits a row) take exp from the
 * special function unit, as 2^(x log2 e - m log2 e) (a relative error near
 * 1e-6, far below the 16-bit gradient's rounding), and a pack's max moves
 * the running max once: the row's exp work is then a few instructions an
 * element, where the precise expf and a compare for each made the kernel
 * wait on instructions rather than on memory. */
template <typename T, bool WARP, bool STAGE = false>
__device__ typename Compute<T>::type ce_bwd_row(const CeArgs &a, i64 row, i64 t,
                                                const Team<WARP> &tm, typename Compute<T>::type *sh,
                                                uint4 *stage = nullptr)
{
    typedef typename Compute<T>::type C;
    const T *r = (const T *)a.x + row * a.ld;
    T *d = (T *)a.dx + row * a.d_ld;
    T *sg = reinterpret_cast<T *>(stage) + (uintptr_t)r % 16 / sizeof(T);
    const T *r2 = STAGE ? sg : r; /* the logits for the second pass */
    if (t == a.ignore || t < 0 || t >= a.c) {
        const bool bad = t != a.ignore;
        if (bad && tm.lane == 0)
            report_target(a.err, row, t, a.c, a.ignore);
        for (i64 j = tm.lane; j < a.c; j += tm.size)
            store(d + j, bad ? (C)NAN : (C)0);
        return bad ? (C)NAN : (C)0;
    }
    typedef Pack16<T> P;
    C m = ninf<C>(), s = 0;
    auto take = [&](i64 j) {
        T v = r[j];
        if constexpr (STAGE)
            sg[j] = v;
        online(m, s, load<C>(&v));
    };
    constexpr bool FAST = sizeof(T) == 2;
    auto take16 = [&](i64 j, const P &v) {
        if constexpr (STAGE)
            *reinterpret_cast<P *>(sg + j) = v;
        if constexpr (FAST) {
            float x[P::V], pm = load<C>(&v.v[0]);
#pragma unroll
            for (int k = 0; k < P::V; k++) {
                x[k] = load<C>(&v.v[k]);
                pm = fmaxf(pm, x[k]); /* NaNs left out, as online's max */
            }
            if (pm > m) {
                s *= ex2((m - pm) * LOG2E);
                m = pm;
            }
            if (m == ninf<C>()) { /* nothing above -inf yet: online's rules */
#pragma unroll
                for (int k = 0; k < P::V; k++)
                    online(m, s, x[k]);
            } else {
                const float ml = m * LOG2E;
#pragma unroll
                for (int k = 0; k < P::V; k++)
                    s += ex2(fmaf(x[k], LOG2E, -ml));
            }
        } else {
#pragma unroll
            for (int k = 0; k < P::V; k++)
                online(m, s, load<C>(&v.v[k]));
        }
    };
    if (a.vec && STAGE)
        row16_ahead<4>(r, a.c, tm.lane, tm.size, take, take16);
    else if (a.vec)
        row16(r, a.c, tm.lane, tm.size, take, [&](i64 j) { take16(j, ld16(r + j)); });
    else
        for (i64 j = tm.lane; j < a.c; j += tm.size)
            take(j);
    online_red<WARP>(m, s, sh);
    double gd = a.scale;
    if (a.grad)
        gd *= (double)load<C>((const T *)a.grad + (a.per_row ? row : 0));
    if (a.count)
        gd /= (double)*a.count;
    const C g = (C)gd, inv = (C)1 / s;
    auto put = [&](i64 j) {
        store(d + j, (ex(load<C>(r2 + j) - m) * inv - (j == t ? (C)1 : (C)0)) * g);
    };
    auto put16 = [&](i64 j) {
        P v = STAGE ? *reinterpret_cast<const P *>(r2 + j) : ld16(r + j), o;
        if constexpr (FAST) { /* p * g, and p * g - g at the target */
            const float ig = inv * g, ml = m * LOG2E;
            float e[P::V];
#pragma unroll
            for (int k = 0; k < P::V; k++)
                e[k] = ex2(fmaf(load<C>(&v.v[k]), LOG2E, -ml)) * ig;
            if ((uint64_t)(t - j) < (uint64_t)P::V)
#pragma unroll
                for (int k = 0; k < P::V; k++)
                    e[k] -= j + k == t ? g : 0.0f;
#pragma unroll
            for (int k = 0; k < P::V; k++)
                store(&o.v[k], e[k]);
        } else {
#pragma unroll
            for (int k = 0; k < P::V; k++)
                store(&o.v[k], (ex(load<C>(&v.v[k]) - m) * inv - (j + k == t ? (C)1 : (C)0)) * g);
        }
        *reinterpret_cast<P *>(d + j) = o;
    };
    if (a.vec)
        row16(r, a.c, tm.lane, tm.size, put, put16);
    else
        for (i64 j = tm.lane; j < a.c; j += tm.size)
            put(j);
    return m + lg(s) - load<C>(r + t);
}

/* STAGE: rows of STAGE_MIN bytes and more, a block each, with
 * c * sizeof(T) + 16 bytes of dynamic shared memory for the stage; two
 * blocks an SM where that fits (GPT-2's 16-bit rows of 50,257), so that
 * one reads while the other writes. */
template <typename T, bool WARP, bool STAGE = false>
__global__ void __launch_bounds__(512, STAGE ? 2 : 1) ce_bwd_rows(CeArgs a)
{
    tck_pdl_entry();
    typedef typename Compute<T>::type C;
    static_assert(!(STAGE && WARP), "a staged row takes a block");
    extern __shared__ uint4 ce_stage[];
    __shared__ C sh[32];
    __shared__ CePart teams_part[16];
    const Team<WARP> tm;
    CePart mine = {0, 0};
    for (i64 row = (i64)blockIdx.x * tm.teams + tm.team; row < a.n;
         row += (i64)gridDim.x * tm.teams) {
        const i64 t = a.target[row];
        /* a thread's share of the stage moves with the row's offset against
         * 16 bytes: the last row's second pass ends before this one's first */
        if constexpr (STAGE)
            __syncthreads();
        C v = ce_bwd_row<T, WARP, STAGE>(a, row, t, tm, sh, ce_stage);
        if (tm.lane == 0) {
            if (a.loss && a.loss_f32)
                ((float *)a.loss)[row] = (float)v;
            else if (a.loss)
                store((T *)a.loss + row, v);
            mine.sum += (double)v;
            mine.rows += t != a.ignore;
        }
    }
    if (!a.part)
        return;
    if (WARP) {
        if (tm.lane == 0)
            teams_part[tm.team] = mine;
        __syncthreads();
        for (int k = 1; threadIdx.x == 0 && k < tm.teams; k++)
            mine.sum += teams_part[k].sum, mine.rows += teams_part[k].rows;
    }
    if (threadIdx.x == 0)
        a.part[blockIdx.x] = mine;
}

/* out = the parts' sum, or for `mean` the sum over the rows counted (0 / 0,
 * NaN, when none is): one block, in a fixed order. */
template <typename T>
__global__ void __launch_bounds__(256)
    ce_bwd_total(const CePart *part, int parts, T *out, bool mean)
{
    tck_pdl_entry();
    __shared__ double ss[256];
    __shared__ i64 sr[256];
    const int t = threadIdx.x;
    double s = 0;
    i64 r = 0;
    for (int i = t; i < parts; i += 256)
        s += part[i].sum, r += part[i].rows;
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

/* cross_entropy's launch: a reduced loss has no more blocks than the GPU
 * holds at once, so that the blocks' sums stay few. */
RowLaunch ce_bwd_launch(int sms, const tc__nn_ce_bwd *a)
{
    RowLaunch l = row_launch(a->n, a->c, 512);
    if (a->loss && a->reduction != TC_REDUCTION_NONE) {
        unsigned most = (unsigned)(sms > 0 ? sms : 80) * (2048u / (unsigned)l.threads);
        l.blocks = l.blocks < most ? l.blocks : most;
    }
    return l;
}

/* Launches the staged ce_bwd_rows when a block's row of logits stage_fits,
 * with at most two blocks an SM for a reduced loss (the most that fit; no
 * more than `l` has, so that the loss's parts fit the same scratch).
 * Returns the blocks launched, or 0, queuing nothing. */
template <typename T>
unsigned launch_ce_staged(cudaStream_t stream, int sms, const RowLaunch &l, const CeArgs &k)
{
    static std::atomic<unsigned long long> set_on{0};
    i64 bytes = k.c * (i64)sizeof(T) + 16;
    if (l.warp || !stage_fits(ce_bwd_rows<T, false, true>, bytes - 16, set_on))
        return 0;
    unsigned blocks = l.blocks;
    if (k.part) {
        unsigned most = (unsigned)(sms > 0 ? sms : 80) * 2u;
        blocks = blocks < most ? blocks : most;
    }
    ce_bwd_rows<T, false, true><<<blocks, 512, (size_t)bytes, stream>>>(k);
    return blocks;
}

} // namespace
} // namespace tcuda_kernels
using namespace tcuda_kernels;

extern "C" void tc__k_nn_gelu_backward(cudaStream_t stream, int sms, const tc__nn_gelu_bwd *a)
{
    dispatch_float(a->dtype, [&](auto *tag) {
        typedef typename std::remove_pointer<decltype(tag)>::type T;
        const T *dy = (const T *)a->grad_out, *x = (const T *)a->x;
        T *dx = (T *)a->grad_in;
        if (same16(dy, dx) && same16(x, dx))
            gelu_bwd16<T>
                <<<grid_for((a->n + Pack16<T>::V - 1) / Pack16<T>::V, 256, sms), 256, 0, stream>>>(
                    dy, x, dx, a->n, a->tanh);
        else
            gelu_bwd<T><<<grid_for(a->n, 256, sms), 256, 0, stream>>>(dy, x, dx, a->n, a->tanh);
    });
}

extern "C" void tc__k_nn_softmax_backward(cudaStream_t stream, int sms, const tc__nn_softmax_bwd *a)
{
    dispatch_float(a->dtype, [&](auto *tag) {
        typedef typename std::remove_pointer<decltype(tag)>::type T;
        const T *dy = (const T *)a->grad_out, *y = (const T *)a->y;
        T *dx = (T *)a->grad_in;
        if (a->inner > 1) {
            unsigned grid = grid_for(a->outer * a->inner, 256, sms);
            if (a->log)
                softmax_bwd_cols<T, true>
                    <<<grid, 256, 0, stream>>>(dy, y, dx, a->outer, a->n, a->inner);
            else
                softmax_bwd_cols<T, false>
                    <<<grid, 256, 0, stream>>>(dy, y, dx, a->outer, a->n, a->inner);
            return;
        }
        RowLaunch l = row_launch(a->outer, a->n, 256);
        /* the long rows (a block each) in 16-byte packs */
        bool vec = !l.warp && same16(dy, y) && same16(dy, dx);
        if (!l.warp && (a->log ? launch_staged<T, true>(stream, dy, y, dx, a->outer, a->n, vec)
                               : launch_staged<T, false>(stream, dy, y, dx, a->outer, a->n, vec)))
            return;
        if (l.warp && a->log)
            softmax_bwd_rows<T, true, true>
                <<<l.blocks, l.threads, 0, stream>>>(dy, y, dx, a->outer, a->n, false);
        else if (l.warp)
            softmax_bwd_rows<T, false, true>
                <<<l.blocks, l.threads, 0, stream>>>(dy, y, dx, a->outer, a->n, false);
        else if (a->log)
            softmax_bwd_rows<T, true, false>
                <<<l.blocks, l.threads, 0, stream>>>(dy, y, dx, a->outer, a->n, vec);
        else
            softmax_bwd_rows<T, false, false>
                <<<l.blocks, l.threads, 0, stream>>>(dy, y, dx, a->outer, a->n, vec);
    });
}

extern "C" size_t tc__k_nn_cross_entropy_backward_scratch(int sms, const tc__nn_ce_bwd *a)
{
    bool total = a->loss && a->reduction != TC_REDUCTION_NONE;
    return sizeof(CePart) + (total ? sizeof(CePart) * ce_bwd_launch(sms, a).blocks : 0);
}

extern "C" void tc__k_nn_cross_entropy_backward(cudaStream_t stream, int sms,
                                                const tc__nn_ce_bwd *a, void *scratch,
                                                tc__kernel_error *err)
{
    RowLaunch l = ce_bwd_launch(sms, a);
    const bool mean = a->reduction == TC_REDUCTION_MEAN;
    const bool total = a->loss && a->reduction != TC_REDUCTION_NONE;
    /* scratch: the count (in a CePart's room, for alignment), then the parts */
    i64 *count = (i64 *)scratch;
    CePart *part = (CePart *)scratch + 1;
    const i64 *target = (const i64 *)a->target;
    if (mean)
        ce_count<<<1, 256, 0, stream>>>(target, a->n, a->ignore_index, count);
    CeArgs k = {a->logits,
                target,
                a->grad,
                a->grad_per_row,
                a->grad_scale,
                mean ? count : nullptr,
                total ? nullptr : a->loss,
                a->loss_dtype == TC_FLOAT32 && a->dtype != TC_FLOAT32,
                total ? part : nullptr,
                a->dlogits,
                a->n,
                a->c,
                a->ld,
                a->d_ld,
                a->ignore_index,
                err,
                !l.warp && same16(a->logits, a->dlogits)};
    dispatch_float(a->dtype, [&](auto *tag) {
        typedef typename std::remove_pointer<decltype(tag)>::type T;
        k.vec = k.vec && (k.ld - k.d_ld) * (i64)sizeof(T) % 16 == 0; /* every row, not the first */
        unsigned staged = launch_ce_staged<T>(stream, sms, l, k);
        if (staged)
            l.blocks = staged;
        else if (l.warp)
            ce_bwd_rows<T, true><<<l.blocks, l.threads, 0, stream>>>(k);
        else
            ce_bwd_rows<T, false><<<l.blocks, l.threads, 0, stream>>>(k);
        if (total && k.loss_f32)
            ce_bwd_total<float><<<1, 256, 0, stream>>>(part, (int)l.blocks, (float *)a->loss, mean);
        else if (total)
            ce_bwd_total<T><<<1, 256, 0, stream>>>(part, (int)l.blocks, (T *)a->loss, mean);
    });
}
