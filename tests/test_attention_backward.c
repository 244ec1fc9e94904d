/* nn_backward.h's attention: tc_nn_scaled_dot_product_attention_backward
 * against (a) central finite differences of tcuda's own forward in float64
 * on the CPU (loss = sum(forward * G) for a fixed random G, each element of
 * q, k and v perturbed), (b) an independent double-precision loop written
 * here (P, dV, dP, dS, dQ, dK by the textbook formulas) in every floating
 * dtype, causal and not, L == S, L < S and L > S, scale given and NULL, 2-,
 * 3- and 4-d operands, head views (q as the transpose(1, 2) of [B, L, H, E]
 * memory), empty sizes, one gradient at a time; 16-bit results also against
 * the float32 result on the same (rounded) inputs. Bad input: a status, a
 * message naming the call, nothing written. The checks run on the CPU, then
 * on the GPU when there is one, which is also compared with the CPU on the
 * same inputs in every dtype. */
#include "nn_check.h"

#define BWD tc_nn_scaled_dot_product_attention_backward

/* One attention problem: nd-dim operands with leading sizes lead. */
typedef struct sdpa_case {
    int nd;
    int64_t lead[2], l, s, e, ev;
} sdpa_case;

static int64_t lead_count(const sdpa_case *c)
{
    int64_t nb = 1;
    for (int i = 0; i < c->nd - 2; i++)
        nb *= c->lead[i];
    return nb;
}

/* The sizes of an operand [..., rows, cols]. */
static void sizes_of(const sdpa_case *c, int64_t rows, int64_t cols, int64_t *sz)
{
    for (int i = 0; i < c->nd - 2; i++)
        sz[i] = c->lead[i];
    sz[c->nd - 2] = rows;
    sz[c->nd - 1] = cols;
}

static bool same_sizes(const tc_tensor *t, int nd, const int64_t *sz)
{
    bool ok = t && tc_tensor_ndim(t) == nd;
    for (int i = 0; ok && i < nd; i++)
        ok = tc_tensor_size(t, i) == sz[i];
    return ok;
}

/* The backward in double by the textbook formulas, for dense q [nb, l, e],
 * k [nb, s, e], v [nb, s, ev] and go [nb, l, ev]: P = softmax(scale q k^T)
 * (masked entries 0), dV = P^T dO, dP = dO V^T, dS = P (dP - rowsum(dP P)),
 * dQ = scale dS K, dK = scale dS^T Q. */
static void ref_backward(const double *q, const double *k, const double *v, const double *go,
                         int64_t nb, int64_t l, int64_t s, int64_t e, int64_t ev, bool causal,
                         double scale, double *dq, double *dk, double *dv)
{
    size_t ls = (size_t)(l * s) + 1;
    double *p = malloc(sizeof(double) * ls), *ds = malloc(sizeof(double) * ls);
    for (int64_t b = 0; b < nb; b++) {
        const double *qb = q + b * l * e, *kb = k + b * s * e, *vb = v + b * s * ev;
        const double *gb = go + b * l * ev;
        for (int64_t i = 0; i < l; i++) {
            double m = -INFINITY, sum = 0;
            for (int64_t j = 0; j < s; j++) {
                double d = 0;
                for (int64_t x = 0; x < e; x++)
                    d += qb[i * e + x] * kb[j * e + x];
                p[i * s + j] = causal && j > i ? -INFINITY : d * scale;
                m = fmax(m, p[i * s + j]);
            }
            for (int64_t j = 0; j < s; j++)
                sum += (p[i * s + j] = exp(p[i * s + j] - m));
            double rs = 0;
            for (int64_t j = 0; j < s; j++) {
                p[i * s + j] /= sum;
                double dp = 0;
                for (int64_t x = 0; x < ev; x++)
                    dp += gb[i * ev + x] * vb[j * ev + x];
                ds[i * s + j] = dp;
                rs += dp * p[i * s + j];
            }
            for (int64_t j = 0; j < s; j++)
                ds[i * s + j] = p[i * s + j] * (ds[i * s + j] - rs);
        }
        for (int64_t j = 0; j < s; j++)
            for (int64_t x = 0; x < ev; x++) {
                double acc = 0;
                for (int64_t i = 0; i < l; i++)
                    acc += p[i * s + j] * gb[i * ev + x];
                dv[(b * s + j) * ev + x] = acc;
            }
        for (int64_t i = 0; i < l; i++)
            for (int64_t x = 0; x < e; x++) {
                double acc = 0;
                for (int64_t j = 0; j < s; j++)
                    acc += ds[i * s + j] * kb[j * e + x];
                dq[(b * l + i) * e + x] = scale * acc;
            }
        for (int64_t j = 0; j < s; j++)
            for (int64_t x = 0; x < e; x++) {
                double acc = 0;
                for (int64_t i = 0; i < l; i++)
                    acc += ds[i * s + j] * qb[i * e + x];
                dk[(b * s + j) * e + x] = scale * acc;
            }
    }
    free(p);
    free(ds);
}

/* The three gradients of one call, as tensors and as values. */
typedef struct grads {
    tc_tensor *t[3];
} grads;

static void release_grads(grads *g)
{
    for (int i = 0; i < 3; i++)
        tc_tensor_release(g->t[i]);
}

/* Runs the backward on (go, q, k, v) and checks each gradient's sizes,
 * dtype, contiguity and values against ref (dq, dk, dv) within the dtype's
 * tolerance times mul. */
static void check_against(const char *what, const tc_tensor *go, const tc_tensor *q,
                          const tc_tensor *k, const tc_tensor *v, bool causal, const double *scale,
                          double *const ref[3], double mul, grads *keep)
{
    grads g = {{NULL, NULL, NULL}};
    CHECK_OK(BWD(go, q, k, v, causal, scale, &g.t[0], &g.t[1], &g.t[2]));
    const tc_tensor *like[3] = {q, k, v};
    static const char *names[3] = {"dq", "dk", "dv"};
    for (int i = 0; i < 3; i++) {
        char name[160];
        int len = snprintf(name, sizeof name, "%s %s", what, names[i]);
        if (len < 0 || len >= (int)sizeof name) /* a long case name is cut, not an error */
            name[sizeof name - 1] = '\0';
        tc_dtype dt = tc_tensor_dtype(like[i]);
        bool shaped = same_sizes(g.t[i], tc_tensor_ndim(like[i]), tc_tensor_sizes(like[i]));
        CHECK(shaped && tc_tensor_is_contiguous(g.t[i]) && tc_tensor_dtype(g.t[i]) == dt);
        if (shaped)
            near_ref(name, dt, g.t[i], ref[i], tc_tensor_numel(like[i]), mul);
    }
    if (keep)
        *keep = g;
    else
        release_grads(&g);
}

/* Each query row's log-sum-exp of its scaled, masked scores in double, for
 * dense q [nb, l, e] and k [nb, s, e] (-inf for s == 0). */
static void ref_lse(const double *q, const double *k, int64_t nb, int64_t l, int64_t s, int64_t e,
                    bool causal, double scale, double *lse)
{
    for (int64_t b = 0; b < nb; b++)
        for (int64_t i = 0; i < l; i++) {
            double m = -INFINITY, sum = 0;
            for (int pass = 0; pass < 2; pass++)
                for (int64_t j = 0; j < s && !(causal && j > i); j++) {
                    double d = 0;
                    for (int64_t x = 0; x < e; x++)
                        d += q[(b * l + i) * e + x] * k[(b * s + j) * e + x];
                    if (pass == 0)
                        m = fmax(m, d * scale);
                    else
                        sum += exp(d * scale - m);
                }
            lse[b * l + i] = m == -INFINITY ? -INFINITY : m + log(sum);
        }
}

/* The training pair on (go, q, k, v) with host values qv, kv, vv (dense
 * [nb, rows, cols]): tc_nn_scaled_dot_product_attention_lse's out against
 * the double forward and its lse against ref_lse (of the computation
 * dtype), then tc_nn_scaled_dot_product_attention_backward_lse's gradients
 * against ref (dq, dk, dv), within the dtypes' tolerances times mul. */
static void check_lse_pair(const char *what, const tc_tensor *go, const tc_tensor *q,
                           const tc_tensor *k, const tc_tensor *v, const double *qv,
                           const double *kv, const double *vv, bool causal, const double *scale,
                           double *const ref[3], double mul)
{
    int nd = tc_tensor_ndim(q);
    int64_t l = tc_tensor_size(q, nd - 2), s = tc_tensor_size(k, nd - 2);
    int64_t e = tc_tensor_size(q, nd - 1), ev = tc_tensor_size(v, nd - 1), nb = 1;
    for (int i = 0; i < nd - 2; i++)
        nb *= tc_tensor_size(q, i);
    tc_dtype dt = tc_tensor_dtype(q), cdt = dt == TC_FLOAT64 ? TC_FLOAT64 : TC_FLOAT32;
    double sc = scale ? *scale : 1 / sqrt((double)e);
    double *o = malloc(sizeof(double) * (size_t)(nb * l * ev + 1));
    double *m = malloc(sizeof(double) * (size_t)(nb * l + 1));
    ref_sdpa(qv, kv, vv, nb, l, s, e, ev, causal, sc, o);
    ref_lse(qv, kv, nb, l, s, e, causal, sc, m);
    tc_tensor *out = NULL, *lse = NULL;
    char name[200];
    CHECK_OK(tc_nn_scaled_dot_product_attention_lse(q, k, v, causal, scale, &out, &lse));
    CHECK(same_sizes(lse, nd - 1, tc_tensor_sizes(q)) && tc_tensor_dtype(lse) == cdt);
    snprintf(name, sizeof name, "%s, the lse forward's out", what);
    near_ref(name, dt, out, o, nb * l * ev, mul);
    snprintf(name, sizeof name, "%s, the lse forward's lse", what);
    near_ref(name, cdt, lse, m, nb * l, mul);
    grads g = {{NULL, NULL, NULL}};
    CHECK_OK(tc_nn_scaled_dot_product_attention_backward_lse(go, q, k, v, out, lse, causal, scale,
                                                             &g.t[0], &g.t[1], &g.t[2]));
    const tc_tensor *like[3] = {q, k, v};
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "%s, backward from lse, gradient %d", what, i);
        CHECK(g.t[i] && tc_tensor_is_contiguous(g.t[i]) && tc_tensor_dtype(g.t[i]) == dt);
        near_ref(name, dt, g.t[i], ref[i], tc_tensor_numel(like[i]), mul);
    }
    /* one gradient at a time: the others stay NULL */
    tc_tensor *one = NULL, *none = NULL;
    CHECK_OK(tc_nn_scaled_dot_product_attention_backward_lse(go, q, k, v, out, lse, causal, scale,
                                                             NULL, &one, NULL));
    snprintf(name, sizeof name, "%s, backward from lse, dk alone", what);
    near_ref(name, dt, one, ref[1], tc_tensor_numel(k), mul);
    CHECK(none == NULL);
    tc_tensor_release(one);
    release_grads(&g);
    tc_tensor_release(out);
    tc_tensor_release(lse);
    free(o);
    free(m);
}

/* Case c in dtype dt on dev against the double loop; each gradient alone
 * too (the others NULL); 16-bit results also against float32 on the same
 * rounded inputs. */
static void check_case(tc_device dev, const sdpa_case *c, tc_dtype dt, bool causal,
                       const double *scale)
{
    int nd = c->nd;
    int64_t qs[4], ks[4], vs[4], os[4], nb = lead_count(c);
    sizes_of(c, c->l, c->e, qs);
    sizes_of(c, c->s, c->e, ks);
    sizes_of(c, c->s, c->ev, vs);
    sizes_of(c, c->l, c->ev, os);
    double *q, *k, *v, *go;
    tc_tensor *tq = rnd(dev, nd, qs, dt, -1, 1, &q), *tk = rnd(dev, nd, ks, dt, -1, 1, &k);
    tc_tensor *tv = rnd(dev, nd, vs, dt, -1, 1, &v), *tg = rnd(dev, nd, os, dt, -1, 1, &go);
    double *ref[3];
    int64_t counts[3] = {nb * c->l * c->e, nb * c->s * c->e, nb * c->s * c->ev};
    for (int i = 0; i < 3; i++)
        ref[i] = malloc(sizeof(double) * (size_t)(counts[i] + 1));
    double sc = scale ? *scale : 1 / sqrt((double)c->e);
    ref_backward(q, k, v, go, nb, c->l, c->s, c->e, c->ev, causal, sc, ref[0], ref[1], ref[2]);
    char what[160];
    snprintf(what, sizeof what, "sdpa backward %d-d L=%lld S=%lld%s%s", nd, (long long)c->l,
             (long long)c->s, causal ? " causal" : "", scale ? " scaled" : "");
    grads all = {{NULL, NULL, NULL}};
    check_against(what, tg, tq, tk, tv, causal, scale, ref, 4, &all);
    check_lse_pair(what, tg, tq, tk, tv, q, k, v, causal, scale, ref, 4);
    /* one gradient at a time: the same values */
    for (int i = 0; i < 3; i++) {
        tc_tensor *one[3] = {NULL, NULL, NULL};
        CHECK_OK(BWD(tg, tq, tk, tv, causal, scale, i == 0 ? &one[0] : NULL,
                     i == 1 ? &one[1] : NULL, i == 2 ? &one[2] : NULL));
        CHECK(one[(i + 1) % 3] == NULL && one[(i + 2) % 3] == NULL);
        near_ref("sdpa backward, one gradient", dt, one[i], ref[i], counts[i], 4);
        tc_tensor_release(one[i]);
    }
    if (dt == TC_FLOAT16 || dt == TC_BFLOAT16) { /* against float32 on the same inputs */
        tc_tensor *f[4] = {NULL, NULL, NULL, NULL}, *src[4] = {tg, tq, tk, tv};
        for (int i = 0; i < 4; i++)
            CHECK_OK(tc_tensor_to(src[i], dev, TC_FLOAT32, false, &f[i]));
        grads g32 = {{NULL, NULL, NULL}};
        CHECK_OK(BWD(f[0], f[1], f[2], f[3], causal, scale, &g32.t[0], &g32.t[1], &g32.t[2]));
        for (int i = 0; i < 3; i++) {
            double *r32 = tc_test_values(g32.t[i]);
            near_ref("sdpa backward 16-bit against float32", dt, all.t[i], r32, counts[i], 2);
            free(r32);
        }
        release_grads(&g32);
        for (int i = 0; i < 4; i++)
            tc_tensor_release(f[i]);
    }
    release_grads(&all);
    tc_tensor_release(tq), tc_tensor_release(tk), tc_tensor_release(tv), tc_tensor_release(tg);
    free(q), free(k), free(v), free(go);
    for (int i = 0; i < 3; i++)
        free(ref[i]);
}

static const sdpa_case CASES[] = {
    {3, {2, 0}, 5, 5, 8, 8},     /* L == S */
    {3, {3, 0}, 4, 7, 6, 5},     /* L < S, Ev != E */
    {4, {2, 3}, 7, 4, 8, 4},     /* L > S: rows past S see every key */
    {2, {0, 0}, 6, 6, 4, 4},     /* no batch dims */
    {4, {1, 2}, 33, 300, 16, 16} /* longer rows */
};

static void test_reference(tc_device dev)
{
    const double scale = 0.3;
    for (size_t c = 0; c < sizeof CASES / sizeof CASES[0]; c++)
        for (int d = 0; d < 4; d++)
            for (int mode = 0; mode < 4; mode++)
                check_case(dev, &CASES[c], FLOATS[d], mode & 1, mode & 2 ? &scale : NULL);
}

/* Head views: q, k, v and grad_out as the transpose(1, 2) of [B, L, H, E]
 * memory (the heads of one projection), as a GPT block hands them over. */
static void test_head_views(tc_device dev)
{
    const int64_t b = 2, h = 3, l = 6, s = 5, e = 4;
    for (int d = 0; d < 4; d++)
        for (int causal = 0; causal < 2; causal++) {
            tc_dtype dt = FLOATS[d];
            int64_t qm[4] = {b, l, h, e}, km[4] = {b, s, h, e};
            tc_tensor *mem[4] = {rnd(dev, 4, qm, dt, -1, 1, NULL), rnd(dev, 4, km, dt, -1, 1, NULL),
                                 rnd(dev, 4, km, dt, -1, 1, NULL),
                                 rnd(dev, 4, qm, dt, -1, 1, NULL)};
            tc_tensor *t[4] = {NULL, NULL, NULL, NULL}; /* q, k, v, grad_out */
            double *val[4];
            for (int i = 0; i < 4; i++) {
                CHECK_OK(tc_tensor_transpose(mem[i], 1, 2, &t[i]));
                val[i] = tc_test_values(t[i]); /* [B, H, rows, E] order */
            }
            CHECK(!tc_tensor_is_contiguous(t[0]));
            double *ref[3] = {malloc(sizeof(double) * (size_t)(b * h * l * e)),
                              malloc(sizeof(double) * (size_t)(b * h * s * e)),
                              malloc(sizeof(double) * (size_t)(b * h * s * e))};
            ref_backward(val[0], val[1], val[2], val[3], b * h, l, s, e, e, causal,
                         1 / sqrt((double)e), ref[0], ref[1], ref[2]);
            check_against(causal ? "sdpa backward head views causal" : "sdpa backward head views",
                          t[3], t[0], t[1], t[2], causal, NULL, ref, 4, NULL);
            check_lse_pair("sdpa head views", t[3], t[0], t[1], t[2], val[0], val[1], val[2],
                           causal, NULL, ref, 4);
            for (int i = 0; i < 4; i++) {
                tc_tensor_release(mem[i]);
                tc_tensor_release(t[i]);
                free(val[i]);
            }
            for (int i = 0; i < 3; i++)
                free(ref[i]);
        }
}

/* L, S or a leading size 0: zeros of the inputs' shapes (sums of nothing);
 * Ev 0: dO is empty, so dQ and dK are 0 and dV is empty. */
static void test_empty(tc_device dev)
{
    const sdpa_case cases[] = {{3, {2, 0}, 0, 5, 4, 3},
                               {3, {2, 0}, 5, 0, 4, 3},
                               {4, {0, 2}, 3, 3, 4, 4},
                               {3, {2, 0}, 3, 4, 4, 0}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int d = 0; d < 4; d++)
            for (int causal = 0; causal < 2; causal++) {
                const sdpa_case *sc = &cases[c];
                int64_t qs[4], ks[4], vs[4], os[4];
                sizes_of(sc, sc->l, sc->e, qs);
                sizes_of(sc, sc->s, sc->e, ks);
                sizes_of(sc, sc->s, sc->ev, vs);
                sizes_of(sc, sc->l, sc->ev, os);
                tc_tensor *q = rnd(dev, sc->nd, qs, FLOATS[d], -1, 1, NULL);
                tc_tensor *k = rnd(dev, sc->nd, ks, FLOATS[d], -1, 1, NULL);
                tc_tensor *v = rnd(dev, sc->nd, vs, FLOATS[d], -1, 1, NULL);
                tc_tensor *go = rnd(dev, sc->nd, os, FLOATS[d], -1, 1, NULL);
                double zeros[64] = {0};
                double *ref[3] = {zeros, zeros, zeros};
                check_against("sdpa backward of empty sizes", go, q, k, v, causal, NULL, ref, 1,
                              NULL);
                double *qv = tc_test_values(q), *kv = tc_test_values(k), *vv = tc_test_values(v);
                check_lse_pair("sdpa lse pair of empty sizes", go, q, k, v, qv, kv, vv, causal,
                               NULL, ref, 1);
                free(qv), free(kv), free(vv);
                tc_tensor_release(q), tc_tensor_release(k), tc_tensor_release(v);
                tc_tensor_release(go);
            }
}

/* E and Ev 0: every operand is empty, and B * L * S (2^80 here) is past
 * int64_t though each operand's sizes multiply within it; the gradients are
 * empty tensors of the inputs' shapes. */
static void test_huge_empty(tc_device dev)
{
    const int64_t big = (int64_t)1 << 20;
    int64_t qs[4] = {big, big, big, 0}, ks[4] = {big, big, big, 0};
    tc_tensor *q = NULL, *k = NULL, *v = NULL, *go = NULL;
    CHECK_OK(tc_tensor_zeros(4, qs, TC_FLOAT32, dev, &q));
    CHECK_OK(tc_tensor_zeros(4, ks, TC_FLOAT32, dev, &k));
    CHECK_OK(tc_tensor_zeros(4, ks, TC_FLOAT32, dev, &v));
    CHECK_OK(tc_tensor_zeros(4, qs, TC_FLOAT32, dev, &go));
    tc_tensor *g[3] = {NULL, NULL, NULL};
    CHECK_OK(BWD(go, q, k, v, true, NULL, &g[0], &g[1], &g[2]));
    CHECK(same_sizes(g[0], 4, qs) && same_sizes(g[1], 4, ks) && same_sizes(g[2], 4, ks));
    for (int i = 0; i < 3; i++)
        tc_tensor_release(g[i]);
    tc_tensor_release(q), tc_tensor_release(k), tc_tensor_release(v), tc_tensor_release(go);
}

/* ---- (a) finite differences of tcuda's own forward ------------------------------------- */

/* sum(forward(q, k, v) * g) in float64 on the CPU from host values. */
static double fd_loss(const sdpa_case *c, const double *q, const double *k, const double *v,
                      const double *g, bool causal, const double *scale)
{
    int64_t qs[4], ks[4], vs[4];
    sizes_of(c, c->l, c->e, qs);
    sizes_of(c, c->s, c->e, ks);
    sizes_of(c, c->s, c->ev, vs);
    tc_tensor *tq = NULL, *tk = NULL, *tv = NULL, *y = NULL;
    CHECK_OK(tc_tensor_from_data(q, c->nd, qs, TC_FLOAT64, CPU, &tq));
    CHECK_OK(tc_tensor_from_data(k, c->nd, ks, TC_FLOAT64, CPU, &tk));
    CHECK_OK(tc_tensor_from_data(v, c->nd, vs, TC_FLOAT64, CPU, &tv));
    CHECK_OK(tc_nn_scaled_dot_product_attention(tq, tk, tv, causal, scale, &y));
    double loss = 0;
    if (y) {
        double *o = tc_test_values(y);
        for (int64_t i = 0; i < tc_tensor_numel(y); i++)
            loss += o[i] * g[i];
        free(o);
    }
    tc_tensor_release(tq), tc_tensor_release(tk), tc_tensor_release(tv), tc_tensor_release(y);
    return loss;
}

static void fd_case(const sdpa_case *c, bool causal, const double *scale)
{
    int64_t nb = lead_count(c),
            n[4] = {nb * c->l * c->e, nb * c->s * c->e, nb * c->s * c->ev, nb * c->l * c->ev};
    double *x[4]; /* q, k, v, G */
    tc_tensor *t[4];
    int64_t sz[4][4];
    sizes_of(c, c->l, c->e, sz[0]);
    sizes_of(c, c->s, c->e, sz[1]);
    sizes_of(c, c->s, c->ev, sz[2]);
    sizes_of(c, c->l, c->ev, sz[3]);
    for (int i = 0; i < 4; i++)
        t[i] = rnd(CPU, c->nd, sz[i], TC_FLOAT64, -1, 1, &x[i]);
    grads g = {{NULL, NULL, NULL}};
    CHECK_OK(BWD(t[3], t[0], t[1], t[2], causal, scale, &g.t[0], &g.t[1], &g.t[2]));
    const double h = 1e-5;
    bool ok = true;
    for (int w = 0; w < 3 && g.t[w]; w++) {
        double *an = tc_test_values(g.t[w]);
        for (int64_t i = 0; i < n[w]; i++) {
            double keep = x[w][i];
            x[w][i] = keep + h;
            double up = fd_loss(c, x[0], x[1], x[2], x[3], causal, scale);
            x[w][i] = keep - h;
            double down = fd_loss(c, x[0], x[1], x[2], x[3], causal, scale);
            x[w][i] = keep;
            double num = (up - down) / (2 * h);
            if (fabs(num - an[i]) > 1e-7 * (1 + fabs(num))) {
                fprintf(stderr,
                        "finite differences (L=%lld S=%lld%s): operand %d element %lld: "
                        "analytic %.12g, numeric %.12g\n",
                        (long long)c->l, (long long)c->s, causal ? " causal" : "", w, (long long)i,
                        an[i], num);
                ok = false;
            }
        }
        free(an);
    }
    CHECK(ok);
    release_grads(&g);
    for (int i = 0; i < 4; i++) {
        tc_tensor_release(t[i]);
        free(x[i]);
    }
}

static void test_finite_differences(void)
{
    const sdpa_case cases[] = {{3, {2, 0}, 3, 4, 3, 2},
                               {3, {1, 0}, 5, 3, 2, 3}, /* L > S */
                               {4, {1, 2}, 3, 3, 4, 2},
                               {2, {0, 0}, 4, 4, 3, 3}};
    const double scale = 0.7;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int mode = 0; mode < 4; mode++)
            fd_case(&cases[c], mode & 1, mode & 2 ? &scale : NULL);
}

/* ---- the GPU against the CPU ------------------------------------------------------------ */

/* Every dtype: the same inputs on both devices (a head view among them);
 * the GPU's gradients within the dtype's tolerance of the CPU's. */
static void test_gpu_parity(void)
{
    for (size_t c = 0; c < sizeof CASES / sizeof CASES[0]; c++)
        for (int d = 0; d < 4; d++)
            for (int causal = 0; causal < 2; causal++) {
                const sdpa_case *sc = &CASES[c];
                tc_dtype dt = FLOATS[d];
                int64_t sz[4][4];
                sizes_of(sc, sc->l, sc->ev, sz[0]);
                sizes_of(sc, sc->l, sc->e, sz[1]);
                sizes_of(sc, sc->s, sc->e, sz[2]);
                sizes_of(sc, sc->s, sc->ev, sz[3]);
                tc_tensor *cpu[4], *gpu[4]; /* grad_out, q, k, v */
                for (int i = 0; i < 4; i++) {
                    cpu[i] = rnd(CPU, sc->nd, sz[i], dt, -1, 1, NULL);
                    gpu[i] = NULL;
                    CHECK_OK(tc_tensor_to(cpu[i], GPU, dt, false, &gpu[i]));
                }
                grads gc = {{NULL, NULL, NULL}};
                CHECK_OK(BWD(cpu[0], cpu[1], cpu[2], cpu[3], causal, NULL, &gc.t[0], &gc.t[1],
                             &gc.t[2]));
                double *ref[3];
                for (int i = 0; i < 3; i++)
                    ref[i] = tc_test_values(gc.t[i]);
                check_against(causal ? "sdpa backward GPU against CPU causal"
                                     : "sdpa backward GPU against CPU",
                              gpu[0], gpu[1], gpu[2], gpu[3], causal, NULL, ref, 2, NULL);
                for (int i = 0; i < 3; i++)
                    free(ref[i]);
                release_grads(&gc);
                for (int i = 0; i < 4; i++) {
                    tc_tensor_release(cpu[i]);
                    tc_tensor_release(gpu[i]);
                }
            }
}

/* ---- bad input ------------------------------------------------------------------------ */

/* The call fails with `want`, names itself, and leaves every output alone. */
static void bad(tc_status got, tc_status want, tc_tensor *const out[3], tc_tensor *sentinel)
{
    CHECK_STATUS(got, want);
    CHECK(strstr(tc_last_error(), "tc_nn_scaled_dot_product_attention_backward") ==
          tc_last_error());
    CHECK(out[0] == sentinel && out[1] == sentinel && out[2] == sentinel);
}

static void test_bad_input(tc_device dev)
{
    static char mark;
    tc_tensor *const S = (tc_tensor *)(void *)&mark;
    tc_tensor *o[3] = {S, S, S};
    tc_tensor *q = rnd(dev, 3, (int64_t[]){2, 3, 4}, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *k = rnd(dev, 3, (int64_t[]){2, 5, 4}, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *v = rnd(dev, 3, (int64_t[]){2, 5, 6}, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *go = rnd(dev, 3, (int64_t[]){2, 3, 6}, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *k64 = rnd(dev, 3, (int64_t[]){2, 5, 4}, TC_FLOAT64, -1, 1, NULL);
    tc_tensor *go64 = rnd(dev, 3, (int64_t[]){2, 3, 6}, TC_FLOAT64, -1, 1, NULL);
    tc_tensor *ke = rnd(dev, 3, (int64_t[]){2, 5, 3}, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *vs = rnd(dev, 3, (int64_t[]){2, 4, 6}, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *kb = rnd(dev, 3, (int64_t[]){1, 5, 4}, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *go_ev = rnd(dev, 3, (int64_t[]){2, 3, 4}, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *go_l = rnd(dev, 3, (int64_t[]){2, 5, 6}, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *go_b = rnd(dev, 3, (int64_t[]){1, 3, 6}, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *go_2d = rnd(dev, 2, (int64_t[]){3, 6}, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *w = rnd(dev, 1, (int64_t[]){4}, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *qi = NULL, *dead = NULL;
    CHECK_OK(tc_tensor_zeros(3, (int64_t[]){2, 3, 4}, TC_INT32, dev, &qi));
    CHECK_OK(tc_tensor_zeros(3, (int64_t[]){2, 3, 4}, TC_FLOAT32, dev, &dead));
    tc_tensor_release(dead);

    /* the good call works, so each bad one below fails for its one reason */
    CHECK_OK(BWD(go, q, k, v, true, NULL, &o[0], &o[1], &o[2]));
    for (int i = 0; i < 3; i++) {
        CHECK(o[i] != S);
        tc_tensor_release(o[i]);
        o[i] = S;
    }
    tc_status A = TC_ERROR_INVALID_ARGUMENT, H = TC_ERROR_INVALID_HANDLE, D = TC_ERROR_DTYPE,
              Z = TC_ERROR_SHAPE;
    bad(BWD(NULL, q, k, v, false, NULL, &o[0], &o[1], &o[2]), A, o, S);
    bad(BWD(go, NULL, k, v, false, NULL, &o[0], &o[1], &o[2]), A, o, S);
    bad(BWD(go, q, NULL, v, false, NULL, &o[0], &o[1], &o[2]), A, o, S);
    bad(BWD(go, q, k, NULL, false, NULL, &o[0], &o[1], &o[2]), A, o, S);
    bad(BWD(go, q, k, v, false, NULL, NULL, NULL, NULL), A, o, S);
    bad(BWD(dead, q, k, v, false, NULL, &o[0], &o[1], &o[2]), H, o, S);
    bad(BWD(go, dead, k, v, false, NULL, &o[0], &o[1], &o[2]), H, o, S);
    bad(BWD(go, q, dead, v, false, NULL, &o[0], &o[1], &o[2]), H, o, S);
    bad(BWD(go, q, k, dead, false, NULL, &o[0], &o[1], &o[2]), H, o, S);
    bad(BWD(go, qi, k, v, false, NULL, &o[0], &o[1], &o[2]), D, o, S);
    bad(BWD(go, q, k64, v, false, NULL, &o[0], &o[1], &o[2]), D, o, S);
    bad(BWD(go64, q, k, v, false, NULL, &o[0], &o[1], &o[2]), D, o, S);
    bad(BWD(go, q, ke, v, false, NULL, &o[0], &o[1], &o[2]), Z, o, S);   /* k's E */
    bad(BWD(go, q, k, vs, false, NULL, &o[0], &o[1], &o[2]), Z, o, S);   /* v's S */
    bad(BWD(go, q, kb, kb, false, NULL, &o[0], &o[1], &o[2]), Z, o, S);  /* leading sizes */
    bad(BWD(go_ev, q, k, v, false, NULL, &o[0], &o[1], &o[2]), Z, o, S); /* grad_out's Ev */
    bad(BWD(go_l, q, k, v, false, NULL, &o[0], &o[1], &o[2]), Z, o, S);  /* grad_out's L */
    bad(BWD(go_b, q, k, v, false, NULL, &o[0], &o[1], &o[2]), Z, o, S);  /* grad_out's batch */
    bad(BWD(go_2d, q, k, v, false, NULL, &o[0], &o[1], &o[2]), Z, o, S); /* grad_out's dims */
    bad(BWD(w, w, w, w, false, NULL, &o[0], &o[1], &o[2]), Z, o, S);     /* 1-d */
    /* the one gradient asked for is not written either */
    bad(BWD(go_l, q, k, v, false, NULL, NULL, &o[1], NULL), Z, o, S);
    if (tc_is_available()) { /* operands on two devices */
        tc_device other = dev.type == TC_CPU ? GPU : CPU;
        tc_tensor *go_other = NULL, *v_other = NULL;
        CHECK_OK(tc_tensor_to(go, other, TC_FLOAT32, false, &go_other));
        CHECK_OK(tc_tensor_to(v, other, TC_FLOAT32, false, &v_other));
        bad(BWD(go_other, q, k, v, false, NULL, &o[0], &o[1], &o[2]), TC_ERROR_DEVICE_MISMATCH, o,
            S);
        bad(BWD(go, q, k, v_other, false, NULL, &o[0], &o[1], &o[2]), TC_ERROR_DEVICE_MISMATCH, o,
            S);
        tc_tensor_release(go_other);
        tc_tensor_release(v_other);
    }
    tc_tensor *all[] = {q, k, v, go, k64, go64, ke, vs, kb, go_ev, go_l, go_b, go_2d, w, qi};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tc_tensor_release(all[i]);
}

/* The lse pair's bad input: a status, a message naming the call, no output
 * written. */
static void bad_pair(const char *fn, tc_status got, tc_status want, tc_tensor *const *out, int n,
                     tc_tensor *sentinel)
{
    CHECK_STATUS(got, want);
    CHECK(strstr(tc_last_error(), fn) == tc_last_error());
    for (int i = 0; i < n; i++)
        CHECK(out[i] == sentinel);
}

#define FWD_LSE tc_nn_scaled_dot_product_attention_lse
#define BWD_LSE tc_nn_scaled_dot_product_attention_backward_lse

static void test_bad_lse_pair(tc_device dev)
{
    static char mark;
    tc_tensor *const S = (tc_tensor *)(void *)&mark;
    tc_tensor *o[3] = {S, S, S};
    const char *F = "tc_nn_scaled_dot_product_attention_lse";
    const char *B = "tc_nn_scaled_dot_product_attention_backward_lse";
    tc_tensor *q = rnd(dev, 3, (int64_t[]){2, 3, 4}, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *k = rnd(dev, 3, (int64_t[]){2, 5, 4}, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *v = rnd(dev, 3, (int64_t[]){2, 5, 6}, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *go = rnd(dev, 3, (int64_t[]){2, 3, 6}, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *ke = rnd(dev, 3, (int64_t[]){2, 5, 3}, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *o_l = rnd(dev, 3, (int64_t[]){2, 4, 6}, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *o64 = rnd(dev, 3, (int64_t[]){2, 3, 6}, TC_FLOAT64, -1, 1, NULL);
    tc_tensor *lse64 = rnd(dev, 2, (int64_t[]){2, 3}, TC_FLOAT64, -1, 1, NULL);
    tc_tensor *lse16 = rnd(dev, 2, (int64_t[]){2, 3}, TC_BFLOAT16, -1, 1, NULL);
    tc_tensor *lse_l = rnd(dev, 2, (int64_t[]){2, 4}, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *lse_3d = rnd(dev, 3, (int64_t[]){2, 3, 1}, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *lse_1d = rnd(dev, 1, (int64_t[]){6}, TC_FLOAT32, -1, 1, NULL);
    tc_tensor *qi = NULL, *dead = NULL, *out = NULL, *lse = NULL;
    CHECK_OK(tc_tensor_zeros(3, (int64_t[]){2, 3, 4}, TC_INT32, dev, &qi));
    CHECK_OK(tc_tensor_zeros(2, (int64_t[]){2, 3}, TC_FLOAT32, dev, &dead));
    tc_tensor_release(dead);
    tc_status A = TC_ERROR_INVALID_ARGUMENT, H = TC_ERROR_INVALID_HANDLE, D = TC_ERROR_DTYPE,
              Z = TC_ERROR_SHAPE;

    /* the forward: the good call, then each bad one */
    CHECK_OK(FWD_LSE(q, k, v, true, NULL, &out, &lse));
    CHECK(out && lse && same_sizes(lse, 2, (int64_t[]){2, 3}));
    bad_pair(F, FWD_LSE(NULL, k, v, false, NULL, &o[0], &o[1]), A, o, 2, S);
    bad_pair(F, FWD_LSE(q, NULL, v, false, NULL, &o[0], &o[1]), A, o, 2, S);
    bad_pair(F, FWD_LSE(q, k, NULL, false, NULL, &o[0], &o[1]), A, o, 2, S);
    bad_pair(F, FWD_LSE(q, k, v, false, NULL, NULL, &o[1]), A, o, 2, S);
    bad_pair(F, FWD_LSE(q, k, v, false, NULL, &o[0], NULL), A, o, 2, S);
    bad_pair(F, FWD_LSE(lse_1d, k, v, false, NULL, &o[0], &o[1]), Z, o, 2, S); /* 1-d q */
    bad_pair(F, FWD_LSE(qi, k, v, false, NULL, &o[0], &o[1]), D, o, 2, S);
    bad_pair(F, FWD_LSE(q, ke, v, false, NULL, &o[0], &o[1]), Z, o, 2, S);
    bad_pair(F, FWD_LSE(q, k, o64, false, NULL, &o[0], &o[1]), D, o, 2, S);

    /* the backward: the good call, then each bad one */
    CHECK_OK(BWD_LSE(go, q, k, v, out, lse, true, NULL, &o[0], &o[1], &o[2]));
    for (int i = 0; i < 3; i++) {
        CHECK(o[i] != S);
        tc_tensor_release(o[i]);
        o[i] = S;
    }
    bad_pair(B, BWD_LSE(go, q, k, v, NULL, lse, true, NULL, &o[0], &o[1], &o[2]), A, o, 3, S);
    bad_pair(B, BWD_LSE(go, q, k, v, out, NULL, true, NULL, &o[0], &o[1], &o[2]), A, o, 3, S);
    bad_pair(B, BWD_LSE(NULL, q, k, v, out, lse, true, NULL, &o[0], &o[1], &o[2]), A, o, 3, S);
    bad_pair(B, BWD_LSE(go, NULL, k, v, out, lse, true, NULL, &o[0], &o[1], &o[2]), A, o, 3, S);
    bad_pair(B, BWD_LSE(go, q, k, v, out, lse, true, NULL, NULL, NULL, NULL), A, o, 3, S);
    bad_pair(B, BWD_LSE(go, q, k, v, dead, lse, true, NULL, &o[0], &o[1], &o[2]), H, o, 3, S);
    bad_pair(B, BWD_LSE(go, q, k, v, out, dead, true, NULL, &o[0], &o[1], &o[2]), H, o, 3, S);
    bad_pair(B, BWD_LSE(go, q, k, v, o_l, lse, true, NULL, &o[0], &o[1], &o[2]), Z, o, 3, S);
    bad_pair(B, BWD_LSE(go, q, k, v, o64, lse, true, NULL, &o[0], &o[1], &o[2]), D, o, 3, S);
    bad_pair(B, BWD_LSE(go, q, k, v, out, lse64, true, NULL, &o[0], &o[1], &o[2]), D, o, 3, S);
    bad_pair(B, BWD_LSE(go, q, k, v, out, lse16, true, NULL, &o[0], &o[1], &o[2]), D, o, 3, S);
    bad_pair(B, BWD_LSE(go, q, k, v, out, lse_l, true, NULL, &o[0], &o[1], &o[2]), Z, o, 3, S);
    bad_pair(B, BWD_LSE(go, q, k, v, out, lse_3d, true, NULL, &o[0], &o[1], &o[2]), Z, o, 3, S);
    bad_pair(B, BWD_LSE(go, q, k, v, out, lse_1d, true, NULL, &o[0], &o[1], &o[2]), Z, o, 3, S);
    bad_pair(B, BWD_LSE(o_l, q, k, v, out, lse, true, NULL, &o[0], &o[1], &o[2]), Z, o, 3, S);
    bad_pair(B, BWD_LSE(go, q, ke, v, out, lse, true, NULL, &o[0], &o[1], &o[2]), Z, o, 3, S);
    /* the one gradient asked for is not written either */
    bad_pair(B, BWD_LSE(go, q, k, v, out, lse_l, true, NULL, NULL, &o[1], NULL), Z, o, 3, S);
    if (tc_is_available()) { /* lse and out on another device */
        tc_device other = dev.type == TC_CPU ? GPU : CPU;
        tc_tensor *lse_other = NULL, *out_other = NULL;
        CHECK_OK(tc_tensor_to(lse, other, TC_FLOAT32, false, &lse_other));
        CHECK_OK(tc_tensor_to(out, other, TC_FLOAT32, false, &out_other));
        bad_pair(B, BWD_LSE(go, q, k, v, out, lse_other, true, NULL, &o[0], &o[1], &o[2]),
                 TC_ERROR_DEVICE_MISMATCH, o, 3, S);
        bad_pair(B, BWD_LSE(go, q, k, v, out_other, lse, true, NULL, &o[0], &o[1], &o[2]),
                 TC_ERROR_DEVICE_MISMATCH, o, 3, S);
        tc_tensor_release(lse_other);
        tc_tensor_release(out_other);
    }
    tc_tensor *all[] = {q,     k,     v,      go,     ke, o_l, o64, lse64,
                        lse16, lse_l, lse_3d, lse_1d, qi, out, lse};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tc_tensor_release(all[i]);
}

static void run_all(tc_device dev)
{
    test_bad_lse_pair(dev);
    test_reference(dev);
    test_head_views(dev);
    test_empty(dev);
    test_huge_empty(dev);
    test_bad_input(dev);
}

int main(void)
{
    tc_test_init();
    test_finite_differences();
    run_all(CPU);
    if (tc_is_available()) {
        run_all(GPU);
        test_gpu_parity();
        CHECK_OK(tc_synchronize(-1));
    } else {
        printf("no GPU: the GPU checks are skipped\n");
    }
    return TC_TEST_DONE();
}
