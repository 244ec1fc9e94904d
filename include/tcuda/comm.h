/* tcuda: collectives between the GPUs of one process (torch.cuda.comm:
 * broadcast, broadcast_coalesced, reduce_add, reduce_add_coalesced, scatter,
 * gather).
 *
 * Every collective queues its work on the current streams of the devices it
 * touches and returns before the GPUs finish; the streams are ordered with
 * events (a copy into device B waits for what B's stream and the source's
 * stream queued before the call), never with a device-wide synchronize.
 * Peer access between two GPUs is enabled once per pair, on first use, where
 * the hardware allows it; otherwise CUDA stages the copy through the host.
 * A list of one device works everywhere (a copy, or the tensor itself).
 *
 * NCCL (loaded at run time, as for dist.h) carries broadcast and reduce_add
 * over several GPUs when it is there; without it (no libnccl.so.2, a version
 * lacking a symbol tcuda needs, TCUDA_COMM_NCCL=0, a dtype NCCL has no type
 * for) the same calls use peer copies. An NCCL that is there but fails (its
 * ncclCommInitAll over the devices, or a collective) fails the call with
 * TC_ERROR_CUDA and NCCL's message; it never falls back silently.
 *
 * Threads: any thread may call these at any time. The NCCL communicators
 * of one device list are shared by all threads, and work on them is queued
 * by one thread at a time (a lock per device list, also held against lists
 * that share a device), so concurrent collectives cannot interleave their
 * launches and deadlock; they queue one after the other, and the GPUs run
 * them in that order.
 *
 * Results are new tensors (tc_tensor_release them) written to `out` arrays
 * the caller provides; on failure nothing is written to them. Common
 * errors: TC_ERROR_INVALID_ARGUMENT (NULL arrays, n < 1, a device listed
 * twice, a CPU tensor where a GPU one is needed), TC_ERROR_INVALID_HANDLE (a
 * released tensor), TC_ERROR_SHAPE / TC_ERROR_DTYPE (tensors that do not
 * match), TC_ERROR_INVALID_DEVICE, TC_ERROR_NO_DEVICE (no GPU, or built
 * without CUDA), TC_ERROR_OUT_OF_MEMORY, TC_ERROR_CUDA (CUDA's or NCCL's
 * error, with its message). */
#ifndef TCUDA_COMM_H
#define TCUDA_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "tensor.h"

TCUDA_EXTERN_C_BEGIN

/* gather's destination meaning "the current device" (PyTorch's None): -1,
 * TC_CURRENT_DEVICE elsewhere, means the CPU there, as in
 * torch.cuda.comm.gather. */
#define TC_COMM_CURRENT_DEVICE (-2)
/* broadcast_coalesced / reduce_add_coalesced: PyTorch's default bucket. */
#define TC_COMM_DEFAULT_BUFFER_SIZE ((size_t)10485760)

/* ---- broadcast ---------------------------------------------------------- */

/* comm.broadcast(tensor, devices): out[i] is a copy of the GPU tensor `t` on
 * devices[i] (TC_CURRENT_DEVICE: the current device); where devices[i] is
 * t's own device, out[i] is t itself (a new reference), as in PyTorch. */
TCUDA_API tc_status tc_comm_broadcast(const tc_tensor *t, const int *devices, int n,
                                      tc_tensor **out);
/* comm.broadcast(tensor, out=outputs): copies `t` into the n given GPU
 * tensors (same sizes and dtype as t, each on its own device). */
TCUDA_API tc_status tc_comm_broadcast_out(const tc_tensor *t, tc_tensor *const *outputs, int n);

/* comm.broadcast_coalesced(tensors, devices, buffer_size): the n_tensors
 * tensors (all on one GPU) are packed into buffers of at most buffer_size
 * bytes (a tensor larger than that gets a buffer of its own; tensors of one
 * dtype share a buffer), each buffer is broadcast once, and unpacked.
 * out[d * n_tensors + i] is tensor i on devices[d] (views of the received
 * buffer; the tensors themselves for the source device). buffer_size 0 is
 * TC_ERROR_INVALID_ARGUMENT. */
TCUDA_API tc_status tc_comm_broadcast_coalesced(const tc_tensor *const *tensors, int n_tensors,
                                                const int *devices, int n_devices,
                                                size_t buffer_size, tc_tensor **out);

/* ---- reduce -------------------------------------------------------------- */

/* comm.reduce_add(inputs, destination): *out = the element-wise sum of the n
 * GPU tensors (same sizes and dtype, each on a different device), on device
 * `destination` (TC_CURRENT_DEVICE: the current device). */
TCUDA_API tc_status tc_comm_reduce_add(const tc_tensor *const *inputs, int n, int destination,
                                       tc_tensor **out);

/* comm.reduce_add_coalesced(inputs, destination, buffer_size): inputs holds
 * n_devices rows of n_tensors tensors (row d on one device; column i of equal
 * sizes and dtype); out[i] = the sum of column i on `destination`. Columns of
 * one dtype are packed into buffers of at most buffer_size bytes and reduced
 * together. */
TCUDA_API tc_status tc_comm_reduce_add_coalesced(const tc_tensor *const *inputs, int n_devices,
                                                 int n_tensors, int destination, size_t buffer_size,
                                                 tc_tensor **out);

/* ---- scatter and gather -------------------------------------------------- */

/* comm.scatter(tensor, devices, chunk_sizes, dim, streams): splits `t` (CPU
 * or GPU) along `dim` (negative counts from the end) and copies chunk i to
 * devices[i]. chunk_sizes NULL splits as Tensor.chunk(n) does (chunks of
 * ceil(size / n), so fewer than n when the size is small); otherwise n sizes,
 * each > 0, summing to the size of dim. streams NULL or n streams (NULL
 * entries allowed): chunk i is copied on streams[i] (which must belong to
 * devices[i]), else on devices[i]'s current stream. *n_out (<= n) chunks are
 * written to out[0 .. *n_out). */
TCUDA_API tc_status tc_comm_scatter(const tc_tensor *t, const int *devices, int n,
                                    const int64_t *chunk_sizes, int dim, tc_stream *const *streams,
                                    tc_tensor **out, int *n_out);

/* comm.gather(tensors, dim, destination): *out = the n tensors (GPU, same
 * dtype, same sizes but along dim) concatenated along `dim` on `destination`
 * (a GPU index, -1 for the CPU, TC_COMM_CURRENT_DEVICE for the current GPU). */
TCUDA_API tc_status tc_comm_gather(const tc_tensor *const *tensors, int n, int dim, int destination,
                                   tc_tensor **out);

TCUDA_EXTERN_C_END

#endif
