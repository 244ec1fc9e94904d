/* Memory history's entry points: tc_memory_record_history, the registry of
 * allocators, the copy a dump works from, and the out-of-memory observers.
 * The stacks are in alloc_history_stacks.c, each allocator's events in
 * alloc_history_events.c, the user's metadata and the annotations in
 * alloc_history_notes.c, the dumps in alloc_history_dump.c; alloc_history.h
 * gives the locks' order.
 *
 * An allocator going away hands its events to the `retired` ring, so a dump
 * still shows them. */
#include "alloc_history.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_internal.h"

#define MAX_OBSERVERS 16

atomic_uint tc__hist_mask;

/* ---- the registry ------------------------------------------------------------- */

static pthread_mutex_t hmu = PTHREAD_MUTEX_INITIALIZER; /* the registry, the observers */
static tc__allocator **allocs;
static size_t nallocs, cap_allocs;
static size_t hist_max;        /* max_entries of the recording begun last */
static tc__hist_local retired; /* events of allocators gone */

tc_status tc_memory_record_history(const tc_memory_history_options *opts)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(opts != NULL, "options are NULL");
    unsigned what = opts->record ? opts->record : TC_HISTORY_RECORD_ALL;
    TC_CHECK_ARG(!(what & ~(unsigned)TC_HISTORY_RECORD_ALL), "record bits %#x include unknown ones",
                 opts->record);
    TC_CHECK_ARG(opts->stacks >= TC_HISTORY_STACKS_NONE && opts->stacks <= TC_HISTORY_STACKS_ALL,
                 "stacks mode %d is not NONE, ALLOC or ALL", (int)opts->stacks);
    size_t want = opts->max_entries ? opts->max_entries : 100000;
    TC_CHECK_ARG(want <= ((size_t)1 << 28), "max_entries %zu is more than 2^28", want);
    if (!opts->enabled) { /* frees still forget the stacks of live blocks */
        atomic_store(&tc__hist_mask, 0u);
        return TC_OK;
    }
    if (opts->stacks != TC_HISTORY_STACKS_NONE)
        TC_TRY(tc__hist_stacks_start());
    pthread_mutex_lock(&hmu);
    atomic_store(&tc__hist_mask, 0u); /* nothing recorded while the rings are emptied */
    hist_max = want;
    for (size_t i = 0; i < nallocs; i++) {
        tc__allocator *a = allocs[i];
        tc__mutex_lock(&a->mu);
        tc__hist_event *old = tc__hist_ring_reset(&a->hist, want);
        tc__mutex_unlock(&a->mu);
        free(old);
    }
    free(tc__hist_ring_reset(&retired, want));
    tc__hist_notes_restart(want);
    atomic_store(&tc__hist_mask, what | ((unsigned)opts->stacks << TC__HIST_STACKS_SHIFT));
    pthread_mutex_unlock(&hmu);
    return TC_OK;
}

void tc__hist_register(tc__allocator *a)
{
    pthread_mutex_lock(&hmu);
    a->hist.max = hist_max;
    if (nallocs == cap_allocs) {
        size_t nc = cap_allocs ? cap_allocs * 2 : 16;
        tc__allocator **n = realloc(allocs, nc * sizeof *n);
        if (n) {
            allocs = n;
            cap_allocs = nc;
        }
    }
    if (nallocs < cap_allocs)
        allocs[nallocs++] = a; /* else it is left out of dumps */
    pthread_mutex_unlock(&hmu);
}

void tc__hist_unregister(tc__allocator *a)
{
    pthread_mutex_lock(&hmu); /* waits for a dump that is reading a */
    for (size_t i = 0; i < nallocs; i++)
        if (allocs[i] == a) {
            allocs[i] = allocs[--nallocs];
            break;
        }
    tc__hist_local *h = &a->hist;
    for (size_t i = 0; i < h->n; i++) /* its events stay for dumps, oldest first */
        tc__hist_push(&retired, &h->ring[(h->head + i) % h->cap]);
    free(h->ring);
    h->ring = NULL;
    h->cap = h->n = h->head = 0;
    tc__hist_live_clear(h);
    pthread_mutex_unlock(&hmu);
}

/* ---- the copy a dump works from ----------------------------------------------- */

static int live_cmp(const void *x, const void *y)
{
    const tc__hist_live *p = x, *q = y;
    if (p->device != q->device)
        return p->device < q->device ? -1 : 1;
    if (p->kind != q->kind)
        return p->kind < q->kind ? -1 : 1;
    return p->addr < q->addr ? -1 : p->addr > q->addr;
}

/* Sorts by time, keeping the order of equal ones (each ring is in order
 * already): a bottom-up merge sort. */
static bool sort_events(tc__hist_event *ev, size_t n)
{
    tc__hist_event *tmp = malloc((n ? n : 1) * sizeof *tmp), *src = ev, *dst = tmp;
    if (!tmp)
        return false;
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                dst[k++] = src[j].time_us < src[i].time_us ? src[j++] : src[i++];
            while (i < mid)
                dst[k++] = src[i++];
            while (j < hi)
                dst[k++] = src[j++];
        }
        tc__hist_event *t = src;
        src = dst;
        dst = t;
    }
    if (src != ev)
        memcpy(ev, src, n * sizeof *ev);
    free(tmp);
    return true;
}

static bool append_ring(tc__hist_copy *c, size_t *cap, const tc__hist_local *h)
{
    if (c->nev + h->n > *cap) {
        size_t nc = (c->nev + h->n) * 2;
        tc__hist_event *n = realloc(c->ev, nc * sizeof *n);
        if (!n)
            return false;
        c->ev = n;
        *cap = nc;
    }
    for (size_t i = 0; i < h->n; i++)
        c->ev[c->nev++] = h->ring[(h->head + i) % h->cap];
    return true;
}

static bool append_live(tc__hist_copy *c, size_t *cap, const tc__hist_local *h)
{
    if (c->nlive + h->live_n > *cap) {
        size_t nc = (c->nlive + h->live_n) * 2;
        tc__hist_live *n = realloc(c->live, nc * sizeof *n);
        if (!n)
            return false;
        c->live = n;
        *cap = nc;
    }
    for (size_t j = 0; j < h->live_cap; j++)
        if (h->live[j].stack)
            c->live[c->nlive++] = h->live[j];
    return true;
}

tc_status tc__hist_copy_take(tc__hist_copy *c)
{
    memset(c, 0, sizeof *c);
    tc__alloc_config_default(&c->cfg);
    size_t cap_ev = 0, cap_live = 0;
    tc_status st = TC_OK;
    pthread_mutex_lock(&hmu);          /* no allocator goes while we read it */
    pthread_mutex_lock(&tc__hist_smu); /* no stack is evicted */
    bool ok = append_ring(c, &cap_ev, &retired), first = true;
    for (size_t i = 0; i < nallocs && ok && st == TC_OK; i++) {
        tc__allocator *a = allocs[i];
        if (a->device < 0)
            continue;
        if (a->device + 1 > c->ndevices)
            c->ndevices = a->device + 1;
        if (first)
            c->cfg = a->cfg;
        first = false;
        tc__mutex_lock(&a->mu);
        ok = append_ring(c, &cap_ev, &a->hist) && append_live(c, &cap_live, &a->hist);
        if (ok)
            st = tc__alloc_snapshot_locked(a, &c->snap);
        tc__mutex_unlock(&a->mu);
    }
    ok = ok && st == TC_OK && tc__hist_copy_stacks(c) && tc__hist_notes_copy(c);
    pthread_mutex_unlock(&tc__hist_smu);
    pthread_mutex_unlock(&hmu);
    if (!ok) {
        tc__hist_copy_free(c);
        return st != TC_OK ? st
                           : tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory copying the "
                                                              "history");
    }
    for (size_t i = 0; i < c->nev; i++)
        if (c->ev[i].device + 1 > c->ndevices)
            c->ndevices = c->ev[i].device + 1;
    if (!sort_events(c->ev, c->nev)) {
        tc__hist_copy_free(c);
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory sorting the history");
    }
    if (c->nlive > 1) /* qsort may not take the NULL of an empty list */
        qsort(c->live, c->nlive, sizeof *c->live, live_cmp);
    return TC_OK;
}

void tc__hist_copy_free(tc__hist_copy *c)
{
    free(c->ev);
    free(c->frames);
    free(c->stack_off);
    free(c->live);
    tc__snapshot_free(&c->snap);
    tc__hist_notes_free(c);
    memset(c, 0, sizeof *c);
}

uint32_t tc__hist_copy_live(const tc__hist_copy *c, int device, int kind, uint64_t addr)
{
    tc__hist_live key = {addr, device, kind, 0};
    const tc__hist_live *r = c->nlive ? bsearch(&key, c->live, c->nlive, sizeof key, live_cmp)
                                      : NULL;
    return r && r->stack != UINT32_MAX ? r->stack : 0;
}

/* ---- out-of-memory observers -------------------------------------------------- */

static struct {
    tc_oom_observer_fn fn;
    void *ctx;
} obs[MAX_OBSERVERS];
static int nobs;

tc_status tc_memory_attach_oom_observer(tc_oom_observer_fn fn, void *ctx)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(fn != NULL, "the observer function is NULL");
    pthread_mutex_lock(&hmu);
    bool full = nobs == MAX_OBSERVERS;
    if (!full) {
        obs[nobs].fn = fn;
        obs[nobs].ctx = ctx;
        nobs++;
    }
    pthread_mutex_unlock(&hmu);
    if (full)
        return tc__fail(TC_ERROR_INVALID_STATE, "%d observers are attached already, the most",
                        MAX_OBSERVERS);
    return TC_OK;
}

tc_status tc_memory_detach_oom_observer(tc_oom_observer_fn fn, void *ctx)
{
    TC_API_BEGIN;
    pthread_mutex_lock(&hmu);
    int found = -1;
    for (int i = 0; i < nobs && found < 0; i++)
        if (obs[i].fn == fn && obs[i].ctx == ctx)
            found = i;
    if (found >= 0) {
        memmove(&obs[found], &obs[found + 1], (size_t)(nobs - found - 1) * sizeof obs[0]);
        nobs--;
    }
    pthread_mutex_unlock(&hmu);
    TC_CHECK_ARG(found >= 0, "no observer is attached with this function and context");
    return TC_OK;
}

void tc__hist_oom(tc__allocator *a, size_t size, uintptr_t stream, uint32_t stack)
{
    /* Under the allocator's mutex: the provider's counts (the host
     * provider's in_use) change with every segment another thread maps. */
    size_t fr = 0, tot = 0;
    tc__mutex_lock(&a->mu);
    if (a->p.mem_info)
        a->p.mem_info(a->p.ctx, &fr, &tot);
    if (TC__HIST_ON(TC_HISTORY_RECORD_OOM)) {
        tc__hist_begin(a, stack);
        tc__hist_record(a, TC__H_OOM, fr, size, size, stream, 0);
        tc__hist_end(a);
    }
    tc__mutex_unlock(&a->mu);
    pthread_mutex_lock(&hmu);
    int k = nobs;
    __typeof__(obs) copy;
    memcpy(copy, obs, sizeof obs);
    pthread_mutex_unlock(&hmu);
    if (!k)
        return;
    tc__saved_message saved; /* the OOM message the caller returns */
    tc__message_save(&saved);
    tc_memory_snapshot_info snap = {0, NULL};
    (void)tc__alloc_snapshot(a, &snap);
    tc_oom_info info = {a->device, size, fr, tot, &snap};
    for (int i = 0; i < k; i++)
        copy[i].fn(&info, copy[i].ctx);
    tc__snapshot_free(&snap);
    tc__message_restore(&saved);
}
