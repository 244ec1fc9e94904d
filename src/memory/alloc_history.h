/* Memory history: the hooks the allocator calls, and what the history's
 * files (alloc_history*.c) share (internal).
 *
 * tc__hist_mask holds what is being recorded (TC_HISTORY_RECORD_* bits, and the
 * stack mode from TC__HIST_STACKS_SHIFT up); when it is 0, each hook costs
 * the allocator one relaxed load and one predictable branch (TC__HIST_ON).
 *
 * Locks. Each allocator keeps its own history (tc__hist_local: its ring of
 * events and the allocating stack of each of its live blocks and segments)
 * under its own mutex, so recording takes no process-wide lock. Stacks are
 * captured at an entry point before the allocator's mutex is taken
 * (tc__hist_enter) and interned into one table; an entry point hands its
 * stack id to the locked code in a->hist_stack. The order of locks is: the
 * registry (the dump, register, unregister), then the stack table, then an
 * allocator's mutex; nothing takes the registry or the table with an
 * allocator's mutex held. The notes' mutex (the metadata table and the
 * annotations, alloc_history_notes.c) comes last: nothing is taken under it. */
#ifndef TCUDA_ALLOC_HISTORY_H
#define TCUDA_ALLOC_HISTORY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "base/internal.h"
#include "alloc.h"
#include "alloc_history_notes.h"

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
#define TC__HIST_STACKS_SHIFT 8 /* tc__hist_mask: the stack mode from this bit up */
#define TC__HIST_ON(bits)                                                                          \
    TC_UNLIKELY(atomic_load_explicit(&tc__hist_mask, memory_order_relaxed) & (bits))

typedef struct tc__hist_event {
    uint64_t time_us;
    uint64_t addr, size, requested, stream, pool;
    int32_t device;
    uint32_t stack; /* 0: none; else an id of the stack table (a copy's: index + 1) */
    uint32_t meta;  /* the user's metadata: an id of the metadata table (0: "") */
    uint8_t action;
} tc__hist_event;

/* What a snapshot writes as every event's "compile_context": tcuda has no
 * torch.compile regions, so always PyTorch's word for none. */
#define TC__HIST_COMPILE_CONTEXT "N/A"

/* The id of the user's metadata now (tc_memory_set_history_metadata), which
 * tc__hist_record stamps on each event with one relaxed load. */
extern atomic_uint tc__hist_meta;

/* One annotation (tc__hist_annotate): a scope's start or end. */
typedef struct tc__hist_note {
    uint64_t time_us;
    char *name; /* owned */
    int32_t device;
    bool start;
} tc__hist_note;

typedef struct tc__hist_live {
    uint64_t addr;
    int32_t device;
    int32_t kind;   /* 0 block, 1 segment */
    uint32_t stack; /* 0: empty slot; UINT32_MAX: recorded without a stack */
} tc__hist_live;

/* One allocator's history, under its mutex: a ring of at most `max` events
 * (grown on demand up to it, `cap` slots now, the oldest at `head`) and the
 * stacks of its live blocks and segments (open addressing). Every stack id
 * kept here holds a reference on the table's entry. */
typedef struct tc__hist_local {
    tc__hist_event *ring;
    size_t cap, max, head, n;
    tc__hist_live *live;
    size_t live_cap, live_n;
} tc__hist_local;

/* The stack of the calling thread, interned (with a reference the caller
 * drops with tc__hist_stack_put), when the stack mode asks for one for an
 * allocation (`alloc`) or any event; 0 otherwise. Call it before taking the
 * allocator's mutex: it costs one load when no stacks are recorded. */
uint32_t tc__hist_capture(unsigned mask, bool alloc);
static inline uint32_t tc__hist_enter(bool alloc)
{
    unsigned m = atomic_load_explicit(&tc__hist_mask, memory_order_relaxed);
    if (TC_LIKELY(m < (1u << TC__HIST_STACKS_SHIFT)))
        return 0;
    return tc__hist_capture(m, alloc);
}
/* Drops a reference on stack `id` (0: nothing). Takes no lock. */
void tc__hist_stack_put(uint32_t id);

/* Records one event of allocator a (its mutex held), with a->hist_stack as
 * its stack when the stack mode asks for one; a free also forgets the
 * block's stack. */
void tc__hist_record(tc__allocator *a, int action, uintptr_t addr, size_t size, size_t requested,
                     uintptr_t stream, uint64_t pool_id);
/* An allocation of `size` bytes failed with out of memory (the allocator's
 * mutex not held; `stack` the call's): records an "oom" event and calls the
 * observers, keeping the thread's error message as it was. */
void tc__hist_oom(tc__allocator *a, size_t size, uintptr_t stream, uint32_t stack);
/* Allocators known to the dump (tc__alloc_create / tc__alloc_destroy);
 * unregister keeps the allocator's events and drops its stacks. */
void tc__hist_register(tc__allocator *a);
void tc__hist_unregister(tc__allocator *a);

const char *tc__hist_action_name(int action);

/* A copy of the history, taken at one time: the events oldest first, the
 * stacks they use (each a run of return addresses, renumbered 1..nstacks),
 * the allocating stack of each live block and segment, and every device
 * allocator's segments (snap). Free with tc__hist_copy_free. */
typedef struct tc__hist_copy {
    tc__hist_event *ev;
    size_t nev;
    void **frames;     /* all stacks' addresses, back to back */
    size_t *stack_off; /* stack i (id i + 1): frames[stack_off[i] .. stack_off[i+1]) */
    size_t nstacks;
    struct tc__hist_live *live; /* sorted by (device, kind, addr) */
    size_t nlive;
    int ndevices; /* 1 + the highest device seen */
    tc_memory_snapshot_info snap;
    tc__alloc_config cfg; /* the first allocator's settings */
    char **meta;          /* the metadata table: meta[id] (NULL: "") for id < nmeta */
    size_t nmeta;
    tc__hist_note *notes; /* the annotations, oldest first */
    size_t nnotes;
} tc__hist_copy;
/* Holds the registry (no allocator can go meanwhile) and the stack table. */
tc_status tc__hist_copy_take(tc__hist_copy *out);
void tc__hist_copy_free(tc__hist_copy *c);
/* The metadata string of id `meta` in c ("" for 0 or an id c lacks). */
const char *tc__hist_copy_meta(const tc__hist_copy *c, uint32_t meta);
/* The stack id (0: none) that allocated the block or segment at addr. */
uint32_t tc__hist_copy_live(const tc__hist_copy *c, int device, int kind, uint64_t addr);

/* For tests: live entries of the stack table and its capacity. */
void tc__hist_table_usage(size_t *used, size_t *capacity);

/* ---- shared by the history's files ---------------------------------------- */

/* The stack table's mutex (alloc_history_stacks.c): held, no stack is evicted. */
extern pthread_mutex_t tc__hist_smu;
/* Picks the unwinder (TCUDA_HISTORY_UNWIND, an unknown value refused) and makes
 * the stack table on the first start; a failure changes nothing. */
tc_status tc__hist_stacks_start(void);
/* One more reference on stack `id` (0: none); returns id. */
uint32_t tc__hist_stack_ref(uint32_t id);
/* Copies the stacks c's events and live entries use, renumbered densely (tc__hist_smu held). */
bool tc__hist_copy_stacks(tc__hist_copy *c);
/* Appends e to h's ring (its stack's reference goes with it), overwriting the oldest when full. */
void tc__hist_push(tc__hist_local *h, const tc__hist_event *e);
/* Empties h's ring and sets its bound; returns the old slots, to free outside any lock. */
tc__hist_event *tc__hist_ring_reset(tc__hist_local *h, size_t max);
/* Drops h's map of live stacks and its references. */
void tc__hist_live_clear(tc__hist_local *h);
/* The history's clock: microseconds since the epoch. */
uint64_t tc__hist_now_us(void);
/* Recording (re)starts with rings of `max` entries (the registry's lock held,
 * nothing recorded meanwhile): empties the annotations and rebuilds the
 * metadata table holding only the current string (alloc_history_notes.c). */
void tc__hist_notes_restart(size_t max);
/* Copies into c the metadata strings its events (copied already) use and
 * the annotations; false when host memory runs out (c's notes then empty). */
bool tc__hist_notes_copy(tc__hist_copy *c);
/* Frees what tc__hist_notes_copy put in c. */
void tc__hist_notes_free(tc__hist_copy *c);

#ifdef __cplusplus
}
#endif

#endif
