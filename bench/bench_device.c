/* Host cost of tcuda's hottest bookkeeping calls beside the bare CUDA calls
 * they wrap: device guard enter/exit, current-stream lookup, event record,
 * stream query. Prints one table (median of 7 runs, ns per call). */
#include <stdio.h>
#include <stdlib.h>
#include "bench_util.h"

#include "tcuda/tcuda.h"

#include <cuda_runtime_api.h>

enum { ITERS = 2000000, RUNS = 7 };

static volatile void *sink;
static tc_stream *stream;
static tc_event *event;
static cudaEvent_t raw_event;
static cudaStream_t raw_stream;

static void guard_loop(int n)
{
    for (int i = 0; i < n; i++) {
        tc_device_guard g = tc_device_guard_enter(0);
        tc_device_guard_exit(&g);
    }
}
static void bare_device_loop(int n)
{
    for (int i = 0; i < n; i++) {
        int d;
        cudaGetDevice(&d);
        if (d != 0)
            cudaSetDevice(0);
    }
}
static void current_stream_loop(int n)
{
    for (int i = 0; i < n; i++) {
        tc_stream *s;
        tc_current_stream(-1, &s);
        sink = s;
    }
}
static void record_loop(int n)
{
    for (int i = 0; i < n; i++)
        tc_event_record(event, stream);
}
static void bare_record_loop(int n)
{
    for (int i = 0; i < n; i++)
        cudaEventRecord(raw_event, raw_stream);
}
static void query_loop(int n)
{
    for (int i = 0; i < n; i++)
        sink = (void *)(size_t)tc_stream_query(stream);
}
static void bare_query_loop(int n)
{
    for (int i = 0; i < n; i++)
        sink = (void *)(size_t)cudaStreamQuery(raw_stream);
}

static double measure(void (*loop)(int), int iters)
{
    double t[RUNS];
    loop(iters / 10);
    for (int r = 0; r < RUNS; r++) {
        double t0 = bench_now_ns();
        loop(iters);
        t[r] = (bench_now_ns() - t0) / iters;
        cudaStreamSynchronize(raw_stream);
    }
    return bench_median(t, RUNS);
}

int main(void)
{
    if (!tc_is_available()) {
        printf("bench_device: %s\n", tc_last_error());
        return 0;
    }
    if (tc_stream_create(0, 0, &stream) != TC_OK || tc_event_create(0, &event) != TC_OK)
        return 1;
    raw_stream = (cudaStream_t)tc_stream_cuda_handle(stream);
    cudaEventCreateWithFlags(&raw_event, cudaEventDisableTiming);
    double guard = measure(guard_loop, ITERS), bare_dev = measure(bare_device_loop, ITERS);
    double cur = measure(current_stream_loop, ITERS);
    double rec = measure(record_loop, ITERS / 4), bare_rec = measure(bare_record_loop, ITERS / 4);
    double q = measure(query_loop, ITERS / 4), bare_q = measure(bare_query_loop, ITERS / 4);
    printf("| call | tcuda ns | bare CUDA ns | ratio |\n|---|---|---|---|\n");
    printf("| device guard enter+exit | %.1f | %.1f (cudaGetDevice) | %.2f |\n", guard, bare_dev,
           guard / bare_dev);
    printf("| tc_current_stream | %.1f | - | - |\n", cur);
    printf("| tc_event_record | %.1f | %.1f (cudaEventRecord) | %.2f |\n", rec, bare_rec,
           rec / bare_rec);
    printf("| tc_stream_query | %.1f | %.1f (cudaStreamQuery) | %.2f |\n", q, bare_q, q / bare_q);
    return 0;
}
