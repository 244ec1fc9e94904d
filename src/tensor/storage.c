/* Storage allocation for tensors.
 *
 * Device memory comes from the device's caching allocator on the device's
 * current stream; pinned host memory from the pinned host cache; pageable
 * host memory from malloc. Both caches take care of reuse across streams:
 * record_stream marks the block, and a freed block is reused by other streams
 * only after the work recorded on it has completed. Device and pinned
 * memory are reached through the device seam (runtime/device_ops.h) only. */
#include <stdlib.h>

#include "runtime/device_ops.h"
#include "base/internal.h"
#include "storage.h"

static tc_status alloc_cpu(size_t bytes, bool pinned, void **p)
{
    if (pinned) /* TC_ERROR_NO_DEVICE in a build without CUDA */
        return tc__dev()->host_alloc(bytes, p);
    *p = malloc(bytes ? bytes : 1);
    if (!*p)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "could not allocate %zu bytes of host memory",
                        bytes);
    return TC_OK;
}

tc_status tc__storage_alloc(tc_device device, size_t bytes, bool pinned, tc__storage **out)
{
    tc__storage *s = calloc(1, sizeof *s);
    if (!s)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "could not allocate a tensor storage");
    atomic_init(&s->refcount, 1);
    s->device = device;
    s->bytes = bytes;
    s->pinned = pinned && device.type == TC_CPU;
    tc_status st = device.type == TC_CPU ? alloc_cpu(bytes, s->pinned, &s->data)
                                         : tc__dev()->alloc(device.index, bytes, &s->data);
    if (st != TC_OK) {
        free(s);
        return st;
    }
    *out = s;
    return TC_OK;
}

void tc__storage_release(tc__storage *s)
{
    if (!s || atomic_fetch_sub_explicit(&s->refcount, 1, memory_order_acq_rel) != 1)
        return;
    if (s->on_free)
        s->on_free(s);
    else if (s->device.type == TC_CUDA)
        tc__dev()->free(s->data);
    else if (s->pinned)
        (void)tc__dev()->host_free(s->data);
    else
        free(s->data);
    free(s);
}

tc_status tc__storage_record_stream(tc__storage *s, int device, void *stream)
{
    if (s->on_record_stream)
        return s->on_record_stream(s, stream);
    if (!s->data || (s->device.type == TC_CPU && !s->pinned))
        return TC_OK; /* empty, or pageable memory: copies from it are synchronous */
    return tc__dev()->record_stream(s->data, s->device.type == TC_CPU, device, stream);
}
