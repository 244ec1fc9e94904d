/* The backward kernels of nn_backward.h: gelu's (element-wise), softmax's
 * and log_softmax's (a team per row: a warp for rows of up to 1,024, else a
 * block; a thread per column along an inner dim), layer_norm with its
 * statistics, layer_norm's backward and cross_entropy's gradient.
 *
 * Each is one clear kernel per step, correct first: a row is read once for
 * its sums and once more to write (the second read mostly from cache).
 * layer_norm's dweight and dbias are sums over the rows taken without
 * atomics, so that they are the same bits on every run: each block sums a
 * chunk of rows for 32 columns (its 8 row lanes then added in order), and a
 * second kernel adds the chunks' sums the same way (8 lanes over the
 * chunks, then the lanes in order). cross_entropy's gradient is
 * llm.c's fused classifier: a team per row takes the row's max and sum of
 * exp in one read (online), then writes (softmax - onehot) * g; the mean's
 * divisor, the rows not ignored, is counted first by one block, and the
 * loss is summed per block then in a second kernel, in a fixed order.
 * Values are computed in float for 16-bit dtypes (double for float64) and
 * rounded once when stored. */
#include <math.h>

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
__device__ __forceinline__ float rsqrt_of(float x) { return 1.0f / sqrtf(x); }
__device__ __forceinline__ double rsqrt_of(double x) { return 1.0 / sqrt(x); }

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

/* The team (WARP: a warp, else the block) of the calling thread: its rank in
 * the team, the team's size, the block's teams and this team's index. */
template <bool WARP> struct Team {
    int lane, size, teams, team;
    __device__ Team()
        : lane(WARP ? threadIdx.x & 31 : threadIdx.x), size(WARP ? 32 : blockDim.x),
          teams(WARP ? blockDim.x / 32 : 1), team(WARP ? threadIdx.x / 32 : 0)
    {
    }
};

/* vec: the three pointers sit alike against 16-byte boundaries (same16),
 * and each row goes in 16-byte packs (row16) between its ragged ends. */
template <typename T, bool LOG, bool WARP>
__global__ void __launch_bounds__(256)
    softmax_bwd_rows(const T *dy, const T *y, T *dx, i64 rows, i64 n, bool vec)
{
    tck_pdl_entry();
    typedef typename Compute<T>::type C;
    typedef Pack16<T> P;
    __shared__ C sh[32];
    const Team<WARP> tm;
    for (i64 row = (i64)blockIdx.x * tm.teams + tm.team; row < rows;
         row += (i64)gridDim.x * tm.teams) {
        const T *g = dy + row * n, *o = y + row * n;
        T *d = dx + row * n;
        C s = 0;
        auto add = [&](i64 j) { s += LOG ? load<C>(g + j) : load<C>(g + j) * load<C>(o + j); };
        auto add16 = [&](i64 j) {
            P a = ld16(g + j);
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
            C gv = load<C>(g + j), yv = load<C>(o + j);
            store(d + j, LOG ? gv - ex(yv) * s : yv * (gv - s));
        };
        auto put16 = [&](i64 j) {
            P a = ld16(g + j), b = ld16(o + j), r;
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

/* ---- layer_norm ------------------------------------------------------------------- */

/* A team per row: the mean, then the mean of squared deviations (two sums:
 * no cancellation), then y (of O: T, or a 16-bit type where T is float,
 * rounded from the float result); lane 0 writes the row's mean and rstd.
 * With res (R: T, or 16-bit where T is float), the row is first x + res,
 * rounded to T into sum; each lane reads back only the elements it wrote,
 * so no barrier comes between. */
template <typename T, typename R, typename O, bool WARP>
__global__ void __launch_bounds__(256)
    ln_fwd(const T *x, const R *res, T *sum, const T *w, const T *b, O *y,
           typename Compute<T>::type *mean, typename Compute<T>::type *rstd, i64 rows, i64 n,
           double eps)
{
    tck_pdl_entry();
    typedef typename Compute<T>::type C;
    __shared__ C sh[32];
    const Team<WARP> tm;
    for (i64 row = (i64)blockIdx.x * tm.teams + tm.team; row < rows;
         row += (i64)gridDim.x * tm.teams) {
        const T *r = x + row * n;
        if (res) {
            T *s = sum + row * n;
            for (i64 j = tm.lane; j < n; j += tm.size)
                store(s + j, load<C>(r + j) + load<C>(res + row * n + j));
            r = s;
        }
        C s = 0;
        for (i64 j = tm.lane; j < n; j += tm.size)
            s += load<C>(r + j);
        const C mu = team_red<false, WARP>(s, sh) / (C)n;
        C q = 0;
        for (i64 j = tm.lane; j < n; j += tm.size) {
            C d = load<C>(r + j) - mu;
            q += d * d;
        }
        const C rs = rsqrt_of(team_red<false, WARP>(q, sh) / (C)n + (C)eps);
        for (i64 j = tm.lane; j < n; j += tm.size) {
            C v = (load<C>(r + j) - mu) * rs;
            if (w)
                v *= load<C>(w + j);
            if (b)
                v += load<C>(b + j);
            store(y + row * n + j, v);
        }
        if (tm.lane == 0) {
            mean[row] = mu;
            rstd[row] = rs;
        }
    }
}

/* dx per row, a team per row: with g = dy * w and xhat = (x - mean) * rstd,
 * dx = rstd * (g - mean(g) - xhat * mean(g * xhat)). */
template <typename T, typename G, typename L, bool WARP>
__global__ void __launch_bounds__(256)
    ln_bwd_dx(const G *dy, const T *x, const typename Compute<T>::type *mean,
              const typename Compute<T>::type *rstd, const T *w, T *dx, L *low, i64 rows, i64 n,
              bool acc)
{
    tck_pdl_entry();
    typedef typename Compute<T>::type C;
    __shared__ C sh[32];
    const Team<WARP> tm;
    for (i64 row = (i64)blockIdx.x * tm.teams + tm.team; row < rows;
         row += (i64)gridDim.x * tm.teams) {
        const G *gr = dy + row * n;
        const T *xr = x + row * n;
        const C mu = mean[row], rs = rstd[row];
        C sg = 0, sgx = 0;
        for (i64 j = tm.lane; j < n; j += tm.size) {
            C g = w ? load<C>(gr + j) * load<C>(w + j) : load<C>(gr + j);
            sg += g;
            sgx += g * ((load<C>(xr + j) - mu) * rs);
        }
        sg = team_red<false, WARP>(sg, sh) / (C)n;
        sgx = team_red<false, WARP>(sgx, sh) / (C)n;
        for (i64 j = tm.lane; j < n; j += tm.size) {
            C g = w ? load<C>(gr + j) * load<C>(w + j) : load<C>(gr + j);
            C xh = (load<C>(xr + j) - mu) * rs, v = rs * (g - sg - xh * sgx);
            T d;
            store(&d, acc ? load<C>(dx + row * n + j) + v : v);
            dx[row * n + j] = d;
            if (low) /* dx as stored, then its cast (T is float where low is given) */
                store(low + row * n + j, load<C>(&d));
        }
    }
}

/* dweight's and dbias's partial sums: block (bx, by) of 32 x 8 threads sums
 * rows [by * chunk, (by + 1) * chunk) of columns bx * 32 + tx, row lane ty
 * taking every 8th row; the 8 lanes are then added in order into
 * part_w / part_b [by, column]. */
enum { PART_COLS = 32, PART_LANES = 8 };

/* The block's PART_LANES sums of each of its columns added in lane order:
 * true for the threads of lane 0, which then hold their column's sums. */
template <typename C> __device__ bool lanes_combine(C &aw, C &ab)
{
    __shared__ C sw[PART_LANES][PART_COLS + 1], sb[PART_LANES][PART_COLS + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    sw[ty][tx] = aw;
    sb[ty][tx] = ab;
    __syncthreads();
    if (ty != 0)
        return false;
    for (int k = 1; k < PART_LANES; k++)
        aw += sw[k][tx], ab += sb[k][tx];
    return true;
}

template <typename T, typename G>
__global__ void __launch_bounds__(PART_COLS *PART_LANES)
    ln_bwd_part(const G *dy, const T *x, const typename Compute<T>::type *mean,
                const typename Compute<T>::type *rstd, typename Compute<T>::type *part_w,
                typename Compute<T>::type *part_b, i64 rows, i64 n, i64 chunk)
{
    tck_pdl_entry();
    typedef typename Compute<T>::type C;
    const i64 col = (i64)blockIdx.x * PART_COLS + threadIdx.x, r0 = (i64)blockIdx.y * chunk;
    const i64 r1 = r0 + chunk < rows ? r0 + chunk : rows;
    C aw = 0, ab = 0;
    if (col < n)
        for (i64 r = r0 + threadIdx.y; r < r1; r += PART_LANES) {
            C g = load<C>(dy + r * n + col);
            aw += g * ((load<C>(x + r * n + col) - mean[r]) * rstd[r]);
            ab += g;
        }
    if (lanes_combine(aw, ab) && col < n) {
        part_w[(i64)blockIdx.y * n + col] = aw;
        part_b[(i64)blockIdx.y * n + col] = ab;
    }
}

/* dweight and dbias (either NULL when not wanted): each column's chunk sums
 * added by PART_LANES lanes (lane j takes chunks j, j + PART_LANES, ...),
 * then the lanes in order; blocks of PART_COLS columns. */
template <typename T>
__global__ void __launch_bounds__(PART_COLS *PART_LANES)
    ln_bwd_total(const typename Compute<T>::type *part_w, const typename Compute<T>::type *part_b,
                 T *dw, T *db, i64 chunks, i64 n, bool acc)
{
    tck_pdl_entry();
    typedef typename Compute<T>::type C;
    const i64 col = (i64)blockIdx.x * PART_COLS + threadIdx.x;
    C aw = 0, ab = 0;
    if (col < n)
        for (i64 k = threadIdx.y; k < chunks; k += PART_LANES)
            aw += part_w[k * n + col], ab += part_b[k * n + col];
    if (lanes_combine(aw, ab) && col < n) {
        if (dw)
            store(dw + col, acc ? load<C>(dw + col) + aw : aw);
        if (db)
            store(db + col, acc ? load<C>(db + col) + ab : ab);
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
    i64 n, c, ignore;
    tc__kernel_error *err;
    bool vec; /* a block a row, x and dx alike against 16-byte boundaries: packs (row16) */
};

/* One row, for every thread of its team: its loss, and its gradient
 * written (0 for an ignored row, NaN for a target out of range). */
template <typename T, bool WARP>
__device__ typename Compute<T>::type ce_bwd_row(const CeArgs &a, i64 row, i64 t,
                                                const Team<WARP> &tm, typename Compute<T>::type *sh)
{
    typedef typename Compute<T>::type C;
    const T *r = (const T *)a.x + row * a.c;
    T *d = (T *)a.dx + row * a.c;
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
    auto take = [&](i64 j) { online(m, s, load<C>(r + j)); };
    auto take16 = [&](i64 j) {
        P v = ld16(r + j);
#pragma unroll
        for (int k = 0; k < P::V; k++)
            online(m, s, load<C>(&v.v[k]));
    };
    if (a.vec)
        row16(r, a.c, tm.lane, tm.size, take, take16);
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
        store(d + j, (ex(load<C>(r + j) - m) * inv - (j == t ? (C)1 : (C)0)) * g);
    };
    auto put16 = [&](i64 j) {
        P v = ld16(r + j), o;
#pragma unroll
        for (int k = 0; k < P::V; k++)
            store(&o.v[k], (ex(load<C>(&v.v[k]) - m) * inv - (j + k == t ? (C)1 : (C)0)) * g);
        *reinterpret_cast<P *>(d + j) = o;
    };
    if (a.vec)
        row16(r, a.c, tm.lane, tm.size, put, put16);
    else
        for (i64 j = tm.lane; j < a.c; j += tm.size)
            put(j);
    return m + lg(s) - load<C>(r + t);
}

template <typename T, bool WARP> __global__ void __launch_bounds__(512) ce_bwd_rows(CeArgs a)
{
    tck_pdl_entry();
    typedef typename Compute<T>::type C;
    __shared__ C sh[32];
    __shared__ CePart teams_part[16];
    const Team<WARP> tm;
    CePart mine = {0, 0};
    for (i64 row = (i64)blockIdx.x * tm.teams + tm.team; row < a.n;
         row += (i64)gridDim.x * tm.teams) {
        const i64 t = a.target[row];
        C v = ce_bwd_row<T, WARP>(a, row, t, tm, sh);
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

/* Teams for `rows` rows of n: a warp each (four to a block of 128) up to
 * 1,024, else a block of `wide` threads. */
struct RowLaunch {
    bool warp;
    int threads;
    unsigned blocks;
};

RowLaunch row_launch(i64 rows, i64 n, int wide)
{
    RowLaunch l;
    l.warp = n <= 1024;
    l.threads = l.warp ? 128 : wide;
    l.blocks = cap_grid(l.warp ? (rows + 3) / 4 : rows);
    return l;
}

/* layer_norm_backward's chunks of rows: at least 32 rows, at most 1,024
 * chunks. */
i64 ln_chunk(i64 m)
{
    i64 c = (m + 1023) / 1024;
    return c < 32 ? 32 : c;
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

template <typename T, typename R, typename O>
void launch_ln_fwd(cudaStream_t stream, const tc__nn_ln *a)
{
    typedef typename Compute<T>::type C;
    RowLaunch l = row_launch(a->m, a->n, 256);
    const T *x = (const T *)a->x, *w = (const T *)a->weight, *b = (const T *)a->bias;
    const R *res = (const R *)a->residual;
    if (l.warp)
        ln_fwd<T, R, O, true><<<l.blocks, l.threads, 0, stream>>>(
            x, res, (T *)a->sum, w, b, (O *)a->y, (C *)a->mean, (C *)a->rstd, a->m, a->n, a->eps);
    else
        ln_fwd<T, R, O, false><<<l.blocks, l.threads, 0, stream>>>(
            x, res, (T *)a->sum, w, b, (O *)a->y, (C *)a->mean, (C *)a->rstd, a->m, a->n, a->eps);
}

/* float32 rows with a residual of R (float32 when there is none) and an
 * output of any of the three float types. */
template <typename R> void launch_ln_fwd_f32(cudaStream_t stream, const tc__nn_ln *a)
{
    if (a->out_dtype == TC_BFLOAT16)
        launch_ln_fwd<float, R, __nv_bfloat16>(stream, a);
    else if (a->out_dtype == TC_FLOAT16)
        launch_ln_fwd<float, R, __half>(stream, a);
    else
        launch_ln_fwd<float, R, float>(stream, a);
}

/* layer_norm's dx kernel, with L the type of dx_cast (T when there is none). */
template <typename T, typename G, typename L>
void ln_bwd_dx_launch(cudaStream_t stream, const tc__nn_ln_bwd *a)
{
    typedef typename Compute<T>::type C;
    const G *dy = (const G *)a->grad_out;
    const T *x = (const T *)a->x, *w = (const T *)a->weight;
    const C *mean = (const C *)a->mean, *rstd = (const C *)a->rstd;
    L *low = (L *)a->dx_cast;
    RowLaunch l = row_launch(a->m, a->n, 256);
    if (l.warp)
        ln_bwd_dx<T, G, L, true><<<l.blocks, l.threads, 0, stream>>>(
            dy, x, mean, rstd, w, (T *)a->dx, low, a->m, a->n, a->accumulate);
    else
        ln_bwd_dx<T, G, L, false><<<l.blocks, l.threads, 0, stream>>>(
            dy, x, mean, rstd, w, (T *)a->dx, low, a->m, a->n, a->accumulate);
}

/* layer_norm's backward with grad_output of type G (T, or 16-bit for T =
 * float: autocast's layer norm, its gradient from a 16-bit layer). */
template <typename T, typename G>
void ln_bwd_launch(cudaStream_t stream, const tc__nn_ln_bwd *a, void *scratch)
{
    typedef typename Compute<T>::type C;
    const G *dy = (const G *)a->grad_out;
    const T *x = (const T *)a->x;
    const C *mean = (const C *)a->mean, *rstd = (const C *)a->rstd;
    const bool acc = a->accumulate;
    if (a->dx) {
        /* dx_cast only with float32 x: a 16-bit copy of dx beside it */
        bool cast = a->dx_cast && std::is_same<T, float>::value;
        if (cast && a->cast_dtype == TC_BFLOAT16)
            ln_bwd_dx_launch<T, G, __nv_bfloat16>(stream, a);
        else if (cast && a->cast_dtype == TC_FLOAT16)
            ln_bwd_dx_launch<T, G, __half>(stream, a);
        else
            ln_bwd_dx_launch<T, G, T>(stream, a);
    }
    if (!a->dweight && !a->dbias)
        return;
    const i64 chunk = ln_chunk(a->m), chunks = (a->m + chunk - 1) / chunk;
    C *pw = (C *)scratch, *pb = pw + chunks * a->n;
    dim3 grid((unsigned)((a->n + PART_COLS - 1) / PART_COLS), (unsigned)chunks);
    ln_bwd_part<T, G><<<grid, dim3(PART_COLS, PART_LANES), 0, stream>>>(dy, x, mean, rstd, pw, pb,
                                                                        a->m, a->n, chunk);
    ln_bwd_total<T><<<grid.x, dim3(PART_COLS, PART_LANES), 0, stream>>>(
        pw, pb, (T *)a->dweight, (T *)a->dbias, chunks, a->n, acc);
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

/* The mixed dtypes (a 16-bit residual or output) come with float32 x
 * alone (tensor_nn_backward.c's rule); everything else is of one dtype. */
extern "C" void tc__k_nn_layer_norm(cudaStream_t stream, const tc__nn_ln *a)
{
    if (a->dtype == TC_FLOAT32) {
        tc_dtype r = a->residual ? a->res_dtype : TC_FLOAT32;
        if (r == TC_BFLOAT16)
            launch_ln_fwd_f32<__nv_bfloat16>(stream, a);
        else if (r == TC_FLOAT16)
            launch_ln_fwd_f32<__half>(stream, a);
        else
            launch_ln_fwd_f32<float>(stream, a);
        return;
    }
    dispatch_float(a->dtype, [&](auto *tag) {
        typedef typename std::remove_pointer<decltype(tag)>::type T;
        launch_ln_fwd<T, T, T>(stream, a);
    });
}

extern "C" size_t tc__k_nn_layer_norm_backward_scratch(const tc__nn_ln_bwd *a)
{
    if (!a->dweight && !a->dbias)
        return 0;
    size_t cs = a->dtype == TC_FLOAT64 ? sizeof(double) : sizeof(float);
    i64 chunks = (a->m + ln_chunk(a->m) - 1) / ln_chunk(a->m);
    return 2 * (size_t)chunks * (size_t)a->n * cs;
}

extern "C" void tc__k_nn_layer_norm_backward(cudaStream_t stream, int sms, const tc__nn_ln_bwd *a,
                                             void *scratch)
{
    (void)sms;
    dispatch_float(a->dtype, [&](auto *tag) {
        typedef typename std::remove_pointer<decltype(tag)>::type T;
        if constexpr (std::is_same<T, float>::value) {
            if (a->grad_dtype == TC_BFLOAT16)
                return ln_bwd_launch<T, __nv_bfloat16>(stream, a, scratch);
            if (a->grad_dtype == TC_FLOAT16)
                return ln_bwd_launch<T, __half>(stream, a, scratch);
        }
        ln_bwd_launch<T, T>(stream, a, scratch);
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
                a->ignore_index,
                err,
                !l.warp && same16(a->logits, a->dlogits)};
    dispatch_float(a->dtype, [&](auto *tag) {
        typedef typename std::remove_pointer<decltype(tag)>::type T;
        if (l.warp)
            ce_bwd_rows<T, true><<<l.blocks, l.threads, 0, stream>>>(k);
        else
            ce_bwd_rows<T, false><<<l.blocks, l.threads, 0, stream>>>(k);
        if (total && k.loss_f32)
            ce_bwd_total<float><<<1, 256, 0, stream>>>(part, (int)l.blocks, (float *)a->loss, mean);
        else if (total)
            ce_bwd_total<T><<<1, 256, 0, stream>>>(part, (int)l.blocks, (T *)a->loss, mean);
    });
}
