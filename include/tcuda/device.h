/* tcuda: initialization, devices, device guards and monitoring
 * (torch.cuda's "Initialization and devices" functions).
 *
 * Everything here links and runs on a machine without a GPU or driver, and in
 * a build without CUDA: tc_is_available() is then false, tc_device_count() is
 * 0, and calls that need a GPU return TC_ERROR_NO_DEVICE with the reason.
 * A device index of -1 means the calling thread's current device. */
#ifndef TCUDA_DEVICE_H
#define TCUDA_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

TCUDA_EXTERN_C_BEGIN

/* Where a tensor or generator lives: the CPU, or CUDA device `index`
 * (-1: the current CUDA device). */
typedef enum tc_device_type { TC_CPU = 0, TC_CUDA = 1 } tc_device_type;
typedef struct tc_device {
    tc_device_type type;
    int index;
} tc_device;

/* Parses "cpu", "cuda", "cuda:N" into *out. TC_ERROR_INVALID_ARGUMENT
 * on anything else. Does not check that the device exists. */
TCUDA_API tc_status tc_device_parse(const char *text, tc_device *out);

/* ---- initialization ---------------------------------------------------- */

/* True when CUDA works here: a driver, at least one visible GPU, and a build
 * with CUDA. Never fails; when false, tc_last_error() says why. */
TCUDA_API bool tc_is_available(void);

/* True once tcuda's CUDA state was initialized (by tc_init or lazily). */
TCUDA_API bool tc_is_initialized(void);

/* Initializes tcuda's CUDA state now instead of at the first call that needs
 * it; safe to call many times and from many threads. TC_ERROR_NO_DEVICE when
 * CUDA is not available (the reason is in the message). */
TCUDA_API tc_status tc_init(void);

/* Number of GPUs this process sees (CUDA_VISIBLE_DEVICES applies); 0 when
 * CUDA is not available. */
TCUDA_API int tc_device_count(void);

/* The CUDA version the installed driver supports and the one tcuda's runtime
 * was built with, as 1000 * major + 10 * minor (13000 is 13.0); 0 when there
 * is no driver, or no CUDA in this build (torch.version.cuda's question). */
TCUDA_API int tc_cuda_driver_version(void);
TCUDA_API int tc_cuda_runtime_version(void);

/* ---- the current device (per thread) --------------------------------- */

/* The calling thread's current device (0 until changed), or -1 when CUDA is
 * not available. */
TCUDA_API int tc_current_device(void);

/* Makes `device` the calling thread's current device. A negative index is a
 * no-op. TC_ERROR_INVALID_DEVICE when it does not exist. tcuda keeps its own
 * record of the current device: a program that also calls cudaSetDevice
 * directly should call this too. */
TCUDA_API tc_status tc_set_device(int device);

/* torch.cuda.device(d) as a pair of calls: enter switches the current device,
 * exit restores the previous one.
 *     tc_device_guard g = tc_device_guard_enter(1);
 *     ... work on device 1 ...
 *     tc_device_guard_exit(&g);
 * A negative device makes both calls no-ops. If the switch fails, g.status
 * says why (tc_last_error() too) and exit does nothing. */
typedef struct tc_device_guard {
    int prev_device; /* device to restore; -1 when nothing to restore */
    int device;      /* the device entered */
    tc_status status;
} tc_device_guard;
TCUDA_API tc_device_guard tc_device_guard_enter(int device);
TCUDA_API void tc_device_guard_exit(tc_device_guard *guard);

/* ---- what a device is -------------------------------------------------- */

/* The device's name, e.g. "NVIDIA H100 80GB HBM3". The string belongs to
 * tcuda and lives as long as the process. NULL (and a message) on error. */
TCUDA_API const char *tc_get_device_name(int device);

/* The device's compute capability, e.g. 9.0 for an H100. */
TCUDA_API tc_status tc_get_device_capability(int device, int *major, int *minor);

typedef struct tc_device_properties {
    char name[256];
    uint8_t uuid[16];
    int major, minor;               /* compute capability */
    size_t total_memory;            /* bytes */
    int multi_processor_count;
    int l2_cache_size;              /* bytes */
    size_t shared_memory_per_block; /* bytes, without opt-in */
    size_t shared_memory_per_block_optin;
    size_t shared_memory_per_multiprocessor;
    int regs_per_multiprocessor;
    int max_threads_per_block;
    int max_threads_per_multiprocessor;
    int warp_size;
    int clock_rate_khz;        /* peak SM clock */
    int memory_clock_rate_khz; /* peak memory clock */
    int memory_bus_width;      /* bits */
    int pci_domain_id, pci_bus_id, pci_device_id;
    bool is_integrated;
    bool ecc_enabled;
    bool concurrent_kernels;
    int async_engine_count;
} tc_device_properties;

/* Fills *props for `device`. */
TCUDA_API tc_status tc_get_device_properties(int device, tc_device_properties *props);

/* True when `device` can read and write `peer`'s memory directly. False for
 * a device with itself, for bad indices (with a message) and without CUDA. */
TCUDA_API bool tc_can_device_access_peer(int device, int peer);

/* What this library's kernels were compiled for: "sm_80 sm_90 compute_90"
 * style, and the nvcc -gencode flags. Empty strings in a build without CUDA.
 * The strings belong to tcuda. */
TCUDA_API const char *tc_get_arch_list(void);
TCUDA_API const char *tc_get_gencode_flags(void);

/* Waits for all work on every stream of `device` to finish. */
TCUDA_API tc_status tc_synchronize(int device);

/* The device's free and total memory in bytes, as the driver sees them. */
TCUDA_API tc_status tc_mem_get_info(int device, size_t *free_bytes, size_t *total_bytes);

/* Releases device memory that other processes were given through CUDA IPC and
 * have since closed. tcuda shares no memory through IPC yet, so today this
 * only checks that CUDA is available. */
TCUDA_API tc_status tc_ipc_collect(void);

/* ---- debugging --------------------------------------------------------- */

/* Sync debug mode, process-wide: 0 off, 1 warn on stderr, 2 fail with
 * TC_ERROR_SYNC_DISALLOWED (the call does not wait). It applies, as in
 * PyTorch, to calls that wait for a stream implicitly or explicitly:
 * tc_stream_synchronize and, later, copies into pageable memory and scalar
 * reads. tc_synchronize and tc_event_synchronize are deliberate waits and
 * are never flagged. Starts from TCUDA_SYNC_DEBUG_MODE=0|1|2 if set. */
TCUDA_API int tc_get_sync_debug_mode(void);
TCUDA_API tc_status tc_set_sync_debug_mode(int mode);

/* CUDA_LAUNCH_BLOCKING=1 in the environment at initialization makes every
 * kernel tcuda launches wait for its completion, so that a fault is reported
 * by the call that launched the kernel. This says whether it is on. */
TCUDA_API bool tc_launch_blocking(void);

/* ---- monitoring through NVML (libnvidia-ml, loaded at run time) ---------- */
/* Each returns -1 on error (no GPU, NVML missing, not supported by the
 * device) with the reason in tc_last_error(). */

/* Percent of the last sample period in which a kernel ran on the device. */
TCUDA_API int tc_utilization(int device);
/* Percent of the last sample period in which device memory was read or written. */
TCUDA_API int tc_memory_usage(int device);
/* GPU temperature in degrees Celsius. */
TCUDA_API int tc_temperature(int device);
/* Power draw in milliwatts. */
TCUDA_API int tc_power_draw(int device);
/* Current SM clock in MHz (torch.cuda.clock_rate reports the same number). */
TCUDA_API int tc_clock_rate(int device);

/* A readable list of the processes using `device` and their memory, one per
 * line, or "no processes are running". Caller frees with tc_free. NULL on
 * error. */
TCUDA_API char *tc_list_gpu_processes(int device);

TCUDA_EXTERN_C_END

#endif
