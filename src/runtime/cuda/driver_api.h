/* The CUDA driver functions tcuda calls (virtual memory for expandable
 * segments, address ranges for IPC, modules and launches for jiterator),
 * found once per process in one table. Not installed. */
#ifndef TCUDA_DRIVER_API_H
#define TCUDA_DRIVER_API_H

#include <cuda.h>

#include "tcuda/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One field per function, with the signature of the ABI version asked for
 * (12000: the CUDA 12.0 one, e.g. cuMemGetAddressRange_v2). NULL when the
 * driver lacks it, or when there is no driver. */
typedef struct tc__driver_api {
    /* virtual memory (alloc_providers.c) */
    CUresult (*mem_address_reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
    CUresult (*mem_address_free)(CUdeviceptr, size_t);
    CUresult (*mem_create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                           unsigned long long);
    CUresult (*mem_release)(CUmemGenericAllocationHandle);
    CUresult (*mem_map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                        unsigned long long);
    CUresult (*mem_unmap)(CUdeviceptr, size_t);
    CUresult (*mem_set_access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
    CUresult (*mem_get_allocation_granularity)(size_t *, const CUmemAllocationProp *,
                                               CUmemAllocationGranularity_flags);
    /* the allocation holding an address (ipc.c) */
    CUresult (*mem_get_address_range)(CUdeviceptr *, size_t *, CUdeviceptr);
    /* modules and launches (jit_cuda.c) */
    CUresult (*module_load_data)(CUmodule *, const void *);
    CUresult (*module_get_function)(CUfunction *, CUmodule, const char *);
    CUresult (*module_unload)(CUmodule);
    CUresult (*launch_kernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void **, void **);
} tc__driver_api;

/* Groups of functions that a feature needs together (tc__driver_need). */
enum {
    TC__DRV_VMM = 1u << 0,           /* the eight mem_ functions above mem_get_address_range */
    TC__DRV_ADDRESS_RANGE = 1u << 1, /* mem_get_address_range */
    TC__DRV_MODULE = 1u << 2,        /* module_load_data, _get_function, _unload, launch_kernel */
};

/* The table, filled on the first call (thread-safe, once per process). Never
 * NULL; a function the driver lacks is NULL in it. */
const tc__driver_api *tc__driver(void);

/* The table in *out when the driver has every function of the groups in
 * `need`; else TC_ERROR_NOT_SUPPORTED naming `feature` and the first
 * function missing, and *out is not written. */
tc_status tc__driver_need(unsigned need, const char *feature, const tc__driver_api **out);

#ifdef __cplusplus
}
#endif

#endif
