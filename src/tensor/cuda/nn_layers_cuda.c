/* The CUDA nn backend's training layers (tensor/nn_internal.h): embedding's
 * backward and dropout's product from embedding.cu and dropout.cu. Each
 * entry enters the device, queues on its current stream and reports launch
 * errors in one place; the embedding backward's scratch comes from the
 * caching allocator on that stream and goes back once the kernels are
 * queued (later work on the stream alone reuses it). */
#include "runtime/cuda/cuda_internal.h"
#include "memory/cuda/device_alloc.h"
#include "runtime/cuda/kernel_errors.h"
#include "tensor/cuda/kernels/layers_kernels.h"
#include "nn_layers_cuda.h"
#include "tcuda/device.h"

tc_status tc__cuda_nn_embedding_backward(int device, const tc__nn_embedding_bwd *a)
{
    tc__kernel_error *err;
    TC_TRY(tc__kernel_error_slot(device, &err));
    tc_device_guard g = tc_device_guard_enter(device);
    TC_TRY(g.status);
    cudaStream_t cs = tc__current_cuda_stream(device);
    void *scratch = NULL;
    size_t sb = tc__k_nn_embedding_backward_scratch(a);
    tc_status st = sb ? tc__device_alloc(device, cs, sb, &scratch) : TC_OK;
    if (st == TC_OK) {
        cudaError_t e = tc__k_nn_embedding_backward(cs, tc__sm_count_for_grid(device), a, scratch,
                                                    err);
        st = e != cudaSuccess
                 ? tc__cuda_fail(e, "the embedding backward's sort", __FILE__, __LINE__)
                 : tc__launch_check(cs, "embedding_backward_kernel");
        if (scratch)
            (void)tc__device_free(scratch);
    }
    tc_device_guard_exit(&g);
    return st;
}

tc_status tc__cuda_nn_dropout(int device, const tc__nn_dropout *a)
{
    TC_LAUNCH(device, "dropout_kernel", tc__k_nn_dropout(cs_, tc__sm_count_for_grid(device), a));
}
