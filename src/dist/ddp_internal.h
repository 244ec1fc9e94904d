/* DDP's bucket assignment, shared by tc_ddp_bucket_assignment
 * (ddp_buckets.c) and the reducer (cuda/ddp.c). Internal. */
#ifndef TCUDA_DDP_INTERNAL_H
#define TCUDA_DDP_INTERNAL_H

#include <stddef.h>

#include "tcuda/dtype.h"
#include "tcuda/status.h"

/* bucket_of[i] (n entries) = gradient i's bucket in reduction order, and
 * *num_buckets; caps of 0 are the defaults. The arrays are not checked;
 * dtypes must be valid. TC_ERROR_OUT_OF_MEMORY when host memory runs out,
 * leaving bucket_of half written. */
tc_status tc__ddp_assign(const size_t *nbytes, const tc_dtype *dtypes, int n, size_t first_cap,
                         size_t cap, int *bucket_of, int *num_buckets);

#endif
