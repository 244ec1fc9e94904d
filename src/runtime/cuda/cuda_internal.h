/* Internal glue for everything that calls CUDA: the checking macro, lazy
 * initialization, device resolution, the stream and event structs, and the
 * launch check that every kernel launcher calls. Not installed. */
#ifndef TCUDA_CUDA_INTERNAL_H
#define TCUDA_CUDA_INTERNAL_H

#include <cuda_runtime_api.h>
#ifndef __cplusplus
#include <stdatomic.h>
#endif

#include "base/internal.h"
#include "tcuda/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- errors ------------------------------------------------------------ */

/* Turns a CUDA error into a tc_status with a message naming the call, CUDA's
 * words, and the place; clears CUDA's last error when it is not sticky. */
tc_status tc__cuda_fail(cudaError_t err, const char *expr, const char *file, int line);

#define TC_CUDA_CHECK(expr)                                                                        \
    do {                                                                                           \
        cudaError_t tc_cuda_err_ = (expr);                                                         \
        if (TC_UNLIKELY(tc_cuda_err_ != cudaSuccess))                                              \
            return tc__cuda_fail(tc_cuda_err_, #expr, __FILE__, __LINE__);                         \
    } while (0)

/* A query's answer (cudaStreamQuery, cudaEventQuery): TC_OK when the work is
 * done; TC_ERROR_NOT_READY while it runs, an answer and not an error, so it
 * formats no message (stream.h); any other error as tc__cuda_fail. */
tc_status tc__cuda_query(cudaError_t err, const char *expr, const char *file, int line);

/* ---- lazy initialization ---------------------------------------------- */
/* The state below is C11 (atomics, _Thread_local): .cu files reach it only
 * through C functions. */
#ifndef __cplusplus

/* 1 once tcuda's CUDA state is ready; read on every hot path. */
extern atomic_int tc__init_state;
/* Number of visible devices, valid once initialized. */
extern int tc__num_devices;
/* The calling thread's current device, as tcuda records it. */
extern _Thread_local int tc__tls_device;

tc_status tc__init_slow(void);

/* Initializes on first use; afterwards a single load. */
static inline tc_status tc__ensure_init(void)
{
    if (TC_LIKELY(atomic_load_explicit(&tc__init_state, memory_order_acquire) == 1))
        return TC_OK;
    return tc__init_slow();
}

/* Fails with TC_ERROR_INVALID_DEVICE naming the device and what exists. */
tc_status tc__bad_device(int device);

/* Resolves -1 to the current device and checks the index; initializes CUDA. */
static inline tc_status tc__resolve_device(int device, int *out)
{
    *out = 0; /* internal: written even on failure, to keep compilers calm */
    tc_status st = tc__ensure_init();
    if (TC_UNLIKELY(st != TC_OK))
        return st;
    if (device < 0) {
        *out = tc__tls_device;
        return TC_OK;
    }
    if (TC_UNLIKELY(device >= tc__num_devices))
        return tc__bad_device(device);
    *out = device;
    return TC_OK;
}

/* Makes `device` current for CUDA and for tcuda on this thread (no check). */
tc_status tc__switch_device(int device);

/* The multiprocessor count of a resolved device, cached; 0 when CUDA cannot
 * say (its error cleared). For grid sizes. */
int tc__sm_count(int device);
/* Compute capability major of a device (0 if CUDA cannot say); cached. */
int tc__cc_major(int device);
/* Its minor (-1 if CUDA cannot say); cached. */
int tc__cc_minor(int device);

#endif /* !__cplusplus */

/* ---- streams and events ------------------------------------------------- */

/* The first word of a live handle, checked by tc__handle_check
 * (base/handle_pool.h, which also owns TC_DEAD_MAGIC, the word of a
 * destroyed one). */
#define TC_STREAM_MAGIC 0x7c57ea11u
#define TC_EVENT_MAGIC 0x7cefe171u

struct tc_stream {
    uint32_t magic;
    int device;
    int priority;
    bool owned;      /* tcuda created the CUDA stream and destroys it */
    bool is_default; /* a per-device default stream; never destroyed */
    cudaStream_t handle;
};

struct tc_event {
    uint32_t magic;
    unsigned flags; /* tc_event_flag bits */
    int device;     /* -1 until the CUDA event exists */
    bool recorded;
    cudaEvent_t handle;
};

#ifndef __cplusplus
/* Per-thread current stream of each device; NULL means the default stream. */
extern _Thread_local tc_stream *tc__tls_stream[TC_MAX_DEVICES];
extern tc_stream tc__default_streams[TC_MAX_DEVICES];

/* Resolves a stream argument: NULL gives the current stream of the current
 * device (initializing CUDA); anything else goes through tc__handle_check. */
tc_status tc__resolve_stream(tc_stream *stream, tc_stream **out);

/* Events (event.c), for the IPC events of dist/cuda/ipc_event.c: the handle
 * check, a header from the events' handle pool (NULL without host memory;
 * the caller fills every field), and the lazy creation of the CUDA event on
 * device d. */
tc_status tc__event_check(const tc_event *e);
tc_event *tc__event_new(void);
tc_status tc__event_materialize(tc_event *e, int d);

/* The CUDA stream that work for `device` goes on now. `device` must be an
 * index tc__resolve_device returned (never -1). */
static inline cudaStream_t tc__current_cuda_stream(int device)
{
    tc_stream *s = tc__tls_stream[device];
    return s ? s->handle : tc__default_streams[device].handle;
}

/* Multiprocessors of a device, for grid sizes (80 if CUDA cannot say). */
static inline int tc__sm_count_for_grid(int device)
{
    int n = tc__sm_count(device);
    return n ? n : 80;
}

/* The body of a kernel launcher: enters `device`, runs `call` (which queues
 * the kernel on `cs_`, the device's current stream), checks the launch as
 * tc__launch_check does, leaves the device and returns that status. */
#define TC_LAUNCH(device, name, call)                                                              \
    do {                                                                                           \
        tc_device_guard g_ = tc_device_guard_enter(device);                                        \
        TC_TRY(g_.status);                                                                         \
        cudaStream_t cs_ = tc__current_cuda_stream(device);                                        \
        call;                                                                                      \
        tc_status st_ = tc__launch_check(cs_, name);                                               \
        tc_device_guard_exit(&g_);                                                                 \
        return st_;                                                                                \
    } while (0)
#endif /* !__cplusplus */

/* ---- kernel launches and synchronization ------------------------------- */

/* Call right after every kernel launch: reports a launch error, and with
 * CUDA_LAUNCH_BLOCKING=1 waits for the kernel and reports its fault here.
 * `kernel` names the kernel in the message. */
tc_status tc__launch_check(cudaStream_t stream, const char *kernel);

/* ---- optional libraries loaded at run time ------------------------------ */

typedef struct tc__dynlib {
    const char *what;         /* "NVML", "cuBLAS", ... for messages */
    const char *const *names; /* sonames to try, NULL-terminated */
    void *handle;             /* set once loaded */
    int state;                /* 0 not tried, 1 loaded, 2 missing */
    char message[512];        /* why it is missing */
} tc__dynlib;

/* Loads the library once (thread-safe). TC_ERROR_NOT_SUPPORTED, naming the
 * library and the sonames tried, when it is not there. */
tc_status tc__dynlib_load(tc__dynlib *lib);

/* Resolves `symbol` in a loaded library; TC_ERROR_NOT_SUPPORTED if absent. */
tc_status tc__dynlib_sym(tc__dynlib *lib, const char *symbol, void **out);

/* NVRTC's sonames, in the order jit/cuda/nvrtc.c tries them. */
extern const char *const tc__nvrtc_names[];

/* When CUDA initializes, tc__nvrtc_readahead_start starts a detached thread
 * that reads NVRTC's file and its builtins library into the page cache
 * (nvrtc_readahead.c), unless TCUDA_JIT_READAHEAD is false. What it did, for
 * tests: state 0 not started, 1 running, 2 done (read with acquire; the
 * other fields are final then); files read ahead (0 when NVRTC was not
 * found) and their paths. */
typedef struct tc__readahead_report {
    int state;
    int files;
    char nvrtc[512];
    char builtins[512];
} tc__readahead_report;
extern tc__readahead_report tc__nvrtc_readahead;
void tc__nvrtc_readahead_start(void);

#ifdef __cplusplus
}
#endif

#endif
