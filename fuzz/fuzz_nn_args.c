/* Fuzzes the argument checks of the nn ops (nn.h, nn_backward.h) on CPU
 * tensors. The input is a program (fuzz_input.h) over a pool of tensors:
 * factories (any ndim up to 4, small or overflowing sizes, every dtype and
 * an invalid one), tensors shaped after another one's sizes and full of
 * small integers (indices, targets and lengths that fit), views that give
 * odd strides (transpose, narrow, expand, unsqueeze), releases (the last
 * released handle is kept to be passed), and calls of every nn function
 * and of the GEMM front ends beside them (matmul, bmm, baddbmm).
 * A call takes its operands from the pool (or NULL, or the released
 * handle), or builds operands that agree for that op and then spoils one of
 * them (another dtype, a first size one more, a transposed view, released,
 * NULL); its scalars are wrong now and then (dims out of range, non-finite
 * eps, scale and p, unknown enum values and bits, normalized shapes of the
 * wrong rank or sizes).
 *
 * Every call must either succeed or return an error with a message and
 * leave its outputs alone (a sentinel in each); a success's outputs are read
 * back in full (AddressSanitizer catches a result or an in-place write that
 * lies outside its buffer) and must be valid tensors. Results join the pool,
 * so later calls take them as inputs (the gradients of a forward, say).
 *
 * Operands past 2^16 elements, and matmul-like calls whose two largest
 * operands multiply past 2^24 elements, are skipped: they are not wrong,
 * only slow on the fuzzer's instrumented CPU. */
#include <math.h>
#include <string.h>

#include "fuzz_input.h"
#include "tcuda/tcuda.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { SLOTS = 8, MAX_OPS = 16, MAX_READ = 1 << 16 };
#define MAX_NUMEL ((int64_t)1 << 16) /* larger operands are skipped */
#define MAX_WORK 0x1p24              /* and products of two operands past this */

static const tc_device cpu = {TC_CPU, -1};
static char sentinel_; /* never used: its address marks an untouched output */
#define SENTINEL ((tc_tensor *)(void *)&sentinel_)

/* clang-format off */
static const int64_t special_sizes[16] = {
    -1, 0, 1, 7, 64, 65, 128, 513, 1000003, 0x80000000, (int64_t)1 << 40, (int64_t)1 << 62,
    INT64_MAX, INT64_MIN, -0x4000000000000000, 3};
static const double special_values[16] = {
    0, 1, -1, 0.5, 2, 3, 1e-5, -1e-5, 0.999, 1.5, 1e300, -1e300, INFINITY, -INFINITY, NAN, 100};
/* clang-format on */

typedef struct pool {
    tc_tensor *t[SLOTS];
    tc_tensor *dead; /* released; passed now and then in an operand's place */
} pool;

static int64_t read_size(fz_input *in)
{
    uint8_t b = fz_u8(in);
    return b < 224 ? b % 5 : special_sizes[(b - 224) % 16];
}

static double read_value(fz_input *in) { return special_values[fz_u8(in) % 16]; }

static tc_dtype read_dtype(fz_input *in) { return (tc_dtype)(fz_u8(in) % (TC_NUM_DTYPES + 1)); }

/* A dim, mostly in range for 0 to 4 dims, sometimes far out. */
static int read_dim(fz_input *in)
{
    uint8_t b = fz_u8(in);
    return b < 240 ? (int)(b % 9) - 4 : (b % 2 ? 1000 : -1000);
}

/* Whether t is the released handle. A handle is reused by the next tensor
 * made, so every new tensor goes through fresh(), which forgets it then. */
static bool is_dead(const pool *p, const tc_tensor *t) { return t && t == p->dead; }

static void fresh(pool *p, const tc_tensor *t)
{
    if (t && t == p->dead)
        p->dead = NULL;
}

/* Puts t into a slot (releasing what was there). */
static void keep(pool *p, fz_input *in, tc_tensor *t)
{
    fresh(p, t);
    int s = fz_u8(in) % SLOTS;
    tc_tensor_release(p->t[s]);
    p->t[s] = t;
}

/* An operand: a slot (maybe empty: NULL), NULL, or the released handle. */
static tc_tensor *arg(pool *p, fz_input *in)
{
    uint8_t b = fz_u8(in);
    if (b < 208)
        return p->t[b % SLOTS];
    if (b < 248 || !p->dead)
        return NULL;
    return p->dead;
}

/* Whether an operand is too big to compute with here (see the top). */
static bool too_big(const pool *p, const tc_tensor *t)
{
    return t && !is_dead(p, t) && tc_tensor_numel(t) > MAX_NUMEL;
}

static double numel_of(const pool *p, const tc_tensor *t)
{
    return t && !is_dead(p, t) ? (double)tc_tensor_numel(t) : 0;
}

/* Every live result must be a valid tensor whose elements can all be read. */
static void check_result(tc_tensor *t)
{
    static double buf[MAX_READ];
    FZ_CHECK(t != NULL && t != SENTINEL);
    int nd = tc_tensor_ndim(t);
    FZ_CHECK(nd >= 0 && nd <= TC_MAX_DIMS);
    int64_t n = tc_tensor_numel(t);
    FZ_CHECK(n >= 0);
    FZ_CHECK((unsigned)tc_tensor_dtype(t) < TC_NUM_DTYPES);
    if (n <= MAX_READ) {
        tc_status st = tc_tensor_to_host(t, TC_FLOAT64, buf);
        if (st != TC_OK)
            fprintf(stderr, "to_host: %s\n", tc_last_error());
        FZ_CHECK(st == TC_OK);
    }
}

/* After a call: on success each wanted output is checked and kept; on
 * failure there is a message and every output is still the sentinel. */
static void settle(pool *p, fz_input *in, tc_status st, tc_tensor **outs, int n)
{
    if (st != TC_OK) {
        FZ_CHECK(tc_last_error()[0] != '\0');
        for (int i = 0; i < n; i++)
            FZ_CHECK(outs[i] == SENTINEL);
        return;
    }
    for (int i = 0; i < n; i++)
        if (outs[i] != SENTINEL)
            fresh(p, outs[i]);
    for (int i = 0; i < n; i++) {
        if (outs[i] == SENTINEL) /* not asked for (the call may leave it) */
            continue;
        if (!outs[i]) /* an output the call did not produce (a NULL grad) */
            continue;
        check_result(outs[i]);
        keep(p, in, outs[i]);
    }
}

/* The tensors an in-place or _into call wrote must still read back whole. */
static void check_written(const pool *p, tc_tensor *const *ts, int n)
{
    for (int i = 0; i < n; i++)
        if (ts[i] && !is_dead(p, ts[i]) && tc_tensor_numel(ts[i]) <= MAX_READ)
            check_result(ts[i]);
}

/* A factory's or view's outcome: a valid tensor kept in the pool, or an
 * error with a message and *out untouched. */
static void take(pool *p, fz_input *in, tc_status st, tc_tensor *t)
{
    if (st == TC_OK) {
        check_result(t);
        keep(p, in, t);
    } else {
        FZ_CHECK(t == SENTINEL && tc_last_error()[0] != '\0');
    }
}

/* The element count of n sizes, a negative one counted as 0, in double. */
static double count(int n, const int64_t *sizes)
{
    double c = 1;
    for (int i = 0; i < n; i++)
        c *= sizes[i] < 0 ? 0 : (double)sizes[i];
    return c;
}

static void make(pool *p, fz_input *in)
{
    int nd = fz_u8(in) % 5;
    int64_t sizes[4];
    for (int i = 0; i < nd; i++)
        sizes[i] = read_size(in);
    double numel = count(nd, sizes);
    tc_dtype dt = read_dtype(in);
    bool ramp = fz_u8(in) & 1;
    double v = read_value(in);
    if (numel > (double)MAX_NUMEL && numel < 0x1p44)
        return; /* legitimately large: skipped (larger ones must be refused) */
    tc_tensor *t = SENTINEL;
    tc_status st;
    if (ramp && nd == 1)
        st = tc_tensor_arange(0, (double)sizes[0], 1, dt, cpu, &t);
    else
        st = tc_tensor_full(nd, sizes, v, dt, cpu, &t);
    take(p, in, st, t);
}

/* A tensor shaped after a slot's (the same sizes; without the last dim or
 * the first; the first alone; or one size changed), of any dtype, full of a
 * small integer (valid indices, targets and lengths) or a special value:
 * the operands that must agree with others. */
static void derive(pool *p, fz_input *in)
{
    tc_tensor *x = arg(p, in), *t = SENTINEL;
    if (!x || is_dead(p, x))
        return;
    int nd = tc_tensor_ndim(x), n = 0;
    int64_t sizes[TC_MAX_DIMS];
    uint8_t how = fz_u8(in) % 5;
    for (int i = 0; i < nd; i++) {
        if ((how == 1 && i == nd - 1) || (how == 2 && i == 0) || (how == 3 && i > 0))
            continue;
        sizes[n++] = tc_tensor_size(x, i);
    }
    if (how == 4 && n > 0)
        sizes[fz_u8(in) % n] = read_size(in);
    double numel = count(n, sizes);
    tc_dtype dt = read_dtype(in);
    double v = fz_u8(in) < 160 ? (double)(fz_u8(in) % 4) : read_value(in);
    if (numel > (double)MAX_NUMEL && numel < 0x1p44)
        return;
    tc_status st = tc_tensor_full(n, sizes, v, dt, cpu, &t);
    take(p, in, st, t);
}

static void view(pool *p, fz_input *in)
{
    tc_tensor *x = arg(p, in), *t = SENTINEL;
    if (!x || is_dead(p, x))
        return;
    int nd = tc_tensor_ndim(x);
    tc_status st;
    switch (fz_u8(in) % 4) {
    case 0: {
        int d0 = read_dim(in), d1 = read_dim(in);
        st = tc_tensor_transpose(x, d0, d1, &t);
        break;
    }
    case 1: {
        int d = read_dim(in);
        int64_t start = read_size(in), len = read_size(in);
        st = tc_tensor_narrow(x, d, start, len, &t);
        break;
    }
    case 2: { /* expand: one more leading dim, the sizes of x, size-1 dims grown */
        int64_t sizes[TC_MAX_DIMS];
        int n = nd + 1 <= TC_MAX_DIMS ? nd + 1 : nd;
        sizes[0] = read_size(in);
        for (int i = 1; i < n; i++) {
            int64_t s = tc_tensor_size(x, i - 1 + nd - (n - 1));
            sizes[i] = s == 1 ? read_size(in) : s;
        }
        st = tc_tensor_expand(x, n, sizes, &t);
        break;
    }
    default: st = tc_tensor_unsqueeze(x, read_dim(in), &t); break;
    }
    take(p, in, st, t);
}

/* A tensor of the given sizes (the first negative one ends them), dtype and
 * value; NULL when it cannot be made. */
static tc_tensor *mk(tc_dtype dt, double v, int64_t s0, int64_t s1, int64_t s2, int64_t s3)
{
    int64_t sizes[4] = {s0, s1, s2, s3};
    int n = 0;
    while (n < 4 && sizes[n] >= 0)
        n++;
    tc_tensor *t = NULL;
    return tc_tensor_full(n, sizes, v, dt, cpu, &t) == TC_OK ? t : NULL;
}

/* Operands that agree for op (small sizes from the input) into ops[0..5],
 * then one of them spoiled, or none: another dtype, a first size one more,
 * a strided view (transposed), released (left in its place), or NULL. The
 * caller releases them (not the released one: it is the pool's dead handle). */
static void build(pool *p, fz_input *in, int op, tc_tensor **ops)
{
    const tc_dtype fdt[4] = {TC_FLOAT32, TC_FLOAT64, TC_BFLOAT16, TC_FLOAT16};
    tc_dtype dt = fdt[fz_u8(in) % 4];
    int64_t n1 = 1 + fz_u8(in) % 4, n2 = 1 + fz_u8(in) % 4, n3 = 1 + fz_u8(in) % 4,
            n4 = 1 + fz_u8(in) % 8, n5 = 1 + fz_u8(in) % 4;
    double small = (double)(fz_u8(in) % 4), x = read_value(in);
    switch (op) {
    case 4:
    case 17: /* logits [N, C], target [N] */
        ops[0] = mk(dt, x, n1, n2, -1, -1);
        ops[1] = mk(TC_INT64, small, n1, -1, -1, -1);
        break;
    case 18: /* grad_loss, logits, target */
        ops[0] = mk(dt, 1, -1, -1, -1, -1);
        ops[1] = mk(dt, x, n1, n2, -1, -1);
        ops[2] = mk(TC_INT64, small, n1, -1, -1, -1);
        break;
    case 6: /* weight [V, E], indices [N] */
        ops[0] = mk(dt, x, n1, n2, -1, -1);
        ops[1] = mk(TC_INT64, small, n3, -1, -1, -1);
        break;
    case 19: /* grad [N, E], indices [N] */
        ops[0] = mk(dt, x, n3, n2, -1, -1);
        ops[1] = mk(TC_INT64, small, n3, -1, -1, -1);
        break;
    case 20: /* grad_weight [V, E], grad [N, E], indices [N] */
        ops[0] = mk(dt, 0, n1, n2, -1, -1);
        ops[1] = mk(dt, x, n3, n2, -1, -1);
        ops[2] = mk(TC_INT64, small, n3, -1, -1, -1);
        break;
    case 5:
    case 23: /* x [M, K], w [N, K], b [N] */
        ops[0] = mk(dt, x, n1, n2, -1, -1);
        ops[1] = mk(dt, 0.5, n3, n2, -1, -1);
        ops[2] = mk(dt, 1, n3, -1, -1, -1);
        break;
    case 24: /* grad [M, N], w [N, K], pre [M, N] */
        ops[0] = mk(dt, x, n1, n3, -1, -1);
        ops[1] = mk(dt, 0.5, n3, n2, -1, -1);
        ops[2] = mk(dt, 1, n1, n3, -1, -1);
        break;
    case 21:
    case 22: /* grad [M, N], x [M, K], w [N, K]; grad_x, grad_w, grad_b */
        ops[0] = mk(dt, x, n1, n3, -1, -1);
        ops[1] = mk(dt, 1, n1, n2, -1, -1);
        ops[2] = mk(dt, 0.5, n3, n2, -1, -1);
        if (op == 22) {
            ops[3] = mk(dt, 0, n1, n2, -1, -1);
            ops[4] = mk(dt, 0, n3, n2, -1, -1);
            ops[5] = mk(dt, 0, n3, -1, -1, -1);
        }
        break;
    case 9: { /* q [B, H, T, E], caches [B, Hkv, S, E], new [B, Hkv, T, E], lengths [B] */
        int64_t h = n5 * (1 + fz_u8(in) % 2), s = n4 + n3;
        ops[0] = mk(dt, x, n1, h, n3, n2);
        ops[1] = mk(dt, 0.5, n1, n5, s, n2);
        ops[2] = mk(dt, 1, n1, n5, s, n2);
        ops[3] = mk(dt, 1, n1, n5, n3, n2);
        ops[4] = mk(dt, -1, n1, n5, n3, n2);
        ops[5] = mk(fz_u8(in) & 1 ? TC_INT32 : TC_INT64, small, n1, -1, -1, -1);
        break;
    }
    case 15:
    case 16: /* grad, x [R, C], mean, rstd [R], weight [C], dx [R, C] */
        ops[0] = mk(dt, 1, n1, n2, -1, -1);
        ops[1] = mk(dt, x, n1, n2, -1, -1);
        ops[2] = mk(TC_FLOAT32, 0, n1, -1, -1, -1);
        ops[3] = mk(TC_FLOAT32, 1, n1, -1, -1, -1);
        ops[4] = mk(dt, 1, n2, -1, -1, -1);
        ops[5] = mk(dt, 0, n1, n2, -1, -1);
        break;
    case 25: /* grad [N], mask [N] */
        ops[0] = mk(dt, x, n4, -1, -1, -1);
        ops[1] = mk(TC_BOOL, 1, n4, -1, -1, -1);
        break;
    case 26:
    case 28: /* grad, q [B, H, L, E], k, v [B, H, S, E]; out [B, H, L, E], lse [B, H, L] */
        ops[0] = mk(dt, 1, n1, n5, n3, n2);
        ops[1] = mk(dt, x, n1, n5, n3, n2);
        ops[2] = mk(dt, 0.5, n1, n5, n4, n2);
        ops[3] = mk(dt, 1, n1, n5, n4, n2);
        if (op == 28) {
            ops[4] = mk(dt, 0.25, n1, n5, n3, n2);
            ops[5] = mk(TC_FLOAT32, 0, n1, n5, n3, -1);
        }
        break;
    case 32: /* x [M, K], w [N, K], b [N], residual [M, N] */
        ops[0] = mk(dt, x, n1, n2, -1, -1);
        ops[1] = mk(dt, 0.5, n3, n2, -1, -1);
        ops[2] = mk(dt, 1, n3, -1, -1, -1);
        ops[3] = mk(dt, 2, n1, n3, -1, -1);
        break;
    case 33:
    case 34: /* x [M, K], ln_w [K], ln_b [K], w [N, K], b [N] */
        ops[0] = mk(dt, x, n1, n2, -1, -1);
        ops[1] = mk(dt, 1, n2, -1, -1, -1);
        ops[2] = mk(dt, 0, n2, -1, -1, -1);
        ops[3] = mk(dt, 0.5, n3, n2, -1, -1);
        ops[4] = mk(dt, 1, n3, -1, -1, -1);
        break;
    case 29:
    case 30:
    case 31: /* matmul, bmm [B, M, K] @ [B, K, N]; baddbmm's input [B, M, N] first */
        ops[0] = mk(dt, x, n1, n3, n2, -1);
        ops[1] = mk(dt, 0.5, n1, n2, n4, -1);
        if (op == 31) {
            ops[2] = ops[1];
            ops[1] = ops[0];
            ops[0] = mk(dt, 1, n1, n3, n4, -1);
        }
        break;
    default: /* the others that take q, k, v (or x, y, z): [B, H, L, E], [B, H, S, E] */
        ops[0] = mk(dt, x, n1, n5, n3, n2);
        ops[1] = mk(dt, 0.5, n1, n5, n4, n2);
        ops[2] = mk(dt, 1, n1, n5, n4, n2);
        break;
    }
    for (int i = 0; i < 6; i++)
        fresh(p, ops[i]);
    int which = fz_u8(in) % 6, how = fz_u8(in) % 6;
    tc_tensor *t = ops[which], *u = NULL;
    if (!t)
        return;
    if (how == 0) {
        if (tc_tensor_to(t, cpu, read_dtype(in), false, &u) != TC_OK)
            u = NULL;
    } else if (how == 1 && tc_tensor_ndim(t) > 0) {
        int64_t sizes[TC_MAX_DIMS];
        for (int i = 0; i < tc_tensor_ndim(t); i++)
            sizes[i] = tc_tensor_size(t, i);
        sizes[0]++;
        if (tc_tensor_new_full(t, tc_tensor_ndim(t), sizes, 1, &u) != TC_OK)
            u = NULL;
    } else if (how == 2 && tc_tensor_ndim(t) > 1) {
        if (tc_tensor_transpose(t, 0, 1, &u) != TC_OK)
            u = NULL;
    } else if (how == 3) { /* released: it stays in its place, the pool's dead handle */
        tc_tensor_release(t);
        p->dead = t;
        return;
    } else if (how == 4) {
        tc_tensor_release(t);
        ops[which] = NULL;
        return;
    }
    if (u) {
        fresh(p, u);
        tc_tensor_release(t);
        ops[which] = u;
    }
}

/* One nn call. */
static void call(pool *p, fz_input *in)
{
    uint8_t byte = fz_u8(in); /* ops 32-34 came later: the corpus keeps its meaning */
    uint8_t op = byte >= 248 ? 32 + byte % 3 : byte % 32;
    tc_tensor *ops[6], *built[6] = {NULL};
    if (fz_u8(in) & 1) { /* operands built to agree, or taken from the pool */
        build(p, in, op, built);
        memcpy(ops, built, sizeof ops);
        for (int i = 0; i < 6; i++) /* the one released in build is not ours */
            if (is_dead(p, built[i]))
                built[i] = NULL;
    } else {
        for (int i = 0; i < 6; i++)
            ops[i] = arg(p, in);
    }
    tc_tensor *a = ops[0], *b = ops[1], *c = ops[2], *d = ops[3], *e = ops[4], *f = ops[5];
    double big[2] = {0, 0};
    for (int i = 0; i < 6; i++) {
        if (too_big(p, ops[i]))
            goto done;
        double n = numel_of(p, ops[i]);
        if (n > big[0]) {
            big[1] = big[0];
            big[0] = n;
        } else if (n > big[1]) {
            big[1] = n;
        }
    }
    if (big[0] * (big[1] > 1 ? big[1] : 1) > MAX_WORK)
        goto done;
    int dim = read_dim(in), nshape = (int)(fz_u8(in) % 4);
    if (fz_u8(in) > 250)
        nshape = fz_u8(in) % 2 ? -1 : TC_MAX_DIMS + 1;
    int64_t shape[TC_MAX_DIMS + 1];
    for (int i = 0; i < TC_MAX_DIMS + 1; i++) /* the last dims of a, or read */
        shape[i] = (a && !is_dead(p, a) && fz_u8(in) < 200 && tc_tensor_ndim(a) > i)
                       ? tc_tensor_size(a, tc_tensor_ndim(a) - 1 - i)
                       : read_size(in);
    double eps = fz_u8(in) < 200 ? 1e-5 : read_value(in);
    double scale_v = read_value(in);
    const double *scale = fz_u8(in) & 1 ? &scale_v : NULL;
    bool flag = fz_u8(in) & 1, flag2 = fz_u8(in) & 1;
    int64_t index = fz_u8(in) < 128 ? -100 : read_size(in);
    tc_reduction red = (tc_reduction)(fz_u8(in) % 4);
    tc_dtype dt = read_dtype(in);
    tc_gelu_approximate approx = (tc_gelu_approximate)(fz_u8(in) % 3);
    unsigned want = fz_u8(in) % 9;
    double pv = fz_u8(in) < 128 ? 0.25 : read_value(in);
    tc_tensor *o[4] = {SENTINEL, SENTINEL, SENTINEL, SENTINEL};
    tc_status st;
    switch (op) {
    case 0: st = tc_nn_softmax(a, dim, &o[0]); break;
    case 1: st = tc_nn_log_softmax(a, dim, &o[0]); break;
    case 2: st = tc_nn_layer_norm(a, nshape, shape, b, c, eps, &o[0]); break;
    case 3: st = tc_nn_rms_norm(a, nshape, shape, b, flag ? &eps : NULL, &o[0]); break;
    case 4: st = tc_nn_cross_entropy(a, b, index, red, &o[0]); break;
    case 5: st = tc_nn_linear(a, b, c, &o[0]); break;
    case 6: st = tc_nn_embedding(a, b, &o[0]); break;
    case 7: st = tc_nn_dropout(a, pv, flag, NULL, &o[0], flag2 ? &o[1] : NULL); break;
    case 8: st = tc_nn_scaled_dot_product_attention(a, b, c, flag, scale, &o[0]); break;
    case 9:
        st = tc_nn_attention_with_kv_cache(a, b, c, d, e, f, flag, scale, &o[0]);
        if (st == TC_OK)
            check_written(p, (tc_tensor *[]){b, c}, 2);
        break;
    case 10: st = tc_nn_gelu_backward(a, b, approx, &o[0]); break;
    case 11: st = tc_nn_softmax_backward(a, b, dim, &o[0]); break;
    case 12: st = tc_nn_log_softmax_backward(a, b, dim, &o[0]); break;
    case 13:
        st = tc_nn_native_layer_norm(a, nshape, shape, b, c, eps, &o[0], flag ? &o[1] : NULL,
                                     flag2 ? &o[2] : NULL);
        break;
    case 14:
        st = tc_nn_add_layer_norm(a, b, nshape, shape, c, d, eps, dt, flag ? &o[0] : NULL, &o[1],
                                  flag2 ? &o[2] : NULL, flag2 ? &o[3] : NULL);
        break;
    case 15:
        st = tc_nn_layer_norm_backward(a, b, nshape, shape, c, d, e, flag ? &o[0] : NULL,
                                       flag2 ? &o[1] : NULL, want & 1 ? &o[2] : NULL);
        break;
    case 16:
        st = tc_nn_layer_norm_backward_into(a, b, nshape, shape, c, d, e, flag, f, NULL, NULL,
                                            NULL);
        if (st == TC_OK)
            check_written(p, &f, 1);
        break;
    case 17:
        st = tc_nn_cross_entropy_fused(a, b, index, red, pv, flag ? &o[0] : NULL,
                                       flag2 ? &o[1] : NULL);
        break;
    case 18: st = tc_nn_cross_entropy_backward(a, b, c, index, red, &o[0]); break;
    case 19: { /* num_weights rows: a count that fits but is large is skipped, as above */
        int64_t rows = read_size(in);
        double width = a && !is_dead(p, a) && tc_tensor_ndim(a) > 0
                           ? (double)tc_tensor_size(a, tc_tensor_ndim(a) - 1)
                           : 1;
        double n = (double)rows * (width > 1 ? width : 1);
        if (n > (double)MAX_NUMEL && n < 0x1p44)
            goto done;
        st = tc_nn_embedding_backward(a, b, rows, index, flag, &o[0]);
        break;
    }
    case 20:
        st = tc_nn_embedding_backward_(a, b, c, index, flag);
        if (st == TC_OK)
            check_written(p, &a, 1);
        break;
    case 21:
        st = tc_nn_linear_backward(a, b, c, want, want & 1 ? &o[0] : NULL, want & 2 ? &o[1] : NULL,
                                   want & 4 ? &o[2] : NULL);
        break;
    case 22:
        st = tc_nn_linear_backward_into(a, b, c, flag, d, e, f);
        if (st == TC_OK)
            check_written(p, (tc_tensor *[]){d, e, f}, 3);
        break;
    case 23: st = tc_nn_linear_gelu(a, b, c, approx, &o[0], flag ? &o[1] : NULL); break;
    case 24: st = tc_nn_linear_backward_gelu(a, b, c, approx, &o[0], flag ? &o[1] : NULL); break;
    case 25: st = tc_nn_dropout_backward(a, b, pv, &o[0]); break;
    case 26:
        st = tc_nn_scaled_dot_product_attention_backward(a, b, c, d, flag, scale,
                                                         flag2 ? &o[0] : NULL, &o[1], &o[2]);
        break;
    case 27:
        st = tc_nn_scaled_dot_product_attention_lse(a, b, c, flag, scale, &o[0],
                                                    flag2 ? &o[1] : NULL);
        break;
    case 28:
        st = tc_nn_scaled_dot_product_attention_backward_lse(a, b, c, d, e, f, flag, scale, &o[0],
                                                             &o[1], &o[2]);
        break;
    case 29: st = tc_tensor_matmul(a, b, &o[0]); break;
    case 30: st = tc_tensor_bmm(a, b, &o[0]); break;
    case 31: st = tc_tensor_baddbmm(a, b, c, pv, eps, &o[0]); break;
    case 32: st = tc_nn_linear_add(a, b, c, d, &o[0]); break;
    case 33: st = tc_nn_layer_norm_linear(a, b, c, eps, d, e, &o[0]); break;
    default: st = tc_nn_layer_norm_linear_gelu(a, b, c, eps, d, e, approx, &o[0]); break;
    }
    settle(p, in, st, o, 4);
done:
    for (int i = 0; i < 6; i++)
        tc_tensor_release(built[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_input in = {data, size};
    pool p = {{NULL}, NULL};
    for (int i = 0; i < MAX_OPS && in.n; i++) {
        uint8_t kind = fz_u8(&in) % 9;
        if (kind < 2) {
            make(&p, &in);
        } else if (kind < 4) {
            derive(&p, &in);
        } else if (kind == 4) {
            view(&p, &in);
        } else if (kind == 5) { /* release a slot; the last released is kept to pass */
            int s = fz_u8(&in) % SLOTS;
            if (p.t[s]) {
                tc_tensor_release(p.t[s]);
                p.dead = p.t[s];
                p.t[s] = NULL;
            }
        } else {
            call(&p, &in);
        }
    }
    for (int i = 0; i < SLOTS; i++)
        tc_tensor_release(p.t[i]);
    return 0;
}
