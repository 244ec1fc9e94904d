/* Process groups, the part without CUDA (dist_env.c): option checks and the
 * TCP rendezvous. Not installed; the NCCL side is src/dist/cuda/dist.c. */
#ifndef TCUDA_DIST_INTERNAL_H
#define TCUDA_DIST_INTERNAL_H

#include <stddef.h>

#include "tcuda/dist.h"

#ifdef __cplusplus
extern "C" {
#endif

/* TC_ERROR_INVALID_ARGUMENT naming the first bad field. */
tc_status tc__dist_check_options(const tc_dist_options *o);
/* Rank 0 sends blob[0..n) to every other rank, which receive it into blob;
 * returns when all have it (rank 0) or it arrived, or TC_ERROR_IO after
 * o->timeout_s (connecting included: never later than the deadline, even
 * to a host that does not answer). Rank 0 listens on o->master_port on every
 * interface; the others connect to o->master_addr. A world of one returns
 * at once. */
tc_status tc__dist_rendezvous(const tc_dist_options *o, void *blob, size_t n);

#ifdef __cplusplus
}
#endif

#endif
