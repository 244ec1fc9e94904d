/* Eight threads allocate, record streams and free on one allocator (plain
 * host provider) while a ninth reads stats, empties the cache and makes
 * streams go away (4, which the workers record blocks on, and now and then
 * one they allocate on); afterwards the invariant checker must pass and
 * everything must be back. Meant for ThreadSanitizer (-DTCUDA_TSAN=ON); in
 * a plain build it is a quick smoke. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "memory/alloc.h"
#include "tc_test.h"

static tc__allocator *a;
static atomic_int errors, running;

static void *worker(void *arg)
{
    uint64_t x = (tc_test_seed() + (uintptr_t)arg) * 0x9e3779b97f4a7c15ull + 1;
    void *live[64] = {0};
    for (int i = 0; i < 20000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int k = (int)(x % 64);
        if (live[k]) {
            unsigned char *p = live[k];
            if (p[0] != (unsigned char)k)
                atomic_fetch_add(&errors, 1); /* someone else wrote our block */
            if (tc__alloc_free(a, live[k]) != TC_OK)
                atomic_fetch_add(&errors, 1);
            live[k] = NULL;
        } else {
            size_t size = 512 + (size_t)(x >> 20) % (x % 10 == 0 ? (12u << 20) : (1u << 20));
            if (tc__alloc_malloc(a, size, 1 + (uintptr_t)arg % 3, &live[k]) != TC_OK)
                atomic_fetch_add(&errors, 1);
            else
                *(unsigned char *)live[k] = (unsigned char)k;
            if (live[k] && x % 7 == 0 && tc__alloc_record_stream(a, live[k], 4) != TC_OK)
                atomic_fetch_add(&errors, 1);
        }
    }
    for (int k = 0; k < 64; k++)
        if (tc__alloc_free(a, live[k]) != TC_OK)
            atomic_fetch_add(&errors, 1);
    atomic_fetch_sub(&running, 1);
    return NULL;
}

static void *watcher(void *arg)
{
    (void)arg;
    unsigned it = 0;
    while (atomic_load(&running) > 0) {
        tc_memory_stats_info s;
        tc__alloc_stats(a, &s);
        if (s.allocated_bytes[0].current > s.reserved_bytes[0].current)
            atomic_fetch_add(&errors, 1);
        tc__alloc_empty_cache(a);
        tc__alloc_stream_gone_all(4); /* and a new stream 4 comes at once */
        if (++it % 16 == 0)           /* a stream the workers allocate on: its cache goes */
            tc__alloc_stream_gone_all(1 + (uintptr_t)(it / 16) % 3);
    }
    return NULL;
}

int main(void)
{
    tc_test_init();
    tc__host_provider_ctx ctx = {0};
    tc__seg_provider p;
    tc__host_provider_init(&p, &ctx);
    tc__alloc_config cfg;
    tc__alloc_config_default(&cfg);
    CHECK_OK(tc__alloc_create(&p, &cfg, 0, &a));
    pthread_t t[9];
    atomic_store(&running, 8);
    for (int i = 0; i < 8; i++)
        pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1));
    pthread_create(&t[8], NULL, watcher, NULL);
    for (int i = 0; i < 9; i++)
        pthread_join(t[i], NULL);
    CHECK(atomic_load(&errors) == 0);
    char why[256];
    CHECK(tc__alloc_check(a, why, sizeof why) == 0);
    tc_memory_stats_info s;
    tc__alloc_stats(a, &s);
    CHECK(s.allocated_bytes[0].current == 0 && s.allocation[0].allocated == s.allocation[0].freed);
    tc__alloc_empty_cache(a);
    CHECK(ctx.in_use == 0);
    tc__alloc_destroy(a);
    return TC_TEST_DONE();
}
