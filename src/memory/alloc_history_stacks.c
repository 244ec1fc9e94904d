/* Memory history's stacks: capturing the caller's stack at an entry point,
 * interning it in the stack table (a 32-bit id per stack), and copying the
 * stacks a dump uses.
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
 *  - eviction happens under the table's mutex (tc__hist_smu) only, and only
 *    to an entry it moved from 0 references to -1 (a compare-and-swap), so a
 *    reference, once had, keeps the entry's frames valid.
 * Lookup runs without a lock: each thread caches (hash, id, gen) of the
 * stacks it saw last, and a hit takes a reference with a compare-and-swap
 * (refused at -1), then checks that the entry still has the cached
 * generation and the same frames. A miss takes tc__hist_smu. */
#define _GNU_SOURCE
#include "alloc_history.h"

#include <execinfo.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 48
#define MAX_STACKS (1u << 16)
#define HASH_SLOTS (2 * MAX_STACKS) /* open addressing; ids, 0 empty, TOMB deleted */
#define TOMB UINT32_MAX
#define TCACHE 64 /* per-thread lookup cache */
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

typedef struct sentry {
    atomic_int refs;  /* -1: free */
    atomic_uint gen;  /* bumped on each eviction */
    atomic_bool used; /* CLOCK's bit */
    uint32_t nframes; /* written under tc__hist_smu while refs is -1 */
    uint64_t hash;
    void **frames;
} sentry;

pthread_mutex_t tc__hist_smu = PTHREAD_MUTEX_INITIALIZER;
static sentry *stbl;       /* MAX_STACKS entries, made on the first start, kept */
static uint32_t *shash;    /* HASH_SLOTS, under tc__hist_smu */
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

/* Rebuilds the hash index without tombstones (tc__hist_smu held). */
static void hash_rebuild(void)
{
    memset(shash, 0, HASH_SLOTS * sizeof *shash);
    nslots_used = 0;
    for (uint32_t id = 1; id <= stbl_hw; id++)
        if (atomic_load_explicit(&stbl[id - 1].refs, memory_order_relaxed) >= 0)
            hash_insert(stbl[id - 1].hash, id);
}

/* A free entry for a new stack (tc__hist_smu held): a fresh or free one while fewer
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

/* The slow path of intern: under tc__hist_smu. */
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
    pthread_mutex_lock(&tc__hist_smu);
    uint32_t id = intern_locked(f, k, h);
    pthread_mutex_unlock(&tc__hist_smu);
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
    pthread_mutex_lock(&tc__hist_smu);
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
    pthread_mutex_unlock(&tc__hist_smu);
    return ok;
}

void tc__hist_table_usage(size_t *used, size_t *capacity)
{
    pthread_mutex_lock(&tc__hist_smu);
    *used = stbl_live;
    *capacity = table_cap;
    pthread_mutex_unlock(&tc__hist_smu);
}

/* For tests: a smaller table (at most MAX_STACKS; 0: the default). Every
 * unreferenced stack is evicted now. */
void tc__hist_table_limit(size_t cap);
void tc__hist_table_limit(size_t cap)
{
    pthread_mutex_lock(&tc__hist_smu);
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
    pthread_mutex_unlock(&tc__hist_smu);
}

/* Picks the unwinder (TCUDA_HISTORY_UNWIND: unset or empty for the default,
 * "fp" or "backtrace"; anything else is TC_ERROR_INVALID_ARGUMENT naming the
 * variable, changing nothing) and makes the table on the first start
 * (TC_ERROR_OUT_OF_MEMORY when it cannot). */
tc_status tc__hist_stacks_start(void)
{
    const char *u = getenv("TCUDA_HISTORY_UNWIND");
    bool bt = !FP_DEFAULT;
    if (u && strcmp(u, "backtrace") == 0)
        bt = true;
    else if (u && strcmp(u, "fp") == 0)
        bt = false;
    else if (u && *u)
        return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                        "TCUDA_HISTORY_UNWIND='%.64s' is not an unwinder: use \"fp\" (frame "
                        "pointers) or \"backtrace\"",
                        u);
    if (!table_make())
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory for the stack table");
    atomic_store(&use_backtrace, bt);
    void *warm[2];
    (void)backtrace(warm, 2); /* loads the unwinder now, not inside an allocation */
    return TC_OK;
}

uint32_t tc__hist_stack_ref(uint32_t id)
{
    if (id)
        atomic_fetch_add_explicit(&stbl[id - 1].refs, 1, memory_order_relaxed);
    return id;
}

/* Copies the stacks the events and live entries use, renumbered densely
 * (tc__hist_smu held: no entry is evicted meanwhile, and all of them are referenced). */
bool tc__hist_copy_stacks(tc__hist_copy *c)
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
            /* calloc, not malloc: slots 1..ns are all written below, but GCC
             * cannot see it (-Wmaybe-uninitialized) since this function is not
             * inlined into tc__hist_copy_take any more */
            c->stack_off = calloc((size_t)ns + 1, sizeof *c->stack_off);
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
