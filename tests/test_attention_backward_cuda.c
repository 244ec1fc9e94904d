/* nn_backward.h's fused attention on a GPU: tc_nn_scaled_dot_product_attention_lse
 * and tc_nn_scaled_dot_product_attention_backward_lse (and the plain backward,
 * which runs both) against the CPU's math path in float64 on the same input
 * values (the GPU's inputs read back, 16-bit ones as rounded), for float32,
 * float16 and bfloat16, head sizes 32, 64, 128 and 80 (a column tail), L == S,
 * L < S and L > S with odd lengths (1, 63, 65, 257), causal and not, the
 * scale given and not, dense operands and head views of one [B, L, H, 3E]
 * qkv projection (E 64, 80 and 128), and E = 36 (rows not 16-byte
 * aligned: element loads); the fused counts go up once per call. float16
 * and bfloat16 take the backward's tensor core kernels (their count goes
 * up once per backward call); with E 64 and 128 each case runs again on
 * the float32-in-shared-memory kernels the test hook forces (the count
 * stays): each path against the CPU reference, and the two against each
 * other within the same tolerance.
 * The fused backward sums in a fixed order: a second call, the plain
 * backward, and a replay of the pair captured in a CUDA graph give the
 * same bits, but for dq where it is summed with atomic adds (with
 * tc_use_deterministic_algorithms off: 16-bit problems on Hopper's
 * kernels, float32 ones of head sizes up to 64, multiples of 4, on the
 * register-tiled kernel; their count goes up; dq then within the
 * tolerance of the first call's). A sweep over every dtype runs with
 * deterministic algorithms off and on (every gradient the same bits). Cases the kernels do not take (E > 128, float64, the switch
 * off) run the math path, counted as such, with the same values. On a
 * compute capability 9.0 GPU, 16-bit problems of head sizes 33 to 64 run
 * Hopper's kernels (their count goes up too), then again on the mma.sync
 * ones the test hook forces, the two within the dtype's tolerance. Each
 * shape of the mma.sync dK/dV kernel (its benchmark hook) runs too, and
 * Hopper's kernels over several lengths; TC_TEST_QUICK=1 runs those alone,
 * on fewer shapes, for racecheck.
 *
 * Tolerances, relative to the largest magnitude of each result (the
 * kernels compute in float32 and round each result once): float32 3e-5
 * (sums of up to 257 products, exp of float32 scores); float16 and bfloat16
 * 2e-2 (the gradients' one rounding, 2^-8 for bfloat16, D from the
 * forward's rounded output, and on the tensor core path P and dS rounded
 * to the dtype before their products, as FlashAttention-2 does); 0.05 is
 * added to the largest magnitude (for gradients that are 0 but for
 * rounding). lse, float32 for every dtype here: 2e-5 of 1 + its largest
 * magnitude. Exits 77 without a GPU. */
#include <stdlib.h>
#include <string.h>

#include "nn_check.h"
#include "tcuda/backends.h"
#include "tcuda/graph.h"
#include "tcuda/nn_backward.h"
#include "tensor/cuda/kernels/nn_kernels.h" /* the backward's path switch and count */

/* The device's compute capability: 16-bit operands are fused from 8.0,
 * on Hopper's kernels at 9.0 where they take the problem. */
static int cc_major, cc_minor;

/* Whether the device gives a block the 154 KiB of shared memory that
 * float32's register-tiled kernel asks (8.0, 9.0; not 8.6 or 8.9). */
static bool f32_tiled;

static bool takes(tc_dtype dt) { return dt == TC_FLOAT32 || cc_major >= 8; }

/* Whether the test hook sends 16-bit operands to the float32 kernels. */
static bool fma_forced;

static void force_fma(bool on)
{
    tc__k_nn_attention_backward_set_fma(on);
    fma_forced = on;
}

/* Whether a fused backward of dt runs the tensor core kernels. */
static bool on_mma(tc_dtype dt)
{
    return (dt == TC_FLOAT16 || dt == TC_BFLOAT16) && takes(dt) && !fma_forced;
}

/* Whether the test hook keeps 16-bit problems off Hopper's kernels. */
static bool sm90_off;

/* Whether a fused backward of dt and head size e runs Hopper's kernels
 * (head sizes 33 to 64 whose rows are 16-byte aligned: here, e a multiple
 * of 8, every operand starting on such a boundary). */
static bool on_sm90(tc_dtype dt, int64_t e)
{
    return on_mma(dt) && !sm90_off && cc_major == 9 && cc_minor == 0 && e > 32 && e <= 64 &&
           e % 8 == 0;
}

/* Whether tc_use_deterministic_algorithms is on (set_deterministic). */
static bool determ;

static void set_deterministic(bool on)
{
    CHECK_OK(tc_use_deterministic_algorithms(on));
    determ = on;
}

/* Whether such a backward sums dq with atomic adds (deterministic
 * algorithms off): 16-bit on Hopper's kernels, float32 of head sizes up to
 * 64, multiples of 4 (every operand here 16-byte aligned then). */
static bool atomic_dq(tc_dtype dt, int64_t e)
{
    if (determ)
        return false;
    if (dt == TC_FLOAT32)
        return f32_tiled && e <= 64 && e % 4 == 0;
    return on_sm90(dt, e);
}

/* Added to the largest magnitude: with L == 1 and causal, dq and dk are
 * exactly 0 (P is 1, so dS = dP - D = 0), and both sides are only
 * rounding. */
#define FLOOR 0.05

static double tol_max(tc_dtype dt) { return dt == TC_FLOAT32 ? 3e-5 : 2e-2; }

/* got against ref (n values): every |got - ref| <= tol * (floor + max |ref|). */
static void near_max(const char *what, const tc_tensor *got, const tc_tensor *ref, double tol,
                     double floor)
{
    int64_t n = tc_tensor_numel(ref);
    bool ok = got && tc_tensor_numel(got) == n;
    double *g = ok ? tc_test_values(got) : NULL, *r = ok ? tc_test_values(ref) : NULL;
    double mx = 0;
    for (int64_t i = 0; ok && i < n; i++)
        mx = fmax(mx, fabs(r[i]));
    for (int64_t i = 0; ok && i < n; i++)
        if (!(fabs(g[i] - r[i]) <= tol * (floor + mx))) {
            fprintf(stderr, "%s: element %lld of %lld is %.9g, expected %.9g (largest %.6g)\n",
                    what, (long long)i, (long long)n, g[i], r[i], mx);
            ok = false;
        }
    free(g);
    free(r);
    CHECK(ok);
}

/* The same bits (values read back as doubles, compared exactly). */
static void same_bits(const char *what, const tc_tensor *a, const tc_tensor *b)
{
    int64_t n = tc_tensor_numel(a);
    bool ok = b && tc_tensor_numel(b) == n;
    double *x = ok ? tc_test_values(a) : NULL, *y = ok ? tc_test_values(b) : NULL;
    for (int64_t i = 0; ok && i < n; i++)
        ok = memcmp(&x[i], &y[i], sizeof x[i]) == 0;
    if (!ok)
        fprintf(stderr, "%s: not the same bits\n", what);
    free(x);
    free(y);
    CHECK(ok);
}

static tc_tensor *to64(const tc_tensor *t)
{
    tc_tensor *r = NULL;
    CHECK_OK(tc_tensor_to(t, CPU, TC_FLOAT64, false, &r));
    return r;
}

/* One problem on the GPU: q, k, v, grad_out (any strides) of one dtype.
 * fused says whether the kernels take it (the counts go up) or not. keep,
 * where not NULL, gets the backward's dq, dk and dv (the caller releases
 * them). */
static void run_case(const char *what, tc_tensor *q, tc_tensor *k, tc_tensor *v, tc_tensor *go,
                     bool causal, const double *scale, bool fused, tc_tensor *keep[3])
{
    tc_dtype dt = tc_tensor_dtype(q);
    double tol = dt == TC_FLOAT64 ? 1e-10 : tol_max(dt);
    uint64_t f0 = tc__nn_attention_fused_count(), b0 = tc__nn_attention_backward_fused_count();
    uint64_t m0 = tc__k_nn_attention_backward_mma_count();
    uint64_t h0 = tc__k_nn_attention_backward_sm90_count();
    uint64_t a0 = tc__k_nn_attention_backward_atomic_count();
    int64_t e = tc_tensor_size(q, -1);
    bool atomic = fused && atomic_dq(dt, e);
    tc_tensor *out = NULL, *lse = NULL, *g[3] = {NULL, NULL, NULL};
    CHECK_OK(tc_nn_scaled_dot_product_attention_lse(q, k, v, causal, scale, &out, &lse));
    CHECK(tc__nn_attention_fused_count() - f0 == (fused ? 1u : 0u));
    CHECK(lse && tc_tensor_dtype(lse) == (dt == TC_FLOAT64 ? TC_FLOAT64 : TC_FLOAT32));
    CHECK_OK(tc_nn_scaled_dot_product_attention_backward_lse(go, q, k, v, out, lse, causal, scale,
                                                             &g[0], &g[1], &g[2]));
    CHECK(tc__nn_attention_backward_fused_count() - b0 == (fused ? 1u : 0u));

    /* the reference: the CPU's math path in float64 on the same values */
    tc_tensor *c[4] = {to64(q), to64(k), to64(v), to64(go)};
    tc_tensor *rout = NULL, *rlse = NULL, *rg[3] = {NULL, NULL, NULL};
    CHECK_OK(tc_nn_scaled_dot_product_attention_lse(c[0], c[1], c[2], causal, scale, &rout, &rlse));
    CHECK_OK(tc_nn_scaled_dot_product_attention_backward(c[3], c[0], c[1], c[2], causal, scale,
                                                         &rg[0], &rg[1], &rg[2]));
    char name[200];
    static const char *names[3] = {"dq", "dk", "dv"};
    snprintf(name, sizeof name, "%s (%s) out", what, tc_dtype_string(dt));
    near_max(name, out, rout, tol, FLOOR);
    snprintf(name, sizeof name, "%s (%s) lse", what, tc_dtype_string(dt));
    near_max(name, lse, rlse, dt == TC_FLOAT64 ? 1e-10 : 2e-5, 1);
    const tc_tensor *like[3] = {q, k, v};
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "%s (%s) %s", what, tc_dtype_string(dt), names[i]);
        CHECK(g[i] && tc_tensor_is_contiguous(g[i]) && tc_tensor_dtype(g[i]) == dt);
        CHECK(g[i] && tc_tensor_ndim(g[i]) == tc_tensor_ndim(like[i]));
        near_max(name, g[i], rg[i], tol, FLOOR);
    }

    /* a second call and the plain backward (forward again, then the same
     * kernels): the same bits (dq, summed with atomic adds: within the
     * tolerance) */
    tc_tensor *again[3] = {NULL, NULL, NULL}, *plain[3] = {NULL, NULL, NULL};
    CHECK_OK(tc_nn_scaled_dot_product_attention_backward_lse(go, q, k, v, out, lse, causal, scale,
                                                             &again[0], &again[1], &again[2]));
    b0 = tc__nn_attention_backward_fused_count();
    CHECK_OK(tc_nn_scaled_dot_product_attention_backward(go, q, k, v, causal, scale, &plain[0],
                                                         &plain[1], &plain[2]));
    CHECK(tc__nn_attention_backward_fused_count() - b0 == (fused ? 1u : 0u));
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "%s (%s) %s, second call", what, tc_dtype_string(dt), names[i]);
        if (fused && !(atomic && i == 0)) {
            same_bits(name, g[i], again[i]);
            same_bits(name, g[i], plain[i]);
        } else if (fused) {
            near_max(name, again[i], g[i], tol, FLOOR);
            near_max(name, plain[i], g[i], tol, FLOOR);
        } else {
            near_max(name, plain[i], rg[i], tol, FLOOR);
        }
    }
    /* three backward calls, each on the tensor cores or none */
    CHECK(tc__k_nn_attention_backward_mma_count() - m0 == (fused && on_mma(dt) ? 3u : 0u));
    CHECK(tc__k_nn_attention_backward_sm90_count() - h0 == (fused && on_sm90(dt, e) ? 3u : 0u));
    CHECK(tc__k_nn_attention_backward_atomic_count() - a0 == (atomic ? 3u : 0u));
    for (int i = 0; i < 3; i++) {
        if (keep) {
            keep[i] = g[i];
            g[i] = NULL;
        }
        tc_tensor_release(g[i]);
        tc_tensor_release(rg[i]);
        tc_tensor_release(again[i]);
        tc_tensor_release(plain[i]);
    }
    for (int i = 0; i < 4; i++)
        tc_tensor_release(c[i]);
    tc_tensor_release(out), tc_tensor_release(lse);
    tc_tensor_release(rout), tc_tensor_release(rlse);
}

static const tc_dtype KERNEL_DTYPES[3] = {TC_FLOAT32, TC_FLOAT16, TC_BFLOAT16};

/* One problem the kernels take (where the device does): run_case, and
 * with both, for float16 and bfloat16 on a device that fuses them, once on
 * each path (the tensor core kernels, then the float32 ones by the test
 * hook), the two paths' gradients within the dtype's tolerance of each
 * other. */
static void run_fused(const char *what, tc_tensor *q, tc_tensor *k, tc_tensor *v, tc_tensor *go,
                      bool causal, const double *scale, bool both)
{
    tc_dtype dt = tc_tensor_dtype(q);
    if (!both || dt == TC_FLOAT32 || !takes(dt)) {
        run_case(what, q, k, v, go, causal, scale, takes(dt), NULL);
        return;
    }
    tc_tensor *mma[3] = {NULL, NULL, NULL}, *fma[3] = {NULL, NULL, NULL};
    char name[200];
    snprintf(name, sizeof name, "%s, tensor cores", what);
    run_case(name, q, k, v, go, causal, scale, true, mma);
    force_fma(true);
    snprintf(name, sizeof name, "%s, float32 kernels", what);
    run_case(name, q, k, v, go, causal, scale, true, fma);
    force_fma(false);
    tc_tensor *sync[3] = {NULL, NULL, NULL}; /* mma.sync's, where Hopper's ran first */
    if (on_sm90(dt, tc_tensor_size(q, -1))) {
        tc__k_nn_attention_backward_set_sm90(false);
        sm90_off = true;
        snprintf(name, sizeof name, "%s, mma.sync kernels", what);
        run_case(name, q, k, v, go, causal, scale, true, sync);
        tc__k_nn_attention_backward_set_sm90(true);
        sm90_off = false;
    }
    static const char *names[3] = {"dq", "dk", "dv"};
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "%s (%s) %s, tensor cores against the float32 kernels", what,
                 tc_dtype_string(dt), names[i]);
        near_max(name, mma[i], fma[i], tol_max(dt), FLOOR);
        if (sync[i]) {
            snprintf(name, sizeof name, "%s (%s) %s, Hopper's kernels against mma.sync's", what,
                     tc_dtype_string(dt), names[i]);
            near_max(name, mma[i], sync[i], tol_max(dt), FLOOR);
        }
        tc_tensor_release(mma[i]);
        tc_tensor_release(fma[i]);
        tc_tensor_release(sync[i]);
    }
}

/* Random dense q, k, v and grad_out of one dtype on the GPU, [1, 2, l, e]
 * and [1, 2, s, e], into t. */
static void dense_operands(tc_dtype dt, int64_t l, int64_t s, int64_t e, tc_tensor *t[4])
{
    int64_t qs[4] = {1, 2, l, e}, ks[4] = {1, 2, s, e};
    t[0] = rnd(GPU, 4, qs, dt, -1, 1, NULL);
    t[1] = rnd(GPU, 4, ks, dt, -1, 1, NULL);
    t[2] = rnd(GPU, 4, ks, dt, -1, 1, NULL);
    t[3] = rnd(GPU, 4, qs, dt, -1, 1, NULL);
}

static void release4(tc_tensor *t[4])
{
    for (int i = 0; i < 4; i++)
        tc_tensor_release(t[i]);
}

/* Dense [B, H, L, E] operands over every head size, length pair and mode
 * (E = 36: rows of 72 bytes, not 16-byte aligned for 16-bit dtypes); both
 * 16-bit paths for E 64 and 128. */
static void test_dense(void)
{
    static const int64_t es[5] = {32, 64, 128, 80, 36};
    static const int64_t ls[][2] = {{1, 1}, {1, 65}, {63, 63}, {65, 257}, {257, 63}, {64, 128}};
    const double scale = 0.3;
    for (int d = 0; d < 3; d++)
        for (int ei = 0; ei < 5; ei++)
            for (size_t li = 0; li < sizeof ls / sizeof ls[0]; li++)
                for (int mode = 0; mode < 4; mode++) {
                    int64_t e = es[ei], l = ls[li][0], s = ls[li][1];
                    tc_tensor *t[4];
                    dense_operands(KERNEL_DTYPES[d], l, s, e, t);
                    char what[120];
                    snprintf(what, sizeof what, "fused sdpa backward E=%lld L=%lld S=%lld%s%s",
                             (long long)e, (long long)l, (long long)s, mode & 1 ? " causal" : "",
                             mode & 2 ? " scaled" : "");
                    run_fused(what, t[0], t[1], t[2], t[3], mode & 1, mode & 2 ? &scale : NULL,
                              e == 64 || e == 128);
                    release4(t);
                }
}

/* The lengths both kernel sweeps below take: several steps, tails, one
 * query. */
static const int64_t SWEEP_LS[4][2] = {{65, 257}, {300, 300}, {1, 65}, {257, 63}};

/* Dense cases of KERNEL_DTYPES from d0 on (1: 16-bit alone) over the
 * first ne head sizes of es and the first nl of SWEEP_LS, causal and not,
 * each against the float64 reference; what names the sweep. */
static void sweep(const char *what, const int64_t *es, int ne, int nl, int d0)
{
    for (int d = d0; d < 3; d++)
        for (int ei = 0; ei < ne; ei++)
            for (int li = 0; li < nl; li++)
                for (int causal = 0; causal < 2; causal++) {
                    tc_dtype dt = KERNEL_DTYPES[d];
                    int64_t e = es[ei], l = SWEEP_LS[li][0], s = SWEEP_LS[li][1];
                    tc_tensor *t[4];
                    dense_operands(dt, l, s, e, t);
                    char name[160];
                    snprintf(name, sizeof name, "%s E=%lld L=%lld S=%lld%s", what, (long long)e,
                             (long long)l, (long long)s, causal ? " causal" : "");
                    run_case(name, t[0], t[1], t[2], t[3], causal, NULL, takes(dt), NULL);
                    release4(t);
                }
}

/* Every shape of the mma.sync dK/dV kernel for head dims up to 64 (the
 * benchmark's hook picks them; variant 0 is the one the other tests run,
 * so from `first` on; Hopper's kernels kept off): each against the
 * float64 reference over lengths, modes, an unaligned head dim and a long
 * causal sequence of several query steps; `quick` (TC_TEST_QUICK, for
 * compute-sanitizer's racecheck) keeps two head dims and two length
 * pairs. */
static void test_dkv_variants(int first, bool quick)
{
    static const int64_t es[3] = {64, 36, 32};
    int n = tc__k_nn_attention_backward_set_variant(0);
    tc__k_nn_attention_backward_set_sm90(false); /* the variants are mma.sync's */
    sm90_off = true;
    for (int var = first; var < n; var++) {
        CHECK(tc__k_nn_attention_backward_set_variant(var) == n);
        char what[40];
        snprintf(what, sizeof what, "dK/dV variant %d", var);
        sweep(what, es, quick ? 2 : 3, quick ? 2 : 4, 1);
    }
    tc__k_nn_attention_backward_set_sm90(true);
    sm90_off = false;
    /* out of range: refused without a change, the count still returned */
    CHECK(tc__k_nn_attention_backward_set_variant(n) == n);
    CHECK(tc__k_nn_attention_backward_set_variant(-1) == n);
    CHECK(tc__k_nn_attention_backward_set_variant(0) == n);
}

/* Every dtype over the sweep's lengths, causal and not, head sizes 64 and
 * 40 (a column tail): Hopper's kernels (where the device has them) and
 * float32's register-tiled one, dq summed with atomic adds, then in a
 * fixed order (deterministic algorithms on: Hopper's dQ kernel, float32's
 * FMA kernels). Also the TC_TEST_QUICK pass, for racecheck, beside the
 * variants: `quick` keeps the first length pair (several steps each way,
 * tails), every kernel still running: racecheck of the quick pass with
 * all four did not finish in 140 s on an H200. */
static void test_atomic_sweep(bool quick)
{
    static const int64_t es[2] = {64, 40};
    int nl = quick ? 1 : 4;
    sweep("fused sdpa backward", es, 2, nl, 0);
    set_deterministic(true);
    sweep("fused sdpa backward, deterministic", es, 2, nl, 0);
    set_deterministic(false);
}

/* q, k and v as the heads of one [B, L, H, 3E] projection (narrowed, then
 * transpose(1, 2)), grad_out as the heads of [B, L, H, E]: read in place. */
static void test_head_views(void)
{
    static const int64_t es[3] = {64, 80, 128}, ls[2] = {63, 128};
    for (int d = 0; d < 3; d++)
        for (int ei = 0; ei < 3; ei++)
            for (int li = 0; li < 2; li++)
                for (int causal = 0; causal < 2; causal++) {
                    tc_dtype dt = KERNEL_DTYPES[d];
                    int64_t b = 2, h = 3, l = ls[li], e = es[ei];
                    int64_t ps[4] = {b, l, h, 3 * e}, gs[4] = {b, l, h, e};
                    tc_tensor *proj = rnd(GPU, 4, ps, dt, -1, 1, NULL);
                    tc_tensor *gm = rnd(GPU, 4, gs, dt, -1, 1, NULL);
                    tc_tensor *part[3] = {NULL, NULL, NULL}, *t[4] = {NULL, NULL, NULL, NULL};
                    for (int i = 0; i < 3; i++) {
                        CHECK_OK(tc_tensor_narrow(proj, 3, i * e, e, &part[i]));
                        CHECK_OK(tc_tensor_transpose(part[i], 1, 2, &t[i]));
                    }
                    CHECK_OK(tc_tensor_transpose(gm, 1, 2, &t[3]));
                    CHECK(!tc_tensor_is_contiguous(t[0]));
                    char what[120];
                    snprintf(what, sizeof what, "fused sdpa backward, qkv heads E=%lld L=%lld%s",
                             (long long)e, (long long)l, causal ? " causal" : "");
                    run_fused(what, t[0], t[1], t[2], t[3], causal, NULL, e != 80);
                    for (int i = 0; i < 3; i++)
                        tc_tensor_release(part[i]);
                    for (int i = 0; i < 4; i++)
                        tc_tensor_release(t[i]);
                    tc_tensor_release(proj), tc_tensor_release(gm);
                }
}

/* What the kernels do not take runs the math path: E over 128, Ev != E,
 * float64, and everything with the switch off. */
static void test_math_path(void)
{
    struct {
        tc_dtype dt;
        int64_t e, ev;
    } cases[] = {{TC_FLOAT32, 160, 160}, {TC_BFLOAT16, 32, 16}, {TC_FLOAT64, 64, 64}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int causal = 0; causal < 2; causal++) {
            int64_t qs[3] = {2, 65, cases[i].e}, ks[3] = {2, 33, cases[i].e};
            int64_t vs[3] = {2, 33, cases[i].ev}, os[3] = {2, 65, cases[i].ev};
            tc_tensor *q = rnd(GPU, 3, qs, cases[i].dt, -1, 1, NULL);
            tc_tensor *k = rnd(GPU, 3, ks, cases[i].dt, -1, 1, NULL);
            tc_tensor *v = rnd(GPU, 3, vs, cases[i].dt, -1, 1, NULL);
            tc_tensor *go = rnd(GPU, 3, os, cases[i].dt, -1, 1, NULL);
            run_case("sdpa backward, math path", q, k, v, go, causal, NULL, false, NULL);
            tc_tensor_release(q), tc_tensor_release(k), tc_tensor_release(v);
            tc_tensor_release(go);
        }
    int64_t qs[4] = {1, 2, 63, 64};
    tc_tensor *q = rnd(GPU, 4, qs, TC_FLOAT16, -1, 1, NULL);
    tc_tensor *k = rnd(GPU, 4, qs, TC_FLOAT16, -1, 1, NULL);
    tc_tensor *v = rnd(GPU, 4, qs, TC_FLOAT16, -1, 1, NULL);
    tc_tensor *go = rnd(GPU, 4, qs, TC_FLOAT16, -1, 1, NULL);
    tc__nn_attention_set_fused(false);
    run_case("sdpa backward, fused switched off", q, k, v, go, true, NULL, false, NULL);
    tc__nn_attention_set_fused(true);
    tc_tensor_release(q), tc_tensor_release(k), tc_tensor_release(v), tc_tensor_release(go);
}

/* The training pair captured into a CUDA graph (after an eager call that
 * set the kernels up): nothing waits, the scratch comes from the graph's
 * pool, and a replay gives the eager call's bits (dq, where it is summed
 * with atomic adds, within the tolerance). */
static void test_graph(void)
{
    static const tc_dtype dts[2] = {TC_FLOAT32, TC_BFLOAT16};
    for (int d = 0; d < 2; d++) {
        if (!takes(dts[d]))
            continue;
        int64_t qs[4] = {2, 3, 65, 64};
        tc_tensor *in[4]; /* grad_out, q, k, v */
        for (int i = 0; i < 4; i++)
            in[i] = rnd(GPU, 4, qs, dts[d], -1, 1, NULL);
        tc_tensor *out = NULL, *lse = NULL, *g[3] = {NULL, NULL, NULL};
        CHECK_OK(
            tc_nn_scaled_dot_product_attention_lse(in[1], in[2], in[3], true, NULL, &out, &lse));
        CHECK_OK(tc_nn_scaled_dot_product_attention_backward_lse(
            in[0], in[1], in[2], in[3], out, lse, true, NULL, &g[0], &g[1], &g[2]));
        CHECK_OK(tc_synchronize(-1));
        tc_graph *graph = NULL;
        CHECK_OK(tc_graph_create(&graph));
        tc_tensor *cout = NULL, *clse = NULL, *cg[3] = {NULL, NULL, NULL};
        uint64_t b0 = tc__nn_attention_backward_fused_count();
        uint64_t m0 = tc__k_nn_attention_backward_mma_count();
        tc_graph_pool_id none = {0};
        tc_graph_capture_guard gd = tc_graph_capture_guard_enter(graph, none, NULL,
                                                                 TC_CAPTURE_MODE_GLOBAL);
        CHECK_OK(gd.status);
        CHECK_OK(
            tc_nn_scaled_dot_product_attention_lse(in[1], in[2], in[3], true, NULL, &cout, &clse));
        CHECK_OK(tc_nn_scaled_dot_product_attention_backward_lse(
            in[0], in[1], in[2], in[3], cout, clse, true, NULL, &cg[0], &cg[1], &cg[2]));
        CHECK_OK(tc_graph_capture_guard_exit(&gd));
        CHECK(tc__nn_attention_backward_fused_count() - b0 == 1);
        CHECK(tc__k_nn_attention_backward_mma_count() - m0 == (on_mma(dts[d]) ? 1u : 0u));
        CHECK_OK(tc_graph_replay(graph));
        CHECK_OK(tc_synchronize(-1));
        same_bits("attention forward replayed from a graph", out, cout);
        same_bits("attention lse replayed from a graph", lse, clse);
        for (int i = 0; i < 3; i++) {
            if (i == 0 && atomic_dq(dts[d], qs[3]))
                near_max("attention backward replayed from a graph", cg[i], g[i], tol_max(dts[d]),
                         FLOOR);
            else
                same_bits("attention backward replayed from a graph", g[i], cg[i]);
        }
        for (int i = 0; i < 3; i++) {
            tc_tensor_release(g[i]);
            tc_tensor_release(cg[i]);
        }
        tc_tensor_release(out), tc_tensor_release(lse);
        tc_tensor_release(cout), tc_tensor_release(clse);
        CHECK_OK(tc_graph_destroy(graph));
        for (int i = 0; i < 4; i++)
            tc_tensor_release(in[i]);
    }
}

int main(void)
{
    tc_test_init();
    TC_TEST_REQUIRE_GPU();
    CHECK_OK(tc_get_device_capability(-1, &cc_major, &cc_minor));
    tc_device_properties props;
    CHECK_OK(tc_get_device_properties(-1, &props));
    f32_tiled = cc_major >= 8 && props.shared_memory_per_block_optin >= 154 * 1024;
    if (cc_major < 8)
        printf("compute capability %d.%d: 16-bit operands take the math path\n", cc_major,
               cc_minor);
    const char *quick = getenv("TC_TEST_QUICK");
    if (quick && *quick && strcmp(quick, "0")) { /* the tensor core kernels alone, briefly */
        test_dkv_variants(0, true);
        test_atomic_sweep(true);
        CHECK_OK(tc_synchronize(-1));
        return TC_TEST_DONE();
    }
    test_dense();
    test_head_views();
    test_dkv_variants(1, false);
    test_atomic_sweep(false);
    test_math_path();
    test_graph();
    CHECK_OK(tc_synchronize(-1));
    return TC_TEST_DONE();
}
