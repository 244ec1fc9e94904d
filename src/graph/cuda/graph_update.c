/* In-place updates of CUDA graphs (tc_graph_update): the update captures
 * the function again into the graph's pool and updates the executable
 * graph, or instantiates it again when the topology differs.
 *
 * An update captures on a stream tcuda keeps per device for updates, never
 * on the stream of the first capture: the user may have destroyed that one
 * since (and its handle may now name another stream). */
#include <stdio.h>
#include <string.h>

#include "runtime/cuda/cuda_internal.h"
#include "memory/cuda/device_alloc.h"
#include "graph_object.h"

/* Updates of graphs of one device take turns on its update stream (a stream
 * captures one thing at a time). */
static pthread_mutex_t update_mu[TC_MAX_DEVICES];
static pthread_once_t update_once = PTHREAD_ONCE_INIT;
static void update_mu_init(void)
{
    for (int d = 0; d < TC_MAX_DEVICES; d++)
        pthread_mutex_init(&update_mu[d], NULL);
}

/* Runs fn on `stream` (the device's update stream), captured into g's pool
 * in g's mode; *out gets the new graph. */
static tc_status recapture(tc_graph *g, tc_stream *stream, tc_graph_fn fn, void *ctx,
                           cudaGraph_t *out, uint64_t *blocks, tc__access_recording **watched)
{
    g->cs = stream->handle;
    TC_TRY(tc__device_pool_begin(g->device, g->pool_alloc, g->cs));
    tc_generator *old_gen = g->gen; /* the previous capture's, for its replays */
    tc_status st = tc__graph_capture_start(g);
    if (st != TC_OK) {
        (void)tc__device_pool_end(g->device, g->cs);
        g->gen = old_gen;
        return st;
    }
    tc_stream_guard sg = tc_stream_guard_enter(stream);
    st = sg.status == TC_OK ? fn(ctx) : sg.status;
    tc_stream_guard_exit(&sg);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", tc_last_error());
    cudaGraph_t cg = NULL;
    tc_status end = tc__graph_capture_finish(g, &cg, blocks, watched);
    if (st != TC_OK || end != TC_OK) {
        tc__access_recording_free(*watched);
        *watched = NULL;
        g->gen = old_gen;
        if (end == TC_OK)
            (void)cudaGraphDestroy(cg);
        return st != TC_OK ? tc__fail(st, "%s", msg) : end;
    }
    *out = cg;
    return TC_OK;
}

tc_status tc_graph_update(tc_graph *graph, tc_graph_fn fn, void *ctx, tc_graph_update_result *how)
{
    TC_API_BEGIN;
    TC_TRY(tc__graph_check(graph));
    TC_CHECK_ARG(fn, "fn is NULL");
    TC_CHECK_ARG(how, "how is NULL");
    if (graph->state != G_CAPTURED)
        return tc__graph_not_captured(graph);
    tc_stream *us;
    TC_TRY(tc__graph_update_stream(graph->device, &us));
    cudaGraph_t cg = NULL;
    uint64_t blocks = 0;
    tc__access_recording *watched = NULL;
    pthread_once(&update_once, update_mu_init);
    pthread_mutex_lock(&update_mu[graph->device]);
    tc_status rst = recapture(graph, us, fn, ctx, &cg, &blocks, &watched);
    pthread_mutex_unlock(&update_mu[graph->device]);
    TC_TRY(rst);
    cudaGraphExecUpdateResultInfo info;
    memset(&info, 0, sizeof info);
    tc_device_guard dg = tc_device_guard_enter(graph->device);
    cudaError_t err = cudaGraphExecUpdate(graph->exec, cg, &info);
    tc_device_guard_exit(&dg);
    tc_graph_update_result r = TC_GRAPH_UPDATE_RESULT_IN_PLACE;
    if (err != cudaSuccess) {
        (void)cudaGetLastError(); /* not sticky: the topology differs */
        cudaGraphExec_t exec;
        tc_status st = tc__graph_instantiate(graph, cg, &exec);
        if (st != TC_OK) {
            (void)cudaGraphDestroy(cg);
            tc__access_recording_free(watched);
            return st;
        }
        (void)cudaGraphExecDestroy(graph->exec);
        graph->exec = exec;
        r = TC_GRAPH_UPDATE_RESULT_REINSTANTIATED;
    }
    (void)cudaGraphDestroy(graph->graph);
    graph->graph = cg;
    graph->gen_blocks = blocks;
    tc__access_recording_free(graph->watched);
    graph->watched = watched;
    *how = r;
    return TC_OK;
}
