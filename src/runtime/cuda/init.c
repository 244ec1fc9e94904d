/* Lazy initialization of tcuda's CUDA state.
 *
 * Nothing touches CUDA until a call needs it. The first such call (or
 * tc_init) runs init_once exactly once: it asks the runtime how many devices
 * there are, and on success prepares the per-device default streams and sets
 * tc__init_state to 1, which every later call reads with a single load, and
 * starts reading NVRTC's files ahead (nvrtc_readahead.c). When
 * CUDA is not usable (no driver, no GPU, CUDA_VISIBLE_DEVICES empty) the
 * reason is kept and every call that needs a GPU returns it as
 * TC_ERROR_NO_DEVICE. Loading the library never touches CUDA. A bad
 * CUDA_LAUNCH_BLOCKING or TCUDA_SYNC_DEBUG_MODE fails initialization before
 * CUDA is asked anything (base/env.c), GPU or not. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"
#include "base/env.h"
#include "sanitizer/sanitizer_internal.h"
#include "memory/alloc.h"

atomic_int tc__init_state; /* 0 not tried, 1 ready, 2 unavailable */
int tc__num_devices;
_Thread_local int tc__tls_device;
_Thread_local tc_stream *tc__tls_stream[TC_MAX_DEVICES];
tc_stream tc__default_streams[TC_MAX_DEVICES];

static pthread_once_t init_once_flag = PTHREAD_ONCE_INIT;
static char unavailable_reason[512];

static void init_once(void)
{
    tc__san_from_env(); /* TCUDA_SANITIZER: before any memory or work it should watch */
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
        const char *why = err == cudaSuccess ? "the CUDA runtime reports 0 devices"
                                             : cudaGetErrorString(err);
        const char *hint = "";
        if (err == cudaErrorInsufficientDriver)
            hint = " (no NVIDIA driver is installed, or it is older than this CUDA runtime)";
        else if (err == cudaErrorNoDevice)
            hint = " (no NVIDIA GPU is visible; check CUDA_VISIBLE_DEVICES)";
        snprintf(unavailable_reason, sizeof unavailable_reason, "CUDA is not available: %s%s", why,
                 hint);
        (void)cudaGetLastError();
        atomic_store_explicit(&tc__init_state, 2, memory_order_release);
        return;
    }
    if (count > TC_MAX_DEVICES)
        count = TC_MAX_DEVICES;
    for (int d = 0; d < count; d++) {
        tc__default_streams[d] = (tc_stream){.magic = TC_STREAM_MAGIC,
                                             .device = d,
                                             .priority = 0,
                                             .owned = false,
                                             .is_default = true,
                                             .handle = (cudaStream_t)0};
    }
    tc__num_devices = count;
    atomic_store_explicit(&tc__init_state, 1, memory_order_release);
    tc__nvrtc_readahead_start();
}

tc_status tc__init_slow(void)
{
    TC_TRY(tc__debug_env_check());
    pthread_once(&init_once_flag, init_once);
    if (atomic_load_explicit(&tc__init_state, memory_order_acquire) == 1)
        return TC_OK;
    return tc__fail(TC_ERROR_NO_DEVICE, "%s", unavailable_reason);
}

tc_status tc_init(void)
{
    TC_API_BEGIN;
    TC_TRY(tc__ensure_init());
    /* a bad TCUDA_ALLOC_CONF (or PyTorch's twin) is an error here already */
    return tc__alloc_config_check_env();
}

bool tc_is_initialized(void)
{
    return atomic_load_explicit(&tc__init_state, memory_order_acquire) == 1;
}

bool tc_is_available(void)
{
    TC_API_BEGIN;
    return tc__ensure_init() == TC_OK;
}

int tc_device_count(void)
{
    TC_API_BEGIN;
    return tc__ensure_init() == TC_OK ? tc__num_devices : 0;
}

tc_status tc__bad_device(int device)
{
    if (tc__num_devices == 1)
        return tc__fail(TC_ERROR_INVALID_DEVICE,
                        "device %d does not exist: this process sees 1 GPU (device 0)", device);
    return tc__fail(TC_ERROR_INVALID_DEVICE,
                    "device %d does not exist: this process sees %d GPUs (devices 0 to %d)", device,
                    tc__num_devices, tc__num_devices - 1);
}

int tc_cuda_driver_version(void)
{
    int v = 0;
    if (cudaDriverGetVersion(&v) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return v;
}

int tc_cuda_runtime_version(void)
{
    int v = 0;
    if (cudaRuntimeGetVersion(&v) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return v;
}
