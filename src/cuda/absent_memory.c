/* The memory API in a build without CUDA: every call links and answers that
 * there is no device (stats are zero, the backend is "native"). The caching
 * algorithm itself is in src/alloc and is built either way. */
#include "core/internal.h"
#include "tcuda/memory.h"

static tc_status absent(void)
{
    return tc__fail(TC_ERROR_NO_DEVICE,
                    "CUDA is not available: tcuda was built without CUDA (TCUDA_CUDA=OFF or no "
                    "nvcc at configure time)");
}

tc_status tc_caching_allocator_alloc(size_t size, int device, tc_stream *stream, void **out)
{
    (void)size, (void)device, (void)stream, (void)out;
    return absent();
}
tc_status tc_caching_allocator_delete(void *ptr) { return ptr ? absent() : TC_OK; }
tc_status tc_caching_allocator_record_stream(void *ptr, tc_stream *stream)
{
    (void)ptr, (void)stream;
    return absent();
}
tc_status tc_empty_cache(void) { return absent(); }
size_t tc_memory_allocated(int device) { return (void)device, 0; }
size_t tc_max_memory_allocated(int device) { return (void)device, 0; }
tc_status tc_reset_max_memory_allocated(int device) { return (void)device, absent(); }
size_t tc_memory_reserved(int device) { return (void)device, 0; }
size_t tc_max_memory_reserved(int device) { return (void)device, 0; }
size_t tc_memory_cached(int device) { return (void)device, 0; }
size_t tc_max_memory_cached(int device) { return (void)device, 0; }
tc_status tc_reset_max_memory_cached(int device) { return (void)device, absent(); }
tc_status tc_reset_peak_memory_stats(int device) { return (void)device, absent(); }
tc_status tc_memory_stats(int device, struct tc_memory_stats *out)
{
    (void)device, (void)out;
    return absent();
}
int64_t tc_memory_stats_get(int device, const char *key)
{
    (void)device, (void)key, (void)absent();
    return -1;
}
char *tc_memory_summary(int device, bool abbreviated)
{
    (void)device, (void)abbreviated, (void)absent();
    return NULL;
}
tc_status tc_memory_snapshot(struct tc_memory_snapshot **out) { return (void)out, absent(); }
tc_status tc_memory_snapshot_write_json(const struct tc_memory_snapshot *snap, const char *path)
{
    (void)snap, (void)path;
    return absent();
}
void tc_memory_snapshot_free(struct tc_memory_snapshot *snap) { (void)snap; }
tc_status tc_set_per_process_memory_fraction(double fraction, int device)
{
    (void)fraction, (void)device;
    return absent();
}
const char *tc_get_allocator_backend(void) { return "native"; }
tc_status tc_pluggable_allocator_load(const char *so_path, const char *alloc_fn,
                                      const char *free_fn, tc_allocator **out)
{
    (void)so_path, (void)alloc_fn, (void)free_fn, (void)out;
    return absent();
}
tc_status tc_allocator_from_functions(tc_alloc_fn alloc_fn, tc_free_fn free_fn, tc_allocator **out)
{
    (void)alloc_fn, (void)free_fn, (void)out;
    return absent();
}
tc_status tc_change_current_allocator(tc_allocator *allocator) { return (void)allocator, absent(); }
tc_status tc_host_alloc(size_t size, void **out)
{
    (void)size, (void)out;
    return absent();
}
tc_status tc_host_free(void *ptr) { return ptr ? absent() : TC_OK; }
tc_status tc_host_record_stream(void *ptr, tc_stream *stream)
{
    (void)ptr, (void)stream;
    return absent();
}
