/* Tensor internals shared by the core (metadata, dispatch) and the backends.
 *
 * A tensor is metadata over a storage; a backend (one per device type) only
 * ever sees a tc__iter: a shape and, for each operand, a data pointer (already
 * at the operand's offset) and strides in elements. Operands of an iter have
 * the shape of the output: broadcast inputs have stride 0. When `contiguous`
 * is set, every operand is dense in row-major order and kernels may treat the
 * data as flat arrays. Not installed. */
#ifndef TCUDA_TENSOR_INTERNAL_H
#define TCUDA_TENSOR_INTERNAL_H

#include <stdatomic.h>

#include "runtime/device_ops.h"
#include "base/handle_pool.h"
#include "base/internal.h"
#include "iter.h"
#include "storage.h"
#include "tcuda/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TC_TENSOR_MAGIC 0x7c7e9501u

/* A header is checked (tc__tensor_check) by every public function: its magic
 * word is TC_TENSOR_MAGIC while it lives, TC_DEAD_MAGIC once its last
 * reference was dropped (it is then parked in a handle pool, see
 * handle_pool.h, so a stale pointer still reads a dead magic word). */
struct tc_tensor {
    uint32_t magic; /* first: handle_pool.h needs it there */
    atomic_int refcount;
    tc_dtype dtype;
    int ndim;
    int64_t sizes[TC_MAX_DIMS];
    int64_t strides[TC_MAX_DIMS];
    int64_t offset; /* elements from storage->data */
    tc__storage *storage;
};

/* One table per device type. `device` is a resolved index (-1 for the CPU).
 * All pointers in an iter are on that device. */
typedef struct tc__backend {
    /* out(dtype) = op(a): all of `dtype` (already promoted). */
    tc_status (*unary)(int device, tc__op op, tc_dtype dtype, const tc__iter *it);
    /* out = a op b: inputs of `dtype`; out of `dtype`, or bool for comparisons. */
    tc_status (*binary)(int device, tc__op op, tc_dtype dtype, const tc__iter *it);
    /* out = cond ? a : b: cond bool, a, b, out of `dtype`. */
    tc_status (*where)(int device, tc_dtype dtype, const tc__iter *it);
    /* out(dst) = (dst) in(src): strided, converting. */
    tc_status (*convert)(int device, tc_dtype dst, tc_dtype src, const tc__iter *it);
    /* Contiguous out of `n` elements = start + i * step. */
    tc_status (*fill)(int device, tc_dtype dtype, void *out, int64_t n, tc__fill value);
    /* Contiguous in [outer, r, inner] reduced over r into contiguous out
     * [outer, inner]: out dtype is `out_dtype` (int64 for argmax, argmin and
     * integer sums and products). mean divides the sum by r (NaN for r == 0),
     * prod of nothing is 1; max, min, argmax and argmin are called with
     * r > 0 only (the index of the first extreme, the first NaN winning). */
    tc_status (*reduce)(int device, tc__op op, tc_dtype in_dtype, tc_dtype out_dtype,
                        const void *in, void *out, int64_t outer, int64_t r, int64_t inner);
    /* c[batch, m, n] = a[batch, m, k] @ b[batch, k, n], all row-major and of a
     * floating `dtype`; a batch stride of 0 repeats one matrix for every batch;
     * c is contiguous. */
    tc_status (*matmul)(int device, tc_dtype dtype, const void *a, const void *b, void *c,
                        int64_t batch, int64_t m, int64_t n, int64_t k, int64_t stride_a,
                        int64_t stride_b);
    /* Contiguous out[outer, r, inner] = the inclusive scan (TC__SCAN_CUMSUM)
     * of contiguous in[outer, r, inner] over r; both of `dtype` (floating or
     * int64), accumulated in at least float (wrapping int64 for int64). */
    tc_status (*scan)(int device, tc__op op, tc_dtype dtype, const void *in, void *out,
                      int64_t outer, int64_t r, int64_t inner);
} tc__backend;

extern const tc__backend tc__cpu_backend;
/* The CPU backend's matmul (src/tensor/cpu/cpu_matmul.c). */
tc_status tc__cpu_matmul(int device, tc_dtype dt, const void *a, const void *b, void *c,
                         int64_t batch, int64_t m, int64_t n, int64_t k, int64_t sa, int64_t sb);

/* The backend of a device type (a GPU's comes through the device seam,
 * device_ops.h); NULL with TC_ERROR_NO_DEVICE set when there is none. */
tc_status tc__no_backend(void);
static inline const tc__backend *tc__backend_of(tc_device device)
{
    const tc__device_ops *ops = tc__dev();
    if (device.type == TC_CPU)
        return ops->host_backend ? ops->host_backend : &tc__cpu_backend;
    const tc__backend *be = ops->backend;
    if (TC_UNLIKELY(!be))
        (void)tc__no_backend();
    return be;
}

/* The one check of a tensor argument (handle_pool.h): TC_OK for a live
 * tensor; TC_ERROR_INVALID_ARGUMENT for NULL, TC_ERROR_INVALID_HANDLE for a
 * released or foreign pointer, naming `what` (e.g. "tc_tensor src"). */
static inline tc_status tc__tensor_check(const tc_tensor *t, const char *what)
{
    return tc__handle_check(t, TC_TENSOR_MAGIC, what);
}
/* True for a live tensor, without a message (for accessors). */
static inline bool tc__tensor_live(const tc_tensor *t) { return t && t->magic == TC_TENSOR_MAGIC; }
/* Adds a reference to a tensor already checked live and returns it: the
 * library's own tc_tensor_retain, for results that are an input itself. */
static inline tc_tensor *tc__tensor_ref(tc_tensor *t)
{
    atomic_fetch_add_explicit(&t->refcount, 1, memory_order_relaxed);
    return t;
}

/* Metadata helpers: plain functions of the header, so that backends use
 * them without calling into the front end. */
static inline bool tc__is_contiguous(const tc_tensor *t)
{
    int64_t expect = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->sizes[i] == 0)
            return true;
        if (t->sizes[i] != 1 && t->strides[i] != expect)
            return false;
        expect *= t->sizes[i];
    }
    return true;
}
/* The element count of a shape that passed tc__check_shape (no overflow). */
static inline int64_t tc__numel(int ndim, const int64_t *sizes)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= sizes[i];
    return n;
}
/* Checks a shape: ndim in 0..TC_MAX_DIMS, sizes not NULL when ndim > 0 and
 * not negative (TC_ERROR_INVALID_ARGUMENT), and its extent (the product of
 * the sizes, counting a 0 as 1, so the contiguous strides too) and its bytes
 * for elements of `esize` fitting in int64_t (TC_ERROR_SHAPE). Writes the
 * element count. Every shape from the user goes through it. */
tc_status tc__check_shape(int ndim, const int64_t *sizes, size_t esize, int64_t *numel);
static inline void *tc__data(const tc_tensor *t)
{
    return (char *)t->storage->data + t->offset * (int64_t)tc_dtype_size(t->dtype);
}
/* Row-major strides of a dense tensor of these sizes. */
static inline void tc__contiguous_strides(int ndim, const int64_t *sizes, int64_t *strides)
{
    int64_t st = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = st;
        st *= sizes[i] ? sizes[i] : 1;
    }
}
/* Makes *t a dense CPU tensor over memory tcuda does not own, with *s its
 * storage, both on the caller's stack, for a copy to or from that memory.
 * Their counts start at 2: copies may retain them, nothing frees them. */
static inline void tc__wrap_host(tc__storage *s, tc_tensor *t, void *ptr, tc_dtype dtype, int ndim,
                                 const int64_t *sizes)
{
    *s = (tc__storage){.device = {TC_CPU, -1}, .data = ptr};
    atomic_init(&s->refcount, 2);
    *t = (tc_tensor){.magic = TC_TENSOR_MAGIC, .dtype = dtype, .ndim = ndim, .storage = s};
    atomic_init(&t->refcount, 2);
    for (int i = 0; i < ndim; i++)
        t->sizes[i] = sizes[i];
    tc__contiguous_strides(ndim, sizes, t->strides);
}
/* A new tensor header over t's storage (retained) with the given geometry. */
tc_status tc__make_view(const tc_tensor *t, int ndim, const int64_t *sizes, const int64_t *strides,
                        int64_t offset, tc_tensor **out);
/* A new contiguous tensor, allocated (contents undefined). */
tc_status tc__new_tensor(int ndim, const int64_t *sizes, tc_dtype dtype, tc_device device,
                         bool pinned, tc_tensor **out);
/* The iterator (iter.c). tc__iter_init fills it for operands of equal
 * shape (out first); the strides are set after, by tc__iter_set or by hand. */
void tc__iter_init(tc__iter *it, int ndim, const int64_t *sizes, int nops);
void tc__iter_set(tc__iter *it, int i, const tc_tensor *t);
/* Drops size-1 dimensions and merges dimensions that all operands walk as
 * one; sets `contiguous` when every operand ends up dense. Call after the
 * operands are set; the element order of the walk does not change. */
void tc__iter_coalesce(tc__iter *it);
/* A dimension in -n..n-1 as 0..n-1 (n = ndim, at least 1, as PyTorch's
 * maybe_wrap_dim), or TC_ERROR_INVALID_ARGUMENT saying the range. */
tc_status tc__wrap_dim(int dim, int ndim, int *out);
/* TC_ERROR_INVALID_ARGUMENT (as PyTorch words it) when t has several
 * elements in one place (a dimension of stride 0 and size > 1), so cannot be
 * written to; else TC_OK. */
tc_status tc__check_writable(const tc_tensor *t);
/* How a tensor written (dst) and a tensor read (src) share memory, by
 * PyTorch's rules (get_overlap_status): NONE (no common byte, or an empty
 * one), SAME (the same elements in the same layout: element-wise work may
 * read and write them in place), PARTIAL (both dense and sharing bytes
 * otherwise, e.g. a and a.T: refused), TOO_HARD (they share bytes and one is
 * strided: they may or may not share elements, so the source must be read
 * from a copy). Cannot fail. */
typedef enum tc__overlap {
    TC__OVERLAP_NONE,
    TC__OVERLAP_SAME,
    TC__OVERLAP_PARTIAL,
    TC__OVERLAP_TOO_HARD
} tc__overlap;
tc__overlap tc__overlap_of(const tc_tensor *dst, const tc_tensor *src);
/* Same device or TC_ERROR_DEVICE_MISMATCH naming both devices. */
tc_status tc__check_same_device(const char *fn, const tc_tensor *a, const tc_tensor *b);
/* Device-local strided converting copy (same device, broadcast src). */
tc_status tc__copy_local(tc_tensor *dst, const tc_tensor *src);
/* dst = src where their devices differ (tensor_copy_across.c). */
tc_status tc__copy_across(tc_tensor *dst, const tc_tensor *src, bool non_blocking);

/* The element-wise rules (tensor_ops.c), for every module that runs
 * element-wise work (the built-in ops, jiterator):
 * tc__result_type is torch.result_type over n tensors (0-d tensors take part
 * only when of a higher category); tc__broadcast_shapes writes the broadcast
 * shape of n tensors or fails with TC_ERROR_SHAPE naming `fn`; tc__as_dtype
 * gives t itself (retained) when it has `dtype`, else a converted contiguous
 * copy on t's device. */
tc_dtype tc__result_type(int n, const tc_tensor *const *ts);
tc_status tc__broadcast_shapes(const char *fn, int n, const tc_tensor *const *ts, int *ndim,
                               int64_t *sizes);
tc_status tc__as_dtype(const tc_tensor *t, tc_dtype dtype, tc_tensor **out);

#ifdef __cplusplus
}
#endif

#endif
