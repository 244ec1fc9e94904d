/* Streams: creation, wrapping external streams, query and synchronize,
 * waiting, the per-thread current stream and the stream guard.
 *
 * A tc_stream belongs to one device. Each thread keeps one current-stream
 * slot per device (tc__tls_stream); NULL there means the device's default
 * stream, a static object created at initialization that cannot be
 * destroyed. Every handle goes through tc__handle_check (base/handle_pool.h);
 * destroyed streams are parked in a quarantine pool, so a use after destroy,
 * or a second destroy, is reported as TC_ERROR_INVALID_HANDLE instead of
 * touching freed memory.
 *
 * A stream that goes away (destroyed, or an external stream's wrapper
 * released) is first forgotten by every caching allocator while its CUDA
 * stream is still valid (tc__alloc_stream_gone_all, alloc.h): each use of
 * memory there becomes an event recorded on it then, so that no allocator
 * names the stream afterwards. (Before, the allocators recorded events on
 * streams that record_stream named when the memory was freed, possibly
 * after the stream was gone: on a destroyed CUDA stream that crashed in the
 * driver, seen on the H100 in test_comm_cuda.) The CUDA stream of a
 * destroyed tc_stream is still not destroyed but retired, and a later
 * tc_stream_create of the same device and priority takes it again, as
 * PyTorch pools its streams: creating CUDA streams is not free, and other
 * holders of raw handles (the stream sanitizer) stay safe. Retired streams
 * are bounded by the most streams that ever lived at once.
 *
 * A default stream's CUDA handle is 0, CUDA's legacy stream, and 0 names
 * the legacy stream of whichever device is current. So every CUDA call here
 * that takes a stream's handle runs with the stream's device current (a
 * guard: one thread-local read when it is current already); otherwise the
 * default stream of cuda:1, used while cuda:0 is current, would be cuda:0's
 * (as PyTorch, whose stream calls enter the stream's device first). */
#include <pthread.h>
#include <stdlib.h>

#include "memory/alloc.h"
#include "cuda_internal.h"
#include "kernel_errors.h"
#include "base/env.h"
#include "base/handle_pool.h"
#include "access/access.h"

static tc__handle_pool stream_pool = TC_HANDLE_POOL_INIT(tc_stream);

tc_status tc__resolve_stream(tc_stream *stream, tc_stream **out)
{
    *out = NULL;
    if (!stream) {
        TC_TRY(tc__ensure_init());
        int d = tc__tls_device;
        tc_stream *s = tc__tls_stream[d];
        *out = s ? s : &tc__default_streams[d];
        return TC_OK;
    }
    TC_TRY(tc__handle_check(stream, TC_STREAM_MAGIC, "tc_stream"));
    *out = stream;
    return TC_OK;
}

/* How the access layer names a tc_stream: its device and CUDA handle. Set
 * when this file is loaded, so that watchers (the stream sanitizer's
 * tc_sanitizer_access) take the user's streams without calling the runtime
 * themselves. */
static tc_status access_resolve(tc_stream *stream, int *dev, void **handle)
{
    tc_stream *s;
    TC_TRY(tc__resolve_stream(stream, &s));
    *dev = s->device;
    *handle = (void *)s->handle;
    return TC_OK;
}

__attribute__((constructor)) static void access_register(void)
{
    tc__access_set_stream_resolver(access_resolve);
}

tc_status tc_stream_priority_range(int *least, int *greatest)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(least && greatest, "least or greatest is NULL");
    TC_TRY(tc__ensure_init());
    int lo, hi;
    TC_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
    *least = lo;
    *greatest = hi;
    return TC_OK;
}

typedef struct retired {
    cudaStream_t handle;
    int priority;
    struct retired *next;
} retired;
static retired *retired_streams[TC_MAX_DEVICES];
static pthread_mutex_t retired_lock = PTHREAD_MUTEX_INITIALIZER;

/* A retired CUDA stream of `device` with `priority`, or NULL. */
static cudaStream_t take_retired(int device, int priority)
{
    cudaStream_t h = NULL;
    pthread_mutex_lock(&retired_lock);
    for (retired **p = &retired_streams[device]; *p; p = &(*p)->next)
        if ((*p)->priority == priority) {
            retired *r = *p;
            *p = r->next;
            h = r->handle;
            free(r);
            break;
        }
    pthread_mutex_unlock(&retired_lock);
    return h;
}

/* Keeps a CUDA stream for reuse; false (nothing kept) when memory ran out. */
static bool retire(int device, int priority, cudaStream_t h)
{
    retired *r = malloc(sizeof *r);
    if (!r)
        return false;
    pthread_mutex_lock(&retired_lock);
    *r = (retired){h, priority, retired_streams[device]};
    retired_streams[device] = r;
    pthread_mutex_unlock(&retired_lock);
    return true;
}

/* A parked handle object holding a live stream; NULL when memory ran out. */
static tc_stream *new_stream(int device, int priority, bool owned, cudaStream_t h)
{
    tc_stream *s = tc__handle_get(&stream_pool);
    if (s)
        *s = (tc_stream){.magic = TC_STREAM_MAGIC,
                         .device = device,
                         .priority = priority,
                         .owned = owned,
                         .is_default = false,
                         .handle = h};
    return s;
}

tc_status tc_stream_create(int device, int priority, tc_stream **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    int d, least, greatest;
    TC_TRY(tc__resolve_device(device, &d));
    TC_TRY(tc_stream_priority_range(&least, &greatest));
    if (priority > least || priority < greatest)
        return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                        "priority %d is outside this GPU's range %d (lowest, the default) to %d "
                        "(highest)",
                        priority, least, greatest);
    cudaStream_t h = take_retired(d, priority);
    if (!h) {
        tc_device_guard g = tc_device_guard_enter(d);
        TC_TRY(g.status);
        cudaError_t err = cudaStreamCreateWithPriority(&h, cudaStreamNonBlocking, priority);
        tc_device_guard_exit(&g);
        if (err != cudaSuccess)
            return tc__cuda_fail(err, "cudaStreamCreateWithPriority", __FILE__, __LINE__);
    }
    tc_stream *s = new_stream(d, priority, true, h);
    if (!s) {
        if (!retire(d, priority, h)) {
            tc_device_guard g = tc_device_guard_enter(d);
            (void)cudaStreamDestroy(h);
            tc_device_guard_exit(&g);
        }
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    *out = s;
    return TC_OK;
}

tc_status tc_stream_create_external(void *cuda_stream, int device, tc_stream **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    int d;
    TC_TRY(tc__resolve_device(device, &d));
    int priority = 0;
    TC_CUDA_CHECK(cudaStreamGetPriority((cudaStream_t)cuda_stream, &priority));
    tc_stream *s = new_stream(d, priority, false, (cudaStream_t)cuda_stream);
    if (!s)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
    *out = s;
    return TC_OK;
}

tc_status tc_stream_destroy(tc_stream *stream)
{
    TC_API_BEGIN;
    TC_TRY(tc__handle_check(stream, TC_STREAM_MAGIC, "tc_stream"));
    tc_stream *s = stream;
    TC_CHECK_ARG(!s->is_default, "the default stream of device %d cannot be destroyed", s->device);
    /* While the CUDA stream is valid and before a create may take it again:
     * the allocators keep events recorded on it instead (on its device). */
    tc_device_guard g = tc_device_guard_enter(s->device);
    tc__alloc_stream_gone_all((uintptr_t)s->handle);
    tc_device_guard_exit(&g);
    if (s->owned && !retire(s->device, s->priority, s->handle)) {
        g = tc_device_guard_enter(s->device);
        (void)cudaStreamDestroy(s->handle); /* nothing names it any more */
        tc_device_guard_exit(&g);
    }
    if (tc__tls_stream[s->device] == s)
        tc__tls_stream[s->device] = NULL;
    tc__handle_put(&stream_pool, s);
    return TC_OK;
}

tc_status tc_stream_query(tc_stream *stream)
{
    TC_API_BEGIN;
    tc_stream *s;
    TC_TRY(tc__resolve_stream(stream, &s));
    TC_TRY(tc__sync_check("querying the stream", s->handle));
    tc_device_guard g = tc_device_guard_enter(s->device); /* handle 0: see the top */
    TC_TRY(g.status);
    cudaError_t err = cudaStreamQuery(s->handle);
    tc_device_guard_exit(&g);
    TC_TRY(tc__cuda_query(err, "cudaStreamQuery", __FILE__, __LINE__));
    if (tc__access_on()) /* the host saw the stream's work complete */
        tc__access_sync_of(TC__SYNC_STREAM_SYNC, NULL, s->device, (void *)s->handle, 0, NULL);
    return tc__kernel_errors_check(s->device);
}

tc_status tc_stream_synchronize(tc_stream *stream)
{
    TC_API_BEGIN;
    tc_stream *s;
    TC_TRY(tc__resolve_stream(stream, &s));
    TC_TRY(tc__sync_point_on("waiting for the stream", s->handle));
    tc_device_guard g = tc_device_guard_enter(s->device); /* handle 0: see the top */
    TC_TRY(g.status);
    cudaError_t err = cudaStreamSynchronize(s->handle);
    tc_device_guard_exit(&g);
    TC_CUDA_CHECK(err);
    if (tc__access_on())
        tc__access_sync_of(TC__SYNC_STREAM_SYNC, NULL, s->device, (void *)s->handle, 0, NULL);
    return tc__kernel_errors_check(s->device);
}

tc_status tc_stream_wait_stream(tc_stream *stream, tc_stream *other)
{
    TC_API_BEGIN;
    if (stream) /* both handles before a NULL (current stream) initializes CUDA */
        TC_TRY(tc__handle_check(stream, TC_STREAM_MAGIC, "tc_stream"));
    if (other)
        TC_TRY(tc__handle_check(other, TC_STREAM_MAGIC, "tc_stream"));
    tc_stream *s, *o;
    TC_TRY(tc__resolve_stream(stream, &s));
    TC_TRY(tc__resolve_stream(other, &o));
    if (s == o)
        return TC_OK;
    /* The event on o's device, the wait on s's (handle 0: see the top). */
    tc_device_guard g = tc_device_guard_enter(o->device);
    TC_TRY(g.status);
    cudaEvent_t e;
    const char *what = "cudaEventCreateWithFlags";
    cudaError_t err = cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
    tc_status st = TC_OK;
    if (err == cudaSuccess) {
        what = "cudaEventRecord";
        err = cudaEventRecord(e, o->handle);
        if (err == cudaSuccess) {
            tc_device_guard gs = tc_device_guard_enter(s->device);
            st = gs.status;
            what = "cudaStreamWaitEvent";
            if (st == TC_OK)
                err = cudaStreamWaitEvent(s->handle, e, 0);
            tc_device_guard_exit(&gs);
        }
        cudaEventDestroy(e); /* released once the wait no longer needs it */
    }
    tc_device_guard_exit(&g);
    TC_TRY(st);
    if (err != cudaSuccess)
        return tc__cuda_fail(err, what, __FILE__, __LINE__);
    if (tc__access_on())
        tc__access_sync_of(TC__SYNC_STREAM_WAIT_STREAM, NULL, s->device, (void *)s->handle,
                           o->device, (void *)o->handle);
    return TC_OK;
}

int tc_stream_device(const tc_stream *stream)
{
    return tc__handle_live(stream, TC_STREAM_MAGIC) ? stream->device : -1;
}

int tc_stream_priority(const tc_stream *stream)
{
    return tc__handle_live(stream, TC_STREAM_MAGIC) ? stream->priority : 0;
}

void *tc_stream_cuda_handle(const tc_stream *stream)
{
    return tc__handle_live(stream, TC_STREAM_MAGIC) ? (void *)stream->handle : NULL;
}

tc_status tc_current_stream(int device, tc_stream **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    int d;
    TC_TRY(tc__resolve_device(device, &d));
    tc_stream *s = tc__tls_stream[d];
    *out = s ? s : &tc__default_streams[d];
    return TC_OK;
}

tc_status tc_default_stream(int device, tc_stream **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    int d;
    TC_TRY(tc__resolve_device(device, &d));
    *out = &tc__default_streams[d];
    return TC_OK;
}

tc_status tc_set_stream(tc_stream *stream)
{
    TC_API_BEGIN;
    if (!stream)
        return TC_OK;
    tc_stream *s;
    TC_TRY(tc__resolve_stream(stream, &s));
    tc__tls_stream[s->device] = s->is_default ? NULL : s;
    return TC_OK;
}

tc_stream_guard tc_stream_guard_enter(tc_stream *stream)
{
    TC_API_BEGIN;
    tc_stream_guard g = {.prev_stream = NULL, .device_guard = {-1, -1, TC_OK}, .status = TC_OK};
    if (!stream)
        return g;
    tc_stream *s;
    g.status = tc__resolve_stream(stream, &s);
    if (g.status != TC_OK)
        return g;
    g.device_guard = tc_device_guard_enter(s->device);
    g.status = g.device_guard.status;
    if (g.status != TC_OK)
        return g;
    tc_stream *prev = tc__tls_stream[s->device];
    g.prev_stream = prev ? prev : &tc__default_streams[s->device];
    tc__tls_stream[s->device] = s->is_default ? NULL : s;
    return g;
}

void tc_stream_guard_exit(tc_stream_guard *g)
{
    if (!g || !g->prev_stream)
        return;
    tc_stream *prev = g->prev_stream;
    /* A previous stream destroyed inside the guard gives way to the default
     * one (its device field survives parking; see handle_pool.c). */
    bool live = tc__handle_live(prev, TC_STREAM_MAGIC);
    tc__tls_stream[prev->device] = !live || prev->is_default ? NULL : prev;
    tc_device_guard_exit(&g->device_guard);
    g->prev_stream = NULL;
}
