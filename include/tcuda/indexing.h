/* tcuda: indexing operations (embedding, index_select, gather, scatter_add,
 * triu, tril, topk) on the CPU and on a GPU, with PyTorch's semantics.
 *
 * Results are new contiguous tensors (new references); out-parameters are
 * written only on success. Every tensor argument is checked as tensor.h says;
 * all tensors of a call must be on one device (TC_ERROR_DEVICE_MISMATCH).
 * Dimensions may be negative (counted from the end).
 *
 * Index values out of range (below 0 or not below the indexed size; negative
 * indices are not wrapped, as in PyTorch): on the CPU the call fails with
 * TC_ERROR_INVALID_ARGUMENT naming the value, before anything is written. On
 * a GPU the indices are on the device, so reading them on the host would be
 * a sync: the kernel checks them instead with a device-side assert, as
 * PyTorch's, so the call returns TC_OK and the next call that synchronizes
 * with the GPU fails with TC_ERROR_CUDA (cudaErrorAssert); as with PyTorch,
 * the CUDA context is unusable after that. */
#ifndef TCUDA_INDEXING_H
#define TCUDA_INDEXING_H

#include <stdbool.h>
#include <stdint.h>

#include "tensor.h"

TCUDA_EXTERN_C_BEGIN

/* ---- gathering -------------------------------------------------------------- */

/* Rows of weight [V, D] picked by `indices` (int32 or int64, any shape):
 * out has indices' shape plus D (F.embedding). Errors: TC_ERROR_SHAPE (weight
 * not 2-d, a result above TC_MAX_DIMS dims), TC_ERROR_DTYPE (indices). */
TCUDA_API tc_status tc_tensor_embedding(const tc_tensor *weight, const tc_tensor *indices,
                                        tc_tensor **out);
/* t's entries index[0..n-1] along dim (torch.index_select); index is 1-d
 * (or 0-d), int32 or int64. Errors: TC_ERROR_INVALID_ARGUMENT (dim out of
 * range), TC_ERROR_SHAPE (index of more dims), TC_ERROR_DTYPE (index). */
TCUDA_API tc_status tc_tensor_index_select(const tc_tensor *t, int dim, const tc_tensor *index,
                                           tc_tensor **out);
/* out[i][j][k] = t[index[i][j][k]][j][k] for dim 0, and so on (torch.gather):
 * index is int64 with t's number of dims and index.size(d) <= t.size(d) for
 * d != dim; out has index's shape. Errors: TC_ERROR_SHAPE, TC_ERROR_DTYPE. */
TCUDA_API tc_status tc_tensor_gather(const tc_tensor *t, int dim, const tc_tensor *index,
                                     tc_tensor **out);
/* ---- scattering ------------------------------------------------------------- */

/* A copy of self with self[index[i][j][k]][j][k] += src[i][j][k] (dim 0;
 * torch.scatter_add): index int64 with self's number of dims, index.size(d)
 * <= src.size(d) for all d and <= self.size(d) for d != dim; src of self's
 * dtype (TC_ERROR_DTYPE otherwise). On a GPU floating sums use atomic adds,
 * so their order (and the last bits) may vary from run to run, as PyTorch's. */
TCUDA_API tc_status tc_tensor_scatter_add(const tc_tensor *self, int dim, const tc_tensor *index,
                                          const tc_tensor *src, tc_tensor **out);
/* In place (Tensor.scatter_add_): as tc_tensor_scatter_add, into self. An
 * expanded self (several elements in one place) is TC_ERROR_INVALID_ARGUMENT. */
TCUDA_API tc_status tc_tensor_scatter_add_(tc_tensor *self, int dim, const tc_tensor *index,
                                           const tc_tensor *src);
/* ---- triangles and top k ----------------------------------------------------- */

/* The upper (triu: column - row >= diagonal) or lower (tril: column - row <=
 * diagonal) triangle of each matrix of the last two dims, zeros elsewhere;
 * any diagonal is fine. TC_ERROR_SHAPE: t has fewer than 2 dims. */
TCUDA_API tc_status tc_tensor_triu(const tc_tensor *t, int64_t diagonal, tc_tensor **out);
TCUDA_API tc_status tc_tensor_tril(const tc_tensor *t, int64_t diagonal, tc_tensor **out);
/* The k largest (or smallest) entries along dim and their int64 indices
 * (torch.topk); values in order, best first, even when `sorted` is false.
 * NaN counts as larger than every number; ties keep the lower index first, so
 * results are deterministic. Errors: TC_ERROR_INVALID_ARGUMENT (k < 0 or above
 * the size, dim out of range, NULL outputs), TC_ERROR_DTYPE (bool). */
TCUDA_API tc_status tc_tensor_topk(const tc_tensor *t, int64_t k, int dim, bool largest,
                                   bool sorted, tc_tensor **values, tc_tensor **indices);

TCUDA_EXTERN_C_END

#endif
