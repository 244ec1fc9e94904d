/* The CUDA nn backend (tensor/nn_internal.h): row kernels from rows.cu,
 * cross_entropy from loss.cu, the GEMM from cuBLAS (blas.c), linear's GEMM
 * with its bias from cuBLASLt (blas_lt.c), fused attention from
 * attention.cu and its backward from attention_backward.cu, attention
 * over a KV cache from attention_cache.cu, the backward
 * entries from backward.cu. Each entry enters
 * the device, queues on its current stream and reports launch errors in one
 * place. */
#include "runtime/cuda/cuda_internal.h"
#include "memory/cuda/device_alloc.h"
#include "runtime/cuda/kernel_errors.h"
#include "tensor/cuda/kernels/nn_kernels.h"
#include "nn_cuda.h"
#include "nn_layers_cuda.h"
#include "tcuda/device.h"

static tc_status cu_rows(int device, const tc__nn_rows *args)
{
    TC_LAUNCH(device, "nn_rows_kernel", tc__k_nn_rows(cs_, tc__sm_count_for_grid(device), args));
}

static tc_status cu_cross_entropy(int device, const tc__nn_ce *a)
{
    tc__kernel_error *err;
    TC_TRY(tc__kernel_error_slot(device, &err));
    tc_device_guard g = tc_device_guard_enter(device);
    TC_TRY(g.status);
    cudaStream_t cs = tc__current_cuda_stream(device);
    int sms = tc__sm_count_for_grid(device);
    /* the blocks' partial sums, from the cache on this stream: freed once
     * the kernels are queued, reused only by later work on the stream */
    void *scratch = NULL;
    size_t sb = tc__k_nn_cross_entropy_scratch(sms, a);
    tc_status st = sb ? tc__device_alloc(device, cs, sb, &scratch) : TC_OK;
    if (st == TC_OK) {
        tc__k_nn_cross_entropy(cs, sms, a, scratch, err);
        st = tc__launch_check(cs, "cross_entropy_kernel");
        if (scratch)
            (void)tc__device_free(scratch);
    }
    tc_device_guard_exit(&g);
    return st;
}

static tc_status cu_gelu_backward(int device, const tc__nn_gelu_bwd *a)
{
    TC_LAUNCH(device, "gelu_backward_kernel",
              tc__k_nn_gelu_backward(cs_, tc__sm_count_for_grid(device), a));
}

static tc_status cu_softmax_backward(int device, const tc__nn_softmax_bwd *a)
{
    TC_LAUNCH(device, "softmax_backward_kernel",
              tc__k_nn_softmax_backward(cs_, tc__sm_count_for_grid(device), a));
}

static tc_status cu_layer_norm(int device, const tc__nn_ln *a)
{
    TC_LAUNCH(device, "layer_norm_kernel", tc__k_nn_layer_norm(cs_, a));
}

/* Scratch from the cache on this stream, as cu_cross_entropy's: freed once
 * the kernels that read it are queued. */
static tc_status cu_layer_norm_backward(int device, const tc__nn_ln_bwd *a)
{
    tc_device_guard g = tc_device_guard_enter(device);
    TC_TRY(g.status);
    cudaStream_t cs = tc__current_cuda_stream(device);
    void *scratch = NULL;
    size_t sb = tc__k_nn_layer_norm_backward_scratch(a);
    tc_status st = sb ? tc__device_alloc(device, cs, sb, &scratch) : TC_OK;
    if (st == TC_OK) {
        tc__k_nn_layer_norm_backward(cs, tc__sm_count_for_grid(device), a, scratch);
        st = tc__launch_check(cs, "layer_norm_backward_kernel");
        if (scratch)
            (void)tc__device_free(scratch);
    }
    tc_device_guard_exit(&g);
    return st;
}

static tc_status cu_cross_entropy_backward(int device, const tc__nn_ce_bwd *a)
{
    tc__kernel_error *err;
    TC_TRY(tc__kernel_error_slot(device, &err));
    tc_device_guard g = tc_device_guard_enter(device);
    TC_TRY(g.status);
    cudaStream_t cs = tc__current_cuda_stream(device);
    int sms = tc__sm_count_for_grid(device);
    void *scratch = NULL;
    tc_status st = tc__device_alloc(device, cs, tc__k_nn_cross_entropy_backward_scratch(sms, a),
                                    &scratch);
    if (st == TC_OK) {
        tc__k_nn_cross_entropy_backward(cs, sms, a, scratch, err);
        st = tc__launch_check(cs, "cross_entropy_backward_kernel");
        (void)tc__device_free(scratch);
    }
    tc_device_guard_exit(&g);
    return st;
}

static tc_status cu_attention(int device, const tc__nn_attention *a, bool *done)
{
    *done = false;
    TC_LAUNCH(
        device, "attention_kernel",
        *done = tc__k_nn_attention(cs_, device, tc__cc_major(device), tc__cc_minor(device), a));
}

/* D = rowsum(dO * O) (and dq's float32 sums, where they are atomic) in
 * scratch from the cache on this stream, as cu_cross_entropy's: freed
 * once the kernels that read it are queued. */
static tc_status cu_attention_backward(int device, const tc__nn_attention_bwd *a, bool *done)
{
    *done = false;
    /* 16-bit from compute capability 8.0, as the forward that made lse */
    bool half = a->dtype == TC_FLOAT16 || a->dtype == TC_BFLOAT16;
    if (!tc__k_nn_attention_backward_takes(a) || (half && tc__cc_major(device) < 8))
        return TC_OK;
    tc_device_guard g = tc_device_guard_enter(device);
    TC_TRY(g.status);
    cudaStream_t cs = tc__current_cuda_stream(device);
    int major = tc__cc_major(device), minor = tc__cc_minor(device);
    void *scratch = NULL;
    tc_status st = tc__device_alloc(device, cs,
                                    tc__k_nn_attention_backward_scratch(major, minor, a), &scratch);
    if (st == TC_OK) {
        *done = tc__k_nn_attention_backward(cs, device, major, minor, a, scratch);
        st = tc__launch_check(cs, "attention_backward_kernel");
        (void)tc__device_free(scratch);
    }
    tc_device_guard_exit(&g);
    return st;
}

/* One kernel; lengths out of range go to the device's kernel error slot. */
static tc_status cu_attention_cache(int device, const tc__nn_attention_cache *a)
{
    if (!tc__k_nn_attention_cache_takes(a))
        return tc__fail(TC_ERROR_NOT_SUPPORTED,
                        "tc_nn_attention_with_kv_cache: head size %lld (or %lld rows) is past what "
                        "the GPU kernel takes (512)",
                        (long long)a->e, (long long)(a->b * a->h * a->t));
    tc__kernel_error *err;
    TC_TRY(tc__kernel_error_slot(device, &err));
    tc_device_guard g = tc_device_guard_enter(device);
    TC_TRY(g.status);
    cudaStream_t cs = tc__current_cuda_stream(device);
    cudaError_t e = tc__k_nn_attention_cache(cs, tc__sm_count_for_grid(device),
                                             tc__cc_major(device), a, err);
    tc_status st = e != cudaSuccess
                       ? tc__cuda_fail(e, "the KV cache attention's launch", __FILE__, __LINE__)
                       : tc__launch_check(cs, "attention_cache_kernel");
    tc_device_guard_exit(&g);
    return st;
}

const tc__nn_backend tc__cuda_nn_backend = {
    .rows = cu_rows,
    .gemm = tc__cuda_gemm,
    .cross_entropy = cu_cross_entropy,
    .gemm_bias = tc__cuda_gemm_bias,
    .attention = cu_attention,
    .gelu_backward = cu_gelu_backward,
    .softmax_backward = cu_softmax_backward,
    .layer_norm = cu_layer_norm,
    .layer_norm_backward = cu_layer_norm_backward,
    .cross_entropy_backward = cu_cross_entropy_backward,
    .embedding_backward = tc__cuda_nn_embedding_backward,
    .dropout = tc__cuda_nn_dropout,
    .gemm_bgrad = tc__cuda_gemm_bgrad,
    .gemm_gelu = tc__cuda_gemm_gelu,
    .attention_backward = cu_attention_backward,
    .attention_cache = cu_attention_cache,
    .gemm_fused = tc__cuda_gemm_fused,
};
