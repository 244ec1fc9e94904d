/* `tcuda memviz`'s reader: a memory snapshot (the pickle that
 * tc_memory_dump_snapshot or torch.cuda.memory._dump_snapshot writes, or the
 * JSON of tc_memory_dump_snapshot_json) into a tree of values.
 *
 * The pickle reader takes the opcodes of protocols 2 to 4 that a dict of
 * lists, dicts, strings, numbers, booleans and None uses (with the memo,
 * frames and tuples), and refuses anything else (a class, a reduce) with
 * the opcode's name: it never runs code. mv_free_all frees every value
 * read.
 *
 * The input is hostile until read: every length is checked against the bytes
 * left, a memo index against the opcodes read so far (a pickler numbers its
 * memo 0, 1, 2... as it goes, so a larger index is no pickle's), an integer
 * against 64 bits, and every pop against the stack above the last mark. So
 * what the reader allocates is bounded by a small multiple of the input's
 * size, whatever the input says. */
#include "memviz.h"

#include <errno.h>
#include <inttypes.h>
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
    if (v->k == MV_FLOAT) /* a float past int64 (or NaN) converts to nothing defined */
        return v->f >= -9223372036854775808.0 && v->f < 9223372036854775808.0 ? (int64_t)v->f : 0;
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
    size_t nops;                /* opcodes read so far: a bound on every memo index */
    char err[160];
} rd;

static void st_push(rd *r, mv_val *v)
{
    if (r->nst == r->cap_st) {
        r->cap_st = r->cap_st ? r->cap_st * 2 : 64;
        r->st = mv_xrealloc(r->st, r->cap_st * sizeof *r->st);
    }
    r->st[r->nst++] = v;
}

static bool need(rd *r, uint64_t n)
{
    if ((uint64_t)(r->end - r->p) < n) {
        snprintf(r->err, sizeof r->err,
                 "the pickle ends early (%" PRIu64 " bytes wanted, %zu left)", n,
                 (size_t)(r->end - r->p));
        return false;
    }
    return true;
}

/* The items on the stack above the last mark: what an opcode may pop. */
static size_t above_mark(const rd *r) { return r->nst - (r->nmarks ? r->marks[r->nmarks - 1] : 0); }

/* At least n items above the last mark, for the opcode `what`. */
static bool need_stack(rd *r, size_t n, const char *what)
{
    if (above_mark(r) < n) {
        snprintf(r->err, sizeof r->err, "%s wants %zu values on the stack, %zu there", what, n,
                 above_mark(r));
        return false;
    }
    return true;
}

/* c is a container of kind k (a list to append to, a dict to set in). */
static bool need_kind(rd *r, const mv_val *c, mv_kind k, const char *what)
{
    if (c->k != k) {
        snprintf(r->err, sizeof r->err, "%s into a value that is not a %s", what,
                 k == MV_DICT ? "dict" : "list");
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

/* Sets memo[i]; i is below the opcodes read so far, so the memo grows with
 * the input, never with what an index claims. */
static bool memo_put(rd *r, size_t i, mv_val *v)
{
    if (i >= r->nops) {
        snprintf(r->err, sizeof r->err,
                 "memo index %zu is past the %zu opcodes read so far: not a pickler's", i, r->nops);
        return false;
    }
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
    return true;
}

static mv_val *str_val(const unsigned char *p, size_t n)
{
    mv_val *v = new_val(MV_STR);
    v->s = mv_xrealloc(NULL, n + 1);
    memcpy(v->s, p, n);
    v->s[n] = 0;
    return v;
}

/* Pops the last mark: the items above it start at *from (never past the
 * stack's top: no opcode pops below a mark). */
static bool pop_mark(rd *r, size_t *from)
{
    if (!r->nmarks) {
        snprintf(r->err, sizeof r->err, "no mark on the stack");
        return false;
    }
    *from = r->marks[--r->nmarks];
    return true;
}

/* LONG1: a little-endian two's complement integer of n bytes at p. Up to 8
 * bytes it is an int64; 9 bytes whose last is 0 are an unsigned 64-bit value
 * (an address past 2^63), kept as its bits; anything longer is refused. */
static bool long1(rd *r, const unsigned char *p, int n, int64_t *out)
{
    if (n > 9 || (n == 9 && p[8] != 0)) {
        snprintf(r->err, sizeof r->err, "an integer of %d bytes does not fit in 64 bits", n);
        return false;
    }
    uint64_t u = le(p, n > 8 ? 8 : n);
    if (n > 0 && n < 8 && (p[n - 1] & 0x80))
        u |= ~0ull << (8 * n); /* negative */
    memcpy(out, &u, sizeof *out);
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
    case 0x80: /* PROTO */
        if (!need(r, 1))
            return false;
        if (*r->p > 5) {
            snprintf(r->err, sizeof r->err, "pickle protocol %d: 5 is the highest", *r->p);
            return false;
        }
        r->p++;
        return true;
    case 0x95: /* FRAME: its length must lie in the input */
        if (!need(r, 8))
            return false;
        r->p += 8;
        return need(r, le(r->p - 8, 8));
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
    case 'e': /* APPENDS */ {
        const char *what = c == 'u' ? "SETITEMS" : "APPENDS";
        if (!pop_mark(r, &from))
            return false;
        if (from <= (r->nmarks ? r->marks[r->nmarks - 1] : 0)) {
            snprintf(r->err, sizeof r->err, "%s has no container below its mark", what);
            return false;
        }
        mv_val *to = r->st[from - 1];
        if (!need_kind(r, to, c == 'u' ? MV_DICT : MV_LIST, what))
            return false;
        if (c == 'u' && (r->nst - from) % 2) {
            snprintf(r->err, sizeof r->err, "SETITEMS with a key and no value");
            return false;
        }
        for (size_t i = from; i < r->nst; i++)
            push_item(to, r->st[i]);
        r->nst = from;
        return true;
    }
    case 's': /* SETITEM */
        if (!need_stack(r, 3, "SETITEM") || !need_kind(r, r->st[r->nst - 3], MV_DICT, "SETITEM"))
            return false;
        push_item(r->st[r->nst - 3], r->st[r->nst - 2]);
        push_item(r->st[r->nst - 3], r->st[r->nst - 1]);
        r->nst -= 2;
        return true;
    case 'a': /* APPEND */
        if (!need_stack(r, 2, "APPEND") || !need_kind(r, r->st[r->nst - 2], MV_LIST, "APPEND"))
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
        if (!need_stack(r, (size_t)(c - 0x84), "TUPLE1..3"))
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
        st_push(r, str_val(r->p, (size_t)n));
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
        int64_t i;
        if (!need(r, 1) || !need(r, 1 + (size_t)r->p[0]) || !long1(r, r->p + 1, r->p[0], &i))
            return false;
        v = new_val(MV_INT);
        v->i = i;
        r->p += 1 + r->p[0];
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
        if (c == 'q' || c == 'r')
            return need_stack(r, 1, "BINPUT") && memo_put(r, i, r->st[r->nst - 1]);
        if (i >= r->cap_memo || !r->memo[i]) {
            snprintf(r->err, sizeof r->err, "memo index %zu was never set", i);
            return false;
        }
        st_push(r, r->memo[i]);
        return true;
    }
    case 0x94: /* MEMOIZE */
        return need_stack(r, 1, "MEMOIZE") && memo_put(r, r->next_memo, r->st[r->nst - 1]);
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
        r.nops++;
        if (c == '.') {
            if (r.nst == 1 && !r.nmarks)
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

/* Reads within [p, end) only: the input need not end in a NUL. */
typedef struct jr {
    const char *p, *end;
    bool bad;
} jr;

static void ws(jr *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\n' || *j->p == '\r' || *j->p == '\t'))
        j->p++;
}

/* The word w (true, false, null) is next: steps past it. */
static bool word(jr *j, const char *w)
{
    size_t n = strlen(w);
    if ((size_t)(j->end - j->p) < n || memcmp(j->p, w, n) != 0)
        return false;
    j->p += n;
    return true;
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
    if (j->p < j->end)
        j->p++; /* the closing quote */
    else
        j->bad = true;
    s[n] = 0;
    mv_val *v = new_val(MV_STR);
    v->s = s;
    return v;
}

/* A number: its characters are copied out (strtod and strtoll read up to a
 * NUL), and one longer than any number a snapshot holds is refused. */
static mv_val *json_num(jr *j)
{
    const char *q = j->p;
    bool flt = false;
    while (q < j->end && *q && strchr("+-0123456789.eE", *q)) {
        flt |= *q == '.' || *q == 'e' || *q == 'E';
        q++;
    }
    char buf[64];
    size_t n = (size_t)(q - j->p);
    if (n == 0 || n >= sizeof buf) {
        j->bad = true;
        return new_val(MV_NONE);
    }
    memcpy(buf, j->p, n);
    buf[n] = 0;
    j->p = q;
    char *end;
    mv_val *v = new_val(flt ? MV_FLOAT : MV_INT);
    errno = 0;
    if (flt) {
        v->f = strtod(buf, &end);
    } else if (buf[0] == '-') {
        v->i = strtoll(buf, &end, 10);
    } else {
        uint64_t u = strtoull(buf, &end, 10); /* an address may pass 2^63: kept as its bits */
        memcpy(&v->i, &u, sizeof v->i);
    }
    if (*end || errno == ERANGE) /* "1-2", "--1", or past 64 bits */
        j->bad = true;
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
    if (word(j, "true") || word(j, "false")) {
        mv_val *v = new_val(MV_BOOL);
        v->i = c == 't';
        return v;
    }
    if (word(j, "null"))
        return new_val(MV_NONE);
    return json_num(j);
}

mv_val *mv_read_buf(const unsigned char *p, size_t n, const char *name, char *err, size_t errn)
{
    err[0] = 0;
    if (n && p[0] == 0x80) {
        char why[200];
        why[0] = 0;
        mv_val *v = read_pickle(p, n, why, sizeof why);
        if (!v)
            snprintf(err, errn, "%s: %s", name, why);
        return v;
    }
    jr j = {(const char *)p, (const char *)p + n, false};
    mv_val *v = json_val(&j, 0);
    ws(&j);
    if (j.bad || j.p != j.end || v->k != MV_DICT) {
        snprintf(err, errn, "%s is neither a snapshot pickle nor JSON", name);
        return NULL;
    }
    return v;
}

mv_val *mv_read(const char *path, char *err, size_t errn)
{
    err[0] = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errn, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0, got;
    unsigned char *buf = mv_xrealloc(NULL, cap);
    while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap)
            buf = mv_xrealloc(buf, cap *= 2);
    }
    int bad = ferror(f), e = errno;
    fclose(f);
    mv_val *v = NULL;
    if (bad)
        snprintf(err, errn, "cannot read %s: %s", path, strerror(e));
    else
        v = mv_read_buf(buf, n, path, err, errn);
    free(buf);
    return v;
}
