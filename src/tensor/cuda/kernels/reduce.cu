/* Reduction kernels: sum, mean, prod, max, min, argmax and argmin of a
 * contiguous tensor seen as [outer, r, inner], reduced over r.
 *
 * inner == 1 (rows): blocks reduce slices of a row with warp shuffles; when
 * there are too few rows to fill the GPU, each row is split over several
 * blocks that write partial results to scratch memory, and a second launch
 * combines them. inner > 1 (columns): one thread per output walks r with
 * coalesced reads; where those threads are too few to fill the GPU and r
 * is long (a [rows, n] tensor summed over its rows: linear's bias
 * gradient), blocks of 32 columns by 8 row lanes take slices of r and
 * write partial results that the same second launch combines. Sums and
 * products accumulate in float (int64 for
 * integers, wrapping; double for float64); max/min propagate NaN;
 * argmax/argmin keep the first index. */
#include "common.cuh"

using namespace tck;

namespace tcuda_kernels { /* graph_pdl.c knows tcuda's kernels by this name */
namespace {

template <typename C> struct Acc {
    C v;
    i64 idx;
};

template <typename C> __device__ __forceinline__ bool isnan_(C x) { return x != x; }

template <typename C> __device__ __forceinline__ Acc<C> combine(int op, Acc<C> a, Acc<C> b)
{
    if (op == TC__RED_SUM || op == TC__RED_MEAN) {
        a.v = a.v + b.v;
        return a;
    }
    if (op == TC__RED_PROD) {
        if constexpr (std::is_integral<C>::value) /* wraps, as the CPU's */
            a.v = (C)((unsigned long long)a.v * (unsigned long long)b.v);
        else
            a.v = a.v * b.v;
        return a;
    }
    if (b.idx < 0)
        return a;
    if (a.idx < 0)
        return b;
    /* keep the earlier index on ties; NaN wins (the first NaN) */
    Acc<C> first = a.idx <= b.idx ? a : b, second = a.idx <= b.idx ? b : a;
    if (isnan_(first.v))
        return first;
    if (isnan_(second.v))
        return second;
    bool lo = op == TC__RED_MIN || op == TC__RED_ARGMIN;
    bool take2 = lo ? second.v < first.v : second.v > first.v;
    return take2 ? second : first;
}

template <typename C> __device__ __forceinline__ Acc<C> identity(int op)
{
    Acc<C> a;
    a.v = op == TC__RED_PROD ? (C)1 : (C)0;
    a.idx = -1;
    return a;
}

template <typename C> __device__ Acc<C> block_reduce(int op, Acc<C> a)
{
    __shared__ C sv[32];
    __shared__ i64 si[32];
    for (int o = 16; o > 0; o >>= 1) {
        Acc<C> b;
        b.v = __shfl_down_sync(0xffffffffu, a.v, o);
        b.idx = __shfl_down_sync(0xffffffffu, a.idx, o);
        a = combine(op, a, b);
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        sv[warp] = a.v;
        si[warp] = a.idx;
    }
    __syncthreads();
    int nw = (blockDim.x + 31) >> 5;
    if (warp == 0) {
        a = identity<C>(op);
        if (lane < nw) {
            a.v = sv[lane];
            a.idx = si[lane];
        }
        for (int o = 16; o > 0; o >>= 1) {
            Acc<C> b;
            b.v = __shfl_down_sync(0xffffffffu, a.v, o);
            b.idx = __shfl_down_sync(0xffffffffu, a.idx, o);
            a = combine(op, a, b);
        }
    }
    return a;
}

template <typename T, typename C>
__device__ __forceinline__ void finish(int op, Acc<C> a, i64 r, void *out, i64 at, int out_i64)
{
    if (op == TC__RED_ARGMAX || op == TC__RED_ARGMIN)
        ((i64 *)out)[at] = a.idx;
    else if (op == TC__RED_MEAN)
        store((T *)out + at, (C)(a.v / (C)r));
    else if (out_i64)
        ((i64 *)out)[at] = (i64)a.v;
    else
        store((T *)out + at, a.v);
}

template <typename T, int N> struct alignas(16) Vec {
    T v[N];
};

/* grid (splits, rows): the splits blocks of row o stride over it together
 * (thread g of the row's team reads elements g, g + team, ...: interleaved
 * rather than one slice per block, which streams about 6% faster on an
 * H100). With one split a block writes the result, else a partial to
 * scratch[o * splits + s]. `vec`: every row starts 16-byte aligned, so the
 * row is read 16 bytes at a time. Four loads are in flight per thread;
 * combine() orders by index, so the order of combining does not change
 * max/min/argmax. */
template <typename T>
__global__ void rows_kernel(const T *in, void *out, Acc<typename Compute<T>::type> *scratch, i64 r,
                            int op, int out_i64, int vec)
{
    tck_pdl_entry();
    typedef typename Compute<T>::type C;
    constexpr int N = 16 / sizeof(T) > 0 ? 16 / sizeof(T) : 1;
    i64 o = blockIdx.y, splits = gridDim.x;
    i64 team = splits * blockDim.x, g = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const T *row = in + o * r;
    Acc<C> a = identity<C>(op);
    i64 j = g;
    if (vec) {
        const Vec<T, N> *v = (const Vec<T, N> *)row;
        i64 nv = r / N, t = g;
        bool sum = op == TC__RED_SUM || op == TC__RED_MEAN;
        for (; t + 3 * team < nv; t += 4 * team) {
            Vec<T, N> b[4];
#pragma unroll
            for (int u = 0; u < 4; u++)
                b[u] = v[t + u * team];
#pragma unroll
            for (int u = 0; u < 4; u++)
#pragma unroll
                for (int k = 0; k < N; k++) {
                    if (sum) {
                        a.v += load<C>(&b[u].v[k]);
                    } else {
                        Acc<C> e;
                        e.v = load<C>(&b[u].v[k]);
                        e.idx = (t + u * team) * N + k;
                        a = combine(op, a, e);
                    }
                }
        }
        for (; t < nv; t += team) {
            Vec<T, N> b = v[t];
#pragma unroll
            for (int k = 0; k < N; k++) {
                Acc<C> e;
                e.v = load<C>(&b.v[k]);
                e.idx = t * N + k;
                a = combine(op, a, e);
            }
        }
        j = nv * N + g;
    }
    for (; j + 3 * team < r; j += 4 * team) {
        Acc<C> b[4];
#pragma unroll
        for (int u = 0; u < 4; u++) {
            b[u].v = load<C>(row + j + u * team);
            b[u].idx = j + u * team;
        }
#pragma unroll
        for (int u = 0; u < 4; u++)
            a = combine(op, a, b[u]);
    }
    for (; j < r; j += team) {
        Acc<C> b;
        b.v = load<C>(row + j);
        b.idx = j;
        a = combine(op, a, b);
    }
    a = block_reduce(op, a);
    if (threadIdx.x == 0) {
        if (splits == 1)
            finish<T, C>(op, a, r, out, o, out_i64);
        else
            scratch[o * splits + blockIdx.x] = a;
    }
}

template <typename T>
__global__ void combine_kernel(const Acc<typename Compute<T>::type> *scratch, int splits, void *out,
                               i64 r, int op, int out_i64)
{
    tck_pdl_entry();
    typedef typename Compute<T>::type C;
    i64 o = blockIdx.x;
    Acc<C> a = identity<C>(op);
    for (int s = threadIdx.x; s < splits; s += blockDim.x)
        a = combine(op, a, scratch[o * splits + s]);
    a = block_reduce(op, a);
    if (threadIdx.x == 0)
        finish<T, C>(op, a, r, out, o, out_i64);
}

template <typename T>
__global__ void cols_kernel(const T *in, void *out, i64 outer, i64 r, i64 inner, int op,
                            int out_i64)
{
    tck_pdl_entry();
    typedef typename Compute<T>::type C;
    i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < outer * inner; i += stride) {
        i64 o = i / inner, k = i % inner;
        const T *p = in + o * r * inner + k;
        Acc<C> a = identity<C>(op);
        for (i64 j = 0; j < r; j++) {
            Acc<C> b;
            b.v = load<C>(p + j * inner);
            b.idx = j;
            a = combine(op, a, b);
        }
        finish<T, C>(op, a, r, out, i, out_i64);
    }
}

/* grid (column tiles of 32, outer, splits): rows [s * chunk, (s + 1) *
 * chunk) of 32 columns of slice o, thread (x, y) walking column x's rows
 * y, y + 8, ... (a warp reads 32 neighbouring columns of one row), then
 * the 8 lanes of a column combined in order. With one split a block writes
 * the results, else partials to scratch[(o * inner + k) * splits + s]. */
template <typename T>
__global__ void __launch_bounds__(256)
    cols_split_kernel(const T *in, void *out, Acc<typename Compute<T>::type> *scratch, i64 r,
                      i64 inner, i64 chunk, int op, int out_i64)
{
    tck_pdl_entry();
    typedef typename Compute<T>::type C;
    __shared__ C sv[8][33];
    __shared__ i64 si[8][33];
    i64 o = blockIdx.y, k = (i64)blockIdx.x * 32 + threadIdx.x;
    int s = blockIdx.z, splits = gridDim.z;
    i64 j1 = min(r, (s + 1) * chunk);
    Acc<C> a = identity<C>(op);
    if (k < inner) {
        const T *p = in + o * r * inner + k;
        i64 j = s * chunk + threadIdx.y;
        for (; j + 24 < j1; j += 32) { /* four loads in flight */
            Acc<C> b[4];
#pragma unroll
            for (int u = 0; u < 4; u++) {
                b[u].v = load<C>(p + (j + 8 * u) * inner);
                b[u].idx = j + 8 * u;
            }
#pragma unroll
            for (int u = 0; u < 4; u++)
                a = combine(op, a, b[u]);
        }
        for (; j < j1; j += 8) {
            Acc<C> b;
            b.v = load<C>(p + j * inner);
            b.idx = j;
            a = combine(op, a, b);
        }
    }
    sv[threadIdx.y][threadIdx.x] = a.v;
    si[threadIdx.y][threadIdx.x] = a.idx;
    __syncthreads();
    if (threadIdx.y != 0 || k >= inner)
        return;
    for (int y = 1; y < 8; y++) {
        Acc<C> b;
        b.v = sv[y][threadIdx.x];
        b.idx = si[y][threadIdx.x];
        a = combine(op, a, b);
    }
    if (splits == 1)
        finish<T, C>(op, a, r, out, o * inner + k, out_i64);
    else
        scratch[(o * inner + k) * splits + s] = a;
}

} // namespace
} // namespace tcuda_kernels
using namespace tcuda_kernels;

/* The column split for the cols_split kernel: r's slices, so that about 4
 * blocks an SM run, each slice at least 256 rows (0: a thread per output
 * instead, where there are enough outputs to fill the GPU, r is short,
 * inner is under half a tile, or outer passes grid.y's limit). */
static int col_splits(int sms, int64_t outer, int64_t r, int64_t inner)
{
    int64_t threads = (int64_t)(sms > 0 ? sms : 80) * 1024;
    if (inner < 16 || r < 512 || outer > 65535 || outer * inner >= threads)
        return 0;
    int64_t tiles = outer * ((inner + 31) / 32);
    int64_t want = ((int64_t)(sms > 0 ? sms : 80) * 4 + tiles - 1) / tiles;
    int64_t most = r / 256;
    int64_t splits = want < most ? want : most;
    return (int)(splits < 1 ? 1 : splits > 1024 ? 1024 : splits);
}

/* Blocks per row for the rows kernel: about 4 per SM in all, each with at
 * least 4096 elements; 0 when the rows kernel is not used. */
static int splits_for(int sms, int64_t outer, int64_t r, int64_t inner)
{
    if (inner > 1 || r == 0 || outer > 65535) /* grid.y limit */
        return 0;
    int64_t want = ((int64_t)(sms > 0 ? sms : 80) * 4 + outer - 1) / outer;
    int64_t most = (r + 4095) / 4096;
    int64_t splits = want < most ? want : most;
    return (int)(splits < 1 ? 1 : splits > 1024 ? 1024 : splits);
}

extern "C" size_t tc__k_reduce_scratch(int sms, tc_dtype in_dtype, int64_t outer, int64_t r,
                                       int64_t inner)
{
    size_t bytes = 0;
    int splits = splits_for(sms, outer, r, inner), csplits = col_splits(sms, outer, r, inner);
    dispatch(in_dtype, [&](auto *tag) {
        typedef typename std::remove_pointer<decltype(tag)>::type T;
        if (splits > 1)
            bytes = sizeof(Acc<typename Compute<T>::type>) * (size_t)(outer * splits);
        if (csplits > 1)
            bytes = sizeof(Acc<typename Compute<T>::type>) * (size_t)(outer * inner * csplits);
    });
    return bytes;
}

extern "C" void tc__k_reduce(cudaStream_t stream, int sms, tc__op op, tc_dtype in_dtype,
                             tc_dtype out_dtype, const void *in, void *out, int64_t outer,
                             int64_t r, int64_t inner, void *scratch)
{
    int out_i64 = out_dtype == TC_INT64;
    int splits = splits_for(sms, outer, r, inner);
    dispatch(in_dtype, [&](auto *tag) {
        typedef typename std::remove_pointer<decltype(tag)>::type T;
        typedef Acc<typename Compute<T>::type> A;
        int cs = col_splits(sms, outer, r, inner);
        if (cs > 0) { /* long columns, too few to fill the GPU: split over r */
            i64 chunk = (r + cs - 1) / cs;
            dim3 grid((unsigned)((inner + 31) / 32), (unsigned)outer, (unsigned)cs);
            cols_split_kernel<T><<<grid, dim3(32, 8), 0, stream>>>(
                (const T *)in, out, (A *)scratch, r, inner, chunk, (int)op, out_i64);
            if (cs > 1)
                combine_kernel<T><<<(unsigned)(outer * inner), 32, 0, stream>>>(
                    (A *)scratch, cs, out, r, (int)op, out_i64);
            return;
        }
        if (splits == 0) { /* columns, empty rows, or too many rows: a thread per output */
            cols_kernel<T><<<grid_for(outer * inner, 256, sms), 256, 0, stream>>>(
                (const T *)in, out, outer, r, inner, (int)op, out_i64);
            return;
        }
        int vec = (uintptr_t)in % 16 == 0 && (r * (int64_t)sizeof(T)) % 16 == 0;
        rows_kernel<T><<<dim3(splits, (unsigned)outer), 512, 0, stream>>>(
            (const T *)in, out, (A *)scratch, r, (int)op, out_i64, vec);
        if (splits > 1)
            combine_kernel<T><<<(unsigned)outer, 256, 0, stream>>>((A *)scratch, splits, out, r,
                                                                   (int)op, out_i64);
    });
}
