/* The CUDA nn backend (core/nn_internal.h): row kernels and cross_entropy
 * from nn.cu, the GEMM from cuBLAS (blas.c), linear's GEMM with its bias
 * from cuBLASLt (blas_lt.c). Each entry enters the device,
 * queues on its current stream and reports launch errors in one place. */
#include "cuda_internal.h"
#include "kernels/nn_kernels.h"
#include "nn_cuda.h"
#include "tcuda/device.h"

/* Multiprocessors of a device, for grid sizes (80 if CUDA cannot say). */
static int sms_of(int device)
{
    int n = tc__sm_count(device);
    return n ? n : 80;
}

static tc_status cu_rows(int device, const tc__nn_rows *args)
{
    tc_device_guard g = tc_device_guard_enter(device);
    TC_TRY(g.status);
    cudaStream_t cs = tc__current_cuda_stream(device);
    tc__k_nn_rows(cs, sms_of(device), args);
    tc_status st = tc__launch_check(cs, "nn_rows_kernel");
    tc_device_guard_exit(&g);
    return st;
}

static tc_status cu_cross_entropy(int device, tc_dtype dtype, const void *logits,
                                  const int64_t *target, void *loss, tc_dtype loss_dtype, int64_t n,
                                  int64_t c, int64_t ignore_index)
{
    (void)loss_dtype; /* the kernel's computation type, by construction */
    tc_device_guard g = tc_device_guard_enter(device);
    TC_TRY(g.status);
    cudaStream_t cs = tc__current_cuda_stream(device);
    tc__k_nn_cross_entropy(cs, sms_of(device), dtype, logits, target, loss, n, c, ignore_index);
    tc_status st = tc__launch_check(cs, "cross_entropy_kernel");
    tc_device_guard_exit(&g);
    return st;
}

const tc__nn_backend tc__cuda_nn_backend = {
    .rows = cu_rows,
    .gemm = tc__cuda_gemm,
    .cross_entropy = cu_cross_entropy,
    .gemm_bias = tc__cuda_gemm_bias,
};
