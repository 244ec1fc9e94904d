/* Parsing and checking a safetensors header (safetensors_internal.h).
 *
 * The rules, all checked before anything is handed out: the header length
 * lies within the file (and under 100 MB, as the reference implementation
 * says); the header is JSON that starts with '{' and has nothing but
 * whitespace after its object; keys are unique; every tensor has exactly
 * dtype, shape and data_offsets, a known dtype, at most TC_MAX_DIMS sizes,
 * begin <= end, and as many bytes as its shape and dtype need; every
 * shape one a tcuda tensor can have (tc__check_shape, the check of every
 * factory: a header may only promise what tc_safetensors_get can make);
 * sorted by offset, the tensors cover the data buffer exactly, without overlap or
 * hole; __metadata__ maps strings to strings. The grammar is walked by hand
 * (json.h), so its depth is fixed at three. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "safetensors_internal.h"
#include "tensor/tensor_internal.h"

static const struct {
    const char *name;
    tc_dtype dtype;
} dtypes[] = {{"BOOL", TC_BOOL},   {"U8", TC_UINT8},   {"I8", TC_INT8},     {"I16", TC_INT16},
              {"I32", TC_INT32},   {"I64", TC_INT64},  {"F16", TC_FLOAT16}, {"BF16", TC_BFLOAT16},
              {"F32", TC_FLOAT32}, {"F64", TC_FLOAT64}};

const char *tc__st_dtype_name(tc_dtype dtype)
{
    for (size_t i = 0; i < sizeof dtypes / sizeof *dtypes; i++)
        if (dtypes[i].dtype == dtype)
            return dtypes[i].name;
    return "?";
}

void tc__st_header_free(tc__st_header *h)
{
    for (size_t i = 0; i < h->n; i++)
        free(h->entries[i].name);
    for (size_t i = 0; i < 2 * h->n_meta; i++)
        free(h->meta[i]);
    free(h->entries);
    free(h->by_name);
    free(h->meta);
    memset(h, 0, sizeof *h);
}

/* ---- the JSON walk ------------------------------------------------------------ */

typedef struct parser {
    tc__json j;
    tc__st_header h;
    size_t cap, meta_cap;
    bool seen_meta;
} parser;

static tc_status grow(void *arrayp, size_t *cap, size_t need, size_t esize)
{
    if (need <= *cap)
        return TC_OK;
    size_t n = *cap ? 2 * *cap : 16;
    void *p = realloc(*(void **)arrayp, n * esize);
    if (!p)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory reading the header");
    *(void **)arrayp = p;
    *cap = n;
    return TC_OK;
}

static tc_status parse_dtype(parser *ps, tc__st_entry *e)
{
    char *s;
    TC_TRY(tc__json_string(&ps->j, &s));
    for (size_t i = 0; i < sizeof dtypes / sizeof *dtypes; i++)
        if (!strcmp(s, dtypes[i].name)) {
            e->dtype = dtypes[i].dtype;
            free(s);
            return TC_OK;
        }
    tc_status st = tc__fail(TC_ERROR_DTYPE,
                            "%s: tensor '%s' has dtype '%.40s', which tcuda does not have "
                            "(it reads F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL)",
                            ps->j.what, e->name, s);
    free(s);
    return st;
}

static tc_status parse_shape(parser *ps, tc__st_entry *e)
{
    TC_TRY(tc__json_expect(&ps->j, '[', "to start a shape"));
    if (tc__json_accept(&ps->j, ']'))
        return TC_OK;
    do {
        uint64_t v;
        TC_TRY(tc__json_uint(&ps->j, &v));
        if (e->ndim == TC_MAX_DIMS)
            return tc__fail(TC_ERROR_NOT_SUPPORTED,
                            "%s: tensor '%s' has more than %d dimensions, the most tcuda "
                            "tensors have",
                            ps->j.what, e->name, TC_MAX_DIMS);
        if (v > INT64_MAX)
            return tc__json_fail(&ps->j, "tensor '%s': size %llu is too large", e->name,
                                 (unsigned long long)v);
        e->sizes[e->ndim++] = (int64_t)v;
    } while (tc__json_accept(&ps->j, ','));
    return tc__json_expect(&ps->j, ']', "after the shape's sizes");
}

static tc_status parse_offsets(parser *ps, tc__st_entry *e)
{
    TC_TRY(tc__json_expect(&ps->j, '[', "to start data_offsets"));
    TC_TRY(tc__json_uint(&ps->j, &e->begin));
    TC_TRY(tc__json_expect(&ps->j, ',', "between the two data_offsets"));
    TC_TRY(tc__json_uint(&ps->j, &e->end));
    TC_TRY(tc__json_expect(&ps->j, ']', "after the two data_offsets"));
    if (e->begin > e->end)
        return tc__json_fail(&ps->j,
                             "tensor '%s': data_offsets [%llu, %llu] end before they "
                             "begin",
                             e->name, (unsigned long long)e->begin, (unsigned long long)e->end);
    return TC_OK;
}

/* {"dtype": ..., "shape": [...], "data_offsets": [b, e]}, each once. */
static tc_status parse_tensor(parser *ps, tc__st_entry *e)
{
    TC_TRY(tc__json_expect(&ps->j, '{', "to start a tensor's entry"));
    bool have[3] = {false, false, false};
    static const char *const keys[3] = {"dtype", "shape", "data_offsets"};
    if (!tc__json_accept(&ps->j, '}'))
        do {
            char *k;
            TC_TRY(tc__json_string(&ps->j, &k));
            int which = -1;
            for (int i = 0; i < 3; i++)
                if (!strcmp(k, keys[i]))
                    which = i;
            tc_status st = TC_OK;
            if (which < 0)
                st = tc__json_fail(&ps->j,
                                   "tensor '%s' has key '%.40s'; a tensor has only "
                                   "dtype, shape and data_offsets",
                                   e->name, k);
            else if (have[which])
                st = tc__json_fail(&ps->j, "tensor '%s' has '%s' twice", e->name, k);
            free(k);
            TC_TRY(st);
            have[which] = true;
            TC_TRY(tc__json_expect(&ps->j, ':', "after a key"));
            TC_TRY(which == 0   ? parse_dtype(ps, e)
                   : which == 1 ? parse_shape(ps, e)
                                : parse_offsets(ps, e));
        } while (tc__json_accept(&ps->j, ','));
    TC_TRY(tc__json_expect(&ps->j, '}', "to end a tensor's entry"));
    for (int i = 0; i < 3; i++)
        if (!have[i])
            return tc__json_fail(&ps->j, "tensor '%s' has no '%s'", e->name, keys[i]);
    return TC_OK;
}

static tc_status parse_metadata(parser *ps)
{
    if (ps->seen_meta)
        return tc__json_fail(&ps->j, "'__metadata__' appears twice");
    ps->seen_meta = true;
    TC_TRY(tc__json_expect(&ps->j, '{', "to start __metadata__ (a map of strings)"));
    if (tc__json_accept(&ps->j, '}'))
        return TC_OK;
    do {
        TC_TRY(grow(&ps->h.meta, &ps->meta_cap, 2 * ps->h.n_meta + 2, sizeof(char *)));
        char **kv = ps->h.meta + 2 * ps->h.n_meta;
        TC_TRY(tc__json_string(&ps->j, &kv[0]));
        tc_status st = tc__json_expect(&ps->j, ':', "after a metadata key");
        if (st == TC_OK) {
            tc__json_ws(&ps->j);
            st = ps->j.p < ps->j.end && *ps->j.p == '"'
                     ? tc__json_string(&ps->j, &kv[1])
                     : tc__json_fail(&ps->j,
                                     "metadata '%.40s' is not a string; __metadata__ "
                                     "maps strings to strings",
                                     kv[0]);
        }
        if (st != TC_OK) {
            free(kv[0]);
            return st;
        }
        ps->h.n_meta++;
    } while (tc__json_accept(&ps->j, ','));
    return tc__json_expect(&ps->j, '}', "to end __metadata__");
}

static tc_status parse_object(parser *ps)
{
    if (ps->j.p == ps->j.end || *ps->j.p != '{')
        return tc__json_fail(&ps->j, "the header does not start with '{'");
    ps->j.p++;
    if (!tc__json_accept(&ps->j, '}')) {
        do {
            char *name;
            TC_TRY(tc__json_string(&ps->j, &name));
            tc_status st = tc__json_expect(&ps->j, ':', "after a tensor's name");
            if (st == TC_OK && !strcmp(name, "__metadata__")) {
                free(name);
                TC_TRY(parse_metadata(ps));
                continue;
            }
            if (st == TC_OK)
                st = grow(&ps->h.entries, &ps->cap, ps->h.n + 1, sizeof(tc__st_entry));
            if (st != TC_OK) {
                free(name);
                return st;
            }
            tc__st_entry *e = &ps->h.entries[ps->h.n++];
            memset(e, 0, sizeof *e);
            e->name = name; /* owned by the header from here */
            TC_TRY(parse_tensor(ps, e));
        } while (tc__json_accept(&ps->j, ','));
        TC_TRY(tc__json_expect(&ps->j, '}', "or ',' after a tensor's entry"));
    }
    tc__json_ws(&ps->j);
    if (ps->j.p != ps->j.end)
        return tc__json_fail(&ps->j, "only whitespace may follow the header's object");
    return TC_OK;
}

/* ---- the checks ---------------------------------------------------------------- */

static tc_status check_bytes(const char *what, const tc__st_entry *e)
{
    uint64_t n = tc_dtype_size(e->dtype);
    for (int i = 0; i < e->ndim; i++)
        if (__builtin_mul_overflow(n, (uint64_t)e->sizes[i], &n))
            return tc__fail(TC_ERROR_IO, "%s: tensor '%s': its shape holds more than 2^64 bytes",
                            what, e->name);
    if (n > INT64_MAX)
        return tc__fail(TC_ERROR_IO, "%s: tensor '%s': its shape holds more than 2^63 bytes", what,
                        e->name);
    if (n != e->end - e->begin)
        return tc__fail(TC_ERROR_IO,
                        "%s: tensor '%s': data_offsets [%llu, %llu] hold %llu bytes, but its "
                        "shape of %d dimensions and dtype %s need %llu",
                        what, e->name, (unsigned long long)e->begin, (unsigned long long)e->end,
                        (unsigned long long)(e->end - e->begin), e->ndim,
                        tc__st_dtype_name(e->dtype), (unsigned long long)n);
    return TC_OK;
}

/* The shape passes the check every tensor factory makes. Its bytes fit
 * (check_bytes), so only the extent can fail: sizes whose product, a 0
 * counted as 1, passes 2^63 ([0, 2^32, 2^32] holds no bytes, but its
 * contiguous strides would overflow). */
static tc_status check_tensor_shape(const char *what, const tc__st_entry *e)
{
    int64_t numel;
    tc_status st = tc__check_shape(e->ndim, e->sizes, tc_dtype_size(e->dtype), &numel);
    if (st == TC_OK) /* else its message is replaced by one that names the file */
        return TC_OK;
    char shape[TC_MAX_DIMS * 22 + 3] = "[";
    size_t at = 1;
    for (int i = 0; i < e->ndim; i++)
        at += (size_t)snprintf(shape + at, sizeof shape - at, i ? ", %lld" : "%lld",
                               (long long)e->sizes[i]);
    snprintf(shape + at, sizeof shape - at, "]");
    return tc__fail(st,
                    "%s: tensor '%s': shape %s: its sizes multiply past 2^63 (a 0 counted "
                    "as 1), so no tcuda tensor can have it (tc_tensor_empty refuses it too)",
                    what, e->name, shape);
}

static int by_offsets(const void *a, const void *b)
{
    const tc__st_entry *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* Sorted by offset, each tensor starts where the one before ends. */
static tc_status check_layout(const char *what, tc__st_header *h)
{
    if (h->n > 1) /* qsort takes no NULL, even for no elements */
        qsort(h->entries, h->n, sizeof *h->entries, by_offsets);
    uint64_t at = 0;
    for (size_t i = 0; i < h->n; i++) {
        const tc__st_entry *e = &h->entries[i];
        if (e->begin < at)
            return tc__fail(TC_ERROR_IO,
                            "%s: tensors '%s' and '%s' overlap: data_offsets [%llu, %llu] and "
                            "[%llu, %llu]",
                            what, h->entries[i - 1].name, e->name,
                            (unsigned long long)h->entries[i - 1].begin,
                            (unsigned long long)h->entries[i - 1].end, (unsigned long long)e->begin,
                            (unsigned long long)e->end);
        if (e->begin > at)
            return tc__fail(TC_ERROR_IO,
                            "%s: bytes [%llu, %llu) of the data buffer belong to no tensor (the "
                            "format allows no holes)",
                            what, (unsigned long long)at, (unsigned long long)e->begin);
        at = e->end;
    }
    if (at != h->data_size)
        return tc__fail(TC_ERROR_IO,
                        at > h->data_size
                            ? "%s: the tensors need %llu bytes of data, but the file holds %llu "
                              "after its header"
                            : "%s: the tensors cover %llu bytes of data, but the file holds %llu "
                              "after its header (the format allows no holes)",
                        what, (unsigned long long)at, (unsigned long long)h->data_size);
    return TC_OK;
}

typedef struct named {
    const char *name;
    size_t index;
} named;

static int by_name(const void *a, const void *b)
{
    return strcmp(((const named *)a)->name, ((const named *)b)->name);
}

/* (Re)builds h->by_name for the entries' current order; refuses a name that
 * appears twice. */
static tc_status index_names(const char *what, tc__st_header *h)
{
    size_t n = h->n ? h->n : 1;
    size_t *idx = malloc(n * sizeof *idx);
    named *tmp = malloc(n * sizeof *tmp);
    if (!idx || !tmp) {
        free(idx);
        free(tmp);
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory reading the header");
    }
    for (size_t i = 0; i < h->n; i++)
        tmp[i] = (named){h->entries[i].name, i};
    qsort(tmp, h->n, sizeof *tmp, by_name);
    for (size_t i = 0; i < h->n; i++)
        idx[i] = tmp[i].index;
    for (size_t i = 1; i < h->n; i++)
        if (!strcmp(tmp[i - 1].name, tmp[i].name)) {
            tc_status st = tc__fail(TC_ERROR_IO, "%s: tensor name '%s' appears twice", what,
                                    tmp[i].name);
            free(idx);
            free(tmp);
            return st;
        }
    free(tmp);
    free(h->by_name);
    h->by_name = idx;
    return TC_OK;
}

static int by_key(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static tc_status check_meta(const char *what, tc__st_header *h)
{
    /* Pairs sort as one unit of two pointers: the key is the first. */
    typedef struct {
        char *kv[2];
    } pair;
    if (h->n_meta > 1)
        qsort(h->meta, h->n_meta, sizeof(pair), by_key);
    for (size_t i = 1; i < h->n_meta; i++)
        if (!strcmp(h->meta[2 * i - 2], h->meta[2 * i]))
            return tc__fail(TC_ERROR_IO, "%s: metadata key '%s' appears twice", what,
                            h->meta[2 * i]);
    return TC_OK;
}

tc_status tc__st_parse(const void *file, size_t size, const char *what, tc__st_header *out)
{
    const unsigned char *b = file;
    if (size < 8)
        return tc__fail(TC_ERROR_IO,
                        "%s: the file has %zu bytes, fewer than the 8 of the header length", what,
                        size);
    uint64_t n = 0;
    for (int i = 0; i < 8; i++)
        n |= (uint64_t)b[i] << (8 * i);
    if (n > size - 8)
        return tc__fail(TC_ERROR_IO,
                        "%s: the header length is %llu bytes, but only %zu follow it in the file",
                        what, (unsigned long long)n, size - 8);
    if (n > TC_SAFETENSORS_MAX_HEADER)
        return tc__fail(TC_ERROR_IO, "%s: the header length %llu is above the limit of %u bytes",
                        what, (unsigned long long)n, TC_SAFETENSORS_MAX_HEADER);
    parser ps = {.j = {(const char *)b + 8, (const char *)b + 8, (const char *)b + 8 + n, what}};
    ps.h.data_start = 8 + n;
    ps.h.data_size = size - 8 - n;
    tc_status st = parse_object(&ps);
    for (size_t i = 0; i < ps.h.n && st == TC_OK; i++) {
        st = check_bytes(what, &ps.h.entries[i]);
        if (st == TC_OK)
            st = check_tensor_shape(what, &ps.h.entries[i]);
    }
    if (st == TC_OK) /* names first: a name given twice is reported as such */
        st = index_names(what, &ps.h);
    if (st == TC_OK)
        st = check_layout(what, &ps.h);
    if (st == TC_OK) /* check_layout reordered the entries */
        st = index_names(what, &ps.h);
    if (st == TC_OK)
        st = check_meta(what, &ps.h);
    if (st != TC_OK) {
        tc__st_header_free(&ps.h);
        return st;
    }
    *out = ps.h;
    return TC_OK;
}

const tc__st_entry *tc__st_find(const tc__st_header *h, const char *name)
{
    size_t lo = 0, hi = h->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const tc__st_entry *e = &h->entries[h->by_name[mid]];
        int c = strcmp(name, e->name);
        if (!c)
            return e;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

const char *tc__st_meta_find(const tc__st_header *h, const char *key)
{
    size_t lo = 0, hi = h->n_meta;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(key, h->meta[2 * mid]);
        if (!c)
            return h->meta[2 * mid + 1];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}
