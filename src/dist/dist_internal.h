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
 * to a host that does not answer), naming the ranks that joined and those
 * missing. Rank 0 listens on o->master_port on every interface and serves
 * every connection at once: one that says nothing or garbage cannot delay
 * the group, and a well-formed hello it cannot take (another world size, a
 * rank out of range or already joined, another tcuda version) is refused
 * to that client alone (rank 0 warns and keeps waiting). A port rank 0
 * cannot have is TC_ERROR_IO at once. The others connect to o->master_addr;
 * one that reached something not answering as rank 0 of a tcuda group
 * within 5 s, or that rank 0 refused, fails then with TC_ERROR_IO naming
 * the address. A world of one returns at once. */
tc_status tc__dist_rendezvous(const tc_dist_options *o, void *blob, size_t n);

#ifdef __cplusplus
}
#endif

#endif
