/* CUDA graph capture: tc_graph_capture_begin/end, the guard form, and the
 * sync check that refuses calls a capture forbids.
 *
 * A tc_graph is EMPTY, CAPTURING or CAPTURED. Capture is CUDA stream capture
 * on a stream tcuda made (never the legacy default stream), plus five things
 * set up before cudaStreamBeginCapture (so that no allocation, draw, sync
 * call or access on the stream can fall between the capture's start and
 * their watch) and undone, in reverse, after cudaStreamEndCapture or when
 * the start fails:
 * - memory: the caching allocator routes every allocation on the capturing
 *   stream to the graph's private pool (tc__device_pool_begin/end), which
 *   graph_pools.c keeps a reference on for each graph captured into it.
 * - random numbers: the device's default generator is put in capture mode
 *   (random/random_internal.h, random_cuda.c) with a 16-byte {seed, offset}
 *   buffer taken from the pool; each replay first queues the write of the
 *   generator's current state into it and advances the generator.
 * - synchronizing calls: core's sync check (base/env.h) is installed on
 *   the first capture; while captures are underway it refuses the calls the
 *   capture mode forbids and marks those captures invalidated, so that
 *   capture_end reports the call and leaves the graph empty.
 * - the access layer's watchers (the stream sanitizer) keep the accesses
 *   queued on the stream, to check them at each replay (access/access.h).
 * - a graph ordered by data (TC_GRAPH_ORDER_DATA) has its edges rebuilt
 *   from what each operation touches (graph_order.c).
 * Once captured, edges into tcuda's kernels become programmatic
 * (graph_pdl.c).
 * Captures underway are kept in a list under cap_mu (the sync check reads
 * it from any thread, and marks captures invalidated under it; a capture's
 * own thread reads that mark as it leaves the list, under cap_mu too); the
 * runtime counts them (runtime/cuda/capture.h) for its fast paths and keeps
 * the memory the allocators give back meanwhile until the last one ends.
 * The caching allocator itself takes no memory back while a private pool is
 * active (src/memory), and cudaMalloc runs in relaxed mode
 * (alloc_providers.c), as in PyTorch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/env.h"
#include "runtime/cuda/cuda_internal.h"
#include "memory/cuda/device_alloc.h"
#include "graph_object.h"
#include "graph_order.h"
#include "graph_pdl.h"
#include "random/cuda/random_cuda.h"

static pthread_mutex_t cap_mu = PTHREAD_MUTEX_INITIALIZER;
static tc_graph *capturing;

static const char *mode_name(tc_capture_mode m)
{
    return m == TC_CAPTURE_MODE_GLOBAL         ? "global"
           : m == TC_CAPTURE_MODE_THREAD_LOCAL ? "thread_local"
                                               : "relaxed";
}

/* ---- the sync check ----------------------------------------------------- */

/* Does a call that waits for `stream` conflict with capture g? */
static bool conflicts(const tc_graph *g, void *stream, bool own)
{
    if (stream == TC__SYNC_ALL_STREAMS || (stream && (cudaStream_t)stream == g->cs))
        return true;
    if (g->mode == TC_CAPTURE_MODE_GLOBAL)
        return true;
    /* thread_local: the capturing thread; relaxed: a wait for an unknown
     * stream (an event) on the capturing thread may be on the capture */
    return own && (g->mode == TC_CAPTURE_MODE_THREAD_LOCAL || !stream);
}

static tc_status sync_check(const char *what, void *stream)
{
    if (TC_LIKELY(!tc__capturing()))
        return TC_OK;
    const char *api = tc__api_name ? tc__api_name : "a tcuda call";
    pthread_t self = pthread_self();
    tc_graph *hit = NULL;
    pthread_mutex_lock(&cap_mu);
    for (tc_graph *g = capturing; g; g = g->next) {
        if (!conflicts(g, stream, pthread_equal(g->thread, self)))
            continue;
        if (!g->invalidated)
            snprintf(g->why, sizeof g->why, "%s (%s)", api, what);
        g->invalidated = true;
        hit = g;
    }
    int dev = hit ? hit->device : 0;
    tc_capture_mode mode = hit ? hit->mode : TC_CAPTURE_MODE_GLOBAL;
    pthread_mutex_unlock(&cap_mu);
    if (!hit)
        return TC_OK;
    return tc__fail(TC_ERROR_INVALID_STATE,
                    "%s cannot run during CUDA graph capture (a %s-mode capture is underway on "
                    "cuda:%d); the capture is invalidated: tc_graph_capture_end will report it "
                    "and leave the graph empty, to capture again without this call",
                    what, mode_name(mode), dev);
}

static pthread_once_t hook_once = PTHREAD_ONCE_INIT;
static void install_hook(void) { tc__sync_check_install(sync_check); }

/* ---- capture ------------------------------------------------------------- */

static enum cudaStreamCaptureMode cuda_mode(tc_capture_mode m)
{
    return m == TC_CAPTURE_MODE_GLOBAL         ? cudaStreamCaptureModeGlobal
           : m == TC_CAPTURE_MODE_THREAD_LOCAL ? cudaStreamCaptureModeThreadLocal
                                               : cudaStreamCaptureModeRelaxed;
}

/* Registers the default generator of g's device with the capture (its
 * buffer from the pool, kept across updates). A generator busy in another
 * capture is left out: draws with it are then refused during this one. */
static tc_status gen_begin(tc_graph *g)
{
    tc_generator *gen;
    TC_TRY(tc_default_generator((tc_device){TC_CUDA, g->device}, &gen));
    if (!g->gen_buf) {
        void *buf = NULL;
        TC_TRY(tc__device_alloc(g->device, g->cs, 2 * sizeof(uint64_t), &buf));
        g->gen_buf = buf;
    }
    tc__saved_message saved;
    tc__message_save(&saved);
    if (tc__generator_capture_begin(gen, g->gen_buf) == TC_OK)
        g->gen = gen;
    else
        tc__message_restore(&saved); /* not an error of this call */
    return TC_OK;
}

static void list_add(tc_graph *g)
{
    pthread_mutex_lock(&cap_mu);
    g->next = capturing;
    capturing = g;
    tc__capture_enter();
    pthread_mutex_unlock(&cap_mu);
}

/* Takes g out of the captures underway; returns whether a sync call
 * invalidated it, and its reason into why[sizeof g->why] (when not NULL). */
static bool list_remove(tc_graph *g, char *why)
{
    pthread_mutex_lock(&cap_mu);
    bool invalidated = g->invalidated;
    if (why)
        memcpy(why, g->why, sizeof g->why);
    bool listed = false;
    for (tc_graph **p = &capturing; *p; p = &(*p)->next)
        if (*p == g) {
            *p = g->next;
            listed = true;
            break;
        }
    g->next = NULL;
    pthread_mutex_unlock(&cap_mu);
    if (listed)
        tc__capture_leave();
    return invalidated;
}

/* Starts CUDA stream capture on g->cs (device, stream, mode, pool set):
 * first the generator, the sync check's list and the sanitizer's recording,
 * then the capture itself. On failure everything set up here is undone. */
tc_status tc__graph_capture_start(tc_graph *g)
{
    pthread_once(&hook_once, install_hook);
    g->gen = NULL;
    g->invalidated = false;
    g->why[0] = '\0';
    g->thread = pthread_self();
    TC_TRY(gen_begin(g));
    list_add(g);
    if (tc__access_on())
        tc__access_capture_begin(g->device, (void *)g->cs);
    tc_status st = g->order == TC_GRAPH_ORDER_DATA ? tc__graph_order_begin(g->device, g->cs)
                                                   : TC_OK;
    tc_device_guard dg = tc_device_guard_enter(g->device);
    st = st == TC_OK ? dg.status : st;
    if (st == TC_OK) {
        cudaError_t err = cudaStreamBeginCapture(g->cs, cuda_mode(g->mode));
        tc_device_guard_exit(&dg);
        if (err != cudaSuccess)
            st = tc__cuda_fail(err, "cudaStreamBeginCapture", __FILE__, __LINE__);
    }
    if (st == TC_OK)
        return TC_OK;
    (void)tc__graph_order_end(g->cs);
    tc__access_recording_free(tc__access_capture_end(g->device, (void *)g->cs));
    (void)list_remove(g, NULL);
    if (g->gen) {
        uint64_t unused;
        (void)tc__generator_capture_end(g->gen, &unused);
        g->gen = NULL;
    }
    return st;
}

/* Ends CUDA stream capture and the pool routing; *out gets the graph and
 * *watched (when not NULL) what the access watchers kept of it. On failure
 * (invalidated, or CUDA's error) nothing is returned. */
tc_status tc__graph_capture_finish(tc_graph *g, cudaGraph_t *out, uint64_t *blocks,
                                   tc__access_recording **watched)
{
    cudaGraph_t graph = NULL;
    tc_device_guard dg = tc_device_guard_enter(g->device);
    tc_status ordered = tc__graph_order_end(g->cs); /* before the end: it frees workspaces */
    char order_why[512] = "";
    if (ordered != TC_OK)
        snprintf(order_why, sizeof order_why, "%s", tc_last_error());
    cudaError_t err = cudaStreamEndCapture(g->cs, &graph);
    tc_device_guard_exit(&dg);
    tc__access_recording *rec = tc__access_capture_end(g->device, (void *)g->cs);
    char why[sizeof g->why];
    bool invalidated = list_remove(g, why);
    if (watched && err == cudaSuccess && !invalidated)
        *watched = rec;
    else
        tc__access_recording_free(rec);
    (void)tc__device_pool_end(g->device, g->cs);
    *blocks = 0;
    if (g->gen)
        (void)tc__generator_capture_end(g->gen, blocks);
    if (invalidated || err != cudaSuccess || ordered != TC_OK) {
        if (graph)
            (void)cudaGraphDestroy(graph);
        if (!invalidated && err == cudaSuccess)
            return tc__fail(ordered, "%s; the graph is empty again", order_why);
        if (invalidated) {
            (void)cudaGetLastError();
            return tc__fail(TC_ERROR_INVALID_STATE,
                            "the capture was invalidated by %s, which cannot run during capture; "
                            "the graph is empty again",
                            why);
        }
        tc_status st = tc__cuda_fail(err, "cudaStreamEndCapture", __FILE__, __LINE__);
        char msg[768];
        snprintf(msg, sizeof msg, "%s", tc_last_error());
        return tc__fail(st,
                        "%s; CUDA ended the capture (an operation not permitted during "
                        "capture ran on the stream or, in global mode, on another thread); the "
                        "graph is empty again",
                        msg);
    }
    tc_status st = tc__graph_programmatic_edges(g->device, graph);
    if (st != TC_OK) {
        char msg[768];
        snprintf(msg, sizeof msg, "%s", tc_last_error());
        (void)cudaGraphDestroy(graph);
        return tc__fail(st, "%s; the graph is empty again", msg);
    }
    *out = graph;
    return TC_OK;
}

tc_status tc_graph_capture_begin(tc_graph *graph, tc_graph_pool_id pool, tc_stream *stream,
                                 tc_capture_mode mode)
{
    TC_API_BEGIN;
    TC_TRY(tc__graph_check(graph));
    TC_CHECK_ARG(mode == TC_CAPTURE_MODE_GLOBAL || mode == TC_CAPTURE_MODE_THREAD_LOCAL ||
                     mode == TC_CAPTURE_MODE_RELAXED,
                 "mode %d is not TC_CAPTURE_MODE_GLOBAL, _THREAD_LOCAL or _RELAXED", (int)mode);
    if (graph->state != G_EMPTY)
        return tc__fail(TC_ERROR_INVALID_STATE, graph->state == G_CAPTURING
                                                    ? "a capture into this graph is underway"
                                                    : "the graph was captured already; "
                                                      "tc_graph_reset it to capture again");
    TC_CHECK_ARG(pool.id <= atomic_load(&tc__graph_last_pool_id),
                 "pool id %llu was not made by tc_graph_pool_handle or tc_graph_pool",
                 (unsigned long long)pool.id);
    tc_stream *s;
    TC_TRY(tc__resolve_stream(stream, &s));
    TC_CHECK_ARG(s->handle != NULL && s->handle != cudaStreamLegacy,
                 "cannot capture on the default stream of cuda:%d (CUDA's legacy stream); "
                 "capture on a stream from tc_stream_create, or use "
                 "tc_graph_capture_guard_enter, which provides one",
                 s->device);
    enum cudaStreamCaptureStatus cst = cudaStreamCaptureStatusNone;
    TC_CUDA_CHECK(cudaStreamIsCapturing(s->handle, &cst));
    TC_CHECK_ARG(cst == cudaStreamCaptureStatusNone, "the stream is already capturing");
    uint64_t user = pool.id ? pool.id : tc__graph_new_pool_id(), alloc = 0;
    TC_TRY(tc__graph_pool_enter(user, s->device, s->handle, &alloc));
    graph->device = s->device;
    graph->mode = mode;
    graph->cs = s->handle;
    graph->pool_user = user;
    graph->pool_alloc = alloc;
    tc_status st = tc__graph_capture_start(graph);
    if (st != TC_OK) {
        (void)tc__device_pool_end(s->device, s->handle);
        if (graph->gen_buf)
            (void)tc__device_free(graph->gen_buf);
        graph->gen_buf = NULL;
        tc__graph_pool_leave(user, s->device);
        return st;
    }
    graph->state = G_CAPTURING;
    return TC_OK;
}

/* TC_OK when g's capture may be ended by this thread. */
tc_status tc__graph_check_ender(const tc_graph *g)
{
    if (g->mode != TC_CAPTURE_MODE_RELAXED && !pthread_equal(g->thread, pthread_self()))
        return tc__fail(TC_ERROR_INVALID_STATE,
                        "the capture (%s mode) must be ended by the thread that began it",
                        mode_name(g->mode));
    return TC_OK;
}

tc_status tc_graph_capture_end(tc_graph *graph)
{
    TC_API_BEGIN;
    TC_TRY(tc__graph_check(graph));
    if (graph->state != G_CAPTURING)
        return tc__fail(TC_ERROR_INVALID_STATE, "no capture into this graph is underway "
                                                "(tc_graph_capture_begin first)");
    TC_TRY(tc__graph_check_ender(graph));
    cudaGraph_t cg = NULL;
    uint64_t blocks = 0;
    tc__access_recording *watched = NULL;
    tc_status st = tc__graph_capture_finish(graph, &cg, &blocks, &watched);
    cudaGraphExec_t exec = NULL;
    if (st == TC_OK) {
        st = tc__graph_instantiate(graph, cg, &exec);
        if (st != TC_OK)
            (void)cudaGraphDestroy(cg);
    }
    if (st != TC_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", tc_last_error());
        tc__access_recording_free(watched);
        tc__graph_drop(graph);
        return tc__fail(st, "%s", msg);
    }
    graph->watched = watched;
    graph->graph = cg;
    graph->exec = exec;
    graph->gen_blocks = blocks;
    graph->state = G_CAPTURED;
    return TC_OK;
}

/* ---- the guard ---------------------------------------------------------- */

tc_graph_capture_guard tc_graph_capture_guard_enter(tc_graph *graph, tc_graph_pool_id pool,
                                                    tc_stream *stream, tc_capture_mode mode)
{
    TC_API_BEGIN;
    tc_graph_capture_guard guard;
    memset(&guard, 0, sizeof guard);
    guard.status = tc__graph_check(graph);
    int d = -1;
    if (guard.status == TC_OK && !stream) {
        guard.status = tc__resolve_device(-1, &d);
        if (guard.status == TC_OK)
            guard.status = tc__graph_side_stream(d, &stream);
    } else if (guard.status == TC_OK) {
        tc_stream *s;
        guard.status = tc__resolve_stream(stream, &s);
        d = guard.status == TC_OK ? s->device : -1;
    }
    if (guard.status == TC_OK)
        guard.status = tc_synchronize(d);
    if (guard.status != TC_OK)
        return guard;
    guard.stream_guard = tc_stream_guard_enter(stream);
    guard.status = guard.stream_guard.status;
    if (guard.status == TC_OK)
        guard.status = tc_graph_capture_begin(graph, pool, stream, mode);
    if (guard.status != TC_OK) {
        tc_stream_guard_exit(&guard.stream_guard);
        return guard;
    }
    guard.graph = graph;
    return guard;
}

tc_status tc_graph_capture_guard_exit(tc_graph_capture_guard *guard)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(guard, "guard is NULL");
    if (!guard->graph)
        return guard->status;
    tc_status st = tc_graph_capture_end(guard->graph);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", tc_last_error());
    tc_stream_guard_exit(&guard->stream_guard);
    guard->graph = NULL;
    guard->status = st;
    return st == TC_OK ? TC_OK : tc__fail(st, "%s", msg);
}
