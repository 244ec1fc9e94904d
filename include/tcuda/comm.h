/* tcuda: collectives between the GPUs of one process (torch.cuda.comm:
 * broadcast, broadcast_coalesced, reduce_add, reduce_add_coalesced, scatter,
 * gather, and the out= forms of broadcast, scatter and gather).
 *
 * Every collective queues its work on the current streams of the devices it
 * touches and returns before the GPUs finish; the streams are ordered with
 * events (a copy into device B waits for what B's stream and the source's
 * stream queued before the call), never with a device-wide synchronize. A
 * CPU source is copied to each GPU as Tensor.copy_ does: from pageable host
 * memory the call waits for each copy (as PyTorch's .to(device) does), from
 * pinned memory it does not. Peer access between two GPUs is enabled once per
 * pair, on first use, where the hardware allows it; otherwise CUDA stages the
 * copy through the host.
 *
 * Device lists. An entry of `devices` is a GPU index >= 0; a negative entry
 * is TC_ERROR_INVALID_DEVICE naming it (torch.cuda.comm takes no "current
 * device" inside a list, so TC_CURRENT_DEVICE is refused there too), and an
 * index past the last GPU TC_ERROR_INVALID_DEVICE as well. A device may be
 * listed more than once, as in PyTorch: each entry gets its own result. The
 * current device is spelled only where PyTorch takes None: reduce_add's
 * destination (TC_CURRENT_DEVICE) and gather's (TC_COMM_CURRENT_DEVICE, since
 * -1 is the CPU there); any other negative destination is
 * TC_ERROR_INVALID_DEVICE. Lists hold at most 64 (TC_MAX_DEVICES) entries.
 *
 * NCCL (loaded at run time, as for dist.h) carries broadcast and reduce_add
 * over several distinct GPUs with dense tensors when it is there; otherwise
 * (no libnccl.so.2, a version lacking a symbol tcuda needs,
 * TCUDA_COMM_NCCL=0, a dtype NCCL has no type for, a device listed twice)
 * the same calls use peer copies. Where ncclCommInitAll fails for a device
 * list, tcuda prints one "tcuda warning:" line with NCCL's reason, remembers
 * the failure (it is not tried again for that list) and uses peer copies for
 * that list from then on: the results are the same. An NCCL collective that
 * fails once its communicators exist fails the call with TC_ERROR_CUDA and
 * NCCL's message.
 *
 * Threads: any thread may call these at any time. The NCCL communicators
 * of one device list are shared by all threads, and work on them is queued
 * by one thread at a time (a lock per device list, also held against lists
 * that share a device, and while a new list's communicators are made), so
 * concurrent collectives cannot interleave their launches and deadlock; they
 * queue one after the other, and the GPUs run them in that order.
 *
 * Results are new references (tc_tensor_release them) written to `out` arrays
 * the caller provides; on failure nothing is written to them. Where PyTorch
 * returns an input itself (broadcast to the source's own device, scatter's
 * chunk for it, reduce_add of one input on its device), so does tcuda, as a
 * new reference to it or to a view of it. Common errors:
 * TC_ERROR_INVALID_ARGUMENT (NULL arrays, an empty list, a CPU tensor where a
 * GPU one is needed), TC_ERROR_INVALID_HANDLE (a released tensor),
 * TC_ERROR_SHAPE / TC_ERROR_DTYPE (tensors that do not match),
 * TC_ERROR_INVALID_DEVICE (see above), TC_ERROR_NO_DEVICE (no GPU, or built
 * without CUDA), TC_ERROR_OUT_OF_MEMORY, TC_ERROR_CUDA (CUDA's or NCCL's
 * error, with its message).
 *
 * Where tcuda differs from PyTorch on purpose (tests/torch/comm_check.sh lists
 * the same cases):
 * - broadcast_coalesced takes CPU tensors, as torch.cuda.comm's documentation
 *   describes (PyTorch's code refuses them), and GPU tensors whose device is
 *   not devices[0] (PyTorch refuses those).
 * - reduce_add and reduce_add_coalesced put the sum on any GPU; PyTorch
 *   wants the destination to be the device of one of the inputs.
 * - scatter of a CPU tensor to device -1 is refused; PyTorch leaves that
 *   chunk on the CPU.
 * - scatter checks every entry of `devices`, also those past the last chunk
 *   (when Tensor.chunk gives fewer chunks than devices); PyTorch only those
 *   it uses.
 * - broadcast_out wants outputs of the source's dtype (TC_ERROR_DTYPE);
 *   PyTorch refuses other dtypes when NCCL carries the copy and converts
 *   otherwise.
 * - broadcast_coalesced and reduce_add_coalesced want at least one tensor. */
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

/* comm.broadcast(tensor, devices): out[i] is a copy of `t` (CPU or GPU) on
 * devices[i]; where devices[i] is t's own device, out[i] is t itself (a new
 * reference), as in PyTorch, so a CPU source never appears among the
 * results. n == 0 does nothing (devices and out may then be NULL). */
TCUDA_API tc_status tc_comm_broadcast(const tc_tensor *t, const int *devices, int n,
                                      tc_tensor **out);
/* comm.broadcast(tensor, out=outputs): copies `t` (CPU or GPU) into the n
 * given GPU tensors (t's sizes and dtype; several may share a device; an
 * output that is t itself is left as it is). n == 0 does nothing. Errors:
 * TC_ERROR_INVALID_ARGUMENT (a CPU output), TC_ERROR_SHAPE, TC_ERROR_DTYPE. */
TCUDA_API tc_status tc_comm_broadcast_out(const tc_tensor *t, tc_tensor *const *outputs, int n);

/* comm.broadcast_coalesced(tensors, devices, buffer_size): the n_tensors
 * tensors (all on one device, the CPU or a GPU) are packed into buffers of at
 * most buffer_size bytes (a tensor larger than that gets a buffer of its own,
 * as does every tensor for buffer_size 0; tensors of one dtype that follow
 * each other share a buffer), each buffer is broadcast once, and unpacked.
 * out[d * n_tensors + i] is tensor i on devices[d]: views of the received
 * buffer, except for the first entry of the tensors' own device, which holds
 * the tensors themselves (devices[0], in PyTorch's terms). Errors also:
 * TC_ERROR_DEVICE_MISMATCH (tensors on different devices). */
TCUDA_API tc_status tc_comm_broadcast_coalesced(const tc_tensor *const *tensors, int n_tensors,
                                                const int *devices, int n_devices,
                                                size_t buffer_size, tc_tensor **out);

/* ---- reduce -------------------------------------------------------------- */

/* comm.reduce_add(inputs, destination): *out = the element-wise sum of the n
 * GPU tensors (same sizes and dtype; several may share a device), on GPU
 * `destination` (TC_CURRENT_DEVICE: the current device, PyTorch's None).
 * One input already on the destination is returned itself (a new
 * reference), as in PyTorch. */
TCUDA_API tc_status tc_comm_reduce_add(const tc_tensor *const *inputs, int n, int destination,
                                       tc_tensor **out);

/* comm.reduce_add_coalesced(inputs, destination, buffer_size): inputs holds
 * n_devices rows of n_tensors tensors (row d on one GPU; column i of equal
 * sizes and dtype); out[i] = the sum of column i on `destination` (as
 * reduce_add's). Columns of one dtype that follow each other are packed into
 * buffers of at most buffer_size bytes and reduced together. Errors also:
 * TC_ERROR_DEVICE_MISMATCH (a row on several devices). */
TCUDA_API tc_status tc_comm_reduce_add_coalesced(const tc_tensor *const *inputs, int n_devices,
                                                 int n_tensors, int destination, size_t buffer_size,
                                                 tc_tensor **out);

/* ---- scatter and gather -------------------------------------------------- */

/* comm.scatter(tensor, devices, chunk_sizes, dim, streams): splits `t` (CPU
 * or GPU) along `dim` (negative counts from the end) and puts chunk i on
 * devices[i]. chunk_sizes NULL splits as Tensor.chunk(n) does (chunks of
 * ceil(size / n), so fewer than n when the size is small; n empty chunks when
 * the size is 0); otherwise n sizes, each >= 0 (a 0 gives an empty tensor on
 * that device), summing to the size of dim. A chunk for t's own GPU is a view
 * of t (no copy), as in PyTorch. streams NULL or n streams (NULL entries
 * allowed): chunk i is copied on streams[i], which must belong to devices[i]
 * (TC_ERROR_DEVICE_MISMATCH), after the work queued on t's current stream;
 * else on devices[i]'s current stream (a chunk left as a view of t uses no
 * stream, and its entry is not looked at, as in PyTorch). *n_out (<= n)
 * chunks are written to out[0 .. *n_out). Errors also: TC_ERROR_SHAPE (a 0-d
 * tensor). */
TCUDA_API tc_status tc_comm_scatter(const tc_tensor *t, const int *devices, int n,
                                    const int64_t *chunk_sizes, int dim, tc_stream *const *streams,
                                    tc_tensor **out, int *n_out);
/* comm.scatter(tensor, dim=dim, streams=streams, out=outputs): copies the
 * chunks of `t` (CPU or GPU) along `dim` into the n GPU tensors `outputs`:
 * chunk i is as long as outputs[i] along dim and goes to its device; every
 * other size of outputs[i] is t's. Values are converted to each output's
 * dtype (Tensor.copy_). streams as for tc_comm_scatter, with streams[i] on
 * outputs[i]'s device; the copy into outputs[i] also waits for the work
 * queued on its device's current stream. The outputs stay the caller's.
 * Errors: TC_ERROR_INVALID_ARGUMENT (n < 1, a CPU output), TC_ERROR_SHAPE
 * (another number of dims, another size off `dim`, lengths along dim that do
 * not add up to t's), TC_ERROR_DEVICE_MISMATCH (a stream of another device). */
TCUDA_API tc_status tc_comm_scatter_out(const tc_tensor *t, tc_tensor *const *outputs, int n,
                                        int dim, tc_stream *const *streams);

/* comm.gather(tensors, dim, destination): *out = the n GPU tensors (same
 * sizes but along dim; several may share a device) concatenated along `dim`
 * on `destination` (a GPU index, -1 for the CPU, TC_COMM_CURRENT_DEVICE for
 * the current GPU), with tensors[0]'s dtype (the others are converted, as
 * Tensor.copy_ does). */
TCUDA_API tc_status tc_comm_gather(const tc_tensor *const *tensors, int n, int dim, int destination,
                                   tc_tensor **out);
/* comm.gather(tensors, dim, out=out): the same concatenation written into
 * `out` (CPU or GPU, the caller's), whose sizes must be the concatenation's
 * (TC_ERROR_SHAPE); values are converted to out's dtype. A copy into GPU
 * memory is queued; one into host memory waits. */
TCUDA_API tc_status tc_comm_gather_out(const tc_tensor *const *tensors, int n, int dim,
                                       tc_tensor *out);

TCUDA_EXTERN_C_END

#endif
