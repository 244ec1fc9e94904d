/* The GEMM with k = 0 (C = beta * C), which cuBLAS is not given (blas.c
 * says why): one grid-stride kernel over the strided batch of C. */
#include <type_traits>

#include "common.cuh"
#include "nn_kernels.h"

using namespace tck;

namespace tcuda_kernels { /* graph_pdl.c knows tcuda's kernels by this name */
namespace {

/* c = beta * c over a strided batch of row-major [m, n] matrices (ldc,
 * stride_c), 0 where beta is 0 (c is not read then, as a GEMM's beta 0). */
template <typename T>
__global__ void scale_kernel(T *c, i64 m, i64 n, i64 ldc, i64 stride_c, i64 total, double beta)
{
    tck_pdl_entry();
    typedef typename Compute<T>::type C;
    i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        i64 j = i % n, r = i / n;
        T *p = c + (r / m) * stride_c + (r % m) * ldc + j;
        store(p, beta == 0 ? (C)0 : (C)beta * load<C>(p));
    }
}

} // namespace
} // namespace tcuda_kernels
using namespace tcuda_kernels;

extern "C" void tc__k_nn_scale(cudaStream_t stream, int sms, tc_dtype dtype, void *c, int64_t batch,
                               int64_t m, int64_t n, int64_t ldc, int64_t stride_c, double beta)
{
    i64 total = batch * m * n;
    if (total <= 0)
        return;
    dispatch_float(dtype, [&](auto *tag) {
        typedef typename std::remove_pointer<decltype(tag)>::type T;
        scale_kernel<T><<<grid_for(total, 256, sms), 256, 0, stream>>>((T *)c, m, n, ldc, stride_c,
                                                                       total, beta);
    });
}
