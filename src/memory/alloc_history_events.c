/* Memory history's events: each allocator's ring of events and map of the
 * stacks of its live blocks and segments (tc__hist_local), and
 * tc__hist_record, which the allocator calls under its mutex.
 *
 * Events and live stacks live in each allocator (tc__hist_local), under its
 * mutex. The clock is read once per entry-point call (a free's two events
 * share it); the copy merges the allocators' rings by time, keeping each
 * ring's order. */
#include "alloc_history.h"

#include <stdlib.h>
#include <time.h>

#include "alloc_internal.h"

/* ---- an allocator's live map -------------------------------------------------- */

static size_t live_hash(int kind, uint64_t addr, size_t c)
{
    uint64_t h = (addr ^ ((uint64_t)kind << 62)) * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 17) & (c - 1);
}

static size_t live_find(const tc__hist_local *h, int kind, uint64_t addr)
{
    if (!h->live_cap)
        return SIZE_MAX;
    for (size_t j = live_hash(kind, addr, h->live_cap); h->live[j].stack;
         j = (j + 1) & (h->live_cap - 1))
        if (h->live[j].addr == addr && h->live[j].kind == kind)
            return j;
    return SIZE_MAX;
}

static void live_put_raw(tc__hist_live *t, size_t c, tc__hist_live e)
{
    size_t j = live_hash(e.kind, e.addr, c);
    while (t[j].stack)
        j = (j + 1) & (c - 1);
    t[j] = e;
}

/* Takes the reference on `stack` (dropped when it cannot be kept). */
static void live_put(tc__hist_local *h, int device, int kind, uint64_t addr, uint32_t stack)
{
    size_t j = live_find(h, kind, addr);
    if (j != SIZE_MAX) {
        tc__hist_stack_put(h->live[j].stack);
        h->live[j].stack = stack;
        return;
    }
    if ((h->live_n + 1) * 2 > h->live_cap) {
        size_t nc = h->live_cap ? h->live_cap * 2 : 256;
        tc__hist_live *t = calloc(nc, sizeof *t);
        if (!t) {
            tc__hist_stack_put(stack);
            return;
        }
        for (size_t i = 0; i < h->live_cap; i++)
            if (h->live[i].stack)
                live_put_raw(t, nc, h->live[i]);
        free(h->live);
        h->live = t;
        h->live_cap = nc;
    }
    live_put_raw(h->live, h->live_cap, (tc__hist_live){addr, device, kind, stack});
    h->live_n++;
}

static void live_remove(tc__hist_local *h, int kind, uint64_t addr)
{
    size_t j = live_find(h, kind, addr), m = h->live_cap - 1;
    if (j == SIZE_MAX)
        return;
    tc__hist_stack_put(h->live[j].stack);
    h->live[j].stack = 0;
    h->live_n--;
    for (size_t k = (j + 1) & m; h->live[k].stack; k = (k + 1) & m) { /* backward shift */
        size_t hh = live_hash(h->live[k].kind, h->live[k].addr, h->live_cap);
        if (((k - hh) & m) >= ((k - j) & m)) {
            h->live[j] = h->live[k];
            h->live[k].stack = 0;
            j = k;
        }
    }
}

/* Drops the live map and its references. */
void tc__hist_live_clear(tc__hist_local *h)
{
    for (size_t j = 0; j < h->live_cap; j++)
        tc__hist_stack_put(h->live[j].stack);
    free(h->live);
    h->live = NULL;
    h->live_cap = h->live_n = 0;
}

/* ---- rings ------------------------------------------------------------------------ */

/* Appends e (its stack's reference goes with it), growing the ring up to
 * max, then overwriting the oldest. */
void tc__hist_push(tc__hist_local *h, const tc__hist_event *e)
{
    if (h->n == h->cap && h->cap < h->max && h->head == 0) {
        size_t nc = h->cap ? h->cap * 2 : 1024;
        nc = nc < h->max ? nc : h->max;
        tc__hist_event *r = realloc(h->ring, nc * sizeof *r);
        if (r) {
            h->ring = r;
            h->cap = nc;
        }
    }
    if (!h->cap) {
        tc__hist_stack_put(e->stack);
        return;
    }
    if (h->n < h->cap) {
        h->ring[(h->head + h->n) % h->cap] = *e;
        h->n++;
    } else {
        tc__hist_stack_put(h->ring[h->head].stack);
        h->ring[h->head] = *e;
        h->head = (h->head + 1) % h->cap;
    }
}

/* Empties a ring (its references dropped) and sets its bound; returns the
 * old slots for the caller to free outside any allocator's lock. */
tc__hist_event *tc__hist_ring_reset(tc__hist_local *h, size_t max)
{
    for (size_t i = 0; i < h->n; i++)
        tc__hist_stack_put(h->ring[(h->head + i) % h->cap].stack);
    h->head = h->n = 0;
    tc__hist_event *old = NULL;
    if (h->cap > max) { /* the same bound (or more) keeps its slots, already touched */
        old = h->ring;
        h->ring = NULL;
        h->cap = 0;
    }
    h->max = max;
    return old;
}

/* ---- recording ---------------------------------------------------------------- */

static const char *const action_names[TC__H_NACTIONS] = {
    "alloc",        "free_requested", "free_completed", "segment_alloc",
    "segment_free", "segment_map",    "segment_unmap",  "oom"};

const char *tc__hist_action_name(int action)
{
    return action >= 0 && action < TC__H_NACTIONS ? action_names[action] : "unknown";
}

uint64_t tc__hist_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static bool wants_stack(unsigned mask, int action)
{
    unsigned mode = mask >> TC__HIST_STACKS_SHIFT;
    return mode == TC_HISTORY_STACKS_ALL ||
           (mode == TC_HISTORY_STACKS_ALLOC &&
            (action == TC__H_ALLOC || action == TC__H_SEGMENT_ALLOC));
}

/* The TC_HISTORY_RECORD_* bit that records an action. */
static unsigned action_bit(int action)
{
    switch (action) {
    case TC__H_ALLOC: return TC_HISTORY_RECORD_ALLOC;
    case TC__H_FREE_REQUESTED:
    case TC__H_FREE_COMPLETED: return TC_HISTORY_RECORD_FREE;
    case TC__H_OOM: return TC_HISTORY_RECORD_OOM;
    default: return TC_HISTORY_RECORD_SEGMENT;
    }
}

void tc__hist_record(tc__allocator *a, int action, uintptr_t addr, size_t size, size_t requested,
                     uintptr_t stream, uint64_t pool_id)
{
    if (a->device < 0)
        return; /* pinned host memory is not device history */
    unsigned mask = atomic_load_explicit(&tc__hist_mask, memory_order_relaxed);
    tc__hist_local *h = &a->hist;
    bool rec = (mask & action_bit(action)) != 0; /* else only the live map's removals */
    if (rec) {
        uint32_t stack = wants_stack(mask, action) ? a->hist_stack : 0;
        uint64_t t;
        if (a->hist_call) { /* one clock read per call */
            if (!a->hist_now)
                a->hist_now = tc__hist_now_us();
            t = a->hist_now;
        } else {
            t = tc__hist_now_us();
        }
        tc__hist_event e = {.time_us = t,
                            .addr = addr,
                            .size = size,
                            .requested = requested,
                            .stream = stream,
                            .pool = pool_id,
                            .device = a->device,
                            .stack = tc__hist_stack_ref(stack),
                            .meta = atomic_load_explicit(&tc__hist_meta, memory_order_relaxed),
                            .action = (uint8_t)action};
        tc__hist_push(h, &e);
        if (action == TC__H_ALLOC || action == TC__H_SEGMENT_ALLOC)
            live_put(h, a->device, action == TC__H_SEGMENT_ALLOC, addr,
                     stack ? tc__hist_stack_ref(stack) : UINT32_MAX);
    }
    if (action == TC__H_FREE_REQUESTED || action == TC__H_SEGMENT_FREE)
        live_remove(h, action == TC__H_SEGMENT_FREE, addr);
}
