/* See handle_pool.h: a FIFO of parked handle objects. The link to the next
 * parked object lives just after the object's magic word. */
#include "handle_pool.h"

#include <stdlib.h>
#include <string.h>

static void **link_of(void *obj) { return (void **)((char *)obj + 8); }

void *tc__handle_get(tc__handle_pool *pool)
{
    void *obj = NULL;
    pthread_mutex_lock(&pool->lock);
    if (pool->parked > TC_HANDLE_POOL_QUARANTINE) {
        obj = pool->head;
        pool->head = *link_of(obj);
        if (!pool->head)
            pool->tail = NULL;
        pool->parked--;
    }
    pthread_mutex_unlock(&pool->lock);
    if (obj) {
        memset(obj, 0, pool->size);
        return obj;
    }
    return calloc(1, pool->size);
}

void tc__handle_put(tc__handle_pool *pool, void *obj)
{
    *(uint32_t *)obj = TC_DEAD_MAGIC;
    *link_of(obj) = NULL;
    pthread_mutex_lock(&pool->lock);
    if (pool->tail)
        *link_of(pool->tail) = obj;
    else
        pool->head = obj;
    pool->tail = obj;
    pool->parked++;
    pthread_mutex_unlock(&pool->lock);
}

tc_status tc__handle_fail(const void *h, uint32_t magic, const char *type)
{
    (void)magic;
    if (!h)
        return tc__fail(TC_ERROR_INVALID_ARGUMENT, "the %s is NULL", type);
    if (*(const uint32_t *)h == TC_DEAD_MAGIC)
        return tc__fail(TC_ERROR_INVALID_HANDLE, "%s %p was already destroyed", type, h);
    return tc__fail(TC_ERROR_INVALID_HANDLE, "%p is not a live %s", h, type);
}
