/* The allocator benchmark's trace, shared by bench_alloc.c (GPU modes) and
 * bench_alloc_host.c (the algorithm alone): 200,000 operations, sizes 70% in
 * 512 B..1 MiB, 27% in 1..32 MiB, 3% in 32..512 MiB, log-uniform and not
 * aligned; alloc or free with equal odds, frees in random order, at most
 * 2,048 live. The same seed gives the same trace in both programs. A block's
 * id is its slot in the replayer's pointer table; a freed block's slot is
 * reused, so the table (2,048 entries, as a program's live tensors would be)
 * stays in cache and the replay times the allocator, not the table. */
#ifndef TCUDA_BENCH_ALLOC_TRACE_H
#define TCUDA_BENCH_ALLOC_TRACE_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include "bench_util.h"

typedef struct op {
    uint32_t id;    /* slot of the block */
    uint32_t alloc; /* 1 alloc, 0 free */
    uint64_t size;
} op;

enum { NOPS = 200000, MAXLIVE = 2048 };

static uint64_t rs = 0x243f6a8885a308d3ull;
static uint64_t rnd(void)
{
    rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
    return rs;
}
static double unif(void) { return (double)(rnd() >> 11) / 9007199254740992.0; }

static op *gen(size_t *peak_live)
{
    op *t = malloc(NOPS * sizeof *t);
    uint32_t live[MAXLIVE], nlive = 0, next = 0;
    uint32_t spare[MAXLIVE], nspare = 0; /* slots of freed blocks */
    uint64_t *sz = calloc(NOPS, sizeof *sz), cur = 0, peak = 0;
    for (int i = 0; i < NOPS; i++) {
        bool a = nlive == 0 || (nlive < MAXLIVE && (rnd() & 1));
        if (a) {
            double u = unif(), lo = 512, hi = 1 << 20;
            if (u >= 0.70)
                lo = 1 << 20, hi = 32 << 20;
            if (u >= 0.97)
                lo = 32 << 20, hi = 512.0 * (1 << 20);
            uint64_t s = (uint64_t)(lo * pow(hi / lo, unif()));
            s |= 1; /* not aligned */
            uint32_t id = nspare ? spare[--nspare] : next++;
            t[i] = (op){id, 1, s};
            sz[id] = s;
            live[nlive++] = id;
            cur += s;
            if (cur > peak)
                peak = cur;
        } else {
            uint32_t k = (uint32_t)(rnd() % nlive);
            t[i] = (op){live[k], 0, 0};
            cur -= sz[live[k]];
            spare[nspare++] = live[k];
            live[k] = live[--nlive];
        }
    }
    free(sz);
    *peak_live = peak;
    return t;
}

/* Frees, through release(ctx, ptr), every block still live after the n
 * operations of trace t ran (slots[id] holds block id's pointer; ids below
 * nslots). */
static void free_live(const op *t, int n, size_t nslots, void **slots,
                      void (*release)(void *ctx, void *ptr), void *ctx)
{
    uint8_t *alive = calloc(nslots, 1);
    for (int i = 0; i < n; i++)
        alive[t[i].id] = (uint8_t)t[i].alloc;
    for (size_t i = 0; i < nslots; i++)
        if (alive[i])
            release(ctx, slots[i]);
    free(alive);
}

#endif
