/* A two-layer MLP trained by hand (matmul, relu, backward, SGD), eagerly and
 * as a replayed CUDA graph.
 *
 * One training step is ~20 small kernels, so on a GPU its time is mostly
 * launch overhead: capturing the step once (tc_make_graphed_callable) and
 * replaying it removes that. The graph reads and writes the same tensors on
 * every replay ("static" tensors): the data, the weights (updated in place
 * with tc_tensor_copy_), and the loss tensor the captured step made. All
 * runs start from the same weights and must give the same losses.
 *
 * The step is captured twice: in stream order (as PyTorch captures, one
 * chain of kernels) and in data order (TC_GRAPH_ORDER_DATA), where the
 * independent parts of the step (the loss beside the backward pass, dw2
 * beside da, the two weight updates) become branches that run side by side.
 *
 * Without a GPU the step runs eagerly on the CPU (graphs need CUDA). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <tcuda/tcuda.h>

enum { B = 64, DIN = 128, HID = 256, DOUT = 16 };

typedef struct mlp {
    tc_tensor *x, *y, *w1, *w2;   /* static: data and weights */
    tc_tensor *lr, *zero, *scale; /* 0-d constants */
    tc_tensor *loss;              /* made by each step */
} mlp;

static void die(const char *what, tc_status st)
{
    fprintf(stderr, "graph_mlp: %s failed: %s: %s\n", what, tc_status_string(st), tc_last_error());
    exit(1);
}
#define TRY(call)                                                                                  \
    do {                                                                                           \
        tc_status st_ = (call);                                                                    \
        if (st_ != TC_OK)                                                                          \
            die(#call, st_);                                                                       \
    } while (0)

/* Inside step: runs an op, keeping its result for release at the end. */
#define OP(out, call)                                                                              \
    do {                                                                                           \
        if (st == TC_OK && (st = (call)) == TC_OK)                                                 \
            tmp[n++] = (out);                                                                      \
    } while (0)

/* One SGD step: forward, mean squared error, backward by hand, update. */
static tc_status step(void *ctx)
{
    mlp *m = ctx;
    tc_tensor *tmp[24];
    int n = 0;
    tc_status st = TC_OK;
    tc_tensor *h, *a, *p, *d, *d2, *loss = NULL, *dp, *at, *dw2, *w2t, *da, *mask, *dh, *xt, *dw1,
                                   *u1, *n1, *u2, *n2;
    /* a range for profilers (scripts/profile.sh mlp) */
    tc_nvtx_range_push("mlp_step", NULL);
    OP(h, tc_tensor_matmul(m->x, m->w1, &h)); /* forward */
    OP(a, tc_tensor_relu(h, &a));
    OP(p, tc_tensor_matmul(a, m->w2, &p));
    OP(d, tc_tensor_sub(p, m->y, &d));
    OP(d2, tc_tensor_mul(d, d, &d2));
    if (st == TC_OK)
        st = tc_tensor_mean(d2, TC_ALL_DIMS, false, &loss);
    OP(dp, tc_tensor_mul(d, m->scale, &dp)); /* d loss / d p = 2 (p - y) / (B DOUT) */
    OP(at, tc_tensor_transpose(a, 0, 1, &at));
    OP(dw2, tc_tensor_matmul(at, dp, &dw2));
    OP(w2t, tc_tensor_transpose(m->w2, 0, 1, &w2t));
    OP(da, tc_tensor_matmul(dp, w2t, &da));
    OP(mask, tc_tensor_gt(h, m->zero, &mask)); /* relu' */
    OP(dh, tc_tensor_where(mask, da, m->zero, &dh));
    OP(xt, tc_tensor_transpose(m->x, 0, 1, &xt));
    OP(dw1, tc_tensor_matmul(xt, dh, &dw1));
    OP(u1, tc_tensor_mul(dw1, m->lr, &u1)); /* SGD, in place */
    OP(n1, tc_tensor_sub(m->w1, u1, &n1));
    OP(u2, tc_tensor_mul(dw2, m->lr, &u2));
    OP(n2, tc_tensor_sub(m->w2, u2, &n2));
    if (st == TC_OK)
        st = tc_tensor_copy_(m->w1, n1, false);
    if (st == TC_OK)
        st = tc_tensor_copy_(m->w2, n2, false);
    for (int i = 0; i < n; i++)
        tc_tensor_release(tmp[i]);
    tc_nvtx_range_pop(NULL);
    if (st != TC_OK) {
        if (loss)
            tc_tensor_release(loss);
        return st;
    }
    if (m->loss)
        tc_tensor_release(m->loss);
    m->loss = loss;
    return TC_OK;
}

static uint64_t lcg = 0x2545f4914f6cdd1dull;
static float rnd(void) /* in [-1, 1) */
{
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((lcg >> 40) * (2.0 / (1 << 24)) - 1.0);
}

static tc_tensor *from_host(const float *v, int64_t rows, int64_t cols, tc_device dev)
{
    tc_tensor *t;
    TRY(tc_tensor_from_data(v, 2, (int64_t[]){rows, cols}, TC_FLOAT32, dev, &t));
    return t;
}

static tc_tensor *scalar(double v, tc_device dev)
{
    tc_tensor *t;
    TRY(tc_tensor_full(0, NULL, v, TC_FLOAT32, dev, &t));
    return t;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Sets the weights to the initial ones. */
static void reset_weights(mlp *m, tc_tensor *w1_0, tc_tensor *w2_0)
{
    TRY(tc_tensor_copy_(m->w1, w1_0, false));
    TRY(tc_tensor_copy_(m->w2, w2_0, false));
}

/* Copies m->loss into losses[i] (a device-side copy: no wait). */
static void record_loss(mlp *m, tc_tensor *losses, int i)
{
    tc_tensor *slot;
    TRY(tc_tensor_narrow(losses, 0, i, 1, &slot));
    tc_tensor *flat;
    TRY(tc_tensor_view(m->loss, 1, (int64_t[]){1}, &flat));
    TRY(tc_tensor_copy_(slot, flat, false));
    tc_tensor_release(flat);
    tc_tensor_release(slot);
}

/* Captures the step (3 warm-up steps on a side stream, then one captured
 * step) in `order`, restarts from the initial weights and replays it `steps`
 * times, the losses into `losses`; returns the seconds the replays took. */
static double graph_run(mlp *m, tc_graph_order order, int steps, tc_tensor *w1_0, tc_tensor *w2_0,
                        tc_tensor *losses)
{
    tc_graphed_callable *c;
    tc_graph_fn fn = step;
    void *ctx = m;
    TRY(tc_make_graphed_callables_ordered(&fn, &ctx, 1, 3, order, &c));
    reset_weights(m, w1_0, w2_0); /* the warm-up trained: start over */
    TRY(tc_synchronize(-1));
    double t0 = now_s();
    for (int i = 0; i < steps; i++) {
        TRY(tc_graphed_callable_call(c));
        record_loss(m, losses, i);
    }
    TRY(tc_synchronize(-1));
    double s = now_s() - t0;
    TRY(tc_graphed_callable_destroy(c));
    return s;
}

int main(void)
{
    bool gpu = tc_is_available();
    tc_device dev = gpu ? (tc_device){TC_CUDA, 0} : (tc_device){TC_CPU, -1};
    int steps = gpu ? 500 : 20;

    float *x = malloc(sizeof(float) * B * DIN), *y = malloc(sizeof(float) * B * DOUT);
    float *w1 = malloc(sizeof(float) * DIN * HID), *w2 = malloc(sizeof(float) * HID * DOUT);
    for (int i = 0; i < B * DIN; i++)
        x[i] = rnd();
    for (int i = 0; i < B; i++)
        for (int j = 0; j < DOUT; j++)
            y[i * DOUT + j] = x[i * DIN + j] * x[i * DIN + j + DOUT] -
                              0.5f * x[i * DIN + j + 2 * DOUT];
    for (int i = 0; i < DIN * HID; i++)
        w1[i] = rnd() * 0.08838835f; /* 1/sqrt(DIN): examples link no libm */
    for (int i = 0; i < HID * DOUT; i++)
        w2[i] = rnd() * 0.0625f; /* 1/sqrt(HID) */

    mlp m = {0};
    m.x = from_host(x, B, DIN, dev);
    m.y = from_host(y, B, DOUT, dev);
    m.w1 = from_host(w1, DIN, HID, dev);
    m.w2 = from_host(w2, HID, DOUT, dev);
    tc_tensor *w1_0 = from_host(w1, DIN, HID, dev), *w2_0 = from_host(w2, HID, DOUT, dev);
    m.lr = scalar(0.05, dev);
    m.zero = scalar(0.0, dev);
    m.scale = scalar(2.0 / (B * DOUT), dev);
    tc_tensor *eager_losses, *graph_losses;
    TRY(tc_tensor_zeros(1, (int64_t[]){steps}, TC_FLOAT32, dev, &eager_losses));
    TRY(tc_tensor_zeros(1, (int64_t[]){steps}, TC_FLOAT32, dev, &graph_losses));

    /* eager */
    TRY(step(&m)); /* warm-up (cuBLAS handle, allocator cache), then start over */
    reset_weights(&m, w1_0, w2_0);
    if (gpu)
        TRY(tc_synchronize(-1));
    double t0 = now_s();
    for (int i = 0; i < steps; i++) {
        TRY(step(&m));
        record_loss(&m, eager_losses, i);
    }
    if (gpu)
        TRY(tc_synchronize(-1));
    double eager_s = now_s() - t0;
    float *el = malloc(sizeof(float) * steps), *gl = malloc(sizeof(float) * steps);
    TRY(tc_tensor_to_host(eager_losses, TC_FLOAT32, el));
    printf("%s, %d steps of a %d-%d-%d MLP on a batch of %d\n", gpu ? "cuda:0" : "cpu", steps, DIN,
           HID, DOUT, B);
    printf("eager: loss %.6f -> %.6f, %.2f us per step\n", el[0], el[steps - 1],
           eager_s / steps * 1e6);

    int rc = 0;
    if (!gpu) {
        tc_graph *g;
        tc_status st = tc_graph_create(&g);
        printf("graphs need CUDA (tc_graph_create: %s)\n", tc_status_string(st));
    } else {
        const char *names[2] = {"graph", "graph, data order"};
        tc_graph_order orders[2] = {TC_GRAPH_ORDER_STREAM, TC_GRAPH_ORDER_DATA};
        for (int k = 0; k < 2; k++) {
            double graph_s = graph_run(&m, orders[k], steps, w1_0, w2_0, graph_losses);
            TRY(tc_tensor_to_host(graph_losses, TC_FLOAT32, gl));
            double worst = 0;
            for (int i = 0; i < steps; i++) {
                double d = (double)gl[i] - el[i],
                       r = (d < 0 ? -d : d) / (el[i] > 1e-12 ? el[i] : 1e-12);
                worst = r > worst ? r : worst;
            }
            printf("%s: loss %.6f -> %.6f, %.2f us per step\n", names[k], gl[0], gl[steps - 1],
                   graph_s / steps * 1e6);
            printf("losses %s (largest relative difference %.2g)\n",
                   worst <= 1e-4 ? "match" : "DIFFER", worst);
            printf("speedup of the %s over eager: %.2fx\n", names[k], eager_s / graph_s);
            if (!(worst <= 1e-4 && gl[steps - 1] < gl[0]))
                rc = 1;
        }
    }
    if (el[steps - 1] >= el[0]) {
        printf("the loss did not go down\n");
        rc = 1;
    }
    tc_tensor *all[] = {m.x,     m.y,    m.w1, m.w2, m.lr,         m.zero,
                        m.scale, m.loss, w1_0, w2_0, eager_losses, graph_losses};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tc_tensor_release(all[i]);
    free(x), free(y), free(w1), free(w2), free(el), free(gl);
    return rc;
}
