/* The memory statistics of the public API: tc_memory_stats and its
 * getters, resets of the peaks, and the summary. The native allocator
 * counts its own; the async backend and user allocators are counted in
 * tc__mem_ext_stats (memory.c). */
#include <string.h>

#include "runtime/cuda/cuda_internal.h"
#include "device_alloc.h"
#include "memory_internal.h"

static _Atomic(tc__ipc_stats_fn) ipc_stats;

void tc__device_set_ipc_stats(tc__ipc_stats_fn fn)
{
    atomic_store_explicit(&ipc_stats, fn, memory_order_release);
}

tc_status tc_memory_stats(int device, tc_memory_stats_info *out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    int d;
    TC_TRY(tc__resolve_device(device, &d));
    tc__allocator *a = atomic_load_explicit(&tc__mem_allocs[d], memory_order_acquire);
    tc_memory_stats_info s;
    memset(&s, 0, sizeof s);
    s.max_split_size = -1;
    if (a && tc__mem_conf.backend == 0 && !tc__mem_user_alloc) {
        tc__alloc_stats(a, &s);
    } else if (a) {
        pthread_mutex_lock(&tc__mem_mu);
        s = tc__mem_ext_stats[d];
        pthread_mutex_unlock(&tc__mem_mu);
        s.max_split_size = -1;
        cudaMemPool_t pool;
        uint64_t cur = 0, high = 0;
        if (!tc__mem_user_alloc && cudaDeviceGetDefaultMemPool(&pool, d) == cudaSuccess &&
            cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &cur) == cudaSuccess &&
            cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &high) == cudaSuccess) {
            s.reserved_bytes[0].current = (int64_t)cur;
            s.reserved_bytes[0].peak = (int64_t)high;
        }
    }
    *out = s;
    return TC_OK;
}

tc_status tc_memory_stats_get(int device, const char *key, int64_t *out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(key, "key is NULL");
    TC_CHECK_ARG(out, "out is NULL");
    tc_memory_stats_info s;
    TC_TRY(tc_memory_stats(device, &s));
    int64_t v, ipc_bytes;
    if (!strcmp(key, "ipc_shared_blocks") || !strcmp(key, "ipc_shared_bytes")) {
        int d = -1; /* shared blocks: held for consumers in other processes (ipc.c) */
        TC_TRY(tc__resolve_device(device, &d));
        v = ipc_bytes = 0;
        tc__ipc_stats_fn fn = atomic_load_explicit(&ipc_stats, memory_order_acquire);
        if (fn)
            fn(d, &v, &ipc_bytes);
        *out = key[11] == 'b' && key[12] == 'l' ? v : ipc_bytes;
        return TC_OK;
    }
    if (!tc__stats_get(&s, key, &v))
        return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                        "unknown key '%s' (keys look like "
                        "allocated_bytes.all.current, segment.large_pool.peak or num_ooms)",
                        key);
    *out = v;
    return TC_OK;
}

/* One byte count of tc_memory_stats_get as a size_t (never negative). */
static tc_status bytes_stat(int device, const char *key, size_t *out)
{
    TC_CHECK_ARG(out, "out is NULL");
    int64_t v;
    TC_TRY(tc_memory_stats_get(device, key, &v));
    *out = v < 0 ? 0 : (size_t)v;
    return TC_OK;
}

/* Each names itself in messages (a bad device), not tc_memory_stats_get. */
tc_status tc_memory_allocated(int d, size_t *out)
{
    TC_API_BEGIN;
    return bytes_stat(d, "allocated_bytes.all.current", out);
}
tc_status tc_max_memory_allocated(int d, size_t *out)
{
    TC_API_BEGIN;
    return bytes_stat(d, "allocated_bytes.all.peak", out);
}
tc_status tc_memory_reserved(int d, size_t *out)
{
    TC_API_BEGIN;
    return bytes_stat(d, "reserved_bytes.all.current", out);
}
tc_status tc_max_memory_reserved(int d, size_t *out)
{
    TC_API_BEGIN;
    return bytes_stat(d, "reserved_bytes.all.peak", out);
}
tc_status tc_memory_cached(int d, size_t *out)
{
    TC_API_BEGIN;
    return tc_memory_reserved(d, out);
}
tc_status tc_max_memory_cached(int d, size_t *out)
{
    TC_API_BEGIN;
    return tc_max_memory_reserved(d, out);
}

tc_status tc_reset_peak_memory_stats(int device)
{
    TC_API_BEGIN;
    int d;
    TC_TRY(tc__resolve_device(device, &d));
    tc__allocator *a = atomic_load_explicit(&tc__mem_allocs[d], memory_order_acquire);
    if (a)
        tc__alloc_reset_peak(a);
    pthread_mutex_lock(&tc__mem_mu);
    tc_memory_stat *all = (tc_memory_stat *)&tc__mem_ext_stats[d];
    for (size_t i = 0; i < 9 * TC_STAT_POOL_COUNT; i++)
        all[i].peak = all[i].current;
    pthread_mutex_unlock(&tc__mem_mu);
    if (a && tc__mem_conf.backend == 1) {
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

tc_status tc_memory_summary(int device, bool abbreviated, char **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    tc_memory_stats_info s;
    int d;
    TC_TRY(tc__resolve_device(device, &d));
    TC_TRY(tc_memory_stats(d, &s));
    char *text = tc__stats_summary(&s, d, abbreviated);
    if (!text)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "no host memory for the summary");
    *out = text;
    return TC_OK;
}
