/* The access layer (access.h): the registry of watchers, and each event
 * handed to every watcher that has a handler for it, in registration order.
 *
 * Watchers are added, never removed, and the registry is read without a
 * lock: a slot is written before the count that publishes it (release), and
 * read after the count (acquire). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "access.h"

atomic_int tc__access_active;
_Thread_local int tc__access_depth;

static const tc__access_watcher *watchers[TC__ACCESS_MAX_WATCHERS];
static atomic_int nwatchers;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

enum { MAX_ENABLERS = 4 };
static void (*enablers[MAX_ENABLERS])(void);
static int nenablers;
static bool enabled; /* the first activation ran the enablers (under mu) */

static _Atomic(tc__stream_resolve_fn) resolver;

/* The registered watchers: *n of them. */
static const tc__access_watcher *const *all(int *n)
{
    *n = atomic_load_explicit(&nwatchers, memory_order_acquire);
    return watchers;
}

tc_status tc__access_watch(const tc__access_watcher *w)
{
    pthread_mutex_lock(&mu);
    int n = atomic_load(&nwatchers);
    for (int i = 0; i < n; i++)
        if (watchers[i] == w) {
            pthread_mutex_unlock(&mu);
            return TC_OK;
        }
    if (n == TC__ACCESS_MAX_WATCHERS) {
        pthread_mutex_unlock(&mu);
        return tc__fail(TC_ERROR_INTERNAL, "more than %d access watchers (%s)",
                        TC__ACCESS_MAX_WATCHERS, w->name);
    }
    watchers[n] = w;
    atomic_store_explicit(&nwatchers, n + 1, memory_order_release);
    pthread_mutex_unlock(&mu);
    return TC_OK;
}

void tc__access_add_enabler(void (*fn)(void))
{
    pthread_mutex_lock(&mu);
    if (nenablers < MAX_ENABLERS)
        enablers[nenablers++] = fn;
    bool now = enabled;
    pthread_mutex_unlock(&mu);
    if (now)
        fn();
}

void tc__access_activate(void)
{
    pthread_mutex_lock(&mu);
    bool first = !enabled;
    enabled = true;
    int n = nenablers;
    pthread_mutex_unlock(&mu);
    if (first) /* enablers install producers; they must be in place before events flow */
        for (int i = 0; i < n; i++)
            enablers[i]();
    atomic_fetch_add(&tc__access_active, 1);
}

void tc__access_deactivate(void) { atomic_fetch_sub(&tc__access_active, 1); }

/* ---- producers -------------------------------------------------------------- */

/* Hands an event to every watcher that has a handler for it. */
#define TELL(handler, ...)                                                                         \
    do {                                                                                           \
        int n_;                                                                                    \
        const tc__access_watcher *const *w_ = all(&n_);                                            \
        for (int i_ = 0; i_ < n_; i_++)                                                            \
            if (w_[i_]->handler)                                                                   \
                w_[i_]->handler(__VA_ARGS__);                                                      \
    } while (0)

tc_status tc__access_op_publish(const tc__access_op *op)
{
    int n;
    const tc__access_watcher *const *w = all(&n);
    for (int i = 0; i < n; i++)
        if (w[i]->op)
            TC_TRY(w[i]->op(op));
    if (op->complete && op->dev != TC__ACCESS_HOST)
        for (int i = 0; i < n; i++)
            if (w[i]->op_begin)
                w[i]->op_begin(op);
    return TC_OK;
}

void tc__access_op_end(void)
{
    int n;
    const tc__access_watcher *const *w = all(&n);
    for (int i = 0; i < n; i++)
        if (w[i]->op_end)
            w[i]->op_end();
}

void tc__access_scratch(void *stream, const void *ptr, size_t bytes)
{
    TELL(scratch, stream, ptr, bytes);
}

bool tc__access_workspace(int dev, void *stream, size_t want, void **ws)
{
    int n;
    const tc__access_watcher *const *w = all(&n);
    for (int i = 0; i < n; i++)
        if (w[i]->workspace && w[i]->workspace(dev, stream, want, ws))
            return true;
    return false;
}

void tc__access_alloc(const void *ptr, size_t bytes, int dev, void *stream, bool host)
{
    TELL(alloc, ptr, bytes, dev, stream, host);
}

void tc__access_free(const void *ptr, tc__protect_fn protect) { TELL(free, ptr, protect); }

void tc__access_record_stream(const void *ptr, void *stream) { TELL(record_stream, ptr, stream); }

void tc__access_sync(const tc__sync *s) { TELL(sync, s); }

/* ---- captures ------------------------------------------------------------------- */

struct tc__access_recording {
    void *rec[TC__ACCESS_MAX_WATCHERS]; /* each watcher's, by registration slot */
};

void tc__access_capture_begin(int dev, void *stream) { TELL(capture_begin, dev, stream); }

tc__access_recording *tc__access_capture_end(int dev, void *stream)
{
    int n;
    const tc__access_watcher *const *w = all(&n);
    void *kept[TC__ACCESS_MAX_WATCHERS] = {0};
    bool any = false;
    for (int i = 0; i < n; i++)
        if (w[i]->capture_end && (kept[i] = w[i]->capture_end(dev, stream)) != NULL)
            any = true;
    if (!any)
        return NULL;
    tc__access_recording *r = malloc(sizeof *r);
    if (!r) { /* out of host memory: what was kept cannot be replayed, so it goes */
        for (int i = 0; i < n; i++)
            if (kept[i])
                w[i]->recording_free(kept[i]);
        return NULL;
    }
    memcpy(r->rec, kept, sizeof kept);
    return r;
}

tc_status tc__access_replay(const tc__access_recording *rec, int dev, void *stream)
{
    if (!rec)
        return TC_OK;
    int n;
    const tc__access_watcher *const *w = all(&n);
    for (int i = 0; i < n; i++)
        if (rec->rec[i] && w[i]->replay)
            TC_TRY(w[i]->replay(rec->rec[i], dev, stream));
    return TC_OK;
}

void tc__access_recording_free(tc__access_recording *rec)
{
    if (!rec)
        return;
    int n;
    const tc__access_watcher *const *w = all(&n);
    for (int i = 0; i < n; i++)
        if (rec->rec[i] && w[i]->recording_free)
            w[i]->recording_free(rec->rec[i]);
    free(rec);
}

/* ---- streams ---------------------------------------------------------------------- */

void tc__access_set_stream_resolver(tc__stream_resolve_fn fn)
{
    atomic_store_explicit(&resolver, fn, memory_order_release);
}

tc_status tc__access_resolve_stream(tc_stream *stream, int *dev, void **handle)
{
    tc__stream_resolve_fn fn = atomic_load_explicit(&resolver, memory_order_acquire);
    if (!fn)
        return tc__fail(TC_ERROR_NO_DEVICE,
                        "CUDA is not available: tcuda was built without CUDA, so there are no "
                        "streams");
    return fn(stream, dev, handle);
}

/* ---- spans ---------------------------------------------------------------------- */

void tc__span_dense(const void *ptr, size_t bytes, tc_dtype dtype, int ndim, const int64_t *sizes,
                    bool write, tc__span *out)
{
    *out = (tc__span){.lo = (uintptr_t)ptr,
                      .hi = (uintptr_t)ptr + bytes,
                      .write = write,
                      .dtype = dtype,
                      .ndim = sizes ? ndim : 1};
    if (!sizes) /* a flat run of elements */
        out->sizes[0] = (int64_t)(bytes / (tc_dtype_size(dtype) ? tc_dtype_size(dtype) : 1));
    for (int d = 0; sizes && d < ndim && d < TC_MAX_DIMS; d++)
        out->sizes[d] = sizes[d];
}
