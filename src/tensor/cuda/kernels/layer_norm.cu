/* layer_norm's kernels (nn.h, nn_backward.h): the forward with its
 * statistics, optionally after a residual add (tc_nn_add_layer_norm), and
 * the backward's dx, dweight and dbias.
 *
 * A team per row (a warp for rows of up to 1,024, else a block), reading
 * the row for its sums and again to write (the second read mostly from
 * cache). dweight and dbias are sums over the rows taken without atomics,
 * so that they are the same bits on every run: each block sums a chunk of
 * rows for 32 columns (its 8 row lanes then added in order), or, for rows
 * of 128 to 1,024 computed in float, the dx kernel's block sums its chunk
 * for every column from the read that dx takes; a second kernel adds the
 * chunks' sums the same way (32 lanes over the chunks, then the lanes in
 * order). Values are computed in float for 16-bit dtypes (double for
 * float64) and rounded once when stored. */
#include <math.h>

#include <type_traits>

#include "common.cuh"
#include "nn_kernels.h"
#include "rows.cuh"

using namespace tck;

namespace tcuda_kernels { /* graph_pdl.c knows tcuda's kernels by this name */
namespace {

__device__ __forceinline__ float rsqrt_of(float x) { return 1.0f / sqrtf(x); }
__device__ __forceinline__ double rsqrt_of(double x) { return 1.0 / sqrt(x); }

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

/* ---- rows of 128 to 1,024 in four-element units, held in registers ---------------- */

/* Four elements moved as one aligned unit (16 bytes of float32). */
template <typename T> struct alignas(4 * sizeof(T)) Quad {
    T v[4];
};

template <typename T> __device__ __forceinline__ Quad<T> ld4(const T *p)
{
    return *reinterpret_cast<const Quad<T> *>(p);
}

template <typename T> __device__ __forceinline__ void st4(T *p, const Quad<T> &q)
{
    *reinterpret_cast<Quad<T> *>(p) = q;
}

/* Whether rows of n take the quad kernels: a warp a row, n a multiple of
 * 128 up to 1,024 (QMAX quads a lane at most), each pointer (NULL or)
 * aligned for its four-element units. */
constexpr int QMAX = 8;
template <typename T> bool quad_ok(const void *p) { return (uintptr_t)p % (4 * sizeof(T)) == 0; }
inline bool quad_rows(i64 n) { return n % 128 == 0 && n <= 128 * QMAX; }

/* ln_fwd for quad rows (quad_rows): lane l holds quads l, l + 32, ... of
 * its row in registers, read once (the residual added and the sum stored
 * in the same pass); the sums and the output come from the registers. */
template <typename T, typename R, typename O>
__global__ void __launch_bounds__(256)
    ln_fwd_quad(const T *x, const R *res, T *sum, const T *w, const T *b, O *y,
                typename Compute<T>::type *mean, typename Compute<T>::type *rstd, i64 rows, i64 n,
                double eps)
{
    tck_pdl_entry();
    typedef typename Compute<T>::type C;
    const int lane = threadIdx.x & 31, teams = blockDim.x / 32, nq = (int)(n / 128);
    for (i64 row = (i64)blockIdx.x * teams + threadIdx.x / 32; row < rows;
         row += (i64)gridDim.x * teams) {
        C v[QMAX][4], s = 0;
#pragma unroll
        for (int q = 0; q < QMAX; q++) {
            if (q >= nq)
                break;
            i64 j = row * n + (i64)(q * 32 + lane) * 4;
            Quad<T> a = ld4(x + j);
            if (res) { /* x + res rounded to T, as the team kernel stores and reads it back */
                Quad<R> r = ld4(res + j);
#pragma unroll
                for (int k = 0; k < 4; k++)
                    store(&a.v[k], load<C>(&a.v[k]) + load<C>(&r.v[k]));
                st4(sum + j, a);
            }
#pragma unroll
            for (int k = 0; k < 4; k++) {
                v[q][k] = load<C>(&a.v[k]);
                s += v[q][k];
            }
        }
        const C mu = warp_red<false>(s) / (C)n;
        C d2 = 0;
#pragma unroll
        for (int q = 0; q < QMAX; q++) {
            if (q >= nq)
                break;
#pragma unroll
            for (int k = 0; k < 4; k++)
                d2 += (v[q][k] - mu) * (v[q][k] - mu);
        }
        const C rs = rsqrt_of(warp_red<false>(d2) / (C)n + (C)eps);
#pragma unroll
        for (int q = 0; q < QMAX; q++) {
            if (q >= nq)
                break;
            i64 c = (i64)(q * 32 + lane) * 4;
            Quad<T> wq, bq;
            if (w)
                wq = ld4(w + c);
            if (b)
                bq = ld4(b + c);
            Quad<O> o;
#pragma unroll
            for (int k = 0; k < 4; k++) {
                C u = (v[q][k] - mu) * rs;
                if (w)
                    u *= load<C>(&wq.v[k]);
                if (b)
                    u += load<C>(&bq.v[k]);
                store(&o.v[k], u);
            }
            st4(y + row * n + c, o);
        }
        if (lane == 0) {
            mean[row] = mu;
            rstd[row] = rs;
        }
    }
}

/* ln_bwd_dx for quad rows: each lane's g = dy * w and xhat held in
 * registers from one read of dy, x and w; dx (and its 16-bit copy) written
 * from them. PART (float computation): dweight's and dbias's partial sums
 * come from the same read (dx may then be NULL: the sums alone, in the same
 * order, so that they are the same bits with dx or without). Block b then
 * takes rows [b * chunk, (b + 1) * chunk), its warp k every teams-th of them
 * from the k-th, each lane adding dy * xhat and dy of its columns into the
 * warp's row of shared memory; the warps' rows are then added in order into
 * part_w / part_b [b, column] (ln_bwd_part's layout, for ln_bwd_total). */
template <typename T, typename G, typename L, bool PART = false>
__global__ void __launch_bounds__(256)
    ln_bwd_dx_quad(const G *dy, const T *x, const typename Compute<T>::type *mean,
                   const typename Compute<T>::type *rstd, const T *w, T *dx, L *low, i64 rows,
                   i64 n, bool acc, typename Compute<T>::type *part_w = nullptr,
                   typename Compute<T>::type *part_b = nullptr, i64 chunk = 0)
{
    tck_pdl_entry();
    typedef typename Compute<T>::type C;
    static_assert(!PART || std::is_same<C, float>::value, "the partial sums are float");
    extern __shared__ float4 ln_sums_raw[]; /* PART: [teams][2][n] */
    const int lane = threadIdx.x & 31, teams = blockDim.x / 32, team = threadIdx.x / 32;
    const int nq = (int)(n / 128);
    C *sw = reinterpret_cast<C *>(ln_sums_raw) + (i64)team * 2 * n, *sb = sw + n;
    i64 first = (i64)blockIdx.x * teams + team, end = rows, step = (i64)gridDim.x * teams;
    if constexpr (PART) {
        first = (i64)blockIdx.x * chunk + team;
        end = first - team + chunk < rows ? first - team + chunk : rows;
        step = teams;
        for (int q = 0; q < nq; q++) {
            i64 c = (i64)(q * 32 + lane) * 4;
            st4(sw + c, Quad<C>{}), st4(sb + c, Quad<C>{});
        }
    }
    for (i64 row = first; row < end; row += step) {
        const C mu = mean[row], rs = rstd[row];
        C g[QMAX][4], xh[QMAX][4], sg = 0, sgx = 0;
#pragma unroll
        for (int q = 0; q < QMAX; q++) {
            if (q >= nq)
                break;
            i64 c = (i64)(q * 32 + lane) * 4;
            Quad<G> gq = ld4(dy + row * n + c);
            Quad<T> xq = ld4(x + row * n + c), wq;
            if (w)
                wq = ld4(w + c);
            Quad<C> aw, ab;
            if constexpr (PART)
                aw = ld4(sw + c), ab = ld4(sb + c);
#pragma unroll
            for (int k = 0; k < 4; k++) {
                g[q][k] = w ? load<C>(&gq.v[k]) * load<C>(&wq.v[k]) : load<C>(&gq.v[k]);
                xh[q][k] = (load<C>(&xq.v[k]) - mu) * rs;
                sg += g[q][k];
                sgx += g[q][k] * xh[q][k];
                if constexpr (PART) {
                    aw.v[k] += load<C>(&gq.v[k]) * xh[q][k];
                    ab.v[k] += load<C>(&gq.v[k]);
                }
            }
            if constexpr (PART)
                st4(sw + c, aw), st4(sb + c, ab);
        }
        if (PART && !dx)
            continue;
        sg = warp_red<false>(sg) / (C)n;
        sgx = warp_red<false>(sgx) / (C)n;
#pragma unroll
        for (int q = 0; q < QMAX; q++) {
            if (q >= nq)
                break;
            i64 j = row * n + (i64)(q * 32 + lane) * 4;
            Quad<T> d;
            if (acc)
                d = ld4(dx + j);
            Quad<L> lo;
#pragma unroll
            for (int k = 0; k < 4; k++) {
                C v = rs * (g[q][k] - sg - xh[q][k] * sgx);
                store(&d.v[k], acc ? load<C>(&d.v[k]) + v : v);
                store(&lo.v[k], load<C>(&d.v[k])); /* dx as stored, then its cast */
            }
            st4(dx + j, d);
            if (low)
                st4(low + j, lo);
        }
    }
    if constexpr (PART) {
        __syncthreads();
        C *all = reinterpret_cast<C *>(ln_sums_raw);
        for (i64 c = threadIdx.x; c < n; c += blockDim.x) {
            C a = 0, b = 0;
            for (int k = 0; k < teams; k++)
                a += all[(i64)k * 2 * n + c], b += all[(i64)k * 2 * n + n + c];
            part_w[(i64)blockIdx.x * n + c] = a;
            part_b[(i64)blockIdx.x * n + c] = b;
        }
    }
}

/* dweight's and dbias's partial sums: block (bx, by) of 32 x 8 threads sums
 * rows [by * chunk, (by + 1) * chunk) of columns bx * 32 + tx, row lane ty
 * taking every 8th row; the 8 lanes are then added in order into
 * part_w / part_b [by, column]. */
enum { PART_COLS = 32, PART_LANES = 8 };

/* The block's LANES sums of each of its columns added in lane order: true
 * for the threads of lane 0, which then hold their column's sums. */
template <int LANES, typename C> __device__ bool lanes_combine(C &aw, C &ab)
{
    __shared__ C sw[LANES][PART_COLS + 1], sb[LANES][PART_COLS + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    sw[ty][tx] = aw;
    sb[ty][tx] = ab;
    __syncthreads();
    if (ty != 0)
        return false;
    for (int k = 1; k < LANES; k++)
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
    if (lanes_combine<PART_LANES>(aw, ab) && col < n) {
        part_w[(i64)blockIdx.y * n + col] = aw;
        part_b[(i64)blockIdx.y * n + col] = ab;
    }
}

/* dweight and dbias (either NULL when not wanted): each column's chunk sums
 * added by TOTAL_LANES lanes (lane j takes chunks j, j + TOTAL_LANES, ...),
 * then the lanes in order; blocks of PART_COLS columns. (A row of 768
 * columns is 24 blocks: the many lanes keep enough loads in flight.) */
enum { TOTAL_LANES = 32 };

template <typename T>
__global__ void __launch_bounds__(PART_COLS *TOTAL_LANES)
    ln_bwd_total(const typename Compute<T>::type *part_w, const typename Compute<T>::type *part_b,
                 T *dw, T *db, i64 chunks, i64 n, bool acc)
{
    tck_pdl_entry();
    typedef typename Compute<T>::type C;
    const i64 col = (i64)blockIdx.x * PART_COLS + threadIdx.x;
    C aw = 0, ab = 0;
    if (col < n)
        for (i64 k = threadIdx.y; k < chunks; k += TOTAL_LANES)
            aw += part_w[k * n + col], ab += part_b[k * n + col];
    if (lanes_combine<TOTAL_LANES>(aw, ab) && col < n) {
        if (dw)
            store(dw + col, acc ? load<C>(dw + col) + aw : aw);
        if (db)
            store(db + col, acc ? load<C>(db + col) + ab : ab);
    }
}

/* layer_norm_backward's chunks of rows: at least 32 rows, at most 1,024
 * chunks. */
i64 ln_chunk(i64 m)
{
    i64 c = (m + 1023) / 1024;
    return c < 32 ? 32 : c;
}

template <typename T, typename R, typename O>
void launch_ln_fwd(cudaStream_t stream, const tc__nn_ln *a)
{
    typedef typename Compute<T>::type C;
    RowLaunch l = row_launch(a->m, a->n, 256);
    const T *x = (const T *)a->x, *w = (const T *)a->weight, *b = (const T *)a->bias;
    const R *res = (const R *)a->residual;
    if (quad_rows(a->n) && quad_ok<T>(x) && quad_ok<T>(w) && quad_ok<T>(b) && quad_ok<R>(res) &&
        quad_ok<T>(a->sum) && quad_ok<O>(a->y))
        ln_fwd_quad<T, R, O><<<l.blocks, l.threads, 0, stream>>>(
            x, res, (T *)a->sum, w, b, (O *)a->y, (C *)a->mean, (C *)a->rstd, a->m, a->n, a->eps);
    else if (l.warp)
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

/* Whether layer_norm's backward takes the quad kernels. */
template <typename T, typename G, typename L> bool ln_bwd_quad(const tc__nn_ln_bwd *a)
{
    return quad_rows(a->n) && quad_ok<G>(a->grad_out) && quad_ok<T>(a->x) &&
           quad_ok<T>(a->weight) && quad_ok<T>(a->dx) && quad_ok<L>(a->dx_cast);
}

/* The quad dx kernel that also writes dweight's and dbias's partial sums
 * (pw, pb: as ln_bwd_part writes them), or those sums alone where dx is
 * NULL: false, queuing nothing, where it does not take a->n, the dtypes or
 * the pointers. */
template <typename T, typename G, typename L>
bool ln_bwd_quad_parts(cudaStream_t stream, const tc__nn_ln_bwd *a, typename Compute<T>::type *pw,
                       typename Compute<T>::type *pb)
{
    typedef typename Compute<T>::type C;
    if constexpr (std::is_same<C, float>::value) {
        if (!pw || !ln_bwd_quad<T, G, L>(a))
            return false;
        /* 4 warps a block: 2 * 4 * 1,024 floats of shared memory at most */
        const i64 chunk = ln_chunk(a->m);
        unsigned blocks = (unsigned)((a->m + chunk - 1) / chunk);
        ln_bwd_dx_quad<T, G, L, true><<<blocks, 128, 8 * a->n * sizeof(C), stream>>>(
            (const G *)a->grad_out, (const T *)a->x, (const C *)a->mean, (const C *)a->rstd,
            (const T *)a->weight, (T *)a->dx, (L *)a->dx_cast, a->m, a->n, a->accumulate, pw, pb,
            chunk);
        return true;
    }
    return false;
}

/* layer_norm's dx kernel, with L the type of dx_cast (T when there is none).
 * True when it also wrote dweight's and dbias's partial sums (pw, pb, when
 * not NULL) in the same pass (ln_bwd_quad_parts). */
template <typename T, typename G, typename L>
bool ln_bwd_dx_launch(cudaStream_t stream, const tc__nn_ln_bwd *a, typename Compute<T>::type *pw,
                      typename Compute<T>::type *pb)
{
    typedef typename Compute<T>::type C;
    const G *dy = (const G *)a->grad_out;
    const T *x = (const T *)a->x, *w = (const T *)a->weight;
    const C *mean = (const C *)a->mean, *rstd = (const C *)a->rstd;
    L *low = (L *)a->dx_cast;
    RowLaunch l = row_launch(a->m, a->n, 256);
    if (ln_bwd_quad_parts<T, G, L>(stream, a, pw, pb))
        return true;
    if (ln_bwd_quad<T, G, L>(a))
        ln_bwd_dx_quad<T, G, L><<<l.blocks, l.threads, 0, stream>>>(
            dy, x, mean, rstd, w, (T *)a->dx, low, a->m, a->n, a->accumulate);
    else if (l.warp)
        ln_bwd_dx<T, G, L, true><<<l.blocks, l.threads, 0, stream>>>(
            dy, x, mean, rstd, w, (T *)a->dx, low, a->m, a->n, a->accumulate);
    else
        ln_bwd_dx<T, G, L, false><<<l.blocks, l.threads, 0, stream>>>(
            dy, x, mean, rstd, w, (T *)a->dx, low, a->m, a->n, a->accumulate);
    return false;
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
    const bool acc = a->accumulate, sums = a->dweight || a->dbias;
    const i64 chunk = ln_chunk(a->m), chunks = (a->m + chunk - 1) / chunk;
    C *pw = sums ? (C *)scratch : nullptr, *pb = sums ? pw + chunks * a->n : nullptr;
    /* the sums' parts written with dx, or by its kernel without it */
    bool parts = !a->dx && ln_bwd_quad_parts<T, G, T>(stream, a, pw, pb);
    if (a->dx) {
        /* dx_cast only with float32 x: a 16-bit copy of dx beside it */
        bool cast = a->dx_cast && std::is_same<T, float>::value;
        if (cast && a->cast_dtype == TC_BFLOAT16)
            parts = ln_bwd_dx_launch<T, G, __nv_bfloat16>(stream, a, pw, pb);
        else if (cast && a->cast_dtype == TC_FLOAT16)
            parts = ln_bwd_dx_launch<T, G, __half>(stream, a, pw, pb);
        else
            parts = ln_bwd_dx_launch<T, G, T>(stream, a, pw, pb);
    }
    if (!sums)
        return;
    unsigned cols = (unsigned)((a->n + PART_COLS - 1) / PART_COLS);
    if (!parts)
        ln_bwd_part<T, G><<<dim3(cols, (unsigned)chunks), dim3(PART_COLS, PART_LANES), 0, stream>>>(
            dy, x, mean, rstd, pw, pb, a->m, a->n, chunk);
    ln_bwd_total<T><<<cols, dim3(PART_COLS, TOTAL_LANES), 0, stream>>>(
        pw, pb, (T *)a->dweight, (T *)a->dbias, chunks, a->n, acc);
}

} // namespace
} // namespace tcuda_kernels
using namespace tcuda_kernels;

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
