/* Indexing kernels: gather (also index_select and embedding), scatter-add,
 * triangles (triu / tril) and top-k, over the tc__iter the core describes
 * (tensor/index_internal.h).
 *
 * Gather and triangles move elements as bytes, so they are instantiated per
 * element size, not per dtype. Scatter-add adds with atomics: atomicAdd for
 * float32, float64, float16 (sm_70+), bfloat16 (sm_80+), int32 and int64
 * (two's-complement wrap, as the CPU); int8, uint8 and int16 with a
 * compare-and-swap on the aligned 32-bit word that holds them (as PyTorch's
 * gpuAtomicAdd; tensor memory comes from allocations of whole words); bool
 * is a logical or (atomicOr on that word). Index values out of range stop
 * the kernel with a device-side assert, in every build type (as PyTorch's
 * CUDA_KERNEL_ASSERT): the host sees cudaErrorAssert at its next sync.
 *
 * Top-k: one block per slice (grid-stride over slices) bitonic-sorts the
 * slice, padded to a power of two, by (value, index) keys (NaN above every
 * number, ties by lower index: a strict order, so the result is
 * deterministic), in shared memory when it fits and in global scratch
 * otherwise; then writes the first k. O(r log^2 r) per slice: simple and
 * exact, not the radix select PyTorch uses for large slices. */
#ifdef NDEBUG
#undef NDEBUG /* the index checks are asserts in every build type */
#endif
#include <assert.h>

#include "common.cuh"
#include "index_kernels.h"

using namespace tck;

namespace tcuda_kernels { /* graph_pdl.c knows tcuda's kernels by this name */
namespace {

#define TC_INDEX_CHECK(v, size) assert((v) >= 0 && (v) < (size))

const int THREADS = 256;

/* Calls f((U *)0) with U an unsigned type of the element size. */
template <typename F> void by_size(size_t es, F f)
{
    switch (es) {
    case 1: f((uint8_t *)0); break;
    case 2: f((uint16_t *)0); break;
    case 4: f((uint32_t *)0); break;
    default: f((unsigned long long *)0); break;
    }
}

template <typename T, typename I>
__global__ void gather_kernel(KIter<3> it, i64 dim_stride, i64 dim_size)
{
    tck_pdl_entry();
    i64 stride = (i64)gridDim.x * blockDim.x, tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    for (i64 i = tid; i < it.numel; i += stride) {
        i64 off[3];
        offsets(it, i, off);
        i64 v = (i64)((const I *)it.data[2])[off[2]];
        TC_INDEX_CHECK(v, dim_size);
        if (v >= 0 && v < dim_size)
            ((T *)it.data[0])[off[0]] = ((const T *)it.data[1])[off[1] + v * dim_stride];
    }
}

/* Whole rows (embedding, index_select of dim 0): out [rows, vecs] of
 * 16-byte vectors, row r a copy of row idx[r] of src (rows `step` vectors
 * apart). Consecutive threads take consecutive vectors of a row. */
template <typename I>
__global__ void gather_rows_kernel(uint4 *out, const uint4 *src, const I *idx, i64 rows,
                                   unsigned vecs, i64 step, i64 dim_size)
{
    tck_pdl_entry();
    i64 stride = (i64)gridDim.x * blockDim.x, tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    for (i64 i = tid; i < rows * vecs; i += stride) {
        i64 r = i / vecs, c = i % vecs, v = (i64)idx[r];
        TC_INDEX_CHECK(v, dim_size);
        if (v >= 0 && v < dim_size)
            out[i] = src[v * step + c];
    }
}

/* The 16-byte vectors of a row when `it` gathers whole rows: out dense; the
 * last dim unit-stride in out and src, whole vectors, not indexed; the
 * index dense over the leading dims, which src does not move along; 16-byte
 * aligned data and row step. 0 otherwise. */
unsigned row_vectors(const tc__iter *it, size_t es, int64_t dim_stride)
{
    int nd = it->ndim;
    if (nd < 1 || it->nops != 3 || it->strides[0][nd - 1] != 1 || it->strides[1][nd - 1] != 1 ||
        it->strides[2][nd - 1] != 0 || (it->sizes[nd - 1] * (int64_t)es) % 16 ||
        (dim_stride * (int64_t)es) % 16)
        return 0;
    for (int i = 0; i < 3; i++)
        if ((uintptr_t)it->data[i] % (i == 2 ? 1 : 16))
            return 0;
    int64_t want_o = it->sizes[nd - 1], want_i = 1;
    for (int d = nd - 2; d >= 0; d--) {
        if (it->sizes[d] != 1 &&
            (it->strides[0][d] != want_o || it->strides[2][d] != want_i || it->strides[1][d] != 0))
            return 0;
        want_o *= it->sizes[d];
        want_i *= it->sizes[d];
    }
    int64_t vecs = it->sizes[nd - 1] * (int64_t)es / 16;
    return vecs <= UINT32_MAX ? (unsigned)vecs : 0;
}

/* ---- atomic adds ------------------------------------------------------------------ */

/* 8- and 16-bit integers: compare-and-swap on the aligned word around them. */
template <typename T> __device__ void atomic_add_small(T *p, T v)
{
    size_t addr = (size_t)p;
    unsigned int *w = (unsigned int *)(addr & ~(size_t)3);
    unsigned shift = (unsigned)(addr & 3) * 8, bits = sizeof(T) * 8;
    unsigned lane = (1u << bits) - 1, mask = lane << shift;
    unsigned add = (unsigned)(typename std::make_unsigned<T>::type)v;
    unsigned old = *w, assumed;
    do {
        assumed = old;
        unsigned sum = (((assumed & mask) >> shift) + add) & lane;
        old = atomicCAS(w, assumed, (assumed & ~mask) | (sum << shift));
    } while (assumed != old);
}

__device__ __forceinline__ void atomic_add(float *p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(double *p, double v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(__half *p, __half v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(__nv_bfloat16 *p, __nv_bfloat16 v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(int32_t *p, int32_t v) { atomicAdd((int *)p, (int)v); }
__device__ __forceinline__ void atomic_add(i64 *p, i64 v)
{
    atomicAdd((unsigned long long *)p, (unsigned long long)v);
}
__device__ __forceinline__ void atomic_add(uint8_t *p, uint8_t v) { atomic_add_small(p, v); }
__device__ __forceinline__ void atomic_add(int8_t *p, int8_t v) { atomic_add_small(p, v); }
__device__ __forceinline__ void atomic_add(int16_t *p, int16_t v) { atomic_add_small(p, v); }
__device__ __forceinline__ void atomic_add(Bool *p, Bool v)
{
    size_t addr = (size_t)p;
    if (v.v)
        atomicOr((unsigned int *)(addr & ~(size_t)3), 1u << ((unsigned)(addr & 3) * 8));
}

template <typename T> __global__ void scatter_add_kernel(KIter<3> it, i64 dim_stride, i64 dim_size)
{
    tck_pdl_entry();
    i64 stride = (i64)gridDim.x * blockDim.x, tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    for (i64 i = tid; i < it.numel; i += stride) {
        i64 off[3];
        offsets(it, i, off);
        i64 v = ((const i64 *)it.data[2])[off[2]];
        TC_INDEX_CHECK(v, dim_size);
        if (v >= 0 && v < dim_size)
            atomic_add((T *)it.data[0] + off[0] + v * dim_stride, ((const T *)it.data[1])[off[1]]);
    }
}

/* ---- triangles -------------------------------------------------------------------- */

template <typename T> __global__ void tri_kernel(KIter<2> it, bool upper, i64 diagonal)
{
    tck_pdl_entry();
    i64 stride = (i64)gridDim.x * blockDim.x, tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    i64 cols = it.sizes[it.ndim - 1], rows = it.sizes[it.ndim - 2];
    for (i64 i = tid; i < it.numel; i += stride) {
        i64 off[2];
        offsets(it, i, off);
        i64 col = i % cols, row = (i / cols) % rows, d = col - row;
        bool keep = upper ? d >= diagonal : d <= diagonal;
        ((T *)it.data[0])[off[0]] = keep ? ((const T *)it.data[1])[off[1]] : (T)0;
    }
}

/* ---- top-k ---------------------------------------------------------------------------- */

/* Slices at most this many bytes of keys sort in shared memory. */
const size_t TOPK_SHARED = 48 * 1024;
/* Global scratch for the sort is capped near this; fewer blocks run then. */
const size_t TOPK_SCRATCH = (size_t)256 << 20;
const int TOPK_THREADS = 1024;

i64 pow2_at_least(i64 r)
{
    i64 p = 1;
    while (p < r)
        p <<= 1;
    return p;
}

/* Blocks of the top-k launch, and whether they sort in shared memory. */
unsigned topk_blocks(int sms, size_t per_slice, i64 slices, bool *shared)
{
    *shared = per_slice <= TOPK_SHARED;
    i64 cap = (i64)(sms > 0 ? sms : 80) * 2;
    if (!*shared) {
        i64 fit = (i64)(TOPK_SCRATCH / per_slice);
        cap = fit < cap ? fit : cap;
    }
    if (cap < 1)
        cap = 1;
    return (unsigned)(slices < cap ? slices : cap);
}

/* Whether (av, ai) comes before (bv, bi); index -1 pads and comes last. */
template <typename T>
__device__ __forceinline__ bool before(const T &av, i64 ai, const T &bv, i64 bi, bool largest)
{
    if (ai < 0 || bi < 0)
        return bi < 0 && ai >= 0;
    typedef typename Compute<T>::type C;
    C a = load<C>(&av), b = load<C>(&bv);
    bool an = a != a, bn = b != b; /* NaN */
    if (an || bn)
        return an && bn ? ai < bi : (largest ? an : bn);
    if (a != b)
        return largest ? a > b : a < b;
    return ai < bi;
}

/* Up to 1024 threads a block: the bounds keep the registers within what that
 * allows (64 a thread), or the launch would fail. */
template <typename T>
__global__ void __launch_bounds__(TOPK_THREADS)
    topk_kernel(const T *in, T *vals, i64 *idxs, i64 outer, i64 r, i64 inner, i64 k, bool largest,
                i64 p2, char *scratch)
{
    tck_pdl_entry();
    extern __shared__ __align__(16) unsigned char smem[];
    size_t per = (size_t)p2 * (sizeof(i64) + sizeof(T));
    char *base = scratch ? scratch + (size_t)blockIdx.x * per : (char *)smem;
    i64 *ki = (i64 *)base;
    T *kv = (T *)(base + (size_t)p2 * sizeof(i64));
    for (i64 s = blockIdx.x; s < outer * inner; s += gridDim.x) {
        i64 o = s / inner, c = s % inner;
        const T *src = in + o * r * inner + c;
        for (i64 i = threadIdx.x; i < p2; i += blockDim.x) {
            ki[i] = i < r ? i : -1;
            if (i < r)
                kv[i] = src[i * inner];
        }
        __syncthreads();
        for (i64 size = 2; size <= p2; size <<= 1)
            for (i64 j = size >> 1; j > 0; j >>= 1) {
                for (i64 i = threadIdx.x; i < p2; i += blockDim.x) {
                    i64 l = i ^ j;
                    if (l <= i)
                        continue;
                    bool up = (i & size) == 0;
                    bool swap = up ? before(kv[l], ki[l], kv[i], ki[i], largest)
                                   : before(kv[i], ki[i], kv[l], ki[l], largest);
                    if (swap) {
                        T tv = kv[i];
                        kv[i] = kv[l];
                        kv[l] = tv;
                        i64 ti = ki[i];
                        ki[i] = ki[l];
                        ki[l] = ti;
                    }
                }
                __syncthreads();
            }
        for (i64 j = threadIdx.x; j < k; j += blockDim.x) {
            i64 at = o * k * inner + j * inner + c;
            vals[at] = kv[j];
            idxs[at] = ki[j];
        }
        __syncthreads();
    }
}

} // namespace
} // namespace tcuda_kernels
using namespace tcuda_kernels;

extern "C" void tc__k_gather(cudaStream_t stream, int sms, tc_dtype dtype, tc_dtype index_dtype,
                             const tc__iter *it, int64_t dim_stride, int64_t dim_size)
{
    size_t es = tc_dtype_size(dtype);
    unsigned vecs = row_vectors(it, es, dim_stride);
    if (vecs) { /* whole rows, 16 bytes a thread */
        i64 rows = it->numel / it->sizes[it->ndim - 1], step = dim_stride * (i64)es / 16;
        unsigned g = grid_for(rows * vecs, THREADS, sms);
        uint4 *out = (uint4 *)it->data[0];
        const uint4 *src = (const uint4 *)it->data[1];
        if (index_dtype == TC_INT32)
            gather_rows_kernel<<<g, THREADS, 0, stream>>>(out, src, (const int32_t *)it->data[2],
                                                          rows, vecs, step, (i64)dim_size);
        else
            gather_rows_kernel<<<g, THREADS, 0, stream>>>(out, src, (const i64 *)it->data[2], rows,
                                                          vecs, step, (i64)dim_size);
        return;
    }
    by_size(es, [&](auto *tag) {
        typedef typename std::remove_pointer<decltype(tag)>::type T;
        unsigned g = grid_for(it->numel, THREADS, sms);
        if (index_dtype == TC_INT32)
            gather_kernel<T, int32_t>
                <<<g, THREADS, 0, stream>>>(kiter<3>(it), (i64)dim_stride, (i64)dim_size);
        else
            gather_kernel<T, i64>
                <<<g, THREADS, 0, stream>>>(kiter<3>(it), (i64)dim_stride, (i64)dim_size);
    });
}

extern "C" void tc__k_scatter_add(cudaStream_t stream, int sms, tc_dtype dtype, const tc__iter *it,
                                  int64_t dim_stride, int64_t dim_size)
{
    dispatch(dtype, [&](auto *tag) {
        typedef typename std::remove_pointer<decltype(tag)>::type T;
        scatter_add_kernel<T><<<grid_for(it->numel, THREADS, sms), THREADS, 0, stream>>>(
            kiter<3>(it), (i64)dim_stride, (i64)dim_size);
    });
}

extern "C" void tc__k_tri(cudaStream_t stream, int sms, tc_dtype dtype, bool upper,
                          int64_t diagonal, const tc__iter *it)
{
    by_size(tc_dtype_size(dtype), [&](auto *tag) {
        typedef typename std::remove_pointer<decltype(tag)>::type T;
        tri_kernel<T><<<grid_for(it->numel, THREADS, sms), THREADS, 0, stream>>>(
            kiter<2>(it), upper, (i64)diagonal);
    });
}

extern "C" size_t tc__k_topk_scratch(int sms, tc_dtype dtype, int64_t slices, int64_t r)
{
    size_t per = (size_t)pow2_at_least(r) * (sizeof(i64) + tc_dtype_size(dtype));
    bool shared;
    unsigned blocks = topk_blocks(sms, per, slices, &shared);
    return shared ? 0 : per * blocks;
}

extern "C" void tc__k_topk(cudaStream_t stream, int sms, tc_dtype dtype, const void *in,
                           void *values, int64_t *indices, int64_t outer, int64_t r, int64_t inner,
                           int64_t k, bool largest, void *scratch)
{
    i64 p2 = pow2_at_least(r);
    dispatch(dtype, [&](auto *tag) {
        typedef typename std::remove_pointer<decltype(tag)>::type T;
        size_t per = (size_t)p2 * (sizeof(i64) + sizeof(T));
        bool shared;
        unsigned blocks = topk_blocks(sms, per, outer * inner, &shared);
        i64 th = p2 / 2 < TOPK_THREADS ? (p2 / 2 > 32 ? p2 / 2 : 32) : TOPK_THREADS;
        topk_kernel<T><<<blocks, (unsigned)th, shared ? per : 0, stream>>>(
            (const T *)in, (T *)values, (i64 *)indices, outer, r, inner, k, largest, p2,
            shared ? NULL : (char *)scratch);
    });
}
