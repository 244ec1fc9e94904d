/* CPU tensor semantics: factories (the seed's new_full / new_tensor example
 * too), views, copies with conversion, element-wise operations with
 * broadcasting and type promotion, reductions, and bad input. Values are
 * checked against references computed here in double precision from the
 * same random inputs. */
#include <math.h>
#include <stdlib.h>

#include "tensor/tensor_internal.h"
#include "tc_test.h"

static const tc_device CPU = {TC_CPU, -1};

/* A tensor of `dtype` filled from random doubles (also returned in *vals,
 * already rounded to what the dtype holds). */
static tc_tensor *rand_tensor(int ndim, const int64_t *sizes, tc_dtype dtype, double lo, double hi,
                              double **vals)
{
    int64_t n = tc__numel(ndim, sizes);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) {
        double x = lo + (hi - lo) * tc_test_rand_uniform();
        v[i] = tc_dtype_is_floating(dtype) ? x : floor(x);
        if (dtype == TC_BOOL)
            v[i] = x > (lo + hi) / 2;
    }
    tc_tensor *t = NULL;
    CHECK_OK(tc_tensor_from_data(v, ndim, sizes, TC_FLOAT64, CPU, &t));
    tc_tensor *c = NULL;
    CHECK_OK(tc_tensor_to(t, CPU, dtype, false, &c));
    tc_tensor_release(t);
    CHECK_OK(tc_tensor_to_host(c, TC_FLOAT64, v));
    *vals = v;
    return c;
}

static void test_factories(void)
{
    int64_t sz[3] = {2, 3, 4};
    tc_tensor *t = NULL;
    CHECK_OK(tc_tensor_full(3, sz, 2.5, TC_FLOAT32, CPU, &t));
    CHECK(tc_tensor_ndim(t) == 3 && tc_tensor_numel(t) == 24 && tc_tensor_stride(t, 0) == 12 &&
          tc_tensor_stride(t, -1) == 1 && tc_tensor_size(t, 1) == 3);
    CHECK(tc_tensor_is_contiguous(t) && !tc_tensor_is_cuda(t) && !tc_tensor_is_pinned(t));
    double *v = tc_test_values(t);
    bool ok = true;
    for (int i = 0; i < 24; i++)
        ok &= v[i] == 2.5;
    CHECK(ok);
    free(v);
    tc_tensor *z = NULL, *o = NULL;
    CHECK_OK(tc_tensor_zeros_like(t, &z));
    CHECK_OK(tc_tensor_new_ones(t, 1, sz, &o));
    CHECK(tc_tensor_dtype(o) == TC_FLOAT32 && tc_tensor_numel(o) == 2);
    double zs, os[2];
    tc_tensor *zs_t = NULL;
    CHECK_OK(tc_tensor_sum(z, TC_ALL_DIMS, false, &zs_t));
    CHECK_OK(tc_tensor_item(zs_t, &zs));
    CHECK(zs == 0);
    CHECK_OK(tc_tensor_to_host(o, TC_FLOAT64, os));
    CHECK(os[0] == 1 && os[1] == 1);
    tc_tensor_release(zs_t);
    tc_tensor_release(z);
    tc_tensor_release(o);
    tc_tensor_release(t);

    /* arange, int and float, and a negative step */
    CHECK_OK(tc_tensor_arange(3, 10, 2, TC_INT32, CPU, &t));
    CHECK(tc_tensor_numel(t) == 4);
    v = tc_test_values(t);
    CHECK(v[0] == 3 && v[1] == 5 && v[3] == 9);
    free(v);
    tc_tensor_release(t);
    CHECK_OK(tc_tensor_arange(1, 0, -0.25, TC_FLOAT64, CPU, &t));
    v = tc_test_values(t);
    CHECK(tc_tensor_numel(t) == 4 && v[3] == 0.25);
    free(v);
    tc_tensor_release(t);

    /* 0-d and empty */
    CHECK_OK(tc_tensor_full(0, NULL, -7, TC_INT64, CPU, &t));
    double item;
    CHECK_OK(tc_tensor_item(t, &item));
    CHECK(tc_tensor_ndim(t) == 0 && tc_tensor_numel(t) == 1 && item == -7);
    tc_tensor_release(t);
    int64_t esz[2] = {3, 0};
    CHECK_OK(tc_tensor_ones(2, esz, TC_FLOAT16, CPU, &t));
    CHECK(tc_tensor_numel(t) == 0);
    CHECK_STATUS(tc_tensor_item(t, &item), TC_ERROR_SHAPE);
    tc_tensor_release(t);

    /* bad input */
    int64_t neg[1] = {-1};
    t = NULL;
    CHECK_STATUS(tc_tensor_empty(1, neg, TC_FLOAT32, CPU, &t), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_empty(9, sz, TC_FLOAT32, CPU, &t), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_empty(1, sz, (tc_dtype)42, CPU, &t), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_empty(1, sz, TC_FLOAT32, CPU, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_arange(0, 1, 0, TC_FLOAT32, CPU, &t), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_from_data(NULL, 1, sz, TC_FLOAT32, CPU, &t), TC_ERROR_INVALID_ARGUMENT);
    CHECK(t == NULL);
    if (!tc_is_available()) {
        tc_status st = tc_tensor_empty(1, sz, TC_FLOAT32, (tc_device){TC_CUDA, -1}, &t);
        CHECK(st == TC_ERROR_NO_DEVICE && t == NULL);
        void *blas = NULL;
        CHECK_STATUS(tc_current_blas_handle(&blas), TC_ERROR_NO_DEVICE);
        CHECK(blas == NULL);
        tc_tensor *c = NULL;
        CHECK_OK(tc_tensor_zeros(1, sz, TC_FLOAT32, CPU, &c));
        CHECK_STATUS(tc_tensor_pin_memory(c, &t), TC_ERROR_NO_DEVICE);
        CHECK_STATUS(tc_tensor_cuda(c, -1, false, &t), TC_ERROR_NO_DEVICE);
        CHECK_STATUS(tc_tensor_record_stream(c, NULL), TC_ERROR_INVALID_ARGUMENT);
        tc_tensor_release(c);
    }
    tc_tensor_release(NULL);
}

static void test_conversions(void)
{
    double src[6] = {-2.7, -0.5, 0, 1.5, 255.9, 1e-8};
    int64_t n = 6;
    tc_tensor *t = NULL, *c = NULL;
    CHECK_OK(tc_tensor_from_data(src, 1, &n, TC_FLOAT64, CPU, &t));
    double out[6];
    CHECK_OK(tc_tensor_to(t, CPU, TC_INT32, false, &c));
    CHECK_OK(tc_tensor_to_host(c, TC_FLOAT64, out));
    CHECK(out[0] == -2 && out[1] == 0 && out[3] == 1 && out[4] == 255);
    tc_tensor_release(c);
    CHECK_OK(tc_tensor_to(t, CPU, TC_BOOL, false, &c));
    CHECK_OK(tc_tensor_to_host(c, TC_FLOAT64, out));
    CHECK(out[0] == 1 && out[2] == 0 && out[5] == 1);
    tc_tensor_release(c);
    /* 16-bit floats: exact bits of a few values */
    uint16_t h[6];
    CHECK_OK(tc_tensor_to_host(t, TC_FLOAT16, h));
    CHECK(h[0] == 0xc166 && h[1] == 0xb800 && h[2] == 0 && h[3] == 0x3e00 && h[5] == 0x0000);
    CHECK_OK(tc_tensor_to_host(t, TC_BFLOAT16, h));
    CHECK(h[1] == 0xbf00 && h[3] == 0x3fc0 && h[4] == 0x4380);
    /* same dtype returns the same tensor */
    CHECK_OK(tc_tensor_to(t, CPU, TC_FLOAT64, false, &c));
    CHECK(c == t);
    tc_tensor_release(c);
    tc_tensor_release(t);
}

static void test_views(void)
{
    int64_t sz[3] = {2, 3, 4};
    tc_tensor *a = NULL, *tr = NULL, *p = NULL, *nw = NULL, *c = NULL, *v = NULL, *r = NULL;
    CHECK_OK(tc_tensor_arange(0, 24, 1, TC_FLOAT32, CPU, &a));
    CHECK_OK(tc_tensor_view(a, 3, sz, &v));
    tc_tensor_release(a);                        /* the view keeps the storage */
    CHECK_OK(tc_tensor_transpose(v, 0, 2, &tr)); /* [4,3,2] */
    CHECK(tc_tensor_size(tr, 0) == 4 && !tc_tensor_is_contiguous(tr));
    CHECK_OK(tc_tensor_contiguous(tr, &c));
    double *cv = tc_test_values(c);
    bool ok = true;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 2; k++)
                ok &= cv[(i * 3 + j) * 2 + k] == k * 12 + j * 4 + i;
    CHECK(ok);
    free(cv);
    int perm[3] = {1, -1, 0};
    CHECK_OK(tc_tensor_permute(v, perm, &p)); /* [3,4,2] */
    double *pv = tc_test_values(p);
    ok = true;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            for (int k = 0; k < 2; k++)
                ok &= pv[(i * 4 + j) * 2 + k] == k * 12 + i * 4 + j;
    CHECK(ok);
    free(pv);
    CHECK_OK(tc_tensor_narrow(v, 2, 1, 2, &nw)); /* [2,3,2] offset 1 */
    CHECK(tc_tensor_offset(nw) == 1 && tc_tensor_numel(nw) == 12);
    double *nv = tc_test_values(nw);
    CHECK(nv[0] == 1 && nv[1] == 2 && nv[2] == 5 && nv[11] == 22);
    free(nv);
    /* a view of a non-contiguous tensor that allows it, and one that does not */
    int64_t flat[1] = {-1}, two[2] = {6, 4}, bad[2] = {4, 6};
    tc_tensor *x = NULL;
    CHECK_STATUS(tc_tensor_view(tr, 1, flat, &x), TC_ERROR_SHAPE);
    CHECK_OK(tc_tensor_reshape(tr, 1, flat, &r));
    CHECK(tc_tensor_is_contiguous(r) && tc_tensor_numel(r) == 24);
    double *rv = tc_test_values(r);
    CHECK(rv[1] == 12 && rv[2] == 4);
    free(rv);
    CHECK_OK(tc_tensor_view(v, 2, two, &x));
    CHECK(tc_tensor_stride(x, 0) == 4);
    tc_tensor_release(x);
    x = NULL;
    int64_t wrong[1] = {5};
    CHECK_STATUS(tc_tensor_view(v, 1, wrong, &x), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_tensor_narrow(v, 0, 1, 2, &x), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_tensor_transpose(v, 0, 3, &x), TC_ERROR_INVALID_ARGUMENT);
    int dup[3] = {0, 0, 1};
    CHECK_STATUS(tc_tensor_permute(v, dup, &x), TC_ERROR_INVALID_ARGUMENT);
    CHECK(x == NULL);
    (void)bad;
    /* copy_ into a strided destination, broadcasting the source */
    tc_tensor *row = NULL;
    double rowv[2] = {-1, -2};
    int64_t two1[1] = {2};
    CHECK_OK(tc_tensor_from_data(rowv, 1, two1, TC_FLOAT64, CPU, &row));
    CHECK_OK(tc_tensor_copy_(nw, row, false));
    double *vv = tc_test_values(v);
    CHECK(vv[0] == 0 && vv[1] == -1 && vv[2] == -2 && vv[3] == 3 && vv[21] == -1);
    free(vv);
    tc_tensor *big = NULL;
    CHECK_STATUS(tc_tensor_copy_(row, v, false), TC_ERROR_SHAPE);
    (void)big;
    tc_tensor_release(row);
    tc_tensor_release(v);
    tc_tensor_release(tr);
    tc_tensor_release(p);
    tc_tensor_release(nw);
    tc_tensor_release(c);
    tc_tensor_release(r);
}

typedef tc_status (*binary_fn)(const tc_tensor *, const tc_tensor *, tc_tensor **);
typedef tc_status (*unary_fn)(const tc_tensor *, tc_tensor **);

static double ref_binary(int k, double a, double b)
{
    switch (k) {
    case 0: return a + b;
    case 1: return a - b;
    case 2: return a * b;
    case 3: return a / b;
    case 4: return pow(a, b);
    case 5: return a > b ? a : b;
    case 6: return a < b ? a : b;
    case 7: return a == b;
    case 8: return a != b;
    case 9: return a < b;
    case 10: return a <= b;
    case 11: return a > b;
    default: return a >= b;
    }
}

static void test_binary(void)
{
    binary_fn fns[13] = {tc_tensor_add, tc_tensor_sub,     tc_tensor_mul,     tc_tensor_div,
                         tc_tensor_pow, tc_tensor_maximum, tc_tensor_minimum, tc_tensor_eq,
                         tc_tensor_ne,  tc_tensor_lt,      tc_tensor_le,      tc_tensor_gt,
                         tc_tensor_ge};
    tc_dtype dts[3] = {TC_FLOAT32, TC_FLOAT64, TC_INT32};
    int64_t sa[3] = {3, 1, 4}, sb[2] = {2, 1};
    for (int di = 0; di < 3; di++) {
        tc_dtype dt = dts[di];
        double *va, *vb;
        tc_tensor *a = rand_tensor(3, sa, dt, 0.5, 4, &va);
        tc_tensor *b = rand_tensor(2, sb, dt, 1, 3, &vb);
        for (int k = 0; k < 13; k++) {
            tc_tensor *o = NULL;
            CHECK_OK(fns[k](a, b, &o));
            if (!o)
                continue;
            CHECK(tc_tensor_ndim(o) == 3 && tc_tensor_size(o, 1) == 2);
            tc_dtype want = k >= 7 ? TC_BOOL : (k == 3 && dt == TC_INT32) ? TC_FLOAT32 : dt;
            CHECK(tc_tensor_dtype(o) == want);
            double *vo = tc_test_values(o);
            double tol = want == TC_FLOAT32 ? 1e-6 : want == TC_FLOAT64 ? 1e-14 : 0;
            bool ok = true;
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 2; j++)
                    for (int l = 0; l < 4; l++) {
                        double r = ref_binary(k, va[i * 4 + l], vb[j]);
                        double g = vo[(i * 2 + j) * 4 + l];
                        ok &= fabs(g - r) <= tol * fmax(1, fabs(r));
                    }
            if (!ok)
                fprintf(stderr, "binary op %d dtype %s\n", k, tc_dtype_string(dt));
            CHECK(ok);
            free(vo);
            tc_tensor_release(o);
        }
        free(va);
        free(vb);
        tc_tensor_release(a);
        tc_tensor_release(b);
    }
}

static double sigm(double x) { return 1 / (1 + exp(-x)); }
static double relu(double x) { return x > 0 ? x : 0; }

static void test_unary(void)
{
    unary_fn fns[8] = {tc_tensor_neg,  tc_tensor_abs,  tc_tensor_exp,     tc_tensor_log,
                       tc_tensor_sqrt, tc_tensor_relu, tc_tensor_sigmoid, tc_tensor_tanh};
    double (*refs[8])(double) = {NULL, fabs, exp, log, sqrt, relu, sigm, tanh};
    int64_t sz[2] = {5, 7};
    double *va;
    tc_tensor *a0 = rand_tensor(2, sz, TC_FLOAT64, 0.1, 3, &va), *a = NULL;
    CHECK_OK(tc_tensor_transpose(a0, 0, 1, &a)); /* non-contiguous input */
    for (int k = 0; k < 8; k++) {
        tc_tensor *o = NULL;
        CHECK_OK(fns[k](a, &o));
        double *vo = tc_test_values(o);
        bool ok = true;
        for (int i = 0; i < 7; i++)
            for (int j = 0; j < 5; j++) {
                double x = va[j * 7 + i], r = refs[k] ? refs[k](x) : -x;
                ok &= fabs(vo[i * 5 + j] - r) <= 1e-14 * fmax(1, fabs(r));
            }
        CHECK(ok);
        free(vo);
        tc_tensor_release(o);
    }
    /* integer input of a math function gives float32 */
    tc_tensor *ia = NULL, *o = NULL;
    CHECK_OK(tc_tensor_to(a0, CPU, TC_INT16, false, &ia));
    CHECK_OK(tc_tensor_exp(ia, &o));
    CHECK(tc_tensor_dtype(o) == TC_FLOAT32);
    tc_tensor_release(o);
    CHECK_OK(tc_tensor_neg(ia, &o));
    CHECK(tc_tensor_dtype(o) == TC_INT16);
    tc_tensor_release(o);
    tc_tensor *bo = NULL;
    CHECK_OK(tc_tensor_to(a0, CPU, TC_BOOL, false, &bo));
    o = NULL;
    CHECK_STATUS(tc_tensor_neg(bo, &o), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_tensor_sub(bo, bo, &o), TC_ERROR_DTYPE);
    CHECK(o == NULL);
    CHECK_OK(tc_tensor_add(bo, bo, &o)); /* bool + bool stays bool */
    CHECK(tc_tensor_dtype(o) == TC_BOOL);
    tc_tensor_release(o);
    tc_tensor_release(bo);
    tc_tensor_release(ia);
    tc_tensor_release(a);
    tc_tensor_release(a0);
    free(va);
}

static tc_dtype add_type(tc_dtype x, int xd, tc_dtype y, int yd)
{
    int64_t one = 1;
    tc_tensor *a = NULL, *b = NULL, *o = NULL;
    CHECK_OK(tc_tensor_ones(xd, &one, x, CPU, &a));
    CHECK_OK(tc_tensor_ones(yd, &one, y, CPU, &b));
    CHECK_OK(tc_tensor_add(a, b, &o));
    tc_dtype r = tc_tensor_dtype(o);
    tc_tensor_release(a);
    tc_tensor_release(b);
    tc_tensor_release(o);
    return r;
}

static void test_promotion(void)
{
    CHECK(add_type(TC_INT32, 1, TC_FLOAT16, 1) == TC_FLOAT16);
    CHECK(add_type(TC_UINT8, 1, TC_INT8, 1) == TC_INT16);
    CHECK(add_type(TC_UINT8, 1, TC_INT32, 1) == TC_INT32);
    CHECK(add_type(TC_FLOAT16, 1, TC_BFLOAT16, 1) == TC_FLOAT32);
    CHECK(add_type(TC_BOOL, 1, TC_INT8, 1) == TC_INT8);
    CHECK(add_type(TC_FLOAT32, 1, TC_FLOAT64, 1) == TC_FLOAT64);
    /* 0-d tensors take part only with a higher category */
    CHECK(add_type(TC_INT64, 1, TC_FLOAT64, 0) == TC_FLOAT64);
    CHECK(add_type(TC_FLOAT16, 1, TC_FLOAT64, 0) == TC_FLOAT16);
    CHECK(add_type(TC_UINT8, 1, TC_INT64, 0) == TC_UINT8);
    CHECK(add_type(TC_INT8, 0, TC_INT64, 0) == TC_INT64);
    CHECK(add_type(TC_BOOL, 1, TC_INT32, 0) == TC_INT32);

    /* mixed: int32 [4] + float64 0-d = float64, values exact */
    int32_t iv[4] = {1, -2, 300, 7};
    double s = 0.25;
    int64_t four = 4;
    tc_tensor *a = NULL, *b = NULL, *o = NULL;
    CHECK_OK(tc_tensor_from_data(iv, 1, &four, TC_INT32, CPU, &a));
    CHECK_OK(tc_tensor_from_data(&s, 0, NULL, TC_FLOAT64, CPU, &b));
    CHECK_OK(tc_tensor_mul(a, b, &o));
    double ov[4];
    CHECK_OK(tc_tensor_to_host(o, TC_FLOAT64, ov));
    CHECK(ov[0] == 0.25 && ov[1] == -0.5 && ov[2] == 75 && ov[3] == 1.75);
    tc_tensor_release(o);
    /* integer wrap-around like the GPU */
    int32_t big[4] = {2147483647, -2147483647 - 1, 5, 0};
    tc_tensor *bt = NULL;
    CHECK_OK(tc_tensor_from_data(big, 1, &four, TC_INT32, CPU, &bt));
    CHECK_OK(tc_tensor_add(bt, a, &o));
    int32_t r[4];
    CHECK_OK(tc_tensor_to_host(o, TC_INT32, r));
    CHECK(r[0] == -2147483647 - 1 && r[1] == 2147483646 && r[2] == 305 && r[3] == 7);
    tc_tensor_release(o);
    /* where: bool condition, promoted values */
    tc_tensor *cond = NULL;
    CHECK_OK(tc_tensor_gt(a, bt, &cond)); /* {0,1,1,1} */
    CHECK_OK(tc_tensor_where(cond, a, b, &o));
    CHECK(tc_tensor_dtype(o) == TC_FLOAT64); /* the 0-d float outranks the int tensor */
    tc_tensor_release(o);
    o = NULL;
    CHECK_STATUS(tc_tensor_where(a, a, b, &o), TC_ERROR_DTYPE);
    tc_tensor_release(cond);
    tc_tensor_release(bt);
    tc_tensor_release(a);
    tc_tensor_release(b);
}

static void test_where_values(void)
{
    int64_t sz[2] = {4, 3}, sb[1] = {3};
    double *va, *vb, *vc;
    tc_tensor *a = rand_tensor(2, sz, TC_FLOAT32, -1, 1, &va);
    tc_tensor *b = rand_tensor(1, sb, TC_FLOAT32, -1, 1, &vb);
    tc_tensor *c = rand_tensor(2, sz, TC_BOOL, 0, 1, &vc);
    tc_tensor *o = NULL;
    CHECK_OK(tc_tensor_where(c, a, b, &o));
    double *vo = tc_test_values(o);
    bool ok = true;
    for (int i = 0; i < 12; i++)
        ok &= vo[i] == (vc[i] ? va[i] : vb[i % 3]);
    CHECK(ok);
    free(vo);
    free(va);
    free(vb);
    free(vc);
    tc_tensor_release(o);
    tc_tensor_release(a);
    tc_tensor_release(b);
    tc_tensor_release(c);
}

/* Regression for the GCC 12.2 -O2 miscompile of the CPU walker (see the
 * comment at walk_next in src/tensor/cpu/cpu_ops.c, commit d8c125d): with byte steps
 * precomputed per dimension, where() on strided operands wrote wrong values.
 * cond, a and b are permuted, narrowed and broadcast here, in dtypes of every
 * element size, and checked against indexing done by hand. */
static void test_where_strided(void)
{
    static const tc_dtype dts[] = {TC_FLOAT64, TC_FLOAT32, TC_INT16, TC_UINT8, TC_INT64};
    int64_t sa[3] = {5, 7, 6}, sc[3] = {7, 5, 6}, sb[1] = {9};
    int pa[3] = {2, 0, 1}, pc[3] = {2, 1, 0};
    for (int di = 0; di < (int)(sizeof dts / sizeof dts[0]); di++) {
        double *va, *vb, *vc;
        tc_tensor *a = rand_tensor(3, sa, dts[di], -50, 50, &va);
        tc_tensor *b = rand_tensor(1, sb, dts[di], -50, 50, &vb);
        tc_tensor *c = rand_tensor(3, sc, TC_BOOL, 0, 1, &vc);
        tc_tensor *at = NULL, *bn = NULL, *ct = NULL, *o = NULL;
        CHECK_OK(tc_tensor_permute(a, pa, &at));     /* [6, 5, 7]: at[i][j][k] = a[j][k][i] */
        CHECK_OK(tc_tensor_permute(c, pc, &ct));     /* [6, 5, 7]: ct[i][j][k] = c[k][j][i] */
        CHECK_OK(tc_tensor_narrow(b, 0, 2, 7, &bn)); /* [7]: bn[k] = b[2 + k] */
        CHECK_OK(tc_tensor_where(ct, at, bn, &o));
        double *vo = tc_test_values(o);
        int bad = 0;
        for (int i = 0; i < 6; i++)
            for (int j = 0; j < 5; j++)
                for (int k = 0; k < 7; k++) {
                    double want = vc[k * 30 + j * 6 + i] ? va[j * 42 + k * 6 + i] : vb[2 + k];
                    bad += vo && vo[(i * 5 + j) * 7 + k] != want;
                }
        CHECK(vo && bad == 0 && tc_tensor_dtype(o) == dts[di]);
        free(vo), free(va), free(vb), free(vc);
        tc_tensor_release(o), tc_tensor_release(at), tc_tensor_release(bn);
        tc_tensor_release(ct), tc_tensor_release(a), tc_tensor_release(b), tc_tensor_release(c);
    }
}

static void test_reductions(void)
{
    int64_t sz[3] = {3, 5, 4};
    double *v;
    tc_tensor *a = rand_tensor(3, sz, TC_FLOAT64, -2, 2, &v);
    /* over each dim, with and without keepdim */
    for (int dim = -1; dim < 3; dim++) {
        int d = dim < 0 ? 2 : dim;
        for (int keep = 0; keep < 2; keep++) {
            tc_tensor *s = NULL, *m = NULL, *mx = NULL, *mn = NULL, *am = NULL;
            CHECK_OK(tc_tensor_sum(a, dim, keep, &s));
            CHECK_OK(tc_tensor_mean(a, dim, keep, &m));
            CHECK_OK(tc_tensor_max(a, dim, keep, &mx));
            CHECK_OK(tc_tensor_min(a, dim, keep, &mn));
            CHECK_OK(tc_tensor_argmax(a, dim, keep, &am));
            CHECK(tc_tensor_ndim(s) == (keep ? 3 : 2) && tc_tensor_dtype(am) == TC_INT64);
            if (keep)
                CHECK(tc_tensor_size(s, d) == 1);
            double *vs = tc_test_values(s), *vm = tc_test_values(m), *vx = tc_test_values(mx),
                   *vn = tc_test_values(mn), *va = tc_test_values(am);
            bool ok = true;
            int64_t outer = 1, inner = 1;
            for (int i = 0; i < d; i++)
                outer *= sz[i];
            for (int i = d + 1; i < 3; i++)
                inner *= sz[i];
            for (int64_t o = 0; o < outer; o++)
                for (int64_t k = 0; k < inner; k++) {
                    double sum = 0, best = -INFINITY, low = INFINITY;
                    int64_t arg = -1;
                    for (int64_t j = 0; j < sz[d]; j++) {
                        double x = v[(o * sz[d] + j) * inner + k];
                        sum += x;
                        if (x > best) {
                            best = x;
                            arg = j;
                        }
                        low = x < low ? x : low;
                    }
                    int64_t at = o * inner + k;
                    ok &= fabs(vs[at] - sum) < 1e-12 && fabs(vm[at] - sum / sz[d]) < 1e-12;
                    ok &= vx[at] == best && vn[at] == low && va[at] == arg;
                }
            CHECK(ok);
            free(vs), free(vm), free(vx), free(vn), free(va);
            tc_tensor_release(s), tc_tensor_release(m), tc_tensor_release(mx);
            tc_tensor_release(mn), tc_tensor_release(am);
        }
    }
    /* over everything */
    tc_tensor *s = NULL, *sk = NULL;
    CHECK_OK(tc_tensor_sum(a, TC_ALL_DIMS, false, &s));
    CHECK_OK(tc_tensor_max(a, TC_ALL_DIMS, true, &sk));
    CHECK(tc_tensor_ndim(s) == 0 && tc_tensor_ndim(sk) == 3 && tc_tensor_numel(sk) == 1);
    double total = 0, mx = -INFINITY, got;
    for (int i = 0; i < 60; i++) {
        total += v[i];
        mx = v[i] > mx ? v[i] : mx;
    }
    CHECK_OK(tc_tensor_item(s, &got));
    CHECK_NEAR(got, total, 1e-12);
    CHECK_OK(tc_tensor_item(sk, &got));
    CHECK(got == mx);
    tc_tensor_release(s);
    tc_tensor_release(sk);
    /* integer sums give int64; mean of integers is an error */
    tc_tensor *ia = NULL, *o = NULL;
    CHECK_OK(tc_tensor_to(a, CPU, TC_INT8, false, &ia));
    CHECK_OK(tc_tensor_sum(ia, 1, false, &o));
    CHECK(tc_tensor_dtype(o) == TC_INT64);
    tc_tensor_release(o);
    o = NULL;
    CHECK_STATUS(tc_tensor_mean(ia, 0, false, &o), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_tensor_sum(ia, 3, false, &o), TC_ERROR_INVALID_ARGUMENT);
    tc_tensor_release(ia);
    /* empty reductions */
    int64_t esz[2] = {0, 3};
    tc_tensor *e = NULL;
    CHECK_OK(tc_tensor_ones(2, esz, TC_FLOAT32, CPU, &e));
    CHECK_OK(tc_tensor_sum(e, 0, false, &o));
    double ev[3];
    CHECK_OK(tc_tensor_to_host(o, TC_FLOAT64, ev));
    CHECK(tc_tensor_numel(o) == 3 && ev[0] == 0 && ev[2] == 0);
    tc_tensor_release(o);
    CHECK_OK(tc_tensor_mean(e, TC_ALL_DIMS, false, &o));
    CHECK_OK(tc_tensor_item(o, &got));
    CHECK(isnan(got));
    tc_tensor_release(o);
    o = NULL;
    CHECK_STATUS(tc_tensor_max(e, 0, false, &o), TC_ERROR_SHAPE);
    CHECK_OK(tc_tensor_max(e, 1, false, &o)); /* zero rows of 3: fine, empty result */
    CHECK(tc_tensor_numel(o) == 0);
    tc_tensor_release(o);
    tc_tensor_release(e);
    /* 0-d */
    tc_tensor *z = NULL;
    CHECK_OK(tc_tensor_full(0, NULL, 4.5, TC_FLOAT32, CPU, &z));
    CHECK_OK(tc_tensor_argmax(z, 0, false, &o));
    CHECK_OK(tc_tensor_item(o, &got));
    CHECK(got == 0 && tc_tensor_ndim(o) == 0);
    tc_tensor_release(o);
    tc_tensor_release(z);
    tc_tensor_release(a);
    free(v);
}

static void test_errors(void)
{
    int64_t s1[1] = {3}, s2[1] = {4};
    tc_tensor *a = NULL, *b = NULL, *o = NULL;
    CHECK_OK(tc_tensor_ones(1, s1, TC_FLOAT32, CPU, &a));
    CHECK_OK(tc_tensor_ones(1, s2, TC_FLOAT32, CPU, &b));
    CHECK_STATUS(tc_tensor_add(a, b, &o), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_tensor_add(NULL, b, &o), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_add(a, b, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_sum(NULL, 0, false, &o), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_copy_(a, NULL, false), TC_ERROR_INVALID_ARGUMENT);
    CHECK(o == NULL);
    /* device mismatch: pretend b lives on cuda:1 (checked before any data is touched) */
    tc_device saved = b->storage->device;
    b->storage->device = (tc_device){TC_CUDA, 1};
    CHECK_STATUS(tc_tensor_add(a, b, &o), TC_ERROR_DEVICE_MISMATCH);
    CHECK(strstr(tc_last_error(), "cpu") && strstr(tc_last_error(), "cuda:1"));
    CHECK_STATUS(tc_tensor_where(NULL, a, b, &o), TC_ERROR_INVALID_ARGUMENT);
    b->storage->device = saved;
    CHECK(o == NULL);
    char buf[16];
    tc_device_format((tc_device){TC_CUDA, 3}, buf, sizeof buf);
    CHECK(strcmp(buf, "cuda:3") == 0);
    tc_device_guard g = tc_device_guard_enter_of(a);
    CHECK(g.status == TC_OK);
    tc_device_guard_exit(&g);
    tc_tensor_release(a);
    tc_tensor_release(b);
}

/* copy_ into a destination with a stride-0 dimension (an expanded view:
 * tcuda has no expand yet, so one is made with the internal tc__make_view)
 * is refused as PyTorch refuses it; reading from one is fine. */
static void test_copy_internal_overlap(void)
{
    int64_t sz[2] = {3, 4}, st[2] = {0, 1};
    tc_tensor *base = NULL, *ex = NULL, *src = NULL, *dst = NULL;
    CHECK_OK(tc_tensor_arange(0, 4, 1, TC_FLOAT32, CPU, &base));
    CHECK_OK(tc__make_view(base, 2, sz, st, 0, &ex)); /* 3 rows, all base */
    CHECK_OK(tc_tensor_full(2, sz, 7, TC_FLOAT32, CPU, &src));
    CHECK_STATUS(tc_tensor_copy_(ex, src, false), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "more than one element of the written-to tensor"));
    double v[12];
    CHECK_OK(tc_tensor_to_host(base, TC_FLOAT64, v));
    CHECK(v[0] == 0 && v[3] == 3); /* nothing written */
    CHECK_OK(tc_tensor_empty(2, sz, TC_FLOAT64, CPU, &dst));
    CHECK_OK(tc_tensor_copy_(dst, ex, false));
    CHECK_OK(tc_tensor_to_host(dst, TC_FLOAT64, v));
    CHECK(v[0] == 0 && v[5] == 1 && v[11] == 3);
    tc_tensor_release(base), tc_tensor_release(ex), tc_tensor_release(src);
    tc_tensor_release(dst);
}

/* Operands whose dims partly merge in the iterator: a narrowed view */
static void test_coalesce(void)
{
    int64_t s3[3] = {2, 3, 5};
    tc_tensor *r = NULL, *v = NULL, *n = NULL, *one = NULL, *o = NULL;
    CHECK_OK(tc_tensor_arange(0, 30, 1, TC_INT64, CPU, &r));
    CHECK_OK(tc_tensor_view(r, 3, s3, &v));
    CHECK_OK(tc_tensor_narrow(v, 2, 1, 4, &n));
    CHECK_OK(tc_tensor_full(0, NULL, 100, TC_INT64, CPU, &one));
    CHECK_OK(tc_tensor_add(n, one, &o));
    int64_t got[24];
    CHECK_OK(tc_tensor_to_host(o, TC_INT64, got));
    bool ok = true;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++)
                ok &= got[(i * 3 + j) * 4 + k] == i * 15 + j * 5 + k + 1 + 100;
    CHECK(ok);
    tc_tensor_release(r), tc_tensor_release(v), tc_tensor_release(n);
    tc_tensor_release(one), tc_tensor_release(o);
}

/* x [m, k] @ y [k, n] against a double loop over their logical values. */
static void check_mm_2d(const char *what, const tc_tensor *x, const tc_tensor *y, double tol)
{
    int64_t m = tc_tensor_size(x, 0), k = tc_tensor_size(x, 1), n = tc_tensor_size(y, 1);
    double *vx = tc_test_values(x), *vy = tc_test_values(y), *vo = NULL;
    tc_tensor *o = NULL;
    CHECK_OK(tc_tensor_matmul(x, y, &o));
    bool ok = o && tc_tensor_ndim(o) == 2 && tc_tensor_size(o, 0) == m &&
              tc_tensor_size(o, 1) == n && tc_tensor_is_contiguous(o);
    if (ok)
        vo = tc_test_values(o);
    for (int64_t i = 0; ok && i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double r = 0;
            for (int64_t l = 0; l < k; l++)
                r += vx[i * k + l] * vy[l * n + j];
            ok &= fabs(vo[i * n + j] - r) <= tol * (1 + fabs(r));
        }
    if (!ok)
        fprintf(stderr, "matmul, %s: wrong result\n", what);
    CHECK(ok);
    free(vx), free(vy), free(vo);
    tc_tensor_release(o);
}

/* 2-d operands that are not dense: transposed views (read in place with a
 * transpose flag) and a view with a column stride of 2 (made dense first). */
static void test_matmul_views(void)
{
    for (int d = 0; d < 2; d++) {
        tc_dtype dt = d ? TC_FLOAT64 : TC_FLOAT32;
        double tol = d ? 1e-12 : 1e-5;
        int64_t sx[2] = {33, 20}, sy[2] = {17, 33}, sw[2] = {20, 34};
        double *v[3];
        tc_tensor *xt0 = rand_tensor(2, sx, dt, -1, 1, &v[0]); /* [33, 20]: x^T of [20, 33] */
        tc_tensor *yt0 = rand_tensor(2, sy, dt, -1, 1, &v[1]); /* [17, 33]: y^T of [33, 17] */
        tc_tensor *w = rand_tensor(2, sw, dt, -1, 1, &v[2]), *x = NULL, *y = NULL, *ws = NULL;
        free(v[0]), free(v[1]), free(v[2]);
        CHECK_OK(tc_tensor_transpose(xt0, 0, 1, &x)); /* [20, 33], column-major */
        CHECK_OK(tc_tensor_transpose(yt0, 0, 1, &y)); /* [33, 17], column-major */
        tc_tensor *xd = NULL, *yd = NULL;
        CHECK_OK(tc_tensor_contiguous(x, &xd));
        CHECK_OK(tc_tensor_contiguous(y, &yd));
        check_mm_2d("transposed a", x, yd, tol);
        check_mm_2d("transposed b", xd, y, tol);
        check_mm_2d("both transposed", x, y, tol);
        /* w[:, ::2]: [20, 17] with a column stride of 2 */
        tc_tensor *w3 = NULL, *w3n = NULL;
        CHECK_OK(tc_tensor_view(w, 3, (int64_t[]){20, 17, 2}, &w3));
        CHECK_OK(tc_tensor_narrow(w3, 2, 0, 1, &w3n));
        CHECK_OK(tc_tensor_view(w3n, 2, (int64_t[]){20, 17}, &ws));
        check_mm_2d("b with column stride 2", xt0, ws, tol);
        tc_tensor *wst = NULL;
        CHECK_OK(tc_tensor_transpose(ws, 0, 1, &wst)); /* [17, 20] */
        check_mm_2d("strided a", wst, xd, tol);
        tc_tensor_release(wst), tc_tensor_release(ws), tc_tensor_release(w3n);
        tc_tensor_release(w3), tc_tensor_release(xd), tc_tensor_release(yd);
        tc_tensor_release(x), tc_tensor_release(y), tc_tensor_release(xt0);
        tc_tensor_release(yt0), tc_tensor_release(w);
    }
}

static void test_matmul(void)
{
    /* [2, 5, 7] @ [7, 3] (batch broadcast), against a naive double loop */
    int64_t sa[3] = {2, 5, 7}, sbt[2] = {3, 7};
    double *va, *vb;
    tc_tensor *a = rand_tensor(3, sa, TC_FLOAT64, -1, 1, &va);
    tc_tensor *b0 = rand_tensor(2, sbt, TC_FLOAT64, -1, 1, &vb), *b = NULL, *o = NULL;
    CHECK_OK(tc_tensor_transpose(b0, 0, 1, &b)); /* non-contiguous [7, 3] */
    CHECK_OK(tc_tensor_matmul(a, b, &o));
    CHECK(tc_tensor_ndim(o) == 3 && tc_tensor_size(o, 1) == 5 && tc_tensor_size(o, 2) == 3);
    double *vo = tc_test_values(o);
    bool ok = true;
    for (int p = 0; p < 2; p++)
        for (int i = 0; i < 5; i++)
            for (int j = 0; j < 3; j++) {
                double r = 0;
                for (int l = 0; l < 7; l++)
                    r += va[(p * 5 + i) * 7 + l] * vb[j * 7 + l];
                ok &= fabs(vo[(p * 5 + i) * 3 + j] - r) < 1e-12;
            }
    CHECK(ok);
    free(vo);
    tc_tensor_release(o);
    /* larger than a cache block, float32 */
    int64_t s1[2] = {130, 70}, s2[2] = {70, 90};
    double *v1, *v2;
    tc_tensor *x = rand_tensor(2, s1, TC_FLOAT32, -1, 1, &v1);
    tc_tensor *y = rand_tensor(2, s2, TC_FLOAT32, -1, 1, &v2);
    CHECK_OK(tc_tensor_matmul(x, y, &o));
    vo = tc_test_values(o);
    ok = true;
    for (int i = 0; i < 130; i++)
        for (int j = 0; j < 90; j++) {
            double r = 0;
            for (int l = 0; l < 70; l++)
                r += v1[i * 70 + l] * v2[l * 90 + j];
            ok &= fabs(vo[i * 90 + j] - r) < 1e-5;
        }
    CHECK(ok);
    free(vo);
    tc_tensor_release(o);
    o = NULL;
    CHECK_STATUS(tc_tensor_matmul(x, x, &o), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_tensor_matmul(a, b0, &o), TC_ERROR_SHAPE); /* inner 7 against 3 */
    int64_t s3[3] = {3, 7, 3}, s1d[1] = {7};
    tc_tensor *b3 = NULL, *v1d = NULL;
    CHECK_OK(tc_tensor_zeros(3, s3, TC_FLOAT64, CPU, &b3));
    CHECK_OK(tc_tensor_zeros(1, s1d, TC_FLOAT64, CPU, &v1d));
    CHECK_STATUS(tc_tensor_matmul(a, b3, &o), TC_ERROR_SHAPE); /* batch 2 against 3 */
    CHECK_STATUS(tc_tensor_matmul(a, v1d, &o), TC_ERROR_SHAPE);
    tc_tensor_release(b3), tc_tensor_release(v1d);
    tc_tensor *xi = NULL, *y64 = NULL;
    CHECK_OK(tc_tensor_to(x, CPU, TC_INT32, false, &xi));
    CHECK_STATUS(tc_tensor_matmul(xi, xi, &o), TC_ERROR_DTYPE);
    CHECK_OK(tc_tensor_to(y, CPU, TC_FLOAT64, false, &y64));
    CHECK_STATUS(tc_tensor_matmul(x, y64, &o), TC_ERROR_DTYPE);
    CHECK(o == NULL);
    /* k = 0 gives zeros */
    int64_t e1[2] = {2, 0}, e2[2] = {0, 3};
    tc_tensor *ea = NULL, *eb = NULL;
    CHECK_OK(tc_tensor_empty(2, e1, TC_FLOAT32, CPU, &ea));
    CHECK_OK(tc_tensor_empty(2, e2, TC_FLOAT32, CPU, &eb));
    CHECK_OK(tc_tensor_matmul(ea, eb, &o));
    double ez[6];
    CHECK_OK(tc_tensor_to_host(o, TC_FLOAT64, ez));
    CHECK(tc_tensor_numel(o) == 6 && ez[0] == 0 && ez[5] == 0);
    tc_tensor_release(o);
    tc_tensor_release(ea), tc_tensor_release(eb), tc_tensor_release(xi), tc_tensor_release(y64);
    tc_tensor_release(x), tc_tensor_release(y), tc_tensor_release(a), tc_tensor_release(b);
    tc_tensor_release(b0);
    free(va), free(vb), free(v1), free(v2);
}

int main(void)
{
    tc_test_init();
    test_factories();
    test_conversions();
    test_views();
    test_binary();
    test_unary();
    test_promotion();
    test_where_values();
    test_where_strided();
    test_reductions();
    test_errors();
    test_matmul();
    test_matmul_views();
    test_coalesce();
    test_copy_internal_overlap();
    return TC_TEST_DONE();
}
