/* The collectives' fast path behind a small table (comm.c calls it; NCCL
 * carries it in a CUDA build, src/dist/cuda/comm_nccl.c; src/nocuda/comm.c answers
 * TC_ERROR_NOT_SUPPORTED). When a call answers TC_ERROR_NOT_SUPPORTED it has
 * queued nothing, and comm.c falls back to peer copies; any other error (an
 * NCCL that is there but fails) is the collective's error. Not installed. */
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

extern const tc__comm_accel tc__comm_accel_table;

#ifdef __cplusplus
}
#endif

#endif
