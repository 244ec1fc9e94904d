/* Programmatic edges into tcuda's kernels in captured graphs (graph_pdl.c).
 * Not installed. */
#ifndef TCUDA_GRAPH_PDL_H
#define TCUDA_GRAPH_PDL_H

#include <cuda_runtime_api.h>
#include <stdatomic.h>

#include "tcuda/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Makes every edge of `graph` (captured for `device`) from a kernel node
 * into a tcuda kernel node programmatic, on compute capability 9.0 and
 * later (elsewhere nothing changes). On failure the graph is unusable. */
tc_status tc__graph_programmatic_edges(int device, cudaGraph_t graph);

/* For tests: the edges made programmatic so far in this process. */
extern _Atomic long tc__graph_pdl_edges;

#ifdef __cplusplus
}
#endif

#endif
