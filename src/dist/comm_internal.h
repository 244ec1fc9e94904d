/* The collectives' fast path behind a small table, reached through the
 * device seam (runtime/device_ops.h: `comm`): comm.c calls it; NCCL
 * carries it in a CUDA build (dist/cuda/comm_nccl.c); without CUDA it
 * answers TC_ERROR_NOT_SUPPORTED (src/nocuda/device_ops.c). When a call
 * answers TC_ERROR_NOT_SUPPORTED it has queued nothing, and comm.c falls
 * back to peer copies; any other error (an NCCL that is there but fails) is
 * the collective's error. The table reads the tensors it is given and
 * calls nothing of the tensor module: comm.c keeps the inputs' memory from
 * reuse (record_stream). Not installed. */
#ifndef TCUDA_COMM_INTERNAL_H
#define TCUDA_COMM_INTERNAL_H

#include "tcuda/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tc__comm_accel {
    /* bufs[i] (contiguous, `bytes` bytes, on devs[i]) = bufs[root], each on
     * its device's current stream. */
    tc_status (*broadcast)(tc_tensor *const *bufs, const int *devs, int n, int root, size_t bytes);
    /* out (contiguous, on devs[root]) = the sum of ins[i] (contiguous, numel
     * elements of dtype, on devs[i]), each on its device's current stream. */
    tc_status (*reduce)(const tc_tensor *const *ins, tc_tensor *out, const int *devs, int n,
                        int root);
} tc__comm_accel;

extern const tc__comm_accel tc__comm_nccl;

#ifdef __cplusplus
}
#endif

#endif
