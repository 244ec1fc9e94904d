/* A process group's insides, shared by dist.c (making groups, queuing
 * collectives) and pg_watch.c (what is in flight, the watchdog, aborting,
 * waiting). Not installed.
 *
 * The collectives a group queues are covered by pg_ops: an event recorded
 * on the stream after NCCL's kernels, with the time the first of them was
 * queued. An event per collective would cost a microsecond and more of host
 * time each, a tenth of a small collective's, so one op covers a run of
 * collectives on one stream (the tail): an event is recorded when a
 * tc_work is asked for, when the stream changes, when the tail is 1 ms
 * old, and by the watchdog for a tail left alone. The group keeps its ops
 * in queue order until their events complete; a tc_work holds a reference
 * to one. A watchdog thread per group looks at them every few
 * milliseconds, as PyTorch's NCCL watchdog does: when the oldest op has been
 * in flight longer than the group's timeout, or NCCL reports an
 * asynchronous error, it aborts the group. Aborting marks every op still in
 * flight as failed and raises a device fault (base/device_fault.h) before
 * ncclCommAbort cuts their kernels short, so every host wait that was
 * blocked on them returns, and reports the failure instead of the garbage.
 *
 * Locks: `mu` guards the communicator pointer, its users, the abort reason,
 * the op list, the free ops and the watchdog's stop flag, and is never held
 * across an NCCL call that can wait. `launch` is held by the one thread
 * queuing work on the communicator (NCCL communicators are not thread-safe),
 * from the NCCL call until its op is in the list, so the list is in queue
 * order. Order: launch before mu. */
#ifndef TCUDA_DIST_PG_H
#define TCUDA_DIST_PG_H

#include <pthread.h>
#include <stdatomic.h>

#include "base/clock.h"
#include "nccl_internal.h"
#include "tcuda/dist.h"

typedef struct pg_op pg_op;
struct pg_op {
    cudaEvent_t done; /* recorded after the collective */
    double queued_s;  /* when it was queued (monotonic) */
    const char *what;
    uint64_t seq;                        /* 1, 2, ... in queue order */
    atomic_int refs;                     /* the group's list, plus its tc_work */
    atomic_bool failed;                  /* cut short by an abort */
    atomic_uint_fast64_t waiter_devices; /* devices whose streams waited for it */
    bool captured; /* recorded into a graph capture: not in the list, no host wait */
    pg_op *next_free;
};

struct tc_process_group {
    uint32_t magic;
    atomic_int refs; /* the user's, plus one per live work */
    int rank, world_size, device;
    double timeout_s;
    bool destroyed;
    pthread_mutex_t mu, launch;
    tc__nccl_comm_t comm;    /* NULL once aborted */
    int users;               /* calls inside NCCL with comm now */
    atomic_llong in_call_ns; /* when the thread holding `launch` entered NCCL; 0: none */
    atomic_bool aborted;     /* set once, under mu; read without it */
    char why[400];           /* the error that aborted it */
    pg_op **ops;             /* in flight, oldest first */
    int n_ops, cap_ops;
    pg_op *free_ops; /* done, events ready to record again */
    uint64_t seq;    /* collectives queued (under launch) */
    /* the tail: collectives queued since the last op (under launch) */
    int tail_n;
    double tail_first_s;
    const char *tail_what;
    uint64_t tail_seq;
    cudaStream_t tail_stream;
    pthread_t watchdog;
    bool watching, stop;
    pthread_cond_t wake;
};

/* The pause between two polls of a wait that began `waited_s` ago: the
 * core is yielded for the first 100 ms (a host wait must not add more than
 * a few microseconds to a collective), then 50 us sleeps, and from 1 s on
 * 1 ms ones. */
void tc__pg_pause(double waited_s);

/* The group's abort error, with its reason. */
tc_status tc__pg_aborted_fail(tc_process_group *pg);
/* Aborts the group with a reason (the first one wins; see pg_watch.c). */
tc_status tc__pg_abort(tc_process_group *pg, const char *fmt, ...) TC_PRINTF(2, 3);
/* Enters a call that hands the communicator to NCCL (*comm), or the abort
 * error; every TC_OK is paired with one tc__pg_use_end. */
tc_status tc__pg_use_begin(tc_process_group *pg, tc__nccl_comm_t *comm);
void tc__pg_use_end(tc_process_group *pg);

/* After a collective was queued on `cs` (device current, `launch` held)
 * at monotonic second `queued_s`: adds it to the tail, covers the tail with an op when it is time, and a
 * tc_work holding that op into *out when out is not NULL. */
tc_status tc__pg_op_record(tc_process_group *pg, cudaStream_t cs, const char *what, double queued_s,
                           tc_work **out);
/* Covers the tail with an op now (`launch` held, the device current). */
tc_status tc__pg_tail_cover(tc_process_group *pg);
/* Joins the group's communicator (pg_join.c) into pg->comm before
 * `deadline` (monotonic seconds): TC_ERROR_IO when it was not ready in
 * time, TC_ERROR_CUDA with NCCL's words when NCCL refused. */
tc_status tc__pg_join(tc_process_group *pg, tc__nccl_unique_id id, double deadline);
/* Drops a reference (dist.c); the last one ends the communicator and the
 * group, and returns how that went. */
tc_status tc__pg_unref(tc_process_group *pg);
/* Starts and stops the group's watchdog thread. */
tc_status tc__pg_watch_start(tc_process_group *pg);
void tc__pg_watch_stop(tc_process_group *pg);
/* Waits until the ops in flight are done (true) or `deadline` passed. */
bool tc__pg_ops_drain(tc_process_group *pg, double deadline);
/* Frees the group's ops and their events (the group is ending). */
void tc__pg_ops_free(tc_process_group *pg);

#endif
