/* Memory IPC without CUDA: the handle's layout and check value, and the
 * per-handle count file in /dev/shm that tells a producer whether its
 * consumers are done. Not installed; the CUDA side is src/dist/cuda/ipc.c. */
#ifndef TCUDA_IPC_HANDLE_H
#define TCUDA_IPC_HANDLE_H

#include <stdbool.h>
#include <stdint.h>

#include "tcuda/ipc.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TC__IPC_VERSION 1u
#define TC__IPC_CUDA_HANDLE_BYTES 64

/* What a handle says, decoded. */
typedef struct tc__ipc_info {
    uint32_t producer_pid;
    uint32_t device;
    uint32_t dtype;
    uint32_t ndim;
    uint64_t seq;            /* per producer: names the count file */
    uint64_t nonce;          /* random; also in the count file */
    uint64_t segment_offset; /* the storage's start from the CUDA allocation's base */
    uint64_t storage_bytes;
    int64_t offset; /* the tensor's, in elements */
    int64_t sizes[TC_MAX_DIMS];
    int64_t strides[TC_MAX_DIMS];
    unsigned char cuda_handle[TC__IPC_CUDA_HANDLE_BYTES];
} tc__ipc_info;

/* Writes the handle; returns its check value (over every field, the random
 * nonce included: the key of its count file). */
uint64_t tc__ipc_encode(const tc__ipc_info *info, tc_ipc_mem_handle *out);
/* Checks magic, version, check value and field ranges; TC_ERROR_INVALID_HANDLE.
 * Writes the fields, and the check value to *check when not NULL. */
tc_status tc__ipc_decode(const tc_ipc_mem_handle *h, tc__ipc_info *out, uint64_t *check);

/* The count file's path for (pid, seq): /dev/shm/tcuda_ipc_<pid>_<seq>
 * ($TCUDA_IPC_DIR instead of /dev/shm when set). */
void tc__ipc_ref_path(uint32_t pid, uint64_t seq, char *buf, size_t n);
/* Producer: creates the count file (no consumers yet) holding `key`, the
 * handle's check value. */
tc_status tc__ipc_ref_create(uint32_t pid, uint64_t seq, uint64_t key);
/* Consumer: checks the key and adds one reference of this process;
 * TC_ERROR_INVALID_HANDLE when the file is gone, was unlinked while this
 * call waited for its lock, or was replaced by another file of that name, or
 * when the key differs (a handle whose fields were changed, even with a
 * recomputed check value). */
tc_status tc__ipc_ref_acquire(uint32_t pid, uint64_t seq, uint64_t key);
/* Consumer: drops one reference of this process. */
void tc__ipc_ref_release(uint32_t pid, uint64_t seq);
/* Producer: true when no live process holds a reference (dead consumers'
 * references are cleared); then the file is removed and the block may go.
 * A file that cannot be read counts as done. */
bool tc__ipc_ref_done(uint32_t pid, uint64_t seq);
/* Producer: removes the count file (at exit). It takes the file's lock
 * first, as every unlink does, so that no consumer is between its check
 * that the file is live and its count. */
void tc__ipc_ref_remove(uint32_t pid, uint64_t seq);

#ifdef __cplusplus
}
#endif

#endif
