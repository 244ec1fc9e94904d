/* Memory history: the ring of events, the stack table, the allocating stack
 * of every live block and segment, the registry of allocators, and the
 * out-of-memory observers.
 *
 * Everything here is under one mutex (hmu), taken inside the allocator's
 * (the hooks run from the allocator with its mutex held). Stacks are
 * captured with backtrace() before hmu is taken and interned: equal stacks
 * share one entry of the table, so an event keeps a 32-bit id. Memory is
 * bounded by the ring (max_entries events), the live map (one slot per live
 * block or segment while recording) and the distinct stacks seen (at most
 * MAX_STACKS; past that, events carry none). Names are looked up only at
 * dump time (alloc_history_dump.c). */
#include "alloc_history.h"

#include <execinfo.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc_internal.h"

#define MAX_DEPTH 48
#define MAX_STACKS (1u << 20)
#define MAX_OBSERVERS 16
#define STACKS_SHIFT 8 /* tc__hist_mask: what bits below, the stack mode from here */

atomic_uint tc__hist_mask;

static pthread_mutex_t hmu = PTHREAD_MUTEX_INITIALIZER;
/* The ring: `cap` slots, the oldest at `head`, `n` used. */
static tc__hist_event *ring;
static size_t cap, head, n;
/* Stacks: frames back to back; stack i (id i + 1) spans soff[i] .. soff[i+1]. */
static void **frames;
static size_t nframes, cap_frames;
static size_t *soff;
static size_t nstacks, cap_stacks;
static uint32_t *stab; /* open addressing: stack ids by hash, 0 empty */
static size_t stab_cap;
/* Live blocks and segments: open addressing by (device, kind, addr). */
static tc__hist_live *live;
static size_t live_cap, live_n;
/* Registered allocators. */
static tc__allocator **allocs;
static size_t nallocs, cap_allocs;
/* Observers. */
static struct {
    tc_oom_observer_fn fn;
    void *ctx;
} obs[MAX_OBSERVERS];
static int nobs;

static const char *const action_names[TC__H_NACTIONS] = {
    "alloc",        "free_requested", "free_completed", "segment_alloc",
    "segment_free", "segment_map",    "segment_unmap",  "oom"};

const char *tc__hist_action_name(int action)
{
    return action >= 0 && action < TC__H_NACTIONS ? action_names[action] : "unknown";
}

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static bool grow(void **p, size_t *capacity, size_t need, size_t elem)
{
    if (need <= *capacity)
        return true;
    size_t c = *capacity ? *capacity : 64;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q)
        return false;
    *p = q;
    *capacity = c;
    return true;
}

/* ---- stacks ---------------------------------------------------------------- */

static uint64_t hash_frames(void *const *f, int k)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)k;
    for (int i = 0; i < k; i++)
        h = (h ^ (uint64_t)(uintptr_t)f[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

static bool stack_eq(uint32_t id, void *const *f, int k)
{
    size_t o = soff[id - 1], e = soff[id];
    return e - o == (size_t)k && memcmp(&frames[o], f, (size_t)k * sizeof *f) == 0;
}

static bool stab_rehash(void)
{
    size_t nc = stab_cap ? stab_cap * 2 : 1024;
    uint32_t *t = calloc(nc, sizeof *t);
    if (!t)
        return false;
    for (uint32_t id = 1; id <= nstacks; id++) {
        size_t o = soff[id - 1];
        size_t j = hash_frames(&frames[o], (int)(soff[id] - o)) & (nc - 1);
        while (t[j])
            j = (j + 1) & (nc - 1);
        t[j] = id;
    }
    free(stab);
    stab = t;
    stab_cap = nc;
    return true;
}

/* The id of the stack f[0..k), added if new; 0 when it cannot be kept. */
static uint32_t intern(void *const *f, int k)
{
    if (k <= 0)
        return 0;
    if ((nstacks + 1) * 2 > stab_cap && !stab_rehash())
        return 0;
    size_t j = hash_frames(f, k) & (stab_cap - 1);
    for (; stab[j]; j = (j + 1) & (stab_cap - 1))
        if (stack_eq(stab[j], f, k))
            return stab[j];
    if (nstacks >= MAX_STACKS ||
        !grow((void **)&frames, &cap_frames, nframes + (size_t)k, sizeof *frames) ||
        !grow((void **)&soff, &cap_stacks, nstacks + 2, sizeof *soff))
        return 0;
    if (nstacks == 0)
        soff[0] = 0;
    memcpy(&frames[nframes], f, (size_t)k * sizeof *f);
    nframes += (size_t)k;
    soff[++nstacks] = nframes;
    stab[j] = (uint32_t)nstacks;
    return (uint32_t)nstacks;
}

/* ---- live blocks and segments ---------------------------------------------- */

static size_t live_hash(int device, int kind, uint64_t addr, size_t c)
{
    uint64_t h = (addr ^ ((uint64_t)(uint32_t)device << 48) ^ ((uint64_t)kind << 62)) *
                 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 17) & (c - 1);
}

static size_t live_find(int device, int kind, uint64_t addr)
{
    if (!live_cap)
        return SIZE_MAX;
    for (size_t j = live_hash(device, kind, addr, live_cap); live[j].stack;
         j = (j + 1) & (live_cap - 1))
        if (live[j].addr == addr && live[j].device == device && live[j].kind == kind)
            return j;
    return SIZE_MAX;
}

static void live_put_raw(tc__hist_live *t, size_t c, tc__hist_live e)
{
    size_t j = live_hash(e.device, e.kind, e.addr, c);
    while (t[j].stack)
        j = (j + 1) & (c - 1);
    t[j] = e;
}

static void live_put(int device, int kind, uint64_t addr, uint32_t stack)
{
    size_t j = live_find(device, kind, addr);
    if (j != SIZE_MAX) {
        live[j].stack = stack;
        return;
    }
    if ((live_n + 1) * 2 > live_cap) {
        size_t nc = live_cap ? live_cap * 2 : 1024;
        tc__hist_live *t = calloc(nc, sizeof *t);
        if (!t)
            return;
        for (size_t i = 0; i < live_cap; i++)
            if (live[i].stack)
                live_put_raw(t, nc, live[i]);
        free(live);
        live = t;
        live_cap = nc;
    }
    live_put_raw(live, live_cap, (tc__hist_live){addr, device, kind, stack});
    live_n++;
}

static void live_remove(int device, int kind, uint64_t addr)
{
    size_t j = live_find(device, kind, addr), m = live_cap - 1;
    if (j == SIZE_MAX)
        return;
    live[j].stack = 0;
    live_n--;
    for (size_t k = (j + 1) & m; live[k].stack; k = (k + 1) & m) { /* backward shift */
        size_t h = live_hash(live[k].device, live[k].kind, live[k].addr, live_cap);
        if (((k - h) & m) >= ((k - j) & m)) {
            live[j] = live[k];
            live[k].stack = 0;
            j = k;
        }
    }
}

/* ---- recording ------------------------------------------------------------- */

static void push(const tc__hist_event *e)
{
    if (!cap)
        return;
    if (n < cap) {
        ring[(head + n) % cap] = *e;
        n++;
    } else {
        ring[head] = *e;
        head = (head + 1) % cap;
    }
}

static bool wants_stack(unsigned mask, int action)
{
    unsigned mode = mask >> STACKS_SHIFT;
    return mode == TC_HISTORY_STACKS_ALL ||
           (mode == TC_HISTORY_STACKS_ALLOC &&
            (action == TC__H_ALLOC || action == TC__H_SEGMENT_ALLOC));
}

/* The TC_HISTORY_* bit that records an action. */
static unsigned action_bit(int action)
{
    switch (action) {
    case TC__H_ALLOC: return TC_HISTORY_ALLOC;
    case TC__H_FREE_REQUESTED:
    case TC__H_FREE_COMPLETED: return TC_HISTORY_FREE;
    case TC__H_OOM: return TC_HISTORY_OOM;
    default: return TC_HISTORY_SEGMENT;
    }
}

/* Drops TC__HIST_TRACK once recording is off and no stack is kept. */
static void track_update(void)
{
    unsigned m = atomic_load_explicit(&tc__hist_mask, memory_order_relaxed);
    if (!(m & TC_HISTORY_ALL) && live_n == 0)
        atomic_store(&tc__hist_mask, 0u);
}

__attribute__((noinline)) void tc__hist_record(tc__allocator *a, int action, uintptr_t addr,
                                               size_t size, size_t requested, uintptr_t stream,
                                               uint64_t pool_id)
{
    unsigned mask = atomic_load_explicit(&tc__hist_mask, memory_order_relaxed);
    if (a->device < 0 || !mask)
        return;                                  /* pinned host memory is not device history */
    bool rec = (mask & action_bit(action)) != 0; /* else only the live map's removals */
    void *f[MAX_DEPTH];
    int k = rec && wants_stack(mask, action) ? backtrace(f, MAX_DEPTH) : 0;
    tc__hist_event e = {.time_us = now_us(),
                        .addr = addr,
                        .size = size,
                        .requested = requested,
                        .stream = stream,
                        .pool = pool_id,
                        .device = a->device,
                        .action = (uint8_t)action};
    pthread_mutex_lock(&hmu);
    e.stack = k > 1 ? intern(f + 1, k - 1) : 0; /* f[0] is this function */
    if (rec)
        push(&e);
    if (rec && (action == TC__H_ALLOC || action == TC__H_SEGMENT_ALLOC)) {
        live_put(a->device, action == TC__H_SEGMENT_ALLOC, addr, e.stack ? e.stack : UINT32_MAX);
    } else if (action == TC__H_FREE_REQUESTED || action == TC__H_SEGMENT_FREE) {
        live_remove(a->device, action == TC__H_SEGMENT_FREE, addr);
        track_update();
    }
    pthread_mutex_unlock(&hmu);
}

tc_status tc_memory_record_history(const tc_memory_history_options *opts)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(opts != NULL, "options are NULL");
    unsigned what = opts->record ? opts->record : TC_HISTORY_ALL;
    TC_CHECK_ARG(!(what & ~(unsigned)TC_HISTORY_ALL), "record bits %#x include unknown ones",
                 opts->record);
    TC_CHECK_ARG(opts->stacks >= TC_HISTORY_STACKS_NONE && opts->stacks <= TC_HISTORY_STACKS_ALL,
                 "stacks mode %d is not NONE, ALLOC or ALL", (int)opts->stacks);
    size_t want = opts->max_entries ? opts->max_entries : 100000;
    TC_CHECK_ARG(want <= ((size_t)1 << 28), "max_entries %zu is more than 2^28", want);
    if (!opts->enabled) { /* frees are still seen while stacks of live blocks are kept */
        pthread_mutex_lock(&hmu);
        atomic_store(&tc__hist_mask, live_n ? TC__HIST_TRACK : 0u);
        pthread_mutex_unlock(&hmu);
        return TC_OK;
    }
    void *warm[2];
    (void)backtrace(warm, 2); /* loads the unwinder now, not inside an allocator's lock */
    pthread_mutex_lock(&hmu);
    if (want != cap) {
        tc__hist_event *r = malloc(want * sizeof *r);
        if (!r) {
            pthread_mutex_unlock(&hmu);
            return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory for %zu history entries",
                            want);
        }
        free(ring);
        ring = r;
        cap = want;
    }
    head = n = 0;
    atomic_store(&tc__hist_mask, what | TC__HIST_TRACK | ((unsigned)opts->stacks << STACKS_SHIFT));
    pthread_mutex_unlock(&hmu);
    return TC_OK;
}

/* ---- the registry ------------------------------------------------------------ */

void tc__hist_register(tc__allocator *a)
{
    pthread_mutex_lock(&hmu);
    if (grow((void **)&allocs, &cap_allocs, nallocs + 1, sizeof *allocs))
        allocs[nallocs++] = a;
    pthread_mutex_unlock(&hmu);
}

void tc__hist_unregister(tc__allocator *a)
{
    pthread_mutex_lock(&hmu);
    bool shared = false; /* another allocator of its device (a pool's own) */
    for (size_t i = 0; i < nallocs; i++)
        if (allocs[i] == a)
            allocs[i--] = allocs[--nallocs];
        else
            shared |= allocs[i]->device == a->device;
    /* Its blocks are gone: put the others back into a fresh table (the map
     * knows devices, not allocators: with another allocator on the device,
     * its entries stay until their addresses are freed or reused). */
    tc__hist_live *t = live_cap && !shared ? calloc(live_cap, sizeof *t) : NULL;
    if (t) {
        live_n = 0;
        for (size_t j = 0; j < live_cap; j++)
            if (live[j].stack && live[j].device != a->device) {
                live_put_raw(t, live_cap, live[j]);
                live_n++;
            }
        free(live);
        live = t;
    }
    track_update();
    pthread_mutex_unlock(&hmu);
}

/* ---- the copy a dump works from ------------------------------------------------ */

static int live_cmp(const void *x, const void *y)
{
    const tc__hist_live *p = x, *q = y;
    if (p->device != q->device)
        return p->device < q->device ? -1 : 1;
    if (p->kind != q->kind)
        return p->kind < q->kind ? -1 : 1;
    return p->addr < q->addr ? -1 : p->addr > q->addr;
}

tc_status tc__hist_copy_take(tc__hist_copy *c)
{
    memset(c, 0, sizeof *c);
    pthread_mutex_lock(&hmu);
    c->ev = malloc((n ? n : 1) * sizeof *c->ev);
    c->frames = malloc((nframes ? nframes : 1) * sizeof *c->frames);
    c->stack_off = malloc((nstacks + 1) * sizeof *c->stack_off);
    c->allocs = malloc((nallocs ? nallocs : 1) * sizeof *c->allocs);
    c->devices = malloc((nallocs ? nallocs : 1) * sizeof *c->devices);
    c->live = malloc((live_n ? live_n : 1) * sizeof *c->live);
    if (!c->ev || !c->frames || !c->stack_off || !c->allocs || !c->devices || !c->live) {
        pthread_mutex_unlock(&hmu);
        tc__hist_copy_free(c);
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory copying the history");
    }
    for (size_t i = 0; i < n; i++)
        c->ev[i] = ring[(head + i) % cap];
    c->nev = n;
    if (nframes)
        memcpy(c->frames, frames, nframes * sizeof *frames);
    c->stack_off[0] = 0;
    if (nstacks)
        memcpy(c->stack_off, soff, (nstacks + 1) * sizeof *soff);
    c->nstacks = nstacks;
    tc__alloc_config_default(&c->cfg);
    for (size_t i = 0; i < nallocs; i++) {
        c->allocs[i] = allocs[i];
        c->devices[i] = allocs[i]->device;
        if (i == 0)
            c->cfg = allocs[i]->cfg;
    }
    c->nallocs = nallocs;
    for (size_t j = 0; j < live_cap; j++)
        if (live[j].stack)
            c->live[c->nlive++] = live[j];
    pthread_mutex_unlock(&hmu);
    qsort(c->live, c->nlive, sizeof *c->live, live_cmp);
    return TC_OK;
}

void tc__hist_copy_free(tc__hist_copy *c)
{
    free(c->ev);
    free(c->frames);
    free(c->stack_off);
    free(c->allocs);
    free(c->devices);
    free(c->live);
    memset(c, 0, sizeof *c);
}

uint32_t tc__hist_copy_live(const tc__hist_copy *c, int device, int kind, uint64_t addr)
{
    tc__hist_live key = {addr, device, kind, 0};
    const tc__hist_live *r = bsearch(&key, c->live, c->nlive, sizeof key, live_cmp);
    return r && r->stack != UINT32_MAX ? r->stack : 0;
}

/* ---- out-of-memory observers -------------------------------------------------- */

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

void tc__hist_oom(tc__allocator *a, size_t size, uintptr_t stream)
{
    size_t fr = 0, tot = 0;
    if (a->p.mem_info)
        a->p.mem_info(a->p.ctx, &fr, &tot);
    if (TC__HIST_ON(TC_HISTORY_OOM))
        tc__hist_record(a, TC__H_OOM, fr, size, size, stream, 0);
    pthread_mutex_lock(&hmu);
    int k = nobs;
    __typeof__(obs) copy;
    memcpy(copy, obs, sizeof obs);
    pthread_mutex_unlock(&hmu);
    if (!k)
        return;
    tc__saved_message saved; /* the OOM message the caller returns */
    tc__message_save(&saved);
    struct tc_memory_snapshot snap = {0, NULL};
    (void)tc__alloc_snapshot(a, &snap);
    tc_oom_info info = {a->device, size, fr, tot, &snap};
    for (int i = 0; i < k; i++)
        copy[i].fn(&info, copy[i].ctx);
    tc__snapshot_free(&snap);
    tc__message_restore(&saved);
}
