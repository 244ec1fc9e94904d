/* A recorded allocation trace's file, as bench_alloc writes it and
 * bench/torch/record_trace.py records it: a uint64 count, then {uint32 slot,
 * uint32 alloc, uint64 size} per operation. No CUDA here: bench_trace and
 * trace_torch.cpp replay it on a GPU (trace_replay.h), bench_alloc_host
 * through the allocator's algorithm alone. */
#ifndef TCUDA_BENCH_TRACE_FILE_H
#define TCUDA_BENCH_TRACE_FILE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct tr_op {
    uint32_t id, alloc;
    uint64_t size;
} tr_op;

typedef struct tr_trace {
    tr_op *ops;
    uint64_t n, slots, allocs;
    uint64_t peak_live;
} tr_trace;

/* The trace at path into t, with its slot count, allocations and peak live
 * bytes (the most requested bytes live at once); 0, or -1 with a message. */
static int tr_load(const char *path, tr_trace *t)
{
    FILE *f = fopen(path, "rb");
    if (!f || fread(&t->n, 8, 1, f) != 1) {
        fprintf(stderr, "trace: cannot read %s\n", path);
        if (f)
            fclose(f);
        return -1;
    }
    t->ops = (tr_op *)malloc(t->n * sizeof(tr_op));
    if (!t->ops || fread(t->ops, sizeof(tr_op), t->n, f) != t->n) {
        fprintf(stderr, "trace: %s is short\n", path);
        free(t->ops);
        fclose(f);
        return -1;
    }
    fclose(f);
    t->slots = t->allocs = t->peak_live = 0;
    for (uint64_t i = 0; i < t->n; i++)
        if (t->ops[i].id + 1 > t->slots)
            t->slots = t->ops[i].id + 1;
    uint64_t *sz = (uint64_t *)calloc(t->slots, 8), cur = 0;
    for (uint64_t i = 0; i < t->n; i++) {
        const tr_op *o = &t->ops[i];
        if (o->alloc) {
            sz[o->id] = o->size;
            cur += o->size;
            t->allocs++;
            if (cur > t->peak_live)
                t->peak_live = cur;
        } else {
            cur -= sz[o->id];
        }
    }
    free(sz);
    return 0;
}

#endif
