/* Storage for opaque handles (streams, events) that lets a destroyed handle
 * be recognized: a destroyed object is not returned to malloc but parked, its
 * magic word overwritten, at the back of a FIFO queue, and reused only after
 * the objects parked before it. Using a handle soon after destroying it thus
 * finds a dead magic word instead of freed memory. */
#ifndef TCUDA_HANDLE_POOL_H
#define TCUDA_HANDLE_POOL_H

#include <pthread.h>
#include <stddef.h>

typedef struct tc__handle_pool {
    pthread_mutex_t lock;
    size_t size;   /* object size; at least 16 bytes, magic word first */
    void *head;    /* oldest parked object */
    void *tail;
    size_t parked;
} tc__handle_pool;

#define TC_HANDLE_POOL_INIT(type)                                              \
    {PTHREAD_MUTEX_INITIALIZER, sizeof(type), NULL, NULL, 0}

/* Objects parked before reuse begins: a dead handle stays recognizable until
 * this many more objects have been destroyed after it. */
#define TC_HANDLE_POOL_QUARANTINE 64

/* A zeroed object, or NULL when memory runs out. */
void *tc__handle_get(tc__handle_pool *pool);

/* Parks a destroyed object; the caller has already set its magic to dead. */
void tc__handle_put(tc__handle_pool *pool, void *obj);

#endif
