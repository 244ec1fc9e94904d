/* Streams: creation, wrapping external streams, query and synchronize,
 * waiting, the per-thread current stream and the stream guard.
 *
 * A tc_stream belongs to one device. Each thread keeps one current-stream
 * slot per device (tc__tls_stream); NULL there means the device's default
 * stream, a static object created at initialization. Handles are checked by
 * their magic word; destroyed ones are parked (handle_pool.h) so that a use
 * after destroy is reported rather than crashing. */
#include "cuda_internal.h"
#include "core/debug.h"
#include "core/handle_pool.h"

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
    if (TC_UNLIKELY(stream->magic != TC_STREAM_MAGIC))
        return tc__fail(TC_ERROR_INVALID_HANDLE,
                        "%p is not a live tc_stream (destroyed, or not a stream)", (void *)stream);
    *out = stream;
    return TC_OK;
}

tc_status tc_stream_priority_range(int *least, int *greatest)
{
    TC_CHECK_ARG(least && greatest, "tc_stream_priority_range: least and greatest must not be NULL");
    TC_TRY(tc__ensure_init());
    int lo, hi;
    TC_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
    *least = lo;
    *greatest = hi;
    return TC_OK;
}

tc_status tc_stream_create(tc_stream **out, int device, int priority)
{
    TC_CHECK_ARG(out, "tc_stream_create: out must not be NULL");
    int d, least, greatest;
    TC_TRY(tc__resolve_device(device, &d));
    TC_TRY(tc_stream_priority_range(&least, &greatest));
    if (priority > least || priority < greatest)
        return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                        "tc_stream_create: priority %d is outside this GPU's range %d (lowest, "
                        "the default) to %d (highest)",
                        priority, least, greatest);
    tc_stream *s = tc__handle_get(&stream_pool);
    if (!s)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "tc_stream_create: out of host memory");
    tc_device_guard g = tc_device_guard_enter(d);
    cudaStream_t h = NULL;
    cudaError_t err = g.status == TC_OK
                          ? cudaStreamCreateWithPriority(&h, cudaStreamNonBlocking, priority)
                          : cudaSuccess;
    tc_device_guard_exit(&g);
    if (g.status != TC_OK || err != cudaSuccess) {
        s->magic = TC_DEAD_MAGIC;
        tc__handle_put(&stream_pool, s);
        if (g.status != TC_OK)
            return g.status;
        return tc__cuda_fail(err, "cudaStreamCreateWithPriority", __FILE__, __LINE__);
    }
    *s = (tc_stream){.magic = TC_STREAM_MAGIC,
                     .device = d,
                     .priority = priority,
                     .owned = true,
                     .is_default = false,
                     .handle = h};
    *out = s;
    return TC_OK;
}

tc_status tc_stream_from_external(tc_stream **out, void *cuda_stream, int device)
{
    TC_CHECK_ARG(out, "tc_stream_from_external: out must not be NULL");
    int d;
    TC_TRY(tc__resolve_device(device, &d));
    int priority = 0;
    TC_CUDA_CHECK(cudaStreamGetPriority((cudaStream_t)cuda_stream, &priority));
    tc_stream *s = tc__handle_get(&stream_pool);
    if (!s)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "tc_stream_from_external: out of host memory");
    *s = (tc_stream){.magic = TC_STREAM_MAGIC,
                     .device = d,
                     .priority = priority,
                     .owned = false,
                     .is_default = false,
                     .handle = (cudaStream_t)cuda_stream};
    *out = s;
    return TC_OK;
}

tc_status tc_stream_destroy(tc_stream *stream)
{
    TC_CHECK_ARG(stream, "tc_stream_destroy: stream must not be NULL");
    tc_stream *s;
    TC_TRY(tc__resolve_stream(stream, &s));
    TC_CHECK_ARG(!s->is_default, "tc_stream_destroy: the default stream of device %d cannot be "
                                 "destroyed",
                 s->device);
    if (s->owned) {
        tc_device_guard g = tc_device_guard_enter(s->device);
        TC_TRY(g.status);
        cudaError_t err = cudaStreamDestroy(s->handle);
        tc_device_guard_exit(&g);
        if (err != cudaSuccess)
            return tc__cuda_fail(err, "cudaStreamDestroy", __FILE__, __LINE__);
    }
    if (tc__tls_stream[s->device] == s)
        tc__tls_stream[s->device] = NULL;
    s->magic = TC_DEAD_MAGIC;
    tc__handle_put(&stream_pool, s);
    return TC_OK;
}

bool tc_stream_query(tc_stream *stream)
{
    tc_stream *s;
    if (tc__resolve_stream(stream, &s) != TC_OK)
        return false;
    cudaError_t err = cudaStreamQuery(s->handle);
    if (TC_LIKELY(err == cudaSuccess))
        return true;
    if (err == cudaErrorNotReady) {
        (void)cudaGetLastError();
        return false;
    }
    (void)tc__cuda_fail(err, "cudaStreamQuery", __FILE__, __LINE__);
    return false;
}

tc_status tc_stream_synchronize(tc_stream *stream)
{
    tc_stream *s;
    TC_TRY(tc__resolve_stream(stream, &s));
    TC_TRY(tc__sync_point("tc_stream_synchronize"));
    TC_CUDA_CHECK(cudaStreamSynchronize(s->handle));
    return TC_OK;
}

tc_status tc_stream_wait_stream(tc_stream *stream, tc_stream *other)
{
    tc_stream *s, *o;
    TC_TRY(tc__resolve_stream(stream, &s));
    TC_TRY(tc__resolve_stream(other, &o));
    if (s == o)
        return TC_OK;
    tc_device_guard g = tc_device_guard_enter(o->device);
    TC_TRY(g.status);
    cudaEvent_t e;
    cudaError_t err = cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
    if (err == cudaSuccess) {
        err = cudaEventRecord(e, o->handle);
        if (err == cudaSuccess)
            err = cudaStreamWaitEvent(s->handle, e, 0);
        cudaEventDestroy(e); /* released once the wait no longer needs it */
    }
    tc_device_guard_exit(&g);
    if (err != cudaSuccess)
        return tc__cuda_fail(err, "tc_stream_wait_stream", __FILE__, __LINE__);
    return TC_OK;
}

int tc_stream_device(const tc_stream *stream)
{
    return stream && stream->magic == TC_STREAM_MAGIC ? stream->device : -1;
}

int tc_stream_priority(const tc_stream *stream)
{
    return stream && stream->magic == TC_STREAM_MAGIC ? stream->priority : 0;
}

void *tc_stream_cuda_handle(const tc_stream *stream)
{
    return stream && stream->magic == TC_STREAM_MAGIC ? (void *)stream->handle : NULL;
}

tc_stream *tc_current_stream(int device)
{
    int d;
    if (TC_UNLIKELY(tc__resolve_device(device, &d) != TC_OK))
        return NULL;
    tc_stream *s = tc__tls_stream[d];
    return s ? s : &tc__default_streams[d];
}

tc_stream *tc_default_stream(int device)
{
    int d;
    if (tc__resolve_device(device, &d) != TC_OK)
        return NULL;
    return &tc__default_streams[d];
}

tc_status tc_set_stream(tc_stream *stream)
{
    if (!stream)
        return TC_OK;
    tc_stream *s;
    TC_TRY(tc__resolve_stream(stream, &s));
    tc__tls_stream[s->device] = s->is_default ? NULL : s;
    return TC_OK;
}

tc_stream_guard tc_stream_guard_enter(tc_stream *stream)
{
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
    tc__tls_stream[prev->device] = prev->is_default ? NULL : prev;
    tc_device_guard_exit(&g->device_guard);
    g->prev_stream = NULL;
}
