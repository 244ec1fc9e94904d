/* nn_backward.h's element-wise and row-wise section: every backward
 * against (a) a central finite difference of tcuda's own forward on float64
 * CPU tensors (loss = sum(forward(x) * g) for a fixed random g) and (b) an
 * independent double-precision loop written here, in every floating dtype
 * (16-bit ones within the forward ops' tolerances); cross_entropy's edge
 * cases (ignored rows, every row ignored, no rows); 16-bit results against
 * float32's on the same inputs, rounded; bad input for every function,
 * nothing written. The same runs on the GPU when there is one, then the GPU
 * against the CPU on the same inputs for every dtype, the sums over rows
 * run twice for the same bits, and a GPU target out of range reported by
 * the next wait. */
#include "nn_check.h"

/* sum(y * g) of a float64 result, which is released. */
static double dot_out(tc_tensor *y, const double *g)
{
    double *v = tc_test_values(y), s = 0;
    int64_t n = tc_tensor_numel(y);
    for (int64_t i = 0; v && i < n; i++)
        s += v[i] * (g ? g[i] : 1);
    free(v);
    tc_tensor_release(y);
    return s;
}

/* The central difference of f over x[0..n) (perturbed in place, then put
 * back) against the analytic gradient `ana`. */
static void fd_check(const char *what, double *x, int64_t n, double (*f)(void *), void *ctx,
                     const double *ana)
{
    const double h = 1e-5; /* roundoff of sums of ~10^4 terms / h stays near 1e-7 */
    bool ok = true;
    for (int64_t i = 0; i < n && ok; i++) {
        double keep = x[i];
        x[i] = keep + h;
        double up = f(ctx);
        x[i] = keep - h;
        double down = f(ctx);
        x[i] = keep;
        double num = (up - down) / (2 * h);
        if (fabs(num - ana[i]) > 1e-6 * (1 + fabs(ana[i]))) {
            fprintf(stderr, "%s: finite difference of element %lld is %.12g, backward %.12g\n",
                    what, (long long)i, num, ana[i]);
            ok = false;
        }
    }
    CHECK(ok);
}

/* ---- gelu ------------------------------------------------------------------------ */

static double ref_gelu_grad(double x, bool tanh_approx)
{
    if (!tanh_approx) /* Phi(x) + x phi(x) */
        return 0.5 * erfc(-x / sqrt(2.0)) + x * exp(-x * x / 2) / sqrt(2 * 3.14159265358979323846);
    double k = sqrt(2 / 3.14159265358979323846), u = k * (x + 0.044715 * x * x * x);
    double sech = 1 / cosh(u);
    return 0.5 * (1 + tanh(u)) + 0.5 * x * sech * sech * k * (1 + 3 * 0.044715 * x * x);
}

typedef struct gelu_ctx {
    int64_t n;
    double *x;
    const double *g;
    tc_gelu_approximate ap;
} gelu_ctx;

static double gelu_loss(void *p)
{
    gelu_ctx *c = p;
    tc_tensor *x = tensor_of(CPU, TC_FLOAT64, 1, &c->n, c->x), *y = NULL;
    CHECK_OK(tc_tensor_gelu(x, c->ap, &y));
    tc_tensor_release(x);
    return dot_out(y, c->g);
}

static void test_gelu(tc_device dev)
{
    const int64_t sz[2] = {7, 45}, n = 7 * 45;
    for (int ap = 0; ap < 2; ap++) {
        double *x = rand_doubles(n, -5, 5), *g = rand_doubles(n, -1, 1);
        for (int d = 0; d < 4; d++) {
            tc_dtype dt = FLOATS[d];
            tc_tensor *tx = tensor_of(dev, dt, 2, sz, x), *tg = tensor_of(dev, dt, 2, sz, g),
                      *gi = NULL;
            double *xv = tc_test_values(tx), *gv = tc_test_values(tg);
            double *ref = malloc(sizeof(double) * (size_t)n);
            for (int64_t i = 0; i < n; i++)
                ref[i] = gv[i] * ref_gelu_grad(xv[i], ap);
            CHECK_OK(tc_nn_gelu_backward(tg, tx, (tc_gelu_approximate)ap, &gi));
            near_ref(ap ? "gelu_backward tanh" : "gelu_backward", dt, gi, ref, n, 2);
            if (dt == TC_FLOAT64 && dev.type == TC_CPU) {
                double *ana = tc_test_values(gi);
                gelu_ctx c = {n, x, g, (tc_gelu_approximate)ap};
                fd_check("gelu_backward", x, n, gelu_loss, &c, ana);
                free(ana);
            }
            tc_tensor_release(tx);
            tc_tensor_release(tg);
            tc_tensor_release(gi);
            free(xv), free(gv), free(ref);
        }
        free(x), free(g);
    }
}

/* ---- softmax and log_softmax ------------------------------------------------------ */

typedef struct sm_ctx {
    int nd;
    const int64_t *sz;
    int dim;
    bool lg;
    double *x;
    const double *g;
} sm_ctx;

static double sm_loss(void *p)
{
    sm_ctx *c = p;
    tc_tensor *x = tensor_of(CPU, TC_FLOAT64, c->nd, c->sz, c->x), *y = NULL;
    CHECK_OK((c->lg ? tc_nn_log_softmax : tc_nn_softmax)(x, c->dim, &y));
    tc_tensor_release(x);
    return dot_out(y, c->g);
}

/* The backward from the output y, over [outer, n, inner] in double. */
static void ref_sm_bwd(const double *g, const double *y, double *out, int64_t outer, int64_t n,
                       int64_t inner, bool lg)
{
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double s = 0;
            for (int64_t j = 0; j < n; j++) {
                int64_t k = (o * n + j) * inner + i;
                s += lg ? g[k] : g[k] * y[k];
            }
            for (int64_t j = 0; j < n; j++) {
                int64_t k = (o * n + j) * inner + i;
                out[k] = lg ? g[k] - exp(y[k]) * s : y[k] * (g[k] - s);
            }
        }
}

static void test_softmax(tc_device dev)
{
    struct {
        int nd;
        int64_t sz[3];
        int dim;
    } cases[] = {/* the last: rows of 64 KiB and more, which the GPU stages */
                 {2, {5, 37}, 1}, {3, {2, 6, 5}, 1}, {2, {3, 1500}, -1},
                 {1, {9}, 0},     {0, {0}, 0},       {2, {3, 40009}, 1}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        for (int lg = 0; lg < 2; lg++) {
            int nd = cases[k].nd, dim = cases[k].dim < 0 ? cases[k].dim + nd : cases[k].dim;
            const int64_t *sz = cases[k].sz;
            int64_t n = numel_of(nd, sz), outer = 1, len = nd ? sz[dim] : 1, inner = 1;
            for (int i = 0; i < dim; i++)
                outer *= sz[i];
            for (int i = dim + 1; i < nd; i++)
                inner *= sz[i];
            double *x = rand_doubles(n, -3, 3), *g = rand_doubles(n, -1, 1);
            for (int d = 0; d < 4; d++) {
                tc_dtype dt = FLOATS[d];
                tc_tensor *tx = tensor_of(dev, dt, nd, sz, x), *tg = tensor_of(dev, dt, nd, sz, g);
                tc_tensor *y = NULL, *gi = NULL;
                CHECK_OK((lg ? tc_nn_log_softmax : tc_nn_softmax)(tx, cases[k].dim, &y));
                double *yv = tc_test_values(y), *gv = tc_test_values(tg);
                double *ref = malloc(sizeof(double) * (size_t)n);
                ref_sm_bwd(gv, yv, ref, outer, len, inner, lg);
                CHECK_OK((lg ? tc_nn_log_softmax_backward
                             : tc_nn_softmax_backward)(tg, y, cases[k].dim, &gi));
                near_ref(lg ? "log_softmax_backward" : "softmax_backward", dt, gi, ref, n, 4);
                if (dt == TC_FLOAT64 && dev.type == TC_CPU && n <= 10000) { /* O(n^2) */
                    double *ana = tc_test_values(gi);
                    sm_ctx c = {nd, sz, cases[k].dim, lg, x, g};
                    fd_check(lg ? "log_softmax_backward" : "softmax_backward", x, n, sm_loss, &c,
                             ana);
                    free(ana);
                }
                tc_tensor_release(tx), tc_tensor_release(tg);
                tc_tensor_release(y), tc_tensor_release(gi);
                free(yv), free(gv), free(ref);
            }
            free(x), free(g);
        }
}

/* ---- layer_norm ------------------------------------------------------------------- */

/* Row statistics in double: mean and 1 / sqrt(var + eps). */
static void ref_stats(const double *x, int64_t m, int64_t n, double eps, double *mean, double *rstd)
{
    for (int64_t r = 0; r < m; r++) {
        double s = 0, q = 0;
        for (int64_t j = 0; j < n; j++)
            s += x[r * n + j];
        s /= (double)n;
        for (int64_t j = 0; j < n; j++)
            q += (x[r * n + j] - s) * (x[r * n + j] - s);
        mean[r] = s;
        rstd[r] = 1 / sqrt(q / (double)n + eps);
    }
}

/* The backward as the Jacobian's product, independent of the library's
 * closed form: d xhat_k / d x_j = rstd (delta_jk - 1/n - xhat_k xhat_j / n). */
static void ref_ln_bwd(const double *g, const double *x, const double *w, int64_t m, int64_t n,
                       double eps, double *dx, double *dw, double *db)
{
    double *mean = malloc(sizeof(double) * (size_t)m), *rstd = malloc(sizeof(double) * (size_t)m);
    double *xh = malloc(sizeof(double) * (size_t)n);
    ref_stats(x, m, n, eps, mean, rstd);
    for (int64_t j = 0; j < n; j++)
        dw[j] = db[j] = 0;
    for (int64_t r = 0; r < m; r++) {
        const double *gr = g + r * n;
        for (int64_t j = 0; j < n; j++) {
            xh[j] = (x[r * n + j] - mean[r]) * rstd[r];
            dw[j] += gr[j] * xh[j];
            db[j] += gr[j];
        }
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t k = 0; k < n; k++) {
                double jac = rstd[r] * ((j == k) - 1.0 / (double)n - xh[k] * xh[j] / (double)n);
                s += gr[k] * (w ? w[k] : 1) * jac;
            }
            dx[r * n + j] = s;
        }
    }
    free(mean), free(rstd), free(xh);
}

typedef struct ln_ctx {
    int nd;
    const int64_t *sz;
    int nshape;
    double *x, *w, *b;
    const double *g;
    double eps;
} ln_ctx;

static double ln_loss(void *p)
{
    ln_ctx *c = p;
    const int64_t *ns = c->sz + c->nd - c->nshape;
    tc_tensor *x = tensor_of(CPU, TC_FLOAT64, c->nd, c->sz, c->x), *y = NULL;
    tc_tensor *w = c->w ? tensor_of(CPU, TC_FLOAT64, c->nshape, ns, c->w) : NULL;
    tc_tensor *b = c->b ? tensor_of(CPU, TC_FLOAT64, c->nshape, ns, c->b) : NULL;
    CHECK_OK(tc_nn_layer_norm(x, c->nshape, ns, w, b, c->eps, &y));
    tc_tensor_release(x), tc_tensor_release(w), tc_tensor_release(b);
    return dot_out(y, c->g);
}

/* native_layer_norm's result and statistics against tc_nn_layer_norm and
 * the reference. */
static void check_native(tc_device dev, tc_dtype dt, const tc_tensor *tx, const tc_tensor *tw,
                         const tc_tensor *tb, int nd, const int64_t *sz, int nshape, double eps,
                         const tc_tensor *mean, const tc_tensor *rstd, const tc_tensor *y)
{
    const int64_t *ns = sz + nd - nshape;
    int64_t n = numel_of(nshape, ns), m = numel_of(nd, sz) / (n ? n : 1);
    tc_tensor *y2 = NULL;
    CHECK_OK(tc_nn_layer_norm(tx, nshape, ns, tw, tb, eps, &y2));
    double *want = tc_test_values(y2), *xv = tc_test_values(tx);
    near_ref("native_layer_norm's output", dt, y, want, m * n, 2);
    tc_dtype sd = dt == TC_FLOAT64 ? TC_FLOAT64 : TC_FLOAT32;
    CHECK(tc_tensor_dtype(mean) == sd && tc_tensor_dtype(rstd) == sd);
    CHECK(tc_tensor_ndim(mean) == nd && tc_tensor_size(mean, nd - 1) == 1);
    CHECK(tc_tensor_size(mean, 0) == (nd > nshape ? sz[0] : 1));
    double *rm = malloc(sizeof(double) * (size_t)m), *rr = malloc(sizeof(double) * (size_t)m);
    ref_stats(xv, m, n, eps, rm, rr);
    near_ref("native_layer_norm's mean", sd, mean, rm, m, 1);
    near_ref("native_layer_norm's rstd", sd, rstd, rr, m, 1);
    tc_tensor_release(y2);
    free(want), free(xv), free(rm), free(rr);
    (void)dev;
}

static void test_layer_norm(tc_device dev)
{
    struct {
        int nd;
        int64_t sz[3];
        int nshape;
        bool affine;
    } cases[] = {{2, {6, 10}, 1, true},
                 {3, {2, 3, 8}, 2, true},
                 {2, {4, 9}, 1, false},
                 {2, {3, 1500}, 1, true},
                 {2, {2100, 40}, 1, true}};
    const double eps = 1e-5;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int nd = cases[k].nd, nshape = cases[k].nshape;
        const int64_t *sz = cases[k].sz, *ns = sz + nd - nshape;
        int64_t n = numel_of(nshape, ns), all = numel_of(nd, sz), m = all / n;
        double *x = rand_doubles(all, -2, 3), *g = rand_doubles(all, -1, 1);
        double *w = cases[k].affine ? rand_doubles(n, 0.5, 1.5) : NULL;
        double *b = cases[k].affine ? rand_doubles(n, -1, 1) : NULL;
        for (int d = 0; d < 4; d++) {
            tc_dtype dt = FLOATS[d];
            tc_tensor *tx = tensor_of(dev, dt, nd, sz, x), *tg = tensor_of(dev, dt, nd, sz, g);
            tc_tensor *tw = w ? tensor_of(dev, dt, nshape, ns, w) : NULL;
            tc_tensor *tb = b ? tensor_of(dev, dt, nshape, ns, b) : NULL;
            tc_tensor *y = NULL, *mean = NULL, *rstd = NULL, *dx = NULL, *dw = NULL, *db = NULL;
            CHECK_OK(tc_nn_native_layer_norm(tx, nshape, ns, tw, tb, eps, &y, &mean, &rstd));
            check_native(dev, dt, tx, tw, tb, nd, sz, nshape, eps, mean, rstd, y);
            CHECK_OK(tc_nn_layer_norm_backward(tg, tx, nshape, ns, mean, rstd, tw, &dx, &dw, &db));
            double *xv = tc_test_values(tx), *gv = tc_test_values(tg);
            double *wv = tw ? tc_test_values(tw) : NULL;
            double *rdx = malloc(sizeof(double) * (size_t)all);
            double *rdw = malloc(sizeof(double) * (size_t)n),
                   *rdb = malloc(sizeof(double) * (size_t)n);
            ref_ln_bwd(gv, xv, wv, m, n, eps, rdx, rdw, rdb);
            near_ref("layer_norm_backward dx", dt, dx, rdx, all, 8);
            near_ref("layer_norm_backward dweight", dt, dw, rdw, n, 8);
            near_ref("layer_norm_backward dbias", dt, db, rdb, n, 8);
            if (dt == TC_FLOAT64 && dev.type == TC_CPU && all <= 100) {
                ln_ctx c = {nd, sz, nshape, x, w, b, g, eps};
                double *a = tc_test_values(dx);
                fd_check("layer_norm_backward dx", x, all, ln_loss, &c, a);
                free(a);
                if (w) {
                    a = tc_test_values(dw);
                    fd_check("layer_norm_backward dweight", w, n, ln_loss, &c, a);
                    free(a);
                    a = tc_test_values(db);
                    fd_check("layer_norm_backward dbias", b, n, ln_loss, &c, a);
                    free(a);
                }
            }
            /* any output may be left out; the others are the same */
            tc_tensor *dx2 = NULL, *db2 = NULL;
            CHECK_OK(
                tc_nn_layer_norm_backward(tg, tx, nshape, ns, mean, rstd, tw, &dx2, NULL, NULL));
            near_ref("layer_norm_backward dx alone", dt, dx2, rdx, all, 8);
            CHECK_OK(
                tc_nn_layer_norm_backward(tg, tx, nshape, ns, mean, rstd, tw, NULL, NULL, &db2));
            near_ref("layer_norm_backward dbias alone", dt, db2, rdb, n, 8);
            tc_tensor *ts[] = {tx, tg, tw, tb, y, mean, rstd, dx, dw, db, dx2, db2};
            for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
                tc_tensor_release(ts[i]);
            free(xv), free(gv), free(wv), free(rdx), free(rdw), free(rdb);
        }
        free(x), free(g), free(w), free(b);
    }
}

/* layer_norm_backward_into: overwritten and accumulated, contiguous and
 * strided (dx a narrowed view: its neighbours untouched), grad_output in
 * x's dtype and, for float32 x, in float16 and bfloat16; against the double
 * reference plus what the outputs held. Then its refusals, which change
 * nothing. */
static void test_layer_norm_into(tc_device dev)
{
    struct {
        int64_t m, n;
    } cases[] = {{6, 10}, {3, 1500}, {2100, 40}, {5, 256}, {70, 384}};
    /* 256 and 384: the quad kernels; 70 rows: chunks of 32, 32 and 6 rows for
     * the GPU's dweight and dbias parts taken with dx */
    const double eps = 1e-5;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int64_t m = cases[k].m, n = cases[k].n, all = m * n, sz[2] = {m, n}, wide[2] = {m, 2 * n};
        double *x = rand_doubles(all, -2, 3), *g = rand_doubles(all, -1, 1),
               *w = rand_doubles(n, 0.5, 1.5);
        double *b = rand_doubles(n, -1, 1), *d0 = rand_doubles(2 * all, -1, 1),
               *w0 = rand_doubles(2 * n, -1, 1);
        for (int d = 0; d < 4; d++) {
            tc_dtype dt = FLOATS[d], gts[3] = {dt, TC_BFLOAT16, TC_FLOAT16};
            for (int gi = 0; gi < (dt == TC_FLOAT32 ? 3 : 1); gi++) {
                tc_tensor *tx = tensor_of(dev, dt, 2, sz, x),
                          *tg = tensor_of(dev, gts[gi], 2, sz, g);
                tc_tensor *tw = tensor_of(dev, dt, 1, &n, w), *tb = tensor_of(dev, dt, 1, &n, b);
                tc_tensor *y = NULL, *mean = NULL, *rstd = NULL;
                CHECK_OK(tc_nn_native_layer_norm(tx, 1, &n, tw, tb, eps, &y, &mean, &rstd));
                double *xv = tc_test_values(tx), *gv = tc_test_values(tg), *wv = tc_test_values(tw);
                double *rdx = malloc(sizeof(double) * (size_t)all * 2);
                double *rdw = malloc(sizeof(double) * (size_t)n * 2), *rdb = rdw + n;
                ref_ln_bwd(gv, xv, wv, m, n, eps, rdx, rdw, rdb);
                for (int acc = 0; acc < 2; acc++) {
                    /* contiguous: dx [m, n], dweight and dbias from w0's halves */
                    tc_tensor *dx = tensor_of(dev, dt, 2, sz, d0),
                              *dw = tensor_of(dev, dt, 1, &n, w0);
                    tc_tensor *db = tensor_of(dev, dt, 1, &n, w0 + n);
                    double *h[3] = {tc_test_values(dx), tc_test_values(dw), tc_test_values(db)};
                    CHECK_OK(tc_nn_layer_norm_backward_into(tg, tx, 1, &n, mean, rstd, tw, acc, dx,
                                                            dw, db, NULL));
                    const double *r[3] = {rdx, rdw, rdb};
                    tc_tensor *o[3] = {dx, dw, db};
                    int64_t cnt[3] = {all, n, n};
                    for (int i = 0; i < 3; i++) {
                        for (int64_t j = 0; j < cnt[i]; j++)
                            h[i][j] = (acc ? h[i][j] : 0) + r[i][j];
                        near_ref("layer_norm_backward_into", dt, o[i], h[i], cnt[i], 8);
                        free(h[i]);
                    }
                    /* dx a view of every other half-row: its neighbours stay */
                    tc_tensor *base = tensor_of(dev, dt, 2, wide, d0), *view = NULL;
                    CHECK_OK(tc_tensor_narrow(base, 1, n, n, &view));
                    double *want = tc_test_values(base);
                    for (int64_t i = 0; i < m; i++)
                        for (int64_t j = 0; j < n; j++)
                            want[i * 2 * n + n + j] = (acc ? want[i * 2 * n + n + j] : 0) +
                                                      rdx[i * n + j];
                    CHECK_OK(tc_nn_layer_norm_backward_into(tg, tx, 1, &n, mean, rstd, tw, acc,
                                                            view, NULL, NULL, NULL));
                    near_ref("layer_norm_backward_into, strided dx", dt, base, want, 2 * all, 8);
                    free(want);
                    tc_tensor *ts[] = {dx, dw, db, base, view};
                    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
                        tc_tensor_release(ts[i]);
                }
                tc_tensor *ts[] = {tx, tg, tw, tb, y, mean, rstd};
                for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
                    tc_tensor_release(ts[i]);
                free(xv), free(gv), free(wv), free(rdx), free(rdw);
            }
        }
        free(x), free(g), free(w), free(b), free(d0), free(w0);
    }
    /* refusals: nothing is written */
    int64_t sz[2] = {4, 8}, n = 8, bad[2] = {4, 7};
    double *v = rand_doubles(32, -1, 1);
    tc_tensor *tx = tensor_of(dev, TC_FLOAT64, 2, sz, v),
              *tg = tensor_of(dev, TC_FLOAT64, 2, sz, v);
    tc_tensor *tg16 = tensor_of(dev, TC_BFLOAT16, 2, sz, v),
              *dx = tensor_of(dev, TC_FLOAT64, 2, sz, v);
    tc_tensor *dxs = tensor_of(dev, TC_FLOAT64, 2, bad, v),
              *dxf = tensor_of(dev, TC_FLOAT32, 2, sz, v);
    tc_tensor *y = NULL, *mean = NULL, *rstd = NULL;
    CHECK_OK(tc_nn_native_layer_norm(tx, 1, &n, NULL, NULL, 1e-5, &y, &mean, &rstd));
    CHECK_STATUS(tc_nn_layer_norm_backward_into(tg, tx, 1, &n, mean, rstd, NULL, true, NULL, NULL,
                                                NULL, NULL),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_layer_norm_backward_into(tg, tx, 1, &n, mean, rstd, NULL, true, dxs, NULL,
                                                NULL, NULL),
                 TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_layer_norm_backward_into(tg, tx, 1, &n, mean, rstd, NULL, true, dxf, NULL,
                                                NULL, NULL),
                 TC_ERROR_DTYPE);
    CHECK_STATUS(tc_nn_layer_norm_backward_into(tg16, tx, 1, &n, mean, rstd, NULL, true, dx, NULL,
                                                NULL, NULL),
                 TC_ERROR_DTYPE); /* 16-bit grad_output for float32 x only */
    CHECK_STATUS(
        tc_nn_layer_norm_backward_into(tg, tx, 1, &n, mean, rstd, NULL, true, tx, NULL, NULL, NULL),
        TC_ERROR_INVALID_ARGUMENT); /* dx is x */
    CHECK_STATUS(tc_nn_layer_norm_backward(tg16, tx, 1, &n, mean, rstd, NULL, &y, NULL, NULL),
                 TC_ERROR_DTYPE); /* the plain backward takes one dtype */
    near_ref("layer_norm_backward_into refused: dx unchanged", TC_FLOAT64, dx, v, 32, 0);
    tc_tensor *ts[] = {tx, tg, tg16, dx, dxs, dxf, y, mean, rstd};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        tc_tensor_release(ts[i]);
    free(v);
}

/* ---- cross_entropy ---------------------------------------------------------------- */

/* dlogits in double for targets t (ignore: -1) with gradient g[i] (or g[0]). */
static void ref_ce_bwd(const double *x, const int64_t *t, int64_t n, int64_t c, tc_reduction red,
                       const double *g, bool per_row, double *out)
{
    int64_t kept = 0;
    for (int64_t i = 0; i < n; i++)
        kept += t[i] != -1;
    for (int64_t i = 0; i < n; i++) {
        const double *r = x + i * c;
        double m = -INFINITY, s = 0, gi = g[per_row ? i : 0];
        if (red == TC_REDUCTION_MEAN)
            gi /= (double)kept;
        for (int64_t j = 0; j < c; j++)
            m = fmax(m, r[j]);
        for (int64_t j = 0; j < c; j++)
            s += exp(r[j] - m);
        for (int64_t j = 0; j < c; j++)
            out[i * c + j] = t[i] == -1 ? 0 : (exp(r[j] - m) / s - (j == t[i])) * gi;
    }
}

/* cross_entropy's loss in double: each row's for NONE, else their sum or
 * their mean over the rows not ignored (target -1). */
static void ref_ce_loss(const double *x, const int64_t *t, int64_t n, int64_t c, tc_reduction red,
                        double *out)
{
    double sum = 0;
    int64_t kept = 0;
    for (int64_t i = 0; i < n; i++) {
        const double *r = x + i * c;
        double m = -INFINITY, s = 0, l = 0;
        for (int64_t j = 0; j < c; j++)
            m = fmax(m, r[j]);
        for (int64_t j = 0; j < c; j++)
            s += exp(r[j] - m);
        if (t[i] != -1)
            l = m + log(s) - r[t[i]], kept++;
        if (red == TC_REDUCTION_NONE)
            out[i] = l;
        sum += l;
    }
    if (red != TC_REDUCTION_NONE)
        out[0] = red == TC_REDUCTION_MEAN ? sum / (double)kept : sum;
}

/* tc_nn_cross_entropy_fused_autocast on 16-bit logits tx (values xv): a
 * float32 loss and dlogits of tx's dtype, both against double references;
 * other dtypes refused with nothing written. */
static void check_ce_autocast(const tc_tensor *tx, const tc_tensor *tt, const double *xv,
                              const int64_t *t, int64_t n, int64_t c, tc_reduction red,
                              double scale)
{
    tc_dtype dt = tc_tensor_dtype(tx);
    tc_tensor *loss = NULL, *dl = NULL;
    if (dt != TC_FLOAT16 && dt != TC_BFLOAT16) {
        CHECK_STATUS(tc_nn_cross_entropy_fused_autocast(tx, tt, -1, red, scale, &loss, &dl),
                     TC_ERROR_DTYPE);
        CHECK(loss == NULL && dl == NULL);
        return;
    }
    bool none = red == TC_REDUCTION_NONE;
    double *lref = malloc(sizeof(double) * (size_t)n),
           *ref = malloc(sizeof(double) * (size_t)(n * c));
    CHECK_OK(tc_nn_cross_entropy_fused_autocast(tx, tt, -1, red, scale, &loss, &dl));
    ref_ce_loss(xv, t, n, c, red, lref);
    near_ref("cross_entropy_fused_autocast's loss", TC_FLOAT32, loss, lref, none ? n : 1, 2);
    ref_ce_bwd(xv, t, n, c, red, &scale, false, ref);
    near_ref("cross_entropy_fused_autocast's dlogits", dt, dl, ref, n * c, 2);
    tc_tensor_release(loss), tc_tensor_release(dl);
    free(lref), free(ref);
}

typedef struct ce_ctx {
    int64_t n, c;
    double *x;
    const int64_t *t;
    tc_reduction red;
    const double *g; /* per row for NONE, else g[0] */
} ce_ctx;

static double ce_loss(void *p)
{
    ce_ctx *k = p;
    tc_tensor *x = tensor_of(CPU, TC_FLOAT64, 2, (int64_t[]){k->n, k->c}, k->x), *y = NULL;
    tc_tensor *t = targets(CPU, 1, k->n, k->t);
    CHECK_OK(tc_nn_cross_entropy(x, t, -1, k->red, &y));
    tc_tensor_release(x), tc_tensor_release(t);
    if (k->red == TC_REDUCTION_NONE)
        return dot_out(y, k->g);
    return dot_out(y, NULL) * k->g[0];
}

static void test_cross_entropy(tc_device dev)
{
    const int64_t shapes[3][2] = {{6, 5}, {300, 50}, {40, 2000}};
    const tc_reduction reds[3] = {TC_REDUCTION_MEAN, TC_REDUCTION_SUM, TC_REDUCTION_NONE};
    for (int s = 0; s < 3; s++) {
        const int64_t n = shapes[s][0], c = shapes[s][1], sz[2] = {n, c};
        int64_t *t = malloc(sizeof(int64_t) * (size_t)n);
        for (int64_t i = 0; i < n; i++)
            t[i] = i % 5 == 2 ? -1 : (int64_t)(tc_test_rand() % (uint64_t)c);
        double *x = rand_doubles(n * c, -4, 4), *gr = rand_doubles(n, -1, 1);
        for (int ri = 0; ri < 3; ri++) {
            tc_reduction red = reds[ri];
            bool none = red == TC_REDUCTION_NONE;
            double scale = 0.75;
            for (int d = 0; d < 4; d++) {
                tc_dtype dt = FLOATS[d];
                tc_tensor *tx = tensor_of(dev, dt, 2, sz, x), *tt = targets(dev, 1, n, t);
                tc_tensor *loss = NULL, *dl = NULL, *want = NULL, *dl2 = NULL, *tg = NULL;
                double *xv = tc_test_values(tx), *ref = malloc(sizeof(double) * (size_t)(n * c));
                /* fused: the loss as tc_nn_cross_entropy's, dlogits for grad_scale */
                CHECK_OK(tc_nn_cross_entropy_fused(tx, tt, -1, red, scale, &loss, &dl));
                CHECK_OK(tc_nn_cross_entropy(tx, tt, -1, red, &want));
                double *wv = tc_test_values(want);
                near_ref("cross_entropy_fused's loss", dt, loss, wv, none ? n : 1, 2);
                CHECK(tc_tensor_ndim(loss) == (none ? 1 : 0) && tc_tensor_dtype(loss) == dt);
                ref_ce_bwd(xv, t, n, c, red, &scale, false, ref);
                near_ref("cross_entropy_fused's dlogits", dt, dl, ref, n * c, 2);
                check_ce_autocast(tx, tt, xv, t, n, c, red, scale);
                /* the plain backward: grad_loss per row for NONE, else 0-d */
                double *gq = none ? gr : &scale;
                tg = tensor_of(dev, dt, none ? 1 : 0, &n, gq);
                double *gv = tc_test_values(tg);
                ref_ce_bwd(xv, t, n, c, red, gv, none, ref);
                CHECK_OK(tc_nn_cross_entropy_backward(tg, tx, tt, -1, red, &dl2));
                near_ref("cross_entropy_backward", dt, dl2, ref, n * c, 2);
                if (dt == TC_FLOAT64 && dev.type == TC_CPU && n * c <= 100) {
                    double *a = tc_test_values(dl2);
                    ce_ctx k = {n, c, x, t, red, gq};
                    fd_check("cross_entropy_backward", x, n * c, ce_loss, &k, a);
                    free(a);
                }
                tc_tensor *ts[] = {tx, tt, loss, dl, want, dl2, tg};
                for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
                    tc_tensor_release(ts[i]);
                free(xv), free(ref), free(wv), free(gv);
            }
        }
        free(t), free(x), free(gr);
    }
}

/* Every row ignored: MEAN's loss is NaN and dlogits all zeros; no rows:
 * an empty dlogits, a sum of 0 and a mean of NaN; logits [C] with a 0-d
 * target; the loss not asked for. */
static void test_cross_entropy_edges(tc_device dev)
{
    for (int d = 0; d < 4; d++) {
        tc_dtype dt = FLOATS[d];
        const int64_t sz[2] = {3, 4}, ign[3] = {-100, -100, -100};
        tc_tensor *x = rnd(dev, 2, sz, dt, -1, 1, NULL), *t = targets(dev, 1, 3, ign);
        tc_tensor *loss = NULL, *dl = NULL;
        CHECK_OK(tc_nn_cross_entropy_fused(x, t, -100, TC_REDUCTION_MEAN, 1, &loss, &dl));
        double nan = NAN, zeros[12] = {0};
        near_ref("cross_entropy_fused, all ignored: loss", dt, loss, &nan, 1, 1);
        near_ref("cross_entropy_fused, all ignored: dlogits", dt, dl, zeros, 12, 1);
        tc_tensor_release(loss), tc_tensor_release(dl), tc_tensor_release(x), tc_tensor_release(t);
        loss = dl = NULL;
        tc_tensor *e = NULL, *te = NULL;
        CHECK_OK(tc_tensor_zeros(2, (int64_t[]){0, 5}, dt, dev, &e));
        CHECK_OK(tc_tensor_zeros(1, (int64_t[]){0}, TC_INT64, dev, &te));
        CHECK_OK(tc_nn_cross_entropy_fused(e, te, -100, TC_REDUCTION_SUM, 1, &loss, &dl));
        double zero = 0;
        near_ref("cross_entropy_fused, no rows: sum", dt, loss, &zero, 1, 1);
        CHECK(tc_tensor_numel(dl) == 0 && tc_tensor_ndim(dl) == 2);
        tc_tensor_release(loss), tc_tensor_release(dl);
        CHECK_OK(tc_nn_cross_entropy_fused(e, te, -100, TC_REDUCTION_MEAN, 1, &loss, &dl));
        near_ref("cross_entropy_fused, no rows: mean", dt, loss, &nan, 1, 1);
        tc_tensor_release(loss), tc_tensor_release(dl), tc_tensor_release(e), tc_tensor_release(te);
        /* logits [C], target 0-d, no loss wanted */
        double xv[4] = {0.5, -1, 2, 0.25}, ref[4];
        int64_t c = 4, tv = 2;
        tc_tensor *x1 = tensor_of(dev, dt, 1, &c, xv), *t0 = NULL;
        CHECK_OK(tc_tensor_from_data(&tv, 0, NULL, TC_INT64, dev, &t0));
        dl = NULL;
        CHECK_OK(tc_nn_cross_entropy_fused(x1, t0, -100, TC_REDUCTION_MEAN, 2, NULL, &dl));
        double *xr = tc_test_values(x1), two = 2;
        ref_ce_bwd(xr, &tv, 1, 4, TC_REDUCTION_SUM, &two, false, ref);
        near_ref("cross_entropy_fused of one row", dt, dl, ref, 4, 2);
        CHECK(tc_tensor_ndim(dl) == 1);
        tc_tensor_release(x1), tc_tensor_release(t0), tc_tensor_release(dl);
        free(xr);
    }
}

/* ---- 16-bit against float32 ------------------------------------------------------ */

/* Every function's results on inputs x, g (and weight w) of one dtype, in a
 * fixed order: r[0..11]. */
static void all_results(const tc_tensor *x, const tc_tensor *g, const tc_tensor *w, int64_t n,
                        const tc_tensor *t, tc_tensor **r)
{
    tc_tensor *y = NULL, *mean = NULL, *rstd = NULL;
    CHECK_OK(tc_nn_gelu_backward(g, x, TC_GELU_APPROXIMATE_NONE, &r[0]));
    CHECK_OK(tc_nn_gelu_backward(g, x, TC_GELU_APPROXIMATE_TANH, &r[1]));
    CHECK_OK(tc_nn_softmax(x, 1, &y));
    CHECK_OK(tc_nn_softmax_backward(g, y, 1, &r[2]));
    tc_tensor_release(y);
    CHECK_OK(tc_nn_log_softmax(x, 1, &y));
    CHECK_OK(tc_nn_log_softmax_backward(g, y, 1, &r[3]));
    tc_tensor_release(y);
    CHECK_OK(tc_nn_native_layer_norm(x, 1, &n, w, NULL, 1e-5, &r[4], &mean, &rstd));
    CHECK_OK(tc_nn_layer_norm_backward(g, x, 1, &n, mean, rstd, w, &r[5], &r[6], &r[7]));
    tc_tensor_release(mean), tc_tensor_release(rstd);
    CHECK_OK(tc_nn_cross_entropy_fused(x, t, -1, TC_REDUCTION_MEAN, 1, &r[8], &r[9]));
    CHECK_OK(tc_nn_cross_entropy_fused(x, t, -1, TC_REDUCTION_NONE, 1, &r[10], &r[11]));
}

/* float16 and bfloat16 results against float32's on the same (rounded)
 * inputs, rounded to the 16-bit dtype: within the forward ops' tolerances. */
static void test_half_vs_float(tc_device dev)
{
    const int64_t sz[2] = {12, 40}, n = 40, tv[12] = {0, 5, -1, 39, 7, 7, 1, 2, 3, -1, 20, 11};
    tc_tensor *t = targets(dev, 1, 12, tv);
    for (int d = 0; d < 2; d++) {
        tc_dtype dt = FLOATS[d];
        tc_tensor *x = rnd(dev, 2, sz, dt, -3, 3, NULL), *g = rnd(dev, 2, sz, dt, -1, 1, NULL);
        tc_tensor *w = rnd(dev, 1, &n, dt, 0.5, 1.5, NULL), *xf = NULL, *gf = NULL, *wf = NULL;
        CHECK_OK(tc_tensor_to(x, dev, TC_FLOAT32, false, &xf));
        CHECK_OK(tc_tensor_to(g, dev, TC_FLOAT32, false, &gf));
        CHECK_OK(tc_tensor_to(w, dev, TC_FLOAT32, false, &wf));
        tc_tensor *rh[12] = {NULL}, *rf[12] = {NULL};
        all_results(x, g, w, n, t, rh);
        all_results(xf, gf, wf, n, t, rf);
        for (int i = 0; i < 12; i++) {
            tc_tensor *rounded = NULL;
            CHECK_OK(tc_tensor_to(rf[i], dev, dt, false, &rounded));
            double *want = tc_test_values(rounded);
            char what[64];
            snprintf(what, sizeof what, "16-bit result %d against float32's", i);
            near_ref(what, dt, rh[i], want, tc_tensor_numel(rounded), 2);
            free(want);
            tc_tensor_release(rounded), tc_tensor_release(rh[i]), tc_tensor_release(rf[i]);
        }
        tc_tensor *ts[] = {x, g, w, xf, gf, wf};
        for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
            tc_tensor_release(ts[i]);
    }
    tc_tensor_release(t);
}

/* ---- bad input --------------------------------------------------------------------- */

static void test_bad_input(tc_device dev)
{
    tc_tensor *x = rnd(dev, 2, (int64_t[]){3, 4}, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *x5 = rnd(dev, 2, (int64_t[]){3, 5}, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *xd = rnd(dev, 2, (int64_t[]){3, 4}, TC_FLOAT64, -1, 1, NULL);
    tc_tensor *xh = rnd(dev, 2, (int64_t[]){3, 4}, TC_FLOAT16, -1, 1, NULL);
    tc_tensor *xi = NULL, *dead = NULL, *out = NULL, *o2 = NULL, *o3 = NULL;
    CHECK_OK(tc_tensor_zeros(2, (int64_t[]){3, 4}, TC_INT32, dev, &xi));
    CHECK_OK(tc_tensor_zeros(1, (int64_t[]){2}, TC_FLOAT32, dev, &dead));
    tc_tensor_release(dead);
    /* gelu_backward */
    CHECK_STATUS(tc_nn_gelu_backward(NULL, x, 0, &out), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_gelu_backward(x, NULL, 0, &out), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_gelu_backward(x, dead, 0, &out), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_nn_gelu_backward(dead, x, 0, &out), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_nn_gelu_backward(xi, xi, 0, &out), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_nn_gelu_backward(xd, x, 0, &out), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_nn_gelu_backward(x5, x, 0, &out), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_gelu_backward(x, x, (tc_gelu_approximate)7, &out),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_gelu_backward(x, x, 0, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "tc_nn_gelu_backward") == tc_last_error());
    /* softmax_backward and log_softmax_backward */
    CHECK_STATUS(tc_nn_softmax_backward(NULL, x, 1, &out), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_softmax_backward(x, dead, 1, &out), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_nn_softmax_backward(xi, xi, 1, &out), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_nn_softmax_backward(xh, x, 1, &out), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_nn_softmax_backward(x5, x, 1, &out), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_softmax_backward(x, x, 2, &out), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_log_softmax_backward(x, x, -3, &out), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_log_softmax_backward(x, x, 1, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "tc_nn_log_softmax_backward") == tc_last_error());
    /* native_layer_norm */
    const int64_t ns[1] = {4}, ns5[1] = {5};
    tc_tensor *w = rnd(dev, 1, ns, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *w5 = rnd(dev, 1, ns5, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *wd = rnd(dev, 1, ns, TC_FLOAT64, -1, 1, NULL);
    CHECK_STATUS(tc_nn_native_layer_norm(NULL, 1, ns, w, w, 1e-5, &out, &o2, &o3),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_native_layer_norm(dead, 1, ns, w, w, 1e-5, &out, &o2, &o3),
                 TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_nn_native_layer_norm(xi, 1, ns, NULL, NULL, 1e-5, &out, &o2, &o3),
                 TC_ERROR_DTYPE);
    CHECK_STATUS(tc_nn_native_layer_norm(x, 1, ns5, NULL, NULL, 1e-5, &out, &o2, &o3),
                 TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_native_layer_norm(x, 0, ns, NULL, NULL, 1e-5, &out, &o2, &o3),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_native_layer_norm(x, 1, NULL, NULL, NULL, 1e-5, &out, &o2, &o3),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_native_layer_norm(x, 1, ns, w5, NULL, 1e-5, &out, &o2, &o3), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_native_layer_norm(x, 1, ns, NULL, wd, 1e-5, &out, &o2, &o3), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_nn_native_layer_norm(x, 1, ns, w, w, 1e-5, NULL, &o2, &o3),
                 TC_ERROR_INVALID_ARGUMENT);
    /* layer_norm_backward: statistics of the right dtype and shape */
    tc_tensor *mean = NULL, *rstd = NULL, *y = NULL, *mh = NULL, *rh = NULL, *yh = NULL;
    CHECK_OK(tc_nn_native_layer_norm(x, 1, ns, w, w, 1e-5, &y, &mean, &rstd));
    CHECK_OK(tc_nn_native_layer_norm(xh, 1, ns, NULL, NULL, 1e-5, &yh, &mh, &rh));
    tc_tensor *m3 = rnd(dev, 1, (int64_t[]){3}, TC_FLOAT32, 0, 1, NULL);
    tc_tensor *m4 = rnd(dev, 1, (int64_t[]){4}, TC_FLOAT32, 0, 1, NULL);
    tc_tensor *m32 = rnd(dev, 2, (int64_t[]){3, 2}, TC_FLOAT32, 0, 1, NULL);
    tc_tensor *mh16 = rnd(dev, 1, (int64_t[]){3}, TC_FLOAT16, 0, 1, NULL);
    CHECK_OK(tc_nn_layer_norm_backward(x, x, 1, ns, m3, m3, NULL, &out, NULL, NULL)); /* [M] */
    tc_tensor_release(out);
    out = NULL;
    CHECK_OK(tc_nn_layer_norm_backward(xh, xh, 1, ns, mh, rh, NULL, &out, NULL, NULL));
    tc_tensor_release(out);
    out = NULL;
    CHECK_STATUS(tc_nn_layer_norm_backward(NULL, x, 1, ns, mean, rstd, w, &out, &o2, &o3),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_layer_norm_backward(x, NULL, 1, ns, mean, rstd, w, &out, &o2, &o3),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_layer_norm_backward(x, x, 1, ns, NULL, rstd, w, &out, &o2, &o3),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_layer_norm_backward(x, x, 1, ns, mean, dead, w, &out, &o2, &o3),
                 TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_nn_layer_norm_backward(x, x, 1, ns, m4, rstd, w, &out, &o2, &o3),
                 TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_layer_norm_backward(x, x, 1, ns, m32, rstd, w, &out, &o2, &o3),
                 TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_layer_norm_backward(xh, xh, 1, ns, mh16, rh, NULL, &out, &o2, &o3),
                 TC_ERROR_DTYPE); /* 16-bit x: float32 statistics */
    CHECK_STATUS(tc_nn_layer_norm_backward(x5, x, 1, ns, mean, rstd, w, &out, &o2, &o3),
                 TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_layer_norm_backward(xd, x, 1, ns, mean, rstd, w, &out, &o2, &o3),
                 TC_ERROR_DTYPE);
    CHECK_STATUS(tc_nn_layer_norm_backward(x, x, 1, ns, mean, rstd, w5, &out, &o2, &o3),
                 TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_layer_norm_backward(x, x, 1, ns5, mean, rstd, w, &out, &o2, &o3),
                 TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_layer_norm_backward(x, x, 9, ns, mean, rstd, w, &out, &o2, &o3),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_layer_norm_backward(x, x, 1, ns, mean, rstd, w, NULL, NULL, NULL),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_layer_norm_backward(xi, xi, 1, ns, mean, rstd, NULL, &out, &o2, &o3),
                 TC_ERROR_DTYPE);
    /* layer_norm_backward_into: the same checks, and its outputs' */
    tc_tensor *dxo = NULL, *dwo = NULL;
    CHECK_OK(tc_tensor_zeros_like(x, &dxo));
    CHECK_OK(tc_tensor_zeros_like(w, &dwo));
    CHECK_STATUS(
        tc_nn_layer_norm_backward_into(NULL, x, 1, ns, mean, rstd, w, true, dxo, dwo, NULL, NULL),
        TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(
        tc_nn_layer_norm_backward_into(x, NULL, 1, ns, mean, rstd, w, true, dxo, dwo, NULL, NULL),
        TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(
        tc_nn_layer_norm_backward_into(x, x, 1, ns, mean, dead, w, true, dxo, dwo, NULL, NULL),
        TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(
        tc_nn_layer_norm_backward_into(x, x, 1, ns, mean, rstd, w, true, dead, dwo, NULL, NULL),
        TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(
        tc_nn_layer_norm_backward_into(x, x, 1, ns5, mean, rstd, w, true, dxo, dwo, NULL, NULL),
        TC_ERROR_SHAPE);
    CHECK_STATUS(
        tc_nn_layer_norm_backward_into(x, x, 9, ns, mean, rstd, w, true, dxo, dwo, NULL, NULL),
        TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(
        tc_nn_layer_norm_backward_into(x, x, 1, ns, mean, rstd, w, true, dwo, NULL, NULL, NULL),
        TC_ERROR_SHAPE); /* dx of weight's shape */
    CHECK_STATUS(
        tc_nn_layer_norm_backward_into(x, x, 1, ns, mean, rstd, w, true, dxo, dxo, NULL, NULL),
        TC_ERROR_SHAPE);
    CHECK_STATUS(
        tc_nn_layer_norm_backward_into(x, x, 1, ns, mean, rstd, w, true, dxo, w, NULL, NULL),
        TC_ERROR_INVALID_ARGUMENT);    /* dweight is the weight */
    tc_tensor *row = NULL, *wv = NULL; /* dweight a view of dx's first row: they overlap */
    CHECK_OK(tc_tensor_narrow(dxo, 0, 0, 1, &row));
    CHECK_OK(tc_tensor_view(row, 1, ns, &wv));
    tc_tensor_release(row);
    CHECK_STATUS(
        tc_nn_layer_norm_backward_into(x, x, 1, ns, mean, rstd, w, true, dxo, wv, NULL, NULL),
        TC_ERROR_INVALID_ARGUMENT);
    tc_tensor_release(wv);
    /* cross_entropy_fused and cross_entropy_backward */
    const int64_t tv[3] = {0, 3, -1}, bad[3] = {0, 4, 1};
    tc_tensor *t = targets(dev, 1, 3, tv), *tb = targets(dev, 1, 3, bad), *t2 = NULL, *t4 = NULL;
    tc_tensor *ti = NULL;
    CHECK_OK(tc_tensor_zeros(1, (int64_t[]){2}, TC_INT64, dev, &t2));
    CHECK_OK(tc_tensor_zeros(1, (int64_t[]){3}, TC_INT32, dev, &ti));
    CHECK_OK(tc_tensor_zeros(2, (int64_t[]){3, 1}, TC_INT64, dev, &t4));
    tc_tensor *g0 = rnd(dev, 0, NULL, TC_FLOAT32, 1, 2, NULL);
    tc_tensor *g3 = rnd(dev, 1, (int64_t[]){3}, TC_FLOAT32, 1, 2, NULL);
    tc_tensor *g0d = rnd(dev, 0, NULL, TC_FLOAT64, 1, 2, NULL);
    tc_tensor *x3 = rnd(dev, 3, (int64_t[]){3, 4, 2}, TC_FLOAT32, -1, 1, NULL);
    const tc_reduction M = TC_REDUCTION_MEAN;
    CHECK_STATUS(tc_nn_cross_entropy_fused(NULL, t, -1, M, 1, &out, &o2),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_cross_entropy_fused(x, NULL, -1, M, 1, &out, &o2),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_cross_entropy_fused(dead, t, -1, M, 1, &out, &o2), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_nn_cross_entropy_fused(xi, t, -1, M, 1, &out, &o2), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_nn_cross_entropy_fused(x, ti, -1, M, 1, &out, &o2), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_nn_cross_entropy_fused(x, t2, -1, M, 1, &out, &o2), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_cross_entropy_fused(x, t4, -1, M, 1, &out, &o2), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_cross_entropy_fused(x3, t, -1, M, 1, &out, &o2), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_cross_entropy_fused(x, t, -1, (tc_reduction)9, 1, &out, &o2),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_cross_entropy_fused(x, t, -1, M, NAN, &out, &o2), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_cross_entropy_fused(x, t, -1, M, INFINITY, &out, &o2),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_cross_entropy_fused(x, t, -1, M, 1, &out, NULL), TC_ERROR_INVALID_ARGUMENT);
    /* the autocast form: 16-bit logits only, the rest as above */
    tc_tensor *xb = rnd(dev, 2, (int64_t[]){3, 4}, TC_BFLOAT16, -1, 1, NULL);
    CHECK_STATUS(tc_nn_cross_entropy_fused_autocast(NULL, t, -1, M, 1, &out, &o2),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_cross_entropy_fused_autocast(xb, NULL, -1, M, 1, &out, &o2),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_cross_entropy_fused_autocast(dead, t, -1, M, 1, &out, &o2),
                 TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_nn_cross_entropy_fused_autocast(x, t, -1, M, 1, &out, &o2), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_nn_cross_entropy_fused_autocast(xb, t2, -1, M, 1, &out, &o2), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_cross_entropy_fused_autocast(xb, t, -1, M, NAN, &out, &o2),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_cross_entropy_fused_autocast(xb, t, -1, M, 1, &out, NULL),
                 TC_ERROR_INVALID_ARGUMENT);
    tc_tensor_release(xb);
    if (dev.type == TC_CPU) { /* a GPU reports it later (test_gpu_target) */
        CHECK_STATUS(tc_nn_cross_entropy_fused(x, tb, -1, M, 1, &out, &o2),
                     TC_ERROR_INVALID_ARGUMENT);
        CHECK(strstr(tc_last_error(), "out of range") != NULL);
        CHECK_STATUS(tc_nn_cross_entropy_backward(g0, x, tb, -1, M, &out),
                     TC_ERROR_INVALID_ARGUMENT);
    }
    CHECK_STATUS(tc_nn_cross_entropy_backward(NULL, x, t, -1, M, &out), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_cross_entropy_backward(dead, x, t, -1, M, &out), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_nn_cross_entropy_backward(g0, NULL, t, -1, M, &out), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_cross_entropy_backward(g0d, x, t, -1, M, &out), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_nn_cross_entropy_backward(g3, x, t, -1, M, &out), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_cross_entropy_backward(g0, x, t, -1, TC_REDUCTION_NONE, &out),
                 TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_cross_entropy_backward(g3, x, t2, -1, TC_REDUCTION_NONE, &out),
                 TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_cross_entropy_backward(g0, x, t, -1, (tc_reduction)-1, &out),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_cross_entropy_backward(g0, x, t, -1, M, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "tc_nn_cross_entropy_backward") == tc_last_error());
    CHECK(out == NULL && o2 == NULL && o3 == NULL);
    tc_tensor *all[] = {x,  x5,  xd,   xh, xi, w,  w5, wd, mean, rstd, y,   mh, rh,  yh, m3,
                        m4, m32, mh16, t,  tb, t2, t4, ti, g0,   g3,   g0d, x3, dxo, dwo};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tc_tensor_release(all[i]);
}

/* ---- the GPU against the CPU ----------------------------------------------------- */

/* a (GPU) and b (CPU) results of dtype dt: equal within the tolerance. */
static void near_cpu(const char *what, tc_dtype dt, const tc_tensor *gpu, const tc_tensor *cpu,
                     double mul)
{
    double *ref = tc_test_values(cpu);
    near_ref(what, dt, gpu, ref, tc_tensor_numel(cpu), mul);
    free(ref);
}

/* The same inputs through both devices, every dtype, shapes that reach the
 * warp and the block paths and several chunks of rows; rows of an odd
 * length (2053, and cross_entropy's 3001) start off 16-byte boundaries, so
 * the block path's packs meet ragged heads and tails; rows of 768 take
 * layer_norm's quad kernels. */
static void test_parity(void)
{
    const int64_t shapes[5][2] = {{33, 100}, {5, 3000}, {4100, 64}, {7, 2053}, {40, 768}};
    for (int s = 0; s < 5; s++)
        for (int d = 0; d < 4; d++) {
            tc_dtype dt = FLOATS[d];
            const int64_t *sz = shapes[s], n = sz[1];
            tc_tensor *xc = rnd(CPU, 2, sz, dt, -3, 3, NULL),
                      *gc = rnd(CPU, 2, sz, dt, -1, 1, NULL);
            tc_tensor *wc = rnd(CPU, 1, &n, dt, 0.5, 1.5, NULL),
                      *bc = rnd(CPU, 1, &n, dt, -1, 1, NULL);
            tc_tensor *xg = NULL, *gg = NULL, *wg = NULL, *bg = NULL;
            CHECK_OK(tc_tensor_to(xc, GPU, dt, false, &xg));
            CHECK_OK(tc_tensor_to(gc, GPU, dt, false, &gg));
            CHECK_OK(tc_tensor_to(wc, GPU, dt, false, &wg));
            CHECK_OK(tc_tensor_to(bc, GPU, dt, false, &bg));
            tc_tensor *r[2][12] = {{NULL}};
            for (int k = 0; k < 2; k++) { /* 0: CPU, 1: GPU */
                tc_tensor *x = k ? xg : xc, *g = k ? gg : gc, *w = k ? wg : wc, *b = k ? bg : bc;
                tc_tensor **o = r[k];
                CHECK_OK(tc_nn_gelu_backward(g, x, TC_GELU_APPROXIMATE_NONE, &o[0]));
                CHECK_OK(tc_nn_gelu_backward(g, x, TC_GELU_APPROXIMATE_TANH, &o[1]));
                CHECK_OK(tc_nn_softmax(x, 1, &o[2]));
                CHECK_OK(tc_nn_softmax_backward(g, o[2], 1, &o[3]));
                CHECK_OK(tc_nn_log_softmax(x, 0, &o[4])); /* along an outer dim: columns */
                CHECK_OK(tc_nn_log_softmax_backward(g, o[4], 0, &o[5]));
                CHECK_OK(tc_nn_native_layer_norm(x, 1, &n, w, b, 1e-5, &o[6], &o[7], &o[8]));
                CHECK_OK(
                    tc_nn_layer_norm_backward(g, x, 1, &n, o[7], o[8], w, &o[9], &o[10], &o[11]));
            }
            const char *names[12] = {"gelu_backward",
                                     "gelu_backward tanh",
                                     "softmax",
                                     "softmax_backward",
                                     "log_softmax",
                                     "log_softmax_backward (dim 0)",
                                     "native_layer_norm",
                                     "native_layer_norm mean",
                                     "native_layer_norm rstd",
                                     "layer_norm_backward dx",
                                     "layer_norm_backward dweight",
                                     "layer_norm_backward dbias"};
            for (int i = 0; i < 12; i++)
                near_cpu(names[i], tc_tensor_dtype(r[0][i]), r[1][i], r[0][i], i >= 9 ? 8 : 4);
            /* the sums over rows: the same bits a second time */
            tc_tensor *dw = NULL, *db = NULL;
            CHECK_OK(
                tc_nn_layer_norm_backward(gg, xg, 1, &n, r[1][7], r[1][8], wg, NULL, &dw, &db));
            double *a1 = tc_test_values(dw), *a2 = tc_test_values(r[1][10]);
            double *b1 = tc_test_values(db), *b2 = tc_test_values(r[1][11]);
            bool same = a1 && a2 && b1 && b2;
            for (int64_t j = 0; same && j < n; j++)
                same = memcmp(&a1[j], &a2[j], 8) == 0 && memcmp(&b1[j], &b2[j], 8) == 0;
            CHECK(same);
            free(a1), free(a2), free(b1), free(b2);
            tc_tensor_release(dw), tc_tensor_release(db);
            for (int k = 0; k < 2; k++)
                for (int i = 0; i < 12; i++)
                    tc_tensor_release(r[k][i]);
            tc_tensor *ts[] = {xc, gc, wc, bc, xg, gg, wg, bg};
            for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
                tc_tensor_release(ts[i]);
        }
    /* cross_entropy: rows of a warp and of a block, some ignored */
    for (int s = 0; s < 2; s++)
        for (int d = 0; d < 4; d++) {
            tc_dtype dt = FLOATS[d];
            int64_t n = s ? 70 : 2000, c = s ? 3001 : 300, sz[2] = {n, c};
            int64_t *tv = malloc(sizeof(int64_t) * (size_t)n);
            for (int64_t i = 0; i < n; i++)
                tv[i] = i % 9 == 4 ? -100 : (int64_t)(tc_test_rand() % (uint64_t)c);
            tc_tensor *xc = rnd(CPU, 2, sz, dt, -5, 5, NULL), *xg = NULL;
            CHECK_OK(tc_tensor_to(xc, GPU, dt, false, &xg));
            tc_tensor *tc_ = targets(CPU, 1, n, tv), *tg = targets(GPU, 1, n, tv);
            for (int red = 0; red < 3; red++) {
                tc_tensor *lc = NULL, *dc = NULL, *lg = NULL, *dg = NULL;
                CHECK_OK(
                    tc_nn_cross_entropy_fused(xc, tc_, -100, (tc_reduction)red, 1.5, &lc, &dc));
                CHECK_OK(tc_nn_cross_entropy_fused(xg, tg, -100, (tc_reduction)red, 1.5, &lg, &dg));
                near_cpu("cross_entropy_fused loss", dt, lg, lc, 4);
                near_cpu("cross_entropy_fused dlogits", dt, dg, dc, 2);
                tc_tensor_release(lc), tc_tensor_release(dc);
                tc_tensor_release(lg), tc_tensor_release(dg);
            }
            tc_tensor_release(xc), tc_tensor_release(xg);
            tc_tensor_release(tc_), tc_tensor_release(tg);
            free(tv);
        }
}

/* A GPU target out of range: the call returns, its row's loss and gradient
 * are NaN, and the next wait reports it. */
static void test_gpu_target(void)
{
    const int64_t tv[3] = {1, 17, 2};
    tc_tensor *x = rnd(GPU, 2, (int64_t[]){3, 5}, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *t = targets(GPU, 1, 3, tv), *loss = NULL, *dl = NULL;
    CHECK_OK(tc_nn_cross_entropy_fused(x, t, -100, TC_REDUCTION_NONE, 1, &loss, &dl));
    CHECK_STATUS(tc_synchronize(-1), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "out of range") != NULL);
    double *l = tc_test_values(loss), *d = tc_test_values(dl);
    CHECK(l && !isnan(l[0]) && isnan(l[1]) && !isnan(l[2]));
    CHECK(d && isnan(d[5]) && isnan(d[9]) && !isnan(d[0]) && !isnan(d[10]));
    free(l), free(d);
    tc_tensor_release(x), tc_tensor_release(t), tc_tensor_release(loss), tc_tensor_release(dl);
}

/* Tensors of two devices: TC_ERROR_DEVICE_MISMATCH. */
static void test_devices(void)
{
    const int64_t sz[2] = {2, 3}, n = 3, tv[2] = {0, 1};
    tc_tensor *xc = rnd(CPU, 2, sz, TC_FLOAT32, -1, 1, NULL),
              *xg = rnd(GPU, 2, sz, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *wg = rnd(GPU, 1, &n, TC_FLOAT32, -1, 1, NULL), *tg = targets(GPU, 1, 2, tv);
    tc_tensor *tcp = targets(CPU, 1, 2, tv), *mean = NULL, *rstd = NULL, *y = NULL, *out = NULL;
    CHECK_OK(tc_nn_native_layer_norm(xg, 1, &n, NULL, NULL, 1e-5, &y, &mean, &rstd));
    CHECK_STATUS(tc_nn_gelu_backward(xc, xg, 0, &out), TC_ERROR_DEVICE_MISMATCH);
    CHECK_STATUS(tc_nn_softmax_backward(xg, xc, 1, &out), TC_ERROR_DEVICE_MISMATCH);
    CHECK_STATUS(tc_nn_native_layer_norm(xc, 1, &n, wg, NULL, 1e-5, &out, NULL, NULL),
                 TC_ERROR_DEVICE_MISMATCH);
    CHECK_STATUS(tc_nn_layer_norm_backward(xc, xg, 1, &n, mean, rstd, NULL, &out, NULL, NULL),
                 TC_ERROR_DEVICE_MISMATCH);
    CHECK_STATUS(tc_nn_cross_entropy_fused(xg, tcp, -100, TC_REDUCTION_SUM, 1, NULL, &out),
                 TC_ERROR_DEVICE_MISMATCH);
    CHECK(out == NULL);
    tc_tensor *ts[] = {xc, xg, wg, tg, tcp, mean, rstd, y};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        tc_tensor_release(ts[i]);
}

static void run_all(tc_device dev)
{
    test_gelu(dev);
    test_softmax(dev);
    test_layer_norm(dev);
    test_layer_norm_into(dev);
    test_cross_entropy(dev);
    test_cross_entropy_edges(dev);
    test_half_vs_float(dev);
    test_bad_input(dev);
}

int main(void)
{
    tc_test_init();
    run_all(CPU);
    if (tc_is_available()) {
        run_all(GPU);
        test_parity();
        test_devices();
        test_gpu_target();
        CHECK_OK(tc_synchronize(-1));
    } else {
        printf("no GPU: the GPU checks are skipped\n");
    }
    return TC_TEST_DONE();
}
