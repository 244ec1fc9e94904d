/* CUDA graphs: capture, replay, pools, the guard form, graphed callables and
 * in-place updates (include/tcuda/graph.h).
 *
 * A tc_graph is EMPTY, CAPTURING or CAPTURED. Capture is CUDA stream capture
 * on a stream tcuda made (never the legacy default stream), plus four things
 * set up before cudaStreamBeginCapture (so that no allocation, draw, sync
 * call or access on the stream can fall between the capture's start and
 * their watch) and undone, in reverse, after cudaStreamEndCapture or when
 * the start fails:
 * - memory: the caching allocator routes every allocation on the capturing
 *   stream to the graph's private pool (tc__device_pool_begin/end). Pools
 *   are reference-counted here, one reference per graph that captured into
 *   it; the last reset or destroy releases the pool in the allocator, which
 *   gives its segments back as they become free. A user's pool id keeps
 *   working after that: the next capture into it gets a new allocator pool.
 * - random numbers: the device's default generator is put in capture mode
 *   (core/random_internal.h, random_cuda.c) with a 16-byte {seed, offset}
 *   buffer taken from the pool; each replay first queues the write of the
 *   generator's current state into it and advances the generator.
 * - synchronizing calls: core's sync check (core/debug.h) is installed on
 *   the first capture; while captures are underway it refuses the calls the
 *   capture mode forbids and marks those captures invalidated, so that
 *   capture_end reports the call and leaves the graph empty.
 * - the stream sanitizer (src/debug) records the accesses queued on the
 *   stream, to check them at each replay.
 * Captures underway are kept in a list under cap_mu (the sync check reads
 * it from any thread, and marks captures invalidated under it; a capture's
 * own thread reads that mark as it leaves the list, under cap_mu too);
 * tc__graph_captures counts them for the fast paths.
 * Segments the allocator gives back meanwhile (a released pool's, another
 * device's) are not cudaFree'd, which would synchronize: they wait in a list
 * until the last capture ends. The caching allocator itself takes no memory
 * back while a private pool is active (src/alloc), and cudaMalloc runs in
 * relaxed mode (alloc_providers.c), as in PyTorch.
 * The cudaGraph_t is kept after instantiation, for debug dumps and updates.
 * An update captures on a stream tcuda keeps per device for updates, never
 * on the stream of the first capture: the user may have destroyed that one
 * since (and its handle may now name another stream).
 * Every handle goes through tc__handle_check; destroyed graphs and callables
 * are parked in handle pools. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/debug.h"
#include "core/handle_pool.h"
#include "cuda_internal.h"
#include "debug/sanitizer_internal.h"
#include "device_alloc.h"
#include "graph_internal.h"
#include "random_cuda.h"
#include "tcuda/graph.h"
#include "tcuda/random.h"

#define TC_GRAPH_MAGIC 0x7c96a711u
#define TC_CALLABLE_MAGIC 0x7cca1171u

enum { G_EMPTY, G_CAPTURING, G_CAPTURED };

struct tc_graph {
    uint32_t magic; /* first: tc__handle_check */
    int state;
    int device;
    tc_capture_mode mode;
    cudaStream_t cs;  /* the CUDA handle of the capture stream, while capturing */
    pthread_t thread; /* the capturing thread */
    uint64_t pool_user, pool_alloc;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    tc_generator *gen; /* registered with the capture, or NULL */
    uint64_t *gen_buf;
    uint64_t gen_blocks;
    bool invalidated;       /* while in the list, under cap_mu */
    char why[512];          /* likewise */
    struct tc_graph *next;  /* captures underway */
    tc__san_recording *san; /* the stream sanitizer's record of the capture */
};

struct tc_graphed_callable {
    uint32_t magic;
    tc_graph *graph;
};

static tc__handle_pool graph_pool = TC_HANDLE_POOL_INIT(struct tc_graph);
static tc__handle_pool callable_pool = TC_HANDLE_POOL_INIT(struct tc_graphed_callable);

atomic_int tc__graph_captures;
static pthread_mutex_t cap_mu = PTHREAD_MUTEX_INITIALIZER;
static tc_graph *capturing;

static const char *mode_name(tc_capture_mode m)
{
    return m == TC_CAPTURE_MODE_GLOBAL         ? "global"
           : m == TC_CAPTURE_MODE_THREAD_LOCAL ? "thread_local"
                                               : "relaxed";
}

static tc_status check_graph(const tc_graph *g)
{
    return tc__handle_check(g, TC_GRAPH_MAGIC, "tc_graph");
}

/* ---- pools -------------------------------------------------------------- */

typedef struct pool_ref {
    uint64_t user, alloc;
    int device, refs;
} pool_ref;

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static pool_ref *pools;
static size_t npools, cap_pools;
static _Atomic uint64_t last_pool_id;

static uint64_t new_pool_id(void) { return atomic_fetch_add(&last_pool_id, 1) + 1; }

static pool_ref *pool_find(uint64_t user, int device)
{
    for (size_t i = 0; i < npools; i++)
        if (pools[i].user == user && pools[i].device == device)
            return &pools[i];
    return NULL;
}

/* Takes a reference on pool `user` of `device` and starts routing the
 * allocations on cs to it. The first reference picks the allocator's pool:
 * the user id itself, or a new id when the allocator released that one. */
static tc_status pool_enter(uint64_t user, int device, cudaStream_t cs, uint64_t *alloc)
{
    pthread_mutex_lock(&pool_mu);
    tc_status st = TC_OK;
    pool_ref *p = pool_find(user, device);
    if (p) {
        st = tc__device_pool_begin(device, p->alloc, cs);
    } else if (npools == cap_pools) {
        size_t nc = cap_pools ? 2 * cap_pools : 16;
        pool_ref *np = realloc(pools, nc * sizeof *np);
        if (np) {
            pools = np;
            cap_pools = nc;
        } else {
            st = tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory for pool records");
        }
    }
    if (!p && st == TC_OK) {
        uint64_t id = user;
        st = tc__device_pool_begin(device, id, cs);
        if (st == TC_ERROR_INVALID_STATE) { /* released after its last graph: a new one */
            id = new_pool_id();
            st = tc__device_pool_begin(device, id, cs);
        }
        if (st == TC_OK) {
            p = &pools[npools++];
            *p = (pool_ref){user, id, device, 0};
        }
    }
    if (st == TC_OK) {
        p->refs++;
        *alloc = p->alloc;
    }
    pthread_mutex_unlock(&pool_mu);
    return st;
}

/* Drops a reference; the last one releases the allocator's pool. */
static void pool_leave(uint64_t user, int device)
{
    pthread_mutex_lock(&pool_mu);
    pool_ref *p = pool_find(user, device);
    if (p && --p->refs == 0) {
        (void)tc__device_pool_release(device, p->alloc);
        *p = pools[--npools];
    }
    pthread_mutex_unlock(&pool_mu);
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
    if (TC_LIKELY(!tc__graph_capturing()))
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
    atomic_fetch_add(&tc__graph_captures, 1);
    pthread_mutex_unlock(&cap_mu);
}

/* Device memory given back during captures (under cap_mu). */
typedef struct deferred {
    void *ptr;
    int device;
} deferred;
static deferred *dfree;
static size_t ndfree, cap_dfree;

bool tc__graph_defer_free(int device, void *ptr)
{
    if (!tc__graph_capturing())
        return false;
    pthread_mutex_lock(&cap_mu);
    bool kept = false;
    if (atomic_load(&tc__graph_captures) > 0) {
        if (ndfree == cap_dfree) {
            size_t nc = cap_dfree ? 2 * cap_dfree : 16;
            deferred *n = realloc(dfree, nc * sizeof *n);
            if (n) {
                dfree = n;
                cap_dfree = nc;
            }
        }
        if (ndfree < cap_dfree) {
            dfree[ndfree++] = (deferred){ptr, device};
            kept = true;
        }
    }
    pthread_mutex_unlock(&cap_mu);
    return kept;
}

/* Frees what captures kept, once none is underway. */
static void flush_deferred(deferred *list, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        tc_device_guard dg = tc_device_guard_enter(list[i].device);
        (void)cudaFree(list[i].ptr);
        tc_device_guard_exit(&dg);
    }
    free(list);
}

/* Takes g out of the captures underway; returns whether a sync call
 * invalidated it, and its reason into why[sizeof g->why] (when not NULL). */
static bool list_remove(tc_graph *g, char *why)
{
    deferred *list = NULL;
    size_t n = 0;
    pthread_mutex_lock(&cap_mu);
    bool invalidated = g->invalidated;
    if (why)
        memcpy(why, g->why, sizeof g->why);
    for (tc_graph **p = &capturing; *p; p = &(*p)->next)
        if (*p == g) {
            *p = g->next;
            atomic_fetch_sub(&tc__graph_captures, 1);
            break;
        }
    g->next = NULL;
    if (!capturing && ndfree) {
        list = dfree;
        n = ndfree;
        dfree = NULL;
        ndfree = cap_dfree = 0;
    }
    pthread_mutex_unlock(&cap_mu);
    flush_deferred(list, n);
    return invalidated;
}

/* Starts CUDA stream capture on g->cs (device, stream, mode, pool set):
 * first the generator, the sync check's list and the sanitizer's recording,
 * then the capture itself. On failure everything set up here is undone. */
static tc_status start(tc_graph *g)
{
    pthread_once(&hook_once, install_hook);
    g->gen = NULL;
    g->invalidated = false;
    g->why[0] = '\0';
    g->thread = pthread_self();
    TC_TRY(gen_begin(g));
    list_add(g);
    if (tc__san_on())
        tc__san_capture_begin(g->device, (void *)g->cs);
    tc_device_guard dg = tc_device_guard_enter(g->device);
    tc_status st = dg.status;
    if (st == TC_OK) {
        cudaError_t err = cudaStreamBeginCapture(g->cs, cuda_mode(g->mode));
        tc_device_guard_exit(&dg);
        if (err != cudaSuccess)
            st = tc__cuda_fail(err, "cudaStreamBeginCapture", __FILE__, __LINE__);
    }
    if (st == TC_OK)
        return TC_OK;
    tc__san_recording_free(tc__san_capture_end(g->device, (void *)g->cs));
    (void)list_remove(g, NULL);
    if (g->gen) {
        uint64_t unused;
        (void)tc__generator_capture_end(g->gen, &unused);
        g->gen = NULL;
    }
    return st;
}

/* Ends CUDA stream capture and the pool routing; *out gets the graph and
 * *san (when not NULL) the stream sanitizer's recording. On failure
 * (invalidated, or CUDA's error) nothing is returned. */
static tc_status finish(tc_graph *g, cudaGraph_t *out, uint64_t *blocks, tc__san_recording **san)
{
    cudaGraph_t graph = NULL;
    tc_device_guard dg = tc_device_guard_enter(g->device);
    cudaError_t err = cudaStreamEndCapture(g->cs, &graph);
    tc_device_guard_exit(&dg);
    tc__san_recording *rec = tc__san_capture_end(g->device, (void *)g->cs);
    char why[sizeof g->why];
    bool invalidated = list_remove(g, why);
    if (san && err == cudaSuccess && !invalidated)
        *san = rec;
    else
        tc__san_recording_free(rec);
    (void)tc__device_pool_end(g->device, g->cs);
    *blocks = 0;
    if (g->gen)
        (void)tc__generator_capture_end(g->gen, blocks);
    if (invalidated || err != cudaSuccess) {
        if (graph)
            (void)cudaGraphDestroy(graph);
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
    *out = graph;
    return TC_OK;
}

/* Makes g EMPTY: executable, graph, generator buffer, pool reference. */
static void drop(tc_graph *g)
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
    tc__san_recording_free(g->san);
    g->san = NULL;
    if (g->state != G_EMPTY)
        pool_leave(g->pool_user, g->device);
    g->state = G_EMPTY;
}

static tc_status instantiate(tc_graph *g, cudaGraph_t graph, cudaGraphExec_t *out)
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
    *out = g;
    return TC_OK;
}

tc_status tc_graph_capture_begin(tc_graph *graph, tc_mempool_id pool, tc_stream *stream,
                                 tc_capture_mode mode)
{
    TC_API_BEGIN;
    TC_TRY(check_graph(graph));
    TC_CHECK_ARG(mode == TC_CAPTURE_MODE_GLOBAL || mode == TC_CAPTURE_MODE_THREAD_LOCAL ||
                     mode == TC_CAPTURE_MODE_RELAXED,
                 "mode %d is not TC_CAPTURE_MODE_GLOBAL, _THREAD_LOCAL or _RELAXED", (int)mode);
    if (graph->state != G_EMPTY)
        return tc__fail(TC_ERROR_INVALID_STATE, graph->state == G_CAPTURING
                                                    ? "a capture into this graph is underway"
                                                    : "the graph was captured already; "
                                                      "tc_graph_reset it to capture again");
    TC_CHECK_ARG(pool.id <= atomic_load(&last_pool_id),
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
    uint64_t user = pool.id ? pool.id : new_pool_id(), alloc = 0;
    TC_TRY(pool_enter(user, s->device, s->handle, &alloc));
    graph->device = s->device;
    graph->mode = mode;
    graph->cs = s->handle;
    graph->pool_user = user;
    graph->pool_alloc = alloc;
    tc_status st = start(graph);
    if (st != TC_OK) {
        (void)tc__device_pool_end(s->device, s->handle);
        if (graph->gen_buf)
            (void)tc__device_free(graph->gen_buf);
        graph->gen_buf = NULL;
        pool_leave(user, s->device);
        return st;
    }
    graph->state = G_CAPTURING;
    return TC_OK;
}

/* TC_OK when g's capture may be ended by this thread. */
static tc_status check_ender(const tc_graph *g)
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
    TC_TRY(check_graph(graph));
    if (graph->state != G_CAPTURING)
        return tc__fail(TC_ERROR_INVALID_STATE, "no capture into this graph is underway "
                                                "(tc_graph_capture_begin first)");
    TC_TRY(check_ender(graph));
    cudaGraph_t cg = NULL;
    uint64_t blocks = 0;
    tc__san_recording *san = NULL;
    tc_status st = finish(graph, &cg, &blocks, &san);
    cudaGraphExec_t exec = NULL;
    if (st == TC_OK) {
        st = instantiate(graph, cg, &exec);
        if (st != TC_OK)
            (void)cudaGraphDestroy(cg);
    }
    if (st != TC_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", tc_last_error());
        tc__san_recording_free(san);
        drop(graph);
        return tc__fail(st, "%s", msg);
    }
    graph->san = san;
    graph->graph = cg;
    graph->exec = exec;
    graph->gen_blocks = blocks;
    graph->state = G_CAPTURED;
    return TC_OK;
}

static tc_status not_captured(const tc_graph *g)
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
    if (TC_UNLIKELY(tc__san_on())) /* the captured accesses happen now, on s */
        TC_TRY(tc__san_replay(graph->san, d, (void *)s));
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
    TC_TRY(check_graph(graph));
    if (TC_UNLIKELY(graph->state != G_CAPTURED))
        return not_captured(graph);
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
    TC_TRY(check_graph(graph));
    if (graph->state == G_CAPTURING)
        return tc__fail(TC_ERROR_INVALID_STATE,
                        "a capture into the graph is underway; tc_graph_capture_end first");
    drop(graph);
    return TC_OK;
}

tc_status tc_graph_destroy(tc_graph *graph)
{
    TC_API_BEGIN;
    TC_TRY(check_graph(graph));
    if (graph->state == G_CAPTURING) {
        TC_TRY(check_ender(graph));
        cudaGraph_t cg = NULL;
        uint64_t blocks;
        if (finish(graph, &cg, &blocks, NULL) == TC_OK)
            (void)cudaGraphDestroy(cg);
        (void)cudaGetLastError();
    }
    drop(graph);
    tc__handle_put(&graph_pool, graph);
    return TC_OK;
}

tc_status tc_graph_pool(const tc_graph *graph, tc_mempool_id *out)
{
    TC_API_BEGIN;
    TC_TRY(check_graph(graph));
    TC_CHECK_ARG(out, "out is NULL");
    if (graph->state == G_EMPTY)
        return tc__fail(TC_ERROR_INVALID_STATE, "the graph has no pool before its capture begins");
    out->id = graph->pool_user;
    return TC_OK;
}

tc_status tc_graph_debug_dump(const tc_graph *graph, const char *path)
{
    TC_API_BEGIN;
    TC_TRY(check_graph(graph));
    TC_CHECK_ARG(path && *path, "path is %s", path ? "empty" : "NULL");
    if (graph->state != G_CAPTURED)
        return not_captured(graph);
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

tc_status tc_graph_pool_handle(tc_mempool_id *out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    TC_TRY(tc__ensure_init());
    out->id = new_pool_id();
    return TC_OK;
}

bool tc_is_current_stream_capturing(void)
{
    if (atomic_load_explicit(&tc__init_state, memory_order_acquire) != 1)
        return false;
    cudaStream_t s = tc__current_cuda_stream(tc__tls_device);
    if (!s)
        return false; /* the legacy stream never captures */
    enum cudaStreamCaptureStatus cst = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(s, &cst) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    return cst == cudaStreamCaptureStatusActive;
}

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

static tc_status side_stream(int d, tc_stream **out) { return own_stream(side_streams, d, out); }

/* ---- updates ------------------------------------------------------------ */

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
                           cudaGraph_t *out, uint64_t *blocks, tc__san_recording **san)
{
    g->cs = stream->handle;
    TC_TRY(tc__device_pool_begin(g->device, g->pool_alloc, g->cs));
    tc_generator *old_gen = g->gen; /* the previous capture's, for its replays */
    tc_status st = start(g);
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
    tc_status end = finish(g, &cg, blocks, san);
    if (st != TC_OK || end != TC_OK) {
        tc__san_recording_free(*san);
        *san = NULL;
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
    TC_TRY(check_graph(graph));
    TC_CHECK_ARG(fn, "fn is NULL");
    TC_CHECK_ARG(how, "how is NULL");
    if (graph->state != G_CAPTURED)
        return not_captured(graph);
    tc_stream *us;
    TC_TRY(own_stream(update_streams, graph->device, &us));
    cudaGraph_t cg = NULL;
    uint64_t blocks = 0;
    tc__san_recording *san = NULL;
    pthread_once(&update_once, update_mu_init);
    pthread_mutex_lock(&update_mu[graph->device]);
    tc_status rst = recapture(graph, us, fn, ctx, &cg, &blocks, &san);
    pthread_mutex_unlock(&update_mu[graph->device]);
    TC_TRY(rst);
    cudaGraphExecUpdateResultInfo info;
    memset(&info, 0, sizeof info);
    tc_device_guard dg = tc_device_guard_enter(graph->device);
    cudaError_t err = cudaGraphExecUpdate(graph->exec, cg, &info);
    tc_device_guard_exit(&dg);
    tc_graph_update_result r = TC_GRAPH_UPDATED_IN_PLACE;
    if (err != cudaSuccess) {
        (void)cudaGetLastError(); /* not sticky: the topology differs */
        cudaGraphExec_t exec;
        tc_status st = instantiate(graph, cg, &exec);
        if (st != TC_OK) {
            (void)cudaGraphDestroy(cg);
            tc__san_recording_free(san);
            return st;
        }
        (void)cudaGraphExecDestroy(graph->exec);
        graph->exec = exec;
        r = TC_GRAPH_REINSTANTIATED;
    }
    (void)cudaGraphDestroy(graph->graph);
    graph->graph = cg;
    graph->gen_blocks = blocks;
    tc__san_recording_free(graph->san);
    graph->san = san;
    *how = r;
    return TC_OK;
}

/* ---- the guard ---------------------------------------------------------- */

tc_graph_capture_guard tc_graph_capture_guard_enter(tc_graph *graph, tc_mempool_id pool,
                                                    tc_stream *stream, tc_capture_mode mode)
{
    TC_API_BEGIN;
    tc_graph_capture_guard guard;
    memset(&guard, 0, sizeof guard);
    guard.status = check_graph(graph);
    int d = -1;
    if (guard.status == TC_OK && !stream) {
        guard.status = tc__resolve_device(-1, &d);
        if (guard.status == TC_OK)
            guard.status = side_stream(d, &stream);
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

/* ---- graphed callables -------------------------------------------------- */

/* Captures fn(ctx) into a new graph on the current stream (a side stream),
 * in pool `pool`; *out on success. fn's own error is returned as it is. */
static tc_status capture_one(tc_graph_fn fn, void *ctx, tc_stream *side, tc_mempool_id pool,
                             tc_graph **out)
{
    tc_graph *g;
    TC_TRY(tc_graph_create(&g));
    tc_status st = tc_graph_capture_begin(g, pool, side, TC_CAPTURE_MODE_GLOBAL);
    tc_status fst = st == TC_OK ? fn(ctx) : st;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", tc_last_error());
    if (st == TC_OK)
        st = tc_graph_capture_end(g);
    if (fst != TC_OK || st != TC_OK) {
        if (fst == TC_OK)
            snprintf(msg, sizeof msg, "%s", tc_last_error());
        (void)tc_graph_destroy(g);
        return tc__fail(fst != TC_OK ? fst : st, "%s", msg);
    }
    *out = g;
    return TC_OK;
}

/* Warms every fn up on the side stream, then captures each in order into
 * graphs[i] sharing one pool. */
static tc_status warm_and_capture(int n, const tc_graph_fn *fns, void *const *ctxs, int warmup,
                                  tc_graph **graphs)
{
    int d;
    TC_TRY(tc__resolve_device(-1, &d));
    tc_stream *side;
    TC_TRY(side_stream(d, &side));
    TC_TRY(tc_synchronize(d));
    tc_stream_guard sg = tc_stream_guard_enter(side);
    TC_TRY(sg.status);
    tc_status st = TC_OK;
    for (int i = 0; i < n && st == TC_OK; i++)
        for (int k = 0; k < warmup && st == TC_OK; k++)
            st = fns[i](ctxs ? ctxs[i] : NULL);
    if (st == TC_OK)
        st = tc_stream_synchronize(side);
    tc_mempool_id pool = {0};
    for (int i = 0; i < n && st == TC_OK; i++) {
        st = capture_one(fns[i], ctxs ? ctxs[i] : NULL, side, pool, &graphs[i]);
        if (st == TC_OK && i == 0)
            st = tc_graph_pool(graphs[0], &pool);
    }
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", tc_last_error());
    tc_stream_guard_exit(&sg);
    if (st != TC_OK) {
        for (int i = 0; i < n; i++)
            if (graphs[i])
                (void)tc_graph_destroy(graphs[i]);
        return tc__fail(st, "%s", msg);
    }
    return TC_OK;
}

tc_status tc_make_graphed_callables(int n, const tc_graph_fn *fns, void *const *ctxs,
                                    int warmup_iters, tc_graphed_callable **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(n > 0 && n <= 1024, "n is %d; give 1 to 1024 callables", n);
    TC_CHECK_ARG(fns, "fns is NULL");
    TC_CHECK_ARG(out, "out is NULL");
    TC_CHECK_ARG(warmup_iters >= 0, "warmup_iters is %d; it must be >= 0", warmup_iters);
    for (int i = 0; i < n; i++)
        TC_CHECK_ARG(fns[i], "fns[%d] is NULL", i);
    TC_TRY(tc__ensure_init());
    tc_graph **graphs = calloc((size_t)n, sizeof *graphs);
    tc_graphed_callable **cs = calloc((size_t)n, sizeof *cs);
    tc_status st = graphs && cs ? TC_OK : tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
    for (int i = 0; i < n && st == TC_OK; i++) {
        cs[i] = tc__handle_get(&callable_pool);
        if (!cs[i])
            st = tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory for a callable");
    }
    if (st == TC_OK)
        st = warm_and_capture(n, fns, ctxs, warmup_iters, graphs);
    for (int i = 0; i < n && cs; i++) {
        if (!cs[i])
            continue;
        if (st == TC_OK) {
            cs[i]->magic = TC_CALLABLE_MAGIC;
            cs[i]->graph = graphs[i];
            out[i] = cs[i];
        } else {
            tc__handle_put(&callable_pool, cs[i]);
        }
    }
    free(graphs);
    free(cs);
    return st;
}

tc_status tc_make_graphed_callable(tc_graph_fn fn, void *ctx, int warmup_iters,
                                   tc_graphed_callable **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(fn, "fn is NULL");
    void *ctxs[1] = {ctx};
    return tc_make_graphed_callables(1, &fn, ctxs, warmup_iters, out);
}

static tc_status check_callable(const tc_graphed_callable *c)
{
    return tc__handle_check(c, TC_CALLABLE_MAGIC, "tc_graphed_callable");
}

tc_status tc_graphed_callable_call(tc_graphed_callable *callable)
{
    TC_API_BEGIN;
    TC_TRY(check_callable(callable));
    return tc_graph_replay(callable->graph);
}

tc_graph *tc_graphed_callable_graph(const tc_graphed_callable *callable)
{
    return tc__handle_live(callable, TC_CALLABLE_MAGIC) ? callable->graph : NULL;
}

tc_status tc_graphed_callable_destroy(tc_graphed_callable *callable)
{
    TC_API_BEGIN;
    TC_TRY(check_callable(callable));
    tc_status st = tc_graph_destroy(callable->graph);
    tc__handle_put(&callable_pool, callable);
    return st;
}
