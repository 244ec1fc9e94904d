/* CUDA errors to tc_status: the function behind TC_CUDA_CHECK, and a query's
 * answer (done, not ready, or an error).
 *
 * A fault in a kernel ("sticky" errors: illegal address, launch failure,
 * assert, ...) leaves the CUDA context unusable and surfaces at whatever call
 * comes next, so its message says so and suggests CUDA_LAUNCH_BLOCKING=1. */
#include "cuda_internal.h"
#include "base/env.h"

static bool is_sticky(cudaError_t err)
{
    switch (err) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorAssert:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorHardwareStackError:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable: return true;
    default: return false;
    }
}

static tc_status status_of(cudaError_t err)
{
    switch (err) {
    case cudaErrorMemoryAllocation: return TC_ERROR_OUT_OF_MEMORY;
    case cudaErrorInvalidDevice: return TC_ERROR_INVALID_DEVICE;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorCallRequiresNewerDriver: return TC_ERROR_NO_DEVICE;
    case cudaErrorNotReady: return TC_ERROR_NOT_READY;
    case cudaErrorNotSupported: return TC_ERROR_NOT_SUPPORTED;
    default: return TC_ERROR_CUDA;
    }
}

tc_status tc__cuda_fail(cudaError_t err, const char *expr, const char *file, int line)
{
    if (is_sticky(err)) {
        return tc__fail(TC_ERROR_CUDA,
                        "%s failed at %s:%d: %s (%s). A kernel faulted; the CUDA context is "
                        "unusable from here on. %s",
                        expr, file, line, cudaGetErrorString(err), cudaGetErrorName(err),
                        tc__launch_blocking_enabled()
                            ? ""
                            : "Run with CUDA_LAUNCH_BLOCKING=1 to have the launching call "
                              "report it.");
    }
    (void)cudaGetLastError(); /* a non-sticky error must not leak into later checks */
    return tc__fail(status_of(err), "%s failed at %s:%d: %s (%s)", expr, file, line,
                    cudaGetErrorString(err), cudaGetErrorName(err));
}

tc_status tc__cuda_query(cudaError_t err, const char *expr, const char *file, int line)
{
    if (TC_LIKELY(err == cudaSuccess))
        return TC_OK;
    if (err == cudaErrorNotReady) {
        (void)cudaGetLastError();
        return TC_ERROR_NOT_READY;
    }
    return tc__cuda_fail(err, expr, file, line);
}
