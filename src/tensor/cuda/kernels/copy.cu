/* Copy kernels: strided, converting copies within a device, and fills
 * (constants and arange).
 *
 * A converting copy reads the source as double when either side is floating,
 * else as int64, and stores with the same rules as the CPU backend, so both
 * devices convert alike. A copy without conversion moves bytes only and is
 * instantiated per element size, not per dtype. */
#include "common.cuh"

using namespace tck;

namespace tcuda_kernels { /* graph_pdl.c knows tcuda's kernels by this name */
namespace {

template <typename S> struct Bytes {
    S v;
};

/* 16 bytes moved as one: the unit of a vectorized copy. */
struct alignas(16) Bytes16 {
    unsigned long long lo, hi;
};

/* Element offsets of linear index i, as offsets() does, in 32-bit
 * arithmetic where the caller knows every index fits (a 64-bit division is
 * several times the instructions of a 32-bit one). */
__device__ __forceinline__ void offsets32(const KIter<2> &it, unsigned i, i64 *off)
{
    off[0] = off[1] = 0;
    for (int d = it.ndim - 1; d >= 0; d--) {
        unsigned s = (unsigned)it.sizes[d], idx = i % s;
        i /= s;
        off[0] += (i64)idx * it.strides[0][d];
        off[1] += (i64)idx * it.strides[1][d];
    }
}

template <typename S, bool SMALL> __global__ void copy_kernel(KIter<2> it)
{
    tck_pdl_entry();
    S *o = (S *)it.data[0];
    const S *a = (const S *)it.data[1];
    i64 stride = (i64)gridDim.x * blockDim.x, tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    for (i64 i = tid; i < it.numel; i += stride) {
        i64 off[2];
        if (it.flat)
            element_offsets(it, i, off);
        else if (SMALL)
            offsets32(it, (unsigned)i, off);
        else
            offsets(it, i, off);
        o[off[0]] = a[off[1]];
    }
}

template <typename S> void launch_copy(cudaStream_t stream, int sms, const KIter<2> &k)
{
    unsigned grid = grid_for(k.numel, 256, sms);
    if (k.numel <= 0x7fffffff)
        copy_kernel<S, true><<<grid, 256, 0, stream>>>(k);
    else
        copy_kernel<S, false><<<grid, 256, 0, stream>>>(k);
}

/* A same-dtype copy whose innermost dim is dense on both sides, a multiple
 * of 16 bytes long, with every other stride and both pointers 16-byte
 * aligned (a transpose of heads [B, T, H, d] -> [B, H, T, d], say), as a
 * copy of 16-byte units: one index computation per 16 bytes. */
static bool copy_as_vectors(const tc__iter *it, size_t size, KIter<2> *k)
{
    int last = it->ndim - 1;
    int64_t w = (int64_t)(16 / size);
    if (last < 0 || size > 16 || it->strides[0][last] != 1 || it->strides[1][last] != 1 ||
        it->sizes[last] % w || (uintptr_t)it->data[0] % 16 || (uintptr_t)it->data[1] % 16)
        return false;
    for (int d = 0; d < last; d++)
        if (it->strides[0][d] % w || it->strides[1][d] % w)
            return false;
    *k = kiter<2>(it);
    k->sizes[last] /= w;
    k->numel /= w;
    for (int d = 0; d < last; d++)
        for (int o = 0; o < 2; o++)
            k->strides[o][d] /= w;
    return true;
}

template <typename D, typename S> __global__ void convert_kernel(KIter<2> it, int via_float)
{
    tck_pdl_entry();
    D *o = (D *)it.data[0];
    const S *a = (const S *)it.data[1];
    i64 stride = (i64)gridDim.x * blockDim.x, tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    for (i64 i = tid; i < it.numel; i += stride) {
        i64 off[2];
        element_offsets(it, i, off);
        if (via_float) {
            double v = load<double>(a + off[1]);
            if (std::is_floating_point<D>::value || std::is_same<D, __half>::value ||
                std::is_same<D, __nv_bfloat16>::value || std::is_same<D, Bool>::value)
                store(o + off[0], v);
            else
                store(o + off[0], f_to_i(v));
        } else {
            store(o + off[0], load<i64>(a + off[1]));
        }
    }
}

/* Four elements moved as one aligned unit. */
template <typename T> struct alignas(4 * sizeof(T)) Four {
    T v[4];
};

/* A dense conversion between float32 and the 16-bit floats, through float
 * (exact for each pair, so the same values as the double path): four
 * elements a thread in single vector loads and stores, the rest one by one.
 * Casting master weights to their 16-bit copies and gradients back runs
 * here, at the copy floor's bandwidth. */
template <typename D, typename S> __global__ void convert_dense4(D *o, const S *a, i64 n)
{
    tck_pdl_entry();
    i64 stride = (i64)gridDim.x * blockDim.x, tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    i64 n4 = n / 4;
    for (i64 i = tid; i < n4; i += stride) {
        Four<S> x = ((const Four<S> *)a)[i];
        Four<D> y;
        for (int k = 0; k < 4; k++)
            store(&y.v[k], load<float>(&x.v[k]));
        ((Four<D> *)o)[i] = y;
    }
    for (i64 i = n4 * 4 + tid; i < n; i += stride)
        store(o + i, load<float>(a + i));
}

template <typename T> __global__ void fill_kernel(T *o, i64 n, tc__fill v, int fl, int afl)
{
    tck_pdl_entry();
    i64 stride = (i64)gridDim.x * blockDim.x, tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    bool constant = v.step == 0;
    for (i64 i = tid; i < n; i += stride) {
        if (constant) {
            if (fl)
                store(o + i, v.start);
            else
                store(o + i, (i64)v.istart);
        } else {
            double x = __dadd_rn(v.start, __dmul_rn((double)i, v.step));
            if (afl)
                store(o + i, x);
            else
                store(o + i, f_to_i(x));
        }
    }
}

static bool is_float_16_32(tc_dtype t)
{
    return t == TC_FLOAT32 || t == TC_FLOAT16 || t == TC_BFLOAT16;
}

template <typename D, typename S>
void launch_dense4(cudaStream_t stream, int sms, void *o, const void *a, i64 n)
{
    convert_dense4<D, S>
        <<<grid_for((n + 3) / 4, 256, sms), 256, 0, stream>>>((D *)o, (const S *)a, n);
}

/* Dense conversions among float32, float16 and bfloat16 with both
 * pointers aligned for four elements: false for any other. */
static bool convert_dense(cudaStream_t stream, int sms, tc_dtype dst, tc_dtype src,
                          const tc__iter *it)
{
    KIter<2> k = kiter<2>(it);
    if (!k.contiguous || !is_float_16_32(dst) || !is_float_16_32(src) ||
        (uintptr_t)it->data[0] % (4 * tc_dtype_size(dst)) ||
        (uintptr_t)it->data[1] % (4 * tc_dtype_size(src)))
        return false;
    void *o = it->data[0];
    const void *a = it->data[1];
    i64 n = it->numel;
    switch (dst * 64 + src) {
    case TC_FLOAT32 * 64 + TC_BFLOAT16:
        launch_dense4<float, __nv_bfloat16>(stream, sms, o, a, n);
        break;
    case TC_FLOAT32 * 64 + TC_FLOAT16: launch_dense4<float, __half>(stream, sms, o, a, n); break;
    case TC_BFLOAT16 * 64 + TC_FLOAT32:
        launch_dense4<__nv_bfloat16, float>(stream, sms, o, a, n);
        break;
    case TC_FLOAT16 * 64 + TC_FLOAT32: launch_dense4<__half, float>(stream, sms, o, a, n); break;
    case TC_BFLOAT16 * 64 + TC_FLOAT16:
        launch_dense4<__nv_bfloat16, __half>(stream, sms, o, a, n);
        break;
    case TC_FLOAT16 * 64 + TC_BFLOAT16:
        launch_dense4<__half, __nv_bfloat16>(stream, sms, o, a, n);
        break;
    default: return false;
    }
    return true;
}

} // namespace
} // namespace tcuda_kernels
using namespace tcuda_kernels;

extern "C" void tc__k_convert(cudaStream_t stream, int sms, tc_dtype dst, tc_dtype src,
                              const tc__iter *it)
{
    unsigned grid = grid_for(it->numel, 256, sms);
    KIter<2> k = kiter<2>(it);
    if (dst == src) {
        KIter<2> v;
        if (copy_as_vectors(it, tc_dtype_size(dst), &v)) {
            launch_copy<Bytes16>(stream, sms, v);
            return;
        }
        switch (tc_dtype_size(dst)) {
        case 1: launch_copy<uint8_t>(stream, sms, k); break;
        case 2: launch_copy<uint16_t>(stream, sms, k); break;
        case 4: launch_copy<uint32_t>(stream, sms, k); break;
        default: launch_copy<unsigned long long>(stream, sms, k); break;
        }
        return;
    }
    if (convert_dense(stream, sms, dst, src, it))
        return;
    int via_float = tc_dtype_is_floating(dst) || tc_dtype_is_floating(src);
    dispatch(dst, [&](auto *dtag) {
        typedef typename std::remove_pointer<decltype(dtag)>::type D;
        dispatch(src, [&](auto *stag) {
            typedef typename std::remove_pointer<decltype(stag)>::type S;
            convert_kernel<D, S><<<grid, 256, 0, stream>>>(k, via_float);
        });
    });
}

extern "C" void tc__k_fill(cudaStream_t stream, int sms, tc_dtype dtype, void *out, int64_t n,
                           tc__fill v)
{
    /* constants: bool from the double as a cast; arange: bool from the int */
    int fl = tc_dtype_is_floating(dtype) || dtype == TC_BOOL, afl = tc_dtype_is_floating(dtype);
    dispatch(dtype, [&](auto *tag) {
        typedef typename std::remove_pointer<decltype(tag)>::type T;
        fill_kernel<T><<<grid_for(n, 256, sms), 256, 0, stream>>>((T *)out, n, v, fl, afl);
    });
}
