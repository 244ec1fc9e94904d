/* examples/train_gpt2's backward pass (train_gpt2_model.c) against finite
 * differences of its own forward pass, on a tiny GPT-2 on the CPU.
 *
 * For each parameter p with gradient g and a random direction d on p alone,
 * the central difference (L(p + eps d) - L(p - eps d)) / (2 eps) of the loss
 * must equal sum(g * d): this checks every parameter's gradient, hence the
 * whole composition of backward ops (the tied classifier, the residual
 * stream, the attention split and merge, the embeddings). Also: each
 * gradient is marked ready exactly once (DDP's contract), wpe's rows past
 * the sequence get no gradient, a second micro-step adds as much again
 * (accumulation), the bfloat16 model's gradients are the float32 ones within
 * bfloat16's precision, and, with a GPU, the GPU's float32 gradients equal
 * the CPU's within 1e-4 of their size. */
#include <math.h>
#include <stdlib.h>

#include "tc_test.h"
#include "train_gpt2_model.h"

enum { L = 2, H = 2, C = 16, V = 37, MAXT = 8, B = 2, T = 6 };

static const tc_device cpu = {TC_CPU, -1};
static int marks[4 + 12 * L];

static tc_status count_ready(int param, void *ctx)
{
    (void)ctx;
    marks[param]++;
    return TC_OK;
}

/* A tiny model with every parameter moved off its initialization (biases
 * 0 and layer-norm weights 1 would make many gradients vanish or coincide). */
static void make(gpt2 *m, tc_device dev, tc_dtype dtype)
{
    gpt2_config cfg = {L, H, C, V, MAXT};
    char err[256] = "";
    tc_status st = gpt2_create(&cfg, dev, dtype, 7, m, err, sizeof err);
    if (st != TC_OK)
        printf("gpt2_create: %s\n", err);
    CHECK(st == TC_OK);
    tc_generator *g;
    tc_tensor *scale; /* noise of std 0.3: gradients of size, a smooth loss */
    CHECK_OK(tc_generator_create(cpu, 11, &g));
    CHECK_OK(tc_tensor_full(0, NULL, 0.3, TC_FLOAT32, cpu, &scale));
    for (int i = 0; i < m->n; i++) {
        tc_tensor *noise, *noise_dev;
        CHECK_OK(tc_tensor_randn(tc_tensor_ndim(m->params[i]), tc_tensor_sizes(m->params[i]),
                                 TC_FLOAT32, cpu, g, &noise));
        CHECK_OK(tc_tensor_mul_(noise, scale));
        CHECK_OK(tc_tensor_to(noise, dev, TC_FLOAT32, false, &noise_dev));
        CHECK_OK(tc_tensor_add_(m->params[i], noise_dev));
        CHECK_OK(tc_tensor_zeros_like(m->params[i], &m->grads[i]));
        tc_tensor_release(noise);
        tc_tensor_release(noise_dev);
    }
    tc_generator_destroy(g);
    tc_tensor_release(scale);
    CHECK_OK(gpt2_cast_weights(m));
}

static void release_grads(gpt2 *m)
{
    for (int i = 0; i < m->n; i++)
        tc_tensor_release(m->grads[i]);
}

static int64_t xs[B * T + 1];

/* tokens x, y [B, T] on dev from xs */
static void batch(tc_device dev, tc_tensor **x, tc_tensor **y)
{
    int64_t s[2] = {B, T}, xv[B * T], yv[B * T];
    for (int i = 0; i < B * T; i++)
        xv[i] = xs[i], yv[i] = xs[i + 1];
    CHECK_OK(tc_tensor_from_data(xv, 2, s, TC_INT64, dev, x));
    CHECK_OK(tc_tensor_from_data(yv, 2, s, TC_INT64, dev, y));
}

static double loss_of(gpt2 *m, const tc_tensor *x, const tc_tensor *y, bool backward)
{
    tc_tensor *acc;
    double v = NAN;
    CHECK_OK(tc_tensor_zeros(0, NULL, TC_FLOAT32, m->dev, &acc));
    CHECK_OK(gpt2_forward_backward(m, x, y, 1.0, backward, acc));
    CHECK_OK(tc_tensor_item(acc, &v));
    tc_tensor_release(acc);
    return v;
}

static void finite_differences(void)
{
    gpt2 m;
    make(&m, cpu, TC_FLOAT32);
    tc_tensor *x, *y;
    batch(cpu, &x, &y);
    m.ready = count_ready;
    double loss = loss_of(&m, x, y, true);
    m.ready = NULL;
    CHECK(isfinite(loss));
    tc_generator *g;
    CHECK_OK(tc_generator_create(cpu, 13, &g));
    const double eps = 3e-3;
    int bad = 0;
    for (int i = 0; i < m.n; i++) {
        char name[64];
        gpt2_param_name(&m, i, name, sizeof name);
        CHECK(marks[i] == 1);
        tc_tensor *p = m.params[i], *d;
        int64_t n = tc_tensor_numel(p);
        CHECK_OK(tc_tensor_randn(tc_tensor_ndim(p), tc_tensor_sizes(p), TC_FLOAT32, cpu, g, &d));
        double *gv = tc_test_values(m.grads[i]), *dv = tc_test_values(d), gd = 0, scale = 0;
        for (int64_t k = 0; k < n && gv && dv; k++)
            gd += gv[k] * dv[k], scale += fabs(gv[k] * dv[k]);
        /* central differences at eps and eps / 2, extrapolated (Richardson)
         * to cancel their eps^2 terms; p is restored after each */
        tc_tensor *saved;
        CHECK_OK(tc_tensor_empty_like(p, &saved));
        CHECK_OK(tc_tensor_copy_(saved, p, false));
        double fd2[2];
        for (int h = 0; h < 2; h++) {
            tc_tensor *e, *step;
            CHECK_OK(tc_tensor_full(0, NULL, h ? eps / 2 : eps, TC_FLOAT32, cpu, &e));
            CHECK_OK(tc_tensor_mul(d, e, &step));
            CHECK_OK(tc_tensor_add_(p, step));
            double up = loss_of(&m, x, y, false);
            CHECK_OK(tc_tensor_copy_(p, saved, false));
            CHECK_OK(tc_tensor_sub_(p, step));
            double down = loss_of(&m, x, y, false);
            CHECK_OK(tc_tensor_copy_(p, saved, false));
            fd2[h] = (up - down) / (h ? eps : 2 * eps);
            tc_tensor_release(e), tc_tensor_release(step);
        }
        double fd = (4 * fd2[1] - fd2[0]) / 3;
        /* float32 losses: their rounding over eps */
        double tol = 6e-4 + 1e-4 * scale;
        if (getenv("SHOW"))
            printf("  %-24s fd %10.6f  g.d %10.6f  |diff| %.2e  scale %.3f\n", name, fd, gd,
                   fabs(fd - gd), scale);
        if (!(fabs(fd - gd) <= tol)) {
            printf("  %s: finite difference %.6g, gradient %.6g (tolerance %.2g)\n", name, fd, gd,
                   tol);
            bad++;
        }
        if (i == GPT2_WPE && gv) { /* rows T.. were never used */
            double past = 0;
            for (int64_t k = (int64_t)T * C; k < n; k++)
                past += fabs(gv[k]);
            CHECK(past == 0);
        }
        free(gv), free(dv);
        tc_tensor_release(d);
        tc_tensor_release(saved);
    }
    CHECK(bad == 0);
    printf("finite differences: %d parameters, %d off (loss %.6f)\n", m.n, bad, loss);

    /* a second micro-step on the same batch doubles every gradient */
    double *before = tc_test_values(m.grads[GPT2_WTE]);
    loss_of(&m, x, y, true);
    double *after = tc_test_values(m.grads[GPT2_WTE]), worst = 0;
    for (int64_t k = 0; before && after && k < (int64_t)V * C; k++)
        worst = fmax(worst, fabs(after[k] - 2 * before[k]));
    CHECK(before && after && worst < 1e-5);
    free(before), free(after);
    tc_generator_destroy(g);
    tc_tensor_release(x), tc_tensor_release(y);
    release_grads(&m);
    gpt2_free(&m);
}

/* The relative distance of two models' gradients, the largest over
 * parameters: |a - b| / |b| (2-norms). */
static double grad_distance(gpt2 *a, gpt2 *b)
{
    double worst = 0;
    for (int i = 0; i < a->n; i++) {
        double *u = tc_test_values(a->grads[i]), *v = tc_test_values(b->grads[i]), d = 0, s = 0;
        for (int64_t k = 0; u && v && k < tc_tensor_numel(b->grads[i]); k++)
            d += (u[k] - v[k]) * (u[k] - v[k]), s += v[k] * v[k];
        worst = fmax(worst, s > 0 ? sqrt(d / s) : sqrt(d));
        free(u), free(v);
    }
    return worst;
}

/* The same model and batch through another device or dtype. */
static double against_cpu_float32(tc_device dev, tc_dtype dtype)
{
    gpt2 ref, m;
    make(&ref, cpu, TC_FLOAT32);
    make(&m, dev, dtype);
    tc_tensor *x, *y, *xd, *yd;
    batch(cpu, &x, &y);
    batch(dev, &xd, &yd);
    double l_ref = loss_of(&ref, x, y, true), l = loss_of(&m, xd, yd, true);
    double dist = grad_distance(&m, &ref);
    printf("%s %s: loss %.6f (float32 on the CPU %.6f), gradients within %.2e\n",
           dev.type == TC_CUDA ? "cuda" : "cpu", tc_dtype_string(dtype), l, l_ref, dist);
    CHECK(fabs(l - l_ref) <= (dtype == TC_FLOAT32 ? 1e-5 : 2e-2) * fabs(l_ref));
    tc_tensor_release(x), tc_tensor_release(y), tc_tensor_release(xd), tc_tensor_release(yd);
    release_grads(&ref), release_grads(&m);
    gpt2_free(&ref), gpt2_free(&m);
    return dist;
}

int main(void)
{
    tc_test_init();
    for (int i = 0; i <= B * T; i++)
        xs[i] = (int64_t)(tc_test_rand() % V);
    finite_differences();
    /* bfloat16's worst parameter over 60 seeds: median 1.8e-2, largest
     * 3.8e-2; one seed in about 100 gave 1.07e-1 (a layer-0 gradient of norm
     * 0.14). A broken bfloat16 path is off by far more. */
    CHECK(against_cpu_float32(cpu, TC_BFLOAT16) < 2e-1);
    if (tc_is_available()) {
        CHECK(against_cpu_float32((tc_device){TC_CUDA, 0}, TC_FLOAT32) < 1e-4);
        CHECK(against_cpu_float32((tc_device){TC_CUDA, 0}, TC_BFLOAT16) < 2e-1);
    } else {
        printf("no GPU: the GPU's gradients are not compared\n");
    }
    return TC_TEST_DONE();
}
