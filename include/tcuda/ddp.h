/* tcuda: gradient buckets for data-parallel training
 * (torch.nn.parallel.DistributedDataParallel's reducer).
 *
 * A tc_ddp holds the gradients of a list of parameters in buckets: flat
 * device buffers, one dtype each, that every rank of a process group
 * all-reduces (averages) after backward. The gradients are views into the
 * buckets (PyTorch's gradient_as_bucket_view=True), so no copy goes in or
 * out: backward writes or accumulates into tc_ddp_grad's tensors, and the
 * all_reduce reads and writes them in place.
 *
 * Buckets are formed as PyTorch's DDP forms them once it has seen the
 * order backward makes gradients ready, taking that order to be the
 * reverse of the parameters' (backward produces the last layers' gradients
 * first): walking the parameters from last to first, grouped by dtype, a
 * bucket is closed once it holds at least its cap (each dtype's first
 * bucket 1 MiB, so that the first reduction starts early; the rest 25 MiB
 * by default), and buckets are reduced in the order they close. Within a
 * bucket each gradient starts on a 256-byte boundary (cuBLAS and vector
 * kernels want aligned rows); the padding is zero and reduced with the
 * rest.
 *
 * A step: tc_ddp_zero_grad (or keep accumulating), backward writing the
 * gradients on the current stream, calling tc_ddp_grad_ready for each
 * gradient as it is final, then tc_ddp_finish. A bucket whose gradients
 * are all ready, and whose predecessors are launched, is launched at once:
 * its all_reduce is queued on the ddp's own communication stream after the
 * work queued so far on the current stream, so it overlaps the rest of
 * backward. tc_ddp_finish launches every bucket not yet launched (calling
 * tc_ddp_grad_ready is only for overlap) and makes the current stream wait
 * for the reductions; it does not wait on the host. Every rank must launch
 * the same buckets in the same order: ranks that mark gradients in
 * different orders still launch in bucket order.
 *
 * Gradient accumulation (PyTorch's no_sync()): with
 * tc_ddp_set_require_sync(ddp, false), tc_ddp_grad_ready and tc_ddp_finish
 * communicate nothing, and the gradients keep accumulating locally; the
 * next step with sync on reduces the sum.
 *
 * One thread drives a ddp. Errors beyond the common ones of tensor.h and
 * dist.h are listed with each function. */
#ifndef TCUDA_DDP_H
#define TCUDA_DDP_H

#include <stdbool.h>
#include <stddef.h>

#include "dist.h"
#include "tensor.h"

TCUDA_EXTERN_C_BEGIN

typedef struct tc_ddp tc_ddp;

/* How buckets are formed. */
typedef struct tc_ddp_options {
    size_t bucket_cap_bytes;       /* 0: 25 MiB (DDP's bucket_cap_mb=25) */
    size_t first_bucket_cap_bytes; /* 0: 1 MiB (dist._DEFAULT_FIRST_BUCKET_BYTES) */
    bool broadcast_params;         /* at create, rank 0's parameters to every rank
                                      (DDP's init_sync); the default is true */
} tc_ddp_options;

/* PyTorch's defaults: caps of 25 MiB and 1 MiB, broadcast on. Cannot fail. */
TCUDA_API tc_ddp_options tc_ddp_options_default(void);

/* ---- bucket assignment --------------------------------------------------- */

/* DDP's assignment of n gradients of nbytes[i] bytes and dtype dtypes[i] to
 * buckets (dist._compute_bucket_assignment_by_size over the gradients from
 * the last to the first, as above): into bucket_of[i] (n entries) the
 * bucket of gradient i, numbered in the order they are reduced, and into
 * *num_buckets their count. Caps of 0 mean the
 * defaults. Needs no GPU. TC_ERROR_INVALID_ARGUMENT for NULL arrays (n > 0)
 * or a dtype out of range. */
TCUDA_API tc_status tc_ddp_bucket_assignment(const size_t *nbytes, const tc_dtype *dtypes, int n,
                                             size_t first_bucket_cap_bytes, size_t bucket_cap_bytes,
                                             int *bucket_of, int *num_buckets);

/* ---- the reducer ---------------------------------------------------------- */

/* A reducer for the n parameters `params` (floating tensors on the group's
 * device; not owned, not kept: only their shapes and dtypes are read, and,
 * with broadcast_params, rank 0's values are broadcast into them, which
 * needs them contiguous). Its gradients start at zero. opts NULL means the
 * defaults. The caller destroys it with tc_ddp_destroy.
 * TC_ERROR_DEVICE_MISMATCH for a parameter on another device than the
 * group's; TC_ERROR_DTYPE for a non-floating one; TC_ERROR_INVALID_ARGUMENT
 * for a parameter given twice (a tied weight is one parameter). */
TCUDA_API tc_status tc_ddp_create(tc_process_group *pg, tc_tensor *const *params, int n,
                                  const tc_ddp_options *opts, tc_ddp **out);

/* Makes the current stream wait for the ddp's reductions (no host wait)
 * and frees its buckets and stream. Views handed out by tc_ddp_grad stay
 * valid (they hold the memory). */
TCUDA_API tc_status tc_ddp_destroy(tc_ddp *ddp);

/* A new view of parameter i's gradient (its shape and dtype) inside its
 * bucket, which the caller releases. Writes into it are what is reduced. */
TCUDA_API tc_status tc_ddp_grad(tc_ddp *ddp, int i, tc_tensor **out);

/* Sets every gradient to zero, on the current stream. */
TCUDA_API tc_status tc_ddp_zero_grad(tc_ddp *ddp);

/* Whether the next tc_ddp_grad_ready and tc_ddp_finish communicate (true
 * after create); false is PyTorch's no_sync(). TC_ERROR_INVALID_STATE
 * between a first tc_ddp_grad_ready and tc_ddp_finish. */
TCUDA_API tc_status tc_ddp_set_require_sync(tc_ddp *ddp, bool sync);

/* Gradient i is final for this step: the work that writes it is queued on
 * the current stream. Launches each bucket that is now complete, in bucket
 * order. TC_ERROR_INVALID_STATE when gradient i was marked already in this
 * step; the errors of tc_dist_all_reduce (an aborted group). */
TCUDA_API tc_status tc_ddp_grad_ready(tc_ddp *ddp, int i);

/* Ends the step's reduction: launches every bucket not yet launched, in
 * order, and makes the current stream wait for all of them, so that work
 * queued after it (the optimizer) reads averaged gradients. Clears the
 * marks for the next step. With sync off it only clears the marks. When a
 * launch fails, the current stream still waits for those launched. */
TCUDA_API tc_status tc_ddp_finish(tc_ddp *ddp);

/* The number of buckets (in reduction order), and bucket b's parameters:
 * up to `capacity` indices into params, their count into *n_out, and its
 * size in bytes, padding included, into *bytes (may be NULL).
 * tc_ddp_num_buckets cannot fail: 0 for a bad handle. */
TCUDA_API int tc_ddp_num_buckets(const tc_ddp *ddp);
TCUDA_API tc_status tc_ddp_bucket_params(const tc_ddp *ddp, int b, int *params, int capacity,
                                         int *n_out, size_t *bytes);

TCUDA_EXTERN_C_END

#endif
