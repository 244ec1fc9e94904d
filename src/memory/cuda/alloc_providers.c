/* Segment providers for the caching allocator: cudaMalloc, CUDA virtual
 * memory (expandable segments), and pinned host memory (cudaHostAlloc), plus
 * the CUDA events the allocator records on streams that used a freed block.
 * Virtual-memory calls are driver functions from driver_api.c's table, so
 * libcuda is never linked: a machine without a driver still loads tcuda.
 * Each device provider's ctx is the device index (as intptr_t); every call
 * switches to that device and back. */
#include <cuda.h>
#include <stdlib.h>
#include <string.h>

#include "memory/alloc.h"
#include "alloc_providers.h"
#include "runtime/cuda/cuda_internal.h"
#include "runtime/cuda/driver_api.h"
#include "runtime/cuda/capture.h"

static tc_status oom_or_fail(cudaError_t err, const char *what)
{
    if (err == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        return TC_ERROR_OUT_OF_MEMORY;
    }
    return tc__cuda_fail(err, what, __FILE__, __LINE__);
}

static int dev_of(void *ctx) { return (int)(intptr_t)ctx; }

static tc_status dm_alloc(void *ctx, size_t size, uintptr_t stream, void **out)
{
    (void)stream;
    tc_device_guard g = tc_device_guard_enter(dev_of(ctx));
    TC_TRY(g.status);
    /* a capture in global mode would take cudaMalloc for unsafe (graph_capture.c) */
    enum cudaStreamCaptureMode m = tc__capture_relaxed_begin();
    cudaError_t err = cudaMalloc(out, size);
    tc__capture_relaxed_end(m);
    tc_device_guard_exit(&g);
    return err == cudaSuccess ? TC_OK : oom_or_fail(err, "cudaMalloc");
}

static void dm_free(void *ctx, void *ptr, size_t size)
{
    (void)size;
    if (tc__capture_defer_free(dev_of(ctx), ptr))
        return; /* freed when the graph capture ends (graph_capture.c) */
    tc_device_guard g = tc_device_guard_enter(dev_of(ctx));
    (void)cudaFree(ptr);
    tc_device_guard_exit(&g);
}

static void dm_info(void *ctx, size_t *fr, size_t *tot)
{
    *fr = *tot = 0;
    if (tc_mem_get_info(dev_of(ctx), fr, tot) != TC_OK)
        *fr = *tot = 0;
}

static void *ev_record(void *ctx, uintptr_t stream)
{
    (void)ctx;
    cudaEvent_t e;
    if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess)
        return NULL;
    if (cudaEventRecord(e, (cudaStream_t)stream) != cudaSuccess) {
        (void)cudaEventDestroy(e);
        /* could not record: wait for the stream instead, so reuse stays safe */
        (void)cudaStreamSynchronize((cudaStream_t)stream);
        return NULL;
    }
    return (void *)e;
}

/* A device provider's event is made and recorded on its own device: a block
 * of cuda:1 may be freed while cuda:0 is current, and a default stream's
 * handle, 0, names the current device's legacy stream, so the event would
 * otherwise mark cuda:0's work and the block be reused too early. */
static void *dev_ev_record(void *ctx, uintptr_t stream)
{
    tc_device_guard g = tc_device_guard_enter(dev_of(ctx));
    void *e = ev_record(ctx, stream); /* a switch fails only when CUDA is broken */
    tc_device_guard_exit(&g);
    return e;
}

static int ev_query(void *ctx, void *e)
{
    (void)ctx;
    if (tc__capturing())
        return 0; /* queries are not allowed during capture: reuse waits until it ends */
    cudaError_t err = cudaEventQuery((cudaEvent_t)e);
    if (err == cudaErrorNotReady) {
        (void)cudaGetLastError();
        return 0;
    }
    return 1;
}

static void ev_sync(void *ctx, void *e)
{
    (void)ctx;
    (void)cudaEventSynchronize((cudaEvent_t)e);
}

static void ev_destroy(void *ctx, void *e)
{
    (void)ctx;
    (void)cudaEventDestroy((cudaEvent_t)e);
}

/* ---- expandable segments through the driver's virtual memory API ------------ */

static CUmemAllocationProp vm_prop(int device)
{
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = device;
    return p;
}

static tc_status vm_reserve(void *ctx, size_t size, void **out)
{
    CUdeviceptr p = 0;
    tc_device_guard g = tc_device_guard_enter(dev_of(ctx)); /* driver calls need a context */
    TC_TRY(g.status);
    CUresult r = tc__driver()->mem_address_reserve(&p, size, 0, 0, 0);
    tc_device_guard_exit(&g);
    if (r != CUDA_SUCCESS)
        return TC_ERROR_OUT_OF_MEMORY;
    *out = (void *)(uintptr_t)p;
    return TC_OK;
}

/* Backs [addr, addr+size) with one physical allocation: the driver's cost is
 * per call, so one call per chunk, not per granule (see alloc_expandable.c). */
static tc_status vm_map(void *ctx, void *addr, size_t size)
{
    int d = dev_of(ctx);
    tc_device_guard g = tc_device_guard_enter(d);
    TC_TRY(g.status);
    CUmemAllocationProp prop = vm_prop(d);
    CUdeviceptr base = (CUdeviceptr)(uintptr_t)addr;
    CUmemGenericAllocationHandle h;
    tc_status st = TC_ERROR_OUT_OF_MEMORY;
    const tc__driver_api *vm = tc__driver();
    enum cudaStreamCaptureMode m = tc__capture_relaxed_begin();
    if (vm->mem_create(&h, size, &prop, 0) == CUDA_SUCCESS) {
        CUresult r = vm->mem_map(base, size, 0, h, 0);
        vm->mem_release(h); /* the mapping keeps the memory */
        if (r == CUDA_SUCCESS) {
            CUmemAccessDesc acc;
            memset(&acc, 0, sizeof acc);
            acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
            acc.location.id = d;
            acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
            if (vm->mem_set_access(base, size, &acc, 1) == CUDA_SUCCESS)
                st = TC_OK;
            else
                (void)vm->mem_unmap(base, size);
        }
    }
    tc__capture_relaxed_end(m);
    tc_device_guard_exit(&g);
    return st;
}

/* Unmaps a range that one vm_map call backed, freeing its memory (the
 * handle was released when it was mapped). No wait: the allocator unmaps only
 * memory whose last use it has seen complete through an event (fences in
 * src/memory/alloc_streams.c), which PyTorch's expandable segments get by a
 * stream synchronize before each unmap instead. */
static void vm_unmap(void *ctx, void *addr, size_t size)
{
    tc_device_guard g = tc_device_guard_enter(dev_of(ctx));
    (void)tc__driver()->mem_unmap((CUdeviceptr)(uintptr_t)addr, size);
    tc_device_guard_exit(&g);
}

static void vm_unreserve(void *ctx, void *addr, size_t size)
{
    tc_device_guard g = tc_device_guard_enter(dev_of(ctx));
    (void)tc__driver()->mem_address_free((CUdeviceptr)(uintptr_t)addr, size);
    tc_device_guard_exit(&g);
}

size_t tc__vm_granularity(int device)
{
    static size_t cached[TC_MAX_DEVICES];
    if (device < 0 || device >= TC_MAX_DEVICES)
        return (size_t)2 << 20;
    if (!cached[device]) {
        CUmemAllocationProp prop = vm_prop(device);
        size_t g = 0;
        const tc__driver_api *vm = tc__driver();
        if (vm->mem_get_allocation_granularity &&
            vm->mem_get_allocation_granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) !=
                CUDA_SUCCESS)
            g = 0;
        if (g < ((size_t)2 << 20))
            g = (size_t)2 << 20;
        cached[device] = g;
    }
    return cached[device];
}

tc_status tc__device_provider(int device, bool expandable, tc__seg_provider *p)
{
    memset(p, 0, sizeof *p);
    p->name = "CUDA";
    p->ctx = (void *)(intptr_t)device;
    p->alloc = dm_alloc;
    p->free = dm_free;
    p->mem_info = dm_info;
    p->event_record = dev_ev_record;
    p->event_query = ev_query;
    p->event_sync = ev_sync;
    p->event_destroy = ev_destroy;
    p->free_waits = true; /* cudaFree waits for the device */
    if (expandable) {
        const tc__driver_api *vm;
        TC_TRY(tc__driver_need(
            TC__DRV_VMM, "expandable_segments (CUDA virtual memory: cuMemCreate, cuMemMap, ...)",
            &vm));
        p->granularity = tc__vm_granularity(device);
        p->reserve = vm_reserve;
        p->map = vm_map;
        p->unmap = vm_unmap;
        p->unreserve = vm_unreserve;
    }
    return TC_OK;
}

/* ---- pinned host ---------------------------------------------------------------- */

static tc_status ph_alloc(void *ctx, size_t size, uintptr_t stream, void **out)
{
    (void)ctx;
    (void)stream;
    cudaError_t err = cudaHostAlloc(out, size, cudaHostAllocDefault);
    return err == cudaSuccess ? TC_OK : oom_or_fail(err, "cudaHostAlloc");
}

static void ph_free(void *ctx, void *ptr, size_t size)
{
    (void)ctx;
    (void)size;
    (void)cudaFreeHost(ptr);
}

/* A pinned block's event is made and recorded on the device of the stream
 * that used it (tc__host_stream_key): an event of cuda:0 cannot be recorded
 * on a stream of cuda:1, and 0 names the current device's legacy stream. */
static void *ph_ev_record(void *ctx, uintptr_t key)
{
    int dev = -1;
    uintptr_t handle = key;
    if (key >= TC__HOST_SPECIAL_KEY0 && key < TC__HOST_SPECIAL_KEY0 + 4 * TC_MAX_DEVICES) {
        dev = (int)((key - TC__HOST_SPECIAL_KEY0) / 4);
        handle = (key - TC__HOST_SPECIAL_KEY0) % 4;
    } else if (cudaStreamGetDevice((cudaStream_t)key, &dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return ev_record(ctx, key); /* not a stream CUDA knows: as before */
    }
    tc_device_guard g = tc_device_guard_enter(dev);
    void *e = ev_record(ctx, handle);
    tc_device_guard_exit(&g);
    return e;
}

void tc__pinned_provider(tc__seg_provider *p)
{
    memset(p, 0, sizeof *p);
    p->name = "pinned host";
    p->alloc = ph_alloc;
    p->free = ph_free;
    p->free_waits = true; /* cudaFreeHost waits for the device */
    p->event_record = ph_ev_record;
    p->event_query = ev_query;
    p->event_sync = ev_sync;
    p->event_destroy = ev_destroy;
}
