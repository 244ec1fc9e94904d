/* CUDA graphs (include/tcuda/graph.h): the tc_graph object, its replay,
 * reset, destroy and debug dump, and the streams tcuda keeps for captures of
 * its own. The other parts are in files of their own:
 *   graph_capture.c   capture begin/end, its guard form and the sync check
 *   graph_pools.c     the graphs' private memory pools
 *   graph_update.c    in-place updates (tc_graph_update)
 *   graph_order.c     captures ordered by data (TC_GRAPH_ORDER_DATA)
 *   graph_pdl.c       programmatic edges into tcuda's kernels
 *   graph_callables.c graphed callables
 * graph_object.h is what they share; what the rest of the CUDA side knows
 * about captures is in runtime/cuda/capture.h.
 *
 * A tc_graph is EMPTY, CAPTURING or CAPTURED (graph_capture.c says how a
 * capture runs). The cudaGraph_t is kept after instantiation, for debug
 * dumps and updates. Every handle goes through tc__handle_check; destroyed
 * graphs are parked in a handle pool. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/env.h"
#include "base/handle_pool.h"
#include "runtime/cuda/cuda_internal.h"
#include "memory/cuda/device_alloc.h"
#include "graph_object.h"
#include "random/cuda/random_cuda.h"

#define TC_GRAPH_MAGIC 0x7c96a711u

static tc__handle_pool graph_pool = TC_HANDLE_POOL_INIT(struct tc_graph);

tc_status tc__graph_check(const tc_graph *g)
{
    return tc__handle_check(g, TC_GRAPH_MAGIC, "tc_graph");
}

/* Makes g EMPTY: executable, graph, generator buffer, pool reference. */
void tc__graph_drop(tc_graph *g)
{
    if (g->exec)
        (void)cudaGraphExecDestroy(g->exec);
    if (g->graph)
        (void)cudaGraphDestroy(g->graph);
    g->exec = NULL;
    g->graph = NULL;
    if (g->gen_buf)
        (void)tc__device_free(g->gen_buf); /* back to the pool, reused only by it */
    g->gen_buf = NULL;
    g->gen = NULL;
    g->gen_blocks = 0;
    tc__access_recording_free(g->watched);
    g->watched = NULL;
    if (g->state != G_EMPTY)
        tc__graph_pool_leave(g->pool_user, g->device);
    g->state = G_EMPTY;
}

tc_status tc__graph_instantiate(tc_graph *g, cudaGraph_t graph, cudaGraphExec_t *out)
{
    tc_device_guard dg = tc_device_guard_enter(g->device);
    TC_TRY(dg.status);
    cudaGraphExec_t exec = NULL;
    /* AutoFreeOnLaunch as PyTorch: work captured from libraries may allocate
     * with cudaMallocAsync (cuBLAS's workspace since CUDA 12.2) and not free
     * it in the graph; a relaunch then frees it first instead of failing */
    cudaError_t err = cudaGraphInstantiate(&exec, graph, cudaGraphInstantiateFlagAutoFreeOnLaunch);
    tc_device_guard_exit(&dg);
    if (err != cudaSuccess) {
        if (exec)
            (void)cudaGraphExecDestroy(exec);
        return tc__cuda_fail(err, "cudaGraphInstantiate", __FILE__, __LINE__);
    }
    *out = exec;
    return TC_OK;
}

/* ---- public: graphs ----------------------------------------------------- */

tc_status tc_graph_create(tc_graph **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    TC_TRY(tc__ensure_init());
    tc_graph *g = tc__handle_get(&graph_pool);
    if (!g)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory for a graph");
    g->magic = TC_GRAPH_MAGIC;
    g->state = G_EMPTY;
    g->device = -1;
    g->order = TC_GRAPH_ORDER_STREAM;
    *out = g;
    return TC_OK;
}

tc_status tc_graph_set_order(tc_graph *graph, tc_graph_order order)
{
    TC_API_BEGIN;
    TC_TRY(tc__graph_check(graph));
    TC_CHECK_ARG(order == TC_GRAPH_ORDER_STREAM || order == TC_GRAPH_ORDER_DATA,
                 "order %d is not TC_GRAPH_ORDER_STREAM or TC_GRAPH_ORDER_DATA", (int)order);
    if (graph->state == G_CAPTURING)
        return tc__fail(TC_ERROR_INVALID_STATE,
                        "a capture into this graph is underway; set the order before "
                        "tc_graph_capture_begin");
    graph->order = order;
    return TC_OK;
}

tc_status tc__graph_not_captured(const tc_graph *g)
{
    return tc__fail(TC_ERROR_INVALID_STATE, g->state == G_EMPTY
                                                ? "nothing was captured into the graph yet"
                                                : "the capture into the graph is still underway "
                                                  "(tc_graph_capture_end first)");
}

/* Queues a replay on the current stream of d (the current device). */
static tc_status launch(tc_graph *graph, int d)
{
    cudaStream_t s = tc__current_cuda_stream(d);
    if (TC_UNLIKELY(tc__access_on())) /* the captured accesses happen now, on s */
        TC_TRY(tc__access_replay(graph->watched, d, (void *)s));
    if (graph->gen && graph->gen_blocks)
        TC_TRY(tc__generator_replay_prologue(graph->gen, graph->gen_buf, graph->gen_blocks, s));
    cudaError_t err = cudaGraphLaunch(graph->exec, s);
    if (TC_UNLIKELY(err != cudaSuccess))
        return tc__cuda_fail(err, "cudaGraphLaunch", __FILE__, __LINE__);
    if (TC_UNLIKELY(tc__launch_blocking_enabled()))
        return tc__launch_check(s, "graph replay");
    return TC_OK;
}

tc_status tc_graph_replay(tc_graph *graph)
{
    TC_API_BEGIN;
    TC_TRY(tc__graph_check(graph));
    if (TC_UNLIKELY(graph->state != G_CAPTURED))
        return tc__graph_not_captured(graph);
    int d = graph->device;
    if (TC_UNLIKELY(tc__tls_device != d)) { /* the legacy stream (0) is the current device's */
        tc_device_guard dg = tc_device_guard_enter(d);
        TC_TRY(dg.status);
        tc_status st = launch(graph, d);
        tc_device_guard_exit(&dg);
        return st;
    }
    return launch(graph, d);
}

tc_status tc_graph_reset(tc_graph *graph)
{
    TC_API_BEGIN;
    TC_TRY(tc__graph_check(graph));
    if (graph->state == G_CAPTURING)
        return tc__fail(TC_ERROR_INVALID_STATE,
                        "a capture into the graph is underway; tc_graph_capture_end first");
    tc__graph_drop(graph);
    return TC_OK;
}

tc_status tc_graph_destroy(tc_graph *graph)
{
    TC_API_BEGIN;
    TC_TRY(tc__graph_check(graph));
    if (graph->state == G_CAPTURING) {
        TC_TRY(tc__graph_check_ender(graph));
        cudaGraph_t cg = NULL;
        uint64_t blocks;
        if (tc__graph_capture_finish(graph, &cg, &blocks, NULL) == TC_OK)
            (void)cudaGraphDestroy(cg);
        (void)cudaGetLastError();
    }
    tc__graph_drop(graph);
    tc__handle_put(&graph_pool, graph);
    return TC_OK;
}

tc_status tc_graph_debug_dump(const tc_graph *graph, const char *path)
{
    TC_API_BEGIN;
    TC_TRY(tc__graph_check(graph));
    TC_CHECK_ARG(path && *path, "path is %s", path ? "empty" : "NULL");
    if (graph->state != G_CAPTURED)
        return tc__graph_not_captured(graph);
    FILE *f = fopen(path, "w"); /* a clear message when the path cannot be written */
    if (!f)
        return tc__fail(TC_ERROR_IO, "cannot write '%s': %s", path, strerror(errno));
    fclose(f);
    cudaError_t err = cudaGraphDebugDotPrint(graph->graph, path, cudaGraphDebugDotFlagsVerbose);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        return tc__fail(TC_ERROR_IO, "could not write the graph to '%s': %s", path,
                        cudaGetErrorString(err));
    }
    return TC_OK;
}

bool tc_is_current_stream_capturing(void) { return tc__capture_current_stream(); }

/* ---- streams of tcuda's own --------------------------------------------- */

static pthread_mutex_t side_mu = PTHREAD_MUTEX_INITIALIZER;
static tc_stream *side_streams[TC_MAX_DEVICES], *update_streams[TC_MAX_DEVICES];

/* The stream of `slots` for device d, made on first use and never destroyed
 * (slots: side_streams, for captures by the guard and graphed callables, or
 * update_streams, for updates). */
static tc_status own_stream(tc_stream **slots, int d, tc_stream **out)
{
    pthread_mutex_lock(&side_mu);
    tc_status st = TC_OK;
    if (!slots[d])
        st = tc_stream_create(d, 0, &slots[d]);
    tc_stream *s = slots[d];
    pthread_mutex_unlock(&side_mu);
    if (st == TC_OK)
        *out = s;
    return st;
}

tc_status tc__graph_side_stream(int d, tc_stream **out) { return own_stream(side_streams, d, out); }
tc_status tc__graph_update_stream(int d, tc_stream **out)
{
    return own_stream(update_streams, d, out);
}
