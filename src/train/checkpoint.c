/* Training checkpoints (include/tcuda/checkpoint.h): a whole training state
 * to one safetensors file and back; this file holds the tensors,
 * checkpoint_meta.c the metadata.
 *
 * Both directions first make a plan: one entry per tensor of the file, with
 * its name there and a tensor of the process: the parameters, then each
 * optimizer's state (both live tensors), then the random states (32-byte
 * CPU tensors made here, which hold tc_rng_state blobs). Save fills the
 * random entries and hands the plan and the metadata to
 * tc_safetensors_save. Load checks everything before it changes anything:
 * every metadata value is parsed and checked (checkpoint_meta.c), each
 * random state by setting it into a scratch CPU generator (so the check is
 * the generator's own), every entry's dtype and shape against the file's,
 * and every tensor is read into host memory (where a short file fails).
 * Only then are the values copied into the live tensors and objects.
 *
 * Several optimizers (param groups) are a list: optimizer 0 keeps the
 * names of a file of one ("optimizer.<name>..."), optimizer g >= 1 has
 * "optimizer<g>." in front, so a version-1 reader of one optimizer reads a
 * new file of one, and a parameter loaded into another group than it was
 * saved from is a missing tensor, not a silent mix-up. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "checkpoint_internal.h"
#include "optim/optim_front.h"
#include "runtime/device_ops.h"
#include "tcuda/checkpoint.h"
#include "tcuda/random.h"
#include "tcuda/safetensors.h"

/* ---- the plan ---------------------------------------------------------------------------- */

static void plan_free(tc__train_plan *p)
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
    *p = (tc__train_plan){0};
}

/* Adds the entry prefix+name+suffix for `live`, whose reference it takes
 * (released on failure too). */
static tc_status plan_add(tc__train_plan *p, const char *prefix, const char *name,
                          const char *suffix, tc_tensor *live)
{
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 16;
        tc__train_entry *e = realloc(p->e, (size_t)cap * sizeof *e);
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
    p->e[p->n++] = (tc__train_entry){s, live, NULL};
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
    return strcmp(((const tc__train_entry *)a)->name, ((const tc__train_entry *)b)->name);
}

/* No two entries of the file share a name (two parameters, or a parameter
 * named as a state). */
static tc_status plan_check_unique(const tc__train_plan *p)
{
    if (p->n < 2)
        return TC_OK;
    tc__train_entry *sorted = malloc((size_t)p->n * sizeof *sorted);
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
static tc_status group_init(tc__train_plan *p, int g, tc_optimizer *opt)
{
    tc__train_group *gr = &p->g[g];
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
static tc_status check_one_optimizer(const tc_checkpoint *ck, tc__train_group *gr)
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
static tc_status check_optimizer_list(const tc_checkpoint *ck, const tc__train_plan *p, int *owner)
{
    for (int k = 0; k < ck->n; k++)
        owner[k] = -1;
    for (int g = 0; g < p->n_g; g++) {
        const tc__train_group *gr = &p->g[g];
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
static tc_status check_optimizers(const tc_checkpoint *ck, tc__train_plan *p)
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
static tc_status check_ck(const tc_checkpoint *ck, tc__train_plan *p)
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
static tc_status plan_build(const tc_checkpoint *ck, tc__train_plan *p)
{
    for (int i = 0; i < ck->n; i++)
        TC_TRY(plan_add(p, "", ck->names[i], "", tc__tensor_ref(ck->params[i])));
    for (int g = 0; g < p->n_g; g++) {
        const tc__train_group *gr = &p->g[g];
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

/* ---- save ---------------------------------------------------------------------------------- */

/* The random states into their holders. */
static tc_status gather_rng(const tc__train_plan *p)
{
    if (p->n == p->rng_first)
        return TC_OK;
    tc_generator *cpu;
    TC_TRY(tc_default_generator((tc_device){TC_CPU, -1}, &cpu));
    TC_TRY(tc_generator_get_state(cpu, tc_tensor_data_ptr(p->e[p->rng_first].live)));
    for (int i = p->rng_first + 1; i < p->n; i++)
        TC_TRY(tc_get_rng_state(i - p->rng_first - 1, tc_tensor_data_ptr(p->e[i].live)));
    return TC_OK;
}

static tc_status write_file(const char *path, const tc_checkpoint *ck, const tc__train_plan *p,
                            const tc__train_meta *m, int n_user)
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
    tc__train_plan p = {0};
    tc__train_meta m = {0};
    int n_user = 0;
    tc_status st = check_ck(ck, &p);
    if (st == TC_OK)
        st = tc__train_check_user_metadata(ck->metadata, &n_user);
    if (st == TC_OK)
        st = plan_build(ck, &p);
    if (st == TC_OK)
        st = tc__train_meta_build(ck, &p, &m);
    if (st == TC_OK)
        st = gather_rng(&p);
    if (st == TC_OK)
        st = write_file(path, ck, &p, &m, n_user);
    free(m.item);
    plan_free(&p);
    return st;
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
static tc_status check_entry(const tc__train_source *s, const tc__train_entry *e)
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
static tc_status take_rng(const tc__train_source *s, const tc__train_plan *p, tc__train_loaded *l)
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
        const tc__train_entry *e = &p->e[p->rng_first + i];
        memcpy(&l->rng[i], tc_tensor_data_ptr(e->read), sizeof l->rng[i]);
        st = tc_generator_set_state(scratch, &l->rng[i]);
        if (st != TC_OK) {
            char why[512];
            tc__train_last_message(why, sizeof why);
            st = tc__fail(st, "%s: tensor \"%s\": %s", s->path, e->name, why);
        }
    }
    tc_generator_destroy(scratch);
    return st;
}

static tc_status read_tensors(const tc__train_source *s, tc__train_plan *p, tc__train_loaded *l)
{
    for (int i = 0; i < p->n; i++)
        TC_TRY(check_entry(s, &p->e[i]));
    for (int i = 0; i < p->n; i++)
        TC_TRY(tc_safetensors_get_copy(s->f, p->e[i].name, (tc_device){TC_CPU, -1}, &p->e[i].read));
    return take_rng(s, p, l);
}

/* Everything checked: the values go into the live objects. */
static tc_status apply(tc_checkpoint *ck, const tc__train_plan *p, const tc__train_loaded *l)
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
    tc__train_plan p = {0};
    tc_status st = check_ck(ck, &p);
    if (st == TC_OK)
        st = plan_build(ck, &p);
    tc_safetensors *f = NULL;
    if (st == TC_OK)
        st = tc_safetensors_open(path, &f);
    tc__train_source s = {f, path};
    tc__train_loaded l = {0};
    if (st == TC_OK)
        st = tc__train_read_header(&s, ck, &p, &l);
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
