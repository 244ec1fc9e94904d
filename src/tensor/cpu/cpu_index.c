/* The CPU's indexing kernels (tensor/index_internal.h): gather, scatter-add,
 * triangles and top-k over strided operands.
 *
 * Gather and scatter-add check every index before writing anything, so a bad
 * index fails the call with TC_ERROR_INVALID_ARGUMENT and leaves the output
 * (for scatter_add_, the user's tensor) untouched. Elements are moved as
 * bytes; scatter-add adds in the element's own type as PyTorch's CPU kernel
 * does (16-bit floats through float, integers wrapping, bool as logical or).
 * top-k sorts each slice with (value, index) keys, so ties are broken by the
 * lower index and the result does not depend on the sort's stability. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/index_internal.h"
#include "base/half.h"

/* An odometer over an iter: element pointers of every operand, and the
 * index of each dimension (tri needs the row and column). The multiply per
 * step is deliberate: see the note on walk_next in cpu_ops.c. */
typedef struct walk {
    const tc__iter *it;
    int64_t idx[TC_MAX_DIMS];
    char *p[3];
    int64_t esize[3];
} walk;

static void walk_init(walk *w, const tc__iter *it, size_t e0, size_t e1, size_t e2)
{
    memset(w, 0, sizeof *w);
    w->it = it;
    size_t es[3] = {e0, e1, e2};
    for (int i = 0; i < it->nops; i++) {
        w->p[i] = it->data[i];
        w->esize[i] = (int64_t)es[i];
    }
}

static void walk_next(walk *w)
{
    const tc__iter *it = w->it;
    for (int d = it->ndim - 1; d >= 0; d--) {
        for (int i = 0; i < it->nops; i++)
            w->p[i] += it->strides[i][d] * w->esize[i];
        if (++w->idx[d] < it->sizes[d])
            return;
        for (int i = 0; i < it->nops; i++)
            w->p[i] -= it->strides[i][d] * it->sizes[d] * w->esize[i];
        w->idx[d] = 0;
    }
}

static int64_t load_index(const void *p, tc_dtype dt)
{
    if (dt == TC_INT32) {
        int32_t v;
        memcpy(&v, p, sizeof v);
        return v;
    }
    int64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Every index (operand 2) in [0, dim_size), else TC_ERROR_INVALID_ARGUMENT. */
static tc_status check_indices(const tc__iter *it, tc_dtype idt, int64_t dim_size)
{
    walk w;
    walk_init(&w, it, 0, 0, tc_dtype_size(idt));
    for (int64_t n = 0; n < it->numel; n++, walk_next(&w)) {
        int64_t v = load_index(w.p[2], idt);
        if (v < 0 || v >= dim_size)
            return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                            "index %lld is out of bounds for dimension with size %lld",
                            (long long)v, (long long)dim_size);
    }
    return TC_OK;
}

static tc_status cpu_gather(int device, tc_dtype dt, tc_dtype idt, const tc__iter *it,
                            int64_t dim_stride, int64_t dim_size)
{
    (void)device;
    TC_TRY(check_indices(it, idt, dim_size));
    size_t es = tc_dtype_size(dt);
    walk w;
    walk_init(&w, it, es, es, tc_dtype_size(idt));
    for (int64_t n = 0; n < it->numel; n++, walk_next(&w)) {
        int64_t v = load_index(w.p[2], idt);
        memcpy(w.p[0], w.p[1] + v * dim_stride * (int64_t)es, es);
    }
    return TC_OK;
}

/* *dst += *src in dtype dt (integers wrap, bool is or). */
static void add_to(char *dst, const char *src, tc_dtype dt)
{
#define ADD_WRAP(T, U)                                                                             \
    do {                                                                                           \
        T a, b;                                                                                    \
        memcpy(&a, dst, sizeof a);                                                                 \
        memcpy(&b, src, sizeof b);                                                                 \
        a = (T)(U)((U)a + (U)b);                                                                   \
        memcpy(dst, &a, sizeof a);                                                                 \
    } while (0)
    switch (dt) {
    case TC_BOOL: *(uint8_t *)dst = *(uint8_t *)dst || *(const uint8_t *)src; break;
    case TC_UINT8: ADD_WRAP(uint8_t, uint32_t); break;
    case TC_INT8: ADD_WRAP(int8_t, uint32_t); break;
    case TC_INT16: ADD_WRAP(int16_t, uint32_t); break;
    case TC_INT32: ADD_WRAP(int32_t, uint32_t); break;
    case TC_INT64: ADD_WRAP(int64_t, uint64_t); break;
    case TC_FLOAT32: ADD_WRAP(float, float); break;
    case TC_FLOAT64: ADD_WRAP(double, double); break;
    default: {
        uint16_t a, b;
        memcpy(&a, dst, sizeof a);
        memcpy(&b, src, sizeof b);
        if (dt == TC_FLOAT16)
            a = tc__f32_to_f16(tc__f16_to_f32(a) + tc__f16_to_f32(b));
        else
            a = tc__f32_to_bf16(tc__bf16_to_f32(a) + tc__bf16_to_f32(b));
        memcpy(dst, &a, sizeof a);
    }
    }
#undef ADD_WRAP
}

static tc_status cpu_scatter_add(int device, tc_dtype dt, const tc__iter *it, int64_t dim_stride,
                                 int64_t dim_size)
{
    (void)device;
    TC_TRY(check_indices(it, TC_INT64, dim_size));
    size_t es = tc_dtype_size(dt);
    walk w;
    walk_init(&w, it, es, es, sizeof(int64_t));
    for (int64_t n = 0; n < it->numel; n++, walk_next(&w)) {
        int64_t v = load_index(w.p[2], TC_INT64);
        add_to(w.p[0] + v * dim_stride * (int64_t)es, w.p[1], dt);
    }
    return TC_OK;
}

static tc_status cpu_tri(int device, tc_dtype dt, bool upper, int64_t diagonal, const tc__iter *it)
{
    (void)device;
    size_t es = tc_dtype_size(dt);
    walk w;
    walk_init(&w, it, es, es, 0);
    int rd = it->ndim - 2, cd = it->ndim - 1;
    for (int64_t n = 0; n < it->numel; n++, walk_next(&w)) {
        /* col - row cannot overflow: both are sizes */
        int64_t off = w.idx[cd] - w.idx[rd];
        bool keep = upper ? off >= diagonal : off <= diagonal;
        if (keep)
            memcpy(w.p[0], w.p[1], es);
        else
            memset(w.p[0], 0, es); /* zero is all-zero bits in every dtype */
    }
    return TC_OK;
}

/* ---- top-k ----------------------------------------------------------------------- */

typedef struct key {
    double f;    /* floating dtypes (every 16- and 32-bit value is exact) */
    int64_t i;   /* integer dtypes */
    int64_t idx; /* position along the slice */
} key;

/* NaN is above every number; equal values order by lower index. */
static int cmp_f(const key *a, const key *b, int sign)
{
    bool an = isnan(a->f), bn = isnan(b->f);
    if (an != bn)
        return an ? sign : -sign;
    if (!an && a->f != b->f)
        return a->f < b->f ? -sign : sign;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}
static int cmp_i(const key *a, const key *b, int sign)
{
    if (a->i != b->i)
        return a->i < b->i ? -sign : sign;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}
/* qsort comparators: best first (largest: descending, sign -1). */
static int f_desc(const void *a, const void *b) { return cmp_f(a, b, -1); }
static int f_asc(const void *a, const void *b) { return cmp_f(a, b, 1); }
static int i_desc(const void *a, const void *b) { return cmp_i(a, b, -1); }
static int i_asc(const void *a, const void *b) { return cmp_i(a, b, 1); }

static void load_key(const char *p, tc_dtype dt, key *k)
{
    switch (dt) {
    case TC_UINT8: k->i = *(const uint8_t *)p; break;
    case TC_INT8: k->i = *(const int8_t *)p; break;
    case TC_INT16: {
        int16_t v;
        memcpy(&v, p, sizeof v);
        k->i = v;
    } break;
    case TC_INT32: {
        int32_t v;
        memcpy(&v, p, sizeof v);
        k->i = v;
    } break;
    case TC_INT64: memcpy(&k->i, p, sizeof k->i); break;
    case TC_FLOAT16:
    case TC_BFLOAT16: {
        uint16_t h;
        memcpy(&h, p, sizeof h);
        k->f = dt == TC_FLOAT16 ? tc__f16_to_f32(h) : tc__bf16_to_f32(h);
    } break;
    case TC_FLOAT32: {
        float v;
        memcpy(&v, p, sizeof v);
        k->f = v;
    } break;
    default: memcpy(&k->f, p, sizeof k->f); break;
    }
}

static tc_status cpu_topk(int device, tc_dtype dt, const void *in, void *values, int64_t *indices,
                          int64_t outer, int64_t r, int64_t inner, int64_t k, bool largest)
{
    (void)device;
    key *keys = malloc(sizeof *keys * (size_t)r);
    if (!keys)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "no memory to sort %lld values", (long long)r);
    int64_t es = (int64_t)tc_dtype_size(dt);
    bool fl = tc_dtype_is_floating(dt);
    int (*cmp)(const void *, const void *) = fl ? (largest ? f_desc : f_asc)
                                                : (largest ? i_desc : i_asc);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t c = 0; c < inner; c++) {
            const char *base = (const char *)in + (o * r * inner + c) * es;
            for (int64_t j = 0; j < r; j++) {
                keys[j] = (key){0, 0, j};
                load_key(base + j * inner * es, dt, &keys[j]);
            }
            qsort(keys, (size_t)r, sizeof *keys, cmp);
            for (int64_t j = 0; j < k; j++) {
                int64_t at = o * k * inner + j * inner + c;
                memcpy((char *)values + at * es, base + keys[j].idx * inner * es, (size_t)es);
                indices[at] = keys[j].idx;
            }
        }
    free(keys);
    return TC_OK;
}

const tc__index_backend tc__cpu_index_backend = {
    .gather = cpu_gather,
    .scatter_add = cpu_scatter_add,
    .tri = cpu_tri,
    .topk = cpu_topk,
};
