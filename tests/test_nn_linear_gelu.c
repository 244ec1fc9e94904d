/* tc_nn_linear_gelu and tc_nn_linear_backward_gelu (nn_backward.h): a
 * linear and the gelu after it, forward (one GEMM where the backend has the
 * epilogue) and backward.
 *   - against a double-precision loop written here (linear, tanh or exact
 *     gelu, its derivative, the column sums), within the dtype's tolerance;
 *   - against the ops apart (tc_nn_linear then tc_tensor_gelu;
 *     tc_nn_linear_backward's grad_x, tc_nn_gelu_backward, a sum), bit for
 *     bit where the call runs them (the backward always; the forward on the
 *     CPU, with the test hook off, the exact gelu or no bias), within the
 *     dtype's rounding where the forward fuses;
 *   - on a GPU, the fused count going up for bfloat16 forwards of whole
 *     16-byte rows with the tanh gelu (cuBLASLt's GELU_AUX_BIAS), never for
 *     float32 (kept to PyTorch's ops), float64 or a backward;
 *   - pre and grad_bias NULL; bad input refused with a status, nothing made. */
#include <string.h>

#include "nn_check.h"
#include "tcuda/nn_backward.h"

static const double PI = 3.14159265358979323846;

/* Whether the test hook lets the calls fuse (test_hook_off turns it off). */
static bool fuse_on = true;

static double gelu_ref(double v, bool tanh_approx)
{
    if (!tanh_approx)
        return 0.5 * v * (1 + erf(v / sqrt(2.0)));
    double k = sqrt(2.0 / PI), u = k * (v + 0.044715 * v * v * v);
    return 0.5 * v * (1 + tanh(u));
}

static double gelu_grad_ref(double v, bool tanh_approx)
{
    if (!tanh_approx)
        return 0.5 * (1 + erf(v / sqrt(2.0))) + v * exp(-0.5 * v * v) / sqrt(2 * PI);
    double k = sqrt(2.0 / PI), u = k * (v + 0.044715 * v * v * v), t = tanh(u);
    return 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * k * (1 + 3 * 0.044715 * v * v);
}

/* The case's values and their double results. */
typedef struct lg_case {
    int64_t m, in, out;
    double *x, *w, *b, *go; /* x [m, in], w [out, in], b [out], go [out-layer's rows: m, out2] */
} lg_case;

/* Forward: against the loop (pre and out) and the ops apart. */
static void check_forward(tc_device dev, tc_dtype dt, const lg_case *c, bool with_bias,
                          tc_gelu_approximate ap)
{
    int64_t xs[2] = {c->m, c->in}, ws[2] = {c->out, c->in};
    tc_tensor *x = tensor_of(dev, dt, 2, xs, c->x), *w = tensor_of(dev, dt, 2, ws, c->w);
    tc_tensor *b = with_bias ? tensor_of(dev, dt, 1, &c->out, c->b) : NULL;
    double *xv = tc_test_values(x), *wv = tc_test_values(w), *bv = b ? tc_test_values(b) : NULL;
    uint64_t f0 = tc__nn_linear_gelu_fused_count();
    tc_tensor *out = NULL, *pre = NULL;
    CHECK_OK(tc_nn_linear_gelu(x, w, b, ap, &out, &pre));
    bool fused = tc__nn_linear_gelu_fused_count() - f0 == 1;
    bool tanh_ap = ap == TC_GELU_APPROXIMATE_TANH;
    if (!fuse_on || dev.type == TC_CPU || !tanh_ap || !b || dt == TC_FLOAT64 || dt == TC_FLOAT32)
        CHECK(!fused);
    else if (dt == TC_BFLOAT16 && c->out % 8 == 0) /* cuBLASLt's epilogue on this GPU */
        CHECK(fused);
    int64_t n = c->m * c->out;
    double *rp = malloc(sizeof(double) * (size_t)n), *ro = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < c->m; i++)
        for (int64_t j = 0; j < c->out; j++) {
            double s = bv ? bv[j] : 0;
            for (int64_t k = 0; k < c->in; k++)
                s += xv[i * c->in + k] * wv[j * c->in + k];
            rp[i * c->out + j] = s;
            ro[i * c->out + j] = gelu_ref(s, tanh_ap);
        }
    char what[120];
    snprintf(what, sizeof what, "linear_gelu pre [%lld, %lld]%s%s", (long long)c->m,
             (long long)c->out, b ? "" : " no bias", fused ? " fused" : "");
    near_ref(what, dt, pre, rp, n, 4);
    snprintf(what, sizeof what, "linear_gelu out [%lld, %lld]%s%s", (long long)c->m,
             (long long)c->out, b ? "" : " no bias", fused ? " fused" : "");
    near_ref(what, dt, out, ro, n, 4);
    /* the ops apart: the same bits unless fused, then within rounding */
    tc_tensor *p2 = NULL, *o2 = NULL;
    CHECK_OK(tc_nn_linear(x, w, b, &p2));
    CHECK_OK(tc_tensor_gelu(p2, ap, &o2));
    near_tensor("linear_gelu pre against tc_nn_linear", pre, p2, fused ? 2 : 0);
    near_tensor("linear_gelu out against tc_tensor_gelu", out, o2, fused ? 2 : 0);
    /* pre not wanted */
    tc_tensor *o3 = NULL;
    CHECK_OK(tc_nn_linear_gelu(x, w, b, ap, &o3, NULL));
    near_tensor("linear_gelu out without pre", o3, o2, fused ? 2 : 0);
    free(xv), free(wv), free(bv), free(rp), free(ro);
    tc_tensor *all[] = {x, w, b, out, pre, p2, o2, o3};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tc_tensor_release(all[i]);
}

/* Backward: grad_output [m, out2] of y = linear(gelu(pre), w2 [out2, in2])
 * with pre [m, in2]; here in2 = c->out, out2 = c->in. */
static void check_backward(tc_device dev, tc_dtype dt, const lg_case *c, tc_gelu_approximate ap)
{
    int64_t in2 = c->out, out2 = c->in;
    int64_t ps[2] = {c->m, in2}, gs[2] = {c->m, out2}, ws[2] = {out2, in2};
    tc_tensor *pre = tensor_of(dev, dt, 2, ps, c->x), *go = tensor_of(dev, dt, 2, gs, c->go);
    tc_tensor *w = tensor_of(dev, dt, 2, ws, c->w);
    double *pv = tc_test_values(pre), *gv = tc_test_values(go), *wv = tc_test_values(w);
    uint64_t f0 = tc__nn_linear_gelu_fused_count();
    tc_tensor *gp = NULL, *gb = NULL;
    CHECK_OK(tc_nn_linear_backward_gelu(go, w, pre, ap, &gp, &gb));
    CHECK(tc__nn_linear_gelu_fused_count() == f0); /* the backward runs the ops apart */
    bool tanh_ap = ap == TC_GELU_APPROXIMATE_TANH;
    int64_t n = c->m * in2;
    double *rg = malloc(sizeof(double) * (size_t)n), *rb = calloc((size_t)in2, sizeof(double));
    for (int64_t i = 0; i < c->m; i++)
        for (int64_t j = 0; j < in2; j++) {
            double s = 0;
            for (int64_t k = 0; k < out2; k++)
                s += gv[i * out2 + k] * wv[k * in2 + j];
            double d = s * gelu_grad_ref(pv[i * in2 + j], tanh_ap);
            rg[i * in2 + j] = d;
            rb[j] += d;
        }
    char what[120];
    snprintf(what, sizeof what, "linear_backward_gelu grad_pre [%lld, %lld]", (long long)c->m,
             (long long)in2);
    near_ref(what, dt, gp, rg, n, 8);
    snprintf(what, sizeof what, "linear_backward_gelu grad_bias [%lld]", (long long)in2);
    /* a sum over m rows, each within the dtype's rounding */
    near_ref(what, dt, gb, rb, in2, 8 * (double)c->m);
    /* the ops apart */
    tc_tensor *dy = NULL, *g2 = NULL, *gb3 = NULL;
    CHECK_OK(tc_nn_linear_backward(go, pre, w, TC_NN_LINEAR_GRAD_X, &dy, NULL, NULL));
    CHECK_OK(tc_nn_gelu_backward(dy, pre, ap, &g2));
    near_tensor("linear_backward_gelu against the ops apart", gp, g2, 0);
    /* grad_bias not wanted */
    tc_tensor *gp3 = NULL;
    CHECK_OK(tc_nn_linear_backward_gelu(go, w, pre, ap, &gp3, NULL));
    near_tensor("linear_backward_gelu without grad_bias", gp3, g2, 0);
    free(pv), free(gv), free(wv), free(rg), free(rb);
    tc_tensor *all[] = {pre, go, w, gp, gb, dy, g2, gb3, gp3};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tc_tensor_release(all[i]);
}

static void test_values(tc_device dev)
{
    /* rows of whole 16-byte vectors (out 64, 96) and not (out 37) */
    static const int64_t shapes[][3] = {{12, 48, 64}, {33, 40, 96}, {5, 24, 37}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        lg_case c = {shapes[s][0], shapes[s][1], shapes[s][2], NULL, NULL, NULL, NULL};
        int64_t big = c.m * (c.in > c.out ? c.in : c.out);
        c.x = rand_doubles(big, -2, 2);
        c.w = rand_doubles(c.in * c.out, -0.3, 0.3);
        c.b = rand_doubles(c.out, -0.5, 0.5);
        c.go = rand_doubles(big, -1, 1);
        for (int d = 0; d < 4; d++)
            for (int ap = 0; ap < 2; ap++) {
                tc_gelu_approximate a = ap ? TC_GELU_APPROXIMATE_TANH : TC_GELU_APPROXIMATE_NONE;
                check_forward(dev, FLOATS[d], &c, true, a);
                check_forward(dev, FLOATS[d], &c, false, a);
                check_backward(dev, FLOATS[d], &c, a);
            }
        free(c.x), free(c.w), free(c.b), free(c.go);
    }
}

/* The test hook off: a GPU runs the ops apart, bit for bit. */
static void test_hook_off(void)
{
    lg_case c = {16,
                 32,
                 64,
                 rand_doubles(16 * 64, -2, 2),
                 rand_doubles(32 * 64, -0.3, 0.3),
                 rand_doubles(64, -0.5, 0.5),
                 rand_doubles(16 * 64, -1, 1)};
    tc__nn_linear_gelu_set_fused(false);
    fuse_on = false;
    uint64_t f0 = tc__nn_linear_gelu_fused_count();
    check_forward(GPU, TC_BFLOAT16, &c, true, TC_GELU_APPROXIMATE_TANH);
    check_backward(GPU, TC_BFLOAT16, &c, TC_GELU_APPROXIMATE_TANH);
    CHECK(tc__nn_linear_gelu_fused_count() == f0);
    tc__nn_linear_gelu_set_fused(true);
    fuse_on = true;
    free(c.x), free(c.w), free(c.b), free(c.go);
}

static void test_bad_input(tc_device dev)
{
    int64_t xs[2] = {4, 8}, ws[2] = {16, 8}, wbad[2] = {16, 9}, bs = 16;
    tc_tensor *x = NULL, *w = NULL, *wb = NULL, *b = NULL, *wd = NULL, *dead = NULL;
    CHECK_OK(tc_tensor_zeros(2, xs, TC_FLOAT32, dev, &x));
    CHECK_OK(tc_tensor_zeros(2, ws, TC_FLOAT32, dev, &w));
    CHECK_OK(tc_tensor_zeros(2, wbad, TC_FLOAT32, dev, &wb));
    CHECK_OK(tc_tensor_zeros(1, &bs, TC_FLOAT32, dev, &b));
    CHECK_OK(tc_tensor_zeros(2, ws, TC_FLOAT64, dev, &wd));
    CHECK_OK(tc_tensor_zeros(2, xs, TC_FLOAT32, dev, &dead));
    tc_tensor_release(dead);
    const tc_gelu_approximate t = TC_GELU_APPROXIMATE_TANH;
    tc_tensor *o = NULL, *p = NULL;
    CHECK_STATUS(tc_nn_linear_gelu(NULL, w, b, t, &o, &p), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "tc_nn_linear_gelu"));
    CHECK_STATUS(tc_nn_linear_gelu(dead, w, b, t, &o, &p), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_nn_linear_gelu(x, w, b, (tc_gelu_approximate)7, &o, &p),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "approximate"));
    CHECK_STATUS(tc_nn_linear_gelu(x, w, b, t, NULL, &p), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_linear_gelu(x, wb, NULL, t, &o, &p), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_linear_gelu(x, wd, NULL, t, &o, &p), TC_ERROR_DTYPE);
    CHECK(!o && !p);
    /* the backward: grad_output [4, 8] of a linear [8, 16] on pre [4, 16] */
    int64_t ps[2] = {4, 16}, w2s[2] = {8, 16};
    tc_tensor *pre = NULL, *w2 = NULL, *gp = NULL, *gb = NULL;
    CHECK_OK(tc_tensor_zeros(2, ps, TC_FLOAT32, dev, &pre));
    CHECK_OK(tc_tensor_zeros(2, w2s, TC_FLOAT32, dev, &w2));
    CHECK_STATUS(tc_nn_linear_backward_gelu(NULL, w2, pre, t, &gp, &gb), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_linear_backward_gelu(x, w2, dead, t, &gp, &gb), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_nn_linear_backward_gelu(x, w2, pre, (tc_gelu_approximate)-1, &gp, &gb),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_linear_backward_gelu(x, w2, pre, t, NULL, &gb), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nn_linear_backward_gelu(x, w, pre, t, &gp, &gb), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_linear_backward_gelu(x, w2, x, t, &gp, &gb), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_nn_linear_backward_gelu(x, dead, pre, t, &gp, &gb), TC_ERROR_INVALID_HANDLE);
    CHECK(!gp && !gb);
    tc_tensor *all[] = {x, w, wb, b, wd, pre, w2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tc_tensor_release(all[i]);
}

int main(void)
{
    tc_test_init();
    test_values(CPU);
    test_bad_input(CPU);
    if (tc_is_available()) {
        test_values(GPU);
        test_hook_off();
        test_bad_input(GPU);
        CHECK_OK(tc_synchronize(-1));
    } else {
        printf("no GPU: the GPU checks are skipped\n");
    }
    return TC_TEST_DONE();
}
