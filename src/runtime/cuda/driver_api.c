/* The CUDA driver's functions in one table (driver_api.h), looked up once.
 *
 * Each is found through the runtime's cudaGetDriverEntryPointByVersion,
 * asking for the CUDA 12.0 ABI of the function. So libcuda is never linked
 * (a machine without a driver still loads tcuda, and every other feature
 * works), the functions come from the libcuda the runtime itself loaded,
 * and each has the signature its field declares, whatever later versions of
 * the driver add (a dlsym of libcuda.so.1, as tc__dynlib would do, gives the
 * unversioned symbol, often the oldest ABI: cuMemGetAddressRange is not
 * cuMemGetAddressRange_v2). The lookup runs once, under pthread_once; the
 * table is read-only afterwards. */
#include <pthread.h>
#include <stddef.h>

#include "cuda_internal.h"
#include "driver_api.h"

static tc__driver_api api;
static pthread_once_t once = PTHREAD_ONCE_INIT;

#define SLOT(field) offsetof(tc__driver_api, field)

static const struct {
    const char *name;
    size_t offset;
    unsigned group;
} fns[] = {
    {"cuMemAddressReserve", SLOT(mem_address_reserve), TC__DRV_VMM},
    {"cuMemAddressFree", SLOT(mem_address_free), TC__DRV_VMM},
    {"cuMemCreate", SLOT(mem_create), TC__DRV_VMM},
    {"cuMemRelease", SLOT(mem_release), TC__DRV_VMM},
    {"cuMemMap", SLOT(mem_map), TC__DRV_VMM},
    {"cuMemUnmap", SLOT(mem_unmap), TC__DRV_VMM},
    {"cuMemSetAccess", SLOT(mem_set_access), TC__DRV_VMM},
    {"cuMemGetAllocationGranularity", SLOT(mem_get_allocation_granularity), TC__DRV_VMM},
    {"cuMemGetAddressRange", SLOT(mem_get_address_range), TC__DRV_ADDRESS_RANGE},
    {"cuModuleLoadData", SLOT(module_load_data), TC__DRV_MODULE},
    {"cuModuleGetFunction", SLOT(module_get_function), TC__DRV_MODULE},
    {"cuModuleUnload", SLOT(module_unload), TC__DRV_MODULE},
    {"cuLaunchKernel", SLOT(launch_kernel), TC__DRV_MODULE},
};
enum { NFNS = sizeof fns / sizeof fns[0] };

/* The field of fns[i] in the table (every field is a function pointer). */
static void **slot(tc__driver_api *t, int i) { return (void **)((char *)t + fns[i].offset); }
static void *slot_value(const tc__driver_api *t, int i)
{
    return *(void *const *)((const char *)t + fns[i].offset);
}

static void lookup(void)
{
    for (int i = 0; i < NFNS; i++) {
        void *f = NULL;
        enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
        if (cudaGetDriverEntryPointByVersion(fns[i].name, &f, 12000, cudaEnableDefault, &q) !=
                cudaSuccess ||
            q != cudaDriverEntryPointSuccess)
            f = NULL;
        *slot(&api, i) = f;
    }
    (void)cudaGetLastError(); /* no driver: not an error of whoever asked first */
}

const tc__driver_api *tc__driver(void)
{
    pthread_once(&once, lookup);
    return &api;
}

tc_status tc__driver_need(unsigned need, const char *feature, const tc__driver_api **out)
{
    const tc__driver_api *t = tc__driver();
    for (int i = 0; i < NFNS; i++)
        if ((fns[i].group & need) && !slot_value(t, i))
            return tc__fail(TC_ERROR_NOT_SUPPORTED,
                            "%s needs the CUDA driver's %s, which this driver does not provide "
                            "(no driver, or one older than CUDA 12.0)",
                            feature, fns[i].name);
    *out = t;
    return TC_OK;
}
