/* dropout's product, forward and backward: out = x * mask * scale, one
 * grid-stride element-wise kernel. The operations and their order are the
 * CPU's (cpu/cpu_nn_layers.c): in float for 16-bit dtypes and float32 (x
 * times the mask, exact, then times the scale rounded to float), in double
 * for float64, so the two give the same bits. */
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

} // namespace
} // namespace tcuda_kernels

using namespace tcuda_kernels;

extern "C" void tc__k_nn_dropout(cudaStream_t stream, int sms, const tc__nn_dropout *a)
{
    dispatch_float(a->dtype, [&](auto *tag) {
        typedef typename std::remove_pointer<decltype(tag)>::type T;
        typedef typename Compute<T>::type C;
        dropout_kernel<T><<<grid_for(a->n, 256, sms), 256, 0, stream>>>(
            (const T *)a->x, a->mask, (T *)a->out, a->n, (C)a->scale);
    });
}
