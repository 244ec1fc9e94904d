/* Memory history's cost per allocator operation: bench_alloc's trace (the
 * first NOPS_HIST of its 200,000 operations, the same in bench_history_torch.py)
 * replayed through the caching allocator with history off, on without
 * stacks, on with stacks of allocations (PyTorch's context "alloc") and of
 * every event ("all"); warm replays, best of 3, ns per operation. On a GPU
 * through tc_caching_allocator_alloc/delete on device 0; without one, and in
 * any case as the second table, the algorithm alone on the plain host
 * provider. Usage:
 *   bench_history gen FILE   write the trace for bench_history_torch.py
 *   bench_history            the tables (CSV rows: where,mode,ns_per_op) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memory/alloc.h"
#include "alloc_trace.h"
#include "tcuda/tcuda.h"

enum { NOPS_HIST = 50000 };

static void **slots;
static tc__allocator *host;
static bool on_gpu;

static int do_alloc(size_t n, void **p)
{
    if (on_gpu)
        return tc_caching_allocator_alloc(n, 0, NULL, p) == TC_OK ? 0 : -1;
    return tc__alloc_malloc(host, n, 0, p) == TC_OK ? 0 : -1;
}

static void do_free(void *ctx, void *p)
{
    (void)ctx;
    if (on_gpu)
        (void)tc_caching_allocator_delete(p);
    else
        (void)tc__alloc_free(host, p);
}

/* One replay of the first NOPS_HIST operations; ns/op, -1 when one failed. */
__attribute__((noinline)) static double replay(const op *t)
{
    int fail = 0;
    double t0 = bench_now_ns();
    for (int i = 0; i < NOPS_HIST && !fail; i++) {
        if (t[i].alloc)
            fail |= do_alloc(t[i].size, &slots[t[i].id]);
        else
            do_free(NULL, slots[t[i].id]);
    }
    double ns = (bench_now_ns() - t0) / NOPS_HIST;
    free_live(t, NOPS_HIST, NOPS, slots, do_free, NULL);
    if (fail)
        fprintf(stderr, "bench_history: an allocation failed: %s\n", tc_last_error());
    return fail ? -1 : ns;
}

static double best_of_3(const op *t)
{
    double best = 1e30;
    (void)replay(t); /* warm the cache */
    for (int r = 0; r < 3; r++) {
        double ns = replay(t);
        if (ns < 0)
            return -1;
        best = ns < best ? ns : best;
    }
    return best;
}

static void rows(const char *where, const op *t)
{
    (void)replay(t); /* first touches, page faults: not in the "off" row */
    (void)replay(t);
    static const struct {
        const char *name;
        bool on;
        tc_history_stacks stacks;
    } modes[] = {{"off", false, TC_HISTORY_STACKS_NONE},
                 {"on_no_stacks", true, TC_HISTORY_STACKS_NONE},
                 {"on_alloc_stacks", true, TC_HISTORY_STACKS_ALLOC},
                 {"on_all_stacks", true, TC_HISTORY_STACKS_ALL},
                 {"off_again", false, TC_HISTORY_STACKS_NONE}};
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        tc_memory_history_options o = {modes[m].on, TC_HISTORY_RECORD_ALL, modes[m].stacks,
                                       1000000};
        if (tc_memory_record_history(&o) != TC_OK) {
            fprintf(stderr, "bench_history: %s\n", tc_last_error());
            return;
        }
        printf("%s,%s,%.1f\n", where, modes[m].name, best_of_3(t));
        fflush(stdout);
    }
}

int main(int argc, char **argv)
{
    size_t peak_live;
    op *t = gen(&peak_live);
    (void)free_live; /* the replay frees a prefix's live blocks itself */
    if (argc > 2 && !strcmp(argv[1], "gen")) {
        FILE *f = fopen(argv[2], "wb");
        if (!f)
            return 1;
        uint64_t n = NOPS_HIST;
        fwrite(&n, 8, 1, f);
        fwrite(t, sizeof *t, NOPS_HIST, f);
        fclose(f);
        return 0;
    }
    slots = calloc(NOPS, sizeof *slots);
    printf("where,mode,ns_per_op\n");
    on_gpu = tc_is_available();
    if (on_gpu) {
        rows("gpu", t);
        (void)tc_empty_cache();
    } else {
        fprintf(stderr, "bench_history: no GPU (%s): the host provider only\n", tc_last_error());
    }
    on_gpu = false;
    static tc__host_provider_ctx hctx;
    tc__seg_provider prov;
    tc__host_provider_init(&prov, &hctx);
    tc__alloc_config cfg;
    tc__alloc_config_default(&cfg);
    if (tc__alloc_create(&prov, &cfg, 0, &host) != TC_OK)
        return 1;
    rows("host", t);
    tc__alloc_destroy(host);
    free(slots);
    free(t);
    return 0;
}
