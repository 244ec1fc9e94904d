/* Shape operations (include/tcuda/shape.h): views that add, drop or broadcast
 * dimensions, splits into views, and cat / stack into new tensors.
 *
 * Views are metadata only (tc__make_view over the source's storage), with the
 * strides PyTorch gives them: unsqueeze inserts a stride of size * stride of
 * the next dimension (1 at the end), expand gives stride 0 to every
 * broadcast dimension. cat and stack allocate the result with the promoted
 * dtype and fill it with one device-local converting copy (tc__copy_local)
 * per input into a narrowed view of the result: no kernel of their own. No
 * arithmetic here can overflow: sizes come from tensors that passed
 * tc__check_shape, and the cat total is added with an overflow check. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tcuda/shape.h"
#include "tensor_internal.h"

/* ---- views ---------------------------------------------------------------- */

tc_status tc_tensor_unsqueeze(const tc_tensor *t, int dim, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(t, "tc_tensor t"));
    TC_CHECK_ARG(out, "out is NULL");
    int d;
    TC_TRY(tc__wrap_dim(dim, t->ndim + 1, &d));
    if (t->ndim == TC_MAX_DIMS)
        return tc__fail(TC_ERROR_SHAPE,
                        "the tensor has %d dimensions already, the most a "
                        "tensor can have",
                        TC_MAX_DIMS);
    int64_t sz[TC_MAX_DIMS], st[TC_MAX_DIMS];
    for (int i = 0, j = 0; i <= t->ndim; i++) {
        if (i == d) {
            sz[i] = 1;
            /* PyTorch's size * stride of the next dimension; only an empty
             * tensor can overflow it, and its strides do not matter: keep 1 */
            st[i] = 1;
            if (d < t->ndim && __builtin_mul_overflow(t->sizes[d], t->strides[d], &st[i]))
                st[i] = 1;
            continue;
        }
        sz[i] = t->sizes[j];
        st[i] = t->strides[j++];
    }
    return tc__make_view(t, t->ndim + 1, sz, st, t->offset, out);
}

/* Drops dimension `d`, or every size-1 dimension when d < 0. */
static tc_status squeeze(const tc_tensor *t, int d, tc_tensor **out)
{
    int64_t sz[TC_MAX_DIMS], st[TC_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (t->sizes[i] == 1 && (d < 0 || i == d))
            continue;
        sz[n] = t->sizes[i];
        st[n++] = t->strides[i];
    }
    return tc__make_view(t, n, sz, st, t->offset, out);
}

tc_status tc_tensor_squeeze(const tc_tensor *t, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(t, "tc_tensor t"));
    TC_CHECK_ARG(out, "out is NULL");
    return squeeze(t, -1, out);
}

tc_status tc_tensor_squeeze_dim(const tc_tensor *t, int dim, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(t, "tc_tensor t"));
    TC_CHECK_ARG(out, "out is NULL");
    int d;
    TC_TRY(tc__wrap_dim(dim, t->ndim, &d));
    /* a 0-d tensor has no dimension to drop: d = 0 matches none */
    return squeeze(t, t->ndim ? d : TC_MAX_DIMS, out);
}

tc_status tc_tensor_flatten(const tc_tensor *t, int start_dim, int end_dim, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(t, "tc_tensor t"));
    TC_CHECK_ARG(out, "out is NULL");
    int s, e;
    TC_TRY(tc__wrap_dim(start_dim, t->ndim, &s));
    TC_TRY(tc__wrap_dim(end_dim, t->ndim, &e));
    TC_CHECK_ARG(s <= e, "start_dim %d comes after end_dim %d", start_dim, end_dim);
    if (t->ndim == 0) {
        int64_t one = 1;
        return tc__make_view(t, 1, &one, &one, t->offset, out);
    }
    if (s == e) {
        *out = tc__tensor_ref((tc_tensor *)t);
        return TC_OK;
    }
    int64_t sz[TC_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < s; i++)
        sz[n++] = t->sizes[i];
    int64_t merged = 1;
    for (int i = s; i <= e; i++)
        merged *= t->sizes[i]; /* the element count fits: no overflow */
    sz[n++] = merged;
    for (int i = e + 1; i < t->ndim; i++)
        sz[n++] = t->sizes[i];
    return tc_tensor_reshape(t, n, sz, out);
}

tc_status tc_tensor_expand(const tc_tensor *t, int ndim, const int64_t *sizes, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(t, "tc_tensor t"));
    TC_CHECK_ARG(out, "out is NULL");
    TC_CHECK_ARG(ndim == 0 || sizes, "sizes is NULL with ndim %d", ndim);
    if (ndim < t->ndim || ndim > TC_MAX_DIMS)
        return tc__fail(TC_ERROR_SHAPE,
                        "the number of sizes provided (%d) must be at least the number of "
                        "dimensions of the tensor (%d) and at most %d",
                        ndim, t->ndim, TC_MAX_DIMS);
    int64_t sz[TC_MAX_DIMS], st[TC_MAX_DIMS];
    int shift = ndim - t->ndim;
    for (int i = 0; i < ndim; i++) {
        int64_t want = sizes[i];
        TC_CHECK_ARG(want >= -1,
                     "size %lld of dimension %d is negative (only -1, keep, is "
                     "allowed)",
                     (long long)want, i);
        if (i < shift) {
            if (want == -1)
                return tc__fail(TC_ERROR_SHAPE,
                                "the expanded size of the tensor (-1) isn't allowed in a leading, "
                                "non-existing dimension %d",
                                i);
            sz[i] = want;
            st[i] = 0;
            continue;
        }
        int64_t have = t->sizes[i - shift];
        if (want == -1 || want == have) {
            sz[i] = have;
            st[i] = t->strides[i - shift];
        } else if (have == 1) {
            sz[i] = want;
            st[i] = 0;
        } else
            return tc__fail(TC_ERROR_SHAPE,
                            "the expanded size of the tensor (%lld) must match the existing "
                            "size (%lld) at non-singleton dimension %d",
                            (long long)want, (long long)have, i);
    }
    int64_t n;
    TC_TRY(tc__check_shape(ndim, sz, tc_dtype_size(t->dtype), &n));
    return tc__make_view(t, ndim, sz, st, t->offset, out);
}

/* ---- split and chunk ------------------------------------------------------------ */

/* Pieces of split_size along d (count pieces, the last one `size - (count-1) *
 * split_size` long; count >= 1, split_size 0 only for an empty dimension). */
static tc_status make_pieces(const tc_tensor *t, int d, int64_t split_size, int64_t count,
                             tc_tensor **pieces, int capacity, int *n_out)
{
    TC_CHECK_ARG(count <= INT_MAX, "the tensor splits into %lld pieces, more than an int counts",
                 (long long)count);
    if (!pieces) {
        *n_out = (int)count;
        return TC_OK;
    }
    TC_CHECK_ARG(capacity >= count,
                 "the tensor splits into %lld pieces but pieces has room for %d (call with "
                 "pieces NULL to get the count)",
                 (long long)count, capacity);
    tc_tensor **tmp = malloc(sizeof *tmp * (size_t)count);
    if (!tmp)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "no memory for %lld pieces", (long long)count);
    int64_t size = t->sizes[d];
    tc_status st = TC_OK;
    int64_t made = 0;
    while (made < count) {
        int64_t start = made * split_size; /* <= size: no overflow */
        int64_t len = size - start < split_size ? size - start : split_size;
        st = tc_tensor_narrow(t, d, start, len, &tmp[made]);
        if (st != TC_OK)
            break;
        made++;
    }
    if (st != TC_OK) {
        for (int64_t i = 0; i < made; i++)
            tc_tensor_release(tmp[i]);
        free(tmp);
        return st;
    }
    memcpy(pieces, tmp, sizeof *tmp * (size_t)count);
    free(tmp);
    *n_out = (int)count;
    return TC_OK;
}

static tc_status check_split_args(const tc_tensor *t, int dim, int capacity, int *n_out, int *d)
{
    TC_TRY(tc__tensor_check(t, "tc_tensor t"));
    TC_CHECK_ARG(n_out, "n_out is NULL");
    TC_CHECK_ARG(capacity >= 0, "capacity %d is negative", capacity);
    if (t->ndim == 0)
        return tc__fail(TC_ERROR_SHAPE, "a 0-d tensor has no dimension to split");
    return tc__wrap_dim(dim, t->ndim, d);
}

tc_status tc_tensor_split(const tc_tensor *t, int64_t split_size, int dim, tc_tensor **pieces,
                          int capacity, int *n_out)
{
    TC_API_BEGIN;
    int d;
    TC_TRY(check_split_args(t, dim, capacity, n_out, &d));
    int64_t size = t->sizes[d];
    TC_CHECK_ARG(split_size >= 0, "split_size %lld is negative", (long long)split_size);
    TC_CHECK_ARG(split_size > 0 || size == 0,
                 "split_size can only be 0 if dimension size is 0, but got dimension size of "
                 "%lld",
                 (long long)size);
    int64_t n = size == 0 ? 1 : size / split_size + (size % split_size != 0);
    return make_pieces(t, d, split_size, n, pieces, capacity, n_out);
}

tc_status tc_tensor_chunk(const tc_tensor *t, int64_t chunks, int dim, tc_tensor **pieces,
                          int capacity, int *n_out)
{
    TC_API_BEGIN;
    int d;
    TC_TRY(check_split_args(t, dim, capacity, n_out, &d));
    TC_CHECK_ARG(chunks > 0, "chunk expects `chunks` to be greater than 0, got: %lld",
                 (long long)chunks);
    int64_t size = t->sizes[d];
    /* as torch.chunk: an empty dimension still gives `chunks` (empty) pieces */
    if (size == 0)
        return make_pieces(t, d, 0, chunks, pieces, capacity, n_out);
    int64_t split_size = size / chunks + (size % chunks != 0);
    int64_t n = size / split_size + (size % split_size != 0);
    return make_pieces(t, d, split_size, n, pieces, capacity, n_out);
}

/* ---- cat and stack ----------------------------------------------------------------- */

static bool legacy_skipped(const tc_tensor *t) { return t->ndim == 1 && t->sizes[0] == 0; }

/* Checks the inputs of cat, picks the reference tensor (the first one not
 * skipped, or NULL when all are), wraps dim against it, computes the result
 * dtype and shape. */
static tc_status cat_plan(int n, const tc_tensor *const *ts, int dim, int *d, tc_dtype *dtype,
                          int *ndim, int64_t *sizes)
{
    TC_CHECK_ARG(n >= 1 && ts, "expected a non-empty list of tensors (n = %d)", n);
    for (int i = 0; i < n; i++) {
        char what[48];
        snprintf(what, sizeof what, "tc_tensor tensors[%d]", i);
        TC_TRY(tc__tensor_check(ts[i], what));
        TC_TRY(tc__check_same_device("tc_tensor_cat", ts[0], ts[i]));
        if (ts[i]->ndim == 0)
            return tc__fail(TC_ERROR_SHAPE,
                            "zero-dimensional tensor (at position %d) cannot be concatenated", i);
    }
    *dtype = tc__result_type(n, ts);
    const tc_tensor *ref = NULL;
    int refi = 0;
    for (int i = 0; i < n && !ref; i++)
        if (!legacy_skipped(ts[i]))
            ref = ts[refi = i];
    if (!ref) { /* every input is 1-d and empty */
        TC_TRY(tc__wrap_dim(dim, 1, d));
        *ndim = 1;
        sizes[0] = 0;
        return TC_OK;
    }
    TC_TRY(tc__wrap_dim(dim, ref->ndim, d));
    *ndim = ref->ndim;
    memcpy(sizes, ref->sizes, sizeof(int64_t) * (size_t)ref->ndim);
    sizes[*d] = 0;
    for (int i = 0; i < n; i++) {
        const tc_tensor *t = ts[i];
        if (legacy_skipped(t))
            continue;
        if (t->ndim != ref->ndim)
            return tc__fail(TC_ERROR_SHAPE,
                            "tensors must have the same number of dimensions: got %d (tensor "
                            "%d) and %d (tensor %d)",
                            ref->ndim, refi, t->ndim, i);
        for (int k = 0; k < t->ndim; k++)
            if (k != *d && t->sizes[k] != ref->sizes[k])
                return tc__fail(TC_ERROR_SHAPE,
                                "sizes of tensors must match except in dimension %d: expected "
                                "size %lld but got size %lld for tensor number %d in the list",
                                *d, (long long)ref->sizes[k], (long long)t->sizes[k], i);
        if (__builtin_add_overflow(sizes[*d], t->sizes[*d], &sizes[*d]))
            return tc__fail(TC_ERROR_SHAPE, "the concatenated size overflows");
    }
    int64_t numel;
    return tc__check_shape(*ndim, sizes, tc_dtype_size(*dtype), &numel);
}

static tc_status cat(int n, const tc_tensor *const *ts, int dim, tc_tensor **out)
{
    int d = 0, ndim = 0;
    tc_dtype dtype = TC_FLOAT32;
    int64_t sizes[TC_MAX_DIMS] = {0};
    TC_TRY(cat_plan(n, ts, dim, &d, &dtype, &ndim, sizes));
    tc_tensor *res;
    TC_TRY(tc__new_tensor(ndim, sizes, dtype, ts[0]->storage->device, false, &res));
    tc_status st = TC_OK;
    int64_t at = 0;
    for (int i = 0; i < n && st == TC_OK; i++) {
        const tc_tensor *t = ts[i];
        if (legacy_skipped(t))
            continue;
        int64_t len = t->sizes[d];
        tc_tensor *slot;
        st = tc_tensor_narrow(res, d, at, len, &slot);
        if (st == TC_OK) {
            st = tc__copy_local(slot, t);
            tc_tensor_release(slot);
        }
        at += len;
    }
    if (st != TC_OK) {
        tc_tensor_release(res);
        return st;
    }
    *out = res;
    return TC_OK;
}

tc_status tc_tensor_cat(const tc_tensor *const *tensors, int n, int dim, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    return cat(n, tensors, dim, out);
}

tc_status tc_tensor_stack(const tc_tensor *const *tensors, int n, int dim, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    TC_CHECK_ARG(n >= 1 && tensors, "expected a non-empty list of tensors (n = %d)", n);
    for (int i = 0; i < n; i++) {
        char what[48];
        snprintf(what, sizeof what, "tc_tensor tensors[%d]", i);
        TC_TRY(tc__tensor_check(tensors[i], what));
    }
    const tc_tensor *ref = tensors[0];
    int d;
    TC_TRY(tc__wrap_dim(dim, ref->ndim + 1, &d));
    for (int i = 1; i < n; i++) {
        const tc_tensor *t = tensors[i];
        bool same = t->ndim == ref->ndim &&
                    !memcmp(t->sizes, ref->sizes, sizeof(int64_t) * (size_t)ref->ndim);
        if (!same)
            return tc__fail(TC_ERROR_SHAPE,
                            "stack expects each tensor to be equal size, but tensor 0 and "
                            "tensor %d differ (%d-d and %d-d, %lld and %lld elements)",
                            i, ref->ndim, t->ndim, (long long)tc__numel(ref->ndim, ref->sizes),
                            (long long)tc__numel(t->ndim, t->sizes));
    }
    tc_tensor **views = calloc((size_t)n, sizeof *views);
    if (!views)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "no memory for %d views", n);
    tc_status st = TC_OK;
    for (int i = 0; i < n && st == TC_OK; i++)
        st = tc_tensor_unsqueeze(tensors[i], d, &views[i]);
    if (st == TC_OK)
        st = cat(n, (const tc_tensor *const *)views, d, out);
    for (int i = 0; i < n; i++)
        tc_tensor_release(views[i]);
    free(views);
    return st;
}
