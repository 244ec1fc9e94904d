/* Captures that order their graph by data (TC_GRAPH_ORDER_DATA,
 * graph_order.c), as the rest of the CUDA side calls into them: the capture's
 * start and end, memory the allocator hands out inside an operation, and the
 * cuBLAS workspace of a GEMM. Not installed. */
#ifndef TCUDA_GRAPH_ORDER_H
#define TCUDA_GRAPH_ORDER_H

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stddef.h>

#include "sanitizer/sanitizer_internal.h"

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

/* Inside an operation of an ordered capture on `stream`: the allocator handed
 * out [ptr, ptr + bytes) (scratch, a workspace). The operation's later nodes
 * then wait for the earlier users of that memory. Call only when
 * tc__graph_order_depth is not 0. */
void tc__graph_order_scratch(cudaStream_t stream, const void *ptr, size_t bytes);

/* Inside an operation of an ordered capture on `stream`: true and a cuBLAS
 * workspace of `want` bytes for one GEMM (*ws), chosen among a few the
 * capture keeps so that GEMMs on independent branches do not share one; the
 * GEMM's nodes wait for the earlier users of the one it gets. False outside
 * such an operation, or when no memory was left for a workspace: the GEMM
 * then uses cuBLAS's own workspace and, in an ordered capture, waits for
 * the earlier GEMMs that used it. */
bool tc__graph_order_workspace(int device, cudaStream_t stream, size_t want, void **ws);

#ifdef __cplusplus
}
#endif

#endif
