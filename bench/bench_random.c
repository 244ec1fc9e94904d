/* Random fills on the GPU against the write floor: tcuda's uniform and normal
 * (float32, 2^28 elements by default; a few other dtypes as extra rows) next
 * to cudaMemsetAsync (the raw write floor) and a device-to-device cudaMemcpy.
 * Each row is the median of repeats timed with CUDA events on the current
 * stream. Prints a table, or CSV with --csv (bench/run.sh random joins it
 * with PyTorch's numbers). Usage: bench_random [--csv] [log2 n] [repeats] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "tcuda/tcuda.h"

#include <cuda_runtime_api.h>

static int csv;

typedef int (*op_fn)(void *ctx);

/* Median milliseconds of `reps` timed runs after 3 warm-ups; -1 on error. */
static float time_op(op_fn fn, void *ctx, int reps)
{
    for (int i = 0; i < 3; i++)
        if (fn(ctx))
            return -1;
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    double *ms = calloc((size_t)reps, sizeof(double));
    float med = -1;
    int i = 0;
    for (; i < reps; i++) {
        cudaEventRecord(a, 0);
        if (fn(ctx))
            break;
        cudaEventRecord(b, 0);
        cudaEventSynchronize(b);
        float t;
        cudaEventElapsedTime(&t, a, b);
        ms[i] = t;
    }
    if (i == reps)
        med = (float)bench_median(ms, reps);
    free(ms);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return med;
}

typedef struct ctx {
    tc_generator *gen;
    void *buf, *buf2;
    size_t n;
    tc_dtype dtype;
} ctx;

static int report(tc_status st)
{
    if (st != TC_OK)
        fprintf(stderr, "bench_random: %s: %s\n", tc_status_string(st), tc_last_error());
    return st != TC_OK;
}
static int op_uniform(void *p)
{
    ctx *c = p;
    return report(tc_generator_uniform(c->gen, c->buf, c->n, c->dtype, 0.0, 1.0));
}
static int op_normal(void *p)
{
    ctx *c = p;
    return report(tc_generator_normal(c->gen, c->buf, c->n, c->dtype, 0.0, 1.0));
}
static int op_memset(void *p)
{
    ctx *c = p;
    return cudaMemsetAsync(c->buf, 0, c->n * tc_dtype_size(c->dtype), 0) != cudaSuccess;
}
static int op_copy(void *p)
{
    ctx *c = p; /* half the buffer to the other half: n/2 elements written */
    size_t bytes = c->n / 2 * tc_dtype_size(c->dtype);
    return cudaMemcpyAsync(c->buf2, c->buf, bytes, cudaMemcpyDeviceToDevice, 0) != cudaSuccess;
}

static void row(const char *name, op_fn fn, ctx *c, size_t written_elems, int reps)
{
    float ms = time_op(fn, c, reps);
    if (ms < 0) {
        printf(csv ? "%s,error,,\n" : "%-26s error\n", name);
        return;
    }
    double bytes = (double)written_elems * (double)tc_dtype_size(c->dtype);
    double gbs = bytes / (ms * 1e-3) / 1e9, gsps = (double)written_elems / (ms * 1e-3) / 1e9;
    if (csv)
        printf("%s,%.4f,%.1f,%.1f\n", name, ms, gbs, gsps);
    else
        printf("%-26s %10.3f %12.1f %14.1f\n", name, ms, gbs, gsps);
}

int main(int argc, char **argv)
{
    int arg = 1;
    if (argc > arg && strcmp(argv[arg], "--csv") == 0)
        csv = 1, arg++;
    int lg = argc > arg ? atoi(argv[arg]) : 28;
    int reps = argc > arg + 1 ? atoi(argv[arg + 1]) : 21;
    if (lg < 10 || lg > 31 || reps < 1) {
        fprintf(stderr, "usage: bench_random [--csv] [log2 n: 10..31] [repeats >= 1]\n");
        return 2;
    }
    if (!tc_is_available()) {
        printf("bench_random: skipped: %s\n", tc_last_error());
        return 0;
    }
    size_t n = (size_t)1 << lg;
    ctx c = {.n = n, .dtype = TC_FLOAT32};
    if (cudaMalloc(&c.buf, n * 8) != cudaSuccess) {
        fprintf(stderr, "bench_random: cudaMalloc of %zu bytes failed\n", n * 8);
        return 1;
    }
    c.buf2 = (char *)c.buf + n * 4;
    if (report(tc_generator_create((tc_device){TC_CUDA, -1}, 42, &c.gen)))
        return 1;
    if (csv)
        printf("op,ms,GB/s written,Gsamples/s\n");
    else
        printf("tcuda random fills, n = 2^%d, median of %d on %s\n%-26s %10s %12s %14s\n", lg, reps,
               bench_device_name(-1), "op", "ms", "GB/s written", "Gsamples/s");
    row("memset f32 (write floor)", op_memset, &c, n, reps);
    row("memcpy d2d f32 (n/2)", op_copy, &c, n / 2, reps);
    row("uniform f32", op_uniform, &c, n, reps);
    row("normal f32", op_normal, &c, n, reps);
    c.dtype = TC_FLOAT16;
    row("uniform f16", op_uniform, &c, n, reps);
    c.dtype = TC_BFLOAT16;
    row("normal bf16", op_normal, &c, n, reps);
    c.dtype = TC_FLOAT64;
    row("uniform f64", op_uniform, &c, n, reps);
    row("normal f64", op_normal, &c, n, reps);
    tc_generator_destroy(c.gen);
    cudaFree(c.buf);
    return 0;
}
