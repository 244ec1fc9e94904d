/* DLPack export and import (include/tcuda/dlpack.h): the ABI layout against
 * the specification's (offsets a 64-bit dlpack.h gives), CPU round trips of
 * every dtype and of strided views with the values checked against the
 * test's own arrays, the deleter called exactly once (counted by a producer
 * the test plays itself), byte_offset and NULL strides, and every refusal
 * leaving the caller's managed tensor alone. The GPU part runs only where
 * there is a GPU. */
#include <stddef.h>
#include <stdlib.h>

#include "tc_test.h"
#include "tcuda/dlpack.h"

static const tc_device CPU = {TC_CPU, -1};

static bool says(const char *what) { return strstr(tc_last_error(), what) != NULL; }

/* ---- the ABI ---------------------------------------------------------------------- */

_Static_assert(sizeof(tc_DLPackVersion) == 8, "DLPackVersion");
_Static_assert(sizeof(tc_DLDevice) == 8, "DLDevice");
_Static_assert(sizeof(tc_DLDataType) == 4, "DLDataType");
_Static_assert(offsetof(tc_DLDataType, bits) == 1 && offsetof(tc_DLDataType, lanes) == 2,
               "DLDataType fields");
_Static_assert(offsetof(tc_DLTensor, data) == 0 && offsetof(tc_DLTensor, device) == 8 &&
                   offsetof(tc_DLTensor, ndim) == 16 && offsetof(tc_DLTensor, dtype) == 20 &&
                   offsetof(tc_DLTensor, shape) == 24 && offsetof(tc_DLTensor, strides) == 32 &&
                   offsetof(tc_DLTensor, byte_offset) == 40 && sizeof(tc_DLTensor) == 48,
               "DLTensor");
_Static_assert(offsetof(tc_DLManagedTensor, manager_ctx) == 48 &&
                   offsetof(tc_DLManagedTensor, deleter) == 56 && sizeof(tc_DLManagedTensor) == 64,
               "DLManagedTensor");
_Static_assert(offsetof(tc_DLManagedTensorVersioned, manager_ctx) == 8 &&
                   offsetof(tc_DLManagedTensorVersioned, deleter) == 16 &&
                   offsetof(tc_DLManagedTensorVersioned, flags) == 24 &&
                   offsetof(tc_DLManagedTensorVersioned, dl_tensor) == 32 &&
                   sizeof(tc_DLManagedTensorVersioned) == 80,
               "DLManagedTensorVersioned");

/* ---- a producer the test plays: a buffer and a counting deleter ------------------- */

typedef struct producer {
    tc_DLManagedTensorVersioned m;
    tc_DLManagedTensor u;
    int64_t shape[TC_MAX_DIMS], strides[TC_MAX_DIMS];
    double buf[64];
    int deleted;
} producer;

static void count_versioned(tc_DLManagedTensorVersioned *self)
{
    ((producer *)self->manager_ctx)->deleted++;
}
static void count_unversioned(tc_DLManagedTensor *self)
{
    ((producer *)self->manager_ctx)->deleted++;
}

/* A 2-d float64 tensor of rows x cols over p->buf, contiguous; buf[i] = i. */
static void producer_init(producer *p, int64_t rows, int64_t cols)
{
    memset(p, 0, sizeof *p);
    for (int i = 0; i < 64; i++)
        p->buf[i] = i;
    p->shape[0] = rows;
    p->shape[1] = cols;
    p->strides[0] = cols;
    p->strides[1] = 1;
    tc_DLTensor dl = {.data = p->buf,
                      .device = {TC_DL_CPU, 0},
                      .ndim = 2,
                      .dtype = {TC_DL_FLOAT, 64, 1},
                      .shape = p->shape,
                      .strides = p->strides};
    p->m = (tc_DLManagedTensorVersioned){{1, 1}, p, count_versioned, 0, dl};
    p->u = (tc_DLManagedTensor){dl, p, count_unversioned};
}

/* ---- export ------------------------------------------------------------------------ */

static void test_export_dtypes(void)
{
    static const struct {
        tc_dtype dt;
        uint8_t code, bits;
    } want[] = {{TC_BOOL, TC_DL_BOOL, 8},      {TC_UINT8, TC_DL_UINT, 8},
                {TC_INT8, TC_DL_INT, 8},       {TC_INT16, TC_DL_INT, 16},
                {TC_INT32, TC_DL_INT, 32},     {TC_INT64, TC_DL_INT, 64},
                {TC_FLOAT16, TC_DL_FLOAT, 16}, {TC_BFLOAT16, TC_DL_BFLOAT, 16},
                {TC_FLOAT32, TC_DL_FLOAT, 32}, {TC_FLOAT64, TC_DL_FLOAT, 64}};
    for (size_t k = 0; k < sizeof want / sizeof *want; k++) {
        int64_t sz[2] = {2, 3};
        double vals[6] = {1, 0, 1, 1, 0, 1}; /* fits every dtype, bool included */
        tc_tensor *t = NULL, *back = NULL;
        CHECK_OK(tc_tensor_from_data(vals, 2, sz, TC_FLOAT64, CPU, &t));
        tc_tensor *c = NULL;
        CHECK_OK(tc_tensor_to(t, CPU, want[k].dt, false, &c));
        tc_DLManagedTensorVersioned *m = NULL;
        CHECK_OK(tc_tensor_to_dlpack(c, NULL, &m));
        if (!m)
            continue;
        CHECK(m->version.major == 1 && m->version.minor == TC_DLPACK_MINOR_VERSION);
        CHECK(m->flags == 0 && m->deleter);
        CHECK(m->dl_tensor.dtype.code == want[k].code && m->dl_tensor.dtype.bits == want[k].bits &&
              m->dl_tensor.dtype.lanes == 1);
        CHECK(m->dl_tensor.device.device_type == TC_DL_CPU && m->dl_tensor.device.device_id == 0);
        CHECK(m->dl_tensor.ndim == 2 && m->dl_tensor.shape[0] == 2 && m->dl_tensor.shape[1] == 3);
        CHECK(m->dl_tensor.strides && m->dl_tensor.strides[0] == 3 && m->dl_tensor.strides[1] == 1);
        CHECK(m->dl_tensor.data == tc_tensor_data_ptr(c) && m->dl_tensor.byte_offset == 0);
        CHECK_OK(tc_tensor_from_dlpack(m, &back));
        CHECK(tc_tensor_data_ptr(back) == tc_tensor_data_ptr(c));
        CHECK(tc_tensor_dtype(back) == want[k].dt);
        double *v = tc_test_values(back);
        for (int i = 0; v && i < 6; i++)
            CHECK(v[i] == vals[i]);
        free(v);
        tc_tensor_release(c);
        tc_tensor_release(t);
        tc_tensor_release(back); /* calls tcuda's own deleter */
    }
}

/* A narrowed transpose: strides in elements, data at the first element. */
static void test_export_strided(void)
{
    int64_t sz[2] = {4, 5};
    tc_tensor *t = NULL, *tr = NULL, *v = NULL, *back = NULL;
    CHECK_OK(tc_tensor_arange(0, 20, 1, TC_FLOAT32, CPU, &t));
    tc_tensor *m2 = NULL;
    CHECK_OK(tc_tensor_view(t, 2, sz, &m2));
    CHECK_OK(tc_tensor_transpose(m2, 0, 1, &tr)); /* [5, 4], strides [1, 5] */
    CHECK_OK(tc_tensor_narrow(tr, 0, 2, 3, &v));  /* rows 2..4 of the transpose */
    tc_DLManagedTensor *u = NULL;
    CHECK_OK(tc_tensor_to_dlpack_unversioned(v, NULL, &u));
    if (u) {
        CHECK(u->dl_tensor.ndim == 2 && u->dl_tensor.shape[0] == 3 && u->dl_tensor.shape[1] == 4);
        CHECK(u->dl_tensor.strides[0] == 1 && u->dl_tensor.strides[1] == 5);
        CHECK((float *)u->dl_tensor.data == (float *)tc_tensor_data_ptr(t) + 2);
        tc_tensor_release(t);
        tc_tensor_release(m2);
        tc_tensor_release(tr);
        tc_tensor_release(v); /* the managed tensor keeps the storage */
        CHECK_OK(tc_tensor_from_dlpack_unversioned(u, &back));
        double *got = tc_test_values(back);
        /* element [i][j] of the narrowed transpose is original [j][i + 2] = 5j + i + 2 */
        for (int i = 0; got && i < 3; i++)
            for (int j = 0; j < 4; j++)
                CHECK(got[i * 4 + j] == 5.0 * j + i + 2);
        free(got);
        tc_tensor_release(back);
    }
}

/* 0-d and empty tensors; a consumer that deletes without importing. */
static void test_export_edges(void)
{
    tc_tensor *s = NULL, *e = NULL;
    CHECK_OK(tc_tensor_full(0, NULL, 7, TC_INT32, CPU, &s));
    int64_t sz[2] = {0, 3};
    CHECK_OK(tc_tensor_empty(2, sz, TC_FLOAT32, CPU, &e));
    tc_DLManagedTensorVersioned *m = NULL;
    CHECK_OK(tc_tensor_to_dlpack(s, NULL, &m));
    if (m) {
        CHECK(m->dl_tensor.ndim == 0 && *(int32_t *)m->dl_tensor.data == 7);
        tc_tensor *back = NULL;
        CHECK_OK(tc_tensor_from_dlpack(m, &back));
        double x = 0;
        CHECK_OK(tc_tensor_item(back, &x));
        CHECK(x == 7 && tc_tensor_ndim(back) == 0);
        tc_tensor_release(back);
    }
    CHECK_OK(tc_tensor_to_dlpack(e, NULL, &m));
    if (m) {
        CHECK(m->dl_tensor.data == NULL && m->dl_tensor.shape[0] == 0);
        tc_tensor *back = NULL;
        CHECK_OK(tc_tensor_from_dlpack(m, &back));
        CHECK(tc_tensor_numel(back) == 0 && tc_tensor_size(back, 1) == 3);
        tc_tensor_release(back);
    }
    CHECK_OK(tc_tensor_to_dlpack(s, NULL, &m));
    tc_tensor_release(s);
    if (m)
        m->deleter(m); /* the consumer never imports: the storage goes here */
    tc_tensor_release(e);
}

static void test_export_bad(void)
{
    tc_tensor *t = NULL;
    int64_t sz[1] = {3};
    CHECK_OK(tc_tensor_zeros(1, sz, TC_FLOAT32, CPU, &t));
    tc_DLManagedTensorVersioned *const SENT = (tc_DLManagedTensorVersioned *)(uintptr_t)0x5e5e5e;
    tc_DLManagedTensorVersioned *m = SENT;
    CHECK_STATUS(tc_tensor_to_dlpack(NULL, NULL, &m), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_to_dlpack(t, NULL, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strncmp(tc_last_error(), "tc_tensor_to_dlpack", 19) == 0);
    /* A stream with a CPU tensor: DLPack has streams for device memory only. */
    CHECK_STATUS(tc_tensor_to_dlpack(t, (tc_stream *)(uintptr_t)0x10, &m),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("CPU tensor"));
    tc_DLManagedTensor *u = NULL;
    CHECK_STATUS(tc_tensor_to_dlpack_unversioned(t, NULL, NULL), TC_ERROR_INVALID_ARGUMENT);
    tc_tensor_release(t);
    CHECK_STATUS(tc_tensor_to_dlpack(t, NULL, &m), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_tensor_to_dlpack_unversioned(t, NULL, &u), TC_ERROR_INVALID_HANDLE);
    CHECK(m == SENT && u == NULL);
}

/* ---- import ------------------------------------------------------------------------ */

/* The deleter runs once, when the last tensor over the memory goes. */
static void test_import_lifetime(void)
{
    producer p;
    producer_init(&p, 3, 4);
    tc_tensor *t = NULL, *tr = NULL;
    CHECK_OK(tc_tensor_from_dlpack(&p.m, &t));
    CHECK(tc_tensor_data_ptr(t) == (void *)p.buf);
    CHECK(tc_tensor_dtype(t) == TC_FLOAT64 && tc_tensor_size(t, 0) == 3 &&
          tc_tensor_size(t, 1) == 4 && tc_tensor_is_contiguous(t));
    CHECK_OK(tc_tensor_transpose(t, 0, 1, &tr));
    tc_tensor_release(t);
    CHECK(p.deleted == 0);
    double *v = tc_test_values(tr);
    for (int i = 0; v && i < 4; i++)
        for (int j = 0; j < 3; j++)
            CHECK(v[i * 3 + j] == 4.0 * j + i);
    free(v);
    /* Writes go to the producer's memory (zero-copy both ways). */
    tc_tensor *ones = NULL;
    int64_t sz[2] = {4, 3};
    CHECK_OK(tc_tensor_ones(2, sz, TC_FLOAT64, CPU, &ones));
    CHECK_OK(tc_tensor_copy_(tr, ones, false));
    CHECK(p.buf[0] == 1 && p.buf[11] == 1 && p.buf[12] == 12);
    tc_tensor_release(ones);
    tc_tensor_release(tr);
    CHECK(p.deleted == 1);

    producer_init(&p, 2, 2);
    CHECK_OK(tc_tensor_from_dlpack_unversioned(&p.u, &t));
    CHECK(p.deleted == 0);
    tc_tensor_release(t);
    CHECK(p.deleted == 1);

    /* A NULL deleter is allowed (the producer needs no call). */
    producer_init(&p, 2, 2);
    p.m.deleter = NULL;
    CHECK_OK(tc_tensor_from_dlpack(&p.m, &t));
    tc_tensor_release(t);
    CHECK(p.deleted == 0);
}

/* byte_offset is added to data; NULL strides mean row-major; the read-only
 * flag is accepted. */
static void test_import_layouts(void)
{
    producer p;
    producer_init(&p, 2, 3);
    p.m.dl_tensor.byte_offset = 5 * sizeof(double);
    p.m.dl_tensor.strides = NULL;
    p.m.flags = TC_DLPACK_FLAG_BITMASK_READ_ONLY | TC_DLPACK_FLAG_BITMASK_IS_COPIED;
    tc_tensor *t = NULL;
    CHECK_OK(tc_tensor_from_dlpack(&p.m, &t));
    CHECK(tc_tensor_data_ptr(t) == (void *)(p.buf + 5));
    CHECK(tc_tensor_stride(t, 0) == 3 && tc_tensor_stride(t, 1) == 1);
    double *v = tc_test_values(t);
    for (int i = 0; v && i < 6; i++)
        CHECK(v[i] == 5.0 + i);
    free(v);
    tc_tensor_release(t);
    CHECK(p.deleted == 1);

    /* Non-contiguous strides from the producer: every other column. */
    producer_init(&p, 3, 2);
    p.strides[0] = 4;
    p.strides[1] = 2;
    CHECK_OK(tc_tensor_from_dlpack(&p.m, &t));
    v = tc_test_values(t);
    for (int i = 0; v && i < 3; i++)
        for (int j = 0; j < 2; j++)
            CHECK(v[i * 2 + j] == 4.0 * i + 2 * j);
    free(v);
    CHECK(!tc_tensor_is_contiguous(t));
    tc_tensor_release(t);

    /* int16 from a byte offset that is not a multiple of... anything but 2. */
    int16_t h[5] = {10, 11, 12, 13, 14};
    int64_t n = 3;
    tc_DLManagedTensorVersioned m = {
        {1, 0}, NULL, NULL, 0, {h, {TC_DL_CPU, 0}, 1, {TC_DL_INT, 16, 1}, &n, NULL, 2 * 2}};
    CHECK_OK(tc_tensor_from_dlpack(&m, &t));
    v = tc_test_values(t);
    CHECK(v && v[0] == 12 && v[2] == 14);
    free(v);
    tc_tensor_release(t);
    /* kDLCUDAHost (pinned host memory) is read as a CPU tensor. */
    m.dl_tensor.device.device_type = TC_DL_CUDA_HOST;
    CHECK_OK(tc_tensor_from_dlpack(&m, &t));
    CHECK(!tc_tensor_is_cuda(t));
    tc_tensor_release(t);
}

/* Every refusal: a status, a message, *out untouched, and no deleter call. */
static void test_import_bad(void)
{
    producer p;
    tc_tensor *const SENT = (tc_tensor *)(uintptr_t)0x5e5e5e5e;
    tc_tensor *t = SENT;
#define REFUSED(setup, call, status, text)                                                         \
    do {                                                                                           \
        producer_init(&p, 2, 3);                                                                   \
        setup;                                                                                     \
        CHECK_STATUS(call, status);                                                                \
        CHECK(says(text));                                                                         \
        CHECK(t == SENT && p.deleted == 0);                                                        \
    } while (0)
    REFUSED((void)0, tc_tensor_from_dlpack(NULL, &t), TC_ERROR_INVALID_ARGUMENT, "NULL");
    REFUSED((void)0, tc_tensor_from_dlpack(&p.m, NULL), TC_ERROR_INVALID_ARGUMENT, "NULL");
    REFUSED((void)0, tc_tensor_from_dlpack_unversioned(NULL, &t), TC_ERROR_INVALID_ARGUMENT,
            "NULL");
    REFUSED(p.m.version.major = 2, tc_tensor_from_dlpack(&p.m, &t), TC_ERROR_NOT_SUPPORTED,
            "version 2.");
    REFUSED(p.m.version.major = 0, tc_tensor_from_dlpack(&p.m, &t), TC_ERROR_NOT_SUPPORTED,
            "version 0.");
    REFUSED(p.m.dl_tensor.device.device_type = 4, tc_tensor_from_dlpack(&p.m, &t),
            TC_ERROR_NOT_SUPPORTED, "device type 4");
    REFUSED(p.u.dl_tensor.device.device_type = 13, tc_tensor_from_dlpack_unversioned(&p.u, &t),
            TC_ERROR_NOT_SUPPORTED, "device type 13");
    REFUSED(p.m.dl_tensor.dtype.lanes = 4, tc_tensor_from_dlpack(&p.m, &t), TC_ERROR_DTYPE,
            "4 lanes");
    REFUSED(p.m.dl_tensor.dtype = ((tc_DLDataType){5, 64, 1}), tc_tensor_from_dlpack(&p.m, &t),
            TC_ERROR_DTYPE, "code 5");
    REFUSED(p.m.dl_tensor.dtype = ((tc_DLDataType){TC_DL_UINT, 16, 1}),
            tc_tensor_from_dlpack(&p.m, &t), TC_ERROR_DTYPE, "code 1, 16 bits");
    REFUSED(p.m.dl_tensor.dtype = ((tc_DLDataType){TC_DL_BOOL, 1, 1}),
            tc_tensor_from_dlpack(&p.m, &t), TC_ERROR_DTYPE, "code 6, 1 bits");
    REFUSED(p.m.dl_tensor.ndim = 9, tc_tensor_from_dlpack(&p.m, &t), TC_ERROR_NOT_SUPPORTED,
            "9 dimensions");
    REFUSED(p.m.dl_tensor.ndim = -1, tc_tensor_from_dlpack(&p.m, &t), TC_ERROR_INVALID_ARGUMENT,
            "ndim -1");
    REFUSED(p.m.dl_tensor.shape = NULL, tc_tensor_from_dlpack(&p.m, &t), TC_ERROR_INVALID_ARGUMENT,
            "shape is NULL");
    REFUSED(p.shape[1] = -3, tc_tensor_from_dlpack(&p.m, &t), TC_ERROR_INVALID_ARGUMENT, "-3");
    REFUSED(p.strides[0] = -3, tc_tensor_from_dlpack(&p.m, &t), TC_ERROR_NOT_SUPPORTED,
            "stride -3");
    REFUSED(p.strides[0] = INT64_MAX / 2, tc_tensor_from_dlpack(&p.m, &t),
            TC_ERROR_INVALID_ARGUMENT, "beyond 2^63");
    REFUSED(p.m.dl_tensor.data = NULL, tc_tensor_from_dlpack(&p.m, &t), TC_ERROR_INVALID_ARGUMENT,
            "data is NULL");
    REFUSED(p.m.dl_tensor.byte_offset = UINT64_MAX - 8, tc_tensor_from_dlpack(&p.m, &t),
            TC_ERROR_INVALID_ARGUMENT, "byte_offset");
    /* An offset a pointer cannot add (2^63 and up), and one past the end of
     * memory for this data pointer. */
    REFUSED(p.m.dl_tensor.byte_offset = UINT64_C(1) << 63, tc_tensor_from_dlpack(&p.m, &t),
            TC_ERROR_INVALID_ARGUMENT, "byte_offset 9223372036854775808");
    REFUSED(p.u.dl_tensor.byte_offset = UINT64_MAX, tc_tensor_from_dlpack_unversioned(&p.u, &t),
            TC_ERROR_INVALID_ARGUMENT, "past the end of memory");
    REFUSED(p.m.dl_tensor.data = (void *)(UINTPTR_MAX - 15);
            p.m.dl_tensor.byte_offset = 0, tc_tensor_from_dlpack(&p.m, &t),
            TC_ERROR_INVALID_ARGUMENT, "past the end of memory");
    REFUSED(p.m.dl_tensor.data = (void *)(UINTPTR_MAX - 63);
            p.m.dl_tensor.byte_offset = 24, tc_tensor_from_dlpack(&p.m, &t),
            TC_ERROR_INVALID_ARGUMENT, "past the end of memory");
    /* A first element not aligned to its size: float64 and float32 at byte
     * offsets 1 to 7 (and 1 to 3), through both structs. */
    for (uint64_t off = 1; off < 8; off++) {
        REFUSED(p.m.dl_tensor.byte_offset = off, tc_tensor_from_dlpack(&p.m, &t),
                TC_ERROR_INVALID_ARGUMENT, "not aligned to its 8 bytes");
        REFUSED(p.u.dl_tensor.byte_offset = off, tc_tensor_from_dlpack_unversioned(&p.u, &t),
                TC_ERROR_INVALID_ARGUMENT, "not aligned");
    }
    for (uint64_t off = 1; off < 4; off++)
        REFUSED(p.m.dl_tensor.dtype = ((tc_DLDataType){TC_DL_FLOAT, 32, 1});
                p.m.dl_tensor.byte_offset = off, tc_tensor_from_dlpack(&p.m, &t),
                TC_ERROR_INVALID_ARGUMENT, "not aligned to its 4 bytes");
    REFUSED(p.m.dl_tensor.data = (char *)p.buf + 2;
            p.m.dl_tensor.dtype = ((tc_DLDataType){TC_DL_INT, 32, 1}),
            tc_tensor_from_dlpack(&p.m, &t), TC_ERROR_INVALID_ARGUMENT, "not aligned");
    REFUSED(p.m.dl_tensor.device.device_id = -2; p.m.dl_tensor.device.device_type = TC_DL_CUDA,
                                                 tc_tensor_from_dlpack(&p.m, &t),
                                                 TC_ERROR_INVALID_ARGUMENT, "-2");
#undef REFUSED
    /* GPU memory where tcuda has no GPU: refused, the caller keeps it. */
    if (!tc_is_available()) {
        producer_init(&p, 2, 3);
        p.m.dl_tensor.device = (tc_DLDevice){TC_DL_CUDA, 0};
        CHECK_STATUS(tc_tensor_from_dlpack(&p.m, &t), TC_ERROR_NO_DEVICE);
        CHECK(t == SENT && p.deleted == 0);
    }
    /* Refused, the managed tensor is still the caller's: its deleter runs
     * once, when the caller calls it. */
    producer_init(&p, 2, 3);
    p.m.dl_tensor.byte_offset = 3;
    CHECK_STATUS(tc_tensor_from_dlpack(&p.m, &t), TC_ERROR_INVALID_ARGUMENT);
    p.m.deleter(&p.m);
    CHECK(p.deleted == 1 && t == SENT);
    /* What is aligned is taken: float32 at byte_offset 4, bytes at any
     * offset; an empty tensor's data may be anywhere. */
    producer_init(&p, 2, 3);
    float f[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    p.m.dl_tensor.data = f;
    p.m.dl_tensor.dtype = (tc_DLDataType){TC_DL_FLOAT, 32, 1};
    p.m.dl_tensor.byte_offset = 4;
    CHECK_OK(tc_tensor_from_dlpack(&p.m, &t));
    double *v = tc_test_values(t);
    for (int i = 0; v && i < 6; i++)
        CHECK(v[i] == 1.0 + i);
    free(v);
    tc_tensor_release(t);
    CHECK(p.deleted == 1);
    unsigned char bytes[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    producer_init(&p, 2, 3);
    p.m.dl_tensor.data = bytes;
    p.m.dl_tensor.dtype = (tc_DLDataType){TC_DL_UINT, 8, 1};
    p.m.dl_tensor.byte_offset = 1;
    CHECK_OK(tc_tensor_from_dlpack(&p.m, &t));
    v = tc_test_values(t);
    CHECK(v && v[0] == 1 && v[5] == 6);
    free(v);
    tc_tensor_release(t);
    producer_init(&p, 0, 3);
    p.m.dl_tensor.byte_offset = 3;
    CHECK_OK(tc_tensor_from_dlpack(&p.m, &t));
    CHECK(tc_tensor_numel(t) == 0);
    tc_tensor_release(t);
    CHECK(p.deleted == 1);
    /* An empty tensor may have NULL data. */
    producer_init(&p, 0, 3);
    p.m.dl_tensor.data = NULL;
    CHECK_OK(tc_tensor_from_dlpack(&p.m, &t));
    CHECK(tc_tensor_numel(t) == 0);
    tc_tensor_release(t);
    CHECK(p.deleted == 1);
}

/* ---- GPU ------------------------------------------------------------------------------ */

static void test_gpu(void)
{
    if (!tc_is_available()) {
        printf("test_dlpack: no GPU, the GPU part is skipped\n");
        return;
    }
    tc_tensor *t = NULL, *back = NULL;
    CHECK_OK(tc_tensor_arange(0, 12, 1, TC_FLOAT32, (tc_device){TC_CUDA, 0}, &t));
    tc_stream *consumer = NULL;
    CHECK_OK(tc_stream_create(0, 0, &consumer));
    tc_DLManagedTensorVersioned *m = NULL;
    CHECK_OK(tc_tensor_to_dlpack(t, consumer, &m));
    if (m) {
        CHECK(m->dl_tensor.device.device_type == TC_DL_CUDA && m->dl_tensor.device.device_id == 0);
        CHECK(m->dl_tensor.data == tc_tensor_data_ptr(t));
        CHECK_OK(tc_tensor_from_dlpack(m, &back));
        CHECK(tc_tensor_is_cuda(back) && tc_tensor_data_ptr(back) == tc_tensor_data_ptr(t));
        double *v = tc_test_values(back);
        for (int i = 0; v && i < 12; i++)
            CHECK(v[i] == i);
        free(v);
    }
    tc_tensor_release(t);
    tc_tensor_release(back);
    /* A stream of another device is refused; so is a destroyed one. */
    CHECK_OK(tc_stream_destroy(consumer));
    CHECK_OK(tc_tensor_arange(0, 4, 1, TC_FLOAT32, (tc_device){TC_CUDA, 0}, &t));
    CHECK_STATUS(tc_tensor_to_dlpack(t, consumer, &m), TC_ERROR_INVALID_HANDLE);
    tc_tensor_release(t);
}

int main(void)
{
    tc_test_init();
    test_export_dtypes();
    test_export_strided();
    test_export_edges();
    test_export_bad();
    test_import_lifetime();
    test_import_layouts();
    test_import_bad();
    test_gpu();
    return TC_TEST_DONE();
}
