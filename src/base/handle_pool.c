/* See handle_pool.h: parked handle objects in FIFOs, one per thread and pool
 * in front of one shared per pool. The link to the next parked object lives
 * just after the object's magic word.
 *
 * A thread's FIFO (`local`) holds what it released, oldest first; an object
 * leaves it only when more than TC_HANDLE_POOL_QUARANTINE are behind it, so
 * a dead handle keeps its dead magic word for that many releases of its
 * thread, as the shared FIFO keeps it for that many releases of all. The
 * shared FIFO is reached with the pool's lock: to hand over the oldest
 * TC_HANDLE_POOL_QUARANTINE objects when a thread holds twice that, and to
 * take up to BATCH objects past its quarantine into the thread's `ready`
 * list (objects released on another thread: create on one, release on
 * another). A pthread key moves a thread's lists to the shared FIFOs when it
 * exits. Measured on a shared 2-core host, get+put of a 304-byte object,
 * min of 7 runs of 2M pairs: one thread 26 -> 14 ns of CPU per pair; two
 * threads on one pool 63-69 -> 31-37 ns wall per pair each (the lock was
 * contended), 27 -> 15-18 ns of CPU. */
#include "handle_pool.h"

#include <stdlib.h>
#include <string.h>

enum { Q = TC_HANDLE_POOL_QUARANTINE, BATCH = 32 };

static void **link_of(void *obj) { return (void **)((char *)obj + 8); }

typedef struct local {
    void *head, *tail; /* released by this thread, oldest first */
    unsigned n;
    void *ready; /* taken from the shared FIFO, past quarantine */
} local;

static _Thread_local local locals[TC_HANDLE_POOL_LOCAL];
static _Thread_local bool registered;
static tc__handle_pool *slot_pools[TC_HANDLE_POOL_LOCAL];
static int nslots;
static pthread_mutex_t slot_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

/* Appends the list first..last (n objects) to the pool's shared FIFO. */
static void shared_append(tc__handle_pool *pool, void *first, void *last, size_t n)
{
    pthread_mutex_lock(&pool->lock);
    if (pool->tail)
        *link_of(pool->tail) = first;
    else
        pool->head = first;
    pool->tail = last;
    pool->parked += n;
    pthread_mutex_unlock(&pool->lock);
}

/* Thread exit: its parked objects go to the shared FIFOs. */
static void thread_exit(void *arg)
{
    local *ls = arg;
    registered = false; /* a later use (another exit hook) registers again */
    for (int k = 0; k < TC_HANDLE_POOL_LOCAL; k++) {
        local *l = &ls[k];
        if (!l->head && !l->ready)
            continue; /* slot_pools[k] may be being set: do not read it */
        tc__handle_pool *pool = slot_pools[k];
        if (l->head)
            shared_append(pool, l->head, l->tail, l->n);
        size_t n = 0;
        void *last = NULL;
        for (void *o = l->ready; o; o = *link_of(o))
            last = o, n++;
        if (l->ready)
            shared_append(pool, l->ready, last, n);
        memset(l, 0, sizeof *l);
    }
}

static void exit_key_make(void) { (void)pthread_key_create(&exit_key, thread_exit); }

/* The pool's per-thread slot (1-based), or -1 when all are taken. */
static int slot_of(tc__handle_pool *pool)
{
    int k = atomic_load_explicit(&pool->slot, memory_order_acquire);
    if (TC_LIKELY(k != 0))
        return k;
    pthread_once(&exit_once, exit_key_make);
    pthread_mutex_lock(&slot_lock);
    k = atomic_load_explicit(&pool->slot, memory_order_relaxed);
    if (k == 0) {
        k = nslots < TC_HANDLE_POOL_LOCAL ? ++nslots : -1;
        if (k > 0)
            slot_pools[k - 1] = pool;
        atomic_store_explicit(&pool->slot, k, memory_order_release);
    }
    pthread_mutex_unlock(&slot_lock);
    return k;
}

/* This thread's FIFO of the pool, or NULL (no slot, or the exit hook could
 * not be set: then objects would be lost at exit). */
static local *local_of(tc__handle_pool *pool)
{
    int k = slot_of(pool);
    if (k < 0)
        return NULL;
    if (TC_UNLIKELY(!registered)) {
        if (pthread_setspecific(exit_key, locals) != 0)
            return NULL;
        registered = true;
    }
    return &locals[k - 1];
}

/* Up to BATCH objects past the shared quarantine into l->ready, one of them
 * returned; NULL when there are none. */
static void *shared_take(tc__handle_pool *pool, local *l)
{
    void *obj = NULL;
    pthread_mutex_lock(&pool->lock);
    for (int i = 0; i < BATCH && pool->parked > Q; i++) {
        void *o = pool->head;
        pool->head = *link_of(o);
        if (!pool->head)
            pool->tail = NULL;
        pool->parked--;
        if (!obj) {
            obj = o;
        } else if (l) {
            *link_of(o) = l->ready;
            l->ready = o;
        }
        if (!l)
            break;
    }
    pthread_mutex_unlock(&pool->lock);
    return obj;
}

void *tc__handle_get(tc__handle_pool *pool)
{
    local *l = local_of(pool);
    void *obj = NULL;
    if (TC_LIKELY(l != NULL)) {
        if (l->ready) {
            obj = l->ready;
            l->ready = *link_of(obj);
        } else if (l->n > Q) {
            obj = l->head;
            l->head = *link_of(obj);
            l->n--; /* the tail stays: more than Q remain */
        }
    }
    if (!obj)
        obj = shared_take(pool, l);
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
    local *l = local_of(pool);
    if (TC_UNLIKELY(!l)) {
        shared_append(pool, obj, obj, 1);
        return;
    }
    if (l->tail)
        *link_of(l->tail) = obj;
    else
        l->head = obj;
    l->tail = obj;
    if (++l->n < 2 * Q)
        return;
    /* The oldest half goes to the shared FIFO, in order. */
    void *first = l->head, *last = first;
    for (int i = 1; i < Q; i++)
        last = *link_of(last);
    l->head = *link_of(last);
    *link_of(last) = NULL;
    l->n -= Q;
    shared_append(pool, first, last, Q);
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
