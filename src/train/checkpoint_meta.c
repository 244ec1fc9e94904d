/* The metadata of training checkpoints (checkpoint.c holds the tensors):
 * the layout's version, the step, each optimizer's kind and options, the
 * scaler's state and the number of GPUs' random states, as the strings of
 * the safetensors header's "__metadata__", and reading them back: every
 * value is parsed and checked before load changes anything (the scaler's
 * state by setting it into a disabled scratch scaler, so the checks are
 * amp.c's own). Numbers are written with %.17g, which reads back as the
 * same double, so the optimizers' learning rates and the scaler's scale
 * survive bit for bit. Optimizer 0's keys are "tcuda.optimizer.<key>",
 * those of optimizer g >= 1 "tcuda.optimizer<g>.<key>", and
 * "tcuda.optimizers" counts them (a file of one written before the count
 * has none: it holds one). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "checkpoint_internal.h"
#include "optim/optim_front.h"
#include "tcuda/amp.h"
#include "tcuda/checkpoint.h"
#include "tcuda/safetensors.h"

/* The layout's version ("tcuda.checkpoint"); a file of another is refused. */
#define VERSION "1"
#define KEY_VERSION "tcuda.checkpoint"
/* The number of optimizers; absent from a file of one written before it. */
#define KEY_OPTIMIZERS "tcuda.optimizers"

/* ---- options and their keys ---------------------------------------------------------------- */

/* An option saved as "<prefix><name>" ("tcuda.optimizer.lr"): a double, an
 * int or a bool of a struct, at `offset`. */
typedef enum field_type { FIELD_DOUBLE, FIELD_INT, FIELD_BOOL } field_type;
typedef struct field {
    const char *key;
    size_t offset;
    field_type type;
} field;

#define F(type, name, kind)                                                                        \
    {                                                                                              \
#name, offsetof(type, name), kind                                                          \
    }
static const field ADAM_FIELDS[] = {
    F(tc_adamw_options, lr, FIELD_DOUBLE),           F(tc_adamw_options, beta1, FIELD_DOUBLE),
    F(tc_adamw_options, beta2, FIELD_DOUBLE),        F(tc_adamw_options, eps, FIELD_DOUBLE),
    F(tc_adamw_options, weight_decay, FIELD_DOUBLE), F(tc_adamw_options, amsgrad, FIELD_BOOL),
    F(tc_adamw_options, maximize, FIELD_BOOL),       {NULL, 0, FIELD_DOUBLE}};
static const field SGD_FIELDS[] = {F(tc_sgd_options, lr, FIELD_DOUBLE),
                                   F(tc_sgd_options, momentum, FIELD_DOUBLE),
                                   F(tc_sgd_options, dampening, FIELD_DOUBLE),
                                   F(tc_sgd_options, weight_decay, FIELD_DOUBLE),
                                   F(tc_sgd_options, nesterov, FIELD_BOOL),
                                   F(tc_sgd_options, maximize, FIELD_BOOL),
                                   {NULL, 0, FIELD_DOUBLE}};
#undef F
#define F(name, kind)                                                                              \
    {                                                                                              \
#name, offsetof(tc_grad_scaler_state, name), kind                                          \
    }
static const field SCALER_FIELDS[] = {
    F(scale, FIELD_DOUBLE),        F(growth_factor, FIELD_DOUBLE), F(backoff_factor, FIELD_DOUBLE),
    F(growth_interval, FIELD_INT), F(growth_tracker, FIELD_INT),   {NULL, 0, FIELD_DOUBLE}};
#undef F

static const char *kind_name(tc__optimizer_kind k)
{
    return k == TC__OPTIMIZER_ADAM ? "adam" : k == TC__OPTIMIZER_ADAMW ? "adamw" : "sgd";
}

static const field *fields_of(const tc__optimizer_info *o)
{
    return o->kind == TC__OPTIMIZER_SGD ? SGD_FIELDS : ADAM_FIELDS;
}

static const void *options_of(const tc__optimizer_info *o)
{
    return o->kind == TC__OPTIMIZER_SGD ? (const void *)&o->sgd : (const void *)&o->adam;
}

/* ---- save ---------------------------------------------------------------------------------- */

static void meta_add(tc__train_meta *m, const char *prefix, const char *key, const char *fmt, ...)
    TC_PRINTF(4, 5);
static void meta_add(tc__train_meta *m, const char *prefix, const char *key, const char *fmt, ...)
{
    if (m->n == m->cap && m->st == TC_OK) {
        int cap = m->cap ? 2 * m->cap : 32;
        tc__train_meta_item *item = realloc(m->item, (size_t)cap * sizeof *item);
        if (item)
            m->item = item, m->cap = cap;
        else
            m->st = tc__fail(TC_ERROR_OUT_OF_MEMORY, "no memory for the checkpoint's metadata");
    }
    if (m->st != TC_OK)
        return;
    tc__train_meta_item *it = &m->item[m->n++];
    snprintf(it->key, sizeof it->key, "%s%s", prefix, key);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(it->value, sizeof it->value, fmt, ap);
    va_end(ap);
}

static void meta_add_fields(tc__train_meta *m, const char *prefix, const field *f, const void *base)
{
    for (; f->key; f++) {
        const char *p = (const char *)base + f->offset;
        if (f->type == FIELD_DOUBLE)
            meta_add(m, prefix, f->key, "%.17g", *(const double *)p);
        else if (f->type == FIELD_INT)
            meta_add(m, prefix, f->key, "%d", *(const int *)p);
        else
            meta_add(m, prefix, f->key, "%s", *(const bool *)p ? "true" : "false");
    }
}

/* Whether a scaler scales: a disabled one has no scale tensor (the probe's
 * failure is not the caller's, so its message is put back). */
static bool scaler_enabled(const tc_grad_scaler *s)
{
    tc__saved_message saved;
    tc__message_save(&saved);
    tc_tensor *scale = NULL;
    bool enabled = tc_grad_scaler_get_scale_tensor(s, &scale) == TC_OK;
    tc_tensor_release(scale);
    tc__message_restore(&saved);
    return enabled;
}

/* The user's metadata: pairs, none of the checkpoint's keys. *n_out: the
 * number of strings. */
tc_status tc__train_check_user_metadata(const char *const *md, int *n_out)
{
    int n = 0;
    for (; md && md[n]; n += 2) {
        TC_CHECK_ARG(md[n + 1], "ck->metadata key \"%s\" has no value", md[n]);
        TC_CHECK_ARG(strcmp(md[n], "format") && strncmp(md[n], "tcuda.", 6),
                     "ck->metadata key \"%s\" is the checkpoint's own (\"format\" and keys "
                     "starting \"tcuda.\" are)",
                     md[n]);
    }
    *n_out = n;
    return TC_OK;
}

tc_status tc__train_meta_build(const tc_checkpoint *ck, const tc__train_plan *p, tc__train_meta *m)
{
    meta_add(m, "", "format", "pt");
    meta_add(m, "", KEY_VERSION, VERSION);
    meta_add(m, "", "tcuda.step", "%" PRId64, ck->step);
    if (p->n_g)
        meta_add(m, "", KEY_OPTIMIZERS, "%d", p->n_g);
    for (int g = 0; g < p->n_g; g++) {
        const tc__train_group *gr = &p->g[g];
        meta_add(m, gr->keys, "kind", "%s", kind_name(gr->info.kind));
        meta_add_fields(m, gr->keys, fields_of(&gr->info), options_of(&gr->info));
    }
    if (ck->scaler) {
        tc_grad_scaler_state s;
        TC_TRY(tc_grad_scaler_get_state(ck->scaler, &s));
        meta_add(m, "tcuda.scaler.", "enabled", "%s",
                 scaler_enabled(ck->scaler) ? "true" : "false");
        meta_add_fields(m, "tcuda.scaler.", SCALER_FIELDS, &s);
    }
    if (ck->rng)
        meta_add(m, "", "tcuda.rng.cuda_devices", "%d", p->n - p->rng_first - 1);
    return m->st;
}

/* ---- load ---------------------------------------------------------------------------------- */

static tc_status meta_get(const tc__train_source *s, const char *key, const char **out)
{
    TC_TRY(tc_safetensors_metadata(s->f, key, out));
    if (!*out)
        return tc__fail(TC_ERROR_INVALID_ARGUMENT, "%s: has no metadata \"%s\"", s->path, key);
    return TC_OK;
}

static tc_status meta_double(const tc__train_source *s, const char *key, double *out)
{
    const char *v;
    TC_TRY(meta_get(s, key, &v));
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (end == v || *end || errno == ERANGE)
        return tc__fail(TC_ERROR_INVALID_ARGUMENT, "%s: metadata \"%s\" is \"%s\", not a number",
                        s->path, key, v);
    *out = d;
    return TC_OK;
}

static tc_status meta_int64(const tc__train_source *s, const char *key, int64_t lo, int64_t hi,
                            int64_t *out)
{
    const char *v;
    TC_TRY(meta_get(s, key, &v));
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (end == v || *end || errno == ERANGE || x < lo || x > hi)
        return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                        "%s: metadata \"%s\" is \"%s\", not an integer in [%" PRId64 ", %" PRId64
                        "]",
                        s->path, key, v, lo, hi);
    *out = x;
    return TC_OK;
}

static tc_status meta_bool(const tc__train_source *s, const char *key, bool *out)
{
    const char *v;
    TC_TRY(meta_get(s, key, &v));
    if (strcmp(v, "true") && strcmp(v, "false"))
        return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                        "%s: metadata \"%s\" is \"%s\", not \"true\" or \"false\"", s->path, key,
                        v);
    *out = !strcmp(v, "true");
    return TC_OK;
}

/* Reads fields, keys "<prefix><field>", into the struct at base. */
static tc_status meta_fields(const tc__train_source *s, const char *prefix, const field *f,
                             void *base)
{
    for (; f->key; f++) {
        char *p = (char *)base + f->offset, key[64];
        snprintf(key, sizeof key, "%s%s", prefix, f->key);
        if (f->type == FIELD_DOUBLE) {
            TC_TRY(meta_double(s, key, (double *)p));
        } else if (f->type == FIELD_INT) {
            int64_t x;
            TC_TRY(meta_int64(s, key, INT32_MIN, INT32_MAX, &x));
            *(int *)p = (int)x;
        } else {
            TC_TRY(meta_bool(s, key, (bool *)p));
        }
    }
    return TC_OK;
}

/* The file's optimizer g: the live one's kind and options, lr aside (read
 * into *lr). */
static tc_status check_optimizer(const tc__train_source *s, const tc__train_group *gr, double *lr)
{
    const tc__optimizer_info *o = &gr->info;
    const char *kind;
    char key[64];
    snprintf(key, sizeof key, "%skind", gr->keys);
    TC_TRY(meta_get(s, key, &kind));
    if (strcmp(kind, kind_name(o->kind)))
        return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                        "%s: the file's optimizer is \"%s\" (\"%s\"), the live one \"%s\"", s->path,
                        kind, key, kind_name(o->kind));
    union {
        tc_adamw_options adam;
        tc_sgd_options sgd;
    } file;
    const field *fields = fields_of(o);
    TC_TRY(meta_fields(s, gr->keys, fields, &file));
    const char *live = options_of(o);
    for (const field *f = fields; f->key; f++) {
        const char *a = (const char *)&file + f->offset, *b = live + f->offset;
        if (!strcmp(f->key, "lr"))
            continue; /* restored, not compared */
        char fa[32], fb[32];
        if (f->type == FIELD_DOUBLE) {
            snprintf(fa, sizeof fa, "%.17g", *(const double *)a);
            snprintf(fb, sizeof fb, "%.17g", *(const double *)b);
        } else {
            snprintf(fa, sizeof fa, "%s", *(const bool *)a ? "true" : "false");
            snprintf(fb, sizeof fb, "%s", *(const bool *)b ? "true" : "false");
        }
        bool same = f->type == FIELD_DOUBLE ? *(const double *)a == *(const double *)b
                                            : *(const bool *)a == *(const bool *)b;
        if (!same)
            return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                            "%s: \"%s%s\" is %s in the file, %s in the live optimizer: load "
                            "into an optimizer made with the file's options",
                            s->path, gr->keys, f->key, fa, fb);
    }
    *lr = file.adam.lr;
    TC_CHECK_ARG(isfinite(*lr) && *lr >= 0, "%s: \"%slr\" is %g: it must be finite and >= 0",
                 s->path, gr->keys, *lr);
    return TC_OK;
}

/* As many optimizers in the file as live, each like its live one. */
static tc_status check_optimizers_of_file(const tc__train_source *s, const tc__train_plan *p,
                                          tc__train_loaded *l)
{
    const char *count, *kind;
    TC_TRY(tc_safetensors_metadata(s->f, KEY_OPTIMIZERS, &count));
    TC_TRY(tc_safetensors_metadata(s->f, "tcuda.optimizer.kind", &kind));
    int64_t n = kind ? 1 : 0; /* a file of one may predate the count */
    if (count)
        TC_TRY(meta_int64(s, KEY_OPTIMIZERS, 0, INT32_MAX, &n));
    if (n != p->n_g)
        return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                        "%s: holds the state of %" PRId64
                        " optimizer(s), the checkpoint names %d: load with as many, made as the "
                        "saved ones were",
                        s->path, n, p->n_g);
    l->lr = malloc((size_t)p->n_g * sizeof *l->lr);
    if (!l->lr)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "no memory for the learning rates");
    for (int g = 0; g < p->n_g; g++)
        TC_TRY(check_optimizer(s, &p->g[g], &l->lr[g]));
    return TC_OK;
}

/* The message of the last failure without its "tc_x: " prefix, copied
 * (tc__fail rewrites the buffer it lives in). */
void tc__train_last_message(char *buf, size_t size)
{
    const char *m = tc_last_error();
    const char *colon = strstr(m, ": ");
    if (!strncmp(m, "tc_", 3) && colon && !memchr(m, ' ', (size_t)(colon - m)))
        m = colon + 2;
    snprintf(buf, size, "%s", m);
}

/* The file's scaler state, checked by setting it into a disabled scratch
 * scaler (the range checks are amp.c's own; nothing live changes). */
static tc_status check_scaler(const tc__train_source *s, tc_grad_scaler *live, tc__train_loaded *l)
{
    bool enabled = false; /* set by meta_bool; GCC -O3 cannot see it */
    TC_TRY(meta_bool(s, "tcuda.scaler.enabled", &enabled));
    if (enabled != scaler_enabled(live))
        return tc__fail(TC_ERROR_INVALID_ARGUMENT, "%s: the file's scaler is %s, the live one %s",
                        s->path, enabled ? "enabled" : "disabled",
                        enabled ? "disabled" : "enabled");
    TC_TRY(meta_fields(s, "tcuda.scaler.", SCALER_FIELDS, &l->scaler));
    tc_grad_scaler_options o = tc_grad_scaler_options_default();
    o.enabled = false;
    tc_grad_scaler *scratch;
    TC_TRY(tc_grad_scaler_create((tc_device){TC_CPU, -1}, &o, &scratch));
    tc_status st = tc_grad_scaler_set_state(scratch, &l->scaler);
    tc_grad_scaler_destroy(scratch);
    if (st != TC_OK) {
        char why[512];
        tc__train_last_message(why, sizeof why);
        return tc__fail(st, "%s: the scaler's state: %s", s->path, why);
    }
    return TC_OK;
}

/* The header: version, step, and what the checkpoint asks for. */
tc_status tc__train_read_header(const tc__train_source *s, const tc_checkpoint *ck,
                                const tc__train_plan *p, tc__train_loaded *l)
{
    const char *version;
    TC_TRY(tc_safetensors_metadata(s->f, KEY_VERSION, &version));
    if (!version) {
        const char *wanted = p->n_g       ? "optimizer state"
                             : ck->scaler ? "scaler state"
                             : ck->rng    ? "random states"
                                          : NULL;
        if (wanted)
            return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                            "%s: is a model file, not a checkpoint (its metadata has no \"%s\"), "
                            "so it holds no %s",
                            s->path, KEY_VERSION, wanted);
        l->step = 0;
        return TC_OK;
    }
    if (strcmp(version, VERSION))
        return tc__fail(TC_ERROR_NOT_SUPPORTED,
                        "%s: is a checkpoint of version \"%s\"; this tcuda reads version " VERSION,
                        s->path, version);
    TC_TRY(meta_int64(s, "tcuda.step", INT64_MIN, INT64_MAX, &l->step));
    if (p->n_g)
        TC_TRY(check_optimizers_of_file(s, p, l));
    if (ck->scaler)
        TC_TRY(check_scaler(s, ck->scaler, l));
    if (ck->rng) {
        int64_t n;
        TC_TRY(meta_int64(s, "tcuda.rng.cuda_devices", 0, INT32_MAX, &n));
        if (n != p->n - p->rng_first - 1)
            return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                            "%s: holds the random states of %" PRId64
                            " GPUs, this process sees %d: load with rng false, or with as many "
                            "GPUs visible",
                            s->path, n, p->n - p->rng_first - 1);
    }
    return TC_OK;
}
