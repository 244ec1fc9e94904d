/* The optimizer objects (optim.h): Adam, AdamW and SGD over a fixed list of
 * parameters. An optimizer holds a reference on each parameter and owns
 * its state, made zeroed at create on the parameters' device, so that a
 * step allocates nothing, never reads a value back and can be captured in
 * a CUDA graph: the step counts are float32 tensors, and the learning rate
 * may be one. A step checks the gradients, then hands the backend of the
 * device one tc__mt_list (optim_internal.h). */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/handle_pool.h"
#include "optim_front.h"
#include "tcuda/optim.h"

#define TC_OPTIMIZER_MAGIC 0x0971e5a1u
#define N_STATES 5

typedef enum opt_kind { KIND_ADAM, KIND_ADAMW, KIND_SGD } opt_kind;

struct tc_optimizer {
    uint32_t magic; /* first: handle_pool.h */
    opt_kind kind;
    int n;
    tc_adamw_options adam;
    tc_sgd_options sgd;
    double lr;
    tc_tensor *lr_tensor; /* NULL: lr */
    tc_tensor **params;
    tc_tensor **state[N_STATES]; /* by tc_optimizer_state; NULL: not kept */
    tc_dtype dtype;
    tc_device device;
    uint64_t serial; /* tc__optimizer_serial */
};

static tc__handle_pool pool = TC_HANDLE_POOL_INIT(struct tc_optimizer);
static atomic_uint_fast64_t serials;

uint64_t tc__optimizer_serial(const tc_optimizer *opt)
{
    return tc__handle_live(opt, TC_OPTIMIZER_MAGIC) ? opt->serial : 0;
}

tc_adamw_options tc_adamw_options_default(void)
{
    return (tc_adamw_options){
        .lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 1e-2};
}

tc_adamw_options tc_adam_options_default(void)
{
    tc_adamw_options o = tc_adamw_options_default();
    o.weight_decay = 0;
    return o;
}

tc_sgd_options tc_sgd_options_default(void) { return (tc_sgd_options){.lr = 1e-3}; }

/* ---- checks ------------------------------------------------------------------------ */

static tc_status check_lr(double lr)
{
    TC_CHECK_ARG(isfinite(lr) && lr >= 0, "lr is %g: it must be finite and >= 0", lr);
    return TC_OK;
}

static tc_status check_adam(const tc_adamw_options *o)
{
    TC_CHECK_ARG(o, "opts is NULL");
    TC_TRY(check_lr(o->lr));
    TC_CHECK_ARG(o->eps >= 0 && isfinite(o->eps), "eps is %g: it must be finite and >= 0", o->eps);
    TC_CHECK_ARG(o->beta1 >= 0 && o->beta1 < 1, "beta1 is %g: it must be in [0, 1)", o->beta1);
    TC_CHECK_ARG(o->beta2 >= 0 && o->beta2 < 1, "beta2 is %g: it must be in [0, 1)", o->beta2);
    TC_CHECK_ARG(o->weight_decay >= 0 && isfinite(o->weight_decay),
                 "weight_decay is %g: it must be finite and >= 0", o->weight_decay);
    return TC_OK;
}

static tc_status check_sgd(const tc_sgd_options *o)
{
    TC_CHECK_ARG(o, "opts is NULL");
    TC_TRY(check_lr(o->lr));
    TC_CHECK_ARG(o->momentum >= 0 && isfinite(o->momentum),
                 "momentum is %g: it must be finite and >= 0", o->momentum);
    TC_CHECK_ARG(isfinite(o->dampening), "dampening is %g: it must be finite", o->dampening);
    TC_CHECK_ARG(o->weight_decay >= 0 && isfinite(o->weight_decay),
                 "weight_decay is %g: it must be finite and >= 0", o->weight_decay);
    TC_CHECK_ARG(!o->nesterov || (o->momentum > 0 && o->dampening == 0),
                 "nesterov needs a momentum > 0 and zero dampening");
    return TC_OK;
}

/* The parameters: a valid list, with no tensor's memory given twice. */
static tc_status check_params(tc_tensor *const *params, int n, tc__mt_build *bl)
{
    TC_TRY(tc__mt_check_count(params, n, "params"));
    TC_CHECK_ARG(n >= 1, "params is empty: an optimizer needs at least one parameter");
    TC_TRY(tc__mt_build_init(bl, n));
    tc_status st = tc__mt_build_slot(bl, TC__MT_PARAM, (const tc_tensor *const *)params, "params");
    for (int i = 0; st == TC_OK && i < n; i++)
        for (int j = 0; st == TC_OK && j < i; j++)
            if (bl->numel[i] && bl->ptr[0][i] == bl->ptr[0][j])
                st = tc__fail(TC_ERROR_INVALID_ARGUMENT,
                              "params[%d] and params[%d] are the same tensor", j, i);
    if (st != TC_OK)
        tc__mt_build_free(bl);
    return st;
}

/* ---- create and destroy ------------------------------------------------------------------ */

static void free_opt(tc_optimizer *o)
{
    for (int s = 0; s < N_STATES; s++) {
        if (!o->state[s])
            continue;
        for (int i = 0; i < o->n; i++)
            tc_tensor_release(o->state[s][i]);
        free(o->state[s]);
    }
    if (o->params) {
        for (int i = 0; i < o->n; i++)
            tc_tensor_release(o->params[i]);
        free(o->params);
    }
    tc_tensor_release(o->lr_tensor);
    tc__handle_put(&pool, o);
}

/* Zeroed state `which` for every parameter: like the parameter, or a
 * float32 0-d count on its device. */
static tc_status make_state(tc_optimizer *o, int which)
{
    o->state[which] = calloc((size_t)o->n, sizeof(tc_tensor *));
    if (!o->state[which])
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "no memory for the optimizer's state");
    for (int i = 0; i < o->n; i++) {
        const tc_tensor *p = o->params[i];
        tc_status st = which == TC_OPTIMIZER_STATE_STEP
                           ? tc_tensor_zeros(0, NULL, TC_FLOAT32, o->device, &o->state[which][i])
                           : tc_tensor_zeros(p->ndim, p->sizes, p->dtype, o->device,
                                             &o->state[which][i]);
        TC_TRY(st);
    }
    return TC_OK;
}

static tc_status create(tc_tensor *const *params, int n, opt_kind kind, const void *opts,
                        tc_optimizer **out)
{
    TC_TRY(kind == KIND_SGD ? check_sgd(opts) : check_adam(opts));
    TC_CHECK_ARG(out, "out is NULL");
    tc__mt_build bl;
    TC_TRY(check_params(params, n, &bl));
    tc_optimizer *o = tc__handle_get(&pool);
    if (!o) {
        tc__mt_build_free(&bl);
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "no memory for an optimizer");
    }
    o->magic = TC_OPTIMIZER_MAGIC;
    o->serial = atomic_fetch_add(&serials, 1) + 1;
    o->kind = kind;
    o->dtype = bl.l.dtype;
    o->device = bl.device;
    tc__mt_build_free(&bl);
    if (kind == KIND_SGD)
        o->sgd = *(const tc_sgd_options *)opts, o->lr = o->sgd.lr;
    else
        o->adam = *(const tc_adamw_options *)opts, o->lr = o->adam.lr;
    o->params = calloc((size_t)n, sizeof(tc_tensor *));
    if (!o->params) {
        free_opt(o);
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "no memory for an optimizer");
    }
    o->n = n;
    for (int i = 0; i < n; i++)
        o->params[i] = tc__tensor_ref(params[i]);
    tc_status st = make_state(o, TC_OPTIMIZER_STATE_STEP);
    if (kind != KIND_SGD) {
        if (st == TC_OK)
            st = make_state(o, TC_OPTIMIZER_STATE_EXP_AVG);
        if (st == TC_OK)
            st = make_state(o, TC_OPTIMIZER_STATE_EXP_AVG_SQ);
        if (st == TC_OK && o->adam.amsgrad)
            st = make_state(o, TC_OPTIMIZER_STATE_MAX_EXP_AVG_SQ);
    } else if (st == TC_OK && o->sgd.momentum != 0) {
        st = make_state(o, TC_OPTIMIZER_STATE_MOMENTUM_BUFFER);
    }
    if (st != TC_OK) {
        free_opt(o);
        return st;
    }
    *out = o;
    return TC_OK;
}

tc_status tc_optimizer_create_adamw(tc_tensor *const *params, int n, const tc_adamw_options *opts,
                                    tc_optimizer **out)
{
    TC_API_BEGIN;
    return create(params, n, KIND_ADAMW, opts, out);
}

tc_status tc_optimizer_create_adam(tc_tensor *const *params, int n, const tc_adamw_options *opts,
                                   tc_optimizer **out)
{
    TC_API_BEGIN;
    return create(params, n, KIND_ADAM, opts, out);
}

tc_status tc_optimizer_create_sgd(tc_tensor *const *params, int n, const tc_sgd_options *opts,
                                  tc_optimizer **out)
{
    TC_API_BEGIN;
    return create(params, n, KIND_SGD, opts, out);
}

static tc_status check_opt(const tc_optimizer *o)
{
    return tc__handle_check(o, TC_OPTIMIZER_MAGIC, "tc_optimizer");
}

tc_status tc_optimizer_destroy(tc_optimizer *opt)
{
    TC_API_BEGIN;
    TC_TRY(check_opt(opt));
    free_opt(opt);
    return TC_OK;
}

/* ---- the step ------------------------------------------------------------------------------ */

static void put_state(tc__mt_build *bl, const tc_optimizer *o, int which, int slot)
{
    if (!o->state[which])
        return;
    for (int i = 0; i < o->n; i++)
        bl->ptr[slot][i] = tc__data(o->state[which][i]);
    bl->l.ptr[slot] = bl->ptr[slot];
}

static tc_status run_step(tc_optimizer *o, const tc__mt_list *l, const tc__mt_amp *amp)
{
    const tc__optim_backend *be;
    TC_TRY(tc__optim_backend_of(o->device, &be));
    if (o->kind == KIND_SGD) {
        tc__sgd_args a = {.lr = o->lr,
                          .momentum = o->sgd.momentum,
                          .dampening = o->sgd.dampening,
                          .weight_decay = o->sgd.weight_decay,
                          .nesterov = o->sgd.nesterov,
                          .maximize = o->sgd.maximize,
                          .amp = *amp};
        return be->sgd(o->device.index, l, &a);
    }
    tc__adam_args a = {.lr = o->lr,
                       .beta1 = o->adam.beta1,
                       .beta2 = o->adam.beta2,
                       .eps = o->adam.eps,
                       .weight_decay = o->adam.weight_decay,
                       .amsgrad = o->adam.amsgrad,
                       .maximize = o->adam.maximize,
                       .decoupled = o->kind == KIND_ADAMW,
                       .amp = *amp};
    return be->adam(o->device.index, l, &a);
}

static tc_status step(tc_optimizer *o, tc_tensor *const *grads, int n, const tc_tensor *scale,
                      const tc_tensor *found_inf)
{
    TC_TRY(check_opt(o));
    TC_TRY(tc__mt_check_count(grads, n, "grads"));
    TC_CHECK_ARG(n == o->n, "%d gradients for %d parameters", n, o->n);
    tc__mt_amp amp = {0};
    float *sp, *fp;
    TC_TRY(tc__mt_scalar(scale, o->device, "grad_scale", &sp));
    TC_TRY(tc__mt_scalar(found_inf, o->device, "found_inf", &fp));
    amp.grad_scale = sp, amp.found_inf = fp;
    if (o->lr_tensor)
        amp.lr = (const float *)tc__data(o->lr_tensor);
    tc__mt_build bl;
    TC_TRY(tc__mt_build_init(&bl, n));
    tc_status st = tc__mt_build_slot(&bl, TC__MT_PARAM, (const tc_tensor *const *)o->params,
                                     "params");
    if (st == TC_OK)
        st = tc__mt_build_slot(&bl, TC__MT_GRAD, (const tc_tensor *const *)grads, "grads");
    if (st == TC_OK) {
        put_state(&bl, o, TC_OPTIMIZER_STATE_STEP, TC__MT_STEP);
        put_state(&bl, o, TC_OPTIMIZER_STATE_EXP_AVG, TC__MT_EXP_AVG);
        put_state(&bl, o, TC_OPTIMIZER_STATE_EXP_AVG_SQ, TC__MT_EXP_AVG_SQ);
        put_state(&bl, o, TC_OPTIMIZER_STATE_MAX_EXP_AVG_SQ, TC__MT_MAX_EXP_AVG_SQ);
        put_state(&bl, o, TC_OPTIMIZER_STATE_MOMENTUM_BUFFER, TC__MT_EXP_AVG);
        /* everything written but the gradients, which only a scaled step writes */
        unsigned writes = ~0u & ~(amp.grad_scale ? 0u : 1u << TC__MT_GRAD);
        tc__mt_scalar_use su[3] = {{amp.lr, TC_FLOAT32, false},
                                   {amp.grad_scale, TC_FLOAT32, false},
                                   {amp.found_inf, TC_FLOAT32, false}};
        st = tc__mt_publish(&bl, writes, su, 3, "optimizer step kernel");
        if (st == TC_OK)
            st = run_step(o, &bl.l, &amp);
    }
    tc__mt_build_free(&bl);
    return st;
}

tc_status tc_optimizer_step(tc_optimizer *opt, tc_tensor *const *grads, int n)
{
    TC_API_BEGIN;
    return step(opt, grads, n, NULL, NULL);
}

tc_status tc_optimizer_step_scaled(tc_optimizer *opt, tc_tensor *const *grads, int n,
                                   const tc_tensor *grad_scale, const tc_tensor *found_inf)
{
    TC_API_BEGIN;
    return step(opt, grads, n, grad_scale, found_inf);
}

/* ---- learning rate and state ------------------------------------------------------------------ */

tc_status tc_optimizer_set_lr(tc_optimizer *opt, double lr)
{
    TC_API_BEGIN;
    TC_TRY(check_opt(opt));
    TC_TRY(check_lr(lr));
    opt->lr = lr;
    tc_tensor_release(opt->lr_tensor);
    opt->lr_tensor = NULL;
    return TC_OK;
}

tc_status tc_optimizer_get_lr(const tc_optimizer *opt, double *out)
{
    TC_API_BEGIN;
    TC_TRY(check_opt(opt));
    TC_CHECK_ARG(out, "out is NULL");
    *out = opt->lr;
    return TC_OK;
}

tc_status tc_optimizer_set_lr_tensor(tc_optimizer *opt, const tc_tensor *lr)
{
    TC_API_BEGIN;
    TC_TRY(check_opt(opt));
    float *data;
    TC_TRY(tc__mt_scalar(lr, opt->device, "lr", &data));
    tc_tensor_release(opt->lr_tensor);
    opt->lr_tensor = lr ? tc__tensor_ref((tc_tensor *)lr) : NULL;
    return TC_OK;
}

tc_status tc_optimizer_get_state(const tc_optimizer *opt, int index, tc_optimizer_state which,
                                 tc_tensor **out)
{
    TC_API_BEGIN;
    TC_TRY(check_opt(opt));
    TC_CHECK_ARG(index >= 0 && index < opt->n, "index %d is out of range 0..%d", index, opt->n - 1);
    TC_CHECK_ARG((int)which >= 0 && (int)which < N_STATES && opt->state[which],
                 "this optimizer keeps no state %d", (int)which);
    TC_CHECK_ARG(out, "out is NULL");
    *out = tc__tensor_ref(opt->state[which][index]);
    return TC_OK;
}

int tc_optimizer_param_count(const tc_optimizer *opt)
{
    return tc__handle_live(opt, TC_OPTIMIZER_MAGIC) ? opt->n : 0;
}

tc_status tc__optimizer_info_get(const tc_optimizer *opt, tc__optimizer_info *out)
{
    TC_TRY(check_opt(opt));
    static const tc__optimizer_kind kinds[] = {[KIND_ADAM] = TC__OPTIMIZER_ADAM,
                                               [KIND_ADAMW] = TC__OPTIMIZER_ADAMW,
                                               [KIND_SGD] = TC__OPTIMIZER_SGD};
    *out = (tc__optimizer_info){.kind = kinds[opt->kind],
                                .adam = opt->adam,
                                .sgd = opt->sgd,
                                .lr_tensor = opt->lr_tensor != NULL,
                                .params = opt->params,
                                .n = opt->n};
    if (opt->kind == KIND_SGD)
        out->sgd.lr = opt->lr;
    else
        out->adam.lr = opt->lr;
    return TC_OK;
}
