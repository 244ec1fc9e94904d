/* Captures that order their graph by data (TC_GRAPH_ORDER_DATA,
 * graph_order.c), as graph capture starts and ends them; they hear of each
 * operation, its scratch memory and its cuBLAS workspace through the access
 * layer (access/access.h). Not installed. */
#ifndef TCUDA_GRAPH_ORDER_H
#define TCUDA_GRAPH_ORDER_H

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Right after cudaStreamBeginCapture on cs: from now on each tcuda operation
 * queued on cs depends only on the earlier work whose memory it touches. */
tc_status tc__graph_order_begin(int device, cudaStream_t cs);
/* Right before cudaStreamEndCapture on cs: stops ordering and gives back its
 * cuBLAS workspaces. An error when ordering failed (a CUDA call refused it):
 * the capture must then be discarded, its edges may be incomplete. A no-op
 * for a capture that was not ordered. */
tc_status tc__graph_order_end(cudaStream_t cs);

#ifdef __cplusplus
}
#endif

#endif
