/* CPU/GPU parity: every tensor operation runs on the CPU (which computes in
 * double precision) and on the GPU over the same random inputs, for several
 * shapes (broadcasting, non-contiguous, empty, 0-d) and dtypes; integer and
 * bool results must match exactly, floating ones within the dtype's
 * tolerance; refusals must match too. The tables hold the element-wise ops
 * (math, clamp, remainder, logical), the in-place forms, reductions with
 * indices and cumsum. Also: factories, copies in every direction with
 * conversion and strides, non_blocking copies into pinned memory,
 * record_stream, device mismatch, *_like and new_* on a GPU (and the seed's
 * new_full / new_tensor example), copy_'s overlap
 * rules, and GPU-to-GPU copies when there are two GPUs. Needs a GPU. */
#include <math.h>
#include <stdlib.h>

#include "tc_test.h"

static const tc_device CPU = {TC_CPU, -1}, GPU = {TC_CUDA, -1};

static double tol_of(tc_dtype d)
{
    switch (d) {
    case TC_FLOAT16: return 2e-3;
    case TC_BFLOAT16: return 1.6e-2;
    case TC_FLOAT32: return 2e-5;
    case TC_FLOAT64: return 1e-12;
    default: return 0;
    }
}

/* Random CPU tensor of `dtype` with values in [lo, hi) (integers floored). */
static tc_tensor *rand_cpu(int ndim, const int64_t *sizes, tc_dtype dtype, double lo, double hi)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= sizes[i];
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) {
        double x = lo + (hi - lo) * tc_test_rand_uniform();
        v[i] = dtype == TC_BOOL ? (x > (lo + hi) / 2) : tc_dtype_is_floating(dtype) ? x : floor(x);
    }
    tc_tensor *d = NULL, *t = NULL;
    CHECK_OK(tc_tensor_from_data(v, ndim, sizes, TC_FLOAT64, CPU, &d));
    CHECK_OK(tc_tensor_to(d, CPU, dtype, false, &t));
    tc_tensor_release(d);
    free(v);
    return t;
}

/* Compares a CPU result with a GPU result; `scale_tol` widens the tolerance
 * for long sums. Returns true when they agree. */
static bool same(const tc_tensor *c, const tc_tensor *g, double scale_tol, const char *what)
{
    bool ok = c && g && tc_tensor_dtype(c) == tc_tensor_dtype(g) &&
              tc_tensor_ndim(c) == tc_tensor_ndim(g) && tc_tensor_is_cuda(g) &&
              !tc_tensor_is_cuda(c);
    for (int i = 0; ok && i < tc_tensor_ndim(c); i++)
        ok = tc_tensor_size(c, i) == tc_tensor_size(g, i);
    if (!ok) {
        fprintf(stderr, "%s: dtype, shape or device differ\n", what);
        return false;
    }
    int64_t n = tc_tensor_numel(c);
    double *a = tc_test_values(c), *b = tc_test_values(g);
    double tol = tol_of(tc_tensor_dtype(c)) * scale_tol;
    for (int64_t i = 0; i < n && ok; i++) {
        if (isnan(a[i]) || isnan(b[i]))
            ok = isnan(a[i]) && isnan(b[i]);
        else if (tol == 0 || a[i] == b[i]) /* exact, or the same infinity */
            ok = a[i] == b[i];
        else
            ok = fabs(a[i] - b[i]) <= tol * fmax(1.0, fabs(a[i]));
        if (!ok)
            fprintf(stderr, "%s: element %lld: cpu %.17g gpu %.17g (%s)\n", what, (long long)i,
                    a[i], b[i], tc_dtype_string(tc_tensor_dtype(c)));
    }
    free(a);
    free(b);
    return ok;
}

/* An input pair: CPU tensor and its GPU twin, optionally both transposed. */
typedef struct pair {
    tc_tensor *c, *g;
} pair;

static pair make_pair(int ndim, const int64_t *sizes, tc_dtype dt, double lo, double hi, bool tr)
{
    pair p = {rand_cpu(ndim, sizes, dt, lo, hi), NULL};
    CHECK_OK(tc_tensor_cuda(p.c, -1, false, &p.g));
    if (tr && ndim >= 2) {
        tc_tensor *a = NULL, *b = NULL;
        CHECK_OK(tc_tensor_transpose(p.c, 0, ndim - 1, &a));
        CHECK_OK(tc_tensor_transpose(p.g, 0, ndim - 1, &b));
        tc_tensor_release(p.c);
        tc_tensor_release(p.g);
        p.c = a;
        p.g = b;
    }
    return p;
}
static void free_pair(pair p)
{
    tc_tensor_release(p.c);
    tc_tensor_release(p.g);
}

typedef tc_status (*binary_fn)(const tc_tensor *, const tc_tensor *, tc_tensor **);
typedef tc_status (*unary_fn)(const tc_tensor *, tc_tensor **);
typedef tc_status (*reduce_fn)(const tc_tensor *, int, bool, tc_tensor **);
typedef tc_status (*inplace_fn)(tc_tensor *, const tc_tensor *);

static tc_status gelu_none(const tc_tensor *a, tc_tensor **o)
{
    return tc_tensor_gelu(a, TC_GELU_APPROXIMATE_NONE, o);
}
static tc_status gelu_tanh(const tc_tensor *a, tc_tensor **o)
{
    return tc_tensor_gelu(a, TC_GELU_APPROXIMATE_TANH, o);
}

static const struct {
    const char *name;
    binary_fn fn;
} binaries[] = {{"add", tc_tensor_add},
                {"sub", tc_tensor_sub},
                {"mul", tc_tensor_mul},
                {"div", tc_tensor_div},
                {"pow", tc_tensor_pow},
                {"maximum", tc_tensor_maximum},
                {"minimum", tc_tensor_minimum},
                {"eq", tc_tensor_eq},
                {"ne", tc_tensor_ne},
                {"lt", tc_tensor_lt},
                {"le", tc_tensor_le},
                {"gt", tc_tensor_gt},
                {"ge", tc_tensor_ge},
                {"remainder", tc_tensor_remainder},
                {"logical_and", tc_tensor_logical_and},
                {"logical_or", tc_tensor_logical_or}};
static const struct {
    const char *name;
    unary_fn fn;
} unaries[] = {{"neg", tc_tensor_neg},
               {"abs", tc_tensor_abs},
               {"exp", tc_tensor_exp},
               {"log", tc_tensor_log},
               {"sqrt", tc_tensor_sqrt},
               {"relu", tc_tensor_relu},
               {"sigmoid", tc_tensor_sigmoid},
               {"tanh", tc_tensor_tanh},
               {"rsqrt", tc_tensor_rsqrt},
               {"sin", tc_tensor_sin},
               {"cos", tc_tensor_cos},
               {"erf", tc_tensor_erf},
               {"floor", tc_tensor_floor},
               {"ceil", tc_tensor_ceil},
               {"round", tc_tensor_round},
               {"silu", tc_tensor_silu},
               {"gelu", gelu_none},
               {"gelu_tanh", gelu_tanh},
               {"logical_not", tc_tensor_logical_not}};
static const struct {
    const char *name;
    reduce_fn fn;
} reductions[] = {{"sum", tc_tensor_sum},
                  {"mean", tc_tensor_mean},
                  {"max", tc_tensor_max},
                  {"min", tc_tensor_min},
                  {"argmax", tc_tensor_argmax},
                  {"prod", tc_tensor_prod},
                  {"logsumexp", tc_tensor_logsumexp},
                  {"any", tc_tensor_any},
                  {"all", tc_tensor_all}};

/* Shapes of the two operands of binary cases. */
static const struct {
    int na, nb;
    int64_t a[3], b[3];
    bool transpose;
} shapes[] = {
    {1, 1, {1027}, {1027}, false},        /* contiguous, odd length (vector tail) */
    {3, 2, {3, 1, 5}, {4, 1}, false},     /* broadcasting both ways */
    {3, 2, {3, 4, 32}, {4, 32}, false},   /* b a repeated block: vector kernel */
    {2, 1, {6, 12}, {12}, false},         /* a block of 12: whole vectors for some dtypes */
    {2, 2, {33, 7}, {33, 7}, true},       /* non-contiguous */
    {2, 1, {0, 3}, {3}, false},           /* empty */
    {0, 2, {0}, {6, 2}, false},           /* 0-d against 2-d */
    {2, 0, {5, 40}, {0}, false},          /* 2-d against 0-d: one element broadcast */
    {3, 3, {2, 3, 20}, {1, 1, 1}, false}, /* the same with size-1 dims */
    {0, 0, {0}, {0}, false},              /* 0-d against 0-d */
};

static const tc_dtype dtypes[] = {TC_FLOAT32, TC_FLOAT16, TC_BFLOAT16, TC_FLOAT64, TC_INT32,
                                  TC_INT64,   TC_UINT8,   TC_INT8,     TC_BOOL};
#define NDT (int)(sizeof dtypes / sizeof dtypes[0])
#define COUNT(a) (int)(sizeof(a) / sizeof((a)[0]))

/* clamp, the in-place ops and fill_ on one input pair (a strided a stays
 * strided: the copies written into keep its geometry through copy_). */
static void test_clamp_inplace(pair a, pair b, int si, tc_dtype dt, tc_dtype dt2)
{
    char what[128];
    static const double lo = 1, hi = 2.5, half = 1.5;
    static const struct {
        const double *lo, *hi;
    } bounds[] = {{&lo, &hi}, {&half, NULL}, {NULL, &hi}};
    for (int k = 0; k < COUNT(bounds); k++) {
        tc_tensor *rc = NULL, *rg = NULL;
        tc_status sc = tc_tensor_clamp(a.c, bounds[k].lo, bounds[k].hi, &rc);
        tc_status sg = tc_tensor_clamp(a.g, bounds[k].lo, bounds[k].hi, &rg);
        snprintf(what, sizeof what, "clamp %d shape case %d %s", k, si, tc_dtype_string(dt));
        CHECK(sc == sg);
        if (sc == TC_OK && sg == TC_OK)
            CHECK(same(rc, rg, 1, what));
        tc_tensor_release(rc), tc_tensor_release(rg);
    }
    static const struct {
        const char *name;
        inplace_fn fn;
    } ip[] = {{"add_", tc_tensor_add_},
              {"sub_", tc_tensor_sub_},
              {"mul_", tc_tensor_mul_},
              {"div_", tc_tensor_div_}};
    for (int k = 0; k < COUNT(ip); k++) {
        tc_tensor *sc_ = NULL, *sg_ = NULL;
        CHECK_OK(tc_tensor_empty_like(a.c, &sc_));
        CHECK_OK(tc_tensor_copy_(sc_, a.c, false));
        CHECK_OK(tc_tensor_empty_like(a.g, &sg_));
        CHECK_OK(tc_tensor_copy_(sg_, a.g, false));
        tc_status sc = ip[k].fn(sc_, b.c), sg = ip[k].fn(sg_, b.g);
        snprintf(what, sizeof what, "%s shape case %d %s/%s", ip[k].name, si, tc_dtype_string(dt),
                 tc_dtype_string(dt2));
        CHECK(sc == sg);
        CHECK(same(sc_, sg_, 1, what)); /* refused: both unchanged */
        if (k == 0) {
            CHECK_OK(tc_tensor_fill_(sc_, 2.75));
            CHECK_OK(tc_tensor_fill_(sg_, 2.75));
            snprintf(what, sizeof what, "fill_ shape case %d %s", si, tc_dtype_string(dt));
            CHECK(same(sc_, sg_, 0, what));
        }
        tc_tensor_release(sc_), tc_tensor_release(sg_);
    }
}

static void test_elementwise(void)
{
    char what[128];
    for (int si = 0; si < COUNT(shapes); si++)
        for (int di = 0; di < NDT; di++) {
            tc_dtype dt = dtypes[di];
            bool fl = tc_dtype_is_floating(dt);
            /* mixed dtypes on the second operand exercise promotion */
            tc_dtype dt2 = di % 3 == 1 ? dtypes[(di + 4) % NDT] : dt;
            pair a = make_pair(shapes[si].na, shapes[si].a, dt, fl ? 0.5 : 1, fl ? 3 : 6,
                               shapes[si].transpose);
            pair b = make_pair(shapes[si].nb, shapes[si].b, dt2, fl ? 0.5 : 1, fl ? 3 : 4,
                               shapes[si].transpose);
            for (int k = 0; k < COUNT(binaries); k++) {
                tc_tensor *rc = NULL, *rg = NULL;
                tc_status sc = binaries[k].fn(a.c, b.c, &rc);
                tc_status sg = binaries[k].fn(a.g, b.g, &rg);
                snprintf(what, sizeof what, "%s shape case %d %s/%s", binaries[k].name, si,
                         tc_dtype_string(dt), tc_dtype_string(dt2));
                CHECK(sc == sg);
                if (sc == TC_OK && sg == TC_OK)
                    CHECK(same(rc, rg, 1, what));
                tc_tensor_release(rc);
                tc_tensor_release(rg);
            }
            for (int k = 0; k < COUNT(unaries); k++) {
                tc_tensor *rc = NULL, *rg = NULL;
                tc_status sc = unaries[k].fn(a.c, &rc);
                tc_status sg = unaries[k].fn(a.g, &rg);
                snprintf(what, sizeof what, "%s shape case %d %s", unaries[k].name, si,
                         tc_dtype_string(dt));
                CHECK(sc == sg);
                if (sc == TC_OK && sg == TC_OK)
                    CHECK(same(rc, rg, 1, what));
                tc_tensor_release(rc);
                tc_tensor_release(rg);
            }
            /* where(a > b, a, b) */
            tc_tensor *cc = NULL, *cg = NULL, *rc = NULL, *rg = NULL;
            CHECK_OK(tc_tensor_gt(a.c, b.c, &cc));
            CHECK_OK(tc_tensor_gt(a.g, b.g, &cg));
            CHECK_OK(tc_tensor_where(cc, a.c, b.c, &rc));
            CHECK_OK(tc_tensor_where(cg, a.g, b.g, &rg));
            snprintf(what, sizeof what, "where shape case %d %s", si, tc_dtype_string(dt));
            CHECK(same(rc, rg, 1, what));
            tc_tensor_release(rc), tc_tensor_release(rg);
            rc = rg = NULL;
            CHECK_OK(tc_tensor_masked_fill(a.c, cc, 1.5, &rc));
            CHECK_OK(tc_tensor_masked_fill(a.g, cg, 1.5, &rg));
            snprintf(what, sizeof what, "masked_fill shape case %d %s", si, tc_dtype_string(dt));
            CHECK(same(rc, rg, 1, what));
            tc_tensor_release(cc), tc_tensor_release(cg);
            tc_tensor_release(rc), tc_tensor_release(rg);
            test_clamp_inplace(a, b, si, dt, dt2);
            free_pair(a);
            free_pair(b);
        }
}

/* Comparisons, where and a product with a 0-d operand on tensors large
 * enough for several vectors per GPU thread, with a tail that is not a
 * whole vector; operands dense or one broadcast element, on either side. */
static void test_large_flat(void)
{
    const int64_t n = ((int64_t)1 << 20) + 3, one = 1;
    const tc_dtype dts[] = {TC_FLOAT32, TC_BFLOAT16, TC_FLOAT64, TC_UINT8};
    char what[128];
    for (int di = 0; di < COUNT(dts); di++) {
        tc_dtype dt = dts[di];
        pair a = make_pair(1, &n, dt, 0, 4, false), b = make_pair(1, &n, dt, 0, 4, false);
        pair s = make_pair(0, &one, dt, 1, 3, false);
        const pair *lhs[3] = {&a, &a, &s}, *rhs[3] = {&b, &s, &b};
        for (int k = 0; k < 3; k++) {
            tc_tensor *cc = NULL, *cg = NULL, *rc = NULL, *rg = NULL;
            CHECK_OK(tc_tensor_ge(lhs[k]->c, rhs[k]->c, &cc));
            CHECK_OK(tc_tensor_ge(lhs[k]->g, rhs[k]->g, &cg));
            snprintf(what, sizeof what, "large ge case %d %s", k, tc_dtype_string(dt));
            CHECK(same(cc, cg, 1, what));
            CHECK_OK(tc_tensor_where(cc, lhs[k]->c, rhs[k]->c, &rc));
            CHECK_OK(tc_tensor_where(cg, lhs[k]->g, rhs[k]->g, &rg));
            snprintf(what, sizeof what, "large where case %d %s", k, tc_dtype_string(dt));
            CHECK(same(rc, rg, 1, what));
            tc_tensor_release(rc), tc_tensor_release(rg);
            CHECK_OK(tc_tensor_mul(lhs[k]->c, rhs[k]->c, &rc));
            CHECK_OK(tc_tensor_mul(lhs[k]->g, rhs[k]->g, &rg));
            snprintf(what, sizeof what, "large mul case %d %s", k, tc_dtype_string(dt));
            CHECK(same(rc, rg, 1, what));
            tc_tensor_release(rc), tc_tensor_release(rg);
            tc_tensor_release(cc), tc_tensor_release(cg);
        }
        /* a 0-d condition */
        tc_tensor *cc = NULL, *cg = NULL, *rc = NULL, *rg = NULL;
        CHECK_OK(tc_tensor_gt(s.c, s.c, &cc));
        CHECK_OK(tc_tensor_gt(s.g, s.g, &cg));
        CHECK_OK(tc_tensor_where(cc, a.c, b.c, &rc));
        CHECK_OK(tc_tensor_where(cg, a.g, b.g, &rg));
        snprintf(what, sizeof what, "large where, 0-d condition, %s", tc_dtype_string(dt));
        CHECK(same(rc, rg, 1, what));
        tc_tensor_release(rc), tc_tensor_release(rg);
        tc_tensor_release(cc), tc_tensor_release(cg);
        free_pair(a), free_pair(b), free_pair(s);
    }
}

static bool same_or_both_fail(tc_status sc, tc_status sg, const tc_tensor *rc, const tc_tensor *rg,
                              double scale, const char *what)
{
    if (sc != sg) {
        fprintf(stderr, "%s: cpu %s gpu %s\n", what, tc_status_string(sc), tc_status_string(sg));
        return false;
    }
    return sc != TC_OK || same(rc, rg, scale, what);
}

/* var/std, norm, max/min with indices and cumsum over one input. */
static void test_more_reductions(pair a, int ndim, int64_t numel, tc_dtype dt, int si)
{
    char what[128];
    int dims[4] = {TC_ALL_DIMS, 0, -1, 1};
    double scale = 1 + sqrt((double)numel) / 8; /* long float sums */
    for (int di = 0; di < 4; di++)
        for (int keep = 0; keep < 2; keep++) {
            int dim = dims[di];
            if (dim == 1 && ndim < 2)
                continue;
            tc_tensor *rc = NULL, *rg = NULL, *ic = NULL, *ig = NULL;
            for (int corr = 0; corr < 2; corr++)
                for (int is_std = 0; is_std < 2; is_std++) {
                    tc_status (*fn)(const tc_tensor *, int, int64_t, bool,
                                    tc_tensor **) = is_std ? tc_tensor_std : tc_tensor_var;
                    tc_status sc = fn(a.c, dim, corr, keep, &rc),
                              sg = fn(a.g, dim, corr, keep, &rg);
                    snprintf(what, sizeof what, "%s corr %d case %d dim %d keep %d %s",
                             is_std ? "std" : "var", corr, si, dim, keep, tc_dtype_string(dt));
                    CHECK(same_or_both_fail(sc, sg, rc, rg, scale, what));
                    tc_tensor_release(rc), tc_tensor_release(rg);
                    rc = rg = NULL;
                }
            double ps[] = {2, 1, INFINITY, 3};
            for (int pi = 0; pi < COUNT(ps); pi++) {
                tc_status sc = tc_tensor_norm(a.c, ps[pi], dim, keep, &rc);
                tc_status sg = tc_tensor_norm(a.g, ps[pi], dim, keep, &rg);
                snprintf(what, sizeof what, "norm %g case %d dim %d keep %d %s", ps[pi], si, dim,
                         keep, tc_dtype_string(dt));
                CHECK(same_or_both_fail(sc, sg, rc, rg, scale, what));
                tc_tensor_release(rc), tc_tensor_release(rg);
                rc = rg = NULL;
            }
            for (int is_max = 0; is_max < 2; is_max++) {
                tc_status (*fn)(const tc_tensor *, int, bool, tc_tensor **,
                                tc_tensor **) = is_max ? tc_tensor_max_dim : tc_tensor_min_dim;
                tc_status sc = fn(a.c, dim, keep, &rc, &ic), sg = fn(a.g, dim, keep, &rg, &ig);
                snprintf(what, sizeof what, "%s_dim case %d dim %d keep %d %s",
                         is_max ? "max" : "min", si, dim, keep, tc_dtype_string(dt));
                CHECK(same_or_both_fail(sc, sg, rc, rg, 1, what));
                CHECK(same_or_both_fail(sc, sg, ic, ig, 0, what));
                tc_tensor_release(rc), tc_tensor_release(rg);
                tc_tensor_release(ic), tc_tensor_release(ig);
                rc = rg = ic = ig = NULL;
            }
            /* a long float16 running sum crosses 65504 (inf) where the two
             * accumulators may disagree by an ulp: short ones only */
            if (keep && !(dt == TC_FLOAT16 && numel > 100000)) {
                tc_status sc = tc_tensor_cumsum(a.c, dim, &rc),
                          sg = tc_tensor_cumsum(a.g, dim, &rg);
                snprintf(what, sizeof what, "cumsum case %d dim %d %s", si, dim,
                         tc_dtype_string(dt));
                CHECK(same_or_both_fail(sc, sg, rc, rg, scale, what));
                tc_tensor_release(rc), tc_tensor_release(rg);
            }
        }
}

static void test_reductions(void)
{
    static const struct {
        int n;
        int64_t s[3];
        bool tr;
    } rs[] = {{1, {1000}, false},
              {2, {37, 129}, false},
              {2, {4, 300001}, false},
              {3, {5, 6, 7}, true},
              {0, {0}, false},
              {2, {0, 5}, false},
              {1, {3000000}, false},
              /* long columns, too few to fill the GPU: split over the rows */
              {2, {4099, 96}, false},
              {3, {3, 2050, 40}, false}};
    tc_dtype rdt[] = {TC_FLOAT32, TC_FLOAT16, TC_BFLOAT16, TC_FLOAT64, TC_INT32, TC_UINT8};
    char what[128];
    for (int si = 0; si < COUNT(rs); si++)
        for (int di = 0; di < COUNT(rdt); di++) {
            tc_dtype dt = rdt[di];
            bool fl = tc_dtype_is_floating(dt);
            pair a = make_pair(rs[si].n, rs[si].s, dt, fl ? 0 : 0, fl ? 1 : 100, rs[si].tr);
            int64_t numel = tc_tensor_numel(a.c);
            int dims[4] = {TC_ALL_DIMS, 0, -1, 1};
            for (int k = 0; k < COUNT(reductions); k++)
                for (int di2 = 0; di2 < 4; di2++)
                    for (int keep = 0; keep < 2; keep++) {
                        int dim = dims[di2];
                        if (dim == 1 && rs[si].n < 2)
                            continue;
                        tc_tensor *rc = NULL, *rg = NULL;
                        tc_status sc = reductions[k].fn(a.c, dim, keep, &rc);
                        tc_status sg = reductions[k].fn(a.g, dim, keep, &rg);
                        snprintf(what, sizeof what, "%s case %d dim %d keep %d %s",
                                 reductions[k].name, si, dim, keep, tc_dtype_string(dt));
                        CHECK(sc == sg);
                        /* float sums: error grows like sqrt(n) in the GPU's float
                         * (sum, mean, logsumexp) */
                        double scale = k < 2 || k == 7 ? 1 + sqrt((double)numel) / 8 : 1;
                        if (sc == TC_OK && sg == TC_OK && !same(rc, rg, scale, what))
                            CHECK(0);
                        tc_tensor_release(rc);
                        tc_tensor_release(rg);
                    }
            test_more_reductions(a, rs[si].n, numel, dt, si);
            free_pair(a);
        }
}

static void test_factories_and_copies(void)
{
    char what[96];
    int64_t sz[2] = {19, 23};
    for (int di = 0; di < NDT; di++) {
        tc_dtype dt = dtypes[di];
        tc_tensor *c = NULL, *g = NULL;
        /* a range of bool is refused on both devices, as PyTorch does */
        tc_dtype rdt = dt == TC_UINT8 || dt == TC_BOOL ? TC_INT16 : dt;
        CHECK_OK(tc_tensor_arange(-5, 100, 3, rdt, CPU, &c));
        CHECK_OK(tc_tensor_arange(-5, 100, 3, rdt, GPU, &g));
        snprintf(what, sizeof what, "arange %s", tc_dtype_string(rdt));
        CHECK(same(c, g, 0, what));
        tc_tensor_release(c), tc_tensor_release(g);
        CHECK_OK(tc_tensor_full(2, sz, 2.75, dt, CPU, &c));
        CHECK_OK(tc_tensor_full(2, sz, 2.75, dt, GPU, &g));
        snprintf(what, sizeof what, "full %s", tc_dtype_string(dt));
        CHECK(same(c, g, 0, what));
        tc_tensor_release(c), tc_tensor_release(g);
        /* conversions in both directions, strided on either side */
        for (int dj = 0; dj < NDT; dj++) {
            tc_dtype d2 = dtypes[dj];
            tc_tensor *src = rand_cpu(2, sz, dt, -50, 200), *tc = NULL, *tg = NULL, *back = NULL;
            tc_tensor *srct = NULL;
            CHECK_OK(tc_tensor_transpose(src, 0, 1, &srct));
            CHECK_OK(tc_tensor_to(srct, CPU, d2, false, &tc));
            CHECK_OK(tc_tensor_to(srct, GPU, d2, false, &tg)); /* H2D strided, converting */
            snprintf(what, sizeof what, "copy %s->%s", tc_dtype_string(dt), tc_dtype_string(d2));
            CHECK(same(tc, tg, 1, what));
            /* D2H into a strided CPU destination, converting back */
            int64_t tsz[2] = {23, 19};
            tc_tensor *dst = NULL, *dstt = NULL, *ref = NULL;
            CHECK_OK(tc_tensor_zeros(2, sz, dt, CPU, &dst));
            CHECK_OK(tc_tensor_transpose(dst, 0, 1, &dstt));
            CHECK(tc_tensor_size(dstt, 0) == tsz[0]);
            CHECK_OK(tc_tensor_copy_(dstt, tg, false));
            CHECK_OK(tc_tensor_to(tc, CPU, dt, false, &ref));
            CHECK_OK(tc_tensor_cuda(dstt, -1, false, &back));
            CHECK(same(ref, back, 1, what));
            tc_tensor_release(dst), tc_tensor_release(dstt), tc_tensor_release(ref);
            tc_tensor_release(back), tc_tensor_release(src), tc_tensor_release(srct);
            tc_tensor_release(tc), tc_tensor_release(tg);
        }
    }
    /* views and reshape on the GPU */
    pair a = make_pair(2, sz, TC_FLOAT32, -1, 1, true);
    int64_t flat[1] = {-1};
    tc_tensor *rc = NULL, *rg = NULL, *nc = NULL, *ng = NULL;
    CHECK_OK(tc_tensor_reshape(a.c, 1, flat, &rc));
    CHECK_OK(tc_tensor_reshape(a.g, 1, flat, &rg));
    CHECK(same(rc, rg, 0, "reshape of a transposed tensor"));
    CHECK_OK(tc_tensor_narrow(a.c, 1, 3, 5, &nc));
    CHECK_OK(tc_tensor_narrow(a.g, 1, 3, 5, &ng));
    tc_tensor *ncc = NULL, *ngc = NULL;
    CHECK_OK(tc_tensor_contiguous(nc, &ncc));
    CHECK_OK(tc_tensor_contiguous(ng, &ngc));
    CHECK(same(ncc, ngc, 0, "narrow + contiguous"));
    tc_tensor_release(rc), tc_tensor_release(rg), tc_tensor_release(nc), tc_tensor_release(ng);
    tc_tensor_release(ncc), tc_tensor_release(ngc);
    /* device mismatch names both devices */
    tc_tensor *o = NULL;
    CHECK_STATUS(tc_tensor_add(a.c, a.g, &o), TC_ERROR_DEVICE_MISMATCH);
    CHECK(strstr(tc_last_error(), "cpu") && strstr(tc_last_error(), "cuda:"));
    CHECK(o == NULL);
    free_pair(a);
}

/* Dense conversions among float32, float16 and bfloat16 on the GPU (the
 * vectorized path when both sides are aligned for four elements, the
 * general one when not), bit for bit as the CPU converts: rounding ties,
 * overflow to infinity, subnormals, NaN, a tail that is not a multiple of
 * four. */
static void test_dense_float_conversions(void)
{
    static const tc_dtype fl[3] = {TC_FLOAT32, TC_FLOAT16, TC_BFLOAT16};
    enum { N = 1031 };
    static const double special[] = {
        NAN,    INFINITY, -INFINITY,        65504,          65520, -65536, 1e-8, -3e-6,
        3.0e38, -0.0,     1.0 + 1.0 / 2048, 1.0 + 3.0 / 256};
    double *v = malloc(sizeof(double) * N);
    for (int i = 0; i < N; i++)
        v[i] = i < (int)(sizeof special / sizeof *special)
                   ? special[i]
                   : ldexp(tc_test_rand_uniform() - 0.5, (int)(tc_test_rand_uniform() * 40) - 20);
    int64_t n = N;
    tc_tensor *d = NULL;
    CHECK_OK(tc_tensor_from_data(v, 1, &n, TC_FLOAT64, CPU, &d));
    char what[96];
    for (int si = 0; si < 3; si++) {
        tc_tensor *c = NULL, *g = NULL;
        CHECK_OK(tc_tensor_to(d, CPU, fl[si], false, &c));
        CHECK_OK(tc_tensor_cuda(c, -1, false, &g));
        for (int di = 0; di < 3; di++) {
            if (di == si)
                continue;
            static const int64_t offs[3] = {0, 1, 4};
            for (int oi = 0; oi < 3; oi++) {
                tc_tensor *vc = NULL, *vg = NULL, *rc = NULL, *rg = NULL;
                CHECK_OK(tc_tensor_narrow(c, 0, offs[oi], N - offs[oi], &vc));
                CHECK_OK(tc_tensor_narrow(g, 0, offs[oi], N - offs[oi], &vg));
                CHECK_OK(tc_tensor_to(vc, CPU, fl[di], false, &rc));
                CHECK_OK(tc_tensor_to(vg, GPU, fl[di], false, &rg));
                snprintf(what, sizeof what, "dense %s->%s from element %lld",
                         tc_dtype_string(fl[si]), tc_dtype_string(fl[di]), (long long)offs[oi]);
                CHECK(same(rc, rg, 0, what));
                tc_tensor_release(vc), tc_tensor_release(vg);
                tc_tensor_release(rc), tc_tensor_release(rg);
            }
        }
        tc_tensor_release(c), tc_tensor_release(g);
    }
    tc_tensor_release(d);
    free(v);
}

/* Checks that t is a GPU tensor on `device` of `dtype` and sizes {19, 23}
 * whose every element is `value` (NaN for "do not look": empty). */
static bool made_like(const tc_tensor *t, int device, tc_dtype dtype, double value,
                      const char *what)
{
    bool ok = t && tc_tensor_is_cuda(t) && tc_tensor_device(t).index == device &&
              tc_tensor_dtype(t) == dtype && tc_tensor_ndim(t) == 2 && tc_tensor_size(t, 0) == 19 &&
              tc_tensor_size(t, 1) == 23 && tc_tensor_is_contiguous(t);
    if (ok && !isnan(value)) {
        double *v = tc_test_values(t);
        for (int i = 0; ok && i < 19 * 23; i++)
            ok = v && v[i] == value;
        free(v);
    }
    if (!ok)
        fprintf(stderr, "%s: wrong device, dtype, shape or values\n", what);
    return ok;
}

/* *_like and new_* keep the device and dtype of a GPU tensor:
 * on the current GPU and, when there are two, on cuda:1 while cuda:0 is
 * current. */
static void test_like_and_new(void)
{
    int64_t sz[2] = {19, 23};
    char what[96];
    int ndev = tc_device_count() >= 2 ? 2 : 1;
    for (int dev = 0; dev < ndev; dev++)
        for (int di = 0; di < NDT; di++) {
            tc_dtype dt = dtypes[di];
            tc_tensor *g = NULL, *o = NULL;
            CHECK_OK(tc_tensor_zeros(1, sz, dt, (tc_device){TC_CUDA, dev}, &g));
            double full = dt == TC_BOOL ? 1 : 3;
            snprintf(what, sizeof what, "empty_like cuda:%d %s", dev, tc_dtype_string(dt));
            CHECK_OK(tc_tensor_new_empty(g, 2, sz, &o));
            CHECK(made_like(o, dev, dt, NAN, what));
            tc_tensor_release(o), o = NULL;
            snprintf(what, sizeof what, "new_zeros cuda:%d %s", dev, tc_dtype_string(dt));
            CHECK_OK(tc_tensor_new_zeros(g, 2, sz, &o));
            CHECK(made_like(o, dev, dt, 0, what));
            tc_tensor_release(o), o = NULL;
            snprintf(what, sizeof what, "new_ones cuda:%d %s", dev, tc_dtype_string(dt));
            CHECK_OK(tc_tensor_new_ones(g, 2, sz, &o));
            CHECK(made_like(o, dev, dt, 1, what));
            tc_tensor_release(o), o = NULL;
            snprintf(what, sizeof what, "new_full cuda:%d %s", dev, tc_dtype_string(dt));
            CHECK_OK(tc_tensor_new_full(g, 2, sz, full, &o));
            CHECK(made_like(o, dev, dt, full, what));
            tc_tensor *big = o;
            o = NULL;
            snprintf(what, sizeof what, "empty_like cuda:%d %s", dev, tc_dtype_string(dt));
            CHECK_OK(tc_tensor_empty_like(big, &o));
            CHECK(made_like(o, dev, dt, NAN, what));
            tc_tensor_release(o), o = NULL;
            snprintf(what, sizeof what, "zeros_like cuda:%d %s", dev, tc_dtype_string(dt));
            CHECK_OK(tc_tensor_zeros_like(big, &o));
            CHECK(made_like(o, dev, dt, 0, what));
            tc_tensor_release(o), o = NULL;
            snprintf(what, sizeof what, "ones_like cuda:%d %s", dev, tc_dtype_string(dt));
            CHECK_OK(tc_tensor_ones_like(big, &o));
            CHECK(made_like(o, dev, dt, 1, what));
            tc_tensor_release(o), o = NULL;
            snprintf(what, sizeof what, "full_like cuda:%d %s", dev, tc_dtype_string(dt));
            CHECK_OK(tc_tensor_full_like(big, dt == TC_BOOL ? 1 : 5, &o));
            CHECK(made_like(o, dev, dt, dt == TC_BOOL ? 1 : 5, what));
            tc_tensor_release(o), o = NULL;
            /* a value the dtype cannot hold is refused on the GPU too */
            if (!tc_dtype_is_floating(dt) && dt != TC_BOOL) {
                CHECK_STATUS(tc_tensor_full_like(big, NAN, &o), TC_ERROR_INVALID_ARGUMENT);
                CHECK(strncmp(tc_last_error(), "tc_tensor_full_like", 19) == 0);
                CHECK(o == NULL);
            }
            CHECK(tc_test_current_device() == 0 || ndev == 1);
            tc_tensor_release(big);
            tc_tensor_release(g);
        }
}

/* copy_ on the GPU follows the CPU's overlap rules: a tensor and its
 * transpose are refused (nothing written), overlapping strided views are
 * copied through a temporary, with the CPU's result. */
static void test_gpu_overlap(void)
{
    int64_t sz[2] = {64, 64};
    pair a = make_pair(2, sz, TC_FLOAT32, -1, 1, false);
    tc_tensor *gt = NULL, *before = NULL;
    CHECK_OK(tc_tensor_cpu(a.g, &before));
    CHECK_OK(tc_tensor_transpose(a.g, 0, 1, &gt));
    CHECK_STATUS(tc_tensor_copy_(a.g, gt, false), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "refer to a single memory location") != NULL);
    CHECK(same(before, a.g, 0, "GPU tensor after a refused copy_(a, a.T)"));
    tc_tensor *dc = NULL, *sc = NULL, *dg = NULL, *sg = NULL;
    CHECK_OK(tc_tensor_narrow(a.c, 1, 0, 60, &dc));
    CHECK_OK(tc_tensor_narrow(a.c, 1, 3, 60, &sc));
    CHECK_OK(tc_tensor_narrow(a.g, 1, 0, 60, &dg));
    CHECK_OK(tc_tensor_narrow(a.g, 1, 3, 60, &sg));
    CHECK_OK(tc_tensor_copy_(dc, sc, false));
    CHECK_OK(tc_tensor_copy_(dg, sg, false));
    CHECK(same(a.c, a.g, 0, "overlapping strided copy_ on the GPU"));
    /* a released GPU tensor is reported, not used */
    tc_tensor *o = NULL;
    CHECK_OK(tc_tensor_release(gt));
    CHECK_STATUS(tc_tensor_release(gt), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_tensor_add(a.g, gt, &o), TC_ERROR_INVALID_HANDLE);
    CHECK(o == NULL);
    tc_tensor_release(dc), tc_tensor_release(sc), tc_tensor_release(dg), tc_tensor_release(sg);
    tc_tensor_release(before);
    free_pair(a);
}

static void test_matmul(void)
{
    static const struct {
        int na, nb;
        int64_t a[3], b[3];
        bool tr;
    } ms[] = {{2, 2, {64, 48}, {48, 80}, false},
              {3, 3, {3, 33, 17}, {3, 17, 9}, false},
              {3, 2, {4, 20, 30}, {30, 10}, false},
              {2, 3, {20, 30}, {5, 30, 10}, false},
              {2, 2, {40, 40}, {40, 40}, true},
              {2, 2, {300, 257}, {257, 129}, false},
              /* tcuda's small float32 GEMM, each of its tiles (4 x 8, 8 x 8, 8 x 16,
               * 16 x 16): k in one chunk and in several, transposed, the largest */
              {2, 2, {37, 150}, {150, 23}, false},
              {2, 2, {600, 20}, {40, 600}, true},
              {2, 2, {200, 24}, {56, 200}, true},
              {2, 2, {100, 300}, {300, 130}, false},
              {2, 2, {64, 128}, {128, 256}, false},
              {2, 2, {64, 128}, {256, 64}, true},
              {2, 2, {170, 150}, {150, 160}, false}};
    tc_dtype mdt[] = {TC_FLOAT32, TC_FLOAT64, TC_FLOAT16, TC_BFLOAT16};
    char what[96];
    for (int si = 0; si < COUNT(ms); si++)
        for (int di = 0; di < COUNT(mdt); di++) {
            pair a = make_pair(ms[si].na, ms[si].a, mdt[di], -1, 1, ms[si].tr);
            pair b = make_pair(ms[si].nb, ms[si].b, mdt[di], -1, 1, ms[si].tr);
            tc_tensor *rc = NULL, *rg = NULL;
            CHECK_OK(tc_tensor_matmul(a.c, b.c, &rc));
            CHECK_OK(tc_tensor_matmul(a.g, b.g, &rg));
            int64_t k = ms[si].a[ms[si].na - 1];
            snprintf(what, sizeof what, "matmul case %d %s", si, tc_dtype_string(mdt[di]));
            CHECK(same(rc, rg, 1 + sqrt((double)k), what));
            tc_tensor_release(rc), tc_tensor_release(rg);
            free_pair(a), free_pair(b);
        }
}

static void test_async(void)
{
    /* A non_blocking copy into pinned memory is right once the stream is synchronized. */
    int64_t n = 1 << 22;
    tc_tensor *g = NULL, *h = NULL, *p = NULL, *g2 = NULL, *c = NULL;
    CHECK_OK(tc_tensor_arange(0, (double)n, 1, TC_FLOAT32, GPU, &g));
    CHECK_OK(tc_tensor_to(g, CPU, TC_FLOAT32, true, &h));
    CHECK(tc_tensor_is_pinned(h));
    CHECK_OK(tc_stream_synchronize(NULL));
    float *hv = tc_tensor_data_ptr(h);
    bool ok = true;
    for (int64_t i = 0; i < n; i += 4099)
        ok &= hv[i] == (float)i;
    ok &= hv[n - 1] == (float)(n - 1);
    CHECK(ok);
    /* and H2D from pinned memory, non_blocking */
    CHECK_OK(tc_tensor_pin_memory(h, &p));
    CHECK(p == h);
    CHECK_OK(tc_tensor_cuda(p, -1, true, &g2));
    CHECK_OK(tc_tensor_eq(g, g2, &c));
    tc_tensor *s = NULL;
    CHECK_OK(tc_tensor_sum(c, TC_ALL_DIMS, false, &s));
    double cnt = 0;
    CHECK_OK(tc_tensor_item(s, &cnt));
    CHECK(cnt == (double)n);
    /* sync debug mode 2: a copy to pageable memory is refused before it is
     * queued; a non_blocking copy into pinned memory is not a sync */
    CHECK_OK(tc_set_sync_debug_mode(2));
    double dummy = -1;
    CHECK_STATUS(tc_tensor_item(s, &dummy), TC_ERROR_SYNC_DISALLOWED);
    CHECK(dummy == -1);
    tc_tensor *h2 = NULL;
    CHECK_OK(tc_tensor_to(g2, CPU, TC_FLOAT32, true, &h2));
    CHECK_OK(tc_set_sync_debug_mode(0));
    CHECK_OK(tc_stream_synchronize(NULL));
    CHECK(((float *)tc_tensor_data_ptr(h2))[n - 1] == (float)(n - 1));
    tc_tensor_release(h2);
    /* record_stream: use a tensor on a side stream, release it, allocate again */
    tc_stream *side = NULL;
    CHECK_OK(tc_stream_create(-1, 0, &side));
    CHECK_OK(tc_stream_wait_stream(side, tc_test_current_stream(-1)));
    tc_stream_guard sg = tc_stream_guard_enter(side);
    tc_tensor *t2 = NULL;
    CHECK_OK(tc_tensor_add(g, g2, &t2)); /* reads g on the side stream */
    tc_stream_guard_exit(&sg);
    CHECK_OK(tc_tensor_record_stream(g, side));
    CHECK_OK(tc_tensor_record_stream(g, NULL)); /* the current stream of g's device */
    tc_tensor_release(g);
    g = NULL;
    CHECK_OK(tc_stream_synchronize(side));
    double v = 0;
    tc_tensor *s2 = NULL;
    CHECK_OK(tc_tensor_max(t2, TC_ALL_DIMS, false, &s2));
    CHECK_OK(tc_tensor_item(s2, &v));
    CHECK(v == 2.0 * (double)(n - 1));
    CHECK_STATUS(tc_tensor_record_stream(h, side), TC_ERROR_INVALID_ARGUMENT);
    tc_tensor_release(s2), tc_tensor_release(t2), tc_tensor_release(s);
    tc_tensor_release(c), tc_tensor_release(g2), tc_tensor_release(p), tc_tensor_release(h);
    CHECK_OK(tc_stream_destroy(side));
    void *blas = NULL;
    CHECK_OK(tc_current_blas_handle(&blas));
    CHECK(blas != NULL);
}

static void test_two_gpus(void)
{
    if (tc_device_count() < 2) {
        printf("one GPU: skipping GPU-to-GPU copies\n");
        return;
    }
    int64_t sz[2] = {300, 301};
    tc_tensor *c = rand_cpu(2, sz, TC_FLOAT32, -1, 1), *g0 = NULL, *g1 = NULL, *t = NULL;
    tc_tensor *back = NULL;
    CHECK_OK(tc_tensor_to(c, (tc_device){TC_CUDA, 0}, TC_FLOAT32, false, &g0));
    CHECK_OK(tc_tensor_transpose(g0, 0, 1, &t));
    CHECK_OK(tc_tensor_to(t, (tc_device){TC_CUDA, 1}, TC_FLOAT64, false, &g1));
    CHECK(tc_tensor_device(g1).index == 1);
    CHECK_OK(tc_tensor_to(g1, (tc_device){TC_CUDA, 0}, TC_FLOAT32, false, &back));
    tc_tensor *ct = NULL;
    CHECK_OK(tc_tensor_transpose(c, 0, 1, &ct));
    tc_tensor *ctc = NULL;
    CHECK_OK(tc_tensor_contiguous(ct, &ctc));
    CHECK(same(ctc, back, 0, "cuda:0 -> cuda:1 -> cuda:0"));
    tc_tensor *o = NULL;
    CHECK_STATUS(tc_tensor_add(g0, g1, &o), TC_ERROR_DEVICE_MISMATCH);
    tc_tensor_release(c), tc_tensor_release(g0), tc_tensor_release(g1), tc_tensor_release(t);
    tc_tensor_release(back), tc_tensor_release(ct), tc_tensor_release(ctc);
}

int main(void)
{
    TC_TEST_REQUIRE_GPU();
    tc_test_init();
    test_elementwise();
    test_large_flat();
    test_reductions();
    test_factories_and_copies();
    test_dense_float_conversions();
    test_like_and_new();
    test_gpu_overlap();
    test_matmul();
    test_async();
    test_two_gpus();
    return TC_TEST_DONE();
}
