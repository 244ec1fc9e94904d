/* Bad input that only a kernel sees (a cross_entropy target, an embedding
 * backward's index or a KV cache's length out of range on the GPU),
 * reported without making the call that queued the kernel wait.
 *
 * Each device has one slot in mapped pinned memory. The first kernel to
 * find an error claims the slot (kind -1 while it writes), writes what it
 * found, then the kind. The next call that sees the device's work done
 * (tc_synchronize, a stream or event synchronize, a stream or event query
 * that finds the work finished, a copy to the host; with
 * CUDA_LAUNCH_BLOCKING=1 the launch check, tc__launch_check) reports it as
 * TC_ERROR_INVALID_ARGUMENT, naming the call that queued the kernel, and
 * clears the slot; later errors are lost until then. PyTorch
 * reports such input by a device-side assert at the same point, which ends
 * the process's CUDA context; here the library stays usable. Not
 * installed. */
#ifndef TCUDA_KERNEL_ERRORS_H
#define TCUDA_KERNEL_ERRORS_H

#ifndef __CUDACC__
#include "tcuda/status.h"
#endif

#ifdef __cplusplus
extern "C" {
#endif

enum {
    TC__KERR_NONE = 0,
    TC__KERR_WRITING = -1,        /* claimed by a kernel, values not written yet */
    TC__KERR_CE_TARGET = 1,       /* v: row, target, classes, ignore_index */
    TC__KERR_EMBEDDING_INDEX = 2, /* v: position, index, num_weights */
    TC__KERR_CACHE_LENGTH = 3     /* v: cache_len's element, its value, new positions, capacity */
};

typedef struct tc__kernel_error {
    int kind;
    long long v[4];
} tc__kernel_error;

#ifndef __CUDACC__
/* `device`'s slot as the GPU addresses it, made on first use. */
tc_status tc__kernel_error_slot(int device, tc__kernel_error **slot);

/* After a wait for `device` (or a query that found its work done): a
 * device fault (base/device_fault.h: a process group cut its collectives
 * short) as TC_ERROR_INVALID_STATE; else the error a kernel left in its
 * slot, if any, as TC_ERROR_INVALID_ARGUMENT with its message, and the slot
 * cleared; else TC_OK. Cheap: two reads of host memory. */
tc_status tc__kernel_errors_check(int device);
#endif

#ifdef __cplusplus
}
#endif

#endif
