/* tcuda: initialization, devices, device guards and monitoring
 * (torch.cuda's "Initialization and devices" functions).
 *
 * Everything here links and runs on a machine without a GPU or driver, and in
 * a build without CUDA: tc_is_available() is then false, tc_device_count() is
 * 0, and calls that need a GPU return TC_ERROR_NO_DEVICE with the reason.
 * A device index of TC_CURRENT_DEVICE (-1) means the calling thread's
 * current device. Getters return a tc_status and write their value to their
 * last argument, `out`, only on success (a NULL out is
 * TC_ERROR_INVALID_ARGUMENT, a device that does not exist
 * TC_ERROR_INVALID_DEVICE); the calls that return a value directly say that
 * they cannot fail. */
#ifndef TCUDA_DEVICE_H
#define TCUDA_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

TCUDA_EXTERN_C_BEGIN

/* The device index meaning "the calling thread's current device", wherever a
 * device index is taken (comm.h's gather, where -1 means the CPU, has its
 * own, TC_COMM_CURRENT_DEVICE). */
#define TC_CURRENT_DEVICE (-1)

/* Where a tensor or generator lives: the CPU, or CUDA device `index`
 * (TC_CURRENT_DEVICE: the current CUDA device). */
typedef enum tc_device_type { TC_CPU = 0, TC_CUDA = 1 } tc_device_type;
typedef struct tc_device {
    tc_device_type type;
    int index;
} tc_device;

/* Parses "cpu", "cuda", "cuda:N" into *out. TC_ERROR_INVALID_ARGUMENT
 * on anything else. Does not check that the device exists. */
TCUDA_API tc_status tc_device_parse(const char *text, tc_device *out);
/* Writes "cuda:0" / "cuda" / "cpu" into buf (NUL-terminated, truncated to
 * n); nothing for a NULL buf or n 0. Cannot fail. */
TCUDA_API void tc_device_format(tc_device device, char *buf, size_t n);

/* ---- initialization ---------------------------------------------------- */

/* True when CUDA works here: a driver, at least one visible GPU, a build
 * with CUDA, and valid CUDA_LAUNCH_BLOCKING / TCUDA_SYNC_DEBUG_MODE values.
 * Never fails; when false, tc_last_error() says why. */
TCUDA_API bool tc_is_available(void);

/* True once tcuda's CUDA state was initialized (by tc_init or lazily).
 * Cannot fail. */
TCUDA_API bool tc_is_initialized(void);

/* Initializes tcuda's CUDA state now instead of at the first call that needs
 * it; safe to call many times and from many threads. TC_ERROR_NO_DEVICE when
 * CUDA is not available (the reason is in the message).
 * TC_ERROR_INVALID_ARGUMENT, naming the variable and its value, when
 * CUDA_LAUNCH_BLOCKING or TCUDA_SYNC_DEBUG_MODE holds a value they do not
 * take (see "debugging" below); every call that needs CUDA then fails the
 * same way, with or without a GPU. */
TCUDA_API tc_status tc_init(void);

/* Number of GPUs this process sees (CUDA_VISIBLE_DEVICES applies); 0 when
 * CUDA is not available (then tc_last_error() says why). Cannot fail: 0 is
 * an answer. */
TCUDA_API int tc_device_count(void);

/* The CUDA version the installed driver supports and the one tcuda's runtime
 * was built with, as 1000 * major + 10 * minor (13000 is 13.0); 0 when there
 * is no driver, or no CUDA in this build (torch.version.cuda's question).
 * These cannot fail: 0 is an answer ("none"), not an error, and they leave
 * tc_last_error() as it was. */
TCUDA_API int tc_cuda_driver_version(void);
TCUDA_API int tc_cuda_runtime_version(void);

/* ---- the current device (per thread) --------------------------------- */

/* The calling thread's current device (0 until changed), into *out.
 * TC_ERROR_NO_DEVICE when CUDA is not available. */
TCUDA_API tc_status tc_current_device(int *out);

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

/* The device's name, e.g. "NVIDIA H100 80GB HBM3", into *out. The string
 * belongs to tcuda and lives as long as the process. */
TCUDA_API tc_status tc_get_device_name(int device, const char **out);

/* The device's compute capability, e.g. 9.0 for an H100. */
TCUDA_API tc_status tc_get_device_capability(int device, int *major, int *minor);

typedef struct tc_device_properties {
    char name[256];
    uint8_t uuid[16];
    int major, minor;    /* compute capability */
    size_t total_memory; /* bytes */
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

/* Whether `device` can read and write `peer`'s memory directly, into *out:
 * false for a device with itself. A peer that does not exist is
 * TC_ERROR_INVALID_DEVICE too. */
TCUDA_API tc_status tc_can_device_access_peer(int device, int peer, bool *out);

/* What this library's kernels were compiled for: "sm_80 sm_90 compute_90"
 * style, and the nvcc -gencode flags. Empty strings in a build without CUDA.
 * The strings belong to tcuda. These cannot fail (never NULL). */
TCUDA_API const char *tc_get_arch_list(void);
TCUDA_API const char *tc_get_gencode_flags(void);

/* Waits for all work on every stream of `device` to finish. Bad input that
 * a kernel of that work found (a tc_nn_cross_entropy target out of range)
 * is reported here as TC_ERROR_INVALID_ARGUMENT, once, as by every call
 * that waits for the device (stream and event synchronize, copies to the
 * host, whose outputs are then not to be used) and by a stream or event
 * query that finds the work done. */
TCUDA_API tc_status tc_synchronize(int device);

/* The device's free and total memory in bytes, as the driver sees them. */
TCUDA_API tc_status tc_mem_get_info(int device, size_t *free_bytes, size_t *total_bytes);

/* ---- debugging --------------------------------------------------------- */

/* Sync debug mode (torch.cuda.set_sync_debug_mode's 0, 1, 2): off, a
 * warning on stderr, or TC_ERROR_SYNC_DISALLOWED (the call does not wait). */
typedef enum tc_sync_debug_mode {
    TC_SYNC_DEBUG_MODE_DEFAULT = 0,
    TC_SYNC_DEBUG_MODE_WARN = 1,
    TC_SYNC_DEBUG_MODE_ERROR = 2
} tc_sync_debug_mode;

/* The sync debug mode, process-wide. It applies, as in PyTorch, to calls
 * that wait for a stream implicitly or explicitly: tc_stream_synchronize,
 * blocking copies to the host, scalar reads. tc_synchronize and
 * tc_event_synchronize are deliberate waits and are never flagged. It
 * starts from TCUDA_SYNC_DEBUG_MODE if set: 0, "default" or empty, 1 or
 * "warn", 2 or "error" (PyTorch's names; any letter case). Any other value
 * is an error, never taken for 0: tc_get_sync_debug_mode returns
 * TC_ERROR_INVALID_ARGUMENT naming the variable and value, and
 * initialization fails (tc_init) until tc_set_sync_debug_mode sets a mode,
 * which replaces it. tc_set_sync_debug_mode refuses a value that is not a
 * tc_sync_debug_mode (TC_ERROR_INVALID_ARGUMENT). */
TCUDA_API tc_status tc_get_sync_debug_mode(tc_sync_debug_mode *out);
TCUDA_API tc_status tc_set_sync_debug_mode(tc_sync_debug_mode mode);

/* CUDA_LAUNCH_BLOCKING set to a true value (1, true, yes, on; any letter
 * case) makes every kernel tcuda launches wait for its completion, so that a
 * fault is reported by the call that launched the kernel. Unset, empty, 0,
 * false, no and off leave it off; any other value makes tc_init (and every
 * call that needs CUDA) fail with TC_ERROR_INVALID_ARGUMENT naming it. This
 * says whether it is on (false for an invalid value); it cannot fail. Read
 * once per process. */
TCUDA_API bool tc_launch_blocking(void);

/* ---- monitoring through NVML (libnvidia-ml, loaded at run time) ---------- */
/* Each reads one value into *out. TC_ERROR_NO_DEVICE without a GPU,
 * TC_ERROR_NOT_SUPPORTED when NVML is missing or cannot read the value on
 * this device. */

/* Percent of the last sample period in which a kernel ran on the device. */
TCUDA_API tc_status tc_utilization(int device, int *out);
/* Percent of the last sample period in which device memory was read or written. */
TCUDA_API tc_status tc_memory_usage(int device, int *out);
/* GPU temperature in degrees Celsius. */
TCUDA_API tc_status tc_temperature(int device, int *out);
/* Power draw in milliwatts. */
TCUDA_API tc_status tc_power_draw(int device, int *out);
/* Current SM clock in Hz (torch.cuda.clock_rate: "the clock speed of the GPU
 * SM in Hz"); NVML reads it in MHz, so it is a multiple of 1000000. An
 * int64_t: SM clocks above 2.15 GHz, past an int's 2147483647 Hz, exist. */
TCUDA_API tc_status tc_clock_rate(int device, int64_t *out);

/* A readable list of the processes using `device` and their memory, one per
 * line, or "no processes are running", into *out; the caller frees it with
 * tc_free. */
TCUDA_API tc_status tc_list_gpu_processes(int device, char **out);

TCUDA_EXTERN_C_END

#endif
