/* What the benchmarks share: a monotonic clock, the median of a set of
 * timings, the median of event-timed GPU calls, and TRY. Header-only, for
 * bench_*.c. */
#ifndef TCUDA_BENCH_UTIL_H
#define TCUDA_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench_time.h"
#include "tcuda/tcuda.h"

/* Exits with the call and tcuda's message when a tcuda call fails: a
 * benchmark has nothing to measure after an error. */
#define TRY(call)                                                                                  \
    do {                                                                                           \
        tc_status st_ = (call);                                                                    \
        if (st_ != TC_OK) {                                                                        \
            fprintf(stderr, "%s failed: %s\n", #call, tc_last_error());                            \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* The name of `device`, for the line a benchmark prints first. */
static inline const char *bench_device_name(int device)
{
    const char *name = NULL;
    TRY(tc_get_device_name(device, &name));
    return name;
}

/* The current stream of the current device, as CUDA's handle. */
static inline void *bench_cuda_stream(void)
{
    tc_stream *s = NULL;
    TRY(tc_current_stream(TC_CURRENT_DEVICE, &s));
    return tc_stream_cuda_handle(s);
}

/* The median milliseconds of `reps` calls of run(ctx), each timed by two
 * timing events on the current stream, after 3 untimed calls. */
static inline double bench_gpu_median_ms(void (*run)(void *), void *ctx, int reps)
{
    tc_event *a = NULL, *b = NULL;
    TRY(tc_event_create(TC_EVENT_FLAG_TIMING, &a));
    TRY(tc_event_create(TC_EVENT_FLAG_TIMING, &b));
    for (int i = 0; i < 3; i++)
        run(ctx);
    double *ts = malloc(sizeof(double) * (size_t)reps);
    for (int r = 0; r < reps; r++) {
        TRY(tc_event_record(a, NULL));
        run(ctx);
        TRY(tc_event_record(b, NULL));
        TRY(tc_event_synchronize(b));
        float ms = 0;
        TRY(tc_event_elapsed_time(a, b, &ms));
        ts[r] = ms;
    }
    double m = bench_median(ts, reps);
    free(ts);
    tc_event_destroy(a);
    tc_event_destroy(b);
    return m;
}

static inline void bench_replay(void *graph) { TRY(tc_graph_replay(graph)); }

/* The median milliseconds of `reps` replays of a CUDA graph of run(ctx),
 * captured after one call outside the capture (so that libraries such as
 * cuBLAS set themselves up first). */
static inline double bench_graph_median_ms(void (*run)(void *), void *ctx, int reps)
{
    run(ctx);
    TRY(tc_synchronize(-1));
    tc_graph *g = NULL;
    TRY(tc_graph_create(&g));
    tc_graph_capture_guard gd = tc_graph_capture_guard_enter(g, (tc_graph_pool_id){0}, NULL,
                                                             TC_CAPTURE_MODE_GLOBAL);
    TRY(gd.status);
    run(ctx);
    TRY(tc_graph_capture_guard_exit(&gd));
    double ms = bench_gpu_median_ms(bench_replay, g, reps);
    TRY(tc_graph_destroy(g));
    return ms;
}

#endif
