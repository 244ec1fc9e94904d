/* tcuda: shape operations (torch.cat, stack, split, chunk, unsqueeze,
 * squeeze, flatten, expand) on the CPU and on a GPU.
 *
 * unsqueeze, squeeze, expand, split and chunk make views: new tensors over
 * the storage of their source (a write through one is seen by the other), as
 * PyTorch's; flatten is a view when the strides allow one, else a copy (as
 * torch.flatten, which reshapes); cat and stack make new contiguous tensors.
 * Dimensions may be negative (counted from the end); a 0-d tensor counts as
 * having one dimension for the range check, as in PyTorch. Every tensor
 * argument is checked as tensor.h says (NULL: TC_ERROR_INVALID_ARGUMENT, a
 * released tensor: TC_ERROR_INVALID_HANDLE); out-parameters are written only
 * on success, and each returned tensor is a new reference. */
#ifndef TCUDA_SHAPE_H
#define TCUDA_SHAPE_H

#include <stdint.h>

#include "tensor.h"

TCUDA_EXTERN_C_BEGIN

/* ---- views ---------------------------------------------------------------- */

/* A view with a size-1 dimension inserted at `dim` (-ndim-1 <= dim <= ndim).
 * Errors: TC_ERROR_INVALID_ARGUMENT (dim out of range, NULL out), TC_ERROR_SHAPE
 * (the result would have more than TC_MAX_DIMS dimensions). */
TCUDA_API tc_status tc_tensor_unsqueeze(const tc_tensor *t, int dim, tc_tensor **out);
/* A view without any of t's size-1 dimensions (a tensor of ones becomes 0-d).
 * Errors: TC_ERROR_INVALID_ARGUMENT (NULL out). */
TCUDA_API tc_status tc_tensor_squeeze(const tc_tensor *t, tc_tensor **out);
/* A view without dimension `dim` when its size is 1; a view with the same
 * shape otherwise (as PyTorch). TC_ERROR_INVALID_ARGUMENT: dim out of range. */
TCUDA_API tc_status tc_tensor_squeeze_dim(const tc_tensor *t, int dim, tc_tensor **out);
/* Dimensions start_dim..end_dim merged into one (torch.flatten): a view when
 * possible, else a contiguous copy; a 0-d tensor gives a 1-d one of one
 * element. TC_ERROR_INVALID_ARGUMENT: a dim out of range, start after end. */
TCUDA_API tc_status tc_tensor_flatten(const tc_tensor *t, int start_dim, int end_dim,
                                      tc_tensor **out);
/* A view of t broadcast to `sizes` (ndim >= t's ndim; new dimensions lead):
 * -1 keeps t's size, a size-1 dimension may take any size (stride 0). Errors:
 * TC_ERROR_SHAPE (a size other than 1 changed, ndim below t's or above
 * TC_MAX_DIMS, -1 for a new dimension), TC_ERROR_INVALID_ARGUMENT (a size
 * below -1, NULL sizes). Writing into an expanded view is refused by copy_. */
TCUDA_API tc_status tc_tensor_expand(const tc_tensor *t, int ndim, const int64_t *sizes,
                                     tc_tensor **out);

/* ---- splitting into views --------------------------------------------------- */
/* Both write *n_out, the number of pieces, and, when `pieces` is not NULL,
 * the pieces (new references the caller releases) into pieces[0..*n_out-1].
 * With pieces NULL only *n_out is written (ask for the size first), and a
 * capacity below *n_out is TC_ERROR_INVALID_ARGUMENT, writing nothing. A
 * count of pieces that does not fit an int is TC_ERROR_INVALID_ARGUMENT. */

/* Pieces of `split_size` along dim, the last one smaller when the size does
 * not divide (torch.split); a dimension of size 0 gives one empty piece.
 * TC_ERROR_INVALID_ARGUMENT: split_size negative, or 0 for a non-empty dim;
 * a 0-d tensor (TC_ERROR_SHAPE); NULL n_out. */
TCUDA_API tc_status tc_tensor_split(const tc_tensor *t, int64_t split_size, int dim,
                                    tc_tensor **pieces, int capacity, int *n_out);
/* torch.chunk: pieces of ceil(size / chunks) along dim, so possibly fewer than
 * `chunks`; a dimension of size 0 gives `chunks` empty pieces. Errors: as
 * tc_tensor_split, and chunks < 1 (TC_ERROR_INVALID_ARGUMENT). */
TCUDA_API tc_status tc_tensor_chunk(const tc_tensor *t, int64_t chunks, int dim, tc_tensor **pieces,
                                    int capacity, int *n_out);

/* ---- joining (new tensors) ---------------------------------------------------- */

/* The n tensors joined along dim (torch.cat): equal sizes except along dim,
 * the dtype promoted over all inputs (torch.result_type's rule for tensors
 * with dimensions). As PyTorch's legacy rule, 1-d tensors of size 0 are
 * skipped whatever their shape (all skipped: a 1-d empty result). Errors:
 * TC_ERROR_INVALID_ARGUMENT (n < 1, a NULL array or entry, dim out of range),
 * TC_ERROR_SHAPE (a 0-d input, sizes that differ), TC_ERROR_DEVICE_MISMATCH. */
TCUDA_API tc_status tc_tensor_cat(const tc_tensor *const *tensors, int n, int dim, tc_tensor **out);
/* The n tensors, all of one shape, stacked along a new dimension dim
 * (-ndim-1 <= dim <= ndim), dtype promoted as cat. Errors: as tc_tensor_cat,
 * TC_ERROR_SHAPE for shapes that differ or more than TC_MAX_DIMS dims. */
TCUDA_API tc_status tc_tensor_stack(const tc_tensor *const *tensors, int n, int dim,
                                    tc_tensor **out);

TCUDA_EXTERN_C_END

#endif
