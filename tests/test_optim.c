/* optim.h on the CPU: Adam, AdamW and SGD against their formulas in double
 * over several steps (weight decay, amsgrad, maximize, momentum, dampening,
 * nesterov), on lists of tensors of different sizes and dtypes; the skip on
 * found_inf and the division by grad_scale; the learning rate as a tensor;
 * a checkpoint saved and loaded through the state getters;
 * clip_grad_norm_ (2 and inf, clipping or not, error_if_nonfinite);
 * zero_grad; every foreach operation; and bad input. (test_optim_cuda
 * holds a GPU to these same CPU results.) */
#include "optim_check.h"

#define NT 3
static const int64_t SIZES[NT] = {7, 1, 33};

typedef struct list {
    tc_tensor *p[NT], *g[NT];
    double *pv[NT], *gv[NT];
} list;

static void list_make(list *l, tc_dtype dt)
{
    for (int i = 0; i < NT; i++) {
        l->p[i] = rnd_tensor(CPU, dt, SIZES[i], -1, 1, &l->pv[i]);
        l->g[i] = rnd_tensor(CPU, dt, SIZES[i], -1, 1, &l->gv[i]);
    }
}

/* New random gradients (their stored values in gv). */
static void list_new_grads(list *l, tc_dtype dt)
{
    for (int i = 0; i < NT; i++) {
        tc_tensor_release(l->g[i]);
        free(l->gv[i]);
        l->g[i] = rnd_tensor(CPU, dt, SIZES[i], -1, 1, &l->gv[i]);
    }
}

static void list_free(list *l)
{
    for (int i = 0; i < NT; i++) {
        tc_tensor_release(l->p[i]), tc_tensor_release(l->g[i]);
        free(l->pv[i]), free(l->gv[i]);
    }
}

static double tol_of(tc_dtype dt)
{
    return dt == TC_FLOAT64 ? 1e-13 : dt == TC_FLOAT32 ? 4e-6 : 3e-2;
}

static void check_state(const tc_optimizer *o, int i, tc_optimizer_state which, const double *want,
                        int64_t n, double tol, const char *what)
{
    tc_tensor *s = NULL;
    CHECK_OK(tc_optimizer_get_state(o, i, which, &s));
    near_vals(what, s, want, n, tol);
    tc_tensor_release(s);
}

/* ---- Adam / AdamW ----------------------------------------------------------------------- */

static void adam_case(tc_dtype dt, bool decoupled, tc_adamw_options o, const char *name)
{
    printf("%s %s\n", name, tc_dtype_string(dt));
    list l;
    list_make(&l, dt);
    double *m[NT], *v[NT], *vm[NT];
    for (int i = 0; i < NT; i++) {
        m[i] = calloc((size_t)SIZES[i], sizeof(double));
        v[i] = calloc((size_t)SIZES[i], sizeof(double));
        vm[i] = calloc((size_t)SIZES[i], sizeof(double));
    }
    tc_optimizer *opt = NULL;
    CHECK_OK(decoupled ? tc_optimizer_create_adamw(l.p, NT, &o, &opt)
                       : tc_optimizer_create_adam(l.p, NT, &o, &opt));
    double tol = tol_of(dt);
    for (int step = 1; step <= 5; step++) {
        CHECK_OK(tc_optimizer_step(opt, l.g, NT));
        for (int i = 0; i < NT; i++) {
            ref_adam(l.pv[i], l.gv[i], m[i], v[i], vm[i], SIZES[i], step, &o, decoupled);
            near_vals("param", l.p[i], l.pv[i], SIZES[i], tol);
            /* the reference goes on from what tcuda stored (16-bit rounding) */
            free(l.pv[i]);
            l.pv[i] = tc_test_values(l.p[i]);
        }
        list_new_grads(&l, dt);
    }
    for (int i = 0; i < NT; i++) {
        check_state(opt, i, TC_OPTIMIZER_STATE_EXP_AVG, m[i], SIZES[i], tol * 4, "exp_avg");
        check_state(opt, i, TC_OPTIMIZER_STATE_EXP_AVG_SQ, v[i], SIZES[i], tol * 4, "exp_avg_sq");
        if (o.amsgrad)
            check_state(opt, i, TC_OPTIMIZER_STATE_MAX_EXP_AVG_SQ, vm[i], SIZES[i], tol * 4,
                        "max_exp_avg_sq");
        double five = 5;
        check_state(opt, i, TC_OPTIMIZER_STATE_STEP, &five, 1, 0, "step");
        free(m[i]), free(v[i]), free(vm[i]);
    }
    tc_tensor *s = NULL;
    CHECK_STATUS(tc_optimizer_get_state(opt, 0, TC_OPTIMIZER_STATE_MOMENTUM_BUFFER, &s),
                 TC_ERROR_INVALID_ARGUMENT);
    if (!o.amsgrad)
        CHECK_STATUS(tc_optimizer_get_state(opt, 0, TC_OPTIMIZER_STATE_MAX_EXP_AVG_SQ, &s),
                     TC_ERROR_INVALID_ARGUMENT);
    CHECK_OK(tc_optimizer_destroy(opt));
    list_free(&l);
}

static void test_adam(void)
{
    tc_adamw_options d = tc_adamw_options_default();
    CHECK(d.lr == 1e-3 && d.beta1 == 0.9 && d.beta2 == 0.999 && d.eps == 1e-8 &&
          d.weight_decay == 1e-2 && !d.amsgrad && !d.maximize);
    CHECK(tc_adam_options_default().weight_decay == 0);
    tc_dtype dts[] = {TC_FLOAT32, TC_FLOAT64, TC_BFLOAT16, TC_FLOAT16};
    for (int k = 0; k < 4; k++) {
        tc_adamw_options o = d;
        o.lr = 0.01, o.weight_decay = 0.1;
        adam_case(dts[k], true, o, "adamw");
    }
    tc_adamw_options o = d;
    o.lr = 0.02, o.amsgrad = true;
    adam_case(TC_FLOAT32, true, o, "adamw amsgrad");
    adam_case(TC_FLOAT64, true, o, "adamw amsgrad");
    o.maximize = true, o.amsgrad = false;
    adam_case(TC_FLOAT32, true, o, "adamw maximize");
    o = tc_adam_options_default();
    o.lr = 0.01, o.weight_decay = 0.05, o.beta1 = 0.8, o.beta2 = 0.99, o.eps = 1e-6;
    adam_case(TC_FLOAT32, false, o, "adam L2");
    adam_case(TC_FLOAT64, false, o, "adam L2");
}

/* ---- SGD ------------------------------------------------------------------------------------ */

static void sgd_case(tc_dtype dt, tc_sgd_options o, const char *name)
{
    printf("sgd %s %s\n", name, tc_dtype_string(dt));
    list l;
    list_make(&l, dt);
    double *buf[NT];
    for (int i = 0; i < NT; i++)
        buf[i] = calloc((size_t)SIZES[i], sizeof(double));
    tc_optimizer *opt = NULL;
    CHECK_OK(tc_optimizer_create_sgd(l.p, NT, &o, &opt));
    for (int step = 1; step <= 4; step++) {
        CHECK_OK(tc_optimizer_step(opt, l.g, NT));
        for (int i = 0; i < NT; i++) {
            ref_sgd(l.pv[i], l.gv[i], buf[i], SIZES[i], step == 1, &o);
            near_vals("param", l.p[i], l.pv[i], SIZES[i], tol_of(dt));
            free(l.pv[i]);
            l.pv[i] = tc_test_values(l.p[i]);
        }
        list_new_grads(&l, dt);
    }
    for (int i = 0; i < NT; i++) {
        if (o.momentum != 0)
            check_state(opt, i, TC_OPTIMIZER_STATE_MOMENTUM_BUFFER, buf[i], SIZES[i],
                        tol_of(dt) * 4, "momentum_buffer");
        free(buf[i]);
    }
    tc_tensor *s = NULL;
    if (o.momentum == 0)
        CHECK_STATUS(tc_optimizer_get_state(opt, 0, TC_OPTIMIZER_STATE_MOMENTUM_BUFFER, &s),
                     TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_optimizer_get_state(opt, 0, TC_OPTIMIZER_STATE_EXP_AVG, &s),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_OK(tc_optimizer_destroy(opt));
    list_free(&l);
}

static void test_sgd(void)
{
    tc_sgd_options d = tc_sgd_options_default();
    CHECK(d.lr == 1e-3 && d.momentum == 0 && d.dampening == 0 && d.weight_decay == 0 &&
          !d.nesterov && !d.maximize);
    tc_sgd_options o = d;
    o.lr = 0.1;
    sgd_case(TC_FLOAT32, o, "plain");
    o.momentum = 0.9, o.dampening = 0.1, o.weight_decay = 0.01;
    sgd_case(TC_FLOAT32, o, "momentum dampening wd");
    sgd_case(TC_FLOAT64, o, "momentum dampening wd");
    o.dampening = 0, o.nesterov = true, o.maximize = true;
    sgd_case(TC_FLOAT32, o, "nesterov maximize");
    sgd_case(TC_BFLOAT16, o, "nesterov maximize");
}

/* ---- found_inf, grad_scale, lr as a tensor --------------------------------------------------- */

static void test_amp_inputs(void)
{
    list l;
    list_make(&l, TC_FLOAT32);
    tc_adamw_options o = tc_adamw_options_default();
    tc_optimizer *opt = NULL;
    CHECK_OK(tc_optimizer_create_adamw(l.p, NT, &o, &opt));
    tc_tensor *inf1 = NULL, *inf0 = NULL, *scale = NULL;
    CHECK_OK(tc_tensor_full(0, NULL, 1, TC_FLOAT32, CPU, &inf1));
    CHECK_OK(tc_tensor_zeros(0, NULL, TC_FLOAT32, CPU, &inf0));
    CHECK_OK(tc_tensor_full(0, NULL, 1024, TC_FLOAT32, CPU, &scale));
    /* found_inf set: nothing moves, not even the count */
    CHECK_OK(tc_optimizer_step_scaled(opt, l.g, NT, scale, inf1));
    for (int i = 0; i < NT; i++)
        near_vals("param after a skipped step", l.p[i], l.pv[i], SIZES[i], 0);
    double zero = 0;
    check_state(opt, 0, TC_OPTIMIZER_STATE_STEP, &zero, 1, 0, "step after a skip");
    double *z = calloc(64, sizeof(double));
    check_state(opt, 2, TC_OPTIMIZER_STATE_EXP_AVG, z, SIZES[2], 0, "exp_avg after a skip");
    for (int i = 0; i < NT; i++)
        near_vals("grad after a skip", l.g[i], l.gv[i], SIZES[i], 0);
    /* found_inf 0 and a scale: the gradients are divided (and written back) */
    CHECK_OK(tc_optimizer_step_scaled(opt, l.g, NT, scale, inf0));
    double *m[NT], *v[NT];
    for (int i = 0; i < NT; i++) {
        double *gs = malloc(sizeof(double) * (size_t)SIZES[i]);
        for (int64_t k = 0; k < SIZES[i]; k++)
            gs[k] = l.gv[i][k] / 1024;
        m[i] = calloc((size_t)SIZES[i], sizeof(double));
        v[i] = calloc((size_t)SIZES[i], sizeof(double));
        ref_adam(l.pv[i], gs, m[i], v[i], NULL, SIZES[i], 1, &o, true);
        near_vals("param after a scaled step", l.p[i], l.pv[i], SIZES[i], 4e-6);
        near_vals("grad written back unscaled", l.g[i], gs, SIZES[i], 0);
        free(gs), free(m[i]), free(v[i]);
    }
    double one = 1;
    check_state(opt, 0, TC_OPTIMIZER_STATE_STEP, &one, 1, 0, "step after a good step");
    CHECK_OK(tc_optimizer_destroy(opt));
    /* bad scalars */
    tc_tensor *i64 = NULL, *two = NULL;
    CHECK_OK(tc_tensor_zeros(0, NULL, TC_INT64, CPU, &i64));
    int64_t sz2 = 2;
    CHECK_OK(tc_tensor_zeros(1, &sz2, TC_FLOAT32, CPU, &two));
    CHECK_OK(tc_optimizer_create_adamw(l.p, NT, &o, &opt));
    CHECK_STATUS(tc_optimizer_step_scaled(opt, l.g, NT, i64, NULL), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_optimizer_step_scaled(opt, l.g, NT, NULL, two), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_optimizer_set_lr_tensor(opt, i64), TC_ERROR_DTYPE);
    CHECK_OK(tc_optimizer_destroy(opt));
    tc_tensor_release(i64), tc_tensor_release(two);
    tc_tensor_release(inf1), tc_tensor_release(inf0), tc_tensor_release(scale);
    free(z);
    list_free(&l);
}

/* The same steps with lr 0.01 as a number and as a tensor: the same bits. */
static void test_lr_tensor(void)
{
    for (int kind = 0; kind < 2; kind++) {
        list a, b;
        list_make(&a, TC_FLOAT32);
        list_make(&b, TC_FLOAT32);
        for (int i = 0; i < NT; i++) {
            CHECK_OK(tc_tensor_copy_(b.p[i], a.p[i], false));
            CHECK_OK(tc_tensor_copy_(b.g[i], a.g[i], false));
        }
        tc_optimizer *oa = NULL, *ob = NULL;
        tc_adamw_options ao = tc_adamw_options_default();
        tc_sgd_options so = tc_sgd_options_default();
        so.momentum = 0.5;
        if (kind == 0) {
            CHECK_OK(tc_optimizer_create_adamw(a.p, NT, &ao, &oa));
            CHECK_OK(tc_optimizer_create_adamw(b.p, NT, &ao, &ob));
        } else {
            CHECK_OK(tc_optimizer_create_sgd(a.p, NT, &so, &oa));
            CHECK_OK(tc_optimizer_create_sgd(b.p, NT, &so, &ob));
        }
        tc_tensor *lr = NULL;
        CHECK_OK(tc_tensor_full(0, NULL, 0.01, TC_FLOAT32, CPU, &lr));
        CHECK_OK(tc_optimizer_set_lr(oa, (double)0.01f));
        CHECK_OK(tc_optimizer_set_lr_tensor(ob, lr));
        double got = 0;
        CHECK_OK(tc_optimizer_get_lr(oa, &got));
        CHECK(got == (double)0.01f);
        for (int s = 0; s < 3; s++) {
            CHECK_OK(tc_optimizer_step(oa, a.g, NT));
            CHECK_OK(tc_optimizer_step(ob, b.g, NT));
        }
        for (int i = 0; i < NT; i++)
            CHECK(same_vals(a.p[i], b.p[i]));
        /* a new value in the tensor is read at the next step */
        CHECK_OK(tc_tensor_fill_(lr, 0));
        for (int i = 0; i < NT; i++)
            free(b.pv[i]), b.pv[i] = tc_test_values(b.p[i]);
        if (kind == 1) { /* SGD with lr 0 and no weight decay: no move */
            CHECK_OK(tc_optimizer_step(ob, b.g, NT));
            for (int i = 0; i < NT; i++)
                near_vals("param with lr 0", b.p[i], b.pv[i], SIZES[i], 0);
        }
        tc_tensor_release(lr); /* the optimizer holds its own reference */
        CHECK_OK(tc_optimizer_step(ob, b.g, NT));
        CHECK_OK(tc_optimizer_set_lr(ob, 0.5));
        CHECK_OK(tc_optimizer_destroy(oa));
        CHECK_OK(tc_optimizer_destroy(ob));
        list_free(&a), list_free(&b);
    }
}

/* A checkpoint: optimizer a steps twice; b, made over copies of a's
 * parameters, loads a's state through tc_optimizer_get_state and
 * tc_tensor_copy_; then both step once more and agree bit for bit. */
static void test_checkpoint(void)
{
    list a, b;
    list_make(&a, TC_FLOAT32), list_make(&b, TC_FLOAT32);
    tc_adamw_options o = tc_adamw_options_default();
    o.amsgrad = true, o.lr = 0.05;
    tc_optimizer *oa = NULL, *ob = NULL;
    CHECK_OK(tc_optimizer_create_adamw(a.p, NT, &o, &oa));
    CHECK_OK(tc_optimizer_step(oa, a.g, NT));
    CHECK_OK(tc_optimizer_step(oa, b.g, NT));
    for (int i = 0; i < NT; i++)
        CHECK_OK(tc_tensor_copy_(b.p[i], a.p[i], false));
    CHECK_OK(tc_optimizer_create_adamw(b.p, NT, &o, &ob));
    for (int i = 0; i < NT; i++)
        for (int w = 0; w <= TC_OPTIMIZER_STATE_MAX_EXP_AVG_SQ; w++) {
            tc_tensor *src = NULL, *dst = NULL;
            CHECK_OK(tc_optimizer_get_state(oa, i, (tc_optimizer_state)w, &src));
            CHECK_OK(tc_optimizer_get_state(ob, i, (tc_optimizer_state)w, &dst));
            CHECK_OK(tc_tensor_copy_(dst, src, false));
            tc_tensor_release(src), tc_tensor_release(dst);
        }
    CHECK_OK(tc_optimizer_step(oa, a.g, NT));
    CHECK_OK(tc_optimizer_step(ob, a.g, NT));
    for (int i = 0; i < NT; i++)
        CHECK(same_vals(a.p[i], b.p[i]));
    double three = 3;
    check_state(ob, 1, TC_OPTIMIZER_STATE_STEP, &three, 1, 0, "step after a loaded checkpoint");
    CHECK_OK(tc_optimizer_destroy(oa));
    CHECK_OK(tc_optimizer_destroy(ob));
    list_free(&a), list_free(&b);
}

/* ---- clip_grad_norm_, zero_grad ------------------------------------------------------------ */

static void clip_case(tc_dtype dt, double norm_type, double max_norm)
{
    printf("clip_grad_norm_ %s norm %g max %g\n", tc_dtype_string(dt), norm_type, max_norm);
    list l;
    list_make(&l, dt);
    double acc = 0;
    for (int i = 0; i < NT; i++) {
        double ni = 0;
        for (int64_t k = 0; k < SIZES[i]; k++)
            ni = isinf(norm_type) ? fmax(ni, fabs(l.gv[i][k])) : ni + l.gv[i][k] * l.gv[i][k];
        ni = isinf(norm_type) ? ni : sqrt(ni);
        acc = isinf(norm_type) ? fmax(acc, ni) : acc + ni * ni;
    }
    double total = isinf(norm_type) ? acc : sqrt(acc);
    double coef = fmin(max_norm / (total + 1e-6), 1.0);
    tc_tensor *tn = NULL;
    CHECK_OK(tc_clip_grad_norm_(l.g, NT, max_norm, norm_type, false, &tn));
    CHECK(tc_tensor_ndim(tn) == 0 && tc_tensor_dtype(tn) == dt);
    double tol = dt == TC_FLOAT64 ? 1e-14 : dt == TC_FLOAT32 ? 1e-6 : 1e-2;
    near_vals("total_norm", tn, &total, 1, tol);
    for (int i = 0; i < NT; i++) {
        for (int64_t k = 0; k < SIZES[i]; k++)
            l.gv[i][k] *= coef;
        near_vals("clipped grad", l.g[i], l.gv[i], SIZES[i], tol * 2);
    }
    tc_tensor_release(tn);
    list_free(&l);
}

static void test_clip(void)
{
    tc_dtype dts[] = {TC_FLOAT32, TC_FLOAT64, TC_BFLOAT16};
    for (int k = 0; k < 3; k++) {
        clip_case(dts[k], 2.0, 0.5);       /* clips */
        clip_case(dts[k], INFINITY, 0.25); /* clips */
        clip_case(dts[k], 2.0, 100.0);     /* no clip: coef 1 */
    }
    /* error_if_nonfinite: refused, nothing changed */
    list l;
    list_make(&l, TC_FLOAT32);
    double bad[7] = {1, 2, INFINITY, 3, 4, 5, 6};
    int64_t n7 = 7;
    tc_tensor_release(l.g[0]);
    l.g[0] = mk(CPU, TC_FLOAT32, 1, &n7, bad);
    tc_tensor *tn = NULL;
    CHECK_STATUS(tc_clip_grad_norm_(l.g, NT, 1.0, 2.0, true, &tn), TC_ERROR_INVALID_ARGUMENT);
    CHECK(tn == NULL);
    near_vals("grad after a refused clip", l.g[1], l.gv[1], SIZES[1], 0);
    /* without the check, the total is inf, the coefficient 0 */
    CHECK_OK(tc_clip_grad_norm_(l.g, NT, 1.0, 2.0, false, &tn));
    double v = 0;
    CHECK_OK(tc_tensor_item(tn, &v));
    CHECK(isinf(v));
    tc_tensor_release(tn);
    /* no gradients: a total of 0 */
    CHECK_OK(tc_clip_grad_norm_(NULL, 0, 1.0, 2.0, true, &tn));
    CHECK_OK(tc_tensor_item(tn, &v));
    CHECK(v == 0);
    tc_tensor_release(tn);
    CHECK_STATUS(tc_clip_grad_norm_(l.g, NT, 1.0, 1.0, false, &tn), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_clip_grad_norm_(l.g, NT, 1.0, 2.0, false, NULL), TC_ERROR_INVALID_ARGUMENT);
    /* zero_grad */
    CHECK_OK(tc_optimizer_zero_grad(l.g, NT));
    double *z = calloc(64, sizeof(double));
    for (int i = 0; i < NT; i++)
        near_vals("zeroed grad", l.g[i], z, SIZES[i], 0);
    free(z);
    list_free(&l);
}

/* ---- foreach ----------------------------------------------------------------------------------- */

static void foreach_case(tc_dtype dt)
{
    printf("foreach %s\n", tc_dtype_string(dt));
    double tol = dt == TC_FLOAT64 ? 1e-15 : dt == TC_FLOAT32 ? 3e-7 : 8e-3;
    list a, b, c;
    list_make(&a, dt), list_make(&b, dt), list_make(&c, dt);
    for (int i = 0; i < NT; i++) /* t2 away from 0 for addcdiv */
        for (int64_t k = 0; k < SIZES[i]; k++)
            c.gv[i][k] = c.gv[i][k] < 0 ? c.gv[i][k] - 1 : c.gv[i][k] + 1;
    for (int i = 0; i < NT; i++) {
        tc_tensor_release(c.g[i]);
        c.g[i] = mk(CPU, dt, 1, &SIZES[i], c.gv[i]);
        free(c.gv[i]);
        c.gv[i] = tc_test_values(c.g[i]);
    }
    const tc_tensor *const *B = (const tc_tensor *const *)b.p, *const *C =
                                                                   (const tc_tensor *const *)c.g;
    tc_tensor *s = NULL;
    CHECK_OK(tc_tensor_full(0, NULL, 0.75, TC_FLOAT32, CPU, &s));
    for (int op = 0; op < 9; op++) {
        switch (op) {
        case 0: CHECK_OK(tc_foreach_add_scalar_(a.p, NT, 0.5)); break;
        case 1: CHECK_OK(tc_foreach_mul_scalar_(a.p, NT, -1.5)); break;
        case 2: CHECK_OK(tc_foreach_mul_tensor_(a.p, NT, s)); break;
        case 3: CHECK_OK(tc_foreach_add_list_(a.p, B, NT, 0.25)); break;
        case 4: CHECK_OK(tc_foreach_mul_list_(a.p, B, NT)); break;
        case 5: CHECK_OK(tc_foreach_addcmul_(a.p, B, C, NT, 0.5)); break;
        case 6: CHECK_OK(tc_foreach_addcdiv_(a.p, B, C, NT, -0.5)); break;
        case 7: CHECK_OK(tc_foreach_lerp_(a.p, B, NT, op == 7 ? 0.3 : 0.8)); break;
        default: CHECK_OK(tc_foreach_lerp_(a.p, B, NT, 0.8)); break;
        }
        for (int i = 0; i < NT; i++) {
            for (int64_t k = 0; k < SIZES[i]; k++) {
                double x = a.pv[i][k], y = b.pv[i][k], z = c.gv[i][k];
                double r[9] = {
                    x + 0.5,         x * -1.5,        x * 0.75,          x + 0.25 * y,     x * y,
                    x + 0.5 * y * z, x - 0.5 * y / z, x + 0.3 * (y - x), x + 0.8 * (y - x)};
                a.pv[i][k] = r[op];
            }
            near_vals("foreach", a.p[i], a.pv[i], SIZES[i], tol * 4);
            free(a.pv[i]);
            a.pv[i] = tc_test_values(a.p[i]);
        }
    }
    /* sqrt of |x| */
    for (int i = 0; i < NT; i++) {
        for (int64_t k = 0; k < SIZES[i]; k++)
            a.pv[i][k] = fabs(a.pv[i][k]);
        tc_tensor_release(a.p[i]);
        a.p[i] = mk(CPU, dt, 1, &SIZES[i], a.pv[i]);
    }
    CHECK_OK(tc_foreach_sqrt_(a.p, NT));
    for (int i = 0; i < NT; i++) {
        for (int64_t k = 0; k < SIZES[i]; k++)
            a.pv[i][k] = sqrt(a.pv[i][k]);
        near_vals("sqrt", a.p[i], a.pv[i], SIZES[i], tol);
    }
    /* norms */
    tc_tensor *norms = NULL;
    CHECK_OK(tc_foreach_norm((const tc_tensor *const *)b.g, NT, 2.0, &norms));
    CHECK(tc_tensor_ndim(norms) == 1 && tc_tensor_size(norms, 0) == NT);
    double want[NT];
    for (int i = 0; i < NT; i++) {
        want[i] = 0;
        for (int64_t k = 0; k < SIZES[i]; k++)
            want[i] += b.gv[i][k] * b.gv[i][k];
        want[i] = sqrt(want[i]);
    }
    near_vals("norms", norms, want, NT, tol);
    tc_tensor_release(norms);
    CHECK_OK(tc_foreach_zero_(a.p, NT));
    double *z = calloc(64, sizeof(double));
    for (int i = 0; i < NT; i++)
        near_vals("zero_", a.p[i], z, SIZES[i], 0);
    free(z);
    tc_tensor_release(s);
    list_free(&a), list_free(&b), list_free(&c);
}

static void test_foreach(void)
{
    tc_dtype dts[] = {TC_FLOAT32, TC_FLOAT64, TC_BFLOAT16, TC_FLOAT16};
    for (int k = 0; k < 4; k++)
        foreach_case(dts[k]);
    /* inf-norm with a NaN: NaN */
    double x[3] = {1, NAN, -5};
    int64_t n3 = 3;
    tc_tensor *t = mk(CPU, TC_FLOAT32, 1, &n3, x), *norms = NULL;
    CHECK_OK(tc_foreach_norm((const tc_tensor *const *)&t, 1, INFINITY, &norms));
    double v = 0;
    CHECK_OK(tc_tensor_item(norms, &v));
    CHECK(isnan(v));
    tc_tensor_release(norms), tc_tensor_release(t);
}

/* ---- many tensors, bad input ------------------------------------------------------------------ */

/* 100 tensors of sizes 0..99 (more than a GPU chunk): each stepped right. */
static void test_many(void)
{
    enum { N = 100 };
    tc_tensor *p[N], *g[N];
    double *pv[N], *gv[N];
    for (int i = 0; i < N; i++) {
        p[i] = rnd_tensor(CPU, TC_FLOAT64, i, -1, 1, &pv[i]);
        g[i] = rnd_tensor(CPU, TC_FLOAT64, i, -1, 1, &gv[i]);
    }
    tc_sgd_options o = tc_sgd_options_default();
    o.lr = 0.5, o.weight_decay = 0.1;
    tc_optimizer *opt = NULL;
    CHECK_OK(tc_optimizer_create_sgd(p, N, &o, &opt));
    CHECK(tc_optimizer_param_count(opt) == N);
    CHECK_OK(tc_optimizer_step(opt, g, N));
    for (int i = 0; i < N; i++) {
        ref_sgd(pv[i], gv[i], NULL, i, true, &o);
        near_vals("param of many", p[i], pv[i], i, 1e-15);
        tc_tensor_release(p[i]), tc_tensor_release(g[i]);
        free(pv[i]), free(gv[i]);
    }
    CHECK_OK(tc_optimizer_destroy(opt)); /* the last references to the params */
}

static void test_bad_input(void)
{
    list l;
    list_make(&l, TC_FLOAT32);
    tc_adamw_options ao = tc_adamw_options_default();
    tc_sgd_options so = tc_sgd_options_default();
    tc_optimizer *opt = NULL;
    CHECK_STATUS(tc_optimizer_create_adamw(NULL, 1, &ao, &opt), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_optimizer_create_adamw(l.p, 0, &ao, &opt), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_optimizer_create_adamw(l.p, -1, &ao, &opt), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_optimizer_create_adamw(l.p, NT, NULL, &opt), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_optimizer_create_adamw(l.p, NT, &ao, NULL), TC_ERROR_INVALID_ARGUMENT);
    tc_adamw_options b = ao;
    b.beta1 = 1;
    CHECK_STATUS(tc_optimizer_create_adamw(l.p, NT, &b, &opt), TC_ERROR_INVALID_ARGUMENT);
    b = ao, b.lr = -1;
    CHECK_STATUS(tc_optimizer_create_adam(l.p, NT, &b, &opt), TC_ERROR_INVALID_ARGUMENT);
    b = ao, b.eps = NAN;
    CHECK_STATUS(tc_optimizer_create_adam(l.p, NT, &b, &opt), TC_ERROR_INVALID_ARGUMENT);
    tc_sgd_options sb = so;
    sb.nesterov = true;
    CHECK_STATUS(tc_optimizer_create_sgd(l.p, NT, &sb, &opt), TC_ERROR_INVALID_ARGUMENT);
    sb = so, sb.momentum = -0.5;
    CHECK_STATUS(tc_optimizer_create_sgd(l.p, NT, &sb, &opt), TC_ERROR_INVALID_ARGUMENT);
    CHECK(opt == NULL);
    /* a NULL entry, a released tensor, a repeated one, mixed dtypes, an integer one,
     * a strided one */
    tc_tensor *ps[NT] = {l.p[0], NULL, l.p[2]};
    CHECK_STATUS(tc_optimizer_create_adamw(ps, NT, &ao, &opt), TC_ERROR_INVALID_ARGUMENT);
    tc_tensor *dead = NULL;
    CHECK_OK(tc_tensor_zeros(1, &SIZES[1], TC_FLOAT32, CPU, &dead));
    tc_tensor_release(dead);
    ps[1] = dead;
    CHECK_STATUS(tc_optimizer_create_adamw(ps, NT, &ao, &opt), TC_ERROR_INVALID_HANDLE);
    ps[1] = l.p[0];
    CHECK_STATUS(tc_optimizer_create_adamw(ps, NT, &ao, &opt), TC_ERROR_INVALID_ARGUMENT);
    tc_tensor *d64 = NULL, *i32 = NULL, *wide = NULL, *tr = NULL;
    CHECK_OK(tc_tensor_zeros(1, &SIZES[1], TC_FLOAT64, CPU, &d64));
    ps[1] = d64;
    CHECK_STATUS(tc_optimizer_create_adamw(ps, NT, &ao, &opt), TC_ERROR_DTYPE);
    CHECK_OK(tc_tensor_zeros(1, &SIZES[0], TC_INT32, CPU, &i32));
    CHECK_STATUS(tc_optimizer_create_sgd(&i32, 1, &so, &opt), TC_ERROR_DTYPE);
    int64_t s2[2] = {3, 4};
    CHECK_OK(tc_tensor_zeros(2, s2, TC_FLOAT32, CPU, &wide));
    CHECK_OK(tc_tensor_transpose(wide, 0, 1, &tr));
    CHECK_STATUS(tc_optimizer_create_sgd(&tr, 1, &so, &opt), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_foreach_zero_(&tr, 1), TC_ERROR_INVALID_ARGUMENT);
    /* steps: count, sizes, dtype of the gradients; a destroyed optimizer */
    CHECK_OK(tc_optimizer_create_adamw(l.p, NT, &ao, &opt));
    CHECK_STATUS(tc_optimizer_step(opt, l.g, NT - 1), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_optimizer_step(opt, NULL, NT), TC_ERROR_INVALID_ARGUMENT);
    tc_tensor *gs[NT] = {l.g[0], l.g[2], l.g[1]};
    CHECK_STATUS(tc_optimizer_step(opt, gs, NT), TC_ERROR_SHAPE);
    gs[1] = d64, gs[2] = l.g[2];
    CHECK_STATUS(tc_optimizer_step(opt, gs, NT), TC_ERROR_DTYPE);
    tc_tensor *st = NULL;
    CHECK_STATUS(tc_optimizer_get_state(opt, NT, TC_OPTIMIZER_STATE_STEP, &st),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_optimizer_get_state(opt, -1, TC_OPTIMIZER_STATE_STEP, &st),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_optimizer_get_state(opt, 0, (tc_optimizer_state)99, &st),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_optimizer_set_lr(opt, INFINITY), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_optimizer_get_lr(opt, NULL), TC_ERROR_INVALID_ARGUMENT);
    /* nothing changed by the refused steps */
    for (int i = 0; i < NT; i++)
        near_vals("param after refused steps", l.p[i], l.pv[i], SIZES[i], 0);
    CHECK_OK(tc_optimizer_destroy(opt));
    CHECK_STATUS(tc_optimizer_destroy(opt), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_optimizer_step(opt, l.g, NT), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_optimizer_destroy(NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(tc_optimizer_param_count(opt) == 0 && tc_optimizer_param_count(NULL) == 0);
    void *junk = tc_test_garbage(256);
    CHECK_STATUS(tc_optimizer_set_lr((tc_optimizer *)junk, 0.1), TC_ERROR_INVALID_HANDLE);
    free(junk);
    /* foreach: counts, NULL lists, shapes, ords, scalar tensors */
    CHECK_STATUS(tc_foreach_add_scalar_(NULL, 1, 1), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_foreach_add_scalar_(l.p, -2, 1), TC_ERROR_INVALID_ARGUMENT);
    CHECK_OK(tc_foreach_add_scalar_(NULL, 0, 1));
    CHECK_STATUS(tc_foreach_add_list_(l.p, NULL, NT, 1), TC_ERROR_INVALID_ARGUMENT);
    const tc_tensor *sh[NT] = {l.g[1], l.g[0], l.g[2]};
    CHECK_STATUS(tc_foreach_add_list_(l.p, sh, NT, 1), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_foreach_addcdiv_(l.p, (const tc_tensor *const *)l.g, NULL, NT, 1),
                 TC_ERROR_INVALID_ARGUMENT);
    tc_tensor *norms = NULL;
    CHECK_STATUS(tc_foreach_norm((const tc_tensor *const *)l.p, NT, 3.0, &norms),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_foreach_norm((const tc_tensor *const *)l.p, 0, 2.0, &norms),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_foreach_mul_tensor_(l.p, NT, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_foreach_mul_tensor_(l.p, NT, i32), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_foreach_mul_tensor_(l.p, NT, wide), TC_ERROR_SHAPE);
    tc_tensor *first = NULL; /* a scalar that is part of self */
    CHECK_OK(tc_tensor_narrow(l.p[1], 0, 0, 1, &first));
    CHECK_STATUS(tc_foreach_mul_tensor_(l.p, NT, first), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "shares memory with self[1]") != NULL);
    tc_tensor_release(first);
    for (int i = 0; i < NT; i++)
        near_vals("param after refused foreach", l.p[i], l.pv[i], SIZES[i], 0);
    tc_tensor_release(d64), tc_tensor_release(i32), tc_tensor_release(wide);
    tc_tensor_release(tr);
    list_free(&l);
}

int main(void)
{
    tc_test_init();
    test_adam();
    test_sgd();
    test_amp_inputs();
    test_lr_tensor();
    test_checkpoint();
    test_clip();
    test_foreach();
    test_many();
    test_bad_input();
    return TC_TEST_DONE();
}
