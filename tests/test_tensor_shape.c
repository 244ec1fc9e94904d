/* Shape operations (shape.h): unsqueeze, squeeze, flatten, expand, split,
 * chunk, cat and stack, checked against plain index loops written here:
 * shapes and strides, that views share their source's storage (a write
 * through the view is read in the base), PyTorch's edge cases (0-d, empty,
 * negative dims, cat's legacy skip of 1-d empty tensors, chunk giving fewer
 * pieces) and bad input for every function; tc_tensor_strides of views
 * against strides worked out here (and, on the CPU, against the bytes they
 * address). When a GPU exists, the same ops run on it and must give the
 * CPU's values exactly. */
#include <math.h>
#include <stdlib.h>

#include "tc_test.h"

static const tc_device CPU = {TC_CPU, -1}, GPU = {TC_CUDA, -1};
static tc_device DEV; /* the device the value checks run on */

/* A tensor on DEV with values v (doubles) converted to dtype. */
static tc_tensor *make(int ndim, const int64_t *sizes, const double *v, tc_dtype dtype)
{
    tc_tensor *d = NULL, *t = NULL;
    CHECK_OK(tc_tensor_from_data(v, ndim, sizes, TC_FLOAT64, CPU, &d));
    CHECK_OK(tc_tensor_to(d, DEV, dtype, false, &t));
    tc_tensor_release(d);
    return t;
}

/* 0, 1, 2, ... (small integers: exact in every dtype but bool). */
static tc_tensor *iota(int ndim, const int64_t *sizes, tc_dtype dtype, double base)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= sizes[i];
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++)
        v[i] = base + (double)i;
    tc_tensor *t = make(ndim, sizes, v, dtype);
    free(v);
    return t;
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

/* Element at a multi-index of the base, by its contiguous strides. */
static int64_t flat(int ndim, const int64_t *sizes, const int64_t *idx)
{
    int64_t f = 0;
    for (int i = 0; i < ndim; i++)
        f = f * sizes[i] + idx[i];
    return f;
}

/* Writes `value` through view v (every element), checks base sees it at
 * `where` (a flat element index of base). */
static void check_shares(tc_tensor *v, const tc_tensor *base, int64_t where)
{
    tc_tensor *one = NULL;
    CHECK_OK(tc_tensor_full(0, NULL, 77, tc_tensor_dtype(v), DEV, &one));
    CHECK_OK(tc_tensor_copy_(v, one, false));
    double *b = tc_test_values(base);
    CHECK(b[where] == 77);
    free(b);
    tc_tensor_release(one);
}

static void test_unsqueeze_squeeze(void)
{
    int64_t s[3] = {2, 3, 4};
    tc_tensor *t = iota(3, s, TC_FLOAT32, 0), *u = NULL, *q = NULL;
    for (int dim = -4; dim <= 3; dim++) {
        CHECK_OK(tc_tensor_unsqueeze(t, dim, &u));
        int d = dim < 0 ? dim + 4 : dim;
        int64_t want[4];
        for (int i = 0, j = 0; i < 4; i++)
            want[i] = i == d ? 1 : s[j++];
        CHECK(shape_is(u, 4, want));
        CHECK(tc_tensor_data_ptr(u) == tc_tensor_data_ptr(t));
        CHECK(tc_tensor_is_contiguous(u));
        double *a = tc_test_values(u);
        for (int i = 0; i < 24; i++)
            CHECK(a[i] == i);
        free(a);
        CHECK_OK(tc_tensor_squeeze_dim(u, dim < 0 ? dim : d, &q));
        CHECK(shape_is(q, 3, s));
        tc_tensor_release(q);
        CHECK_OK(tc_tensor_squeeze(u, &q));
        CHECK(shape_is(q, 3, s));
        tc_tensor_release(q);
        tc_tensor_release(u);
    }
    /* squeeze_dim of a dim that is not 1 keeps the shape; all-ones gives 0-d */
    CHECK_OK(tc_tensor_squeeze_dim(t, 1, &q));
    CHECK(shape_is(q, 3, s));
    tc_tensor_release(q);
    int64_t ones[3] = {1, 1, 1}, mixed[4] = {1, 3, 1, 2};
    tc_tensor *o = iota(3, ones, TC_INT64, 5), *m = iota(4, mixed, TC_INT16, 0);
    CHECK_OK(tc_tensor_squeeze(o, &q));
    CHECK(tc_tensor_ndim(q) == 0 && tc_tensor_numel(q) == 1);
    double x = 0;
    CHECK_OK(tc_tensor_item(q, &x));
    CHECK(x == 5);
    tc_tensor_release(q);
    CHECK_OK(tc_tensor_squeeze(m, &q));
    int64_t w2[2] = {3, 2};
    CHECK(shape_is(q, 2, w2));
    check_shares(q, m, 0); /* writes every element: all of m is 77 */
    tc_tensor_release(q);
    /* 0-d: unsqueeze gives [1]; squeeze_dim 0 and -1 keep it 0-d */
    tc_tensor *z = NULL;
    CHECK_OK(tc_tensor_full(0, NULL, 3, TC_FLOAT64, DEV, &z));
    CHECK_OK(tc_tensor_unsqueeze(z, -1, &u));
    int64_t one = 1;
    CHECK(shape_is(u, 1, &one));
    tc_tensor_release(u);
    CHECK_OK(tc_tensor_squeeze_dim(z, -1, &q));
    CHECK(tc_tensor_ndim(q) == 0);
    tc_tensor_release(q);
    /* a view of a transposed tensor: unsqueeze keeps the strides */
    tc_tensor *tr = NULL;
    CHECK_OK(tc_tensor_transpose(t, 0, 2, &tr));
    CHECK_OK(tc_tensor_unsqueeze(tr, 1, &u));
    double *a = tc_test_values(u);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 2; k++)
                CHECK(a[(i * 3 + j) * 2 + k] == k * 12 + j * 4 + i);
    free(a);
    int64_t at[3] = {1, 2, 3};
    tc_tensor *el = NULL, *el2 = NULL, *el3 = NULL;
    CHECK_OK(tc_tensor_narrow(u, 0, 3, 1, &el));
    CHECK_OK(tc_tensor_narrow(el, 2, 2, 1, &el2));
    CHECK_OK(tc_tensor_narrow(el2, 3, 1, 1, &el3));
    check_shares(el3, t, flat(3, s, at));
    tc_tensor_release(el);
    tc_tensor_release(el2);
    tc_tensor_release(el3);
    tc_tensor_release(u);
    tc_tensor_release(tr);
    tc_tensor_release(z);
    tc_tensor_release(o);
    tc_tensor_release(m);
    tc_tensor_release(t);
}

static void test_flatten(void)
{
    int64_t s[4] = {2, 3, 4, 5};
    tc_tensor *t = iota(4, s, TC_INT32, 0), *f = NULL, *tr = NULL;
    CHECK_OK(tc_tensor_flatten(t, 1, 2, &f));
    int64_t w[3] = {2, 12, 5};
    CHECK(shape_is(f, 3, w));
    CHECK(tc_tensor_data_ptr(f) == tc_tensor_data_ptr(t)); /* a view */
    tc_tensor_release(f);
    CHECK_OK(tc_tensor_flatten(t, 0, -1, &f));
    int64_t all = 120;
    CHECK(shape_is(f, 1, &all));
    tc_tensor_release(f);
    CHECK_OK(tc_tensor_flatten(t, -2, -2, &f)); /* start == end: t itself */
    CHECK(f == t);
    tc_tensor_release(f);
    /* not viewable: a copy with the values in row-major order of the input */
    CHECK_OK(tc_tensor_transpose(t, 1, 3, &tr)); /* [2, 5, 4, 3] */
    CHECK_OK(tc_tensor_flatten(tr, 1, 3, &f));
    int64_t w2[2] = {2, 60};
    CHECK(shape_is(f, 2, w2));
    double *a = tc_test_values(f);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 5; j++)
            for (int k = 0; k < 4; k++)
                for (int l = 0; l < 3; l++)
                    CHECK(a[i * 60 + (j * 4 + k) * 3 + l] == ((i * 3 + l) * 4 + k) * 5 + j);
    free(a);
    tc_tensor_release(f);
    tc_tensor_release(tr);
    /* 0-d gives 1-d of one element; empty stays empty */
    tc_tensor *z = NULL, *e = NULL;
    CHECK_OK(tc_tensor_full(0, NULL, 4, TC_FLOAT32, DEV, &z));
    CHECK_OK(tc_tensor_flatten(z, 0, -1, &f));
    int64_t one = 1;
    CHECK(shape_is(f, 1, &one));
    tc_tensor_release(f);
    int64_t es[3] = {3, 0, 2};
    CHECK_OK(tc_tensor_zeros(3, es, TC_FLOAT32, DEV, &e));
    CHECK_OK(tc_tensor_flatten(e, 0, 1, &f));
    int64_t we[2] = {0, 2};
    CHECK(shape_is(f, 2, we));
    tc_tensor_release(f);
    CHECK_OK(tc_tensor_flatten(t, 0, -1, &f));
    check_shares(f, t, 119); /* writes all of t */
    tc_tensor_release(f);
    CHECK_STATUS(tc_tensor_flatten(t, 2, 1, &f), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_flatten(t, 0, 4, &f), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_flatten(t, -5, 1, &f), TC_ERROR_INVALID_ARGUMENT);
    tc_tensor_release(e);
    tc_tensor_release(z);
    tc_tensor_release(t);
}

static void test_expand(void)
{
    int64_t s[3] = {3, 1, 2};
    tc_tensor *t = iota(3, s, TC_FLOAT64, 1), *x = NULL;
    int64_t want[4] = {2, 3, 4, 2}, ask[4] = {2, -1, 4, -1};
    CHECK_OK(tc_tensor_expand(t, 4, ask, &x));
    CHECK(shape_is(x, 4, want));
    CHECK(tc_tensor_stride(x, 0) == 0 && tc_tensor_stride(x, 2) == 0);
    CHECK(tc_tensor_stride(x, 1) == 2 && tc_tensor_stride(x, 3) == 1);
    CHECK(tc_tensor_data_ptr(x) == tc_tensor_data_ptr(t));
    double *a = tc_test_values(x);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++)
                for (int l = 0; l < 2; l++)
                    CHECK(a[((i * 3 + j) * 4 + k) * 2 + l] == 1 + j * 2 + l);
    free(a);
    /* writing into an expanded view is refused by copy_ */
    tc_tensor *one = NULL;
    CHECK_OK(tc_tensor_full(0, NULL, 1, TC_FLOAT64, DEV, &one));
    CHECK_STATUS(tc_tensor_copy_(x, one, false), TC_ERROR_INVALID_ARGUMENT);
    tc_tensor_release(x);
    /* expand to size 0, and the same sizes */
    int64_t zero[3] = {3, 0, 2};
    CHECK_OK(tc_tensor_expand(t, 3, zero, &x));
    CHECK(shape_is(x, 3, zero) && tc_tensor_numel(x) == 0);
    tc_tensor_release(x);
    CHECK_OK(tc_tensor_expand(t, 3, s, &x));
    CHECK(shape_is(x, 3, s));
    tc_tensor_release(x);
    /* 0-d to anything */
    tc_tensor *z = NULL;
    CHECK_OK(tc_tensor_full(0, NULL, 9, TC_INT8, DEV, &z));
    int64_t zs[2] = {2, 2};
    CHECK_OK(tc_tensor_expand(z, 2, zs, &x));
    a = tc_test_values(x);
    CHECK(a[0] == 9 && a[3] == 9);
    free(a);
    tc_tensor_release(x);
    int64_t bad1[3] = {4, 1, 2}, bad2[4] = {-1, 3, 1, 2}, bad3[3] = {3, -2, 2}, two[2] = {1, 2};
    CHECK_STATUS(tc_tensor_expand(t, 3, bad1, &x), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_tensor_expand(t, 4, bad2, &x), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_tensor_expand(t, 3, bad3, &x), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_expand(t, 2, two, &x), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_tensor_expand(t, 3, NULL, &x), TC_ERROR_INVALID_ARGUMENT);
    int64_t nine[9] = {1, 1, 1, 1, 1, 1, 3, 1, 2};
    CHECK_STATUS(tc_tensor_expand(t, 9, nine, &x), TC_ERROR_SHAPE);
    tc_tensor_release(one);
    tc_tensor_release(z);
    tc_tensor_release(t);
}

/* Pieces of sizes `lens` along dim 1 of a [2, size, 3] iota tensor. */
static void check_pieces(tc_tensor **p, int64_t n, const int64_t *lens, const tc_tensor *base)
{
    int64_t start = 0, size = tc_tensor_size(base, 1);
    for (int64_t i = 0; i < n; i++) {
        int64_t w[3] = {2, lens[i], 3};
        CHECK(shape_is(p[i], 3, w));
        double *a = tc_test_values(p[i]);
        for (int x = 0; x < 2; x++)
            for (int64_t y = 0; y < lens[i]; y++)
                for (int z = 0; z < 3; z++)
                    CHECK(a[(x * lens[i] + y) * 3 + z] == (x * size + start + y) * 3 + z);
        free(a);
        start += lens[i];
    }
    CHECK(start == size);
}

static void test_split_chunk(void)
{
    int64_t s[3] = {2, 7, 3};
    int n = -1;
    tc_tensor *t = iota(3, s, TC_FLOAT32, 0), *p[8] = {0};
    CHECK_OK(tc_tensor_split(t, 3, 1, NULL, 0, &n));
    CHECK(n == 3);
    CHECK_OK(tc_tensor_split(t, 3, -2, p, 8, &n));
    int64_t l1[3] = {3, 3, 1};
    CHECK(n == 3);
    check_pieces(p, n, l1, t);
    for (int i = 0; i < n; i++)
        tc_tensor_release(p[i]);
    /* split_size above the size: one piece */
    CHECK_OK(tc_tensor_split(t, 100, 1, p, 8, &n));
    CHECK(n == 1 && shape_is(p[0], 3, s));
    tc_tensor_release(p[0]);
    /* chunk: 7 into 4 chunks is pieces of 2 (4 pieces); into 6 is 2 (4 pieces
     * too: fewer than asked), into 7 is 1 (7 pieces) */
    int64_t l2[4] = {2, 2, 2, 1};
    CHECK_OK(tc_tensor_chunk(t, 4, 1, p, 8, &n));
    CHECK(n == 4);
    check_pieces(p, n, l2, t);
    for (int i = 0; i < n; i++)
        tc_tensor_release(p[i]);
    CHECK_OK(tc_tensor_chunk(t, 6, 1, p, 8, &n));
    CHECK(n == 4);
    for (int i = 0; i < n; i++)
        tc_tensor_release(p[i]);
    CHECK_OK(tc_tensor_chunk(t, 7, 1, NULL, 0, &n));
    CHECK(n == 7);
    /* an empty dimension: split gives one piece, chunk gives `chunks` */
    int64_t es[2] = {0, 4};
    tc_tensor *e = NULL;
    CHECK_OK(tc_tensor_zeros(2, es, TC_FLOAT32, DEV, &e));
    CHECK_OK(tc_tensor_split(e, 0, 0, p, 8, &n));
    CHECK(n == 1 && shape_is(p[0], 2, es));
    tc_tensor_release(p[0]);
    CHECK_OK(tc_tensor_chunk(e, 3, 0, p, 8, &n));
    CHECK(n == 3);
    for (int i = 0; i < n; i++) {
        CHECK(shape_is(p[i], 2, es));
        tc_tensor_release(p[i]);
    }
    /* bad input: nothing written */
    tc_tensor *sentinel = (tc_tensor *)&n;
    p[0] = sentinel;
    n = -5;
    CHECK_STATUS(tc_tensor_split(t, 3, 1, p, 2, &n), TC_ERROR_INVALID_ARGUMENT);
    CHECK(n == -5 && p[0] == sentinel);
    CHECK_STATUS(tc_tensor_split(t, 0, 1, p, 8, &n), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_split(t, -1, 1, p, 8, &n), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_split(t, 2, 3, p, 8, &n), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_split(t, 2, 1, p, 8, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_split(t, 2, 1, p, -1, &n), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_chunk(t, 0, 1, p, 8, &n), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_chunk(t, 2, -4, p, 8, &n), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_chunk(NULL, 2, 0, p, 8, &n), TC_ERROR_INVALID_ARGUMENT);
    tc_tensor *z = NULL;
    CHECK_OK(tc_tensor_full(0, NULL, 1, TC_FLOAT32, DEV, &z));
    CHECK_STATUS(tc_tensor_split(z, 1, 0, p, 8, &n), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_tensor_chunk(z, 1, 0, p, 8, &n), TC_ERROR_SHAPE);
    CHECK(n == -5 && p[0] == sentinel);
    /* the pieces are views: p[2] is t[:, 6:7, :] */
    CHECK_OK(tc_tensor_split(t, 3, 1, p, 8, &n));
    int64_t at[3] = {1, 6, 2};
    check_shares(p[2], t, flat(3, s, at));
    for (int i = 0; i < n; i++)
        tc_tensor_release(p[i]);
    tc_tensor_release(z);
    tc_tensor_release(e);
    tc_tensor_release(t);
}

/* Reference cat of 3-d row-major arrays along d. */
static void ref_cat3(int n, double *const *v, int64_t (*sz)[3], int d, double *out)
{
    int64_t osz[3] = {sz[0][0], sz[0][1], sz[0][2]};
    osz[d] = 0;
    for (int i = 0; i < n; i++)
        osz[d] += sz[i][d];
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        for (int64_t a = 0; a < sz[i][0]; a++)
            for (int64_t b = 0; b < sz[i][1]; b++)
                for (int64_t c = 0; c < sz[i][2]; c++) {
                    int64_t o[3] = {a, b, c};
                    o[d] += at;
                    out[(o[0] * osz[1] + o[1]) * osz[2] + o[2]] =
                        v[i][(a * sz[i][1] + b) * sz[i][2] + c];
                }
        at += sz[i][d];
    }
}

static void test_cat(void)
{
    for (int d = 0; d < 3; d++) {
        int64_t sz[3][3];
        double *v[3];
        tc_tensor *ts[3];
        tc_dtype dts[3] = {TC_INT32, TC_FLOAT16, TC_UINT8};
        int64_t total = 0;
        for (int i = 0; i < 3; i++) {
            sz[i][0] = 2, sz[i][1] = 3, sz[i][2] = 4;
            sz[i][d] = i + 1; /* 1, 2, 3 along d */
            int64_t n = sz[i][0] * sz[i][1] * sz[i][2];
            v[i] = malloc(sizeof(double) * (size_t)n);
            for (int64_t k = 0; k < n; k++)
                v[i][k] = floor(tc_test_rand_uniform() * 200);
            ts[i] = make(3, sz[i], v[i], dts[i]);
            total += n;
        }
        double *ref = malloc(sizeof(double) * (size_t)total);
        ref_cat3(3, v, sz, d, ref);
        tc_tensor *c = NULL;
        CHECK_OK(tc_tensor_cat((const tc_tensor *const *)ts, 3, d - 3, &c));
        CHECK(tc_tensor_dtype(c) == TC_FLOAT16); /* int32, float16, uint8 -> float16 */
        CHECK(tc_tensor_size(c, d) == 6 && tc_tensor_numel(c) == total);
        double *a = tc_test_values(c);
        for (int64_t k = 0; k < total; k++)
            CHECK(a[k] == ref[k]);
        free(a);
        tc_tensor_release(c);
        /* integers only: uint8 and int32 -> int32 */
        const tc_tensor *two[2] = {ts[2], ts[0]};
        double *v2[2] = {v[2], v[0]};
        int64_t sz2[2][3];
        memcpy(sz2[0], sz[2], sizeof sz2[0]);
        memcpy(sz2[1], sz[0], sizeof sz2[1]);
        ref_cat3(2, v2, sz2, d, ref);
        CHECK_OK(tc_tensor_cat(two, 2, d, &c));
        CHECK(tc_tensor_dtype(c) == TC_INT32);
        a = tc_test_values(c);
        for (int64_t k = 0; k < tc_tensor_numel(c); k++)
            CHECK(a[k] == ref[k]);
        free(a);
        tc_tensor_release(c);
        free(ref);
        for (int i = 0; i < 3; i++) {
            free(v[i]);
            tc_tensor_release(ts[i]);
        }
    }
    /* strided inputs, and the legacy skip of 1-d empty tensors */
    int64_t s[2] = {3, 2}, e1 = 0;
    tc_tensor *a = iota(2, s, TC_FLOAT32, 0), *at = NULL, *e = NULL, *c = NULL;
    CHECK_OK(tc_tensor_transpose(a, 0, 1, &at)); /* [2, 3]: at[i][j] = a[j][i] = 2j + i */
    CHECK_OK(tc_tensor_zeros(1, &e1, TC_FLOAT64, DEV, &e));
    const tc_tensor *in[4] = {e, at, e, at};
    CHECK_OK(tc_tensor_cat(in, 4, 1, &c));
    int64_t w[2] = {2, 6};
    CHECK(shape_is(c, 2, w));
    CHECK(tc_tensor_dtype(c) == TC_FLOAT64); /* the skipped tensors still promote */
    double *v = tc_test_values(c);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 6; j++)
            CHECK(v[i * 6 + j] == 2 * (j % 3) + i);
    free(v);
    tc_tensor_release(c);
    const tc_tensor *empties[2] = {e, e};
    CHECK_OK(tc_tensor_cat(empties, 2, 0, &c));
    CHECK(shape_is(c, 1, &e1));
    tc_tensor_release(c);
    /* bad input */
    tc_tensor *z = NULL, *b3 = NULL;
    CHECK_OK(tc_tensor_full(0, NULL, 1, TC_FLOAT32, DEV, &z));
    int64_t s3[3] = {3, 2, 1}, s4[2] = {4, 3};
    CHECK_OK(tc_tensor_zeros(3, s3, TC_FLOAT32, DEV, &b3));
    tc_tensor *b4 = iota(2, s4, TC_FLOAT32, 0);
    const tc_tensor *bad_z[2] = {a, z}, *bad_nd[2] = {a, b3}, *bad_sz[2] = {a, b4},
                    *bad_null[2] = {a, NULL};
    CHECK_STATUS(tc_tensor_cat(in, 0, 0, &c), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_cat(NULL, 1, 0, &c), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_cat(bad_null, 2, 0, &c), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_cat(bad_z, 2, 0, &c), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_tensor_cat(bad_nd, 2, 0, &c), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_tensor_cat(bad_sz, 2, 1, &c), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_tensor_cat(bad_sz, 2, 0, &c), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_tensor_cat(in, 2, 2, &c), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_cat(in, 2, 0, NULL), TC_ERROR_INVALID_ARGUMENT);
    tc_tensor_release(z);
    tc_tensor_release(b3);
    tc_tensor_release(b4);
    tc_tensor_release(e);
    tc_tensor_release(at);
    tc_tensor_release(a);
}

static void test_stack(void)
{
    int64_t s[2] = {2, 3};
    tc_tensor *a = iota(2, s, TC_INT64, 0), *b = iota(2, s, TC_INT16, 100), *c = NULL;
    const tc_tensor *in[2] = {a, b};
    for (int dim = -3; dim <= 2; dim++) {
        CHECK_OK(tc_tensor_stack(in, 2, dim, &c));
        int d = dim < 0 ? dim + 3 : dim;
        int64_t w[3];
        for (int i = 0, j = 0; i < 3; i++)
            w[i] = i == d ? 2 : s[j++];
        CHECK(shape_is(c, 3, w));
        CHECK(tc_tensor_dtype(c) == TC_INT64);
        double *v = tc_test_values(c);
        for (int t = 0; t < 2; t++)
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 3; j++) {
                    int64_t idx[3], k = 0;
                    for (int q = 0, r = 0; q < 3; q++)
                        idx[q] = q == d ? t : (r++ == 0 ? i : j);
                    k = flat(3, w, idx);
                    CHECK(v[k] == t * 100 + i * 3 + j);
                }
        free(v);
        tc_tensor_release(c);
    }
    /* 0-d inputs stack into 1-d */
    tc_tensor *x = NULL, *y = NULL;
    CHECK_OK(tc_tensor_full(0, NULL, 1.5, TC_FLOAT32, DEV, &x));
    CHECK_OK(tc_tensor_full(0, NULL, -2, TC_FLOAT32, DEV, &y));
    const tc_tensor *zs[3] = {x, y, x};
    CHECK_OK(tc_tensor_stack(zs, 3, 0, &c));
    int64_t three = 3;
    CHECK(shape_is(c, 1, &three));
    double *v = tc_test_values(c);
    CHECK(v[0] == 1.5 && v[1] == -2 && v[2] == 1.5);
    free(v);
    tc_tensor_release(c);
    const tc_tensor *bad[2] = {a, x};
    CHECK_STATUS(tc_tensor_stack(bad, 2, 0, &c), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_tensor_stack(in, 2, 3, &c), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_stack(in, 2, -4, &c), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_stack(in, 0, 0, &c), TC_ERROR_INVALID_ARGUMENT);
    int64_t eight[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    tc_tensor *big = NULL;
    CHECK_OK(tc_tensor_zeros(8, eight, TC_FLOAT32, DEV, &big));
    const tc_tensor *bigs[1] = {big};
    CHECK_STATUS(tc_tensor_stack(bigs, 1, 0, &c), TC_ERROR_SHAPE);
    tc_tensor_release(big);
    tc_tensor_release(x);
    tc_tensor_release(y);
    tc_tensor_release(a);
    tc_tensor_release(b);
}

static void test_bad_handles(void)
{
    tc_tensor *t = NULL, *o = NULL;
    int64_t s = 2;
    CHECK_OK(tc_tensor_zeros(1, &s, TC_FLOAT32, CPU, &t));
    CHECK_OK(tc_tensor_release(t)); /* t is now a released handle */
    int n;
    const tc_tensor *in[1] = {t};
    CHECK_STATUS(tc_tensor_unsqueeze(t, 0, &o), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_tensor_squeeze(t, &o), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_tensor_squeeze_dim(t, 0, &o), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_tensor_flatten(t, 0, 0, &o), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_tensor_expand(t, 1, &s, &o), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_tensor_split(t, 1, 0, NULL, 0, &n), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_tensor_chunk(t, 1, 0, NULL, 0, &n), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_tensor_cat(in, 1, 0, &o), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_tensor_stack(in, 1, 0, &o), TC_ERROR_INVALID_HANDLE);
    float v = 0;
    CHECK_STATUS(tc_tensor_new_tensor(t, &v, 1, &s, &o), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_tensor_unsqueeze(NULL, 0, &o), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_squeeze(NULL, &o), TC_ERROR_INVALID_ARGUMENT);
    CHECK_OK(tc_tensor_zeros(1, &s, TC_FLOAT32, CPU, &t));
    CHECK_STATUS(tc_tensor_unsqueeze(t, 2, &o), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_unsqueeze(t, -3, &o), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_unsqueeze(t, 0, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_squeeze(t, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_squeeze_dim(t, 1, &o), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_flatten(t, 0, 0, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_expand(t, 1, &s, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_stack((const tc_tensor *const *)&t, 1, 0, NULL),
                 TC_ERROR_INVALID_ARGUMENT);
    int64_t eight[8] = {1, 1, 1, 1, 1, 1, 1, 2};
    tc_tensor *big = NULL;
    CHECK_OK(tc_tensor_zeros(8, eight, TC_FLOAT32, CPU, &big));
    CHECK_STATUS(tc_tensor_unsqueeze(big, 0, &o), TC_ERROR_SHAPE);
    tc_tensor_release(big);
    tc_tensor_release(t);
}

static void test_cross_device(void)
{
    int64_t s[2] = {2, 2};
    tc_tensor *c = NULL, *g = NULL, *o = NULL;
    CHECK_OK(tc_tensor_zeros(2, s, TC_FLOAT32, CPU, &c));
    CHECK_OK(tc_tensor_zeros(2, s, TC_FLOAT32, GPU, &g));
    const tc_tensor *in[2] = {c, g};
    CHECK_STATUS(tc_tensor_cat(in, 2, 0, &o), TC_ERROR_DEVICE_MISMATCH);
    CHECK_STATUS(tc_tensor_stack(in, 2, 0, &o), TC_ERROR_DEVICE_MISMATCH);
    tc_tensor_release(c);
    tc_tensor_release(g);
}

/* tc_tensor_strides equals `want` (ndim entries) and tc_tensor_stride of
 * every dim, negative dims included. */
static bool strides_are(const tc_tensor *t, int ndim, const int64_t *want)
{
    const int64_t *st = tc_tensor_strides(t);
    if (tc_tensor_ndim(t) != ndim || !st)
        return false;
    for (int i = 0; i < ndim; i++)
        if (st[i] != want[i] || tc_tensor_stride(t, i) != want[i] ||
            tc_tensor_stride(t, i - ndim) != want[i])
            return false;
    return true;
}

/* On the CPU: element idx of view v, read at data_ptr + sum(idx * stride)
 * (data_ptr includes the offset), is `want` (the base is a float32 iota:
 * the base element's flat index). */
static bool addresses_base(const tc_tensor *v, const int64_t *idx, double want)
{
    if (DEV.type != TC_CPU)
        return true; /* the GPU's bytes are not the host's to read */
    const float *p = tc_tensor_data_ptr(v);
    const int64_t *st = tc_tensor_strides(v);
    int64_t at = 0;
    for (int i = 0; i < tc_tensor_ndim(v); i++)
        at += idx[i] * st[i];
    return p && p[at] == (float)want;
}

/* Tensor.stride() of views: contiguous, transposed, permuted, narrowed,
 * expanded, unsqueezed; each checked against strides computed from the
 * base's sizes, and NULL for no tensor. */
static void test_strides(void)
{
    const int64_t sz[3] = {2, 3, 4};
    tc_tensor *t = iota(3, sz, TC_FLOAT32, 0), *v = NULL;
    int64_t c[3]; /* contiguous: the product of the later sizes */
    for (int i = 2, prod = 1; i >= 0; prod *= (int)sz[i], i--)
        c[i] = prod;
    CHECK(c[0] == 12 && c[1] == 4 && c[2] == 1);
    CHECK(strides_are(t, 3, c));

    CHECK_OK(tc_tensor_transpose(t, 0, 2, &v));
    CHECK(strides_are(v, 3, (int64_t[]){c[2], c[1], c[0]}));
    CHECK(addresses_base(v, (int64_t[]){3, 1, 1}, (double)flat(3, sz, (int64_t[]){1, 1, 3})));
    tc_tensor_release(v);

    const int perm[3] = {1, 2, 0};
    CHECK_OK(tc_tensor_permute(t, perm, &v));
    CHECK(strides_are(v, 3, (int64_t[]){c[1], c[2], c[0]}));
    CHECK(addresses_base(v, (int64_t[]){2, 3, 1}, (double)flat(3, sz, (int64_t[]){1, 2, 3})));
    tc_tensor_release(v);

    CHECK_OK(tc_tensor_narrow(t, 1, 1, 2, &v)); /* a view: the base's strides */
    CHECK(strides_are(v, 3, c) && tc_tensor_offset(v) == c[1]);
    CHECK(addresses_base(v, (int64_t[]){1, 1, 2}, (double)flat(3, sz, (int64_t[]){1, 2, 2})));
    tc_tensor_release(v);

    tc_tensor *col = NULL;
    const int64_t csz[2] = {3, 1}, esz[3] = {2, 3, 4};
    CHECK_OK(tc_tensor_zeros(2, csz, TC_FLOAT32, DEV, &col));
    CHECK_OK(tc_tensor_expand(col, 3, esz, &v)); /* new and size-1 dims: stride 0 */
    CHECK(strides_are(v, 3, (int64_t[]){0, 1, 0}));
    tc_tensor_release(v);
    tc_tensor_release(col);

    CHECK_OK(tc_tensor_unsqueeze(t, 0, &v)); /* as torch: sizes[0] * strides[0] */
    CHECK(strides_are(v, 4, (int64_t[]){sz[0] * c[0], c[0], c[1], c[2]}));
    tc_tensor_release(v);
    CHECK_OK(tc_tensor_unsqueeze(t, 3, &v)); /* last: stride 1 */
    CHECK(strides_are(v, 4, (int64_t[]){c[0], c[1], c[2], 1}));
    tc_tensor_release(v);

    CHECK(tc_tensor_strides(NULL) == NULL);
    tc_tensor *gone = iota(1, sz, TC_FLOAT32, 0);
    tc_tensor_release(gone);
    CHECK(tc_tensor_strides(gone) == NULL); /* released: no tensor */
    tc_tensor_release(t);
}

/* The seed's example of Tensor.new_* (cuda-semantics, "Device-agnostic
 * code"): y = x.new_full([3, 2], -5) keeps x's dtype and device, and
 * x_long.new_tensor([[1, 2, 3]]) is int64 values 1, 2, 3 in shape [1, 3] on
 * x_long's device; a bad `t` is refused. */
static void test_seed_new_tensor(void)
{
    const int64_t two = 2, sz[2] = {3, 2}, row[2] = {1, 3}, data[3] = {1, 2, 3};
    tc_tensor *x = NULL, *x_long = NULL, *y = NULL, *y_long = NULL;
    CHECK_OK(tc_tensor_empty(1, &two, TC_FLOAT32, DEV, &x));
    CHECK_OK(tc_tensor_empty(1, &two, TC_INT64, DEV, &x_long));
    CHECK_OK(tc_tensor_new_full(x, 2, sz, -5, &y));
    CHECK(y && tc_tensor_dtype(y) == TC_FLOAT32 && tc_tensor_ndim(y) == 2 &&
          tc_tensor_size(y, 0) == 3 && tc_tensor_size(y, 1) == 2);
    CHECK(y && tc_tensor_device(y).type == DEV.type);
    double *v = y ? tc_test_values(y) : NULL;
    bool ok = v != NULL;
    for (int i = 0; ok && i < 6; i++)
        ok = v[i] == -5;
    CHECK(ok);
    free(v);
    CHECK_OK(tc_tensor_new_tensor(x_long, data, 2, row, &y_long));
    CHECK(y_long && tc_tensor_dtype(y_long) == TC_INT64 && tc_tensor_ndim(y_long) == 2 &&
          tc_tensor_size(y_long, 0) == 1 && tc_tensor_size(y_long, 1) == 3);
    CHECK(y_long && tc_tensor_device(y_long).type == DEV.type);
    v = y_long ? tc_test_values(y_long) : NULL;
    CHECK(v && v[0] == 1 && v[1] == 2 && v[2] == 3);
    free(v);
    tc_tensor *none = NULL;
    CHECK_STATUS(tc_tensor_new_tensor(NULL, data, 2, row, &none), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_new_tensor(x_long, NULL, 2, row, &none), TC_ERROR_INVALID_ARGUMENT);
    int64_t huge[2] = {INT64_MAX, 4};
    CHECK_STATUS(tc_tensor_new_tensor(x_long, data, 2, huge, &none), TC_ERROR_SHAPE);
    CHECK(none == NULL);
    tc_tensor *all[] = {y_long, y, x_long, x};
    for (int i = 0; i < 4; i++)
        tc_tensor_release(all[i]);
}

static void run_all(tc_device dev)
{
    DEV = dev;
    test_unsqueeze_squeeze();
    test_flatten();
    test_expand();
    test_split_chunk();
    test_cat();
    test_stack();
    test_strides();
    test_seed_new_tensor();
}

/* Sizes whose product overflows int64_t are TC_ERROR_SHAPE, never a wrapped
 * count: as views (expand) and as results (cat, stack of such views). */
static void test_overflowing_sizes(void)
{
    int64_t one[2] = {1, 1}, huge[2] = {INT64_MAX, INT64_MAX}, half[2] = {(int64_t)1 << 60, 1};
    tc_tensor *t = NULL, *v = NULL, *o = NULL;
    CHECK_OK(tc_tensor_zeros(2, one, TC_FLOAT32, CPU, &t));
    CHECK_STATUS(tc_tensor_expand(t, 2, huge, &o), TC_ERROR_SHAPE);
    CHECK(o == NULL);
    CHECK_OK(tc_tensor_expand(t, 2, half, &v)); /* fits: stride 0, no memory */
    const tc_tensor *two[2] = {v, v};
    CHECK_STATUS(tc_tensor_cat(two, 2, 0, &o), TC_ERROR_SHAPE); /* 2^63 bytes */
    CHECK_STATUS(tc_tensor_stack(two, 2, 0, &o), TC_ERROR_SHAPE);
    CHECK(o == NULL);
    tc_tensor *pieces[2] = {NULL, NULL}, *values = NULL, *indices = NULL;
    int n = -1;
    /* 2^60 pieces do not fit the int count: refused, nothing written */
    CHECK_STATUS(tc_tensor_split(v, 1, 0, NULL, 0, &n), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_chunk(v, INT64_MAX, 0, NULL, 0, &n), TC_ERROR_INVALID_ARGUMENT);
    CHECK(n == -1);
    CHECK_OK(tc_tensor_split(t, INT64_MAX, 0, pieces, 2, &n)); /* one piece */
    CHECK(n == 1);
    tc_tensor_release(pieces[0]);
    CHECK_OK(tc_tensor_chunk(t, INT64_MAX, 0, pieces, 2, &n));
    CHECK(n == 1);
    tc_tensor_release(pieces[0]);
    CHECK_STATUS(tc_tensor_topk(t, INT64_MAX, 0, true, true, &values, &indices),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK(values == NULL && indices == NULL);
    tc_tensor_release(v);
    tc_tensor_release(t);
}

int main(void)
{
    tc_test_init();
    run_all(CPU);
    test_bad_handles();
    test_overflowing_sizes();
    if (tc_is_available()) {
        printf("GPU: the same checks on cuda\n");
        run_all(GPU);
        test_cross_device();
        /* the views and results are on the GPU */
        int64_t s = 3;
        tc_tensor *t = NULL, *u = NULL;
        CHECK_OK(tc_tensor_zeros(1, &s, TC_FLOAT32, GPU, &t));
        CHECK_OK(tc_tensor_unsqueeze(t, 0, &u));
        CHECK(tc_tensor_is_cuda(u));
        tc_tensor_release(u);
        tc_tensor_release(t);
    } else
        printf("no GPU: the CPU checks only\n");
    return TC_TEST_DONE();
}
