/* tcuda: streams and events (torch.cuda.Stream, ExternalStream, Event; an
 * event's sharing with another process is in ipc.h).
 *
 * Each thread has a current stream per device; it starts as that device's
 * default stream (CUDA's legacy NULL stream). Work tcuda queues goes on the
 * current stream of the current device. Streams tcuda creates do not
 * synchronize with the default stream (cudaStreamNonBlocking), as in PyTorch.
 * A NULL stream argument means the current stream of the current device,
 * except in tc_stream_destroy and the accessors, which say what NULL does.
 *
 * Handles are checked: a stream or event that was destroyed, or a pointer
 * that is not one, gives TC_ERROR_INVALID_HANDLE naming it (a second destroy
 * too), never a crash or a use of freed memory. Out-parameters come last and
 * are written only on success. */
#ifndef TCUDA_STREAM_H
#define TCUDA_STREAM_H

#include <stdbool.h>

#include "device.h"

TCUDA_EXTERN_C_BEGIN

typedef struct tc_stream tc_stream;
typedef struct tc_event tc_event;

/* ---- streams ----------------------------------------------------------- */

/* The priorities streams may have: `least` (0, the default) down to
 * `greatest` (a negative number; lower runs first). */
TCUDA_API tc_status tc_stream_priority_range(int *least, int *greatest);

/* Creates a stream on `device` (TC_CURRENT_DEVICE: current) with `priority`
 * in the range above and writes it to *out. The caller owns it and destroys
 * it with tc_stream_destroy. TC_ERROR_INVALID_ARGUMENT for a priority outside
 * the range, TC_ERROR_INVALID_DEVICE, TC_ERROR_NO_DEVICE. */
TCUDA_API tc_status tc_stream_create(int device, int priority, tc_stream **out);

/* Wraps a cudaStream_t that the caller created on `device` (TC_CURRENT_DEVICE)
 * (torch.cuda.ExternalStream). The wrapper is destroyed with
 * tc_stream_destroy; the CUDA stream is not. Destroy the wrapper before the
 * CUDA stream: then tcuda's allocators record one event on the CUDA stream
 * for the memory used there (tc_tensor_record_stream, or a tcuda call that
 * ran there) and never name the stream again, so the CUDA stream may be
 * destroyed at once, even while such memory is still live. Work queued on
 * the CUDA stream after the wrapper is gone is not tracked. */
TCUDA_API tc_status tc_stream_create_external(void *cuda_stream, int device, tc_stream **out);

/* Destroys a stream made by tc_stream_create or tc_stream_create_external.
 * Work already queued still runs. NULL and default streams cannot be
 * destroyed (TC_ERROR_INVALID_ARGUMENT); a stream already destroyed gives
 * TC_ERROR_INVALID_HANDLE. If the stream is the calling thread's current
 * stream, the current stream becomes the default stream again (other
 * threads must stop using it before it is destroyed). Memory recorded on
 * the stream (tc_tensor_record_stream) may still be released afterwards: it
 * is reused once the work queued on the stream before the destroy has
 * finished, and the host does not wait for that work here. The underlying
 * CUDA stream is kept and reused by a later tc_stream_create of the same
 * device and priority, as PyTorch pools its streams. */
TCUDA_API tc_status tc_stream_destroy(tc_stream *stream);

/* TC_OK when all work queued on the stream has finished, TC_ERROR_NOT_READY
 * while some still runs (as cudaStreamQuery); any other status is an error.
 * TC_ERROR_NOT_READY is an answer, not an error: it leaves tc_last_error()
 * as it was (no message is formatted), so polling in a loop is cheap. Once
 * the work has finished, reports bad input found by a kernel as
 * tc_synchronize does. */
TCUDA_API tc_status tc_stream_query(tc_stream *stream);

/* Waits until all work queued on the stream has finished; reports bad
 * input found by a kernel as tc_synchronize does. */
TCUDA_API tc_status tc_stream_synchronize(tc_stream *stream);

/* Makes work queued later on `stream` wait for `event`. Waiting on an event
 * that was never recorded is a no-op. */
TCUDA_API tc_status tc_stream_wait_event(tc_stream *stream, tc_event *event);

/* Makes work queued later on `stream` wait for all work queued so far on
 * `other`. */
TCUDA_API tc_status tc_stream_wait_stream(tc_stream *stream, tc_stream *other);

/* Creates a new event (no timing), records it on the stream and returns it
 * (torch's Stream.record_event); the caller destroys it with
 * tc_event_destroy. tc_event_record records an event that exists already. */
TCUDA_API tc_status tc_stream_record_event(tc_stream *stream, tc_event **out);

/* The stream's device, priority and CUDA handle (a cudaStream_t; NULL for
 * the default streams, which are CUDA's legacy stream). These cannot fail:
 * for NULL, a destroyed stream or a pointer that is not a stream they return
 * -1, 0 and NULL, and leave tc_last_error() as it was. */
TCUDA_API int tc_stream_device(const tc_stream *stream);
TCUDA_API int tc_stream_priority(const tc_stream *stream);
TCUDA_API void *tc_stream_cuda_handle(const tc_stream *stream);

/* The calling thread's current stream, and the default stream, of `device`
 * (TC_CURRENT_DEVICE: current device), into *out. They belong to tcuda
 * (tc_stream_destroy refuses the default streams). TC_ERROR_INVALID_ARGUMENT
 * for a NULL out, TC_ERROR_INVALID_DEVICE, TC_ERROR_NO_DEVICE. */
TCUDA_API tc_status tc_current_stream(int device, tc_stream **out);
TCUDA_API tc_status tc_default_stream(int device, tc_stream **out);

/* Makes `stream` the calling thread's current stream on the stream's device.
 * The current device does not change. NULL is a no-op. */
TCUDA_API tc_status tc_set_stream(tc_stream *stream);

/* torch.cuda.stream(s): enter makes s the current stream and its device the
 * current device; exit restores both. A NULL stream makes both no-ops. If
 * entering fails, g.status says why and exit does nothing. */
typedef struct tc_stream_guard {
    tc_stream *prev_stream; /* NULL when nothing to restore */
    tc_device_guard device_guard;
    tc_status status;
} tc_stream_guard;
TCUDA_API tc_stream_guard tc_stream_guard_enter(tc_stream *stream);
TCUDA_API void tc_stream_guard_exit(tc_stream_guard *guard);

/* ---- events ------------------------------------------------------------ */

/* What an event does: bits, or'ed into tc_event_create's `flags`
 * (torch.cuda.Event's enable_timing, blocking, interprocess). */
typedef enum tc_event_flag {
    TC_EVENT_FLAG_DEFAULT = 0,     /* no timing, the host spins when it waits */
    TC_EVENT_FLAG_TIMING = 1,      /* can measure elapsed time */
    TC_EVENT_FLAG_BLOCKING = 2,    /* the host sleeps instead of spinning */
    TC_EVENT_FLAG_INTERPROCESS = 4 /* can be shared with another process; no timing */
} tc_event_flag;

/* Creates an event with tc_event_flag bits and writes it to *out. Its CUDA
 * event is made lazily, on the device of the first stream it is recorded on.
 * The caller destroys it with tc_event_destroy: NULL gives
 * TC_ERROR_INVALID_ARGUMENT, an event already destroyed
 * TC_ERROR_INVALID_HANDLE. */
TCUDA_API tc_status tc_event_create(unsigned flags, tc_event **out);
TCUDA_API tc_status tc_event_destroy(tc_event *event);

/* Records the event on `stream` (NULL: the current stream): it completes when
 * the work queued there so far has. TC_ERROR_DEVICE_MISMATCH if the event
 * was made on another device than the stream's. */
TCUDA_API tc_status tc_event_record(tc_event *event, tc_stream *stream);

/* TC_OK when the work captured by the last record has finished, or the
 * event was never recorded; TC_ERROR_NOT_READY while it runs (as
 * cudaEventQuery), which leaves tc_last_error() as it was (as
 * tc_stream_query); any other status is an error. Once the work has
 * finished, reports bad input found by a kernel as tc_synchronize does. */
TCUDA_API tc_status tc_event_query(tc_event *event);

/* Waits until the event has completed (no-op if never recorded); reports
 * bad input found by a kernel as tc_synchronize does. */
TCUDA_API tc_status tc_event_synchronize(tc_event *event);

/* Makes later work on `stream` (NULL: current) wait for the event. */
TCUDA_API tc_status tc_event_wait(tc_event *event, tc_stream *stream);

/* Milliseconds between the records of `start` and `end`. Both need
 * TC_EVENT_FLAG_TIMING and a record (TC_ERROR_INVALID_STATE otherwise);
 * TC_ERROR_NOT_READY while either has not completed. */
TCUDA_API tc_status tc_event_elapsed_time(tc_event *start, tc_event *end, float *ms);

/* The event's device, or -1 before its first record. Cannot fail: -1 for
 * NULL, a destroyed event or a pointer that is not an event, leaving
 * tc_last_error() as it was. */
TCUDA_API int tc_event_device(const tc_event *event);

TCUDA_EXTERN_C_END

#endif
