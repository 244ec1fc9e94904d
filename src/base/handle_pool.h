/* Storage for opaque handles (streams, events, tensors, ...) that lets a
 * destroyed handle be recognized: a destroyed object is not returned to
 * malloc but parked, its magic word overwritten, at the back of a FIFO
 * queue, and reused only after the objects parked before it. Using a handle
 * soon after destroying it thus finds a dead magic word instead of freed
 * memory.
 *
 * Each thread parks into a FIFO of its own first (one per pool, up to
 * TC_HANDLE_POOL_LOCAL pools), so that a create and a release on the hot
 * path take no lock: a released object is reused by its thread only after
 * TC_HANDLE_POOL_QUARANTINE later releases there. Past twice that, the
 * oldest half moves to the pool's shared FIFO (one lock per
 * TC_HANDLE_POOL_QUARANTINE releases), whose objects go out again, in
 * batches, past the same quarantine; a thread's FIFO goes there when the
 * thread exits. */
#ifndef TCUDA_HANDLE_POOL_H
#define TCUDA_HANDLE_POOL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"

typedef struct tc__handle_pool {
    pthread_mutex_t lock;
    size_t size; /* object size; at least 16 bytes, magic word first */
    void *head;  /* shared FIFO: oldest parked object */
    void *tail;
    size_t parked;
    atomic_int slot; /* 1 + its per-thread FIFO's index; 0 not yet; -1 none */
} tc__handle_pool;

#define TC_HANDLE_POOL_INIT(type)                                                                  \
    {                                                                                              \
        PTHREAD_MUTEX_INITIALIZER, sizeof(type), NULL, NULL, 0, 0                                  \
    }

/* Objects parked before reuse begins: a dead handle stays recognizable until
 * this many more objects have been destroyed after it (on its thread). */
#define TC_HANDLE_POOL_QUARANTINE 64

/* Pools that get per-thread FIFOs (the first ones used); others lock. */
#define TC_HANDLE_POOL_LOCAL 16

/* A zeroed object, or NULL when memory runs out. */
void *tc__handle_get(tc__handle_pool *pool);

/* Parks a destroyed object and overwrites its magic word with
 * TC_DEAD_MAGIC. */
void tc__handle_put(tc__handle_pool *pool, void *obj);

/* The magic word of every destroyed handle. */
#define TC_DEAD_MAGIC 0xdeadbeefu

/* The one check every opaque handle goes through (streams, events,
 * generators, tensors, allocators, ...): TC_OK when h points to a live object
 * whose first word is `magic`; TC_ERROR_INVALID_ARGUMENT for NULL;
 * TC_ERROR_INVALID_HANDLE naming `type` (e.g. "tc_stream") when it was
 * destroyed or is something else. The message starts with the public call. */
tc_status tc__handle_fail(const void *h, uint32_t magic, const char *type);

/* The same test without a message, for accessors that cannot fail and answer
 * a documented value for a NULL, destroyed or foreign handle. */
static inline bool tc__handle_live(const void *h, uint32_t magic)
{
    return h && *(const uint32_t *)h == magic;
}

static inline tc_status tc__handle_check(const void *h, uint32_t magic, const char *type)
{
    if (TC_LIKELY(tc__handle_live(h, magic)))
        return TC_OK;
    return tc__handle_fail(h, magic, type);
}

#endif
