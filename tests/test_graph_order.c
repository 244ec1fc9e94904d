/* Graph captures ordered by data (TC_GRAPH_ORDER_DATA, include/tcuda/graph.h).
 *
 * Everywhere: tc_make_graphed_callables_ordered refuses NULL functions or
 * out, counts outside 1 to 1024 and negative warm-ups before anything else.
 * Without a GPU (or CUDA): tc_graph_set_order and
 * tc_make_graphed_callables_ordered check their arguments, then answer
 * TC_ERROR_NO_DEVICE; the test exits 77. On a GPU, each capture is checked
 * two ways: its replays against a double-precision reference computed on the
 * host from new inputs each time (large tensors, so that kernels a missing
 * edge let overlap would overlap long), and its shape through the DOT dump
 * (edges, and roots: nodes nothing leads to):
 * - independent ops: a chain in stream order, side by side in data order;
 * - every hazard: read after write, write after read (an in-place copy into
 *   a tensor read before), write after write, and a block freed during the
 *   capture and reused by a later op while its last reader may still run;
 * - work tcuda does not see into (a random fill) orders everything after it;
 * - GEMMs on independent branches (each with its own cuBLAS workspace) and
 *   the MLP training step of examples/graph_mlp beside its stream-order
 *   graph;
 * - tc_graph_update and graphed callables in data order, bad inputs;
 * - on compute capability 9.0 and later, edges between tcuda's kernels are
 *   programmatic (every replay above runs with them).
 * Run it under compute-sanitizer memcheck and racecheck too. */
#include <math.h>
#include <stdlib.h>

#include "graph_check.h"
#include "tc_test.h"

/* Arguments are checked before anything else, with or without a GPU. */
static void check_arguments(void)
{
    tc_graph_fn fns[2] = {nothing, NULL};
    tc_graphed_callable *c[2] = {(tc_graphed_callable *)0x1, NULL};
    const tc_graph_order data = TC_GRAPH_ORDER_DATA;
    CHECK_STATUS(tc_make_graphed_callables_ordered(NULL, NULL, 1, 3, data, c),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("tc_make_graphed_callables_ordered", "fns is NULL"));
    CHECK_STATUS(tc_make_graphed_callables_ordered(fns, NULL, 1, 3, data, NULL),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("tc_make_graphed_callables_ordered", "out is NULL"));
    CHECK_STATUS(tc_make_graphed_callables_ordered(fns, NULL, 2, 3, data, c),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("tc_make_graphed_callables_ordered", "fns[1] is NULL"));
    int counts[3] = {0, -1, 1 << 30}; /* none, negative, past the 1024 callables */
    for (int i = 0; i < 3; i++) {
        CHECK_STATUS(tc_make_graphed_callables_ordered(fns, NULL, counts[i], 3, data, c),
                     TC_ERROR_INVALID_ARGUMENT);
        CHECK(says("tc_make_graphed_callables_ordered", "give 1 to 1024 callables"));
    }
    CHECK_STATUS(tc_make_graphed_callables_ordered(fns, NULL, 1, -1, data, c),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("tc_make_graphed_callables_ordered", "warmup_iters is -1"));
    CHECK(c[0] == (tc_graphed_callable *)0x1); /* untouched on failure */
}

static void check_without_gpu(void)
{
    tc_graph *junk = tc_test_garbage(256);
    CHECK_STATUS(tc_graph_set_order(NULL, TC_GRAPH_ORDER_DATA), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("tc_graph_set_order", "tc_graph is NULL"));
    CHECK_STATUS(tc_graph_set_order(junk, TC_GRAPH_ORDER_DATA), TC_ERROR_INVALID_HANDLE);
    CHECK(says("tc_graph_set_order", "not a live tc_graph"));
    free(junk);
    tc_graph_fn fns[1] = {nothing};
    tc_graphed_callable *c = (tc_graphed_callable *)0x1;
    CHECK_STATUS(tc_make_graphed_callables_ordered(fns, NULL, 1, 3, TC_GRAPH_ORDER_DATA, &c),
                 TC_ERROR_NO_DEVICE);
    CHECK(says("tc_make_graphed_callables_ordered", "") && c == (tc_graphed_callable *)0x1);
    CHECK_STATUS(tc_make_graphed_callables_ordered(fns, NULL, 1, 3, (tc_graph_order)7, &c),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("tc_make_graphed_callables_ordered", "order 7"));
}

#if defined(TCUDA_HAVE_CUDA)
#include "graph/cuda/graph_pdl.h"

#define CUDA0 ((tc_device){TC_CUDA, 0})
#define CPU ((tc_device){TC_CPU, -1})

enum { BIG = 1 << 22 }; /* 16 MiB of float32: kernels of some microseconds */

/* ---- helpers -------------------------------------------------------------- */

/* A float32 tensor of n elements (or rows x cols when cols > 0) on the GPU
 * with the values of *host, made random here (caller frees). */
static tc_tensor *random_tensor(int64_t rows, int64_t cols, float **host)
{
    int64_t n = cols > 0 ? rows * cols : rows;
    float *v = malloc(sizeof(float) * (size_t)n);
    fill_random(v, n);
    tc_tensor *t = NULL;
    int64_t sizes[2] = {rows, cols};
    CHECK_OK(tc_tensor_from_data(v, cols > 0 ? 2 : 1, sizes, TC_FLOAT32, CUDA0, &t));
    *host = v;
    return t;
}

/* The largest difference between t and want[0..n) scaled by 1 + |want|. */
static double worst_rel(const tc_tensor *t, const double *want, int64_t n)
{
    double *v = tc_test_values(t), worst = 0;
    for (int64_t i = 0; i < n && v; i++)
        worst = fmax(worst, fabs(v[i] - want[i]) / (1 + fabs(want[i])));
    free(v);
    return v ? worst : INFINITY;
}

/* The shape of a captured graph from its DOT dump: nodes, edges, roots
 * (nodes no edge leads to) and depth (nodes on the longest path). */
typedef struct shape {
    int nodes, edges, roots, depth;
} shape;

enum { MAXN = 512, MAXE = 2048 };

static int node_index(char (*names)[64], int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return i;
    return -1;
}

static shape shape_of(const tc_graph *g, const char *what)
{
    shape s = {0, 0, 0, 0};
    const char *path = "/tmp/tcuda_test_graph_order.dot";
    CHECK_OK(tc_graph_debug_dump(g, path));
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    if (!f)
        return s;
    static char names[MAXN][64], from[MAXE][64], to[MAXE][64];
    static int level[MAXN];
    char line[4096], a[64], b[64];
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, " \"%63[^\"]\" -> \"%63[^\"]\"", a, b) == 2) {
            if (s.edges < MAXE) {
                snprintf(from[s.edges], sizeof from[0], "%s", a);
                snprintf(to[s.edges++], sizeof to[0], "%s", b);
            }
        } else if (sscanf(line, " \"%63[^\"]\"[", a) == 1 && strstr(line, "\"[") &&
                   s.nodes < MAXN) {
            snprintf(names[s.nodes++], sizeof names[0], "%s", a);
        }
    }
    fclose(f);
    remove(path);
    for (int i = 0; i < s.nodes; i++)
        level[i] = 1;
    bool is_target[MAXN] = {false};
    for (int e = 0; e < s.edges; e++) {
        int t = node_index(names, s.nodes, to[e]);
        if (t >= 0)
            is_target[t] = true;
    }
    for (int i = 0; i < s.nodes; i++)
        s.roots += !is_target[i];
    for (int pass = 0; pass < s.nodes; pass++) /* longest path: relax every edge */
        for (int e = 0; e < s.edges; e++) {
            int u = node_index(names, s.nodes, from[e]), v = node_index(names, s.nodes, to[e]);
            if (u >= 0 && v >= 0 && level[v] < level[u] + 1)
                level[v] = level[u] + 1;
        }
    for (int i = 0; i < s.nodes; i++)
        s.depth = level[i] > s.depth ? level[i] : s.depth;
    printf("%-28s %3d nodes %3d edges %2d roots, longest path %2d nodes\n", what, s.nodes, s.edges,
           s.roots, s.depth);
    return s;
}

/* Captures fn(ctx) into a new graph with `order` (the guard form). */
static tc_graph *capture(tc_graph_order order, tc_graph_fn fn, void *ctx)
{
    tc_graph *g = NULL;
    CHECK_OK(tc_graph_create(&g));
    CHECK_OK(tc_graph_set_order(g, order));
    tc_graph_pool_id none = {0};
    tc_graph_capture_guard gd = tc_graph_capture_guard_enter(g, none, NULL, TC_CAPTURE_MODE_GLOBAL);
    CHECK_OK(gd.status);
    CHECK_OK(fn(ctx));
    CHECK_OK(tc_graph_capture_guard_exit(&gd));
    return g;
}

/* ---- independent ops ------------------------------------------------------- */

enum { IND = 4 };

typedef struct indep {
    tc_tensor *x[IND], *y[IND];
} indep;

/* y[i] = x[i] + x[i], four kernels that touch nothing in common */
static tc_status run_indep(void *ctx)
{
    indep *w = ctx;
    for (int i = 0; i < IND; i++) {
        tc_tensor *y;
        tc_status st = tc_tensor_add(w->x[i], w->x[i], &y);
        if (st != TC_OK)
            return st;
        set_out(&w->y[i], y);
    }
    return TC_OK;
}

static void test_independent(void)
{
    indep w = {0};
    float *x[IND];
    for (int i = 0; i < IND; i++)
        w.x[i] = random_tensor(BIG, 0, &x[i]);
    CHECK_OK(run_indep(&w));
    long pdl = tc__graph_pdl_edges;
    tc_graph *gs = capture(TC_GRAPH_ORDER_STREAM, run_indep, &w);
    int major = 0, minor = 0;
    CHECK_OK(tc_get_device_capability(0, &major, &minor));
    /* the chain of tcuda kernels is linked by programmatic edges from 9.0 on */
    CHECK(tc__graph_pdl_edges - pdl == (major >= 9 ? IND - 1 : 0));
    tc_graph *gd = capture(TC_GRAPH_ORDER_DATA, run_indep, &w);
    shape ss = shape_of(gs, "independent, stream order"),
          sd = shape_of(gd, "independent, data order");
    CHECK(ss.nodes == IND && ss.edges == IND - 1 && ss.roots == 1 && ss.depth == IND);
    CHECK(sd.nodes == IND && sd.edges == 0 && sd.roots == IND && sd.depth == 1);
    double *want = malloc(sizeof(double) * BIG);
    for (int rep = 0; rep < 2; rep++) {
        for (int i = 0; i < IND; i++)
            refill(w.x[i], x[i]);
        CHECK_OK(tc_graph_replay(gd));
        for (int i = 0; i < IND; i++) {
            for (int64_t k = 0; k < BIG; k++)
                want[k] = 2.0 * x[i][k];
            CHECK(worst_rel(w.y[i], want, BIG) == 0);
        }
    }
    free(want);
    CHECK_OK(tc_graph_destroy(gs));
    CHECK_OK(tc_graph_destroy(gd));
    for (int i = 0; i < IND; i++) {
        tc_tensor_release(w.x[i]);
        tc_tensor_release(w.y[i]);
        free(x[i]);
    }
}

/* ---- hazards ------------------------------------------------------------------ */

typedef struct hazards {
    tc_tensor *x, *z;         /* static inputs; x is overwritten with z */
    tc_tensor *y, *w, *s, *u; /* outputs */
    void *t1_data;            /* where the freed temporary was */
} hazards;

/* y = x + x (reads x); x <- z (write after that read); w = x * x (reads
 * the copy); t1 = y + y, s = sum(t1), t1 freed; u = z + z in the freed
 * block (write after the sum's read); y <- u * 0.5 + y (write after write
 * of y, read of the reused block). */
static tc_status run_hazards(void *ctx)
{
    hazards *h = ctx;
    tc_tensor *y = NULL, *w = NULL, *t1 = NULL, *s = NULL, *u = NULL, *half = NULL, *y2 = NULL;
    tc_status st = tc_tensor_add(h->x, h->x, &y);
    if (st == TC_OK)
        st = tc_tensor_copy_(h->x, h->z, false);
    if (st == TC_OK)
        st = tc_tensor_mul(h->x, h->x, &w);
    if (st == TC_OK)
        st = tc_tensor_add(y, y, &t1);
    if (st == TC_OK)
        st = tc_tensor_sum(t1, TC_ALL_DIMS, false, &s);
    if (t1) {
        h->t1_data = tc_tensor_data_ptr(t1);
        tc_tensor_release(t1);
    }
    if (st == TC_OK)
        st = tc_tensor_add(h->z, h->z, &u);
    if (st == TC_OK)
        st = tc_tensor_full(0, NULL, 0.5, TC_FLOAT32, CUDA0, &half);
    if (st == TC_OK)
        st = tc_tensor_mul(u, half, &y2);
    if (st == TC_OK)
        st = tc_tensor_add_(y, y2); /* y += u / 2: y written again, u read */
    tc_tensor_release(half);
    tc_tensor_release(y2);
    if (st != TC_OK) {
        tc_tensor *all[] = {y, w, s, u};
        for (int i = 0; i < 4; i++)
            if (all[i])
                tc_tensor_release(all[i]);
        return st;
    }
    set_out(&h->y, y);
    set_out(&h->w, w);
    set_out(&h->s, s);
    set_out(&h->u, u);
    return TC_OK;
}

static void check_hazards(const hazards *h, const float *x, const float *z)
{
    double *want = malloc(sizeof(double) * BIG), sum = 0;
    for (int64_t k = 0; k < BIG; k++)
        want[k] = 2.0 * x[k] + (double)z[k];
    CHECK(worst_rel(h->y, want, BIG) < 1e-6);
    for (int64_t k = 0; k < BIG; k++) {
        want[k] = (double)z[k] * z[k];
        sum += 4.0 * x[k];
    }
    CHECK(worst_rel(h->w, want, BIG) < 1e-6);
    for (int64_t k = 0; k < BIG; k++)
        want[k] = 2.0 * z[k];
    CHECK(worst_rel(h->u, want, BIG) == 0);
    double *s = tc_test_values(h->s);
    CHECK(s && fabs(s[0] - sum) < 1e-2 + 1e-5 * fabs(sum));
    double *xv = tc_test_values(h->x);
    bool copied = xv != NULL;
    for (int64_t k = 0; k < BIG && xv; k++)
        copied = copied && xv[k] == z[k];
    CHECK(copied);
    free(xv);
    free(s);
    free(want);
}

static void test_hazards(void)
{
    float *x, *z;
    hazards h = {0};
    h.x = random_tensor(BIG, 0, &x);
    h.z = random_tensor(BIG, 0, &z);
    CHECK_OK(run_hazards(&h)); /* eager */
    check_hazards(&h, x, z);
    tc_graph *g = capture(TC_GRAPH_ORDER_DATA, run_hazards, &h);
    CHECK(tc_tensor_data_ptr(h.u) == h.t1_data); /* the freed block was reused */
    shape s = shape_of(g, "hazards, data order");
    CHECK(s.nodes >= 9 && s.roots >= 1 && s.depth < s.nodes); /* w and s branch off */
    for (int rep = 0; rep < 3; rep++) {
        refill(h.x, x);
        refill(h.z, z);
        CHECK_OK(tc_graph_replay(g));
        check_hazards(&h, x, z);
    }
    CHECK_OK(tc_graph_destroy(g));
    tc_tensor *all[] = {h.x, h.z, h.y, h.w, h.s, h.u};
    for (int i = 0; i < 6; i++)
        tc_tensor_release(all[i]);
    free(x);
    free(z);
}

/* ---- work tcuda does not see into ------------------------------------------- */

typedef struct barrier_work {
    tc_tensor *a, *b, *r;
    tc_tensor *c, *d;
} barrier_work;

/* c = a + a; r filled at random (not announced); d = b + b */
static tc_status run_barrier(void *ctx)
{
    barrier_work *w = ctx;
    tc_tensor *c = NULL, *d = NULL;
    tc_status st = tc_tensor_add(w->a, w->a, &c);
    if (st == TC_OK)
        st = tc_tensor_uniform_(w->r, 0, 1, NULL);
    if (st == TC_OK)
        st = tc_tensor_add(w->b, w->b, &d);
    if (st != TC_OK) {
        if (c)
            tc_tensor_release(c);
        return st;
    }
    set_out(&w->c, c);
    set_out(&w->d, d);
    return TC_OK;
}

static void test_barrier(void)
{
    float *a, *b, *r;
    barrier_work w = {0};
    w.a = random_tensor(BIG, 0, &a);
    w.b = random_tensor(BIG, 0, &b);
    w.r = random_tensor(1024, 0, &r);
    CHECK_OK(run_barrier(&w));
    tc_graph *g = capture(TC_GRAPH_ORDER_DATA, run_barrier, &w);
    shape s = shape_of(g, "barrier, data order");
    CHECK(s.nodes >= 3 && s.roots == 1 && s.depth == s.nodes); /* a chain through the fill */
    double *want = malloc(sizeof(double) * BIG);
    refill(w.a, a);
    refill(w.b, b);
    CHECK_OK(tc_graph_replay(g));
    for (int64_t k = 0; k < BIG; k++)
        want[k] = 2.0 * b[k];
    CHECK(worst_rel(w.d, want, BIG) == 0);
    for (int64_t k = 0; k < BIG; k++)
        want[k] = 2.0 * a[k];
    CHECK(worst_rel(w.c, want, BIG) == 0);
    free(want);
    CHECK_OK(tc_graph_destroy(g));
    tc_tensor *all[] = {w.a, w.b, w.r, w.c, w.d};
    for (int i = 0; i < 5; i++)
        tc_tensor_release(all[i]);
    free(a);
    free(b);
    free(r);
}

/* ---- GEMMs and the MLP step ------------------------------------------------ */

enum { B = 64, DIN = 128, HID = 256, DOUT = 16 };

typedef struct mlp {
    tc_tensor *x, *y, *w1, *w2, *lr, *zero, *scale;
    tc_tensor *loss;
} mlp;

/* examples/graph_mlp.c's training step: forward, mean squared error,
 * backward by hand, SGD in place. */
static tc_status mlp_step(void *ctx)
{
    mlp *m = ctx;
    tc_tensor *t[20] = {0}, *loss = NULL;
    tc_status st = tc_tensor_matmul(m->x, m->w1, &t[0]); /* h */
    if (st == TC_OK)
        st = tc_tensor_relu(t[0], &t[1]); /* a */
    if (st == TC_OK)
        st = tc_tensor_matmul(t[1], m->w2, &t[2]); /* p */
    if (st == TC_OK)
        st = tc_tensor_sub(t[2], m->y, &t[3]); /* d */
    if (st == TC_OK)
        st = tc_tensor_mul(t[3], t[3], &t[4]);
    if (st == TC_OK)
        st = tc_tensor_mean(t[4], TC_ALL_DIMS, false, &loss);
    if (st == TC_OK)
        st = tc_tensor_mul(t[3], m->scale, &t[5]); /* dp */
    if (st == TC_OK)
        st = tc_tensor_transpose(t[1], 0, 1, &t[6]);
    if (st == TC_OK)
        st = tc_tensor_matmul(t[6], t[5], &t[7]); /* dw2 */
    if (st == TC_OK)
        st = tc_tensor_transpose(m->w2, 0, 1, &t[8]);
    if (st == TC_OK)
        st = tc_tensor_matmul(t[5], t[8], &t[9]); /* da */
    if (st == TC_OK)
        st = tc_tensor_gt(t[0], m->zero, &t[10]);
    if (st == TC_OK)
        st = tc_tensor_where(t[10], t[9], m->zero, &t[11]); /* dh */
    if (st == TC_OK)
        st = tc_tensor_transpose(m->x, 0, 1, &t[12]);
    if (st == TC_OK)
        st = tc_tensor_matmul(t[12], t[11], &t[13]); /* dw1 */
    if (st == TC_OK)
        st = tc_tensor_mul(t[13], m->lr, &t[14]);
    if (st == TC_OK)
        st = tc_tensor_sub(m->w1, t[14], &t[15]);
    if (st == TC_OK)
        st = tc_tensor_mul(t[7], m->lr, &t[16]);
    if (st == TC_OK)
        st = tc_tensor_sub(m->w2, t[16], &t[17]);
    if (st == TC_OK)
        st = tc_tensor_copy_(m->w1, t[15], false);
    if (st == TC_OK)
        st = tc_tensor_copy_(m->w2, t[17], false);
    for (int i = 0; i < 20; i++)
        if (t[i])
            tc_tensor_release(t[i]);
    if (st != TC_OK) {
        if (loss)
            tc_tensor_release(loss);
        return st;
    }
    set_out(&m->loss, loss);
    return TC_OK;
}

/* The step on the host in double: the new weights and the loss. */
static double ref_step(const float *x, const float *y, double *w1, double *w2)
{
    static double h[B * HID], a[B * HID], d[B * DOUT], da[B * HID], dw1[DIN * HID], dw2[HID * DOUT];
    double loss = 0;
    for (int i = 0; i < B; i++)
        for (int j = 0; j < HID; j++) {
            double v = 0;
            for (int k = 0; k < DIN; k++)
                v += (double)x[i * DIN + k] * w1[k * HID + j];
            h[i * HID + j] = v;
            a[i * HID + j] = v > 0 ? v : 0;
        }
    for (int i = 0; i < B; i++)
        for (int j = 0; j < DOUT; j++) {
            double v = 0;
            for (int k = 0; k < HID; k++)
                v += a[i * HID + k] * w2[k * DOUT + j];
            d[i * DOUT + j] = v - y[i * DOUT + j];
            loss += d[i * DOUT + j] * d[i * DOUT + j];
            d[i * DOUT + j] *= 2.0 / (B * DOUT);
        }
    for (int i = 0; i < HID; i++)
        for (int j = 0; j < DOUT; j++) {
            double v = 0;
            for (int k = 0; k < B; k++)
                v += a[k * HID + i] * d[k * DOUT + j];
            dw2[i * DOUT + j] = v;
        }
    for (int i = 0; i < B; i++)
        for (int j = 0; j < HID; j++) {
            double v = 0;
            for (int k = 0; k < DOUT; k++)
                v += d[i * DOUT + k] * w2[j * DOUT + k];
            da[i * HID + j] = h[i * HID + j] > 0 ? v : 0;
        }
    for (int i = 0; i < DIN; i++)
        for (int j = 0; j < HID; j++) {
            double v = 0;
            for (int k = 0; k < B; k++)
                v += (double)x[k * DIN + i] * da[k * HID + j];
            dw1[i * HID + j] = v;
        }
    for (int i = 0; i < DIN * HID; i++)
        w1[i] -= 0.05 * dw1[i];
    for (int i = 0; i < HID * DOUT; i++)
        w2[i] -= 0.05 * dw2[i];
    return loss / (B * DOUT);
}

static void test_mlp(void)
{
    float *x, *y, *w1f, *w2f;
    mlp m = {0};
    m.x = random_tensor(B, DIN, &x);
    m.y = random_tensor(B, DOUT, &y);
    m.w1 = random_tensor(DIN, HID, &w1f);
    m.w2 = random_tensor(HID, DOUT, &w2f);
    CHECK_OK(tc_tensor_full(0, NULL, 0.05, TC_FLOAT32, CUDA0, &m.lr));
    CHECK_OK(tc_tensor_full(0, NULL, 0.0, TC_FLOAT32, CUDA0, &m.zero));
    CHECK_OK(tc_tensor_full(0, NULL, 2.0 / (B * DOUT), TC_FLOAT32, CUDA0, &m.scale));
    CHECK_OK(mlp_step(&m)); /* warm up: cuBLAS's handle */
    tc_graph *gs = capture(TC_GRAPH_ORDER_STREAM, mlp_step, &m);
    tc_tensor *losses[2] = {m.loss, NULL}; /* each graph writes its own loss tensor */
    m.loss = NULL;
    tc_graph *gd = capture(TC_GRAPH_ORDER_DATA, mlp_step, &m);
    losses[1] = m.loss;
    shape ss = shape_of(gs, "mlp step, stream order"), sd = shape_of(gd, "mlp step, data order");
    CHECK(ss.roots == 1 && ss.depth == ss.nodes && sd.nodes == ss.nodes);
    /* the loss, dw2 beside da, and the two updates branch off the chain */
    CHECK(sd.roots == 1 && sd.depth < ss.depth - 4);
    tc_graph *graphs[2] = {gs, gd};
    double *w1 = malloc(sizeof(double) * DIN * HID), *w2 = malloc(sizeof(double) * HID * DOUT);
    for (int k = 0; k < 2; k++) {
        fill_random(w1f, DIN * HID);
        fill_random(w2f, HID * DOUT);
        for (int i = 0; i < DIN * HID; i++)
            w1f[i] *= 0.08838835f, w1[i] = w1f[i];
        for (int i = 0; i < HID * DOUT; i++)
            w2f[i] *= 0.0625f, w2[i] = w2f[i];
        tc_tensor *src;
        CHECK_OK(tc_tensor_from_data(w1f, 2, (int64_t[]){DIN, HID}, TC_FLOAT32, CPU, &src));
        CHECK_OK(tc_tensor_copy_(m.w1, src, false));
        tc_tensor_release(src);
        CHECK_OK(tc_tensor_from_data(w2f, 2, (int64_t[]){HID, DOUT}, TC_FLOAT32, CPU, &src));
        CHECK_OK(tc_tensor_copy_(m.w2, src, false));
        tc_tensor_release(src);
        double worst_loss = 0;
        for (int rep = 0; rep < 5; rep++) {
            CHECK_OK(tc_graph_replay(graphs[k]));
            double want = ref_step(x, y, w1, w2);
            double *l = tc_test_values(losses[k]);
            worst_loss = fmax(worst_loss, l ? fabs(l[0] - want) / want : INFINITY);
            free(l);
        }
        CHECK(worst_loss < 1e-4);
        double *w1v = malloc(sizeof(double) * DIN * HID);
        for (int i = 0; i < DIN * HID; i++)
            w1v[i] = w1[i];
        CHECK(worst_rel(m.w1, w1v, DIN * HID) < 1e-5);
        CHECK(worst_rel(m.w2, w2, HID * DOUT) < 1e-5);
        free(w1v);
    }
    free(w1);
    free(w2);
    CHECK_OK(tc_graph_destroy(gs));
    CHECK_OK(tc_graph_destroy(gd));
    tc_tensor *all[] = {m.x, m.y, m.w1, m.w2, m.lr, m.zero, m.scale, losses[0], losses[1]};
    for (int i = 0; i < 9; i++)
        tc_tensor_release(all[i]);
    free(x);
    free(y);
    free(w1f);
    free(w2f);
}

/* Two GEMMs on independent branches, large enough to run a while each. */
typedef struct gemms {
    tc_tensor *a[2], *b[2], *c[2];
} gemms;

enum { GM = 512, GK = 1024, GN = 256 };

static tc_status run_gemms(void *ctx)
{
    gemms *w = ctx;
    for (int i = 0; i < 2; i++) {
        tc_tensor *c;
        tc_status st = tc_tensor_matmul(w->a[i], w->b[i], &c);
        if (st != TC_OK)
            return st;
        set_out(&w->c[i], c);
    }
    return TC_OK;
}

static void test_gemms(void)
{
    gemms w = {0};
    float *a[2], *b[2];
    for (int i = 0; i < 2; i++) {
        w.a[i] = random_tensor(GM, GK, &a[i]);
        w.b[i] = random_tensor(GK, GN, &b[i]);
    }
    CHECK_OK(run_gemms(&w));
    tc_graph *g = capture(TC_GRAPH_ORDER_DATA, run_gemms, &w);
    shape sg = shape_of(g, "two gemms, data order");
    CHECK(sg.roots == 2 && sg.depth < sg.nodes); /* two branches, each its own workspace */
    double *want = malloc(sizeof(double) * GM * GN);
    for (int rep = 0; rep < 2; rep++) {
        for (int i = 0; i < 2; i++) {
            refill(w.a[i], a[i]);
            refill(w.b[i], b[i]);
        }
        CHECK_OK(tc_graph_replay(g));
        for (int i = 0; i < 2; i++) {
            for (int r = 0; r < GM; r++)
                for (int c = 0; c < GN; c++) {
                    double v = 0;
                    for (int k = 0; k < GK; k++)
                        v += (double)a[i][r * GK + k] * b[i][k * GN + c];
                    want[r * GN + c] = v;
                }
            CHECK(worst_rel(w.c[i], want, GM * GN) < 1e-4);
        }
    }
    free(want);
    CHECK_OK(tc_graph_destroy(g));
    for (int i = 0; i < 2; i++) {
        tc_tensor_release(w.a[i]);
        tc_tensor_release(w.b[i]);
        tc_tensor_release(w.c[i]);
        free(a[i]);
        free(b[i]);
    }
}

/* ---- update, callables, bad inputs ------------------------------------------- */

static void test_update_and_callables(void)
{
    indep w = {0};
    float *x[IND];
    for (int i = 0; i < IND; i++)
        w.x[i] = random_tensor(1024, 0, &x[i]);
    CHECK_OK(run_indep(&w));
    tc_graph *g = capture(TC_GRAPH_ORDER_DATA, run_indep, &w);
    tc_graph_update_result how = TC_GRAPH_UPDATE_RESULT_REINSTANTIATED;
    CHECK_OK(tc_graph_update(g, run_indep, &w, &how));
    CHECK(how == TC_GRAPH_UPDATE_RESULT_IN_PLACE);
    CHECK(shape_of(g, "updated, data order").roots ==
          IND); /* the update captured in data order too */
    CHECK_OK(tc_graph_destroy(g));

    tc_graph_fn fns[2] = {run_indep, run_indep};
    void *ctxs[2] = {&w, &w};
    tc_graphed_callable *c[2];
    CHECK_OK(tc_make_graphed_callables_ordered(fns, ctxs, 2, 1, TC_GRAPH_ORDER_DATA, c));
    CHECK(shape_of(tc_graphed_callable_graph(c[0]), "callable, data order").roots == IND);
    double want[1024];
    refill(w.x[2], x[2]);
    CHECK_OK(tc_graphed_callable_call(c[0]));
    CHECK_OK(tc_graphed_callable_call(c[1]));
    for (int k = 0; k < 1024; k++)
        want[k] = 2.0 * x[2][k];
    CHECK(worst_rel(w.y[2], want, 1024) == 0);
    CHECK_OK(tc_graphed_callable_destroy(c[0]));
    CHECK_OK(tc_graphed_callable_destroy(c[1]));
    CHECK_STATUS(tc_make_graphed_callables_ordered(fns, ctxs, 2, 1, (tc_graph_order)-1, c),
                 TC_ERROR_INVALID_ARGUMENT);
    for (int i = 0; i < IND; i++) {
        tc_tensor_release(w.x[i]);
        tc_tensor_release(w.y[i]);
        free(x[i]);
    }
}

static void test_bad_inputs(void)
{
    tc_graph *g;
    CHECK_OK(tc_graph_create(&g));
    CHECK_STATUS(tc_graph_set_order(g, (tc_graph_order)2), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("tc_graph_set_order", "order 2"));
    CHECK_OK(tc_graph_set_order(g, TC_GRAPH_ORDER_DATA));
    tc_graph_pool_id none = {0};
    tc_graph_capture_guard gd = tc_graph_capture_guard_enter(g, none, NULL, TC_CAPTURE_MODE_GLOBAL);
    CHECK_OK(gd.status);
    CHECK_STATUS(tc_graph_set_order(g, TC_GRAPH_ORDER_STREAM), TC_ERROR_INVALID_STATE);
    CHECK(says("tc_graph_set_order", "underway"));
    tc_tensor *t = NULL;
    CHECK_OK(tc_tensor_zeros(1, (int64_t[]){16}, TC_FLOAT32, CUDA0, &t));
    CHECK_OK(tc_graph_capture_guard_exit(&gd));
    CHECK_OK(tc_graph_replay(g));
    tc_tensor_release(t);
    CHECK_OK(tc_graph_set_order(g, TC_GRAPH_ORDER_STREAM)); /* for the next capture */
    CHECK_OK(tc_graph_destroy(g));
    CHECK_STATUS(tc_graph_set_order(g, TC_GRAPH_ORDER_DATA), TC_ERROR_INVALID_HANDLE);
}

static void run_gpu_tests(void)
{
    test_bad_inputs();
    test_independent();
    test_hazards();
    test_barrier();
    test_gemms();
    test_mlp();
    test_update_and_callables();
    CHECK_OK(tc_synchronize(-1));
}
#endif

int main(void)
{
    tc_test_init();
    check_arguments();
    TC_TEST_REQUIRE_GPU_AFTER(check_without_gpu);
#if defined(TCUDA_HAVE_CUDA)
    run_gpu_tests();
#endif
    return TC_TEST_DONE();
}
