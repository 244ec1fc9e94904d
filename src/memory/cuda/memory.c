/* The device side of the public memory API: one caching allocator per
 * device, created on first use from TCUDA_ALLOC_CONF (parsed once; a bad
 * value fails every call with the parser's message), the cudaMallocAsync
 * backend and user allocators behind the same entry points, and the
 * settings (memory fraction, backend). Once created, a device's allocator
 * lives until exit. Pointers from the async backend or a user allocator are
 * remembered in a small map (size, stream, device) so frees and stats work
 * the same.
 * The rest of the API: memory_stats.c (statistics), memory_snapshot.c
 * (snapshots), memory_allocators.c (user allocators), memory_mempool.c
 * (tc_mempool_create), memory_host.c (the pinned host cache);
 * memory_internal.h is what they share. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "memory/memory_args.h"
#include "alloc_providers.h"
#include "base/env.h"
#include "runtime/cuda/cuda_internal.h"
#include "access/access.h"
#include "memory/alloc_mempool.h"
#include "device_alloc.h"
#include "memory_internal.h"

pthread_mutex_t tc__mem_mu = PTHREAD_MUTEX_INITIALIZER;
static int conf_state; /* 0 unparsed, 1 ok, 2 bad */
static char conf_error[512];
tc__alloc_config tc__mem_conf;
_Atomic(tc__allocator *) tc__mem_allocs[TC_MAX_DEVICES];
tc_allocator *tc__mem_user_alloc;
atomic_bool tc__mem_any_alloc;

/* ---- ptr map for the async backend and user allocators -------------------- */

typedef struct ext_rec {
    uintptr_t ptr;
    size_t size;
    cudaStream_t stream;
    int device;
} ext_rec;
static ext_rec *ext;
static size_t ext_cap, ext_n;
tc_memory_stats_info tc__mem_ext_stats[TC_MAX_DEVICES];

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
    int idx[2] = {TC_STAT_POOL_ALL, pi};
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
    tc_memory_stats_info *s = &tc__mem_ext_stats[d];
    int pi = size <= TC__SMALL_SIZE ? TC_STAT_POOL_SMALL : TC_STAT_POOL_LARGE;
    int64_t b = dir * (int64_t)size;
    ext_upd(s->allocation, pi, dir);
    ext_upd(s->active, pi, dir);
    ext_upd(s->allocated_bytes, pi, b);
    ext_upd(s->active_bytes, pi, b);
    ext_upd(s->requested_bytes, pi, b);
    if (tc__mem_user_alloc) {
        ext_upd(s->segment, pi, dir);
        ext_upd(s->reserved_bytes, pi, b);
    }
}

/* ---- configuration and lazy creation ------------------------------------------ */

static tc_status load_conf_locked(void)
{
    if (conf_state == 0) {
        tc__alloc_config_default(&tc__mem_conf);
        tc__mem_conf.no_caching = tc__no_caching_enabled(); /* a bad value fails tc_init */
        if (tc__alloc_config_parse_env(&tc__mem_conf) != TC_OK) {
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
    pthread_mutex_lock(&tc__mem_mu);
    tc_status st = load_conf_locked();
    pthread_mutex_unlock(&tc__mem_mu);
    return st;
}

tc_status tc__mem_get_allocator(int d, tc__allocator **out)
{
    tc__allocator *a = atomic_load_explicit(&tc__mem_allocs[d], memory_order_acquire);
    if (TC_LIKELY(a != NULL)) {
        *out = a;
        return TC_OK;
    }
    pthread_mutex_lock(&tc__mem_mu);
    tc_status st = load_conf_locked();
    a = atomic_load(&tc__mem_allocs[d]);
    if (st == TC_OK && !a) {
        tc__seg_provider p;
        st = tc__device_provider(d, tc__mem_conf.expandable_segments, &p);
        if (st == TC_OK)
            st = tc__alloc_create(&p, &tc__mem_conf, d, &a);
        if (st == TC_OK)
            atomic_store_explicit(&tc__mem_allocs[d], a, memory_order_release);
    }
    pthread_mutex_unlock(&tc__mem_mu);
    *out = a;
    return st;
}

/* ---- allocation entry points ---------------------------------------------------- */

static tc_status other_alloc(int d, cudaStream_t s, size_t size, void **out)
{
    void *p = NULL;
    if (tc__mem_user_alloc) {
        p = tc__mem_user_alloc->alloc(size, d, (void *)s);
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
            pthread_mutex_lock(&tc__mem_mu);
            tc__mem_ext_stats[d].num_ooms += err == cudaErrorMemoryAllocation;
            pthread_mutex_unlock(&tc__mem_mu);
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
    pthread_mutex_lock(&tc__mem_mu);
    bool ok = ext_put((ext_rec){(uintptr_t)p, size, s, d});
    if (ok)
        ext_stat(d, size, +1);
    pthread_mutex_unlock(&tc__mem_mu);
    if (!ok) {
        if (tc__mem_user_alloc)
            tc__mem_user_alloc->free(p, size, d, (void *)s);
        else
            (void)cudaFreeAsync(p, s);
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    *out = p;
    return TC_OK;
}

static tc_status device_alloc(int device, cudaStream_t stream, size_t size, void **out)
{
    if (TC_UNLIKELY(!atomic_load_explicit(&tc__mem_any_alloc, memory_order_relaxed)))
        atomic_store_explicit(&tc__mem_any_alloc, true,
                              memory_order_relaxed); /* once, not a store per call */
    tc__allocator *a;
    tc_status st = tc__mem_get_allocator(device, &a);
    if (TC_UNLIKELY(st != TC_OK))
        return st;
    if (TC_UNLIKELY(tc__mem_conf.backend == 1 || tc__mem_user_alloc)) {
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

tc_status tc__device_alloc(int device, cudaStream_t stream, size_t size, void **out)
{
    tc_status st = device_alloc(device, stream, size, out);
    if (TC_UNLIKELY(tc__access_depth > 0) && st == TC_OK)
        tc__access_scratch((void *)stream, *out, size); /* inside an operation a watcher opened */
    return st;
}

tc_status tc__device_free(void *ptr)
{
    if (!ptr)
        return TC_OK;
    /* The current device's allocator first: the likely owner. */
    int cur = tc__tls_device, n = tc__num_devices;
    for (int i = 0; i < n; i++) {
        int d = (cur + i) % n;
        tc__allocator *a = atomic_load_explicit(&tc__mem_allocs[d], memory_order_acquire);
        bool owned = false;
        if (a)
            tc__alloc_free_if_owned(a, ptr, &owned);
        if (owned)
            return TC_OK;
    }
    if (tc__mempool_free_own(ptr))
        return TC_OK;
    pthread_mutex_lock(&tc__mem_mu);
    ext_rec r;
    bool found = ext_take((uintptr_t)ptr, &r);
    if (found)
        ext_stat(r.device, r.size, -1);
    pthread_mutex_unlock(&tc__mem_mu);
    if (!found)
        return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                        "%p was not allocated by tcuda's device allocator (or was freed already)",
                        ptr);
    if (tc__mem_user_alloc) {
        tc__mem_user_alloc->free(ptr, r.size, r.device, (void *)r.stream);
        return TC_OK;
    }
    TC_CUDA_CHECK(cudaFreeAsync(ptr, r.stream));
    return TC_OK;
}

tc_status tc__device_record_stream(void *ptr, cudaStream_t stream)
{
    for (int d = 0; d < tc__num_devices; d++) {
        tc__allocator *a = atomic_load_explicit(&tc__mem_allocs[d], memory_order_acquire);
        if (a && tc__alloc_owns(a, ptr))
            return tc__alloc_record_stream(a, ptr, (uintptr_t)stream);
    }
    tc__allocator *own = tc__mempool_owner(ptr);
    if (own)
        return tc__alloc_record_stream(own, ptr, (uintptr_t)stream);
    if (tc__mem_conf.backend == 1 || tc__mem_user_alloc)
        return TC_OK; /* stream-ordered pools: nothing to record */
    return tc__fail(TC_ERROR_INVALID_ARGUMENT, "%p is not a live block of tcuda's device allocator",
                    ptr);
}

/* Resolves (device, stream) arguments to a device index and a CUDA stream. */
tc_status tc__mem_resolve(int device, tc_stream *stream, int *d, cudaStream_t *s)
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
    TC_TRY(tc__mem_resolve(device, stream, &d, &s));
    TC_TRY(tc__device_alloc(d, s, size, out));
    if (tc__access_on())
        tc__access_alloc(*out, size, d, (void *)s, false);
    return TC_OK;
}

tc_status tc_caching_allocator_delete(void *ptr)
{
    TC_API_BEGIN;
    if (tc__access_on())
        tc__access_free(ptr, san_protect);
    return tc__device_free(ptr);
}

tc_status tc_caching_allocator_record_stream(void *ptr, tc_stream *stream)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(ptr, "ptr is NULL");
    tc_stream *ts;
    TC_TRY(tc__resolve_stream(stream, &ts));
    TC_TRY(tc__device_record_stream(ptr, ts->handle));
    if (tc__access_on())
        tc__access_record_stream(ptr, (void *)ts->handle);
    return TC_OK;
}

tc_status tc__device_pool_begin(int device, uint64_t id, cudaStream_t stream)
{
    tc__allocator *a;
    TC_TRY(tc__mem_get_allocator(device, &a));
    return tc__alloc_begin_pool(a, id, (uintptr_t)stream);
}
tc_status tc__device_pool_end(int device, cudaStream_t stream)
{
    tc__allocator *a;
    TC_TRY(tc__mem_get_allocator(device, &a));
    return tc__alloc_end_pool(a, (uintptr_t)stream);
}
tc_status tc__device_pool_release(int device, uint64_t id)
{
    tc__allocator *a;
    TC_TRY(tc__mem_get_allocator(device, &a));
    return tc__alloc_release_pool(a, id);
}

tc_status tc_empty_cache(void)
{
    TC_API_BEGIN;
    TC_TRY(tc__ensure_init());
    TC_TRY(tc__sync_check("emptying the cache", TC__SYNC_ALL_STREAMS));
    for (int d = 0; d < tc__num_devices; d++) {
        tc__allocator *a = atomic_load_explicit(&tc__mem_allocs[d], memory_order_acquire);
        if (a)
            tc__alloc_empty_cache(a);
        if (a && tc__mem_conf.backend == 1) {
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

tc_status tc_set_per_process_memory_fraction(int device, double fraction)
{
    TC_API_BEGIN;
    TC_TRY(tc__memory_fraction_check(fraction));
    int d;
    TC_TRY(tc__resolve_device(device, &d));
    tc__allocator *a;
    TC_TRY(tc__mem_get_allocator(d, &a));
    return tc__alloc_set_fraction(a, fraction);
}

tc_status tc_get_allocator_backend(const char **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    TC_TRY(get_conf()); /* the parser's message */
    *out = tc__mem_conf.backend == 1 ? "cudaMallocAsync" : "native";
    return TC_OK;
}
