/* The indexing kernels' backend table (include/tcuda/indexing.h), one per
 * device type, as tc__backend is for the element-wise ops: the CPU's in
 * src/tensor/cpu/cpu_index.c, a GPU's reached through the device seam
 * (tc__device_ops.index_backend, device_ops.h). The core (tensor_index.c)
 * checks arguments, allocates results and describes each operation as a
 * tc__iter; the kernels only walk it. Not installed.
 *
 * Gather-like work (gather, index_select, embedding): an iter of 3 operands,
 * 0 the output, 1 the indexed tensor with stride 0 along the indexed
 * dimension, 2 the indices (int32 or int64); the element read for position p
 * is operand 1 at p plus index * dim_stride. Scatter-add: 0 self (stride 0
 * along dim), 1 src, 2 the int64 indices; self at p + index * dim_stride +=
 * src at p. Every index must lie in [0, dim_size): the CPU checks them all
 * first (TC_ERROR_INVALID_ARGUMENT, nothing written), a GPU with a device
 * assert (indexing.h). */
#ifndef TCUDA_INDEX_INTERNAL_H
#define TCUDA_INDEX_INTERNAL_H

#include "tensor_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tc__index_backend {
    /* out = in[index] as above: all but operand 2 of `dtype`. */
    tc_status (*gather)(int device, tc_dtype dtype, tc_dtype index_dtype, const tc__iter *it,
                        int64_t dim_stride, int64_t dim_size);
    /* self[index] += src as above; self and src of `dtype`, index int64. */
    tc_status (*scatter_add)(int device, tc_dtype dtype, const tc__iter *it, int64_t dim_stride,
                             int64_t dim_size);
    /* out = in where the element is inside the triangle, else 0: 2 operands
     * (0 out, 1 in) whose last two dimensions are the matrices' rows and
     * columns (it->ndim >= 2, those two not coalesced); upper keeps col - row
     * >= diagonal, lower col - row <= diagonal. */
    tc_status (*tri)(int device, tc_dtype dtype, bool upper, int64_t diagonal, const tc__iter *it);
    /* Contiguous in [outer, r, inner] -> contiguous values [outer, k, inner]
     * (dtype) and indices (int64) of the k best along r, best first: largest
     * (or smallest) first, NaN above every number, ties by lower index. Called
     * with 0 < k <= r; dtype is not bool. */
    tc_status (*topk)(int device, tc_dtype dtype, const void *in, void *values, int64_t *indices,
                      int64_t outer, int64_t r, int64_t inner, int64_t k, bool largest);
} tc__index_backend;

extern const tc__index_backend tc__cpu_index_backend;

/* The indexing kernels of a device type; NULL with TC_ERROR_NO_DEVICE set
 * when there are none (a build without CUDA never gets that far: its tensors
 * are all on the CPU). */
static inline const tc__index_backend *tc__index_backend_of(tc_device device)
{
    if (device.type == TC_CPU)
        return &tc__cpu_index_backend;
    const tc__index_backend *be = tc__dev()->index_backend;
    if (TC_UNLIKELY(!be))
        (void)tc__no_backend();
    return be;
}

#ifdef __cplusplus
}
#endif

#endif
