/* The CUDA runtime behind the core's device seam (tensor/device_ops.h): device
 * resolution, the caching allocator on the current stream, record_stream for
 * device and pinned host blocks, streams as opaque handles, the tensor
 * backend and copies across devices (tensor_cuda.c), the indexing backend
 * (index_cuda.c), the nn kernels (nn_cuda.c). */
#include "tensor/device_ops.h"
#include "tensor/tensor_internal.h"
#include "runtime/cuda/cuda_internal.h"
#include "memory/cuda/device_alloc.h"
#include "index_cuda.h"
#include "nn_cuda.h"
#include "tensor_cuda.h"

static tc_status cuda_resolve(int index, int *out) { return tc__resolve_device(index, out); }

static tc_status cuda_alloc(int device, size_t bytes, void **out)
{
    return tc__device_alloc(device, tc__current_cuda_stream(device), bytes, out);
}

static void cuda_free(void *ptr) { (void)tc__device_free(ptr); }

static tc_status cuda_record_stream(void *ptr, bool host, void *stream)
{
    if (host)
        return tc__host_record_stream(ptr, (cudaStream_t)stream);
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

const tc__device_ops tc__cuda_device_ops = {
    .name = "CUDA",
    .backend = &tc__cuda_backend,
    .resolve = cuda_resolve,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .record_stream = cuda_record_stream,
    .current_stream = cuda_current_stream,
    .stream_of = cuda_stream_of,
    .copy = tc__cuda_copy,
    .index_backend = &tc__cuda_index_backend,
    .nn = &tc__cuda_nn_backend,
};
