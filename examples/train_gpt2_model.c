/* GPT-2's parameters, forward and backward for examples/train_gpt2 (the
 * header says what runs in which dtype).
 *
 * A micro-step keeps two lists of tensors: `saved`, what backward reads
 * (each block's input, layer-norm statistics, the inputs of the linears and
 * of attention), released when the micro-step ends, and `tmp`, everything
 * else, released after each block, so peak memory is the saved activations
 * plus one block's temporaries, as with autograd. After the first failing op
 * every later one is skipped and the failure is reported once. */
#include "train_gpt2_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- tensor lists and the failure of a micro-step ------------------------------ */

typedef struct tlist {
    tc_tensor **t;
    int n, cap;
} tlist;

typedef struct run {
    tc_status st;
    char what[200];
    tlist saved, tmp;
} run;

static void fail(run *r, tc_status st, const char *what)
{
    if (r->st != TC_OK)
        return;
    r->st = st;
    snprintf(r->what, sizeof r->what, "%s: %s", what, tc_last_error());
}

/* Keeps t (a new reference) in list l; NULL does nothing. */
static void keep(run *r, tlist *l, tc_tensor *t)
{
    if (!t)
        return;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 256;
        tc_tensor **grown = realloc(l->t, (size_t)cap * sizeof *grown);
        if (!grown) {
            tc_tensor_release(t);
            fail(r, TC_ERROR_OUT_OF_MEMORY, "the list of activations");
            return;
        }
        l->t = grown;
        l->cap = cap;
    }
    l->t[l->n++] = t;
}

static void list_release(tlist *l)
{
    while (l->n > 0)
        tc_tensor_release(l->t[--l->n]);
}

/* ok(r, call): whether the op ran and succeeded (skipped after a failure). */
static bool ok_(run *r, tc_status st, const char *what)
{
    if (st != TC_OK)
        fail(r, st, what);
    return st == TC_OK;
}
#define OK(r, call) ((r)->st == TC_OK && ok_((r), (call), #call))
/* DO(r, call): an op whose result is only its status. */
#define DO(r, call) ((void)OK(r, call))
/* LET(r, list, y, tc_x(..., &y)): declares y, runs the op, keeps y in list. */
#define LET(r, l, var, call)                                                                       \
    tc_tensor *var = NULL;                                                                         \
    if (OK(r, call))                                                                               \
    keep((r), &(r)->l, var)

/* ---- parameters -------------------------------------------------------------------- */

static const char *const block_names[GPT2_PER_LAYER] = {
    "ln_1.weight",        "ln_1.bias",        "attn.c_attn.weight", "attn.c_attn.bias",
    "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight",        "ln_2.bias",
    "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};

static int block_part(const gpt2 *m, int i) /* k of block l, or -1 */
{
    return i >= 2 && i < GPT2_LNF_W(m->cfg) ? (i - 2) % GPT2_PER_LAYER : -1;
}

void gpt2_param_name(const gpt2 *m, int i, char *buf, int size)
{
    int k = block_part(m, i);
    if (i == GPT2_WTE)
        snprintf(buf, (size_t)size, "wte.weight");
    else if (i == GPT2_WPE)
        snprintf(buf, (size_t)size, "wpe.weight");
    else if (k >= 0)
        snprintf(buf, (size_t)size, "h.%d.%s", (i - 2) / GPT2_PER_LAYER, block_names[k]);
    else
        snprintf(buf, (size_t)size, i == GPT2_LNF_W(m->cfg) ? "ln_f.weight" : "ln_f.bias");
}

bool gpt2_param_is_conv1d(const gpt2 *m, int i)
{
    int k = block_part(m, i);
    return k == GPT2_ATTN_W || k == GPT2_PROJ_W || k == GPT2_FC_W || k == GPT2_FCPROJ_W;
}

bool gpt2_param_decays(const gpt2 *m, int i)
{
    return i == GPT2_WTE || i == GPT2_WPE || gpt2_param_is_conv1d(m, i);
}

/* Whether parameter i gets a bfloat16 copy: the linears' weights and biases
 * and the tied classifier (wte), which autocast casts for addmm/linear. */
static bool has_low_copy(const gpt2 *m, int i)
{
    int k = block_part(m, i);
    return i == GPT2_WTE ||
           (k >= 0 && k != GPT2_LN1_W && k != GPT2_LN1_B && k != GPT2_LN2_W && k != GPT2_LN2_B);
}

/* The in-memory shape of parameter i ([out, in] for linears). */
static int param_shape(const gpt2 *m, int i, int64_t *s)
{
    int64_t C = m->cfg.C;
    if (i == GPT2_WTE)
        return s[0] = m->cfg.V, s[1] = C, 2;
    if (i == GPT2_WPE)
        return s[0] = m->cfg.maxT, s[1] = C, 2;
    switch (block_part(m, i)) {
    case GPT2_ATTN_W: return s[0] = 3 * C, s[1] = C, 2;
    case GPT2_ATTN_B: return s[0] = 3 * C, 1;
    case GPT2_PROJ_W: return s[0] = C, s[1] = C, 2;
    case GPT2_FC_W: return s[0] = 4 * C, s[1] = C, 2;
    case GPT2_FC_B: return s[0] = 4 * C, 1;
    case GPT2_FCPROJ_W: return s[0] = C, s[1] = 4 * C, 2;
    default: return s[0] = C, 1; /* layer norms, attn/mlp c_proj biases, ln_f */
    }
}

struct gpt2_layer_acts {
    tc_tensor *x, *mean1, *rstd1, *h1, *q, *k, *v, *y, *lse, *ym, *x2, *mean2, *rstd2, *h2, *f, *g;
};

static tc_status check_config(const gpt2_config *c, char *err, int size)
{
    if (c->n_layer < 1 || c->n_head < 1 || c->C < 1 || c->V < 1 || c->maxT < 1 ||
        c->C % c->n_head) {
        snprintf(err, (size_t)size,
                 "a model of %d layers, %d heads, width %lld, vocabulary %lld and %lld "
                 "positions is not one (all positive, width a multiple of the heads)",
                 c->n_layer, c->n_head, (long long)c->C, (long long)c->V, (long long)c->maxT);
        return TC_ERROR_INVALID_ARGUMENT;
    }
    return TC_OK;
}

/* The arrays, the bfloat16 copies and the positions; params already set. */
static tc_status finish_setup(gpt2 *m, char *err, int size)
{
    m->low = calloc((size_t)m->n, sizeof *m->low);
    m->grads = calloc((size_t)m->n, sizeof *m->grads);
    m->acts = calloc((size_t)m->cfg.n_layer, sizeof *m->acts);
    if (!m->low || !m->grads || !m->acts) {
        snprintf(err, (size_t)size, "out of host memory");
        return TC_ERROR_OUT_OF_MEMORY;
    }
    tc_status st = tc_tensor_arange(0, (double)m->cfg.maxT, 1, TC_INT64, m->dev, &m->pos);
    for (int i = 0; st == TC_OK && i < m->n; i++) {
        int64_t s[2];
        int nd = param_shape(m, i, s);
        if (m->dtype != TC_FLOAT32 && has_low_copy(m, i))
            st = tc_tensor_empty(nd, s, m->dtype, m->dev, &m->low[i]);
    }
    if (st == TC_OK)
        st = gpt2_cast_weights(m);
    if (st != TC_OK)
        snprintf(err, (size_t)size, "setting up the model: %s", tc_last_error());
    return st;
}

static tc_status alloc_params(gpt2 *m, const gpt2_config *cfg, tc_device dev, tc_dtype dtype)
{
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    m->dev = dev;
    m->dtype = dtype;
    m->n = 4 + GPT2_PER_LAYER * cfg->n_layer;
    m->params = calloc((size_t)m->n, sizeof *m->params);
    return m->params ? TC_OK : TC_ERROR_OUT_OF_MEMORY;
}

tc_status gpt2_create(const gpt2_config *cfg, tc_device dev, tc_dtype dtype, uint64_t seed, gpt2 *m,
                      char *err, int size)
{
    tc_status st = check_config(cfg, err, size);
    if (st != TC_OK)
        return st;
    if (alloc_params(m, cfg, dev, dtype) != TC_OK) {
        snprintf(err, (size_t)size, "out of host memory");
        return TC_ERROR_OUT_OF_MEMORY;
    }
    /* drawn on the CPU, so every device starts from the same weights */
    tc_generator *g = NULL;
    st = tc_generator_create((tc_device){TC_CPU, -1}, seed, &g);
    double proj_std = 0.02 / sqrt(2.0 * cfg->n_layer);
    for (int i = 0; st == TC_OK && i < m->n; i++) {
        int64_t s[2];
        int nd = param_shape(m, i, s), k = block_part(m, i);
        tc_tensor *cpu = NULL;
        bool ln_w = k == GPT2_LN1_W || k == GPT2_LN2_W || i == GPT2_LNF_W(m->cfg);
        st = tc_tensor_full(nd, s, ln_w ? 1.0 : 0.0, TC_FLOAT32, (tc_device){TC_CPU, -1}, &cpu);
        if (st == TC_OK && nd == 2)
            st = tc_tensor_normal_(cpu, 0, k == GPT2_PROJ_W || k == GPT2_FCPROJ_W ? proj_std : 0.02,
                                   g);
        if (st == TC_OK)
            st = tc_tensor_to(cpu, dev, TC_FLOAT32, false, &m->params[i]);
        tc_tensor_release(cpu);
    }
    if (g)
        tc_generator_destroy(g);
    if (st != TC_OK) {
        snprintf(err, (size_t)size, "initializing the model: %s", tc_last_error());
        return st;
    }
    return finish_setup(m, err, size);
}

/* ---- load and save ------------------------------------------------------------------ */

/* Reads parameter i from f (Hugging Face's layout), checking its shape. */
static tc_status load_param(tc_safetensors *f, const char *prefix, gpt2 *m, int i, char *err,
                            int size)
{
    char name[96], full[128];
    gpt2_param_name(m, i, name, sizeof name);
    snprintf(full, sizeof full, "%s%s", prefix, name);
    int64_t want[2], got[TC_MAX_DIMS];
    int nd = param_shape(m, i, want), got_nd = 0;
    bool conv = gpt2_param_is_conv1d(m, i);
    if (conv) { /* stored [in, out] */
        int64_t t = want[0];
        want[0] = want[1], want[1] = t;
    }
    if (tc_safetensors_info(f, full, NULL, &got_nd, got) != TC_OK) {
        snprintf(err, (size_t)size, "the checkpoint has no tensor \"%s\"", full);
        return TC_ERROR_INVALID_ARGUMENT;
    }
    if (got_nd != nd || got[0] != want[0] || (nd == 2 && got[1] != want[1])) {
        snprintf(err, (size_t)size,
                 "\"%s\" is %d-d [%lld, %lld], the model wants %d-d [%lld%s%lld]", full, got_nd,
                 (long long)got[0], got_nd > 1 ? (long long)got[1] : 0LL, nd, (long long)want[0],
                 nd == 2 ? ", " : "", nd == 2 ? (long long)want[1] : 0LL);
        return TC_ERROR_SHAPE;
    }
    tc_tensor *t = NULL, *u = NULL, *c = NULL;
    tc_status st = tc_safetensors_get_copy(f, full, (tc_device){TC_CPU, -1}, &t);
    if (st == TC_OK && conv)
        st = tc_tensor_transpose(t, 0, 1, &u);
    if (st == TC_OK)
        st = tc_tensor_contiguous(u ? u : t, &c);
    if (st == TC_OK)
        st = tc_tensor_to(c, m->dev, TC_FLOAT32, false, &m->params[i]);
    if (st != TC_OK)
        snprintf(err, (size_t)size, "reading \"%s\": %s", full, tc_last_error());
    tc_tensor_release(t);
    tc_tensor_release(u);
    tc_tensor_release(c);
    return st;
}

tc_status gpt2_load(const char *path, int n_head_default, tc_device dev, tc_dtype dtype, gpt2 *m,
                    char *err, int size)
{
    tc_safetensors *f;
    tc_status st = tc_safetensors_open(path, &f);
    if (st != TC_OK) {
        snprintf(err, (size_t)size, "%s", tc_last_error());
        return st;
    }
    const char *prefix = "";
    int64_t s[TC_MAX_DIMS];
    int nd = 0;
    if (tc_safetensors_info(f, "wte.weight", NULL, &nd, s) != TC_OK)
        prefix = "transformer.";
    char name[128];
    gpt2_config cfg = {0};
    snprintf(name, sizeof name, "%swte.weight", prefix);
    if (tc_safetensors_info(f, name, NULL, &nd, s) == TC_OK && nd == 2)
        cfg.V = s[0], cfg.C = s[1];
    snprintf(name, sizeof name, "%swpe.weight", prefix);
    if (tc_safetensors_info(f, name, NULL, &nd, s) == TC_OK && nd == 2)
        cfg.maxT = s[0];
    for (;;) {
        snprintf(name, sizeof name, "%sh.%d.ln_1.weight", prefix, cfg.n_layer);
        if (tc_safetensors_info(f, name, NULL, NULL, NULL) != TC_OK)
            break;
        cfg.n_layer++;
    }
    const char *nh = NULL;
    (void)tc_safetensors_metadata(f, "n_head", &nh);
    cfg.n_head = nh ? atoi(nh) : n_head_default;
    st = check_config(&cfg, err, size);
    if (st != TC_OK) {
        snprintf(err, (size_t)size,
                 "%s is not a GPT-2 checkpoint (2-d wte.weight and wpe.weight, h.N.* blocks, "
                 "a width that splits into %d heads)",
                 path, cfg.n_head);
    } else if (alloc_params(m, &cfg, dev, dtype) != TC_OK) {
        snprintf(err, (size_t)size, "out of host memory");
        st = TC_ERROR_OUT_OF_MEMORY;
    }
    for (int i = 0; st == TC_OK && i < m->n; i++)
        st = load_param(f, prefix, m, i, err, size);
    tc_safetensors_close(f);
    return st == TC_OK ? finish_setup(m, err, size) : st;
}

tc_status gpt2_save(const gpt2 *m, const char *path)
{
    char(*names)[96] = calloc((size_t)m->n, sizeof *names);
    const char **np = calloc((size_t)m->n, sizeof *np);
    tc_tensor **ts = calloc((size_t)m->n, sizeof *ts);
    tc_status st = names && np && ts ? TC_OK : TC_ERROR_OUT_OF_MEMORY;
    for (int i = 0; st == TC_OK && i < m->n; i++) {
        gpt2_param_name(m, i, names[i], sizeof names[i]);
        np[i] = names[i];
        if (gpt2_param_is_conv1d(m, i)) /* back to Conv1D's [in, out] */
            st = tc_tensor_transpose(m->params[i], 0, 1, &ts[i]);
        else
            st = tc_tensor_retain(ts[i] = m->params[i]);
    }
    char heads[16];
    snprintf(heads, sizeof heads, "%d", m->cfg.n_head);
    const char *meta[] = {"format", "pt", "n_head", heads, NULL};
    if (st == TC_OK)
        st = tc_safetensors_save(path, np, (const tc_tensor *const *)ts, m->n, meta);
    for (int i = 0; ts && i < m->n; i++)
        tc_tensor_release(ts[i]);
    free(names);
    free(np);
    free(ts);
    return st;
}

void gpt2_free(gpt2 *m)
{
    for (int i = 0; i < m->n; i++) {
        if (m->params)
            tc_tensor_release(m->params[i]);
        if (m->low)
            tc_tensor_release(m->low[i]);
    }
    tc_tensor_release(m->pos);
    free(m->params);
    free(m->low);
    free(m->grads);
    free(m->acts);
    memset(m, 0, sizeof *m);
}

tc_status gpt2_cast_weights(gpt2 *m)
{
    for (int i = 0; i < m->n; i++)
        if (m->low[i]) {
            tc_status st = tc_tensor_copy_(m->low[i], m->params[i], false);
            if (st != TC_OK)
                return st;
        }
    return TC_OK;
}

/* ---- forward ---------------------------------------------------------------------- */

/* The weight a forward op uses: the bfloat16 copy where there is one. */
static const tc_tensor *W(const gpt2 *m, int i) { return m->low[i] ? m->low[i] : m->params[i]; }

/* t as dtype (a new reference to t itself when it has it), kept in l. */
static tc_tensor *cast(run *r, tlist *l, const tc_tensor *t, tc_dtype dt, tc_device dev)
{
    tc_tensor *out = NULL;
    if (OK(r, tc_tensor_to(t, dev, dt, false, &out)))
        keep(r, l, out);
    return out;
}

/* x + res (res NULL: x alone) and its layer_norm with weight wi and bias
 * wi + 1, in one pass (tc_nn_add_layer_norm): the normalized rows in the
 * model's dtype (under autocast the float32 norm, then the next linear's
 * cast) into *h, mean and rstd into *mean and *rstd, all kept in saved;
 * returns the sum (kept in saved too), or x itself without res. */
static tc_tensor *add_norm(run *r, const gpt2 *m, tc_tensor *x, const tc_tensor *res, int wi,
                           tc_tensor **h, tc_tensor **mean, tc_tensor **rstd)
{
    tc_tensor *sum = NULL, *out = NULL, *mu = NULL, *rs = NULL;
    if (OK(r, tc_nn_add_layer_norm(x, res, 1, &m->cfg.C, m->params[wi], m->params[wi + 1], 1e-5,
                                   m->dtype, res ? &sum : NULL, &out, &mu, &rs))) {
        if (sum)
            keep(r, &r->saved, sum);
        keep(r, &r->saved, out);
        keep(r, &r->saved, mu);
        keep(r, &r->saved, rs);
    }
    *h = out, *mean = mu, *rstd = rs;
    return res ? sum : x;
}

/* The layer norm after block l: the next block's ln_1, or ln_f after the last. */
static int next_norm(const gpt2 *m, int l)
{
    return l + 1 < m->cfg.n_layer ? GPT2_LAYER(l + 1, GPT2_LN1_W) : GPT2_LNF_W(m->cfg);
}

/* Block l on x [B, T, C] (float32) with a->h1, a->mean1 and a->rstd1 (its
 * ln_1) set: the next residual stream, kept in saved, with the norm after
 * the block (the next ln_1, or ln_f) into *h, *mean and *rstd. */
static tc_tensor *block_forward(run *r, gpt2 *m, int l, tc_tensor *x, tc_tensor **h,
                                tc_tensor **mean, tc_tensor **rstd)
{
    gpt2_layer_acts *a = &m->acts[l];
    int64_t B = tc_tensor_size(x, 0), T = tc_tensor_size(x, 1), C = m->cfg.C;
    int64_t heads[4] = {B, T, m->cfg.n_head, C / m->cfg.n_head}, merged[3] = {B, T, C};
    a->x = x;
    /* attention: x + c_proj(attention(split(c_attn(ln_1(x))))) */
    LET(r, saved, qkv,
        tc_nn_linear(a->h1, W(m, GPT2_LAYER(l, GPT2_ATTN_W)), W(m, GPT2_LAYER(l, GPT2_ATTN_B)),
                     &qkv));
    tc_tensor **qkv_out[3] = {&a->q, &a->k, &a->v};
    for (int i = 0; i < 3; i++) {
        LET(r, tmp, part, tc_tensor_narrow(qkv, 2, i * C, C, &part));
        LET(r, tmp, split, tc_tensor_view(part, 4, heads, &split));
        LET(r, saved, t, tc_tensor_transpose(split, 1, 2, &t)); /* [B, H, T, hd] */
        *qkv_out[i] = t;
    }
    /* the training forward: it also keeps each row's log-sum-exp, from which
     * the fused backward recomputes the probabilities without a forward pass */
    tc_tensor *y = NULL, *lse = NULL;
    if (OK(r, tc_nn_scaled_dot_product_attention_lse(a->q, a->k, a->v, true, NULL, &y, &lse))) {
        keep(r, &r->saved, y);
        keep(r, &r->saved, lse);
    }
    a->y = y, a->lse = lse;
    LET(r, tmp, yt, tc_tensor_transpose(y, 1, 2, &yt));
    LET(r, saved, ym, tc_tensor_reshape(yt, 3, merged, &ym));
    a->ym = ym;
    LET(r, tmp, proj,
        tc_nn_linear(ym, W(m, GPT2_LAYER(l, GPT2_PROJ_W)), W(m, GPT2_LAYER(l, GPT2_PROJ_B)),
                     &proj));
    /* x2 = x + proj (float32 + bfloat16: float32), then ln_2(x2), one pass */
    a->x2 = add_norm(r, m, x, proj, GPT2_LAYER(l, GPT2_LN2_W), &a->h2, &a->mean2, &a->rstd2);
    /* MLP: x2 + c_proj(gelu(c_fc(ln_2(x2)))) */
    tc_tensor *f = NULL, *g = NULL; /* c_fc's output and its gelu, one GEMM on a GPU */
    if (OK(r,
           tc_nn_linear_gelu(a->h2, W(m, GPT2_LAYER(l, GPT2_FC_W)), W(m, GPT2_LAYER(l, GPT2_FC_B)),
                             TC_GELU_APPROXIMATE_TANH, &g, &f))) {
        keep(r, &r->saved, f);
        keep(r, &r->saved, g);
    }
    a->f = f, a->g = g;
    LET(r, tmp, down,
        tc_nn_linear(g, W(m, GPT2_LAYER(l, GPT2_FCPROJ_W)), W(m, GPT2_LAYER(l, GPT2_FCPROJ_B)),
                     &down));
    tc_tensor *x3 = add_norm(r, m, a->x2, down, next_norm(m, l), h, mean, rstd);
    list_release(&r->tmp);
    return x3;
}

/* ---- backward ---------------------------------------------------------------------- */

static void ready(run *r, gpt2 *m, int i)
{
    if (m->ready && r->st == TC_OK)
        ok_(r, m->ready(i, m->ready_ctx), "marking a gradient ready");
}

/* g += d, d a new gradient of the forward's dtype (added in float32). */
static void accumulate(run *r, tc_tensor *g, tc_tensor *d)
{
    if (d)
        DO(r, tc_tensor_add_(g, d));
}

/* The backward of out = linear(in, W(wi), W(bi)) (bi -1: no bias): the
 * weight and bias gradients added into m->grads, *dx (when not NULL) the
 * input's gradient, kept in tmp. */
static void linear_backward(run *r, gpt2 *m, const tc_tensor *dout, const tc_tensor *in, int wi,
                            int bi, tc_tensor **dx, bool mark)
{
    tc_tensor *gb = bi >= 0 ? m->grads[bi] : NULL;
    if (m->dtype == TC_FLOAT32) { /* straight into the gradients: one GEMM with beta = 1 */
        DO(r, tc_nn_linear_backward_into(dout, in, W(m, wi), true, NULL, m->grads[wi], gb));
    } else { /* bfloat16 gradients of the copies, added into the float32 ones */
        tc_tensor *dw = NULL, *db = NULL;
        unsigned want = TC_NN_LINEAR_GRAD_WEIGHT | (bi >= 0 ? TC_NN_LINEAR_GRAD_BIAS : 0);
        if (OK(r, tc_nn_linear_backward(dout, in, W(m, wi), want, NULL, &dw, &db))) {
            keep(r, &r->tmp, dw);
            keep(r, &r->tmp, db);
            accumulate(r, m->grads[wi], dw);
            if (bi >= 0)
                accumulate(r, gb, db);
        }
    }
    if (mark) {
        ready(r, m, wi);
        if (bi >= 0)
            ready(r, m, bi);
    }
    if (dx) {
        *dx = NULL;
        if (OK(r, tc_nn_linear_backward(dout, in, W(m, wi), TC_NN_LINEAR_GRAD_X, dx, NULL, NULL)))
            keep(r, &r->tmp, *dx);
    }
}

/* The backward of out = layer_norm(x) with weight wi, bias wi + 1: their
 * gradients and x's added in place, into m->grads and dres. dout is
 * float32, or the 16-bit gradient of the layer after it (layer norm runs in
 * float32 under autocast: the kernel reads it as float32, as the cast back
 * would give it). dres_low (NULL in float32) gets the new dres in the
 * model's 16-bit dtype, the gradient the linear before reads. */
static void layer_norm_backward(run *r, gpt2 *m, const tc_tensor *dout, const tc_tensor *x,
                                const tc_tensor *mean, const tc_tensor *rstd, int wi,
                                tc_tensor *dres, tc_tensor *dres_low)
{
    DO(r, tc_nn_layer_norm_backward_into(dout, x, 1, &m->cfg.C, mean, rstd, m->params[wi], true,
                                         dres, m->grads[wi], m->grads[wi + 1], dres_low));
    ready(r, m, wi);
    ready(r, m, wi + 1);
}

/* Block l's backward: dres (float32 [B, T, C]) is the gradient of the
 * block's output and becomes that of its input, in place; low (NULL in
 * float32) holds dres in the model's dtype, before and after. */
static void block_backward(run *r, gpt2 *m, int l, tc_tensor *dres, tc_tensor *low)
{
    gpt2_layer_acts *a = &m->acts[l];
    int64_t B = tc_tensor_size(a->x, 0), T = tc_tensor_size(a->x, 1), C = m->cfg.C;
    int64_t heads[4] = {B, T, m->cfg.n_head, C / m->cfg.n_head}, qkv_sizes[3] = {B, T, 3 * C};
    tc_tensor *dh2 = NULL, *dym = NULL, *dh1 = NULL;
    /* x3 = x2 + c_proj(gelu(c_fc(ln_2(x2)))): x2's gradient is dres plus the MLP's */
    tc_tensor *ddown = low ? low : dres;
    linear_backward(r, m, ddown, a->g, GPT2_LAYER(l, GPT2_FCPROJ_W), GPT2_LAYER(l, GPT2_FCPROJ_B),
                    NULL, true);
    /* through c_proj's input and the gelu to c_fc's output; c_fc's bias
     * gradient comes with its weight gradient (one GEMM on a GPU) */
    tc_tensor *df = NULL;
    if (OK(r, tc_nn_linear_backward_gelu(ddown, W(m, GPT2_LAYER(l, GPT2_FCPROJ_W)), a->f,
                                         TC_GELU_APPROXIMATE_TANH, &df, NULL)))
        keep(r, &r->tmp, df);
    linear_backward(r, m, df, a->h2, GPT2_LAYER(l, GPT2_FC_W), GPT2_LAYER(l, GPT2_FC_B), &dh2,
                    true);
    layer_norm_backward(r, m, dh2, a->x2, a->mean2, a->rstd2, GPT2_LAYER(l, GPT2_LN2_W), dres, low);
    /* x2 = x + c_proj(attention(...)): x's gradient is dres plus attention's */
    tc_tensor *dproj = low ? low : dres;
    linear_backward(r, m, dproj, a->ym, GPT2_LAYER(l, GPT2_PROJ_W), GPT2_LAYER(l, GPT2_PROJ_B),
                    &dym, true);
    LET(r, tmp, dys, tc_tensor_view(dym, 4, heads, &dys));
    LET(r, tmp, dy, tc_tensor_transpose(dys, 1, 2, &dy)); /* [B, H, T, hd] */
    /* the heads' gradients straight into one [B, T, 3C] tensor, through
     * the split's views */
    LET(r, tmp, dqkv, tc_tensor_empty(3, qkv_sizes, m->dtype, m->dev, &dqkv));
    tc_tensor *dparts[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++) {
        LET(r, tmp, part, tc_tensor_narrow(dqkv, 2, i * C, C, &part));
        LET(r, tmp, split, tc_tensor_view(part, 4, heads, &split));
        LET(r, tmp, t, tc_tensor_transpose(split, 1, 2, &t));
        dparts[i] = t;
    }
    DO(r, tc_nn_scaled_dot_product_attention_backward_lse_into(
              dy, a->q, a->k, a->v, a->y, a->lse, true, NULL, dparts[0], dparts[1], dparts[2]));
    linear_backward(r, m, dqkv, a->h1, GPT2_LAYER(l, GPT2_ATTN_W), GPT2_LAYER(l, GPT2_ATTN_B), &dh1,
                    true);
    layer_norm_backward(r, m, dh1, a->x, a->mean1, a->rstd1, GPT2_LAYER(l, GPT2_LN1_W), dres, low);
    list_release(&r->tmp);
}

/* ---- the micro-step ------------------------------------------------------------------ */

/* The loss (and the classifier's and ln_f's backward) from the last block's
 * output xL; the residual gradient into *dres and, under autocast, its
 * 16-bit copy into *low (both owned by the caller). */
static void head(run *r, gpt2 *m, tc_tensor *xL, tc_tensor *hfc, const tc_tensor *meanf,
                 const tc_tensor *rstdf, const tc_tensor *y, double grad_scale, bool backward,
                 tc_tensor *loss_acc, tc_tensor **dres, tc_tensor **low)
{
    int64_t B = tc_tensor_size(xL, 0), T = tc_tensor_size(xL, 1), V = m->cfg.V;
    int64_t rows[2] = {B * T, V}, flat = B * T, bt_v[3] = {B, T, V};
    int lnf = GPT2_LNF_W(m->cfg);
    LET(r, tmp, logits, tc_nn_linear(hfc, W(m, GPT2_WTE), NULL, &logits)); /* tied to wte */
    LET(r, tmp, y1, tc_tensor_reshape(y, 1, &flat, &y1));
    tc_tensor *loss = NULL, *dl = NULL;
    if (!backward) {
        tc_tensor *logits32 = cast(r, &r->tmp, logits, TC_FLOAT32, m->dev); /* logits.float() */
        LET(r, tmp, l2, tc_tensor_view(logits32, 2, rows, &l2));
        if (OK(r, tc_nn_cross_entropy(l2, y1, -100, TC_REDUCTION_MEAN, &loss)))
            keep(r, &r->tmp, loss);
        DO(r, tc_tensor_add_(loss_acc, loss));
        return;
    }
    /* cross_entropy(logits.float()) and its gradient cast back, in one pass
     * over the 16-bit logits (the same values, without the float32 copies) */
    LET(r, tmp, l2, tc_tensor_view(logits, 2, rows, &l2));
    bool mixed = m->dtype != TC_FLOAT32;
    if (r->st == TC_OK &&
        ok_(r,
            (mixed ? tc_nn_cross_entropy_fused_autocast : tc_nn_cross_entropy_fused)(
                l2, y1, -100, TC_REDUCTION_MEAN, grad_scale, &loss, &dl),
            mixed ? "tc_nn_cross_entropy_fused_autocast" : "tc_nn_cross_entropy_fused")) {
        keep(r, &r->tmp, loss);
        keep(r, &r->tmp, dl);
    }
    DO(r, tc_tensor_add_(loss_acc, loss));
    LET(r, tmp, dlc, tc_tensor_view(dl, 3, bt_v, &dlc));
    tc_tensor *dhfc = NULL;
    /* wte's gradient is final only after the embedding's backward */
    linear_backward(r, m, dlc, hfc, GPT2_WTE, -1, &dhfc, false);
    /* the residual stream's gradient starts as ln_f's dx, added into zeros */
    tc_tensor *dx = NULL, *dl16 = NULL;
    if (OK(r, tc_tensor_zeros_like(xL, &dx)))
        *dres = dx; /* the caller's now */
    if (m->dtype != TC_FLOAT32 && dx &&
        OK(r, tc_tensor_empty(3, tc_tensor_sizes(xL), m->dtype, m->dev, &dl16)))
        *low = dl16;
    if (r->st == TC_OK)
        layer_norm_backward(r, m, dhfc, xL, meanf, rstdf, lnf, dx, dl16);
    list_release(&r->tmp);
}

/* The embeddings' backward: wte's rows and wpe's first T rows. */
static void embedding_backward(run *r, gpt2 *m, const tc_tensor *x, tc_tensor *dres)
{
    int64_t T = tc_tensor_size(x, 1);
    DO(r, tc_nn_embedding_backward_(m->grads[GPT2_WTE], dres, x, -1, false));
    ready(r, m, GPT2_WTE);
    /* pe [T, C] was broadcast over the batch: its gradient is dres summed over it */
    LET(r, tmp, dpe, tc_tensor_sum(dres, 0, false, &dpe));
    LET(r, tmp, rows, tc_tensor_narrow(m->grads[GPT2_WPE], 0, 0, T, &rows));
    DO(r, tc_tensor_add_(rows, dpe));
    ready(r, m, GPT2_WPE);
    list_release(&r->tmp);
}

tc_status gpt2_forward_backward(gpt2 *m, const tc_tensor *x, const tc_tensor *y, double grad_scale,
                                bool backward, tc_tensor *loss_acc)
{
    run r = {.st = TC_OK};
    int64_t T = tc_tensor_size(x, 1);
    if (T > m->cfg.maxT) {
        fail(&r, TC_ERROR_SHAPE, "the sequence");
        snprintf(r.what, sizeof r.what, "a sequence of %lld tokens, the model has %lld positions",
                 (long long)T, (long long)m->cfg.maxT);
    }
    LET(&r, tmp, positions, tc_tensor_narrow(m->pos, 0, 0, T, &positions));
    LET(&r, tmp, te, tc_nn_embedding(m->params[GPT2_WTE], x, &te));         /* [B, T, C] */
    LET(&r, tmp, pe, tc_nn_embedding(m->params[GPT2_WPE], positions, &pe)); /* [T, C] */
    LET(&r, saved, x0, tc_tensor_add(te, pe, &x0));
    list_release(&r.tmp);
    /* each block's ln_1 comes from the block before it (the residual add and
     * the norm in one pass), the first from x0, ln_f from the last block */
    tc_tensor *xl = x0, *h = NULL, *mean = NULL, *rstd = NULL;
    if (r.st == TC_OK)
        add_norm(&r, m, x0, NULL, m->cfg.n_layer ? GPT2_LAYER(0, GPT2_LN1_W) : GPT2_LNF_W(m->cfg),
                 &h, &mean, &rstd);
    for (int l = 0; l < m->cfg.n_layer && r.st == TC_OK; l++) {
        gpt2_layer_acts *a = &m->acts[l];
        a->h1 = h, a->mean1 = mean, a->rstd1 = rstd;
        xl = block_forward(&r, m, l, xl, &h, &mean, &rstd);
    }
    tc_tensor *dres = NULL, *low = NULL;
    if (r.st == TC_OK)
        head(&r, m, xl, h, mean, rstd, y, grad_scale, backward, loss_acc, &dres, &low);
    if (backward && r.st == TC_OK) {
        for (int l = m->cfg.n_layer - 1; l >= 0 && r.st == TC_OK; l--)
            block_backward(&r, m, l, dres, low);
        if (r.st == TC_OK)
            embedding_backward(&r, m, x, dres);
    }
    tc_tensor_release(dres);
    tc_tensor_release(low);
    list_release(&r.tmp);
    list_release(&r.saved);
    free(r.tmp.t);
    free(r.saved.t);
    if (r.st != TC_OK)
        fprintf(stderr, "train_gpt2: %s\n", r.what);
    return r.st;
}
