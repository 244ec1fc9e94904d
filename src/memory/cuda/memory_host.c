/* The pinned host cache of the public API (tc_host_alloc and friends): a
 * caching allocator over pinned host memory, made on first use. */

#include "alloc_providers.h"
#include "runtime/cuda/cuda_internal.h"
#include "access/access.h"
#include "device_alloc.h"
#include "memory_internal.h"

static tc__allocator *host_alloc;

#define HOST_STREAM UINTPTR_MAX /* host blocks' own "stream": never a CUDA stream */

static tc_status get_host(tc__allocator **out)
{
    TC_TRY(tc__ensure_init());
    pthread_mutex_lock(&tc__mem_mu);
    tc_status st = TC_OK;
    if (!host_alloc) {
        tc__seg_provider p;
        tc__alloc_config c;
        tc__alloc_config_default(&c);
        tc__pinned_provider(&p);
        st = tc__alloc_create(&p, &c, -1, &host_alloc);
    }
    *out = host_alloc;
    pthread_mutex_unlock(&tc__mem_mu);
    return st;
}

tc_status tc_host_alloc(size_t size, void **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    tc__allocator *a;
    TC_TRY(get_host(&a));
    TC_TRY(tc__alloc_malloc(a, size, HOST_STREAM, out));
    if (tc__access_on())
        tc__access_alloc(*out, size, -1, NULL, true);
    return TC_OK;
}

tc_status tc_host_record_stream(void *ptr, tc_stream *stream)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(ptr, "ptr is NULL");
    tc_stream *ts;
    TC_TRY(tc__resolve_stream(stream, &ts));
    return tc__host_record_stream(ptr, ts->device, (cudaStream_t)ts->handle);
}

tc_status tc__host_record_stream(void *ptr, int device, cudaStream_t stream)
{
    tc__allocator *a;
    TC_TRY(get_host(&a));
    return tc__alloc_record_stream(a, ptr, tc__host_stream_key(device, stream));
}

tc_status tc_host_free(void *ptr)
{
    TC_API_BEGIN;
    if (!ptr)
        return TC_OK;
    tc__allocator *a;
    TC_TRY(get_host(&a));
    /* copies queued on the current stream may still read or write it */
    int dev = tc__tls_device;
    TC_TRY(tc__alloc_record_stream(a, ptr, tc__host_stream_key(dev, tc__current_cuda_stream(dev))));
    if (tc__access_on())
        tc__access_free(ptr, NULL);
    return tc__alloc_free(a, ptr);
}
