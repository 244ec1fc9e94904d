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

/* Under mu: checks an operation of actor x (whose clock, joined with the
 * stream it is queued after, is `clock`) against the earlier accesses to its
 * memory; the races found go into reps (at most max; with first_only, the
 * first race ends the search). Returns how many. */
int tc__san_check_op(int x, const uint64_t *clock, const tc__span *spans, int n, bool adopt,
                     const site *cur, pending *reps, int max, bool first_only)
{
    int nrep = 0;
    for (int i = 0; i < n && nrep < max; i++) {
        uintptr_t lo, hi;
        region *r = span_region(&spans[i], adopt, x, cur, &lo, &hi);
        if (!r || lo >= hi)
            continue;
        int c = tc__san_find_conflict(r, x, clock, lo, hi, spans[i].write);
        if (c < 0)
            continue;
        const access *e = &r->acc[c];
        uintptr_t addr = e->lo > lo ? e->lo : lo;
        tc_sanitizer_race k = kind_of(spans[i].write, e);
        tc__san_fill_pending(&reps[nrep++], k, r, addr, cur, &e->site,
                             tc__san_race_text(k, r, &spans[i], x, cur, e));
        if (first_only)
            break;
    }
    return nrep;
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
    pending reps[MAX_REPORTS_PER_OP];
    bool error = mode == TC_SANITIZER_MODE_ERROR;
    int nrep = tc__san_check_op(x, clock, op->spans, op->n, op->adopt, &cur, reps,
                                MAX_REPORTS_PER_OP, error);
    if (nrep && error) {
        pthread_mutex_unlock(&tc__san_mu);
        return tc__san_refuse(&reps[0]);
    }
    tc__san_record_op(x, after, op->spans, op->n, &cur);
    pthread_mutex_unlock(&tc__san_mu);
    tc__san_deliver_all(reps, nrep, mode);
    return TC_OK;
}
