/* What test_checkpoint and test_checkpoint_cuda share: a small made-up
 * training run on one device, whose every step reads the default random
 * generator of that device (gradients drawn with tc_tensor_normal_, then
 * put through tc_nn_dropout), depends on the parameters (a weight-decay-like
 * term), runs AdamW under a GradScaler (growth every 2 good steps, an
 * infinity at steps 1 and 4 so that the scale backs off and a step is
 * skipped) with a learning rate computed from the step, and its whole state:
 * the bytes of the parameters and the optimizer's state, the scaler's, the
 * random states, for memcmp.
 *
 * The resume check: 6 steps in one go against 3 steps, a save, everything
 * destroyed, fresh objects made from another seed (so nothing carries over
 * by accident), a load, and the 3 steps left. */
#ifndef TC_CHECKPOINT_TRAIN_H
#define TC_CHECKPOINT_TRAIN_H

#include <math.h>
#include <stdlib.h>

#include "tc_test.h"

#define TRAIN_N 3
static const char *const train_names[TRAIN_N] = {"h.0.attn.c_attn.weight", "h.0.ln_1.bias",
                                                 "wte.weight"};
static const int train_ndim[TRAIN_N] = {1, 2, 2};
static const int64_t train_sizes[TRAIN_N][2] = {{37, 0}, {3, 5}, {4, 9}};

typedef struct trainer {
    tc_device dev;
    tc_tensor *p[TRAIN_N], *g[TRAIN_N];
    tc_optimizer *opt;
    tc_grad_scaler *scaler;
    int64_t step;
} trainer;

/* The default generators of the CPU and (on a GPU) of dev, seeded. */
static inline void train_seed(tc_device dev, uint64_t seed)
{
    tc_generator *cpu = NULL;
    CHECK_OK(tc_default_generator((tc_device){TC_CPU, -1}, &cpu));
    CHECK_OK(tc_generator_manual_seed(cpu, seed));
    if (dev.type == TC_CUDA)
        CHECK_OK(tc_manual_seed_all(seed + 1));
}

/* Fresh parameters (from a generator of their own, seeded with seed),
 * gradients, AdamW and a scaler on dev. */
static inline void train_make(trainer *t, tc_device dev, uint64_t seed)
{
    *t = (trainer){.dev = dev};
    tc_generator *gen = NULL;
    CHECK_OK(tc_generator_create(dev, seed, &gen));
    for (int i = 0; i < TRAIN_N; i++) {
        CHECK_OK(tc_tensor_randn(train_ndim[i], train_sizes[i], TC_FLOAT32, dev, gen, &t->p[i]));
        CHECK_OK(tc_tensor_zeros(train_ndim[i], train_sizes[i], TC_FLOAT32, dev, &t->g[i]));
    }
    CHECK_OK(tc_generator_destroy(gen));
    tc_adamw_options o = tc_adamw_options_default();
    o.amsgrad = true, o.weight_decay = 0.1;
    CHECK_OK(tc_optimizer_create_adamw(t->p, TRAIN_N, &o, &t->opt));
    tc_grad_scaler_options so = tc_grad_scaler_options_default();
    so.init_scale = 1024, so.growth_interval = 2;
    CHECK_OK(tc_grad_scaler_create(dev, &so, &t->scaler));
}

static inline void train_free(trainer *t)
{
    CHECK_OK(tc_optimizer_destroy(t->opt));
    CHECK_OK(tc_grad_scaler_destroy(t->scaler));
    for (int i = 0; i < TRAIN_N; i++)
        tc_tensor_release(t->p[i]), tc_tensor_release(t->g[i]);
}

/* The checkpoint of t (its step written back by a load). */
static inline tc_checkpoint train_ck(trainer *t)
{
    return (tc_checkpoint){.names = train_names,
                           .params = t->p,
                           .n = TRAIN_N,
                           .optimizer = t->opt,
                           .scaler = t->scaler,
                           .rng = true,
                           .step = t->step};
}

/* One step: made-up scaled gradients, unscale_ on odd steps, step, update. */
static inline void train_step(trainer *t)
{
    tc_tensor *scale = NULL;
    CHECK_OK(tc_grad_scaler_get_scale_tensor(t->scaler, &scale));
    for (int i = 0; i < TRAIN_N; i++) {
        tc_tensor *dropped = NULL;
        CHECK_OK(tc_tensor_normal_(t->g[i], 0, 1, NULL));
        CHECK_OK(tc_nn_dropout(t->g[i], 0.25, true, NULL, &dropped, NULL));
        CHECK_OK(tc_tensor_copy_(t->g[i], dropped, false));
        tc_tensor_release(dropped);
    }
    CHECK_OK(tc_foreach_add_list_(t->g, (const tc_tensor *const *)t->p, TRAIN_N, 0.1));
    CHECK_OK(tc_foreach_mul_tensor_(t->g, TRAIN_N, scale));
    if (t->step == 1 || t->step == 4) {
        tc_tensor *first = NULL;
        CHECK_OK(tc_tensor_narrow(t->g[0], 0, 3, 1, &first));
        CHECK_OK(tc_tensor_fill_(first, INFINITY));
        tc_tensor_release(first);
    }
    CHECK_OK(tc_optimizer_set_lr(t->opt, 1e-2 * (double)(t->step + 1) / 7));
    if (t->step % 2)
        CHECK_OK(tc_grad_scaler_unscale_(t->scaler, t->opt, t->g, TRAIN_N));
    CHECK_OK(tc_grad_scaler_step(t->scaler, t->opt, t->g, TRAIN_N));
    CHECK_OK(tc_grad_scaler_update(t->scaler));
    tc_tensor_release(scale);
    t->step++;
}

/* ---- the whole state as bytes ---------------------------------------------------------- */

typedef struct train_state {
    unsigned char *bytes; /* parameters, then each parameter's optimizer state */
    size_t size;
    tc_grad_scaler_state scaler;
    tc_rng_state cpu, gpu;
    double lr;
    int64_t step;
} train_state;

static inline void put_bytes(train_state *s, const tc_tensor *x)
{
    size_t n = (size_t)tc_tensor_numel(x) * tc_dtype_size(tc_tensor_dtype(x));
    s->bytes = realloc(s->bytes, s->size + n + 1);
    CHECK_OK(tc_tensor_to_host(x, tc_tensor_dtype(x), s->bytes + s->size));
    s->size += n;
}

static inline train_state train_state_of(const trainer *t)
{
    train_state s = {0};
    for (int i = 0; i < TRAIN_N; i++)
        put_bytes(&s, t->p[i]);
    static const tc_optimizer_state kept[] = {TC_OPTIMIZER_STATE_STEP, TC_OPTIMIZER_STATE_EXP_AVG,
                                              TC_OPTIMIZER_STATE_EXP_AVG_SQ,
                                              TC_OPTIMIZER_STATE_MAX_EXP_AVG_SQ};
    for (int i = 0; i < TRAIN_N; i++)
        for (int k = 0; k < 4; k++) {
            tc_tensor *x = NULL;
            CHECK_OK(tc_optimizer_get_state(t->opt, i, kept[k], &x));
            put_bytes(&s, x);
            tc_tensor_release(x);
        }
    CHECK_OK(tc_grad_scaler_get_state(t->scaler, &s.scaler));
    tc_generator *cpu = NULL;
    CHECK_OK(tc_default_generator((tc_device){TC_CPU, -1}, &cpu));
    CHECK_OK(tc_generator_get_state(cpu, &s.cpu));
    if (t->dev.type == TC_CUDA)
        CHECK_OK(tc_get_rng_state(t->dev.index, &s.gpu));
    CHECK_OK(tc_optimizer_get_lr(t->opt, &s.lr));
    s.step = t->step;
    return s;
}

static inline bool train_state_equal(const train_state *a, const train_state *b)
{
    return a->size == b->size && !memcmp(a->bytes, b->bytes, a->size) &&
           !memcmp(&a->scaler, &b->scaler, sizeof a->scaler) &&
           !memcmp(&a->cpu, &b->cpu, sizeof a->cpu) && !memcmp(&a->gpu, &b->gpu, sizeof a->gpu) &&
           a->lr == b->lr && a->step == b->step;
}

/* ---- the resume check ------------------------------------------------------------------- */

/* 6 steps uninterrupted against 3, save to path, destroy, fresh objects
 * from other seeds, load, 3 more: the same bytes at the end. Also the
 * states right after the load equal those right before the save. */
static inline void train_resume_check(tc_device dev, const char *path, uint64_t seed)
{
    trainer a;
    train_seed(dev, seed);
    train_make(&a, dev, seed);
    for (int s = 0; s < 6; s++)
        train_step(&a);
    train_state want = train_state_of(&a);
    train_free(&a);

    trainer b;
    train_seed(dev, seed);
    train_make(&b, dev, seed);
    for (int s = 0; s < 3; s++)
        train_step(&b);
    train_state saved = train_state_of(&b);
    tc_checkpoint ck = train_ck(&b);
    CHECK_OK(tc_checkpoint_save(path, &ck));
    train_free(&b);

    trainer c;
    train_seed(dev, seed + 100);
    train_make(&c, dev, seed + 100);
    train_step(&c); /* a different scaler, lr and optimizer step count too */
    tc_checkpoint ck2 = train_ck(&c);
    CHECK_OK(tc_checkpoint_load(path, &ck2));
    CHECK(ck2.step == 3);
    c.step = ck2.step;
    train_state loaded = train_state_of(&c);
    CHECK(train_state_equal(&saved, &loaded));
    while (c.step < 6)
        train_step(&c);
    train_state got = train_state_of(&c);
    CHECK(got.step == 6);
    CHECK(got.scaler.scale != 1024); /* the scaler did move (backoff, growth) */
    CHECK(train_state_equal(&want, &got));
    if (!train_state_equal(&want, &got)) {
        size_t i = 0;
        while (i < want.size && i < got.size && want.bytes[i] == got.bytes[i])
            i++;
        printf("  resume differs: first byte %zu of %zu; scale %g vs %g\n", i, want.size,
               want.scaler.scale, got.scaler.scale);
    }
    train_free(&c);
    free(want.bytes), free(saved.bytes), free(loaded.bytes), free(got.bytes);
}

#endif
