/* DLPack export and import (include/tcuda/dlpack.h).
 *
 * Export: one malloc'd block holds the managed tensor, its shape and strides
 * and one reference to the tensor's storage; the deleter drops the reference
 * and frees the block, so the memory lives while either tcuda or the consumer
 * uses it. On a GPU, the consumer's stream is made to wait for the current
 * stream of the tensor's device (the stream handshake of DLPack's
 * __dlpack__(stream=)), through the public stream API: this file knows no
 * CUDA.
 *
 * Import: a storage over the producer's memory whose on_free hook (storage.h)
 * calls the producer's deleter; views of the tensor share that storage, so
 * the deleter runs once, when the last of them is released. Everything is
 * checked before the storage exists, and a storage that fails to become a
 * tensor is dropped with the hook disarmed: on failure the caller keeps the
 * managed tensor and its deleter has not run. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/tensor_internal.h"
#include "tcuda/dlpack.h"

/* ---- dtypes ------------------------------------------------------------------- */

static tc_DLDataType dl_dtype(tc_dtype dt)
{
    static const uint8_t code[TC_NUM_DTYPES] = {
        [TC_BOOL] = TC_DL_BOOL,     [TC_UINT8] = TC_DL_UINT,      [TC_INT8] = TC_DL_INT,
        [TC_INT16] = TC_DL_INT,     [TC_INT32] = TC_DL_INT,       [TC_INT64] = TC_DL_INT,
        [TC_FLOAT16] = TC_DL_FLOAT, [TC_BFLOAT16] = TC_DL_BFLOAT, [TC_FLOAT32] = TC_DL_FLOAT,
        [TC_FLOAT64] = TC_DL_FLOAT};
    return (tc_DLDataType){code[dt], (uint8_t)(8 * tc_dtype_size(dt)), 1};
}

static tc_status from_dl_dtype(tc_DLDataType d, tc_dtype *out)
{
    if (d.lanes != 1)
        return tc__fail(TC_ERROR_DTYPE, "the dtype has %u lanes; tcuda takes 1 lane only",
                        (unsigned)d.lanes);
    for (int i = 0; i < TC_NUM_DTYPES; i++) {
        tc_DLDataType m = dl_dtype((tc_dtype)i);
        if (m.code == d.code && m.bits == d.bits) {
            *out = (tc_dtype)i;
            return TC_OK;
        }
    }
    return tc__fail(TC_ERROR_DTYPE,
                    "DLPack dtype (code %u, %u bits) is not one tcuda has (int 8/16/32/64, "
                    "uint 8, float 16/32/64, bfloat 16, bool 8)",
                    (unsigned)d.code, (unsigned)d.bits);
}

/* ---- export ------------------------------------------------------------------- */

typedef struct export_ctx {
    tc__storage *storage; /* one reference */
    int64_t shape[TC_MAX_DIMS];
    int64_t strides[TC_MAX_DIMS];
} export_ctx;

typedef struct versioned_export {
    tc_DLManagedTensorVersioned m; /* first: the deleter's `self` is the block */
    export_ctx c;
} versioned_export;

typedef struct unversioned_export {
    tc_DLManagedTensor m;
    export_ctx c;
} unversioned_export;

static void delete_versioned(tc_DLManagedTensorVersioned *self)
{
    versioned_export *e = (versioned_export *)self;
    tc__storage_release(e->c.storage);
    free(e);
}

static void delete_unversioned(tc_DLManagedTensor *self)
{
    unversioned_export *e = (unversioned_export *)self;
    tc__storage_release(e->c.storage);
    free(e);
}

/* The consumer's stream waits for the producer's (tcuda's current stream of
 * t's device), and t's memory is not reused before the consumer's work. */
static tc_status handshake(const tc_tensor *t, tc_stream *stream)
{
    if (!stream)
        return TC_OK;
    TC_CHECK_ARG(t->storage->device.type == TC_CUDA,
                 "a stream was given for a CPU tensor; DLPack has streams for GPU memory only");
    int dev = t->storage->device.index, sdev;
    void *handle;
    TC_TRY(tc__dev()->stream_of(stream, &sdev, &handle));
    if (sdev != dev)
        return tc__fail(TC_ERROR_DEVICE_MISMATCH,
                        "the consumer's stream is on cuda:%d, the tensor on cuda:%d", sdev, dev);
    tc_stream *producer = NULL;
    if (tc__dev()->stream_current(dev, &producer) != TC_OK || !producer)
        return tc__fail(TC_ERROR_INTERNAL, "no current stream on cuda:%d", dev);
    TC_TRY(tc__dev()->stream_wait_stream(stream, producer));
    /* memory tcuda did not allocate is not its to delay, unless its owner
     * takes streams (an IPC mapping does) */
    if (t->storage->on_free && !t->storage->on_record_stream)
        return TC_OK;
    return tc__storage_record_stream(t->storage, dev, handle);
}

static void fill_dl(const tc_tensor *t, export_ctx *c, tc_DLTensor *dl)
{
    c->storage = t->storage;
    tc__storage_retain(c->storage);
    memcpy(c->shape, t->sizes, sizeof c->shape);
    memcpy(c->strides, t->strides, sizeof c->strides);
    bool cuda = t->storage->device.type == TC_CUDA;
    *dl = (tc_DLTensor){
        /* DLPack: a tensor of no elements has a NULL data pointer. */
        .data = tc__numel(t->ndim, t->sizes) ? tc__data(t) : NULL,
        .device = {cuda ? TC_DL_CUDA : TC_DL_CPU, cuda ? t->storage->device.index : 0},
        .ndim = t->ndim,
        .dtype = dl_dtype(t->dtype),
        .shape = c->shape,
        .strides = c->strides,
        .byte_offset = 0};
}

tc_status tc_tensor_to_dlpack(const tc_tensor *t, tc_stream *stream,
                              tc_DLManagedTensorVersioned **out)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(t, "tc_tensor t"));
    TC_CHECK_ARG(out, "out is NULL");
    TC_TRY(handshake(t, stream));
    versioned_export *e = calloc(1, sizeof *e);
    if (!e)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "could not allocate a managed tensor");
    e->m.version = (tc_DLPackVersion){TC_DLPACK_MAJOR_VERSION, TC_DLPACK_MINOR_VERSION};
    e->m.manager_ctx = &e->c;
    e->m.deleter = delete_versioned;
    e->m.flags = 0;
    fill_dl(t, &e->c, &e->m.dl_tensor);
    *out = &e->m;
    return TC_OK;
}

tc_status tc_tensor_to_dlpack_unversioned(const tc_tensor *t, tc_stream *stream,
                                          tc_DLManagedTensor **out)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(t, "tc_tensor t"));
    TC_CHECK_ARG(out, "out is NULL");
    TC_TRY(handshake(t, stream));
    unversioned_export *e = calloc(1, sizeof *e);
    if (!e)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "could not allocate a managed tensor");
    e->m.manager_ctx = &e->c;
    e->m.deleter = delete_unversioned;
    fill_dl(t, &e->c, &e->m.dl_tensor);
    *out = &e->m;
    return TC_OK;
}

/* ---- import ------------------------------------------------------------------- */

typedef struct import_ctx {
    void *managed; /* the producer's managed tensor */
    bool versioned;
} import_ctx;

/* Before GPU memory goes back to its producer, tcuda's work on it finishes:
 * the releasing thread's current stream of that device is waited for (a
 * capture in progress there is left alone: a synchronize would break it). */
static void wait_for_tcuda(int dev)
{
    tc__saved_message saved;
    tc__message_save(&saved);
    const tc__device_ops *ops = tc__dev();
    tc_device_guard g = ops->device_guard_enter(dev);
    tc_stream *cur = NULL;
    if (g.status == TC_OK && !ops->stream_capturing() && ops->stream_current(dev, &cur) == TC_OK)
        (void)ops->stream_synchronize(cur);
    ops->device_guard_exit(&g);
    tc__message_restore(&saved);
}

static void give_back(tc__storage *s)
{
    import_ctx *c = s->ctx;
    if (s->device.type == TC_CUDA)
        wait_for_tcuda(s->device.index);
    if (c->versioned) {
        tc_DLManagedTensorVersioned *m = c->managed;
        if (m->deleter)
            m->deleter(m);
    } else {
        tc_DLManagedTensor *m = c->managed;
        if (m->deleter)
            m->deleter(m);
    }
    free(c);
}

static void disarmed(tc__storage *s) { free(s->ctx); }

static tc_status import_device(tc_DLDevice d, tc_device *out)
{
    if (d.device_type == TC_DL_CPU || d.device_type == TC_DL_CUDA_HOST) {
        *out = (tc_device){TC_CPU, -1};
        return TC_OK;
    }
    if (d.device_type != TC_DL_CUDA)
        return tc__fail(TC_ERROR_NOT_SUPPORTED,
                        "DLPack device type %d is not one tcuda takes (kDLCPU 1, kDLCUDA 2, "
                        "kDLCUDAHost 3)",
                        (int)d.device_type);
    TC_CHECK_ARG(d.device_id >= 0, "DLPack CUDA device id %d is negative", (int)d.device_id);
    return tc__device_resolve((tc_device){TC_CUDA, d.device_id}, out);
}

/* Bytes from the first element to the end of the last one reachable. */
static tc_status extent_bytes(int ndim, const int64_t *sizes, const int64_t *strides, size_t esize,
                              int64_t numel, int64_t *bytes)
{
    if (numel == 0) {
        *bytes = 0;
        return TC_OK;
    }
    int64_t last = 0, step;
    for (int i = 0; i < ndim; i++)
        if (__builtin_mul_overflow(sizes[i] - 1, strides[i], &step) ||
            __builtin_add_overflow(last, step, &last))
            return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                            "the DLPack tensor's strides reach beyond 2^63 elements");
    if (__builtin_add_overflow(last, 1, &last) ||
        __builtin_mul_overflow(last, (int64_t)esize, bytes))
        return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                        "the DLPack tensor's strides reach beyond 2^63 bytes");
    return TC_OK;
}

/* data + byte_offset, and the `bytes` after it, are addresses (no pointer
 * arithmetic past the end of memory, nor an offset a pointer cannot add),
 * and the first element is aligned to its size: the CPU kernels load whole
 * elements, and a GPU faults on a misaligned one. */
static tc_status check_placement(const tc_DLTensor *dl, int64_t bytes, size_t esize, int64_t numel)
{
    uintptr_t first, end;
    if (dl->byte_offset > (uint64_t)PTRDIFF_MAX ||
        __builtin_add_overflow((uintptr_t)dl->data, (uintptr_t)dl->byte_offset, &first) ||
        __builtin_add_overflow(first, (uintptr_t)bytes, &end))
        return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                        "the DLPack tensor's byte_offset %llu (data %p, %lld bytes reached) "
                        "goes past the end of memory",
                        (unsigned long long)dl->byte_offset, dl->data, (long long)bytes);
    if (numel && first % esize)
        return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                        "the DLPack tensor's first element (data %p + byte_offset %llu) is not "
                        "aligned to its %zu bytes; tcuda reads whole aligned elements",
                        dl->data, (unsigned long long)dl->byte_offset, esize);
    return TC_OK;
}

static tc_status import(const tc_DLTensor *dl, void *managed, bool versioned, tc_tensor **out)
{
    TC_CHECK_ARG(dl->ndim >= 0, "the DLPack tensor has ndim %d", (int)dl->ndim);
    if (dl->ndim > TC_MAX_DIMS)
        return tc__fail(TC_ERROR_NOT_SUPPORTED,
                        "the DLPack tensor has %d dimensions; tcuda tensors have at most %d",
                        (int)dl->ndim, TC_MAX_DIMS);
    int ndim = (int)dl->ndim;
    TC_CHECK_ARG(dl->shape || ndim == 0, "the DLPack tensor's shape is NULL");
    tc_dtype dtype = TC_FLOAT32;
    TC_TRY(from_dl_dtype(dl->dtype, &dtype));
    tc_device device;
    TC_TRY(import_device(dl->device, &device));
    int64_t numel, strides[TC_MAX_DIMS];
    size_t esize = tc_dtype_size(dtype);
    TC_TRY(tc__check_shape(ndim, dl->shape, esize, &numel));
    if (dl->strides) {
        for (int i = 0; i < ndim; i++)
            if (dl->strides[i] < 0)
                return tc__fail(TC_ERROR_NOT_SUPPORTED,
                                "the DLPack tensor has stride %lld in dimension %d; tcuda "
                                "tensors have no negative strides",
                                (long long)dl->strides[i], i);
        memcpy(strides, dl->strides, (size_t)ndim * sizeof *strides);
    } else { /* DLPack < 1.2: NULL strides mean row-major contiguous */
        tc__contiguous_strides(ndim, dl->shape, strides);
    }
    int64_t bytes = 0;
    TC_TRY(extent_bytes(ndim, dl->shape, strides, esize, numel, &bytes));
    TC_CHECK_ARG(dl->data || numel == 0,
                 "the DLPack tensor's data is NULL and it has %lld "
                 "elements",
                 (long long)numel);
    char *data = dl->data;
    if (data) {
        TC_TRY(check_placement(dl, bytes, esize, numel));
        data += dl->byte_offset;
    }
    import_ctx *c = malloc(sizeof *c);
    tc__storage *s = calloc(1, sizeof *s);
    if (!c || !s) {
        free(c);
        free(s);
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    *c = (import_ctx){managed, versioned};
    atomic_init(&s->refcount, 1);
    s->device = device;
    s->data = data;
    s->bytes = (size_t)bytes;
    s->ctx = c;
    s->on_free = give_back;
    tc_tensor tmp = {.magic = TC_TENSOR_MAGIC, .dtype = dtype, .storage = s};
    tc_status st = tc__make_view(&tmp, ndim, dl->shape, strides, 0, out);
    if (st != TC_OK)
        s->on_free = disarmed; /* the caller keeps the managed tensor */
    tc__storage_release(s);    /* the view holds it now (or, on failure, this frees it) */
    return st;
}

tc_status tc_tensor_from_dlpack(tc_DLManagedTensorVersioned *m, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(m && out, "m or out is NULL");
    if (m->version.major != TC_DLPACK_MAJOR_VERSION)
        return tc__fail(TC_ERROR_NOT_SUPPORTED,
                        "the managed tensor has DLPack version %u.%u; tcuda reads major "
                        "version %d (the caller still owns it and should call its deleter)",
                        (unsigned)m->version.major, (unsigned)m->version.minor,
                        TC_DLPACK_MAJOR_VERSION);
    return import(&m->dl_tensor, m, true, out);
}

tc_status tc_tensor_from_dlpack_unversioned(tc_DLManagedTensor *m, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(m && out, "m or out is NULL");
    return import(&m->dl_tensor, m, false, out);
}
