/* The stream sanitizer's reports: the text of a race (the memory, both
 * accesses with their call stacks, a fix), counting, and delivery to the
 * callback, stderr, the failing call (error mode) or abort (abort mode).
 * Reports are written under the engine's mutex and delivered outside it. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "sanitizer_engine.h"

static atomic_uint_fast64_t report_count;
static tc_sanitizer_report_fn callback;
static void *callback_data;

/* ---- reports ---------------------------------------------------------------- */

static void put_device(tc__strbuf *t, int dev)
{
    if (dev < 0)
        tc__strbuf_printf(t, "host");
    else
        tc__strbuf_printf(t, "cuda:%d", dev);
}

static void put_actor(tc__strbuf *t, int x)
{
    const actor *a = &tc__san_actors[x];
    if (a->dev == TC__ACCESS_HOST)
        tc__strbuf_printf(t, "the host");
    else if (!a->handle)
        tc__strbuf_printf(t, "the default stream of cuda:%d", a->dev);
    else
        tc__strbuf_printf(t, "stream %p of cuda:%d", a->handle, a->dev);
}

static void put_site(tc__strbuf *t, const site *s)
{
    if (s->label[0])
        tc__strbuf_printf(t, "%s", s->label);
    else
        tc__strbuf_printf(t, "%s", s->op ? s->op : "an internal call");
    if (s->what)
        tc__strbuf_printf(t, " (%s)", s->what);
}

static void put_span(tc__strbuf *t, const tc__span *sp)
{
    if (sp->ndim >= 0) {
        tc__strbuf_printf(t, "%s [", tc_dtype_string(sp->dtype));
        for (int d = 0; d < sp->ndim; d++)
            tc__strbuf_printf(t, "%s%lld", d ? ", " : "", (long long)sp->sizes[d]);
        tc__strbuf_printf(t, "] ");
    } else {
        tc__strbuf_printf(t, "%zu bytes ", (size_t)(sp->hi - sp->lo));
    }
}

static const char *const race_names[] = {"write-after-read", "read-after-write",
                                         "write-after-write", "reuse-after-free"};

const char *tc_sanitizer_race_string(tc_sanitizer_race kind)
{
    return (unsigned)kind < 4 ? race_names[kind] : "unknown";
}

void tc__san_reports_init(report_list *l)
{
    l->p = l->inl;
    l->n = 0;
    l->cap = INLINE_REPORTS;
    l->lost = 0;
}

pending *tc__san_reports_add(report_list *l)
{
    if (l->n == l->cap) {
        int cap = 2 * l->cap;
        pending *p = malloc(sizeof *p * (size_t)cap);
        if (!p) {
            l->lost++;
            return NULL;
        }
        memcpy(p, l->p, sizeof *p * (size_t)l->n);
        if (l->p != l->inl)
            free(l->p);
        l->p = p;
        l->cap = cap;
    }
    return &l->p[l->n++];
}

static void reports_free(report_list *l)
{
    for (int i = 0; i < l->n; i++)
        free(l->p[i].text);
    if (l->p != l->inl)
        free(l->p);
    tc__san_reports_init(l);
}

void tc__san_fill_pending(pending *p, tc_sanitizer_race kind, const region *r, uintptr_t addr,
                          const site *cur, const site *earlier, char *txt)
{
    const site *s[2] = {cur, earlier};
    for (int i = 0; i < 2; i++)
        snprintf(p->ops[i], sizeof p->ops[i], "%s",
                 s[i]->label[0] ? s[i]->label
                 : s[i]->op     ? s[i]->op
                                : "");
    p->text = txt;
    p->rep = (tc_sanitizer_report){.kind = kind,
                                   .address = (const void *)addr,
                                   .allocation = (const void *)r->base,
                                   .allocation_bytes = (size_t)(r->end - r->base),
                                   .current_op = p->ops[0],
                                   .earlier_op = p->ops[1],
                                   .text = txt};
}

static void put_memory(tc__strbuf *t, const region *r, const tc__span *sp)
{
    tc__strbuf_printf(t, "  memory: ");
    if (sp) {
        put_span(t, sp);
        tc__strbuf_printf(t, "at %p, bytes %zu..%zu of ", (void *)sp->lo,
                          (size_t)(sp->lo - r->base), (size_t)(sp->hi - r->base));
    }
    tc__strbuf_printf(t, "a %zu-byte %s at %p", (size_t)(r->end - r->base),
                      r->host      ? "pinned host allocation"
                      : r->adopted ? "region"
                                   : "allocation",
                      (void *)r->base);
    if (r->adopted) {
        tc__strbuf_printf(
            t, " (not from tcuda's allocator; watched since its first declared access)\n");
        return;
    }
    tc__strbuf_printf(t, " made");
    if (!r->host) {
        tc__strbuf_printf(t, " on ");
        put_actor(t, r->actor);
    }
    tc__strbuf_printf(t, " by ");
    put_site(t, &r->made);
    tc__strbuf_printf(t, ", at\n");
    tc__san_put_stack(t, r->made.stack);
}

static const char *fix_for(tc_sanitizer_race kind, bool host_current, bool host_earlier)
{
    if (kind == TC_SANITIZER_RACE_REUSE_AFTER_FREE)
        return "  the allocator may give this memory to new work on its own stream while the "
               "other\n  stream still uses it: call tc_tensor_record_stream (or "
               "tc_caching_allocator_record_stream)\n  with that stream before the release, or "
               "make the allocation's stream wait for it first.\n";
    if (host_current)
        return "  nothing orders the earlier access before this host access: synchronize the "
               "stream\n  (tc_stream_synchronize, or tc_event_record + tc_event_synchronize) "
               "before reading.\n";
    if (host_earlier)
        return "  nothing orders the earlier host access before this one.\n";
    return "  nothing orders the earlier access before the current one: make the current "
           "stream\n  wait for the other (tc_stream_wait_stream, or tc_event_record + "
           "tc_stream_wait_event),\n  or synchronize, in between.\n";
}

/* Writes the report of a race between the current access (actor x, span sp,
 * site cur) and earlier access e in region r. */
char *tc__san_race_text(tc_sanitizer_race kind, const region *r, const tc__span *sp, int x,
                        const site *cur, const access *e)
{
    tc__strbuf t = {0};
    tc__strbuf_printf(&t, "tcuda sanitizer: %s race on memory of ", race_names[kind]);
    put_device(&t, r->dev);
    tc__strbuf_printf(&t, "\n");
    put_memory(&t, r, sp);
    tc__strbuf_printf(&t, "  current access: %s by ",
                      kind == TC_SANITIZER_RACE_REUSE_AFTER_FREE ? "free"
                      : sp && sp->write                          ? "write"
                                                                 : "read");
    put_site(&t, cur);
    tc__strbuf_printf(&t, " on ");
    put_actor(&t, x);
    tc__strbuf_printf(&t, ", at\n");
    tc__san_put_stack(&t, cur->stack);
    tc__strbuf_printf(&t, "  earlier access: %s by ", e->write ? "write" : "read");
    put_site(&t, &e->site);
    tc__strbuf_printf(&t, " on ");
    put_actor(&t, e->actor);
    tc__strbuf_printf(&t, " (bytes %zu..%zu), at\n", (size_t)(e->lo - r->base),
                      (size_t)(e->hi - r->base));
    tc__san_put_stack(&t, e->site.stack);
    tc__strbuf_printf(&t, "%s",
                      fix_for(kind, tc__san_actors[x].dev == TC__ACCESS_HOST,
                              tc__san_actors[e->actor].dev == TC__ACCESS_HOST));
    return t.p;
}

/* Counts and delivers a report made under the lock (called without it). In
 * error mode it goes to the callback only: the failing call carries it. */
void tc__san_deliver(pending *p, int mode)
{
    atomic_fetch_add(&report_count, 1);
    p->rep.current_op = p->ops[0]; /* p may have moved since it was filled */
    p->rep.earlier_op = p->ops[1];
    p->rep.text = p->text;
    pthread_mutex_lock(&tc__san_mu);
    tc_sanitizer_report_fn cb = callback;
    void *ud = callback_data;
    pthread_mutex_unlock(&tc__san_mu);
    const char *txt = p->text ? p->text : "tcuda sanitizer: a race (no memory for the report)\n";
    if (mode == TC_SANITIZER_MODE_ABORT) {
        fputs(txt, stderr);
        fflush(stderr);
        abort();
    }
    if (cb)
        cb(&p->rep, ud);
    else if (mode == TC_SANITIZER_MODE_REPORT) {
        fputs(txt, stderr);
        fflush(stderr);
    }
}

/* Delivers reports made under mu (called without it); frees what l holds. */
void tc__san_deliver_all(report_list *l, int mode)
{
    if (l->lost)
        atomic_fetch_add(&report_count, l->lost);
    for (int i = 0; i < l->n; i++)
        tc__san_deliver(&l->p[i], mode);
    reports_free(l);
}

/* Error mode: the first report becomes the refusing call's error (the search
 * stopped at it, so there is no other). */
tc_status tc__san_refuse(report_list *l)
{
    pending *rep = &l->p[0];
    tc__san_deliver(rep, TC_SANITIZER_MODE_ERROR);
    tc_status st = tc__fail(TC_ERROR_RACE, "%s", rep->text ? rep->text : "tcuda sanitizer: a race");
    reports_free(l);
    return st;
}

uint64_t tc_sanitizer_report_count(void) { return atomic_load(&report_count); }

tc_status tc_sanitizer_set_report_fn(tc_sanitizer_report_fn fn, void *ctx)
{
    TC_API_BEGIN;
    pthread_mutex_lock(&tc__san_mu);
    callback = fn;
    callback_data = fn ? ctx : NULL;
    pthread_mutex_unlock(&tc__san_mu);
    return TC_OK;
}
