/* Memory history: capturing and interning stacks, each allocator's ring of
 * events and map of live stacks, the registry of allocators, the copy a
 * dump works from, and the out-of-memory observers.
 *
 * Stacks. An entry point captures its caller's stack before it takes the
 * allocator's mutex: by walking the frame-pointer chain when the library
 * is built with frame pointers (TCUDA_FRAME_POINTERS, the default; the walk
 * stops at a NULL, misaligned or non-increasing frame pointer, one outside
 * the thread's stack, or after MAX_DEPTH frames), else, or with
 * TCUDA_HISTORY_UNWIND=backtrace (and under ThreadSanitizer), with glibc's
 * backtrace(). The walk trusts every frame to keep a frame pointer: code
 * built without them (a program's, a runtime's) ends the stack early or
 * adds stale frames; TCUDA_HISTORY_UNWIND=backtrace is the remedy. Frames
 * are return addresses; names are looked up only at dump time.
 *
 * The stack table interns stacks, so an event keeps a 32-bit id. It holds
 * at most table_cap (MAX_STACKS) stacks of at most MAX_DEPTH frames, so at
 * most MAX_STACKS * MAX_DEPTH * 8 bytes (24 MiB) of frames. Rules:
 *  - every id kept (in a ring event, in a live map, in an entry point's
 *    hand) holds one reference (refs); tc__hist_stack_put drops it, with no
 *    lock;
 *  - an entry with no reference stays, so that a stack seen again costs no
 *    copy, until the table is full: a new stack then takes the place of an
 *    unreferenced one, chosen by the CLOCK approximation of least recently
 *    used (each hit sets `used`; the hand clears it and takes the first
 *    entry it finds clear and unreferenced); when every entry is
 *    referenced, the new event carries no stack (counted in `dropped`);
 *  - eviction happens under the table's mutex (smu) only, and only to an
 *    entry it moved from 0 references to -1 (a compare-and-swap), so a
 *    reference, once had, keeps the entry's frames valid.
 * Lookup runs without a lock: each thread caches (hash, id, gen) of the
 * stacks it saw last, and a hit takes a reference with a compare-and-swap
 * (refused at -1), then checks that the entry still has the cached
 * generation and the same frames. A miss takes smu.
 *
 * Events and live stacks live in each allocator (tc__hist_local), under its
 * mutex. The clock is read once per entry-point call (a free's two events
 * share it); the copy merges the allocators' rings by time, keeping each
 * ring's order. An allocator going away hands its
 * events to the `retired` ring, so a dump still shows them. */
#define _GNU_SOURCE
#include "alloc_history.h"

#include <execinfo.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc_internal.h"

#define MAX_DEPTH 48
#define MAX_STACKS (1u << 16)
#define HASH_SLOTS (2 * MAX_STACKS) /* open addressing; ids, 0 empty, TOMB deleted */
#define TOMB UINT32_MAX
#define TCACHE 64 /* per-thread lookup cache */
#define MAX_OBSERVERS 16
/* The walk by default, unless under ThreadSanitizer, whose runtime (between
 * a thread's start and its function) has no frame pointers: a walk through
 * it reads stale words. TCUDA_HISTORY_UNWIND=fp or =backtrace chooses. */
#if defined(__SANITIZE_THREAD__)
#define FP_DEFAULT 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define FP_DEFAULT 0
#endif
#endif
#ifndef FP_DEFAULT
#define FP_DEFAULT 1
#endif

atomic_uint tc__hist_mask;

/* ---- the stack table ---------------------------------------------------------- */

typedef struct sentry {
    atomic_int refs;  /* -1: free */
    atomic_uint gen;  /* bumped on each eviction */
    atomic_bool used; /* CLOCK's bit */
    uint32_t nframes; /* written under smu while refs is -1 */
    uint64_t hash;
    void **frames;
} sentry;

static pthread_mutex_t smu = PTHREAD_MUTEX_INITIALIZER;
static sentry *stbl;       /* MAX_STACKS entries, made on the first start, kept */
static uint32_t *shash;    /* HASH_SLOTS, under smu */
static uint32_t stbl_hw;   /* entries ever used: ids 1..stbl_hw */
static size_t stbl_live;   /* entries holding a stack */
static size_t nslots_used; /* live + tombstones in shash */
static uint32_t hand;      /* CLOCK */
static uint32_t table_cap = MAX_STACKS;
static atomic_size_t dropped;
static atomic_bool use_backtrace;

static _Thread_local struct {
    uint64_t hash;
    uint32_t id, gen;
} tcache[TCACHE];
static _Thread_local uintptr_t stack_hi; /* 0: not known yet; 1: unknown */

static uint64_t hash_frames(void *const *f, int k)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)k;
    for (int i = 0; i < k; i++)
        h = (h ^ (uint64_t)(uintptr_t)f[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

/* The top of this thread's stack (1 when it cannot be known). */
static uintptr_t thread_stack_hi(void)
{
    if (TC_LIKELY(stack_hi))
        return stack_hi;
    uintptr_t hi = 1;
    pthread_attr_t at;
    if (pthread_getattr_np(pthread_self(), &at) == 0) {
        void *lo = NULL;
        size_t sz = 0;
        if (pthread_attr_getstack(&at, &lo, &sz) == 0 && lo)
            hi = (uintptr_t)lo + sz;
        pthread_attr_destroy(&at);
    }
    stack_hi = hi;
    return hi;
}

/* Return addresses of the callers of this function's caller, walking saved
 * frame pointers ([fp] the caller's fp, [fp + 1] the return address, on
 * x86-64 and AArch64 alike); 0 when the walk cannot be trusted here. */
__attribute__((noinline, no_sanitize("address"))) static int fp_walk(void **f, int max)
{
#if defined(TCUDA_FRAME_POINTERS) && (defined(__x86_64__) || defined(__aarch64__))
    uintptr_t lo = (uintptr_t)&f, hi = thread_stack_hi();
    uintptr_t fp = (uintptr_t)__builtin_frame_address(0);
    if (hi <= 1 || fp < lo || fp >= hi)
        return 0; /* another stack (a signal's, a coroutine's): not ours to walk */
    int k = 0;
    while (k < max + 1) {
        if (fp & (sizeof(void *) - 1) || fp < lo || fp + 2 * sizeof(void *) > hi)
            break;
        const uintptr_t *p = (const uintptr_t *)fp;
        uintptr_t next = p[0], ret = p[1];
        if (!ret)
            break;
        if (k > 0) /* frame 0 returns into tc__hist_capture: not kept */
            f[k - 1] = (void *)ret;
        k++;
        if (next <= fp)
            break;
        fp = next;
    }
    return k > 0 ? k - 1 : 0;
#else
    (void)f, (void)max;
    return 0;
#endif
}

static int capture_frames(void **f)
{
    int k = 0;
    if (!atomic_load_explicit(&use_backtrace, memory_order_relaxed))
        k = fp_walk(f, MAX_DEPTH);
    if (k > 1)
        return k;
    void *b[MAX_DEPTH + 1];
    k = backtrace(b, MAX_DEPTH + 1); /* b[0] is here */
    if (k <= 1)
        return 0;
    memcpy(f, b + 1, (size_t)(k - 1) * sizeof *f);
    return k - 1;
}

static bool same(const sentry *e, uint64_t h, void *const *f, int k)
{
    return e->hash == h && e->nframes == (uint32_t)k &&
           memcmp(e->frames, f, (size_t)k * sizeof *f) == 0;
}

/* A reference on entry id unless it is free (-1). */
static bool try_ref(sentry *e)
{
    int r = atomic_load_explicit(&e->refs, memory_order_relaxed);
    while (r >= 0)
        if (atomic_compare_exchange_weak_explicit(&e->refs, &r, r + 1, memory_order_acq_rel,
                                                  memory_order_relaxed))
            return true;
    return false;
}

void tc__hist_stack_put(uint32_t id)
{
    if (id && id != UINT32_MAX)
        atomic_fetch_sub_explicit(&stbl[id - 1].refs, 1, memory_order_acq_rel);
}

static void hash_insert(uint64_t h, uint32_t id)
{
    size_t j = h & (HASH_SLOTS - 1);
    while (shash[j] && shash[j] != TOMB)
        j = (j + 1) & (HASH_SLOTS - 1);
    nslots_used += shash[j] == 0;
    shash[j] = id;
}

/* Rebuilds the hash index without tombstones (smu held). */
static void hash_rebuild(void)
{
    memset(shash, 0, HASH_SLOTS * sizeof *shash);
    nslots_used = 0;
    for (uint32_t id = 1; id <= stbl_hw; id++)
        if (atomic_load_explicit(&stbl[id - 1].refs, memory_order_relaxed) >= 0)
            hash_insert(stbl[id - 1].hash, id);
}

/* A free entry for a new stack (smu held): a fresh or free one while fewer
 * than table_cap hold stacks, else the least recently used unreferenced
 * one, evicted; 0 when all are referenced. */
static uint32_t take_entry(void)
{
    if (stbl_hw < table_cap && stbl_live < table_cap)
        return ++stbl_hw; /* new entries start free (-1) */
    for (uint32_t step = 0; step < 2 * stbl_hw; step++) {
        uint32_t i = hand;
        hand = (hand + 1) % stbl_hw;
        sentry *e = &stbl[i];
        int zero = 0;
        if (atomic_load_explicit(&e->refs, memory_order_relaxed) < 0) {
            if (stbl_live < table_cap)
                return i + 1;
            continue;
        }
        if (atomic_exchange_explicit(&e->used, false, memory_order_relaxed))
            continue;
        if (!atomic_compare_exchange_strong_explicit(&e->refs, &zero, -1, memory_order_acq_rel,
                                                     memory_order_relaxed))
            continue;
        atomic_fetch_add_explicit(&e->gen, 1, memory_order_relaxed);
        size_t j = e->hash & (HASH_SLOTS - 1);
        while (shash[j] != i + 1)
            j = (j + 1) & (HASH_SLOTS - 1);
        shash[j] = TOMB;
        free(e->frames);
        e->frames = NULL;
        stbl_live--;
        return i + 1;
    }
    return 0;
}

/* The slow path of intern: under smu. */
static uint32_t intern_locked(void *const *f, int k, uint64_t h)
{
    for (size_t j = h & (HASH_SLOTS - 1); shash[j]; j = (j + 1) & (HASH_SLOTS - 1)) {
        uint32_t id = shash[j];
        if (id != TOMB && same(&stbl[id - 1], h, f, k)) {
            atomic_fetch_add_explicit(&stbl[id - 1].refs, 1, memory_order_acq_rel);
            return id;
        }
    }
    void **copy = malloc((size_t)k * sizeof *copy);
    uint32_t id = copy ? take_entry() : 0;
    if (!id) {
        free(copy);
        atomic_fetch_add_explicit(&dropped, 1, memory_order_relaxed);
        return 0;
    }
    sentry *e = &stbl[id - 1];
    memcpy(copy, f, (size_t)k * sizeof *f);
    e->frames = copy;
    e->nframes = (uint32_t)k;
    e->hash = h;
    if (nslots_used + 1 > HASH_SLOTS * 3 / 4)
        hash_rebuild();
    hash_insert(h, id);
    stbl_live++;
    atomic_store_explicit(&e->refs, 1, memory_order_release); /* publishes the frames */
    return id;
}

__attribute__((noinline)) uint32_t tc__hist_capture(unsigned mask, bool alloc)
{
    /* Acquire: the table was made before the mode was stored. */
    mask = atomic_load_explicit(&tc__hist_mask, memory_order_acquire);
    unsigned mode = mask >> TC__HIST_STACKS_SHIFT;
    if (!(mode == TC_HISTORY_STACKS_ALL || (alloc && mode == TC_HISTORY_STACKS_ALLOC)))
        return 0;
    void *f[MAX_DEPTH];
    int k = capture_frames(f);
    if (k <= 0)
        return 0;
    uint64_t h = hash_frames(f, k);
    unsigned slot = (unsigned)(h % TCACHE);
    if (tcache[slot].hash == h && tcache[slot].id) {
        uint32_t id = tcache[slot].id;
        sentry *e = &stbl[id - 1];
        if (try_ref(e)) {
            if (atomic_load_explicit(&e->gen, memory_order_acquire) == tcache[slot].gen &&
                same(e, h, f, k)) {
                atomic_store_explicit(&e->used, true, memory_order_relaxed);
                return id;
            }
            tc__hist_stack_put(id);
        }
    }
    pthread_mutex_lock(&smu);
    uint32_t id = intern_locked(f, k, h);
    pthread_mutex_unlock(&smu);
    if (id) {
        tcache[slot].hash = h;
        tcache[slot].id = id;
        tcache[slot].gen = atomic_load_explicit(&stbl[id - 1].gen, memory_order_relaxed);
        atomic_store_explicit(&stbl[id - 1].used, true, memory_order_relaxed);
    }
    return id;
}

/* Makes the table on the first start (never freed: ids may be in use). */
static bool table_make(void)
{
    pthread_mutex_lock(&smu);
    if (!stbl) {
        sentry *t = calloc(MAX_STACKS, sizeof *t);
        uint32_t *hs = calloc(HASH_SLOTS, sizeof *hs);
        if (t && hs) {
            for (size_t i = 0; i < MAX_STACKS; i++)
                atomic_init(&t[i].refs, -1);
            shash = hs;
            stbl = t;
        } else {
            free(t);
            free(hs);
        }
    }
    bool ok = stbl != NULL;
    pthread_mutex_unlock(&smu);
    return ok;
}

void tc__hist_table_usage(size_t *used, size_t *capacity)
{
    pthread_mutex_lock(&smu);
    *used = stbl_live;
    *capacity = table_cap;
    pthread_mutex_unlock(&smu);
}

/* For tests: a smaller table (at most MAX_STACKS; 0: the default). Every
 * unreferenced stack is evicted now. */
void tc__hist_table_limit(size_t cap);
void tc__hist_table_limit(size_t cap)
{
    pthread_mutex_lock(&smu);
    table_cap = cap && cap < MAX_STACKS ? (uint32_t)cap : MAX_STACKS;
    for (uint32_t i = 0; i < stbl_hw; i++) {
        sentry *e = &stbl[i];
        int zero = 0;
        if (atomic_compare_exchange_strong_explicit(&e->refs, &zero, -1, memory_order_acq_rel,
                                                    memory_order_relaxed)) {
            atomic_fetch_add_explicit(&e->gen, 1, memory_order_relaxed);
            free(e->frames);
            e->frames = NULL;
            stbl_live--;
        }
    }
    if (stbl)
        hash_rebuild();
    hand = 0;
    pthread_mutex_unlock(&smu);
}

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
static void live_clear(tc__hist_local *h)
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
static void push(tc__hist_local *h, const tc__hist_event *e)
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
static tc__hist_event *ring_reset(tc__hist_local *h, size_t max)
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

static uint64_t now_us(void)
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

static uint32_t ref(uint32_t id)
{
    if (id)
        atomic_fetch_add_explicit(&stbl[id - 1].refs, 1, memory_order_relaxed);
    return id;
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
                a->hist_now = now_us();
            t = a->hist_now;
        } else {
            t = now_us();
        }
        tc__hist_event e = {.time_us = t,
                            .addr = addr,
                            .size = size,
                            .requested = requested,
                            .stream = stream,
                            .pool = pool_id,
                            .device = a->device,
                            .stack = ref(stack),
                            .action = (uint8_t)action};
        push(h, &e);
        if (action == TC__H_ALLOC || action == TC__H_SEGMENT_ALLOC)
            live_put(h, a->device, action == TC__H_SEGMENT_ALLOC, addr,
                     stack ? ref(stack) : UINT32_MAX);
    }
    if (action == TC__H_FREE_REQUESTED || action == TC__H_SEGMENT_FREE)
        live_remove(h, action == TC__H_SEGMENT_FREE, addr);
}

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
    unsigned what = opts->record ? opts->record : TC_HISTORY_ALL;
    TC_CHECK_ARG(!(what & ~(unsigned)TC_HISTORY_ALL), "record bits %#x include unknown ones",
                 opts->record);
    TC_CHECK_ARG(opts->stacks >= TC_HISTORY_STACKS_NONE && opts->stacks <= TC_HISTORY_STACKS_ALL,
                 "stacks mode %d is not NONE, ALLOC or ALL", (int)opts->stacks);
    size_t want = opts->max_entries ? opts->max_entries : 100000;
    TC_CHECK_ARG(want <= ((size_t)1 << 28), "max_entries %zu is more than 2^28", want);
    if (!opts->enabled) { /* frees still forget the stacks of live blocks */
        atomic_store(&tc__hist_mask, 0u);
        return TC_OK;
    }
    if (opts->stacks != TC_HISTORY_STACKS_NONE) {
        if (!table_make())
            return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory for the stack table");
        const char *u = getenv("TCUDA_HISTORY_UNWIND");
        bool bt = !FP_DEFAULT;
        if (u && strcmp(u, "backtrace") == 0)
            bt = true;
        else if (u && strcmp(u, "fp") == 0)
            bt = false;
        atomic_store(&use_backtrace, bt);
        void *warm[2];
        (void)backtrace(warm, 2); /* loads the unwinder now, not inside an allocation */
    }
    pthread_mutex_lock(&hmu);
    atomic_store(&tc__hist_mask, 0u); /* nothing recorded while the rings are emptied */
    hist_max = want;
    for (size_t i = 0; i < nallocs; i++) {
        tc__allocator *a = allocs[i];
        tc__mutex_lock(&a->mu);
        tc__hist_event *old = ring_reset(&a->hist, want);
        tc__mutex_unlock(&a->mu);
        free(old);
    }
    free(ring_reset(&retired, want));
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
        push(&retired, &h->ring[(h->head + i) % h->cap]);
    free(h->ring);
    h->ring = NULL;
    h->cap = h->n = h->head = 0;
    live_clear(h);
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

/* Copies the stacks the events and live entries use, renumbered densely
 * (smu held: no entry is evicted meanwhile, and all of them are referenced). */
static bool copy_stacks(tc__hist_copy *c)
{
    uint32_t *remap = calloc((size_t)stbl_hw + 1, sizeof *remap);
    if (!remap)
        return false;
    size_t nf = 0;
    uint32_t ns = 0;
    for (size_t pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < c->nev + c->nlive; i++) {
            uint32_t *s = i < c->nev ? &c->ev[i].stack : &c->live[i - c->nev].stack;
            if (*s == 0 || *s == UINT32_MAX || *s > stbl_hw)
                continue;
            if (pass == 0 && !remap[*s]) {
                remap[*s] = ++ns;
                nf += stbl[*s - 1].nframes;
            } else if (pass == 1) {
                *s = remap[*s];
            }
        }
        if (pass == 0) {
            c->frames = malloc((nf ? nf : 1) * sizeof *c->frames);
            c->stack_off = malloc(((size_t)ns + 1) * sizeof *c->stack_off);
            if (!c->frames || !c->stack_off) {
                free(remap);
                return false;
            }
            c->stack_off[0] = 0;
            for (uint32_t id = 1; id <= stbl_hw; id++) {
                uint32_t r = remap[id];
                if (r) /* r's frames go at r's place: lengths first */
                    c->stack_off[r] = stbl[id - 1].nframes;
            }
            for (uint32_t r = 1; r <= ns; r++)
                c->stack_off[r] += c->stack_off[r - 1];
            for (uint32_t id = 1; id <= stbl_hw; id++) {
                uint32_t r = remap[id];
                if (r)
                    memcpy(&c->frames[c->stack_off[r - 1]], stbl[id - 1].frames,
                           stbl[id - 1].nframes * sizeof *c->frames);
            }
            c->nstacks = ns;
        }
    }
    free(remap);
    return true;
}

tc_status tc__hist_copy_take(tc__hist_copy *c)
{
    memset(c, 0, sizeof *c);
    tc__alloc_config_default(&c->cfg);
    size_t cap_ev = 0, cap_live = 0;
    tc_status st = TC_OK;
    pthread_mutex_lock(&hmu); /* no allocator goes while we read it */
    pthread_mutex_lock(&smu); /* no stack is evicted */
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
    ok = ok && st == TC_OK && copy_stacks(c);
    pthread_mutex_unlock(&smu);
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
    size_t fr = 0, tot = 0;
    if (a->p.mem_info)
        a->p.mem_info(a->p.ctx, &fr, &tot);
    if (TC__HIST_ON(TC_HISTORY_OOM)) {
        tc__mutex_lock(&a->mu);
        tc__hist_begin(a, stack);
        tc__hist_record(a, TC__H_OOM, fr, size, size, stream, 0);
        tc__hist_end(a);
        tc__mutex_unlock(&a->mu);
    }
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
