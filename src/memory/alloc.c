/* The caching allocator's entry points (no CUDA here; see alloc.h and the
 * file map in alloc_internal.h).
 *
 * malloc rounds the request, looks for the best-fitting free block in the
 * (pool, class, stream) cache, otherwise takes new memory (a new segment, or
 * more of the expandable one), and carves the block; when the provider
 * refuses, it waits for pending frees, releases the cache and tries once
 * more, then fails with an out-of-memory message that says where the memory
 * is. Invariants (checked by tc__alloc_check): blocks tile segments, no two
 * free neighbours, every free block is in exactly its bin, every live block
 * is in the map, every used granule is mapped, and the stats equal a
 * recount. */
#include "alloc.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "alloc_history.h"
#include "alloc_mempool.h"
#include "alloc_internal.h"

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The lock's slow path: spin a little, then sleep on the futex, marking the
 * lock as waited for (2) so that its unlock wakes a sleeper. */
void tc__mutex_wait(tc__mutex *m)
{
    for (int i = 0; i < 100; i++) {
        int free_ = 0;
        if (atomic_load_explicit(&m->v, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_weak_explicit(&m->v, &free_, 1, memory_order_acquire,
                                                  memory_order_relaxed))
            return;
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        __asm__ volatile("yield");
#endif
    }
    while (atomic_exchange_explicit(&m->v, 2, memory_order_acquire) != 0)
        syscall(SYS_futex, &m->v, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
}

void tc__mutex_wake(tc__mutex *m)
{
    syscall(SYS_futex, &m->v, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}
#endif

/* Every allocator, so that a stream going away reaches them all. */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static tc__allocator *reg_head;

static void reg_add(tc__allocator *a)
{
    pthread_mutex_lock(&reg_lock);
    a->reg_next = reg_head;
    reg_head = a;
    pthread_mutex_unlock(&reg_lock);
}

static void reg_remove(tc__allocator *a)
{
    pthread_mutex_lock(&reg_lock);
    for (tc__allocator **p = &reg_head; *p; p = &(*p)->reg_next)
        if (*p == a) {
            *p = a->reg_next;
            break;
        }
    pthread_mutex_unlock(&reg_lock);
}

void tc__alloc_stream_gone_all(uintptr_t stream)
{
    pthread_mutex_lock(&reg_lock); /* then each a->mu: destroy takes reg_lock alone */
    for (tc__allocator *a = reg_head; a; a = a->reg_next)
        tc__alloc_stream_gone(a, stream);
    pthread_mutex_unlock(&reg_lock);
}

tc_status tc__alloc_create(const tc__seg_provider *provider, const tc__alloc_config *cfg,
                           int device, tc__allocator **out)
{
    size_t g = provider->granularity;
    if (g & (g - 1))
        return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                        "the %s provider's granularity %zu is not a "
                        "power of two",
                        provider->name, g);
    tc__allocator *a = calloc(1, sizeof *a);
    if (!a)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory creating an allocator");
    a->gshift = g ? (unsigned)__builtin_ctzll((unsigned long long)g) : 0;
    tc__mutex_init(&a->mu);
    a->p = *provider;
    a->cfg = *cfg;
    a->device = device;
    a->fraction = 1.0;
    a->limit = SIZE_MAX;
    a->epoch = 1; /* caches start with done_epoch 0: frees are not complete */
    a->st.max_split_size = cfg->max_split_size == SIZE_MAX ? -1 : (int64_t)cfg->max_split_size;
    if (cfg->no_caching)
        a->cfg.expandable_segments = false;
    tc__hist_register(a);
    reg_add(a);
    *out = a;
    return TC_OK;
}

void tc__alloc_destroy(tc__allocator *a)
{
    if (!a)
        return;
    reg_remove(a);
    tc__hist_unregister(a);
    tc__process_events(a, true);
    while (a->segs) {
        seg *s = a->segs;
        for (blk *b = s->head; b; b = b->next)
            if (b->state != B_FREE && b->uses) {
                for (unsigned i = 0; i < b->uses->n; i++) /* events of streams gone */
                    if (b->uses->use[i].event && a->p.event_destroy)
                        a->p.event_destroy(a->p.ctx, b->uses->use[i].event);
                free(b->uses);
            }
        a->segs = s->next;
        if (s->expandable)
            tc__exp_release(a, s);
        else
            a->p.free(a->p.ctx, (void *)s->addr, s->size);
        free(s);
    }
    while (a->caches) {
        scache *c = a->caches;
        a->caches = c->next;
        tc__fence_drop(a, c);
        free(c);
    }
    while (a->pools) {
        pool *p = a->pools;
        a->pools = p->next;
        free(p);
    }
    for (size_t i = 0; i < a->nslabs; i++)
        free(a->slabs[i]);
    free(a->slabs);
    free(a->map);
    free(a->pend);
    tc__mutex_destroy(&a->mu);
    free(a);
}

static void oom_message(tc__allocator *a, size_t size)
{
    char b1[32], b2[32], b3[32], b4[32], b5[32];
    size_t fr = 0, tot = 0;
    if (a->p.mem_info)
        a->p.mem_info(a->p.ctx, &fr, &tot);
    int64_t alloc = a->st.allocated_bytes[0].current;
    int64_t unused = a->st.reserved_bytes[0].current - alloc;
    char lim[96] = "";
    if (a->limit != SIZE_MAX)
        snprintf(lim, sizeof lim, " (this process is capped at %s by the memory fraction)",
                 tc__fmt_bytes(b5, sizeof b5, a->limit));
    const char *hint =
        unused > (int64_t)(size_t)(tot / 20)
            ? "reserved-but-unused memory is large: TCUDA_ALLOC_CONF=expandable_segments:True "
              "(or max_split_size_mb) may avoid fragmentation"
            : "free tensors you no longer need, or lower the memory fraction of other processes";
    tc__fail(TC_ERROR_OUT_OF_MEMORY,
             "%s out of memory: tried to allocate %s on device %d, which has a total capacity "
             "of %s of which %s is free%s; tcuda holds %s allocated and %s reserved but "
             "unallocated. Hint: %s",
             a->p.name, tc__fmt_bytes(b1, sizeof b1, size), a->device,
             tc__fmt_bytes(b2, sizeof b2, tot), tc__fmt_bytes(b3, sizeof b3, fr), lim,
             tc__fmt_bytes(b4, sizeof b4, (uint64_t)alloc),
             tc__fmt_bytes(b5, sizeof b5, (uint64_t)(unused > 0 ? unused : 0)), hint);
}

/* Waits for pending frees, then gives back every wholly free segment and
 * every free chunk of expandable ones (empty_cache; before an OOM retry),
 * waiting for their last use. */
static void release_all_cached(tc__allocator *a)
{
    tc__process_events(a, true);
    tc__release_cached(a, 0, false);
    tc__exp_unmap_free(a, SIZE_MAX, true);
}

/* A free block of at least rs bytes for cache c, taken out of its bin and
 * cut to size, its memory mapped. OOM (nothing changed) when none can be had. */
static tc_status get_block(tc__allocator *a, scache *c, size_t rs, blk **out)
{
    blk *b = tc__bin_find(a, c, rs);
    if (!b && TC_UNLIKELY(a->ngone) && tc__gone_adopt(a, c)) /* memory of streams gone */
        b = tc__bin_find(a, c, rs);
    if (!b) {
        if (a->cfg.gc_threshold > 0 && !a->ncaps) { /* no release during capture */
            size_t cap = a->limit != SIZE_MAX ? a->limit : tc__mem_total(a);
            size_t thr = (size_t)(a->cfg.gc_threshold * (double)cap);
            size_t ss = tc__segment_size(rs);
            if (cap && (size_t)a->st.reserved_bytes[0].current + ss > thr)
                tc__release_cached(a, thr > ss ? thr - ss : 0, false);
        }
        TC_TRY(tc__new_segment(a, rs, c, &b));
    }
    if (tc__block_take(a, c, b, rs)) {
        size_t need = tc__exp_unmapped_bytes(a, b);
        if (need) {
            tc__make_room(a, need);
            if (tc__exp_map_block(a, b, need) != TC_OK) {
                tc__free_block(a, b);
                return TC_ERROR_OUT_OF_MEMORY;
            }
        }
    }
    *out = b;
    return TC_OK;
}

static tc_status malloc_locked(tc__allocator *a, size_t size, uintptr_t stream, void **out)
{
    if (a->npend)
        tc__process_events(a, false);
    size_t rs = tc__round_size(&a->cfg, size);
    int small = rs <= TC__SMALL_SIZE;
    uint64_t pid = a->ncaps ? tc__capture_pool(a, stream) : 0;
    if (TC_UNLIKELY(atomic_load_explicit(&tc__mempool_users, memory_order_relaxed)) && !pid)
        pid = tc__mempool_current(a); /* a user pool in use on this thread */
    scache *c = tc__cache_get(a, pid, small, stream);
    if (!c)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory for allocator records");
    blk *b;
    if (get_block(a, c, rs, &b) != TC_OK) {
        a->st.num_alloc_retries++;
        if (!a->ncaps) /* waiting and freeing would break a graph capture */
            release_all_cached(a);
        if (a->ncaps || get_block(a, c, rs, &b) != TC_OK) {
            a->st.num_ooms++;
            oom_message(a, size);
            return TC_ERROR_OUT_OF_MEMORY;
        }
    }
    b->state = B_ALLOC;
    b->requested = size;
    if (TC_UNLIKELY(tc__map_put(a, b) != 0)) {
        tc__free_block(a, b);
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory for the allocator's map");
    }
    stat2_add(a->st.allocation, small, 1);
    stat2_add(a->st.allocated_bytes, small, (int64_t)b->size);
    stat2_add(a->st.active, small, 1);
    stat2_add(a->st.active_bytes, small, (int64_t)b->size);
    if ((size_t)a->st.active_bytes[0].current > a->peak_active)
        a->peak_active = (size_t)a->st.active_bytes[0].current;
    stat2_add(a->st.requested_bytes, small, (int64_t)size);
    if (a->cfg.max_split_size != SIZE_MAX && b->size >= a->cfg.max_split_size)
        stat_upd(&a->st.oversize_allocations, 1);
    if (TC__HIST_ON(TC_HISTORY_RECORD_ALLOC))
        tc__hist_record(a, TC__H_ALLOC, b->addr, b->size, size, stream, pid);
    *out = (void *)b->addr;
    return TC_OK;
}

tc_status tc__alloc_malloc(tc__allocator *a, size_t size, uintptr_t stream, void **out)
{
    if (size == 0) {
        *out = NULL;
        return TC_OK;
    }
    if (size > ((size_t)1 << 56))
        return tc__fail(TC_ERROR_OUT_OF_MEMORY,
                        "tried to allocate %zu bytes: more than any "
                        "device can hold",
                        size);
    uint32_t stack = tc__hist_enter(true); /* before the lock: 0 unless stacks are on */
    tc__mutex_lock(&a->mu);
    tc__hist_begin(a, stack);
    tc_status st = malloc_locked(a, size, stream, out);
    tc__hist_end(a);
    tc__mutex_unlock(&a->mu);
    if (TC_UNLIKELY(st == TC_ERROR_OUT_OF_MEMORY))
        tc__hist_oom(a, size, stream, stack);
    if (TC_UNLIKELY(stack))
        tc__hist_stack_put(stack);
    return st;
}

tc_status tc__alloc_free(tc__allocator *a, void *ptr)
{
    bool owned;
    tc__alloc_free_if_owned(a, ptr, &owned);
    if (!owned)
        return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                        "pointer %p was not allocated by tcuda's %s allocator of device %d (or "
                        "was freed already)",
                        ptr, a->p.name, a->device);
    return TC_OK;
}

void tc__alloc_free_if_owned(tc__allocator *a, void *ptr, bool *owned)
{
    *owned = true;
    if (!ptr)
        return;
    uint32_t stack = tc__hist_enter(false); /* before the lock: 0 unless all stacks are on */
    tc__mutex_lock(&a->mu);
    size_t j = map_find(a, (uintptr_t)ptr);
    if (j == SIZE_MAX) {
        tc__mutex_unlock(&a->mu);
        tc__hist_stack_put(stack);
        *owned = false;
        return;
    }
    tc__hist_begin(a, stack);
    blk *b = a->map[j].b;
    tc__map_remove_at(a, j);
    int small = b->small;
    if (TC__HIST_FREE_SEEN(a, TC_HISTORY_RECORD_FREE))
        tc__hist_record(a, TC__H_FREE_REQUESTED, b->addr, b->size, b->requested, b->seg->sc->stream,
                        b->seg->sc->pool_id);
    stat2_sub(a->st.allocation, small, 1);
    stat2_sub(a->st.allocated_bytes, small, (int64_t)b->size);
    stat2_sub(a->st.requested_bytes, small, (int64_t)b->requested);
    if (a->cfg.max_split_size != SIZE_MAX && b->size >= a->cfg.max_split_size)
        stat_upd(&a->st.oversize_allocations, -1);
    if (TC_UNLIKELY(b->uses != NULL)) {
        b->state = B_PENDING;
        for (unsigned i = 0; i < b->uses->n; i++) {
            blk_use *u = &b->uses->use[i];
            tc__push_pending(a, b, u->stream, u->event); /* takes the event over */
            u->event = NULL;
        }
    }
    if (!b->uses || b->uses->pending == 0)
        tc__complete_free(a, b); /* else when its last event completes */
    tc__hist_end(a);
    tc__mutex_unlock(&a->mu);
    if (TC_UNLIKELY(stack))
        tc__hist_stack_put(stack);
}

bool tc__alloc_owns(tc__allocator *a, const void *ptr)
{
    tc__mutex_lock(&a->mu);
    bool r = map_find(a, (uintptr_t)ptr) != SIZE_MAX;
    tc__mutex_unlock(&a->mu);
    return r;
}

void tc__alloc_empty_cache(tc__allocator *a)
{
    uint32_t stack = tc__hist_enter(false);
    tc__mutex_lock(&a->mu);
    tc__hist_begin(a, stack);
    release_all_cached(a);
    tc__hist_end(a);
    tc__mutex_unlock(&a->mu);
    tc__hist_stack_put(stack);
}

/* The nine per-pool arrays at the start of tc_memory_stats_info, as one
 * run of tc_memory_stat. */
#define NARRAY_STATS (offsetof(tc_memory_stats_info, num_alloc_retries) / sizeof(tc_memory_stat))

void tc__stats_read(const tc__allocator *a, tc_memory_stats_info *out)
{
    *out = a->st;
    tc_memory_stat *s = (tc_memory_stat *)out;
    for (size_t k = 0; k < NARRAY_STATS; k += TC_STAT_POOL_COUNT) {
        for (int p = TC_STAT_POOL_SMALL; p <= TC_STAT_POOL_LARGE; p++)
            s[k + p].freed += s[k + p].allocated - s[k + p].current;
        s[k].allocated = s[k + 1].allocated + s[k + 2].allocated;
        s[k].freed = s[k + 1].freed + s[k + 2].freed;
    }
}

void tc__alloc_stats(tc__allocator *a, tc_memory_stats_info *out)
{
    tc__mutex_lock(&a->mu);
    tc__stats_read(a, out);
    tc__mutex_unlock(&a->mu);
}

static void reset_peak(tc_memory_stat *s) { s->peak = s->current; }

void tc__alloc_reset_peak(tc__allocator *a)
{
    tc__mutex_lock(&a->mu);
    tc_memory_stat *all = (tc_memory_stat *)&a->st;
    for (size_t i = 0; i < NARRAY_STATS; i++)
        reset_peak(&all[i]);
    reset_peak(&a->st.oversize_allocations);
    reset_peak(&a->st.oversize_segments);
    tc__mutex_unlock(&a->mu);
}

void tc__alloc_reset_accumulated(tc__allocator *a)
{
    tc__mutex_lock(&a->mu);
    tc_memory_stat *all = (tc_memory_stat *)&a->st;
    for (size_t i = 0; i < NARRAY_STATS; i++) { /* as kept: see stat2 */
        all[i].allocated = 0;
        all[i].freed = all[i].current;
    }
    a->st.num_alloc_retries = a->st.num_ooms = a->st.num_sync_all_streams = 0;
    a->st.num_device_alloc = a->st.num_device_free = a->st.num_device_synchronize = 0;
    tc__mutex_unlock(&a->mu);
}

tc_status tc__alloc_set_fraction(tc__allocator *a, double fraction)
{
    TC_CHECK_ARG(fraction >= 0.0 && fraction <= 1.0, "memory fraction %g is outside [0, 1]",
                 fraction);
    tc__mutex_lock(&a->mu);
    a->fraction = fraction;
    size_t tot = tc__mem_total(a);
    a->limit = fraction >= 1.0 || tot == 0 ? SIZE_MAX : (size_t)(fraction * (double)tot);
    tc__mutex_unlock(&a->mu);
    return TC_OK;
}
