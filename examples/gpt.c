/* A GPT-2 decoder on tcuda: prefill and greedy generation with a KV cache,
 * on the CPU or a GPU, optionally with the decode step replayed as a graph.
 *
 *   gpt MODEL.safetensors [--device cpu|cuda] [--dtype float32|bfloat16]
 *       [--graph] [--tf32] [--prompt 464,3290,318] [--new N]
 *       [--check REF.safetensors] [--bench] [--roofline]
 *
 * The weights are a GPT-2 checkpoint in safetensors with Hugging Face's names
 * ("wte.weight", "h.0.attn.c_attn.weight", ..., with or without a
 * "transformer." prefix); layers, width and vocabulary come from the tensors,
 * the head count from the metadata key "n_head" (else width / 64).
 * --check reads "prompt", "logits" and "generated" from a reference file
 * (bench/torch/gpt_torch.py writes one from PyTorch) and exits 1 unless the
 * prompt's logits match within 1e-4 of their largest magnitude and the
 * greedy tokens are the same. --bench prints prefill (batch 8 x 512) and
 * decode (batch 1 and 8, 256 new tokens) tokens per second. --tf32 lets float32
 * matrix products use TF32 (tc_set_float32_matmul_precision("high"), as
 * torch.set_float32_matmul_precision("high")); its rows are named _tf32.
 * --roofline (cuda) runs one eager decode step at batch 1 and 8 after a
 * 512-token prompt behind queued GPU work, with a timing event before each
 * op, and prints each op's time and bandwidth beside the copy floor (the
 * bandwidth of one large device-to-device copy), the ops of the 12 layers
 * added together: where the step's time goes, without a profiler.
 *
 * The decode step has static shapes: the token and its position live in
 * device tensors, and attention over a cache as long as the whole sequence
 * (tc_nn_attention_with_kv_cache) writes the new key and value at the
 * position and reads the positions up to it, which it learns on the device.
 * So the step queues the same work every time, which is what a CUDA graph
 * replays, and the host never waits for the GPU between tokens. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tcuda/tcuda.h>

/* ---- errors and temporaries ------------------------------------------------- */

static void die(const char *what, tc_status st)
{
    fprintf(stderr, "gpt: %s: %s: %s\n", what, tc_status_string(st), tc_last_error());
    exit(2);
}
#define TRY(call)                                                                                  \
    do {                                                                                           \
        tc_status st_ = (call);                                                                    \
        if (st_ != TC_OK)                                                                          \
            die(#call, st_);                                                                       \
    } while (0)

/* The temporaries of one forward pass, released together at its end. After
 * the first failure every further op is skipped and its status kept. */
typedef struct scratch {
    tc_tensor *t[1024];
    int n;
    tc_status st;
    const char *what; /* the failed call's text (a literal) */
} scratch;

static void track(scratch *s, tc_status st, tc_tensor **made, const char *what)
{
    if (st == TC_OK && made && s->n == (int)(sizeof s->t / sizeof s->t[0])) {
        tc_tensor_release(*made);
        *made = NULL;
        st = TC_ERROR_OUT_OF_MEMORY;
        what = "too many temporaries";
    }
    if (st != TC_OK) {
        s->st = st;
        s->what = what;
    } else if (made) {
        s->t[s->n++] = *made;
    }
}
static tc_status scratch_end(scratch *s)
{
    while (s->n > 0)
        tc_tensor_release(s->t[--s->n]);
    return s->st;
}
/* LET(s, y, tc_x(a, &y)) declares y, runs the op unless one failed before
 * and keeps y for release; DO(s, call) runs an op that makes no tensor. */
#define LET(s, var, call)                                                                          \
    tc_tensor *var = NULL;                                                                         \
    if ((s)->st == TC_OK)                                                                          \
    track((s), (call), &var, #call)
#define DO(s, call)                                                                                \
    do {                                                                                           \
        if ((s)->st == TC_OK)                                                                      \
            track((s), (call), NULL, #call);                                                       \
    } while (0)

/* ---- the model ------------------------------------------------------------------ */

/* --roofline's record of one step: a timing event before each op (and one
 * after the last), with the op's name and the bytes it reads and writes
 * (each tensor once). */
enum { ROOF_MAX = 256 };
typedef struct roof {
    int n;
    int64_t pos; /* the step's position (the caches' filled length) */
    const char *name[ROOF_MAX];
    double bytes[ROOF_MAX];
    tc_event *ev[ROOF_MAX + 1];
} roof;

typedef struct layer {
    tc_tensor *ln1_w, *ln1_b, *attn_w, *attn_b, *proj_w, *proj_b;
    tc_tensor *ln2_w, *ln2_b, *fc_w, *fc_b, *fcproj_w, *fcproj_b;
} layer;

typedef struct gpt {
    int n_layer, n_head;
    int64_t C, V, n_ctx;
    tc_device dev;
    tc_dtype dt;
    tc_tensor *wte, *wpe, *lnf_w, *lnf_b;
    layer *h;
    /* the decode state: caches [B, H, S, hd], the token [B, 1] and its
     * position [1] (int64 on the device, the caches' filled length), 1 */
    int64_t B, S;
    tc_tensor **kc, **vc, *tok, *pos, *one;
    roof *roof; /* --roofline's step record, NULL otherwise */
} gpt;

/* Marks the start of the next op for --roofline (nothing otherwise): `elems`
 * elements of the model's dtype read and written. */
static void mark(const gpt *m, const char *what, double elems)
{
    roof *r = m->roof;
    if (!r || r->n >= ROOF_MAX)
        return;
    r->name[r->n] = what;
    r->bytes[r->n] = elems * (double)tc_dtype_size(m->dt);
    TRY(tc_event_record(r->ev[r->n++], NULL));
}

static const char *prefix; /* "" or "transformer." */

static tc_tensor *load(tc_safetensors *f, const gpt *m, const char *name, bool transpose)
{
    char full[128];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    tc_tensor *t, *u, *c;
    TRY(tc_safetensors_get(f, full, m->dev, &t));
    if (!transpose) {
        TRY(tc_tensor_to(t, m->dev, m->dt, false, &u));
        tc_tensor_release(t);
        return u;
    }
    /* GPT-2 keeps Conv1D weights as [in, out]; linear wants [out, in] */
    TRY(tc_tensor_transpose(t, 0, 1, &u));
    TRY(tc_tensor_to(u, m->dev, m->dt, false, &c));
    tc_tensor_release(t);
    tc_tensor_release(u);
    TRY(tc_tensor_contiguous(c, &t));
    tc_tensor_release(c);
    return t;
}

static void gpt_load(gpt *m, const char *path)
{
    tc_safetensors *f;
    TRY(tc_safetensors_open(path, &f));
    int64_t sizes[TC_MAX_DIMS];
    int ndim;
    prefix = "";
    if (tc_safetensors_info(f, "wte.weight", NULL, &ndim, sizes) != TC_OK)
        prefix = "transformer.";
    char name[128];
    snprintf(name, sizeof name, "%swte.weight", prefix);
    TRY(tc_safetensors_info(f, name, NULL, &ndim, sizes));
    m->V = sizes[0];
    m->C = sizes[1];
    snprintf(name, sizeof name, "%swpe.weight", prefix);
    TRY(tc_safetensors_info(f, name, NULL, &ndim, sizes));
    m->n_ctx = sizes[0];
    m->n_layer = 0;
    for (;;) {
        snprintf(name, sizeof name, "%sh.%d.ln_1.weight", prefix, m->n_layer);
        if (tc_safetensors_info(f, name, NULL, NULL, NULL) != TC_OK)
            break;
        m->n_layer++;
    }
    const char *nh = NULL;
    TRY(tc_safetensors_metadata(f, "n_head", &nh));
    m->n_head = nh ? atoi(nh) : (int)(m->C / 64);
    if (m->n_head <= 0 || m->C % m->n_head) {
        fprintf(stderr, "gpt: %lld channels do not split into %d heads\n", (long long)m->C,
                m->n_head);
        exit(2);
    }
    m->wte = load(f, m, "wte.weight", false);
    m->wpe = load(f, m, "wpe.weight", false);
    m->lnf_w = load(f, m, "ln_f.weight", false);
    m->lnf_b = load(f, m, "ln_f.bias", false);
    m->h = calloc((size_t)m->n_layer, sizeof *m->h);
    for (int l = 0; l < m->n_layer; l++) {
        layer *y = &m->h[l];
        struct {
            tc_tensor **t;
            const char *name;
            bool transpose;
        } w[] = {
            {&y->ln1_w, "ln_1.weight", false},         {&y->ln1_b, "ln_1.bias", false},
            {&y->attn_w, "attn.c_attn.weight", true},  {&y->attn_b, "attn.c_attn.bias", false},
            {&y->proj_w, "attn.c_proj.weight", true},  {&y->proj_b, "attn.c_proj.bias", false},
            {&y->ln2_w, "ln_2.weight", false},         {&y->ln2_b, "ln_2.bias", false},
            {&y->fc_w, "mlp.c_fc.weight", true},       {&y->fc_b, "mlp.c_fc.bias", false},
            {&y->fcproj_w, "mlp.c_proj.weight", true}, {&y->fcproj_b, "mlp.c_proj.bias", false}};
        for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
            snprintf(name, sizeof name, "h.%d.%s", l, w[i].name);
            *w[i].t = load(f, m, name, w[i].transpose);
        }
    }
    TRY(tc_safetensors_close(f));
}

static void gpt_free(gpt *m)
{
    for (int l = 0; l < m->n_layer; l++) {
        tc_tensor **t = &m->h[l].ln1_w;
        for (int i = 0; i < 12; i++)
            tc_tensor_release(t[i]);
        if (m->kc) {
            tc_tensor_release(m->kc[l]);
            tc_tensor_release(m->vc[l]);
        }
    }
    free(m->h);
    free(m->kc);
    free(m->vc);
    tc_tensor *t[] = {m->wte, m->wpe, m->lnf_w, m->lnf_b, m->tok, m->pos, m->one};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        tc_tensor_release(t[i]);
}

/* Caches for batch B and S positions, zeroed; the decode state. */
static void gpt_cache(gpt *m, int64_t B, int64_t S)
{
    int64_t hd = m->C / m->n_head, cs[4] = {B, m->n_head, S, hd}, ts[2] = {B, 1}, one = 1;
    if (S > m->n_ctx) {
        fprintf(stderr, "gpt: %lld positions asked for, the model has %lld\n", (long long)S,
                (long long)m->n_ctx);
        exit(2);
    }
    if (m->kc) { /* a new shape: the old state goes */
        for (int l = 0; l < m->n_layer; l++) {
            tc_tensor_release(m->kc[l]);
            tc_tensor_release(m->vc[l]);
        }
        free(m->kc);
        free(m->vc);
        tc_tensor *t[] = {m->tok, m->pos, m->one};
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
            tc_tensor_release(t[i]);
    }
    m->B = B;
    m->S = S;
    m->kc = calloc((size_t)m->n_layer, sizeof *m->kc);
    m->vc = calloc((size_t)m->n_layer, sizeof *m->vc);
    for (int l = 0; l < m->n_layer; l++) {
        TRY(tc_tensor_zeros(4, cs, m->dt, m->dev, &m->kc[l]));
        TRY(tc_tensor_zeros(4, cs, m->dt, m->dev, &m->vc[l]));
    }
    TRY(tc_tensor_zeros(2, ts, TC_INT64, m->dev, &m->tok));
    TRY(tc_tensor_zeros(1, &one, TC_INT64, m->dev, &m->pos));
    TRY(tc_tensor_ones(0, NULL, TC_INT64, m->dev, &m->one));
}

/* A block's first half up to attention: ln_1 of the residual stream x and
 * the qkv linear in one call (tc_nn_layer_norm_linear: one kernel at
 * decode's few rows), then q, k, v [B, H, T, hd] as views of its output. */
static void qkv_heads(scratch *s, const gpt *m, const layer *w, tc_tensor *x, tc_tensor **q,
                      tc_tensor **k, tc_tensor **v)
{
    int64_t heads[4] = {tc_tensor_size(x, 0), tc_tensor_size(x, 1), m->n_head, m->C / m->n_head};
    double bc = (double)tc_tensor_numel(x), c = (double)m->C;
    mark(m, "ln_1 + qkv linear", 3 * c * c + 5 * c + 4 * bc);
    LET(s, qkv, tc_nn_layer_norm_linear(x, w->ln1_w, w->ln1_b, 1e-5, w->attn_w, w->attn_b, &qkv));
    tc_tensor **out[3] = {q, k, v};
    for (int i = 0; i < 3; i++) {
        LET(s, part, tc_tensor_narrow(qkv, 2, i * m->C, m->C, &part));
        LET(s, split, tc_tensor_view(part, 4, heads, &split));
        LET(s, t, tc_tensor_transpose(split, 1, 2, &t));
        *out[i] = t;
    }
}

/* The rest of a block after attention's output y [B, H, T, hd]: the
 * projection added to the residual stream *x (tc_nn_linear_add), ln_2 with
 * the MLP's first linear and gelu (tc_nn_layer_norm_linear_gelu), and the
 * MLP's second linear added to *x, each one call; *x is then the block's
 * output. */
static void block_rest(scratch *s, const gpt *m, const layer *w, tc_tensor **x, tc_tensor *y)
{
    int64_t merged[3] = {tc_tensor_size(*x, 0), tc_tensor_size(*x, 1), m->C};
    double bc = (double)tc_tensor_numel(*x), c = (double)m->C;
    LET(s, yt, tc_tensor_transpose(y, 1, 2, &yt));
    LET(s, ym, tc_tensor_reshape(yt, 3, merged, &ym));
    mark(m, "proj linear + residual", c * c + c + 3 * bc);
    LET(s, x1, tc_nn_linear_add(ym, w->proj_w, w->proj_b, *x, &x1));
    mark(m, "ln_2 + fc linear + gelu", 4 * c * c + 6 * c + 5 * bc);
    LET(s, g,
        tc_nn_layer_norm_linear_gelu(x1, w->ln2_w, w->ln2_b, 1e-5, w->fc_w, w->fc_b,
                                     TC_GELU_APPROXIMATE_TANH, &g));
    mark(m, "fc proj linear + residual", 4 * c * c + c + 6 * bc);
    LET(s, x2, tc_nn_linear_add(g, w->fcproj_w, w->fcproj_b, x1, &x2));
    if (x1 && x2)
        *x = x2;
}

/* Logits [B, T, V] of tokens [B, T] at positions 0..T-1, filling the cache's
 * first T positions when there is a cache. */
static tc_status gpt_prefill(gpt *m, const tc_tensor *tokens, tc_tensor **logits)
{
    tc_nvtx_range_push("prefill", NULL); /* for profilers: scripts/profile.sh gpt */
    scratch s = {.st = TC_OK};
    int64_t T = tc_tensor_size(tokens, 1);
    LET(&s, pos, tc_tensor_arange(0, (double)T, 1, TC_INT64, m->dev, &pos));
    LET(&s, te, tc_tensor_embedding(m->wte, tokens, &te));
    LET(&s, pe, tc_tensor_embedding(m->wpe, pos, &pe));
    LET(&s, x, tc_tensor_add(te, pe, &x));
    for (int l = 0; l < m->n_layer; l++) {
        tc_tensor *q = NULL, *k = NULL, *v = NULL;
        qkv_heads(&s, m, &m->h[l], x, &q, &k, &v);
        if (m->kc) { /* the cache's positions 0..T-1 */
            LET(&s, kd, tc_tensor_narrow(m->kc[l], 2, 0, T, &kd));
            LET(&s, vd, tc_tensor_narrow(m->vc[l], 2, 0, T, &vd));
            DO(&s, tc_tensor_copy_(kd, k, false));
            DO(&s, tc_tensor_copy_(vd, v, false));
        }
        LET(&s, y, tc_nn_scaled_dot_product_attention(q, k, v, true, NULL, &y));
        block_rest(&s, m, &m->h[l], &x, y);
    }
    tc_tensor *out = NULL; /* not kept: it is the result */
    DO(&s, tc_nn_layer_norm_linear(x, m->lnf_w, m->lnf_b, 1e-5, m->wte, NULL, &out));
    tc_status st = scratch_end(&s);
    tc_nvtx_range_pop(NULL);
    if (st != TC_OK) {
        fprintf(stderr, "gpt: prefill: %s failed: %s\n", s.what, tc_last_error());
        return st;
    }
    *logits = out;
    return TC_OK;
}

/* One decode step with static shapes: the token m->tok [B, 1] at position
 * m->pos; attention writes its key and value into the caches at that
 * position and sees positions <= pos; the greedy next token is written into
 * m->tok and pos advances, all on the device. */
static tc_status gpt_step(void *ctx)
{
    gpt *m = ctx;
    tc_nvtx_range_push("decode_step", NULL);
    scratch s = {.st = TC_OK};
    double bc = (double)(m->B * m->C), c = (double)m->C, bv = (double)(m->B * m->V);
    mark(m, "embeddings", 4 * bc + 3 * c);
    LET(&s, te, tc_tensor_embedding(m->wte, m->tok, &te)); /* [B, 1, C] */
    LET(&s, pe, tc_tensor_embedding(m->wpe, m->pos, &pe)); /* [1, C] */
    LET(&s, x, tc_tensor_add(te, pe, &x));
    for (int l = 0; l < m->n_layer; l++) {
        tc_tensor *q = NULL, *k = NULL, *v = NULL;
        qkv_heads(&s, m, &m->h[l], x, &q, &k, &v);
        /* k and v into the caches at pos, and q over positions 0..pos */
        mark(m, "attention + KV write", 2 * bc * (double)(m->roof ? m->roof->pos + 1 : 0) + 4 * bc);
        LET(&s, y,
            tc_nn_attention_with_kv_cache(q, m->kc[l], m->vc[l], k, v, m->pos, true, NULL, &y));
        block_rest(&s, m, &m->h[l], &x, y);
    }
    mark(m, "ln_f + logits linear", (double)m->V * c + 2 * c + bc + bv);
    LET(&s, logits, tc_nn_layer_norm_linear(x, m->lnf_w, m->lnf_b, 1e-5, m->wte, NULL, &logits));
    mark(m, "argmax, next token", bv);
    LET(&s, next, tc_tensor_argmax(logits, -1, false, &next));
    DO(&s, tc_tensor_copy_(m->tok, next, false));
    DO(&s, tc_tensor_add_(m->pos, m->one));
    tc_status st = scratch_end(&s);
    tc_nvtx_range_pop(NULL);
    if (st != TC_OK)
        fprintf(stderr, "gpt: decode step: %s failed: %s\n", s.what, tc_last_error());
    return st;
}

/* A copy of t. */
static tc_tensor *clone(const tc_tensor *t)
{
    tc_tensor *c;
    TRY(tc_tensor_empty_like(t, &c));
    TRY(tc_tensor_copy_(c, t, false));
    return c;
}

/* Prefills `prompt` [B, T] (int64 on the device) and generates `n` tokens
 * greedily into out [B, n] (int64, on the device). With graph, the step is
 * captured once and replayed. *prefill_logits (when not NULL) gets the
 * prompt's logits. *decode_s: seconds of the n - 1 decode steps. */
static void gpt_generate(gpt *m, const tc_tensor *prompt, int64_t n, bool graph, tc_tensor *out,
                         tc_tensor **prefill_logits, double *decode_s)
{
    int64_t T = tc_tensor_size(prompt, 1); /* the caches past it are never read */
    tc_tensor *logits, *last, *first, *col;
    TRY(gpt_prefill(m, prompt, &logits));
    TRY(tc_tensor_narrow(logits, 1, T - 1, 1, &last));
    TRY(tc_tensor_argmax(last, -1, false, &first)); /* [B, 1] */
    TRY(tc_tensor_copy_(m->tok, first, false));
    TRY(tc_tensor_fill_(m->pos, (double)T));
    tc_tensor_release(last);
    tc_tensor_release(first);
    if (prefill_logits)
        *prefill_logits = logits;
    else
        tc_tensor_release(logits);

    tc_graph *g = NULL;
    if (graph) {
        /* A first step outside the capture lets libraries (cuBLAS) set
         * themselves up; its effects are undone before capturing. The
         * capture queues nothing, so the state stays as the prefill left
         * it. tcuda captures on a side stream of its own. */
        tc_tensor *tok0 = clone(m->tok), *pos0 = clone(m->pos);
        TRY(gpt_step(m));
        TRY(tc_tensor_copy_(m->tok, tok0, false));
        TRY(tc_tensor_copy_(m->pos, pos0, false));
        for (int l = 0; l < m->n_layer; l++) {
            tc_tensor *kt, *vt;
            TRY(tc_tensor_narrow(m->kc[l], 2, T, 1, &kt));
            TRY(tc_tensor_narrow(m->vc[l], 2, T, 1, &vt));
            TRY(tc_tensor_fill_(kt, 0));
            TRY(tc_tensor_fill_(vt, 0));
            tc_tensor_release(kt);
            tc_tensor_release(vt);
        }
        tc_tensor_release(tok0);
        tc_tensor_release(pos0);
        TRY(tc_graph_create(&g));
        tc_graph_capture_guard cg = tc_graph_capture_guard_enter(g, (tc_graph_pool_id){0}, NULL,
                                                                 TC_CAPTURE_MODE_GLOBAL);
        TRY(cg.status);
        tc_status st = gpt_step(m);
        tc_status end = tc_graph_capture_guard_exit(&cg);
        TRY(st);
        TRY(end);
    }
    TRY(tc_tensor_narrow(out, 1, 0, 1, &col));
    TRY(tc_tensor_copy_(col, m->tok, false));
    tc_tensor_release(col);
    if (m->dev.type == TC_CUDA)
        TRY(tc_synchronize(m->dev.index));
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int64_t i = 1; i < n; i++) {
        if (g)
            TRY(tc_graph_replay(g));
        else
            TRY(gpt_step(m));
        TRY(tc_tensor_narrow(out, 1, i, 1, &col));
        TRY(tc_tensor_copy_(col, m->tok, false));
        tc_tensor_release(col);
    }
    if (m->dev.type == TC_CUDA)
        TRY(tc_synchronize(m->dev.index));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    *decode_s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (g)
        TRY(tc_graph_destroy(g));
}

/* ---- the program -------------------------------------------------------------------- */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int check(gpt *m, const char *ref_path, bool graph)
{
    tc_safetensors *ref;
    tc_tensor *prompt, *want_logits, *want_tokens, *prompt_dev, *logits, *out;
    TRY(tc_safetensors_open(ref_path, &ref));
    TRY(tc_safetensors_get(ref, "prompt", (tc_device){TC_CPU, -1}, &prompt));
    TRY(tc_safetensors_get(ref, "logits", (tc_device){TC_CPU, -1}, &want_logits));
    TRY(tc_safetensors_get(ref, "generated", (tc_device){TC_CPU, -1}, &want_tokens));
    TRY(tc_safetensors_close(ref));
    int64_t B = tc_tensor_size(prompt, 0), T = tc_tensor_size(prompt, 1);
    int64_t n = tc_tensor_size(want_tokens, 1), os[2] = {B, n};
    gpt_cache(m, B, T + n);
    TRY(tc_tensor_to(prompt, m->dev, TC_INT64, false, &prompt_dev));
    TRY(tc_tensor_zeros(2, os, TC_INT64, m->dev, &out));
    double secs;
    gpt_generate(m, prompt_dev, n, graph, out, &logits, &secs);

    int64_t nl = tc_tensor_numel(want_logits);
    float *got = malloc((size_t)nl * sizeof *got), *want = malloc((size_t)nl * sizeof *want);
    int64_t *gt = malloc((size_t)(B * n) * sizeof *gt), *wt = malloc((size_t)(B * n) * sizeof *wt);
    int rc = 0;
    if (tc_tensor_numel(logits) != nl) {
        fprintf(stderr, "gpt: check: %lld logits, the reference has %lld\n",
                (long long)tc_tensor_numel(logits), (long long)nl);
        rc = 1;
    } else {
        TRY(tc_tensor_to_host(logits, TC_FLOAT32, got));
        TRY(tc_tensor_to_host(want_logits, TC_FLOAT32, want));
        TRY(tc_tensor_to_host(out, TC_INT64, gt));
        TRY(tc_tensor_to_host(want_tokens, TC_INT64, wt));
        double diff = 0, big = 0;
        for (int64_t i = 0; i < nl; i++) {
            diff = fmax(diff, fabs((double)got[i] - (double)want[i]));
            big = fmax(big, fabs((double)want[i]));
        }
        int64_t same = 0;
        for (int64_t i = 0; i < B * n; i++)
            same += gt[i] == wt[i];
        double tol = m->dt == TC_FLOAT32 ? 1e-4 : 5e-2;
        printf("check: logits differ by %.2e of their largest (%.3g), tolerance %.0e; "
               "%lld of %lld tokens the same\n",
               big > 0 ? diff / big : diff, big, tol, (long long)same, (long long)(B * n));
        rc = !(diff <= tol * big) || (m->dt == TC_FLOAT32 && same != B * n);
    }
    free(got), free(want), free(gt), free(wt);
    tc_tensor *t[] = {prompt, want_logits, want_tokens, prompt_dev, logits, out};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        tc_tensor_release(t[i]);
    return rc;
}

static void bench(gpt *m, bool graph, bool tf32)
{
    const char *dt = m->dt == TC_FLOAT32 ? (tf32 ? "float32_tf32" : "float32") : "bfloat16";
    int64_t ps[2] = {8, 512};
    tc_tensor *x, *logits, *p, *out;
    if (m->n_ctx < 512) {
        fprintf(stderr, "gpt: --bench prefills 512 positions, the model has %lld\n",
                (long long)m->n_ctx);
        exit(2);
    }
    TRY(tc_tensor_zeros(2, ps, TC_INT64, m->dev, &x));
    TRY(tc_tensor_random_(x, 0, m->V, NULL));
    for (int rep = 0; rep < 2; rep++) { /* the first one warms up */
        int reps = rep ? 5 : 1;
        if (m->dev.type == TC_CUDA)
            TRY(tc_synchronize(m->dev.index));
        double t0 = now_s();
        for (int i = 0; i < reps; i++) {
            TRY(gpt_prefill(m, x, &logits));
            tc_tensor_release(logits);
        }
        if (m->dev.type == TC_CUDA)
            TRY(tc_synchronize(m->dev.index));
        if (rep)
            printf("tcuda prefill_%s %.0f\n", dt, 8 * 512 * reps / (now_s() - t0));
    }
    tc_tensor_release(x);
    for (int64_t B = 1; B <= 8; B += 7) { /* decode at batch 1, then 8 */
        int64_t ps1[2] = {B, 16}, os[2] = {B, 256};
        gpt_cache(m, B, 16 + 256);
        TRY(tc_tensor_zeros(2, ps1, TC_INT64, m->dev, &p));
        TRY(tc_tensor_random_(p, 0, m->V, NULL));
        TRY(tc_tensor_zeros(2, os, TC_INT64, m->dev, &out));
        double secs = 0;
        for (int rep = 0; rep < 2; rep++) /* the first one warms up */
            gpt_generate(m, p, 256, graph, out, NULL, &secs);
        printf("tcuda decode%s%s_%s %.0f\n", graph ? "_graph" : "", B > 1 ? "_b8" : "", dt,
               (double)B * 255 / secs);
        tc_tensor_release(p);
        tc_tensor_release(out);
    }
}

/* GB/s of one 256 MiB device-to-device copy (read and written), the median
 * of 5: the bandwidth a kernel that streams its bytes could reach. */
static double copy_floor_gbs(gpt *m)
{
    int64_t n = (int64_t)256 << 20;
    tc_tensor *a, *b;
    tc_event *e0, *e1;
    TRY(tc_tensor_zeros(1, &n, TC_UINT8, m->dev, &a));
    TRY(tc_tensor_zeros(1, &n, TC_UINT8, m->dev, &b));
    TRY(tc_event_create(TC_EVENT_FLAG_TIMING, &e0));
    TRY(tc_event_create(TC_EVENT_FLAG_TIMING, &e1));
    float ms[5];
    TRY(tc_tensor_copy_(b, a, false)); /* warm-up */
    for (int i = 0; i < 5; i++) {
        TRY(tc_event_record(e0, NULL));
        TRY(tc_tensor_copy_(b, a, false));
        TRY(tc_event_record(e1, NULL));
        TRY(tc_event_synchronize(e1));
        TRY(tc_event_elapsed_time(e0, e1, &ms[i]));
    }
    for (int i = 1; i < 5; i++) /* insertion sort: the median is ms[2] */
        for (int j = i; j > 0 && ms[j] < ms[j - 1]; j--) {
            float t = ms[j];
            ms[j] = ms[j - 1], ms[j - 1] = t;
        }
    tc_tensor_release(a), tc_tensor_release(b);
    tc_event_destroy(e0), tc_event_destroy(e1);
    return 2.0 * (double)n / (ms[2] * 1e-3) / 1e9;
}

/* --roofline: one eager decode step at batch 1 and 8 at position 512 (the
 * prompt's length), queued behind about 20 large matmuls so that its ops
 * run back to back on the GPU: each op's time is the gap between the
 * timing events around it. */
static void roofline(gpt *m)
{
    const char *dt = tc_dtype_string(m->dt);
    double floor = copy_floor_gbs(m);
    int64_t T = 512, big[2] = {4096, 4096};
    roof r = {0};
    for (int i = 0; i <= ROOF_MAX; i++)
        TRY(tc_event_create(TC_EVENT_FLAG_TIMING, &r.ev[i]));
    tc_tensor *w;
    TRY(tc_tensor_randn(2, big, m->dt, m->dev, NULL, &w));
    for (int64_t B = 1; B <= 8; B += 7) {
        int64_t ps[2] = {B, T};
        tc_tensor *p, *logits, *last, *first;
        gpt_cache(m, B, T + 2);
        TRY(tc_tensor_zeros(2, ps, TC_INT64, m->dev, &p));
        TRY(tc_tensor_random_(p, 0, m->V, NULL));
        TRY(gpt_prefill(m, p, &logits));
        TRY(tc_tensor_narrow(logits, 1, T - 1, 1, &last));
        TRY(tc_tensor_argmax(last, -1, false, &first));
        TRY(tc_tensor_copy_(m->tok, first, false));
        TRY(tc_tensor_fill_(m->pos, (double)T));
        TRY(gpt_step(m)); /* a warm-up step: the caches now hold T + 1 positions */
        TRY(tc_synchronize(m->dev.index));
        for (int i = 0; i < 20; i++) { /* GPU work ahead of the step */
            tc_tensor *y;
            TRY(tc_tensor_matmul(w, w, &y));
            tc_tensor_release(y);
        }
        r.n = 0;
        r.pos = T + 1;
        m->roof = &r;
        TRY(gpt_step(m));
        m->roof = NULL;
        TRY(tc_event_record(r.ev[r.n], NULL));
        TRY(tc_synchronize(m->dev.index));
        /* the ops of all layers added together, in the order they first ran */
        double us[ROOF_MAX] = {0}, bytes[ROOF_MAX] = {0}, total_us = 0, total_b = 0;
        int calls[ROOF_MAX] = {0}, first_of[ROOF_MAX], nk = 0;
        for (int i = 0; i < r.n; i++) {
            float ms;
            TRY(tc_event_elapsed_time(r.ev[i], r.ev[i + 1], &ms));
            int k = 0;
            while (k < nk && strcmp(r.name[first_of[k]], r.name[i]))
                k++;
            if (k == nk)
                first_of[nk++] = i;
            us[k] += 1e3 * ms, bytes[k] += r.bytes[i], calls[k]++;
            total_us += 1e3 * ms, total_b += r.bytes[i];
        }
        printf("\nroofline: %s decode step, batch %lld, position %lld; copy floor %.0f GB/s\n"
               "| op | calls | us | MB | GB/s | of floor |\n|---|---:|---:|---:|---:|---:|\n",
               dt, (long long)B, (long long)r.pos, floor);
        for (int k = 0; k < nk; k++)
            printf("| %s | %d | %.1f | %.2f | %.0f | %.2f |\n", r.name[first_of[k]], calls[k],
                   us[k], bytes[k] / 1e6, bytes[k] / us[k] / 1e3, bytes[k] / us[k] / 1e3 / floor);
        printf("| step | %d | %.1f | %.2f | %.0f | %.2f |\n", r.n, total_us, total_b / 1e6,
               total_b / total_us / 1e3, total_b / total_us / 1e3 / floor);
        tc_tensor *t[] = {p, logits, last, first};
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
            tc_tensor_release(t[i]);
    }
    tc_tensor_release(w);
    for (int i = 0; i <= ROOF_MAX; i++)
        tc_event_destroy(r.ev[i]);
}

static void usage(void)
{
    fprintf(stderr, "usage: gpt MODEL.safetensors [--device cpu|cuda] [--dtype float32|bfloat16] "
                    "[--graph] [--tf32] [--prompt 1,2,3] [--new N] [--check REF.safetensors] "
                    "[--bench] [--roofline]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        usage();
    gpt m = {.dev = {TC_CPU, -1}, .dt = TC_FLOAT32};
    const char *ref = NULL, *prompt_text = "464,2068,7586,21831";
    bool graph = false, do_bench = false, tf32 = false, do_roof = false;
    int64_t n_new = 20;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--graph"))
            graph = true;
        else if (!strcmp(a, "--bench"))
            do_bench = true;
        else if (!strcmp(a, "--roofline"))
            do_roof = true;
        else if (!strcmp(a, "--tf32")) /* torch.set_float32_matmul_precision("high") */
            tf32 = true;
        else if (!v)
            usage();
        else if (!strcmp(a, "--device") && (!strcmp(v, "cpu") || !strcmp(v, "cuda")))
            m.dev = (tc_device){v[1] == 'u' ? TC_CUDA : TC_CPU, v[1] == 'u' ? 0 : -1}, i++;
        else if (!strcmp(a, "--dtype") && (!strcmp(v, "float32") || !strcmp(v, "bfloat16")))
            m.dt = v[0] == 'f' ? TC_FLOAT32 : TC_BFLOAT16, i++;
        else if (!strcmp(a, "--check"))
            ref = v, i++;
        else if (!strcmp(a, "--prompt"))
            prompt_text = v, i++;
        else if (!strcmp(a, "--new") && atoll(v) > 0)
            n_new = atoll(v), i++;
        else
            usage();
    }
    if ((graph || do_roof) && m.dev.type != TC_CUDA) {
        fprintf(stderr, "gpt: --graph and --roofline need --device cuda\n");
        return 2;
    }
    if (tf32)
        TRY(tc_set_float32_matmul_precision("high"));
    gpt_load(&m, argv[1]);
    printf("gpt: %d layers, width %lld, %d heads, vocabulary %lld, on %s\n", m.n_layer,
           (long long)m.C, m.n_head, (long long)m.V, m.dev.type == TC_CUDA ? "cuda" : "cpu");
    int rc = 0;
    if (ref) {
        rc = check(&m, ref, graph);
    } else if (do_bench) {
        bench(&m, graph, tf32);
    } else if (do_roof) {
        roofline(&m);
    } else {
        int64_t toks[256], T = 0;
        for (const char *p = prompt_text; *p && T < 256;
             p = strchr(p, ',') ? strchr(p, ',') + 1 : "")
            toks[T++] = atoll(p);
        int64_t ps[2] = {1, T}, os[2] = {1, n_new};
        tc_tensor *p, *out;
        TRY(tc_tensor_from_data(toks, 2, ps, TC_INT64, m.dev, &p));
        TRY(tc_tensor_zeros(2, os, TC_INT64, m.dev, &out));
        gpt_cache(&m, 1, T + n_new);
        double secs;
        gpt_generate(&m, p, n_new, graph, out, NULL, &secs);
        int64_t *gen = malloc((size_t)n_new * sizeof *gen);
        TRY(tc_tensor_to_host(out, TC_INT64, gen));
        for (int64_t i = 0; i < n_new; i++)
            printf("%s%lld", i ? "," : "", (long long)gen[i]);
        printf("\n%.1f tokens/s\n", (double)(n_new - 1) / secs);
        free(gen);
        tc_tensor_release(p);
        tc_tensor_release(out);
    }
    gpt_free(&m);
    return rc;
}
