/* tc_nn_cross_entropy (nn.h): checks, the targets' range on the CPU, then
 * the device's fused kernel (nn_internal.h). Its gradient, and the fused
 * forward and backward, are tensor_nn_backward.c's. */
#include <stdlib.h>

#include "nn_internal.h"
#include "tcuda/nn.h"
#include "tensor_internal.h"

/* ---- cross_entropy --------------------------------------------------------------- */

tc_status tc__nn_check_targets(const char *fn, const tc_tensor *target, int64_t n, int64_t c,
                               int64_t ignore)
{
    int64_t *t = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!t)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "%s: no memory for %lld targets", fn, (long long)n);
    tc_status st = tc_tensor_to_host(target, TC_INT64, t);
    for (int64_t i = 0; st == TC_OK && i < n; i++)
        if (t[i] != ignore && (t[i] < 0 || t[i] >= c))
            st = tc__fail(TC_ERROR_INVALID_ARGUMENT,
                          "%s: target %lld (row %lld) is out of range: classes are 0..%lld "
                          "(ignore_index %lld)",
                          fn, (long long)t[i], (long long)i, (long long)c - 1, (long long)ignore);
    free(t);
    return st;
}

tc_status tc_nn_cross_entropy(const tc_tensor *logits, const tc_tensor *target,
                              int64_t ignore_index, tc_reduction reduction, tc_tensor **out)
{
    TC_API_BEGIN;
    const char *fn = "tc_nn_cross_entropy";
    TC_TRY(tc__nn_check_float(fn, logits, "tc_tensor logits"));
    TC_TRY(tc__tensor_check(target, "tc_tensor target"));
    TC_CHECK_ARG(out, "%s: out is NULL", fn);
    TC_TRY(tc__check_same_device(fn, logits, target));
    if (target->dtype != TC_INT64)
        return tc__fail(TC_ERROR_DTYPE, "%s: target must hold int64 class indices, got %s", fn,
                        tc_dtype_string(target->dtype));
    TC_CHECK_ARG(reduction == TC_REDUCTION_NONE || reduction == TC_REDUCTION_MEAN ||
                     reduction == TC_REDUCTION_SUM,
                 "%s: reduction %d is not TC_REDUCTION_NONE, _MEAN or _SUM", fn, (int)reduction);
    if (logits->ndim != 1 && logits->ndim != 2)
        return tc__fail(TC_ERROR_SHAPE, "%s: logits must be [N, C] or [C], got a %d-d tensor", fn,
                        logits->ndim);
    int64_t n = logits->ndim == 2 ? logits->sizes[0] : 1, c = logits->sizes[logits->ndim - 1];
    if (target->ndim != logits->ndim - 1 || (target->ndim == 1 && target->sizes[0] != n))
        return tc__fail(TC_ERROR_SHAPE,
                        "%s: target must be [N] for logits [N, C] (0-d for [C]); got a %d-d "
                        "target for %lld rows",
                        fn, target->ndim, (long long)n);
    tc_device dev = logits->storage->device;
    const tc__nn_backend *be = tc__nn_of(dev);
    if (!be)
        return TC_ERROR_NO_DEVICE;
    if (dev.type == TC_CPU)
        TC_TRY(tc__nn_check_targets(fn, target, n, c, ignore_index));
    /* the losses ([N], or 0-d for logits [C]) or their sum or mean, 0-d */
    bool none = reduction == TC_REDUCTION_NONE;
    int rank = none && logits->ndim == 2 ? 1 : 0;
    tc_tensor *xc = NULL, *tcn = NULL, *res = NULL;
    tc_status st = tc_tensor_contiguous(logits, &xc);
    if (st == TC_OK)
        st = tc_tensor_contiguous(target, &tcn);
    if (st == TC_OK)
        st = tc__new_tensor(rank, &n, logits->dtype, dev, false, &res);
    if (st == TC_OK && (n > 0 || !none)) {
        tc__nn_ce a = {.dtype = logits->dtype,
                       .logits = tc__data(xc),
                       .target = tc__data(tcn),
                       .out = tc__data(res),
                       .n = n,
                       .c = c,
                       .ignore_index = ignore_index,
                       .reduction = reduction};
        st = be->cross_entropy(dev.index, &a);
    }
    tc_tensor_release(xc);
    tc_tensor_release(tcn);
    return tc__nn_finish(st, res, out);
}
