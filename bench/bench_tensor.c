/* bench_tensor: tensor operations on the GPU against the raw CUDA floor.
 *
 * Rows: fp32 add over 2^28 elements, sum of 2^28 fp32, a [8192, 768] fp16
 * summed over its rows (linear's bias gradient), a comparison and
 * where (with a tensor and with a 0-d other), device-to-device copy,
 * host-to-device copy from pinned memory, matmul 8192^3 in bf16, fp32
 * (no TF32) and fp32 with TF32 allowed (backends.h), and the host cost of an add on 16 elements against a bare
 * kernel launch. GPU times come from events around many iterations queued
 * back to back; host costs from the wall clock around batches of calls too
 * short to fill the launch queue.
 * Prints one line per row: name, tcuda, floor (where there is one), unit. */
#include <stdio.h>
#include <stdlib.h>
#include "bench_util.h"

#include "tcuda/tcuda.h"

#include <cuda_runtime_api.h>

#include "tensor/cuda/kernels/kernels.h"

static const tc_device GPU = {TC_CUDA, -1};

static double now_s(void) { return bench_now_ns() * 1e-9; }

typedef void (*op_fn)(void *ctx);

/* Seconds per call of fn, from events around `iters` calls after `warm` ones. */
static double gpu_time(op_fn fn, void *ctx, int warm, int iters)
{
    for (int i = 0; i < warm; i++)
        fn(ctx);
    tc_event *a, *b;
    TRY(tc_event_create(TC_EVENT_FLAG_TIMING, &a));
    TRY(tc_event_create(TC_EVENT_FLAG_TIMING, &b));
    TRY(tc_event_record(a, NULL));
    for (int i = 0; i < iters; i++)
        fn(ctx);
    TRY(tc_event_record(b, NULL));
    TRY(tc_event_synchronize(b));
    float ms;
    TRY(tc_event_elapsed_time(a, b, &ms));
    tc_event_destroy(a);
    tc_event_destroy(b);
    return ms * 1e-3 / iters;
}

typedef struct ctx {
    tc_tensor *a, *b, *c, *h;
    void *ra, *rb, *rh;
    tc_tensor *mask, *zero; /* for where */
    tc_tensor *cols;        /* for the sum over rows */
    size_t bytes;
} ctx;

static void op_add(void *p)
{
    ctx *c = p;
    tc_tensor *o;
    TRY(tc_tensor_add(c->a, c->b, &o));
    tc_tensor_release(o);
}
static void op_sum(void *p)
{
    ctx *c = p;
    tc_tensor *o;
    TRY(tc_tensor_sum(c->a, TC_ALL_DIMS, false, &o));
    tc_tensor_release(o);
}
/* linear's bias gradient: a [8192, 768] float16 tensor summed over its rows */
static void op_sum_dim0(void *p)
{
    ctx *c = p;
    tc_tensor *o;
    TRY(tc_tensor_sum(c->cols, 0, false, &o));
    tc_tensor_release(o);
}
static void op_gt(void *p)
{
    ctx *c = p;
    tc_tensor *o;
    TRY(tc_tensor_gt(c->a, c->b, &o));
    tc_tensor_release(o);
}
static void op_where(void *p)
{
    ctx *c = p;
    tc_tensor *o;
    TRY(tc_tensor_where(c->mask, c->a, c->b, &o));
    tc_tensor_release(o);
}
static void op_where_scalar(void *p)
{
    ctx *c = p;
    tc_tensor *o;
    TRY(tc_tensor_where(c->mask, c->a, c->zero, &o));
    tc_tensor_release(o);
}
static void op_copy(void *p)
{
    ctx *c = p;
    TRY(tc_tensor_copy_(c->c, c->a, false));
}
static void raw_copy(void *p)
{
    ctx *c = p;
    cudaMemcpyAsync(c->rb, c->ra, c->bytes, cudaMemcpyDeviceToDevice,
                    (cudaStream_t)bench_cuda_stream());
}
static void op_h2d(void *p)
{
    ctx *c = p;
    TRY(tc_tensor_copy_(c->c, c->h, true));
}
static void raw_h2d(void *p)
{
    ctx *c = p;
    cudaMemcpyAsync(c->rb, c->rh, c->bytes, cudaMemcpyHostToDevice,
                    (cudaStream_t)bench_cuda_stream());
}
static void op_matmul(void *p)
{
    ctx *c = p;
    tc_tensor *o;
    TRY(tc_tensor_matmul(c->a, c->b, &o));
    tc_tensor_release(o);
}

static void bare_launch(void *p)
{
    ctx *c = p;
    tc__fill f = {1, 0, 1};
    tc__k_fill((cudaStream_t)bench_cuda_stream(), 132, TC_FLOAT32, c->rb, 16, f);
}

/* Host seconds per call of fn: 100 batches of 200 calls, only the calls timed. */
static double host_cost(op_fn fn, void *arg)
{
    double total = 0;
    for (int b = 0; b < 100; b++) {
        TRY(tc_synchronize(-1));
        double t0 = now_s();
        for (int i = 0; i < 200; i++)
            fn(arg);
        total += now_s() - t0;
    }
    TRY(tc_synchronize(-1));
    return total / (100 * 200);
}

static void row(const char *name, double v, double floor, const char *unit)
{
    if (floor > 0)
        printf("%-28s %12.1f %12.1f  %s\n", name, v, floor, unit);
    else
        printf("%-28s %12.1f %12s  %s\n", name, v, "-", unit);
}

int main(void)
{
    if (!tc_is_available()) {
        printf("bench_tensor: no GPU (%s)\n", tc_last_error());
        return 0;
    }
    int64_t n = (int64_t)1 << 28;
    size_t bytes = (size_t)n * 4;
    ctx c = {0};
    c.bytes = bytes;
    printf("%-28s %12s %12s  %s\n", "row", "tcuda", "floor", "unit");
    TRY(tc_tensor_full(1, &n, 1.5, TC_FLOAT32, GPU, &c.a));
    TRY(tc_tensor_full(1, &n, 2.5, TC_FLOAT32, GPU, &c.b));
    TRY(tc_tensor_empty(1, &n, TC_FLOAT32, GPU, &c.c));
    double t = gpu_time(op_add, &c, 3, 20);
    row("add fp32 2^28", 3.0 * bytes / t / 1e9, 0, "GB/s");
    t = gpu_time(op_sum, &c, 3, 20);
    row("sum fp32 2^28", 1.0 * bytes / t / 1e9, 0, "GB/s");
    int64_t csz[2] = {8192, 768};
    TRY(tc_tensor_full(2, csz, 0.5, TC_FLOAT16, GPU, &c.cols));
    t = gpu_time(op_sum_dim0, &c, 3, 20);
    row("sum dim 0 fp16 8192x768", 8192.0 * 768 * 2 / t / 1e9, 0, "GB/s");
    tc_tensor_release(c.cols);
    /* comparisons and where: bytes moved, a bool a byte */
    t = gpu_time(op_gt, &c, 3, 20);
    row("gt fp32 2^28", 2.25 * bytes / t / 1e9, 0, "GB/s");
    TRY(tc_tensor_lt(c.a, c.b, &c.mask));
    TRY(tc_tensor_full(0, NULL, 0.0, TC_FLOAT32, GPU, &c.zero));
    t = gpu_time(op_where, &c, 3, 20);
    row("where fp32 2^28", 3.25 * bytes / t / 1e9, 0, "GB/s");
    t = gpu_time(op_where_scalar, &c, 3, 20);
    row("where(m, x, 0-d) fp32 2^28", 2.25 * bytes / t / 1e9, 0, "GB/s");
    tc_tensor_release(c.mask);
    tc_tensor_release(c.zero);
    c.ra = tc_tensor_data_ptr(c.a);
    c.rb = tc_tensor_data_ptr(c.b);
    double tr = gpu_time(raw_copy, &c, 3, 20);
    t = gpu_time(op_copy, &c, 3, 20);
    row("copy d2d fp32 2^28", 2.0 * bytes / t / 1e9, 2.0 * bytes / tr / 1e9, "GB/s");
    tc_tensor *hc;
    TRY(tc_tensor_full(1, &n, 3.5, TC_FLOAT32, (tc_device){TC_CPU, -1}, &hc));
    TRY(tc_tensor_pin_memory(hc, &c.h));
    tc_tensor_release(hc);
    c.rh = tc_tensor_data_ptr(c.h);
    tr = gpu_time(raw_h2d, &c, 2, 10);
    t = gpu_time(op_h2d, &c, 2, 10);
    row("h2d pinned fp32 2^28", 1.0 * bytes / t / 1e9, 1.0 * bytes / tr / 1e9, "GB/s");
    tc_tensor_release(c.a), tc_tensor_release(c.b), tc_tensor_release(c.c);
    tc_tensor_release(c.h);

    tc_dtype mdt[3] = {TC_BFLOAT16, TC_FLOAT32, TC_FLOAT32};
    const char *mname[3] = {"matmul 8192^3 bf16", "matmul 8192^3 fp32", "matmul 8192^3 fp32 tf32"};
    for (int i = 0; i < 3; i++) {
        int64_t sz[2] = {8192, 8192};
        TRY(tc_backends_cuda_matmul_set_allow_tf32(i == 2)); /* the last row only */
        TRY(tc_tensor_full(2, sz, 0.01, mdt[i], GPU, &c.a));
        TRY(tc_tensor_full(2, sz, 0.02, mdt[i], GPU, &c.b));
        t = gpu_time(op_matmul, &c, 3, 10);
        row(mname[i], 2.0 * 8192.0 * 8192.0 * 8192.0 / t / 1e12, 0, "TFLOP/s");
        tc_tensor_release(c.a), tc_tensor_release(c.b);
    }
    TRY(tc_backends_cuda_matmul_set_allow_tf32(false));

    /* host cost: a 16-element add against a bare launch of a tiny kernel,
     * timed over the calls only, in batches of 200 (too few to fill the
     * launch queue, so no call waits for the GPU) with a sync between them */
    int64_t sixteen = 16;
    TRY(tc_tensor_full(1, &sixteen, 1, TC_FLOAT32, GPU, &c.a));
    TRY(tc_tensor_full(1, &sixteen, 2, TC_FLOAT32, GPU, &c.b));
    c.rb = tc_tensor_data_ptr(c.b);
    for (int i = 0; i < 1000; i++)
        bare_launch(&c), op_add(&c);
    TRY(tc_synchronize(-1));
    double bare = host_cost(bare_launch, &c), tiny = host_cost(op_add, &c);
    row("host us: add of 16 elements", tiny * 1e6, bare * 1e6, "us (floor: bare launch)");
    printf("ratio tiny add / bare launch: %.2f\n", tiny / bare);
    tc_tensor_release(c.a), tc_tensor_release(c.b);
    return 0;
}
