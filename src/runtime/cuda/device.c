/* Devices: the per-thread current device, guards, names, properties, peer
 * access, synchronize and memory info.
 *
 * tcuda records each thread's current device itself (tc__tls_device) and
 * calls cudaSetDevice only when it changes, so a guard that enters the device
 * already current costs a thread-local read. Names and properties are read
 * once per device and kept. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/env.h"
#include "cuda_internal.h"
#include "kernel_errors.h"
#include "access/access.h"

#ifndef TCUDA_ARCH_LIST_STR
#define TCUDA_ARCH_LIST_STR ""
#define TCUDA_GENCODE_FLAGS_STR ""
#endif

tc_status tc__switch_device(int device)
{
    TC_CUDA_CHECK(cudaSetDevice(device));
    tc__tls_device = device;
    return TC_OK;
}

tc_status tc_current_device(int *out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    TC_TRY(tc__ensure_init());
    *out = tc__tls_device;
    return TC_OK;
}

tc_status tc_set_device(int device)
{
    TC_API_BEGIN;
    if (device < 0)
        return TC_OK;
    int d;
    TC_TRY(tc__resolve_device(device, &d));
    if (d == tc__tls_device) {
        /* Still tell CUDA: the first call on a thread may find CUDA's own
         * record elsewhere only if the program called cudaSetDevice itself. */
        TC_CUDA_CHECK(cudaSetDevice(d));
        return TC_OK;
    }
    return tc__switch_device(d);
}

/* A device attribute, cached per device (as its value + 1: 0 is "not asked
 * yet"); `unknown` when CUDA cannot say (its error cleared, not cached). */
static int cached_attribute(atomic_int *cache, enum cudaDeviceAttr attr, int device, int unknown)
{
    int n = atomic_load_explicit(&cache[device], memory_order_relaxed);
    if (n == 0) {
        if (cudaDeviceGetAttribute(&n, attr, device) != cudaSuccess) {
            (void)cudaGetLastError();
            return unknown;
        }
        atomic_store_explicit(&cache[device], ++n, memory_order_relaxed);
    }
    return n - 1;
}

int tc__sm_count(int device)
{
    static atomic_int cached[TC_MAX_DEVICES];
    return cached_attribute(cached, cudaDevAttrMultiProcessorCount, device, 0);
}

int tc__cc_major(int device)
{
    static atomic_int cached[TC_MAX_DEVICES];
    return cached_attribute(cached, cudaDevAttrComputeCapabilityMajor, device, 0);
}

int tc__cc_minor(int device)
{
    static atomic_int cached[TC_MAX_DEVICES];
    return cached_attribute(cached, cudaDevAttrComputeCapabilityMinor, device, -1);
}

tc_device_guard tc_device_guard_enter(int device)
{
    TC_API_BEGIN;
    tc_device_guard g = {.prev_device = -1, .device = device, .status = TC_OK};
    if (device < 0)
        return g;
    int d;
    g.status = tc__resolve_device(device, &d);
    if (TC_UNLIKELY(g.status != TC_OK))
        return g;
    int prev = tc__tls_device;
    if (d != prev) {
        g.status = tc__switch_device(d);
        if (g.status != TC_OK)
            return g;
    }
    g.prev_device = prev;
    return g;
}

void tc_device_guard_exit(tc_device_guard *g)
{
    if (!g || g->prev_device < 0)
        return;
    if (g->prev_device != tc__tls_device)
        (void)tc__switch_device(g->prev_device);
    g->prev_device = -1;
}

/* ---- names and properties ------------------------------------------------ */

static tc_device_properties cached_props[TC_MAX_DEVICES];
static bool cached[TC_MAX_DEVICES];
static pthread_mutex_t props_lock = PTHREAD_MUTEX_INITIALIZER;

static int attr(enum cudaDeviceAttr a, int device)
{
    int v = 0;
    if (cudaDeviceGetAttribute(&v, a, device) != cudaSuccess) {
        (void)cudaGetLastError();
        v = 0;
    }
    return v;
}

static tc_status read_props(int d, tc_device_properties *p)
{
    struct cudaDeviceProp cp;
    TC_CUDA_CHECK(cudaGetDeviceProperties(&cp, d));
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", cp.name);
    memcpy(p->uuid, cp.uuid.bytes, sizeof p->uuid);
    p->major = cp.major;
    p->minor = cp.minor;
    p->total_memory = cp.totalGlobalMem;
    p->multi_processor_count = cp.multiProcessorCount;
    p->l2_cache_size = cp.l2CacheSize;
    p->shared_memory_per_block = cp.sharedMemPerBlock;
    p->shared_memory_per_block_optin = cp.sharedMemPerBlockOptin;
    p->shared_memory_per_multiprocessor = cp.sharedMemPerMultiprocessor;
    p->regs_per_multiprocessor = cp.regsPerMultiprocessor;
    p->max_threads_per_block = cp.maxThreadsPerBlock;
    p->max_threads_per_multiprocessor = cp.maxThreadsPerMultiProcessor;
    p->warp_size = cp.warpSize;
    /* Clock rates left cudaDeviceProp in CUDA 13; the attributes remain. */
    p->clock_rate_khz = attr(cudaDevAttrClockRate, d);
    p->memory_clock_rate_khz = attr(cudaDevAttrMemoryClockRate, d);
    p->memory_bus_width = cp.memoryBusWidth;
    p->pci_domain_id = cp.pciDomainID;
    p->pci_bus_id = cp.pciBusID;
    p->pci_device_id = cp.pciDeviceID;
    p->is_integrated = cp.integrated != 0;
    p->ecc_enabled = cp.ECCEnabled != 0;
    p->concurrent_kernels = cp.concurrentKernels != 0;
    p->async_engine_count = cp.asyncEngineCount;
    return TC_OK;
}

/* Returns the cached properties of a resolved device, reading them once. */
static tc_status props_of(int d, const tc_device_properties **out)
{
    if (!__atomic_load_n(&cached[d], __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&props_lock);
        tc_status st = TC_OK;
        if (!cached[d]) {
            st = read_props(d, &cached_props[d]);
            if (st == TC_OK)
                __atomic_store_n(&cached[d], true, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&props_lock);
        TC_TRY(st);
    }
    *out = &cached_props[d];
    return TC_OK;
}

tc_status tc_get_device_name(int device, const char **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    int d;
    const tc_device_properties *p;
    TC_TRY(tc__resolve_device(device, &d));
    TC_TRY(props_of(d, &p));
    *out = p->name;
    return TC_OK;
}

tc_status tc_get_device_capability(int device, int *major, int *minor)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(major && minor, "major or minor is NULL");
    int d;
    const tc_device_properties *p;
    TC_TRY(tc__resolve_device(device, &d));
    TC_TRY(props_of(d, &p));
    *major = p->major;
    *minor = p->minor;
    return TC_OK;
}

tc_status tc_get_device_properties(int device, tc_device_properties *props)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(props, "props is NULL");
    int d;
    const tc_device_properties *p;
    TC_TRY(tc__resolve_device(device, &d));
    TC_TRY(props_of(d, &p));
    *props = *p;
    return TC_OK;
}

tc_status tc_can_device_access_peer(int device, int peer, bool *out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    int d, q;
    TC_TRY(tc__resolve_device(device, &d));
    TC_TRY(tc__resolve_device(peer, &q));
    int can = 0;
    if (d != q && cudaDeviceCanAccessPeer(&can, d, q) != cudaSuccess)
        return tc__cuda_fail(cudaGetLastError(), "cudaDeviceCanAccessPeer", __FILE__, __LINE__);
    *out = can != 0;
    return TC_OK;
}

const char *tc_get_arch_list(void) { return TCUDA_ARCH_LIST_STR; }
const char *tc_get_gencode_flags(void) { return TCUDA_GENCODE_FLAGS_STR; }

tc_status tc_synchronize(int device)
{
    TC_API_BEGIN;
    int d;
    TC_TRY(tc__resolve_device(device, &d));
    TC_TRY(tc__sync_check("waiting for the whole device", TC__SYNC_ALL_STREAMS));
    tc_device_guard g = tc_device_guard_enter(d);
    TC_TRY(g.status);
    cudaError_t err = cudaDeviceSynchronize();
    tc_device_guard_exit(&g);
    if (err != cudaSuccess)
        return tc__cuda_fail(err, "cudaDeviceSynchronize", __FILE__, __LINE__);
    if (tc__access_on())
        tc__access_sync_of(TC__SYNC_DEVICE_SYNC, NULL, d, NULL, 0, NULL);
    return tc__kernel_errors_check(d);
}

tc_status tc_mem_get_info(int device, size_t *free_bytes, size_t *total_bytes)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(free_bytes && total_bytes, "free or total is NULL");
    int d;
    TC_TRY(tc__resolve_device(device, &d));
    tc_device_guard g = tc_device_guard_enter(d);
    TC_TRY(g.status);
    size_t f = 0, t = 0;
    cudaError_t err = cudaMemGetInfo(&f, &t);
    tc_device_guard_exit(&g);
    if (err != cudaSuccess)
        return tc__cuda_fail(err, "cudaMemGetInfo", __FILE__, __LINE__);
    *free_bytes = f;
    *total_bytes = t;
    return TC_OK;
}
