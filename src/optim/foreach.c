/* The foreach operations, zero_grad and clip_grad_norm_ (optim.h), and the
 * list builder the whole module checks its tensor lists with. Each call
 * checks every tensor, then hands the backend of their device one
 * tc__mt_list: one pass, one kernel per chunk of tensors on a GPU. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "optim_front.h"
#include "access/access.h"
#include "optim_math.h"
#include "tcuda/optim.h"

/* ---- the list builder ---------------------------------------------------------- */

tc_status tc__mt_build_init(tc__mt_build *b, int n)
{
    memset(b, 0, sizeof *b);
    size_t k = n > 0 ? (size_t)n : 1;
    b->numel = calloc(k, sizeof *b->numel);
    for (int s = 0; s < TC__MT_SLOTS; s++)
        b->ptr[s] = calloc(k, sizeof(void *));
    bool ok = b->numel != NULL;
    for (int s = 0; s < TC__MT_SLOTS; s++)
        ok = ok && b->ptr[s] != NULL;
    if (!ok) {
        tc__mt_build_free(b);
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "no memory for a list of %d tensors", n);
    }
    b->l.n = n;
    b->l.numel = b->numel;
    return TC_OK;
}

void tc__mt_build_free(tc__mt_build *b)
{
    free(b->numel);
    for (int s = 0; s < TC__MT_SLOTS; s++)
        free(b->ptr[s]);
    memset(b, 0, sizeof *b);
}

tc_status tc__mt_check_count(const void *arr, int n, const char *what)
{
    TC_CHECK_ARG(n >= 0, "the count of %s is %d: it must be >= 0", what, n);
    TC_CHECK_ARG(arr || n == 0, "%s is NULL", what);
    return TC_OK;
}

static tc_status check_first(tc__mt_build *b, const tc_tensor *t, const char *what, int i)
{
    if (i == 0) {
        if (!tc_dtype_is_floating(t->dtype))
            return tc__fail(TC_ERROR_DTYPE, "%s[0] is %s: optimizers take floating tensors", what,
                            tc_dtype_string(t->dtype));
        b->l.dtype = t->dtype;
        b->device = t->storage->device;
    }
    if (t->dtype != b->l.dtype)
        return tc__fail(TC_ERROR_DTYPE, "%s[%d] is %s, %s[0] %s: a list has one dtype", what, i,
                        tc_dtype_string(t->dtype), what, tc_dtype_string(b->l.dtype));
    if (t->storage->device.type != b->device.type || t->storage->device.index != b->device.index)
        return tc__fail(TC_ERROR_DEVICE_MISMATCH,
                        "%s[%d] is on another device than %s[0]: a list lives on one device", what,
                        i, what);
    b->numel[i] = tc__numel(t->ndim, t->sizes);
    return TC_OK;
}

static tc_status check_match(tc__mt_build *b, const tc_tensor *t, const char *what, int i)
{
    const tc_tensor *f = b->first[i];
    if (t->dtype != b->l.dtype)
        return tc__fail(TC_ERROR_DTYPE, "%s[%d] is %s where %s was expected", what, i,
                        tc_dtype_string(t->dtype), tc_dtype_string(b->l.dtype));
    if (t->storage->device.type != b->device.type || t->storage->device.index != b->device.index)
        return tc__fail(TC_ERROR_DEVICE_MISMATCH, "%s[%d] is on another device than the list", what,
                        i);
    bool same = t->ndim == f->ndim;
    for (int d = 0; same && d < t->ndim; d++)
        same = t->sizes[d] == f->sizes[d];
    if (!same)
        return tc__fail(TC_ERROR_SHAPE, "%s[%d] has other sizes than the tensor it goes with", what,
                        i);
    return TC_OK;
}

tc_status tc__mt_build_slot(tc__mt_build *b, int slot, const tc_tensor *const *ts, const char *what)
{
    TC_TRY(tc__mt_check_count(ts, b->l.n, what));
    bool first = b->first == NULL;
    for (int i = 0; i < b->l.n; i++) {
        const tc_tensor *t = ts[i];
        if (!t)
            return tc__fail(TC_ERROR_INVALID_ARGUMENT, "%s[%d] is NULL", what, i);
        TC_TRY(tc__tensor_check(t, "tc_tensor"));
        TC_TRY(first ? check_first(b, t, what, i) : check_match(b, t, what, i));
        TC_CHECK_ARG(tc__is_contiguous(t),
                     "%s[%d] is not contiguous: the kernels walk each tensor as a flat array", what,
                     i);
        b->ptr[slot][i] = tc__data(t);
    }
    if (first)
        b->first = ts;
    b->l.ptr[slot] = b->ptr[slot];
    return TC_OK;
}

tc_status tc__mt_scalar(const tc_tensor *t, tc_device device, const char *what, float **out)
{
    *out = NULL;
    if (!t)
        return TC_OK;
    TC_TRY(tc__tensor_check(t, "tc_tensor"));
    if (t->dtype != TC_FLOAT32)
        return tc__fail(TC_ERROR_DTYPE, "%s is %s: it must be float32", what,
                        tc_dtype_string(t->dtype));
    if (tc__numel(t->ndim, t->sizes) != 1)
        return tc__fail(TC_ERROR_SHAPE, "%s must have one element", what);
    if (t->storage->device.type != device.type || t->storage->device.index != device.index)
        return tc__fail(TC_ERROR_DEVICE_MISMATCH, "%s is on another device than the tensors", what);
    *out = (float *)tc__data(t);
    return TC_OK;
}

tc_status tc__optim_backend_of(tc_device device, const tc__optim_backend **out)
{
    if (device.type == TC_CPU) {
        *out = &tc__cpu_optim_backend;
        return TC_OK;
    }
    *out = tc__dev()->optim;
    if (!*out)
        return tc__no_backend();
    return TC_OK;
}

tc_status tc__mt_publish(const tc__mt_build *b, unsigned write_slots,
                         const tc__mt_scalar_use *scalars, int n_scalars, const char *what)
{
    if (b->device.type == TC_CPU || !tc__access_on())
        return TC_OK;
    int n = n_scalars;
    for (int s = 0; s < TC__MT_SLOTS; s++)
        n += b->l.ptr[s] ? b->l.n : 0;
    tc__span *sp = calloc((size_t)(n > 0 ? n : 1), sizeof *sp);
    if (!sp)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "no memory to declare a list's accesses");
    int k = 0;
    for (int s = 0; s < TC__MT_SLOTS; s++) {
        if (!b->l.ptr[s])
            continue;
        tc_dtype dt = s == TC__MT_STEP ? TC_FLOAT32 : b->l.dtype;
        for (int i = 0; i < b->l.n; i++) {
            int64_t numel = s == TC__MT_STEP ? 1 : b->numel[i];
            tc__span_dense(b->ptr[s][i], (size_t)numel * tc_dtype_size(dt), dt, 1, NULL,
                           (write_slots >> s) & 1u, &sp[k++]);
        }
    }
    for (int i = 0; i < n_scalars; i++)
        if (scalars[i].ptr)
            tc__span_dense(scalars[i].ptr, tc_dtype_size(scalars[i].dtype), scalars[i].dtype, 1,
                           NULL, scalars[i].write, &sp[k++]);
    int dev = b->device.index;
    tc__access_op op = {
        .dev = dev, .stream = tc__dev()->current_stream(dev), .spans = sp, .n = k, .what = what};
    tc_status st = tc__access_op_publish(&op);
    free(sp);
    return st;
}

/* ---- foreach ------------------------------------------------------------------------ */

/* One foreach op over self (and a, b where the op reads them). */
static tc_status run_foreach(tc_tensor *const *self, const tc_tensor *const *a,
                             const tc_tensor *const *b, int n, tc__foreach_args *args,
                             const tc_tensor *scalar)
{
    TC_TRY(tc__mt_check_count(self, n, "self"));
    if (tc__foreach_reads_a(args->op))
        TC_TRY(tc__mt_check_count(a, n, args->op == TC__FE_LERP ? "end" : "other"));
    if (tc__foreach_reads_b(args->op))
        TC_TRY(tc__mt_check_count(b, n, "tensor2"));
    if (args->op == TC__FE_MUL_TENSOR)
        TC_TRY(tc__tensor_check(scalar, "tc_tensor scalar"));
    if (n == 0)
        return TC_OK;
    tc__mt_build bl;
    TC_TRY(tc__mt_build_init(&bl, n));
    tc_status st = tc__mt_build_slot(&bl, 0, (const tc_tensor *const *)self, "self");
    if (st == TC_OK && tc__foreach_reads_a(args->op))
        st = tc__mt_build_slot(&bl, 1, a, args->op == TC__FE_LERP ? "end" : "other");
    if (st == TC_OK && tc__foreach_reads_b(args->op))
        st = tc__mt_build_slot(&bl, 2, b, "tensor2");
    if (st == TC_OK && args->op == TC__FE_MUL_TENSOR) {
        bool ok_dt = scalar->dtype == TC_FLOAT32 || scalar->dtype == bl.l.dtype;
        if (!ok_dt)
            st = tc__fail(TC_ERROR_DTYPE, "scalar is %s: it must be float32 or the list's %s",
                          tc_dtype_string(scalar->dtype), tc_dtype_string(bl.l.dtype));
        else if (tc__numel(scalar->ndim, scalar->sizes) != 1)
            st = tc__fail(TC_ERROR_SHAPE, "scalar must have one element");
        else if (scalar->storage->device.type != bl.device.type ||
                 scalar->storage->device.index != bl.device.index)
            st = tc__fail(TC_ERROR_DEVICE_MISMATCH, "scalar is on another device than self");
        for (int i = 0; st == TC_OK && i < n; i++) /* read by every block while written */
            if (tc__overlap_of(self[i], scalar) != TC__OVERLAP_NONE)
                st = tc__fail(TC_ERROR_INVALID_ARGUMENT, "scalar shares memory with self[%d]", i);
        args->scalar_ptr = tc__data(scalar);
        args->scalar_dtype = scalar->dtype;
    }
    const tc__optim_backend *be = NULL;
    if (st == TC_OK)
        st = tc__optim_backend_of(bl.device, &be);
    tc__mt_scalar_use su = {args->scalar_ptr, args->scalar_dtype, false};
    if (st == TC_OK)
        st = tc__mt_publish(&bl, 1u, &su, 1, "foreach kernel");
    if (st == TC_OK)
        st = be->apply(bl.device.index, &bl.l, args);
    tc__mt_build_free(&bl);
    return st;
}

static tc_status foreach_scalar(tc_tensor *const *self, int n, tc__foreach_op op, double s)
{
    tc__foreach_args a = {.op = op, .alpha = s};
    return run_foreach(self, NULL, NULL, n, &a, NULL);
}

tc_status tc_foreach_zero_(tc_tensor *const *self, int n)
{
    TC_API_BEGIN;
    return foreach_scalar(self, n, TC__FE_ZERO, 0);
}

tc_status tc_foreach_add_scalar_(tc_tensor *const *self, int n, double scalar)
{
    TC_API_BEGIN;
    return foreach_scalar(self, n, TC__FE_ADD_SCALAR, scalar);
}

tc_status tc_foreach_mul_scalar_(tc_tensor *const *self, int n, double scalar)
{
    TC_API_BEGIN;
    return foreach_scalar(self, n, TC__FE_MUL_SCALAR, scalar);
}

tc_status tc_foreach_sqrt_(tc_tensor *const *self, int n)
{
    TC_API_BEGIN;
    return foreach_scalar(self, n, TC__FE_SQRT, 0);
}

tc_status tc_foreach_mul_tensor_(tc_tensor *const *self, int n, const tc_tensor *scalar)
{
    TC_API_BEGIN;
    tc__foreach_args a = {.op = TC__FE_MUL_TENSOR};
    return run_foreach(self, NULL, NULL, n, &a, scalar);
}

tc_status tc_foreach_add_list_(tc_tensor *const *self, const tc_tensor *const *other, int n,
                               double alpha)
{
    TC_API_BEGIN;
    tc__foreach_args a = {.op = TC__FE_ADD_LIST, .alpha = alpha};
    return run_foreach(self, other, NULL, n, &a, NULL);
}

tc_status tc_foreach_mul_list_(tc_tensor *const *self, const tc_tensor *const *other, int n)
{
    TC_API_BEGIN;
    tc__foreach_args a = {.op = TC__FE_MUL_LIST};
    return run_foreach(self, other, NULL, n, &a, NULL);
}

tc_status tc_foreach_addcmul_(tc_tensor *const *self, const tc_tensor *const *t1,
                              const tc_tensor *const *t2, int n, double value)
{
    TC_API_BEGIN;
    tc__foreach_args a = {.op = TC__FE_ADDCMUL, .alpha = value};
    return run_foreach(self, t1, t2, n, &a, NULL);
}

tc_status tc_foreach_addcdiv_(tc_tensor *const *self, const tc_tensor *const *t1,
                              const tc_tensor *const *t2, int n, double value)
{
    TC_API_BEGIN;
    tc__foreach_args a = {.op = TC__FE_ADDCDIV, .alpha = value};
    return run_foreach(self, t1, t2, n, &a, NULL);
}

tc_status tc_foreach_lerp_(tc_tensor *const *self, const tc_tensor *const *end, int n,
                           double weight)
{
    TC_API_BEGIN;
    tc__foreach_args a = {.op = TC__FE_LERP, .alpha = weight};
    return run_foreach(self, end, NULL, n, &a, NULL);
}

tc_status tc_optimizer_zero_grad(tc_tensor *const *grads, int n)
{
    TC_API_BEGIN;
    return foreach_scalar(grads, n, TC__FE_ZERO, 0);
}

/* ---- norms and clip_grad_norm_ ---------------------------------------------------------- */

/* The per-tensor norms of a checked list into a new 1-d tensor. */
static tc_status norms_of(const tc__mt_build *bl, double ord, tc_tensor **out)
{
    const tc__optim_backend *be;
    TC_TRY(tc__optim_backend_of(bl->device, &be));
    int64_t n = bl->l.n;
    tc_tensor *t;
    TC_TRY(tc__new_tensor(1, &n, bl->l.dtype, bl->device, false, &t));
    tc__mt_scalar_use su = {tc__data(t), bl->l.dtype, true}; /* the first norm stands for all */
    tc_status st = tc__mt_publish(bl, 0, &su, 1, "foreach_norm kernel");
    if (st == TC_OK)
        st = be->norms(bl->device.index, &bl->l, ord, tc__data(t));
    if (st != TC_OK) {
        tc_tensor_release(t);
        return st;
    }
    *out = t;
    return TC_OK;
}

static tc_status check_ord(double ord, const char *what)
{
    TC_CHECK_ARG(ord == 2.0 || (isinf(ord) && ord > 0),
                 "%s is %g: tcuda takes the 2-norm and the infinity norm", what, ord);
    return TC_OK;
}

tc_status tc_foreach_norm(const tc_tensor *const *self, int n, double ord, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_TRY(tc__mt_check_count(self, n, "self"));
    TC_CHECK_ARG(n >= 1, "self is empty: torch._foreach_norm needs at least one tensor");
    TC_TRY(check_ord(ord, "ord"));
    TC_CHECK_ARG(out, "out is NULL");
    tc__mt_build bl;
    TC_TRY(tc__mt_build_init(&bl, n));
    tc_status st = tc__mt_build_slot(&bl, 0, self, "self");
    if (st == TC_OK)
        st = norms_of(&bl, ord, out);
    tc__mt_build_free(&bl);
    return st;
}

/* Checks total's value on the host (error_if_nonfinite: a sync point). */
static tc_status check_finite(const tc_tensor *total, double ord)
{
    double v;
    TC_TRY(tc_tensor_item(total, &v));
    if (!isfinite(v))
        return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                        "the total norm of order %g of the gradients is non-finite (%g), so it "
                        "cannot be clipped; error_if_nonfinite=false skips this check",
                        ord, v);
    return TC_OK;
}

/* clip_grad_norm_ over a checked, non-empty list. */
static tc_status clip(tc__mt_build *bl, double max_norm, double ord, bool check, tc_tensor **out)
{
    const tc__optim_backend *be;
    TC_TRY(tc__optim_backend_of(bl->device, &be));
    tc_tensor *norms = NULL, *total = NULL, *coef = NULL;
    tc_status st = norms_of(bl, ord, &norms);
    if (st == TC_OK)
        st = tc__new_tensor(0, NULL, bl->l.dtype, bl->device, false, &total);
    if (st == TC_OK)
        st = tc__new_tensor(0, NULL, bl->l.dtype, bl->device, false, &coef);
    if (st == TC_OK && tc__access_on()) { /* total and coefficient written */
        tc__mt_scalar_use su[2] = {{tc__data(total), bl->l.dtype, true},
                                   {tc__data(coef), bl->l.dtype, true}};
        tc__mt_build nb = {.l = {.dtype = bl->l.dtype}, .device = bl->device};
        st = tc__mt_publish(&nb, 0, su, 2, "clip_grad_norm_ kernel");
    }
    if (st == TC_OK)
        st = be->clip_coef(bl->device.index, bl->l.dtype, tc__data(norms), bl->l.n, ord, max_norm,
                           tc__data(total), tc__data(coef));
    if (st == TC_OK && check)
        st = check_finite(total, ord);
    if (st == TC_OK) {
        tc__foreach_args a = {
            .op = TC__FE_MUL_TENSOR, .scalar_ptr = tc__data(coef), .scalar_dtype = bl->l.dtype};
        tc__mt_scalar_use cu = {a.scalar_ptr, a.scalar_dtype, false};
        st = tc__mt_publish(bl, 1u, &cu, 1, "foreach kernel");
        if (st == TC_OK)
            st = be->apply(bl->device.index, &bl->l, &a);
    }
    tc_tensor_release(norms);
    tc_tensor_release(coef);
    if (st != TC_OK) {
        tc_tensor_release(total);
        return st;
    }
    *out = total;
    return TC_OK;
}

tc_status tc_clip_grad_norm_(tc_tensor *const *grads, int n, double max_norm, double norm_type,
                             bool error_if_nonfinite, tc_tensor **total_norm)
{
    TC_API_BEGIN;
    TC_TRY(tc__mt_check_count(grads, n, "grads"));
    TC_TRY(check_ord(norm_type, "norm_type"));
    TC_CHECK_ARG(!isnan(max_norm), "max_norm is NaN");
    TC_CHECK_ARG(total_norm, "total_norm is NULL");
    if (n == 0) /* PyTorch: torch.tensor(0.0) */
        return tc_tensor_zeros(0, NULL, TC_FLOAT32, (tc_device){TC_CPU, -1}, total_norm);
    tc__mt_build bl;
    TC_TRY(tc__mt_build_init(&bl, n));
    tc_status st = tc__mt_build_slot(&bl, 0, (const tc_tensor *const *)grads, "grads");
    if (st == TC_OK)
        st = clip(&bl, max_norm, norm_type, error_if_nonfinite, total_norm);
    tc__mt_build_free(&bl);
    return st;
}
