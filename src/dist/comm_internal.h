/* Two things torch.cuda.comm's files share. Not installed.
 *
 * The collectives' fast path behind a small table, reached through the
 * device seam (runtime/device_ops.h: `comm`): comm.c calls it; NCCL
 * carries it in a CUDA build (dist/cuda/comm_nccl.c); without CUDA it
 * answers TC_ERROR_NOT_SUPPORTED (src/nocuda/device_ops.c). When a call
 * answers TC_ERROR_NOT_SUPPORTED it has queued nothing, and comm.c falls
 * back to peer copies: NCCL missing or turned off, a dtype it lacks, too
 * many device lists, or a device list whose ncclCommInitAll failed (the
 * table warns once and remembers it). Any other error (an NCCL collective
 * that fails) is the collective's error. The devices given are distinct.
 * The table reads the tensors it is given and calls nothing of the tensor
 * module: comm.c keeps the tensors' memory from reuse (record_stream).
 *
 * And the argument checks that comm.c (broadcast, reduce_add) and
 * comm_scatter.c (scatter, gather) both make. */
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

/* A live GPU tensor, named "`what` i" in messages (TC_ERROR_INVALID_ARGUMENT
 * for a CPU one). */
tc_status tc__comm_check_gpu(const tc_tensor *t, const char *what, int i);
/* devices[0..n) are GPU indices >= 0 that exist (repeats allowed): a
 * negative entry is TC_ERROR_INVALID_DEVICE naming it, as are missing GPUs
 * (TC_ERROR_NO_DEVICE without any). */
tc_status tc__comm_check_devices(const int *devices, int n);
/* Releases t[0..n) and sets them NULL. */
void tc__comm_release_all(tc_tensor **t, int n);

#ifdef __cplusplus
}
#endif

#endif
