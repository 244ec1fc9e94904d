/* What the CUDA graph files (graph*.c) share: the tc_graph object and the
 * calls one part makes into another. Private to them; what the rest of the
 * CUDA side knows about captures is in runtime/cuda/capture.h. Not
 * installed. */
#ifndef TCUDA_GRAPH_OBJECT_H
#define TCUDA_GRAPH_OBJECT_H

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "access/access.h"
#include "runtime/cuda/capture.h"
#include "tcuda/graph.h"
#include "tcuda/random.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { G_EMPTY, G_CAPTURING, G_CAPTURED };

struct tc_graph {
    uint32_t magic; /* first: tc__handle_check */
    int state;
    int device;
    tc_capture_mode mode;
    tc_graph_order order; /* kept across resets: tc_graph_set_order */
    cudaStream_t cs;      /* the CUDA handle of the capture stream, while capturing */
    pthread_t thread;     /* the capturing thread */
    uint64_t pool_user, pool_alloc;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    tc_generator *gen; /* registered with the capture, or NULL */
    uint64_t *gen_buf;
    uint64_t gen_blocks;
    bool invalidated;              /* while in the list, under cap_mu */
    char why[512];                 /* likewise */
    struct tc_graph *next;         /* captures underway */
    tc__access_recording *watched; /* what the access watchers kept of the capture */
};

/* ---- graph.c ------------------------------------------------------------ */

/* TC_OK when g is a live graph handle. */
tc_status tc__graph_check(const tc_graph *g);
/* The error of a call that needs a CAPTURED graph. */
tc_status tc__graph_not_captured(const tc_graph *g);
/* Makes g EMPTY: executable, graph, generator buffer, pool reference. */
void tc__graph_drop(tc_graph *g);
/* Instantiates graph for g's device (AutoFreeOnLaunch); *out on success. */
tc_status tc__graph_instantiate(tc_graph *g, cudaGraph_t graph, cudaGraphExec_t *out);
/* tcuda's side stream of device d (captures by the guard and graphed callables). */
tc_status tc__graph_side_stream(int d, tc_stream **out);
/* tcuda's update stream of device d (tc_graph_update's captures). */
tc_status tc__graph_update_stream(int d, tc_stream **out);

/* ---- graph_capture.c ---------------------------------------------------- */

/* Starts CUDA stream capture on g->cs with its generator, sync-check entry and sanitizer recording. */
tc_status tc__graph_capture_start(tc_graph *g);
/* Ends the capture and the pool routing; *out the graph, *watched what the
 * access watchers kept of it. */
tc_status tc__graph_capture_finish(tc_graph *g, cudaGraph_t *out, uint64_t *blocks,
                                   tc__access_recording **watched);
/* TC_OK when g's capture may be ended by this thread. */
tc_status tc__graph_check_ender(const tc_graph *g);

/* ---- graph_pools.c ------------------------------------------------------ */

/* The last pool id handed out (ids above it were never made). */
extern _Atomic uint64_t tc__graph_last_pool_id;
/* A new pool id. */
uint64_t tc__graph_new_pool_id(void);
/* Takes a reference on pool `user` of `device` and routes cs's allocations to it. */
tc_status tc__graph_pool_enter(uint64_t user, int device, cudaStream_t cs, uint64_t *alloc);
/* Drops a reference; the last one releases the allocator's pool. */
void tc__graph_pool_leave(uint64_t user, int device);

#ifdef __cplusplus
}
#endif

#endif
