/* nn_backward.h's layers (embedding, linear and dropout backward) and the
 * forwards nn.h adds for them (tc_nn_embedding, tc_nn_dropout).
 *
 * On the CPU, every dtype: each backward against an independent reference
 * loop written here (double precision) and, in float64, against a central
 * finite difference of its forward; the accumulate-into forms; dropout's
 * mask against Philox itself (random/philox.h: block offset + i / 4, lane
 * i % 4, kept when the word is below round((1 - p) 2^32)), its offset
 * advance, its keep rate within 4 sigma and its exact scaling; bad input
 * for every function. With a GPU (label gpu_too): the same inputs on the
 * GPU against the CPU in every dtype, the embedding backward in both modes
 * of tc_use_deterministic_algorithms (the deterministic one twice, bit for
 * bit; with and without scale_grad_by_freq), its out-of-range index reported by the next synchronize, and
 * dropout's mask and values equal to the CPU's for the same seed, and the
 * embedding and linear backward captured in a CUDA graph and replayed, and
 * linear backward's float32 GEMMs following backends.h's TF32 switch. */
#include <string.h>

#include "nn_check.h"
#include "random/philox.h"
#include "tcuda/nn_backward.h"

static tc_tensor *from(tc_device dev, const void *data, tc_dtype src, int nd, const int64_t *sz,
                       tc_dtype dt)
{
    tc_tensor *h = NULL, *t = NULL;
    CHECK_OK(tc_tensor_from_data(data, nd, sz, src, CPU, &h));
    CHECK_OK(tc_tensor_to(h, dev, dt, false, &t));
    tc_tensor_release(h);
    return t;
}

static tc_tensor *idx_tensor(tc_device dev, int nd, const int64_t *sz, const int64_t *v,
                             tc_dtype dt)
{
    return from(dev, v, TC_INT64, nd, sz, dt);
}

/* A tensor's bytes (caller frees). */
static void *bytes_of(const tc_tensor *t)
{
    size_t n = (size_t)tc_tensor_numel(t) * tc_dtype_size(tc_tensor_dtype(t));
    void *b = malloc(n ? n : 1);
    CHECK_OK(tc_tensor_to_host(t, tc_tensor_dtype(t), b));
    return b;
}

static bool same_bytes(const tc_tensor *a, const tc_tensor *b)
{
    if (!a || !b || tc_tensor_numel(a) != tc_tensor_numel(b) ||
        tc_tensor_dtype(a) != tc_tensor_dtype(b))
        return false;
    size_t n = (size_t)tc_tensor_numel(a) * tc_dtype_size(tc_tensor_dtype(a));
    void *x = bytes_of(a), *y = bytes_of(b);
    bool same = memcmp(x, y, n) == 0;
    free(x), free(y);
    return same;
}

static double dot(const double *a, const double *b, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* ---- embedding ------------------------------------------------------------------------ */

/* grad_weight [v, c] = old + the rows of g [n, c] at idx, but not padding;
 * with freq each row's sum divided by its count. */
static void ref_embedding_bwd(const double *g, const int64_t *idx, int64_t n, int64_t c, int64_t v,
                              int64_t padding, bool freq, const double *old, double *gw)
{
    for (int64_t r = 0; r < v; r++) {
        int64_t count = 0;
        for (int64_t i = 0; i < n; i++)
            count += idx[i] == r;
        for (int64_t j = 0; j < c; j++) {
            double s = 0;
            for (int64_t i = 0; i < n; i++)
                if (idx[i] == r && r != padding)
                    s += g[i * c + j];
            gw[r * c + j] = (old ? old[r * c + j] : 0) + (freq && count ? s / (double)count : s);
        }
    }
}

enum { EV = 7, EC = 5 };
static const int64_t E_IDX[2][3] = {{1, 4, 1}, {6, 0, 1}}; /* repeats; row 2, 3, 5 unused */

static void embedding_values(tc_device dev)
{
    int64_t isz[2] = {2, 3}, gsz[3] = {2, 3, EC}, wsz[2] = {EV, EC};
    for (int d = 0; d < 4; d++)
        for (int pf = 0; pf < 4; pf++) { /* padding none or row 1 (three hits); freq */
            tc_dtype dt = FLOATS[d];
            int pad = pf & 1 ? 1 : -1;
            bool freq = pf & 2;
            double *g, *old, ref[EV * EC];
            tc_tensor *go = rnd(dev, 3, gsz, dt, -2, 2, &g);
            tc_tensor *w0 = rnd(dev, 2, wsz, dt, -1, 1, &old);
            tc_tensor *idx = idx_tensor(dev, 2, isz, &E_IDX[0][0], TC_INT64);
            tc_tensor *i32 = idx_tensor(dev, 2, isz, &E_IDX[0][0], TC_INT32);
            tc_tensor *gw = NULL, *gw32 = NULL;
            CHECK_OK(tc_nn_embedding_backward(go, idx, EV, pad, freq, &gw));
            ref_embedding_bwd(g, &E_IDX[0][0], 6, EC, EV, pad, freq, NULL, ref);
            near_ref("embedding_backward", dt, gw, ref, EV * EC, 1);
            CHECK(gw && tc_tensor_ndim(gw) == 2 && tc_tensor_size(gw, 0) == EV &&
                  tc_tensor_is_contiguous(gw));
            CHECK_OK(tc_nn_embedding_backward(go, i32, EV, pad, freq, &gw32));
            if (dev.type == TC_CPU) /* a GPU's atomic adds may take another order */
                CHECK(same_bytes(gw, gw32));
            else
                near_ref("embedding_backward (int32)", dt, gw32, ref, EV * EC, 1);
            /* weight tying: added into an existing gradient */
            CHECK_OK(tc_nn_embedding_backward_(w0, go, idx, pad, freq));
            ref_embedding_bwd(g, &E_IDX[0][0], 6, EC, EV, pad, freq, old, ref);
            near_ref("embedding_backward_", dt, w0, ref, EV * EC, 1);
            /* the forward: rows picked */
            tc_tensor *y = NULL;
            CHECK_OK(tc_nn_embedding(w0, idx, &y));
            double *wv = tc_test_values(w0), yref[6 * EC];
            for (int i = 0; i < 6; i++)
                for (int j = 0; j < EC; j++)
                    yref[i * EC + j] = wv[(&E_IDX[0][0])[i] * EC + j];
            near_ref("embedding", dt, y, yref, 6 * EC, 0);
            free(wv), free(g), free(old);
            tc_tensor_release(go), tc_tensor_release(w0), tc_tensor_release(idx);
            tc_tensor_release(i32), tc_tensor_release(gw), tc_tensor_release(gw32);
            tc_tensor_release(y);
        }
    /* nothing to add: empty indices give zeros; V = 0 with no indices */
    int64_t zsz[2] = {0, EC}, zi = 0;
    tc_tensor *gz = NULL, *iz = NULL, *gw = NULL;
    CHECK_OK(tc_tensor_zeros(2, zsz, TC_FLOAT32, dev, &gz));
    CHECK_OK(tc_tensor_zeros(1, &zi, TC_INT64, dev, &iz));
    CHECK_OK(tc_nn_embedding_backward(gz, iz, 3, -1, false, &gw));
    double zref[3 * EC] = {0};
    near_ref("embedding_backward (empty)", TC_FLOAT32, gw, zref, 3 * EC, 0);
    tc_tensor_release(gw);
    gw = NULL;
    CHECK_OK(tc_nn_embedding_backward(gz, iz, 0, -1, false, &gw));
    CHECK(gw && tc_tensor_numel(gw) == 0);
    tc_tensor_release(gz), tc_tensor_release(iz), tc_tensor_release(gw);
}

/* L(W) = sum(G * embedding(W, idx)): dL/dW by central differences (float64). */
static double embedding_loss(const double *w, const int64_t *idx, const double *g)
{
    int64_t wsz[2] = {EV, EC}, isz[2] = {2, 3};
    tc_tensor *wt = from(CPU, w, TC_FLOAT64, 2, wsz, TC_FLOAT64);
    tc_tensor *it = idx_tensor(CPU, 2, isz, idx, TC_INT64), *y = NULL;
    CHECK_OK(tc_nn_embedding(wt, it, &y));
    double *yv = tc_test_values(y), l = dot(yv, g, 6 * EC);
    free(yv);
    tc_tensor_release(wt), tc_tensor_release(it), tc_tensor_release(y);
    return l;
}

static void embedding_finite_difference(void)
{
    int64_t gsz[3] = {2, 3, EC}, wsz[2] = {EV, EC}, isz[2] = {2, 3};
    double *g, *w;
    tc_tensor *go = rnd(CPU, 3, gsz, TC_FLOAT64, -1, 1, &g);
    tc_tensor *wt = rnd(CPU, 2, wsz, TC_FLOAT64, -1, 1, &w);
    tc_tensor *idx = idx_tensor(CPU, 2, isz, &E_IDX[0][0], TC_INT64), *gw = NULL;
    CHECK_OK(tc_nn_embedding_backward(go, idx, EV, -1, false, &gw));
    double *an = tc_test_values(gw), h = 1e-6, worst = 0;
    for (int k = 0; k < EV * EC; k++) {
        double keep = w[k];
        w[k] = keep + h;
        double lp = embedding_loss(w, &E_IDX[0][0], g);
        w[k] = keep - h;
        double lm = embedding_loss(w, &E_IDX[0][0], g);
        w[k] = keep;
        worst = fmax(worst, fabs((lp - lm) / (2 * h) - an[k]));
    }
    CHECK(worst < 1e-7);
    if (worst >= 1e-7)
        fprintf(stderr, "embedding finite difference: off by %g\n", worst);
    free(an), free(g), free(w);
    tc_tensor_release(go), tc_tensor_release(wt), tc_tensor_release(idx), tc_tensor_release(gw);
}

static void embedding_bad_input(tc_device dev)
{
    int64_t isz[2] = {2, 3}, gsz[3] = {2, 3, EC}, wsz[2] = {EV, EC};
    tc_tensor *go = rnd(dev, 3, gsz, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *idx = idx_tensor(dev, 2, isz, &E_IDX[0][0], TC_INT64);
    tc_tensor *fidx = rnd(dev, 2, isz, TC_FLOAT32, 0, 1, NULL);
    tc_tensor *gw = rnd(dev, 2, wsz, TC_FLOAT32, -1, 1, NULL), *out = NULL;
    tc_tensor *gw16 = rnd(dev, 2, wsz, TC_FLOAT16, -1, 1, NULL);
    tc_tensor *gi = NULL, *gwt = NULL, *dead = NULL;
    CHECK_OK(tc_tensor_zeros(3, gsz, TC_INT64, dev, &gi));
    int64_t tsz[2] = {EC, EV};
    tc_tensor *tw = rnd(dev, 2, tsz, TC_FLOAT32, -1, 1, NULL);
    CHECK_OK(tc_tensor_transpose(tw, 0, 1, &gwt)); /* [EV, EC], not contiguous */
    CHECK_OK(tc_tensor_zeros(1, isz, TC_FLOAT32, dev, &dead));
    tc_tensor_release(dead);
    CHECK_STATUS(tc_nn_embedding_backward(NULL, idx, EV, -1, false, &out),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_embedding_backward(go, NULL, EV, -1, false, &out),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_embedding_backward(go, idx, EV, -1, false, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_embedding_backward(dead, idx, EV, -1, false, &out), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_nn_embedding_backward(gi, idx, EV, -1, false, &out), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_nn_embedding_backward(go, fidx, EV, -1, false, &out), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_nn_embedding_backward(gw, idx, EV, -1, false, &out), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_embedding_backward(go, idx, -1, -1, false, &out), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_embedding_backward(go, idx, EV, EV, false, &out), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_embedding_backward(go, idx, EV, -2, false, &out), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_embedding_backward_(NULL, go, idx, -1, false), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_embedding_backward_(gw16, go, idx, -1, false), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_nn_embedding_backward_(gwt, go, idx, -1, false), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_embedding_backward_(go, go, idx, -1, false), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_embedding(NULL, idx, &out), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_embedding(gi, idx, &out), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_nn_embedding(gw, fidx, &out), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_nn_embedding(gw, idx, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(out == NULL);
    if (dev.type == TC_CPU) { /* out of range: refused before anything is written */
        int64_t bad[2][3] = {{1, 4, 1}, {7, 0, 1}}, neg[2][3] = {{1, -1, 1}, {0, 0, 1}};
        tc_tensor *bi = idx_tensor(dev, 2, isz, &bad[0][0], TC_INT64);
        tc_tensor *ni = idx_tensor(dev, 2, isz, &neg[0][0], TC_INT64);
        void *before = bytes_of(gw);
        CHECK_STATUS(tc_nn_embedding_backward(go, bi, EV, -1, false, &out),
                     TC_ERROR_INVALID_ARGUMENT);
        CHECK(strstr(tc_last_error(), "index 7") != NULL);
        CHECK_STATUS(tc_nn_embedding_backward_(gw, go, ni, -1, false), TC_ERROR_INVALID_ARGUMENT);
        void *after = bytes_of(gw);
        CHECK(memcmp(before, after, sizeof(float) * EV * EC) == 0);
        free(before), free(after);
        tc_tensor_release(bi), tc_tensor_release(ni);
    }
    CHECK(out == NULL);
    tc_tensor_release(go), tc_tensor_release(idx), tc_tensor_release(fidx);
    tc_tensor_release(gw), tc_tensor_release(gw16), tc_tensor_release(gi);
    tc_tensor_release(tw), tc_tensor_release(gwt);
}

/* ---- linear -------------------------------------------------------------------------- */

enum { LB = 2, LT = 3, LI = 4, LO = 5, LM = LB * LT };

/* gx = g w, gw = g^T x, gb = sum of g's rows, for g [m, o], x [m, i], w [o, i]. */
static void ref_linear_bwd(const double *g, const double *x, const double *w, int64_t m, int64_t in,
                           int64_t of, double *gx, double *gw, double *gb)
{
    for (int64_t r = 0; r < m; r++)
        for (int64_t j = 0; j < in; j++) {
            double s = 0;
            for (int64_t o = 0; o < of; o++)
                s += g[r * of + o] * w[o * in + j];
            gx[r * in + j] = s;
        }
    for (int64_t o = 0; o < of; o++) {
        gb[o] = 0;
        for (int64_t j = 0; j < in; j++)
            gw[o * in + j] = 0;
        for (int64_t r = 0; r < m; r++) {
            gb[o] += g[r * of + o];
            for (int64_t j = 0; j < in; j++)
                gw[o * in + j] += g[r * of + o] * x[r * in + j];
        }
    }
}

static void linear_values(tc_device dev)
{
    int64_t xsz[3] = {LB, LT, LI}, gsz[3] = {LB, LT, LO}, wsz[2] = {LO, LI};
    for (int d = 0; d < 4; d++) {
        tc_dtype dt = FLOATS[d];
        double *x, *g, *w, rx[LM * LI], rw[LO * LI], rb[LO];
        tc_tensor *xt = rnd(dev, 3, xsz, dt, -1, 1, &x), *gt = rnd(dev, 3, gsz, dt, -1, 1, &g);
        tc_tensor *wt = rnd(dev, 2, wsz, dt, -1, 1, &w);
        ref_linear_bwd(g, x, w, LM, LI, LO, rx, rw, rb);
        tc_tensor *gx = NULL, *gw = NULL, *gb = NULL;
        CHECK_OK(tc_nn_linear_backward(
            gt, xt, wt, TC_NN_LINEAR_GRAD_X | TC_NN_LINEAR_GRAD_WEIGHT | TC_NN_LINEAR_GRAD_BIAS,
            &gx, &gw, &gb));
        near_ref("linear_backward grad_x", dt, gx, rx, LM * LI, 4);
        near_ref("linear_backward grad_weight", dt, gw, rw, LO * LI, 4);
        near_ref("linear_backward grad_bias", dt, gb, rb, LO, 4);
        CHECK(gx && tc_tensor_ndim(gx) == 3 && tc_tensor_size(gx, 2) == LI);
        /* only what is wanted is written */
        tc_tensor *only = NULL, *untouched = (tc_tensor *)&only;
        CHECK_OK(
            tc_nn_linear_backward(gt, xt, wt, TC_NN_LINEAR_GRAD_BIAS, NULL, &untouched, &only));
        CHECK(untouched == (tc_tensor *)&only);
        near_ref("linear_backward grad_bias alone", dt, only, rb, LO, 4);
        tc_tensor_release(only);
        /* into: accumulate into existing gradients, one of them a transposed view */
        double *ox, *ob, *owt, ax[LM * LI], aw[LO * LI], ab[LO];
        int64_t wtsz[2] = {LI, LO};
        tc_tensor *ix = rnd(dev, 3, xsz, dt, -1, 1, &ox), *ib = rnd(dev, 1, wsz, dt, -1, 1, &ob);
        tc_tensor *iwt = rnd(dev, 2, wtsz, dt, -1, 1, &owt), *iw = NULL;
        CHECK_OK(tc_tensor_transpose(iwt, 0, 1, &iw));
        for (int k = 0; k < LM * LI; k++)
            ax[k] = ox[k] + rx[k];
        for (int o = 0; o < LO; o++) {
            ab[o] = ob[o] + rb[o];
            for (int j = 0; j < LI; j++)
                aw[o * LI + j] = owt[j * LO + o] + rw[o * LI + j];
        }
        CHECK_OK(tc_nn_linear_backward_into(gt, xt, wt, true, ix, iw, ib));
        near_ref("linear_backward_into grad_x", dt, ix, ax, LM * LI, 4);
        near_ref("linear_backward_into grad_bias", dt, ib, ab, LO, 4);
        tc_tensor *iwc = NULL;
        CHECK_OK(tc_tensor_contiguous(iw, &iwc));
        near_ref("linear_backward_into grad_weight (strided)", dt, iwc, aw, LO * LI, 4);
        /* and overwrite */
        CHECK_OK(tc_nn_linear_backward_into(gt, xt, wt, false, ix, NULL, ib));
        near_ref("linear_backward_into grad_x (overwrite)", dt, ix, rx, LM * LI, 4);
        near_ref("linear_backward_into grad_bias (overwrite)", dt, ib, rb, LO, 4);
        free(x), free(g), free(w), free(ox), free(ob), free(owt);
        tc_tensor_release(xt), tc_tensor_release(gt), tc_tensor_release(wt);
        tc_tensor_release(gx), tc_tensor_release(gw), tc_tensor_release(gb);
        tc_tensor_release(ix), tc_tensor_release(ib), tc_tensor_release(iwt);
        tc_tensor_release(iw), tc_tensor_release(iwc);
    }
    /* x 1-d, and no rows at all (zero weight and bias gradients) */
    int64_t x1 = LI, g1 = LO, wsz1[2] = {LO, LI}, z3[3] = {0, LT, LI}, zg[3] = {0, LT, LO};
    double *x, *g, *w, rx[LI], rw[LO * LI], rb[LO];
    tc_tensor *xt = rnd(dev, 1, &x1, TC_FLOAT64, -1, 1, &x),
              *gt = rnd(dev, 1, &g1, TC_FLOAT64, -1, 1, &g);
    tc_tensor *wt = rnd(dev, 2, wsz1, TC_FLOAT64, -1, 1, &w), *gx = NULL, *gw = NULL, *gb = NULL;
    ref_linear_bwd(g, x, w, 1, LI, LO, rx, rw, rb);
    CHECK_OK(tc_nn_linear_backward(gt, xt, wt, 7, &gx, &gw, &gb));
    near_ref("linear_backward 1-d grad_x", TC_FLOAT64, gx, rx, LI, 1);
    near_ref("linear_backward 1-d grad_weight", TC_FLOAT64, gw, rw, LO * LI, 1);
    near_ref("linear_backward 1-d grad_bias", TC_FLOAT64, gb, rb, LO, 1);
    tc_tensor_release(xt), tc_tensor_release(gt), tc_tensor_release(gx);
    tc_tensor_release(gw), tc_tensor_release(gb);
    CHECK_OK(tc_tensor_zeros(3, z3, TC_FLOAT64, dev, &xt));
    CHECK_OK(tc_tensor_zeros(3, zg, TC_FLOAT64, dev, &gt));
    CHECK_OK(tc_nn_linear_backward(gt, xt, wt, 7, &gx, &gw, &gb));
    double zeros[LO * LI] = {0};
    CHECK(gx && tc_tensor_numel(gx) == 0);
    near_ref("linear_backward no rows grad_weight", TC_FLOAT64, gw, zeros, LO * LI, 0);
    near_ref("linear_backward no rows grad_bias", TC_FLOAT64, gb, zeros, LO, 0);
    free(x), free(g), free(w);
    tc_tensor_release(xt), tc_tensor_release(gt), tc_tensor_release(wt), tc_tensor_release(gx);
    tc_tensor_release(gw), tc_tensor_release(gb);
}

/* L = sum(G * linear(x, W, b)) in float64 on the CPU. */
static double linear_loss(const double *x, const double *w, const double *b, const double *g)
{
    int64_t xsz[3] = {LB, LT, LI}, wsz[2] = {LO, LI}, bsz = LO;
    tc_tensor *xt = from(CPU, x, TC_FLOAT64, 3, xsz, TC_FLOAT64);
    tc_tensor *wt = from(CPU, w, TC_FLOAT64, 2, wsz, TC_FLOAT64);
    tc_tensor *bt = from(CPU, b, TC_FLOAT64, 1, &bsz, TC_FLOAT64), *y = NULL;
    CHECK_OK(tc_nn_linear(xt, wt, bt, &y));
    double *yv = tc_test_values(y), l = dot(yv, g, LM * LO);
    free(yv);
    tc_tensor_release(xt), tc_tensor_release(wt), tc_tensor_release(bt), tc_tensor_release(y);
    return l;
}

/* The central difference of linear_loss in each element of p (n of them)
 * against the analytic gradient an; the largest difference. */
static double linear_fd(double *x, double *w, double *b, const double *g, double *p, int n,
                        const double *an)
{
    double h = 1e-6, worst = 0;
    for (int k = 0; k < n; k++) {
        double keep = p[k];
        p[k] = keep + h;
        double lp = linear_loss(x, w, b, g);
        p[k] = keep - h;
        double lm = linear_loss(x, w, b, g);
        p[k] = keep;
        worst = fmax(worst, fabs((lp - lm) / (2 * h) - an[k]));
    }
    return worst;
}

static void linear_finite_difference(void)
{
    int64_t xsz[3] = {LB, LT, LI}, gsz[3] = {LB, LT, LO}, wsz[2] = {LO, LI}, bsz = LO;
    double *x, *g, *w, *b;
    tc_tensor *xt = rnd(CPU, 3, xsz, TC_FLOAT64, -1, 1, &x);
    tc_tensor *gt = rnd(CPU, 3, gsz, TC_FLOAT64, -1, 1, &g);
    tc_tensor *wt = rnd(CPU, 2, wsz, TC_FLOAT64, -1, 1, &w);
    tc_tensor *bt = rnd(CPU, 1, &bsz, TC_FLOAT64, -1, 1, &b);
    tc_tensor *gx = NULL, *gw = NULL, *gb = NULL;
    CHECK_OK(tc_nn_linear_backward(gt, xt, wt, 7, &gx, &gw, &gb));
    double *ax = tc_test_values(gx), *aw = tc_test_values(gw), *ab = tc_test_values(gb);
    double ex = linear_fd(x, w, b, g, x, LM * LI, ax), ew = linear_fd(x, w, b, g, w, LO * LI, aw);
    double eb = linear_fd(x, w, b, g, b, LO, ab);
    CHECK(ex < 1e-7 && ew < 1e-7 && eb < 1e-7);
    if (!(ex < 1e-7 && ew < 1e-7 && eb < 1e-7))
        fprintf(stderr, "linear finite difference: off by %g, %g, %g\n", ex, ew, eb);
    free(x), free(g), free(w), free(b), free(ax), free(aw), free(ab);
    tc_tensor_release(xt), tc_tensor_release(gt), tc_tensor_release(wt), tc_tensor_release(bt);
    tc_tensor_release(gx), tc_tensor_release(gw), tc_tensor_release(gb);
}

static void linear_bad_input(tc_device dev)
{
    int64_t xsz[3] = {LB, LT, LI}, gsz[3] = {LB, LT, LO}, wsz[2] = {LO, LI}, bsz = LO;
    int64_t g2[3] = {LB, LT + 1, LO};
    tc_tensor *xt = rnd(dev, 3, xsz, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *gt = rnd(dev, 3, gsz, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *wt = rnd(dev, 2, wsz, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *w16 = rnd(dev, 2, wsz, TC_FLOAT16, -1, 1, NULL);
    tc_tensor *gbad = rnd(dev, 3, g2, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *bt = rnd(dev, 1, &bsz, TC_FLOAT32, -1, 1, NULL), *a = NULL, *b = NULL, *c = NULL;
    tc_tensor *bexp = NULL, *one = rnd(dev, 1, (int64_t[]){1}, TC_FLOAT32, 0, 1, NULL);
    CHECK_OK(tc_tensor_expand(one, 1, &bsz, &bexp));
    CHECK_STATUS(tc_nn_linear_backward(NULL, xt, wt, 7, &a, &b, &c), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_linear_backward(gt, NULL, wt, 7, &a, &b, &c), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_linear_backward(gt, xt, NULL, 7, &a, &b, &c), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_linear_backward(gt, xt, wt, 0, &a, &b, &c), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_linear_backward(gt, xt, wt, 8, &a, &b, &c), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_linear_backward(gt, xt, wt, 1, NULL, &b, &c), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_linear_backward(gt, xt, wt, 2, &a, NULL, &c), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_linear_backward(gt, xt, wt, 4, &a, &b, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_linear_backward(gt, xt, w16, 7, &a, &b, &c), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_nn_linear_backward(gbad, xt, wt, 7, &a, &b, &c), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_linear_backward(gt, xt, xt, 7, &a, &b, &c), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_linear_backward(gt, gt, wt, 7, &a, &b, &c), TC_ERROR_SHAPE);
    CHECK(a == NULL && b == NULL && c == NULL);
    CHECK_STATUS(tc_nn_linear_backward_into(gt, xt, wt, true, NULL, NULL, NULL),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_linear_backward_into(gt, xt, wt, true, NULL, xt, NULL), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_linear_backward_into(gt, xt, wt, true, NULL, w16, NULL), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_nn_linear_backward_into(gt, xt, wt, true, NULL, NULL, bexp),
                 TC_ERROR_INVALID_ARGUMENT);
    /* an output may not share memory with an input or another output */
    CHECK_STATUS(tc_nn_linear_backward_into(gt, xt, wt, true, NULL, wt, NULL),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "grad_weight shares memory with weight") != NULL);
    tc_tensor *wv = NULL;
    CHECK_OK(tc_tensor_view(wt, 2, wsz, &wv));
    CHECK_STATUS(tc_nn_linear_backward_into(gt, xt, wt, false, NULL, wv, NULL),
                 TC_ERROR_INVALID_ARGUMENT);
    tc_tensor_release(wv);
    tc_tensor_release(xt), tc_tensor_release(gt), tc_tensor_release(wt), tc_tensor_release(w16);
    tc_tensor_release(gbad), tc_tensor_release(bt), tc_tensor_release(bexp);
    tc_tensor_release(one);
}

/* ---- dropout ------------------------------------------------------------------------- */

/* Philox's keep decision for element i of a draw at (seed, offset). */
static bool ref_keep(uint64_t seed, uint64_t offset, int64_t i, double p)
{
    uint32_t w[4];
    tc__philox_block(seed, offset + (uint64_t)i / 4, 0, 0, w);
    return (uint64_t)w[i % 4] < (uint64_t)(ldexp(1 - p, 32) + 0.5);
}

static void dropout_values(void)
{
    int64_t sz[2] = {5, 37}, n = 5 * 37;
    double p = 0.3, scale = 1 / (1 - p);
    for (int d = 0; d < 4; d++) {
        tc_dtype dt = FLOATS[d];
        uint64_t seed = tc_test_seed() + (uint64_t)d;
        tc_generator *gen = NULL;
        CHECK_OK(tc_generator_create(CPU, seed, &gen));
        CHECK_OK(tc_generator_manual_seed(gen, seed));
        double *x, *g;
        tc_tensor *xt = rnd(CPU, 2, sz, dt, -3, 3, &x), *gt = rnd(CPU, 2, sz, dt, -1, 1, &g);
        tc_tensor *out = NULL, *mask = NULL, *gin = NULL;
        CHECK_OK(tc_nn_dropout(xt, p, true, gen, &out, &mask));
        CHECK(tc_test_gen_offset(gen) == (uint64_t)(n + 3) / 4);
        CHECK(mask && tc_tensor_dtype(mask) == TC_BOOL && tc_tensor_numel(mask) == n);
        double *m = tc_test_values(mask), *ref = malloc(sizeof(double) * (size_t)n);
        double *gref = malloc(sizeof(double) * (size_t)n);
        int64_t wrong = 0;
        for (int64_t i = 0; i < n; i++) {
            bool keep = ref_keep(seed, 0, i, p);
            wrong += (m[i] != 0) != keep;
            /* the scale rounded to the computation type first, as PyTorch's */
            double s = dt == TC_FLOAT64 ? scale : (double)(float)scale;
            ref[i] = keep ? x[i] * s : 0;
            gref[i] = keep ? g[i] * s : 0;
        }
        CHECK(wrong == 0);
        near_ref("dropout", dt, out, ref, n, dt == TC_FLOAT32 ? 0.05 : 1);
        CHECK_OK(tc_nn_dropout_backward(gt, mask, p, &gin));
        near_ref("dropout_backward", dt, gin, gref, n, dt == TC_FLOAT32 ? 0.05 : 1);
        free(m), free(ref), free(gref), free(x), free(g);
        tc_tensor_release(xt), tc_tensor_release(gt), tc_tensor_release(out);
        tc_tensor_release(mask), tc_tensor_release(gin);
        CHECK_OK(tc_generator_destroy(gen));
    }
}

/* p 0 and 1, eval mode, a strided x, an empty x, the keep rate. */
static void dropout_edges(void)
{
    int64_t sz[2] = {4, 9};
    tc_generator *gen = NULL;
    CHECK_OK(tc_generator_create(CPU, 7, &gen));
    double *x;
    tc_tensor *xt = rnd(CPU, 2, sz, TC_FLOAT32, -2, 2, &x), *out = NULL, *mask = NULL;
    double zero[36] = {0}, ones[36];
    for (int i = 0; i < 36; i++)
        ones[i] = 1;
    CHECK_OK(tc_nn_dropout(xt, 1, true, gen, &out, &mask));
    near_ref("dropout p=1", TC_FLOAT32, out, zero, 36, 0);
    tc_tensor_release(out), tc_tensor_release(mask);
    CHECK_OK(tc_nn_dropout(xt, 0, true, gen, &out, &mask));
    near_ref("dropout p=0", TC_FLOAT32, out, x, 36, 0);
    near_ref("dropout p=0 mask", TC_BOOL, mask, ones, 36, 0);
    tc_tensor_release(out), tc_tensor_release(mask);
    uint64_t off = tc_test_gen_offset(gen);
    CHECK_OK(tc_nn_dropout(xt, 0.5, false, gen, &out, &mask));
    CHECK(tc_test_gen_offset(gen) == off); /* eval draws nothing */
    near_ref("dropout eval", TC_FLOAT32, out, x, 36, 0);
    CHECK(tc_tensor_data_ptr(out) != tc_tensor_data_ptr(xt)); /* a copy */
    near_ref("dropout eval mask", TC_BOOL, mask, ones, 36, 0);
    tc_tensor_release(out), tc_tensor_release(mask);
    /* strided x: elements drawn in row-major order of x */
    tc_tensor *xtt = NULL, *outc = NULL;
    CHECK_OK(tc_tensor_transpose(xt, 0, 1, &xtt));
    CHECK_OK(tc_generator_manual_seed(gen, 11));
    CHECK_OK(tc_nn_dropout(xtt, 0.25, true, gen, &out, NULL));
    double *o = tc_test_values(out);
    int64_t wrong = 0;
    for (int64_t i = 0; i < 36; i++) {
        int64_t r = i / 4, c = i % 4; /* xtt [9, 4] */
        double want = ref_keep(11, 0, i, 0.25) ? x[c * 9 + r] * (double)(float)(1 / 0.75) : 0;
        wrong += fabs(o[i] - want) > 1e-6 * (1 + fabs(want));
    }
    CHECK(wrong == 0);
    free(o);
    tc_tensor_release(out), tc_tensor_release(xtt);
    /* empty */
    int64_t ez[2] = {0, 3};
    tc_tensor *e = NULL;
    CHECK_OK(tc_tensor_zeros(2, ez, TC_FLOAT32, CPU, &e));
    off = tc_test_gen_offset(gen);
    CHECK_OK(tc_nn_dropout(e, 0.5, true, gen, &out, &mask));
    CHECK(tc_tensor_numel(out) == 0 && tc_tensor_numel(mask) == 0 &&
          tc_test_gen_offset(gen) == off);
    tc_tensor_release(out), tc_tensor_release(mask), tc_tensor_release(e);
    /* the keep rate of 100000 draws within 4 sigma; the kept values scaled exactly */
    int64_t big = 100000;
    tc_tensor *ones_t = NULL;
    CHECK_OK(tc_tensor_ones(1, &big, TC_FLOAT32, CPU, &ones_t));
    CHECK_OK(tc_nn_dropout(ones_t, 0.2, true, gen, &out, NULL));
    double *v = tc_test_values(out), kept = 0;
    int64_t odd = 0;
    for (int64_t i = 0; i < big; i++) {
        kept += v[i] != 0;
        odd += v[i] != 0 && v[i] != (double)(float)1.25;
    }
    double sigma = sqrt(big * 0.8 * 0.2);
    CHECK(fabs(kept - big * 0.8) < 4 * sigma && odd == 0);
    free(v), free(x);
    tc_tensor_release(out), tc_tensor_release(ones_t), tc_tensor_release(outc);
    tc_tensor_release(xt);
    CHECK_OK(tc_generator_destroy(gen));
}

/* L(x) = sum(G * dropout(x)) with the generator's state reset before each
 * draw (the same mask): dL/dx by central differences against the backward. */
static void dropout_finite_difference(void)
{
    int64_t sz[2] = {3, 7}, n = 21;
    tc_generator *gen = NULL;
    CHECK_OK(tc_generator_create(CPU, tc_test_seed(), &gen));
    tc_rng_state state;
    CHECK_OK(tc_generator_get_state(gen, &state));
    double *x, *g;
    tc_tensor *xt = rnd(CPU, 2, sz, TC_FLOAT64, -1, 1, &x),
              *gt = rnd(CPU, 2, sz, TC_FLOAT64, -1, 1, &g);
    tc_tensor *out = NULL, *mask = NULL, *gin = NULL;
    CHECK_OK(tc_nn_dropout(xt, 0.4, true, gen, &out, &mask));
    CHECK_OK(tc_nn_dropout_backward(gt, mask, 0.4, &gin));
    double *an = tc_test_values(gin), h = 1e-6, worst = 0;
    for (int64_t k = 0; k < n; k++) {
        double l[2];
        for (int s = 0; s < 2; s++) {
            double keep = x[k];
            x[k] = keep + (s ? -h : h);
            tc_tensor *xp = from(CPU, x, TC_FLOAT64, 2, sz, TC_FLOAT64), *y = NULL;
            CHECK_OK(tc_generator_set_state(gen, &state));
            CHECK_OK(tc_nn_dropout(xp, 0.4, true, gen, &y, NULL));
            double *yv = tc_test_values(y);
            l[s] = dot(yv, g, n);
            free(yv);
            tc_tensor_release(xp), tc_tensor_release(y);
            x[k] = keep;
        }
        worst = fmax(worst, fabs((l[0] - l[1]) / (2 * h) - an[k]));
    }
    CHECK(worst < 1e-7);
    free(an), free(x), free(g);
    tc_tensor_release(xt), tc_tensor_release(gt), tc_tensor_release(out);
    tc_tensor_release(mask), tc_tensor_release(gin);
    CHECK_OK(tc_generator_destroy(gen));
}

static void dropout_bad_input(tc_device dev)
{
    int64_t sz[2] = {2, 3}, sz2[2] = {3, 2};
    tc_tensor *x = rnd(dev, 2, sz, TC_FLOAT32, -1, 1, NULL), *out = NULL, *mask = NULL;
    tc_tensor *xi = NULL, *m8 = NULL, *mb = NULL, *mwrong = NULL;
    CHECK_OK(tc_tensor_zeros(2, sz, TC_INT32, dev, &xi));
    CHECK_OK(tc_tensor_zeros(2, sz, TC_UINT8, dev, &m8));
    CHECK_OK(tc_tensor_ones(2, sz, TC_BOOL, dev, &mb));
    CHECK_OK(tc_tensor_ones(2, sz2, TC_BOOL, dev, &mwrong));
    CHECK_STATUS(tc_nn_dropout(NULL, 0.5, true, NULL, &out, &mask), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_dropout(x, 0.5, true, NULL, NULL, &mask), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_dropout(x, -0.1, true, NULL, &out, &mask), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_dropout(x, 1.5, true, NULL, &out, &mask), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_dropout(x, NAN, true, NULL, &out, &mask), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_dropout(xi, 0.5, true, NULL, &out, &mask), TC_ERROR_DTYPE);
    tc_generator *bad = tc_test_garbage(64);
    CHECK_STATUS(tc_nn_dropout(x, 0.5, true, bad, &out, &mask), TC_ERROR_INVALID_HANDLE);
    free(bad);
    CHECK(out == NULL && mask == NULL);
    CHECK_STATUS(tc_nn_dropout_backward(NULL, mb, 0.5, &out), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_dropout_backward(x, NULL, 0.5, &out), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_dropout_backward(x, mb, 0.5, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_dropout_backward(x, m8, 0.5, &out), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_nn_dropout_backward(xi, mb, 0.5, &out), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_nn_dropout_backward(x, mwrong, 0.5, &out), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_dropout_backward(x, mb, 2, &out), TC_ERROR_INVALID_ARGUMENT);
    CHECK(out == NULL);
    if (dev.type == TC_CUDA) { /* a CPU generator for a GPU tensor */
        tc_generator *cpu = NULL;
        CHECK_OK(tc_generator_create(CPU, 1, &cpu));
        CHECK_STATUS(tc_nn_dropout(x, 0.5, true, cpu, &out, &mask), TC_ERROR_DEVICE_MISMATCH);
        CHECK_OK(tc_generator_destroy(cpu));
    }
    tc_tensor_release(x), tc_tensor_release(xi), tc_tensor_release(m8);
    tc_tensor_release(mb), tc_tensor_release(mwrong);
}

/* ---- the GPU against the CPU ------------------------------------------------------------ */

/* GPT-2-like shapes, scaled down: many repeats of a few rows, a padding row. */
static void gpu_embedding(void)
{
    enum { V = 300, C = 72, N = 4096 };
    int64_t isz = N, gsz[2] = {N, C}, wsz[2] = {V, C};
    int64_t *idx = malloc(sizeof(int64_t) * N);
    for (int i = 0; i < N; i++) /* skewed: row 0..9 often */
        idx[i] = (int64_t)(tc_test_rand() % 2 ? tc_test_rand() % 10 : tc_test_rand() % V);
    for (int d = 0; d < 4; d++) {
        tc_dtype dt = FLOATS[d];
        double *g;
        tc_tensor *gc = rnd(CPU, 2, gsz, dt, -1, 1, &g), *gg = NULL, *ic = NULL, *ig = NULL;
        CHECK_OK(tc_tensor_to(gc, GPU, dt, false, &gg));
        ic = idx_tensor(CPU, 1, &isz, idx, TC_INT64);
        ig = idx_tensor(GPU, 1, &isz, idx, TC_INT64);
        for (int mode = 0; mode < 4; mode++) {
            bool det = mode & 1, freq = mode & 2;
            tc_tensor *ref = NULL;
            CHECK_OK(tc_nn_embedding_backward(gc, ic, V, 3, freq, &ref));
            double *rv = tc_test_values(ref);
            CHECK_OK(tc_use_deterministic_algorithms(det));
            tc_tensor *a = NULL, *b = NULL;
            CHECK_OK(tc_nn_embedding_backward(gg, ig, V, 3, freq, &a));
            near_ref(det ? "GPU embedding_backward (deterministic)" : "GPU embedding_backward", dt,
                     a, rv, V * C, 4);
            CHECK_OK(tc_nn_embedding_backward(gg, ig, V, 3, freq, &b));
            if (det)
                CHECK(same_bytes(a, b));
            /* accumulate into a (now twice the gradient) */
            CHECK_OK(tc_nn_embedding_backward_(a, gg, ig, 3, freq));
            double *twice = malloc(sizeof(double) * V * C);
            for (int k = 0; k < V * C; k++)
                twice[k] = 2 * rv[k];
            near_ref("GPU embedding_backward_", dt, a, twice, V * C, 8);
            free(twice);
            tc_tensor_release(a), tc_tensor_release(b);
            free(rv);
            tc_tensor_release(ref);
        }
        CHECK_OK(tc_use_deterministic_algorithms(false));
        free(g);
        tc_tensor_release(gc), tc_tensor_release(gg), tc_tensor_release(ic);
        tc_tensor_release(ig);
    }
    /* an index out of range: TC_OK now, the error at the next synchronize */
    for (int det = 0; det < 2; det++) {
        CHECK_OK(tc_use_deterministic_algorithms(det));
        idx[17] = V + 5;
        tc_tensor *ig = idx_tensor(GPU, 1, &isz, idx, TC_INT64);
        tc_tensor *gg = rnd(GPU, 2, gsz, TC_FLOAT32, -1, 1, NULL), *a = NULL;
        CHECK_OK(tc_nn_embedding_backward(gg, ig, V, -1, false, &a));
        CHECK_STATUS(tc_synchronize(TC_CURRENT_DEVICE), TC_ERROR_INVALID_ARGUMENT);
        CHECK(strstr(tc_last_error(), "tc_nn_embedding_backward") != NULL);
        CHECK_OK(tc_synchronize(TC_CURRENT_DEVICE)); /* reported once; the GPU stays usable */
        idx[17] = 0;
        tc_tensor_release(ig), tc_tensor_release(gg), tc_tensor_release(a);
    }
    CHECK_OK(tc_use_deterministic_algorithms(false));
    free(idx);
    (void)wsz;
}

static void gpu_linear_once(void);

/* Both ways of the weight and bias gradients: cuBLASLt's BGRADB epilogue
 * where it takes them, and a GEMM with a column sum. */
static void gpu_linear(void)
{
    for (int fused = 1; fused >= 0; fused--) {
        tc__nn_linear_backward_set_fused(fused);
        uint64_t before = tc__nn_linear_backward_fused_count();
        gpu_linear_once();
        uint64_t n = tc__nn_linear_backward_fused_count() - before;
        printf("linear backward, fused %s: %llu of 8 calls in one cuBLASLt matmul\n",
               fused ? "allowed" : "off", (unsigned long long)n);
        if (!fused)
            CHECK(n == 0);
    }
    tc__nn_linear_backward_set_fused(true);
}

static void gpu_linear_once(void)
{
    int64_t xsz[3] = {4, 33, 40}, gsz[3] = {4, 33, 24}, wsz[2] = {24, 40};
    for (int d = 0; d < 4; d++) {
        tc_dtype dt = FLOATS[d];
        tc_tensor *xc = rnd(CPU, 3, xsz, dt, -1, 1, NULL), *gc = rnd(CPU, 3, gsz, dt, -1, 1, NULL);
        tc_tensor *wc = rnd(CPU, 2, wsz, dt, -1, 1, NULL), *xg = NULL, *gg = NULL, *wg = NULL;
        CHECK_OK(tc_tensor_to(xc, GPU, dt, false, &xg));
        CHECK_OK(tc_tensor_to(gc, GPU, dt, false, &gg));
        CHECK_OK(tc_tensor_to(wc, GPU, dt, false, &wg));
        tc_tensor *r[3] = {NULL}, *o[3] = {NULL};
        CHECK_OK(tc_nn_linear_backward(gc, xc, wc, 7, &r[0], &r[1], &r[2]));
        CHECK_OK(tc_nn_linear_backward(gg, xg, wg, 7, &o[0], &o[1], &o[2]));
        const char *names[3] = {"GPU linear grad_x", "GPU linear grad_weight",
                                "GPU linear grad_bias"};
        for (int k = 0; k < 3; k++) {
            double *rv = tc_test_values(r[k]);
            near_ref(names[k], dt, o[k], rv, tc_tensor_numel(r[k]), dt == TC_FLOAT32 ? 20 : 8);
            free(rv);
        }
        /* accumulate on the GPU: o += the gradients again */
        CHECK_OK(tc_nn_linear_backward_into(gg, xg, wg, true, o[0], o[1], o[2]));
        for (int k = 0; k < 3; k++) {
            double *rv = tc_test_values(r[k]);
            for (int64_t i = 0; i < tc_tensor_numel(r[k]); i++)
                rv[i] *= 2;
            near_ref(names[k], dt, o[k], rv, tc_tensor_numel(r[k]), dt == TC_FLOAT32 ? 40 : 16);
            free(rv);
            tc_tensor_release(r[k]), tc_tensor_release(o[k]);
        }
        tc_tensor_release(xc), tc_tensor_release(gc), tc_tensor_release(wc);
        tc_tensor_release(xg), tc_tensor_release(gg), tc_tensor_release(wg);
    }
}

/* ||got - want|| / ||want|| of n values. */
static double rel_error(const double *got, const double *want, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        num += (got[i] - want[i]) * (got[i] - want[i]);
        den += want[i] * want[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* TF32 follows backends.h in the backward's float32 GEMMs, as in the
 * forward's: inputs with all 24 mantissa bits, full float32 accuracy under
 * "highest", TF32's (relative error above 1e-4) under "high", unless
 * NVIDIA_TF32_OVERRIDE=0 turns TF32 off in cuBLAS. */
static void gpu_tf32(void)
{
    enum { M = 256, I = 512, O = 512 };
    int64_t xsz[2] = {M, I}, gsz[2] = {M, O}, wsz[2] = {O, I};
    double *x = malloc(sizeof(double) * M * I), *g = malloc(sizeof(double) * M * O);
    double *w = malloc(sizeof(double) * O * I), *rx = malloc(sizeof(double) * M * I);
    double *rw = malloc(sizeof(double) * O * I), rb[O];
    for (int k = 0; k < M * I; k++)
        x[k] = (float)(2 * tc_test_rand_uniform() - 1);
    for (int k = 0; k < M * O; k++)
        g[k] = (float)(2 * tc_test_rand_uniform() - 1);
    for (int k = 0; k < O * I; k++)
        w[k] = (float)(2 * tc_test_rand_uniform() - 1);
    ref_linear_bwd(g, x, w, M, I, O, rx, rw, rb);
    tc_tensor *xt = from(GPU, x, TC_FLOAT64, 2, xsz, TC_FLOAT32);
    tc_tensor *gt = from(GPU, g, TC_FLOAT64, 2, gsz, TC_FLOAT32);
    tc_tensor *wt = from(GPU, w, TC_FLOAT64, 2, wsz, TC_FLOAT32);
    double err[2][2] = {{-1, -1}, {-1, -1}};
    for (int high = 0; high < 2; high++) {
        CHECK_OK(tc_set_float32_matmul_precision(high ? "high" : "highest"));
        tc_tensor *gx = NULL, *gw = NULL, *gb = NULL;
        CHECK_OK(tc_nn_linear_backward(gt, xt, wt, 7, &gx, &gw, &gb));
        double *vx = gx ? tc_test_values(gx) : NULL, *vw = gw ? tc_test_values(gw) : NULL;
        if (vx && vw) {
            err[high][0] = rel_error(vx, rx, M * I);
            err[high][1] = rel_error(vw, rw, O * I);
        }
        free(vx), free(vw);
        tc_tensor_release(gx), tc_tensor_release(gw), tc_tensor_release(gb);
    }
    CHECK_OK(tc_set_float32_matmul_precision("highest"));
    printf("linear backward float32 relative error: highest %.3g / %.3g, high %.3g / %.3g "
           "(grad_x / grad_weight)\n",
           err[0][0], err[0][1], err[1][0], err[1][1]);
    const char *override = getenv("NVIDIA_TF32_OVERRIDE");
    bool tf32_possible = !(override && strcmp(override, "0") == 0);
    for (int k = 0; k < 2; k++) {
        CHECK(err[0][k] >= 0 && err[0][k] < 1e-5);
        if (tf32_possible)
            CHECK(err[1][k] > 1e-4 && err[1][k] < 1e-2);
        else
            CHECK(err[1][k] >= 0 && err[1][k] < 1e-5);
    }
    free(x), free(g), free(w), free(rx), free(rw);
    tc_tensor_release(xt), tc_tensor_release(gt), tc_tensor_release(wt);
}

/* The backward ops captured into a CUDA graph and replayed into zeroed
 * gradients: the embedding's (both modes; the deterministic one gives the
 * eager bits) and linear's into existing tensors (BGRADB where cuBLASLt
 * takes it, its workspace and the sort's scratch from the graph's pool). */
static void gpu_graph(void)
{
    int64_t isz = 512, gsz[2] = {512, 64}, wsz[2] = {40, 64}, xsz[2] = {512, 48};
    int64_t lw[2] = {64, 48}, lb = 64;
    int64_t *idx = malloc(sizeof(int64_t) * 512);
    for (int i = 0; i < 512; i++)
        idx[i] = (int64_t)(tc_test_rand() % 40);
    for (int d = 0; d < 2; d++)
        for (int det = 0; det < 2; det++) {
            tc_dtype dt = d ? TC_BFLOAT16 : TC_FLOAT32;
            CHECK_OK(tc_use_deterministic_algorithms(det));
            tc_tensor *ig = idx_tensor(GPU, 1, &isz, idx, TC_INT64);
            tc_tensor *go = rnd(GPU, 2, gsz, dt, -1, 1, NULL),
                      *x = rnd(GPU, 2, xsz, dt, -1, 1, NULL);
            tc_tensor *w = rnd(GPU, 2, lw, dt, -1, 1, NULL), *eager = NULL, *ex = NULL, *ew = NULL;
            tc_tensor *eb = NULL, *gw = NULL, *gx = NULL, *glw = NULL, *glb = NULL;
            CHECK_OK(tc_nn_embedding_backward(go, ig, 40, -1, false, &eager)); /* warm-up too */
            CHECK_OK(tc_nn_linear_backward(go, x, w, 7, &ex, &ew, &eb));
            CHECK_OK(tc_tensor_zeros(2, wsz, dt, GPU, &gw));
            CHECK_OK(tc_tensor_zeros(2, xsz, dt, GPU, &gx));
            CHECK_OK(tc_tensor_zeros(2, lw, dt, GPU, &glw));
            CHECK_OK(tc_tensor_zeros(1, &lb, dt, GPU, &glb));
            CHECK_OK(tc_synchronize(-1));
            tc_graph *g = NULL;
            CHECK_OK(tc_graph_create(&g));
            tc_graph_pool_id none = {0};
            tc_graph_capture_guard gd = tc_graph_capture_guard_enter(g, none, NULL,
                                                                     TC_CAPTURE_MODE_GLOBAL);
            CHECK_OK(gd.status);
            CHECK_OK(tc_nn_embedding_backward_(gw, go, ig, -1, false));
            CHECK_OK(tc_nn_linear_backward_into(go, x, w, false, gx, glw, glb));
            CHECK_OK(tc_graph_capture_guard_exit(&gd));
            for (int r = 0; r < 2; r++) { /* replays start from zeroed gradients */
                CHECK_OK(tc_tensor_fill_(gw, 0));
                CHECK_OK(tc_graph_replay(g));
                CHECK_OK(tc_synchronize(-1));
                double *ev = tc_test_values(eager);
                near_ref("embedding_backward_ replayed", dt, gw, ev, 40 * 64, 4);
                if (det)
                    CHECK(same_bytes(gw, eager));
                free(ev);
                tc_tensor *want[3] = {ex, ew, eb}, *got[3] = {gx, glw, glb};
                for (int k = 0; k < 3; k++) {
                    double *wv = tc_test_values(want[k]);
                    near_ref("linear_backward_into replayed", dt, got[k], wv,
                             tc_tensor_numel(want[k]), 8);
                    free(wv);
                }
            }
            CHECK_OK(tc_graph_destroy(g));
            tc_tensor_release(ig), tc_tensor_release(go), tc_tensor_release(x);
            tc_tensor_release(w), tc_tensor_release(eager), tc_tensor_release(ex);
            tc_tensor_release(ew), tc_tensor_release(eb), tc_tensor_release(gw);
            tc_tensor_release(gx), tc_tensor_release(glw), tc_tensor_release(glb);
        }
    CHECK_OK(tc_use_deterministic_algorithms(false));
    free(idx);
}

/* The same seed and offset give the same mask on the GPU as on the CPU, and
 * the same values (the same operations in the same types). */
static void gpu_dropout(void)
{
    int64_t sz[3] = {3, 50, 77};
    for (int d = 0; d < 4; d++) {
        tc_dtype dt = FLOATS[d];
        uint64_t seed = tc_test_seed() ^ 0x5eedull;
        tc_generator *gc = NULL, *gg = NULL;
        CHECK_OK(tc_generator_create(CPU, seed, &gc));
        CHECK_OK(tc_generator_create(GPU, seed, &gg));
        tc_tensor *xc = rnd(CPU, 3, sz, dt, -3, 3, NULL), *xg = NULL;
        CHECK_OK(tc_tensor_to(xc, GPU, dt, false, &xg));
        for (int round = 0; round < 2; round++) { /* the second at a later offset */
            tc_tensor *oc = NULL, *mc = NULL, *og = NULL, *mg = NULL, *bc = NULL, *bg = NULL;
            CHECK_OK(tc_nn_dropout(xc, 0.1, true, gc, &oc, &mc));
            CHECK_OK(tc_nn_dropout(xg, 0.1, true, gg, &og, &mg));
            CHECK(same_bytes(mc, mg));
            CHECK(same_bytes(oc, og));
            CHECK(tc_test_gen_offset(gc) == tc_test_gen_offset(gg));
            CHECK_OK(tc_nn_dropout_backward(xc, mc, 0.1, &bc));
            CHECK_OK(tc_nn_dropout_backward(xg, mg, 0.1, &bg));
            CHECK(same_bytes(bc, bg));
            tc_tensor_release(oc), tc_tensor_release(mc), tc_tensor_release(og);
            tc_tensor_release(mg), tc_tensor_release(bc), tc_tensor_release(bg);
        }
        tc_tensor_release(xc), tc_tensor_release(xg);
        CHECK_OK(tc_generator_destroy(gc));
        CHECK_OK(tc_generator_destroy(gg));
    }
}

int main(void)
{
    tc_test_init();
    embedding_values(CPU);
    embedding_finite_difference();
    embedding_bad_input(CPU);
    linear_values(CPU);
    linear_finite_difference();
    linear_bad_input(CPU);
    dropout_values();
    dropout_edges();
    dropout_finite_difference();
    dropout_bad_input(CPU);
    if (tc_is_available()) {
        embedding_values(GPU);
        embedding_bad_input(GPU);
        linear_values(GPU);
        linear_bad_input(GPU);
        dropout_bad_input(GPU);
        gpu_embedding();
        gpu_linear();
        gpu_dropout();
        gpu_graph();
        gpu_tf32();
    } else {
        printf("no GPU: the GPU half is not run\n");
    }
    return TC_TEST_DONE();
}
