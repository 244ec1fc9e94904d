/* Who touches which bytes on which stream: the one layer through which
 * tcuda's operations declare their memory accesses and the points where
 * streams and the host synchronize, and to which the modules that watch
 * them subscribe (the stream sanitizer; graph captures ordered by data).
 * Not installed.
 *
 * Producers (the runtime's streams and events, the allocators, the tensor
 * seam's wrappers, random draws, jiterator, comm and dist) call the
 * tc__access_* functions below, after testing tc__access_on(): while nobody
 * watches, that test is the whole cost, one predictable branch. Watchers
 * register a tc__access_watcher once (tc__access_watch) and count
 * themselves active while they want events (tc__access_activate /
 * tc__access_deactivate); each handler may be NULL, and each watcher
 * decides what its handlers do with an event (the sanitizer ignores
 * everything while its mode is off).
 *
 * Actors are streams, named by (device, runtime stream handle), handles
 * opaque here, and the host, named by device TC__ACCESS_HOST and handle
 * NULL. The runtime tells this layer how to name a tc_stream
 * (tc__access_set_stream_resolver), so that watchers below the runtime can
 * take the user's streams. Producers that only exist once some watcher
 * wants them (the tensor seam's wrappers) register an enabler, run once when
 * the first watcher activates.
 *
 * Everything here is thread-safe. Watchers are registered for the life of
 * the process (at most TC__ACCESS_MAX_WATCHERS). */
#ifndef TCUDA_ACCESS_H
#define TCUDA_ACCESS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/internal.h"
#include "tcuda/dtype.h"
#include "tcuda/stream.h"
#include "tcuda/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The host as an actor. */
#define TC__ACCESS_HOST (-1)
#define TC__ACCESS_MAX_WATCHERS 4

/* One operand of an operation: the bytes [lo, hi) it may touch, and its
 * dtype and shape for reports (ndim -1: shown as bytes). */
typedef struct tc__span {
    uintptr_t lo, hi;
    bool write;
    tc_dtype dtype;
    int ndim;
    int64_t sizes[TC_MAX_DIMS];
} tc__span;

/* A dense span of `bytes` at ptr (sizes NULL: 1-d, bytes / element size). */
void tc__span_dense(const void *ptr, size_t bytes, tc_dtype dtype, int ndim, const int64_t *sizes,
                    bool write, tc__span *out);

/* An operation about to be queued on `stream` of `dev` (or run by the host:
 * TC__ACCESS_HOST, NULL), touching `n` spans. `what` is a short static
 * description ("binary kernel"), `label` a user's string or NULL. With
 * `adopt`, memory nobody watches yet is watched from this access on
 * (tc_sanitizer_access). With `after_set`, the operation is queued after
 * `stream` waits for `after_stream` of `after_dev` (a copy between GPUs).
 * `complete`: the spans are everything the operation touches and it runs on
 * this one stream of a GPU, so a capture may order it by them (a random
 * fill, which also reads its generator's state, or a jiterator kernel, is
 * not complete: captures ordered by data place it after everything before
 * it). */
typedef struct tc__access_op {
    int dev;
    void *stream;
    const tc__span *spans;
    int n;
    const char *what;
    const char *label;
    bool adopt;
    bool complete;
    bool after_set;
    int after_dev;
    void *after_stream;
} tc__access_op;

/* The points where streams and the host synchronize. `key` names an event
 * (any address unique to it). */
typedef enum tc__sync_kind {
    TC__SYNC_STREAM_WAIT_STREAM, /* (dev, stream) waits for (other_dev, other) so far */
    TC__SYNC_EVENT_RECORD,       /* key marks (dev, stream)'s work so far */
    TC__SYNC_EVENT_WAIT,         /* (dev, stream) waits for what key marks */
    TC__SYNC_EVENT_SYNC,         /* the host waited for (or saw complete) key */
    TC__SYNC_EVENT_DESTROY,      /* key is gone */
    TC__SYNC_STREAM_SYNC,        /* the host waited for (or saw complete) (dev, stream) */
    TC__SYNC_DEVICE_SYNC         /* the host waited for every stream of dev */
} tc__sync_kind;

typedef struct tc__sync {
    tc__sync_kind kind;
    const void *key;
    int dev;
    void *stream;
    int other_dev;
    void *other;
} tc__sync;

/* Memory given back: a watcher that finds it still in use by another stream
 * may call protect(ptr, dev, stream) to keep it from reuse until that
 * stream's work queued so far is done (as record_stream would). */
typedef void (*tc__protect_fn)(void *ptr, int dev, void *stream);

/* What a watcher hears. Every handler is optional. */
typedef struct tc__access_watcher {
    const char *name;
    /* An operation about to be queued: a watcher may refuse it
     * (TC_ERROR_RACE), and the producer then queues nothing. */
    tc_status (*op)(const tc__access_op *op);
    /* Around a complete GPU operation (after `op` accepted it, before its
     * work is queued; then after): the watcher may raise tc__access_depth in
     * op_begin, for op_end to close when the producer is done. */
    void (*op_begin)(const tc__access_op *op);
    void (*op_end)(void);
    /* Inside an operation (tc__access_depth > 0): memory the allocator handed
     * out to it, and a workspace it may need (true: *ws is the watcher's). */
    void (*scratch)(void *stream, const void *ptr, size_t bytes);
    bool (*workspace)(int dev, void *stream, size_t want, void **ws);
    /* Allocations that tensors and the user see: `bytes` at ptr on `dev` for
     * `stream` (host: pinned memory, dev -1, stream NULL); given back; used
     * by another stream too (record_stream). */
    void (*alloc)(const void *ptr, size_t bytes, int dev, void *stream, bool host);
    void (*free)(const void *ptr, tc__protect_fn protect);
    void (*record_stream)(const void *ptr, void *stream);
    void (*sync)(const tc__sync *s);
    /* Graph capture of (dev, stream): what the watcher keeps of the capture
     * (NULL: nothing), replayed on (dev, stream) at each replay (which it may
     * refuse), then freed. */
    void (*capture_begin)(int dev, void *stream);
    void *(*capture_end)(int dev, void *stream);
    tc_status (*replay)(const void *rec, int dev, void *stream);
    void (*recording_free)(void *rec);
} tc__access_watcher;

/* ---- watchers --------------------------------------------------------------- */

/* Registers w (static storage) once; later calls with the same w do nothing.
 * TC_ERROR_INTERNAL when TC__ACCESS_MAX_WATCHERS are registered. */
tc_status tc__access_watch(const tc__access_watcher *w);
/* A watcher starts / stops wanting events. The first activation ever runs
 * the enablers. */
void tc__access_activate(void);
void tc__access_deactivate(void);

/* Active watchers; producers test tc__access_on() before publishing. */
extern atomic_int tc__access_active;
static inline bool tc__access_on(void)
{
    return TC_UNLIKELY(atomic_load_explicit(&tc__access_active, memory_order_relaxed) != 0);
}

/* Operations announced to a watcher (op_begin) and not yet ended on this
 * thread; the watcher that opens one raises it, its op_end lowers it. */
extern _Thread_local int tc__access_depth;

/* Runs fn once the first watcher activates (at once if one did already). */
void tc__access_add_enabler(void (*fn)(void));

/* ---- producers -------------------------------------------------------------- */

/* An operation: every watcher's `op` first (the first refusal is returned
 * and nothing else is told), then, for a complete GPU operation,
 * `op_begin`. A producer that publishes a complete operation remembers
 * tc__access_depth before and calls tc__access_op_end when it rose. */
tc_status tc__access_op_publish(const tc__access_op *op);
void tc__access_op_end(void);
void tc__access_scratch(void *stream, const void *ptr, size_t bytes);
/* True with *ws set when a watcher supplies the operation's workspace. */
bool tc__access_workspace(int dev, void *stream, size_t want, void **ws);

void tc__access_alloc(const void *ptr, size_t bytes, int dev, void *stream, bool host);
void tc__access_free(const void *ptr, tc__protect_fn protect);
void tc__access_record_stream(const void *ptr, void *stream);
void tc__access_sync(const tc__sync *s);
static inline void tc__access_sync_of(tc__sync_kind kind, const void *key, int dev, void *stream,
                                      int other_dev, void *other)
{
    tc__sync s = {kind, key, dev, stream, other_dev, other};
    tc__access_sync(&s);
}

/* What the watchers kept of one capture. */
typedef struct tc__access_recording tc__access_recording;
void tc__access_capture_begin(int dev, void *stream);
/* NULL when no watcher kept anything; free with tc__access_recording_free. */
tc__access_recording *tc__access_capture_end(int dev, void *stream);
/* TC_OK for a NULL recording. */
tc_status tc__access_replay(const tc__access_recording *rec, int dev, void *stream);
void tc__access_recording_free(tc__access_recording *rec);

/* ---- naming streams ------------------------------------------------------------- */

/* The runtime's answer to "which (device, handle) is this tc_stream"
 * (NULL: the current stream of the current device). Set once by the runtime
 * when it is linked; without one, tc__access_resolve_stream answers
 * TC_ERROR_NO_DEVICE. */
typedef tc_status (*tc__stream_resolve_fn)(tc_stream *stream, int *dev, void **handle);
void tc__access_set_stream_resolver(tc__stream_resolve_fn fn);
tc_status tc__access_resolve_stream(tc_stream *stream, int *dev, void **handle);

#ifdef __cplusplus
}
#endif

#endif
