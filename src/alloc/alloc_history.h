/* Memory history: the hooks the allocator calls (internal).
 *
 * tc__hist_mask holds what is being recorded (TC_HISTORY_* bits, and the
 * stack mode above them, and TC__HIST_TRACK); when it is 0, each hook costs the allocator one
 * relaxed load and one predictable branch (TC__HIST_ON). The hooks run with
 * the allocator's mutex held and take the history's own mutex inside it (the
 * lock order is allocator, then history; the dump takes them one at a time).
 * tc__hist_oom runs after the allocator's mutex is released: it calls the
 * out-of-memory observers, which may look at the allocator. */
#ifndef TCUDA_ALLOC_HISTORY_H
#define TCUDA_ALLOC_HISTORY_H

#include <stdatomic.h>
#include <stdint.h>

#include "../core/internal.h"
#include "alloc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The actions, in PyTorch's names (tc__hist_action_name). */
enum {
    TC__H_ALLOC = 0,
    TC__H_FREE_REQUESTED,
    TC__H_FREE_COMPLETED,
    TC__H_SEGMENT_ALLOC,
    TC__H_SEGMENT_FREE,
    TC__H_SEGMENT_MAP,
    TC__H_SEGMENT_UNMAP,
    TC__H_OOM,
    TC__H_NACTIONS
};

extern atomic_uint tc__hist_mask;
/* In tc__hist_mask while a stack of a live block or segment is kept: frees
 * are then seen (to forget it) even when they are not recorded. */
#define TC__HIST_TRACK 0x80u
#define TC__HIST_ON(bits)                                                                          \
    TC_UNLIKELY(atomic_load_explicit(&tc__hist_mask, memory_order_relaxed) & (bits))

/* Records one event of allocator a (its device), capturing the stack when
 * the options say so. */
void tc__hist_record(tc__allocator *a, int action, uintptr_t addr, size_t size, size_t requested,
                     uintptr_t stream, uint64_t pool_id);
/* An allocation of `size` bytes failed with out of memory (the allocator's
 * mutex not held): records an "oom" event and calls the observers, keeping
 * the thread's error message as it was. */
void tc__hist_oom(tc__allocator *a, size_t size, uintptr_t stream);
/* Allocators known to the dump (tc__alloc_create / tc__alloc_destroy). */
void tc__hist_register(tc__allocator *a);
void tc__hist_unregister(tc__allocator *a);

const char *tc__hist_action_name(int action);

/* For the dump (alloc_history_dump.c). */
typedef struct tc__hist_event {
    uint64_t time_us;
    uint64_t addr, size, requested, stream, pool;
    int32_t device;
    uint32_t stack; /* 0: none; else index + 1 into the stack table */
    uint8_t action;
} tc__hist_event;

/* A copy of the history: the events oldest first, the stacks (each a run of
 * return addresses), the allocating stack of each live block and segment,
 * and the registered allocators. Free with tc__hist_copy_free. */
typedef struct tc__hist_copy {
    tc__hist_event *ev;
    size_t nev;
    void **frames;     /* all stacks' addresses, back to back */
    size_t *stack_off; /* stack i: frames[stack_off[i] .. stack_off[i+1]) */
    size_t nstacks;
    tc__allocator **allocs;
    int *devices;
    size_t nallocs;
    struct tc__hist_live *live; /* sorted by (device, kind, addr) */
    size_t nlive;
    tc__alloc_config cfg; /* the first allocator's settings */
} tc__hist_copy;
typedef struct tc__hist_live {
    uint64_t addr;
    int32_t device;
    int32_t kind; /* 0 block, 1 segment */
    uint32_t stack;
} tc__hist_live;
tc_status tc__hist_copy_take(tc__hist_copy *out);
void tc__hist_copy_free(tc__hist_copy *c);
/* The stack id (0: none) that allocated the block or segment at addr. */
uint32_t tc__hist_copy_live(const tc__hist_copy *c, int device, int kind, uint64_t addr);

#ifdef __cplusplus
}
#endif

#endif
