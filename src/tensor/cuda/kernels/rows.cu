/* Row kernels: softmax, log_softmax, layer_norm and rms_norm over rows.
 * Each is one pass over memory where the row fits in registers: it is read
 * once (16-byte vectors when the rows are aligned), its statistics reduced
 * (max then sum of exp; mean then variance; mean of squares) with warp
 * shuffles, and written once.
 *
 *   n <= 1024:        a warp per row, 4 rows per block of 128 threads;
 *   n <= 16384:       a block per row, 128 to 512 threads, as few as hold
 *                     the row in their registers (up to 8 vectors in
 *                     flight a thread, and more rows on an SM);
 *   rows that fit in shared memory (to about 200 KB on an H100): a block
 *                     of 1024 threads per row copies it there with 16-byte
 *                     loads (from the first aligned element, whatever the
 *                     row's alignment), reduces it there (softmax's max
 *                     and sum of exp as it loads) and writes it once: one
 *                     read of global memory;
 *   longer rows:      a block per row that reads the row twice (online max
 *                     and sum; Welford's mean and variance, or the mean of
 *                     squares, for the norms) and writes it once;
 *   softmax along an inner dim: a thread per column, coalesced across
 *                     columns, online max and sum then a write pass.
 *
 * (Half those lengths for float64.) Values are computed in float for 16-bit
 * dtypes (double for float64) and rounded once when stored. The causal mask
 * of attention is applied as the row is loaded: masked columns are never
 * read and come out as 0. */
#include <math.h>

#include <atomic>
#include <type_traits>

#include "common.cuh"
#include "nn_kernels.h"
#include "rows.cuh"

using namespace tck;

namespace tcuda_kernels { /* graph_pdl.c knows tcuda's kernels by this name */
namespace {

enum {
    SOFTMAX = TC__NN_SOFTMAX,
    LOG_SOFTMAX = TC__NN_LOG_SOFTMAX,
    LAYER = TC__NN_LAYER_NORM,
    RMS = TC__NN_RMS_NORM
};

/* Elements a thread keeps in registers in the row kernels: 32, or 16 for
 * float64 (32 doubles spill at 512 threads a block, ptxas -v shows). */
template <typename T> struct PerThread {
    static constexpr int value = sizeof(typename Compute<T>::type) == 8 ? 16 : 32;
};

/* exp in the softmax kernels whose output O is a 16-bit dtype: the
 * hardware's exp2 (__expf, a few ulp of float, far below the rounding to
 * 16 bits) instead of expf's exact range reduction, which made the longest
 * 16-bit rows compute-bound. float and double outputs keep ex(). */
template <typename O, typename C> __device__ __forceinline__ C ex_to(C x)
{
    if constexpr (sizeof(O) == 2)
        return __expf(x);
    else
        return ex(x);
}
__device__ __forceinline__ float rsq(float x) { return 1.0f / sqrtf(x); }
__device__ __forceinline__ double rsq(double x) { return 1.0 / sqrt(x); }

template <typename U, int N> struct alignas(sizeof(U) * N) VecN {
    U v[N];
};

struct RowArgs {
    const void *in;
    void *out;
    const void *w, *b;
    i64 rows, n;
    double eps;
    i64 causal;
};

/* Columns of `row` that are read: all, or 0..q for causal query q. */
__device__ __forceinline__ i64 valid_of(const RowArgs &a, i64 row)
{
    if (a.causal <= 0)
        return a.n;
    i64 q = row % a.causal;
    return q + 1 < a.n ? q + 1 : a.n;
}

/* The row in registers: thread `lane` of a team of `team` holds chunks of V
 * consecutive elements at (c * team + lane) * V. Requires n <= team *
 * PerThread<T>::value and,
 * for V > 1, n % V == 0 and aligned rows. */
template <typename T, typename O, int OP, int V, bool WARP>
__global__ void __launch_bounds__(WARP ? 128 : 512) rows_reg(RowArgs a)
{
    tck_pdl_entry();
    typedef typename Compute<T>::type C;
    constexpr int PER_THREAD = PerThread<T>::value;
    constexpr int NCH = PER_THREAD / V;
    constexpr bool SM = OP == SOFTMAX || OP == LOG_SOFTMAX;
    __shared__ C sh[32];
    const int team = WARP ? 32 : blockDim.x;
    const int lane = WARP ? (threadIdx.x & 31) : threadIdx.x;
    const i64 per_block = WARP ? blockDim.x / 32 : 1;
    const i64 step = (i64)gridDim.x * per_block;
    const i64 n = a.n;
    for (i64 row = (i64)blockIdx.x * per_block + (WARP ? threadIdx.x / 32 : 0); row < a.rows;
         row += step) {
        const T *in = (const T *)a.in + row * n;
        O *out = (O *)a.out + row * n;
        const i64 valid = SM ? valid_of(a, row) : n;
        const C pad = SM ? ninf<C>() : (C)0;
        C x[PER_THREAD];
#pragma unroll
        for (int c = 0; c < NCH; c++) {
            i64 j = ((i64)c * team + lane) * V;
            if (j < valid) {
                VecN<T, V> t = *(const VecN<T, V> *)(in + j);
#pragma unroll
                for (int v = 0; v < V; v++)
                    x[c * V + v] = j + v < valid ? load<C>(&t.v[v]) : pad;
            } else {
#pragma unroll
                for (int v = 0; v < V; v++)
                    x[c * V + v] = pad;
            }
        }
        C s0 = 0,
          s1 = 0; /* softmax: max, 1 / sum; log_softmax: max, log(sum); norms: mean, 1/std */
        if (SM) {
            C m = ninf<C>();
#pragma unroll
            for (int i = 0; i < PER_THREAD; i++)
                m = x[i] > m ? x[i] : m;
            m = team_red<true, WARP>(m, sh);
            C s = 0;
#pragma unroll
            for (int i = 0; i < PER_THREAD; i++) {
                C e = ex_to<O>(x[i] - m);
                s += e;
                if (OP == SOFTMAX)
                    x[i] = e;
            }
            s = team_red<false, WARP>(s, sh);
            s0 = m;
            s1 = OP == SOFTMAX ? (C)1 / s : lg(s); /* softmax multiplies by it */
        } else {
            C s = 0;
            if (OP == LAYER) {
#pragma unroll
                for (int i = 0; i < PER_THREAD; i++)
                    s += x[i];
                s0 = team_red<false, WARP>(s, sh) / (C)n;
            }
            C q = 0;
#pragma unroll
            for (int c = 0; c < NCH; c++)
#pragma unroll
                for (int v = 0; v < V; v++) {
                    C d = ((i64)c * team + lane) * V + v < n ? x[c * V + v] - s0 : (C)0;
                    q += d * d;
                }
            s1 = rsq(team_red<false, WARP>(q, sh) / (C)n + (C)a.eps);
        }
#pragma unroll
        for (int c = 0; c < NCH; c++) {
            i64 j = ((i64)c * team + lane) * V;
            if (j >= n)
                continue;
            VecN<O, V> o;
            VecN<T, V> w = {}, b = {};
            if (!SM && a.w)
                w = *(const VecN<T, V> *)((const T *)a.w + j);
            if (OP == LAYER && a.b)
                b = *(const VecN<T, V> *)((const T *)a.b + j);
#pragma unroll
            for (int v = 0; v < V; v++) {
                C xv = x[c * V + v], y;
                if (OP == SOFTMAX)
                    y = xv * s1;
                else if (OP == LOG_SOFTMAX)
                    y = (xv - s0) - s1;
                else {
                    y = (xv - s0) * s1;
                    if (a.w)
                        y *= load<C>(&w.v[v]);
                    if (OP == LAYER && a.b)
                        y += load<C>(&b.v[v]);
                }
                store(&o.v[v], y);
            }
            *(VecN<O, V> *)(out + j) = o;
        }
    }
}

/* Welford's running (count, mean, sum of squared deviations) of a thread's
 * values, merged across threads as Chan et al. do: stable for large means
 * and for outliers, where sums shifted by one value (or E[x^2] - E[x]^2)
 * lose the variance to cancellation. The merge is symmetric in its two
 * arguments (products and sums of the same two terms), so every lane of a
 * butterfly ends with the same bits. */
template <typename C> struct Welford {
    C n, mean, m2;
};

template <typename C> __device__ __forceinline__ void welford_add(Welford<C> &w, C x)
{
    w.n += (C)1;
    C d = x - w.mean;
    w.mean += d * ((C)1 / w.n); /* a reciprocal, not a division, as PyTorch's */
    w.m2 += d * (x - w.mean);
}

template <typename C>
__device__ __forceinline__ Welford<C> welford_merge(Welford<C> a, Welford<C> b)
{
    if (a.n == (C)0)
        return b;
    if (b.n == (C)0)
        return a;
    C n = a.n + b.n, coef = (C)1 / n, d = b.mean - a.mean;
    Welford<C> r;
    r.n = n;
    r.mean = (a.n * coef) * a.mean + (b.n * coef) * b.mean;
    r.m2 = (a.m2 + b.m2) + (d * d) * ((a.n * b.n) * coef);
    return r;
}

__device__ __forceinline__ float shfl_xor(float v, int o)
{
    return __shfl_xor_sync(0xffffffffu, v, o);
}
__device__ __forceinline__ double shfl_xor(double v, int o)
{
    return __shfl_xor_sync(0xffffffffu, v, o);
}

template <typename C> __device__ __forceinline__ Welford<C> welford_warp(Welford<C> w)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        Welford<C> p = {shfl_xor(w.n, o), shfl_xor(w.mean, o), shfl_xor(w.m2, o)};
        w = welford_merge(w, p);
    }
    return w;
}

/* Over the block; every thread gets the same result. */
template <typename C>
__device__ __forceinline__ Welford<C> welford_block(Welford<C> w, Welford<C> *sh)
{
    w = welford_warp(w);
    int lane = threadIdx.x & 31, wi = threadIdx.x >> 5, nw = blockDim.x >> 5;
    __syncthreads();
    if (lane == 0)
        sh[wi] = w;
    __syncthreads();
    Welford<C> none = {(C)0, (C)0, (C)0};
    return welford_warp(lane < nw ? sh[lane] : none);
}

/* Rows too long for registers: a block per row reads it twice. */
template <typename T, typename O, int OP>
__global__ void __launch_bounds__(512) rows_loop(RowArgs a)
{
    tck_pdl_entry();
    typedef typename Compute<T>::type C;
    __shared__ C sh[32];
    __shared__ Welford<C> shw[32];
    const i64 n = a.n;
    for (i64 row = blockIdx.x; row < a.rows; row += gridDim.x) {
        const T *in = (const T *)a.in + row * n;
        O *out = (O *)a.out + row * n;
        C s0 = 0, s1 = 0;
        if (OP == SOFTMAX || OP == LOG_SOFTMAX) {
            i64 valid = valid_of(a, row);
            C m = ninf<C>(), s = 0;
            for (i64 j = threadIdx.x; j < valid; j += blockDim.x)
                online(m, s, load<C>(in + j));
            online_red<false>(m, s, sh);
            const C inv = (C)1 / s, ls = lg(s);
            for (i64 j = threadIdx.x; j < n; j += blockDim.x) {
                C v = j < valid ? load<C>(in + j) : ninf<C>();
                store(out + j, OP == SOFTMAX ? ex_to<O>(v - m) * inv : (v - m) - ls);
            }
            continue;
        }
        C var;
        if (OP == LAYER) {
            Welford<C> w = {(C)0, (C)0, (C)0};
            for (i64 j = threadIdx.x; j < n; j += blockDim.x)
                welford_add(w, load<C>(in + j));
            w = welford_block(w, shw);
            s0 = w.mean;
            var = w.m2 / (C)n;
        } else { /* rms: the mean of squares, no cancellation */
            C q = 0;
            for (i64 j = threadIdx.x; j < n; j += blockDim.x) {
                C v = load<C>(in + j);
                q += v * v;
            }
            var = team_red<false, false>(q, sh) / (C)n;
        }
        s1 = rsq(var + (C)a.eps);
        for (i64 j = threadIdx.x; j < n; j += blockDim.x) {
            C y = (load<C>(in + j) - s0) * s1;
            if (a.w)
                y *= load<C>((const T *)a.w + j);
            if (OP == LAYER && a.b)
                y += load<C>((const T *)a.b + j);
            store(out + j, y);
        }
    }
}

/* Rows that fit in shared memory: a block per row copies it there, reduces
 * it there and writes it out, so global memory is read once. The row is
 * kept at the same offset from a 16-byte boundary as in global memory, so
 * the bulk of it moves in 16-byte vectors whatever the row's alignment:
 * from global memory, from shared memory in the passes, and to the output
 * when it has the input's alignment. */
enum { SMEM_THREADS = 1024, SMEM_UNROLL = 4 };

/* Calls f(j, x) for every j < len of the row s in shared memory, whose
 * elements from `head` on are 16-byte aligned (s + head is): that part is
 * read 16 bytes at a time. */
template <typename T, typename F>
__device__ __forceinline__ void each_in_row(const T *s, i64 head, i64 len, F f)
{
    constexpr int VT = 16 / sizeof(T);
    const i64 h = head < len ? head : len, nv = (len - h) / VT;
    for (i64 j = threadIdx.x; j < h; j += blockDim.x)
        f(j, s[j]);
    const VecN<T, VT> *v = (const VecN<T, VT> *)(s + h);
    for (i64 k = threadIdx.x; k < nv; k += blockDim.x) {
        VecN<T, VT> t = v[k];
#pragma unroll
        for (int u = 0; u < VT; u++)
            f(h + k * VT + u, t.v[u]);
    }
    for (i64 j = h + nv * VT + threadIdx.x; j < len; j += blockDim.x)
        f(j, s[j]);
}

template <typename T, typename O, int OP>
__global__ void __launch_bounds__(SMEM_THREADS) rows_smem(RowArgs a)
{
    tck_pdl_entry();
    typedef typename Compute<T>::type C;
    constexpr int VT = 16 / sizeof(T);
    constexpr bool SM = OP == SOFTMAX || OP == LOG_SOFTMAX;
    typedef VecN<T, VT> VecT;
    extern __shared__ __align__(16) unsigned char smem_bytes[];
    __shared__ C sh[32];
    const i64 n = a.n;
    for (i64 row = blockIdx.x; row < a.rows; row += gridDim.x) {
        const T *in = (const T *)a.in + row * n;
        O *out = (O *)a.out + row * n;
        const i64 valid = SM ? valid_of(a, row) : n;
        const int shift = (int)((uintptr_t)in % 16 / sizeof(T));
        T *s = (T *)smem_bytes + shift; /* s + j is aligned where in + j is */
        const i64 head = shift ? VT - shift : 0;
        const i64 lh = head < valid ? head : valid, nv = (valid - lh) / VT;
        /* softmax: the online max and sum of exp of the values this thread
         * copies, taken while the copy's loads are in flight */
        C m = ninf<C>(), e = 0;
        __syncthreads(); /* the previous row's write pass is done with s */
        for (i64 j = threadIdx.x; j < lh; j += blockDim.x) {
            s[j] = in[j];
            if (SM)
                online(m, e, load<C>(in + j));
        }
        const VecT *src = (const VecT *)(in + lh);
        VecT *dst = (VecT *)(s + lh);
        for (i64 k0 = threadIdx.x; k0 < nv; k0 += (i64)blockDim.x * SMEM_UNROLL) {
            VecT r[SMEM_UNROLL];
#pragma unroll
            for (int u = 0; u < SMEM_UNROLL; u++) {
                i64 k = k0 + (i64)u * blockDim.x;
                if (k < nv)
                    r[u] = src[k];
            }
#pragma unroll
            for (int u = 0; u < SMEM_UNROLL; u++) {
                i64 k = k0 + (i64)u * blockDim.x;
                if (k < nv) {
                    dst[k] = r[u];
                    if (SM) { /* the vector's maximum first: one rescale a vector */
                        C x[VT], vm = ninf<C>();
#pragma unroll
                        for (int v = 0; v < VT; v++) {
                            x[v] = load<C>(&r[u].v[v]);
                            vm = x[v] > vm ? x[v] : vm;
                        }
                        if (vm > m) {
                            e *= ex_to<O>(m - vm);
                            m = vm;
                        }
#pragma unroll
                        for (int v = 0; v < VT; v++) /* +inf - +inf and NaN give NaN */
                            e += x[v] == ninf<C>() ? (C)0 : ex_to<O>(x[v] - m);
                    }
                }
            }
        }
        for (i64 j = lh + nv * VT + threadIdx.x; j < valid; j += blockDim.x) {
            s[j] = in[j];
            if (SM)
                online(m, e, load<C>(in + j));
        }
        __syncthreads();
        C s0 = 0, s1 = 0; /* softmax: max, sum of exp; norms: mean, 1/std */
        if (SM) {
            online_red<false>(m, e, sh);
            s0 = m;
            s1 = e;
        } else {
            if (OP == LAYER) { /* two passes over shared memory: exact and stable */
                C t = 0;
                each_in_row(s, head, n, [&](i64, T x) { t += load<C>(&x); });
                s0 = team_red<false, false>(t, sh) / (C)n;
            }
            C q = 0;
            each_in_row(s, head, n, [&](i64, T x) {
                C d = load<C>(&x) - s0;
                q += d * d;
            });
            s1 = rsq(team_red<false, false>(q, sh) / (C)n + (C)a.eps);
        }
        const C lse = OP == LOG_SOFTMAX ? lg(s1) : (C)0, inv = SM ? (C)1 / s1 : (C)0;
        auto value = [&](i64 j, T x) -> C {
            if (SM) {
                C v = j < valid ? load<C>(&x) : ninf<C>(); /* masked: not in s */
                return OP == SOFTMAX ? ex_to<O>(v - s0) * inv : (v - s0) - lse;
            }
            C y = (load<C>(&x) - s0) * s1;
            if (a.w)
                y *= load<C>((const T *)a.w + j);
            if (OP == LAYER && a.b)
                y += load<C>((const T *)a.b + j);
            return y;
        };
        bool vec_out = false;
        if constexpr (std::is_same<T, O>::value)
            vec_out = (uintptr_t)out % 16 == (uintptr_t)in % 16;
        if (!vec_out) {
            for (i64 j = threadIdx.x; j < n; j += blockDim.x)
                store(out + j, value(j, j < valid ? s[j] : (T)0));
            continue;
        }
        if constexpr (std::is_same<T, O>::value) { /* out + head is aligned as s + head */
            const i64 h = head < n ? head : n, nvo = (n - h) / VT;
            for (i64 j = threadIdx.x; j < h; j += blockDim.x)
                store(out + j, value(j, j < valid ? s[j] : (T)0));
            const VecT *sv = (const VecT *)(s + h);
            VecT *ov = (VecT *)(out + h);
            for (i64 k = threadIdx.x; k < nvo; k += blockDim.x) {
                i64 j0 = h + k * VT;
                VecT t = j0 < valid ? sv[k] : VecT{}, o;
#pragma unroll
                for (int u = 0; u < VT; u++)
                    store(&o.v[u], value(j0 + u, t.v[u]));
                ov[k] = o;
            }
            for (i64 j = h + nvo * VT + threadIdx.x; j < n; j += blockDim.x)
                store(out + j, value(j, j < valid ? s[j] : (T)0));
        }
    }
}

/* Launches rows_smem when the row fits; false when it does not (or the
 * opt-in is refused), for the caller to take the two-read path. */
template <typename T, typename O, int OP> bool launch_smem(cudaStream_t stream, const RowArgs &a)
{
    typedef typename Compute<T>::type C;
    int dev = 0;
    (void)cudaGetDevice(&dev);
    size_t statics = 32 * sizeof(C) + 1024, optin = smem_optin(dev); /* with a margin */
    size_t bytes = ((size_t)a.n + 16 / sizeof(T)) * sizeof(T);
    if (optin <= statics || bytes > optin - statics)
        return false;
    /* the whole allowance, so that one opt-in serves every row length */
    static std::atomic<unsigned long long> set_on{0};
    if (!smem_allowed(rows_smem<T, O, OP>, (int)(optin - statics), dev, set_on))
        return false;
    rows_smem<T, O, OP><<<cap_grid(a.rows), SMEM_THREADS, bytes, stream>>>(a);
    return true;
}

/* softmax along an inner dim: [outer, n, inner], a thread per column. */
template <typename T, int OP>
__global__ void cols_softmax(const T *in, T *out, i64 outer, i64 n, i64 inner)
{
    tck_pdl_entry();
    typedef typename Compute<T>::type C;
    i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < outer * inner; i += stride) {
        i64 base = (i / inner) * n * inner + i % inner;
        C m = ninf<C>(), s = 0;
        for (i64 j = 0; j < n; j++)
            online(m, s, load<C>(in + base + j * inner));
        const C inv = (C)1 / s, ls = lg(s);
        for (i64 j = 0; j < n; j++) {
            C v = load<C>(in + base + j * inner);
            store(out + base + j * inner, OP == SOFTMAX ? ex_to<T>(v - m) * inv : (v - m) - ls);
        }
    }
}

static bool aligned(const void *p, size_t to) { return p == nullptr || (uintptr_t)p % to == 0; }

/* The path every launch takes: automatic, or one forced by a benchmark. */
std::atomic<int> rows_path{TC__NN_PATH_AUTO};

template <typename T, typename O, int OP> void launch_rows(cudaStream_t stream, const RowArgs &a)
{
    constexpr int VT = 16 / sizeof(T) > 0 ? 16 / sizeof(T) : 1;
    bool vec = VT > 1 && a.n % VT == 0 && aligned(a.in, 16) && aligned(a.out, sizeof(O) * VT) &&
               aligned(a.w, 16) && aligned(a.b, 16);
    constexpr int PER_THREAD = PerThread<T>::value;
    const int path = rows_path.load(std::memory_order_relaxed);
    if (a.n <= 32 * PER_THREAD && path == TC__NN_PATH_AUTO) {
        unsigned grid = cap_grid((a.rows + 3) / 4);
        if (vec)
            rows_reg<T, O, OP, VT, true><<<grid, 128, 0, stream>>>(a);
        else
            rows_reg<T, O, OP, 1, true><<<grid, 128, 0, stream>>>(a);
        return;
    }
    if (a.n <= 512 * PER_THREAD &&
        (path == TC__NN_PATH_AUTO || path == TC__NN_PATH_REGS || path == TC__NN_PATH_REGS_WIDE)) {
        /* the fewest threads whose registers hold the row: faster for
         * softmax and the norms on an H100 than about 4 vectors a thread,
         * which only a benchmark asks for (bench_nn's paths) */
        int threads = 128;
        if (path == TC__NN_PATH_REGS_WIDE)
            while (threads < 512 && a.n > (i64)threads * (vec ? VT : 1) * 4)
                threads *= 2;
        else
            while (threads < 512 && a.n > (i64)threads * PER_THREAD)
                threads *= 2;
        unsigned grid = cap_grid(a.rows);
        if (vec)
            rows_reg<T, O, OP, VT, false><<<grid, threads, 0, stream>>>(a);
        else
            rows_reg<T, O, OP, 1, false><<<grid, threads, 0, stream>>>(a);
        return;
    }
    if (path != TC__NN_PATH_LOOP && launch_smem<T, O, OP>(stream, a))
        return;
    rows_loop<T, O, OP><<<cap_grid(a.rows), 512, 0, stream>>>(a);
}

template <typename T, typename O> void launch_op(cudaStream_t stream, int op, const RowArgs &a)
{
    switch (op) {
    case SOFTMAX: launch_rows<T, O, SOFTMAX>(stream, a); break;
    case LOG_SOFTMAX: launch_rows<T, O, LOG_SOFTMAX>(stream, a); break;
    case LAYER: launch_rows<T, O, LAYER>(stream, a); break;
    default: launch_rows<T, O, RMS>(stream, a); break;
    }
}

} // namespace
} // namespace tcuda_kernels
using namespace tcuda_kernels;

extern "C" void tc__k_nn_rows_path(int path) { rows_path.store(path, std::memory_order_relaxed); }

extern "C" void tc__k_nn_rows(cudaStream_t stream, int sms, const tc__nn_rows *r)
{
    RowArgs a = {r->in, r->out, r->weight, r->bias, r->outer, r->n, r->eps, r->causal};
    if (r->inner > 1) { /* softmax along an inner dim (same dtypes) */
        dispatch_float(r->in_dtype, [&](auto *tag) {
            typedef typename std::remove_pointer<decltype(tag)>::type T;
            unsigned grid = grid_for(r->outer * r->inner, 256, sms);
            if (r->op == TC__NN_SOFTMAX)
                cols_softmax<T, SOFTMAX><<<grid, 256, 0, stream>>>((const T *)r->in, (T *)r->out,
                                                                   r->outer, r->n, r->inner);
            else
                cols_softmax<T, LOG_SOFTMAX><<<grid, 256, 0, stream>>>(
                    (const T *)r->in, (T *)r->out, r->outer, r->n, r->inner);
        });
        return;
    }
    if (r->in_dtype == TC_FLOAT32 && r->out_dtype == TC_FLOAT16) /* attention's probabilities */
        launch_rows<float, __half, SOFTMAX>(stream, a);
    else if (r->in_dtype == TC_FLOAT32 && r->out_dtype == TC_BFLOAT16)
        launch_rows<float, __nv_bfloat16, SOFTMAX>(stream, a);
    else
        dispatch_float(r->in_dtype, [&](auto *tag) {
            typedef typename std::remove_pointer<decltype(tag)>::type T;
            launch_op<T, T>(stream, (int)r->op, a);
        });
}
