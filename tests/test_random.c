/* Random numbers on the CPU: Philox4x32-10 known answers (Random123's
 * kat_vectors), the counter layout against an independent computation from
 * raw Philox words, offsets that never reuse counters, statistics on 10^7
 * samples per distribution (mean, variance, a binned Kolmogorov-Smirnov
 * bound), the log/sin/cos/float16/bfloat16 building blocks against libm and
 * exhaustive checks, state blobs, seeding, and bad arguments that must leave
 * the generator unchanged. Needs no GPU (the CUDA side is tests/test_random_cuda.c). */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "random/philox.h"
#include "tc_rng_forge.h"
#include "tc_test.h"

static tc_generator *make(uint64_t seed)
{
    tc_generator *g = NULL;
    CHECK_OK(tc_generator_create((tc_device){TC_CPU, -1}, seed, &g));
    return g;
}

/* ---- Philox known answers -------------------------------------------------- */

static void test_kat(void)
{
    static const uint32_t v[3][10] = {
        {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
        {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d,
         0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
        {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09,
         0x94fdcceb, 0x5001e420, 0x24126ea1},
    };
    for (int i = 0; i < 3; i++) {
        uint32_t out[4];
        tc__philox4x32_10(v[i], v[i] + 4, out);
        CHECK(memcmp(out, v[i] + 6, sizeof out) == 0);
    }
}

/* ---- the counter layout, checked from raw words ------------------------------ */

static void test_layout(void)
{
    uint64_t seed = tc_test_rand();
    tc_generator *g = make(seed);
    enum { N = 1003 };
    float *f = malloc(N * sizeof *f);
    int64_t *iv = malloc(N * sizeof *iv);
    uint8_t *bv = malloc(N);
    CHECK_OK(tc_generator_uniform(g, f, N, TC_FLOAT32, 0.0, 1.0));
    CHECK(tc_test_gen_offset(g) == (N + 3) / 4);
    CHECK_OK(tc_generator_random_int(g, iv, N, TC_INT64, 0, 1ll << 32));
    CHECK_OK(tc_generator_bernoulli(g, bv, N, TC_BOOL, 0.25));
    int bad_u = 0, bad_i = 0, bad_b = 0;
    uint64_t base_i = (N + 3) / 4, base_b = 2 * base_i;
    for (int i = 0; i < N; i++) {
        uint32_t w[4];
        tc__philox_block(seed, (uint64_t)i / 4, 0, 0, w);
        bad_u += (double)f[i] != (double)(w[i % 4] >> 8) / 16777216.0;
        tc__philox_block(seed, base_i + (uint64_t)i / 4, 0, 0, w);
        bad_i += iv[i] != (int64_t)w[i % 4];
        tc__philox_block(seed, base_b + (uint64_t)i / 4, 0, 0, w);
        bad_b += bv[i] != (w[i % 4] < (1u << 30));
    }
    CHECK(bad_u == 0);
    CHECK(bad_i == 0);
    CHECK(bad_b == 0);
    CHECK(tc_test_gen_offset(g) == 3 * base_i);
    free(f);
    free(iv);
    free(bv);
    CHECK_OK(tc_generator_destroy(g));
}

/* Two draws in a row equal the matching slices of one long draw (offsets
 * advance by whole blocks, never reusing a counter). */
static void test_offsets(void)
{
    uint64_t seed = tc_test_rand();
    tc_generator *a = make(seed), *b = make(seed);
    double x[10], y[8], z[40];
    CHECK_OK(tc_generator_normal(a, x, 10, TC_FLOAT64, 0, 1)); /* 5 blocks of 2 */
    CHECK_OK(tc_generator_normal(a, y, 8, TC_FLOAT64, 0, 1));
    CHECK(tc_test_gen_offset(a) == 9);
    CHECK_OK(tc_generator_normal(b, z, 40, TC_FLOAT64, 0, 1));
    CHECK(memcmp(x, z, sizeof x) == 0);
    CHECK(memcmp(y, z + 10, sizeof y) == 0);
    float p[7], q[12];
    CHECK_OK(tc_generator_manual_seed(a, seed));
    CHECK_OK(tc_generator_manual_seed(b, seed));
    CHECK_OK(tc_generator_uniform(a, p, 7, TC_FLOAT32, -1, 1)); /* 2 blocks: 8 values */
    CHECK_OK(tc_generator_uniform(a, p, 4, TC_FLOAT32, -1, 1));
    CHECK_OK(tc_generator_uniform(b, q, 12, TC_FLOAT32, -1, 1));
    CHECK(memcmp(p, q + 8, 4 * sizeof(float)) == 0);
    CHECK_OK(tc_generator_destroy(a));
    CHECK_OK(tc_generator_destroy(b));
}

/* ---- the stream is pinned ------------------------------------------------------ */

static uint64_t fnv(const void *p, size_t n)
{
    const unsigned char *c = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= c[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Hashes of the first draws from seed 12345. A seeded program's numbers are
 * part of the API: they must not change between versions, compilers (gcc and
 * clang at -O2, and at -O3 -march=haswell -ffp-contract=fast, give these; so
 * does glibc's fmaf without the FMA instruction) or devices. */
static void test_golden(void)
{
    static const uint64_t want[] = {
        0x12ec46ac4e4f9c0bull, 0xe2b1435c39184c53ull, 0xc01675b130d38cafull, 0xf80df15a2064485cull,
        0xc4d09d7c2c0245f9ull, 0xb0c36b9ff077921full, 0xac33b8a4d063a7e6ull, 0x319bca213ab87accull,
        0x61f063e0723b1d38ull, 0x82446de0df510a5cull, 0x123c08ae6dec70b8ull};
    static const tc_dtype dts[4] = {TC_FLOAT16, TC_BFLOAT16, TC_FLOAT32, TC_FLOAT64};
    static unsigned char buf[4099 * 8];
    uint64_t got[11];
    tc_generator *g = make(12345);
    for (int k = 0; k < 4; k++) {
        size_t bytes = 4099 * tc_dtype_size(dts[k]);
        CHECK_OK(tc_generator_uniform(g, buf, 4099, dts[k], -1.5, 2.25));
        got[2 * k] = fnv(buf, bytes);
        CHECK_OK(tc_generator_normal(g, buf, 4099, dts[k], 0.5, 2));
        got[2 * k + 1] = fnv(buf, bytes);
    }
    CHECK_OK(tc_generator_bernoulli(g, buf, 4099, TC_FLOAT32, 0.37));
    got[8] = fnv(buf, 4099 * 4);
    CHECK_OK(tc_generator_random_int(g, buf, 4099, TC_INT64, -5, (1ll << 62) + 3));
    got[9] = fnv(buf, 4099 * 8);
    CHECK_OK(tc_generator_random_int(g, buf, 4099, TC_INT64, 0, (1ll << 31) + 1));
    got[10] = fnv(buf, 4099 * 8);
    for (int i = 0; i < 11; i++) {
        if (got[i] != want[i])
            fprintf(stderr, "golden draw %d: hash 0x%016llx, want 0x%016llx\n", i,
                    (unsigned long long)got[i], (unsigned long long)want[i]);
        CHECK(got[i] == want[i]);
    }
    CHECK_OK(tc_generator_destroy(g));
}

/* ---- statistics -------------------------------------------------------------- */

#define NS 10000000
#define NBINS 1000

/* max |ECDF - CDF| at NBINS bin edges over [a, b). */
static double ks_binned(const double *v, size_t n, double a, double b, double (*cdf)(double))
{
    static size_t hist[NBINS + 2];
    memset(hist, 0, sizeof hist);
    for (size_t i = 0; i < n; i++) {
        double t = (v[i] - a) / (b - a) * NBINS;
        long k = t < 0 ? -1 : (long)t;
        hist[k < 0 ? 0 : k >= NBINS ? NBINS + 1 : k + 1]++;
    }
    double d = 0;
    size_t below = hist[0];
    for (int k = 1; k <= NBINS; k++) {
        below += hist[k];
        double edge = a + (b - a) * k / NBINS;
        double e = fabs((double)below / (double)n - cdf(edge));
        if (e > d)
            d = e;
    }
    return d;
}

static double g_lo, g_hi, g_mean, g_std;
static double cdf_uniform(double x)
{
    return x <= g_lo ? 0 : x >= g_hi ? 1 : (x - g_lo) / (g_hi - g_lo);
}
static double cdf_normal(double x) { return 0.5 * erfc(-(x - g_mean) / (g_std * sqrt(2.0))); }

static void moments(const double *v, size_t n, double *mean, double *var)
{
    double s = 0, s2 = 0;
    for (size_t i = 0; i < n; i++)
        s += v[i];
    *mean = s / (double)n;
    for (size_t i = 0; i < n; i++)
        s2 += (v[i] - *mean) * (v[i] - *mean);
    *var = s2 / (double)(n - 1);
}

/* Converts a buffer of dtype to doubles. */
static void to_double(const void *src, tc_dtype dt, size_t n, double *out)
{
    for (size_t i = 0; i < n; i++) {
        switch (dt) {
        case TC_FLOAT32: out[i] = ((const float *)src)[i]; break;
        case TC_FLOAT64: out[i] = ((const double *)src)[i]; break;
        case TC_FLOAT16: out[i] = tc__f16_to_f32(((const uint16_t *)src)[i]); break;
        case TC_BFLOAT16: out[i] = tc__bf16_to_f32(((const uint16_t *)src)[i]); break;
        case TC_INT32: out[i] = ((const int32_t *)src)[i]; break;
        case TC_INT64: out[i] = (double)((const int64_t *)src)[i]; break;
        case TC_UINT8:
        case TC_BOOL: out[i] = ((const uint8_t *)src)[i]; break;
        default: out[i] = NAN;
        }
    }
}

static void check_stats(const char *what, const double *v, size_t n, double mean, double var,
                        double ks)
{
    double m, s2;
    moments(v, n, &m, &s2);
    double sd_mean = sqrt(var / (double)n);
    bool ok_mean = fabs(m - mean) <= 6 * sd_mean + 1e-12;
    bool ok_var = fabs(s2 - var) <= 0.01 * var;
    bool ok_ks = ks <= 1.95 / sqrt((double)n); /* the 0.1% level of the KS statistic */
    if (!(ok_mean && ok_var && ok_ks))
        fprintf(stderr, "%s: mean %.6g (want %.6g), var %.6g (want %.6g), KS %.3g\n", what, m, mean,
                s2, var, ks);
    CHECK(ok_mean);
    CHECK(ok_var);
    CHECK(ok_ks);
}

static void test_stats(void)
{
    tc_generator *g = make(20260423);
    void *buf = malloc(NS * 8);
    double *v = malloc(NS * sizeof *v);
    /* uniform float32 on 10^7 samples */
    g_lo = -2, g_hi = 3;
    CHECK_OK(tc_generator_uniform(g, buf, NS, TC_FLOAT32, g_lo, g_hi));
    to_double(buf, TC_FLOAT32, NS, v);
    bool inside = true;
    for (size_t i = 0; i < NS; i++)
        inside &= v[i] >= g_lo && v[i] < g_hi;
    CHECK(inside);
    check_stats("uniform f32", v, NS, 0.5, 25.0 / 12, ks_binned(v, NS, -2, 3, cdf_uniform));
    /* normal float32 on 10^7 samples */
    g_mean = 1.5, g_std = 2;
    CHECK_OK(tc_generator_normal(g, buf, NS, TC_FLOAT32, g_mean, g_std));
    to_double(buf, TC_FLOAT32, NS, v);
    check_stats("normal f32", v, NS, 1.5, 4, ks_binned(v, NS, -10.5, 13.5, cdf_normal));
    /* bernoulli and integers on 10^7 */
    CHECK_OK(tc_generator_bernoulli(g, buf, NS, TC_UINT8, 0.3));
    to_double(buf, TC_UINT8, NS, v);
    check_stats("bernoulli", v, NS, 0.3, 0.21, 0);
    CHECK_OK(tc_generator_random_int(g, buf, NS, TC_INT32, -3, 7));
    to_double(buf, TC_INT32, NS, v);
    size_t count[10] = {0};
    bool in_range = true;
    for (size_t i = 0; i < NS; i++) {
        in_range &= v[i] >= -3 && v[i] < 7;
        if (v[i] >= -3 && v[i] < 7)
            count[(int)v[i] + 3]++;
    }
    CHECK(in_range);
    double worst = 0; /* each value has probability 0.1: sd of a count sqrt(n*.09) */
    for (int k = 0; k < 10; k++)
        worst = fmax(worst, fabs((double)count[k] - NS / 10.0) / sqrt(NS * 0.09));
    CHECK(worst < 5);
    check_stats("random_int", v, NS, 1.5, 99.0 / 12, 0);

    /* the other dtypes and the rejection paths on 10^6 */
    size_t n = 1000000;
    static const tc_dtype fl[] = {TC_FLOAT16, TC_BFLOAT16, TC_FLOAT64};
    for (int k = 0; k < 3; k++) {
        g_lo = -1, g_hi = 1;
        CHECK_OK(tc_generator_uniform(g, buf, n, fl[k], g_lo, g_hi));
        to_double(buf, fl[k], n, v);
        double mn = 1, mx = -1;
        for (size_t i = 0; i < n; i++)
            mn = fmin(mn, v[i]), mx = fmax(mx, v[i]);
        CHECK(mn >= -1 && mx < 1);
        check_stats(tc_dtype_string(fl[k]), v, n, 0, 1.0 / 3, 0);
        CHECK_OK(tc_generator_normal(g, buf, n, fl[k], -1, 0.5));
        to_double(buf, fl[k], n, v);
        g_mean = -1, g_std = 0.5;
        double ks = fl[k] == TC_FLOAT64 ? ks_binned(v, n, -4, 2, cdf_normal) : 0;
        check_stats(tc_dtype_string(fl[k]), v, n, -1, 0.25 * (fl[k] == TC_BFLOAT16 ? 1.0 : 1.0),
                    ks);
    }
    /* range 2^31 + 1: almost half the first draws are rejected */
    int64_t r = (1ll << 31) + 1;
    CHECK_OK(tc_generator_random_int(g, buf, n, TC_INT64, 0, r));
    to_double(buf, TC_INT64, n, v);
    bool ok = true;
    for (size_t i = 0; i < n; i++)
        ok &= v[i] >= 0 && v[i] < (double)r;
    CHECK(ok);
    check_stats("int 2^31+1", v, n, (r - 1) / 2.0, (double)r * r / 12, 0);
    /* a wide range: [-2^62, 2^62 + 2^61) */
    int64_t lo = -(1ll << 62), hi = (1ll << 62) + (1ll << 61);
    CHECK_OK(tc_generator_random_int(g, buf, n, TC_INT64, lo, hi));
    to_double(buf, TC_INT64, n, v);
    double w = (double)hi - (double)lo;
    check_stats("int wide", v, n, ((double)lo + (double)hi) / 2, w * w / 12, 0);
    /* the whole int64 range works */
    CHECK_OK(tc_generator_random_int(g, buf, 1000, TC_INT64, INT64_MIN, INT64_MAX));
    free(buf);
    free(v);
    CHECK_OK(tc_generator_destroy(g));
}

/* ---- building blocks ----------------------------------------------------------- */

static void test_math(void)
{
    double worst_ln = 0, worst_sc = 0, worst_ln53 = 0, worst_sc53 = 0;
    for (int i = 0; i < 200000; i++) {
        uint32_t j = (uint32_t)(tc_test_rand() % (1u << 24)) + 1;
        if (i < 64)
            j = (1u << 24) - (uint32_t)i;
        double want = log(j / 16777216.0);
        double got = tc__ln_u24(j);
        double err = fabs(got - want) / fmax(fabs(want), 1e-30);
        if (want != 0)
            worst_ln = fmax(worst_ln, err);
        uint32_t k = (uint32_t)(tc_test_rand() % (1u << 24));
        float c, s;
        tc__sincos_u24(k, &c, &s);
        double a = 2 * M_PI * k / 16777216.0;
        worst_sc = fmax(worst_sc, fmax(fabs(c - cos(a)), fabs(s - sin(a))));
        uint64_t j53 = (tc_test_rand() >> 11) + 1;
        long double w53 = logl((long double)j53 / 9007199254740992.0L);
        if (w53 != 0)
            worst_ln53 = fmax(worst_ln53, (double)fabsl((tc__ln_u53(j53) - w53) / w53));
        uint64_t k53 = tc_test_rand() >> 11;
        double c53, s53;
        tc__sincos_u53(k53, &c53, &s53);
        long double a53 = 2 * 3.14159265358979323846264338327950288L * (long double)k53 /
                          9007199254740992.0L;
        worst_sc53 = fmax(worst_sc53,
                          (double)fmaxl(fabsl(c53 - cosl(a53)), fabsl(s53 - sinl(a53))));
    }
    if (worst_ln > 4e-7 || worst_sc > 4e-7 || worst_ln53 > 1e-15 || worst_sc53 > 1e-15)
        fprintf(stderr, "ln %g sincos %g ln53 %g sincos53 %g\n", worst_ln, worst_sc, worst_ln53,
                worst_sc53);
    CHECK(worst_ln <= 4e-7); /* a few float ulp */
    CHECK(worst_sc <= 4e-7);
    CHECK(worst_ln53 <= 1e-15);
    CHECK(worst_sc53 <= 1e-15);
}

/* Nearest-even reference: the representable neighbours of x, by value. */
static bool nearest_even_ok(double x, double got, double below, double above, bool got_even)
{
    double dg = fabs(x - got), db = fabs(x - below), da = fabs(x - above);
    if (dg > db || dg > da)
        return false;
    if ((dg == db && below != got) || (dg == da && above != got))
        return got_even; /* a tie must go to the even neighbour */
    return true;
}

static void test_half(void)
{
    /* every finite half survives half -> float -> half */
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000u; h++) {
        if ((h & 0x7c00u) == 0x7c00u)
            continue;
        bad += tc__f32_to_f16(tc__f16_to_f32((uint16_t)h)) != h;
        bad += tc__f32_to_bf16(tc__bf16_to_f32((uint16_t)h)) != h;
    }
    CHECK(bad == 0);
    /* random floats (and exact ties) round to the nearest, ties to even */
    int bad16 = 0, bad_b = 0;
    for (int i = 0; i < 200000; i++) {
        float f;
        uint32_t u = (uint32_t)tc_test_rand();
        if (i % 4 == 0)
            u = (u & 0xffffe000u) | 0x1000u; /* a half tie for normal halves */
        if (i % 4 == 1)
            u = (u & 0xffff0000u) | 0x8000u; /* a bfloat16 tie */
        f = tc__u2f(u);
        if (!isfinite(f))
            continue;
        uint16_t b = tc__f32_to_bf16(f);
        if ((b & 0x7f80u) != 0x7f80u && fabsf(f) < 3e38f) {
            double bv = tc__bf16_to_f32(b);
            double lo = tc__bf16_to_f32(b & 0x8000u ? (uint16_t)(b + 1) : (uint16_t)(b - 1));
            double hi = tc__bf16_to_f32(b & 0x8000u ? (uint16_t)(b - 1) : (uint16_t)(b + 1));
            if ((b & 0x7fffu) == 0)
                lo = -tc__bf16_to_f32(1), hi = tc__bf16_to_f32(1);
            bad_b += !nearest_even_ok(f, bv, fmin(lo, hi), fmax(lo, hi), (b & 1u) == 0);
        }
        float fh = tc__u2f((u & 0x80000000u) | (u & 0x7fffffffu) % 0x47800000u); /* |f| < 65536 */
        uint16_t h = tc__f32_to_f16(fh);
        if ((h & 0x7c00u) == 0x7c00u) {
            bad16 += fabsf(fh) < 65520.0f;
            continue;
        }
        double hv = tc__f16_to_f32(h);
        uint16_t up = (h & 0x7fffu) == 0 ? 1 : (uint16_t)(h + 1),
                 dn = (h & 0x7fffu) == 0 ? 0x8001 : (uint16_t)(h - 1);
        double a = tc__f16_to_f32(up), c = tc__f16_to_f32(dn);
        if ((up & 0x7c00u) == 0x7c00u)
            a = copysign(65536.0, hv);
        bad16 += !nearest_even_ok(fh, hv, fmin(a, c), fmax(a, c), (h & 1u) == 0);
    }
    CHECK(bad16 == 0);
    CHECK(bad_b == 0);
    CHECK(tc__f32_to_f16(65519.0f) == 0x7bffu);
    CHECK(tc__f32_to_f16(65520.0f) == 0x7c00u);
    CHECK(tc__f32_to_f16(0x1p-25f) == 0);
    CHECK(tc__f32_to_f16(0x1.8p-25f) == 1);
    CHECK(tc__f32_to_f16(0x1p-24f) == 1);
    CHECK(tc__f32_to_bf16(1.00390625f) == 0x3f80u); /* tie to even */
}

/* ---- state, seeds, defaults --------------------------------------------------- */

static void test_state(void)
{
    tc_generator *g = make(tc_test_rand());
    float a[100], b[100];
    CHECK_OK(tc_generator_normal(g, a, 3, TC_FLOAT32, 0, 1));
    tc_rng_state s;
    CHECK_OK(tc_generator_get_state(g, &s));
    CHECK(memcmp(s.bytes, "TCRS", 4) == 0 && s.bytes[4] == TC_RNG_STATE_VERSION);
    CHECK_OK(tc_generator_normal(g, a, 100, TC_FLOAT32, 0, 1));
    CHECK_OK(tc_generator_set_state(g, &s));
    CHECK_OK(tc_generator_normal(g, b, 100, TC_FLOAT32, 0, 1));
    CHECK(memcmp(a, b, sizeof a) == 0);
    /* a state moves between generators */
    tc_generator *h = make(1);
    CHECK_OK(tc_generator_set_state(h, &s));
    CHECK_OK(tc_generator_normal(h, b, 100, TC_FLOAT32, 0, 1));
    CHECK(memcmp(a, b, sizeof a) == 0);
    /* bad blobs are refused and change nothing */
    uint64_t off = tc_test_gen_offset(h), seed = tc_test_gen_seed(h);
    tc_rng_state bad = s;
    bad.bytes[0] = 'X';
    CHECK_STATUS(tc_generator_set_state(h, &bad), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "magic") != NULL);
    bad = s;
    bad.bytes[4] = 2;
    CHECK_STATUS(tc_generator_set_state(h, &bad), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "version") != NULL);
    bad = s;
    bad.bytes[6] = 7;
    CHECK_STATUS(tc_generator_set_state(h, &bad), TC_ERROR_INVALID_ARGUMENT);
    bad = s;
    bad.bytes[12] ^= 1;
    CHECK_STATUS(tc_generator_set_state(h, &bad), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "checksum") != NULL);
    memset(&bad, 0, sizeof bad);
    CHECK_STATUS(tc_generator_set_state(h, &bad), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_generator_set_state(h, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_generator_get_state(h, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(tc_test_gen_offset(h) == off && tc_test_gen_seed(h) == seed);
    /* different seeds differ; the same seed repeats */
    CHECK_OK(tc_generator_manual_seed(g, 1));
    CHECK_OK(tc_generator_manual_seed(h, 2));
    CHECK(tc_test_gen_offset(g) == 0 && tc_test_gen_seed(g) == 1);
    CHECK_OK(tc_generator_uniform(g, a, 100, TC_FLOAT32, 0, 1));
    CHECK_OK(tc_generator_uniform(h, b, 100, TC_FLOAT32, 0, 1));
    int same = 0;
    for (int i = 0; i < 100; i++)
        same += a[i] == b[i];
    CHECK(same < 5);
    CHECK_OK(tc_generator_manual_seed(h, 1));
    CHECK_OK(tc_generator_uniform(h, b, 100, TC_FLOAT32, 0, 1));
    CHECK(memcmp(a, b, sizeof a) == 0);
    /* seeding from the OS */
    uint64_t s1 = 0, s2 = 0;
    CHECK_OK(tc_generator_seed(g, &s1));
    CHECK_OK(tc_generator_seed(h, &s2));
    CHECK(s1 != s2 && tc_test_gen_seed(g) == s1);
    CHECK_OK(tc_generator_destroy(g));
    CHECK_OK(tc_generator_destroy(h));
}

static void test_defaults(void)
{
    tc_generator *cpu = NULL, *again = NULL;
    CHECK_OK(tc_default_generator((tc_device){TC_CPU, -1}, &cpu));
    CHECK_OK(tc_default_generator((tc_device){TC_CPU, 0}, &again));
    CHECK(cpu && cpu == again);
    CHECK(tc_test_gen_seed(cpu) == TC_DEFAULT_SEED);
    tc_device where = {TC_CUDA, 3};
    CHECK_OK(tc_generator_device(cpu, &where));
    CHECK(where.type == TC_CPU && where.index == -1);
    CHECK_STATUS(tc_generator_destroy(cpu), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_default_generator((tc_device){TC_CPU, 3}, &again), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_default_generator((tc_device){(tc_device_type)7, 0}, &again),
                 TC_ERROR_INVALID_ARGUMENT);
    if (tc_device_count() == 0) {
        tc_generator *g = NULL;
        CHECK_STATUS(tc_generator_create((tc_device){TC_CUDA, -1}, 1, &g), TC_ERROR_NO_DEVICE);
        CHECK(g == NULL);
        CHECK_STATUS(tc_default_generator((tc_device){TC_CUDA, 0}, &g), TC_ERROR_NO_DEVICE);
        CHECK_OK(tc_manual_seed(5));
        CHECK_OK(tc_manual_seed_all(5));
        CHECK_OK(tc_seed());
        CHECK_OK(tc_seed_all());
        uint64_t seed = 7;
        CHECK_STATUS(tc_initial_seed(&seed), TC_ERROR_NO_DEVICE);
        CHECK(seed == 7); /* not written on failure */
        CHECK(strncmp(tc_last_error(), "tc_initial_seed: ", 17) == 0);
        tc_rng_state s;
        CHECK_STATUS(tc_get_rng_state(-1, &s), TC_ERROR_NO_DEVICE);
        CHECK_OK(tc_get_rng_state_all(NULL, 0));
        CHECK_OK(tc_set_rng_state_all(NULL, 0));
        CHECK_STATUS(tc_set_rng_state_all(&s, 1), TC_ERROR_INVALID_ARGUMENT);
    }
}

/* ---- bad arguments change nothing ----------------------------------------------- */

static void test_bad_args(void)
{
    tc_generator *g = make(9);
    float f[8];
    CHECK_OK(tc_generator_uniform(g, f, 5, TC_FLOAT32, 0, 1));
    uint64_t off = tc_test_gen_offset(g);
    CHECK_STATUS(tc_generator_uniform(NULL, f, 8, TC_FLOAT32, 0, 1), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_generator_uniform(g, NULL, 8, TC_FLOAT32, 0, 1), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_generator_uniform(g, f, 8, TC_NUM_DTYPES, 0, 1), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_generator_uniform(g, f, 8, (tc_dtype)-1, 0, 1), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_generator_uniform(g, f, 8, TC_INT32, 0, 1), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_generator_uniform(g, f, 8, TC_FLOAT32, 1, 1), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_generator_uniform(g, f, 8, TC_FLOAT32, 2, 1), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_generator_uniform(g, f, 8, TC_FLOAT32, NAN, 1), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_generator_uniform(g, f, 8, TC_FLOAT32, 0, INFINITY), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_generator_uniform(g, f, 8, TC_FLOAT32, -3e38, 3e38), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_generator_uniform(g, f, 8, TC_FLOAT16, 0, 1e5), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_generator_uniform(g, f, 8, TC_FLOAT16, 1, 1.0001), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_generator_normal(g, f, 8, TC_FLOAT32, 0, -1), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_generator_normal(g, f, 8, TC_FLOAT32, NAN, 1), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_generator_normal(g, f, 8, TC_BOOL, 0, 1), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_generator_normal(g, f, 8, TC_INT64, 0, 1), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_generator_bernoulli(g, f, 8, TC_FLOAT32, -0.1), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_generator_bernoulli(g, f, 8, TC_FLOAT32, 1.5), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_generator_bernoulli(g, f, 8, TC_FLOAT32, NAN), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_generator_random_int(g, f, 8, TC_INT32, 5, 5), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_generator_random_int(g, f, 8, TC_INT8, 0, 200), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_generator_random_int(g, f, 8, TC_UINT8, -1, 2), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_generator_random_int(g, f, 8, TC_BOOL, 0, 3), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_generator_random_int(g, f, 8, TC_FLOAT16, 0, 5000), TC_ERROR_INVALID_ARGUMENT);
    CHECK(tc_test_gen_offset(g) == off);
    CHECK(memcmp(f, f, sizeof f) == 0);
    /* n == 0 is a no-op, even with NULL data */
    CHECK_OK(tc_generator_normal(g, NULL, 0, TC_FLOAT32, 0, 1));
    CHECK(tc_test_gen_offset(g) == off);
    CHECK_STATUS(tc_generator_create((tc_device){TC_CPU, -1}, 1, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_generator_destroy(NULL), TC_ERROR_INVALID_ARGUMENT);
    /* the getters check their arguments and write nothing on failure */
    uint64_t v = 12345;
    tc_device dv = {TC_CUDA, 9};
    CHECK_STATUS(tc_generator_initial_seed(NULL, &v), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_generator_offset(NULL, &v), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_generator_device(NULL, &dv), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_generator_initial_seed(g, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "tc_generator_initial_seed: out is NULL") != NULL);
    CHECK_STATUS(tc_generator_offset(g, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_generator_device(g, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(v == 12345 && dv.type == TC_CUDA && dv.index == 9);
    CHECK_OK(tc_generator_destroy(g));
    CHECK_STATUS(tc_generator_initial_seed(g, &v), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_generator_offset(g, &v), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_generator_device(g, &dv), TC_ERROR_INVALID_HANDLE);
    CHECK(v == 12345 && dv.type == TC_CUDA && dv.index == 9);
}

/* Every dtype of every distribution lands in its range. */
static void test_dtypes(void)
{
    tc_generator *g = make(tc_test_rand());
    double v[257];
    unsigned char buf[257 * 8];
    for (int d = 0; d < TC_NUM_DTYPES; d++) {
        CHECK_OK(tc_generator_bernoulli(g, buf, 257, (tc_dtype)d, 0.5));
        if (d == TC_INT8 || d == TC_INT16)
            continue;
        to_double(buf, (tc_dtype)d, 257, v);
        int ones = 0, other = 0;
        for (int i = 0; i < 257; i++)
            ones += v[i] == 1, other += v[i] != 0 && v[i] != 1;
        CHECK(other == 0 && ones > 80 && ones < 177);
    }
    int64_t lo[] = {0,         0,     -128, -32768,     INT32_MIN,
                    INT64_MIN, -2048, -256, -(1 << 24), -(1ll << 53)};
    int64_t hi[] = {2,         256,  128, 32768,         INT32_MAX,
                    INT64_MAX, 2049, 257, (1 << 24) + 1, (1ll << 53) + 1};
    for (int d = 0; d < TC_NUM_DTYPES; d++)
        CHECK_OK(tc_generator_random_int(g, buf, 257, (tc_dtype)d, lo[d], hi[d]));
    CHECK_OK(tc_generator_destroy(g));
}

/* ---- threads share a generator without reusing counters --------------------------- */

static void *draw_many(void *arg)
{
    float f[37];
    for (int i = 0; i < 200; i++)
        if (tc_generator_uniform(arg, f, 37, TC_FLOAT32, 0, 1) != TC_OK)
            return arg;
    return NULL;
}

static void test_threads(void)
{
    tc_generator *g = make(3);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        CHECK(pthread_create(&t[i], NULL, draw_many, g) == 0);
    for (int i = 0; i < 4; i++) {
        void *r = g;
        pthread_join(t[i], &r);
        CHECK(r == NULL);
    }
    CHECK(tc_test_gen_offset(g) == 4 * 200 * 10);
    CHECK_OK(tc_generator_destroy(g));
}

/* ---- inputs that once went wrong ----------------------------------------------- */

/* A destroyed generator was freed at once, and the next one created reused
 * its memory: a stale handle then drove the new generator. */
static void test_stale_handle(void)
{
    tc_generator *g = make(1);
    CHECK_OK(tc_generator_destroy(g));
    tc_generator *h = make(2);
    CHECK(h != g); /* the dead one is parked, not handed out again */
    float f[8];
    CHECK_STATUS(tc_generator_uniform(g, f, 8, TC_FLOAT32, 0, 1), TC_ERROR_INVALID_HANDLE);
    CHECK(strncmp(tc_last_error(), "tc_generator_uniform: ", 22) == 0 &&
          strstr(tc_last_error(), "destroyed") != NULL);
    CHECK_STATUS(tc_generator_manual_seed(g, 9), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_generator_destroy(g), TC_ERROR_INVALID_HANDLE); /* double destroy */
    uint64_t v = 7;
    CHECK_STATUS(tc_generator_offset(g, &v), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_generator_initial_seed(g, &v), TC_ERROR_INVALID_HANDLE);
    CHECK(v == 7);
    CHECK(tc_test_gen_offset(h) == 0 && tc_test_gen_seed(h) == 2);
    /* garbage is not a generator either */
    uint64_t junk[16] = {0x1234};
    CHECK_STATUS(tc_generator_normal((tc_generator *)junk, f, 8, TC_FLOAT32, 0, 1),
                 TC_ERROR_INVALID_HANDLE);
    CHECK(strstr(tc_last_error(), "not a live tc_generator") != NULL);
    CHECK_STATUS(tc_generator_uniform(NULL, f, 8, TC_FLOAT32, 0, 1), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strncmp(tc_last_error(), "tc_generator_uniform: ", 22) == 0);
    /* many create/destroy rounds: every stale handle stays dead while parked */
    tc_generator *dead[32];
    for (int i = 0; i < 32; i++) {
        dead[i] = make((uint64_t)i);
        CHECK_OK(tc_generator_destroy(dead[i]));
    }
    int alive = 0;
    for (int i = 0; i < 32; i++)
        alive += tc_generator_uniform(dead[i], f, 1, TC_FLOAT32, 0, 1) != TC_ERROR_INVALID_HANDLE;
    CHECK(alive == 0);
    CHECK_OK(tc_generator_destroy(h));
}

/* An offset near 2^64 used to wrap to 0 and reuse the first counters. */
static void test_offset_wrap(void)
{
    tc_generator *g = make(1);
    uint64_t seed = 0x5eed, top = UINT64_MAX - 2;
    tc_rng_state s;
    tc_test_forge_state(seed, top, &s);
    CHECK_OK(tc_generator_set_state(g, &s)); /* any offset is a valid state */
    CHECK(tc_test_gen_offset(g) == top);
    float f[12];
    double d[5];
    memset(f, 0, sizeof f);
    CHECK_STATUS(tc_generator_uniform(g, f, 12, TC_FLOAT32, 0, 1), TC_ERROR_INVALID_STATE);
    CHECK(strstr(tc_last_error(), "wrap") != NULL);
    CHECK_STATUS(tc_generator_uniform(g, d, 5, TC_FLOAT64, 0, 1), TC_ERROR_INVALID_STATE);
    CHECK_STATUS(tc_generator_random_int(g, d, 5, TC_INT64, 0, 1ll << 40), TC_ERROR_INVALID_STATE);
    CHECK(tc_test_gen_offset(g) == top && f[0] == 0.0f); /* unchanged, nothing written */
    /* two blocks still fit: counters 2^64-3 and 2^64-2, as raw Philox gives them */
    CHECK_OK(tc_generator_uniform(g, f, 8, TC_FLOAT32, 0, 1));
    CHECK(tc_test_gen_offset(g) == UINT64_MAX);
    int bad = 0;
    for (int i = 0; i < 8; i++) {
        uint32_t w[4];
        tc__philox_block(seed, top + (uint64_t)i / 4, 0, 0, w);
        bad += (double)f[i] != (double)(w[i % 4] >> 8) / 16777216.0;
    }
    CHECK(bad == 0);
    CHECK_STATUS(tc_generator_bernoulli(g, f, 1, TC_FLOAT32, 0.5), TC_ERROR_INVALID_STATE);
    CHECK(tc_test_gen_offset(g) == UINT64_MAX);
    CHECK_OK(tc_generator_manual_seed(g, 3)); /* reseeding is the way out */
    CHECK_OK(tc_generator_bernoulli(g, f, 1, TC_FLOAT32, 0.5));
    CHECK_OK(tc_generator_destroy(g));
}

/* NaN fails every comparison: it used to be called "negative" or reported
 * through %g, which also rounded away the digit that made a value wrong. */
static void test_messages(void)
{
    tc_generator *g = make(1);
    float f[4];
    CHECK_STATUS(tc_generator_uniform(g, f, 4, TC_FLOAT32, NAN, 1), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "lo is NaN") != NULL);
    CHECK_STATUS(tc_generator_uniform(g, f, 4, TC_FLOAT32, 0, NAN), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "hi is NaN") != NULL);
    CHECK_STATUS(tc_generator_normal(g, f, 4, TC_FLOAT32, 0, NAN), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "std is NaN") && !strstr(tc_last_error(), "negative"));
    CHECK_STATUS(tc_generator_normal(g, f, 4, TC_FLOAT32, NAN, 1), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "mean is NaN") != NULL);
    CHECK_STATUS(tc_generator_bernoulli(g, f, 4, TC_FLOAT32, NAN), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strncmp(tc_last_error(), "tc_generator_bernoulli: p is NaN", 32) == 0);
    CHECK_STATUS(tc_generator_bernoulli(g, f, 4, TC_FLOAT32, 1.0000000000000002),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "1.0000000000000002") != NULL);
    CHECK_STATUS(tc_generator_uniform(g, f, 4, TC_FLOAT32, 0.30000000000000004, 0.3),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "lo=0.30000000000000004, hi=0.3)") != NULL);
    CHECK_STATUS(tc_generator_normal(g, f, 4, TC_FLOAT32, 0, -1e-300), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "std=-1e-300 is negative") != NULL);
    CHECK(tc_test_gen_offset(g) == 0);
    CHECK_OK(tc_generator_destroy(g));
}

int main(void)
{
    tc_test_init();
    double t0 = tc_test_now_ms();
    test_kat();
    test_layout();
    test_offsets();
    test_golden();
    test_math();
    test_half();
    test_state();
    test_defaults();
    test_bad_args();
    test_dtypes();
    test_threads();
    test_stale_handle();
    test_offset_wrap();
    test_messages();
    test_stats();
    printf("test_random: %.0f ms\n", tc_test_now_ms() - t0);
    return TC_TEST_DONE();
}
