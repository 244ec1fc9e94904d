/* The memory API in a build without CUDA: every call checks its arguments
 * as the CUDA build does (memory/memory_args.h holds the checks they share),
 * then answers that there is no device. What needs no GPU works as with
 * CUDA: TCUDA_ALLOC_CONF is checked (tc_get_allocator_backend gives the
 * backend it names, or the parser's error). The caching algorithm itself,
 * and what needs no GPU (writing and destroying snapshots), is in
 * src/memory and is built either way. */
#include <stdlib.h>

#include "memory/alloc.h"
#include "memory/memory_args.h"
#include "nocuda.h"
#include "base/internal.h"
#include "tcuda/memory.h"

tc_status tc_caching_allocator_alloc(size_t size, int device, tc_stream *stream, void **out)
{
    TC_API_BEGIN;
    (void)size, (void)device;
    TC_CHECK_ARG(out, "out is NULL");
    return stream ? tc__nocuda_handle(stream, "tc_stream") : tc__nocuda();
}

tc_status tc_caching_allocator_delete(void *ptr)
{
    TC_API_BEGIN;
    return ptr ? tc__nocuda() : TC_OK;
}

tc_status tc_caching_allocator_record_stream(void *ptr, tc_stream *stream)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(ptr, "ptr is NULL");
    return stream ? tc__nocuda_handle(stream, "tc_stream") : tc__nocuda();
}

tc_status tc_empty_cache(void)
{
    TC_API_BEGIN;
    return tc__nocuda();
}

/* A getter checks its out-parameter, then answers that there is no device. */
#define TC_NOCUDA_GETTER(name, type)                                                               \
    tc_status name(int device, type *out)                                                          \
    {                                                                                              \
        TC_API_BEGIN;                                                                              \
        (void)device;                                                                              \
        TC_CHECK_ARG(out, "out is NULL");                                                          \
        return tc__nocuda();                                                                       \
    }
TC_NOCUDA_GETTER(tc_memory_allocated, size_t)
TC_NOCUDA_GETTER(tc_max_memory_allocated, size_t)
TC_NOCUDA_GETTER(tc_memory_reserved, size_t)
TC_NOCUDA_GETTER(tc_max_memory_reserved, size_t)
TC_NOCUDA_GETTER(tc_memory_cached, size_t)
TC_NOCUDA_GETTER(tc_max_memory_cached, size_t)
TC_NOCUDA_GETTER(tc_memory_stats, tc_memory_stats_info)

tc_status tc_reset_max_memory_allocated(int device)
{
    TC_API_BEGIN;
    return (void)device, tc__nocuda();
}

tc_status tc_reset_max_memory_cached(int device)
{
    TC_API_BEGIN;
    return (void)device, tc__nocuda();
}

tc_status tc_reset_peak_memory_stats(int device)
{
    TC_API_BEGIN;
    return (void)device, tc__nocuda();
}

tc_status tc_memory_stats_get(int device, const char *key, int64_t *out)
{
    TC_API_BEGIN;
    (void)device;
    TC_CHECK_ARG(key, "key is NULL");
    TC_CHECK_ARG(out, "out is NULL");
    return tc__nocuda();
}

tc_status tc_memory_summary(int device, bool abbreviated, char **out)
{
    TC_API_BEGIN;
    (void)device, (void)abbreviated;
    TC_CHECK_ARG(out, "out is NULL");
    return tc__nocuda();
}

tc_status tc_memory_snapshot(tc_memory_snapshot_info **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    return tc__nocuda();
}

tc_status tc_set_per_process_memory_fraction(int device, double fraction)
{
    TC_API_BEGIN;
    (void)device;
    TC_TRY(tc__memory_fraction_check(fraction));
    return tc__nocuda();
}

tc_status tc_get_allocator_backend(const char **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    tc__alloc_config c;
    tc__alloc_config_default(&c);
    TC_TRY(tc__alloc_config_parse_env(&c)); /* the parser's message */
    *out = c.backend == 1 ? "cudaMallocAsync" : "native";
    return TC_OK;
}

tc_status tc_allocator_create_from_library(const char *so_path, const char *alloc_fn,
                                           const char *free_fn, tc_allocator **out)
{
    TC_API_BEGIN;
    TC_TRY(tc__allocator_library_check(so_path, alloc_fn, free_fn, out));
    return tc__nocuda();
}

tc_status tc_allocator_create(tc_alloc_fn alloc_fn, tc_free_fn free_fn, tc_allocator **out)
{
    TC_API_BEGIN;
    TC_TRY(tc__allocator_create_check(alloc_fn, free_fn, out));
    return tc__nocuda();
}

tc_status tc_change_current_allocator(tc_allocator *allocator)
{
    TC_API_BEGIN;
    return tc__nocuda_handle(allocator, "tc_allocator");
}

tc_status tc_allocator_destroy(tc_allocator *allocator)
{
    TC_API_BEGIN;
    return tc__nocuda_handle(allocator, "tc_allocator");
}

tc_status tc_host_alloc(size_t size, void **out)
{
    TC_API_BEGIN;
    (void)size;
    TC_CHECK_ARG(out, "out is NULL");
    return tc__nocuda();
}

tc_status tc_host_free(void *ptr)
{
    TC_API_BEGIN;
    return ptr ? tc__nocuda() : TC_OK;
}

tc_status tc_host_record_stream(void *ptr, tc_stream *stream)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(ptr, "ptr is NULL");
    return stream ? tc__nocuda_handle(stream, "tc_stream") : tc__nocuda();
}

tc_status tc_mempool_create(int device, tc_allocator *allocator, tc_mempool **out)
{
    TC_API_BEGIN;
    (void)device;
    TC_CHECK_ARG(out, "out is NULL");
    return allocator ? tc__nocuda_handle(allocator, "tc_allocator") : tc__nocuda();
}
