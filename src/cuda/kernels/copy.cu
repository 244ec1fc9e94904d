/* Copy kernels: strided, converting copies within a device, and fills
 * (constants and arange).
 *
 * A converting copy reads the source as double when either side is floating,
 * else as int64, and stores with the same rules as the CPU backend, so both
 * devices convert alike. A copy without conversion moves bytes only and is
 * instantiated per element size, not per dtype. */
#include "common.cuh"

using namespace tck;

namespace {

template <typename S> struct Bytes {
    S v;
};

template <typename S> __global__ void copy_kernel(KIter<2> it)
{
    S *o = (S *)it.data[0];
    const S *a = (const S *)it.data[1];
    i64 stride = (i64)gridDim.x * blockDim.x, tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    for (i64 i = tid; i < it.numel; i += stride) {
        i64 off[2];
        offsets(it, i, off);
        o[off[0]] = a[off[1]];
    }
}

template <typename D, typename S> __global__ void convert_kernel(KIter<2> it, int via_float)
{
    D *o = (D *)it.data[0];
    const S *a = (const S *)it.data[1];
    i64 stride = (i64)gridDim.x * blockDim.x, tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    for (i64 i = tid; i < it.numel; i += stride) {
        i64 off[2] = {i, i};
        if (!it.contiguous)
            offsets(it, i, off);
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

template <typename T> __global__ void fill_kernel(T *o, i64 n, tc__fill v, int fl, int afl)
{
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

} // namespace

extern "C" void tc__k_convert(cudaStream_t stream, int sms, tc_dtype dst, tc_dtype src,
                              const tc__iter *it)
{
    unsigned grid = grid_for(it->numel, 256, sms);
    KIter<2> k = kiter<2>(it);
    if (dst == src) {
        switch (tc_dtype_size(dst)) {
        case 1: copy_kernel<uint8_t><<<grid, 256, 0, stream>>>(k); break;
        case 2: copy_kernel<uint16_t><<<grid, 256, 0, stream>>>(k); break;
        case 4: copy_kernel<uint32_t><<<grid, 256, 0, stream>>>(k); break;
        default: copy_kernel<unsigned long long><<<grid, 256, 0, stream>>>(k); break;
        }
        return;
    }
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
