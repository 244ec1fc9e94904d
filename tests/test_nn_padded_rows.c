/* Rows padded to whole 16-byte vectors (src/tensor/tensor_nn_rows.c):
 * GPT-2's classifier at a smaller size, logits [1025, 4099] in float16 and
 * bfloat16 (4.2e6 elements, past the 2^22 where padding starts).
 *
 * On the CPU: tc_nn_linear's result (with and without a bias) has its rows
 * 4104 elements apart and the values of a reference loop in double;
 * tc_nn_cross_entropy_fused_autocast over it returns a gradient padded the
 * same way (over dense logits, a dense one), and linear's backward reads
 * that gradient as it lies. Each
 * equals, bit for bit, the same call on dense copies. A small result and a
 * float32 one stay dense; rows that repeat one row (stride 0) are read
 * through dense copies. With a GPU (label gpu_too): the same chain on the
 * GPU, with the same layouts, against the CPU's values. */
#include "nn_check.h"
#include "tcuda/nn_backward.h"

enum { N = 1025, K = 32, V = 4099, VP = 4104 };

static tc_tensor *dense(const tc_tensor *t)
{
    tc_tensor *d = NULL;
    CHECK_OK(tc_tensor_contiguous(t, &d));
    CHECK(tc_tensor_is_contiguous(d));
    return d;
}

static bool padded(const tc_tensor *t)
{
    return tc_tensor_ndim(t) == 2 && tc_tensor_stride(t, 0) == VP && tc_tensor_stride(t, 1) == 1 &&
           tc_tensor_size(t, 1) == V && !tc_tensor_is_contiguous(t);
}

/* The values of two tensors of one dtype equal, bit for bit (as doubles). */
static void same(const char *what, const tc_tensor *a, const tc_tensor *b)
{
    (void)near_tensor(what, a, b, 0);
}

/* One dtype's chain on dev: the results, for the GPU's comparison. */
typedef struct chain {
    tc_tensor *y, *yb, *loss, *dl, *dx, *dw;
} chain;

static void release_chain(chain *c)
{
    tc_tensor *all[] = {c->y, c->yb, c->loss, c->dl, c->dx, c->dw};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tc_tensor_release(all[i]);
}

static chain run_chain(const tc_tensor *x, const tc_tensor *w, const tc_tensor *b,
                       const tc_tensor *tg)
{
    chain c = {0};
    CHECK_OK(tc_nn_linear(x, w, NULL, &c.y));
    CHECK_OK(tc_nn_linear(x, w, b, &c.yb));
    CHECK(padded(c.y) && padded(c.yb));
    CHECK_OK(
        tc_nn_cross_entropy_fused_autocast(c.y, tg, -100, TC_REDUCTION_MEAN, 1.0, &c.loss, &c.dl));
    CHECK(padded(c.dl));
    unsigned want = TC_NN_LINEAR_GRAD_X | TC_NN_LINEAR_GRAD_WEIGHT;
    CHECK_OK(tc_nn_linear_backward(c.dl, x, w, want, &c.dx, &c.dw, NULL));
    return c;
}

/* linear's result against a double loop: y[i][j] = sum_k x[i][k] w[j][k]
 * (+ b[j]), within the dtype's rounding of the float32 sums. */
static void linear_reference(const tc_tensor *x, const tc_tensor *w, const tc_tensor *b,
                             const tc_tensor *y, const char *what)
{
    double *xv = tc_test_values(x), *wv = tc_test_values(w), *bv = b ? tc_test_values(b) : NULL;
    double *ref = malloc(sizeof(double) * N * V);
    for (int64_t i = 0; xv && wv && ref && i < N; i++)
        for (int64_t j = 0; j < V; j++) {
            double s = bv ? bv[j] : 0;
            for (int64_t k = 0; k < K; k++)
                s += xv[i * K + k] * wv[j * K + k];
            ref[i * V + j] = s;
        }
    CHECK(ref);
    if (ref)
        (void)near_ref(what, tc_tensor_dtype(y), y, ref, N * V, 4);
    free(xv), free(wv), free(bv), free(ref);
}

static void cpu_chain(tc_dtype dt, chain *out, tc_tensor **in)
{
    int64_t xs[2] = {N, K}, ws[2] = {V, K}, bs = V;
    tc_tensor *x = rnd(CPU, 2, xs, dt, -1, 1, NULL), *w = rnd(CPU, 2, ws, dt, -0.3, 0.3, NULL);
    tc_tensor *b = rnd(CPU, 1, &bs, dt, -1, 1, NULL);
    int64_t *tv = malloc(sizeof(int64_t) * N);
    for (int64_t i = 0; tv && i < N; i++)
        tv[i] = i % 97 == 5 ? -100 : (int64_t)(tc_test_rand() % V); /* a few ignored rows */
    tc_tensor *tg = targets(CPU, 1, N, tv);
    free(tv);
    chain c = run_chain(x, w, b, tg);
    linear_reference(x, w, NULL, c.y, "linear into padded rows");
    linear_reference(x, w, b, c.yb, "linear with a bias into padded rows");
    /* the same calls on dense tensors: the same values */
    tc_tensor *yd = dense(c.y), *loss = NULL, *dl = NULL, *dx = NULL, *dw = NULL;
    CHECK_OK(tc_nn_cross_entropy_fused_autocast(yd, tg, -100, TC_REDUCTION_MEAN, 1.0, &loss, &dl));
    CHECK(tc_tensor_is_contiguous(dl)); /* laid out as its logits */
    same("cross_entropy's loss over padded logits", c.loss, loss);
    same("cross_entropy's gradient over padded logits", c.dl, dl);
    tc_tensor *dld = dense(c.dl);
    unsigned want = TC_NN_LINEAR_GRAD_X | TC_NN_LINEAR_GRAD_WEIGHT;
    CHECK_OK(tc_nn_linear_backward(dld, x, w, want, &dx, &dw, NULL));
    same("linear_backward grad_x from padded rows", c.dx, dx);
    same("linear_backward grad_weight from padded rows", c.dw, dw);
    tc_tensor *all[] = {yd, loss, dl, dld, dx, dw};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tc_tensor_release(all[i]);
    *out = c;
    in[0] = x, in[1] = w, in[2] = b, in[3] = tg;
}

/* What stays dense: fewer than 2^22 elements, float32, a width of whole
 * vectors. */
static void stays_dense(tc_device dev)
{
    int64_t xs[2] = {8, K}, small[2] = {V, K}, wide[2] = {4096, K};
    struct {
        tc_dtype dt;
        int64_t rows;
        const int64_t *ws;
    } cases[] = {{TC_BFLOAT16, 8, small}, {TC_FLOAT32, N, small}, {TC_FLOAT16, N, wide}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        xs[0] = cases[i].rows;
        tc_tensor *x = rnd(dev, 2, xs, cases[i].dt, -1, 1, NULL);
        tc_tensor *w = rnd(dev, 2, cases[i].ws, cases[i].dt, -1, 1, NULL), *y = NULL;
        CHECK_OK(tc_nn_linear(x, w, NULL, &y));
        CHECK(tc_tensor_is_contiguous(y));
        tc_tensor_release(x), tc_tensor_release(w), tc_tensor_release(y);
    }
}

/* Rows that repeat one row (an expanded [1, C], row stride 0) are no
 * padded rows: cross_entropy and linear's backward read them through dense
 * copies, with the dense copies' values. */
static void repeated_rows(tc_device dev)
{
    int64_t one[2] = {1, 40}, many[2] = {6, 40}, xs[2] = {6, 8}, ws[2] = {40, 8};
    int64_t tv[6] = {0, 5, 39, 7, -100, 12};
    tc_tensor *row = rnd(dev, 2, one, TC_FLOAT32, -2, 2, NULL), *e = NULL, *ed = NULL;
    CHECK_OK(tc_tensor_expand(row, 2, many, &e));
    ed = dense(e);
    tc_tensor *tg = targets(dev, 1, 6, tv), *l1 = NULL, *d1 = NULL, *l2 = NULL, *d2 = NULL;
    CHECK_OK(tc_nn_cross_entropy_fused(e, tg, -100, TC_REDUCTION_MEAN, 1.0, &l1, &d1));
    CHECK_OK(tc_nn_cross_entropy_fused(ed, tg, -100, TC_REDUCTION_MEAN, 1.0, &l2, &d2));
    same("cross_entropy over repeated rows: loss", l1, l2);
    same("cross_entropy over repeated rows: gradient", d1, d2);
    tc_tensor *x = rnd(dev, 2, xs, TC_FLOAT32, -1, 1, NULL),
              *w = rnd(dev, 2, ws, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *dx1 = NULL, *dw1 = NULL, *dx2 = NULL, *dw2 = NULL;
    unsigned want = TC_NN_LINEAR_GRAD_X | TC_NN_LINEAR_GRAD_WEIGHT;
    CHECK_OK(tc_nn_linear_backward(e, x, w, want, &dx1, &dw1, NULL));
    CHECK_OK(tc_nn_linear_backward(ed, x, w, want, &dx2, &dw2, NULL));
    same("linear_backward from repeated rows: grad_x", dx1, dx2);
    same("linear_backward from repeated rows: grad_weight", dw1, dw2);
    tc_tensor *all[] = {row, e, ed, tg, l1, d1, l2, d2, x, w, dx1, dw1, dx2, dw2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tc_tensor_release(all[i]);
}

int main(void)
{
    tc_test_init();
    stays_dense(CPU);
    repeated_rows(CPU);
    tc_dtype dts[2] = {TC_FLOAT16, TC_BFLOAT16};
    for (int d = 0; d < 2; d++) {
        chain c;
        tc_tensor *in[4];
        cpu_chain(dts[d], &c, in);
        if (tc_is_available()) {
            tc_tensor *g[4];
            for (int i = 0; i < 4; i++)
                CHECK_OK(tc_tensor_to(in[i], GPU, tc_tensor_dtype(in[i]), false, &g[i]));
            chain gc = run_chain(g[0], g[1], g[2], g[3]);
            (void)near_tensor("GPU linear into padded rows", gc.y, c.y, 3);
            (void)near_tensor("GPU linear with a bias into padded rows", gc.yb, c.yb, 3);
            (void)near_tensor("GPU cross_entropy's loss", gc.loss, c.loss, 3);
            (void)near_tensor("GPU cross_entropy's padded gradient", gc.dl, c.dl, 3);
            (void)near_tensor("GPU linear_backward grad_x", gc.dx, c.dx, 3);
            (void)near_tensor("GPU linear_backward grad_weight", gc.dw, c.dw, 3);
            release_chain(&gc);
            for (int i = 0; i < 4; i++)
                tc_tensor_release(g[i]);
        }
        release_chain(&c);
        for (int i = 0; i < 4; i++)
            tc_tensor_release(in[i]);
    }
    if (tc_is_available()) {
        stays_dense(GPU);
        repeated_rows(GPU);
    } else {
        printf("no GPU: the GPU half is not run\n");
    }
    return TC_TEST_DONE();
}
