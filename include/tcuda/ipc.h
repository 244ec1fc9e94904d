/* tcuda: sharing GPU memory and events with another process (what
 * torch.multiprocessing does for CUDA tensors, torch.cuda.ipc_collect,
 * Event.ipc_handle and Event.from_ipc_handle).
 *
 * Tensors: the producer calls tc_tensor_ipc_handle and sends the handle's
 * bytes to a consumer (a pipe, a socket, a file); the consumer calls
 * tc_tensor_from_ipc_handle and gets a tensor over the same device memory.
 * PyTorch's safety rule holds: from the moment a handle is made, the
 * producer keeps the memory block allocated (it is not reused, even after
 * the producer released its own tensor) until every consumer of the handle
 * has released its tensor, or has exited (a crashed consumer counts as
 * released). tc_ipc_collect frees the blocks whose consumers are gone; until
 * then tc_memory_stats_get(dev, "ipc_shared_blocks", &n) counts them. The
 * count of consumers lives in a small file in /dev/shm per handle.
 *
 * A handle carries a check value over its contents (a random nonce among
 * them), also kept in its count file: a forged, corrupted, truncated or
 * stale handle (its block already collected), or one whose fields were
 * changed and its check value recomputed, is refused with
 * TC_ERROR_INVALID_HANDLE and never maps memory. Ordering: making a handle
 * waits for the producer's stream, so consumers see the data as it was then;
 * the producer must not write it while consumers read (or order that with an
 * IPC event, below), as in PyTorch.
 *
 * Without CUDA or a GPU the calls answer TC_ERROR_NO_DEVICE (after checking
 * their arguments); tc_ipc_mem_handle_parse works everywhere. */
#ifndef TCUDA_IPC_H
#define TCUDA_IPC_H

#include <stddef.h>

#include "stream.h"
#include "tensor.h"

TCUDA_EXTERN_C_BEGIN

/* ---- tensors ---------------------------------------------------------- */

#define TC_IPC_MEM_HANDLE_SIZE 384

/* Plain bytes, to be copied between processes as they are. */
typedef struct tc_ipc_mem_handle {
    unsigned char bytes[TC_IPC_MEM_HANDLE_SIZE];
} tc_ipc_mem_handle;

/* A handle to the storage of the GPU tensor `t`, describing t's sizes,
 * strides, offset and dtype. Each call makes a new handle, meant for one
 * consumer as a pickled tensor is in PyTorch: the block is held at least
 * until a consumer opened it and every process that opened it released it
 * (or exited). Waits for t's stream first, so the data is complete when a
 * consumer maps it. Errors: TC_ERROR_INVALID_ARGUMENT
 * (NULL out, a CPU tensor, memory that CUDA cannot share, e.g. expandable
 * segments), TC_ERROR_INVALID_HANDLE, TC_ERROR_IO (the count file), CUDA's. */
TCUDA_API tc_status tc_tensor_ipc_handle(const tc_tensor *t, tc_ipc_mem_handle *out);

/* A tensor over the memory a handle describes, on the producer's device (the
 * same GPU index in this process's numbering), opened with peer access where
 * needed. The consumer's tensor keeps the mapping; releasing it tells the
 * producer, once the device's current stream and every stream named by
 * tc_tensor_record_stream on it have finished the work queued so far (the
 * last release waits for them, on the host). In the producer's own process
 * the result is a view of the producer's storage. Errors:
 * TC_ERROR_INVALID_ARGUMENT (NULL), TC_ERROR_INVALID_HANDLE (bad check
 * value, unknown version, stale: the producer collected it or exited),
 * TC_ERROR_NO_DEVICE, CUDA's. */
TCUDA_API tc_status tc_tensor_from_ipc_handle(const tc_ipc_mem_handle *handle, tc_tensor **out);

/* Copies `n` received bytes into *out after checking that they are a whole,
 * intact handle (length, version, check value): TC_ERROR_INVALID_HANDLE
 * otherwise. Works without a GPU. */
TCUDA_API tc_status tc_ipc_mem_handle_parse(const void *bytes, size_t n, tc_ipc_mem_handle *out);

/* Frees the blocks this process shared whose consumers have all released
 * them or exited (torch.cuda.ipc_collect). TC_ERROR_NO_DEVICE without
 * CUDA. */
TCUDA_API tc_status tc_ipc_collect(void);

/* ---- events ----------------------------------------------------------- */

/* An event shared with another process: the handle is plain bytes that can
 * travel through a pipe or file. */
typedef struct tc_ipc_event_handle {
    unsigned char bytes[64];
} tc_ipc_event_handle;

/* The handle of `event` (Event.ipc_handle), into *out. The event needs
 * TC_EVENT_FLAG_INTERPROCESS (TC_ERROR_INVALID_STATE otherwise); one not yet
 * recorded is created on the current device. */
TCUDA_API tc_status tc_event_ipc_handle(tc_event *event, tc_ipc_event_handle *out);

/* Opens an event another process shared (Event.from_ipc_handle), on
 * `device` (TC_CURRENT_DEVICE: current), into *out; the caller destroys it
 * with tc_event_destroy. */
TCUDA_API tc_status tc_event_from_ipc_handle(int device, const tc_ipc_event_handle *handle,
                                             tc_event **out);

TCUDA_EXTERN_C_END

#endif
