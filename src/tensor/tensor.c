/* Tensor metadata: creation, factories, lifetime, accessors and views.
 *
 * Invariants: 0 <= ndim <= TC_MAX_DIMS; sizes >= 0, and every shape passed
 * tc__check_shape, so the element count, the contiguous strides and the byte
 * count fit in int64_t (no arithmetic on sizes below can overflow); a
 * tensor's elements lie inside its storage; the device stored in the storage
 * is resolved (a CUDA index >= 0, the CPU -1). Views retain the storage; a
 * tensor header is parked in a handle pool (not freed) when its own refcount
 * drops to zero, so a released handle is recognized by its dead magic word.
 * Every public function starts with TC_API_BEGIN and checks its tensors. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor_internal.h"
#include "tensor_watch.h"
#include "tcuda/device.h"

static tc__handle_pool tensor_pool = TC_HANDLE_POOL_INIT(tc_tensor);

/* Where tensors exist, their operations are declared to the access layer
 * once a watcher (the stream sanitizer, an ordered capture) wants them. A
 * constructor, so that the registration is made before any watcher can
 * activate, in every program that links tensors (a static link keeps this
 * file whenever tensors are used). */
__attribute__((constructor)) static void watch_register(void)
{
    tc__access_add_enabler(tc__tensor_watch_enable);
}

tc_status tc__no_backend(void)
{
    return tc__fail(TC_ERROR_NO_DEVICE, "CUDA tensors need CUDA: tcuda was built without CUDA "
                                        "(TCUDA_CUDA=OFF or no nvcc at configure time)");
}

/* PyTorch refuses a shape whose running product of sizes overflows
 * (computeStorageNbytes), and its contiguous strides multiply the sizes
 * after a 0 too; tcuda asks that the product of the sizes, a 0 counted as 1,
 * fits: then the element count, every contiguous stride and every offset
 * inside the tensor fit as well. ({2^62, 2^62, 0} is refused, {0, 5} is
 * fine.) */
tc_status tc__check_shape(int ndim, const int64_t *sizes, size_t esize, int64_t *numel)
{
    TC_CHECK_ARG(ndim >= 0 && ndim <= TC_MAX_DIMS, "ndim %d is outside 0..%d", ndim, TC_MAX_DIMS);
    TC_CHECK_ARG(ndim == 0 || sizes, "sizes is NULL with ndim %d", ndim);
    int64_t extent = 1, n = 1;
    for (int i = 0; i < ndim; i++) {
        TC_CHECK_ARG(sizes[i] >= 0, "size %lld of dimension %d is negative", (long long)sizes[i],
                     i);
        if (__builtin_mul_overflow(extent, sizes[i] ? sizes[i] : 1, &extent))
            return tc__fail(TC_ERROR_SHAPE,
                            "the sizes multiply past 2^63 at dimension %d (size "
                            "%lld): no tensor can have this shape",
                            i, (long long)sizes[i]);
        n *= sizes[i];
    }
    int64_t bytes;
    if (__builtin_mul_overflow(n, (int64_t)esize, &bytes) || (uint64_t)bytes > SIZE_MAX)
        return tc__fail(TC_ERROR_SHAPE,
                        "%lld elements of %zu bytes do not fit in memory (the "
                        "byte count overflows)",
                        (long long)n, esize);
    *numel = n;
    return TC_OK;
}

static tc_tensor *header(tc__storage *s, tc_dtype dtype, int ndim, const int64_t *sizes,
                         const int64_t *strides, int64_t offset)
{
    tc_tensor *t = tc__handle_get(&tensor_pool);
    if (!t)
        return NULL;
    t->magic = TC_TENSOR_MAGIC;
    atomic_init(&t->refcount, 1);
    t->dtype = dtype;
    t->ndim = ndim;
    t->offset = offset;
    t->storage = s;
    for (int i = 0; i < ndim; i++) {
        t->sizes[i] = sizes[i];
        if (strides)
            t->strides[i] = strides[i];
    }
    if (!strides)
        tc__contiguous_strides(ndim, sizes, t->strides);
    return t;
}

static tc_status check_dtype(tc_dtype dtype)
{
    TC_CHECK_ARG((unsigned)dtype < TC_NUM_DTYPES, "%d is not a tc_dtype", (int)dtype);
    return TC_OK;
}

tc_status tc__new_tensor(int ndim, const int64_t *sizes, tc_dtype dtype, tc_device device,
                         bool pinned, tc_tensor **out)
{
    /* Nothing is written to *out on failure: public factories pass the
     * caller's pointer straight through (the API rule, fuzzed). */
    TC_TRY(check_dtype(dtype));
    int64_t n;
    TC_TRY(tc__check_shape(ndim, sizes, tc_dtype_size(dtype), &n));
    tc_device dev;
    TC_TRY(tc__device_resolve(device, &dev));
    tc__storage *s;
    TC_TRY(tc__storage_alloc(dev, (size_t)n * tc_dtype_size(dtype), pinned, &s));
    tc_tensor *t = header(s, dtype, ndim, sizes, NULL, 0);
    if (!t) {
        tc__storage_release(s);
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "could not allocate a tensor header");
    }
    *out = t;
    return TC_OK;
}

tc_status tc__make_view(const tc_tensor *t, int ndim, const int64_t *sizes, const int64_t *strides,
                        int64_t offset, tc_tensor **out)
{
    /* Only an empty view can start this far (its offset grew by narrowing
     * big empty dimensions); tc__data must still be able to multiply it. */
    int64_t bytes;
    if (TC_UNLIKELY(offset < 0 ||
                    __builtin_mul_overflow(offset, (int64_t)tc_dtype_size(t->dtype), &bytes)))
        return tc__fail(TC_ERROR_SHAPE,
                        "the view would start %lld elements into its storage, "
                        "too far to address",
                        (long long)offset);
    tc_tensor *v = header(t->storage, t->dtype, ndim, sizes, strides, offset);
    if (!v)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "could not allocate a tensor header");
    tc__storage_retain(t->storage);
    *out = v;
    return TC_OK;
}

static tc_status fill(tc_tensor *t, tc__fill v)
{
    int64_t n = tc__numel(t->ndim, t->sizes);
    if (n == 0)
        return TC_OK;
    const tc__backend *be = tc__backend_of(t->storage->device);
    if (!be)
        return TC_ERROR_NO_DEVICE;
    return be->fill(t->storage->device.index, t->dtype, tc__data(t), n, v);
}

static tc_status make_filled(int ndim, const int64_t *sizes, tc_dtype dtype, tc_device device,
                             tc__fill v, tc_tensor **out)
{
    TC_CHECK_ARG(out, "out is NULL");
    tc_tensor *t;
    TC_TRY(tc__new_tensor(ndim, sizes, dtype, device, false, &t));
    tc_status st = fill(t, v);
    if (st != TC_OK) {
        tc_tensor_release(t);
        return st;
    }
    *out = t;
    return TC_OK;
}

/* A constant fill; integer dtypes take istart, exact for every int64. */
static tc__fill constant(double value)
{
    tc__fill f = {value, 0, 0};
    if (value >= -0x1p63 && value < 0x1p63)
        f.istart = (int64_t)value;
    return f;
}

/* As PyTorch's checked conversion of a fill value: an integer dtype refuses
 * NaN, infinities and values outside its range; a floating dtype refuses
 * finite values beyond its largest (infinities and NaN are values it has);
 * bool takes anything. */
static tc_status check_fill_value(double v, tc_dtype dt)
{
    double lo, hi;
    switch (dt) {
    case TC_BOOL:
    case TC_FLOAT64: return TC_OK;
    case TC_UINT8: lo = 0, hi = 255; break;
    case TC_INT8: lo = -128, hi = 127; break;
    case TC_INT16: lo = -32768, hi = 32767; break;
    case TC_INT32: lo = -2147483648.0, hi = 2147483647.0; break;
    case TC_INT64: lo = -0x1p63, hi = 0x1p63; break; /* below 2^63, tested apart */
    case TC_FLOAT16: lo = -65504, hi = 65504; break;
    case TC_BFLOAT16: lo = -0x1.fep127, hi = 0x1.fep127; break;
    default: lo = -FLT_MAX, hi = FLT_MAX; break;
    }
    bool fl = tc_dtype_is_floating(dt);
    if (fl && !isfinite(v))
        return TC_OK;
    if (!isnan(v) && v >= lo && v <= hi && !(dt == TC_INT64 && v == hi))
        return TC_OK;
    if (fl)
        return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                        "value %.17g cannot be converted to %s without overflow (its finite "
                        "values go from %.17g to %.17g)",
                        v, tc_dtype_string(dt), lo, hi);
    return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                    "value %.17g cannot be converted to %s without overflow (it holds integers "
                    "from %lld to %lld)",
                    v, tc_dtype_string(dt), (long long)lo,
                    dt == TC_INT64 ? (long long)INT64_MAX : (long long)hi);
}

tc_status tc_tensor_empty(int ndim, const int64_t *sizes, tc_dtype dtype, tc_device device,
                          tc_tensor **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    return tc__new_tensor(ndim, sizes, dtype, device, false, out);
}
tc_status tc_tensor_zeros(int ndim, const int64_t *sizes, tc_dtype dtype, tc_device device,
                          tc_tensor **out)
{
    TC_API_BEGIN;
    return make_filled(ndim, sizes, dtype, device, constant(0), out);
}
tc_status tc_tensor_ones(int ndim, const int64_t *sizes, tc_dtype dtype, tc_device device,
                         tc_tensor **out)
{
    TC_API_BEGIN;
    return make_filled(ndim, sizes, dtype, device, constant(1), out);
}
tc_status tc_tensor_full(int ndim, const int64_t *sizes, double value, tc_dtype dtype,
                         tc_device device, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_TRY(check_dtype(dtype));
    TC_TRY(check_fill_value(value, dtype));
    return make_filled(ndim, sizes, dtype, device, constant(value), out);
}

tc_status tc_tensor_arange(double start, double end, double step, tc_dtype dtype, tc_device device,
                           tc_tensor **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(isfinite(start) && isfinite(end) && isfinite(step),
                 "start, end and step must be finite, got %.17g, %.17g, %.17g", start, end, step);
    TC_CHECK_ARG(step != 0, "step must not be zero");
    TC_CHECK_ARG((end - start) / step >= -1.0, "step %.17g goes away from end %.17g (start %.17g)",
                 step, end, start);
    TC_TRY(check_dtype(dtype));
    if (dtype == TC_BOOL)
        return tc__fail(TC_ERROR_DTYPE, "a range of bool is not defined (PyTorch refuses it "
                                        "too); make an integer range and compare it");
    double count = ceil((end - start) / step);
    if (count < 0)
        count = 0;
    TC_CHECK_ARG(count < 9.0e18, "%.17g elements are too many", count);
    int64_t n = (int64_t)count;
    tc__fill f = {start, step, 0}; /* a range: computed in double */
    return make_filled(1, &n, dtype, device, f, out);
}

tc_status tc_tensor_from_data(const void *data, int ndim, const int64_t *sizes, tc_dtype dtype,
                              tc_device device, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    TC_TRY(check_dtype(dtype));
    int64_t n;
    TC_TRY(tc__check_shape(ndim, sizes, tc_dtype_size(dtype), &n));
    TC_CHECK_ARG(data || n == 0, "data is NULL");
    /* A borrowed CPU tensor over the caller's memory, then an ordinary copy. */
    tc__storage host;
    tc_tensor src;
    tc__wrap_host(&host, &src, (void *)data, dtype, ndim, sizes);
    tc_tensor *t;
    TC_TRY(tc__new_tensor(ndim, sizes, dtype, device, false, &t));
    tc_status s = tc_tensor_copy_(t, &src, false);
    if (s != TC_OK) {
        tc_tensor_release(t);
        return s;
    }
    *out = t;
    return TC_OK;
}

/* The *_like and new_* forms: the public name comes from TC_API_BEGIN, so an
 * error inside the factory they call names them. */
tc_status tc_tensor_empty_like(const tc_tensor *like, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(like, "tc_tensor like"));
    return tc_tensor_empty(like->ndim, like->sizes, like->dtype, like->storage->device, out);
}
tc_status tc_tensor_zeros_like(const tc_tensor *like, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(like, "tc_tensor like"));
    return tc_tensor_zeros(like->ndim, like->sizes, like->dtype, like->storage->device, out);
}
tc_status tc_tensor_ones_like(const tc_tensor *like, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(like, "tc_tensor like"));
    return tc_tensor_ones(like->ndim, like->sizes, like->dtype, like->storage->device, out);
}
tc_status tc_tensor_full_like(const tc_tensor *like, double value, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(like, "tc_tensor like"));
    return tc_tensor_full(like->ndim, like->sizes, value, like->dtype, like->storage->device, out);
}
tc_status tc_tensor_new_empty(const tc_tensor *t, int ndim, const int64_t *sizes, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(t, "tc_tensor t"));
    return tc_tensor_empty(ndim, sizes, t->dtype, t->storage->device, out);
}
tc_status tc_tensor_new_zeros(const tc_tensor *t, int ndim, const int64_t *sizes, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(t, "tc_tensor t"));
    return tc_tensor_zeros(ndim, sizes, t->dtype, t->storage->device, out);
}
tc_status tc_tensor_new_ones(const tc_tensor *t, int ndim, const int64_t *sizes, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(t, "tc_tensor t"));
    return tc_tensor_ones(ndim, sizes, t->dtype, t->storage->device, out);
}
tc_status tc_tensor_new_full(const tc_tensor *t, int ndim, const int64_t *sizes, double value,
                             tc_tensor **out)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(t, "tc_tensor t"));
    return tc_tensor_full(ndim, sizes, value, t->dtype, t->storage->device, out);
}
tc_status tc_tensor_new_tensor(const tc_tensor *t, const void *data, int ndim, const int64_t *sizes,
                               tc_tensor **out)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(t, "tc_tensor t"));
    return tc_tensor_from_data(data, ndim, sizes, t->dtype, t->storage->device, out);
}

/* ---- lifetime and accessors --------------------------------------------- */

tc_status tc_tensor_retain(tc_tensor *t)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(t, "tc_tensor"));
    tc__tensor_ref(t);
    return TC_OK;
}

tc_status tc_tensor_release(tc_tensor *t)
{
    if (!t)
        return TC_OK;
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(t, "tc_tensor"));
    if (atomic_fetch_sub_explicit(&t->refcount, 1, memory_order_acq_rel) != 1)
        return TC_OK;
    tc__storage_release(t->storage);
    t->storage = NULL;
    tc__handle_put(&tensor_pool, t);
    return TC_OK;
}

static int wrap_dim(int dim, int ndim) { return dim < 0 ? dim + ndim : dim; }

tc_status tc__wrap_dim(int dim, int ndim, int *out)
{
    int n = ndim ? ndim : 1;
    TC_CHECK_ARG(dim >= -n && dim < n,
                 "dimension %d out of range (expected to be in range of [%d, %d] for a %d-d "
                 "tensor)",
                 dim, -n, n - 1, ndim);
    *out = dim < 0 ? dim + n : dim;
    return TC_OK;
}

tc_status tc__check_writable(const tc_tensor *t)
{
    for (int d = 0; d < t->ndim; d++)
        if (t->strides[d] == 0 && t->sizes[d] > 1)
            return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                            "unsupported operation: more than one element of the written-to "
                            "tensor refers to a single memory location (dimension %d has "
                            "stride 0). Please copy the tensor with tc_tensor_contiguous "
                            "before writing to it",
                            d);
    return TC_OK;
}

/* Accessors answer for NULL and for a released tensor as for NULL. */
int tc_tensor_ndim(const tc_tensor *t) { return tc__tensor_live(t) ? t->ndim : 0; }
int64_t tc_tensor_size(const tc_tensor *t, int dim)
{
    if (!tc__tensor_live(t))
        return 0;
    dim = wrap_dim(dim, t->ndim);
    return dim >= 0 && dim < t->ndim ? t->sizes[dim] : 0;
}
int64_t tc_tensor_stride(const tc_tensor *t, int dim)
{
    if (!tc__tensor_live(t))
        return 0;
    dim = wrap_dim(dim, t->ndim);
    return dim >= 0 && dim < t->ndim ? t->strides[dim] : 0;
}
const int64_t *tc_tensor_sizes(const tc_tensor *t) { return tc__tensor_live(t) ? t->sizes : NULL; }
const int64_t *tc_tensor_strides(const tc_tensor *t)
{
    return tc__tensor_live(t) ? t->strides : NULL;
}
int64_t tc_tensor_offset(const tc_tensor *t) { return tc__tensor_live(t) ? t->offset : 0; }
int64_t tc_tensor_numel(const tc_tensor *t)
{
    return tc__tensor_live(t) ? tc__numel(t->ndim, t->sizes) : 0;
}
tc_dtype tc_tensor_dtype(const tc_tensor *t) { return tc__tensor_live(t) ? t->dtype : TC_FLOAT32; }
tc_device tc_tensor_device(const tc_tensor *t)
{
    return tc__tensor_live(t) ? t->storage->device : (tc_device){TC_CPU, -1};
}
bool tc_tensor_is_cuda(const tc_tensor *t)
{
    return tc__tensor_live(t) && t->storage->device.type == TC_CUDA;
}
bool tc_tensor_is_contiguous(const tc_tensor *t)
{
    return tc__tensor_live(t) && tc__is_contiguous(t);
}
void *tc_tensor_data_ptr(const tc_tensor *t) { return tc__tensor_live(t) ? tc__data(t) : NULL; }
bool tc_tensor_is_pinned(const tc_tensor *t) { return tc__tensor_live(t) && t->storage->pinned; }

tc_status tc__check_same_device(const char *fn, const tc_tensor *a, const tc_tensor *b)
{
    tc_device da = a->storage->device, db = b->storage->device;
    if (da.type == db.type && da.index == db.index)
        return TC_OK;
    char na[32], nb[32];
    tc_device_format(da, na, sizeof na);
    tc_device_format(db, nb, sizeof nb);
    return tc__fail(TC_ERROR_DEVICE_MISMATCH,
                    "%s: expected all tensors on the same device, but found %s and %s (move one "
                    "with tc_tensor_to)",
                    fn, na, nb);
}

tc_device_guard tc_device_guard_enter_of(const tc_tensor *t)
{
    TC_API_BEGIN;
    if (t && !tc__tensor_live(t))
        return (tc_device_guard){
            .prev_device = -1, .device = -1, .status = tc__tensor_check(t, "tc_tensor")};
    if (!t || t->storage->device.type != TC_CUDA)
        return tc__dev()->device_guard_enter(-1);
    return tc__dev()->device_guard_enter(t->storage->device.index);
}

/* ---- views ---------------------------------------------------------------- */
/* A view keeps its elements inside the source's: transpose and permute
 * reorder dimensions, narrow shrinks one (its start is checked against the
 * size without computing start + length), view and reshape keep the element
 * count (multiplied with overflow checks) and the strides PyTorch's
 * computeStride gives. No arithmetic here can overflow on any input. */

tc_status tc_tensor_transpose(const tc_tensor *src, int d0, int d1, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(src, "tc_tensor src"));
    TC_CHECK_ARG(out, "out is NULL");
    int n = src->ndim ? src->ndim : 1;
    int a = wrap_dim(d0, n), b = wrap_dim(d1, n);
    TC_CHECK_ARG(a >= 0 && a < n && b >= 0 && b < n,
                 "dimensions %d, %d out of range for %d dimensions", d0, d1, src->ndim);
    int64_t sz[TC_MAX_DIMS], st[TC_MAX_DIMS];
    memcpy(sz, src->sizes, sizeof sz);
    memcpy(st, src->strides, sizeof st);
    if (src->ndim) {
        int64_t t = sz[a];
        sz[a] = sz[b];
        sz[b] = t;
        t = st[a];
        st[a] = st[b];
        st[b] = t;
    }
    return tc__make_view(src, src->ndim, sz, st, src->offset, out);
}

tc_status tc_tensor_permute(const tc_tensor *src, const int *dims, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(src, "tc_tensor src"));
    TC_CHECK_ARG(out, "out is NULL");
    TC_CHECK_ARG(dims || src->ndim == 0, "dims is NULL");
    int64_t sz[TC_MAX_DIMS], st[TC_MAX_DIMS];
    bool seen[TC_MAX_DIMS] = {0};
    for (int i = 0; i < src->ndim; i++) {
        int d = wrap_dim(dims[i], src->ndim);
        TC_CHECK_ARG(d >= 0 && d < src->ndim && !seen[d],
                     "dims is not a permutation of 0..%d (entry %d is %d)", src->ndim - 1, i,
                     dims[i]);
        seen[d] = true;
        sz[i] = src->sizes[d];
        st[i] = src->strides[d];
    }
    return tc__make_view(src, src->ndim, sz, st, src->offset, out);
}

tc_status tc_tensor_narrow(const tc_tensor *src, int dim, int64_t start, int64_t length,
                           tc_tensor **out)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(src, "tc_tensor src"));
    TC_CHECK_ARG(out, "out is NULL");
    if (src->ndim == 0)
        return tc__fail(TC_ERROR_SHAPE, "a 0-d tensor has no dimension to narrow");
    int d = wrap_dim(dim, src->ndim);
    TC_CHECK_ARG(d >= 0 && d < src->ndim, "dimension %d out of range for %d dimensions", dim,
                 src->ndim);
    int64_t size = src->sizes[d], s = start;
    if (s < 0 && s >= -size)
        s += size;
    /* size - s cannot overflow once 0 <= s <= size */
    if (s < 0 || s > size || length < 0 || length > size - s)
        return tc__fail(TC_ERROR_SHAPE,
                        "start %lld and length %lld do not fit in size %lld of dimension %d "
                        "(need -size <= start <= size and 0 <= length <= size - start)",
                        (long long)start, (long long)length, (long long)size, d);
    int64_t sz[TC_MAX_DIMS], offset;
    memcpy(sz, src->sizes, sizeof sz);
    sz[d] = length;
    /* inside the storage for a view with elements; an empty view's offset
     * can grow past it (as in PyTorch), but not past int64_t */
    if (__builtin_mul_overflow(s, src->strides[d], &offset) ||
        __builtin_add_overflow(offset, src->offset, &offset))
        return tc__fail(TC_ERROR_SHAPE,
                        "the offset of the view overflows (start %lld, stride "
                        "%lld, offset %lld)",
                        (long long)s, (long long)src->strides[d], (long long)src->offset);
    return tc__make_view(src, src->ndim, sz, src->strides, offset, out);
}

/* Infers a -1 size and checks the element count and the new shape. */
static tc_status infer_sizes(const tc_tensor *src, int ndim, const int64_t *in, int64_t *sizes)
{
    TC_CHECK_ARG(ndim >= 0 && ndim <= TC_MAX_DIMS, "ndim %d is outside 0..%d", ndim, TC_MAX_DIMS);
    TC_CHECK_ARG(ndim == 0 || in, "sizes is NULL with ndim %d", ndim);
    int infer = -1;
    int64_t known = 1, numel = tc__numel(src->ndim, src->sizes);
    for (int i = 0; i < ndim; i++) {
        if (in[i] == -1) {
            TC_CHECK_ARG(infer < 0, "only one size may be -1 (sizes %d and %d are)", infer, i);
            infer = i;
            sizes[i] = 1;
        } else {
            TC_CHECK_ARG(in[i] >= 0, "size %lld of dimension %d is negative", (long long)in[i], i);
            sizes[i] = in[i];
            if (__builtin_mul_overflow(known, in[i], &known))
                return tc__fail(TC_ERROR_SHAPE,
                                "the sizes multiply past 2^63 at dimension %d "
                                "(size %lld); the tensor has %lld elements",
                                i, (long long)in[i], (long long)numel);
        }
    }
    if (infer >= 0) {
        if (known == 0 || numel % known)
            return tc__fail(TC_ERROR_SHAPE,
                            "cannot infer the -1 size for %lld elements from "
                            "the other sizes (product %lld)",
                            (long long)numel, (long long)known);
        sizes[infer] = numel / known;
        known = numel;
    }
    if (known != numel)
        return tc__fail(TC_ERROR_SHAPE,
                        "shape with %lld elements is invalid for a tensor "
                        "of %lld elements",
                        (long long)known, (long long)numel);
    int64_t n;
    return tc__check_shape(ndim, sizes, tc_dtype_size(src->dtype), &n);
}

/* Strides for viewing src with new sizes without copying, as PyTorch's
 * computeStride: groups of old dimensions that are contiguous among
 * themselves map onto groups of new ones. False when impossible (or when a
 * stride would overflow, which no tensor that has memory reaches). */
static bool view_strides(const tc_tensor *src, int ndim, const int64_t *sizes, int64_t *strides)
{
    if (tc__numel(src->ndim, src->sizes) == 0 || tc__is_contiguous(src)) {
        tc__contiguous_strides(ndim, sizes, strides);
        return true;
    }
    int view_d = ndim - 1;
    int64_t chunk_base = src->ndim ? src->strides[src->ndim - 1] : 1;
    int64_t tensor_numel = 1, view_numel = 1, next;
    for (int d = src->ndim - 1; d >= 0; d--) {
        tensor_numel *= src->sizes[d];
        if (__builtin_mul_overflow(tensor_numel, chunk_base, &next))
            return false;
        if (d == 0 || (src->sizes[d - 1] != 1 && src->strides[d - 1] != next)) {
            while (view_d >= 0 && (view_numel < tensor_numel || sizes[view_d] == 1)) {
                if (__builtin_mul_overflow(view_numel, chunk_base, &strides[view_d]))
                    return false;
                view_numel *= sizes[view_d];
                view_d--;
            }
            if (view_numel != tensor_numel)
                return false;
            if (d > 0) {
                chunk_base = src->strides[d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    return view_d == -1;
}

tc_status tc_tensor_view(const tc_tensor *src, int ndim, const int64_t *in, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(src, "tc_tensor src"));
    TC_CHECK_ARG(out, "out is NULL");
    int64_t sizes[TC_MAX_DIMS], strides[TC_MAX_DIMS];
    TC_TRY(infer_sizes(src, ndim, in, sizes));
    if (!view_strides(src, ndim, sizes, strides))
        return tc__fail(TC_ERROR_SHAPE, "the strides of the tensor do not allow this view; use "
                                        "tc_tensor_reshape (which copies)");
    return tc__make_view(src, ndim, sizes, strides, src->offset, out);
}

tc_status tc_tensor_reshape(const tc_tensor *src, int ndim, const int64_t *in, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(src, "tc_tensor src"));
    TC_CHECK_ARG(out, "out is NULL");
    int64_t sizes[TC_MAX_DIMS], strides[TC_MAX_DIMS];
    TC_TRY(infer_sizes(src, ndim, in, sizes));
    if (view_strides(src, ndim, sizes, strides))
        return tc__make_view(src, ndim, sizes, strides, src->offset, out);
    tc_tensor *c;
    TC_TRY(tc_tensor_contiguous(src, &c));
    tc_status st = tc__make_view(c, ndim, sizes, NULL, c->offset, out);
    tc_tensor_release(c);
    return st;
}

tc_status tc_tensor_contiguous(const tc_tensor *src, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(src, "tc_tensor src"));
    TC_CHECK_ARG(out, "out is NULL");
    if (tc__is_contiguous(src)) {
        *out = tc__tensor_ref((tc_tensor *)src);
        return TC_OK;
    }
    tc_tensor *t;
    TC_TRY(tc__new_tensor(src->ndim, src->sizes, src->dtype, src->storage->device, false, &t));
    tc_status st = tc__copy_local(t, src);
    if (st != TC_OK) {
        tc_tensor_release(t);
        return st;
    }
    *out = t;
    return TC_OK;
}
