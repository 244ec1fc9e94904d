/* The gradient scaler (amp.h): torch.amp.GradScaler over tcuda's fused
 * optimizers. Its scale (float32) and growth tracker (int32) are 0-d
 * tensors on its device; each optimizer seen since the last update has a
 * stage and a found_inf flag (float32 0-d), which unscale_ sets on the
 * device and the optimizer's step reads there: the step is skipped by the
 * kernel, not by the host, so nothing here waits (PyTorch's fused path).
 * update sums the flags and runs _amp_update_scale_ on the device. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/handle_pool.h"
#include "optim_front.h"
#include "tcuda/amp.h"

#define TC_GRAD_SCALER_MAGIC 0x0a3b5ca1u
#define MAX_OPTS 16

typedef enum stage { STAGE_READY, STAGE_UNSCALED, STAGE_STEPPED } stage;

typedef struct per_opt {
    const tc_optimizer *opt;
    uint64_t serial; /* tc__optimizer_serial: a later optimizer at opt's address is another */
    stage stage;
    tc_tensor *found_inf;
} per_opt;

struct tc_grad_scaler {
    uint32_t magic; /* first: handle_pool.h */
    tc_device device;
    tc_grad_scaler_options opts;
    tc_tensor *scale;   /* float32 0-d; NULL when disabled */
    tc_tensor *tracker; /* int32 0-d */
    int n_opts;
    per_opt opts_seen[MAX_OPTS];
};

static tc__handle_pool pool = TC_HANDLE_POOL_INIT(struct tc_grad_scaler);

tc_grad_scaler_options tc_grad_scaler_options_default(void)
{
    return (tc_grad_scaler_options){.init_scale = 65536.0,
                                    .growth_factor = 2.0,
                                    .backoff_factor = 0.5,
                                    .growth_interval = 2000,
                                    .enabled = true};
}

static tc_status check_factors(double growth, double backoff, int interval)
{
    TC_CHECK_ARG(growth > 1 && isfinite(growth), "growth_factor is %g: it must be > 1", growth);
    TC_CHECK_ARG(backoff > 0 && backoff < 1, "backoff_factor is %g: it must be in (0, 1)", backoff);
    TC_CHECK_ARG(interval >= 1, "growth_interval is %d: it must be >= 1", interval);
    return TC_OK;
}

static tc_status check_scale_value(double scale)
{
    TC_CHECK_ARG(isfinite(scale) && scale > 0 && scale <= 3.4028234663852886e38,
                 "scale is %g: it must be finite and > 0 in float32", scale);
    return TC_OK;
}

static void free_rounds(tc_grad_scaler *s)
{
    for (int i = 0; i < s->n_opts; i++)
        tc_tensor_release(s->opts_seen[i].found_inf);
    s->n_opts = 0;
}

static void free_scaler(tc_grad_scaler *s)
{
    free_rounds(s);
    tc_tensor_release(s->scale);
    tc_tensor_release(s->tracker);
    tc__handle_put(&pool, s);
}

tc_status tc_grad_scaler_create(tc_device device, const tc_grad_scaler_options *opts,
                                tc_grad_scaler **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(opts, "opts is NULL");
    TC_CHECK_ARG(out, "out is NULL");
    TC_TRY(check_scale_value(opts->init_scale));
    TC_TRY(check_factors(opts->growth_factor, opts->backoff_factor, opts->growth_interval));
    tc_device dev;
    TC_TRY(tc__device_resolve(device, &dev));
    tc_grad_scaler *s = tc__handle_get(&pool);
    if (!s)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "no memory for a grad scaler");
    s->magic = TC_GRAD_SCALER_MAGIC;
    s->device = dev;
    s->opts = *opts;
    tc_status st = TC_OK;
    if (opts->enabled) {
        st = tc_tensor_full(0, NULL, opts->init_scale, TC_FLOAT32, dev, &s->scale);
        if (st == TC_OK)
            st = tc_tensor_zeros(0, NULL, TC_INT32, dev, &s->tracker);
    }
    if (st != TC_OK) {
        free_scaler(s);
        return st;
    }
    *out = s;
    return TC_OK;
}

static tc_status check_scaler(const tc_grad_scaler *s)
{
    return tc__handle_check(s, TC_GRAD_SCALER_MAGIC, "tc_grad_scaler");
}

tc_status tc_grad_scaler_destroy(tc_grad_scaler *scaler)
{
    TC_API_BEGIN;
    TC_TRY(check_scaler(scaler));
    free_scaler(scaler);
    return TC_OK;
}

tc_status tc_grad_scaler_scale(tc_grad_scaler *scaler, const tc_tensor *loss, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_TRY(check_scaler(scaler));
    TC_TRY(tc__tensor_check(loss, "tc_tensor loss"));
    TC_CHECK_ARG(out, "out is NULL");
    if (!scaler->opts.enabled) {
        *out = tc__tensor_ref((tc_tensor *)loss);
        return TC_OK;
    }
    return tc_tensor_mul(loss, scaler->scale, out);
}

/* ---- per optimizer ---------------------------------------------------------------- */

/* The entry of opt in this round, made READY with a zeroed flag when new
 * (*created then true); checks that opt is live and its gradients' count. */
static tc_status entry_of(tc_grad_scaler *s, tc_optimizer *opt, int n, per_opt **out, bool *created)
{
    *created = false;
    if (!opt)
        return tc__fail(TC_ERROR_INVALID_ARGUMENT, "opt is NULL");
    tc_tensor *step;
    TC_TRY(tc_optimizer_get_state(opt, 0, TC_OPTIMIZER_STATE_STEP, &step));
    tc_device d = tc_tensor_device(step);
    tc_tensor_release(step);
    if (d.type != s->device.type || d.index != s->device.index)
        return tc__fail(TC_ERROR_DEVICE_MISMATCH,
                        "the optimizer's parameters are on another device than the scaler");
    TC_CHECK_ARG(n == tc_optimizer_param_count(opt), "%d gradients for %d parameters", n,
                 tc_optimizer_param_count(opt));
    uint64_t serial = tc__optimizer_serial(opt);
    for (int i = 0; i < s->n_opts; i++)
        if (s->opts_seen[i].opt == opt && s->opts_seen[i].serial == serial) {
            *out = &s->opts_seen[i];
            return TC_OK;
        }
    if (s->n_opts == MAX_OPTS)
        return tc__fail(TC_ERROR_INVALID_STATE,
                        "a scaler tracks at most %d optimizers between two updates", MAX_OPTS);
    per_opt *e = &s->opts_seen[s->n_opts];
    TC_TRY(tc_tensor_zeros(0, NULL, TC_FLOAT32, s->device, &e->found_inf));
    e->opt = opt;
    e->serial = serial;
    e->stage = STAGE_READY;
    s->n_opts++;
    *out = e;
    *created = true;
    return TC_OK;
}

/* A call that made e (the newest entry) failed: as PyTorch, which records
 * nothing for a call that raised, the round forgets it, so that update()
 * does not count a check that never ran. Returns st. */
static tc_status forget_new(tc_grad_scaler *s, per_opt *e, bool created, tc_status st)
{
    if (st != TC_OK && created && e == &s->opts_seen[s->n_opts - 1]) {
        tc_tensor_release(e->found_inf);
        memset(e, 0, sizeof *e);
        s->n_opts--;
    }
    return st;
}

/* unscale (or only check, check_only) grads into e's flag. */
static tc_status unscale(tc_grad_scaler *s, per_opt *e, tc_tensor *const *grads, int n,
                         bool check_only)
{
    TC_TRY(tc__mt_check_count(grads, n, "grads"));
    if (n == 0)
        return TC_OK;
    const tc__optim_backend *be;
    TC_TRY(tc__optim_backend_of(s->device, &be));
    tc__mt_build bl;
    TC_TRY(tc__mt_build_init(&bl, n));
    tc_status st = tc__mt_build_slot(&bl, 0, (const tc_tensor *const *)grads, "grads");
    if (st == TC_OK && (bl.device.type != s->device.type || bl.device.index != s->device.index))
        st = tc__fail(TC_ERROR_DEVICE_MISMATCH, "grads are on another device than the scaler");
    tc__mt_scalar_use su[2] = {{tc__data(s->scale), TC_FLOAT32, false},
                               {tc__data(e->found_inf), TC_FLOAT32, true}};
    if (st == TC_OK)
        st = tc__mt_publish(&bl, check_only ? 0u : 1u, su, 2, "unscale kernel");
    if (st == TC_OK)
        st = be->unscale(s->device.index, &bl.l, (const float *)tc__data(s->scale), check_only,
                         (float *)tc__data(e->found_inf));
    tc__mt_build_free(&bl);
    return st;
}

tc_status tc_grad_scaler_unscale_(tc_grad_scaler *scaler, tc_optimizer *opt,
                                  tc_tensor *const *grads, int n)
{
    TC_API_BEGIN;
    TC_TRY(check_scaler(scaler));
    if (!scaler->opts.enabled)
        return TC_OK;
    TC_TRY(tc__mt_check_count(grads, n, "grads"));
    for (int i = 0; i < n; i++) /* PyTorch's unscale_ refuses them (allow_fp16=False) */
        if (tc__tensor_live(grads[i]) && grads[i]->dtype == TC_FLOAT16)
            return tc__fail(TC_ERROR_DTYPE, "Attempting to unscale FP16 gradients.");
    per_opt *e;
    bool created;
    TC_TRY(entry_of(scaler, opt, n, &e, &created));
    if (e->stage == STAGE_UNSCALED)
        return tc__fail(TC_ERROR_INVALID_STATE,
                        "unscale_() has already been called on this optimizer since the last "
                        "update()");
    if (e->stage == STAGE_STEPPED)
        return tc__fail(TC_ERROR_INVALID_STATE, "unscale_() is being called after step()");
    TC_TRY(forget_new(scaler, e, created, unscale(scaler, e, grads, n, false)));
    e->stage = STAGE_UNSCALED;
    return TC_OK;
}

tc_status tc_grad_scaler_step(tc_grad_scaler *scaler, tc_optimizer *opt, tc_tensor *const *grads,
                              int n)
{
    TC_API_BEGIN;
    TC_TRY(check_scaler(scaler));
    if (!scaler->opts.enabled)
        return tc_optimizer_step(opt, grads, n);
    per_opt *e;
    bool created;
    TC_TRY(entry_of(scaler, opt, n, &e, &created));
    if (e->stage == STAGE_STEPPED)
        return tc__fail(TC_ERROR_INVALID_STATE,
                        "step() has already been called since the last update()");
    const tc_tensor *grad_scale = NULL;
    if (e->stage == STAGE_READY) { /* check only; the step divides by the scale */
        TC_TRY(forget_new(scaler, e, created, unscale(scaler, e, grads, n, true)));
        grad_scale = scaler->scale;
    }
    TC_TRY(forget_new(scaler, e, created,
                      tc_optimizer_step_scaled(opt, grads, n, grad_scale, e->found_inf)));
    e->stage = STAGE_STEPPED;
    return TC_OK;
}

tc_status tc_grad_scaler_update(tc_grad_scaler *scaler)
{
    TC_API_BEGIN;
    TC_TRY(check_scaler(scaler));
    if (!scaler->opts.enabled)
        return TC_OK;
    if (scaler->n_opts == 0)
        return tc__fail(TC_ERROR_INVALID_STATE, "No inf checks were recorded prior to update.");
    const tc__optim_backend *be;
    TC_TRY(tc__optim_backend_of(scaler->device, &be));
    tc_tensor *sum = tc__tensor_ref(scaler->opts_seen[0].found_inf);
    tc_status st = TC_OK;
    for (int i = 1; st == TC_OK && i < scaler->n_opts; i++) {
        tc_tensor *next;
        st = tc_tensor_add(sum, scaler->opts_seen[i].found_inf, &next);
        if (st == TC_OK) {
            tc_tensor_release(sum);
            sum = next;
        }
    }
    tc__mt_scalar_use su[3] = {{tc__data(scaler->scale), TC_FLOAT32, true},
                               {tc__data(scaler->tracker), TC_INT32, true},
                               {tc__data(sum), TC_FLOAT32, false}};
    tc__mt_build nb = {.device = scaler->device};
    if (st == TC_OK)
        st = tc__mt_publish(&nb, 0, su, 3, "update_scale kernel");
    if (st == TC_OK)
        st = be->update_scale(scaler->device.index, (float *)tc__data(scaler->scale),
                              (int32_t *)tc__data(scaler->tracker), (const float *)tc__data(sum),
                              scaler->opts.growth_factor, scaler->opts.backoff_factor,
                              scaler->opts.growth_interval);
    tc_tensor_release(sum);
    if (st == TC_OK)
        free_rounds(scaler);
    return st;
}

/* ---- checkpoints ---------------------------------------------------------------------- */

tc_status tc_grad_scaler_get_state(const tc_grad_scaler *scaler, tc_grad_scaler_state *out)
{
    TC_API_BEGIN;
    TC_TRY(check_scaler(scaler));
    TC_CHECK_ARG(out, "out is NULL");
    tc_grad_scaler_state st = {.scale = scaler->opts.init_scale,
                               .growth_factor = scaler->opts.growth_factor,
                               .backoff_factor = scaler->opts.backoff_factor,
                               .growth_interval = scaler->opts.growth_interval};
    if (scaler->opts.enabled) {
        double tracker;
        TC_TRY(tc_tensor_item(scaler->scale, &st.scale));
        TC_TRY(tc_tensor_item(scaler->tracker, &tracker));
        st.growth_tracker = (int)tracker;
    }
    *out = st;
    return TC_OK;
}

tc_status tc_grad_scaler_set_state(tc_grad_scaler *scaler, const tc_grad_scaler_state *state)
{
    TC_API_BEGIN;
    TC_TRY(check_scaler(scaler));
    TC_CHECK_ARG(state, "state is NULL");
    TC_TRY(check_scale_value(state->scale));
    TC_TRY(check_factors(state->growth_factor, state->backoff_factor, state->growth_interval));
    TC_CHECK_ARG(state->growth_tracker >= 0, "growth_tracker is %d: it must be >= 0",
                 state->growth_tracker);
    if (scaler->opts.enabled) {
        TC_TRY(tc_tensor_fill_(scaler->scale, state->scale));
        TC_TRY(tc_tensor_fill_(scaler->tracker, state->growth_tracker));
    }
    scaler->opts.growth_factor = state->growth_factor;
    scaler->opts.backoff_factor = state->backoff_factor;
    scaler->opts.growth_interval = state->growth_interval;
    return TC_OK;
}

tc_status tc_grad_scaler_get_scale_tensor(const tc_grad_scaler *scaler, tc_tensor **out)
{
    TC_API_BEGIN;
    TC_TRY(check_scaler(scaler));
    TC_CHECK_ARG(out, "out is NULL");
    if (!scaler->opts.enabled)
        return tc__fail(TC_ERROR_INVALID_STATE, "the scaler is disabled: it keeps no scale");
    *out = tc__tensor_ref(scaler->scale);
    return TC_OK;
}
