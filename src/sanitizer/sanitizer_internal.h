/* The stream sanitizer's engine (sanitizer*.c; sanitizer.c lists its files)
 * as the rest of tcuda sees it: the handlers it registers with the access
 * layer (access/access.h), which hands them every access and
 * synchronization, the application of TCUDA_SANITIZER at CUDA
 * initialization, and what the tests drive directly with recorded event
 * sequences. Not installed.
 *
 * Actors are streams, named by (device, runtime stream handle) as the
 * access layer gives them, and the host (TC__ACCESS_HOST, NULL). Every
 * function here is thread-safe and does nothing while the sanitizer is off. */
#ifndef TCUDA_SANITIZER_INTERNAL_H
#define TCUDA_SANITIZER_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "access/access.h"
#include "base/internal.h"
#include "tcuda/dtype.h"
#include "tcuda/sanitizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The mode (tc_sanitizer_mode); 0 while off. */
extern atomic_int tc__san_mode;
static inline bool tc__san_on(void)
{
    return TC_UNLIKELY(atomic_load_explicit(&tc__san_mode, memory_order_relaxed) != 0);
}

/* ---- happens-before --------------------------------------------------------- */

/* `stream` waits for the work queued on `other` so far (wait_stream). */
void tc__san_stream_wait_stream(int dev, void *stream, int other_dev, void *other);
/* The event `key` (any address naming it) now marks `stream`'s work so far. */
void tc__san_event_record(const void *key, int dev, void *stream);
/* `stream` waits for what `key` marks (nothing if never recorded). */
void tc__san_event_wait(const void *key, int dev, void *stream);
/* The host waited for (or queried as complete) the event / the stream /
 * every stream of a device. */
void tc__san_event_sync(const void *key);
void tc__san_stream_sync(int dev, void *stream);
void tc__san_device_sync(int dev);
/* The event is gone: forget what it marked. */
void tc__san_event_destroy(const void *key);

/* ---- memory ----------------------------------------------------------------- */

/* `bytes` at ptr were allocated on `dev` for `stream` (the stream the
 * allocator reuses the memory for after a free); host: pinned host memory
 * (dev -1, stream NULL). Overlapping stale state is dropped. */
void tc__san_alloc(const void *ptr, size_t bytes, int dev, void *stream, bool host);
/* The memory at ptr goes back to the allocator. For device memory, an access
 * by another stream that is neither ordered before the reuse nor covered by
 * record_stream is a reuse-after-free race (reported; in error mode the
 * sanitizer records those streams itself through `record`, so the memory is
 * not reused early, since a free cannot fail). Memory allocated on a
 * capturing stream belongs to a graph's private pool and is reused only by
 * captures into it: its free checks nothing (sanitizer_memory.c says why). */
void tc__san_free(const void *ptr, void (*record)(void *ptr, int dev, void *stream));
/* record_stream: the allocator will reuse the memory only after the work on
 * `stream` queued before the free completes. */
void tc__san_record_stream(const void *ptr, void *stream);

/* An operation: checks every span against the earlier accesses to its
 * memory: a race is reported (report mode; TC_OK), or, in error mode,
 * nothing is recorded and the result is TC_ERROR_RACE with the report as the
 * message (abort mode aborts). Spans outside watched memory are ignored,
 * unless op->adopt. */
tc_status tc__san_access(const tc__access_op *op);

/* ---- graph capture ------------------------------------------------------------ */

/* Accesses queued on `stream` between capture_begin and capture_end are not
 * checked then but kept in a recording (they run at each replay); replay
 * checks them as accesses of the replay stream. */
typedef struct tc__san_recording tc__san_recording;
void tc__san_capture_begin(int dev, void *stream);
/* The recording of the capture (NULL when none was kept); caller frees. */
tc__san_recording *tc__san_capture_end(int dev, void *stream);
/* A replay of rec on `stream`, checked and recorded as one call: in error
 * mode a race refuses the whole replay (TC_ERROR_RACE) and records none of
 * its operations. */
tc_status tc__san_replay(const tc__san_recording *rec, int dev, void *stream);
void tc__san_recording_free(tc__san_recording *rec);

/* ---- lifecycle -------------------------------------------------------------- */

/* At CUDA initialization: applies TCUDA_SANITIZER (base/env.c parsed it)
 * unless tc_sanitizer_enable was called first. */
void tc__san_from_env(void);

/* For tests: the bytes of state the engine holds now (actors, events,
 * allocations and their accesses), and the count of watched allocations. */
size_t tc__san_state_bytes(void);
size_t tc__san_watched(void);

#ifdef __cplusplus
}
#endif

#endif
