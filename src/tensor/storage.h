/* Storage: the memory under tensors, reference-counted; the one place where
 * tensors take and give back memory. Not installed. */
#ifndef TCUDA_STORAGE_H
#define TCUDA_STORAGE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "tcuda/device.h"
#include "tcuda/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tc__storage {
    atomic_int refcount;
    tc_device device; /* resolved: CPU index -1, CUDA index >= 0 */
    bool pinned;      /* page-locked host memory (CPU only) */
    void *data;
    size_t bytes;
    /* Memory tcuda did not allocate (an IPC mapping, src/dist/cuda/ipc.c): when
     * set, the last release calls it instead of freeing `data`, and
     * record_stream calls on_record_stream (when set) instead of the
     * allocator's, which does not know the memory. */
    void (*on_free)(struct tc__storage *s);
    tc_status (*on_record_stream)(struct tc__storage *s, void *stream);
    void *ctx; /* on_free's and on_record_stream's */
} tc__storage;

/* Allocates `bytes` (0 allowed) on `device` (index resolved by the caller for
 * CUDA); pinned host memory when `pinned` (CPU only). refcount starts at 1. */
tc_status tc__storage_alloc(tc_device device, size_t bytes, bool pinned, tc__storage **out);
/* Drops a reference; frees on the last one. */
void tc__storage_release(tc__storage *s);
static inline void tc__storage_retain(tc__storage *s)
{
    atomic_fetch_add_explicit(&s->refcount, 1, memory_order_relaxed);
}
/* Records that `stream` (a runtime stream handle, see device_ops.h) of
 * `device` uses the storage: its memory is reused only after the work
 * queued there so far has completed. Device and pinned storages only; a
 * no-op for pageable host memory. */
tc_status tc__storage_record_stream(tc__storage *s, int device, void *stream);

#ifdef __cplusplus
}
#endif

#endif
