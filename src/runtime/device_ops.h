/* The device seam: the one way code outside the cuda/ folders reaches a
 * GPU. Not installed.
 *
 * A table of functions, one per build: src/cuda/device_ops.c fills it with
 * the CUDA runtime and the CUDA halves of the modules (tensor kernels,
 * random draws, NCCL collectives, NVRTC); src/nocuda/device_ops.c fills it
 * with answers of TC_ERROR_NO_DEVICE. The build links exactly one of the
 * two, and tc__device_ops_builtin, the table each defines, is the one
 * symbol of a cuda/ folder that code outside one names (device_ops.c
 * starts from it): the table is chosen at link time, since a static archive keeps only
 * the objects something refers to. Everything else the core needs of a
 * device (tensor memory, pinned memory, streams, device guards, kernels,
 * copies between devices, random fills, collectives, jiterator's compiler)
 * goes through tc__dev().
 *
 * Watchers do not hook here: they subscribe to the access layer
 * (access/access.h). The tensor module's declaring wrappers
 * (tensor/tensor_watch.c) are the one table installed over another
 * (tc__device_ops_install), once, when the first watcher activates; each
 * of its functions declares, then calls the same function of the table
 * below. Installed tables are const and live for the process. Cost on the
 * hot path: one atomic load of the table pointer and one indirect call. */
#ifndef TCUDA_DEVICE_OPS_H
#define TCUDA_DEVICE_OPS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/internal.h"
#include "tcuda/device.h"
#include "tcuda/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

struct tc__backend;
struct tc__index_backend;
struct tc__nn_backend;
struct tc__optim_backend;
struct tc__rng_params;
struct tc__comm_accel;
struct tc__jit_ops;
struct tc_tensor;
struct tc_generator;

typedef struct tc__device_ops {
    /* What the runtime is called in messages ("CUDA"). */
    const char *name;

    /* ---- devices and streams ---- */
    /* tc_device_count: 0 without a GPU. */
    int (*device_count)(void);
    /* Resolves a device index: -1 is the current device, else it must exist;
     * initializes the runtime. TC_ERROR_NO_DEVICE when there is none. */
    tc_status (*resolve)(int index, int *out);
    /* tc_device_guard_enter / _exit (a negative device: no-ops). */
    tc_device_guard (*device_guard_enter)(int device);
    void (*device_guard_exit)(tc_device_guard *guard);
    /* The runtime stream handle that work for a resolved device goes on now
     * (opaque to the core). */
    void *(*current_stream)(int device);
    /* A tc_stream given by the user (checked: live) as its device and
     * runtime handle; NULL means the current stream of the current device. */
    tc_status (*stream_of)(tc_stream *stream, int *device, void **handle);
    /* The public stream calls the core makes on the user's streams:
     * tc_current_stream, tc_stream_device, tc_stream_wait_stream,
     * tc_stream_synchronize, tc_stream_guard_enter / _exit. */
    tc_status (*stream_current)(int device, tc_stream **out);
    int (*stream_device)(const tc_stream *stream);
    tc_status (*stream_wait_stream)(tc_stream *stream, tc_stream *other);
    tc_status (*stream_synchronize)(tc_stream *stream);
    tc_stream_guard (*stream_guard_enter)(tc_stream *stream);
    void (*stream_guard_exit)(tc_stream_guard *guard);
    /* tc_is_current_stream_capturing. */
    bool (*stream_capturing)(void);

    /* ---- memory ---- */
    /* `bytes` (0 gives NULL) of device memory on a resolved device, ordered on
     * its current stream. */
    tc_status (*alloc)(int device, size_t bytes, void **out);
    /* Gives memory from alloc back (NULL is a no-op). */
    void (*free)(void *ptr);
    /* Memory at ptr (device memory, or pinned host memory when `host`) is
     * used by work on `stream` (an opaque runtime stream handle) of
     * `device`: it is reused only after that work completes. */
    tc_status (*record_stream)(void *ptr, bool host, int device, void *stream);
    /* Pinned host memory (tc_host_alloc, tc_host_free). */
    tc_status (*host_alloc)(size_t bytes, void **out);
    tc_status (*host_free)(void *ptr);

    /* ---- compute ---- */
    /* The compute kernels of the device type (tensor_internal.h); NULL when
     * absent. */
    const struct tc__backend *backend;
    /* The kernels CPU tensors run on; NULL (the runtimes' tables) means the
     * CPU backend itself. A hook that watches host accesses to memory that
     * streams also use (pinned host memory) wraps it, as it wraps `backend`. */
    const struct tc__backend *host_backend;
    /* The indexing kernels of the device type (index_internal.h); NULL when
     * absent. (CPU tensors use the CPU's own table; hooks that copy this
     * table pass it through unwrapped.) */
    const struct tc__index_backend *index_backend;
    /* The device type's neural-network kernels (nn.h's operations,
     * nn_internal.h); NULL when absent. CPU tensors use tc__cpu_nn_backend. */
    const struct tc__nn_backend *nn;
    /* The device type's optimizer and foreach kernels (optim.h, amp.h;
     * optim/optim_internal.h); NULL when absent. CPU tensors use
     * tc__cpu_optim_backend. */
    const struct tc__optim_backend *optim;
    /* Moves the bytes of `s` into `d` where their devices differ: both dense,
     * of one dtype and shape, at least one on a GPU (tensor_copy.c makes
     * them so). Queued on the current stream of the GPU side (of d's device
     * between GPUs, ordered after s's stream both ways); `wait`: the host
     * waits for it (and kernel-found errors are reported). Pinned host
     * memory involved is kept from reuse until the copy is done. */
    tc_status (*transfer)(struct tc_tensor *d, const struct tc_tensor *s, bool wait);
    /* tc_current_blas_handle. */
    tc_status (*blas_handle)(void **out);
    /* A generator's draw into device memory (random_internal.h). */
    tc_status (*rng_fill)(struct tc_generator *gen, const struct tc__rng_params *p, void *data,
                          size_t n);
    /* The collectives' fast path (dist/comm_internal.h). */
    const struct tc__comm_accel *comm;
    /* jiterator's GPU half (jit/jit_internal.h). */
    const struct tc__jit_ops *jit;
} tc__device_ops;

/* The table this build links: src/cuda/device_ops.c's, or
 * src/nocuda/device_ops.c's. */
extern const tc__device_ops tc__device_ops_builtin;

/* The table in use (the built-in one unless the tensor module's watching
 * wrappers were installed over it, or a test installed a fake device). */
extern const tc__device_ops *_Atomic tc__device_ops_current;
static inline const tc__device_ops *tc__dev(void)
{
    return atomic_load_explicit(&tc__device_ops_current, memory_order_acquire);
}

/* Makes `ops` the table in use; *prev (if not NULL) receives the one before,
 * for `ops` to call through. */
void tc__device_ops_install(const tc__device_ops *ops, const tc__device_ops **prev);

/* The one device rule, for tensors and generators alike: a CPU index must be
 * -1 or 0 (torch's "cpu" and "cpu:0") and resolves to -1; a CUDA index -1 is
 * the current device, any other must exist; any other type is refused. */
tc_status tc__device_resolve(tc_device device, tc_device *out);

#ifdef __cplusplus
}
#endif

#endif
