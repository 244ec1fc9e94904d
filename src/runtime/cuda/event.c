/* Events: markers in a stream's work, for ordering between streams, waiting
 * and timing (their sharing with another process is dist/cuda/ipc_event.c).
 *
 * As in PyTorch, a tc_event's CUDA event is created lazily, on the device of
 * the first stream it is recorded on; from then on it belongs to that device.
 * An event never recorded counts as complete: query is true, synchronize and
 * wait do nothing. An event is not meant to be recorded from two threads at
 * once. Every handle goes through tc__handle_check (base/handle_pool.h):
 * destroyed events are parked, so a stale handle or a second destroy is
 * TC_ERROR_INVALID_HANDLE, never a use after free.
 *
 * Record and wait run with the stream's device current: a default stream's
 * handle is 0, CUDA's legacy stream, which names the current device's, so
 * recording on the default stream of cuda:1 while cuda:0 is current would
 * otherwise reach cuda:0's stream (and fail there: the event is cuda:1's),
 * and a wait would hold back the wrong device's work. An event recorded on
 * one device may be waited for on another's stream (cudaStreamWaitEvent
 * takes events of any device). */
#include <string.h>

#include "cuda_internal.h"
#include "runtime/runtime_args.h"
#include "kernel_errors.h"
#include "base/env.h"
#include "base/handle_pool.h"
#include "access/access.h"

static tc__handle_pool event_pool = TC_HANDLE_POOL_INIT(tc_event);

tc_status tc__event_check(const tc_event *e)
{
    return tc__handle_check(e, TC_EVENT_MAGIC, "tc_event");
}

tc_event *tc__event_new(void) { return tc__handle_get(&event_pool); }

static unsigned cuda_flags(unsigned flags)
{
    unsigned f = cudaEventDefault;
    if (!(flags & TC_EVENT_FLAG_TIMING))
        f |= cudaEventDisableTiming;
    if (flags & TC_EVENT_FLAG_BLOCKING)
        f |= cudaEventBlockingSync;
    if (flags & TC_EVENT_FLAG_INTERPROCESS)
        f |= cudaEventInterprocess;
    return f;
}

/* Creates the CUDA event on device d (the caller resolved d). */
tc_status tc__event_materialize(tc_event *e, int d)
{
    tc_device_guard g = tc_device_guard_enter(d);
    TC_TRY(g.status);
    cudaEvent_t h;
    cudaError_t err = cudaEventCreateWithFlags(&h, cuda_flags(e->flags));
    tc_device_guard_exit(&g);
    if (err != cudaSuccess)
        return tc__cuda_fail(err, "cudaEventCreateWithFlags", __FILE__, __LINE__);
    e->handle = h;
    e->device = d;
    return TC_OK;
}

tc_status tc_event_create(unsigned flags, tc_event **out)
{
    TC_API_BEGIN;
    TC_TRY(tc__event_create_check(flags, out));
    TC_TRY(tc__ensure_init());
    tc_event *e = tc__handle_get(&event_pool);
    if (!e)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
    *e = (tc_event){.magic = TC_EVENT_MAGIC, .flags = flags, .device = -1};
    *out = e;
    return TC_OK;
}

tc_status tc_event_destroy(tc_event *event)
{
    TC_API_BEGIN;
    TC_TRY(tc__event_check(event));
    if (event->device >= 0) {
        tc_device_guard g = tc_device_guard_enter(event->device);
        TC_TRY(g.status);
        cudaError_t err = cudaEventDestroy(event->handle);
        tc_device_guard_exit(&g);
        if (err != cudaSuccess)
            return tc__cuda_fail(err, "cudaEventDestroy", __FILE__, __LINE__);
    }
    if (tc__access_on())
        tc__access_sync_of(TC__SYNC_EVENT_DESTROY, event, 0, NULL, 0, NULL);
    tc__handle_put(&event_pool, event);
    return TC_OK;
}

tc_status tc_event_record(tc_event *event, tc_stream *stream)
{
    TC_API_BEGIN;
    TC_TRY(tc__event_check(event));
    tc_stream *s;
    TC_TRY(tc__resolve_stream(stream, &s));
    if (TC_UNLIKELY(event->device < 0))
        TC_TRY(tc__event_materialize(event, s->device));
    else if (TC_UNLIKELY(event->device != s->device))
        return tc__fail(TC_ERROR_DEVICE_MISMATCH,
                        "the event belongs to cuda:%d but the stream to cuda:%d; "
                        "record it on a stream of cuda:%d or use another event",
                        event->device, s->device, event->device);
    tc_device_guard g = tc_device_guard_enter(s->device); /* handle 0: see the top */
    TC_TRY(g.status);
    cudaError_t err = cudaEventRecord(event->handle, s->handle);
    tc_device_guard_exit(&g);
    TC_CUDA_CHECK(err);
    event->recorded = true;
    if (tc__access_on())
        tc__access_sync_of(TC__SYNC_EVENT_RECORD, event, s->device, (void *)s->handle, 0, NULL);
    return TC_OK;
}

tc_status tc_event_query(tc_event *event)
{
    TC_API_BEGIN;
    TC_TRY(tc__event_check(event));
    if (!event->recorded)
        return TC_OK;
    TC_TRY(tc__sync_check("querying an event", NULL));
    TC_TRY(tc__cuda_query(cudaEventQuery(event->handle), "cudaEventQuery", __FILE__, __LINE__));
    if (tc__access_on()) /* the host saw the event complete */
        tc__access_sync_of(TC__SYNC_EVENT_SYNC, event, 0, NULL, 0, NULL);
    return tc__kernel_errors_check(event->device);
}

tc_status tc_event_synchronize(tc_event *event)
{
    TC_API_BEGIN;
    TC_TRY(tc__event_check(event));
    if (!event->recorded)
        return TC_OK;
    TC_TRY(tc__sync_check("waiting for an event", NULL));
    TC_CUDA_CHECK(cudaEventSynchronize(event->handle));
    if (tc__access_on())
        tc__access_sync_of(TC__SYNC_EVENT_SYNC, event, 0, NULL, 0, NULL);
    return tc__kernel_errors_check(event->device);
}

tc_status tc_event_wait(tc_event *event, tc_stream *stream)
{
    TC_API_BEGIN;
    TC_TRY(tc__event_check(event));
    tc_stream *s;
    TC_TRY(tc__resolve_stream(stream, &s));
    if (!event->recorded)
        return TC_OK;
    tc_device_guard g = tc_device_guard_enter(s->device); /* handle 0: see the top */
    TC_TRY(g.status);
    cudaError_t err = cudaStreamWaitEvent(s->handle, event->handle, 0);
    tc_device_guard_exit(&g);
    TC_CUDA_CHECK(err);
    if (tc__access_on())
        tc__access_sync_of(TC__SYNC_EVENT_WAIT, event, s->device, (void *)s->handle, 0, NULL);
    return TC_OK;
}

tc_status tc_stream_wait_event(tc_stream *stream, tc_event *event)
{
    TC_API_BEGIN;
    return tc_event_wait(event, stream);
}

tc_status tc_stream_record_event(tc_stream *stream, tc_event **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    tc_stream *s;
    TC_TRY(tc__resolve_stream(stream, &s));
    tc_event *e;
    TC_TRY(tc_event_create(TC_EVENT_FLAG_DEFAULT, &e));
    tc_status st = tc_event_record(e, s);
    if (st != TC_OK) {
        char msg[1024];
        strncpy(msg, tc_last_error(), sizeof msg - 1);
        msg[sizeof msg - 1] = '\0';
        (void)tc_event_destroy(e);
        return tc__fail(st, "%s", msg);
    }
    *out = e;
    return TC_OK;
}

tc_status tc_event_elapsed_time(tc_event *start, tc_event *end, float *ms)
{
    TC_API_BEGIN;
    TC_TRY(tc__event_check(start));
    TC_TRY(tc__event_check(end));
    TC_CHECK_ARG(ms, "ms is NULL");
    if (!(start->flags & TC_EVENT_FLAG_TIMING) || !(end->flags & TC_EVENT_FLAG_TIMING))
        return tc__fail(TC_ERROR_INVALID_STATE,
                        "both events need TC_EVENT_FLAG_TIMING at creation");
    if (!start->recorded || !end->recorded)
        return tc__fail(TC_ERROR_INVALID_STATE, "both events must be recorded first");
    float t = 0;
    cudaError_t err = cudaEventElapsedTime(&t, start->handle, end->handle);
    if (err == cudaErrorNotReady) {
        (void)cudaGetLastError();
        return tc__fail(TC_ERROR_NOT_READY, "an event has not completed yet; synchronize it "
                                            "first");
    }
    if (err != cudaSuccess)
        return tc__cuda_fail(err, "cudaEventElapsedTime", __FILE__, __LINE__);
    *ms = t;
    return TC_OK;
}

int tc_event_device(const tc_event *event)
{
    return tc__handle_live(event, TC_EVENT_MAGIC) ? event->device : -1;
}
