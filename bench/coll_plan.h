/* The plan of bench/run.sh comm, shared by bench_comm.c (tcuda) and
 * nccl_floor.c (raw NCCL, which must not include tcuda): the sizes, the
 * collectives and their bus-bandwidth factors, how many calls a timed batch
 * holds, a clock and a median. bench/torch/coll_plan.py is its Python twin;
 * change both together, so that every program times the same cells the same
 * way.
 *
 * Sizes follow nccl-tests: all_reduce and broadcast move a buffer of `bytes`;
 * all_gather's output and reduce_scatter's input (the whole buffer) are
 * `bytes`, each rank's part bytes / world. Bus bandwidth is the algorithm
 * bandwidth (bytes / time) times 2 (n - 1) / n for all_reduce, 1 for
 * broadcast and (n - 1) / n for all_gather and reduce_scatter.
 *
 * Two modes per cell. "stream": COLL_BATCHES batches of K calls queued back
 * to back, one synchronize after each, time / K (the median batch). "wait":
 * M calls each followed by a host wait, each timed alone, the median. K and
 * M come from an estimate of one call (COLL_PROBE calls after COLL_WARMUP),
 * which the ranks must agree on (the largest over them) before either count
 * is used: a rank that queued a different number of collectives would hang
 * the group. */
#ifndef TCUDA_BENCH_COLL_PLAN_H
#define TCUDA_BENCH_COLL_PLAN_H

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "bench_time.h"

enum {
    COLL_N_SIZES = 8,    /* 64 KiB .. 1 GiB, powers of 4 */
    COLL_WARMUP = 5,     /* untimed calls before the probe */
    COLL_PROBE = 10,     /* calls queued back to back for the estimate */
    COLL_BATCHES = 5,    /* stream mode: the median of this many batches */
    COLL_MIN_CALLS = 20, /* the fewest calls of a batch, or of wait mode */
    COLL_MAX_BATCH = 10000,
    COLL_MAX_WAITS = 500
};
#define COLL_BATCH_NS 20e6 /* a stream batch's aim: 20 ms (5 of them: 100 ms) */
#define COLL_WAIT_NS 40e6  /* wait mode's aim, all calls together */

typedef enum coll_op {
    COLL_ALL_REDUCE,
    COLL_BROADCAST,
    COLL_ALL_GATHER,
    COLL_REDUCE_SCATTER,
    COLL_N_OPS
} coll_op;

static const char *const coll_op_names[COLL_N_OPS] = {"all_reduce", "broadcast", "all_gather",
                                                      "reduce_scatter"};

/* The i-th size in bytes: 64 KiB * 4^i. */
static inline int64_t coll_size(int i) { return (int64_t)65536 << (2 * i); }

/* Bus bandwidth per algorithm bandwidth of `op` over `world` ranks. */
static inline double coll_bus_factor(coll_op op, int world)
{
    switch (op) {
    case COLL_ALL_REDUCE: return 2.0 * (world - 1) / world;
    case COLL_BROADCAST: return 1.0;
    default: return (double)(world - 1) / world;
    }
}

static inline int coll_clamp(double v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : (int)v;
}

/* Calls per stream batch and wait-mode calls, from the agreed estimate of
 * one call in nanoseconds. */
static inline int coll_batch_calls(double est_ns)
{
    return coll_clamp(COLL_BATCH_NS / (est_ns > 1 ? est_ns : 1), COLL_MIN_CALLS, COLL_MAX_BATCH);
}
static inline int coll_wait_calls(double est_ns)
{
    return coll_clamp(COLL_WAIT_NS / (est_ns > 1 ? est_ns : 1), COLL_MIN_CALLS, COLL_MAX_WAITS);
}

/* One row of the table, as bench/compare.py reads it:
 * ROW <op> x<world> <bytes> <variant> <us per call> <GB/s>. */
#define COLL_ROW_FORMAT "ROW %s x%d %lld %s %.3f %.3f\n"

#endif
