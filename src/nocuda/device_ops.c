/* The core's device seam (tensor/device_ops.h) in a build without CUDA: no
 * backend, and every device operation answers TC_ERROR_NO_DEVICE (the core
 * never reaches the ones that need a device it could not resolve). */
#include "tensor/device_ops.h"

static tc_status absent(void)
{
    return tc__fail(TC_ERROR_NO_DEVICE,
                    "CUDA is not available: tcuda was built without CUDA (TCUDA_CUDA=OFF or no "
                    "nvcc at configure time), so there are no CUDA tensors or generators");
}

static tc_status no_resolve(int index, int *out)
{
    (void)index;
    *out = 0;
    return absent();
}
static tc_status no_alloc(int device, size_t bytes, void **out)
{
    (void)device, (void)bytes, (void)out;
    return absent();
}
static void no_free(void *ptr) { (void)ptr; }
static tc_status no_record_stream(void *ptr, bool host, void *stream)
{
    (void)ptr, (void)host, (void)stream;
    return absent();
}
static void *no_current_stream(int device)
{
    (void)device;
    return NULL;
}
static tc_status no_stream_of(tc_stream *stream, int *device, void **handle)
{
    (void)stream, (void)device, (void)handle;
    return absent();
}
static tc_status no_copy(struct tc_tensor *dst, const struct tc_tensor *src, bool non_blocking)
{
    (void)dst, (void)src, (void)non_blocking;
    return absent();
}

const tc__device_ops tc__cuda_device_ops = {
    .name = "CUDA",
    .backend = NULL,
    .resolve = no_resolve,
    .alloc = no_alloc,
    .free = no_free,
    .record_stream = no_record_stream,
    .current_stream = no_current_stream,
    .stream_of = no_stream_of,
    .copy = no_copy,
    .nn = NULL,
};
