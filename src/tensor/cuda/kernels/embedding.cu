/* embedding's backward: grad_weight[index[i]] += grad_output[i] for every
 * position i, in one of two ways (tc__nn_embedding_bwd).
 *
 * Fast (the default): one grid-stride kernel of float atomic adds, into
 * grad_weight itself for float32 and float64, into a zeroed float32 scratch
 * for 16-bit dtypes, which a second kernel adds to grad_weight and rounds
 * (each element once). The order of the adds varies from run to run, and
 * so may the last bits. With scale_grad_by_freq a first kernel counts each
 * row's positions (integer atomics) and every contribution is divided by
 * its row's count.
 *
 * Deterministic: a first kernel writes each position's sort key (its row;
 * `v` for a padding or out-of-range index, which is reported and then left
 * out) and the positions 0..n-1; CUB's stable radix sort orders them by
 * row, positions ascending within a row; then one block per run of equal
 * keys and tile of columns sums the run in position order (float32 for
 * 16-bit dtypes and float32, double for float64), divides it by the run's
 * length with scale_grad_by_freq, and adds it to the row, rounded once. No
 * atomics: the same input gives the same bits. */
#include <cub/device/device_radix_sort.cuh>

#include "common.cuh"
#include "layers_kernels.h"

using namespace tck;

namespace tcuda_kernels { /* graph_pdl.c knows tcuda's kernels by this name */
namespace {

const int THREADS = 256;

/* Claims err's slot for an index out of range (kernel_errors.h). */
__device__ void report_index(tc__kernel_error *err, i64 pos, i64 index, i64 v)
{
    if (atomicCAS(&err->kind, TC__KERR_NONE, TC__KERR_WRITING) != TC__KERR_NONE)
        return;
    err->v[0] = pos, err->v[1] = index, err->v[2] = v;
    __threadfence_system();
    atomicExch(&err->kind, TC__KERR_EMBEDDING_INDEX);
}

/* ---- fast: atomic adds --------------------------------------------------------------- */

typedef unsigned long long u64;

/* counts[r]: the positions whose index is row r (r in range). */
__global__ void embedding_counts(const i64 *index, u64 *counts, i64 n, i64 v)
{
    tck_pdl_entry();
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (i64)gridDim.x * blockDim.x) {
        i64 r = index[i];
        if (r >= 0 && r < v)
            atomicAdd(counts + r, 1ull);
    }
}

/* dst[index[i] * c + j] += grad_output[i * c + j] (dst: grad_weight, or the
 * float32 scratch of a 16-bit one), divided by the row's count where counts
 * is not NULL. */
template <typename T, typename A>
__global__ void embedding_atomic(const T *go, const i64 *index, A *dst, const u64 *counts, i64 n,
                                 i64 c, i64 v, i64 padding, tc__kernel_error *err)
{
    tck_pdl_entry();
    i64 total = n * c;
    for (i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (i64)gridDim.x * blockDim.x) {
        i64 i = e / c, j = e - i * c, r = index[i];
        if (r < 0 || r >= v) {
            if (j == 0)
                report_index(err, i, r, v);
            continue;
        }
        if (r == padding)
            continue;
        A g = load<A>(go + e);
        atomicAdd(dst + r * c + j, counts ? g / (A)counts[r] : g);
    }
}

/* A 16-bit grad_weight += its float32 scratch, rounded once. */
template <typename T> __global__ void embedding_finish(T *gw, const float *scratch, i64 count)
{
    tck_pdl_entry();
    for (i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x; e < count;
         e += (i64)gridDim.x * blockDim.x)
        if (scratch[e] != 0) /* rows no position touched stay as they were, -0 too */
            store(gw + e, load<float>(gw + e) + scratch[e]);
}

/* ---- deterministic: sort, then a fixed-order sum per row ----------------------------- */

/* keys[i]: index[i]'s row, or v where the position is left out; pos[i] = i. */
__global__ void embedding_keys(const i64 *index, i64 *keys, i64 *pos, i64 n, i64 v, i64 padding,
                               tc__kernel_error *err)
{
    tck_pdl_entry();
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (i64)gridDim.x * blockDim.x) {
        i64 r = index[i];
        bool bad = r < 0 || r >= v;
        if (bad)
            report_index(err, i, r, v);
        keys[i] = bad || r == padding ? v : r;
        pos[i] = i;
    }
}

/* Block (p, tile): when sorted position p starts a run of equal keys (a
 * row), the run's rows of grad_output summed in order over the tile's
 * columns, added to grad_weight's row. */
template <typename T>
__global__ void embedding_runs(const T *go, const i64 *keys, const i64 *pos, T *gw, i64 n, i64 c,
                               i64 v, bool freq)
{
    tck_pdl_entry();
    typedef typename Compute<T>::type C;
    for (i64 p = blockIdx.x; p < n; p += gridDim.x) {
        i64 r = keys[p];
        if (r == v || (p > 0 && keys[p - 1] == r))
            continue;
        i64 len = 1;
        while (p + len < n && keys[p + len] == r)
            len++;
        for (i64 j = (i64)blockIdx.y * blockDim.x + threadIdx.x; j < c;
             j += (i64)gridDim.y * blockDim.x) {
            C s = 0;
            for (i64 q = p; q < p + len; q++)
                s += load<C>(go + pos[q] * c + j);
            if (freq)
                s /= (C)len;
            store(gw + r * c + j, load<C>(gw + r * c + j) + s);
        }
    }
}

/* The deterministic path's scratch: keys and positions in and out (n each),
 * then CUB's temporary storage; each part 256-byte aligned. */
struct SortScratch {
    i64 *keys_in, *keys_out, *pos_in, *pos_out;
    void *temp;
    size_t temp_bytes, total;
};

size_t align256(size_t b) { return (b + 255) & ~(size_t)255; }

/* Bits of the keys 0..v (v the left-out key). */
int key_bits(i64 v)
{
    int b = 1;
    while (b < 63 && ((i64)1 << b) <= v)
        b++;
    return b;
}

SortScratch sort_scratch(const tc__nn_embedding_bwd *a, void *base)
{
    SortScratch s = {};
    size_t arr = align256(sizeof(i64) * (size_t)a->n);
    (void)cub::DeviceRadixSort::SortPairs(nullptr, s.temp_bytes, (const i64 *)nullptr,
                                          (i64 *)nullptr, (const i64 *)nullptr, (i64 *)nullptr,
                                          a->n, 0, key_bits(a->v));
    s.total = 4 * arr + align256(s.temp_bytes);
    if (base) {
        char *b = (char *)base;
        s.keys_in = (i64 *)b, s.keys_out = (i64 *)(b + arr);
        s.pos_in = (i64 *)(b + 2 * arr), s.pos_out = (i64 *)(b + 3 * arr);
        s.temp = b + 4 * arr;
    }
    return s;
}

bool is_16bit(tc_dtype dt) { return dt == TC_FLOAT16 || dt == TC_BFLOAT16; }

} // namespace
} // namespace tcuda_kernels

using namespace tcuda_kernels;

/* The fast path's scratch: the float32 sums of a 16-bit gradient, then the
 * rows' counts with scale_grad_by_freq; each part 256-byte aligned. */
static size_t atomic_sums_bytes(const tc__nn_embedding_bwd *a)
{
    return is_16bit(a->dtype) ? align256(sizeof(float) * (size_t)(a->v * a->c)) : 0;
}

static size_t atomic_counts_bytes(const tc__nn_embedding_bwd *a)
{
    return a->scale_grad_by_freq ? align256(sizeof(u64) * (size_t)a->v) : 0;
}

extern "C" size_t tc__k_nn_embedding_backward_scratch(const tc__nn_embedding_bwd *a)
{
    if (a->deterministic)
        return sort_scratch(a, nullptr).total;
    return atomic_sums_bytes(a) + atomic_counts_bytes(a);
}

static cudaError_t deterministic(cudaStream_t stream, int sms, const tc__nn_embedding_bwd *a,
                                 void *scratch, tc__kernel_error *err)
{
    SortScratch s = sort_scratch(a, scratch);
    embedding_keys<<<grid_for(a->n, THREADS, sms), THREADS, 0, stream>>>(
        (const i64 *)a->indices, s.keys_in, s.pos_in, a->n, a->v, a->padding_idx, err);
    cudaError_t e = cub::DeviceRadixSort::SortPairs(s.temp, s.temp_bytes, s.keys_in, s.keys_out,
                                                    s.pos_in, s.pos_out, a->n, 0, key_bits(a->v),
                                                    stream);
    if (e != cudaSuccess)
        return e;
    i64 tiles = (a->c + THREADS - 1) / THREADS, runs = a->n < 65536 * 16 ? a->n : 65536 * 16;
    dim3 grid((unsigned)runs, (unsigned)(tiles < 65535 ? tiles : 65535));
    dispatch_float(a->dtype, [&](auto *tag) {
        typedef typename std::remove_pointer<decltype(tag)>::type T;
        embedding_runs<T><<<grid, THREADS, 0, stream>>>((const T *)a->grad_output, s.keys_out,
                                                        s.pos_out, (T *)a->grad_weight, a->n, a->c,
                                                        a->v, a->scale_grad_by_freq);
    });
    return cudaSuccess;
}

static cudaError_t atomics(cudaStream_t stream, int sms, const tc__nn_embedding_bwd *a,
                           void *scratch, tc__kernel_error *err)
{
    unsigned grid = grid_for(a->n * a->c, THREADS, sms);
    i64 count = a->v * a->c;
    size_t sums = atomic_sums_bytes(a), counted = atomic_counts_bytes(a);
    if (sums + counted) { /* both parts start at 0 */
        cudaError_t e = cudaMemsetAsync(scratch, 0, sums + counted, stream);
        if (e != cudaSuccess)
            return e;
    }
    u64 *counts = counted ? (u64 *)((char *)scratch + sums) : nullptr;
    if (counts)
        embedding_counts<<<grid_for(a->n, THREADS, sms), THREADS, 0, stream>>>(
            (const i64 *)a->indices, counts, a->n, a->v);
    const i64 *index = (const i64 *)a->indices;
    dispatch_float(a->dtype, [&](auto *tag) {
        typedef typename std::remove_pointer<decltype(tag)>::type T;
        typedef typename Compute<T>::type A;
        const T *go = (const T *)a->grad_output;
        if (!is_16bit(a->dtype)) {
            embedding_atomic<T, A><<<grid, THREADS, 0, stream>>>(
                go, index, (A *)a->grad_weight, counts, a->n, a->c, a->v, a->padding_idx, err);
            return;
        }
        embedding_atomic<T, float><<<grid, THREADS, 0, stream>>>(
            go, index, (float *)scratch, counts, a->n, a->c, a->v, a->padding_idx, err);
        embedding_finish<T><<<grid_for(count, THREADS, sms), THREADS, 0, stream>>>(
            (T *)a->grad_weight, (const float *)scratch, count);
    });
    return cudaSuccess;
}

extern "C" cudaError_t tc__k_nn_embedding_backward(cudaStream_t stream, int sms,
                                                   const tc__nn_embedding_bwd *a, void *scratch,
                                                   tc__kernel_error *err)
{
    return a->deterministic ? deterministic(stream, sms, a, scratch, err)
                            : atomics(stream, sms, a, scratch, err);
}
