/* tc_tensor_matmul: shape and dtype checks, batch broadcasting, then the
 * backend's matmul on dense operands (non-dense inputs are made contiguous
 * first). Two 2-d operands of which one is not dense (a transposed view,
 * as a backward pass makes) go to tc_tensor_bmm instead, whose GEMM reads a
 * transposed matrix in place with a transpose flag, as PyTorch's mm does,
 * instead of copying it first. The device's BLAS handle
 * (tc_current_blas_handle) comes through the device seam. */
#include "tcuda/nn.h"
#include "tcuda/shape.h"
#include "tensor_internal.h"

/* a [m, k] @ b [k, n] as one bmm of a batch of 1. */
static tc_status matmul_by_bmm(const tc_tensor *a, const tc_tensor *b, const int64_t *osz,
                               tc_tensor **out)
{
    tc_tensor *a3 = NULL, *b3 = NULL, *r3 = NULL;
    tc_status st = tc_tensor_unsqueeze(a, 0, &a3);
    if (st == TC_OK)
        st = tc_tensor_unsqueeze(b, 0, &b3);
    if (st == TC_OK)
        st = tc_tensor_bmm(a3, b3, &r3);
    if (st == TC_OK)
        st = tc_tensor_view(r3, 2, osz, out);
    tc_tensor_release(a3);
    tc_tensor_release(b3);
    tc_tensor_release(r3);
    return st;
}

tc_status tc_tensor_matmul(const tc_tensor *a, const tc_tensor *b, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_TRY(tc__tensor_check(a, "tc_tensor a"));
    TC_TRY(tc__tensor_check(b, "tc_tensor b"));
    TC_CHECK_ARG(out, "out is NULL");
    TC_TRY(tc__check_same_device("tc_tensor_matmul", a, b));
    if (a->dtype != b->dtype || !tc_dtype_is_floating(a->dtype))
        return tc__fail(TC_ERROR_DTYPE,
                        "tc_tensor_matmul: needs two tensors of the same floating dtype, got %s "
                        "and %s",
                        tc_dtype_string(a->dtype), tc_dtype_string(b->dtype));
    if (a->ndim < 2 || a->ndim > 3 || b->ndim < 2 || b->ndim > 3)
        return tc__fail(TC_ERROR_SHAPE,
                        "tc_tensor_matmul: needs 2-d or 3-d (batched) tensors, "
                        "got %d-d and %d-d",
                        a->ndim, b->ndim);
    int64_t m = a->sizes[a->ndim - 2], k = a->sizes[a->ndim - 1];
    int64_t k2 = b->sizes[b->ndim - 2], n = b->sizes[b->ndim - 1];
    int64_t ba = a->ndim == 3 ? a->sizes[0] : 1, bb = b->ndim == 3 ? b->sizes[0] : 1;
    if (k != k2)
        return tc__fail(TC_ERROR_SHAPE,
                        "tc_tensor_matmul: a is %lldx%lld and b is %lldx%lld: "
                        "the inner sizes differ",
                        (long long)m, (long long)k, (long long)k2, (long long)n);
    if (ba != bb && ba != 1 && bb != 1)
        return tc__fail(TC_ERROR_SHAPE,
                        "tc_tensor_matmul: batch sizes %lld and %lld do not "
                        "broadcast",
                        (long long)ba, (long long)bb);
    int64_t batch = ba > bb ? ba : bb;
    int ondim = a->ndim == 3 || b->ndim == 3 ? 3 : 2;
    int64_t osz[3] = {batch, m, n}, numel; /* a's rows by b's columns may overflow */
    TC_TRY(tc__check_shape(ondim, ondim == 3 ? osz : osz + 1, tc_dtype_size(a->dtype), &numel));
    const tc__backend *be = tc__backend_of(a->storage->device);
    if (!be)
        return TC_ERROR_NO_DEVICE;
    if (ondim == 2 && k > 0 && m * n > 0 &&
        (!tc_tensor_is_contiguous(a) || !tc_tensor_is_contiguous(b)))
        return matmul_by_bmm(a, b, osz + 1, out);
    tc_tensor *ac = NULL, *bc = NULL, *res = NULL;
    tc_status st = tc_tensor_contiguous(a, &ac);
    if (st == TC_OK)
        st = tc_tensor_contiguous(b, &bc);
    if (st == TC_OK)
        st = tc__new_tensor(ondim, ondim == 3 ? osz : osz + 1, a->dtype, a->storage->device, false,
                            &res);
    if (st == TC_OK && batch * m * n > 0) {
        if (k == 0) {
            tc__fill zero = {0, 0, 0};
            st = be->fill(a->storage->device.index, a->dtype, tc__data(res), batch * m * n, zero);
        } else {
            st = be->matmul(a->storage->device.index, a->dtype, tc__data(ac), tc__data(bc),
                            tc__data(res), batch, m, n, k, ba == 1 ? 0 : m * k,
                            bb == 1 ? 0 : k * n);
        }
    }
    tc_tensor_release(ac);
    tc_tensor_release(bc);
    if (st != TC_OK) {
        tc_tensor_release(res);
        return st;
    }
    *out = res;
    return TC_OK;
}

tc_status tc_current_blas_handle(void **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    return tc__dev()->blas_handle(out);
}
