/* Fuzzes shape, stride and view arithmetic through the public tensor API on
 * CPU tensors: factories with arbitrary ndim, sizes and dtype, then a
 * sequence of view, reshape, narrow, transpose, permute, contiguous and
 * copy_ on a pool of tensors.
 *
 * The input is a small program: each operation reads its opcode and
 * arguments from the next bytes (fuzz_input.h). Sizes are mostly small, but
 * some bytes pick values made to overflow (2^62, INT64_MAX, -1, ...), which
 * the library must refuse. Every tensor made is read back in full when it is
 * small enough, so a view that points outside its buffer is caught by
 * AddressSanitizer; results are checked against the arithmetic of each
 * operation (element counts, sizes, values after contiguous and copy_), and
 * a failed call must leave *out alone and set a message.
 *
 * Requests for legitimately large buffers (more than 64 MiB, yet small
 * enough that malloc could give them) are skipped rather than made, since
 * the fuzzer counts big allocations as failures; larger ones are kept, as
 * the library must refuse them without overflowing. contiguous and copy_
 * walk every element, which the fuzzer's instrumentation slows to seconds
 * for a strided 64 MiB tensor (a program of 24 of them passed the 10 s
 * timeout): they are skipped past COPY_MAX elements, as the views are not. */
#include <math.h>
#include <string.h>

#include "fuzz_input.h"
#include "tcuda/tcuda.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { SLOTS = 8, MAX_OPS = 24, MAX_READ = 4096 };
#define BIG_BYTES ((double)(64 << 20)) /* larger buffers are skipped ... */
#define HUGE_BYTES 0x1p41              /* ... up to here, where malloc refuses */
#define COPY_MAX ((int64_t)1 << 18)    /* elements contiguous and copy_ are given */

static const tc_device cpu = {TC_CPU, -1};
static char sentinel_; /* never used: its address marks an untouched *out */
#define SENTINEL ((tc_tensor *)(void *)&sentinel_)

static const size_t elsize[TC_NUM_DTYPES] = {1, 1, 1, 2, 4, 8, 2, 2, 4, 8};

/* Sizes made to overflow, picked by bytes 224..255. */
/* clang-format off */
static const int64_t special_sizes[32] = {
    -1, -2, INT64_MIN, INT64_MAX, INT64_MAX - 1, 0x2000000000000000, 0x4000000000000000,
    0x4000000000000001, 0x80000000, 0x100000000, 0x100000001, 0x10000000000, 0x2aaaaaaaaaaaaaaa,
    3037000500, 65536, 0x100000, 0x1000000, 7, 8, 16, 64, 100, 255, 256, 4096, INT32_MAX,
    0x80000000 + 1, -0x4000000000000000, 1000003, 0, 1, 2};
/* clang-format on */
static const double special_values[16] = {
    0, 1, -1, 0.5, 2.5, 3, 10, -10, 100, 1e300, -1e300, INFINITY, -INFINITY, NAN, 65536, 1e-300};

static int64_t read_size(fz_input *in)
{
    uint8_t b = fz_u8(in);
    return b < 224 ? b % 6 : special_sizes[b - 224];
}

static tc_dtype read_dtype(fz_input *in) { return (tc_dtype)(fz_u8(in) % (TC_NUM_DTYPES + 1)); }

/* ndim 0..8, and now and then 9 or -1, which must be refused. */
static int read_ndim(fz_input *in)
{
    uint8_t b = fz_u8(in);
    return b == 255 ? -1 : b % 10;
}

static int read_dim(fz_input *in) { return (int8_t)fz_u8(in) % 12; }

/* The exact element count of sizes (-1: a negative size; saturates at 2^100). */
static double true_numel(int ndim, const int64_t *sizes)
{
    double n = 1;
    for (int i = 0; i < ndim; i++) {
        if (sizes[i] < 0)
            return -1;
        n *= (double)sizes[i];
    }
    return n;
}

/* Whether a factory of this many bytes is too big to make and small enough
 * that the library could rightly make it (see the top of the file). */
static bool too_big(double numel, tc_dtype dt)
{
    double bytes = numel * (double)(dt < TC_NUM_DTYPES ? elsize[dt] : 8);
    return bytes > BIG_BYTES && bytes <= HUGE_BYTES;
}

/* Reads a tensor's values into buf (MAX_READ doubles); false when it is too
 * big to read. A successful read of every element is the memory-safety
 * check: a view outside its buffer fails under AddressSanitizer. */
static bool read_values(const tc_tensor *t, double *buf)
{
    int64_t n = tc_tensor_numel(t);
    FZ_CHECK(n >= 0);
    if (n > MAX_READ)
        return false;
    tc_status st = tc_tensor_to_host(t, TC_FLOAT64, buf);
    if (st != TC_OK)
        fprintf(stderr, "to_host: %s\n", tc_last_error());
    FZ_CHECK(st == TC_OK);
    return true;
}

/* What every tensor must satisfy. */
static void check_tensor(const tc_tensor *t)
{
    static double buf[MAX_READ];
    int nd = tc_tensor_ndim(t);
    FZ_CHECK(nd >= 0 && nd <= TC_MAX_DIMS);
    int64_t n = 1;
    bool empty = false;
    for (int i = 0; i < nd; i++) {
        int64_t s = tc_tensor_size(t, i);
        FZ_CHECK(s >= 0);
        empty = empty || s == 0;
        if (s > 0) {
            FZ_CHECK(n <= INT64_MAX / s); /* the count of the other sizes fits */
            n *= s;
        }
    }
    n = empty ? 0 : n;
    FZ_CHECK(tc_tensor_numel(t) == n);
    FZ_CHECK(tc_tensor_dtype(t) < TC_NUM_DTYPES);
    FZ_CHECK(n == 0 || (uint64_t)n <= SIZE_MAX / elsize[tc_tensor_dtype(t)]);
    read_values(t, buf);
}

/* A call that made *out: check it (on success) or that it left *out alone. */
static tc_tensor *result(tc_status st, tc_tensor *out)
{
    if (st != TC_OK) {
        FZ_CHECK(out == SENTINEL);
        FZ_CHECK(tc_last_error()[0] != '\0');
        return NULL;
    }
    FZ_CHECK(out && out != SENTINEL);
    check_tensor(out);
    return out;
}

static void put(tc_tensor **slot, tc_tensor *t)
{
    if (!t)
        return;
    tc_tensor_release(*slot);
    *slot = t;
}

static bool same_double(double a, double b) { return a == b || (isnan(a) && isnan(b)); }

static tc_tensor *factory(fz_input *in)
{
    int kind = fz_u8(in) % 6;
    tc_dtype dt = read_dtype(in);
    int ndim = read_ndim(in);
    int64_t sizes[TC_MAX_DIMS + 1] = {0};
    for (int i = 0; i < ndim && i <= TC_MAX_DIMS; i++)
        sizes[i] = read_size(in);
    double value = special_values[fz_u8(in) % 16];
    double numel = true_numel(ndim > 0 ? ndim : 0, sizes);
    if (getenv("FUZZ_TRACE")) {
        fprintf(stderr, "factory %d dtype %d ndim %d sizes", kind, (int)dt, ndim);
        for (int i = 0; i < ndim && i <= TC_MAX_DIMS; i++)
            fprintf(stderr, " %lld", (long long)sizes[i]);
        fprintf(stderr, " value %g\n", value);
    }
    tc_tensor *out = SENTINEL;
    tc_status st;
    if (kind < 4 && too_big(numel, dt))
        return NULL;
    switch (kind) {
    case 0: st = tc_tensor_empty(ndim, sizes, dt, cpu, &out); break;
    case 1: st = tc_tensor_zeros(ndim, sizes, dt, cpu, &out); break;
    case 2: st = tc_tensor_ones(ndim, sizes, dt, cpu, &out); break;
    case 3: st = tc_tensor_full(ndim, sizes, value, dt, cpu, &out); break;
    case 4: {
        double start = special_values[fz_u8(in) % 16], end = special_values[fz_u8(in) % 16];
        double step = special_values[fz_u8(in) % 16];
        double count = ceil((end - start) / step);
        if (isfinite(count) && too_big(count, dt))
            return NULL;
        st = tc_tensor_arange(start, end, step, dt, cpu, &out);
        break;
    }
    default: {
        static uint8_t bytes[MAX_READ * 8];
        if (numel < 0 || numel * 8 > (double)sizeof bytes) { /* the data must exist */
            ndim = ndim < 0 ? ndim : ndim % 3;
            for (int i = 0; i < ndim; i++)
                sizes[i] &= 7;
        }
        for (size_t i = 0; i < sizeof bytes / 64; i++)
            bytes[i] = fz_u8(in); /* the rest stays as the last input left it */
        st = tc_tensor_from_data(bytes, ndim, sizes, dt, cpu, &out);
        break;
    }
    }
    return result(st, out);
}

/* Sizes for view and reshape: one may be -1. */
static int read_shape(fz_input *in, int64_t *sizes)
{
    int ndim = read_ndim(in);
    for (int i = 0; i < ndim && i <= TC_MAX_DIMS; i++)
        sizes[i] = read_size(in);
    return ndim;
}

static tc_tensor *reshaped(fz_input *in, const tc_tensor *src, bool view)
{
    int64_t sizes[TC_MAX_DIMS + 1] = {0};
    int ndim = read_shape(in, sizes);
    tc_tensor *out = SENTINEL;
    tc_status st = view ? tc_tensor_view(src, ndim, sizes, &out)
                        : tc_tensor_reshape(src, ndim, sizes, &out);
    tc_tensor *t = result(st, out);
    if (t) {
        FZ_CHECK(tc_tensor_ndim(t) == ndim);
        FZ_CHECK(tc_tensor_numel(t) == tc_tensor_numel(src));
        FZ_CHECK(tc_tensor_dtype(t) == tc_tensor_dtype(src));
    }
    return t;
}

static tc_tensor *narrowed(fz_input *in, const tc_tensor *src)
{
    int dim = read_dim(in);
    int64_t start = read_size(in), length = read_size(in);
    if (fz_u8(in) & 1) /* negative starts count from the end; INT64_MIN stays itself */
        start = (int64_t)(0 - (uint64_t)start);
    tc_tensor *out = SENTINEL;
    tc_tensor *t = result(tc_tensor_narrow(src, dim, start, length, &out), out);
    if (t) {
        int nd = tc_tensor_ndim(src), d = dim < 0 ? dim + nd : dim;
        FZ_CHECK(d >= 0 && d < nd && tc_tensor_ndim(t) == nd);
        FZ_CHECK(tc_tensor_size(t, d) == length && length <= tc_tensor_size(src, d));
    }
    return t;
}

static tc_tensor *transposed(fz_input *in, const tc_tensor *src)
{
    int d0 = read_dim(in), d1 = read_dim(in);
    tc_tensor *out = SENTINEL;
    tc_tensor *t = result(tc_tensor_transpose(src, d0, d1, &out), out);
    if (t) {
        int nd = tc_tensor_ndim(src);
        int a = d0 < 0 ? d0 + nd : d0, b = d1 < 0 ? d1 + nd : d1;
        FZ_CHECK(tc_tensor_ndim(t) == nd);
        for (int i = 0; i < nd; i++)
            FZ_CHECK(tc_tensor_size(t, i) == tc_tensor_size(src, i == a ? b : i == b ? a : i));
    }
    return t;
}

static tc_tensor *permuted(fz_input *in, const tc_tensor *src)
{
    int dims[TC_MAX_DIMS] = {0};
    int nd = tc_tensor_ndim(src);
    for (int i = 0; i < nd; i++)
        dims[i] = read_dim(in);
    tc_tensor *out = SENTINEL;
    tc_tensor *t = result(tc_tensor_permute(src, dims, &out), out);
    if (t) {
        FZ_CHECK(tc_tensor_ndim(t) == nd);
        for (int i = 0; i < nd; i++) {
            int d = dims[i] < 0 ? dims[i] + nd : dims[i];
            FZ_CHECK(d >= 0 && d < nd && tc_tensor_size(t, i) == tc_tensor_size(src, d));
        }
    }
    return t;
}

static tc_tensor *contiguous(const tc_tensor *src)
{
    static double a[MAX_READ], b[MAX_READ];
    if (tc_tensor_numel(src) > COPY_MAX)
        return NULL;
    tc_tensor *out = SENTINEL;
    tc_tensor *t = result(tc_tensor_contiguous(src, &out), out);
    if (t) {
        FZ_CHECK(tc_tensor_is_contiguous(t));
        FZ_CHECK(tc_tensor_numel(t) == tc_tensor_numel(src));
        if (read_values(src, a) && read_values(t, b))
            for (int64_t i = 0; i < tc_tensor_numel(t); i++)
                FZ_CHECK(same_double(a[i], b[i]));
    }
    return t;
}

/* dst.copy_(src); when both have the same sizes and dtype, dst must then hold
 * what src held before the call (also when they overlap). */
static void copy(tc_tensor *dst, const tc_tensor *src, bool non_blocking)
{
    static double before[MAX_READ], after[MAX_READ];
    if (!dst || tc_tensor_numel(dst) > COPY_MAX)
        return;
    int nd = tc_tensor_ndim(dst);
    bool comparable = nd == tc_tensor_ndim(src) && tc_tensor_dtype(dst) == tc_tensor_dtype(src);
    for (int i = 0; comparable && i < nd; i++)
        comparable = tc_tensor_size(dst, i) == tc_tensor_size(src, i);
    comparable = comparable && read_values(src, before);
    tc_status st = tc_tensor_copy_(dst, src, non_blocking);
    if (st != TC_OK) {
        FZ_CHECK(tc_last_error()[0] != '\0');
        return;
    }
    check_tensor(dst);
    if (comparable && read_values(dst, after))
        for (int64_t i = 0; i < tc_tensor_numel(dst); i++)
            FZ_CHECK(same_double(before[i], after[i]));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_input in = {data, size};
    tc_tensor *slot[SLOTS] = {0};
    bool trace = getenv("FUZZ_TRACE") != NULL; /* prints the program a crash ran */
    put(&slot[0], factory(&in));
    for (int op = 0; op < MAX_OPS && in.n; op++) {
        uint8_t code = fz_u8(&in);
        int to = (code >> 4) % SLOTS, from = fz_u8(&in) % SLOTS;
        tc_tensor *src = slot[from];
        if (trace)
            fprintf(stderr, "op %d: %d slot %d -> slot %d\n", op, (code & 15) % 10, from, to);
        int kind = (code & 15) % 10;
        if (!src && kind >= 1 && kind <= 7)
            continue;
        switch (kind) {
        case 0: put(&slot[to], factory(&in)); break;
        case 1: put(&slot[to], reshaped(&in, src, true)); break;
        case 2: put(&slot[to], reshaped(&in, src, false)); break;
        case 3: put(&slot[to], narrowed(&in, src)); break;
        case 4: put(&slot[to], transposed(&in, src)); break;
        case 5: put(&slot[to], permuted(&in, src)); break;
        case 6: put(&slot[to], contiguous(src)); break;
        case 7: copy(slot[to], src, code & 0x80); break;
        case 8: tc_tensor_release(slot[to]), slot[to] = NULL; break;
        default: { /* a factory given no place for its result must refuse */
            int64_t two = 2;
            FZ_CHECK(tc_tensor_zeros(1, &two, TC_FLOAT32, cpu, NULL) != TC_OK);
            FZ_CHECK(tc_tensor_ones(1, &two, TC_FLOAT32, cpu, NULL) != TC_OK);
            FZ_CHECK(tc_tensor_full(1, &two, 1.0, TC_FLOAT32, cpu, NULL) != TC_OK);
            FZ_CHECK(tc_tensor_arange(0, 2, 1, TC_FLOAT32, cpu, NULL) != TC_OK);
            if (src) {
                FZ_CHECK(tc_tensor_zeros_like(src, NULL) != TC_OK);
                FZ_CHECK(tc_tensor_new_zeros(src, 1, &two, NULL) != TC_OK);
            }
            break;
        }
        }
    }
    for (int i = 0; i < SLOTS; i++)
        tc_tensor_release(slot[i]);
    return 0;
}
