/* optim.h and amp.h on a GPU beside the CPU: the same inputs through both,
 * the GPU's results against the CPU's bit for bit where both run the same
 * operations in the same order (every step, every foreach operation, the
 * unscale), and within one rounding of the dtype where a sum runs in
 * another order (the norms, clip_grad_norm_). Lists of 100 tensors of
 * sizes 0 to ~3000 and one of 200000 elements (several chunks of 48
 * tensors, grid-stride loops); every dtype; found_inf and grad_scale read
 * on the device; the learning rate as a device tensor; an AdamW step
 * captured in a CUDA graph and replayed; a GradScaler through overflow and
 * growth. (test_optim checks the CPU against double-precision formulas.)
 * Exits 77 without a GPU. */
#include "optim_check.h"

static const tc_device GPU = {TC_CUDA, -1};

enum { NL = 100 };

/* The same values on both devices. */
typedef struct twin {
    int n;
    tc_tensor *c[NL + 1], *g[NL + 1];
} twin;

static int64_t size_of(int i) { return i == NL ? 200000 : (i * 37) % 3001; }

static void twin_make(twin *t, int n, tc_dtype dt, double lo, double hi)
{
    t->n = n;
    for (int i = 0; i < n; i++) {
        t->c[i] = rnd_tensor(CPU, dt, size_of(i), lo, hi, NULL);
        t->g[i] = NULL;
        int64_t sz = size_of(i);
        CHECK_OK(tc_tensor_empty(1, &sz, dt, GPU, &t->g[i]));
        CHECK_OK(tc_tensor_copy_(t->g[i], t->c[i], false));
    }
}

static void twin_free(twin *t)
{
    for (int i = 0; i < t->n; i++)
        tc_tensor_release(t->c[i]), tc_tensor_release(t->g[i]);
}

/* Every tensor of a twin the same bits on both devices. */
static void twin_same(const char *what, const twin *t)
{
    int bad = 0;
    for (int i = 0; i < t->n; i++)
        if (!same_vals(t->c[i], t->g[i]) && !bad++)
            printf("  %s: tensor %d differs between CPU and GPU\n", what, i);
    CHECK(bad == 0);
}

/* Each state of the two optimizers the same bits. */
static void states_same(const tc_optimizer *a, const tc_optimizer *b, int n)
{
    for (int w = 0; w <= TC_OPTIMIZER_STATE_MOMENTUM_BUFFER; w++) {
        tc_tensor *x = NULL, *y = NULL;
        if (tc_optimizer_get_state(a, 0, (tc_optimizer_state)w, &x) != TC_OK)
            continue;
        tc_tensor_release(x);
        int bad = 0;
        for (int i = 0; i < n; i++) {
            x = y = NULL;
            CHECK_OK(tc_optimizer_get_state(a, i, (tc_optimizer_state)w, &x));
            CHECK_OK(tc_optimizer_get_state(b, i, (tc_optimizer_state)w, &y));
            if (!same_vals(x, y) && !bad++)
                printf("  state %d of tensor %d differs\n", w, i);
            tc_tensor_release(x), tc_tensor_release(y);
        }
        CHECK(bad == 0);
    }
}

/* ---- the optimizers ------------------------------------------------------------------------ */

typedef enum kind { ADAMW, ADAM, SGD } kind;

static void opt_pair(kind k, const void *opts, twin *p, tc_optimizer **c, tc_optimizer **g)
{
    if (k == SGD) {
        CHECK_OK(tc_optimizer_create_sgd(p->c, p->n, opts, c));
        CHECK_OK(tc_optimizer_create_sgd(p->g, p->n, opts, g));
    } else if (k == ADAM) {
        CHECK_OK(tc_optimizer_create_adam(p->c, p->n, opts, c));
        CHECK_OK(tc_optimizer_create_adam(p->g, p->n, opts, g));
    } else {
        CHECK_OK(tc_optimizer_create_adamw(p->c, p->n, opts, c));
        CHECK_OK(tc_optimizer_create_adamw(p->g, p->n, opts, g));
    }
}

/* Three steps (the second scaled by 256 with found_inf 0, the third with
 * found_inf 1: skipped) on 101 tensors, CPU and GPU the same bits. */
static void step_case(kind k, const void *opts, tc_dtype dt, const char *name)
{
    printf("%s %s\n", name, tc_dtype_string(dt));
    twin p, gr;
    twin_make(&p, NL + 1, dt, -1, 1);
    tc_optimizer *oc = NULL, *og = NULL;
    opt_pair(k, opts, &p, &oc, &og);
    tc_tensor *sc = NULL, *sg = NULL, *f0c = NULL, *f0g = NULL, *f1c = NULL, *f1g = NULL;
    CHECK_OK(tc_tensor_full(0, NULL, 256, TC_FLOAT32, CPU, &sc));
    CHECK_OK(tc_tensor_full(0, NULL, 256, TC_FLOAT32, GPU, &sg));
    CHECK_OK(tc_tensor_zeros(0, NULL, TC_FLOAT32, CPU, &f0c));
    CHECK_OK(tc_tensor_zeros(0, NULL, TC_FLOAT32, GPU, &f0g));
    CHECK_OK(tc_tensor_full(0, NULL, 1, TC_FLOAT32, CPU, &f1c));
    CHECK_OK(tc_tensor_full(0, NULL, 1, TC_FLOAT32, GPU, &f1g));
    for (int s = 0; s < 4; s++) {
        twin_make(&gr, NL + 1, dt, s == 1 ? -256 : -1, s == 1 ? 256 : 1);
        if (s == 1) {
            CHECK_OK(tc_optimizer_step_scaled(oc, gr.c, gr.n, sc, f0c));
            CHECK_OK(tc_optimizer_step_scaled(og, gr.g, gr.n, sg, f0g));
        } else if (s == 2) {
            CHECK_OK(tc_optimizer_step_scaled(oc, gr.c, gr.n, sc, f1c));
            CHECK_OK(tc_optimizer_step_scaled(og, gr.g, gr.n, sg, f1g));
        } else {
            CHECK_OK(tc_optimizer_step(oc, gr.c, gr.n));
            CHECK_OK(tc_optimizer_step(og, gr.g, gr.n));
        }
        twin_same("params", &p);
        twin_same("grads", &gr);
        twin_free(&gr);
    }
    states_same(oc, og, p.n);
    tc_tensor *step = NULL;
    double three = 3;
    CHECK_OK(tc_optimizer_get_state(og, NL, TC_OPTIMIZER_STATE_STEP, &step));
    near_vals("step count", step, &three, 1, 0);
    tc_tensor_release(step);
    CHECK_OK(tc_optimizer_destroy(oc));
    CHECK_OK(tc_optimizer_destroy(og));
    tc_tensor_release(sc), tc_tensor_release(sg), tc_tensor_release(f0c);
    tc_tensor_release(f0g), tc_tensor_release(f1c), tc_tensor_release(f1g);
    twin_free(&p);
}

static void test_steps(void)
{
    tc_dtype dts[] = {TC_FLOAT32, TC_BFLOAT16, TC_FLOAT16, TC_FLOAT64};
    for (int d = 0; d < 4; d++) {
        tc_adamw_options a = tc_adamw_options_default();
        step_case(ADAMW, &a, dts[d], "adamw");
        a.amsgrad = true, a.maximize = true, a.lr = 0.01;
        step_case(ADAMW, &a, dts[d], "adamw amsgrad maximize");
        a = tc_adam_options_default();
        a.weight_decay = 0.1;
        step_case(ADAM, &a, dts[d], "adam L2");
        tc_sgd_options s = tc_sgd_options_default();
        s.lr = 0.1, s.momentum = 0.9, s.dampening = 0.2, s.weight_decay = 0.01;
        step_case(SGD, &s, dts[d], "sgd momentum");
        s.dampening = 0, s.nesterov = true, s.maximize = true;
        step_case(SGD, &s, dts[d], "sgd nesterov maximize");
    }
}

/* The learning rate as a GPU tensor, and an AdamW step captured in a graph
 * and replayed twice: the CPU's three steps with lr 0.01 (a number). */
static void test_graph_lr_tensor(void)
{
    printf("adamw in a CUDA graph, lr a device tensor\n");
    twin p, gr;
    twin_make(&p, 5, TC_FLOAT32, -1, 1);
    twin_make(&gr, 5, TC_FLOAT32, -1, 1);
    tc_adamw_options a = tc_adamw_options_default();
    a.lr = (double)0.01f;
    tc_optimizer *oc = NULL, *og = NULL;
    opt_pair(ADAMW, &a, &p, &oc, &og);
    tc_tensor *lr = NULL;
    CHECK_OK(tc_tensor_full(0, NULL, 0.5, TC_FLOAT32, GPU, &lr));
    CHECK_OK(tc_optimizer_set_lr_tensor(og, lr));
    CHECK_OK(tc_tensor_fill_(lr, 0.01)); /* read at the step, not at set */
    CHECK_OK(tc_optimizer_step(oc, gr.c, gr.n));
    CHECK_OK(tc_optimizer_step(og, gr.g, gr.n)); /* warm-up, outside the graph */
    twin_same("params after an lr-tensor step", &p);
    CHECK_OK(tc_synchronize(-1));
    tc_graph *g = NULL;
    CHECK_OK(tc_graph_create(&g));
    tc_graph_pool_id none = {0};
    tc_graph_capture_guard gd = tc_graph_capture_guard_enter(g, none, NULL, TC_CAPTURE_MODE_GLOBAL);
    CHECK_OK(gd.status);
    CHECK_OK(tc_optimizer_step(og, gr.g, gr.n));
    CHECK_OK(tc_graph_capture_guard_exit(&gd));
    for (int r = 0; r < 2; r++) {
        CHECK_OK(tc_graph_replay(g));
        CHECK_OK(tc_optimizer_step(oc, gr.c, gr.n));
    }
    CHECK_OK(tc_synchronize(-1));
    twin_same("params after graph replays", &p);
    states_same(oc, og, p.n);
    CHECK_OK(tc_graph_destroy(g));
    tc_tensor_release(lr);
    CHECK_OK(tc_optimizer_destroy(oc));
    CHECK_OK(tc_optimizer_destroy(og));
    twin_free(&p), twin_free(&gr);
}

/* ---- foreach, norms, clip ------------------------------------------------------------------- */

static void foreach_case(tc_dtype dt)
{
    printf("foreach %s\n", tc_dtype_string(dt));
    twin a, b, c;
    twin_make(&a, NL + 1, dt, -1, 1), twin_make(&b, NL + 1, dt, -1, 1);
    twin_make(&c, NL + 1, dt, 1, 2);
    tc_tensor *sc = NULL, *sg = NULL;
    CHECK_OK(tc_tensor_full(0, NULL, 0.75, TC_FLOAT32, CPU, &sc));
    CHECK_OK(tc_tensor_full(0, NULL, 0.75, TC_FLOAT32, GPU, &sg));
    for (int dev = 0; dev < 2; dev++) {
        tc_tensor **x = dev ? a.g : a.c;
        const tc_tensor *const *y = (const tc_tensor *const *)(dev ? b.g : b.c);
        const tc_tensor *const *z = (const tc_tensor *const *)(dev ? c.g : c.c);
        int n = a.n;
        CHECK_OK(tc_foreach_add_scalar_(x, n, 0.1));
        CHECK_OK(tc_foreach_mul_scalar_(x, n, -1.3));
        CHECK_OK(tc_foreach_mul_tensor_(x, n, dev ? sg : sc));
        CHECK_OK(tc_foreach_add_list_(x, y, n, 0.3));
        CHECK_OK(tc_foreach_mul_list_(x, y, n));
        CHECK_OK(tc_foreach_addcmul_(x, y, z, n, 0.7));
        CHECK_OK(tc_foreach_addcdiv_(x, y, z, n, -0.2));
        CHECK_OK(tc_foreach_lerp_(x, y, n, 0.3));
        CHECK_OK(tc_foreach_lerp_(x, y, n, 0.9));
        CHECK_OK(tc_foreach_sqrt_((tc_tensor **)(dev ? c.g : c.c), n));
    }
    twin_same("foreach", &a);
    twin_same("foreach sqrt", &c);
    /* norms: within one rounding of the dtype */
    double tol = dt == TC_FLOAT64 ? 1e-14 : dt == TC_FLOAT32 ? 3e-7 : 1e-2;
    for (int o = 0; o < 2; o++) {
        double ord = o ? INFINITY : 2.0;
        tc_tensor *nc = NULL, *ng = NULL;
        CHECK_OK(tc_foreach_norm((const tc_tensor *const *)b.c, b.n, ord, &nc));
        CHECK_OK(tc_foreach_norm((const tc_tensor *const *)b.g, b.n, ord, &ng));
        CHECK(tc_tensor_is_cuda(ng) && tc_tensor_dtype(ng) == dt);
        double *want = tc_test_values(nc);
        near_vals("norms", ng, want, b.n, tol);
        free(want);
        tc_tensor_release(nc), tc_tensor_release(ng);
        /* clip: the totals, then the gradients */
        tc_tensor *tc = NULL, *tg = NULL;
        CHECK_OK(tc_clip_grad_norm_(b.c, b.n, 0.5, ord, false, &tc));
        CHECK_OK(tc_clip_grad_norm_(b.g, b.n, 0.5, ord, o == 1, &tg));
        CHECK(tc_tensor_is_cuda(tg) && tc_tensor_ndim(tg) == 0);
        want = tc_test_values(tc);
        near_vals("total norm", tg, want, 1, tol);
        free(want);
        for (int i = 0; i < b.n; i++) {
            want = tc_test_values(b.c[i]);
            near_vals("clipped", b.g[i], want, tc_tensor_numel(b.c[i]), tol * 2);
            free(want);
        }
        tc_tensor_release(tc), tc_tensor_release(tg);
    }
    /* zero_grad */
    CHECK_OK(tc_optimizer_zero_grad(b.g, b.n));
    CHECK_OK(tc_optimizer_zero_grad(b.c, b.n));
    twin_same("zero_grad", &b);
    tc_tensor_release(sc), tc_tensor_release(sg);
    twin_free(&a), twin_free(&b), twin_free(&c);
}

/* The norms of a tensor of many chunks (the GPU adds fixed chunks of
 * 32,768 elements, then the chunks in order): exact values, a NaN in a
 * later chunk, and an empty tensor beside them. */
static void test_norm_chunks(void)
{
    printf("norm chunks\n");
    int64_t n = 1000003, zero = 0;
    float *h = calloc((size_t)n, sizeof *h);
    CHECK(h != NULL);
    h[5] = -4.0f, h[n - 1] = 3.0f; /* the last chunk is a partial one */
    tc_tensor *x[2] = {NULL, NULL}, *norm = NULL;
    CHECK_OK(tc_tensor_from_data(h, 1, &n, TC_FLOAT32, GPU, &x[0]));
    CHECK_OK(tc_tensor_empty(1, &zero, TC_FLOAT32, GPU, &x[1]));
    double two[2] = {5.0, 0.0}, inf[2] = {4.0, 0.0};
    CHECK_OK(tc_foreach_norm((const tc_tensor *const *)x, 2, 2.0, &norm));
    near_vals("2-norms", norm, two, 2, 0);
    tc_tensor_release(norm);
    CHECK_OK(tc_foreach_norm((const tc_tensor *const *)x, 2, INFINITY, &norm));
    near_vals("inf-norms", norm, inf, 2, 0);
    tc_tensor_release(norm);
    tc_tensor_release(x[0]);
    h[700000] = NAN;
    CHECK_OK(tc_tensor_from_data(h, 1, &n, TC_FLOAT32, GPU, &x[0]));
    for (int o = 0; o < 2; o++) {
        CHECK_OK(tc_foreach_norm((const tc_tensor *const *)x, 1, o ? INFINITY : 2.0, &norm));
        double *got = tc_test_values(norm);
        CHECK(isnan(got[0]));
        free(got);
        tc_tensor_release(norm);
    }
    tc_tensor_release(x[0]), tc_tensor_release(x[1]);
    free(h);
}

static void test_foreach(void)
{
    tc_dtype dts[] = {TC_FLOAT32, TC_BFLOAT16, TC_FLOAT16, TC_FLOAT64};
    for (int d = 0; d < 4; d++)
        foreach_case(dts[d]);
    /* a GPU list with a CPU tensor in it, a CPU scalar for a GPU list */
    twin a;
    twin_make(&a, 2, TC_FLOAT32, -1, 1);
    tc_tensor *mixed[2] = {a.g[0], a.c[1]}, *s = NULL;
    CHECK_STATUS(tc_foreach_zero_(mixed, 2), TC_ERROR_DEVICE_MISMATCH);
    CHECK_OK(tc_tensor_full(0, NULL, 2, TC_FLOAT32, CPU, &s));
    CHECK_STATUS(tc_foreach_mul_tensor_(a.g, 2, s), TC_ERROR_DEVICE_MISMATCH);
    tc_optimizer *o = NULL;
    tc_adamw_options ao = tc_adamw_options_default();
    CHECK_OK(tc_optimizer_create_adamw(a.g, 2, &ao, &o));
    CHECK_STATUS(tc_optimizer_step(o, a.c, 2), TC_ERROR_DEVICE_MISMATCH);
    CHECK_STATUS(tc_optimizer_step_scaled(o, a.g, 2, s, NULL), TC_ERROR_DEVICE_MISMATCH);
    CHECK_STATUS(tc_optimizer_set_lr_tensor(o, s), TC_ERROR_DEVICE_MISMATCH);
    CHECK_OK(tc_optimizer_destroy(o));
    tc_tensor_release(s);
    twin_free(&a);
}

/* ---- the gradient scaler ------------------------------------------------------------------------ */

/* The same rounds through a CPU and a GPU scaler: an overflow in round 2,
 * growth_interval 2. */
static void test_scaler(void)
{
    printf("grad scaler\n");
    tc_grad_scaler_options so = tc_grad_scaler_options_default();
    so.growth_interval = 2;
    tc_grad_scaler *sc = NULL, *sg = NULL;
    CHECK_OK(tc_grad_scaler_create(CPU, &so, &sc));
    CHECK_OK(tc_grad_scaler_create(GPU, &so, &sg));
    twin p;
    twin_make(&p, 60, TC_FLOAT32, -1, 1);
    tc_adamw_options ao = tc_adamw_options_default();
    tc_optimizer *oc = NULL, *og = NULL;
    opt_pair(ADAMW, &ao, &p, &oc, &og);
    for (int r = 0; r < 5; r++) {
        twin gr;
        twin_make(&gr, 60, TC_FLOAT32, -65536, 65536);
        if (r == 2) { /* an infinity in the last tensor of the second chunk */
            double inf = INFINITY;
            tc_tensor *one = NULL;
            int64_t n1 = 1;
            CHECK_OK(tc_tensor_from_data(&inf, 0, &n1, TC_FLOAT64, CPU, &one));
            for (int d = 0; d < 2; d++) {
                tc_tensor *dst = d ? gr.g[59] : gr.c[59], *head = NULL;
                CHECK_OK(tc_tensor_narrow(dst, 0, 0, 1, &head));
                CHECK_OK(tc_tensor_copy_(head, one, false));
                tc_tensor_release(head);
            }
            tc_tensor_release(one);
        }
        if (r % 2) { /* unscale_ first on odd rounds */
            CHECK_OK(tc_grad_scaler_unscale_(sc, oc, gr.c, gr.n));
            CHECK_OK(tc_grad_scaler_unscale_(sg, og, gr.g, gr.n));
        }
        CHECK_OK(tc_grad_scaler_step(sc, oc, gr.c, gr.n));
        CHECK_OK(tc_grad_scaler_step(sg, og, gr.g, gr.n));
        CHECK_OK(tc_grad_scaler_update(sc));
        CHECK_OK(tc_grad_scaler_update(sg));
        twin_same("params under the scaler", &p);
        twin_same("grads under the scaler", &gr);
        tc_grad_scaler_state a = {0}, b = {0};
        CHECK_OK(tc_grad_scaler_get_state(sc, &a));
        CHECK_OK(tc_grad_scaler_get_state(sg, &b));
        CHECK(a.scale == b.scale && a.growth_tracker == b.growth_tracker);
        printf("  round %d: scale %g tracker %d\n", r, b.scale, b.growth_tracker);
        twin_free(&gr);
    }
    tc_grad_scaler_state b = {0};
    CHECK_OK(tc_grad_scaler_get_state(sg, &b));
    CHECK(b.scale == 131072); /* grown at r1, backed off at r2, grown at r4 */
    states_same(oc, og, p.n);
    CHECK_OK(tc_optimizer_destroy(oc));
    CHECK_OK(tc_optimizer_destroy(og));
    CHECK_OK(tc_grad_scaler_destroy(sc));
    CHECK_OK(tc_grad_scaler_destroy(sg));
    twin_free(&p);
}

int main(void)
{
    tc_test_init();
    TC_TEST_REQUIRE_GPU();
    test_steps();
    test_graph_lr_tensor();
    test_foreach();
    test_norm_chunks();
    test_scaler();
    return TC_TEST_DONE();
}
