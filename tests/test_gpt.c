/* examples/gpt against an independent GPT-2 written here in double precision.
 *
 * The test makes a small random GPT-2 (Hugging Face's tensor names), writes it
 * with its own safetensors writer (not tcuda's), computes the prompt's logits
 * and the greedy continuation with a plain forward pass in double (no KV
 * cache: every step recomputes the whole sequence, so the example's cache is
 * checked too), writes those as the reference file, and runs the built
 * example with --check on the CPU, and on a GPU when there is one.
 * TCUDA_GPT names the example (CTest sets it). */
#include <math.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tc_test.h"

enum { L = 2, C = 32, NH = 4, V = 61, S = 24, T = 7, NEW = 9 };

/* ---- the model ------------------------------------------------------------ */

typedef struct {
    double *ln1_w, *ln1_b, *attn_w, *attn_b, *proj_w, *proj_b;
    double *ln2_w, *ln2_b, *fc_w, *fc_b, *fcproj_w, *fcproj_b;
} layer;

static double *wte, *wpe, *lnf_w, *lnf_b;
static layer lay[L];

typedef struct {
    const char *name;
    double **p;
    int ndim;
    int64_t sizes[2];
} param;
static param params[4 + 12 * L];
static int nparams;
static char pnames[12 * L][48];

static void add(const char *name, double **p, int ndim, int64_t s0, int64_t s1, double mean,
                double std)
{
    int64_t n = ndim == 1 ? s0 : s0 * s1;
    *p = malloc((size_t)n * sizeof **p);
    for (int64_t i = 0; i < n; i++) { /* Box-Muller from the test's random numbers */
        double u = tc_test_rand_uniform() + 1e-12, v = tc_test_rand_uniform();
        (*p)[i] = mean + std * sqrt(-2 * log(u)) * cos(2 * M_PI * v);
    }
    params[nparams++] = (param){name, p, ndim, {s0, s1}};
}

static void make_model(void)
{
    nparams = 0;
    add("wte.weight", &wte, 2, V, C, 0, 0.3);
    add("wpe.weight", &wpe, 2, S, C, 0, 0.1);
    static const char *suffix[12] = {"ln_1.weight",      "ln_1.bias",          "attn.c_attn.weight",
                                     "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
                                     "ln_2.weight",      "ln_2.bias",          "mlp.c_fc.weight",
                                     "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};
    for (int l = 0; l < L; l++) {
        layer *y = &lay[l];
        double **ps[12] = {&y->ln1_w,  &y->ln1_b,  &y->attn_w,   &y->attn_b,
                           &y->proj_w, &y->proj_b, &y->ln2_w,    &y->ln2_b,
                           &y->fc_w,   &y->fc_b,   &y->fcproj_w, &y->fcproj_b};
        int64_t rows[12] = {C, C, C, 3 * C, C, C, C, C, C, 4 * C, 4 * C, C};
        int64_t cols[12] = {0, 0, 3 * C, 0, C, 0, 0, 0, 4 * C, 0, C, 0};
        for (int i = 0; i < 12; i++) {
            char *nm = pnames[l * 12 + i];
            snprintf(nm, sizeof pnames[0], "h.%d.%s", l, suffix[i]);
            bool ln_weight = i == 0 || i == 6;
            add(nm, ps[i], cols[i] ? 2 : 1, rows[i], cols[i], ln_weight ? 1 : 0,
                ln_weight || i == 1 || i == 7 ? 0.1 : 0.2);
        }
    }
    add("ln_f.weight", &lnf_w, 1, C, 0, 1, 0.1);
    add("ln_f.bias", &lnf_b, 1, C, 0, 0, 0.1);
}

static void free_model(void)
{
    for (int i = 0; i < nparams; i++)
        free(*params[i].p);
}

/* ---- the forward pass, in double -------------------------------------------- */

static void layer_norm(const double *x, const double *w, const double *b, double *y)
{
    double mean = 0, var = 0;
    for (int i = 0; i < C; i++)
        mean += x[i];
    mean /= C;
    for (int i = 0; i < C; i++)
        var += (x[i] - mean) * (x[i] - mean);
    var /= C;
    for (int i = 0; i < C; i++)
        y[i] = (x[i] - mean) / sqrt(var + 1e-5) * w[i] + b[i];
}

/* y[m] = x[k] W[k, m] + b (Conv1D, as GPT-2 stores it) */
static void conv1d(const double *x, const double *w, const double *b, int k, int m, double *y)
{
    for (int j = 0; j < m; j++) {
        double s = b[j];
        for (int i = 0; i < k; i++)
            s += x[i] * w[(size_t)i * m + j];
        y[j] = s;
    }
}

static double gelu_tanh(double x)
{
    return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

/* logits [n, V] of tokens [n] */
static void forward(const int64_t *tok, int n, double *logits)
{
    double(*x)[C] = calloc((size_t)n, sizeof *x), (*h)[C] = calloc((size_t)n, sizeof *h);
    double(*qkv)[3 * C] = calloc((size_t)n, sizeof *qkv),
                     (*att)[C] = calloc((size_t)n, sizeof *att);
    double *f = calloc(4 * C, sizeof *f), *o = calloc(C, sizeof *o), *p = calloc(S, sizeof *p);
    for (int t = 0; t < n; t++)
        for (int i = 0; i < C; i++)
            x[t][i] = wte[tok[t] * C + i] + wpe[t * C + i];
    const int hd = C / NH;
    for (int l = 0; l < L; l++) {
        layer *y = &lay[l];
        for (int t = 0; t < n; t++) {
            layer_norm(x[t], y->ln1_w, y->ln1_b, h[t]);
            conv1d(h[t], y->attn_w, y->attn_b, C, 3 * C, qkv[t]);
        }
        for (int hh = 0; hh < NH; hh++)
            for (int t = 0; t < n; t++) {
                double mx = -INFINITY, sum = 0;
                for (int u = 0; u <= t; u++) {
                    double s = 0;
                    for (int e = 0; e < hd; e++)
                        s += qkv[t][hh * hd + e] * qkv[u][C + hh * hd + e];
                    p[u] = s / sqrt(hd);
                    mx = fmax(mx, p[u]);
                }
                for (int u = 0; u <= t; u++)
                    sum += p[u] = exp(p[u] - mx);
                for (int e = 0; e < hd; e++) {
                    double s = 0;
                    for (int u = 0; u <= t; u++)
                        s += p[u] / sum * qkv[u][2 * C + hh * hd + e];
                    att[t][hh * hd + e] = s;
                }
            }
        for (int t = 0; t < n; t++) {
            conv1d(att[t], y->proj_w, y->proj_b, C, C, o);
            for (int i = 0; i < C; i++)
                x[t][i] += o[i];
            layer_norm(x[t], y->ln2_w, y->ln2_b, h[t]);
            conv1d(h[t], y->fc_w, y->fc_b, C, 4 * C, f);
            for (int i = 0; i < 4 * C; i++)
                f[i] = gelu_tanh(f[i]);
            conv1d(f, y->fcproj_w, y->fcproj_b, 4 * C, C, o);
            for (int i = 0; i < C; i++)
                x[t][i] += o[i];
        }
    }
    for (int t = 0; t < n; t++) {
        layer_norm(x[t], lnf_w, lnf_b, h[t]);
        for (int v = 0; v < V; v++) {
            double s = 0;
            for (int i = 0; i < C; i++)
                s += h[t][i] * wte[v * C + i];
            logits[(size_t)t * V + v] = s;
        }
    }
    free(x), free(h), free(qkv), free(att), free(f), free(o), free(p);
}

/* Greedy continuation; false when two logits come within `gap` of each other
 * at the top (a float32 program could then pick the other one fairly). */
static bool generate(const int64_t *prompt, int64_t *out, double gap)
{
    int64_t seq[S];
    memcpy(seq, prompt, T * sizeof *seq);
    double *lg = malloc((size_t)S * V * sizeof *lg);
    bool clear = true;
    for (int i = 0; i < NEW; i++) {
        int n = T + i;
        forward(seq, n, lg);
        const double *last = lg + (size_t)(n - 1) * V;
        int best = 0;
        for (int v = 1; v < V; v++)
            best = last[v] > last[best] ? v : best;
        for (int v = 0; v < V; v++)
            clear &= v == best || last[best] - last[v] > gap;
        seq[n] = out[i] = best;
    }
    free(lg);
    return clear;
}

/* ---- a safetensors writer of its own ------------------------------------------ */

typedef struct {
    const char *name, *dtype;
    int ndim;
    int64_t sizes[3];
    const void *data;
    size_t bytes;
} entry;

static bool write_file(const char *path, const entry *e, int n, const char *meta)
{
    char header[16384];
    int len = snprintf(header, sizeof header, "{");
    size_t off = 0;
    if (meta)
        len += snprintf(header + len, sizeof header - len, "\"__metadata__\":%s,", meta);
    for (int i = 0; i < n; i++) {
        len += snprintf(header + len, sizeof header - len, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[",
                        i ? "," : "", e[i].name, e[i].dtype);
        for (int d = 0; d < e[i].ndim; d++)
            len += snprintf(header + len, sizeof header - len, "%s%lld", d ? "," : "",
                            (long long)e[i].sizes[d]);
        len += snprintf(header + len, sizeof header - len, "],\"data_offsets\":[%zu,%zu]}", off,
                        off + e[i].bytes);
        off += e[i].bytes;
    }
    len += snprintf(header + len, sizeof header - len, "}");
    while (len % 8)
        header[len++] = ' ';
    FILE *f = fopen(path, "wb");
    if (!f)
        return false;
    uint64_t hl = (uint64_t)len; /* little-endian on every machine tcuda runs on */
    bool ok = fwrite(&hl, 8, 1, f) == 1 && fwrite(header, 1, (size_t)len, f) == (size_t)len;
    for (int i = 0; i < n; i++)
        ok &= fwrite(e[i].data, 1, e[i].bytes, f) == e[i].bytes;
    return fclose(f) == 0 && ok;
}

static float *to_float(const double *p, size_t n)
{
    float *f = malloc(n * sizeof *f);
    for (size_t i = 0; i < n; i++)
        f[i] = (float)p[i];
    return f;
}

static bool write_model(const char *path)
{
    entry e[4 + 12 * L];
    float *data[4 + 12 * L];
    for (int i = 0; i < nparams; i++) {
        const param *p = &params[i];
        size_t n = (size_t)(p->ndim == 1 ? p->sizes[0] : p->sizes[0] * p->sizes[1]);
        data[i] = to_float(*p->p, n);
        e[i] = (entry){p->name, "F32", p->ndim, {p->sizes[0], p->sizes[1]}, data[i], 4 * n};
    }
    bool ok = write_file(path, e, nparams, "{\"n_head\":\"4\",\"format\":\"pt\"}");
    for (int i = 0; i < nparams; i++)
        free(data[i]);
    return ok;
}

/* ---- the test --------------------------------------------------------------- */

static int run(const char *gpt, const char *model, const char *ref, const char *device,
               const char *more)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' '%s' --device %s --check '%s' %s", gpt, model, device, ref,
             more);
    printf("$ %s\n", cmd);
    fflush(stdout);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

int main(void)
{
    tc_test_init();
    const char *gpt = getenv("TCUDA_GPT");
    if (!gpt || access(gpt, X_OK) != 0) {
        printf("skipped: set TCUDA_GPT to the built examples/gpt\n");
        return 77;
    }
    /* Reference: a model and prompt whose greedy path has no near-ties. */
    int64_t prompt[T], gen[NEW];
    bool clear = false;
    for (int tries = 0; tries < 20 && !clear; tries++) {
        if (tries)
            free_model();
        make_model();
        for (int i = 0; i < T; i++)
            prompt[i] = (int64_t)(tc_test_rand() % V);
        clear = generate(prompt, gen, 1e-3);
    }
    CHECK(clear);
    double *lg = malloc((size_t)T * V * sizeof *lg);
    forward(prompt, T, lg);
    float *lgf = to_float(lg, (size_t)T * V);

    char dir[] = "/tmp/tc_gpt_XXXXXX", model[64], ref[64];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(model, sizeof model, "%s/model.safetensors", dir);
    snprintf(ref, sizeof ref, "%s/ref.safetensors", dir);
    CHECK(write_model(model));
    entry r[3] = {{"prompt", "I64", 2, {1, T}, prompt, sizeof prompt},
                  {"logits", "F32", 3, {1, T, V}, lgf, (size_t)T * V * 4},
                  {"generated", "I64", 2, {1, NEW}, gen, sizeof gen}};
    CHECK(write_file(ref, r, 3, NULL));

    CHECK(run(gpt, model, ref, "cpu", "") == 0);
    if (tc_device_count() > 0) {
        CHECK(run(gpt, model, ref, "cuda", "") == 0);
        CHECK(run(gpt, model, ref, "cuda", "--graph") == 0);
    } else {
        printf("no GPU: the CUDA runs are skipped\n");
    }
    /* A reference that disagrees is caught: one generated token changed. */
    gen[NEW - 1] = (gen[NEW - 1] + 1) % V;
    CHECK(write_file(ref, r, 3, NULL));
    CHECK(run(gpt, model, ref, "cpu", "2>/dev/null") == 1);

    unlink(model);
    unlink(ref);
    rmdir(dir);
    free(lg);
    free(lgf);
    free_model();
    return TC_TEST_DONE();
}
