/* The stream sanitizer's engine (sanitizer*.c; sanitizer.c lists its files)
 * as the rest of tcuda sees it: the hooks the CUDA runtime calls at synchronization
 * points, the calls its device seam wrappers (sanitizer_ops.c) make for each
 * access, and what the tests drive directly with recorded event sequences.
 * Not installed.
 *
 * Actors are streams, named by (device, runtime stream handle) as the device
 * seam gives them (device_ops.h: opaque handles), and the host, named by
 * device -1 and handle NULL. Every function here is thread-safe and does
 * nothing while the sanitizer is off; callers test tc__san_on() first so
 * that the off path is one predictable branch. */
#ifndef TCUDA_SANITIZER_INTERNAL_H
#define TCUDA_SANITIZER_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/internal.h"
#include "tensor/iter.h"
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

/* The host as an actor. */
#define TC__SAN_HOST_DEV (-1)

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

/* One operand of an operation: the bytes [lo, hi) it may touch, and its
 * dtype and shape for reports (ndim -1 when unknown). */
typedef struct tc__san_span {
    uintptr_t lo, hi;
    bool write;
    tc_dtype dtype;
    int ndim;
    int64_t sizes[TC_MAX_DIMS];
} tc__san_span;

/* What made an access: op is the public call (tc__api_name) or NULL; what a
 * short static description ("binary kernel"); label a user string (copied)
 * or NULL. */
typedef struct tc__san_what {
    const char *what;
    const char *label;
} tc__san_what;

/* An operation on `stream` of `dev` (or the host: TC__SAN_HOST_DEV, NULL)
 * touching `n` spans, queued after `stream` waits for `after_stream` of
 * `after_dev` when after_stream_set (a copy between GPUs). Spans outside
 * watched memory are ignored, except when `adopt`: memory not watched yet
 * becomes watched from this access on (tc_sanitizer_access). Checks every
 * span against the earlier accesses to its memory: a race is reported
 * (report mode; TC_OK), or, in error mode, nothing is recorded and the
 * result is TC_ERROR_RACE with the report as the message (abort mode
 * aborts). */
tc_status tc__san_access(int dev, void *stream, const tc__san_span *spans, int n, tc__san_what what,
                         bool adopt, bool after_stream_set, int after_dev, void *after_stream);

/* The span of an iter operand of element size `esize` (dtype for reports). */
void tc__san_span_of_iter(const tc__iter *it, int op, tc_dtype dtype, bool write,
                          tc__san_span *out);
/* A dense span of `bytes` at ptr (sizes NULL: 1-d, bytes / element size). */
void tc__san_span_dense(const void *ptr, size_t bytes, tc_dtype dtype, int ndim,
                        const int64_t *sizes, bool write, tc__san_span *out);

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

/* ---- the other watcher: captures ordered by data ----------------------------- */

/* The device seam's wrappers (sanitizer_ops.c) also serve graph captures
 * that order their nodes by data (src/graph/cuda/graph_order.c): while any is
 * underway, every GPU kernel the wrappers see is announced to it with its
 * spans before it is queued (begin) and closed after (end). The graph code
 * sets the two functions, then counts its captures; a call that begins and
 * has an end to come leaves tc__graph_order_depth above 0 on its thread. */
extern atomic_int tc__graph_order_captures;
extern _Thread_local int tc__graph_order_depth;
extern void (*tc__graph_order_op_begin)(int dev, void *stream, const tc__san_span *spans, int n);
extern void (*tc__graph_order_op_end)(void);

static inline bool tc__graph_ordering(void)
{
    return TC_UNLIKELY(atomic_load_explicit(&tc__graph_order_captures, memory_order_relaxed) != 0);
}

/* True while the wrappers must declare accesses: the sanitizer is on, or an
 * ordered capture is underway. */
static inline bool tc__seam_watched(void) { return tc__san_on() || tc__graph_ordering(); }

/* ---- lifecycle -------------------------------------------------------------- */

/* Installs the device seam wrappers (sanitizer_ops.c), once. */
void tc__san_install(void);
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
