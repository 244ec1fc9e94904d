/* Indexing operations (indexing.h): embedding, index_select, gather,
 * scatter_add(_), triu / tril and topk, each against a reference written here
 * as plain loops over indices, over every dtype where PyTorch has the op,
 * strided inputs, empty and 0-d tensors, negative dims, k = 0 and k = size,
 * NaN and ties in topk, diagonals beyond the matrix; and bad input for every
 * function. The value checks run on the CPU and, when a GPU exists, on the
 * GPU too (against the same references); out-of-range indices are tested on
 * the CPU only (on a GPU they are a device assert, which ends the context). */
#include <math.h>
#include <stdlib.h>

#include "tc_test.h"

static const tc_device CPU = {TC_CPU, -1}, GPU = {TC_CUDA, -1};
static tc_device DEV;

static const tc_dtype ALL[] = {TC_BOOL,  TC_UINT8,   TC_INT8,     TC_INT16,   TC_INT32,
                               TC_INT64, TC_FLOAT16, TC_BFLOAT16, TC_FLOAT32, TC_FLOAT64};
#define NALL ((int)(sizeof ALL / sizeof ALL[0]))

static int64_t numel(int ndim, const int64_t *s)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= s[i];
    return n;
}

static tc_tensor *make(int ndim, const int64_t *sizes, const double *v, tc_dtype dtype)
{
    tc_tensor *d = NULL, *t = NULL;
    CHECK_OK(tc_tensor_from_data(v, ndim, sizes, TC_FLOAT64, CPU, &d));
    CHECK_OK(tc_tensor_to(d, DEV, dtype, false, &t));
    tc_tensor_release(d);
    return t;
}

/* Random values that every dtype holds exactly: integers in [lo, hi), 0/1
 * for bool. v must hold numel entries; returns the tensor. */
static tc_tensor *rand_exact(int ndim, const int64_t *sizes, tc_dtype dt, int lo, int hi, double *v)
{
    int64_t n = numel(ndim, sizes);
    if (dt == TC_UINT8 && lo < 0)
        lo = 0;
    for (int64_t i = 0; i < n; i++)
        v[i] = dt == TC_BOOL ? (double)(tc_test_rand() & 1)
                             : lo + floor(tc_test_rand_uniform() * (hi - lo));
    return make(ndim, sizes, v, dt);
}

static bool shape_is(const tc_tensor *t, int ndim, const int64_t *sizes)
{
    if (tc_tensor_ndim(t) != ndim)
        return false;
    for (int i = 0; i < ndim; i++)
        if (tc_tensor_size(t, i) != sizes[i])
            return false;
    return true;
}

static bool same_values(const tc_tensor *t, const double *ref, int64_t n, double tol)
{
    if (tc_tensor_numel(t) != n)
        return false;
    double *a = tc_test_values(t);
    bool ok = true;
    for (int64_t i = 0; i < n && ok; i++) {
        ok = (isnan(a[i]) && isnan(ref[i])) || fabs(a[i] - ref[i]) <= tol * fmax(1, fabs(ref[i]));
        if (!ok)
            fprintf(stderr, "element %lld: got %.17g, want %.17g\n", (long long)i, a[i], ref[i]);
    }
    free(a);
    return ok;
}

/* ---- embedding and index_select ------------------------------------------------ */

static void test_embedding(void)
{
    int64_t ws[2] = {7, 5}, is[2] = {2, 3};
    double w[35], ix[6];
    tc_tensor *weight = rand_exact(2, ws, TC_FLOAT32, -50, 50, w), *wt = NULL, *wT = NULL;
    for (int i = 0; i < 6; i++)
        ix[i] = floor(tc_test_rand_uniform() * 7);
    /* a strided weight: the transpose of a [5, 7] tensor holding w transposed */
    double wtv[35];
    for (int i = 0; i < 7; i++)
        for (int j = 0; j < 5; j++)
            wtv[j * 7 + i] = w[i * 5 + j];
    int64_t wts[2] = {5, 7};
    wt = make(2, wts, wtv, TC_FLOAT32);
    CHECK_OK(tc_tensor_transpose(wt, 0, 1, &wT));
    tc_dtype idts[2] = {TC_INT32, TC_INT64};
    for (int k = 0; k < 2; k++)
        for (int strided = 0; strided < 2; strided++) {
            tc_tensor *idx = make(2, is, ix, idts[k]), *out = NULL;
            CHECK_OK(tc_tensor_embedding(strided ? wT : weight, idx, &out));
            int64_t os[3] = {2, 3, 5};
            CHECK(shape_is(out, 3, os) && tc_tensor_dtype(out) == TC_FLOAT32);
            double ref[30];
            for (int a = 0; a < 2; a++)
                for (int b = 0; b < 3; b++)
                    for (int d = 0; d < 5; d++)
                        ref[(a * 3 + b) * 5 + d] = w[(int)ix[a * 3 + b] * 5 + d];
            CHECK(same_values(out, ref, 30, 0));
            tc_tensor_release(out);
            tc_tensor_release(idx);
        }
    /* rows of whole 16-byte vectors (a GPU copies them a vector a thread),
     * and a narrowed table whose rows are not 16-byte apart (element path) */
    static const tc_dtype rdt[3] = {TC_FLOAT32, TC_BFLOAT16, TC_INT64};
    for (int k = 0; k < 3; k++)
        for (int narrow = 0; narrow < 2; narrow++) {
            int64_t ts[2] = {9, 12}, xs[2] = {2, 4};
            double tv[108], xv[8], ref[96];
            tc_tensor *table = rand_exact(2, ts, rdt[k], -50, 50, tv), *tab = NULL;
            int64_t cols = narrow ? 10 : 12;
            CHECK_OK(tc_tensor_narrow(table, 1, 0, cols, &tab));
            for (int i = 0; i < 8; i++)
                xv[i] = floor(tc_test_rand_uniform() * 9);
            tc_tensor *idx = make(2, xs, xv, TC_INT64), *out = NULL;
            CHECK_OK(tc_tensor_embedding(tab, idx, &out));
            for (int r = 0; r < 8; r++)
                for (int c = 0; c < cols; c++)
                    ref[r * cols + c] = tv[(int)xv[r] * 12 + c];
            CHECK(same_values(out, ref, 8 * cols, 0));
            tc_tensor_release(out), tc_tensor_release(idx);
            tc_tensor_release(tab), tc_tensor_release(table);
        }
    /* 0-d indices give [D]; empty indices [0, D] */
    tc_tensor *z = NULL, *e = NULL, *out = NULL;
    CHECK_OK(tc_tensor_full(0, NULL, 4, TC_INT64, DEV, &z));
    CHECK_OK(tc_tensor_embedding(weight, z, &out));
    CHECK(shape_is(out, 1, &ws[1]) && same_values(out, w + 20, 5, 0));
    tc_tensor_release(out);
    int64_t es = 0, eo[2] = {0, 5};
    CHECK_OK(tc_tensor_zeros(1, &es, TC_INT32, DEV, &e));
    CHECK_OK(tc_tensor_embedding(weight, e, &out));
    CHECK(shape_is(out, 2, eo));
    tc_tensor_release(out);
    /* bad input that needs no kernel */
    tc_tensor *fidx = make(2, is, ix, TC_FLOAT32), *w1 = NULL;
    CHECK_STATUS(tc_tensor_embedding(weight, fidx, &out), TC_ERROR_DTYPE);
    CHECK_OK(tc_tensor_zeros(1, ws, TC_FLOAT32, DEV, &w1));
    CHECK_STATUS(tc_tensor_embedding(w1, z, &out), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_tensor_embedding(weight, z, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_embedding(NULL, z, &out), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_embedding(weight, NULL, &out), TC_ERROR_INVALID_ARGUMENT);
    int64_t eight[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    tc_tensor *i8 = NULL;
    CHECK_OK(tc_tensor_zeros(8, eight, TC_INT64, DEV, &i8));
    CHECK_STATUS(tc_tensor_embedding(weight, i8, &out), TC_ERROR_SHAPE);
    tc_tensor_release(i8);
    tc_tensor_release(w1);
    tc_tensor_release(fidx);
    tc_tensor_release(e);
    tc_tensor_release(z);
    tc_tensor_release(wT);
    tc_tensor_release(wt);
    tc_tensor_release(weight);
}

static void test_index_select(void)
{
    int64_t s[3] = {3, 4, 5};
    double v[60], ixv[12], ref[200];
    for (int di = 0; di < NALL; di++) {
        tc_dtype dt = ALL[di];
        tc_tensor *t = rand_exact(3, s, dt, -60, 60, v);
        for (int dim = -3; dim < 3; dim++) {
            int d = dim < 0 ? dim + 3 : dim;
            /* a strided 1-d index: column 1 of a [6, 2] tensor */
            for (int i = 0; i < 12; i++)
                ixv[i] = floor(tc_test_rand_uniform() * (double)s[d]);
            int64_t is2[2] = {6, 2};
            tc_tensor *i2 = make(2, is2, ixv, di % 2 ? TC_INT32 : TC_INT64), *col = NULL,
                      *idx = NULL, *out = NULL;
            CHECK_OK(tc_tensor_narrow(i2, 1, 1, 1, &col));
            CHECK_OK(tc_tensor_squeeze_dim(col, 1, &idx));
            CHECK_OK(tc_tensor_index_select(t, dim, idx, &out));
            int64_t os[3] = {3, 4, 5};
            os[d] = 6;
            CHECK(shape_is(out, 3, os) && tc_tensor_dtype(out) == dt);
            for (int a = 0; a < os[0]; a++)
                for (int b = 0; b < os[1]; b++)
                    for (int c = 0; c < os[2]; c++) {
                        int src[3] = {a, b, c};
                        src[d] = (int)ixv[(d == 0 ? a : d == 1 ? b : c) * 2 + 1];
                        ref[(a * os[1] + b) * os[2] + c] = v[(src[0] * 4 + src[1]) * 5 + src[2]];
                    }
            CHECK(same_values(out, ref, numel(3, os), 0));
            tc_tensor_release(out);
            tc_tensor_release(idx);
            tc_tensor_release(col);
            tc_tensor_release(i2);
        }
        tc_tensor_release(t);
    }
    /* an empty index, a 0-d index, a 0-d tensor */
    tc_tensor *t = rand_exact(3, s, TC_FLOAT64, -9, 9, v), *e = NULL, *out = NULL, *z = NULL,
              *zt = NULL;
    int64_t zero = 0, os[3] = {3, 0, 5};
    CHECK_OK(tc_tensor_zeros(1, &zero, TC_INT64, DEV, &e));
    CHECK_OK(tc_tensor_index_select(t, 1, e, &out));
    CHECK(shape_is(out, 3, os));
    tc_tensor_release(out);
    CHECK_OK(tc_tensor_full(0, NULL, 2, TC_INT32, DEV, &z));
    CHECK_OK(tc_tensor_index_select(t, 0, z, &out));
    int64_t os1[3] = {1, 4, 5};
    CHECK(shape_is(out, 3, os1) && same_values(out, v + 40, 20, 0));
    tc_tensor_release(out);
    CHECK_OK(tc_tensor_full(0, NULL, 2.5, TC_FLOAT32, DEV, &zt));
    tc_tensor *z0 = NULL;
    CHECK_OK(tc_tensor_full(0, NULL, 0, TC_INT64, DEV, &z0));
    CHECK_OK(tc_tensor_index_select(zt, -1, z0, &out));
    double x = 0;
    CHECK(tc_tensor_ndim(out) == 0 && tc_tensor_item(out, &x) == TC_OK && x == 2.5);
    tc_tensor_release(out);
    /* bad input that needs no kernel */
    int64_t s2[2] = {2, 2};
    tc_tensor *i2 = NULL, *fi = NULL;
    CHECK_OK(tc_tensor_zeros(2, s2, TC_INT64, DEV, &i2));
    CHECK_OK(tc_tensor_zeros(1, s2, TC_INT16, DEV, &fi));
    CHECK_STATUS(tc_tensor_index_select(t, 0, i2, &out), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_tensor_index_select(t, 0, fi, &out), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_tensor_index_select(t, 3, e, &out), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_index_select(t, -4, e, &out), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_index_select(t, 0, e, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_index_select(zt, 0, e, &out), TC_ERROR_INVALID_ARGUMENT);
    tc_tensor_release(i2);
    tc_tensor_release(fi);
    tc_tensor_release(z0);
    tc_tensor_release(zt);
    tc_tensor_release(z);
    tc_tensor_release(e);
    tc_tensor_release(t);
}

/* ---- gather and scatter_add ----------------------------------------------------------- */

static void test_gather(void)
{
    int64_t s[3] = {3, 4, 5};
    double v[60], iv[200], ref[200];
    for (int di = 0; di < NALL; di++) {
        tc_dtype dt = ALL[di];
        tc_tensor *base = rand_exact(3, s, dt, -100, 100, v), *t = base;
        for (int dim = 0; dim < 3; dim++) {
            /* index: smaller than t in the other dims, larger along dim */
            int64_t is[3] = {2, 3, 4};
            is[dim] = 6;
            int64_t n = numel(3, is);
            for (int64_t i = 0; i < n; i++)
                iv[i] = floor(tc_test_rand_uniform() * (double)s[dim]);
            tc_tensor *idx = make(3, is, iv, TC_INT64), *out = NULL;
            CHECK_OK(tc_tensor_gather(t, dim - 3 * (di % 2), idx, &out));
            CHECK(shape_is(out, 3, is) && tc_tensor_dtype(out) == dt);
            for (int a = 0; a < is[0]; a++)
                for (int b = 0; b < is[1]; b++)
                    for (int c = 0; c < is[2]; c++) {
                        int64_t at = (a * is[1] + b) * is[2] + c;
                        int src[3] = {a, b, c};
                        src[dim] = (int)iv[at];
                        ref[at] = v[(src[0] * 4 + src[1]) * 5 + src[2]];
                    }
            CHECK(same_values(out, ref, n, 0));
            tc_tensor_release(out);
            tc_tensor_release(idx);
        }
        tc_tensor_release(base);
    }
    /* a strided input: t = transpose of u, gather along dim 1 of t */
    int64_t us[2] = {5, 4}, is[2] = {3, 2};
    double uv[20], ix[6] = {4, 0, 3, 3, 1, 2};
    tc_tensor *u = rand_exact(2, us, TC_FLOAT32, -9, 9, uv), *t = NULL, *idx = NULL, *out = NULL;
    CHECK_OK(tc_tensor_transpose(u, 0, 1, &t)); /* [4, 5]: t[i][j] = u[j][i] */
    idx = make(2, is, ix, TC_INT64);
    CHECK_OK(tc_tensor_gather(t, 1, idx, &out));
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++)
            ref[i * 2 + j] = uv[(int)ix[i * 2 + j] * 4 + i];
    CHECK(same_values(out, ref, 6, 0));
    tc_tensor_release(out);
    /* 0-d */
    tc_tensor *z = NULL, *zi = NULL;
    CHECK_OK(tc_tensor_full(0, NULL, 7, TC_INT16, DEV, &z));
    CHECK_OK(tc_tensor_zeros(0, NULL, TC_INT64, DEV, &zi));
    CHECK_OK(tc_tensor_gather(z, 0, zi, &out));
    double x = 0;
    CHECK(tc_tensor_ndim(out) == 0 && tc_tensor_item(out, &x) == TC_OK && x == 7);
    tc_tensor_release(out);
    /* bad input */
    tc_tensor *i32 = make(2, is, ix, TC_INT32), *i1 = NULL, *big = NULL;
    CHECK_STATUS(tc_tensor_gather(t, 1, i32, &out), TC_ERROR_DTYPE);
    CHECK_OK(tc_tensor_zeros(1, is, TC_INT64, DEV, &i1));
    CHECK_STATUS(tc_tensor_gather(t, 0, i1, &out), TC_ERROR_SHAPE);
    int64_t bs[2] = {5, 1};
    CHECK_OK(tc_tensor_zeros(2, bs, TC_INT64, DEV, &big));
    CHECK_STATUS(tc_tensor_gather(t, 1, big, &out), TC_ERROR_SHAPE); /* 5 rows > 4 */
    CHECK_OK(tc_tensor_gather(t, 0, big, &out));                     /* along dim: fine */
    tc_tensor_release(out);
    CHECK_STATUS(tc_tensor_gather(t, 2, idx, &out), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_gather(t, 1, idx, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_gather(NULL, 1, idx, &out), TC_ERROR_INVALID_ARGUMENT);
    tc_tensor_release(big);
    tc_tensor_release(i1);
    tc_tensor_release(i32);
    tc_tensor_release(zi);
    tc_tensor_release(z);
    tc_tensor_release(idx);
    tc_tensor_release(t);
    tc_tensor_release(u);
}

/* value wrapped to dtype as PyTorch's integer arithmetic does */
static double wrap_to(tc_dtype dt, int64_t x)
{
    switch (dt) {
    case TC_BOOL: return x != 0;
    case TC_UINT8: return (uint8_t)x;
    case TC_INT8: return (int8_t)x;
    case TC_INT16: return (int16_t)x;
    case TC_INT32: return (int32_t)x;
    default: return (double)x;
    }
}

static void test_scatter_add(void)
{
    int64_t ss[2] = {4, 5}, srs[2] = {5, 6};
    double sv[20], rv[30], iv[30], ref[20];
    for (int di = 0; di < NALL; di++) {
        tc_dtype dt = ALL[di];
        bool fl = tc_dtype_is_floating(dt);
        /* 16-bit floats: small integers, so that every sum is exact */
        int hi = dt == TC_FLOAT16 || dt == TC_BFLOAT16 ? 8 : 100;
        for (int dim = 0; dim < 2; dim++) {
            tc_tensor *self = rand_exact(2, ss, dt, 0, hi, sv);
            tc_tensor *src = rand_exact(2, srs, dt, 0, hi, rv);
            if (dt == TC_FLOAT32 || dt == TC_FLOAT64) { /* fractions too */
                for (int i = 0; i < 30; i++)
                    rv[i] = (double)(float)(tc_test_rand_uniform() * 10 - 5);
                tc_tensor_release(src);
                src = make(2, srs, rv, dt);
            }
            int64_t is[2] = {3, 4};
            is[dim] = srs[dim]; /* more entries along dim than self has: repeats */
            for (int i = 0; i < is[0] * is[1]; i++)
                iv[i] = floor(tc_test_rand_uniform() * (double)ss[dim]);
            tc_tensor *idx = make(2, is, iv, TC_INT64), *out = NULL;
            CHECK_OK(tc_tensor_scatter_add(self, dim, idx, src, &out));
            /* reference: double sums (integers exact), wrapped at the end */
            double acc[20];
            int64_t iacc[20];
            for (int i = 0; i < 20; i++) {
                acc[i] = sv[i];
                iacc[i] = (int64_t)sv[i];
            }
            for (int a = 0; a < is[0]; a++)
                for (int b = 0; b < is[1]; b++) {
                    int ix = (int)iv[a * is[1] + b];
                    int at = dim == 0 ? ix * 5 + b : a * 5 + ix;
                    acc[at] += rv[a * 6 + b];
                    if (dt == TC_BOOL)
                        iacc[at] |= (int64_t)rv[a * 6 + b];
                    else
                        iacc[at] += (int64_t)rv[a * 6 + b];
                }
            for (int i = 0; i < 20; i++)
                ref[i] = fl ? acc[i] : wrap_to(dt, iacc[i]);
            double tol = dt == TC_FLOAT32 ? 1e-6 : dt == TC_FLOAT64 ? 1e-14 : 0;
            CHECK(tc_tensor_dtype(out) == dt && shape_is(out, 2, ss));
            CHECK(same_values(out, ref, 20, tol));
            CHECK(same_values(self, sv, 20, 0)); /* out of place: self unchanged */
            /* in place, into self itself */
            CHECK_OK(tc_tensor_scatter_add_(self, dim - 2, idx, src));
            CHECK(same_values(self, ref, 20, tol));
            tc_tensor_release(out);
            tc_tensor_release(idx);
            tc_tensor_release(src);
            tc_tensor_release(self);
        }
    }
    /* in place into a strided view: the rest of the base is untouched */
    int64_t bs[2] = {3, 4};
    double bv[12], one[1] = {1}, zero[1] = {0};
    tc_tensor *base = rand_exact(2, bs, TC_FLOAT64, -5, 5, bv), *colv = NULL, *col = NULL;
    CHECK_OK(tc_tensor_narrow(base, 1, 2, 1, &colv)); /* [3, 1], stride 4 */
    CHECK_OK(tc_tensor_squeeze(colv, &col));          /* [3] */
    int64_t n1 = 1;
    tc_tensor *i1 = make(1, &n1, zero, TC_INT64), *s1 = make(1, &n1, one, TC_FLOAT64);
    CHECK_OK(tc_tensor_scatter_add_(col, 0, i1, s1));
    bv[2] += 1;
    CHECK(same_values(base, bv, 12, 0));
    /* an empty index does nothing */
    tc_tensor *e = NULL;
    int64_t ez = 0;
    CHECK_OK(tc_tensor_zeros(1, &ez, TC_INT64, DEV, &e));
    CHECK_OK(tc_tensor_scatter_add_(col, 0, e, s1));
    CHECK(same_values(base, bv, 12, 0));
    /* bad input that needs no kernel */
    tc_tensor *x = NULL, *f32 = NULL, *i32 = make(1, &n1, zero, TC_INT32), *out = NULL;
    CHECK_OK(tc_tensor_expand(s1, 1, bs, &x)); /* [3] of one element */
    CHECK_STATUS(tc_tensor_scatter_add_(x, 0, i1, s1), TC_ERROR_INVALID_ARGUMENT);
    f32 = make(1, &n1, one, TC_FLOAT32);
    CHECK_STATUS(tc_tensor_scatter_add_(col, 0, i1, f32), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_tensor_scatter_add(col, 0, i32, s1, &out), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_tensor_scatter_add(base, 0, i1, s1, &out), TC_ERROR_SHAPE); /* ndim */
    int64_t i4 = 4;
    tc_tensor *idx4 = NULL;
    CHECK_OK(tc_tensor_zeros(1, &i4, TC_INT64, DEV, &idx4));
    CHECK_STATUS(tc_tensor_scatter_add(col, 0, idx4, s1, &out), TC_ERROR_SHAPE); /* > src */
    CHECK_STATUS(tc_tensor_scatter_add(col, 1, i1, s1, &out), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_scatter_add(col, 0, i1, s1, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_scatter_add_(NULL, 0, i1, s1), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_scatter_add_(col, 0, NULL, s1), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_scatter_add_(col, 0, i1, NULL), TC_ERROR_INVALID_ARGUMENT);
    tc_tensor_release(idx4);
    tc_tensor_release(i32);
    tc_tensor_release(f32);
    tc_tensor_release(x);
    tc_tensor_release(e);
    tc_tensor_release(i1);
    tc_tensor_release(s1);
    tc_tensor_release(col);
    tc_tensor_release(colv);
    tc_tensor_release(base);
}

/* Many adds into a few neighbouring elements: on a GPU the atomics collide,
 * and for 8- and 16-bit dtypes (a compare-and-swap on the 32-bit word around
 * the element) neighbours share a word. self is a view starting one element
 * into its base, so elements straddle words; the base's other elements must
 * not change. Integer sums wrap; 16-bit float sums stay below 256, exact. */
static void test_scatter_add_contention(void)
{
    enum { N = 600, SLOTS = 5 };
    static const tc_dtype dts[] = {TC_BOOL,  TC_UINT8,   TC_INT8,     TC_INT16,   TC_INT32,
                                   TC_INT64, TC_FLOAT16, TC_BFLOAT16, TC_FLOAT32, TC_FLOAT64};
    double *sv = malloc(sizeof(double) * N), *iv = malloc(sizeof(double) * N);
    for (size_t di = 0; di < sizeof dts / sizeof dts[0]; di++) {
        tc_dtype dt = dts[di];
        bool small_float = dt == TC_FLOAT16 || dt == TC_BFLOAT16;
        int64_t n = N, bn = SLOTS + 2;
        for (int i = 0; i < N; i++) {
            sv[i] = dt == TC_BOOL ? (double)(i % 3 == 0) : small_float ? 1 : 1 + i % 3;
            iv[i] = floor(tc_test_rand_uniform() * SLOTS);
        }
        double bv[SLOTS + 2] = {7, 1, 0, 1, 2, 0, 9}, ref[SLOTS + 2];
        if (dt == TC_BOOL)
            for (int i = 0; i < SLOTS + 2; i++)
                bv[i] = bv[i] != 0;
        int64_t iacc[SLOTS + 2];
        double facc[SLOTS + 2];
        for (int i = 0; i < SLOTS + 2; i++) {
            iacc[i] = (int64_t)bv[i];
            facc[i] = bv[i];
        }
        for (int i = 0; i < N; i++) {
            int at = 1 + (int)iv[i];
            facc[at] += sv[i];
            iacc[at] = dt == TC_BOOL ? (iacc[at] | (int64_t)sv[i]) : iacc[at] + (int64_t)sv[i];
        }
        for (int i = 0; i < SLOTS + 2; i++)
            ref[i] = tc_dtype_is_floating(dt) ? facc[i] : wrap_to(dt, iacc[i]);
        tc_tensor *base = make(1, &bn, bv, dt), *self = NULL, *src = make(1, &n, sv, dt);
        tc_tensor *idx = make(1, &n, iv, TC_INT64);
        CHECK_OK(tc_tensor_narrow(base, 0, 1, SLOTS, &self));
        CHECK_OK(tc_tensor_scatter_add_(self, 0, idx, src));
        if (!same_values(base, ref, SLOTS + 2, 0))
            CHECK(!"scatter_add_ with colliding adds");
        tc_tensor_release(idx);
        tc_tensor_release(src);
        tc_tensor_release(self);
        tc_tensor_release(base);
    }
    free(sv);
    free(iv);
}

/* ---- triu and tril ------------------------------------------------------------------------ */

static void test_tri(void)
{
    int64_t s[3] = {2, 4, 5};
    double v[40], ref[40];
    for (int di = 0; di < NALL; di++) {
        tc_dtype dt = ALL[di];
        tc_tensor *t = rand_exact(3, s, dt, 1, 50, v); /* no zeros: masking shows */
        for (int upper = 0; upper < 2; upper++)
            for (int64_t diag = -6; diag <= 6; diag++) {
                tc_tensor *out = NULL;
                CHECK_OK(upper ? tc_tensor_triu(t, diag, &out) : tc_tensor_tril(t, diag, &out));
                for (int b = 0; b < 2; b++)
                    for (int i = 0; i < 4; i++)
                        for (int j = 0; j < 5; j++) {
                            int k = (b * 4 + i) * 5 + j;
                            bool keep = upper ? j - i >= diag : j - i <= diag;
                            ref[k] = keep ? v[k] : 0;
                        }
                CHECK(tc_tensor_dtype(out) == dt && shape_is(out, 3, s));
                CHECK(same_values(out, ref, 40, 0));
                tc_tensor_release(out);
            }
        tc_tensor_release(t);
    }
    /* strided: the transpose of a [5, 4] matrix; huge diagonals */
    int64_t ms[2] = {5, 4};
    tc_tensor *m = rand_exact(2, ms, TC_FLOAT32, 1, 9, v), *mt = NULL, *out = NULL;
    CHECK_OK(tc_tensor_transpose(m, 0, 1, &mt)); /* [4, 5], mt[i][j] = v[j * 4 + i] */
    CHECK_OK(tc_tensor_tril(mt, 1, &out));
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 5; j++)
            ref[i * 5 + j] = j - i <= 1 ? v[j * 4 + i] : 0;
    CHECK(same_values(out, ref, 20, 0));
    tc_tensor_release(out);
    CHECK_OK(tc_tensor_triu(mt, INT64_MAX, &out));
    for (int i = 0; i < 20; i++)
        ref[i] = 0;
    CHECK(same_values(out, ref, 20, 0));
    tc_tensor_release(out);
    CHECK_OK(tc_tensor_triu(mt, INT64_MIN, &out));
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 5; j++)
            ref[i * 5 + j] = v[j * 4 + i];
    CHECK(same_values(out, ref, 20, 0));
    tc_tensor_release(out);
    /* empty matrices */
    int64_t es[3] = {3, 0, 2};
    tc_tensor *e = NULL, *one = NULL;
    CHECK_OK(tc_tensor_zeros(3, es, TC_INT8, DEV, &e));
    CHECK_OK(tc_tensor_triu(e, 0, &out));
    CHECK(shape_is(out, 3, es));
    tc_tensor_release(out);
    /* bad input */
    CHECK_OK(tc_tensor_zeros(1, s, TC_FLOAT32, DEV, &one));
    CHECK_STATUS(tc_tensor_triu(one, 0, &out), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_tensor_tril(one, 0, &out), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_tensor_triu(mt, 0, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_tril(NULL, 0, &out), TC_ERROR_INVALID_ARGUMENT);
    tc_tensor_release(one);
    tc_tensor_release(e);
    tc_tensor_release(mt);
    tc_tensor_release(m);
}

/* ---- topk -------------------------------------------------------------------------------- */

/* a before b: NaN above every number, ties by index */
static bool better(double a, int64_t ia, double b, int64_t ib, bool largest)
{
    if (isnan(a) || isnan(b)) {
        if (isnan(a) && isnan(b))
            return ia < ib;
        return largest ? isnan(a) : isnan(b);
    }
    if (a != b)
        return largest ? a > b : a < b;
    return ia < ib;
}

static void check_topk(const tc_tensor *t, const double *v, const int64_t *s, int d, int64_t k,
                       bool largest)
{
    tc_tensor *vals = NULL, *idx = NULL;
    CHECK_OK(tc_tensor_topk(t, k, d - 3, largest, d == 1, &vals, &idx));
    int64_t os[3] = {s[0], s[1], s[2]};
    os[d] = k;
    if (!vals || !idx)
        return;
    CHECK(shape_is(vals, 3, os) && shape_is(idx, 3, os));
    CHECK(tc_tensor_dtype(vals) == tc_tensor_dtype(t) && tc_tensor_dtype(idx) == TC_INT64);
    int64_t n = numel(3, os), r = s[d];
    double *rv = malloc(sizeof(double) * (size_t)(n + 1)),
           *ri = malloc(sizeof(double) * (size_t)(n + 1));
    bool *taken = malloc((size_t)r + 1);
    for (int a = 0; a < (d == 0 ? 1 : s[0]); a++)
        for (int b = 0; b < (d == 1 ? 1 : s[1]); b++)
            for (int c = 0; c < (d == 2 ? 1 : s[2]); c++) {
                memset(taken, 0, (size_t)r + 1);
                for (int64_t j = 0; j < k; j++) { /* selection: the best not taken */
                    int64_t best = -1;
                    double bv = 0;
                    for (int64_t q = 0; q < r; q++) {
                        int p[3] = {a, b, c};
                        p[d] = (int)q;
                        double x = v[(p[0] * s[1] + p[1]) * s[2] + p[2]];
                        if (!taken[q] && (best < 0 || better(x, q, bv, best, largest))) {
                            best = q;
                            bv = x;
                        }
                    }
                    taken[best] = true;
                    int o[3] = {a, b, c};
                    o[d] = (int)j;
                    int64_t at = (o[0] * os[1] + o[1]) * os[2] + o[2];
                    rv[at] = bv;
                    ri[at] = (double)best;
                }
            }
    CHECK(same_values(vals, rv, n, 0));
    CHECK(same_values(idx, ri, n, 0));
    free(taken);
    free(rv);
    free(ri);
    tc_tensor_release(vals);
    tc_tensor_release(idx);
}

static void test_topk(void)
{
    int64_t s[3] = {3, 9, 4};
    double v[108];
    for (int di = 1; di < NALL; di++) { /* not bool */
        tc_dtype dt = ALL[di];
        bool fl = tc_dtype_is_floating(dt);
        /* few distinct values: many ties; NaN in floating ones */
        for (int i = 0; i < 108; i++) {
            v[i] = floor(tc_test_rand_uniform() * 5) - (dt == TC_UINT8 ? 0 : 2);
            if (fl && tc_test_rand() % 7 == 0)
                v[i] = NAN;
            if (dt == TC_INT64 && i % 5 == 0)
                v[i] = (double)(INT64_C(1) << 60) * (i % 2 ? -1 : 1);
        }
        tc_tensor *t = make(3, s, v, dt);
        for (int d = 0; d < 3; d++)
            for (int64_t k = 0; k <= s[d]; k += (k == 0 ? 1 : 2)) {
                check_topk(t, v, s, d, k, true);
                check_topk(t, v, s, d, k, false);
            }
        for (int d = 0; d < 3; d++)
            check_topk(t, v, s, d, s[d], true); /* k = size: a full sort */
        tc_tensor_release(t);
    }
    /* a long slice, strided input */
    int64_t ls[2] = {3000, 2};
    double *lv = malloc(sizeof(double) * 6000);
    for (int i = 0; i < 6000; i++)
        lv[i] = floor(tc_test_rand_uniform() * 1000) / 8;
    tc_tensor *l = make(2, ls, lv, TC_FLOAT32), *vals = NULL, *idx = NULL;
    int64_t s3[3] = {1, 3000, 2};
    CHECK_OK(tc_tensor_unsqueeze(l, 0, &vals));
    check_topk(vals, lv, s3, 1, 17, true);
    tc_tensor_release(vals);
    free(lv);
    /* slices too long to sort in shared memory (the global scratch path),
     * read strided (inner > 1); few distinct values, so ties are many */
    int64_t gs[3] = {2, 5000, 3};
    double *gv = malloc(sizeof(double) * 30000);
    static const tc_dtype gdt[] = {TC_FLOAT32, TC_BFLOAT16, TC_INT8};
    for (size_t di = 0; di < sizeof gdt / sizeof gdt[0]; di++) {
        for (int i = 0; i < 30000; i++)
            gv[i] = floor(tc_test_rand_uniform() * 200) - 100;
        if (gdt[di] == TC_FLOAT32)
            gv[4321] = NAN;
        tc_tensor *g = make(3, gs, gv, gdt[di]);
        check_topk(g, gv, gs, 1, 37, true);
        check_topk(g, gv, gs, 1, 37, false);
        tc_tensor_release(g);
    }
    free(gv);
    /* more slices than blocks, in shared memory and in global scratch */
    int64_t ms[2][3] = {{1, 100, 600}, {1, 4100, 300}};
    for (int c = 0; c < 2; c++) {
        int64_t n = numel(3, ms[c]);
        double *mv = malloc(sizeof(double) * (size_t)n);
        for (int64_t i = 0; i < n; i++)
            mv[i] = floor(tc_test_rand_uniform() * 5000);
        tc_tensor *m = make(3, ms[c], mv, TC_FLOAT32);
        check_topk(m, mv, ms[c], 1, 3, true);
        tc_tensor_release(m);
        free(mv);
    }
    /* 0-d; empty slices; bad input */
    tc_tensor *z = NULL, *e = NULL, *b = NULL;
    CHECK_OK(tc_tensor_full(0, NULL, 3, TC_FLOAT32, DEV, &z));
    CHECK_OK(tc_tensor_topk(z, 1, 0, true, true, &vals, &idx));
    double x = -1;
    CHECK(tc_tensor_ndim(vals) == 0 && tc_tensor_item(vals, &x) == TC_OK && x == 3);
    CHECK(tc_tensor_item(idx, &x) == TC_OK && x == 0);
    tc_tensor_release(vals);
    tc_tensor_release(idx);
    int64_t es[2] = {0, 4};
    CHECK_OK(tc_tensor_zeros(2, es, TC_FLOAT32, DEV, &e));
    CHECK_OK(tc_tensor_topk(e, 2, 1, true, true, &vals, &idx));
    int64_t eo[2] = {0, 2};
    CHECK(shape_is(vals, 2, eo) && shape_is(idx, 2, eo));
    tc_tensor_release(vals);
    tc_tensor_release(idx);
    CHECK_OK(tc_tensor_zeros(2, es, TC_BOOL, DEV, &b));
    vals = idx = (tc_tensor *)&x;
    CHECK_STATUS(tc_tensor_topk(l, 3001, 0, true, true, &vals, &idx), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_topk(l, -1, 0, true, true, &vals, &idx), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_topk(l, 1, 2, true, true, &vals, &idx), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_topk(e, 1, 0, true, true, &vals, &idx), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_topk(b, 0, 1, true, true, &vals, &idx), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_tensor_topk(l, 1, 0, true, true, NULL, &idx), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_topk(l, 1, 0, true, true, &vals, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_topk(NULL, 1, 0, true, true, &vals, &idx), TC_ERROR_INVALID_ARGUMENT);
    CHECK(vals == (tc_tensor *)&x && idx == (tc_tensor *)&x);
    tc_tensor_release(b);
    tc_tensor_release(e);
    tc_tensor_release(z);
    tc_tensor_release(l);
}

/* ---- out-of-range indices (CPU: an error, nothing written) ---------------------------------- */

static void test_out_of_range(void)
{
    int64_t s[2] = {3, 4}, n2 = 2;
    double v[12], bad[2][2] = {{0, 3}, {-1, 0}};
    tc_tensor *t = rand_exact(2, s, TC_FLOAT32, -9, 9, v), *out = NULL;
    for (int b = 0; b < 2; b++) {
        tc_tensor *i64 = make(1, &n2, bad[b], TC_INT64), *i32 = make(1, &n2, bad[b], TC_INT32);
        int64_t is[2] = {1, 2};
        tc_tensor *g = NULL, *src = NULL;
        CHECK_OK(tc_tensor_view(i64, 2, is, &g));
        CHECK_OK(tc_tensor_ones(2, is, TC_FLOAT32, CPU, &src));
        out = (tc_tensor *)&n2;
        CHECK_STATUS(tc_tensor_embedding(t, i32, &out), TC_ERROR_INVALID_ARGUMENT);
        CHECK_STATUS(tc_tensor_index_select(t, 0, i64, &out), TC_ERROR_INVALID_ARGUMENT);
        CHECK_STATUS(tc_tensor_gather(t, 0, g, &out), TC_ERROR_INVALID_ARGUMENT);
        CHECK_STATUS(tc_tensor_scatter_add(t, 0, g, src, &out), TC_ERROR_INVALID_ARGUMENT);
        CHECK(out == (tc_tensor *)&n2);
        /* in place: the first index is fine, the second is not: nothing written */
        CHECK_STATUS(tc_tensor_scatter_add_(t, 0, g, src), TC_ERROR_INVALID_ARGUMENT);
        CHECK(same_values(t, v, 12, 0));
        tc_tensor_release(src);
        tc_tensor_release(g);
        tc_tensor_release(i32);
        tc_tensor_release(i64);
    }
    tc_tensor_release(t);
}

static void test_cross_device(void)
{
    int64_t s[2] = {2, 2};
    tc_tensor *c = NULL, *g = NULL, *out = NULL, *v = NULL;
    CHECK_OK(tc_tensor_zeros(2, s, TC_FLOAT32, CPU, &c));
    CHECK_OK(tc_tensor_zeros(2, s, TC_INT64, GPU, &g));
    CHECK_STATUS(tc_tensor_embedding(c, g, &out), TC_ERROR_DEVICE_MISMATCH);
    CHECK_STATUS(tc_tensor_gather(c, 0, g, &out), TC_ERROR_DEVICE_MISMATCH);
    CHECK_STATUS(tc_tensor_scatter_add(c, 0, g, c, &out), TC_ERROR_DEVICE_MISMATCH);
    CHECK_OK(tc_tensor_topk(g, 1, 0, true, true, &out, &v)); /* one device: fine */
    tc_tensor_release(out);
    tc_tensor_release(v);
    tc_tensor_release(c);
    tc_tensor_release(g);
}

static void run_all(tc_device dev)
{
    DEV = dev;
    test_embedding();
    test_index_select();
    test_gather();
    test_scatter_add();
    test_scatter_add_contention();
    test_tri();
    test_topk();
}

/* A result whose size overflows int64_t is TC_ERROR_SHAPE, never a wrapped
 * count: indices expanded (stride 0, no memory) to 2^59 entries of rows of
 * 8 floats would be 2^64 bytes. */
static void test_overflowing_sizes(void)
{
    int64_t ws[2] = {4, 8}, one = 1, many = (int64_t)1 << 59;
    tc_tensor *w = NULL, *i1 = NULL, *idx = NULL, *o = NULL;
    CHECK_OK(tc_tensor_zeros(2, ws, TC_FLOAT32, CPU, &w));
    CHECK_OK(tc_tensor_zeros(1, &one, TC_INT64, CPU, &i1));
    CHECK_OK(tc_tensor_expand(i1, 1, &many, &idx));
    CHECK_STATUS(tc_tensor_embedding(w, idx, &o), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_tensor_index_select(w, 0, idx, &o), TC_ERROR_SHAPE);
    CHECK(o == NULL);
    tc_tensor_release(idx);
    tc_tensor_release(i1);
    tc_tensor_release(w);
}

/* A released tensor in any position is TC_ERROR_INVALID_HANDLE, and nothing
 * is written. */
static void test_released_handles(void)
{
    int64_t ws[2] = {4, 3}, n = 2;
    tc_tensor *w = NULL, *idx = NULL, *dead = NULL, *o = NULL, *o2 = NULL;
    CHECK_OK(tc_tensor_zeros(2, ws, TC_FLOAT32, CPU, &w));
    CHECK_OK(tc_tensor_zeros(1, &n, TC_INT64, CPU, &idx));
    CHECK_OK(tc_tensor_zeros(1, &n, TC_INT64, CPU, &dead));
    CHECK_OK(tc_tensor_release(dead)); /* dead is now a released handle */
    CHECK_STATUS(tc_tensor_embedding(dead, idx, &o), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_tensor_embedding(w, dead, &o), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_tensor_index_select(dead, 0, idx, &o), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_tensor_index_select(w, 0, dead, &o), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_tensor_gather(dead, 0, idx, &o), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_tensor_gather(w, 0, dead, &o), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_tensor_scatter_add(dead, 0, idx, w, &o), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_tensor_scatter_add(w, 0, dead, w, &o), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_tensor_scatter_add(w, 0, idx, dead, &o), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_tensor_scatter_add_(dead, 0, idx, w), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_tensor_triu(dead, 0, &o), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_tensor_tril(dead, 0, &o), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_tensor_topk(dead, 1, 0, true, true, &o, &o2), TC_ERROR_INVALID_HANDLE);
    CHECK(o == NULL && o2 == NULL);
    tc_tensor_release(idx);
    tc_tensor_release(w);
}

int main(void)
{
    tc_test_init();
    run_all(CPU);
    test_out_of_range();
    test_overflowing_sizes();
    test_released_handles();
    if (tc_is_available()) {
        printf("GPU: the same checks on cuda\n");
        run_all(GPU);
        test_cross_device();
    } else
        printf("no GPU: the CPU checks only\n");
    return TC_TEST_DONE();
}
