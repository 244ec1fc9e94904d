/* The device seam (runtime/device_ops.h) of a CUDA build: the CUDA runtime
 * (devices, streams, the caching allocators) and the CUDA halves of the
 * modules that the core reaches through it: the tensor kernels, byte
 * transfers and cuBLAS (tensor/cuda), the optimizers' kernels (optim/cuda), random fills (random/cuda), the
 * collectives' NCCL path (dist/cuda/comm_nccl.c) and jiterator's NVRTC
 * (jit/cuda). This file is what registers them: the one place that names
 * every cuda/ half, and the one that code outside the cuda/ folders
 * reaches by name (tc__device_ops_builtin). None of what it names calls
 * back into the modules' CUDA-free halves. */
#include "dist/comm_internal.h"
#include "jit/jit_internal.h"
#include "memory/cuda/device_alloc.h"
#include "optim/cuda/optim_cuda.h"
#include "random/random_internal.h"
#include "runtime/cuda/capture.h"
#include "runtime/cuda/cuda_internal.h"
#include "runtime/device_ops.h"
#include "tcuda/memory.h"
#include "tensor/cuda/index_cuda.h"
#include "tensor/cuda/nn_cuda.h"
#include "tensor/cuda/tensor_cuda.h"

static tc_status cuda_resolve(int index, int *out) { return tc__resolve_device(index, out); }

static tc_status cuda_alloc(int device, size_t bytes, void **out)
{
    return tc__device_alloc(device, tc__current_cuda_stream(device), bytes, out);
}

static void cuda_free(void *ptr) { (void)tc__device_free(ptr); }

static tc_status cuda_record_stream(void *ptr, bool host, int device, void *stream)
{
    if (host)
        return tc__host_record_stream(ptr, device, (cudaStream_t)stream);
    return tc__device_record_stream(ptr, (cudaStream_t)stream);
}

static void *cuda_current_stream(int device) { return (void *)tc__current_cuda_stream(device); }

static tc_status cuda_stream_of(tc_stream *stream, int *device, void **handle)
{
    tc_stream *s;
    TC_TRY(tc__resolve_stream(stream, &s));
    *device = s->device;
    *handle = (void *)s->handle;
    return TC_OK;
}

const tc__device_ops tc__device_ops_builtin = {
    .name = "CUDA",
    .device_count = tc_device_count,
    .resolve = cuda_resolve,
    .device_guard_enter = tc_device_guard_enter,
    .device_guard_exit = tc_device_guard_exit,
    .current_stream = cuda_current_stream,
    .stream_of = cuda_stream_of,
    .stream_current = tc_current_stream,
    .stream_device = tc_stream_device,
    .stream_wait_stream = tc_stream_wait_stream,
    .stream_synchronize = tc_stream_synchronize,
    .stream_guard_enter = tc_stream_guard_enter,
    .stream_guard_exit = tc_stream_guard_exit,
    .stream_capturing = tc__capture_current_stream,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .record_stream = cuda_record_stream,
    .host_alloc = tc_host_alloc,
    .host_free = tc_host_free,
    .backend = &tc__cuda_backend,
    .index_backend = &tc__cuda_index_backend,
    .nn = &tc__cuda_nn_backend,
    .optim = &tc__cuda_optim_backend,
    .transfer = tc__cuda_transfer,
    .blas_handle = tc__cuda_blas_handle,
    .rng_fill = tc__rng_cuda_fill,
    .comm = &tc__comm_nccl,
    .jit = &tc__jit_cuda_ops,
};
