/* The memory API in a build without CUDA: every call links and answers that
 * there is no device. TCUDA_ALLOC_CONF is still checked:
 * tc_get_allocator_backend gives the backend it names, or the parser's
 * error when it is invalid, as with CUDA. The caching algorithm
 * itself is in src/memory and is built either way. */
#include <stdlib.h>

#include "memory/alloc.h"
#include "base/internal.h"
#include "tcuda/memory.h"

static tc_status absent(void)
{
    return tc__fail(TC_ERROR_NO_DEVICE,
                    "CUDA is not available: tcuda was built without CUDA (TCUDA_CUDA=OFF or no "
                    "nvcc at configure time)");
}

tc_status tc_caching_allocator_alloc(size_t size, int device, tc_stream *stream, void **out)
{
    TC_API_BEGIN;
    (void)size, (void)device, (void)stream, (void)out;
    return absent();
}
tc_status tc_caching_allocator_delete(void *ptr)
{
    TC_API_BEGIN;
    return ptr ? absent() : TC_OK;
}
tc_status tc_caching_allocator_record_stream(void *ptr, tc_stream *stream)
{
    TC_API_BEGIN;
    (void)ptr, (void)stream;
    return absent();
}
tc_status tc_empty_cache(void)
{
    TC_API_BEGIN;
    return absent();
}
/* A getter checks its out-parameter, then answers that there is no device. */
#define TC_ABSENT_GETTER(name, type)                                                               \
    tc_status name(int device, type *out)                                                          \
    {                                                                                              \
        TC_API_BEGIN;                                                                              \
        (void)device;                                                                              \
        TC_CHECK_ARG(out, "out is NULL");                                                          \
        return absent();                                                                           \
    }
TC_ABSENT_GETTER(tc_memory_allocated, size_t)
TC_ABSENT_GETTER(tc_max_memory_allocated, size_t)
TC_ABSENT_GETTER(tc_memory_reserved, size_t)
TC_ABSENT_GETTER(tc_max_memory_reserved, size_t)
TC_ABSENT_GETTER(tc_memory_cached, size_t)
TC_ABSENT_GETTER(tc_max_memory_cached, size_t)
tc_status tc_reset_max_memory_allocated(int device)
{
    TC_API_BEGIN;
    return (void)device, absent();
}
tc_status tc_reset_max_memory_cached(int device)
{
    TC_API_BEGIN;
    return (void)device, absent();
}
tc_status tc_reset_peak_memory_stats(int device)
{
    TC_API_BEGIN;
    return (void)device, absent();
}
tc_status tc_memory_stats(int device, tc_memory_stats_info *out)
{
    TC_API_BEGIN;
    (void)device, (void)out;
    return absent();
}
tc_status tc_memory_stats_get(int device, const char *key, int64_t *out)
{
    TC_API_BEGIN;
    (void)device;
    TC_CHECK_ARG(key, "key is NULL");
    TC_CHECK_ARG(out, "out is NULL");
    return absent();
}
tc_status tc_memory_summary(int device, bool abbreviated, char **out)
{
    TC_API_BEGIN;
    (void)device, (void)abbreviated;
    TC_CHECK_ARG(out, "out is NULL");
    return absent();
}
tc_status tc_memory_snapshot(tc_memory_snapshot_info **out)
{
    TC_API_BEGIN;
    return (void)out, absent();
}
tc_status tc_memory_snapshot_write_json(const tc_memory_snapshot_info *snap, const char *path)
{
    TC_API_BEGIN;
    (void)snap, (void)path;
    return absent();
}
/* No snapshot can be made here; it checks its argument as with CUDA. */
tc_status tc_memory_snapshot_destroy(tc_memory_snapshot_info *snap)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(snap, "snap is NULL");
    tc__snapshot_free(snap);
    free(snap);
    return TC_OK;
}
tc_status tc_set_per_process_memory_fraction(int device, double fraction)
{
    TC_API_BEGIN;
    (void)device, (void)fraction;
    return absent();
}
tc_status tc_get_allocator_backend(const char **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    tc__alloc_config c;
    tc__alloc_config_default(&c);
    TC_TRY(tc__alloc_config_parse(getenv("TCUDA_ALLOC_CONF"), &c)); /* the parser's message */
    *out = c.backend == 1 ? "cudaMallocAsync" : "native";
    return TC_OK;
}
tc_status tc_allocator_create_from_library(const char *so_path, const char *alloc_fn,
                                           const char *free_fn, tc_allocator **out)
{
    TC_API_BEGIN;
    (void)so_path, (void)alloc_fn, (void)free_fn, (void)out;
    return absent();
}
tc_status tc_allocator_create(tc_alloc_fn alloc_fn, tc_free_fn free_fn, tc_allocator **out)
{
    TC_API_BEGIN;
    (void)alloc_fn, (void)free_fn, (void)out;
    return absent();
}
tc_status tc_change_current_allocator(tc_allocator *allocator)
{
    TC_API_BEGIN;
    return (void)allocator, absent();
}
tc_status tc_allocator_destroy(tc_allocator *allocator)
{
    TC_API_BEGIN;
    return (void)allocator, absent();
}
tc_status tc_host_alloc(size_t size, void **out)
{
    TC_API_BEGIN;
    (void)size, (void)out;
    return absent();
}
tc_status tc_host_free(void *ptr)
{
    TC_API_BEGIN;
    return ptr ? absent() : TC_OK;
}
tc_status tc_host_record_stream(void *ptr, tc_stream *stream)
{
    TC_API_BEGIN;
    (void)ptr, (void)stream;
    return absent();
}

tc_status tc_mempool_create(int device, tc_allocator *allocator, tc_mempool **out)
{
    TC_API_BEGIN;
    (void)device, (void)allocator, (void)out;
    return absent();
}
