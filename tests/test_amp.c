/* amp.h's GradScaler on the CPU: its defaults; scale(); the state machine
 * (growth after growth_interval good steps, backoff and a tracker reset on
 * an infinity or NaN in any gradient, the step skipped then); unscale_ and
 * step refused twice, update refused with no step, as PyTorch raises; step
 * without unscale_ (the fused path divides by the scale); a growth that
 * would overflow kept back; two optimizers in one round; the checkpoint
 * round trip; a disabled scaler; bad input. (test_optim_cuda runs a scaler
 * on a GPU against the CPU.) */
#include "base/handle_pool.h"
#include "optim_check.h"

/* One parameter of 5 elements and its gradient. */
typedef struct model {
    tc_tensor *p, *g;
    tc_optimizer *opt;
} model;

static void model_make(model *m, double lr)
{
    double pv[5] = {1, 2, 3, 4, 5};
    int64_t n = 5;
    m->p = mk(CPU, TC_FLOAT32, 1, &n, pv);
    m->g = NULL;
    CHECK_OK(tc_tensor_zeros(1, &n, TC_FLOAT32, CPU, &m->g));
    tc_sgd_options o = tc_sgd_options_default();
    o.lr = lr;
    CHECK_OK(tc_optimizer_create_sgd(&m->p, 1, &o, &m->opt));
}

static void model_free(model *m)
{
    CHECK_OK(tc_optimizer_destroy(m->opt));
    tc_tensor_release(m->p), tc_tensor_release(m->g);
}

static void set_grad(model *m, double v0, double scale)
{
    double gv[5] = {v0 * scale, 0.5 * scale, -1 * scale, 2 * scale, 0.25 * scale};
    int64_t n = 5;
    tc_tensor *t = mk(CPU, TC_FLOAT32, 1, &n, gv);
    CHECK_OK(tc_tensor_copy_(m->g, t, false));
    tc_tensor_release(t);
}

static tc_grad_scaler_state state_of(const tc_grad_scaler *s)
{
    tc_grad_scaler_state st = {0};
    CHECK_OK(tc_grad_scaler_get_state(s, &st));
    return st;
}

static void test_defaults_and_scale(void)
{
    tc_grad_scaler_options d = tc_grad_scaler_options_default();
    CHECK(d.init_scale == 65536 && d.growth_factor == 2 && d.backoff_factor == 0.5 &&
          d.growth_interval == 2000 && d.enabled);
    tc_grad_scaler *s = NULL;
    CHECK_OK(tc_grad_scaler_create(CPU, &d, &s));
    tc_grad_scaler_state st = state_of(s);
    CHECK(st.scale == 65536 && st.growth_tracker == 0 && st.growth_interval == 2000);
    double lv = 1.5;
    tc_tensor *loss = mk(CPU, TC_FLOAT32, 0, NULL, &lv), *scaled = NULL;
    CHECK_OK(tc_grad_scaler_scale(s, loss, &scaled));
    double v = 0;
    CHECK_OK(tc_tensor_item(scaled, &v));
    CHECK(v == 1.5 * 65536 && tc_tensor_dtype(scaled) == TC_FLOAT32);
    tc_tensor *sc = NULL;
    CHECK_OK(tc_grad_scaler_get_scale_tensor(s, &sc));
    CHECK(tc_tensor_dtype(sc) == TC_FLOAT32 && tc_tensor_ndim(sc) == 0);
    tc_tensor_release(sc), tc_tensor_release(scaled), tc_tensor_release(loss);
    CHECK_OK(tc_grad_scaler_destroy(s));
}

/* growth_interval 3: three good steps double the scale; an inf halves it,
 * resets the tracker and skips the step. */
static void test_state_machine(void)
{
    tc_grad_scaler_options o = tc_grad_scaler_options_default();
    o.init_scale = 1024, o.growth_interval = 3;
    tc_grad_scaler *s = NULL;
    CHECK_OK(tc_grad_scaler_create(CPU, &o, &s));
    model m;
    model_make(&m, 0.5);
    double want_p0 = 1;
    double scale = 1024;
    for (int it = 0; it < 8; it++) {
        bool bad = it == 4;
        set_grad(&m, bad ? INFINITY : 1.0, scale);
        CHECK_OK(tc_grad_scaler_unscale_(s, m.opt, &m.g, 1));
        double g0 = 0;
        tc_tensor *g0t = NULL;
        int64_t zero = 0, one = 1;
        CHECK_OK(tc_tensor_narrow(m.g, 0, zero, one, &g0t));
        CHECK_OK(tc_tensor_item(g0t, &g0));
        tc_tensor_release(g0t);
        CHECK(bad ? isinf(g0) : g0 == 1.0); /* unscaled */
        CHECK_OK(tc_grad_scaler_step(s, m.opt, &m.g, 1));
        if (!bad)
            want_p0 -= 0.5 * 1.0;
        double *pv = tc_test_values(m.p);
        CHECK(pv[0] == want_p0);
        free(pv);
        CHECK_OK(tc_grad_scaler_update(s));
        tc_grad_scaler_state st = state_of(s);
        /* good steps 0,1,2 -> grow at 2; 3 good; 4 inf -> backoff; 5,6,7 good -> grow at 7 */
        double want_scale[8] = {1024, 1024, 2048, 2048, 1024, 1024, 1024, 2048};
        int want_tracker[8] = {1, 2, 0, 1, 0, 1, 2, 0};
        CHECK(st.scale == want_scale[it]);
        CHECK(st.growth_tracker == want_tracker[it]);
        if (st.scale != want_scale[it] || st.growth_tracker != want_tracker[it])
            printf("  iteration %d: scale %g tracker %d\n", it, st.scale, st.growth_tracker);
        scale = st.scale;
    }
    /* a NaN in the second of two gradients is found too */
    tc_tensor *p2[2], *g2[2];
    double a[3] = {1, 2, 3}, b[3] = {1, NAN, 3};
    int64_t n3 = 3;
    p2[0] = mk(CPU, TC_FLOAT32, 1, &n3, a), p2[1] = mk(CPU, TC_FLOAT32, 1, &n3, a);
    g2[0] = mk(CPU, TC_FLOAT32, 1, &n3, a), g2[1] = mk(CPU, TC_FLOAT32, 1, &n3, b);
    tc_adamw_options ao = tc_adamw_options_default();
    tc_optimizer *opt2 = NULL;
    CHECK_OK(tc_optimizer_create_adamw(p2, 2, &ao, &opt2));
    CHECK_OK(tc_grad_scaler_step(s, opt2, g2, 2)); /* no unscale_: the step checks */
    CHECK(same_vals(p2[0], g2[0]));                /* skipped: still 1, 2, 3 */
    tc_tensor *cnt = NULL;
    CHECK_OK(tc_optimizer_get_state(opt2, 0, TC_OPTIMIZER_STATE_STEP, &cnt));
    double c = -1;
    CHECK_OK(tc_tensor_item(cnt, &c));
    CHECK(c == 0);
    tc_tensor_release(cnt);
    CHECK_OK(tc_grad_scaler_update(s));
    CHECK(state_of(s).scale == scale * 0.5 && state_of(s).growth_tracker == 0);
    CHECK_OK(tc_optimizer_destroy(opt2));
    for (int i = 0; i < 2; i++)
        tc_tensor_release(p2[i]), tc_tensor_release(g2[i]);
    model_free(&m);
    CHECK_OK(tc_grad_scaler_destroy(s));
}

/* The orders PyTorch refuses; step without unscale_ equals unscale_ + step. */
static void test_order(void)
{
    tc_grad_scaler_options o = tc_grad_scaler_options_default();
    tc_grad_scaler *s = NULL;
    CHECK_OK(tc_grad_scaler_create(CPU, &o, &s));
    model m, m2;
    model_make(&m, 0.25), model_make(&m2, 0.25);
    CHECK_STATUS(tc_grad_scaler_update(s), TC_ERROR_INVALID_STATE);
    set_grad(&m, 3.0, 65536), set_grad(&m2, 3.0, 65536);
    CHECK_OK(tc_grad_scaler_unscale_(s, m.opt, &m.g, 1));
    CHECK_STATUS(tc_grad_scaler_unscale_(s, m.opt, &m.g, 1), TC_ERROR_INVALID_STATE);
    CHECK_OK(tc_grad_scaler_step(s, m.opt, &m.g, 1));
    CHECK_STATUS(tc_grad_scaler_step(s, m.opt, &m.g, 1), TC_ERROR_INVALID_STATE);
    CHECK_STATUS(tc_grad_scaler_unscale_(s, m.opt, &m.g, 1), TC_ERROR_INVALID_STATE);
    CHECK_OK(tc_grad_scaler_step(s, m2.opt, &m2.g, 1)); /* a second optimizer, fused unscale */
    CHECK(same_vals(m.p, m2.p));
    CHECK(same_vals(m.g, m2.g)); /* the step wrote the unscaled gradient back */
    CHECK_OK(tc_grad_scaler_update(s));
    CHECK(state_of(s).growth_tracker == 1);
    /* float16 gradients: unscale_ refuses them, step takes them */
    tc_tensor *hp = NULL, *hg = NULL;
    int64_t n2 = 2;
    CHECK_OK(tc_tensor_ones(1, &n2, TC_FLOAT16, CPU, &hp));
    CHECK_OK(tc_tensor_full(1, &n2, 4096, TC_FLOAT16, CPU, &hg)); /* 1/16 scaled */
    tc_optimizer *ho = NULL;
    tc_sgd_options hs = tc_sgd_options_default();
    hs.lr = 0.5;
    CHECK_OK(tc_optimizer_create_sgd(&hp, 1, &hs, &ho));
    CHECK_STATUS(tc_grad_scaler_unscale_(s, ho, &hg, 1), TC_ERROR_DTYPE);
    /* the refused call recorded no check: update has nothing to go on */
    CHECK_STATUS(tc_grad_scaler_update(s), TC_ERROR_INVALID_STATE);
    CHECK(state_of(s).growth_tracker == 1);
    CHECK_OK(tc_grad_scaler_step(s, ho, &hg, 1));
    double hv[2] = {0.96875, 0.96875};
    near_vals("float16 param stepped", hp, hv, 2, 0);
    CHECK_OK(tc_optimizer_destroy(ho));
    tc_tensor_release(hp), tc_tensor_release(hg);
    CHECK_OK(tc_grad_scaler_unscale_(s, m.opt, &m.g, 1)); /* READY again */
    CHECK_STATUS(tc_grad_scaler_unscale_(s, m.opt, &m.g, 2), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_grad_scaler_step(s, NULL, &m.g, 1), TC_ERROR_INVALID_ARGUMENT);
    model_free(&m2);
    CHECK_STATUS(tc_grad_scaler_step(s, m2.opt, &m2.g, 1), TC_ERROR_INVALID_HANDLE);
    model_free(&m);
    CHECK_OK(tc_grad_scaler_destroy(s));
}

static void test_checkpoint_and_overflow(void)
{
    tc_grad_scaler_options o = tc_grad_scaler_options_default();
    o.growth_interval = 1;
    tc_grad_scaler *s = NULL, *s2 = NULL;
    CHECK_OK(tc_grad_scaler_create(CPU, &o, &s));
    CHECK_OK(tc_grad_scaler_create(CPU, &o, &s2));
    tc_grad_scaler_state st = {.scale = 3e38,
                               .growth_factor = 4,
                               .backoff_factor = 0.25,
                               .growth_interval = 1,
                               .growth_tracker = 0};
    CHECK_OK(tc_grad_scaler_set_state(s, &st));
    tc_grad_scaler_state got = state_of(s);
    CHECK(got.scale == (double)3e38f && got.growth_factor == 4 && got.backoff_factor == 0.25 &&
          got.growth_interval == 1 && got.growth_tracker == 0);
    CHECK_OK(tc_grad_scaler_set_state(s2, &got)); /* the round trip */
    got = state_of(s2);
    CHECK(got.scale == (double)3e38f && got.growth_factor == 4);
    /* growth to infinity is not taken; the tracker still resets */
    model m;
    model_make(&m, 0);
    set_grad(&m, 1, 1);
    CHECK_OK(tc_grad_scaler_step(s, m.opt, &m.g, 1));
    CHECK_OK(tc_grad_scaler_update(s));
    got = state_of(s);
    CHECK(got.scale == (double)3e38f && got.growth_tracker == 0);
    /* bad states and options */
    st.scale = INFINITY;
    CHECK_STATUS(tc_grad_scaler_set_state(s, &st), TC_ERROR_INVALID_ARGUMENT);
    st.scale = 1, st.backoff_factor = 1;
    CHECK_STATUS(tc_grad_scaler_set_state(s, &st), TC_ERROR_INVALID_ARGUMENT);
    st.backoff_factor = 0.5, st.growth_tracker = -1;
    CHECK_STATUS(tc_grad_scaler_set_state(s, &st), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_grad_scaler_set_state(s, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_grad_scaler_get_state(s, NULL), TC_ERROR_INVALID_ARGUMENT);
    tc_grad_scaler_options b = o;
    b.growth_factor = 1;
    tc_grad_scaler *x = NULL;
    CHECK_STATUS(tc_grad_scaler_create(CPU, &b, &x), TC_ERROR_INVALID_ARGUMENT);
    b = o, b.growth_interval = 0;
    CHECK_STATUS(tc_grad_scaler_create(CPU, &b, &x), TC_ERROR_INVALID_ARGUMENT);
    b = o, b.init_scale = 0;
    CHECK_STATUS(tc_grad_scaler_create(CPU, &b, &x), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_grad_scaler_create(CPU, NULL, &x), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_grad_scaler_create((tc_device){TC_CPU, 3}, &o, &x), TC_ERROR_INVALID_ARGUMENT);
    if (tc_device_count() == 0) /* GradScaler("cuda") where there is no GPU */
        CHECK_STATUS(tc_grad_scaler_create((tc_device){TC_CUDA, 0}, &o, &x), TC_ERROR_NO_DEVICE);
    void *junk = tc_test_garbage(128);
    CHECK_STATUS(tc_grad_scaler_update((tc_grad_scaler *)junk), TC_ERROR_INVALID_HANDLE);
    free(junk);
    CHECK(x == NULL);
    model_free(&m);
    CHECK_OK(tc_grad_scaler_destroy(s));
    CHECK_OK(tc_grad_scaler_destroy(s2));
    CHECK_STATUS(tc_grad_scaler_destroy(s), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_grad_scaler_update(s), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_grad_scaler_destroy(NULL), TC_ERROR_INVALID_ARGUMENT);
}

static void test_disabled(void)
{
    tc_grad_scaler_options o = tc_grad_scaler_options_default();
    o.enabled = false;
    tc_grad_scaler *s = NULL;
    CHECK_OK(tc_grad_scaler_create(CPU, &o, &s));
    double lv = 2;
    tc_tensor *loss = mk(CPU, TC_FLOAT32, 0, NULL, &lv), *out = NULL;
    CHECK_OK(tc_grad_scaler_scale(s, loss, &out));
    CHECK(out == loss);
    tc_tensor_release(out), tc_tensor_release(loss);
    model m;
    model_make(&m, 1);
    set_grad(&m, 1, 1);
    CHECK_OK(tc_grad_scaler_unscale_(s, m.opt, &m.g, 1));
    CHECK_OK(tc_grad_scaler_step(s, m.opt, &m.g, 1)); /* a plain step */
    double *pv = tc_test_values(m.p);
    CHECK(pv[0] == 0);
    free(pv);
    CHECK_OK(tc_grad_scaler_update(s));
    CHECK(state_of(s).scale == 65536);
    tc_tensor *sc = NULL;
    CHECK_STATUS(tc_grad_scaler_get_scale_tensor(s, &sc), TC_ERROR_INVALID_STATE);
    model_free(&m);
    CHECK_OK(tc_grad_scaler_destroy(s));
}

/* An optimizer destroyed between step and update, whose handle's memory a
 * new optimizer gets: the new one starts READY, it does not inherit the
 * old one's STEPPED. */
static void test_reused_handle(void)
{
    tc_grad_scaler *s = NULL;
    tc_grad_scaler_options o = tc_grad_scaler_options_default();
    CHECK_OK(tc_grad_scaler_create(CPU, &o, &s));
    model a;
    model_make(&a, 0.5);
    CHECK_OK(tc_grad_scaler_step(s, a.opt, &a.g, 1));
    tc_optimizer *gone = a.opt;
    model_free(&a);
    bool reused = false;
    for (int i = 0; i < 4 * TC_HANDLE_POOL_QUARANTINE && !reused; i++) {
        model b;
        model_make(&b, 0.5);
        if (b.opt == gone) {
            reused = true;
            CHECK_OK(tc_grad_scaler_step(s, b.opt, &b.g, 1));
        }
        model_free(&b);
    }
    CHECK(reused); /* the pool hands memory out again after its quarantine */
    CHECK_OK(tc_grad_scaler_destroy(s));
}

int main(void)
{
    tc_test_init();
    test_defaults_and_scale();
    test_state_machine();
    test_order();
    test_checkpoint_and_overflow();
    test_disabled();
    test_reused_handle();
    return TC_TEST_DONE();
}
