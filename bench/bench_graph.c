/* bench_graph: what a CUDA graph saves on a chain of small kernels.
 *
 * A chain of 100 element-wise adds on 16 float32 elements (x = x + y, each a
 * new tensor, as `x = x + y` in PyTorch), timed three ways, as wall-clock
 * time per op over many chains with one synchronize at the end:
 *   eager     tc_tensor_add 100 times per chain;
 *   graph     the chain captured once (tc_graph) and replayed;
 *   raw graph the floor: the same 100 kernels (tcuda's binary kernel,
 *             launched directly on two ping-pong buffers) captured with
 *             cudaStreamBeginCapture and replayed with cudaGraphLaunch;
 *   least kernel  the same raw graph of the least add kernel (graph_floor.cu):
 *             what a node costs apart from the kernel it runs.
 * Prints "name value unit" rows (bench/run.sh graph puts PyTorch beside them) and
 * the ratio graph / raw graph (target: <= 1.05). The MLP training step rows
 * come from examples/graph_mlp, which bench/run.sh graph runs. */
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"
#include "tcuda/tcuda.h"

#include <cuda_runtime_api.h>

#include "tensor/cuda/kernels/kernels.h"

#define CUDA_TRY(call)                                                                             \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e_));                     \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

enum { OPS = 100, EAGER_CHAINS = 300, GRAPH_CHAINS = 2000 };

static const tc_device GPU = {TC_CUDA, 0};

static void row(const char *name, double v, const char *unit)
{
    printf("%-28s %12.3f  %s\n", name, v, unit);
}

/* One chain: *x = x + y, OPS times (x replaced, the old one released). */
static void chain(tc_tensor **x, tc_tensor *y)
{
    for (int i = 0; i < OPS; i++) {
        tc_tensor *n;
        TRY(tc_tensor_add(*x, y, &n));
        tc_tensor_release(*x);
        *x = n;
    }
}

/* Wall-clock microseconds per op of `chains` calls of fn, then a sync. */
static double per_op_us(void (*fn)(void *), void *ctx, int chains)
{
    for (int i = 0; i < 20; i++)
        fn(ctx);
    TRY(tc_synchronize(-1));
    double t0 = bench_now_ns();
    for (int i = 0; i < chains; i++)
        fn(ctx);
    TRY(tc_synchronize(-1));
    return (bench_now_ns() - t0) * 1e-3 / ((double)chains * OPS);
}

typedef struct eager_ctx {
    tc_tensor *x, *y;
} eager_ctx;

static void eager(void *p)
{
    eager_ctx *c = p;
    chain(&c->x, c->y);
}

static void replay(void *p) { TRY(tc_graph_replay(p)); }

static void raw_replay(void *p) { CUDA_TRY(cudaGraphLaunch(p, NULL)); }

void bench_graph_floor_add(cudaStream_t s, float *o, const float *a, const float *b);

/* The floor: the same kernel as tc_tensor_add (or, with `least`, the least
 * add kernel), 100 launches captured raw. */
static cudaGraphExec_t raw_graph(float *a, float *b, const float *y, bool least)
{
    cudaStream_t s;
    CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    int sms = 0;
    CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    CUDA_TRY(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < OPS; i++) {
        if (least) {
            bench_graph_floor_add(s, i % 2 ? a : b, i % 2 ? b : a, y);
            continue;
        }
        tc__iter it = {.ndim = 1, .nops = 3, .contiguous = true, .numel = 16};
        it.sizes[0] = 16;
        for (int k = 0; k < 3; k++)
            it.strides[k][0] = 1;
        it.data[0] = i % 2 ? a : b;
        it.data[1] = i % 2 ? b : a;
        it.data[2] = (void *)y;
        tc__k_binary(s, sms, TC__OP_ADD, TC_FLOAT32, &it);
    }
    cudaGraph_t g;
    CUDA_TRY(cudaStreamEndCapture(s, &g));
    cudaGraphExec_t exec;
    CUDA_TRY(cudaGraphInstantiate(&exec, g, 0));
    CUDA_TRY(cudaGraphUpload(exec, s));
    CUDA_TRY(cudaStreamSynchronize(s));
    CUDA_TRY(cudaGraphDestroy(g));
    CUDA_TRY(cudaStreamDestroy(s));
    return exec;
}

int main(void)
{
    if (!tc_is_available()) {
        printf("bench_graph: no GPU (%s)\n", tc_last_error());
        return 0;
    }
    printf("bench_graph on %s: a chain of %d adds of 16 float32 elements\n", bench_device_name(0),
           OPS);
    eager_ctx c;
    TRY(tc_tensor_ones(1, (int64_t[]){16}, TC_FLOAT32, GPU, &c.x));
    TRY(tc_tensor_full(1, (int64_t[]){16}, 0.5, TC_FLOAT32, GPU, &c.y));
    double eager_us = per_op_us(eager, &c, EAGER_CHAINS);

    tc_graph *g;
    TRY(tc_graph_create(&g));
    tc_graph_pool_id none = {0};
    tc_graph_capture_guard gd = tc_graph_capture_guard_enter(g, none, NULL, TC_CAPTURE_MODE_GLOBAL);
    TRY(gd.status);
    chain(&c.x, c.y);
    TRY(tc_graph_capture_guard_exit(&gd));
    double graph_us = per_op_us(replay, g, GRAPH_CHAINS);

    void *a, *b;
    TRY(tc_caching_allocator_alloc(64, 0, NULL, &a));
    TRY(tc_caching_allocator_alloc(64, 0, NULL, &b));
    CUDA_TRY(cudaMemset(a, 0, 64));
    cudaGraphExec_t raw = raw_graph(a, b, tc_tensor_data_ptr(c.y), false);
    double raw_us = per_op_us(raw_replay, raw, GRAPH_CHAINS);
    cudaGraphExec_t least = raw_graph(a, b, tc_tensor_data_ptr(c.y), true);
    double least_us = per_op_us(raw_replay, least, GRAPH_CHAINS);

    row("add chain eager, us/op", eager_us, "us per op (wall clock)");
    row("add chain graph, us/op", graph_us, "us per op (replay)");
    row("add chain raw graph, us/op", raw_us, "us per op (raw CUDA graph, the floor)");
    row("least kernel raw graph, us/op", least_us, "us per op (raw graph of a 16-float add)");
    printf("graph / raw graph: %.3f (target <= 1.05); eager / graph: %.1fx\n", graph_us / raw_us,
           eager_us / graph_us);

    CUDA_TRY(cudaGraphExecDestroy(raw));
    CUDA_TRY(cudaGraphExecDestroy(least));
    TRY(tc_caching_allocator_delete(a));
    TRY(tc_caching_allocator_delete(b));
    TRY(tc_graph_destroy(g));
    tc_tensor_release(c.x);
    tc_tensor_release(c.y);
    return 0;
}
