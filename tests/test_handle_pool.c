/* Tensor handles from the handle pool (base/handle_pool.c): a released
 * tensor stays dead (a second release is TC_ERROR_INVALID_HANDLE, naming it)
 * for TC_HANDLE_POOL_QUARANTINE later create-release pairs of its thread;
 * threads create and release concurrently, also handing tensors to another
 * thread to release (so objects move through the shared FIFO), and a thread
 * that exits leaves its parked objects to the others. Meant for
 * ThreadSanitizer too (-DTCUDA_TSAN=ON); values are checked against what
 * each thread wrote. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/handle_pool.h"
#include "tc_test.h"

static const tc_device cpu = {TC_CPU, -1};
static tc_tensor *base;
static atomic_int errors;

static void test_quarantine(void)
{
    int64_t n = 8; /* all of base */
    tc_tensor *t;
    CHECK_OK(tc_tensor_view(base, 1, &n, &t));
    CHECK_OK(tc_tensor_release(t));
    int dead = 0;
    for (int i = 0; i < TC_HANDLE_POOL_QUARANTINE; i++) {
        tc_tensor *u;
        CHECK_OK(tc_tensor_view(base, 1, &n, &u));
        dead += u != t && tc_tensor_release(t) == TC_ERROR_INVALID_HANDLE &&
                strstr(tc_last_error(), "already destroyed") != NULL;
        CHECK_OK(tc_tensor_release(u));
    }
    CHECK(dead == TC_HANDLE_POOL_QUARANTINE);
}

/* A ring of tensors handed from producers to consumers. */
enum { RING = 256, PER_THREAD = 20000 };
static tc_tensor *ring[RING];
static int ring_head, ring_tail;
static pthread_mutex_t ring_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ring_cv = PTHREAD_COND_INITIALIZER;

static void ring_put(tc_tensor *t)
{
    pthread_mutex_lock(&ring_mu);
    while (ring_head - ring_tail == RING)
        pthread_cond_wait(&ring_cv, &ring_mu);
    ring[ring_head++ % RING] = t;
    pthread_cond_broadcast(&ring_cv);
    pthread_mutex_unlock(&ring_mu);
}

static tc_tensor *ring_get(void)
{
    pthread_mutex_lock(&ring_mu);
    while (ring_head == ring_tail)
        pthread_cond_wait(&ring_cv, &ring_mu);
    tc_tensor *t = ring[ring_tail++ % RING];
    pthread_cond_broadcast(&ring_cv);
    pthread_mutex_unlock(&ring_mu);
    return t;
}

/* Creates and releases on its own thread; every other view goes to the ring. */
static void *producer(void *arg)
{
    int id = (int)(uintptr_t)arg;
    for (int i = 0; i < PER_THREAD; i++) {
        int64_t n = 1 + (i + id) % 4, off = id % 4;
        tc_tensor *v;
        if (tc_tensor_narrow(base, 0, off, n, &v) != TC_OK) {
            atomic_fetch_add(&errors, 1);
            continue;
        }
        if (tc_tensor_size(v, 0) != n || tc_tensor_ndim(v) != 1)
            atomic_fetch_add(&errors, 1); /* someone else's header */
        if (i % 2)
            ring_put(v);
        else if (tc_tensor_release(v) != TC_OK)
            atomic_fetch_add(&errors, 1);
    }
    return NULL;
}

static void *consumer(void *arg)
{
    int count = (int)(uintptr_t)arg;
    for (int i = 0; i < count; i++) {
        tc_tensor *t = ring_get();
        if (tc_tensor_ndim(t) != 1 || tc_tensor_release(t) != TC_OK)
            atomic_fetch_add(&errors, 1);
    }
    return NULL;
}

int main(void)
{
    tc_test_init();
    int64_t n = 8;
    CHECK_OK(tc_tensor_zeros(1, &n, TC_FLOAT32, cpu, &base));
    test_quarantine();
    for (int round = 0; round < 2; round++) { /* threads exit, new ones reuse */
        pthread_t p[3], c;
        for (int i = 0; i < 3; i++)
            pthread_create(&p[i], NULL, producer, (void *)(uintptr_t)i);
        pthread_create(&c, NULL, consumer, (void *)(uintptr_t)(3 * PER_THREAD / 2));
        for (int i = 0; i < 3; i++)
            pthread_join(p[i], NULL);
        pthread_join(c, NULL);
    }
    CHECK(atomic_load(&errors) == 0);
    test_quarantine(); /* the main thread after the others exited */
    CHECK_OK(tc_tensor_release(base));
    CHECK_STATUS(tc_tensor_release(base), TC_ERROR_INVALID_HANDLE);
    return TC_TEST_DONE();
}
