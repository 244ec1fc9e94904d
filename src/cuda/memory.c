/* The public memory API: one caching allocator per device, created on first
 * use from TCUDA_ALLOC_CONF (parsed once; a bad value fails every call with
 * the parser's message), the cudaMallocAsync backend, user allocators, and the
 * pinned host cache. Once created, a device's allocator lives until exit.
 * Pointers from the async backend or a user allocator are remembered in a
 * small map (size, stream, device) so frees and stats work the same.
 * User allocators (tc_allocator) are checked handles: a destroyed one is
 * parked in a handle pool; the current one is never destroyed, since memory
 * it served may still be freed through it. */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_providers.h"
#include "core/debug.h"
#include "core/handle_pool.h"
#include "cuda_internal.h"
#include "ipc_internal.h"
#include "debug/sanitizer_internal.h"
#include "alloc/alloc_mempool.h"
#include "device_alloc.h"

#define TC_ALLOCATOR_MAGIC 0x7c41a110u

struct tc_allocator {
    uint32_t magic; /* first: tc__handle_check */
    tc_alloc_fn alloc;
    tc_free_fn free;
    void *dl; /* the shared object it came from, or NULL */
};

static tc__handle_pool allocator_pool = TC_HANDLE_POOL_INIT(struct tc_allocator);

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int conf_state; /* 0 unparsed, 1 ok, 2 bad */
static char conf_error[512];
static tc__alloc_config conf;
static _Atomic(tc__allocator *) allocs[TC_MAX_DEVICES];
static tc__allocator *host_alloc;
static tc_allocator *user_alloc;
static atomic_bool any_alloc;

/* ---- ptr map for the async backend and user allocators -------------------- */

typedef struct ext_rec {
    uintptr_t ptr;
    size_t size;
    cudaStream_t stream;
    int device;
} ext_rec;
static ext_rec *ext;
static size_t ext_cap, ext_n;
static struct tc_memory_stats ext_stats[TC_MAX_DEVICES];

static size_t ext_slot(uintptr_t p) { return (size_t)((p >> 9) * 0x9e3779b97f4a7c15ull); }

static bool ext_put(ext_rec r)
{
    if ((ext_n + 1) * 2 > ext_cap) {
        size_t nc = ext_cap ? ext_cap * 2 : 1024;
        ext_rec *n = calloc(nc, sizeof *n);
        if (!n)
            return false;
        for (size_t i = 0; i < ext_cap; i++)
            if (ext[i].ptr) {
                size_t j = ext_slot(ext[i].ptr) & (nc - 1);
                while (n[j].ptr)
                    j = (j + 1) & (nc - 1);
                n[j] = ext[i];
            }
        free(ext);
        ext = n;
        ext_cap = nc;
    }
    size_t j = ext_slot(r.ptr) & (ext_cap - 1);
    while (ext[j].ptr)
        j = (j + 1) & (ext_cap - 1);
    ext[j] = r;
    ext_n++;
    return true;
}

static bool ext_take(uintptr_t p, ext_rec *out)
{
    if (!ext_cap)
        return false;
    size_t m = ext_cap - 1, j = ext_slot(p) & m;
    while (ext[j].ptr && ext[j].ptr != p)
        j = (j + 1) & m;
    if (!ext[j].ptr)
        return false;
    *out = ext[j];
    ext[j].ptr = 0;
    ext_n--;
    for (size_t k = (j + 1) & m; ext[k].ptr; k = (k + 1) & m) {
        size_t h = ext_slot(ext[k].ptr) & m;
        if (((k - h) & m) >= ((k - j) & m)) {
            ext[j] = ext[k];
            ext[k].ptr = 0;
            j = k;
        }
    }
    return true;
}

static void ext_upd(tc_memory_stat *arr, int pi, int64_t d)
{
    int idx[2] = {TC_STAT_ALL, pi};
    for (int q = 0; q < 2; q++) {
        tc_memory_stat *m = &arr[idx[q]];
        m->current += d;
        if (m->current > m->peak)
            m->peak = m->current;
        *(d > 0 ? &m->allocated : &m->freed) += d > 0 ? d : -d;
    }
}

/* Stats for the async backend and user allocators; with a user allocator
 * every allocation is its own segment; with async, reserved bytes come from
 * the pool's attributes instead. */
static void ext_stat(int d, size_t size, int dir)
{
    struct tc_memory_stats *s = &ext_stats[d];
    int pi = size <= TC__SMALL_SIZE ? TC_STAT_SMALL_POOL : TC_STAT_LARGE_POOL;
    int64_t b = dir * (int64_t)size;
    ext_upd(s->allocation, pi, dir);
    ext_upd(s->active, pi, dir);
    ext_upd(s->allocated_bytes, pi, b);
    ext_upd(s->active_bytes, pi, b);
    ext_upd(s->requested_bytes, pi, b);
    if (user_alloc) {
        ext_upd(s->segment, pi, dir);
        ext_upd(s->reserved_bytes, pi, b);
    }
}

/* ---- configuration and lazy creation ------------------------------------------ */

static tc_status load_conf_locked(void)
{
    if (conf_state == 0) {
        tc__alloc_config_default(&conf);
        conf.no_caching = tc__no_caching_enabled(); /* a bad value fails tc_init */
        if (tc__alloc_config_parse(getenv("TCUDA_ALLOC_CONF"), &conf) != TC_OK) {
            snprintf(conf_error, sizeof conf_error, "%s", tc_last_error());
            conf_state = 2;
        } else {
            conf_state = 1;
        }
    }
    if (conf_state == 2)
        return tc__fail(TC_ERROR_INVALID_ARGUMENT, "%s", conf_error);
    return TC_OK;
}

static tc_status get_conf(void)
{
    pthread_mutex_lock(&mu);
    tc_status st = load_conf_locked();
    pthread_mutex_unlock(&mu);
    return st;
}

tc_status tc__device_alloc_conf_check(void) { return get_conf(); }

static tc_status get_allocator(int d, tc__allocator **out)
{
    tc__allocator *a = atomic_load_explicit(&allocs[d], memory_order_acquire);
    if (TC_LIKELY(a != NULL)) {
        *out = a;
        return TC_OK;
    }
    pthread_mutex_lock(&mu);
    tc_status st = load_conf_locked();
    a = atomic_load(&allocs[d]);
    if (st == TC_OK && !a) {
        tc__seg_provider p;
        st = tc__device_provider(d, conf.expandable_segments, &p);
        if (st == TC_OK)
            st = tc__alloc_create(&p, &conf, d, &a);
        if (st == TC_OK)
            atomic_store_explicit(&allocs[d], a, memory_order_release);
    }
    pthread_mutex_unlock(&mu);
    *out = a;
    return st;
}

/* ---- allocation entry points ---------------------------------------------------- */

static tc_status other_alloc(int d, cudaStream_t s, size_t size, void **out)
{
    void *p = NULL;
    if (user_alloc) {
        p = user_alloc->alloc(size, d, (void *)s);
        if (!p)
            return tc__fail(TC_ERROR_OUT_OF_MEMORY,
                            "the user allocator returned NULL for %zu "
                            "bytes on device %d",
                            size, d);
    } else {
        tc_device_guard g = tc_device_guard_enter(d);
        TC_TRY(g.status);
        cudaError_t err = cudaMallocAsync(&p, size, s);
        tc_device_guard_exit(&g);
        if (err != cudaSuccess) {
            pthread_mutex_lock(&mu);
            ext_stats[d].num_ooms += err == cudaErrorMemoryAllocation;
            pthread_mutex_unlock(&mu);
            size_t fr = 0, tot = 0;
            (void)cudaGetLastError();
            (void)tc_mem_get_info(d, &fr, &tot);
            return tc__fail(err == cudaErrorMemoryAllocation ? TC_ERROR_OUT_OF_MEMORY
                                                             : TC_ERROR_CUDA,
                            "cudaMallocAsync of %zu bytes on device %d failed (%s); the GPU has "
                            "%zu of %zu bytes free",
                            size, d, cudaGetErrorString(err), fr, tot);
        }
    }
    pthread_mutex_lock(&mu);
    bool ok = ext_put((ext_rec){(uintptr_t)p, size, s, d});
    if (ok)
        ext_stat(d, size, +1);
    pthread_mutex_unlock(&mu);
    if (!ok) {
        if (user_alloc)
            user_alloc->free(p, size, d, (void *)s);
        else
            (void)cudaFreeAsync(p, s);
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    *out = p;
    return TC_OK;
}

tc_status tc__device_alloc(int device, cudaStream_t stream, size_t size, void **out)
{
    if (TC_UNLIKELY(!atomic_load_explicit(&any_alloc, memory_order_relaxed)))
        atomic_store_explicit(&any_alloc, true,
                              memory_order_relaxed); /* once, not a store per call */
    tc__allocator *a;
    tc_status st = get_allocator(device, &a);
    if (TC_UNLIKELY(st != TC_OK))
        return st;
    if (TC_UNLIKELY(conf.backend == 1 || user_alloc)) {
        if (size == 0) {
            *out = NULL;
            return TC_OK;
        }
        return other_alloc(device, stream, size, out);
    }
    if (TC_UNLIKELY(atomic_load_explicit(&tc__mempool_users, memory_order_relaxed)))
        a = tc__mempool_route(device, a); /* a pool in use on this thread */
    return tc__alloc_malloc(a, size, (uintptr_t)stream, out);
}

tc_status tc__device_free(void *ptr)
{
    if (!ptr)
        return TC_OK;
    /* The current device's allocator first: the likely owner. */
    int cur = tc__tls_device, n = tc__num_devices;
    for (int i = 0; i < n; i++) {
        int d = (cur + i) % n;
        tc__allocator *a = atomic_load_explicit(&allocs[d], memory_order_acquire);
        bool owned = false;
        if (a)
            tc__alloc_free_if_owned(a, ptr, &owned);
        if (owned)
            return TC_OK;
    }
    if (tc__mempool_free_own(ptr))
        return TC_OK;
    pthread_mutex_lock(&mu);
    ext_rec r;
    bool found = ext_take((uintptr_t)ptr, &r);
    if (found)
        ext_stat(r.device, r.size, -1);
    pthread_mutex_unlock(&mu);
    if (!found)
        return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                        "%p was not allocated by tcuda's device allocator (or was freed already)",
                        ptr);
    if (user_alloc) {
        user_alloc->free(ptr, r.size, r.device, (void *)r.stream);
        return TC_OK;
    }
    TC_CUDA_CHECK(cudaFreeAsync(ptr, r.stream));
    return TC_OK;
}

tc_status tc__device_record_stream(void *ptr, cudaStream_t stream)
{
    for (int d = 0; d < tc__num_devices; d++) {
        tc__allocator *a = atomic_load_explicit(&allocs[d], memory_order_acquire);
        if (a && tc__alloc_owns(a, ptr))
            return tc__alloc_record_stream(a, ptr, (uintptr_t)stream);
    }
    tc__allocator *own = tc__mempool_owner(ptr);
    if (own)
        return tc__alloc_record_stream(own, ptr, (uintptr_t)stream);
    if (conf.backend == 1 || user_alloc)
        return TC_OK; /* stream-ordered pools: nothing to record */
    return tc__fail(TC_ERROR_INVALID_ARGUMENT, "%p is not a live block of tcuda's device allocator",
                    ptr);
}

/* Resolves (device, stream) arguments to a device index and a CUDA stream. */
static tc_status resolve(int device, tc_stream *stream, int *d, cudaStream_t *s)
{
    if (stream) {
        tc_stream *ts;
        TC_TRY(tc__resolve_stream(stream, &ts));
        if (device >= 0 && device != ts->device)
            return tc__fail(TC_ERROR_DEVICE_MISMATCH,
                            "the stream is on device %d but device %d was asked for", ts->device,
                            device);
        TC_TRY(tc__resolve_device(ts->device, d));
        *s = ts->handle;
        return TC_OK;
    }
    TC_TRY(tc__resolve_device(device, d));
    *s = tc__current_cuda_stream(*d);
    return TC_OK;
}

/* The stream sanitizer keeps a racing free from early reuse (error mode). */
static void san_protect(void *ptr, int dev, void *stream)
{
    (void)dev;
    (void)tc__device_record_stream(ptr, (cudaStream_t)stream);
}

tc_status tc_caching_allocator_alloc(size_t size, int device, tc_stream *stream, void **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    int d = 0;
    cudaStream_t s = NULL;
    TC_TRY(resolve(device, stream, &d, &s));
    TC_TRY(tc__device_alloc(d, s, size, out));
    if (tc__san_on())
        tc__san_alloc(*out, size, d, (void *)s, false);
    return TC_OK;
}

tc_status tc_caching_allocator_delete(void *ptr)
{
    TC_API_BEGIN;
    if (tc__san_on())
        tc__san_free(ptr, san_protect);
    return tc__device_free(ptr);
}

tc_status tc_caching_allocator_record_stream(void *ptr, tc_stream *stream)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(ptr, "ptr is NULL");
    tc_stream *ts;
    TC_TRY(tc__resolve_stream(stream, &ts));
    TC_TRY(tc__device_record_stream(ptr, ts->handle));
    if (tc__san_on())
        tc__san_record_stream(ptr, (void *)ts->handle);
    return TC_OK;
}

static tc_status check_allocator(const tc_allocator *a);

/* A pool's own provider: the device's (events, memory info), with the
 * user allocator's functions for segments. */
typedef struct user_prov {
    tc__seg_provider base;
    tc_allocator *u;
    int device;
} user_prov;

static tc_status up_alloc(void *ctx, size_t size, uintptr_t stream, void **out)
{
    user_prov *c = ctx;
    void *p = c->u->alloc(size, c->device, (void *)stream);
    if (!p)
        return TC_ERROR_OUT_OF_MEMORY;
    *out = p;
    return TC_OK;
}
static void up_free(void *ctx, void *ptr, size_t size)
{
    user_prov *c = ctx;
    c->u->free(ptr, size, c->device, NULL);
}
static void up_info(void *ctx, size_t *fr, size_t *tot)
{
    user_prov *c = ctx;
    c->base.mem_info(c->base.ctx, fr, tot);
}
static void *up_record(void *ctx, uintptr_t stream)
{
    user_prov *c = ctx;
    return c->base.event_record ? c->base.event_record(c->base.ctx, stream) : NULL;
}
static int up_query(void *ctx, void *ev)
{
    user_prov *c = ctx;
    return c->base.event_query(c->base.ctx, ev);
}
static void up_sync(void *ctx, void *ev)
{
    user_prov *c = ctx;
    c->base.event_sync(c->base.ctx, ev);
}
static void up_destroy(void *ctx, void *ev)
{
    user_prov *c = ctx;
    c->base.event_destroy(c->base.ctx, ev);
}

/* An allocator on `u`'s functions for device d; the pool takes it. */
static tc_status own_pool(int d, tc_allocator *u, tc_mempool **out)
{
    user_prov *c = calloc(1, sizeof *c);
    if (!c)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory for a pool");
    tc_status st = tc__device_provider(d, false, &c->base);
    tc__seg_provider p = {.name = "user pool",
                          .ctx = c,
                          .alloc = up_alloc,
                          .free = up_free,
                          .mem_info = up_info,
                          .free_waits = true};
    if (c->base.event_record) {
        p.event_record = up_record;
        p.event_query = up_query;
        p.event_sync = up_sync;
        p.event_destroy = up_destroy;
    }
    c->u = u;
    c->device = d;
    tc__alloc_config cfg = conf;
    cfg.expandable_segments = false; /* the user allocator maps nothing */
    tc__allocator *a = NULL;
    if (st == TC_OK)
        st = tc__alloc_create(&p, &cfg, d, &a);
    if (st == TC_OK)
        st = tc__mempool_create_own(a, c, u, d, out);
    if (st != TC_OK) { /* nothing was made: the new allocator goes too */
        if (a)
            tc__alloc_destroy(a);
        free(c);
    }
    return st;
}

/* A user pool of the device's caching allocator (alloc_mempool.c). */
tc_status tc_mempool_create(int device, tc_allocator *allocator, tc_mempool **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    if (allocator)
        TC_TRY(check_allocator(allocator));
    int d = 0;
    cudaStream_t s = NULL;
    TC_TRY(resolve(device, NULL, &d, &s));
    tc__allocator *a;
    TC_TRY(get_allocator(d, &a));
    if (conf.backend == 1 || user_alloc)
        return tc__fail(TC_ERROR_NOT_SUPPORTED, "memory pools need the native caching allocator, "
                                                "not cudaMallocAsync or a user allocator");
    if (!allocator)
        return tc__mempool_create_on(a, d, out);
    pthread_mutex_lock(&mu); /* against a concurrent tc_allocator_destroy */
    tc_status st = check_allocator(allocator);
    if (st == TC_OK)
        st = own_pool(d, allocator, out);
    pthread_mutex_unlock(&mu);
    return st;
}

tc_status tc__device_pool_begin(int device, uint64_t id, cudaStream_t stream)
{
    tc__allocator *a;
    TC_TRY(get_allocator(device, &a));
    return tc__alloc_begin_pool(a, id, (uintptr_t)stream);
}
tc_status tc__device_pool_end(int device, cudaStream_t stream)
{
    tc__allocator *a;
    TC_TRY(get_allocator(device, &a));
    return tc__alloc_end_pool(a, (uintptr_t)stream);
}
tc_status tc__device_pool_release(int device, uint64_t id)
{
    tc__allocator *a;
    TC_TRY(get_allocator(device, &a));
    return tc__alloc_release_pool(a, id);
}

tc_status tc_empty_cache(void)
{
    TC_API_BEGIN;
    TC_TRY(tc__ensure_init());
    TC_TRY(tc__sync_check("emptying the cache", TC__SYNC_ALL_STREAMS));
    for (int d = 0; d < tc__num_devices; d++) {
        tc__allocator *a = atomic_load_explicit(&allocs[d], memory_order_acquire);
        if (a)
            tc__alloc_empty_cache(a);
        if (a && conf.backend == 1) {
            cudaMemPool_t pool;
            if (cudaDeviceGetDefaultMemPool(&pool, d) == cudaSuccess) {
                tc_device_guard g = tc_device_guard_enter(d);
                (void)cudaDeviceSynchronize();
                (void)cudaMemPoolTrimTo(pool, 0);
                tc_device_guard_exit(&g);
            }
        }
    }
    return TC_OK;
}

/* ---- statistics --------------------------------------------------------------- */

tc_status tc_memory_stats(int device, struct tc_memory_stats *out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    int d;
    TC_TRY(tc__resolve_device(device, &d));
    tc__allocator *a = atomic_load_explicit(&allocs[d], memory_order_acquire);
    struct tc_memory_stats s;
    memset(&s, 0, sizeof s);
    s.max_split_size = -1;
    if (a && conf.backend == 0 && !user_alloc) {
        tc__alloc_stats(a, &s);
    } else if (a) {
        pthread_mutex_lock(&mu);
        s = ext_stats[d];
        pthread_mutex_unlock(&mu);
        s.max_split_size = -1;
        cudaMemPool_t pool;
        uint64_t cur = 0, high = 0;
        if (!user_alloc && cudaDeviceGetDefaultMemPool(&pool, d) == cudaSuccess &&
            cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &cur) == cudaSuccess &&
            cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &high) == cudaSuccess) {
            s.reserved_bytes[0].current = (int64_t)cur;
            s.reserved_bytes[0].peak = (int64_t)high;
        }
    }
    *out = s;
    return TC_OK;
}

int64_t tc_memory_stats_get(int device, const char *key)
{
    TC_API_BEGIN;
    struct tc_memory_stats s;
    if (!key) {
        tc__fail(TC_ERROR_INVALID_ARGUMENT, "key is NULL");
        return -1;
    }
    if (tc_memory_stats(device, &s) != TC_OK)
        return -1;
    int64_t v, ipc_bytes;
    if (!strcmp(key, "ipc_shared_blocks") || !strcmp(key, "ipc_shared_bytes")) {
        int d = -1; /* shared blocks: held for consumers in other processes (ipc.c) */
        if (tc__resolve_device(device, &d) != TC_OK)
            return -1;
        tc__ipc_shared_stats(d, &v, &ipc_bytes);
        return key[11] == 'b' && key[12] == 'l' ? v : ipc_bytes;
    }
    if (!tc__stats_get(&s, key, &v)) {
        tc__fail(TC_ERROR_INVALID_ARGUMENT,
                 "unknown key '%s' (keys look like "
                 "allocated_bytes.all.current, segment.large_pool.peak or num_ooms)",
                 key);
        return -1;
    }
    return v;
}

static size_t stat_or0(int device, const char *key)
{
    int64_t v = tc_memory_stats_get(device, key);
    return v < 0 ? 0 : (size_t)v;
}

/* Each names itself in messages (a bad device), not tc_memory_stats_get. */
size_t tc_memory_allocated(int d)
{
    TC_API_BEGIN;
    return stat_or0(d, "allocated_bytes.all.current");
}
size_t tc_max_memory_allocated(int d)
{
    TC_API_BEGIN;
    return stat_or0(d, "allocated_bytes.all.peak");
}
size_t tc_memory_reserved(int d)
{
    TC_API_BEGIN;
    return stat_or0(d, "reserved_bytes.all.current");
}
size_t tc_max_memory_reserved(int d)
{
    TC_API_BEGIN;
    return stat_or0(d, "reserved_bytes.all.peak");
}
size_t tc_memory_cached(int d)
{
    TC_API_BEGIN;
    return tc_memory_reserved(d);
}
size_t tc_max_memory_cached(int d)
{
    TC_API_BEGIN;
    return tc_max_memory_reserved(d);
}

tc_status tc_reset_peak_memory_stats(int device)
{
    TC_API_BEGIN;
    int d;
    TC_TRY(tc__resolve_device(device, &d));
    tc__allocator *a = atomic_load_explicit(&allocs[d], memory_order_acquire);
    if (a)
        tc__alloc_reset_peak(a);
    pthread_mutex_lock(&mu);
    tc_memory_stat *all = (tc_memory_stat *)&ext_stats[d];
    for (size_t i = 0; i < 9 * TC_STAT_POOLS; i++)
        all[i].peak = all[i].current;
    pthread_mutex_unlock(&mu);
    if (a && conf.backend == 1) {
        cudaMemPool_t pool;
        uint64_t zero = 0;
        if (cudaDeviceGetDefaultMemPool(&pool, d) == cudaSuccess) {
            (void)cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &zero);
            (void)cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero);
        }
    }
    return TC_OK;
}
tc_status tc_reset_max_memory_allocated(int d)
{
    TC_API_BEGIN;
    return tc_reset_peak_memory_stats(d);
}
tc_status tc_reset_max_memory_cached(int d)
{
    TC_API_BEGIN;
    return tc_reset_peak_memory_stats(d);
}

char *tc_memory_summary(int device, bool abbreviated)
{
    TC_API_BEGIN;
    struct tc_memory_stats s;
    int d;
    if (tc__resolve_device(device, &d) != TC_OK || tc_memory_stats(d, &s) != TC_OK)
        return NULL;
    char *text = tc__stats_summary(&s, d, abbreviated);
    if (!text)
        tc__fail(TC_ERROR_OUT_OF_MEMORY, "no host memory for the summary");
    return text;
}

tc_status tc_memory_snapshot(struct tc_memory_snapshot **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    TC_TRY(tc__ensure_init());
    struct tc_memory_snapshot *snap = calloc(1, sizeof *snap);
    if (!snap)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
    for (int d = 0; d < tc__num_devices; d++) {
        tc__allocator *a = atomic_load_explicit(&allocs[d], memory_order_acquire);
        tc_status st = a ? tc__alloc_snapshot(a, snap) : TC_OK;
        if (st != TC_OK) {
            tc_memory_snapshot_free(snap);
            return st;
        }
    }
    *out = snap;
    return TC_OK;
}

tc_status tc_memory_snapshot_write_json(const struct tc_memory_snapshot *snap, const char *path)
{
    TC_API_BEGIN;
    return tc__snapshot_write_json(snap, path);
}

void tc_memory_snapshot_free(struct tc_memory_snapshot *snap)
{
    if (!snap)
        return;
    tc__snapshot_free(snap);
    free(snap);
}

tc_status tc_set_per_process_memory_fraction(double fraction, int device)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(!isnan(fraction), "fraction is NaN; it must be a number in [0, 1]");
    TC_CHECK_ARG(fraction >= 0.0 && fraction <= 1.0, "memory fraction %.17g is outside [0, 1]",
                 fraction);
    int d;
    TC_TRY(tc__resolve_device(device, &d));
    tc__allocator *a;
    TC_TRY(get_allocator(d, &a));
    return tc__alloc_set_fraction(a, fraction);
}

const char *tc_get_allocator_backend(void)
{
    TC_API_BEGIN;
    if (get_conf() != TC_OK)
        return NULL; /* tc_last_error: the parser's message */
    return conf.backend == 1 ? "cudaMallocAsync" : "native";
}

/* ---- user allocators ---------------------------------------------------------- */

static tc_status check_allocator(const tc_allocator *a)
{
    return tc__handle_check(a, TC_ALLOCATOR_MAGIC, "tc_allocator");
}

static tc_status new_allocator(tc_alloc_fn alloc_fn, tc_free_fn free_fn, void *dl,
                               tc_allocator **out)
{
    tc_allocator *u = tc__handle_get(&allocator_pool);
    if (!u)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "no host memory for an allocator");
    u->magic = TC_ALLOCATOR_MAGIC;
    u->alloc = alloc_fn;
    u->free = free_fn;
    u->dl = dl;
    *out = u;
    return TC_OK;
}

tc_status tc_allocator_from_functions(tc_alloc_fn alloc_fn, tc_free_fn free_fn, tc_allocator **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(alloc_fn, "alloc_fn is NULL");
    TC_CHECK_ARG(free_fn, "free_fn is NULL");
    TC_CHECK_ARG(out, "out is NULL");
    return new_allocator(alloc_fn, free_fn, NULL, out);
}

tc_status tc_pluggable_allocator_load(const char *so_path, const char *alloc_fn,
                                      const char *free_fn, tc_allocator **out)
{
    TC_API_BEGIN;
    /* dlopen("") would give the main program, not a library */
    TC_CHECK_ARG(so_path && *so_path, "so_path is %s; give the path of a shared object",
                 so_path ? "empty" : "NULL");
    TC_CHECK_ARG(alloc_fn && *alloc_fn, "alloc_fn is %s; give the allocation function's name",
                 alloc_fn ? "empty" : "NULL");
    TC_CHECK_ARG(free_fn && *free_fn, "free_fn is %s; give the free function's name",
                 free_fn ? "empty" : "NULL");
    TC_CHECK_ARG(out, "out is NULL");
    void *h = dlopen(so_path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return tc__fail(TC_ERROR_INVALID_ARGUMENT, "cannot load allocator '%s': %s", so_path,
                        dlerror());
    void *af = dlsym(h, alloc_fn), *ff = dlsym(h, free_fn);
    if (!af || !ff) {
        dlclose(h);
        return tc__fail(TC_ERROR_INVALID_ARGUMENT, "'%s' has no function named '%s'", so_path,
                        !af ? alloc_fn : free_fn);
    }
    tc_alloc_fn a;
    tc_free_fn f;
    memcpy(&a, &af, sizeof a);
    memcpy(&f, &ff, sizeof f);
    tc_status st = new_allocator(a, f, h, out);
    if (st != TC_OK)
        dlclose(h);
    return st;
}

tc_status tc_change_current_allocator(tc_allocator *allocator)
{
    TC_API_BEGIN;
    pthread_mutex_lock(&mu); /* against a concurrent tc_allocator_destroy */
    tc_status st = check_allocator(allocator);
    if (st == TC_OK && atomic_load(&any_alloc))
        st = tc__fail(TC_ERROR_INVALID_STATE, "device memory was already allocated; change "
                                              "the allocator before the first allocation");
    if (st == TC_OK)
        user_alloc = allocator;
    pthread_mutex_unlock(&mu);
    return st;
}

tc_status tc_allocator_destroy(tc_allocator *allocator)
{
    TC_API_BEGIN;
    pthread_mutex_lock(&mu);
    tc_status st = check_allocator(allocator);
    if (st == TC_OK && allocator == user_alloc)
        st = tc__fail(TC_ERROR_INVALID_STATE, "it is the current allocator, which serves device "
                                              "memory until the process exits");
    if (st == TC_OK) /* a pool's memory comes from it, and goes back through it */
        st = tc__mempool_check_unused(allocator);
    void *dl = st == TC_OK ? allocator->dl : NULL;
    if (st == TC_OK)
        tc__handle_put(&allocator_pool, allocator);
    pthread_mutex_unlock(&mu);
    if (dl)
        dlclose(dl);
    return st;
}

/* ---- pinned host ---------------------------------------------------------------- */

#define HOST_STREAM UINTPTR_MAX /* host blocks' own "stream": never a CUDA stream */

static tc_status get_host(tc__allocator **out)
{
    TC_TRY(tc__ensure_init());
    pthread_mutex_lock(&mu);
    tc_status st = TC_OK;
    if (!host_alloc) {
        tc__seg_provider p;
        tc__alloc_config c;
        tc__alloc_config_default(&c);
        tc__pinned_provider(&p);
        st = tc__alloc_create(&p, &c, -1, &host_alloc);
    }
    *out = host_alloc;
    pthread_mutex_unlock(&mu);
    return st;
}

tc_status tc_host_alloc(size_t size, void **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    tc__allocator *a;
    TC_TRY(get_host(&a));
    TC_TRY(tc__alloc_malloc(a, size, HOST_STREAM, out));
    if (tc__san_on())
        tc__san_alloc(*out, size, -1, NULL, true);
    return TC_OK;
}

tc_status tc_host_record_stream(void *ptr, tc_stream *stream)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(ptr, "ptr is NULL");
    tc_stream *ts;
    TC_TRY(tc__resolve_stream(stream, &ts));
    return tc__host_record_stream(ptr, (cudaStream_t)ts->handle);
}

tc_status tc__host_record_stream(void *ptr, cudaStream_t stream)
{
    tc__allocator *a;
    TC_TRY(get_host(&a));
    return tc__alloc_record_stream(a, ptr, (uintptr_t)stream);
}

tc_status tc_host_free(void *ptr)
{
    TC_API_BEGIN;
    if (!ptr)
        return TC_OK;
    tc__allocator *a;
    TC_TRY(get_host(&a));
    /* copies queued on the current stream may still read or write it */
    TC_TRY(tc__alloc_record_stream(a, ptr, (uintptr_t)tc__current_cuda_stream(tc__tls_device)));
    if (tc__san_on())
        tc__san_free(ptr, NULL);
    return tc__alloc_free(a, ptr);
}
