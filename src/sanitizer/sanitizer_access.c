/* The stream sanitizer's check of one operation: each span it touches
 * checked against the earlier accesses to its memory (sanitizer_memory.c)
 * under the accessing actor's clock (sanitizer_clocks.c), and the record of
 * the operation as the actor's next epoch. tc__san_access is what the
 * sanitizer does with an operation the access layer hands it, and what
 * tc_sanitizer_access calls. */
#include <pthread.h>

#include "sanitizer_engine.h"

/* ---- accesses ------------------------------------------------------------------- */

static tc_sanitizer_race kind_of(bool write, const access *e)
{
    if (!write)
        return TC_SANITIZER_RACE_READ_AFTER_WRITE;
    return e->write ? TC_SANITIZER_RACE_WRITE_AFTER_WRITE : TC_SANITIZER_RACE_WRITE_AFTER_READ;
}

/* The region a span lies in (adopting unwatched memory when asked), with the
 * span clipped to it; NULL when the span is not watched. */
static region *span_region(const tc__span *sp, bool adopt, int x, const site *s, uintptr_t *lo,
                           uintptr_t *hi)
{
    region *r = tc__san_region_at(sp->lo);
    if (!r && adopt) {
        r = tc__san_region_new(sp->lo, sp->hi, tc__san_actors[x].dev, x, false, s);
        if (r)
            r->adopted = true;
    }
    if (!r)
        return NULL;
    *lo = sp->lo;
    *hi = sp->hi < r->end ? sp->hi : r->end;
    return r;
}

bool tc__san_span_merged(const tc__span *spans, int n, int i)
{
    const tc__span *s = &spans[i];
    for (int j = 0; j < n; j++) {
        const tc__span *o = &spans[j];
        if (j == i || o->lo > s->lo || o->hi < s->hi || (s->write && !o->write))
            continue;
        /* o covers s and writes whatever s does: s is part of o, unless both
         * are the same access, where the first one stands for the two */
        bool same = o->lo == s->lo && o->hi == s->hi && o->write == s->write;
        if (!same || j < i)
            return true;
    }
    return false;
}

/* Under mu: the report of a race of span sp (clipped to [lo, hi) of r) with
 * earlier access e, into reps. */
static void add_report(report_list *reps, const region *r, const tc__span *sp, uintptr_t lo, int x,
                       const site *cur, const access *e)
{
    pending *p = tc__san_reports_add(reps);
    if (!p)
        return; /* out of memory: counted, not shown */
    uintptr_t addr = e->lo > lo ? e->lo : lo;
    tc_sanitizer_race k = kind_of(sp->write, e);
    tc__san_fill_pending(p, k, r, addr, cur, &e->site, tc__san_race_text(k, r, sp, x, cur, e));
}

/* Under mu: the races of one span, into reps; returns how many. A read races
 * only with writes: the first one found is reported. A write is reported
 * with every read it races with, or, when it races with none, with the first
 * write it races with (PyTorch's rule: the reads since a write stand for it). */
static int check_span(const region *r, const tc__span *sp, uintptr_t lo, uintptr_t hi, int x,
                      const uint64_t *clock, const site *cur, report_list *reps, bool first_only)
{
    int found = 0, first_write = -1;
    for (int c = 0; (c = tc__san_next_conflict(r, c, x, clock, lo, hi, sp->write)) >= 0; c++) {
        const access *e = &r->acc[c];
        if (first_only || !sp->write) {
            add_report(reps, r, sp, lo, x, cur, e);
            return 1;
        }
        if (e->write) {
            if (first_write < 0)
                first_write = c;
            continue;
        }
        add_report(reps, r, sp, lo, x, cur, e);
        found++;
    }
    if (found == 0 && first_write >= 0) {
        add_report(reps, r, sp, lo, x, cur, &r->acc[first_write]);
        found = 1;
    }
    return found;
}

/* Under mu: checks an operation of actor x (whose clock, joined with the
 * stream it is queued after, is `clock`) against the earlier accesses to its
 * memory; every race found goes into reps (with first_only, the first race
 * ends the search). An operand the operation also names otherwise (read and
 * written, or read twice) is checked once. Returns how many were found. */
int tc__san_check_op(int x, const uint64_t *clock, const tc__span *spans, int n, bool adopt,
                     const site *cur, report_list *reps, bool first_only)
{
    int found = 0;
    for (int i = 0; i < n; i++) {
        if (tc__san_span_merged(spans, n, i))
            continue;
        uintptr_t lo, hi;
        region *r = span_region(&spans[i], adopt, x, cur, &lo, &hi);
        if (!r || lo >= hi)
            continue;
        found += check_span(r, &spans[i], lo, hi, x, clock, cur, reps, first_only);
        if (first_only && found)
            break;
    }
    return found;
}

/* Under mu: records an operation of actor x as its next epoch, after x
 * joins the clock of actor `after` (-1: none). */
void tc__san_record_op(int x, int after, const tc__span *spans, int n, const site *cur)
{
    if (after >= 0)
        tc__san_join_into(x, tc__san_actors[after].vc, tc__san_nactors);
    uint64_t epoch = ++tc__san_actors[x].vc[x];
    if (x == 0)
        tc__san_host_ver++;
    for (int i = 0; i < n; i++) {
        if (tc__san_span_merged(spans, n, i))
            continue;
        uintptr_t lo, hi;
        region *r = span_region(&spans[i], false, x, cur, &lo, &hi);
        if (r && lo < hi)
            tc__san_record_access(r, x, epoch, lo, hi, spans[i].write, cur);
    }
}

tc_status tc__san_access(const tc__access_op *op)
{
    if (!tc__san_on())
        return TC_OK;
    if (op->dev == TC__ACCESS_HOST && !op->adopt && atomic_load(&tc__san_host_regions) == 0)
        return TC_OK; /* host kernels touch nothing a stream also uses */
    if (tc__san_capture_access(op))
        return TC_OK; /* runs at each replay (graph capture, above) */
    site cur;
    tc__san_site_init(&cur, op->what, op->label);
    if (!tc__san_lock_on())
        return TC_OK;
    int mode = atomic_load(&tc__san_mode);
    int x = tc__san_actor_of(op->dev, op->stream);
    int after = op->after_set ? tc__san_actor_of(op->after_dev, op->after_stream) : -1;
    if (x < 0 || (op->after_set && after < 0)) {
        pthread_mutex_unlock(&tc__san_mu);
        return TC_OK; /* out of memory: not watched */
    }
    tc__san_sync_host(x);
    const uint64_t *clock = tc__san_actors[x].vc;
    if (after >= 0) {
        tc__san_sync_host(after);
        for (int i = 0; i < tc__san_nactors; i++)
            tc__san_scratch_vc[i] = clock[i] > tc__san_actors[after].vc[i]
                                        ? clock[i]
                                        : tc__san_actors[after].vc[i];
        clock = tc__san_scratch_vc;
    }
    report_list reps;
    tc__san_reports_init(&reps);
    bool error = mode == TC_SANITIZER_MODE_ERROR;
    int nrep = tc__san_check_op(x, clock, op->spans, op->n, op->adopt, &cur, &reps, error);
    if (nrep && error) {
        pthread_mutex_unlock(&tc__san_mu);
        return tc__san_refuse(&reps);
    }
    tc__san_record_op(x, after, op->spans, op->n, &cur);
    pthread_mutex_unlock(&tc__san_mu);
    tc__san_deliver_all(&reps, mode);
    return TC_OK;
}
