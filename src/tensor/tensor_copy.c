/* Copies and moves: Tensor.copy_, .to, .cuda, .cpu, .pin_memory, reading
 * values back to the host, and record_stream.
 *
 * A copy within one device is a strided, converting kernel of that device's
 * backend. A copy that crosses devices is tensor_copy_across.c's.
 *
 * Overlap, as PyTorch's copy_: a destination with a stride-0 dimension (more
 * than one element in one place) is refused; a source and destination that
 * are both dense and share memory without being the same elements in the
 * same order ("partial overlap", e.g. copy_(a, a.T)) are refused; the same
 * elements in the same order are a no-op. Where PyTorch gives up ("too hard":
 * a strided operand) and the byte ranges meet, tcuda copies the source
 * through a temporary, which is always right. */
#include <stdlib.h>
#include <string.h>

#include "tensor_internal.h"

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
    return tc__fail(TC_ERROR_SHAPE,
                    "%s: the source (%d-d, %lld elements) does not broadcast to "
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

/* PyTorch's is_non_overlapping_and_dense: the dimensions, sorted by stride,
 * are packed with no gap and no overlap (size-1 dimensions ignored). */
static bool dense_somehow(const tc_tensor *t)
{
    int64_t st[TC_MAX_DIMS], sz[TC_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < t->ndim; d++)
        if (t->sizes[d] != 1) {
            int k = n++;
            for (; k > 0 && st[k - 1] > t->strides[d]; k--)
                st[k] = st[k - 1], sz[k] = sz[k - 1];
            st[k] = t->strides[d], sz[k] = t->sizes[d];
        }
    int64_t expect = 1;
    for (int k = 0; k < n; k++) {
        if (st[k] != expect)
            return false;
        expect *= sz[k];
    }
    return true;
}

/* [lo, hi) bytes a tensor with elements may touch (strides may be negative
 * only in theory; tcuda makes none). */
static void byte_range(const tc_tensor *t, uintptr_t *lo, uintptr_t *hi)
{
    int64_t es = (int64_t)tc_dtype_size(t->dtype), first = 0, last = 0;
    for (int d = 0; d < t->ndim; d++) {
        int64_t span = (t->sizes[d] - 1) * t->strides[d];
        if (span < 0)
            first += span;
        else
            last += span;
    }
    uintptr_t base = (uintptr_t)tc__data(t);
    *lo = base + (uintptr_t)(first * es);
    *hi = base + (uintptr_t)((last + 1) * es);
}

static bool same_geometry(const tc_tensor *a, const tc_tensor *b)
{
    return a->storage == b->storage && a->offset == b->offset && a->dtype == b->dtype &&
           a->ndim == b->ndim &&
           memcmp(a->sizes, b->sizes, sizeof(int64_t) * (size_t)a->ndim) == 0 &&
           memcmp(a->strides, b->strides, sizeof(int64_t) * (size_t)a->ndim) == 0;
}

/* PyTorch's get_overlap_status (aten/src/ATen/MemoryOverlap.cpp). Two
 * storages may hold one buffer (tensors made from one blob, DLPack), so
 * memory is compared by address on one device, not by storage. */
tc__overlap tc__overlap_of(const tc_tensor *dst, const tc_tensor *src)
{
    if (tc__numel(dst->ndim, dst->sizes) == 0 || tc__numel(src->ndim, src->sizes) == 0)
        return TC__OVERLAP_NONE;
    if (same_geometry(dst, src))
        return TC__OVERLAP_SAME;
    tc_device a = dst->storage->device, b = src->storage->device;
    if (a.type != b.type || a.index != b.index)
        return TC__OVERLAP_NONE;
    uintptr_t dlo, dhi, slo, shi;
    byte_range(dst, &dlo, &dhi);
    byte_range(src, &slo, &shi);
    if (dhi <= slo || shi <= dlo)
        return TC__OVERLAP_NONE;
    return dense_somehow(dst) && dense_somehow(src) ? TC__OVERLAP_PARTIAL : TC__OVERLAP_TOO_HARD;
}

/* PyTorch's assert_no_internal_overlap(dst) and assert_no_partial_overlap
 * (dst, src), then what it cannot decide. */
static tc_status check_overlap(const tc_tensor *dst, const tc_tensor *src, tc__overlap *out)
{
    if (tc__numel(dst->ndim, dst->sizes) > 0)
        TC_TRY(tc__check_writable(dst));
    *out = tc__overlap_of(dst, src);
    if (*out != TC__OVERLAP_PARTIAL)
        return TC_OK;
    return tc__fail(
        TC_ERROR_INVALID_ARGUMENT,
        "unsupported operation: some elements of the input tensor and the written-to "
        "tensor refer to a single memory location (e.g. a tensor and its transpose). "
        "Please copy the source into a new tensor first (e.g. tc_tensor_empty_like, then "
        "tc_tensor_copy_)");
}

/* dst = src on one device, with the overlap rules above. */
static tc_status copy_same_device(tc_tensor *dst, const tc_tensor *src)
{
    tc__overlap ov;
    TC_TRY(check_overlap(dst, src, &ov));
    if (ov == TC__OVERLAP_SAME && dst->dtype == src->dtype)
        return TC_OK;
    if (ov == TC__OVERLAP_NONE)
        return tc__copy_local(dst, src);
    tc_tensor *tmp;
    TC_TRY(tc__new_tensor(src->ndim, src->sizes, src->dtype, src->storage->device, false, &tmp));
    tc_status st = tc__copy_local(tmp, src);
    if (st == TC_OK)
        st = tc__copy_local(dst, tmp);
    tc_tensor_release(tmp);
    return st;
}

tc_status tc_tensor_copy_(tc_tensor *dst, const tc_tensor *src, bool non_blocking)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(dst, "tc_tensor dst"));
    TC_TRY(tc__tensor_check(src, "tc_tensor src"));
    TC_TRY(check_broadcast_to("tc_tensor_copy_", dst, src));
    tc_device a = dst->storage->device, b = src->storage->device;
    if (a.type == b.type && a.index == b.index)
        return copy_same_device(dst, src);
    return tc__copy_across(dst, src, non_blocking);
}

tc_status tc_tensor_to(const tc_tensor *src, tc_device device, tc_dtype dtype, bool non_blocking,
                       tc_tensor **out)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(src, "tc_tensor src"));
    TC_CHECK_ARG(out, "out is NULL");
    TC_CHECK_ARG((unsigned)dtype < TC_NUM_DTYPES, "%d is not a tc_dtype", (int)dtype);
    TC_TRY(tc__device_resolve(device, &device));
    tc_device here = src->storage->device;
    if (here.type == device.type && here.index == device.index && src->dtype == dtype) {
        *out = tc__tensor_ref((tc_tensor *)src);
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
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(src, "tc_tensor src"));
    return tc_tensor_to(src, (tc_device){TC_CUDA, device}, src->dtype, non_blocking, out);
}

tc_status tc_tensor_cpu(const tc_tensor *src, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(src, "tc_tensor src"));
    return tc_tensor_to(src, (tc_device){TC_CPU, -1}, src->dtype, false, out);
}

tc_status tc_tensor_pin_memory(const tc_tensor *src, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(src, "tc_tensor src"));
    TC_CHECK_ARG(out, "out is NULL");
    TC_CHECK_ARG(src->storage->device.type == TC_CPU,
                 "only CPU tensors can be pinned; this one is on cuda:%d",
                 src->storage->device.index);
    if (src->storage->pinned) {
        *out = tc__tensor_ref((tc_tensor *)src);
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
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(t, "tc_tensor t"));
    TC_CHECK_ARG(t->storage->device.type == TC_CUDA,
                 "the tensor is on the CPU; only CUDA tensors have streams");
    const tc__device_ops *ops = tc__dev();
    int dev = t->storage->device.index;
    if (!stream)
        return tc__storage_record_stream(t->storage, dev, ops->current_stream(dev));
    int sdev;
    void *handle;
    TC_TRY(ops->stream_of(stream, &sdev, &handle));
    if (sdev != dev)
        return tc__fail(TC_ERROR_DEVICE_MISMATCH, "the stream is on cuda:%d, the tensor on cuda:%d",
                        sdev, dev);
    return tc__storage_record_stream(t->storage, dev, handle);
}

tc_status tc_tensor_to_host(const tc_tensor *t, tc_dtype dtype, void *host)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(t, "tc_tensor t"));
    TC_CHECK_ARG((unsigned)dtype < TC_NUM_DTYPES, "%d is not a tc_dtype", (int)dtype);
    TC_CHECK_ARG(host || tc__numel(t->ndim, t->sizes) == 0, "host is NULL");
    tc__storage hs;
    tc_tensor dst;
    tc__wrap_host(&hs, &dst, host, dtype, t->ndim, t->sizes);
    return tc_tensor_copy_(&dst, t, false);
}

tc_status tc_tensor_item(const tc_tensor *t, double *value)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(t, "tc_tensor t"));
    TC_CHECK_ARG(value, "value is NULL");
    if (tc__numel(t->ndim, t->sizes) != 1)
        return tc__fail(TC_ERROR_SHAPE, "the tensor has %lld elements, not one",
                        (long long)tc__numel(t->ndim, t->sizes));
    double v;
    TC_TRY(tc_tensor_to_host(t, TC_FLOAT64, &v));
    *value = v;
    return TC_OK;
}
