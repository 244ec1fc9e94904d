/* Host cost of the stream sanitizer: a loop of small ops on two streams with
 * events, the way correct multi-stream code looks, timed on the host with
 * the sanitizer off (never enabled: no hooks installed), on (report mode; it
 * must find nothing in this loop), and off again (hooks installed, mode OFF:
 * each hook is one branch).
 *
 * One iteration: on a side stream b = a + a and an event recorded; the
 * current stream waits for the event, c = b * a, b is record_stream'ed and
 * released, s = sum(c), c and s released. 3 kernels, 1 record, 1 wait per
 * iteration; "per op" divides by the 3 kernel-launching ops. Tensors are 4096
 * float32, so the GPU keeps up and the host path is what is timed. The GPU is
 * synchronized after each timed block, outside the timing.
 *
 *   bench_sanitizer [iterations per block] [blocks]    (default 20000 7)
 * Prints one CSV table: mode,us_per_iter,us_per_op,reports (mode off, on,
 * off_installed). */
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"
#include "tcuda/tcuda.h"

static void iteration(tc_tensor *a, tc_stream *side, tc_event *ev)
{
    tc_tensor *b = NULL, *c = NULL, *s = NULL;
    tc_stream_guard g = tc_stream_guard_enter(side);
    TRY(tc_tensor_add(a, a, &b));
    TRY(tc_event_record(ev, side));
    tc_stream_guard_exit(&g);
    TRY(tc_stream_wait_event(NULL, ev));
    TRY(tc_tensor_mul(b, a, &c));
    TRY(tc_tensor_record_stream(b, NULL));
    tc_tensor_release(b);
    TRY(tc_tensor_sum(c, TC_ALL_DIMS, false, &s));
    tc_tensor_release(c);
    tc_tensor_release(s);
}

/* Median over `blocks` of the host time of `iters` iterations, in us per
 * iteration. */
static double run(int iters, int blocks)
{
    int64_t n = 4096;
    tc_tensor *a = NULL;
    tc_stream *side = NULL;
    tc_event *ev = NULL;
    TRY(tc_tensor_rand(1, &n, TC_FLOAT32, (tc_device){TC_CUDA, -1}, NULL, &a));
    TRY(tc_stream_create(-1, 0, &side));
    TRY(tc_event_create(TC_EVENT_FLAG_DEFAULT, &ev));
    TRY(tc_stream_wait_stream(side, NULL)); /* a is ready for the side stream */
    for (int i = 0; i < 1000; i++)
        iteration(a, side, ev);
    TRY(tc_synchronize(-1));
    double *t = malloc(sizeof(double) * (size_t)blocks);
    for (int b = 0; b < blocks; b++) {
        double t0 = bench_now_ns();
        for (int i = 0; i < iters; i++)
            iteration(a, side, ev);
        t[b] = (bench_now_ns() - t0) / 1e3 / iters;
        TRY(tc_synchronize(-1));
    }
    double med = bench_median(t, blocks);
    free(t);
    tc_tensor_release(a);
    TRY(tc_event_destroy(ev));
    TRY(tc_stream_destroy(side));
    return med;
}

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 20000;
    int blocks = argc > 2 ? atoi(argv[2]) : 7;
    if (iters < 1 || blocks < 1) {
        fprintf(stderr, "usage: bench_sanitizer [iterations per block] [blocks]\n");
        return 2;
    }
    if (!tc_is_available()) {
        printf("skipped: no GPU: %s\n", tc_last_error());
        return 0;
    }
    if (tc_sanitizer_get_mode() != TC_SANITIZER_MODE_OFF) {
        fprintf(stderr, "run without TCUDA_SANITIZER: this program turns it on itself\n");
        return 2;
    }
    double off = run(iters, blocks);
    TRY(tc_sanitizer_enable(TC_SANITIZER_MODE_REPORT));
    uint64_t before = tc_sanitizer_report_count();
    double on = run(iters, blocks);
    uint64_t reports = tc_sanitizer_report_count() - before;
    TRY(tc_sanitizer_enable(TC_SANITIZER_MODE_OFF));
    double installed = run(iters, blocks);
    printf("mode,us_per_iter,us_per_op,reports\n");
    printf("off,%.3f,%.3f,0\n", off, off / 3);
    printf("on,%.3f,%.3f,%llu\n", on, on / 3, (unsigned long long)reports);
    printf("off_installed,%.3f,%.3f,0\n", installed, installed / 3);
    return 0;
}
