/* Rows padded to whole 16-byte vectors: the layout of a large 16-bit result
 * whose last size is not a multiple of 8 (GPT-2's [tokens, 50257] logits
 * and their gradient), so that the GEMMs that write and read it run
 * cuBLAS's aligned kernels and nothing copies it into or out of padding.
 * linear writes its result so, cross_entropy's fused backward its
 * gradient; linear's backward reads any row stride as it is. */
#include "nn_internal.h"
#include "tensor_internal.h"

bool tc__nn_pads_rows(tc_dtype dtype, int ndim, const int64_t *sizes)
{
    if (tc_dtype_size(dtype) != 2 || ndim < 2)
        return false;
    int64_t cols = sizes[ndim - 1], rows = 1;
    for (int i = 0; i < ndim - 1; i++)
        rows *= sizes[i];
    return cols % 8 != 0 && cols > 8 && rows > 1 && rows * cols >= ((int64_t)1 << 22);
}

/* The row stride of padded rows of cols elements: whole 16-byte vectors. */
static int64_t padded_width(int64_t cols) { return (cols + 7) / 8 * 8; }

tc_status tc__nn_new_rows(int ndim, const int64_t *sizes, tc_dtype dtype, tc_device device,
                          tc_tensor **out)
{
    if (!tc__nn_pads_rows(dtype, ndim, sizes))
        return tc__new_tensor(ndim, sizes, dtype, device, false, out);
    int64_t padded[TC_MAX_DIMS], strides[TC_MAX_DIMS];
    for (int i = 0; i < ndim; i++)
        padded[i] = sizes[i];
    padded[ndim - 1] = padded_width(sizes[ndim - 1]);
    tc_tensor *base = NULL;
    TC_TRY(tc__new_tensor(ndim, padded, dtype, device, false, &base));
    tc__contiguous_strides(ndim, padded, strides);
    tc_status st = tc__make_view(base, ndim, sizes, strides, 0, out);
    tc_tensor_release(base);
    return st;
}

bool tc__nn_rows_ld(const tc_tensor *t, int64_t *ld)
{
    int nd = t->ndim;
    int64_t cols = nd ? t->sizes[nd - 1] : 1;
    if (nd && cols > 1 && t->strides[nd - 1] != 1)
        return false;
    /* the leading dims, innermost first: the first of size > 1 sets the row
     * stride, each next one must continue it */
    int64_t row = 0, expect = 0;
    bool rows = false; /* a leading dim of size > 1 seen (its stride may be 0) */
    for (int i = nd - 2; i >= 0; i--) {
        if (t->sizes[i] == 1)
            continue;
        if (rows && t->strides[i] != expect)
            return false;
        if (!rows) {
            row = t->strides[i];
            rows = true;
        }
        expect = t->strides[i] * t->sizes[i];
    }
    if (!rows) /* one row: any stride will do */
        row = cols > 1 ? cols : 1;
    *ld = row;
    return row >= cols && (!rows || row > 0);
}

bool tc__nn_rows_padded(const tc_tensor *t)
{
    int64_t ld = 0;
    return tc__nn_pads_rows(t->dtype, t->ndim, t->sizes) && tc__nn_rows_ld(t, &ld) &&
           ld == padded_width(t->sizes[t->ndim - 1]);
}
