/* tcuda: tensors that behave the same on the CPU and on a GPU.
 *
 * A tc_tensor is a strided view (sizes, strides in elements, offset) of a
 * reference-counted storage on one device. Views share their storage; the
 * storage is freed when the last tensor that uses it is released. Tensors have
 * at most TC_MAX_DIMS dimensions; 0-dimensional (one element) and empty
 * (a zero size) tensors work everywhere.
 *
 * Every function that makes a tensor returns a new reference in *out, which
 * the caller gives back with tc_tensor_release. Out-parameters are written only
 * on success. CUDA work is queued on the current stream of the tensor's device
 * and returns before the GPU finishes it; only copies into pageable host
 * memory (and reading values to the host) wait. Operations on tensors of
 * different devices fail with TC_ERROR_DEVICE_MISMATCH naming both devices.
 *
 * Every function checks its tensor arguments: NULL gives
 * TC_ERROR_INVALID_ARGUMENT; a released tensor (its last reference dropped)
 * or a pointer that is not a tensor gives TC_ERROR_INVALID_HANDLE, never a
 * use-after-free (released headers are kept aside for a while, not freed, so
 * a stale pointer is recognized). Messages start with the function called.
 *
 * Devices: {TC_CPU, -1} or {TC_CPU, 0} is the CPU (any other CPU index is
 * TC_ERROR_INVALID_ARGUMENT); {TC_CUDA, TC_CURRENT_DEVICE} is the current
 * GPU, {TC_CUDA, n}
 * GPU n (TC_ERROR_INVALID_DEVICE if it does not exist, TC_ERROR_NO_DEVICE
 * without CUDA). Generators (random.h) follow the same rule.
 *
 * Shapes: at most TC_MAX_DIMS sizes, none negative (TC_ERROR_INVALID_ARGUMENT).
 * The product of the sizes (a 0 counted as 1, as the contiguous strides
 * multiply them) and the byte count must fit in int64_t, else TC_ERROR_SHAPE;
 * a shape that fits but not in memory is TC_ERROR_OUT_OF_MEMORY. */
#ifndef TCUDA_TENSOR_H
#define TCUDA_TENSOR_H

#include <stdbool.h>
#include <stdint.h>

#include "device.h"
#include "dtype.h"
#include "status.h"
#include "stream.h"

TCUDA_EXTERN_C_BEGIN

#define TC_MAX_DIMS 8

typedef struct tc_tensor tc_tensor;

/* ---- factories ---------------------------------------------------------- */
/* `sizes` has `ndim` entries (ndim 0 makes a 0-d tensor; sizes may be NULL
 * then). A device index of TC_CURRENT_DEVICE with TC_CUDA means the current
 * device. Errors: TC_ERROR_INVALID_ARGUMENT (NULL out, ndim out of 0..8, a negative
 * size, a bad dtype or device), TC_ERROR_SHAPE (sizes or bytes overflow, see
 * above), TC_ERROR_NO_DEVICE / TC_ERROR_INVALID_DEVICE,
 * TC_ERROR_OUT_OF_MEMORY. */

/* Uninitialized contents. */
TCUDA_API tc_status tc_tensor_empty(int ndim, const int64_t *sizes, tc_dtype dtype,
                                    tc_device device, tc_tensor **out);
TCUDA_API tc_status tc_tensor_zeros(int ndim, const int64_t *sizes, tc_dtype dtype,
                                    tc_device device, tc_tensor **out);
TCUDA_API tc_status tc_tensor_ones(int ndim, const int64_t *sizes, tc_dtype dtype, tc_device device,
                                   tc_tensor **out);
/* Every element `value`, converted to dtype as PyTorch's fill does: a
 * fraction is truncated toward zero for integer dtypes; NaN, infinities and
 * values outside an integer dtype's range, and finite values beyond a
 * floating dtype's largest, are TC_ERROR_INVALID_ARGUMENT; bool takes any
 * value (non-zero and NaN are true). Note: the value is a double, so -1 into
 * uint8 is refused (Python's int -1 would wrap to 255 in PyTorch). */
TCUDA_API tc_status tc_tensor_full(int ndim, const int64_t *sizes, double value, tc_dtype dtype,
                                   tc_device device, tc_tensor **out);
/* 1-d: start, start + step, ... while below end (above end for a negative
 * step), as torch.arange, computed in double. TC_ERROR_INVALID_ARGUMENT for
 * a non-finite argument, a zero step, a step away from end or a count that
 * overflows; TC_ERROR_DTYPE for bool (PyTorch refuses it too). */
TCUDA_API tc_status tc_tensor_arange(double start, double end, double step, tc_dtype dtype,
                                     tc_device device, tc_tensor **out);
/* A contiguous tensor holding a copy of `data` (host memory, row-major,
 * elements of `dtype`). The call returns after `data` was read. */
TCUDA_API tc_status tc_tensor_from_data(const void *data, int ndim, const int64_t *sizes,
                                        tc_dtype dtype, tc_device device, tc_tensor **out);

/* Same sizes, dtype and device as `like`, contiguous. Errors: those of the
 * factories (named after the *_like function called) and a bad `like`. */
TCUDA_API tc_status tc_tensor_empty_like(const tc_tensor *like, tc_tensor **out);
TCUDA_API tc_status tc_tensor_zeros_like(const tc_tensor *like, tc_tensor **out);
TCUDA_API tc_status tc_tensor_ones_like(const tc_tensor *like, tc_tensor **out);
TCUDA_API tc_status tc_tensor_full_like(const tc_tensor *like, double value, tc_tensor **out);

/* Given sizes; same dtype and device as `t` (Tensor.new_empty and friends).
 * Errors: those of the factories and a bad `t`. */
TCUDA_API tc_status tc_tensor_new_empty(const tc_tensor *t, int ndim, const int64_t *sizes,
                                        tc_tensor **out);
TCUDA_API tc_status tc_tensor_new_zeros(const tc_tensor *t, int ndim, const int64_t *sizes,
                                        tc_tensor **out);
TCUDA_API tc_status tc_tensor_new_ones(const tc_tensor *t, int ndim, const int64_t *sizes,
                                       tc_tensor **out);
TCUDA_API tc_status tc_tensor_new_full(const tc_tensor *t, int ndim, const int64_t *sizes,
                                       double value, tc_tensor **out);
/* A copy of `data` (host memory, row-major, elements of t's dtype) with t's
 * dtype and device (Tensor.new_tensor); returns after `data` was read.
 * Errors: those of tc_tensor_from_data and a bad `t`. */
TCUDA_API tc_status tc_tensor_new_tensor(const tc_tensor *t, const void *data, int ndim,
                                         const int64_t *sizes, tc_tensor **out);

/* ---- lifetime ------------------------------------------------------------ */

/* Adds a reference to t: the caller keeps using t and gives the reference
 * back with tc_tensor_release. TC_ERROR_INVALID_ARGUMENT for NULL,
 * TC_ERROR_INVALID_HANDLE for a released or foreign tensor. */
TCUDA_API tc_status tc_tensor_retain(tc_tensor *t);
/* Drops a reference: TC_OK (NULL is a no-op and TC_OK too). When the last
 * one goes, the tensor is released: its handle is dead from then on. A CUDA
 * storage is given back in the order of the stream that made it, and of
 * streams given to record_stream. Releasing a released (or foreign) tensor
 * changes nothing and gives TC_ERROR_INVALID_HANDLE, so a double release is
 * reported, not a crash. Ignoring the status is fine. */
TCUDA_API tc_status tc_tensor_release(tc_tensor *t);

/* ---- accessors ------------------------------------------------------------ */
/* They cannot fail and set no message. For NULL, and for a released or
 * foreign tensor, they answer as for "no tensor": 0 for ndim, size, stride,
 * offset and numel; NULL for sizes, strides and data_ptr; false for the
 * predicates; TC_FLOAT32 for dtype; {TC_CPU, -1} for device. */
TCUDA_API int tc_tensor_ndim(const tc_tensor *t);
/* Size / stride of dimension `dim` (negative counts from the end); 0 when
 * out of range. */
TCUDA_API int64_t tc_tensor_size(const tc_tensor *t, int dim);
TCUDA_API int64_t tc_tensor_stride(const tc_tensor *t, int dim);
/* Pointers to the tensor's ndim sizes / strides (elements), valid while the
 * tensor lives. */
TCUDA_API const int64_t *tc_tensor_sizes(const tc_tensor *t);
TCUDA_API const int64_t *tc_tensor_strides(const tc_tensor *t);
/* Elements from the start of the storage to the first element. */
TCUDA_API int64_t tc_tensor_offset(const tc_tensor *t);
TCUDA_API int64_t tc_tensor_numel(const tc_tensor *t);
TCUDA_API tc_dtype tc_tensor_dtype(const tc_tensor *t);
/* The tensor's device, with the index resolved (CPU: index -1). */
TCUDA_API tc_device tc_tensor_device(const tc_tensor *t);
TCUDA_API bool tc_tensor_is_cuda(const tc_tensor *t);
TCUDA_API bool tc_tensor_is_contiguous(const tc_tensor *t);
/* Address of the first element (storage + offset); device memory for CUDA
 * tensors. The tensor keeps owning it. */
TCUDA_API void *tc_tensor_data_ptr(const tc_tensor *t);
/* True when t's storage is page-locked host memory. */
TCUDA_API bool tc_tensor_is_pinned(const tc_tensor *t);

/* Copies all elements to `host` as `dtype` (row-major, numel elements),
 * converting; waits for the tensor's device (a sync point). Errors:
 * TC_ERROR_INVALID_ARGUMENT (NULL host with elements, a bad dtype), and the
 * device's (TC_ERROR_SYNC_DISALLOWED in sync debug mode 2, CUDA errors). */
TCUDA_API tc_status tc_tensor_to_host(const tc_tensor *t, tc_dtype dtype, void *host);
/* The single element of a one-element tensor as a double (Tensor.item);
 * TC_ERROR_SHAPE for any other count, TC_ERROR_INVALID_ARGUMENT for a NULL
 * value; *value is written only on success. */
TCUDA_API tc_status tc_tensor_item(const tc_tensor *t, double *value);

/* ---- copies and moves ----------------------------------------------------- */

/* Copies src into dst (Tensor.copy_): src broadcasts to dst's sizes, dtype is
 * converted, either may be strided, and the devices may differ (CPU<->GPU,
 * GPU<->GPU). With non_blocking, a copy between a GPU and pinned host memory
 * returns at once; with pageable host memory the call waits as in PyTorch.
 * Overlap, as PyTorch: a dst with more than one element in one place
 * (stride 0), or a dense src and dst that share memory without being the
 * same elements (e.g. copy_(a, a.T)), is TC_ERROR_INVALID_ARGUMENT and
 * writes nothing; copy_(a, a) does nothing; strided views that overlap are
 * copied through a temporary (correct, where PyTorch does not decide).
 * Errors also: TC_ERROR_SHAPE (src does not broadcast to dst), the devices'. */
TCUDA_API tc_status tc_tensor_copy_(tc_tensor *dst, const tc_tensor *src, bool non_blocking);
/* A tensor on `device` with `dtype` holding src's values; a new reference to
 * src itself when both already match (Tensor.to). Errors: a bad device or
 * dtype (TC_ERROR_INVALID_ARGUMENT, TC_ERROR_INVALID_DEVICE,
 * TC_ERROR_NO_DEVICE), TC_ERROR_OUT_OF_MEMORY, the copy's. */
TCUDA_API tc_status tc_tensor_to(const tc_tensor *src, tc_device device, tc_dtype dtype,
                                 bool non_blocking, tc_tensor **out);
/* Tensor.cuda(device) and Tensor.cpu(); errors as tc_tensor_to, named after
 * the function called. */
TCUDA_API tc_status tc_tensor_cuda(const tc_tensor *src, int device, bool non_blocking,
                                   tc_tensor **out);
TCUDA_API tc_status tc_tensor_cpu(const tc_tensor *src, tc_tensor **out);
/* A copy of a CPU tensor in pinned memory (a new reference to src when it is
 * pinned already). TC_ERROR_NO_DEVICE without CUDA; TC_ERROR_INVALID_ARGUMENT
 * for a CUDA tensor. */
TCUDA_API tc_status tc_tensor_pin_memory(const tc_tensor *src, tc_tensor **out);
/* Marks t's storage as used by `stream` (NULL: current stream of its device),
 * so that its memory is not reused before the work queued there so far is
 * done. A CPU tensor is TC_ERROR_INVALID_ARGUMENT; a stream of another device
 * TC_ERROR_DEVICE_MISMATCH; a destroyed stream TC_ERROR_INVALID_HANDLE. */
TCUDA_API tc_status tc_tensor_record_stream(const tc_tensor *t, tc_stream *stream);
/* ---- device and BLAS ------------------------------------------------------ */
/* Two torch.cuda calls live here rather than in device.h: one takes a tensor,
 * the other is the tensor backend's own cuBLAS handle. */

/* torch.cuda.device_of: enters the tensor's device (a no-op guard for a CPU
 * tensor or NULL; status TC_ERROR_INVALID_HANDLE, entering nothing, for a
 * released tensor). */
TCUDA_API tc_device_guard tc_device_guard_enter_of(const tc_tensor *t);

/* The cuBLAS handle of the calling thread for the current device, bound to the
 * current stream (torch.cuda.current_blas_handle), into *out (a
 * cublasHandle_t). tcuda owns the handle, and sets host pointer mode and the
 * default math mode on it at each of its own GEMMs. TC_ERROR_NO_DEVICE
 * without CUDA, TC_ERROR_NOT_SUPPORTED when cuBLAS is missing. */
TCUDA_API tc_status tc_current_blas_handle(void **out);

/* ---- shape and views --------------------------------------------------------- */
/* Views share the storage of their source. Errors: TC_ERROR_INVALID_ARGUMENT
 * (NULL out, a dimension out of range, a bad sizes array), TC_ERROR_SHAPE
 * (sizes that do not fit the tensor). No input overflows: sizes are
 * multiplied with overflow checks and narrow never computes start + length. */

/* src itself (new reference) when contiguous, else a contiguous copy. */
TCUDA_API tc_status tc_tensor_contiguous(const tc_tensor *src, tc_tensor **out);
/* A view with new sizes (one may be -1); TC_ERROR_SHAPE when the element
 * count differs, the sizes overflow, or the strides do not allow a view. */
TCUDA_API tc_status tc_tensor_view(const tc_tensor *src, int ndim, const int64_t *sizes,
                                   tc_tensor **out);
/* A view when possible, else a contiguous copy with the new sizes. */
TCUDA_API tc_status tc_tensor_reshape(const tc_tensor *src, int ndim, const int64_t *sizes,
                                      tc_tensor **out);
TCUDA_API tc_status tc_tensor_transpose(const tc_tensor *src, int dim0, int dim1, tc_tensor **out);
/* dims: a permutation of 0..ndim-1 (negative counts from the end). */
TCUDA_API tc_status tc_tensor_permute(const tc_tensor *src, const int *dims, tc_tensor **out);
/* Elements start .. start+length-1 of dimension dim; -size <= start <= size
 * (a negative start counts from the end) and 0 <= length <= size - start,
 * else TC_ERROR_SHAPE (also for a 0-d tensor). */
TCUDA_API tc_status tc_tensor_narrow(const tc_tensor *src, int dim, int64_t start, int64_t length,
                                     tc_tensor **out);

/* ---- element-wise operations --------------------------------------------------- */
/* Inputs broadcast against each other; the result dtype follows PyTorch's
 * type promotion (a 0-d tensor takes part only when its category, bool <
 * integer < floating, is higher than the others'). Math functions of integer
 * inputs give float32, as does div; integer pow with a negative exponent
 * gives 0 (for bases other than 1 and -1), as in PyTorch. Errors:
 * TC_ERROR_SHAPE (no broadcast), TC_ERROR_DTYPE (as PyTorch: sub with a bool
 * operand, neg/abs/pow/relu of bool), TC_ERROR_DEVICE_MISMATCH,
 * TC_ERROR_INVALID_ARGUMENT (NULL out). */
TCUDA_API tc_status tc_tensor_add(const tc_tensor *a, const tc_tensor *b, tc_tensor **out);
TCUDA_API tc_status tc_tensor_sub(const tc_tensor *a, const tc_tensor *b, tc_tensor **out);
TCUDA_API tc_status tc_tensor_mul(const tc_tensor *a, const tc_tensor *b, tc_tensor **out);
TCUDA_API tc_status tc_tensor_div(const tc_tensor *a, const tc_tensor *b, tc_tensor **out);
TCUDA_API tc_status tc_tensor_pow(const tc_tensor *a, const tc_tensor *b, tc_tensor **out);
TCUDA_API tc_status tc_tensor_maximum(const tc_tensor *a, const tc_tensor *b, tc_tensor **out);
TCUDA_API tc_status tc_tensor_minimum(const tc_tensor *a, const tc_tensor *b, tc_tensor **out);
/* Comparisons give bool tensors. */
TCUDA_API tc_status tc_tensor_eq(const tc_tensor *a, const tc_tensor *b, tc_tensor **out);
TCUDA_API tc_status tc_tensor_ne(const tc_tensor *a, const tc_tensor *b, tc_tensor **out);
TCUDA_API tc_status tc_tensor_lt(const tc_tensor *a, const tc_tensor *b, tc_tensor **out);
TCUDA_API tc_status tc_tensor_le(const tc_tensor *a, const tc_tensor *b, tc_tensor **out);
TCUDA_API tc_status tc_tensor_gt(const tc_tensor *a, const tc_tensor *b, tc_tensor **out);
TCUDA_API tc_status tc_tensor_ge(const tc_tensor *a, const tc_tensor *b, tc_tensor **out);
/* -a, |a|, e^a, ln a, the square root, max(a, 0), 1 / (1 + e^-a), tanh a. */
TCUDA_API tc_status tc_tensor_neg(const tc_tensor *a, tc_tensor **out);
TCUDA_API tc_status tc_tensor_abs(const tc_tensor *a, tc_tensor **out);
TCUDA_API tc_status tc_tensor_exp(const tc_tensor *a, tc_tensor **out);
TCUDA_API tc_status tc_tensor_log(const tc_tensor *a, tc_tensor **out);
TCUDA_API tc_status tc_tensor_sqrt(const tc_tensor *a, tc_tensor **out);
TCUDA_API tc_status tc_tensor_relu(const tc_tensor *a, tc_tensor **out);
TCUDA_API tc_status tc_tensor_sigmoid(const tc_tensor *a, tc_tensor **out);
TCUDA_API tc_status tc_tensor_tanh(const tc_tensor *a, tc_tensor **out);

/* cond ? a : b, element-wise; cond must be bool. */
TCUDA_API tc_status tc_tensor_where(const tc_tensor *cond, const tc_tensor *a, const tc_tensor *b,
                                    tc_tensor **out);

/* Math of floating values (integer and bool inputs give float32, as exp):
 * rsqrt is 1/sqrt. erf is the error function. */
TCUDA_API tc_status tc_tensor_rsqrt(const tc_tensor *a, tc_tensor **out);
TCUDA_API tc_status tc_tensor_sin(const tc_tensor *a, tc_tensor **out);
TCUDA_API tc_status tc_tensor_cos(const tc_tensor *a, tc_tensor **out);
TCUDA_API tc_status tc_tensor_erf(const tc_tensor *a, tc_tensor **out);
/* Rounding, same dtype; integers are returned as they are (a copy), bool is
 * TC_ERROR_DTYPE. round goes half to even (torch.round: 0.5 -> 0, 1.5 -> 2). */
TCUDA_API tc_status tc_tensor_floor(const tc_tensor *a, tc_tensor **out);
TCUDA_API tc_status tc_tensor_ceil(const tc_tensor *a, tc_tensor **out);
TCUDA_API tc_status tc_tensor_round(const tc_tensor *a, tc_tensor **out);

/* torch.nn.functional.gelu's `approximate`: "none" (x * Phi(x) through erf)
 * or "tanh" (0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))). */
typedef enum tc_gelu_approximate {
    TC_GELU_APPROXIMATE_NONE = 0,
    TC_GELU_APPROXIMATE_TANH = 1
} tc_gelu_approximate;
/* gelu and silu (x * sigmoid(x)) of a floating tensor, same dtype;
 * TC_ERROR_DTYPE for integers and bool, TC_ERROR_INVALID_ARGUMENT for an
 * unknown `approximate`. */
TCUDA_API tc_status tc_tensor_gelu(const tc_tensor *a, tc_gelu_approximate approximate,
                                   tc_tensor **out);
TCUDA_API tc_status tc_tensor_silu(const tc_tensor *a, tc_tensor **out);

/* min(max(a, *min), *max) with scalar bounds (torch.clamp); either pointer
 * may be NULL (not both: TC_ERROR_INVALID_ARGUMENT). A whole-number bound is
 * taken as a Python int (an integer tensor stays integer), any other as a
 * Python float (an integer or bool tensor gives float32). NaN in a or in a
 * bound gives NaN; min > max gives max. A bound the result dtype cannot hold
 * (300 for int8) is TC_ERROR_INVALID_ARGUMENT, as PyTorch's checked
 * conversion. */
TCUDA_API tc_status tc_tensor_clamp(const tc_tensor *a, const double *min, const double *max,
                                    tc_tensor **out);
/* a - b * floor(a / b), with the sign of b (torch.remainder, Python's %);
 * promoted as add. An integer remainder by 0 gives 0 (PyTorch raises on the
 * CPU; its GPU value is undefined). TC_ERROR_DTYPE for two bool operands. */
TCUDA_API tc_status tc_tensor_remainder(const tc_tensor *a, const tc_tensor *b, tc_tensor **out);
/* Bool results for inputs of any dtypes (non-zero, NaN included, is true). */
TCUDA_API tc_status tc_tensor_logical_and(const tc_tensor *a, const tc_tensor *b, tc_tensor **out);
TCUDA_API tc_status tc_tensor_logical_or(const tc_tensor *a, const tc_tensor *b, tc_tensor **out);
TCUDA_API tc_status tc_tensor_logical_not(const tc_tensor *a, tc_tensor **out);
/* a with `value` where mask (bool, TC_ERROR_DTYPE otherwise) is true; a and
 * mask broadcast; a's dtype. A value a's dtype cannot hold is
 * TC_ERROR_INVALID_ARGUMENT (as tc_tensor_full). */
TCUDA_API tc_status tc_tensor_masked_fill(const tc_tensor *a, const tc_tensor *mask, double value,
                                          tc_tensor **out);

/* In place: self = self op other (Tensor.add_ and friends). other broadcasts
 * to self's sizes (TC_ERROR_SHAPE when self would have to grow); the result
 * is computed in the promoted dtype and stored in self's, which must be able
 * to hold that category (TC_ERROR_DTYPE for an integer self with a floating
 * result, as div_ always gives, or a bool self with an integer one). A self
 * with a stride-0 dimension (several elements in one place) is
 * TC_ERROR_INVALID_ARGUMENT. On failure self is unchanged. */
TCUDA_API tc_status tc_tensor_add_(tc_tensor *self, const tc_tensor *other);
TCUDA_API tc_status tc_tensor_sub_(tc_tensor *self, const tc_tensor *other);
TCUDA_API tc_status tc_tensor_mul_(tc_tensor *self, const tc_tensor *other);
TCUDA_API tc_status tc_tensor_div_(tc_tensor *self, const tc_tensor *other);
/* Every element of t becomes `value` (Tensor.fill_), converted as
 * tc_tensor_full converts (TC_ERROR_INVALID_ARGUMENT for a value t's dtype
 * cannot hold). Any view may be filled, expanded ones too. */
TCUDA_API tc_status tc_tensor_fill_(tc_tensor *t, double value);

/* ---- reductions --------------------------------------------------------------- */
/* `dim` is a dimension (negative counts from the end) or TC_ALL_DIMS for all
 * elements (keepdim then keeps every dimension with size 1). sum of bool or
 * integer gives int64; mean needs a floating dtype; argmax gives int64 (first
 * index of the maximum). max/min/argmax of an empty reduction fail with
 * TC_ERROR_SHAPE; sum of nothing is 0 and mean of nothing is NaN. */
#define TC_ALL_DIMS INT32_MIN
TCUDA_API tc_status tc_tensor_sum(const tc_tensor *a, int dim, bool keepdim, tc_tensor **out);
TCUDA_API tc_status tc_tensor_mean(const tc_tensor *a, int dim, bool keepdim, tc_tensor **out);
TCUDA_API tc_status tc_tensor_max(const tc_tensor *a, int dim, bool keepdim, tc_tensor **out);
TCUDA_API tc_status tc_tensor_min(const tc_tensor *a, int dim, bool keepdim, tc_tensor **out);
TCUDA_API tc_status tc_tensor_argmax(const tc_tensor *a, int dim, bool keepdim, tc_tensor **out);
/* Product; bool and integers give int64 (wrapping), the product of nothing is 1. */
TCUDA_API tc_status tc_tensor_prod(const tc_tensor *a, int dim, bool keepdim, tc_tensor **out);
/* Variance and standard deviation with `correction` (torch.var(correction=)):
 * the sum of squared deviations from the mean over max(0, N - correction);
 * so inf (or NaN when every deviation is 0, or N is 0) when correction >= N.
 * Floating only (TC_ERROR_DTYPE); 16-bit inputs are computed in float32. */
TCUDA_API tc_status tc_tensor_var(const tc_tensor *a, int dim, int64_t correction, bool keepdim,
                                  tc_tensor **out);
TCUDA_API tc_status tc_tensor_std(const tc_tensor *a, int dim, int64_t correction, bool keepdim,
                                  tc_tensor **out);
/* log(sum(exp(a))), stable (the maximum is taken out first; infinite maxima
 * as PyTorch); -inf over nothing. Integer and bool inputs give float32. */
TCUDA_API tc_status tc_tensor_logsumexp(const tc_tensor *a, int dim, bool keepdim, tc_tensor **out);
/* torch.max(a, dim) / torch.min(a, dim): the extreme values (a's dtype) and
 * the int64 index of the first one (NaN is the extreme, the first NaN's
 * index). `dim` must be a dimension (TC_ALL_DIMS is TC_ERROR_INVALID_ARGUMENT);
 * an empty dimension is TC_ERROR_SHAPE. Both outputs, or neither, are written. */
TCUDA_API tc_status tc_tensor_max_dim(const tc_tensor *a, int dim, bool keepdim, tc_tensor **values,
                                      tc_tensor **indices);
TCUDA_API tc_status tc_tensor_min_dim(const tc_tensor *a, int dim, bool keepdim, tc_tensor **values,
                                      tc_tensor **indices);
/* Whether any / all elements are non-zero (NaN counts as non-zero): bool,
 * except uint8 inputs give uint8 (as PyTorch). any of nothing is false, all
 * of nothing is true. */
TCUDA_API tc_status tc_tensor_any(const tc_tensor *a, int dim, bool keepdim, tc_tensor **out);
TCUDA_API tc_status tc_tensor_all(const tc_tensor *a, int dim, bool keepdim, tc_tensor **out);
/* Inclusive running sum along `dim` (a dimension, not TC_ALL_DIMS), same
 * sizes; bool and integers give int64, 16-bit floats accumulate in float32. */
TCUDA_API tc_status tc_tensor_cumsum(const tc_tensor *a, int dim, tc_tensor **out);
/* The p-norm (torch.linalg.vector_norm): (sum |a|^p)^(1/p); p = INFINITY is
 * max |a|, -INFINITY min |a|, 0 the count of non-zeros. Floating only
 * (TC_ERROR_DTYPE), 16-bit computed in float32; NaN p is
 * TC_ERROR_INVALID_ARGUMENT; p < 0 or +-inf over nothing is TC_ERROR_SHAPE. */
TCUDA_API tc_status tc_tensor_norm(const tc_tensor *a, double p, int dim, bool keepdim,
                                   tc_tensor **out);

/* ---- matrix multiply ------------------------------------------------------------- */

/* a @ b for a [M, K] or [B, M, K] and b [K, N] or [B, K, N] (a batch of 1 on
 * either side broadcasts); both of the same floating dtype. On a GPU through
 * cuBLAS (loaded at run time: TC_ERROR_NOT_SUPPORTED when missing), with fp32
 * computed in full fp32 (TF32 only where backends.h allows it) and 16-bit
 * inputs accumulated in fp32.
 * Errors: TC_ERROR_SHAPE, TC_ERROR_DTYPE, TC_ERROR_DEVICE_MISMATCH. */
TCUDA_API tc_status tc_tensor_matmul(const tc_tensor *a, const tc_tensor *b, tc_tensor **out);

/* a [B, M, K] @ b [B, K, N] -> [B, M, N], both 3-d with the same B (no
 * broadcasting, as torch.bmm), of one floating dtype, computed as matmul.
 * Errors: as tc_tensor_matmul. */
TCUDA_API tc_status tc_tensor_bmm(const tc_tensor *a, const tc_tensor *b, tc_tensor **out);

/* beta * input + alpha * (b1 @ b2) as torch.baddbmm: b1 [B, M, K], b2
 * [B, K, N], input broadcastable to [B, M, N]; with beta == 0 input is not
 * read (NaN in it does not propagate). Errors: as tc_tensor_matmul, and
 * non-finite alpha or beta (TC_ERROR_INVALID_ARGUMENT). */
TCUDA_API tc_status tc_tensor_baddbmm(const tc_tensor *input, const tc_tensor *b1,
                                      const tc_tensor *b2, double beta, double alpha,
                                      tc_tensor **out);

/* ---- random fills --------------------------------------------------------------------- */
/* Through the generators of random.h: the same state gives the same numbers
 * on the CPU and on a GPU (random.h says how). `gen` NULL means the default
 * generator of the tensor's device; a generator of another device is
 * TC_ERROR_DEVICE_MISMATCH. uniform_ and normal_ need a floating tensor
 * (TC_ERROR_DTYPE otherwise); bernoulli_ writes 1 with probability p;
 * random_ draws integers in [lo, hi) (TC_ERROR_INVALID_ARGUMENT when the
 * dtype cannot hold them). A strided tensor is filled through a dense
 * temporary: element i of the fill is element i in row-major order. */
typedef struct tc_generator tc_generator;
TCUDA_API tc_status tc_tensor_uniform_(tc_tensor *t, double lo, double hi, tc_generator *gen);
TCUDA_API tc_status tc_tensor_normal_(tc_tensor *t, double mean, double std, tc_generator *gen);
TCUDA_API tc_status tc_tensor_bernoulli_(tc_tensor *t, double p, tc_generator *gen);
TCUDA_API tc_status tc_tensor_random_(tc_tensor *t, int64_t lo, int64_t hi, tc_generator *gen);
/* New tensors (torch.rand and torch.randn): uniform in [0, 1) and standard
 * normal, floating dtypes only; errors as the factories and the fills. */
TCUDA_API tc_status tc_tensor_rand(int ndim, const int64_t *sizes, tc_dtype dtype, tc_device device,
                                   tc_generator *gen, tc_tensor **out);
TCUDA_API tc_status tc_tensor_randn(int ndim, const int64_t *sizes, tc_dtype dtype,
                                    tc_device device, tc_generator *gen, tc_tensor **out);

TCUDA_EXTERN_C_END

#endif
