/* Copies and moves: Tensor.copy_, .to, .cuda, .cpu, .pin_memory, reading
 * values back to the host, and record_stream.
 *
 * A copy within one device is a strided, converting kernel of that device's
 * backend. A copy that crosses devices goes to tc__cuda_copy, which knows
 * which transfers may stay asynchronous (see tensor_cuda.c). */
#include <string.h>

#include "tensor_internal.h"
#if defined(TCUDA_HAVE_CUDA)
#include "cuda/cuda_internal.h"
#endif

/* src must broadcast to dst's sizes (src's dims align right). */
static tc_status check_broadcast_to(const char *fn, const tc_tensor *dst, const tc_tensor *src)
{
    if (src->ndim > dst->ndim)
        goto bad;
    for (int d = 0; d < src->ndim; d++) {
        int64_t s = src->sizes[d], o = dst->sizes[d + dst->ndim - src->ndim];
        if (s != o && s != 1)
            goto bad;
    }
    return TC_OK;
bad:
    return tc__fail(TC_ERROR_SHAPE, "%s: the source (%d-d, %lld elements) does not broadcast to "
                                    "the destination's sizes (%d-d, %lld elements)",
                    fn, src->ndim, (long long)tc__numel(src->ndim, src->sizes), dst->ndim,
                    (long long)tc__numel(dst->ndim, dst->sizes));
}

tc_status tc__copy_local(tc_tensor *dst, const tc_tensor *src)
{
    tc__iter it;
    tc__iter_init(&it, dst->ndim, dst->sizes, 2);
    if (it.numel == 0)
        return TC_OK;
    tc__iter_set(&it, 0, dst);
    tc__iter_set(&it, 1, src);
    tc__iter_coalesce(&it);
    const tc__backend *be = tc__backend_of(dst->storage->device);
    if (!be)
        return TC_ERROR_NO_DEVICE;
    return be->convert(dst->storage->device.index, dst->dtype, src->dtype, &it);
}

tc_status tc_tensor_copy_(tc_tensor *dst, const tc_tensor *src, bool non_blocking)
{
    TC_CHECK_ARG(dst && src, "tc_tensor_copy_: dst and src must not be NULL");
    TC_TRY(check_broadcast_to("tc_tensor_copy_", dst, src));
    tc_device a = dst->storage->device, b = src->storage->device;
    if (a.type == b.type && a.index == b.index)
        return tc__copy_local(dst, src);
#if defined(TCUDA_HAVE_CUDA)
    return tc__cuda_copy(dst, src, non_blocking);
#else
    return tc__fail(TC_ERROR_NO_DEVICE, "tc_tensor_copy_: CUDA tensors need CUDA, and tcuda was "
                                        "built without it");
#endif
}

tc_status tc_tensor_to(const tc_tensor *src, tc_device device, tc_dtype dtype, bool non_blocking,
                       tc_tensor **out)
{
    TC_CHECK_ARG(src && out, "tc_tensor_to: src and out must not be NULL");
    TC_CHECK_ARG((unsigned)dtype < TC_NUM_DTYPES, "tc_tensor_to: %d is not a tc_dtype",
                 (int)dtype);
    TC_CHECK_ARG(device.type == TC_CPU || device.type == TC_CUDA,
                 "tc_tensor_to: device type %d is neither TC_CPU nor TC_CUDA", (int)device.type);
    tc_device here = src->storage->device;
    if (device.type == TC_CUDA) {
#if defined(TCUDA_HAVE_CUDA)
        TC_TRY(tc__resolve_device(device.index, &device.index));
#else
        return tc__fail(TC_ERROR_NO_DEVICE, "tc_tensor_to: CUDA tensors need CUDA, and tcuda "
                                            "was built without it");
#endif
    } else {
        device.index = -1;
    }
    if (here.type == device.type && here.index == device.index && src->dtype == dtype) {
        *out = tc_tensor_retain((tc_tensor *)src);
        return TC_OK;
    }
    /* As PyTorch: a non-blocking move to the CPU lands in pinned memory. */
    bool pinned = device.type == TC_CPU && here.type == TC_CUDA && non_blocking;
    tc_tensor *t;
    TC_TRY(tc__new_tensor(src->ndim, src->sizes, dtype, device, pinned, &t));
    tc_status st = tc_tensor_copy_(t, src, non_blocking);
    if (st != TC_OK) {
        tc_tensor_release(t);
        return st;
    }
    *out = t;
    return TC_OK;
}

tc_status tc_tensor_cuda(const tc_tensor *src, int device, bool non_blocking, tc_tensor **out)
{
    TC_CHECK_ARG(src, "tc_tensor_cuda: src is NULL");
    return tc_tensor_to(src, (tc_device){TC_CUDA, device}, src->dtype, non_blocking, out);
}

tc_status tc_tensor_cpu(const tc_tensor *src, tc_tensor **out)
{
    TC_CHECK_ARG(src, "tc_tensor_cpu: src is NULL");
    return tc_tensor_to(src, (tc_device){TC_CPU, -1}, src->dtype, false, out);
}

tc_status tc_tensor_pin_memory(const tc_tensor *src, tc_tensor **out)
{
    TC_CHECK_ARG(src && out, "tc_tensor_pin_memory: src and out must not be NULL");
    TC_CHECK_ARG(src->storage->device.type == TC_CPU,
                 "tc_tensor_pin_memory: only CPU tensors can be pinned; this one is on cuda:%d",
                 src->storage->device.index);
    if (src->storage->pinned) {
        *out = tc_tensor_retain((tc_tensor *)src);
        return TC_OK;
    }
    tc_tensor *t;
    TC_TRY(tc__new_tensor(src->ndim, src->sizes, src->dtype, src->storage->device, true, &t));
    tc_status st = tc__copy_local(t, src);
    if (st != TC_OK) {
        tc_tensor_release(t);
        return st;
    }
    *out = t;
    return TC_OK;
}

tc_status tc_tensor_record_stream(const tc_tensor *t, tc_stream *stream)
{
    TC_CHECK_ARG(t, "tc_tensor_record_stream: the tensor is NULL");
    TC_CHECK_ARG(t->storage->device.type == TC_CUDA,
                 "tc_tensor_record_stream: the tensor is on the CPU; only CUDA tensors have "
                 "streams");
#if defined(TCUDA_HAVE_CUDA)
    tc_stream *s;
    if (stream) {
        TC_TRY(tc__resolve_stream(stream, &s));
        if (s->device != t->storage->device.index)
            return tc__fail(TC_ERROR_DEVICE_MISMATCH,
                            "tc_tensor_record_stream: the stream is on cuda:%d, the tensor on "
                            "cuda:%d",
                            s->device, t->storage->device.index);
        return tc__storage_record_stream(t->storage, (void *)s->handle);
    }
    int dev = t->storage->device.index;
    return tc__storage_record_stream(t->storage, (void *)tc__current_cuda_stream(dev));
#else
    (void)stream;
    return TC_ERROR_INTERNAL;
#endif
}

tc_status tc_tensor_to_host(const tc_tensor *t, void *host, tc_dtype dtype)
{
    TC_CHECK_ARG(t, "tc_tensor_to_host: the tensor is NULL");
    TC_CHECK_ARG((unsigned)dtype < TC_NUM_DTYPES, "tc_tensor_to_host: %d is not a tc_dtype",
                 (int)dtype);
    TC_CHECK_ARG(host || tc__numel(t->ndim, t->sizes) == 0, "tc_tensor_to_host: host is NULL");
    tc__storage hs;
    tc_tensor dst;
    tc__wrap_host(&hs, &dst, host, dtype, t->ndim, t->sizes);
    return tc_tensor_copy_(&dst, t, false);
}

tc_status tc_tensor_item(const tc_tensor *t, double *value)
{
    TC_CHECK_ARG(t && value, "tc_tensor_item: t and value must not be NULL");
    if (tc__numel(t->ndim, t->sizes) != 1)
        return tc__fail(TC_ERROR_SHAPE, "tc_tensor_item: the tensor has %lld elements, not one",
                        (long long)tc__numel(t->ndim, t->sizes));
    double v;
    TC_TRY(tc_tensor_to_host(t, &v, TC_FLOAT64));
    *value = v;
    return TC_OK;
}
