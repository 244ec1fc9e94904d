/* Eight threads allocate, record streams and free on one allocator (plain
 * host provider) while a ninth reads stats, empties the cache and makes
 * streams go away (4, which the workers record blocks on, and now and then
 * one they allocate on); afterwards the invariant checker must pass and
 * everything must be back. Then four threads allocate on an allocator of
 * 32 MiB until they run out of memory, again and again: each failure calls
 * the OOM observer once, on its thread, with what that thread asked for
 * and the provider's counts, read while the others map and unmap segments.
 * Meant for ThreadSanitizer (-DTCUDA_TSAN=ON); in a plain build it is a
 * quick smoke. */
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

/* ---- out of memory while others allocate ---------------------------------- */

#define OOM_CAP ((size_t)32 << 20)
static tc__allocator *oa;
static _Thread_local size_t asked; /* what this thread's failing call asked for */
static _Thread_local int observed; /* observer calls on this thread */
static atomic_int oom_total, observed_total;

static void on_oom(const tc_oom_info *info, void *ctx)
{
    observed++;
    atomic_fetch_add(&observed_total, 1);
    bool ok = ctx == &oom_total && info->device == 0 && info->requested == asked &&
              info->total_bytes == OOM_CAP && info->free_bytes <= OOM_CAP && info->snapshot;
    if (!ok)
        atomic_fetch_add(&errors, 1);
}

static void *oom_worker(void *arg)
{
    uint64_t x = (tc_test_seed() + (uintptr_t)arg) * 0x9e3779b97f4a7c15ull + 7;
    void *live[4] = {0};
    int ooms = 0;
    for (int i = 0; i < 3000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int k = (int)(x % 4);
        if (live[k]) {
            if (tc__alloc_free(oa, live[k]) != TC_OK)
                atomic_fetch_add(&errors, 1);
            live[k] = NULL;
            continue;
        }
        asked = 512 + (size_t)(x >> 16) % (12u << 20); /* four of them may not fit */
        tc_status st = tc__alloc_malloc(oa, asked, 1 + (uintptr_t)arg % 2, &live[k]);
        if (st == TC_ERROR_OUT_OF_MEMORY)
            ooms++, live[k] = NULL;
        else if (st != TC_OK)
            atomic_fetch_add(&errors, 1);
    }
    for (int k = 0; k < 4; k++)
        if (tc__alloc_free(oa, live[k]) != TC_OK)
            atomic_fetch_add(&errors, 1);
    if (observed != ooms) /* one call per failure, on the failing thread */
        atomic_fetch_add(&errors, 1);
    atomic_fetch_add(&oom_total, ooms);
    return NULL;
}

static void test_oom_while_others_allocate(void)
{
    tc__host_provider_ctx ctx = {0};
    ctx.capacity = OOM_CAP;
    tc__seg_provider p;
    tc__host_provider_init(&p, &ctx);
    tc__alloc_config cfg;
    tc__alloc_config_default(&cfg);
    CHECK_OK(tc__alloc_create(&p, &cfg, 0, &oa));
    CHECK_OK(tc_memory_attach_oom_observer(on_oom, &oom_total));
    atomic_store(&errors, 0);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, oom_worker, (void *)(uintptr_t)(i + 1));
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    CHECK_OK(tc_memory_detach_oom_observer(on_oom, &oom_total));
    CHECK(atomic_load(&errors) == 0);
    CHECK(atomic_load(&oom_total) > 0 && atomic_load(&observed_total) == atomic_load(&oom_total));
    char why[256];
    CHECK(tc__alloc_check(oa, why, sizeof why) == 0);
    tc__alloc_empty_cache(oa);
    CHECK(ctx.in_use == 0);
    tc__alloc_destroy(oa);
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
    test_oom_while_others_allocate();
    return TC_TEST_DONE();
}
