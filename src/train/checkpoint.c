/* Training checkpoints (include/tcuda/checkpoint.h): a whole training state
 * to one safetensors file and back.
 *
 * Both directions first make a plan: one entry per tensor of the file, with
 * its name there and a tensor of the process: the parameters, then each
 * optimizer's state (both live tensors), then the random states (32-byte
 * CPU tensors made here, which hold tc_rng_state blobs). Save fills the
 * random entries and hands the plan and the metadata to
 * tc_safetensors_save. Load checks everything before it changes anything:
 * every metadata value is parsed and checked (the scaler's state by setting
 * it into a disabled scratch scaler, each random state by setting it into a
 * scratch CPU generator, so the checks are the objects' own), every entry's
 * dtype and shape against the file's, and every tensor is read into host
 * memory (where a short file fails). Only then are the values copied into
 * the live tensors and objects. Numbers are written with %.17g, which reads
 * back as the same double, so the optimizer's learning rate and the
 * scaler's scale survive bit for bit.
 *
 * Several optimizers (param groups) are a list: optimizer 0 keeps the
 * names of a file of one ("optimizer.<name>...", "tcuda.optimizer.<key>"),
 * optimizer g >= 1 has "optimizer<g>." and "tcuda.optimizer<g>." in front,
 * so a version-1 reader of one optimizer reads a new file of one, and a
 * parameter loaded into another group than it was saved from is a missing
 * tensor, not a silent mix-up. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "optim/optim_front.h"
#include "runtime/device_ops.h"
#include "tcuda/amp.h"
#include "tcuda/checkpoint.h"
#include "tcuda/random.h"
#include "tcuda/safetensors.h"

/* The layout's version ("tcuda.checkpoint"); a file of another is refused. */
#define VERSION "1"
#define KEY_VERSION "tcuda.checkpoint"
/* The number of optimizers; absent from a file of one written before it. */
#define KEY_OPTIMIZERS "tcuda.optimizers"

/* ---- the plan ---------------------------------------------------------------------------- */

typedef struct entry {
    char *name;      /* in the file */
    tc_tensor *live; /* a reference: a live tensor, or a random state's holder */
    tc_tensor *read; /* load: the file's value, on the CPU */
} entry;

/* One optimizer of the checkpoint. */
typedef struct group {
    tc_optimizer *opt;
    tc__optimizer_info info;
    int *param;      /* the index in ck->params of each of info.n parameters */
    char prefix[24]; /* of its states' names: "optimizer." or "optimizer<g>." */
    char keys[32];   /* of its metadata keys: "tcuda.optimizer." or "tcuda.optimizer<g>." */
} group;

typedef struct plan {
    entry *e;
    int n, cap;
    int rng_first; /* entries from here on are random states */
    group *g;      /* the optimizers, ck->optimizer's or ck->optimizers' */
    int n_g;
} plan;

static void plan_free(plan *p)
{
    for (int i = 0; i < p->n; i++) {
        free(p->e[i].name);
        tc_tensor_release(p->e[i].live);
        tc_tensor_release(p->e[i].read);
    }
    for (int g = 0; g < p->n_g; g++)
        free(p->g[g].param);
    free(p->e);
    free(p->g);
    *p = (plan){0};
}

/* Adds the entry prefix+name+suffix for `live`, whose reference it takes
 * (released on failure too). */
static tc_status plan_add(plan *p, const char *prefix, const char *name, const char *suffix,
                          tc_tensor *live)
{
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 16;
        entry *e = realloc(p->e, (size_t)cap * sizeof *e);
        if (!e) {
            tc_tensor_release(live);
            return tc__fail(TC_ERROR_OUT_OF_MEMORY, "no memory for the checkpoint's list");
        }
        p->e = e, p->cap = cap;
    }
    size_t len = strlen(prefix) + strlen(name) + strlen(suffix) + 1;
    char *s = malloc(len);
    if (!s) {
        tc_tensor_release(live);
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "no memory for the checkpoint's list");
    }
    snprintf(s, len, "%s%s%s", prefix, name, suffix);
    p->e[p->n++] = (entry){s, live, NULL};
    return TC_OK;
}

/* The optimizer's state in the file, by tc_optimizer_state. */
static const struct {
    tc_optimizer_state which;
    const char *suffix;
} STATES[] = {{TC_OPTIMIZER_STATE_STEP, ".step"},
              {TC_OPTIMIZER_STATE_EXP_AVG, ".exp_avg"},
              {TC_OPTIMIZER_STATE_EXP_AVG_SQ, ".exp_avg_sq"},
              {TC_OPTIMIZER_STATE_MAX_EXP_AVG_SQ, ".max_exp_avg_sq"},
              {TC_OPTIMIZER_STATE_MOMENTUM_BUFFER, ".momentum_buffer"}};

/* Whether an optimizer of these options keeps state `s` (optim.c makes it
 * at create by the same rules). */
static bool keeps(const tc__optimizer_info *o, tc_optimizer_state s)
{
    bool adam = o->kind != TC__OPTIMIZER_SGD;
    switch (s) {
    case TC_OPTIMIZER_STATE_STEP: return true;
    case TC_OPTIMIZER_STATE_EXP_AVG:
    case TC_OPTIMIZER_STATE_EXP_AVG_SQ: return adam;
    case TC_OPTIMIZER_STATE_MAX_EXP_AVG_SQ: return adam && o->adam.amsgrad;
    case TC_OPTIMIZER_STATE_MOMENTUM_BUFFER: return !adam && o->sgd.momentum != 0;
    }
    return false;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const entry *)a)->name, ((const entry *)b)->name);
}

/* No two entries of the file share a name (two parameters, or a parameter
 * named as a state). */
static tc_status plan_check_unique(const plan *p)
{
    if (p->n < 2)
        return TC_OK;
    entry *sorted = malloc((size_t)p->n * sizeof *sorted);
    if (!sorted)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "no memory for the checkpoint's list");
    memcpy(sorted, p->e, (size_t)p->n * sizeof *sorted);
    qsort(sorted, (size_t)p->n, sizeof *sorted, by_name);
    tc_status st = TC_OK;
    for (int i = 1; i < p->n && st == TC_OK; i++)
        if (!strcmp(sorted[i - 1].name, sorted[i].name))
            st = tc__fail(TC_ERROR_INVALID_ARGUMENT,
                          "two tensors of the checkpoint are named \"%s\" (names must differ, "
                          "also from the optimizer's and random states' names)",
                          sorted[i].name);
    free(sorted);
    return st;
}

static bool same_tensor(const tc_tensor *a, const tc_tensor *b)
{
    return a == b ||
           (tc_tensor_data_ptr(a) == tc_tensor_data_ptr(b) &&
            tc_tensor_dtype(a) == tc_tensor_dtype(b) && tc_tensor_numel(a) == tc_tensor_numel(b));
}

/* Optimizer g of the plan: its options and parameters, the prefixes of its
 * names. */
static tc_status group_init(plan *p, int g, tc_optimizer *opt)
{
    group *gr = &p->g[g];
    gr->opt = opt;
    TC_TRY(tc__optimizer_info_get(opt, &gr->info));
    if (g == 0) {
        snprintf(gr->prefix, sizeof gr->prefix, "optimizer.");
        snprintf(gr->keys, sizeof gr->keys, "tcuda.optimizer.");
    } else {
        snprintf(gr->prefix, sizeof gr->prefix, "optimizer%d.", g);
        snprintf(gr->keys, sizeof gr->keys, "tcuda.optimizer%d.", g);
    }
    gr->param = malloc((size_t)(gr->info.n ? gr->info.n : 1) * sizeof *gr->param);
    if (!gr->param)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "no memory for the checkpoint's list");
    return TC_OK;
}

/* ck->optimizer: its parameters are params[0..n), in this order. */
static tc_status check_one_optimizer(const tc_checkpoint *ck, group *gr)
{
    TC_CHECK_ARG(gr->info.n == ck->n, "the optimizer has %d parameters, the checkpoint %d",
                 gr->info.n, ck->n);
    for (int i = 0; i < ck->n; i++) {
        TC_CHECK_ARG(same_tensor(ck->params[i], gr->info.params[i]),
                     "the optimizer's parameter %d is not ck->params[%d] (\"%s\"): its "
                     "parameters must be ck->params[0..n) in this order",
                     i, i, ck->names[i]);
        gr->param[i] = i;
    }
    return TC_OK;
}

/* ck->optimizers: each parameter of each is one of params, and in one
 * optimizer only (owner[k]: the optimizer of params[k], or -1). */
static tc_status check_optimizer_list(const tc_checkpoint *ck, const plan *p, int *owner)
{
    for (int k = 0; k < ck->n; k++)
        owner[k] = -1;
    for (int g = 0; g < p->n_g; g++) {
        const group *gr = &p->g[g];
        for (int i = 0; i < gr->info.n; i++) {
            int k = 0;
            while (k < ck->n && !same_tensor(ck->params[k], gr->info.params[i]))
                k++;
            TC_CHECK_ARG(k < ck->n, "ck->optimizers[%d]'s parameter %d is none of ck->params", g,
                         i);
            TC_CHECK_ARG(owner[k] < 0,
                         "ck->params[%d] (\"%s\") is a parameter of ck->optimizers[%d] and of "
                         "ck->optimizers[%d]: each parameter belongs to one optimizer",
                         k, ck->names[k], owner[k], g);
            owner[k] = g;
            gr->param[i] = k;
        }
    }
    return TC_OK;
}

/* The optimizers of ck, into the plan, checked against ck->params. */
static tc_status check_optimizers(const tc_checkpoint *ck, plan *p)
{
    TC_CHECK_ARG(!(ck->optimizer && ck->optimizers && ck->n_optimizers > 0),
                 "ck->optimizer and ck->optimizers are both set: give one optimizer, or a list");
    TC_CHECK_ARG(ck->n_optimizers >= 0, "ck->n_optimizers is %d: it must be >= 0",
                 ck->n_optimizers);
    TC_CHECK_ARG(ck->n_optimizers == 0 || ck->optimizers, "ck->optimizers is NULL");
    for (int g = 0; g < ck->n_optimizers; g++)
        TC_CHECK_ARG(ck->optimizers[g], "ck->optimizers[%d] is NULL", g);
    int n = ck->optimizer ? 1 : ck->n_optimizers;
    if (!n)
        return TC_OK;
    p->g = calloc((size_t)n, sizeof *p->g);
    if (!p->g)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "no memory for the checkpoint's list");
    for (; p->n_g < n; p->n_g++)
        TC_TRY(group_init(p, p->n_g, ck->optimizer ? ck->optimizer : ck->optimizers[p->n_g]));
    if (ck->optimizer)
        return check_one_optimizer(ck, &p->g[0]);
    int *owner = malloc((size_t)(ck->n ? ck->n : 1) * sizeof *owner);
    if (!owner)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "no memory for the checkpoint's list");
    tc_status st = check_optimizer_list(ck, p, owner);
    free(owner);
    return st;
}

/* The checkpoint's own arguments: counts, names, live handles, and the
 * optimizers over params. */
static tc_status check_ck(const tc_checkpoint *ck, plan *p)
{
    TC_CHECK_ARG(ck, "ck is NULL");
    TC_CHECK_ARG(ck->n >= 0, "ck->n is %d: it must be >= 0", ck->n);
    TC_CHECK_ARG(ck->n == 0 || ck->names, "ck->names is NULL");
    TC_CHECK_ARG(ck->n == 0 || ck->params, "ck->params is NULL");
    for (int i = 0; i < ck->n; i++) {
        TC_CHECK_ARG(ck->names[i], "ck->names[%d] is NULL", i);
        char what[48];
        snprintf(what, sizeof what, "tc_tensor ck->params[%d]", i);
        TC_TRY(tc__tensor_check(ck->params[i], what));
    }
    if (ck->scaler) /* a live handle (no cheaper public check) */
        TC_TRY(tc_grad_scaler_get_state(ck->scaler, &(tc_grad_scaler_state){0}));
    return check_optimizers(ck, p);
}

/* The entries: parameters, each optimizer's state, and with rng a 32-byte
 * holder for the CPU's state and one per GPU. */
static tc_status plan_build(const tc_checkpoint *ck, plan *p)
{
    for (int i = 0; i < ck->n; i++)
        TC_TRY(plan_add(p, "", ck->names[i], "", tc__tensor_ref(ck->params[i])));
    for (int g = 0; g < p->n_g; g++) {
        const group *gr = &p->g[g];
        for (int i = 0; i < gr->info.n; i++)
            for (size_t s = 0; s < sizeof STATES / sizeof STATES[0]; s++) {
                if (!keeps(&gr->info, STATES[s].which))
                    continue;
                tc_tensor *t;
                TC_TRY(tc_optimizer_get_state(gr->opt, i, STATES[s].which, &t));
                TC_TRY(plan_add(p, gr->prefix, ck->names[gr->param[i]], STATES[s].suffix, t));
            }
    }
    p->rng_first = p->n;
    int n_rng = ck->rng ? 1 + tc__dev()->device_count() : 0; /* tc_device_count() */
    for (int i = 0; i < n_rng; i++) {
        const int64_t size = TC_RNG_STATE_SIZE;
        tc_tensor *t;
        TC_TRY(tc_tensor_zeros(1, &size, TC_UINT8, (tc_device){TC_CPU, -1}, &t));
        char gpu[24];
        snprintf(gpu, sizeof gpu, "cuda.%d", i - 1);
        TC_TRY(plan_add(p, "rng.", i == 0 ? "cpu" : gpu, "", t));
    }
    return plan_check_unique(p);
}

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

/* The checkpoint's metadata, key and value strings of its own; a failure
 * to grow is kept in st and returned at the end. */
typedef struct meta_item {
    char key[64], value[48];
} meta_item;
typedef struct meta {
    meta_item *item;
    int n, cap;
    tc_status st;
} meta;

static void meta_add(meta *m, const char *prefix, const char *key, const char *fmt, ...)
    TC_PRINTF(4, 5);
static void meta_add(meta *m, const char *prefix, const char *key, const char *fmt, ...)
{
    if (m->n == m->cap && m->st == TC_OK) {
        int cap = m->cap ? 2 * m->cap : 32;
        meta_item *item = realloc(m->item, (size_t)cap * sizeof *item);
        if (item)
            m->item = item, m->cap = cap;
        else
            m->st = tc__fail(TC_ERROR_OUT_OF_MEMORY, "no memory for the checkpoint's metadata");
    }
    if (m->st != TC_OK)
        return;
    meta_item *it = &m->item[m->n++];
    snprintf(it->key, sizeof it->key, "%s%s", prefix, key);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(it->value, sizeof it->value, fmt, ap);
    va_end(ap);
}

static void meta_add_fields(meta *m, const char *prefix, const field *f, const void *base)
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
static tc_status check_user_metadata(const char *const *md, int *n_out)
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

/* The metadata of ck, and the random states into their holders. */
static tc_status gather(const tc_checkpoint *ck, const plan *p, meta *m)
{
    meta_add(m, "", "format", "pt");
    meta_add(m, "", KEY_VERSION, VERSION);
    meta_add(m, "", "tcuda.step", "%" PRId64, ck->step);
    if (p->n_g)
        meta_add(m, "", KEY_OPTIMIZERS, "%d", p->n_g);
    for (int g = 0; g < p->n_g; g++) {
        const group *gr = &p->g[g];
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
    if (!ck->rng)
        return m->st;
    meta_add(m, "", "tcuda.rng.cuda_devices", "%d", p->n - p->rng_first - 1);
    TC_TRY(m->st);
    tc_generator *cpu;
    TC_TRY(tc_default_generator((tc_device){TC_CPU, -1}, &cpu));
    TC_TRY(tc_generator_get_state(cpu, tc_tensor_data_ptr(p->e[p->rng_first].live)));
    for (int i = p->rng_first + 1; i < p->n; i++)
        TC_TRY(tc_get_rng_state(i - p->rng_first - 1, tc_tensor_data_ptr(p->e[i].live)));
    return TC_OK;
}

static tc_status write_file(const char *path, const tc_checkpoint *ck, const plan *p, const meta *m,
                            int n_user)
{
    const char **names = malloc((size_t)(p->n ? p->n : 1) * sizeof *names);
    const tc_tensor **ts = malloc((size_t)(p->n ? p->n : 1) * sizeof *ts);
    const char **md = malloc((size_t)(2 * m->n + n_user + 1) * sizeof *md);
    tc_status st = TC_OK;
    if (!names || !ts || !md)
        st = tc__fail(TC_ERROR_OUT_OF_MEMORY, "no memory for the checkpoint's list");
    for (int i = 0; st == TC_OK && i < p->n; i++)
        names[i] = p->e[i].name, ts[i] = p->e[i].live;
    if (st == TC_OK) {
        for (int i = 0; i < m->n; i++)
            md[2 * i] = m->item[i].key, md[2 * i + 1] = m->item[i].value;
        for (int i = 0; i < n_user; i++)
            md[2 * m->n + i] = ck->metadata[i];
        md[2 * m->n + n_user] = NULL;
        st = tc_safetensors_save(path, names, ts, p->n, md);
    }
    free(names);
    free(ts);
    free(md);
    return st;
}

tc_status tc_checkpoint_save(const char *path, const tc_checkpoint *ck)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(path, "path is NULL");
    TC_CHECK_ARG(path[0], "path is empty");
    plan p = {0};
    meta m = {0};
    int n_user = 0;
    tc_status st = check_ck(ck, &p);
    if (st == TC_OK)
        st = check_user_metadata(ck->metadata, &n_user);
    if (st == TC_OK)
        st = plan_build(ck, &p);
    if (st == TC_OK)
        st = gather(ck, &p, &m);
    if (st == TC_OK)
        st = write_file(path, ck, &p, &m, n_user);
    free(m.item);
    plan_free(&p);
    return st;
}

/* ---- load: the header ---------------------------------------------------------------------- */

/* The file being loaded, for messages. */
typedef struct source {
    const tc_safetensors *f;
    const char *path;
} source;

/* What load sets after the tensors' copies, once all is checked. */
typedef struct loaded {
    int64_t step;
    double *lr; /* each optimizer's */
    tc_grad_scaler_state scaler;
    tc_rng_state *rng; /* the CPU's, then GPU 0, 1, ... */
    int n_rng;
} loaded;

static tc_status meta_get(const source *s, const char *key, const char **out)
{
    TC_TRY(tc_safetensors_metadata(s->f, key, out));
    if (!*out)
        return tc__fail(TC_ERROR_INVALID_ARGUMENT, "%s: has no metadata \"%s\"", s->path, key);
    return TC_OK;
}

static tc_status meta_double(const source *s, const char *key, double *out)
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

static tc_status meta_int64(const source *s, const char *key, int64_t lo, int64_t hi, int64_t *out)
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

static tc_status meta_bool(const source *s, const char *key, bool *out)
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
static tc_status meta_fields(const source *s, const char *prefix, const field *f, void *base)
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
static tc_status check_optimizer(const source *s, const group *gr, double *lr)
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
static tc_status check_optimizers_of_file(const source *s, const plan *p, loaded *l)
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
static void last_message(char *buf, size_t size)
{
    const char *m = tc_last_error();
    const char *colon = strstr(m, ": ");
    if (!strncmp(m, "tc_", 3) && colon && !memchr(m, ' ', (size_t)(colon - m)))
        m = colon + 2;
    snprintf(buf, size, "%s", m);
}

/* The file's scaler state, checked by setting it into a disabled scratch
 * scaler (the range checks are amp.c's own; nothing live changes). */
static tc_status check_scaler(const source *s, tc_grad_scaler *live, loaded *l)
{
    bool enabled;
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
        last_message(why, sizeof why);
        return tc__fail(st, "%s: the scaler's state: %s", s->path, why);
    }
    return TC_OK;
}

/* The header: version, step, and what the checkpoint asks for. */
static tc_status read_header(const source *s, const tc_checkpoint *ck, const plan *p, loaded *l)
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

/* ---- load: the tensors --------------------------------------------------------------------- */

static void shape_string(char *buf, size_t size, int ndim, const int64_t *sizes)
{
    size_t at = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < ndim && at < size; d++)
        at += (size_t)snprintf(buf + at, size - at, "%s%" PRId64, d ? ", " : "", sizes[d]);
    if (at < size)
        snprintf(buf + at, size - at, "]");
}

/* The file's tensor e->name has e->live's dtype and shape. */
static tc_status check_entry(const source *s, const entry *e)
{
    tc_dtype dtype;
    int ndim;
    int64_t sizes[TC_MAX_DIMS];
    if (tc_safetensors_info(s->f, e->name, &dtype, &ndim, sizes) != TC_OK)
        return tc__fail(TC_ERROR_INVALID_ARGUMENT, "%s: has no tensor \"%s\"", s->path, e->name);
    if (dtype != tc_tensor_dtype(e->live))
        return tc__fail(TC_ERROR_DTYPE, "%s: tensor \"%s\" is %s in the file, %s live", s->path,
                        e->name, tc_dtype_string(dtype), tc_dtype_string(tc_tensor_dtype(e->live)));
    int live_ndim = tc_tensor_ndim(e->live);
    const int64_t *live_sizes = tc_tensor_sizes(e->live);
    bool same = ndim == live_ndim;
    for (int d = 0; same && d < ndim; d++)
        same = sizes[d] == live_sizes[d];
    if (!same) {
        char a[256], b[256];
        shape_string(a, sizeof a, ndim, sizes);
        shape_string(b, sizeof b, live_ndim, live_sizes);
        return tc__fail(TC_ERROR_SHAPE, "%s: tensor \"%s\" has shape %s in the file, %s live",
                        s->path, e->name, a, b);
    }
    return TC_OK;
}

/* The random states read, each checked by setting it into a scratch CPU
 * generator (any generator takes any valid state). */
static tc_status take_rng(const source *s, const plan *p, loaded *l)
{
    l->n_rng = p->n - p->rng_first;
    if (!l->n_rng)
        return TC_OK;
    l->rng = malloc((size_t)l->n_rng * sizeof *l->rng);
    if (!l->rng)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "no memory for the random states");
    tc_generator *scratch;
    TC_TRY(tc_generator_create((tc_device){TC_CPU, -1}, 0, &scratch));
    tc_status st = TC_OK;
    for (int i = 0; i < l->n_rng && st == TC_OK; i++) {
        const entry *e = &p->e[p->rng_first + i];
        memcpy(&l->rng[i], tc_tensor_data_ptr(e->read), sizeof l->rng[i]);
        st = tc_generator_set_state(scratch, &l->rng[i]);
        if (st != TC_OK) {
            char why[512];
            last_message(why, sizeof why);
            st = tc__fail(st, "%s: tensor \"%s\": %s", s->path, e->name, why);
        }
    }
    tc_generator_destroy(scratch);
    return st;
}

static tc_status read_tensors(const source *s, plan *p, loaded *l)
{
    for (int i = 0; i < p->n; i++)
        TC_TRY(check_entry(s, &p->e[i]));
    for (int i = 0; i < p->n; i++)
        TC_TRY(tc_safetensors_get_copy(s->f, p->e[i].name, (tc_device){TC_CPU, -1}, &p->e[i].read));
    return take_rng(s, p, l);
}

/* Everything checked: the values go into the live objects. */
static tc_status apply(tc_checkpoint *ck, const plan *p, const loaded *l)
{
    for (int i = 0; i < p->rng_first; i++)
        TC_TRY(tc_tensor_copy_(p->e[i].live, p->e[i].read, false));
    for (int g = 0; g < p->n_g; g++)
        if (!p->g[g].info.lr_tensor)
            TC_TRY(tc_optimizer_set_lr(p->g[g].opt, l->lr[g]));
    if (ck->scaler)
        TC_TRY(tc_grad_scaler_set_state(ck->scaler, &l->scaler));
    if (l->n_rng) {
        tc_generator *cpu;
        TC_TRY(tc_default_generator((tc_device){TC_CPU, -1}, &cpu));
        TC_TRY(tc_generator_set_state(cpu, &l->rng[0]));
        if (l->n_rng > 1)
            TC_TRY(tc_set_rng_state_all(l->rng + 1, l->n_rng - 1));
    }
    ck->step = l->step;
    return TC_OK;
}

tc_status tc_checkpoint_load(const char *path, tc_checkpoint *ck)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(path, "path is NULL");
    TC_CHECK_ARG(path[0], "path is empty");
    plan p = {0};
    tc_status st = check_ck(ck, &p);
    if (st == TC_OK)
        st = plan_build(ck, &p);
    tc_safetensors *f = NULL;
    if (st == TC_OK)
        st = tc_safetensors_open(path, &f);
    source s = {f, path};
    loaded l = {0};
    if (st == TC_OK)
        st = read_header(&s, ck, &p, &l);
    if (st == TC_OK)
        st = read_tensors(&s, &p, &l);
    if (st == TC_OK)
        st = apply(ck, &p, &l);
    if (f)
        tc_safetensors_close(f);
    free(l.rng);
    free(l.lr);
    plan_free(&p);
    return st;
}
