/* Indexing operations (include/tcuda/indexing.h): the device-independent
 * half. Arguments are checked here, results allocated here, and each
 * operation is described to the indexing backend of the tensors' device
 * (index_internal.h) as a tc__iter over the result (gather-like ops) or
 * over the indices (scatter_add), with the indexed operand's stride along
 * the indexed dimension set to 0: the kernel adds index * dim_stride itself.
 * embedding and index_select are gathers with the index broadcast (stride
 * 0) over the other dimensions, so one kernel serves all three. Inputs are
 * read in place, strided; results are contiguous. */
#include <stdio.h>
#include <string.h>

#include "index_internal.h"
#include "tcuda/indexing.h"

static tc_status check_index_dtype(const tc_tensor *index, bool int32_ok)
{
    if (index->dtype == TC_INT64 || (int32_ok && index->dtype == TC_INT32))
        return TC_OK;
    return tc__fail(TC_ERROR_DTYPE, "expected dtype %s for the indices, got %s",
                    int32_ok ? "int32 or int64" : "int64", tc_dtype_string(index->dtype));
}

/* Operand i of the iter: data at p with the given strides (per iter dim). */
static void set_operand(tc__iter *it, int i, void *p, const int64_t *strides)
{
    for (int d = 0; d < it->ndim; d++)
        it->strides[i][d] = strides[d];
    it->data[i] = p;
    it->contiguous = false;
}

static tc_status new_like_dtype(const tc_tensor *t, int ndim, const int64_t *sizes, tc_tensor **out)
{
    return tc__new_tensor(ndim, sizes, t->dtype, t->storage->device, false, out);
}

/* res[p] = src[p + index[p] * dim_stride], with src and index strides given
 * per dimension of res. Releases res on failure. */
static tc_status run_gather(tc_tensor *res, const tc_tensor *src, const int64_t *src_st,
                            const tc_tensor *index, const int64_t *idx_st, int64_t dim_stride,
                            int64_t dim_size, tc_tensor **out)
{
    tc__iter it;
    tc__iter_init(&it, res->ndim, res->sizes, 3);
    tc_status st = TC_OK;
    if (it.numel > 0) {
        tc__iter_set(&it, 0, res);
        set_operand(&it, 1, tc__data(src), src_st);
        set_operand(&it, 2, tc__data(index), idx_st);
        tc__iter_coalesce(&it);
        const tc__index_backend *be = tc__index_backend_of(res->storage->device);
        st = be ? be->gather(res->storage->device.index, res->dtype, index->dtype, &it, dim_stride,
                             dim_size)
                : TC_ERROR_NO_DEVICE;
    }
    if (st != TC_OK) {
        tc_tensor_release(res);
        return st;
    }
    *out = res;
    return TC_OK;
}

tc_status tc_tensor_embedding(const tc_tensor *weight, const tc_tensor *indices, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(weight, "tc_tensor weight"));
    TC_TRY(tc__tensor_check(indices, "tc_tensor indices"));
    TC_CHECK_ARG(out, "out is NULL");
    TC_TRY(tc__check_same_device("tc_tensor_embedding", weight, indices));
    if (weight->ndim != 2)
        return tc__fail(TC_ERROR_SHAPE, "'weight' must be 2-D [num_embeddings, dim], got %d-d",
                        weight->ndim);
    TC_TRY(check_index_dtype(indices, true));
    int nd = indices->ndim + 1;
    if (nd > TC_MAX_DIMS)
        return tc__fail(TC_ERROR_SHAPE,
                        "indices of %d dimensions give a result of %d, above TC_MAX_DIMS (%d)",
                        indices->ndim, nd, TC_MAX_DIMS);
    int64_t sizes[TC_MAX_DIMS], src_st[TC_MAX_DIMS] = {0}, idx_st[TC_MAX_DIMS] = {0};
    for (int d = 0; d < indices->ndim; d++) {
        sizes[d] = indices->sizes[d];
        idx_st[d] = indices->strides[d];
    }
    sizes[nd - 1] = weight->sizes[1];
    src_st[nd - 1] = weight->strides[1];
    tc_tensor *res;
    TC_TRY(new_like_dtype(weight, nd, sizes, &res));
    return run_gather(res, weight, src_st, indices, idx_st, weight->strides[0], weight->sizes[0],
                      out);
}

tc_status tc_tensor_index_select(const tc_tensor *t, int dim, const tc_tensor *index,
                                 tc_tensor **out)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(t, "tc_tensor t"));
    TC_TRY(tc__tensor_check(index, "tc_tensor index"));
    TC_CHECK_ARG(out, "out is NULL");
    TC_TRY(tc__check_same_device("tc_tensor_index_select", t, index));
    TC_TRY(check_index_dtype(index, true));
    if (index->ndim > 1)
        return tc__fail(TC_ERROR_SHAPE, "index is supposed to be a vector (1-d), got %d-d",
                        index->ndim);
    int d;
    TC_TRY(tc__wrap_dim(dim, t->ndim, &d));
    int64_t n = tc__numel(index->ndim, index->sizes);
    int64_t sizes[TC_MAX_DIMS], src_st[TC_MAX_DIMS] = {0}, idx_st[TC_MAX_DIMS] = {0};
    if (t->ndim == 0) {
        TC_CHECK_ARG(n == 1, "index to a 0-d tensor can have only 1 value, got %lld", (long long)n);
        tc_tensor *res;
        TC_TRY(new_like_dtype(t, 0, sizes, &res));
        return run_gather(res, t, src_st, index, idx_st, 1, 1, out);
    }
    for (int k = 0; k < t->ndim; k++) {
        sizes[k] = k == d ? n : t->sizes[k];
        src_st[k] = k == d ? 0 : t->strides[k];
    }
    idx_st[d] = index->ndim ? index->strides[0] : 0;
    tc_tensor *res;
    TC_TRY(new_like_dtype(t, t->ndim, sizes, &res));
    return run_gather(res, t, src_st, index, idx_st, t->strides[d], t->sizes[d], out);
}

/* PyTorch's gather/scatter shape rules: the same number of dimensions (a 0-d
 * tensor counting as 1-d), and index no larger than `other` in every
 * dimension but `skip` (-1: none). */
static tc_status check_index_shape(const char *what, const tc_tensor *index, const tc_tensor *other,
                                   int skip)
{
    int ni = index->ndim ? index->ndim : 1, no = other->ndim ? other->ndim : 1;
    if (ni != no)
        return tc__fail(TC_ERROR_SHAPE,
                        "index tensor must have the same number of dimensions as %s tensor "
                        "(%d and %d)",
                        what, index->ndim, other->ndim);
    for (int d = 0; d < index->ndim; d++) {
        int64_t osize = other->ndim ? other->sizes[d] : 1;
        if (d != skip && index->sizes[d] > osize)
            return tc__fail(TC_ERROR_SHAPE,
                            "size of dimension %d of index (%lld) is larger than that of %s "
                            "(%lld)",
                            d, (long long)index->sizes[d], what, (long long)osize);
    }
    return TC_OK;
}

/* Strides of t for an iter over index's dimensions, 0 at `skip` (and where t
 * has no such dimension). */
static void strides_over(const tc_tensor *t, const tc_tensor *index, int skip, int64_t *st)
{
    for (int d = 0; d < index->ndim; d++)
        st[d] = d < t->ndim && d != skip ? t->strides[d] : 0;
}

tc_status tc_tensor_gather(const tc_tensor *t, int dim, const tc_tensor *index, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(t, "tc_tensor t"));
    TC_TRY(tc__tensor_check(index, "tc_tensor index"));
    TC_CHECK_ARG(out, "out is NULL");
    TC_TRY(tc__check_same_device("tc_tensor_gather", t, index));
    TC_TRY(check_index_dtype(index, false));
    int d;
    TC_TRY(tc__wrap_dim(dim, t->ndim, &d));
    TC_TRY(check_index_shape("input", index, t, d));
    int64_t src_st[TC_MAX_DIMS];
    strides_over(t, index, d, src_st);
    tc_tensor *res;
    TC_TRY(new_like_dtype(t, index->ndim, index->sizes, &res));
    return run_gather(res, t, src_st, index, index->strides, t->ndim ? t->strides[d] : 1,
                      t->ndim ? t->sizes[d] : 1, out);
}

/* The checks of scatter_add; *d is the wrapped dim. */
static tc_status scatter_check(const tc_tensor *self, int dim, const tc_tensor *index,
                               const tc_tensor *src, int *d)
{
    TC_TRY(tc__tensor_check(self, "tc_tensor self"));
    TC_TRY(tc__tensor_check(index, "tc_tensor index"));
    TC_TRY(tc__tensor_check(src, "tc_tensor src"));
    TC_TRY(tc__check_same_device("tc_tensor_scatter_add", self, index));
    TC_TRY(tc__check_same_device("tc_tensor_scatter_add", self, src));
    TC_TRY(check_index_dtype(index, false));
    if (src->dtype != self->dtype)
        return tc__fail(TC_ERROR_DTYPE, "expected self.dtype to be equal to src.dtype (%s and %s)",
                        tc_dtype_string(self->dtype), tc_dtype_string(src->dtype));
    TC_TRY(tc__wrap_dim(dim, self->ndim, d));
    TC_TRY(check_index_shape("self", index, self, *d));
    return check_index_shape("src", index, src, -1);
}

static tc_status run_scatter_add(tc_tensor *self, int d, const tc_tensor *index,
                                 const tc_tensor *src)
{
    tc__iter it;
    tc__iter_init(&it, index->ndim, index->sizes, 3);
    if (it.numel == 0)
        return TC_OK;
    int64_t self_st[TC_MAX_DIMS], src_st[TC_MAX_DIMS];
    strides_over(self, index, d, self_st);
    strides_over(src, index, -1, src_st);
    set_operand(&it, 0, tc__data(self), self_st);
    set_operand(&it, 1, tc__data(src), src_st);
    set_operand(&it, 2, tc__data(index), index->strides);
    tc__iter_coalesce(&it);
    const tc__index_backend *be = tc__index_backend_of(self->storage->device);
    if (!be)
        return TC_ERROR_NO_DEVICE;
    return be->scatter_add(self->storage->device.index, self->dtype, &it,
                           self->ndim ? self->strides[d] : 1, self->ndim ? self->sizes[d] : 1);
}

tc_status tc_tensor_scatter_add_(tc_tensor *self, int dim, const tc_tensor *index,
                                 const tc_tensor *src)
{
    TC_API_BEGIN;
    int d;
    TC_TRY(scatter_check(self, dim, index, src, &d));
    TC_TRY(tc__check_writable(self));
    return run_scatter_add(self, d, index, src);
}

tc_status tc_tensor_scatter_add(const tc_tensor *self, int dim, const tc_tensor *index,
                                const tc_tensor *src, tc_tensor **out)
{
    TC_API_BEGIN;
    int d;
    TC_TRY(scatter_check(self, dim, index, src, &d));
    TC_CHECK_ARG(out, "out is NULL");
    tc_tensor *res;
    TC_TRY(new_like_dtype(self, self->ndim, self->sizes, &res));
    tc_status st = tc__copy_local(res, self);
    if (st == TC_OK)
        st = run_scatter_add(res, d, index, src);
    if (st != TC_OK) {
        tc_tensor_release(res);
        return st;
    }
    *out = res;
    return TC_OK;
}

static tc_status tri(const tc_tensor *t, int64_t diagonal, bool upper, tc_tensor **out)
{
    TC_TRY(tc__tensor_check(t, "tc_tensor t"));
    TC_CHECK_ARG(out, "out is NULL");
    if (t->ndim < 2)
        return tc__fail(TC_ERROR_SHAPE, "input tensor must have at least 2 dimensions, got %d",
                        t->ndim);
    tc_tensor *res;
    TC_TRY(new_like_dtype(t, t->ndim, t->sizes, &res));
    tc__iter it;
    tc__iter_init(&it, t->ndim, t->sizes, 2);
    tc_status st = TC_OK;
    if (it.numel > 0) {
        /* not coalesced: the kernel needs the last two dimensions as they are */
        tc__iter_set(&it, 0, res);
        tc__iter_set(&it, 1, t);
        const tc__index_backend *be = tc__index_backend_of(t->storage->device);
        st = be ? be->tri(t->storage->device.index, t->dtype, upper, diagonal, &it)
                : TC_ERROR_NO_DEVICE;
    }
    if (st != TC_OK) {
        tc_tensor_release(res);
        return st;
    }
    *out = res;
    return TC_OK;
}

tc_status tc_tensor_triu(const tc_tensor *t, int64_t diagonal, tc_tensor **out)
{
    TC_API_BEGIN;
    return tri(t, diagonal, true, out);
}

tc_status tc_tensor_tril(const tc_tensor *t, int64_t diagonal, tc_tensor **out)
{
    TC_API_BEGIN;
    return tri(t, diagonal, false, out);
}

/* A 0-d tensor is one slice of one element: k = 1 gives 0-d results, k = 0
 * 1-d empty ones (a 0-d tensor cannot be empty). */
tc_status tc_tensor_topk(const tc_tensor *t, int64_t k, int dim, bool largest, bool sorted,
                         tc_tensor **values, tc_tensor **indices)
{
    TC_API_BEGIN;
    (void)sorted; /* results are always sorted: deterministic, and allowed */
    TC_TRY(tc__tensor_check(t, "tc_tensor t"));
    TC_CHECK_ARG(values && indices, "values or indices is NULL");
    TC_CHECK_ARG(values != indices, "values and indices are the same pointer");
    if (t->dtype == TC_BOOL)
        return tc__fail(TC_ERROR_DTYPE, "topk is not implemented for bool (PyTorch refuses it "
                                        "too); convert to an integer dtype first");
    int d;
    TC_TRY(tc__wrap_dim(dim, t->ndim, &d));
    int64_t size = t->ndim ? t->sizes[d] : 1;
    TC_CHECK_ARG(k >= 0 && k <= size, "selected index k (%lld) out of range: dimension %d has %lld",
                 (long long)k, d, (long long)size);
    int64_t sizes[TC_MAX_DIMS], outer = 1, inner = 1;
    int nd = t->ndim;
    for (int i = 0; i < t->ndim; i++) {
        sizes[i] = i == d ? k : t->sizes[i];
        if (i < d)
            outer *= t->sizes[i];
        else if (i > d)
            inner *= t->sizes[i];
    }
    if (nd == 0 && k == 0) {
        nd = 1;
        sizes[0] = 0;
    }
    tc_tensor *v = NULL, *ix = NULL, *c = NULL;
    tc_status st = new_like_dtype(t, nd, sizes, &v);
    if (st == TC_OK)
        st = tc__new_tensor(nd, sizes, TC_INT64, t->storage->device, false, &ix);
    if (st == TC_OK && k > 0 && outer * inner > 0)
        st = tc_tensor_contiguous(t, &c);
    if (c) {
        const tc__index_backend *be = tc__index_backend_of(t->storage->device);
        st = be ? be->topk(t->storage->device.index, t->dtype, tc__data(c), tc__data(v),
                           tc__data(ix), outer, size, inner, k, largest)
                : TC_ERROR_NO_DEVICE;
        tc_tensor_release(c);
    }
    if (st != TC_OK) {
        tc_tensor_release(v);
        tc_tensor_release(ix);
        return st;
    }
    *values = v;
    *indices = ix;
    return TC_OK;
}
