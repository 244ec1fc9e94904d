/* What the stream sanitizer engine's files (sanitizer*.c) share: its types
 * and the state and functions one part uses from another. Private to
 * src/sanitizer; sanitizer_internal.h is the engine as the rest of tcuda sees
 * it. Everything marked "under tc__san_mu" needs the engine's mutex. */
#ifndef TCUDA_SANITIZER_ENGINE_H
#define TCUDA_SANITIZER_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/strbuf.h"
#include "sanitizer_internal.h"

/* Earlier accesses a region keeps in place, and reports a call keeps on its
 * stack, before either spills to the heap: the common case (a writer and a
 * few readers; an operation with a race or two) allocates nothing. Neither
 * is a limit: every access and every report is kept. */
#define REGION_INLINE_ACCESSES 4
#define INLINE_REPORTS 4

/* An interned call stack (sanitizer_stacks.c). */
typedef struct san_stack san_stack;

/* A stream, or the host (actor 0), with its vector clock (sanitizer_clocks.c). */
typedef struct actor {
    int dev;
    void *handle;
    uint64_t *vc; /* vc_cap entries */
    uint64_t host_ver;
} actor;

/* Where an access or allocation was made. */
typedef struct site {
    const char *op;   /* public call, static */
    const char *what; /* kind of access, static */
    const san_stack *stack;
    char label[40];
} site;

/* An earlier access to a region: its actor, epoch and bytes. */
typedef struct access {
    int actor;
    bool write;
    uint64_t epoch;
    uintptr_t lo, hi;
    site site;
} access;

/* A watched allocation (sanitizer_memory.c). */
typedef struct region {
    uintptr_t base, end; /* first: the tree's probes are regions too */
    int dev;
    int actor; /* the stream the allocator reuses it for */
    bool host; /* pinned host memory */
    bool adopted;
    bool graph_pool; /* made on a capturing stream: a block of a graph's private pool */
    site made;
    int *recorded; /* actors named by record_stream */
    int nrec, rec_cap;
    access *acc; /* inl, or the heap once more than REGION_INLINE_ACCESSES */
    int nacc, acc_cap;
    access inl[REGION_INLINE_ACCESSES];
} region;

/* A report ready to deliver (outside the lock). rep's strings point into
 * the pending only once tc__san_deliver fills them: a pending may move. */
typedef struct pending {
    tc_sanitizer_report rep;
    char *text;
    char ops[2][48];
} pending;

/* The reports of one call, every one of them: INLINE_REPORTS in place, more
 * on the heap. `lost`: races found when memory ran out, counted all the same. */
typedef struct report_list {
    pending *p;
    int n, cap;
    uint64_t lost;
    pending inl[INLINE_REPORTS];
} report_list;

/* ---- sanitizer.c -------------------------------------------------------------- */

/* The engine's mutex: guards actors, events, regions and captures. */
extern pthread_mutex_t tc__san_mu;
/* Takes tc__san_mu when the sanitizer is on and the engine usable; false: not taken. */
bool tc__san_lock_on(void);

/* ---- sanitizer_stacks.c ------------------------------------------------------- */

/* The interned stack of the current call site (a "not kept" one when full). */
const san_stack *tc__san_capture_stack(void);
/* Prints a stack from the public call's frame on, symbolized on first use. */
void tc__san_put_stack(tc__strbuf *t, const san_stack *st);
/* Fills a site for the current public call: kind `what`, label copied. */
void tc__san_site_init(site *s, const char *what, const char *label);

/* ---- sanitizer_clocks.c (under tc__san_mu) ------------------------------------ */

/* The actors (0: the host) and their count. */
extern actor *tc__san_actors;
extern int tc__san_nactors;
/* Bumped when the host's clock changes (streams rejoin it lazily). */
extern uint64_t tc__san_host_ver;
/* vc_cap entries, for a clock joined only to check. */
extern uint64_t *tc__san_scratch_vc;
/* The actor of a stream (created on first sight); -1 when memory ran out. */
int tc__san_actor_of(int dev, void *handle);
/* Makes the host actor (0) on first use; false when memory ran out. */
bool tc__san_engine_ready(void);
/* Joins src (n entries) into actor dst's clock. */
void tc__san_join_into(int dst, const uint64_t *src, int n);
/* Stream a is ordered after everything the host knows. */
void tc__san_sync_host(int a);
/* Forgets every actor and event (the sanitizer turned off). */
void tc__san_clocks_forget(void);
/* Bytes held by actors, clocks and events, for tc__san_state_bytes. */
size_t tc__san_clocks_bytes(void);

/* ---- sanitizer_memory.c (under tc__san_mu) ------------------------------------ */

/* Pinned host regions: while there are none, host kernels skip everything. */
extern atomic_int tc__san_host_regions;
/* The watched region holding address p, or NULL. */
region *tc__san_region_at(uintptr_t p);
/* Watches [lo, hi) as a new region (stale overlapping state dropped); NULL when out of memory. */
region *tc__san_region_new(uintptr_t lo, uintptr_t hi, int dev, int who, bool host,
                           const site *made);
/* Index of the first earlier access of another actor from index `from` on
 * racing with this one, or -1. */
int tc__san_next_conflict(const region *r, int from, int x, const uint64_t *clock, uintptr_t lo,
                          uintptr_t hi, bool write);
/* Adds an access of actor x at `epoch` to r, dropping the entries it makes
 * redundant; false when memory ran out (the access is not remembered). */
bool tc__san_record_access(region *r, int x, uint64_t epoch, uintptr_t lo, uintptr_t hi, bool write,
                           const site *s);
/* Forgets every region (the sanitizer turned off). */
void tc__san_regions_forget(void);
/* Bytes held by regions and their lists, for tc__san_state_bytes. */
size_t tc__san_regions_bytes(void);

/* ---- sanitizer_access.c (under tc__san_mu) ------------------------------------ */

/* Whether span i of an operation is part of another of its spans (a read of
 * bytes it also writes, the same bytes named twice): one access, checked and
 * recorded once, as PyTorch merges an operation's operands by data pointer. */
bool tc__san_span_merged(const tc__span *spans, int n, int i);
/* Checks an operation of actor x under `clock`; each race goes into reps
 * (with first_only, the first ends the search). Returns how many were found. */
int tc__san_check_op(int x, const uint64_t *clock, const tc__span *spans, int n, bool adopt,
                     const site *cur, report_list *reps, bool first_only);
/* Records an operation of actor x as its next epoch, after joining actor `after` (-1: none). */
void tc__san_record_op(int x, int after, const tc__span *spans, int n, const site *cur);

/* ---- sanitizer_capture.c ------------------------------------------------------ */

/* Under tc__san_mu: whether a capture is underway on the stream. */
bool tc__san_capturing_stream(int dev, void *stream);
/* Keeps an access on a capturing stream; false when the stream is not one. */
bool tc__san_capture_access(const tc__access_op *op);

/* ---- sanitizer_report.c ------------------------------------------------------- */

/* Under tc__san_mu: the report of a race between the current access and e. */
char *tc__san_race_text(tc_sanitizer_race kind, const region *r, const tc__span *sp, int x,
                        const site *cur, const access *e);
/* An empty list (no allocation). */
void tc__san_reports_init(report_list *l);
/* Under tc__san_mu: the next free slot of l, or NULL when memory ran out
 * (the race is then counted in l->lost). */
pending *tc__san_reports_add(report_list *l);
/* Under tc__san_mu: fills p for delivery (txt: from tc__san_race_text, p takes it). */
void tc__san_fill_pending(pending *p, tc_sanitizer_race kind, const region *r, uintptr_t addr,
                          const site *cur, const site *earlier, char *txt);
/* Without tc__san_mu: counts and delivers one report as `mode` says. */
void tc__san_deliver(pending *p, int mode);
/* Without tc__san_mu: counts and delivers every report of l (and counts the
 * lost ones), then frees what l holds. */
void tc__san_deliver_all(report_list *l, int mode);
/* Without tc__san_mu: error mode's refusal, l's first report as the call's
 * error; frees what l holds. */
tc_status tc__san_refuse(report_list *l);

#endif
