/* tcuda: process groups on NCCL (torch.distributed's init_process_group,
 * get_rank, get_world_size, destroy_process_group, its collectives and
 * Work).
 *
 * One process per GPU. A group is made from the launcher's environment
 * (torchrun's RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT;
 * OpenMPI's OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK; Slurm's SLURM_PROCID,
 * SLURM_NTASKS, SLURM_LOCALID) or from explicit options. Rank 0 makes the
 * NCCL unique id and hands it to the others through a small TCP rendezvous
 * (rank 0 listens on MASTER_PORT on every interface, the others connect to
 * MASTER_ADDR:MASTER_PORT, each connect bounded by the timeout), then every
 * rank joins the NCCL communicator on its GPU (LOCAL_RANK, or the current
 * device). NCCL is loaded at run time (include/tcuda/nccl.h says which
 * library and how to choose it); without it the group calls are
 * TC_ERROR_NOT_SUPPORTED.
 *
 * The communicator is a blocking one, as PyTorch's by default: a collective
 * queues NCCL's kernels on the current stream of the group's device and
 * returns. tc_process_group_create sets up every connection the
 * collectives use (a round of small collectives and a send and receive
 * with every peer) before it returns, so that no later call waits inside
 * NCCL for a peer; the rendezvous and that setup together end within the
 * group's timeout, TC_ERROR_IO otherwise.
 *
 * Never a hang: each group has a watchdog thread, as PyTorch's NCCL
 * watchdog. It polls NCCL's asynchronous error and the age of the
 * collectives still running; when NCCL reports an error, or a collective
 * has not finished within the group's timeout (a peer died, exited or
 * stopped), it aborts the group: the collectives still running are marked
 * failed, and ncclCommAbort ends their kernels. Every way of waiting then
 * returns within the timeout and a few seconds, with a status naming this
 * rank and the collective: tc_work_wait, tc_work_query and
 * tc_work_wait_stream give TC_ERROR_INVALID_STATE; so do the host waits
 * that ordered themselves after a failed collective (tc_stream_synchronize,
 * tc_synchronize, tc_event_synchronize, a blocking copy of its tensor to
 * the CPU: any wait for the group's device, or for a device whose stream
 * waited for the work), because the tensors it wrote hold garbage; until
 * the group is destroyed. A group that was aborted refuses every later
 * operation (TC_ERROR_INVALID_STATE with the reason); destroying it gives
 * TC_OK. Destroying a healthy group waits, at most the timeout, for its
 * collectives to finish; if they do not, it aborts the communicator and
 * returns TC_ERROR_INVALID_STATE.
 *
 * Two limits, both PyTorch's too: a create that gives up while NCCL's
 * setup waits for a stopped peer leaves that setup to a thread, which
 * cleans up when NCCL lets it go; and a call that still waits inside NCCL
 * for a peer (a connection the setup did not foresee) is aborted under it
 * by the watchdog after the timeout and 2 s. A process that exits while
 * such a setup thread still runs waits for it at most 1 s, then ends at
 * once with its exit status: exit handlers registered before the first
 * group was created, and static destructors, are skipped (CUDA's and
 * NCCL's teardown would crash under the thread).
 *
 * CUDA graphs: a collective queued on a stream that is being captured
 * (graph.h) is recorded into the graph, as NCCL allows, and runs at every
 * replay; the communicator's connections must exist already (a collective
 * of the same kind before the capture sets them up, as any warm-up does).
 * Such a collective is not watched: a replay whose peer died hangs, as in
 * PyTorch (its watchdog skips captured work too). Its tc_work has no host
 * wait: tc_work_wait and tc_work_query give TC_ERROR_INVALID_STATE, and
 * tc_work_wait_stream orders another stream of the same capture after it.
 * The watchdog keeps working during captures in every mode.
 *
 * Threads: a group may be used from several threads; NCCL calls on it are
 * made one thread at a time (a communicator is not thread-safe), in the
 * order the threads arrive. Works stay valid handles after an abort:
 * waiting on one gives TC_OK if it had finished, else the abort error.
 * Destroying a group while another thread is still calling it is, as for
 * every handle, the caller's bug.
 *
 * Common errors: TC_ERROR_INVALID_ARGUMENT (NULL, a CPU or non-contiguous
 * tensor, a rank out of range), TC_ERROR_INVALID_HANDLE (a destroyed group
 * or work), TC_ERROR_DEVICE_MISMATCH (a tensor on another GPU than the
 * group's), TC_ERROR_SHAPE / TC_ERROR_DTYPE (sizes or dtypes that do not
 * fit), TC_ERROR_NOT_SUPPORTED (no NCCL), TC_ERROR_CUDA (an NCCL error, with
 * NCCL's words), TC_ERROR_INVALID_STATE (aborted after an error or a
 * timeout), TC_ERROR_IO (the rendezvous failed or timed out, or the NCCL
 * communicator was not ready within the timeout). */
#ifndef TCUDA_DIST_H
#define TCUDA_DIST_H

#include <stdbool.h>

#include "tensor.h"

TCUDA_EXTERN_C_BEGIN

/* This process's member of a group, and an operation queued on one. */
typedef struct tc_process_group tc_process_group;
typedef struct tc_work tc_work;

/* The reduction of all_reduce, reduce and reduce_scatter (torch's ReduceOp). */
typedef enum tc_reduce_op {
    TC_REDUCE_OP_SUM = 0,
    TC_REDUCE_OP_PROD,
    TC_REDUCE_OP_MIN,
    TC_REDUCE_OP_MAX,
    TC_REDUCE_OP_AVG
} tc_reduce_op;

/* ---- process groups ------------------------------------------------------ */

/* How to form a group. */
typedef struct tc_dist_options {
    int rank;              /* 0 .. world_size-1 */
    int world_size;        /* >= 1 */
    int local_rank;        /* the GPU of this rank; TC_CURRENT_DEVICE: the current one */
    char master_addr[256]; /* rank 0's address (IPv4 or a host name) */
    int master_port;       /* 1 .. 65535 */
    double timeout_s;      /* create, a collective, destroy: their limit in seconds (fractions
                              allowed); <= 0: 600 s; NaN or infinite: TC_ERROR_INVALID_ARGUMENT */
} tc_dist_options;

/* Reads the options from the environment: RANK/WORLD_SIZE/LOCAL_RANK, else
 * OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK, else SLURM_PROCID/NTASKS/LOCALID;
 * MASTER_ADDR (default 127.0.0.1: the address the other ranks connect to;
 * rank 0 listens on every interface), MASTER_PORT (default 29500),
 * TCUDA_DIST_TIMEOUT (seconds above 0, fractions allowed, e.g. 2.5; default
 * 600). A missing rank or world size, or a value that is not a number in
 * range (TCUDA_DIST_TIMEOUT "abc", "0", "-1", "nan", "inf"), is
 * TC_ERROR_INVALID_ARGUMENT naming the variable. Works without a GPU. */
TCUDA_API tc_status tc_dist_options_from_env(tc_dist_options *out);

/* Makes this process's member of a group (every rank must call it; it
 * returns when all have joined, or fails after the timeout: TC_ERROR_IO
 * for the rendezvous or a communicator that was not ready in time,
 * TC_ERROR_CUDA with NCCL's message when NCCL refused). */
TCUDA_API tc_status tc_process_group_create(const tc_dist_options *opts, tc_process_group **out);
/* tc_dist_options_from_env, then tc_process_group_create. */
TCUDA_API tc_status tc_process_group_create_from_env(tc_process_group **out);
/* Destroys the group once its last tc_work is destroyed too: lets its
 * queued collectives finish for at most the timeout, then frees the
 * communicator (ncclCommDestroy); aborts it when the group failed (TC_OK),
 * or when they do not finish in time (TC_ERROR_INVALID_STATE: the group's
 * resources are freed all the same). */
TCUDA_API tc_status tc_process_group_destroy(tc_process_group *pg);

/* This rank, the group's size (world size) and GPU. These cannot fail: for
 * NULL, a destroyed group or a pointer that is not one they return -1, and
 * leave tc_last_error() as it was. */
TCUDA_API int tc_process_group_rank(const tc_process_group *pg);
TCUDA_API int tc_process_group_size(const tc_process_group *pg);
TCUDA_API int tc_process_group_device(const tc_process_group *pg);

/* ---- collectives (torch.distributed's) ----------------------------------- */

/* t = op over the ranks' t (avg divides the sum by world_size). */
TCUDA_API tc_status tc_dist_all_reduce(tc_process_group *pg, tc_tensor *t, tc_reduce_op op,
                                       tc_work **out);
/* t = root's t on every rank. */
TCUDA_API tc_status tc_dist_broadcast(tc_process_group *pg, tc_tensor *t, int root, tc_work **out);
/* root's t = op over the ranks' t (others' t unchanged). */
TCUDA_API tc_status tc_dist_reduce(tc_process_group *pg, tc_tensor *t, int root, tc_reduce_op op,
                                   tc_work **out);
/* output (world_size * numel(input) elements, same dtype) = every rank's
 * input one after another in rank order. */
TCUDA_API tc_status tc_dist_all_gather(tc_process_group *pg, tc_tensor *output,
                                       const tc_tensor *input, tc_work **out);
/* output (numel(input) / world_size elements) = op over the ranks of this
 * rank's slice of input. */
TCUDA_API tc_status tc_dist_reduce_scatter(tc_process_group *pg, tc_tensor *output,
                                           const tc_tensor *input, tc_reduce_op op, tc_work **out);
/* input and output: world_size equal slices; slice j of input goes to rank
 * j, slice i of output comes from rank i. */
TCUDA_API tc_status tc_dist_all_to_all(tc_process_group *pg, tc_tensor *output,
                                       const tc_tensor *input, tc_work **out);
/* Point to point: t to rank `peer` / t from rank `peer` (not this rank). */
TCUDA_API tc_status tc_dist_send(tc_process_group *pg, const tc_tensor *t, int peer, tc_work **out);
TCUDA_API tc_status tc_dist_recv(tc_process_group *pg, tc_tensor *t, int peer, tc_work **out);
/* Returns when every rank reached it (an all_reduce of one element, waited). */
TCUDA_API tc_status tc_dist_barrier(tc_process_group *pg);

/* ---- work (torch.distributed's Work) -------------------------------------- */

/* Blocks until the work is done: TC_OK, or TC_ERROR_INVALID_STATE when an
 * abort cut it short (see above). The host polls (yielding the core first,
 * then sleeping longer), so a short collective costs a few microseconds. */
TCUDA_API tc_status tc_work_wait(tc_work *work);
/* TC_OK when done, TC_ERROR_NOT_READY while running, or the error. */
TCUDA_API tc_status tc_work_query(tc_work *work);
/* Makes `stream` (NULL: the current stream of the work's device) wait for
 * the work on the GPU, without blocking the host (PyTorch's Work.wait). */
TCUDA_API tc_status tc_work_wait_stream(tc_work *work, tc_stream *stream);
/* Frees the work; when it held the last reference of a destroyed group,
 * the group ends here (and this returns what tc_process_group_destroy would). */
TCUDA_API tc_status tc_work_destroy(tc_work *work);

TCUDA_EXTERN_C_END

#endif
