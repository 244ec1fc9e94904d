/* The check every kernel launcher calls after its launch.
 *
 * A launch error (bad configuration, no kernel image for this GPU) is
 * reported at once. With CUDA_LAUNCH_BLOCKING=1 the launcher also waits for
 * the kernel, so that a fault inside it is reported by the call that launched
 * it rather than by some later, unrelated call, and so is bad input that
 * the kernel found (kernel_errors.h). */
#include "cuda_internal.h"
#include "base/env.h"
#include "runtime/cuda/capture.h"
#include "kernel_errors.h"

tc_status tc__launch_check(cudaStream_t stream, const char *kernel)
{
    cudaError_t err = cudaGetLastError();
    /* during a graph capture nothing runs: there is nothing to wait for */
    bool blocking = tc__launch_blocking_enabled() && !tc__capturing();
    /* With CUDA_LAUNCH_BLOCKING=1 the driver itself may already have waited,
     * so a fault inside the kernel can show in the launch error too. */
    if (TC_UNLIKELY(blocking) && err == cudaSuccess)
        err = cudaStreamSynchronize(stream);
    if (TC_LIKELY(err == cudaSuccess)) {
        int device; /* the launcher's: current */
        if (TC_UNLIKELY(blocking) && cudaGetDevice(&device) == cudaSuccess)
            return tc__kernel_errors_check(device);
        return TC_OK;
    }
    tc_status st = tc__cuda_fail(err, "launch", __FILE__, __LINE__);
    if (blocking)
        return tc__fail(TC_ERROR_CUDA,
                        "kernel %s failed: %s (%s); reported at its launch because "
                        "CUDA_LAUNCH_BLOCKING=1",
                        kernel, cudaGetErrorString(err), cudaGetErrorName(err));
    return tc__fail(st, "kernel %s could not be launched: %s (%s)", kernel, cudaGetErrorString(err),
                    cudaGetErrorName(err));
}
