/* Storage allocation for tensors.
 *
 * CPU memory comes from malloc (pageable) or cudaHostAlloc (pinned); device
 * memory from cudaMallocAsync on the current stream of the device, given back
 * with cudaFreeAsync on that stream after the streams recorded with
 * record_stream have reached the point where the storage is freed (an event
 * per recorded stream makes the allocation stream wait for them).
 *
 * switch to the caching allocator when memory.h lands: tc_caching_allocator_
 * alloc/delete/record_stream and tc_host_alloc/tc_host_free replace the CUDA
 * calls below one for one. */
#include <stdlib.h>

#include "internal.h"
#include "storage.h"
#if defined(TCUDA_HAVE_CUDA)
#include "cuda/cuda_internal.h"
#endif

static tc_status alloc_cpu(size_t bytes, bool pinned, void **p)
{
    if (pinned) {
#if defined(TCUDA_HAVE_CUDA)
        TC_TRY(tc__ensure_init());
        /* switch to the caching allocator when memory.h lands (tc_host_alloc) */
        cudaError_t err = cudaHostAlloc(p, bytes ? bytes : 1, cudaHostAllocDefault);
        if (err != cudaSuccess) {
            (void)cudaGetLastError();
            return tc__fail(TC_ERROR_OUT_OF_MEMORY,
                            "could not allocate %zu bytes of pinned host memory: %s", bytes,
                            cudaGetErrorString(err));
        }
        return TC_OK;
#else
        return tc__fail(TC_ERROR_NO_DEVICE, "pinned memory needs CUDA: tcuda was built without "
                                            "CUDA (TCUDA_CUDA=OFF or no nvcc at configure time)");
#endif
    }
    *p = malloc(bytes ? bytes : 1);
    if (!*p)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "could not allocate %zu bytes of host memory",
                        bytes);
    return TC_OK;
}

#if defined(TCUDA_HAVE_CUDA)
/* Keeps freed memory in the device's stream-ordered pool instead of giving it
 * back to the driver at every synchronization (the pool's default), so that
 * tensors allocated again after a sync cost no new mapping. Once per device. */
static atomic_int pool_tuned[TC_MAX_DEVICES];
static void tune_pool(int device)
{
    if (atomic_exchange_explicit(&pool_tuned[device], 1, memory_order_relaxed))
        return;
    cudaMemPool_t pool;
    if (cudaDeviceGetDefaultMemPool(&pool, device) == cudaSuccess) {
        uint64_t keep = UINT64_MAX;
        (void)cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
    }
    (void)cudaGetLastError();
}

#endif

tc_status tc__storage_alloc(tc_device device, size_t bytes, bool pinned, tc__storage **out)
{
    tc__storage *s = calloc(1, sizeof *s);
    if (!s)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "could not allocate a tensor storage");
    atomic_init(&s->refcount, 1);
    s->device = device;
    s->bytes = bytes;
    s->pinned = pinned && device.type == TC_CPU;
    tc_status st;
    if (device.type == TC_CPU) {
        st = alloc_cpu(bytes, s->pinned, &s->data);
    } else {
#if defined(TCUDA_HAVE_CUDA)
        /* switch to the caching allocator when memory.h lands */
        st = tc__ensure_init();
        int prev = tc__tls_device;
        if (st == TC_OK && prev != device.index)
            st = tc__switch_device(device.index);
        if (st == TC_OK) {
            cudaStream_t cs = tc__current_cuda_stream(device.index);
            tune_pool(device.index);
            cudaError_t err = cudaMallocAsync(&s->data, bytes ? bytes : 1, cs);
            cudaMemPool_t pool;
            if (err == cudaErrorMemoryAllocation &&
                cudaDeviceGetDefaultMemPool(&pool, device.index) == cudaSuccess) {
                /* as a cache would: give back what the pool keeps, then retry */
                (void)cudaGetLastError();
                (void)cudaDeviceSynchronize();
                (void)cudaMemPoolTrimTo(pool, 0);
                err = cudaMallocAsync(&s->data, bytes ? bytes : 1, cs);
            }
            if (err != cudaSuccess) {
                size_t fr = 0, tot = 0;
                (void)cudaGetLastError();
                (void)cudaMemGetInfo(&fr, &tot);
                st = tc__fail(TC_ERROR_OUT_OF_MEMORY,
                              "could not allocate %zu bytes on cuda:%d (%zu of %zu bytes free): %s",
                              bytes, device.index, fr, tot, cudaGetErrorString(err));
            }
            s->alloc_stream = (void *)cs;
            if (prev != device.index)
                (void)tc__switch_device(prev);
        }
#else
        st = tc__fail(TC_ERROR_NO_DEVICE, "CUDA is not available: tcuda was built without CUDA "
                                          "(TCUDA_CUDA=OFF or no nvcc at configure time)");
#endif
    }
    if (st != TC_OK) {
        free(s);
        return st;
    }
    *out = s;
    return TC_OK;
}

#if defined(TCUDA_HAVE_CUDA)
static void free_cuda(tc__storage *s)
{
    int prev = tc__tls_device;
    if (prev != s->device.index)
        (void)tc__switch_device(s->device.index);
    cudaStream_t as = (cudaStream_t)s->alloc_stream;
    for (int i = 0; i < s->n_streams; i++) {
        cudaEvent_t ev;
        if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) == cudaSuccess) {
            (void)cudaEventRecord(ev, (cudaStream_t)s->streams[i]);
            (void)cudaStreamWaitEvent(as, ev, 0);
            (void)cudaEventDestroy(ev);
        }
    }
    if (cudaFreeAsync(s->data, as) != cudaSuccess)
        (void)cudaGetLastError();
    if (prev != s->device.index)
        (void)tc__switch_device(prev);
}
#endif

void tc__storage_release(tc__storage *s)
{
    if (!s || atomic_fetch_sub_explicit(&s->refcount, 1, memory_order_acq_rel) != 1)
        return;
    if (s->device.type == TC_CPU) {
#if defined(TCUDA_HAVE_CUDA)
        if (s->pinned) {
            /* switch to the caching allocator when memory.h lands (tc_host_free) */
            if (cudaFreeHost(s->data) != cudaSuccess)
                (void)cudaGetLastError();
        } else
#endif
            free(s->data);
    } else {
#if defined(TCUDA_HAVE_CUDA)
        free_cuda(s);
#endif
    }
    free(s);
}

tc_status tc__storage_record_stream(tc__storage *s, void *cuda_stream)
{
    if (cuda_stream == s->alloc_stream)
        return TC_OK;
    for (int i = 0; i < s->n_streams; i++)
        if (s->streams[i] == cuda_stream)
            return TC_OK;
    if (s->n_streams == TC__STORAGE_MAX_STREAMS)
        return tc__fail(TC_ERROR_INVALID_STATE,
                        "record_stream: a storage can be recorded on at most %d streams",
                        TC__STORAGE_MAX_STREAMS);
    s->streams[s->n_streams++] = cuda_stream;
    return TC_OK;
}
