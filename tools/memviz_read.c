/* `tcuda memviz`'s reader: a memory snapshot (the pickle that
 * tc_memory_dump_snapshot or torch.cuda.memory._dump_snapshot writes, or the
 * JSON of tc_memory_dump_snapshot_json) into a tree of values.
 *
 * The pickle reader takes the opcodes of protocols 2 to 4 that a dict of
 * lists, dicts, strings, numbers, booleans and None uses (with the memo,
 * frames and tuples), and refuses anything else (a class, a reduce) with
 * the opcode's name: it never runs code. mv_free_all frees every value
 * read. */
#include "memviz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every value made, for mv_free_all (the memo shares values, so the tree is
 * not freed by walking it). */
static mv_val **all;
static size_t nall, cap_all;

static mv_val *new_val(mv_kind k)
{
    mv_val *v = mv_xrealloc(NULL, sizeof *v);
    memset(v, 0, sizeof *v);
    if (nall == cap_all) {
        cap_all = cap_all ? cap_all * 2 : 1024;
        all = mv_xrealloc(all, cap_all * sizeof *all);
    }
    all[nall++] = v;
    v->k = k;
    return v;
}

void mv_free_all(void)
{
    for (size_t i = 0; i < nall; i++) {
        free(all[i]->items);
        free(all[i]->s);
        free(all[i]);
    }
    free(all);
    all = NULL;
    nall = cap_all = 0;
}

static void push_item(mv_val *c, mv_val *x)
{
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 8;
        c->items = mv_xrealloc(c->items, c->cap * sizeof *c->items);
    }
    c->items[c->n++] = x;
}

const mv_val *mv_get(const mv_val *d, const char *key)
{
    if (!d || d->k != MV_DICT)
        return NULL;
    for (size_t i = 0; i + 1 < d->n; i += 2)
        if (d->items[i]->k == MV_STR && strcmp(d->items[i]->s, key) == 0)
            return d->items[i + 1];
    return NULL;
}

int64_t mv_int(const mv_val *v)
{
    if (!v)
        return 0;
    if (v->k == MV_FLOAT)
        return (int64_t)v->f;
    return v->k == MV_INT || v->k == MV_BOOL ? v->i : 0;
}

const char *mv_str(const mv_val *v) { return v && v->k == MV_STR ? v->s : ""; }

/* ---- pickle ----------------------------------------------------------------------- */

typedef struct rd {
    const unsigned char *p, *end;
    mv_val **st;
    size_t nst, cap_st;
    size_t *marks;
    size_t nmarks, cap_marks;
    mv_val **memo;
    size_t cap_memo, next_memo; /* MEMOIZE's next index: one past the highest set */
    char err[128];
} rd;

static void st_push(rd *r, mv_val *v)
{
    if (r->nst == r->cap_st) {
        r->cap_st = r->cap_st ? r->cap_st * 2 : 64;
        r->st = mv_xrealloc(r->st, r->cap_st * sizeof *r->st);
    }
    r->st[r->nst++] = v;
}

static bool need(rd *r, size_t n)
{
    if ((size_t)(r->end - r->p) < n) {
        snprintf(r->err, sizeof r->err, "the pickle ends early");
        return false;
    }
    return true;
}

static uint64_t le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void memo_put(rd *r, size_t i, mv_val *v)
{
    if (i >= r->cap_memo) {
        size_t nc = r->cap_memo ? r->cap_memo : 64;
        while (nc <= i)
            nc *= 2;
        r->memo = mv_xrealloc(r->memo, nc * sizeof *r->memo);
        memset(r->memo + r->cap_memo, 0, (nc - r->cap_memo) * sizeof *r->memo);
        r->cap_memo = nc;
    }
    r->memo[i] = v;
    if (i >= r->next_memo)
        r->next_memo = i + 1;
}

static mv_val *str_val(const unsigned char *p, size_t n)
{
    mv_val *v = new_val(MV_STR);
    v->s = mv_xrealloc(NULL, n + 1);
    memcpy(v->s, p, n);
    v->s[n] = 0;
    return v;
}

/* Pops the items above the last mark. */
static bool pop_mark(rd *r, size_t *from)
{
    if (!r->nmarks) {
        snprintf(r->err, sizeof r->err, "no mark on the stack");
        return false;
    }
    *from = r->marks[--r->nmarks];
    return true;
}

static mv_val *tuple_of(rd *r, size_t from)
{
    mv_val *t = new_val(MV_LIST);
    for (size_t i = from; i < r->nst; i++)
        push_item(t, r->st[i]);
    r->nst = from;
    return t;
}

static bool op(rd *r, unsigned char c)
{
    size_t from;
    mv_val *v;
    switch (c) {
    case 0x80: /* PROTO */ return need(r, 1) && (r->p++, true);
    case 0x95: /* FRAME */ return need(r, 8) && (r->p += 8, true);
    case '}': st_push(r, new_val(MV_DICT)); return true;
    case ']': st_push(r, new_val(MV_LIST)); return true;
    case ')': st_push(r, new_val(MV_LIST)); return true;
    case '(':
        if (r->nmarks == r->cap_marks) {
            r->cap_marks = r->cap_marks ? r->cap_marks * 2 : 16;
            r->marks = mv_xrealloc(r->marks, r->cap_marks * sizeof *r->marks);
        }
        r->marks[r->nmarks++] = r->nst;
        return true;
    case 'u': /* SETITEMS */
    case 'e': /* APPENDS */
        if (!pop_mark(r, &from) || from == 0)
            return false;
        for (size_t i = from; i < r->nst; i++)
            push_item(r->st[from - 1], r->st[i]);
        r->nst = from;
        return true;
    case 's': /* SETITEM */
        if (r->nst < 3)
            return false;
        push_item(r->st[r->nst - 3], r->st[r->nst - 2]);
        push_item(r->st[r->nst - 3], r->st[r->nst - 1]);
        r->nst -= 2;
        return true;
    case 'a': /* APPEND */
        if (r->nst < 2)
            return false;
        push_item(r->st[r->nst - 2], r->st[r->nst - 1]);
        r->nst -= 1;
        return true;
    case 't': /* TUPLE */
        if (!pop_mark(r, &from))
            return false;
        st_push(r, tuple_of(r, from));
        return true;
    case 0x85: /* TUPLE1 .. TUPLE3 */
    case 0x86:
    case 0x87:
        if (r->nst < (size_t)(c - 0x84))
            return false;
        st_push(r, tuple_of(r, r->nst - (size_t)(c - 0x84)));
        return true;
    case 'X':  /* BINUNICODE */
    case 0x8c: /* SHORT_BINUNICODE */
    case 0x8d: /* BINUNICODE8 */ {
        int w = c == 'X' ? 4 : c == 0x8c ? 1 : 8;
        if (!need(r, (size_t)w))
            return false;
        uint64_t n = le(r->p, w);
        r->p += w;
        if (!need(r, n))
            return false;
        st_push(r, str_val(r->p, n));
        r->p += n;
        return true;
    }
    case 'J': /* BININT */
    case 'K': /* BININT1 */
    case 'M': /* BININT2 */ {
        int w = c == 'J' ? 4 : c == 'K' ? 1 : 2;
        if (!need(r, (size_t)w))
            return false;
        v = new_val(MV_INT);
        v->i = c == 'J' ? (int64_t)(int32_t)(uint32_t)le(r->p, 4) : (int64_t)le(r->p, w);
        r->p += w;
        st_push(r, v);
        return true;
    }
    case 0x8a: /* LONG1 */ {
        if (!need(r, 1) || !need(r, 1 + (size_t)r->p[0]))
            return false;
        int n = r->p[0];
        v = new_val(MV_INT);
        uint64_t u = le(r->p + 1, n > 8 ? 8 : n);
        if (n > 0 && n < 8 && (r->p[n] & 0x80))
            u |= ~0ull << (8 * n); /* negative */
        v->i = (int64_t)u;
        r->p += 1 + n;
        st_push(r, v);
        return true;
    }
    case 'G': /* BINFLOAT */ {
        if (!need(r, 8))
            return false;
        uint64_t bits = 0;
        for (int i = 0; i < 8; i++)
            bits = bits << 8 | r->p[i];
        v = new_val(MV_FLOAT);
        memcpy(&v->f, &bits, sizeof v->f);
        r->p += 8;
        st_push(r, v);
        return true;
    }
    case 'N': st_push(r, new_val(MV_NONE)); return true;
    case 0x88:
    case 0x89:
        v = new_val(MV_BOOL);
        v->i = c == 0x88;
        st_push(r, v);
        return true;
    case 'q': /* BINPUT */
    case 'r': /* LONG_BINPUT */
    case 'h': /* BINGET */
    case 'j': /* LONG_BINGET */ {
        int w = c == 'q' || c == 'h' ? 1 : 4;
        if (!need(r, (size_t)w))
            return false;
        size_t i = (size_t)le(r->p, w);
        r->p += w;
        if (c == 'q' || c == 'r') {
            if (!r->nst)
                return false;
            memo_put(r, i, r->st[r->nst - 1]);
        } else {
            if (i >= r->cap_memo || !r->memo[i])
                return false;
            st_push(r, r->memo[i]);
        }
        return true;
    }
    case 0x94: /* MEMOIZE */
        if (!r->nst)
            return false;
        memo_put(r, r->next_memo, r->st[r->nst - 1]);
        return true;
    default:
        snprintf(r->err, sizeof r->err, "pickle opcode 0x%02x is not one of plain data", c);
        return false;
    }
}

static mv_val *read_pickle(const unsigned char *p, size_t n, char *err, size_t errn)
{
    rd r;
    memset(&r, 0, sizeof r);
    r.p = p;
    r.end = p + n;
    mv_val *v = NULL;
    while (r.p < r.end) {
        unsigned char c = *r.p++;
        if (c == '.') {
            if (r.nst == 1)
                v = r.st[0];
            break;
        }
        if (!op(&r, c)) {
            snprintf(err, errn, "%s (at byte %zu)", r.err[0] ? r.err : "malformed pickle",
                     (size_t)(r.p - p - 1));
            break;
        }
    }
    if (!v && !err[0])
        snprintf(err, errn, "%s", r.err[0] ? r.err : "the pickle does not end with one value");
    free(r.st);
    free(r.marks);
    free(r.memo);
    return v;
}

/* ---- JSON ---------------------------------------------------------------------- */

typedef struct jr {
    const char *p, *end;
    bool bad;
} jr;

static void ws(jr *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\n' || *j->p == '\r' || *j->p == '\t'))
        j->p++;
}

static mv_val *json_val(jr *j, int depth);

static mv_val *json_str(jr *j)
{
    j->p++; /* the quote */
    size_t cap = 16, n = 0;
    char *s = mv_xrealloc(NULL, cap);
    while (j->p < j->end && *j->p != '"') {
        char c = *j->p++;
        if (c == '\\' && j->p < j->end) {
            char e = *j->p++;
            c = e == 'n'   ? '\n'
                : e == 't' ? '\t'
                : e == 'r' ? '\r'
                : e == 'b' ? '\b'
                : e == 'f' ? '\f'
                           : e;
            if (e == 'u' && j->end - j->p >= 4) {
                unsigned u = (unsigned)strtoul((char[5]){j->p[0], j->p[1], j->p[2], j->p[3], 0},
                                               NULL, 16);
                j->p += 4;
                c = u < 0x80 ? (char)u : '?';
            }
        }
        if (n + 2 > cap)
            s = mv_xrealloc(s, cap *= 2);
        s[n++] = c;
    }
    if (j->p >= j->end)
        j->bad = true;
    j->p++;
    s[n] = 0;
    mv_val *v = new_val(MV_STR);
    v->s = s;
    return v;
}

static mv_val *json_val(jr *j, int depth)
{
    ws(j);
    if (j->p >= j->end || depth > 64) {
        j->bad = true;
        return new_val(MV_NONE);
    }
    char c = *j->p;
    if (c == '{' || c == '[') {
        mv_val *v = new_val(c == '{' ? MV_DICT : MV_LIST);
        j->p++;
        ws(j);
        if (j->p < j->end && *j->p == (c == '{' ? '}' : ']')) {
            j->p++;
            return v;
        }
        while (!j->bad) {
            if (c == '{') {
                ws(j);
                if (j->p >= j->end || *j->p != '"') {
                    j->bad = true;
                    break;
                }
                push_item(v, json_str(j));
                ws(j);
                if (j->p >= j->end || *j->p++ != ':')
                    j->bad = true;
            }
            push_item(v, json_val(j, depth + 1));
            ws(j);
            if (j->p < j->end && *j->p == ',') {
                j->p++;
                continue;
            }
            if (j->p < j->end && *j->p == (c == '{' ? '}' : ']'))
                j->p++;
            else
                j->bad = true;
            break;
        }
        return v;
    }
    if (c == '"')
        return json_str(j);
    if (strncmp(j->p, "true", 4) == 0 || strncmp(j->p, "false", 5) == 0) {
        mv_val *v = new_val(MV_BOOL);
        v->i = c == 't';
        j->p += c == 't' ? 4 : 5;
        return v;
    }
    if (strncmp(j->p, "null", 4) == 0) {
        j->p += 4;
        return new_val(MV_NONE);
    }
    const char *q = j->p;
    bool flt = false;
    while (q < j->end && strchr("+-0123456789.eE", *q)) {
        flt |= *q == '.' || *q == 'e' || *q == 'E';
        q++;
    }
    if (q == j->p) {
        j->bad = true;
        return new_val(MV_NONE);
    }
    mv_val *v = new_val(flt ? MV_FLOAT : MV_INT);
    if (flt)
        v->f = strtod(j->p, NULL);
    else
        v->i = *j->p == '-' ? strtoll(j->p, NULL, 10) : (int64_t)strtoull(j->p, NULL, 10);
    j->p = q;
    return v;
}

mv_val *mv_read(const char *path, char *err, size_t errn)
{
    err[0] = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errn, "cannot open %s", path);
        return NULL;
    }
    size_t cap = 1 << 16, n = 0, got;
    unsigned char *buf = mv_xrealloc(NULL, cap + 1);
    while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap)
            buf = mv_xrealloc(buf, (cap *= 2) + 1);
    }
    fclose(f);
    buf[n] = 0;
    mv_val *v;
    if (n && buf[0] == 0x80) {
        v = read_pickle(buf, n, err, errn);
    } else {
        jr j = {(const char *)buf, (const char *)buf + n, false};
        v = json_val(&j, 0);
        if (j.bad || v->k != MV_DICT) {
            snprintf(err, errn, "%s is neither a snapshot pickle nor JSON", path);
            v = NULL;
        }
    }
    free(buf);
    return v;
}
