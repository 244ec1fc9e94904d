/* dropout's product, forward and backward: out = x * mask * scale, one
 * grid-stride element-wise kernel. The operations and their order are the
 * CPU's (cpu/cpu_nn_layers.c): in float for 16-bit dtypes and float32 (x
 * times the mask, exact, then times the scale rounded to float), in double
 * for float64, so the two give the same bits. Aligned operands go 16 bytes
 * of x a load (dropout_kernel16). */
#include "common.cuh"
#include "layers_kernels.h"

using namespace tck;

namespace tcuda_kernels { /* graph_pdl.c knows tcuda's kernels by this name */
namespace {

template <typename T>
__global__ void dropout_kernel(const T *x, const uint8_t *mask, T *out, i64 n,
                               typename Compute<T>::type scale)
{
    tck_pdl_entry();
    typedef typename Compute<T>::type C;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (i64)gridDim.x * blockDim.x) {
        C y = load<C>(x + i) * (C)mask[i];
        y = y * scale;
        store(out + i, y);
    }
}

/* V mask bytes, moved as one aligned unit beside a Pack16 of T. */
template <int V> struct alignas(V) MaskPack {
    uint8_t b[V];
};

/* dropout_kernel for x and out on 16-byte boundaries and the mask on V
 * bytes' (V = Pack16<T>::V): packs of V elements, the tail one by one. */
template <typename T>
__global__ void dropout_kernel16(const T *x, const uint8_t *mask, T *out, i64 n,
                                 typename Compute<T>::type scale)
{
    tck_pdl_entry();
    typedef typename Compute<T>::type C;
    typedef Pack16<T> P;
    const i64 step = (i64)gridDim.x * blockDim.x, tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const i64 packs = n / P::V;
    for (i64 p = tid; p < packs; p += step) {
        P a = ld16(x + p * P::V), o;
        MaskPack<P::V> m = *reinterpret_cast<const MaskPack<P::V> *>(mask + p * P::V);
#pragma unroll
        for (int k = 0; k < P::V; k++) {
            C y = load<C>(&a.v[k]) * (C)m.b[k];
            y = y * scale;
            store(&o.v[k], y);
        }
        *reinterpret_cast<P *>(out + p * P::V) = o;
    }
    for (i64 i = packs * P::V + tid; i < n; i += step) {
        C y = load<C>(x + i) * (C)mask[i];
        y = y * scale;
        store(out + i, y);
    }
}

} // namespace
} // namespace tcuda_kernels

using namespace tcuda_kernels;

extern "C" void tc__k_nn_dropout(cudaStream_t stream, int sms, const tc__nn_dropout *a)
{
    dispatch_float(a->dtype, [&](auto *tag) {
        typedef typename std::remove_pointer<decltype(tag)>::type T;
        typedef typename Compute<T>::type C;
        const T *x = (const T *)a->x;
        T *out = (T *)a->out;
        constexpr int V = Pack16<T>::V;
        if ((uintptr_t)x % 16 == 0 && (uintptr_t)out % 16 == 0 && (uintptr_t)a->mask % V == 0)
            dropout_kernel16<T><<<grid_for((a->n + V - 1) / V, 256, sms), 256, 0, stream>>>(
                x, a->mask, out, a->n, (C)a->scale);
        else
            dropout_kernel<T>
                <<<grid_for(a->n, 256, sms), 256, 0, stream>>>(x, a->mask, out, a->n, (C)a->scale);
    });
}
