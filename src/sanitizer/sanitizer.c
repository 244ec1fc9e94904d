/* The stream sanitizer: its mode, the engine's one mutex, and the public
 * calls (include/tcuda/sanitizer.h). The engine is in files of one part each:
 *   sanitizer_clocks.c  happens-before: actors, vector clocks, events, and
 *                       the hooks the CUDA runtime calls at synchronization points
 *   sanitizer_memory.c  watched allocations and their earlier accesses, and
 *                       the allocator's hooks (alloc, record_stream, free)
 *   sanitizer_access.c  the check and record of one operation
 *   sanitizer_capture.c recordings of graph captures and their replays
 *   sanitizer_report.c  the text of a race and its delivery
 *   sanitizer_stacks.c  call sites and their interned stacks
 * It watches the access layer (access/access.h), which tells it every access
 * and synchronization; sanitizer_internal.h is the engine as the rest of
 * tcuda sees it;
 * sanitizer_engine.h is what its files share. One mutex (tc__san_mu)
 * guards the engine's state; stacks are captured and reports delivered
 * outside it. */
#include <pthread.h>

#include "base/env.h"
#include "sanitizer_engine.h"

atomic_int tc__san_mode;
pthread_mutex_t tc__san_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool explicit_mode; /* tc_sanitizer_enable was called: the environment is ignored */

/* Takes the lock when on and the engine is usable. */
bool tc__san_lock_on(void)
{
    if (!tc__san_on())
        return false;
    pthread_mutex_lock(&tc__san_mu);
    if (tc__san_on() && tc__san_engine_ready())
        return true;
    pthread_mutex_unlock(&tc__san_mu);
    return false;
}

static void forget_all(void)
{
    tc__san_regions_forget();
    tc__san_clocks_forget();
}

/* ---- the sanitizer as a watcher of the access layer ----------------------------- */

static void on_sync(const tc__sync *s)
{
    switch (s->kind) {
    case TC__SYNC_STREAM_WAIT_STREAM:
        tc__san_stream_wait_stream(s->dev, s->stream, s->other_dev, s->other);
        break;
    case TC__SYNC_EVENT_RECORD: tc__san_event_record(s->key, s->dev, s->stream); break;
    case TC__SYNC_EVENT_WAIT: tc__san_event_wait(s->key, s->dev, s->stream); break;
    case TC__SYNC_EVENT_SYNC: tc__san_event_sync(s->key); break;
    case TC__SYNC_EVENT_DESTROY: tc__san_event_destroy(s->key); break;
    case TC__SYNC_STREAM_SYNC: tc__san_stream_sync(s->dev, s->stream); break;
    case TC__SYNC_DEVICE_SYNC: tc__san_device_sync(s->dev); break;
    }
}

static void *on_capture_end(int dev, void *stream) { return tc__san_capture_end(dev, stream); }
static tc_status on_replay(const void *rec, int dev, void *stream)
{
    return tc__san_replay(rec, dev, stream);
}
static void on_recording_free(void *rec) { tc__san_recording_free(rec); }

static const tc__access_watcher watcher = {.name = "the stream sanitizer",
                                           .op = tc__san_access,
                                           .alloc = tc__san_alloc,
                                           .free = tc__san_free,
                                           .record_stream = tc__san_record_stream,
                                           .sync = on_sync,
                                           .capture_begin = tc__san_capture_begin,
                                           .capture_end = on_capture_end,
                                           .replay = on_replay,
                                           .recording_free = on_recording_free};

/* Turning it on makes it an active watcher (registered the first time),
 * turning it off stops that; one mode change at a time. */
static void set_mode(int mode)
{
    static pthread_mutex_t mode_mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&mode_mu);
    bool was_on = atomic_load(&tc__san_mode) != TC_SANITIZER_MODE_OFF,
         on = mode != TC_SANITIZER_MODE_OFF;
    if (on && !was_on && tc__access_watch(&watcher) == TC_OK)
        tc__access_activate();
    pthread_mutex_lock(&tc__san_mu);
    if (!on)
        forget_all();
    atomic_store(&tc__san_mode, mode);
    pthread_mutex_unlock(&tc__san_mu);
    if (was_on && !on)
        tc__access_deactivate();
    pthread_mutex_unlock(&mode_mu);
}

tc_status tc_sanitizer_enable(tc_sanitizer_mode mode)
{
    TC_API_BEGIN;
    TC_CHECK_ARG((unsigned)mode <= TC_SANITIZER_MODE_ABORT,
                 "%d is not a mode: TC_SANITIZER_MODE_OFF, _REPORT, _ERROR or _ABORT", (int)mode);
    atomic_store(&explicit_mode, true);
    set_mode(mode);
    return TC_OK;
}

void tc__san_from_env(void)
{
    int mode = tc__sanitizer_env_mode();
    if (mode != TC_SANITIZER_MODE_OFF && !atomic_load(&explicit_mode))
        set_mode(mode);
}

tc_sanitizer_mode tc_sanitizer_get_mode(void)
{
    return (tc_sanitizer_mode)atomic_load_explicit(&tc__san_mode, memory_order_relaxed);
}

tc_status tc_sanitizer_access(const void *ptr, size_t bytes, tc_stream *stream,
                              tc_sanitizer_access_kind kind, const char *label)
{
    TC_API_BEGIN;
    unsigned k = (unsigned)kind;
    TC_CHECK_ARG((k & ~7u) == 0 && (k & 3u) != 0,
                 "%d is not TC_SANITIZER_ACCESS_READ, _WRITE or _READ_WRITE (or'ed with "
                 "TC_SANITIZER_ACCESS_BY_HOST or not)",
                 (int)kind);
    TC_CHECK_ARG(ptr || bytes == 0, "ptr is NULL but bytes is %zu", bytes);
    if (!tc__san_on() || bytes == 0)
        return TC_OK;
    int dev = TC__ACCESS_HOST;
    void *handle = NULL;
    if (!(k & TC_SANITIZER_ACCESS_BY_HOST))
        TC_TRY(tc__access_resolve_stream(stream, &dev, &handle));
    tc__span sp;
    tc__span_dense(ptr, bytes, TC_UINT8, 0, NULL, (k & TC_SANITIZER_ACCESS_WRITE) != 0, &sp);
    sp.ndim = -1; /* shown as bytes */
    tc__access_op op = {.dev = dev,
                        .stream = handle,
                        .spans = &sp,
                        .n = 1,
                        .what = "user kernel",
                        .label = label,
                        .adopt = true};
    return tc__san_access(&op);
}

size_t tc__san_state_bytes(void)
{
    pthread_mutex_lock(&tc__san_mu);
    size_t b = tc__san_regions_bytes() + tc__san_clocks_bytes();
    pthread_mutex_unlock(&tc__san_mu);
    return b;
}
