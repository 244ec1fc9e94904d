/* nn.h: every operation against an independent double-precision loop written
 * here, in every floating dtype (16-bit ones within their tolerance), for
 * shapes that reach each kernel path (a warp per row, a block per row, a row
 * in shared memory, rows too long for it, a softmax along an inner dim), plus
 * bad input for every function. The checks run on the CPU, then the same on
 * the GPU when there is one. The GPU-against-CPU parity pass, each row
 * kernel path forced and linear in a graph are test_nn_cuda. */
#include "nn_check.h"

static bool same_shape(const tc_tensor *t, int nd, const int64_t *sz)
{
    bool ok = t && tc_tensor_ndim(t) == nd;
    for (int i = 0; ok && i < nd; i++)
        ok = tc_tensor_size(t, i) == sz[i];
    return ok;
}

/* ---- softmax ----------------------------------------------------------------------- */

static void ref_softmax(const double *x, double *y, int nd, const int64_t *sz, int dim, bool lg)
{
    int64_t outer = 1, n = nd ? sz[dim] : 1, inner = 1;
    for (int i = 0; i < dim; i++)
        outer *= sz[i];
    for (int i = dim + 1; i < nd; i++)
        inner *= sz[i];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const double *r = x + o * n * inner + i;
            double m = -INFINITY, s = 0;
            for (int64_t j = 0; j < n; j++)
                m = fmax(m, r[j * inner]);
            for (int64_t j = 0; j < n; j++)
                s += exp(r[j * inner] - m);
            for (int64_t j = 0; j < n; j++) {
                double v = r[j * inner] - m;
                y[o * n * inner + i + j * inner] = lg ? v - log(s) : exp(v) / s;
            }
        }
}

static void test_softmax(tc_device dev)
{
    struct {
        int nd;
        int64_t sz[3];
        int dim;
    } cases[] = {{2, {3, 37}, 1},    {3, {2, 5, 7}, 1},  {2, {4, 1024}, -1}, {2, {3, 1000}, 1},
                 {2, {2, 3000}, 1},  {2, {2, 20000}, 1}, {0, {0}, 0},        {2, {0, 5}, 1},
                 {3, {2, 3, 64}, 0}, {1, {1}, -1}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int d = 0; d < 4; d++)
            for (int lg = 0; lg < 2; lg++) {
                tc_dtype dt = FLOATS[d];
                int nd = cases[c].nd,
                    dim = cases[c].dim < 0 ? cases[c].dim + (nd ? nd : 1) : cases[c].dim;
                double *x;
                tc_tensor *t = rnd(dev, nd, cases[c].sz, dt, -4, 4, &x), *y = NULL;
                int64_t n = numel_of(nd, cases[c].sz);
                double *ref = malloc(sizeof(double) * (size_t)(n + 1));
                ref_softmax(x, ref, nd, cases[c].sz, dim, lg);
                CHECK_OK((lg ? tc_nn_log_softmax : tc_nn_softmax)(t, cases[c].dim, &y));
                CHECK(same_shape(y, nd, cases[c].sz));
                near_ref(lg ? "log_softmax" : "softmax", dt, y, ref, n, 1);
                if (!lg && nd == 2 && cases[c].sz[0] > 0) { /* rows sum to 1 */
                    double *v = tc_test_values(y), s = 0;
                    for (int64_t j = 0; j < cases[c].sz[1]; j++)
                        s += v[j];
                    CHECK(fabs(s - 1) < 1e-2);
                    free(v);
                }
                tc_tensor_release(t);
                tc_tensor_release(y);
                free(x);
                free(ref);
            }
    /* large values stay finite: the maximum is subtracted first */
    int64_t sz[2] = {2, 50};
    for (int d = 0; d < 4; d++) {
        double *x;
        tc_tensor *t = rnd(dev, 2, sz, FLOATS[d], 1e4, 2e4, &x), *y = NULL;
        double ref[100];
        ref_softmax(x, ref, 2, sz, 1, true);
        CHECK_OK(tc_nn_log_softmax(t, 1, &y));
        double *v = tc_test_values(y);
        bool finite = true;
        for (int i = 0; i < 100; i++)
            finite = finite && isfinite(v[i]) && v[i] <= 0;
        CHECK(finite);
        near_ref("log_softmax of large values", FLOATS[d], y, ref, 100, 2e4 / 4);
        free(v);
        free(x);
        tc_tensor_release(t);
        tc_tensor_release(y);
    }
}

/* -inf, +inf and NaN in each kernel path (a warp, a block, shared memory, a
 * long row, an inner dim): an all -inf row (a fully masked one) gives NaN as PyTorch,
 * some -inf give 0 (log_softmax -inf) there, one NaN or +inf makes the
 * whole row NaN. */
static void test_softmax_special(tc_device dev)
{
    /* a warp per row (scalar and 16-byte loads), a block, a row in shared
     * memory, a row too long for it (read twice) */
    const int64_t lens[] = {37, 40, 3000, 20000, 130001};
    for (int li = 0; li < 6; li++)
        for (int d = 0; d < 4; d++)
            for (int lg = 0; lg < 2; lg++) {
                bool cols = li == 5; /* softmax over dim 0 of [n, 5] */
                int64_t n = cols ? 40 : lens[li], sz[2] = {cols ? n : 5, cols ? 5 : n};
                int64_t total = 5 * n;
                double *x = malloc(sizeof(double) * (size_t)total);
                double *ref = malloc(sizeof(double) * (size_t)total);
                for (int64_t i = 0; i < total; i++) {
                    int64_t row = cols ? i % 5 : i / n, j = cols ? i / 5 : i % n;
                    double v = (double)((i * 7919) % 13) / 4 - 1.5;
                    if (row == 0 || (row == 1 && j % 2 == 1))
                        v = -INFINITY;
                    if (row == 2 && j == n / 2)
                        v = NAN;
                    if (row == 3 && j == n - 1)
                        v = INFINITY;
                    x[i] = v;
                }
                ref_softmax(x, ref, 2, sz, cols ? 0 : 1, lg);
                tc_tensor *h = NULL, *t = NULL, *y = NULL;
                CHECK_OK(tc_tensor_from_data(x, 2, sz, TC_FLOAT64, CPU, &h));
                CHECK_OK(tc_tensor_to(h, dev, FLOATS[d], false, &t));
                CHECK_OK((lg ? tc_nn_log_softmax : tc_nn_softmax)(t, cols ? 0 : 1, &y));
                near_ref(lg ? "log_softmax of -inf/inf/NaN rows" : "softmax of -inf/inf/NaN rows",
                         FLOATS[d], y, ref, total, 1);
                tc_tensor_release(h), tc_tensor_release(t), tc_tensor_release(y);
                free(x), free(ref);
            }
}

/* ---- layer_norm and rms_norm ------------------------------------------------------ */

static void ref_norm(bool layer, const double *x, const double *w, const double *b, double eps,
                     int64_t m, int64_t n, double *y)
{
    for (int64_t i = 0; i < m; i++) {
        const double *r = x + i * n;
        double mean = 0, var = 0;
        if (layer) {
            for (int64_t j = 0; j < n; j++)
                mean += r[j];
            mean /= (double)n;
        }
        for (int64_t j = 0; j < n; j++)
            var += (r[j] - mean) * (r[j] - mean);
        var /= (double)n;
        for (int64_t j = 0; j < n; j++)
            y[i * n + j] = (r[j] - mean) / sqrt(var + eps) * (w ? w[j] : 1) + (b ? b[j] : 0);
    }
}

static void test_norms(tc_device dev)
{
    struct {
        int nd, nshape;
        int64_t sz[3];
        bool w, b;
    } cases[] = {{3, 2, {3, 4, 8}, true, true},   {2, 1, {5, 768}, true, false},
                 {2, 1, {2, 5000}, false, false}, {2, 1, {2, 20001}, true, true},
                 {2, 1, {6, 33}, false, true},    {2, 1, {0, 8}, true, true}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int d = 0; d < 4; d++)
            for (int layer = 0; layer < 2; layer++) {
                tc_dtype dt = FLOATS[d];
                int nd = cases[c].nd, ns = cases[c].nshape;
                const int64_t *shape = cases[c].sz + nd - ns;
                int64_t n = numel_of(ns, shape), m = numel_of(nd - ns, cases[c].sz);
                double *x, *w = NULL, *b = NULL;
                tc_tensor *t = rnd(dev, nd, cases[c].sz, dt, -3, 5, &x), *y = NULL;
                tc_tensor *tw = cases[c].w ? rnd(dev, ns, shape, dt, 0.5, 1.5, &w) : NULL;
                tc_tensor *tb = cases[c].b && layer ? rnd(dev, ns, shape, dt, -1, 1, &b) : NULL;
                double *ref = malloc(sizeof(double) * (size_t)(m * n + 1));
                if (layer) {
                    ref_norm(true, x, w, b, 1e-5, m, n, ref);
                    CHECK_OK(tc_nn_layer_norm(t, ns, shape, tw, tb, 1e-5, &y));
                    near_ref("layer_norm", dt, y, ref, m * n, 2);
                } else {
                    /* eps=None: float32's epsilon, float64's for float64 */
                    double e = dt == TC_FLOAT64 ? 2.220446049250313e-16 : 1.1920928955078125e-07;
                    ref_norm(false, x, w, NULL, e, m, n, ref);
                    CHECK_OK(tc_nn_rms_norm(t, ns, shape, tw, NULL, &y));
                    near_ref("rms_norm", dt, y, ref, m * n, 2);
                    tc_tensor_release(y);
                    y = NULL;
                    double eps = 0.25;
                    ref_norm(false, x, w, NULL, eps, m, n, ref);
                    CHECK_OK(tc_nn_rms_norm(t, ns, shape, tw, &eps, &y));
                    near_ref("rms_norm eps", dt, y, ref, m * n, 2);
                }
                CHECK(same_shape(y, nd, cases[c].sz));
                tc_tensor_release(t);
                tc_tensor_release(tw);
                tc_tensor_release(tb);
                tc_tensor_release(y);
                free(x), free(w), free(b), free(ref);
            }
}

/* layer_norm of rows with an outlier first (and in the middle), in each
 * kernel path: the variance must not come from sums shifted by the first
 * value (or E[x^2] - E[x]^2), which lose it to cancellation in float32
 * (about 1e-3 relative for a 20001-long row with a 300 among values in
 * [-1, 1]; Welford's method stays near 1e-7). */
static void test_norm_outliers(tc_device dev)
{
    const int64_t lens[] = {700, 5000, 20001, 70001};
    for (int li = 0; li < 4; li++)
        for (int d = 2; d < 4; d++) { /* float32, float64 */
            int64_t n = lens[li], sz[2] = {3, n};
            double *x = malloc(sizeof(double) * (size_t)(3 * n));
            double *ref = malloc(sizeof(double) * (size_t)(3 * n));
            for (int64_t i = 0; i < 3 * n; i++)
                x[i] = (double)(float)(2 * tc_test_rand_uniform() - 1);
            x[0] = 300;
            x[n + n / 2] = -250;
            x[2 * n] = 1000;
            ref_norm(true, x, NULL, NULL, 1e-5, 3, n, ref);
            tc_tensor *h = NULL, *t = NULL, *y = NULL;
            CHECK_OK(tc_tensor_from_data(x, 2, sz, TC_FLOAT64, CPU, &h));
            CHECK_OK(tc_tensor_to(h, dev, FLOATS[d], false, &t));
            CHECK_OK(tc_nn_layer_norm(t, 1, &n, NULL, NULL, 1e-5, &y));
            near_ref("layer_norm with an outlier", FLOATS[d], y, ref, 3 * n, 2);
            tc_tensor_release(h), tc_tensor_release(t), tc_tensor_release(y);
            free(x), free(ref);
        }
}

/* ---- cross_entropy ------------------------------------------------------------------- */

static void test_cross_entropy(tc_device dev)
{
    enum { N = 7 };
    for (int d = 0; d < 4; d++)
        for (int big = 0; big < 2; big++) {
            tc_dtype dt = FLOATS[d];
            int64_t c = big ? 3000 : 10, sz[2] = {N, c};
            int64_t tg[N];
            for (int i = 0; i < N; i++)
                tg[i] = (int64_t)(tc_test_rand() % (uint64_t)c);
            tg[2] = -100;
            tg[5] = -100;
            double *x;
            tc_tensor *lg = rnd(dev, 2, sz, dt, -3, 3, &x), *t = targets(dev, 1, N, tg);
            double per[N], sum = 0;
            for (int i = 0; i < N; i++) {
                if (tg[i] == -100) {
                    per[i] = 0;
                    continue;
                }
                per[i] = ref_ce_row(x + i * c, c, tg[i]);
                sum += per[i];
            }
            double mean = sum / (N - 2);
            tc_tensor *y = NULL;
            CHECK_OK(tc_nn_cross_entropy(lg, t, -100, TC_REDUCTION_NONE, &y));
            CHECK(same_shape(y, 1, (int64_t[]){N}));
            near_ref("cross_entropy none", dt, y, per, N, 2);
            tc_tensor_release(y);
            CHECK_OK(tc_nn_cross_entropy(lg, t, -100, TC_REDUCTION_SUM, &y));
            CHECK(same_shape(y, 0, NULL));
            near_ref("cross_entropy sum", dt, y, &sum, 1, 2);
            tc_tensor_release(y);
            CHECK_OK(tc_nn_cross_entropy(lg, t, -100, TC_REDUCTION_MEAN, &y));
            near_ref("cross_entropy mean", dt, y, &mean, 1, 2);
            tc_tensor_release(y);
            /* every target ignored: the mean is NaN, the sum 0 */
            int64_t all[N] = {3, 3, 3, 3, 3, 3, 3};
            tc_tensor *ta = targets(dev, 1, N, all);
            double nan = NAN, zero = 0;
            CHECK_OK(tc_nn_cross_entropy(lg, ta, 3, TC_REDUCTION_MEAN, &y));
            near_ref("cross_entropy all ignored", dt, y, &nan, 1, 1);
            tc_tensor_release(y);
            CHECK_OK(tc_nn_cross_entropy(lg, ta, 3, TC_REDUCTION_SUM, &y));
            near_ref("cross_entropy all ignored sum", dt, y, &zero, 1, 1);
            tc_tensor_release(y);
            /* logits [C] with a 0-d target */
            tc_tensor *row = NULL, *t0 = targets(dev, 0, 1, &tg[0]);
            CHECK_OK(tc_tensor_narrow(lg, 0, 0, 1, &y));
            CHECK_OK(tc_tensor_reshape(y, 1, &c, &row));
            tc_tensor_release(y);
            CHECK_OK(tc_nn_cross_entropy(row, t0, -100, TC_REDUCTION_NONE, &y));
            CHECK(same_shape(y, 0, NULL));
            near_ref("cross_entropy [C]", dt, y, &per[0], 1, 2);
            tc_tensor_release(y);
            tc_tensor_release(row);
            tc_tensor_release(t0);
            tc_tensor_release(ta);
            tc_tensor_release(lg);
            tc_tensor_release(t);
            free(x);
        }
}

/* ---- linear, bmm, baddbmm ------------------------------------------------------------ */

/* c[b][i][j] = sum_p a[b][i][p] * bm[b][p][j] (dense row-major, double). */
static void ref_bmm(const double *a, const double *bm, double *c, int64_t nb, int64_t m, int64_t k,
                    int64_t n)
{
    for (int64_t p = 0; p < nb; p++)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double s = 0;
                for (int64_t q = 0; q < k; q++)
                    s += a[(p * m + i) * k + q] * bm[(p * k + q) * n + j];
                c[(p * m + i) * n + j] = s;
            }
}

static void test_linear(tc_device dev)
{
    for (int d = 0; d < 4; d++) {
        tc_dtype dt = FLOATS[d];
        int64_t xs[3] = {2, 3, 5}, ws[2] = {4, 5}, bs[1] = {4}, wts[2] = {5, 4};
        double *x, *w, *b, *wt;
        tc_tensor *tx = rnd(dev, 3, xs, dt, -1, 1, &x), *tw = rnd(dev, 2, ws, dt, -1, 1, &w);
        tc_tensor *tb = rnd(dev, 1, bs, dt, -1, 1, &b), *twt = rnd(dev, 2, wts, dt, -1, 1, &wt);
        double wT[20], ref[24], refT[24], refnb[24];
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 5; j++)
                wT[j * 4 + i] = w[i * 5 + j];
        ref_bmm(x, wT, ref, 1, 6, 5, 4);
        ref_bmm(x, wt, refT, 1, 6, 5, 4); /* weight = twt^T: x @ twt */
        for (int i = 0; i < 24; i++) {
            refnb[i] = ref[i];
            ref[i] += b[i % 4];
        }
        tc_tensor *y = NULL, *view = NULL;
        CHECK_OK(tc_nn_linear(tx, tw, tb, &y));
        CHECK(same_shape(y, 3, (int64_t[]){2, 3, 4}));
        near_ref("linear", dt, y, ref, 24, 2);
        tc_tensor_release(y);
        CHECK_OK(tc_nn_linear(tx, tw, NULL, &y));
        near_ref("linear without bias", dt, y, refnb, 24, 2);
        tc_tensor_release(y);
        CHECK_OK(tc_tensor_transpose(twt, 0, 1, &view)); /* a transposed weight, no copy */
        CHECK_OK(tc_nn_linear(tx, view, NULL, &y));
        near_ref("linear, transposed weight", dt, y, refT, 24, 2);
        tc_tensor_release(y);
        tc_tensor_release(view);
        /* x 1-d */
        CHECK_OK(tc_tensor_narrow(tx, 0, 0, 1, &view));
        tc_tensor *x1 = NULL, *tmp = NULL;
        CHECK_OK(tc_tensor_narrow(view, 1, 0, 1, &tmp));
        CHECK_OK(tc_tensor_reshape(tmp, 1, (int64_t[]){5}, &x1));
        CHECK_OK(tc_nn_linear(x1, tw, tb, &y));
        CHECK(same_shape(y, 1, (int64_t[]){4}));
        near_ref("linear 1-d", dt, y, ref, 4, 2);
        tc_tensor_release(y);
        tc_tensor_release(x1);
        tc_tensor_release(tmp);
        tc_tensor_release(view);
        /* in == 0: the bias alone */
        tc_tensor *x0 = NULL, *w0 = NULL;
        CHECK_OK(tc_tensor_empty(2, (int64_t[]){3, 0}, dt, dev, &x0));
        CHECK_OK(tc_tensor_empty(2, (int64_t[]){4, 0}, dt, dev, &w0));
        CHECK_OK(tc_nn_linear(x0, w0, tb, &y));
        double bb[12];
        for (int i = 0; i < 12; i++)
            bb[i] = b[i % 4];
        near_ref("linear in=0", dt, y, bb, 12, 1);
        tc_tensor_release(y);
        for (int i = 0; i < 12; i++)
            bb[i] = 0;
        CHECK_OK(tc_nn_linear(x0, w0, NULL, &y));
        near_ref("linear in=0 without bias", dt, y, bb, 12, 1);
        tc_tensor_release(y);
        tc_tensor_release(x0);
        tc_tensor_release(w0);
        tc_tensor_release(tx), tc_tensor_release(tw), tc_tensor_release(tb);
        tc_tensor_release(twt);
        free(x), free(w), free(b), free(wt);
    }
}

/* ---- linear's two paths: the backend's GEMM with its bias, copy + GEMM --------------- */

/* tc_nn_linear(x, w, b) against the double reference of the stored values
 * (x with m rows of k, w [n, k], b [n] or NULL), and the path it took:
 * `want` 1 or 0 must be the path, -1 only prints it. */
static void check_linear(const char *what, const tc_tensor *x, const tc_tensor *w,
                         const tc_tensor *b, int64_t m, int64_t k, int64_t n, int want)
{
    tc_dtype dt = tc_tensor_dtype(x);
    double *xv = tc_test_values(x), *wv = tc_test_values(w), *bv = b ? tc_test_values(b) : NULL;
    double *ref = malloc(sizeof(double) * (size_t)(m * n + 1));
    ref_linear(xv, wv, bv, m, k, n, ref);
    uint64_t f0, u0;
    tc__nn_linear_counts(&f0, &u0);
    tc_tensor *y = NULL;
    CHECK_OK(tc_nn_linear(x, w, b, &y));
    int got = path_of(f0, u0);
    near_ref(what, dt, y, ref, m * n, 4);
    if (want >= 0 && got != want)
        fprintf(stderr, "%s (%s, %s): took the %s path, expected the %s one\n", what,
                tc_dtype_string(dt), tc_tensor_device(x).type == TC_CPU ? "cpu" : "cuda",
                got == 1   ? "one-step"
                : got == 0 ? "copy + GEMM"
                           : "no-bias",
                want ? "one-step" : "copy + GEMM");
    if (want >= 0)
        CHECK(got == want);
    if (want < 0 && tc_tensor_device(x).type != TC_CPU)
        printf("%s (%s): %s path\n", what, tc_dtype_string(dt),
               got == 1   ? "cuBLASLt one-step"
               : got == 0 ? "copy + GEMM"
                          : "no-bias");
    tc_tensor_release(y);
    free(xv), free(wv), free(bv), free(ref);
}

/* Shapes and layouts for both paths: on the CPU gemm_bias takes every dense
 * bias; on a GPU cuBLASLt must take a plain GPT-sized linear in float32 and
 * the 16-bit dtypes (a machine with cuBLAS has cuBLASLt, a dependency of
 * it), and may refuse the others (printed). */
static void test_linear_paths(tc_device dev)
{
    bool gpu = dev.type != TC_CPU;
    for (int d = 0; d < 4; d++) {
        tc_dtype dt = FLOATS[d];
        int must = !gpu || dt != TC_FLOAT64 ? 1 : -1;
        int64_t xs[3] = {2, 4, 64}, ws[2] = {96, 64}, bs = 96;
        tc_tensor *x = rnd(dev, 3, xs, dt, -1, 1, NULL), *w = rnd(dev, 2, ws, dt, -0.1, 0.1, NULL);
        tc_tensor *b = rnd(dev, 1, &bs, dt, -1, 1, NULL), *v = NULL, *t = NULL;
        check_linear("linear 3-d x", x, w, b, 8, 64, 96, must);
        check_linear("linear 3-d x without bias", x, w, NULL, 8, 64, 96, -1);
        /* weight stored transposed: a [64, 96] tensor seen as [96, 64] */
        tc_tensor *wt = rnd(dev, 2, (int64_t[]){64, 96}, dt, -0.1, 0.1, NULL);
        CHECK_OK(tc_tensor_transpose(wt, 0, 1, &v));
        check_linear("linear, weight transposed in memory", x, v, b, 8, 64, 96, gpu ? -1 : 1);
        tc_tensor_release(v);
        /* weight with a leading dimension beyond its rows: [96, 80] narrowed */
        tc_tensor *wb = rnd(dev, 2, (int64_t[]){96, 80}, dt, -0.1, 0.1, NULL);
        CHECK_OK(tc_tensor_narrow(wb, 1, 8, 64, &v));
        check_linear("linear, weight with ld 80", x, v, b, 8, 64, 96, gpu ? -1 : 1);
        tc_tensor_release(v);
        /* one row (a decode step) and one output feature */
        CHECK_OK(tc_tensor_view(x, 2, (int64_t[]){8, 64}, &v));
        CHECK_OK(tc_tensor_narrow(v, 0, 3, 1, &t));
        check_linear("linear, one row", t, w, b, 1, 64, 96, gpu ? -1 : 1);
        tc_tensor_release(t);
        tc_tensor *w1 = NULL, *b1 = NULL;
        CHECK_OK(tc_tensor_narrow(w, 0, 5, 1, &w1));
        CHECK_OK(tc_tensor_narrow(b, 0, 5, 1, &b1));
        check_linear("linear, one output feature", v, w1, b1, 8, 64, 1, gpu ? -1 : 1);
        tc_tensor_release(w1), tc_tensor_release(b1);
        /* a bias that is not dense (every other element): copy + GEMM */
        tc_tensor *bb = rnd(dev, 2, (int64_t[]){96, 2}, dt, -1, 1, NULL), *bcol = NULL;
        CHECK_OK(tc_tensor_narrow(bb, 1, 1, 1, &t));
        CHECK_OK(tc_tensor_view(t, 1, &bs, &bcol));
        check_linear("linear, strided bias", v, w, bcol, 8, 64, 96, 0);
        tc_tensor_release(t), tc_tensor_release(bcol), tc_tensor_release(bb);
        /* the test switch: copy + GEMM on every device */
        tc__nn_linear_set_fused(false);
        check_linear("linear, one step switched off", x, w, b, 8, 64, 96, 0);
        tc__nn_linear_set_fused(true);
        /* in == 0: the bias alone (cuBLASLt is not asked for k = 0) */
        tc_tensor *x0 = NULL, *w0 = NULL;
        CHECK_OK(tc_tensor_empty(2, (int64_t[]){3, 0}, dt, dev, &x0));
        CHECK_OK(tc_tensor_empty(2, (int64_t[]){96, 0}, dt, dev, &w0));
        check_linear("linear, in = 0", x0, w0, b, 3, 0, 96, gpu ? 0 : 1);
        tc_tensor_release(x0), tc_tensor_release(w0);
        /* 101 outputs (rows not a multiple of 16 bytes) from 100 rows of 96:
         * cuBLASLt may refuse the unaligned 16-bit output (printed) */
        tc_tensor *xp = rnd(dev, 3, (int64_t[]){4, 25, 96}, dt, -1, 1, NULL);
        tc_tensor *wp = rnd(dev, 2, (int64_t[]){101, 96}, dt, -0.1, 0.1, NULL);
        tc_tensor *bp = rnd(dev, 1, (int64_t[]){101}, dt, -1, 1, NULL);
        bool half = dt == TC_FLOAT16 || dt == TC_BFLOAT16;
        check_linear("linear, 101 outputs", xp, wp, bp, 100, 96, 101, gpu && half ? -1 : must);
        check_linear("linear, 101 outputs without bias", xp, wp, NULL, 100, 96, 101, -1);
        tc_tensor_release(xp), tc_tensor_release(wp), tc_tensor_release(bp);
        /* the same plan again with other tensors (a second decode step) */
        tc_tensor *x2 = rnd(dev, 3, xs, dt, -1, 1, NULL);
        check_linear("linear 3-d x, again", x2, w, b, 8, 64, 96, must);
        tc_tensor_release(x2);
        tc_tensor_release(v), tc_tensor_release(wt), tc_tensor_release(wb);
        tc_tensor_release(x), tc_tensor_release(w), tc_tensor_release(b);
    }
}

static void test_bmm(tc_device dev)
{
    for (int d = 0; d < 4; d++) {
        tc_dtype dt = FLOATS[d];
        int64_t as[3] = {3, 4, 5}, bs[3] = {3, 5, 6}, bts[3] = {3, 6, 5}, is[2] = {4, 6};
        double *a, *b, *bt, *in;
        tc_tensor *ta = rnd(dev, 3, as, dt, -1, 1, &a), *tb = rnd(dev, 3, bs, dt, -1, 1, &b);
        tc_tensor *tbt = rnd(dev, 3, bts, dt, -1, 1, &bt), *ti = rnd(dev, 2, is, dt, -1, 1, &in);
        double ref[72], b2[90], ref2[72];
        ref_bmm(a, b, ref, 3, 4, 5, 6);
        for (int p = 0; p < 3; p++) /* b2 = bt^T per batch */
            for (int i = 0; i < 6; i++)
                for (int j = 0; j < 5; j++)
                    b2[(p * 5 + j) * 6 + i] = bt[(p * 6 + i) * 5 + j];
        ref_bmm(a, b2, ref2, 3, 4, 5, 6);
        tc_tensor *y = NULL, *view = NULL;
        CHECK_OK(tc_tensor_bmm(ta, tb, &y));
        CHECK(same_shape(y, 3, (int64_t[]){3, 4, 6}));
        near_ref("bmm", dt, y, ref, 72, 2);
        tc_tensor_release(y);
        CHECK_OK(tc_tensor_transpose(tbt, 1, 2, &view));
        CHECK_OK(tc_tensor_bmm(ta, view, &y));
        near_ref("bmm, transposed b", dt, y, ref2, 72, 2);
        tc_tensor_release(y);
        tc_tensor_release(view);
        double r3[72];
        for (int i = 0; i < 72; i++)
            r3[i] = 0.5 * in[i % 24] + 2 * ref[i];
        CHECK_OK(tc_tensor_baddbmm(ti, ta, tb, 0.5, 2, &y));
        near_ref("baddbmm", dt, y, r3, 72, 3);
        tc_tensor_release(y);
        /* beta 0: input is not read, its NaN does not propagate */
        tc_tensor *tn = NULL;
        CHECK_OK(tc_tensor_full(2, is, NAN, dt, dev, &tn));
        for (int i = 0; i < 72; i++)
            r3[i] = -ref[i];
        CHECK_OK(tc_tensor_baddbmm(tn, ta, tb, 0, -1, &y));
        near_ref("baddbmm beta 0", dt, y, r3, 72, 2);
        tc_tensor_release(y);
        tc_tensor_release(tn);
        /* k = 0: a sum of nothing; baddbmm is beta * input (0 for beta 0) */
        tc_tensor *a0 = NULL, *b0 = NULL;
        CHECK_OK(tc_tensor_empty(3, (int64_t[]){3, 4, 0}, dt, dev, &a0));
        CHECK_OK(tc_tensor_empty(3, (int64_t[]){3, 0, 6}, dt, dev, &b0));
        for (int i = 0; i < 72; i++)
            r3[i] = 0;
        CHECK_OK(tc_tensor_bmm(a0, b0, &y));
        CHECK(same_shape(y, 3, (int64_t[]){3, 4, 6}));
        near_ref("bmm k=0", dt, y, r3, 72, 1);
        tc_tensor_release(y);
        CHECK_OK(tc_tensor_full(2, is, NAN, dt, dev, &tn));
        CHECK_OK(tc_tensor_baddbmm(tn, a0, b0, 0, 2, &y));
        near_ref("baddbmm k=0 beta 0", dt, y, r3, 72, 1);
        tc_tensor_release(y);
        tc_tensor_release(tn);
        for (int i = 0; i < 72; i++)
            r3[i] = 0.5 * in[i % 24];
        CHECK_OK(tc_tensor_baddbmm(ti, a0, b0, 0.5, 2, &y));
        near_ref("baddbmm k=0", dt, y, r3, 72, 1);
        tc_tensor_release(y);
        tc_tensor_release(a0), tc_tensor_release(b0);
        tc_tensor_release(ta), tc_tensor_release(tb), tc_tensor_release(tbt);
        tc_tensor_release(ti);
        free(a), free(b), free(bt), free(in);
    }
}

/* ---- scaled_dot_product_attention ---------------------------------------------------- */

static void test_sdpa(tc_device dev)
{
    struct {
        int nd;
        int64_t lead[2], l, s, e, ev;
    } cases[] = {{4, {2, 3}, 5, 7, 8, 4},
                 {4, {2, 3}, 6, 6, 16, 16},
                 {3, {2, 0}, 9, 4, 8, 8},
                 {2, {0, 0}, 5, 40, 8, 3},
                 {4, {1, 2}, 3, 1100, 8, 4}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int d = 0; d < 4; d++)
            for (int mode = 0; mode < 3; mode++) {
                tc_dtype dt = FLOATS[d];
                int nd = cases[c].nd;
                int64_t qs[4], ks[4], vs[4], os[4], nb = 1;
                for (int i = 0; i < nd - 2; i++) {
                    qs[i] = ks[i] = vs[i] = os[i] = cases[c].lead[i];
                    nb *= cases[c].lead[i];
                }
                int64_t l = cases[c].l, s = cases[c].s, e = cases[c].e, ev = cases[c].ev;
                qs[nd - 2] = os[nd - 2] = l, qs[nd - 1] = ks[nd - 1] = e;
                ks[nd - 2] = vs[nd - 2] = s, vs[nd - 1] = os[nd - 1] = ev;
                double *q, *k, *v;
                tc_tensor *tq = rnd(dev, nd, qs, dt, -1, 1, &q),
                          *tk = rnd(dev, nd, ks, dt, -1, 1, &k);
                tc_tensor *tv = rnd(dev, nd, vs, dt, -1, 1, &v), *y = NULL;
                bool causal = mode != 0;
                double scale = mode == 2 ? 0.3 : 1 / sqrt((double)e);
                double *ref = malloc(sizeof(double) * (size_t)(nb * l * ev));
                ref_sdpa(q, k, v, nb, l, s, e, ev, causal, scale, ref);
                CHECK_OK(tc_nn_scaled_dot_product_attention(tq, tk, tv, causal,
                                                            mode == 2 ? &scale : NULL, &y));
                CHECK(same_shape(y, nd, os));
                near_ref(causal ? "sdpa causal" : "sdpa", dt, y, ref, nb * l * ev, 3);
                tc_tensor_release(tq), tc_tensor_release(tk), tc_tensor_release(tv);
                tc_tensor_release(y);
                free(q), free(k), free(v), free(ref);
            }
}

/* ---- bad input ------------------------------------------------------------------------ */

static void test_bad_input(tc_device dev)
{
    int64_t s2[2] = {3, 4}, s3[3] = {2, 3, 4}, s1[1] = {4};
    tc_tensor *x = rnd(dev, 2, s2, TC_FLOAT32, -1, 1, NULL), *xi = NULL, *dead = NULL, *y = NULL;
    tc_tensor *x3 = rnd(dev, 3, s3, TC_FLOAT32, -1, 1, NULL),
              *w = rnd(dev, 1, s1, TC_FLOAT32, 0, 1, NULL);
    tc_tensor *wd = rnd(dev, 1, s1, TC_FLOAT64, 0, 1, NULL);
    CHECK_OK(tc_tensor_zeros(2, s2, TC_INT32, dev, &xi));
    CHECK_OK(tc_tensor_zeros(2, s2, TC_FLOAT32, dev, &dead));
    tc_tensor_release(dead);
    int64_t ns[1] = {4}, bad_ns[1] = {3};

    /* softmax / log_softmax */
    CHECK_STATUS(tc_nn_softmax(NULL, 0, &y), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_softmax(dead, 0, &y), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_nn_softmax(xi, 0, &y), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_nn_softmax(x, 2, &y), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_log_softmax(x, -3, &y), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_log_softmax(x, 0, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "tc_nn_log_softmax") == tc_last_error());
    /* layer_norm / rms_norm */
    CHECK_STATUS(tc_nn_layer_norm(NULL, 1, ns, NULL, NULL, 1e-5, &y), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_layer_norm(dead, 1, ns, NULL, NULL, 1e-5, &y), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_nn_layer_norm(xi, 1, ns, NULL, NULL, 1e-5, &y), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_nn_layer_norm(x, 1, bad_ns, NULL, NULL, 1e-5, &y), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_layer_norm(x, 0, ns, NULL, NULL, 1e-5, &y), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_layer_norm(x, 1, NULL, NULL, NULL, 1e-5, &y), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_layer_norm(x, 3, s3, NULL, NULL, 1e-5, &y), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_layer_norm(x, 1, ns, wd, NULL, 1e-5, &y), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_nn_layer_norm(x, 1, ns, w, x, 1e-5, &y), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_layer_norm(x, 1, ns, dead, NULL, 1e-5, &y), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_nn_layer_norm(x, 1, ns, w, NULL, 1e-5, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_rms_norm(NULL, 1, ns, NULL, NULL, &y), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_rms_norm(dead, 1, ns, NULL, NULL, &y), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_nn_rms_norm(xi, 1, ns, NULL, NULL, &y), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_nn_rms_norm(x, 1, bad_ns, NULL, NULL, &y), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_rms_norm(x, 1, ns, x, NULL, &y), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_rms_norm(x, 1, ns, wd, NULL, &y), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_nn_rms_norm(x, 1, ns, NULL, NULL, NULL), TC_ERROR_INVALID_ARGUMENT);
    /* cross_entropy */
    int64_t t3[3] = {0, 1, 2}, tbad[3] = {0, 4, 1}, tneg[3] = {0, -1, 1};
    tc_tensor *tg = targets(dev, 1, 3, t3), *tgb = targets(dev, 1, 3, tbad);
    tc_tensor *tgn = targets(dev, 1, 3, tneg), *tgf = NULL, *tg2 = targets(dev, 1, 2, t3);
    CHECK_OK(tc_tensor_zeros(1, (int64_t[]){3}, TC_FLOAT32, dev, &tgf));
    CHECK_OK(tc_nn_cross_entropy(x, tg, -100, TC_REDUCTION_MEAN, &y));
    tc_tensor_release(y);
    y = NULL;
    CHECK_STATUS(tc_nn_cross_entropy(NULL, tg, -100, TC_REDUCTION_MEAN, &y),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_cross_entropy(x, NULL, -100, TC_REDUCTION_MEAN, &y),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_cross_entropy(dead, tg, -100, TC_REDUCTION_MEAN, &y),
                 TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_nn_cross_entropy(xi, tg, -100, TC_REDUCTION_MEAN, &y), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_nn_cross_entropy(x, tgf, -100, TC_REDUCTION_MEAN, &y), TC_ERROR_DTYPE);
    CHECK(strstr(tc_last_error(), "int64") != NULL);
    if (dev.type == TC_CPU) {
        CHECK_STATUS(tc_nn_cross_entropy(x, tgb, -100, TC_REDUCTION_MEAN, &y),
                     TC_ERROR_INVALID_ARGUMENT);
        CHECK(strstr(tc_last_error(), "out of range") != NULL);
        CHECK_STATUS(tc_nn_cross_entropy(x, tgn, -100, TC_REDUCTION_SUM, &y),
                     TC_ERROR_INVALID_ARGUMENT);
    } else { /* the kernel finds them; the next wait reports (test_nn_cuda) */
        CHECK_OK(tc_nn_cross_entropy(x, tgb, -100, TC_REDUCTION_MEAN, &y));
        tc_tensor_release(y);
        y = NULL;
        CHECK_STATUS(tc_synchronize(-1), TC_ERROR_INVALID_ARGUMENT);
        CHECK(strstr(tc_last_error(), "out of range") != NULL);
        CHECK_OK(tc_nn_cross_entropy(x, tgn, -100, TC_REDUCTION_SUM, &y));
        tc_tensor_release(y);
        y = NULL;
        CHECK_STATUS(tc_synchronize(-1), TC_ERROR_INVALID_ARGUMENT);
        CHECK_OK(tc_synchronize(-1));
    }
    CHECK_STATUS(tc_nn_cross_entropy(x, tg2, -100, TC_REDUCTION_SUM, &y), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_cross_entropy(x3, tg, -100, TC_REDUCTION_SUM, &y), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_cross_entropy(x, tg, -100, (tc_reduction)7, &y), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_cross_entropy(x, tg, -100, TC_REDUCTION_SUM, NULL),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK(y == NULL);
    /* linear */
    tc_tensor *wl = rnd(dev, 2, (int64_t[]){5, 4}, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *bl = rnd(dev, 1, (int64_t[]){5}, TC_FLOAT32, -1, 1, NULL);
    CHECK_STATUS(tc_nn_linear(NULL, wl, bl, &y), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_linear(x, NULL, bl, &y), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_linear(x, dead, bl, &y), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_nn_linear(xi, wl, bl, &y), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_nn_linear(x, wl, wd, &y), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_nn_linear(x, x, bl, &y), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_linear(x, wl, w, &y), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_linear(x, x3, NULL, &y), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_linear(x, wl, bl, NULL), TC_ERROR_INVALID_ARGUMENT);
    { /* x's 2^40 rows by weight's 2^40 outputs: each fits, the result does not
       * (overflowed in the padded-rows rule before: fuzz_nn_args); a GPU
       * refuses it too, before any allocation or copy */
        tc_tensor *row = NULL, *xh = NULL, *wh = NULL;
        CHECK_OK(tc_tensor_narrow(wl, 0, 0, 1, &row));
        const int64_t huge[2] = {(int64_t)1 << 40, 4};
        CHECK_OK(tc_tensor_expand(row, 2, huge, &xh));
        CHECK_OK(tc_tensor_expand(row, 2, huge, &wh));
        CHECK_STATUS(tc_nn_linear(xh, wh, NULL, &y), TC_ERROR_SHAPE);
        CHECK(y == NULL);
        /* the same for matmul and bmm: [2^40, 4] @ [4, 2^40] (matmul
         * multiplied the sizes before checking them) */
        tc_tensor *wt = NULL, *x3h = NULL, *w3h = NULL;
        CHECK_OK(tc_tensor_transpose(wh, 0, 1, &wt));
        CHECK_STATUS(tc_tensor_matmul(xh, wt, &y), TC_ERROR_SHAPE);
        CHECK_OK(tc_tensor_unsqueeze(xh, 0, &x3h));
        CHECK_OK(tc_tensor_unsqueeze(wt, 0, &w3h));
        CHECK_STATUS(tc_tensor_bmm(x3h, w3h, &y), TC_ERROR_SHAPE);
        CHECK_STATUS(tc_tensor_matmul(x3h, w3h, &y), TC_ERROR_SHAPE);
        CHECK(y == NULL);
        tc_tensor_release(wt);
        tc_tensor_release(x3h);
        tc_tensor_release(w3h);
        /* attention: q's 2^40 rows by v's 2^40 columns (sdpa multiplied
         * them before checking) */
        tc_tensor *w4 = NULL, *r4 = NULL, *c2 = NULL, *qh = NULL, *kh = NULL, *vh = NULL,
                  *lse = NULL;
        CHECK_OK(tc_tensor_view(wl, 4, (int64_t[]){1, 1, 5, 4}, &w4));
        CHECK_OK(tc_tensor_narrow(w4, 2, 0, 1, &r4)); /* [1, 1, 1, 4] */
        CHECK_OK(tc_tensor_narrow(w4, 2, 0, 2, &kh)); /* [1, 1, 2, 4] */
        CHECK_OK(tc_tensor_narrow(kh, 3, 0, 1, &c2)); /* [1, 1, 2, 1] */
        CHECK_OK(tc_tensor_expand(r4, 4, (int64_t[]){1, 1, (int64_t)1 << 40, 4}, &qh));
        CHECK_OK(tc_tensor_expand(c2, 4, (int64_t[]){1, 1, 2, (int64_t)1 << 40}, &vh));
        CHECK_STATUS(tc_nn_scaled_dot_product_attention(qh, kh, vh, false, NULL, &y),
                     TC_ERROR_SHAPE);
        CHECK_STATUS(tc_nn_scaled_dot_product_attention_lse(qh, kh, vh, false, NULL, &y, &lse),
                     TC_ERROR_SHAPE);
        CHECK(y == NULL && lse == NULL);
        tc_tensor *const made[] = {w4, r4, c2, qh, kh, vh};
        for (int i = 0; i < 6; i++)
            tc_tensor_release(made[i]);
        tc_tensor_release(row);
        tc_tensor_release(xh);
        tc_tensor_release(wh);
    }
    /* bmm / baddbmm */
    tc_tensor *b3 = rnd(dev, 3, (int64_t[]){2, 4, 5}, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *b3d = rnd(dev, 3, (int64_t[]){2, 4, 5}, TC_FLOAT64, -1, 1, NULL);
    tc_tensor *b3n = rnd(dev, 3, (int64_t[]){1, 4, 5}, TC_FLOAT32, -1, 1, NULL);
    CHECK_OK(tc_tensor_bmm(x3, b3, &y));
    tc_tensor_release(y);
    y = NULL;
    CHECK_STATUS(tc_tensor_bmm(NULL, b3, &y), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_bmm(x3, dead, &y), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_tensor_bmm(x3, b3d, &y), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_tensor_bmm(x3, x3, &y), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_tensor_bmm(x3, b3n, &y), TC_ERROR_SHAPE); /* no broadcasting */
    CHECK_STATUS(tc_tensor_bmm(x, b3, &y), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_tensor_bmm(x3, b3, NULL), TC_ERROR_INVALID_ARGUMENT);
    tc_tensor *in5 = rnd(dev, 1, (int64_t[]){5}, TC_FLOAT32, -1, 1, NULL);
    CHECK_OK(tc_tensor_baddbmm(in5, x3, b3, 1, 1, &y));
    tc_tensor_release(y);
    y = NULL;
    CHECK_STATUS(tc_tensor_baddbmm(NULL, x3, b3, 1, 1, &y), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_baddbmm(dead, x3, b3, 1, 1, &y), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_tensor_baddbmm(x, x3, b3, 1, 1, &y), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_tensor_baddbmm(wd, x3, b3, 1, 1, &y), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_tensor_baddbmm(in5, x3, NULL, 1, 1, &y), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_baddbmm(in5, x3, b3, 1, 1, NULL), TC_ERROR_INVALID_ARGUMENT);
    /* non-finite alpha or beta, as tensor.h says (they were once taken) */
    const double bad_scalars[3] = {NAN, INFINITY, -INFINITY};
    for (int i = 0; i < 3; i++) {
        CHECK_STATUS(tc_tensor_baddbmm(in5, x3, b3, bad_scalars[i], 1, &y),
                     TC_ERROR_INVALID_ARGUMENT);
        CHECK(strstr(tc_last_error(), "tc_tensor_baddbmm: beta") == tc_last_error());
        CHECK_STATUS(tc_tensor_baddbmm(in5, x3, b3, 1, bad_scalars[i], &y),
                     TC_ERROR_INVALID_ARGUMENT);
        CHECK(strstr(tc_last_error(), "tc_tensor_baddbmm: alpha") == tc_last_error());
        CHECK_STATUS(tc_tensor_baddbmm(in5, x3, b3, 0, bad_scalars[i], &y),
                     TC_ERROR_INVALID_ARGUMENT);
    }
    CHECK(y == NULL);
    /* scaled_dot_product_attention */
    tc_tensor *k3 = rnd(dev, 3, (int64_t[]){2, 6, 4}, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *k3e = rnd(dev, 3, (int64_t[]){2, 6, 5}, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *k3b = rnd(dev, 3, (int64_t[]){1, 6, 4}, TC_FLOAT32, -1, 1, NULL);
    CHECK_OK(tc_nn_scaled_dot_product_attention(x3, k3, k3, true, NULL, &y));
    tc_tensor_release(y);
    y = NULL;
    CHECK_STATUS(tc_nn_scaled_dot_product_attention(NULL, k3, k3, false, NULL, &y),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_scaled_dot_product_attention(x3, dead, k3, false, NULL, &y),
                 TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_nn_scaled_dot_product_attention(x3, k3, b3d, false, NULL, &y), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_nn_scaled_dot_product_attention(x3, k3e, k3, false, NULL, &y), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_scaled_dot_product_attention(x3, k3, x3, false, NULL, &y), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_scaled_dot_product_attention(x3, k3b, k3b, false, NULL, &y), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_scaled_dot_product_attention(w, w, w, false, NULL, &y), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_scaled_dot_product_attention(x3, k3, k3, false, NULL, NULL),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK(y == NULL);

    tc_tensor *all[] = {x,  xi, x3, w,   wd,  tg,  tgb, tgn, tgf, tg2,
                        wl, bl, b3, b3d, b3n, in5, k3,  k3e, k3b};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tc_tensor_release(all[i]);
}

/* cross_entropy's sum or mean (red) of lg against t: 0-d, near ref. */
static void ce_reduced(const char *what, const tc_tensor *lg, const tc_tensor *t, int64_t ignore,
                       tc_reduction red, double ref, double mul)
{
    tc_tensor *y = NULL;
    CHECK_OK(tc_nn_cross_entropy(lg, t, ignore, red, &y));
    CHECK(same_shape(y, 0, NULL));
    near_ref(what, tc_tensor_dtype(lg), y, &ref, 1, mul);
    tc_tensor_release(y);
}

/* Many rows, more than a GPU holds teams for at once (a warp per row up to
 * 1,024 classes, a block per row past that), so that a sum or mean has
 * each team take several rows: every dtype, some rows ignored, the losses
 * per row too. Then no rows at all: an empty loss, a sum of 0, a mean of
 * NaN. */
static void test_cross_entropy_rows(tc_device dev)
{
    const int64_t shapes[2][2] = {{20011, 5}, {600, 1100}};
    for (int k = 0; k < 2; k++) {
        const int64_t n = shapes[k][0], c = shapes[k][1];
        int64_t *tg = malloc(sizeof(int64_t) * (size_t)n);
        double *per = malloc(sizeof(double) * (size_t)n);
        for (int64_t i = 0; i < n; i++)
            tg[i] = i % 7 == 3 ? -1 : (int64_t)(tc_test_rand() % (uint64_t)c);
        for (int d = 0; d < 4; d++) {
            tc_dtype dt = FLOATS[d];
            double *x;
            tc_tensor *lg = rnd(dev, 2, (int64_t[]){n, c}, dt, -4, 4, &x);
            tc_tensor *t = targets(dev, 1, n, tg), *y = NULL;
            double sum = 0, kept = 0;
            for (int64_t i = 0; i < n; i++) {
                per[i] = tg[i] == -1 ? 0 : ref_ce_row(x + (size_t)(i * c), c, tg[i]);
                sum += per[i];
                kept += tg[i] != -1;
            }
            CHECK_OK(tc_nn_cross_entropy(lg, t, -1, TC_REDUCTION_NONE, &y));
            near_ref("cross_entropy of many rows", dt, y, per, n, 2);
            tc_tensor_release(y);
            ce_reduced("cross_entropy sum of many rows", lg, t, -1, TC_REDUCTION_SUM, sum, 4);
            ce_reduced("cross_entropy mean of many rows", lg, t, -1, TC_REDUCTION_MEAN, sum / kept,
                       2);
            tc_tensor_release(lg);
            tc_tensor_release(t);
            free(x);
        }
        free(tg);
        free(per);
    }
    for (int d = 0; d < 4; d++) { /* [0, C] logits */
        tc_dtype dt = FLOATS[d];
        tc_tensor *e = NULL, *te = NULL, *y = NULL;
        CHECK_OK(tc_tensor_zeros(2, (int64_t[]){0, 5}, dt, dev, &e));
        CHECK_OK(tc_tensor_zeros(1, (int64_t[]){0}, TC_INT64, dev, &te));
        CHECK_OK(tc_nn_cross_entropy(e, te, -100, TC_REDUCTION_NONE, &y));
        CHECK(same_shape(y, 1, (int64_t[]){0}) && tc_tensor_dtype(y) == dt);
        tc_tensor_release(y);
        ce_reduced("cross_entropy sum of no rows", e, te, -100, TC_REDUCTION_SUM, 0, 1);
        ce_reduced("cross_entropy mean of no rows", e, te, -100, TC_REDUCTION_MEAN, NAN, 1);
        tc_tensor_release(e);
        tc_tensor_release(te);
    }
}

static void run_all(tc_device dev)
{
    test_softmax(dev);
    test_softmax_special(dev);
    test_norms(dev);
    test_norm_outliers(dev);
    test_cross_entropy(dev);
    test_cross_entropy_rows(dev);
    test_linear(dev);
    test_linear_paths(dev);
    test_bmm(dev);
    test_sdpa(dev);
    test_bad_input(dev);
}

int main(void)
{
    tc_test_init();
    run_all(CPU);
    if (tc_is_available()) {
        run_all(GPU);
        CHECK_OK(tc_synchronize(-1));
    } else {
        printf("no GPU: the GPU checks are skipped (the parity pass is test_nn_cuda)\n");
    }
    return TC_TEST_DONE();
}
