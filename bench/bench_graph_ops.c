/* bench_graph_ops: what each operation of examples/graph_mlp's training step
 * costs inside a replayed graph.
 *
 * Each op of the step (the same shapes: batch 64, 128-256-16) is captured 50
 * times in a row in one graph, in stream order, so each copy waits for the
 * one before; a replay's wall-clock time over 50 is the op's share of a
 * step's longest path. Then what a replay costs apart from its kernels: the
 * host's time in tc_graph_replay, and the replay of a graph of one small
 * op (its time per replay is the GPU's cost of starting and finishing a
 * graph). Last the whole step, replayed alone, without the loss copy the
 * example times with it. Diagnosis for the MLP rows of bench/run.sh graph, not a
 * target. */
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"
#include "tcuda/tcuda.h"

enum { B = 64, DIN = 128, HID = 256, DOUT = 16, COPIES = 50, REPLAYS = 400 };

static const tc_device GPU = {TC_CUDA, 0};

typedef struct state {
    tc_tensor *x, *w1, *w2, *y, *h, *a, *p, *d, *dp, *da, *dh, *mask, *dw1, *dw2, *n1;
    tc_tensor *xt, *at, *w2t, *lr, *zero, *scale;
} state;

typedef tc_status (*op_fn)(state *s, tc_tensor **out);

static tc_status op_h(state *s, tc_tensor **o) { return tc_tensor_matmul(s->x, s->w1, o); }
static tc_status op_relu(state *s, tc_tensor **o) { return tc_tensor_relu(s->h, o); }
static tc_status op_p(state *s, tc_tensor **o) { return tc_tensor_matmul(s->a, s->w2, o); }
static tc_status op_d(state *s, tc_tensor **o) { return tc_tensor_sub(s->p, s->y, o); }
static tc_status op_sq(state *s, tc_tensor **o) { return tc_tensor_mul(s->d, s->d, o); }
static tc_status op_mean(state *s, tc_tensor **o)
{
    return tc_tensor_mean(s->d, TC_ALL_DIMS, false, o);
}
static tc_status op_dp(state *s, tc_tensor **o) { return tc_tensor_mul(s->d, s->scale, o); }
static tc_status op_dw2(state *s, tc_tensor **o) { return tc_tensor_matmul(s->at, s->dp, o); }
static tc_status op_da(state *s, tc_tensor **o) { return tc_tensor_matmul(s->dp, s->w2t, o); }
static tc_status op_gt(state *s, tc_tensor **o) { return tc_tensor_gt(s->h, s->zero, o); }
static tc_status op_where(state *s, tc_tensor **o)
{
    return tc_tensor_where(s->mask, s->da, s->zero, o);
}
static tc_status op_dw1(state *s, tc_tensor **o) { return tc_tensor_matmul(s->xt, s->dh, o); }
static tc_status op_u1(state *s, tc_tensor **o) { return tc_tensor_mul(s->dw1, s->lr, o); }
static tc_status op_n1(state *s, tc_tensor **o) { return tc_tensor_sub(s->w1, s->dw1, o); }
static tc_status op_copy(state *s, tc_tensor **o)
{
    *o = NULL;
    return tc_tensor_copy_(s->n1, s->w1, false);
}

static const struct {
    const char *name;
    op_fn fn;
} OPS[] = {
    {"h = x @ w1 (64x128x256)", op_h},
    {"relu(h)", op_relu},
    {"p = a @ w2 (64x256x16)", op_p},
    {"d = p - y", op_d},
    {"d * d", op_sq},
    {"mean(d)", op_mean},
    {"dp = d * scale", op_dp},
    {"dw2 = a^T @ dp (256x64x16)", op_dw2},
    {"da = dp @ w2^T (64x16x256)", op_da},
    {"h > 0", op_gt},
    {"where(mask, da, 0)", op_where},
    {"dw1 = x^T @ dh (128x64x256)", op_dw1},
    {"dw1 * lr", op_u1},
    {"w1 - u1", op_n1},
    {"copy_ w1 (128x256)", op_copy},
};

static tc_tensor *rnd(int64_t r, int64_t c)
{
    tc_tensor *t;
    TRY(tc_tensor_rand(2, (int64_t[]){r, c}, TC_FLOAT32, GPU, NULL, &t));
    return t;
}

static tc_tensor *scalar(double v)
{
    tc_tensor *t;
    TRY(tc_tensor_full(0, NULL, v, TC_FLOAT32, GPU, &t));
    return t;
}

/* Microseconds per replay of g, wall clock over REPLAYS with one sync. */
static double replay_us(tc_graph *g)
{
    for (int i = 0; i < 20; i++)
        TRY(tc_graph_replay(g));
    TRY(tc_synchronize(-1));
    double t0 = bench_now_ns();
    for (int i = 0; i < REPLAYS; i++)
        TRY(tc_graph_replay(g));
    TRY(tc_synchronize(-1));
    return (bench_now_ns() - t0) * 1e-3 / REPLAYS;
}

/* Microseconds of host time per tc_graph_replay call of g, over 32 calls
 * queued behind nothing (the GPU is idle at the start). */
static double host_us(tc_graph *g)
{
    TRY(tc_synchronize(-1));
    double t0 = bench_now_ns();
    for (int i = 0; i < 32; i++)
        TRY(tc_graph_replay(g));
    double us = (bench_now_ns() - t0) * 1e-3 / 32;
    TRY(tc_synchronize(-1));
    return us;
}

/* A graph of `copies` calls of fn, in `order`. */
static tc_graph *capture(state *s, op_fn fn, int copies, tc_graph_order order)
{
    tc_graph *g;
    TRY(tc_graph_create(&g));
    TRY(tc_graph_set_order(g, order));
    tc_graph_pool_id none = {0};
    tc_graph_capture_guard gd = tc_graph_capture_guard_enter(g, none, NULL, TC_CAPTURE_MODE_GLOBAL);
    TRY(gd.status);
    for (int i = 0; i < copies; i++) {
        tc_tensor *o = NULL;
        TRY(fn(s, &o));
        if (o)
            tc_tensor_release(o);
    }
    TRY(tc_graph_capture_guard_exit(&gd));
    return g;
}

/* The step of examples/graph_mlp (loss and both updates), as one op. */
static tc_status whole_step(state *s, tc_tensor **out)
{
    tc_tensor *t[20] = {0};
    int n = 0;
    tc_status st = TC_OK;
#define OP(call)                                                                                   \
    do {                                                                                           \
        if (st == TC_OK)                                                                           \
            st = (call);                                                                           \
        n++;                                                                                       \
    } while (0)
    OP(tc_tensor_matmul(s->x, s->w1, &t[0]));
    OP(tc_tensor_relu(t[0], &t[1]));
    OP(tc_tensor_matmul(t[1], s->w2, &t[2]));
    OP(tc_tensor_sub(t[2], s->y, &t[3]));
    OP(tc_tensor_mul(t[3], t[3], &t[4]));
    OP(tc_tensor_mean(t[4], TC_ALL_DIMS, false, &t[5]));
    OP(tc_tensor_mul(t[3], s->scale, &t[6]));
    OP(tc_tensor_transpose(t[1], 0, 1, &t[7]));
    OP(tc_tensor_matmul(t[7], t[6], &t[8]));
    OP(tc_tensor_matmul(t[6], s->w2t, &t[9]));
    OP(tc_tensor_gt(t[0], s->zero, &t[10]));
    OP(tc_tensor_where(t[10], t[9], s->zero, &t[11]));
    OP(tc_tensor_matmul(s->xt, t[11], &t[12]));
    OP(tc_tensor_mul(t[12], s->lr, &t[13]));
    OP(tc_tensor_sub(s->w1, t[13], &t[14]));
    OP(tc_tensor_mul(t[8], s->lr, &t[15]));
    OP(tc_tensor_sub(s->w2, t[15], &t[16]));
    OP(tc_tensor_copy_(s->w1, t[14], false));
    OP(tc_tensor_copy_(s->w2, t[16], false));
#undef OP
    for (int i = 0; i < 20; i++)
        if (t[i])
            tc_tensor_release(t[i]);
    *out = NULL;
    return st;
}

int main(void)
{
    if (!tc_is_available()) {
        printf("bench_graph_ops: no GPU (%s)\n", tc_last_error());
        return 0;
    }
    state s = {0};
    s.x = rnd(B, DIN), s.w1 = rnd(DIN, HID), s.w2 = rnd(HID, DOUT), s.y = rnd(B, DOUT);
    s.h = rnd(B, HID), s.a = rnd(B, HID), s.p = rnd(B, DOUT), s.d = rnd(B, DOUT);
    s.dp = rnd(B, DOUT), s.da = rnd(B, HID), s.dh = rnd(B, HID), s.dw1 = rnd(DIN, HID);
    s.dw2 = rnd(HID, DOUT), s.n1 = rnd(DIN, HID);
    TRY(tc_tensor_gt(s.h, s.h, &s.mask));
    TRY(tc_tensor_transpose(s.x, 0, 1, &s.xt));
    TRY(tc_tensor_transpose(s.a, 0, 1, &s.at));
    TRY(tc_tensor_transpose(s.w2, 0, 1, &s.w2t));
    s.lr = scalar(0.05), s.zero = scalar(0), s.scale = scalar(0.002);
    TRY(tc_synchronize(-1));

    printf("bench_graph_ops on %s: each op %d times in a row in one graph (stream order)\n",
           bench_device_name(0), COPIES);
    printf("%-32s %10s\n", "op", "us/op");
    double sum = 0;
    for (size_t i = 0; i < sizeof OPS / sizeof OPS[0]; i++) {
        tc_graph *g = capture(&s, OPS[i].fn, COPIES, TC_GRAPH_ORDER_STREAM);
        double us = replay_us(g) / COPIES;
        sum += us;
        printf("%-32s %10.3f\n", OPS[i].name, us);
        TRY(tc_graph_destroy(g));
    }
    printf("%-32s %10.3f\n", "sum of the ops above", sum);
    tc_graph *one = capture(&s, op_d, 1, TC_GRAPH_ORDER_STREAM);
    printf("%-32s %10.3f\n", "graph of one op (d = p - y)", replay_us(one));
    printf("%-32s %10.3f  (host time of tc_graph_replay)\n", "  its host time", host_us(one));
    TRY(tc_graph_destroy(one));
    const char *names[2] = {"whole step, stream order", "whole step, data order"};
    tc_graph_order orders[2] = {TC_GRAPH_ORDER_STREAM, TC_GRAPH_ORDER_DATA};
    for (int k = 0; k < 2; k++) {
        tc_graph *g = capture(&s, whole_step, 1, orders[k]);
        printf("%-32s %10.3f\n", names[k], replay_us(g));
        printf("%-32s %10.3f  (host time of tc_graph_replay)\n", "  its host time", host_us(g));
        TRY(tc_graph_destroy(g));
    }
    tc_tensor *all[] = {s.x,    s.w1,  s.w2,  s.y,  s.h,  s.a,  s.p,   s.d,  s.dp,   s.da,   s.dh,
                        s.mask, s.dw1, s.dw2, s.n1, s.xt, s.at, s.w2t, s.lr, s.zero, s.scale};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tc_tensor_release(all[i]);
    return 0;
}
