/* The CUDA nn backend (core/nn_internal.h): row kernels and cross_entropy
 * from nn.cu, the GEMM from cuBLAS (blas.c), linear's GEMM with its bias
 * from cuBLASLt (blas_lt.c), fused attention from attention.cu. Each entry
 * enters the device, queues on its current stream and reports launch
 * errors in one place. */
#include "cuda_internal.h"
#include "kernel_errors.h"
#include "kernels/nn_kernels.h"
#include "nn_cuda.h"
#include "tcuda/device.h"

static tc_status cu_rows(int device, const tc__nn_rows *args)
{
    TC_LAUNCH(device, "nn_rows_kernel", tc__k_nn_rows(cs_, tc__sm_count_for_grid(device), args));
}

static tc_status cu_cross_entropy(int device, tc_dtype dtype, const void *logits,
                                  const int64_t *target, void *loss, tc_dtype loss_dtype, int64_t n,
                                  int64_t c, int64_t ignore_index)
{
    (void)loss_dtype; /* the kernel's computation type, by construction */
    tc__kernel_error *err;
    TC_TRY(tc__kernel_error_slot(device, &err));
    TC_LAUNCH(device, "cross_entropy_kernel",
              tc__k_nn_cross_entropy(cs_, tc__sm_count_for_grid(device), dtype, logits, target,
                                     loss, n, c, ignore_index, err));
}

static tc_status cu_attention(int device, const tc__nn_attention *a, bool *done)
{
    *done = false;
    TC_LAUNCH(device, "attention_kernel",
              *done = tc__k_nn_attention(cs_, device, tc__cc_major(device), a));
}

const tc__nn_backend tc__cuda_nn_backend = {
    .rows = cu_rows,
    .gemm = tc__cuda_gemm,
    .cross_entropy = cu_cross_entropy,
    .gemm_bias = tc__cuda_gemm_bias,
    .attention = cu_attention,
};
