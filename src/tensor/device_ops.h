/* The one seam between the core and a device runtime. Not installed.
 *
 * The core (storage, tensors, copies, generators) never calls CUDA: whatever
 * it needs of a GPU goes through the table below. src/tensor/cuda/device_ops_cuda.c
 * fills it with the CUDA runtime; src/nocuda/device_ops.c fills it in a
 * build without CUDA, answering TC_ERROR_NO_DEVICE. Both define
 * tc__cuda_device_ops, so the table is linked in, not registered at start-up.
 *
 * Hooks (graph capture, the stream sanitizer, jiterator, ...) attach here and
 * nowhere else: tc__device_ops_install(&mine, &prev) makes `mine` the table
 * every later device operation of the core goes through; each of its
 * functions does its own "before" work, calls the same function of `prev`,
 * then its "after" work (e.g. a sanitizer records an access in `alloc` /
 * `record_stream`, graph capture routes `alloc` to a private pool). The
 * compute `backend` is wrapped the same way: a table whose kernels note the
 * operands of each tc__iter (pointers, strides, which is written) on the
 * current stream, then call the previous backend, is all a stream sanitizer
 * needs. jiterator needs no hook: its kernels take tensors' data pointers
 * and run on `current_stream`, their memory from `alloc`. The core does not
 * know who is installed. A hook is installed once, before the
 * operations it watches, and never removed while they may run (the tables are
 * const and live for the process). Cost on the hot path: one atomic load of
 * the table pointer and one indirect call. */
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
struct tc_tensor;

typedef struct tc__device_ops {
    /* What the runtime is called in messages ("CUDA"). */
    const char *name;
    /* The compute kernels of the device type (tensor_internal.h); NULL when
     * absent. */
    const struct tc__backend *backend;
    /* Resolves a device index: -1 is the current device, else it must exist;
     * initializes the runtime. TC_ERROR_NO_DEVICE when there is none. */
    tc_status (*resolve)(int index, int *out);
    /* `bytes` (0 gives NULL) of device memory on a resolved device, ordered on
     * its current stream. */
    tc_status (*alloc)(int device, size_t bytes, void **out);
    /* Gives memory from alloc back (NULL is a no-op). */
    void (*free)(void *ptr);
    /* Memory at ptr (device memory, or pinned host memory when `host`) is
     * used by work on `stream` (an opaque runtime stream handle): it is reused
     * only after that work completes. */
    tc_status (*record_stream)(void *ptr, bool host, void *stream);
    /* The runtime stream handle that work for a resolved device goes on now
     * (opaque to the core). */
    void *(*current_stream)(int device);
    /* A tc_stream given by the user (checked: live) as its device and
     * runtime handle; NULL means the current stream of the current device. */
    tc_status (*stream_of)(tc_stream *stream, int *device, void **handle);
    /* dst = src (shapes checked, src broadcasts) where the devices differ. */
    tc_status (*copy)(struct tc_tensor *dst, const struct tc_tensor *src, bool non_blocking);
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
} tc__device_ops;

/* The table src/cuda (or its absent stub) defines. */
extern const tc__device_ops tc__cuda_device_ops;

/* The table in use (tc__cuda_device_ops unless a hook installed another). */
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
