/* The stream sanitizer during CUDA graph capture: recordings of the
 * accesses queued on capturing streams, and their replays.
 *
 * Work queued on a stream while CUDA captures it does not run then: it runs
 * at every replay of the graph, on the stream the graph is launched on. So
 * accesses on a capturing stream are kept in a recording instead of being
 * checked, and each replay checks them again as accesses of the replay
 * stream (allocations and frees made during capture are seen as usual). A
 * recording holds one entry per captured operation: bounded by the graph. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sanitizer_engine.h"

typedef struct rec_entry {
    tc__span *spans;
    int n;
    const char *what; /* static */
    char label[40];
} rec_entry;

struct tc__san_recording {
    rec_entry *e;
    int n, cap;
};

typedef struct capture {
    int dev;
    void *stream;
    tc__san_recording *rec;
} capture;
static capture *captures; /* the captures underway, under mu */
static int ncaptures, cap_captures;
static atomic_int capturing_streams; /* ncaptures, read without the lock */

/* Under mu: the capture underway on the stream, or NULL. */
static capture *find_capture(int dev, void *stream)
{
    for (int i = 0; i < ncaptures; i++)
        if (captures[i].dev == dev && captures[i].stream == stream)
            return &captures[i];
    return NULL;
}

bool tc__san_capturing_stream(int dev, void *stream) { return find_capture(dev, stream) != NULL; }

void tc__san_capture_begin(int dev, void *stream)
{
    if (!tc__san_lock_on())
        return;
    tc__san_recording *rec = calloc(1, sizeof *rec);
    if (rec && ncaptures == cap_captures) {
        int nc = cap_captures ? 2 * cap_captures : 4;
        capture *c = realloc(captures, sizeof *c * (size_t)nc);
        if (c) {
            captures = c;
            cap_captures = nc;
        }
    }
    if (rec && ncaptures < cap_captures) {
        captures[ncaptures++] = (capture){dev, stream, rec};
        atomic_store(&capturing_streams, ncaptures);
    } else {
        free(rec); /* out of memory: the capture's accesses are checked as they are queued */
    }
    pthread_mutex_unlock(&tc__san_mu);
}

tc__san_recording *tc__san_capture_end(int dev, void *stream)
{
    tc__san_recording *rec = NULL;
    pthread_mutex_lock(&tc__san_mu);
    for (int i = 0; i < ncaptures; i++)
        if (captures[i].dev == dev && captures[i].stream == stream) {
            rec = captures[i].rec;
            captures[i] = captures[--ncaptures];
            atomic_store(&capturing_streams, ncaptures);
            break;
        }
    pthread_mutex_unlock(&tc__san_mu);
    return rec;
}

void tc__san_recording_free(tc__san_recording *rec)
{
    if (!rec)
        return;
    for (int i = 0; i < rec->n; i++)
        free(rec->e[i].spans);
    free(rec->e);
    free(rec);
}

/* Keeps an access on a capturing stream; false when the stream is not one. */
bool tc__san_capture_access(const tc__access_op *op)
{
    if (TC_LIKELY(atomic_load_explicit(&capturing_streams, memory_order_relaxed) == 0))
        return false;
    pthread_mutex_lock(&tc__san_mu);
    capture *c = find_capture(op->dev, op->stream);
    tc__san_recording *rec = c ? c->rec : NULL;
    if (rec && rec->n == rec->cap) {
        int cap = rec->cap ? 2 * rec->cap : 16;
        rec_entry *e = realloc(rec->e, sizeof *e * (size_t)cap);
        if (e) {
            rec->e = e;
            rec->cap = cap;
        }
    }
    if (rec && rec->n < rec->cap) {
        rec_entry *e = &rec->e[rec->n];
        e->spans = malloc(sizeof *op->spans * (size_t)(op->n > 0 ? op->n : 1));
        if (e->spans) {
            memcpy(e->spans, op->spans, sizeof *op->spans * (size_t)op->n);
            e->n = op->n;
            e->what = op->what;
            snprintf(e->label, sizeof e->label, "%s", op->label ? op->label : "");
            rec->n++;
        }
    }
    pthread_mutex_unlock(&tc__san_mu);
    return rec != NULL;
}

/* The site of a recorded operation replayed now: the replay's call (op,
 * stack) with the recorded kind and label. */
static site replay_site(const site *replay, const rec_entry *e)
{
    site s = *replay;
    s.what = e->what;
    memcpy(s.label, e->label, sizeof s.label);
    return s;
}

/* A replay is one call: its operations are checked and recorded under one
 * hold of the lock, so no other thread's access falls between them. In
 * error mode every operation is checked before any is recorded, so a
 * refused replay (which launches nothing) leaves the state as it was. Every
 * race of every replayed operation is reported. */
tc_status tc__san_replay(const tc__san_recording *rec, int dev, void *stream)
{
    if (!rec || rec->n == 0 || !tc__san_on())
        return TC_OK;
    if (TC_UNLIKELY(atomic_load_explicit(&capturing_streams, memory_order_relaxed) != 0)) {
        pthread_mutex_lock(&tc__san_mu);
        bool captured = find_capture(dev, stream) != NULL;
        pthread_mutex_unlock(&tc__san_mu);
        if (captured) { /* a replay queued into a capture: kept in that recording */
            for (int i = 0; i < rec->n; i++) {
                const rec_entry *e = &rec->e[i];
                tc__access_op op = {.dev = dev,
                                    .stream = stream,
                                    .spans = e->spans,
                                    .n = e->n,
                                    .what = e->what,
                                    .label = e->label[0] ? e->label : NULL};
                TC_TRY(tc__san_access(&op));
            }
            return TC_OK;
        }
    }
    site call;
    tc__san_site_init(&call, NULL, NULL);
    if (!tc__san_lock_on())
        return TC_OK;
    int mode = atomic_load(&tc__san_mode);
    int x = tc__san_actor_of(dev, stream);
    if (x < 0) {
        pthread_mutex_unlock(&tc__san_mu);
        return TC_OK; /* out of memory: not watched */
    }
    tc__san_sync_host(x);
    report_list reps;
    tc__san_reports_init(&reps);
    if (mode == TC_SANITIZER_MODE_ERROR) {
        int nrep = 0;
        for (int i = 0; i < rec->n && nrep == 0; i++) {
            site s = replay_site(&call, &rec->e[i]);
            nrep = tc__san_check_op(x, tc__san_actors[x].vc, rec->e[i].spans, rec->e[i].n, false,
                                    &s, &reps, true);
        }
        if (nrep) {
            pthread_mutex_unlock(&tc__san_mu);
            return tc__san_refuse(&reps);
        }
    }
    for (int i = 0; i < rec->n; i++) {
        site s = replay_site(&call, &rec->e[i]);
        tc__san_check_op(x, tc__san_actors[x].vc, rec->e[i].spans, rec->e[i].n, false, &s, &reps,
                         false);
        tc__san_record_op(x, -1, rec->e[i].spans, rec->e[i].n, &s);
    }
    pthread_mutex_unlock(&tc__san_mu);
    tc__san_deliver_all(&reps, mode);
    return TC_OK;
}
