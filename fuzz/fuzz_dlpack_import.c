/* libFuzzer harness for DLPack import (src/interop/dlpack.c): a managed
 * tensor built from the input's bytes, imported, read, released.
 *
 * Input (fuzz_input.h: zeros past the end): a flag byte (bit 0 versioned or
 * not, bit 1 NULL data, bit 2 NULL strides, bit 3 NULL deleter, bits 4-5 the
 * byte_offset's form, bit 6 sizes and strides as raw 64-bit values rather
 * than small ones), the version's major, ndim (a signed byte), the dtype's
 * code, bits and lanes, the device's type and id, the data's start in a
 * 256-byte buffer, the byte_offset, then ndim sizes and strides.
 *
 * Checked: a refusal leaves *out alone, names the call, gives one of the
 * documented statuses and never calls the deleter; an acceptance gives a
 * tensor with the producer's dtype, sizes and strides at data + byte_offset,
 * whose first element is aligned to its size. Where the elements the
 * producer describes lie inside the buffer (and number at most 2^16), the
 * tensor is read whole and copied (ASan and UBSan watch every load: a
 * misaligned one is an error). Releasing it calls the deleter exactly once. */
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "tcuda/dlpack.h"
#include "tcuda/tcuda.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { BUF = 256 };

static int deleted;
static void count_versioned(tc_DLManagedTensorVersioned *self)
{
    (void)self;
    deleted++;
}
static void count_unversioned(tc_DLManagedTensor *self)
{
    (void)self;
    deleted++;
}

static uint64_t byte_offset(fz_input *in, unsigned form)
{
    switch (form) {
    case 0: return fz_u8(in) % 32; /* small: aligned or not */
    case 1: return fz_u64(in);     /* anything */
    case 2: return (UINT64_C(1) << 63) + fz_u8(in);
    default: return UINT64_MAX - fz_u8(in);
    }
}

static int64_t dim_value(fz_input *in, bool raw)
{
    return raw ? (int64_t)fz_u64(in) : (int64_t)(int8_t)fz_u8(in) % 9;
}

/* The bytes from data + byte_offset to the end of the last element, if the
 * producer's description stays inside `room` bytes; else -1. */
static int64_t extent(const tc_DLTensor *dl, size_t esize, size_t room)
{
    int64_t last = 0, step;
    for (int i = 0; i < dl->ndim; i++) {
        if (dl->shape[i] == 0)
            return 0;
        int64_t stride = 1;
        if (dl->strides) {
            stride = dl->strides[i];
        } else {
            for (int j = i + 1; j < dl->ndim; j++)
                if (__builtin_mul_overflow(stride, dl->shape[j], &stride))
                    return -1;
        }
        if (__builtin_mul_overflow(dl->shape[i] - 1, stride, &step) ||
            __builtin_add_overflow(last, step, &last))
            return -1;
    }
    int64_t bytes;
    if (__builtin_mul_overflow(last + 1, (int64_t)esize, &bytes) || bytes > (int64_t)room)
        return -1;
    return bytes;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_input in = {data, size};
    unsigned flags = fz_u8(&in);
    bool versioned = flags & 1, raw = flags & 64;
    uint8_t *buf = malloc(BUF);
    FZ_CHECK(buf);
    for (int i = 0; i < BUF; i++)
        buf[i] = (uint8_t)(i * 37 + 11);
    int64_t shape[16], strides[16];
    tc_DLTensor dl = {0};
    uint32_t major = fz_u8(&in) % 3;
    dl.ndim = (int8_t)fz_u8(&in) % 12;
    dl.dtype = (tc_DLDataType){fz_u8(&in) % 8, fz_u8(&in), (uint16_t)(fz_u8(&in) % 3)};
    if (dl.dtype.code == TC_DL_BOOL) /* a bool's bytes are 0 or 1 (DLPack, C) */
        for (int i = 0; i < BUF; i++)
            buf[i] &= 1;
    uint8_t type = fz_u8(&in) % 5;
    dl.device = (tc_DLDevice){type, (int8_t)fz_u8(&in)};
    size_t start = fz_u8(&in) % 64;
    dl.data = (flags & 2) ? NULL : buf + start;
    dl.byte_offset = byte_offset(&in, (flags >> 4) & 3);
    int nd = dl.ndim > 0 ? dl.ndim : 0;
    for (int i = 0; i < nd && i < 16; i++)
        shape[i] = dim_value(&in, raw);
    for (int i = 0; i < nd && i < 16; i++)
        strides[i] = dim_value(&in, raw);
    dl.shape = shape;
    dl.strides = (flags & 4) ? NULL : strides;

    tc_DLManagedTensorVersioned m = {{major, 1}, NULL, (flags & 8) ? NULL : count_versioned, 0, dl};
    tc_DLManagedTensor u = {dl, NULL, (flags & 8) ? NULL : count_unversioned};
    tc_tensor *const SENT = (tc_tensor *)(uintptr_t)0x5e5e5e5e;
    tc_tensor *t = SENT;
    deleted = 0;
    tc_status st = versioned ? tc_tensor_from_dlpack(&m, &t)
                             : tc_tensor_from_dlpack_unversioned(&u, &t);
    if (st != TC_OK) {
        FZ_CHECK(t == SENT && deleted == 0);
        const char *fn = versioned ? "tc_tensor_from_dlpack: "
                                   : "tc_tensor_from_dlpack_unversioned: ";
        FZ_CHECK(strncmp(tc_last_error(), fn, strlen(fn)) == 0);
        FZ_CHECK(st == TC_ERROR_INVALID_ARGUMENT || st == TC_ERROR_NOT_SUPPORTED ||
                 st == TC_ERROR_DTYPE || st == TC_ERROR_NO_DEVICE ||
                 st == TC_ERROR_INVALID_DEVICE || st == TC_ERROR_SHAPE ||
                 st == TC_ERROR_OUT_OF_MEMORY);
        free(buf);
        return 0;
    }
    /* Accepted: the producer's description, at data + byte_offset. */
    FZ_CHECK(t != SENT && t);
    tc_dtype dt = tc_tensor_dtype(t);
    size_t esize = tc_dtype_size(dt);
    FZ_CHECK(esize * 8 == dl.dtype.bits && dl.dtype.lanes == 1);
    FZ_CHECK(tc_tensor_ndim(t) == dl.ndim);
    int64_t numel = 1;
    for (int i = 0; i < dl.ndim; i++) {
        FZ_CHECK(tc_tensor_size(t, i) == shape[i] && shape[i] >= 0);
        numel *= shape[i];
        if (dl.strides && shape[i] > 1)
            FZ_CHECK(tc_tensor_stride(t, i) == strides[i]);
    }
    FZ_CHECK(tc_tensor_numel(t) == numel);
    if (dl.data) {
        uintptr_t first = (uintptr_t)dl.data + (uintptr_t)dl.byte_offset;
        FZ_CHECK(dl.byte_offset <= (uint64_t)PTRDIFF_MAX && first >= (uintptr_t)dl.data);
        FZ_CHECK(!numel || first % esize == 0);
        if (numel)
            FZ_CHECK((uintptr_t)tc_tensor_data_ptr(t) == first);
        /* Read it whole where the producer's memory is really the buffer's. */
        size_t used = start + (dl.byte_offset < BUF ? (size_t)dl.byte_offset : BUF);
        int64_t bytes = used <= BUF ? extent(&dl, esize, BUF - used) : -1;
        bool small = numel <= (1 << 16); /* strides of 0 repeat few bytes many times */
        if (numel && small && bytes > 0 && dl.device.device_type != TC_DL_CUDA) {
            void *host = malloc((size_t)numel * esize);
            FZ_CHECK(host);
            FZ_CHECK(tc_tensor_to_host(t, dt, host) == TC_OK);
            tc_tensor *c = NULL;
            FZ_CHECK(tc_tensor_contiguous(t, &c) == TC_OK);
            void *again = malloc((size_t)numel * esize);
            FZ_CHECK(again && tc_tensor_to_host(c, dt, again) == TC_OK);
            FZ_CHECK(memcmp(host, again, (size_t)numel * esize) == 0);
            tc_tensor_release(c);
            free(again);
            free(host);
        }
    } else {
        FZ_CHECK(numel == 0);
    }
    FZ_CHECK(deleted == 0);
    tc_tensor_release(t);
    FZ_CHECK(deleted == ((flags & 8) ? 0 : 1));
    free(buf);
    return 0;
}
