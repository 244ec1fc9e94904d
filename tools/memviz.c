/* `tcuda memviz SNAPSHOT > report.html` and `tcuda memviz --summary
 * SNAPSHOT`: what a memory snapshot with history (tc_memory_dump_snapshot,
 * or PyTorch's _dump_snapshot) says, as one self-contained page (inline SVG,
 * CSS and a little script; nothing fetched) or as a text table.
 *
 * The trace of one device (--device, else the first with events) is
 * replayed: an allocation lives from its "alloc" event to its
 * "free_completed" (or "free_requested" when the trace has no completions);
 * one freed in the trace without its allocation, or live at the end without
 * one, was live before the trace began and sits at the bottom. The x axis is
 * the event index, as in PyTorch's memory_viz; allocations are stacked in
 * the order they were made, so when one goes, those above it move down. The
 * peak is the event after which the most bytes are live; the page marks it,
 * draws the segments live then with the allocations inside them, and lists
 * the largest allocations live then with their stacks.
 *
 * A snapshot may be hostile: every byte count in it is checked (0 to
 * MAX_BYTES, where doubles still count bytes exactly) and every sum of them
 * against 64 bits, and the snapshot is refused with the reason otherwise.
 * What is allocated is bounded by the number of values read, so by the
 * input's size. */
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memviz.h"

#define TOP_N 10
#define MAX_FRAMES 16
#define W 1200.0
#define H 420.0
#define MAX_POINTS 4000000 /* steps drawn in the timeline, at most */
#define MAX_BYTES ((int64_t)1 << 53)

typedef struct pt {
    double x, y;
} pt;

/* One allocation (or segment) and where it lies over time. */
typedef struct al {
    uint64_t addr, size, stream;
    int64_t t0, t1; /* live for t0 <= x < t1, x being the event index */
    const mv_val *frames;
    bool pre; /* live before the trace began */
    pt *pts;  /* bottom edge: (x, offset) at each change */
    size_t npts, cap;
} al;

typedef struct alist {
    al *v;
    size_t n, cap;
} alist;

void *mv_xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p) {
        fprintf(stderr, "tcuda memviz: out of memory\n");
        exit(1);
    }
    return p;
}

static size_t add(alist *l, al a)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->v = mv_xrealloc(l->v, l->cap * sizeof *l->v);
    }
    l->v[l->n] = a;
    return l->n++;
}

/* ---- an address map: addr to index, open addressing ----------------------------- */

typedef struct amap {
    uint64_t *key;
    size_t *val;
    bool *used;
    size_t cap, n;
} amap;

static size_t slot(const amap *m, uint64_t k)
{
    size_t j = (size_t)((k * 0x9e3779b97f4a7c15ull) >> 17) & (m->cap - 1);
    while (m->used[j] && m->key[j] != k)
        j = (j + 1) & (m->cap - 1);
    return j;
}

static void amap_put(amap *m, uint64_t k, size_t v);

static void amap_grow(amap *m)
{
    amap o = *m;
    m->cap = o.cap ? o.cap * 2 : 1024;
    m->key = calloc(m->cap, sizeof *m->key);
    m->val = calloc(m->cap, sizeof *m->val);
    m->used = calloc(m->cap, sizeof *m->used);
    m->n = 0;
    for (size_t i = 0; i < o.cap; i++)
        if (o.used[i])
            amap_put(m, o.key[i], o.val[i]);
    free(o.key);
    free(o.val);
    free(o.used);
}

static void amap_put(amap *m, uint64_t k, size_t v)
{
    if ((m->n + 1) * 2 > m->cap)
        amap_grow(m);
    size_t j = slot(m, k);
    if (!m->used[j])
        m->n++;
    m->used[j] = true;
    m->key[j] = k;
    m->val[j] = v;
}

static bool amap_take(amap *m, uint64_t k, size_t *v)
{
    if (!m->cap)
        return false;
    size_t j = slot(m, k);
    if (!m->used[j])
        return false;
    *v = m->val[j];
    m->used[j] = false; /* backward shift keeps probing sound */
    m->n--;
    for (size_t i = (j + 1) & (m->cap - 1); m->used[i]; i = (i + 1) & (m->cap - 1)) {
        uint64_t kk = m->key[i];
        size_t vv = m->val[i];
        m->used[i] = false;
        m->n--;
        amap_put(m, kk, vv);
    }
    return true;
}

/* ---- the replay ------------------------------------------------------------------ */

typedef struct view {
    const char *path;
    FILE *out;
    char *err; /* why the snapshot is refused */
    size_t errn;
    int device;
    const mv_val *trace; /* the device's events */
    size_t nev;
    alist allocs, segs;
    int64_t *total; /* live bytes after each event */
    int64_t peak_x, peak;
    uint64_t end_reserved, end_allocated;
    size_t end_segments;
    bool simplified; /* past MAX_POINTS: allocations keep their first height */
} view;

static const mv_val *ev_at(const view *v, size_t k) { return v->trace->items[k]; }

static bool is(const mv_val *e, const char *action)
{
    return strcmp(mv_str(mv_get(e, "action")), action) == 0;
}

/* Says why the snapshot is refused, in v->err after its path. */
static void refuse(view *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void refuse(view *v, const char *fmt, ...)
{
    int n = snprintf(v->err, v->errn, "%s: ", v->path);
    if (n < 0 || (size_t)n >= v->errn)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->err + n, v->errn - (size_t)n, fmt, ap);
    va_end(ap);
}

/* d's byte count `key` into *out: false, with the reason in v->err, for a
 * negative one or one past MAX_BYTES (`what` and `at` name d). */
static bool bytes_of(view *v, const mv_val *d, const char *key, const char *what, size_t at,
                     uint64_t *out)
{
    const mv_val *x = mv_get(d, key);
    if (x && x->k == MV_FLOAT && !(x->f >= 0 && x->f <= (double)MAX_BYTES)) {
        refuse(v, "%s %zu has %s %g: not a byte count (0 to 2^53)", what, at, key, x->f);
        return false;
    }
    int64_t n = mv_int(x);
    if (n < 0 || n > MAX_BYTES) {
        refuse(v, "%s %zu has %s %" PRId64 ": not a byte count (0 to 2^53)", what, at, key, n);
        return false;
    }
    *out = (uint64_t)n;
    return true;
}

/* Replays births (`born`) and deaths (`died`) of things at addresses; what
 * is in `at_end` (addr, size, stream, frames) without a birth was there
 * before. False, with the reason in v->err, for a size that is no byte
 * count. */
static bool replay(view *v, alist *out, const char *born, const char *died,
                   const mv_val *const *at_end, size_t n_end)
{
    amap m = {0};
    bool ok = true;
    for (size_t k = 0; k < v->nev && ok; k++) {
        const mv_val *e = ev_at(v, k);
        uint64_t addr = (uint64_t)mv_int(mv_get(e, "addr")), size = 0;
        bool b = is(e, born), d = !b && is(e, died);
        if ((b || d) && !(ok = bytes_of(v, e, "size", "event", k, &size)))
            break;
        if (b) {
            al a = {addr,
                    size,
                    (uint64_t)mv_int(mv_get(e, "stream")),
                    (int64_t)k,
                    (int64_t)v->nev,
                    mv_get(e, "frames"),
                    false,
                    NULL,
                    0,
                    0};
            amap_put(&m, addr, add(out, a));
        } else if (d) {
            size_t i;
            if (amap_take(&m, addr, &i)) {
                out->v[i].t1 = (int64_t)k;
            } else {
                al a = {addr, size,       (uint64_t)mv_int(mv_get(e, "stream")),
                        0,    (int64_t)k, mv_get(e, "frames"),
                        true, NULL,       0,
                        0};
                add(out, a);
            }
        }
    }
    for (size_t i = 0; i < n_end && ok; i++) {
        const mv_val *b = at_end[i];
        uint64_t addr = (uint64_t)mv_int(mv_get(b, "address")), size;
        size_t j;
        if (amap_take(&m, addr, &j))
            continue;
        bool seg = mv_get(b, "total_size") != NULL;
        if (!(ok = bytes_of(v, b, seg ? "total_size" : "size", seg ? "segment" : "block", i,
                            &size)))
            break;
        al a = {addr,
                size,
                (uint64_t)mv_int(mv_get(b, "stream")),
                0,
                (int64_t)v->nev,
                mv_get(b, "frames"),
                true,
                NULL,
                0,
                0};
        add(out, a);
    }
    free(m.key);
    free(m.val);
    free(m.used);
    return ok;
}

static void add_pt(al *a, double x, double y)
{
    if (a->npts == a->cap) {
        a->cap = a->cap ? a->cap * 2 : 4;
        a->pts = mv_xrealloc(a->pts, a->cap * sizeof *a->pts);
    }
    a->pts[a->npts++] = (pt){x, y};
}

/* live += size, or false with the reason in v->err when the sum passes
 * int64 (sizes are at most MAX_BYTES, but there may be many). */
static bool add_live(view *v, int64_t *live, uint64_t size)
{
    if (__builtin_add_overflow(*live, (int64_t)size, live)) {
        refuse(v, "the live allocations add up past 2^63 bytes");
        return false;
    }
    return true;
}

/* Stacks the allocations: the earlier made lower, those live before the
 * trace lowest; records each one's bottom edge and the total over time.
 * False when the live bytes pass int64. */
static bool layout(view *v)
{
    alist *l = &v->allocs;
    size_t *ord = mv_xrealloc(NULL, (l->n + 1) * sizeof *ord), nord = 0;
    size_t *start = mv_xrealloc(NULL, (v->nev + 1) * sizeof *start);
    size_t *end = mv_xrealloc(NULL, (v->nev + 1) * sizeof *end);
    for (size_t k = 0; k <= v->nev; k++)
        start[k] = end[k] = SIZE_MAX;
    int64_t live = 0;
    size_t npts = 0;
    bool ok = true;
    for (size_t i = 0; i < l->n && ok; i++) {
        al *a = &l->v[i];
        if (a->pre) {
            add_pt(a, 0, (double)live);
            ok = add_live(v, &live, a->size);
            ord[nord++] = i;
        } else {
            start[a->t0] = i;
        }
        if (a->t1 < (int64_t)v->nev)
            end[a->t1] = i;
    }
    v->total = mv_xrealloc(NULL, (v->nev + 1) * sizeof *v->total);
    v->peak = -1;
    for (size_t k = 0; k < v->nev && ok; k++) {
        if (end[k] != SIZE_MAX) {
            size_t p = 0;
            while (p < nord && ord[p] != end[k])
                p++;
            uint64_t gone = l->v[end[k]].size;
            if (npts + 2 * (nord - p) > MAX_POINTS) /* too big a page: no more steps drawn */
                v->simplified = true;
            else
                npts += 2 * (nord - p);
            for (size_t q = p + 1; q < nord && !v->simplified; q++) {
                al *a = &l->v[ord[q]];
                double y = a->pts[a->npts - 1].y;
                add_pt(a, (double)k, y);
                add_pt(a, (double)k, y - (double)gone);
            }
            if (p < nord) {
                memmove(&ord[p], &ord[p + 1], (nord - p - 1) * sizeof *ord);
                nord--;
                live -= (int64_t)gone;
            }
        }
        if (start[k] != SIZE_MAX) {
            add_pt(&l->v[start[k]], (double)k, (double)live);
            ok = add_live(v, &live, l->v[start[k]].size);
            ord[nord++] = start[k];
        }
        v->total[k] = live;
        if (live > v->peak) {
            v->peak = live;
            v->peak_x = (int64_t)k;
        }
    }
    if (!v->nev) {
        v->peak = live;
        v->peak_x = 0;
    }
    free(ord);
    free(start);
    free(end);
    return ok;
}

static bool live_at(const al *a, int64_t x) { return a->t0 <= x && x < a->t1; }

static int by_size_desc(const void *p, const void *q)
{
    const al *a = *(al *const *)p, *b = *(al *const *)q;
    return a->size < b->size   ? 1
           : a->size > b->size ? -1
                               : (a->addr > b->addr) - (a->addr < b->addr);
}

static int by_addr(const void *p, const void *q)
{
    const al *a = *(al *const *)p, *b = *(al *const *)q;
    return (a->addr > b->addr) - (a->addr < b->addr);
}

/* The allocations (or segments) live at the peak, sorted by cmp; caller frees. */
static al **at_peak(const view *v, const alist *l, int (*cmp)(const void *, const void *),
                    size_t *n)
{
    al **r = mv_xrealloc(NULL, (l->n + 1) * sizeof *r);
    *n = 0;
    for (size_t i = 0; i < l->n; i++)
        if (live_at(&l->v[i], v->peak_x) || (v->nev == 0))
            r[(*n)++] = &l->v[i];
    qsort(r, *n, sizeof *r, cmp);
    return r;
}

/* *sum += n, or false with the reason in v->err past 64 bits. */
static bool add_bytes(view *v, uint64_t *sum, uint64_t n, const char *what)
{
    if (__builtin_add_overflow(*sum, n, sum)) {
        refuse(v, "the %s add up past 2^64 bytes", what);
        return false;
    }
    return true;
}

/* The segments of `device` and their live blocks, with the totals at the
 * end; false, with the reason in v->err, for a size that is no byte count.
 * The caller frees the two arrays. */
static bool collect_blocks(const mv_val *segments, int device, const mv_val ***blocks, size_t *nb,
                           const mv_val ***segs, size_t *ns, view *v)
{
    *nb = *ns = 0;
    size_t cb = 0, cs = 0;
    *blocks = NULL;
    *segs = NULL;
    for (size_t i = 0; i < segments->n; i++) {
        const mv_val *s = segments->items[i];
        uint64_t n;
        if (mv_int(mv_get(s, "device")) != device)
            continue;
        if (*ns == cs)
            *segs = mv_xrealloc((void *)*segs, (cs = cs ? cs * 2 : 16) * sizeof **segs);
        (*segs)[(*ns)++] = s;
        if (!bytes_of(v, s, "total_size", "segment", i, &n) ||
            !add_bytes(v, &v->end_reserved, n, "segments"))
            return false;
        v->end_segments++;
        const mv_val *bl = mv_get(s, "blocks");
        for (size_t j = 0; bl && bl->k == MV_LIST && j < bl->n; j++) {
            const mv_val *b = bl->items[j];
            const char *st = mv_str(mv_get(b, "state"));
            if (strcmp(st, "active_allocated") && strcmp(st, "active_pending_free"))
                continue;
            if (!bytes_of(v, b, "size", "block", j, &n))
                return false;
            if (!strcmp(st, "active_allocated") &&
                !add_bytes(v, &v->end_allocated, n, "allocated blocks"))
                return false;
            if (*nb == cb)
                *blocks = mv_xrealloc((void *)*blocks, (cb = cb ? cb * 2 : 64) * sizeof **blocks);
            (*blocks)[(*nb)++] = b;
        }
    }
    return true;
}

/* The view of root's device want_device (-1: the first with events); false,
 * with the reason in v->err, when root is no snapshot or its sizes are not
 * byte counts. */
static bool build(view *v, const mv_val *root, int want_device)
{
    const mv_val *traces = mv_get(root, "device_traces");
    const mv_val *segments = mv_get(root, "segments");
    if (!segments || segments->k != MV_LIST) {
        refuse(v, "no \"segments\" list: not a memory snapshot");
        return false;
    }
    if (traces && traces->k != MV_LIST) {
        refuse(v, "\"device_traces\" is not a list");
        return false;
    }
    int d = want_device;
    if (d < 0) {
        d = 0;
        for (size_t i = 0; traces && i < traces->n && i <= INT_MAX; i++)
            if (traces->items[i]->n) {
                d = (int)i;
                break;
            }
    }
    v->device = d;
    static const mv_val empty = {MV_LIST, 0, 0, NULL, NULL, 0, 0};
    v->trace = traces && (size_t)d < traces->n && traces->items[d]->k == MV_LIST ? traces->items[d]
                                                                                 : &empty;
    v->nev = v->trace->n;
    bool completed = false;
    for (size_t k = 0; k < v->nev; k++)
        completed |= is(ev_at(v, k), "free_completed");
    const mv_val **blocks, **segs;
    size_t nb, ns;
    bool ok = collect_blocks(segments, d, &blocks, &nb, &segs, &ns, v) &&
              replay(v, &v->allocs, "alloc", completed ? "free_completed" : "free_requested",
                     blocks, nb) &&
              replay(v, &v->segs, "segment_alloc", "segment_free", segs, ns) && layout(v);
    free((void *)blocks);
    free((void *)segs);
    return ok;
}

static void view_free(view *v)
{
    for (size_t i = 0; i < v->allocs.n; i++)
        free(v->allocs.v[i].pts);
    free(v->allocs.v);
    free(v->segs.v);
    free(v->total);
}

/* ---- text ------------------------------------------------------------------------ */

static const char *fmt_bytes(char *buf, size_t n, double b)
{
    static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (b >= 1024 && i < 4) {
        b /= 1024;
        i++;
    }
    snprintf(buf, n, i ? "%.2f %s" : "%.0f %s", b, u[i]);
    return buf;
}

static const char *base(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* The frames as "name (file:line)" lines joined by sep, at most MAX_FRAMES. */
static void frames_text(const mv_val *f, char *out, size_t n, const char *sep)
{
    out[0] = 0;
    size_t len = 0;
    for (size_t i = 0; f && f->k == MV_LIST && i < f->n && i < MAX_FRAMES; i++) {
        const mv_val *fr = f->items[i];
        int64_t line = mv_int(mv_get(fr, "line"));
        char ln[32] = "";
        if (line > 0)
            snprintf(ln, sizeof ln, ":%" PRId64, line);
        int w = snprintf(out + len, n - len, "%s%s (%s%s)", i ? sep : "",
                         mv_str(mv_get(fr, "name")), base(mv_str(mv_get(fr, "filename"))), ln);
        if (w < 0 || (size_t)w >= n - len)
            break;
        len += (size_t)w;
    }
}

static int text(view *v)
{
    char b1[32], b2[32], b3[32];
    size_t counts[8] = {0};
    static const char *const names[8] = {
        "alloc",        "free_requested", "free_completed", "segment_alloc",
        "segment_free", "segment_map",    "segment_unmap",  "oom"};
    for (size_t k = 0; k < v->nev; k++)
        for (int a = 0; a < 8; a++)
            counts[a] += is(ev_at(v, k), names[a]);
    fprintf(v->out, "snapshot %s, device %d: %zu events\n", v->path, v->device, v->nev);
    for (int a = 0; a < 8; a++)
        if (counts[a])
            fprintf(v->out, "  %-16s %zu\n", names[a], counts[a]);
    size_t n;
    al **top = at_peak(v, &v->allocs, by_size_desc, &n);
    fprintf(v->out, "peak active memory: %s after event %" PRId64 ", %zu allocations live\n",
            fmt_bytes(b1, sizeof b1, (double)v->peak), v->peak_x, n);
    fprintf(v->out, "at the end: %s allocated in %zu segments holding %s\n",
            fmt_bytes(b2, sizeof b2, (double)v->end_allocated), v->end_segments,
            fmt_bytes(b3, sizeof b3, (double)v->end_reserved));
    fprintf(v->out, "largest live allocations at the peak:\n");
    fprintf(v->out, "  %-12s %-16s %-18s %s\n", "size", "stream", "address", "allocated by");
    for (size_t i = 0; i < n && i < TOP_N; i++) {
        char st[2048];
        frames_text(top[i]->frames, st, sizeof st, " <- ");
        fprintf(v->out, "  %-12s %#-16" PRIx64 " %#-18" PRIx64 " %s\n",
                fmt_bytes(b1, sizeof b1, (double)top[i]->size), top[i]->stream, top[i]->addr,
                st[0] ? st : (top[i]->pre ? "(before the trace)" : "(no stack recorded)"));
    }
    free(top);
    return 0;
}

/* ---- HTML -------------------------------------------------------------------------- */

static void html_text(FILE *o, const char *s)
{
    for (; *s; s++) {
        if (*s == '<')
            fputs("&lt;", o);
        else if (*s == '>')
            fputs("&gt;", o);
        else if (*s == '&')
            fputs("&amp;", o);
        else if (*s == '"')
            fputs("&quot;", o);
        else
            fputc(*s, o);
    }
}

static void js_str(FILE *o, const char *s)
{
    fputc('"', o);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(o, "\\%c", c);
        else if (c < 0x20 || c == '<' || c == '>' || c == '&')
            fprintf(o, "\\u%04x", c);
        else
            fputc(c, o);
    }
    fputc('"', o);
}

static double sx(const view *v, double x)
{
    return 60 + x * (W - 80) / (double)(v->nev ? v->nev : 1);
}
static double sy(const view *v, double y)
{
    return 20 + H - y * H / (double)(v->peak > 0 ? (double)v->peak * 1.05 : 1);
}

static void color(size_t i, char *buf, size_t n)
{
    /* the golden angle (137.508 degrees): neighbours differ in hue; in integers, as a
     * double past INT_MAX would not convert */
    snprintf(buf, n, "hsl(%d,65%%,%d%%)", (int)((uint64_t)i * 137508 / 1000 % 360),
             45 + (int)(i % 3) * 10);
}

static void polygon(const view *v, size_t i)
{
    const al *a = &v->allocs.v[i];
    if (!a->npts)
        return;
    char c[48];
    color(i, c, sizeof c);
    fprintf(v->out, "<polygon class=\"alloc\" data-i=\"%zu\" fill=\"%s\" points=\"", i, c);
    for (size_t p = 0; p < a->npts; p++)
        fprintf(v->out, "%.1f,%.1f ", sx(v, a->pts[p].x), sy(v, a->pts[p].y));
    double yl = a->pts[a->npts - 1].y;
    fprintf(v->out, "%.1f,%.1f %.1f,%.1f ", sx(v, (double)a->t1), sy(v, yl), sx(v, (double)a->t1),
            sy(v, yl + (double)a->size));
    for (size_t p = a->npts; p-- > 0;)
        fprintf(v->out, "%.1f,%.1f ", sx(v, a->pts[p].x), sy(v, a->pts[p].y + (double)a->size));
    char b[32];
    fprintf(v->out, "\"><title>%s, stream %#" PRIx64 "</title></polygon>\n",
            fmt_bytes(b, sizeof b, (double)a->size), a->stream);
}

static void axes(const view *v)
{
    char b[32];
    for (int t = 0; t <= 4; t++) {
        double y = (double)v->peak * 1.05 * t / 4;
        fprintf(v->out,
                "<line class=\"grid\" x1=\"60\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\"/>"
                "<text x=\"4\" y=\"%.1f\">%s</text>\n",
                W - 20, sy(v, y), sy(v, y), sy(v, y) + 4, fmt_bytes(b, sizeof b, y));
    }
    fprintf(v->out, "<text x=\"%.0f\" y=\"%.0f\">event index (%zu events)</text>\n", W / 2 - 60,
            H + 50, v->nev);
}

static void timeline(const view *v)
{
    char b[32];
    fprintf(v->out, "<svg id=\"timeline\" width=\"%.0f\" height=\"%.0f\">\n", W, H + 60);
    axes(v);
    fprintf(v->out, "<g id=\"allocs\">\n");
    for (size_t i = 0; i < v->allocs.n; i++)
        polygon(v, i);
    fprintf(v->out, "</g>\n");
    double px = sx(v, (double)v->peak_x + 0.5);
    fprintf(v->out,
            "<line id=\"peak\" x1=\"%.1f\" x2=\"%.1f\" y1=\"15\" y2=\"%.0f\"/>"
            "<text id=\"peak-label\" x=\"%.1f\" y=\"14\">peak %s at event %" PRId64 "</text>\n",
            px, px, H + 20, px + 4 > W - 220 ? px - 220 : px + 4,
            fmt_bytes(b, sizeof b, (double)v->peak), v->peak_x);
    fprintf(v->out, "</svg>\n");
}

static void segment_map(const view *v)
{
    size_t ns, na;
    al **segs = at_peak(v, &v->segs, by_addr, &ns);
    al **allocs = at_peak(v, &v->allocs, by_addr, &na);
    uint64_t biggest = 1;
    for (size_t i = 0; i < ns; i++)
        if (segs[i]->size > biggest)
            biggest = segs[i]->size;
    double row = 22, w = W - 260;
    fprintf(v->out, "<svg id=\"segments\" width=\"%.0f\" height=\"%.0f\">\n", W,
            row * (double)ns + 10);
    char b[32];
    for (size_t i = 0; i < ns; i++) {
        const al *s = segs[i];
        double y = 5 + row * (double)i, sw = w * (double)s->size / (double)biggest;
        fprintf(v->out, "<text x=\"0\" y=\"%.0f\">%#" PRIx64 " %s</text>", y + 14, s->addr,
                fmt_bytes(b, sizeof b, (double)s->size));
        fprintf(v->out,
                "<rect class=\"segment\" x=\"240\" y=\"%.0f\" width=\"%.1f\" height=\"16\"/>\n", y,
                sw);
        for (size_t j = 0; j < na; j++) {
            const al *a = allocs[j];
            if (a->addr < s->addr || a->addr >= s->addr + s->size)
                continue;
            char c[48];
            size_t idx = (size_t)(a - v->allocs.v);
            color(idx, c, sizeof c);
            fprintf(v->out,
                    "<rect class=\"alloc\" data-i=\"%zu\" fill=\"%s\" x=\"%.1f\" y=\"%.0f\" "
                    "width=\"%.1f\" height=\"16\"><title>%s</title></rect>\n",
                    idx, c, 240 + w * (double)(a->addr - s->addr) / (double)biggest, y,
                    w * (double)a->size / (double)biggest < 1
                        ? 1
                        : w * (double)a->size / (double)biggest,
                    fmt_bytes(b, sizeof b, (double)a->size));
        }
    }
    fprintf(v->out, "</svg>\n");
    if (!ns)
        fprintf(v->out, "<p>No segments were live at the peak in this snapshot.</p>\n");
    free(segs);
    free(allocs);
}

static void top_table(const view *v)
{
    size_t n;
    al **top = at_peak(v, &v->allocs, by_size_desc, &n);
    char b[32], st[4096];
    fprintf(v->out, "<table id=\"top-allocs\"><tr><th>size</th><th>stream</th><th>address</th>"
                    "<th>stack</th></tr>\n");
    for (size_t i = 0; i < n && i < TOP_N; i++) {
        frames_text(top[i]->frames, st, sizeof st, "\n");
        fprintf(v->out,
                "<tr class=\"top\" data-i=\"%zu\"><td>%s</td><td>%#" PRIx64 "</td><td>%#" PRIx64
                "</td><td><pre class=\"stack\">",
                (size_t)(top[i] - v->allocs.v), fmt_bytes(b, sizeof b, (double)top[i]->size),
                top[i]->stream, top[i]->addr);
        html_text(v->out, st[0] ? st : top[i]->pre ? "(allocated before the trace)" : "(no stack)");
        fprintf(v->out, "</pre></td></tr>\n");
    }
    fprintf(v->out, "</table>\n");
    free(top);
}

static void script(const view *v)
{
    char b[32], st[4096];
    fprintf(v->out, "<script>\nconst A = [\n");
    for (size_t i = 0; i < v->allocs.n; i++) {
        const al *a = &v->allocs.v[i];
        frames_text(a->frames, st, sizeof st, "\n");
        fprintf(v->out, "[");
        js_str(v->out, fmt_bytes(b, sizeof b, (double)a->size));
        fprintf(v->out, ",\"%#" PRIx64 "\",\"%#" PRIx64 "\",%" PRId64 ",%" PRId64 ",", a->stream,
                a->addr, a->t0, a->t1);
        js_str(v->out, st[0]    ? st
                       : a->pre ? "(allocated before the trace)"
                                : "(no stack recorded)");
        fprintf(v->out, "],\n");
    }
    fprintf(v->out,
            "];\n"
            "document.getElementById('timeline').setAttribute('data-drawn',"
            " document.querySelectorAll('#allocs polygon').length);\n"
            "function show(i) {\n"
            "  const a = A[i], d = document.getElementById('detail');\n"
            "  d.textContent = a[0] + ' at ' + a[2] + ' on stream ' + a[1] + ', live from event ' +"
            " a[3] + ' to ' + a[4] + '\\n' + a[5];\n"
            "}\n"
            "for (const el of document.querySelectorAll('[data-i]')) {\n"
            "  el.addEventListener('mouseover', () => show(+el.dataset.i));\n"
            "  el.addEventListener('click', () => show(+el.dataset.i));\n"
            "}\n"
            "</script>\n");
}

static int page(view *v)
{
    char b1[32], b2[32];
    fprintf(v->out, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>tcuda memory: ");
    html_text(v->out, base(v->path));
    fprintf(v->out,
            "</title>\n<style>\n"
            "body{font:14px sans-serif;margin:16px;color:#222}\n"
            "svg text{font:11px sans-serif;fill:#333}\n"
            ".grid{stroke:#ddd}\n#peak{stroke:#d00;stroke-width:2;stroke-dasharray:6 3}\n"
            "#peak-label{fill:#d00;font-weight:bold}\n"
            ".alloc{stroke:#0003;stroke-width:.5;cursor:pointer}\n.alloc:hover{opacity:.7}\n"
            ".segment{fill:#eee;stroke:#999}\n"
            "#detail{white-space:pre;font:12px monospace;background:#f6f6f6;padding:8px;"
            "min-height:3em;border:1px solid #ddd}\n"
            "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;"
            "vertical-align:top;text-align:left}\n"
            ".stack{margin:0;font:11px monospace}\n"
            "</style></head><body>\n<h1>Active memory over time</h1>\n");
    fprintf(v->out, "<p id=\"summary\">");
    html_text(v->out, base(v->path));
    fprintf(v->out,
            ", device %d: %zu events, %zu allocations; peak %s after event %" PRId64
            "; at the end %s reserved in %zu segments.</p>\n",
            v->device, v->nev, v->allocs.n, fmt_bytes(b1, sizeof b1, (double)v->peak), v->peak_x,
            fmt_bytes(b2, sizeof b2, (double)v->end_reserved), v->end_segments);
    if (v->simplified)
        fprintf(v->out,
                "<p><b>This trace is too long to draw every step: past %d points, allocations keep "
                "the height they started at.</b></p>\n",
                MAX_POINTS);
    timeline(v);
    fprintf(v->out,
            "<div id=\"detail\">Point at or click an allocation to see its size, stream and "
            "stack.</div>\n<h2>Segments at the peak</h2>\n");
    segment_map(v);
    fprintf(v->out, "<h2>Largest live allocations at the peak</h2>\n");
    top_table(v);
    script(v);
    fprintf(v->out, "</body></html>\n");
    return 0;
}

int mv_render(const mv_val *root, const char *path, int device, bool summary, FILE *out, char *err,
              size_t errn)
{
    view v;
    memset(&v, 0, sizeof v);
    v.path = path;
    v.out = out;
    v.err = err;
    v.errn = errn;
    err[0] = 0;
    int rc = !build(&v, root, device) ? 1 : summary ? text(&v) : page(&v);
    view_free(&v);
    return rc;
}

static void memviz_usage(FILE *f)
{
    fprintf(f, "usage: tcuda memviz [--summary] [--device N] SNAPSHOT > report.html\n"
               "  a memory snapshot (tc_memory_dump_snapshot, a pickle or its JSON) as one HTML\n"
               "  page; --summary: a text table instead; --device N: device N's trace (default:\n"
               "  the first with events)\n");
}

/* A device index: digits only (no sign, space or empty string), 0 to 1023. */
static bool parse_device(const char *s, int *out)
{
    int d = 0;
    if (!*s)
        return false;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return false;
        d = d * 10 + (*s - '0');
        if (d > 1023)
            return false;
    }
    *out = d;
    return true;
}

int tc_tool_memviz(int argc, char **argv)
{
    bool sum = false;
    int device = -1;
    const char *path = NULL;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            memviz_usage(stdout);
            return 0;
        }
    }
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--summary") == 0) {
            sum = true;
        } else if (strcmp(argv[i], "--device") == 0) {
            if (i + 1 == argc) {
                fprintf(stderr, "tcuda memviz: --device wants a device index (0 to 1023)\n");
                return 2;
            }
            if (!parse_device(argv[++i], &device)) {
                fprintf(stderr,
                        "tcuda memviz: --device wants a device index (0 to 1023), not '%s'\n",
                        argv[i]);
                return 2;
            }
        } else if (!path && argv[i][0] != '-') {
            path = argv[i];
        } else {
            fprintf(stderr, "tcuda memviz: unexpected argument '%s'\n", argv[i]);
            memviz_usage(stderr);
            return 2;
        }
    }
    if (!path) {
        memviz_usage(stderr);
        return 2;
    }
    char err[320];
    mv_val *root = mv_read(path, err, sizeof err);
    int rc = 1;
    if (root)
        rc = mv_render(root, path, device, sum, stdout, err, sizeof err);
    if (rc)
        fprintf(stderr, "tcuda memviz: %s\n", err);
    mv_free_all();
    return rc;
}
