/* Memory history's notes beside the events: the user's metadata and the
 * external annotations.
 *
 * Metadata (tc_memory_set_history_metadata, PyTorch's
 * _set_memory_metadata) keeps events fixed-size: each distinct string is
 * kept once in a table, and tc__hist_meta holds the id of the current one,
 * which tc__hist_record stamps on every event with one relaxed load. Id 0
 * is "", and is never in the table. The table grows by one entry per
 * distinct string set during a recording (at most MAX_STRINGS) and is
 * rebuilt holding only the current string when recording (re)starts, once
 * every ring is empty and nothing records. An event that races a restart
 * may carry an id of the old table: a lookup (tc__hist_copy_meta) checks
 * every id against the copy's table, so such an event shows another string
 * of the new table or "", never reads out of bounds.
 *
 * Annotations (tc__hist_annotate, from the runtime's NVTX ranges) are a
 * ring of their own, bounded by max_entries like each allocator's events
 * (the oldest dropped), emptied when recording (re)starts and kept when it
 * stops. Their time is read under the lock, so the ring is in time order.
 *
 * One mutex (nmu) guards both; it is the last in the history's order of
 * locks (alloc_history.h): nothing is taken under it. */
#include <stdlib.h>
#include <string.h>

#include "alloc_history.h"
#include "tcuda/memory.h"

#define MAX_LEN 4096       /* bytes of a metadata string, as documented */
#define MAX_STRINGS 65536u /* distinct metadata strings in one recording */

atomic_uint tc__hist_meta;

static pthread_mutex_t nmu = PTHREAD_MUTEX_INITIALIZER;

/* The metadata table: strs[id] for 1 <= id < nstrs (strs[0] unused). */
static char **strs;
static size_t nstrs, cap_strs;
static uint32_t cur; /* the current id, as tc__hist_meta (written under nmu) */

/* The ring of annotations: at most nmax, ncap slots now, the oldest at head. */
static tc__hist_note *ring;
static size_t ncap, nmax, head, nnotes;

/* ---- metadata ------------------------------------------------------------------ */

/* The id of s (len bytes, not ""), added to the table if new (nmu held). */
static tc_status intern(const char *s, uint32_t *id)
{
    for (size_t i = 1; i < nstrs; i++)
        if (strcmp(strs[i], s) == 0) {
            *id = (uint32_t)i;
            return TC_OK;
        }
    size_t n = nstrs ? nstrs : 1; /* slot 0 stays unused */
    if (n >= MAX_STRINGS)
        return tc__fail(TC_ERROR_INVALID_STATE,
                        "%u distinct metadata strings were set since recording started, the "
                        "most; starting the recording again clears them",
                        MAX_STRINGS - 1);
    if (n + 1 > cap_strs) {
        size_t nc = cap_strs ? cap_strs * 2 : 16;
        char **t = realloc(strs, nc * sizeof *t);
        if (!t)
            return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory keeping the metadata");
        strs = t;
        cap_strs = nc;
    }
    char *copy = strdup(s);
    if (!copy)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory keeping the metadata");
    strs[0] = NULL;
    strs[n] = copy;
    nstrs = n + 1;
    *id = (uint32_t)n;
    return TC_OK;
}

tc_status tc_memory_set_history_metadata(const char *metadata)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(metadata != NULL, "metadata is NULL");
    TC_CHECK_ARG(strnlen(metadata, MAX_LEN + 1) <= MAX_LEN, "metadata is longer than %d bytes",
                 MAX_LEN);
    uint32_t id = 0;
    tc_status st = TC_OK;
    pthread_mutex_lock(&nmu);
    if (*metadata)
        st = intern(metadata, &id);
    if (st == TC_OK) {
        cur = id;
        atomic_store_explicit(&tc__hist_meta, id, memory_order_relaxed);
    }
    pthread_mutex_unlock(&nmu);
    return st;
}

tc_status tc_memory_get_history_metadata(char *buf, size_t size)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(buf != NULL, "buf is NULL");
    pthread_mutex_lock(&nmu);
    const char *s = cur && cur < nstrs ? strs[cur] : "";
    size_t len = strlen(s);
    bool fits = len < size;
    if (fits)
        memcpy(buf, s, len + 1);
    pthread_mutex_unlock(&nmu);
    TC_CHECK_ARG(fits, "the metadata (%zu bytes and its NUL) does not fit in %zu bytes", len, size);
    return TC_OK;
}

/* ---- annotations --------------------------------------------------------------- */

void tc__hist_annotate(const char *name, bool start, int device)
{
    if (!tc__hist_recording() || !name)
        return;
    char *copy = strdup(name), *dropped = NULL;
    if (!copy)
        return;
    pthread_mutex_lock(&nmu);
    if (tc__hist_recording() && nmax) {
        if (nnotes == ncap && ncap < nmax && head == 0) {
            size_t nc = ncap ? ncap * 2 : 256;
            nc = nc < nmax ? nc : nmax;
            tc__hist_note *r = realloc(ring, nc * sizeof *r);
            if (r) {
                ring = r;
                ncap = nc;
            }
        }
        tc__hist_note n = {tc__hist_now_us(), copy, device, start};
        if (nnotes < ncap) {
            ring[(head + nnotes) % ncap] = n;
            nnotes++;
            copy = NULL;
        } else if (ncap) { /* full: the oldest goes */
            dropped = ring[head].name;
            ring[head] = n;
            head = (head + 1) % ncap;
            copy = NULL;
        }
    }
    pthread_mutex_unlock(&nmu);
    free(copy); /* not kept: off, or no ring could be had */
    free(dropped);
}

/* ---- restart and the copy ------------------------------------------------------ */

void tc__hist_notes_restart(size_t max)
{
    pthread_mutex_lock(&nmu);
    for (size_t i = 0; i < nnotes; i++)
        free(ring[(head + i) % ncap].name);
    head = nnotes = 0;
    if (ncap > max) {
        free(ring);
        ring = NULL;
        ncap = 0;
    }
    nmax = max;
    for (size_t i = 1; i < nstrs; i++) /* keep only the current string, as id 1 */
        if (i != cur)
            free(strs[i]);
    if (cur && cur < nstrs) {
        strs[1] = strs[cur];
        nstrs = 2;
        cur = 1;
    } else {
        nstrs = 0;
        cur = 0;
    }
    atomic_store_explicit(&tc__hist_meta, cur, memory_order_relaxed);
    pthread_mutex_unlock(&nmu);
}

/* Copies the strings c's events use (the others stay NULL: ""), so a dump
 * copies no more than its events name. */
bool tc__hist_notes_copy(tc__hist_copy *c)
{
    bool ok = true;
    pthread_mutex_lock(&nmu);
    c->meta = calloc(nstrs ? nstrs : 1, sizeof *c->meta);
    c->notes = calloc(nnotes ? nnotes : 1, sizeof *c->notes);
    ok = c->meta && c->notes;
    if (ok)
        c->nmeta = nstrs;
    for (size_t i = 0; ok && i < c->nev; i++) {
        uint32_t id = c->ev[i].meta;
        if (id && id < nstrs && !c->meta[id])
            ok = (c->meta[id] = strdup(strs[id])) != NULL;
    }
    for (size_t i = 0; ok && i < nnotes; i++) {
        c->notes[i] = ring[(head + i) % ncap];
        c->notes[i].name = strdup(c->notes[i].name);
        ok = c->notes[i].name != NULL;
        c->nnotes = i + 1;
    }
    pthread_mutex_unlock(&nmu);
    if (!ok)
        tc__hist_notes_free(c);
    return ok;
}

void tc__hist_notes_free(tc__hist_copy *c)
{
    for (size_t i = 0; c->meta && i < c->nmeta; i++)
        free(c->meta[i]);
    for (size_t i = 0; c->notes && i < c->nnotes; i++)
        free(c->notes[i].name);
    free(c->meta);
    free(c->notes);
    c->meta = NULL;
    c->notes = NULL;
    c->nmeta = c->nnotes = 0;
}

const char *tc__hist_copy_meta(const tc__hist_copy *c, uint32_t meta)
{
    return meta && meta < c->nmeta && c->meta[meta] ? c->meta[meta] : "";
}
