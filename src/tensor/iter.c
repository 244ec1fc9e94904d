/* The iterator over an operation's operands (tc__iter, iter.h): the output's
 * shape, and each operand's data and strides, broadcast to that shape. It is
 * what a backend walks: the tensor operations (tensor_ops.c, tensor_copy.c,
 * tensor_index.c), the CPU matmul, jiterator and the stream sanitizer build
 * theirs here. */
#include <string.h>

#include "tensor_internal.h"

void tc__iter_init(tc__iter *it, int ndim, const int64_t *sizes, int nops)
{
    memset(it, 0, sizeof *it);
    it->ndim = ndim;
    it->nops = nops;
    it->numel = tc__numel(ndim, sizes);
    for (int i = 0; i < ndim; i++)
        it->sizes[i] = sizes[i];
    it->contiguous = true;
}

/* Operand i is t, broadcast to the iter's shape (t's dims align right). */
void tc__iter_set(tc__iter *it, int i, const tc_tensor *t)
{
    int shift = it->ndim - t->ndim;
    bool dense = t->ndim == it->ndim && tc__is_contiguous(t);
    for (int d = 0; d < it->ndim; d++) {
        int td = d - shift;
        int64_t st = 0;
        if (td >= 0 && t->sizes[td] != 1)
            st = t->strides[td];
        if (td >= 0 && t->sizes[td] != it->sizes[d])
            dense = false;
        it->strides[i][d] = st;
    }
    if (!dense)
        it->contiguous = false;
    it->data[i] = tc__data(t);
}

void tc__iter_coalesce(tc__iter *it)
{
    /* drop size-1 dims, then merge neighbours that every operand walks as one */
    int nd = 0;
    for (int d = 0; d < it->ndim; d++) {
        if (it->sizes[d] == 1)
            continue;
        it->sizes[nd] = it->sizes[d];
        for (int k = 0; k < it->nops; k++)
            it->strides[k][nd] = it->strides[k][d];
        nd++;
    }
    int out = 0;
    for (int d = 1; d < nd; d++) {
        bool merge = true;
        for (int k = 0; k < it->nops && merge; k++)
            merge = it->strides[k][out] == it->strides[k][d] * it->sizes[d];
        if (merge) {
            it->sizes[out] *= it->sizes[d];
            for (int k = 0; k < it->nops; k++)
                it->strides[k][out] = it->strides[k][d];
        } else {
            out++;
            it->sizes[out] = it->sizes[d];
            for (int k = 0; k < it->nops; k++)
                it->strides[k][out] = it->strides[k][d];
        }
    }
    it->ndim = nd ? out + 1 : 0;
    bool dense = it->ndim <= 1;
    for (int k = 0; k < it->nops && dense && it->ndim == 1; k++)
        dense = it->strides[k][0] == 1;
    if (dense)
        it->contiguous = true;
}
