/* DDP's bucket assignment (include/tcuda/ddp.h), which needs no GPU: the
 * reducer (dist/cuda/ddp.c) forms its buckets with it, and a program can
 * ask for it to see where its gradients go.
 *
 * PyTorch's rule for the buckets DDP uses from its second iteration on
 * (Reducer::rebuild_buckets, compute_bucket_assignment_by_size over the
 * gradients in the order backward made them ready): walk the gradients in
 * that order, each into the open bucket of its dtype; a bucket that
 * reaches its cap is closed, and that dtype's next bucket takes the next
 * cap (the first cap once, then the general one); the buckets left open
 * are closed at the end. Buckets are reduced in the order they closed.
 * tcuda takes the reverse of the parameters' order as the ready order (as
 * DDP's first buckets assume), so the small first bucket holds the last
 * parameters, whose gradients come first; the buckets left open go last,
 * in the order they opened (PyTorch's order there is its hash map's). */
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "ddp_internal.h"
#include "tcuda/ddp.h"

#define MIB ((size_t)1 << 20)

tc_ddp_options tc_ddp_options_default(void)
{
    return (tc_ddp_options){
        .bucket_cap_bytes = 25 * MIB, .first_bucket_cap_bytes = MIB, .broadcast_params = true};
}

tc_status tc__ddp_assign(const size_t *nbytes, const tc_dtype *dtypes, int n, size_t first_cap,
                         size_t cap, int *bucket_of, int *num_buckets)
{
    if (!first_cap)
        first_cap = MIB;
    if (!cap)
        cap = 25 * MIB;
    /* per dtype: its open bucket (a provisional number, in opening order),
     * its fill, whether its first bucket was closed */
    int open[TC_NUM_DTYPES];
    size_t fill[TC_NUM_DTYPES];
    bool past_first[TC_NUM_DTYPES];
    for (int d = 0; d < TC_NUM_DTYPES; d++)
        open[d] = -1, fill[d] = 0, past_first[d] = false;
    /* final[b]: provisional bucket b's place in reduction order, -1 while open */
    int *final = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    if (!final)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "no host memory for %d gradients' buckets", n);
    int nb = 0, closed = 0;
    for (int i = n - 1; i >= 0; i--) {
        int d = (int)dtypes[i];
        if (open[d] < 0) {
            final[nb] = -1;
            open[d] = nb++;
        }
        bucket_of[i] = open[d];
        fill[d] += nbytes[i];
        if (fill[d] >= (past_first[d] ? cap : first_cap)) {
            final[open[d]] = closed++;
            open[d] = -1;
            fill[d] = 0;
            past_first[d] = true;
        }
    }
    for (int b = 0; b < nb; b++) /* left open: last, in the order they opened */
        if (final[b] < 0)
            final[b] = closed++;
    for (int i = 0; i < n; i++)
        bucket_of[i] = final[bucket_of[i]];
    *num_buckets = nb;
    free(final);
    return TC_OK;
}

tc_status tc_ddp_bucket_assignment(const size_t *nbytes, const tc_dtype *dtypes, int n,
                                   size_t first_bucket_cap_bytes, size_t bucket_cap_bytes,
                                   int *bucket_of, int *num_buckets)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(n >= 0, "n is %d, not a count", n);
    TC_CHECK_ARG(num_buckets, "num_buckets is NULL");
    TC_CHECK_ARG(n == 0 || (nbytes && dtypes && bucket_of),
                 "nbytes, dtypes or bucket_of is NULL for %d gradients", n);
    for (int i = 0; i < n; i++)
        TC_CHECK_ARG((int)dtypes[i] >= 0 && (int)dtypes[i] < TC_NUM_DTYPES,
                     "dtypes[%d] is %d, not a tc_dtype", i, (int)dtypes[i]);
    int *tmp = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    if (!tmp)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "no host memory for %d gradients", n);
    int nb = 0;
    tc_status st = tc__ddp_assign(nbytes, dtypes, n, first_bucket_cap_bytes, bucket_cap_bytes, tmp,
                                  &nb);
    if (st == TC_OK) { /* written only on success */
        if (n)
            memcpy(bucket_of, tmp, sizeof(int) * (size_t)n);
        *num_buckets = nb;
    }
    free(tmp);
    return st;
}
