/* The stream sanitizer's ordering: actors (streams and the host), their
 * vector clocks, events, and the happens-before hooks src/cuda calls at
 * synchronization points.
 *
 * Happens-before is FastTrack-style vector clocks. Each actor (a stream, or
 * the host, actor 0) has a clock vc: vc[x] is the latest epoch of actor x
 * that this actor is ordered after. An access by actor X gets the epoch
 * vc[X][X] + 1. Event record copies the stream's clock into the event; a wait
 * (event wait, wait_stream) joins it into the waiting stream's; a host
 * synchronize joins the stream's (event's, device's) into the host's. Work
 * the host queues is ordered after everything the host knows: a stream joins
 * the host clock before each access (only when it changed, counted by
 * host_ver). An earlier access (Y, e) is ordered before the current one of X
 * iff vc[X][Y] >= e.
 *
 * Everything here is under the engine's mutex (tc__san_mu). */
#define _GNU_SOURCE
#include <search.h>
#include <stdlib.h>
#include <string.h>

#include "sanitizer_engine.h"

actor *tc__san_actors;
int tc__san_nactors;
static int actors_cap, vc_cap;
uint64_t tc__san_host_ver = 1;
uint64_t *tc__san_scratch_vc; /* vc_cap entries, for a clock joined only to check */
static int last_actor;

static bool grow_clocks(void)
{
    int cap = vc_cap ? vc_cap * 2 : 8;
    for (int i = 0; i < tc__san_nactors; i++) {
        uint64_t *v = realloc(tc__san_actors[i].vc, sizeof(uint64_t) * (size_t)cap);
        if (!v)
            return false;
        memset(v + vc_cap, 0, sizeof(uint64_t) * (size_t)(cap - vc_cap));
        tc__san_actors[i].vc = v;
    }
    uint64_t *s = realloc(tc__san_scratch_vc, sizeof(uint64_t) * (size_t)cap);
    if (!s)
        return false;
    tc__san_scratch_vc = s;
    vc_cap = cap;
    return true;
}

/* The actor of a stream (created on first sight); -1 when memory ran out. */
int tc__san_actor_of(int dev, void *handle)
{
    if (dev == TC__ACCESS_HOST)
        return 0;
    if (last_actor > 0 && last_actor < tc__san_nactors &&
        tc__san_actors[last_actor].handle == handle && tc__san_actors[last_actor].dev == dev)
        return last_actor;
    for (int i = 1; i < tc__san_nactors; i++)
        if (tc__san_actors[i].handle == handle && tc__san_actors[i].dev == dev)
            return last_actor = i;
    if (tc__san_nactors == actors_cap) {
        int cap = actors_cap ? actors_cap * 2 : 8;
        actor *a = realloc(tc__san_actors, sizeof *a * (size_t)cap);
        if (!a)
            return -1;
        tc__san_actors = a;
        actors_cap = cap;
    }
    if (tc__san_nactors == vc_cap && !grow_clocks())
        return -1;
    uint64_t *vc = calloc((size_t)vc_cap, sizeof(uint64_t));
    if (!vc)
        return -1;
    tc__san_actors[tc__san_nactors] = (actor){
        .dev = dev, .handle = handle, .vc = vc, .host_ver = 0};
    return last_actor = tc__san_nactors++;
}

/* Makes the host actor (0) on first use; false when memory ran out. */
bool tc__san_engine_ready(void)
{
    if (tc__san_nactors)
        return true;
    if (!vc_cap && !grow_clocks())
        return false;
    if (!actors_cap) {
        tc__san_actors = malloc(sizeof *tc__san_actors * 8);
        if (!tc__san_actors)
            return false;
        actors_cap = 8;
    }
    uint64_t *vc = calloc((size_t)vc_cap, sizeof(uint64_t));
    if (!vc)
        return false;
    tc__san_actors[0] = (actor){.dev = TC__ACCESS_HOST, .handle = NULL, .vc = vc, .host_ver = 0};
    tc__san_nactors = 1;
    return true;
}

/* Joins src (n entries) into actor dst's clock. */
void tc__san_join_into(int dst, const uint64_t *src, int n)
{
    uint64_t *d = tc__san_actors[dst].vc;
    for (int i = 0; i < n; i++)
        if (src[i] > d[i])
            d[i] = src[i];
    if (dst == 0)
        tc__san_host_ver++;
}

/* Stream a is ordered after everything the host knows (work the host queues
 * now starts after it). */
void tc__san_sync_host(int a)
{
    if (a > 0 && tc__san_actors[a].host_ver != tc__san_host_ver) {
        tc__san_join_into(a, tc__san_actors[0].vc, tc__san_nactors);
        tc__san_actors[a].host_ver = tc__san_host_ver;
    }
}

/* ---- events ----------------------------------------------------------------- */

typedef struct evsnap {
    const void *key;
    int n;
    uint64_t *vc;
} evsnap;

static void *events; /* tsearch tree of evsnap */
static size_t nevents;

static int cmp_event(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const evsnap *)a)->key, y = (uintptr_t)((const evsnap *)b)->key;
    return x < y ? -1 : x > y;
}

static evsnap *event_find(const void *key)
{
    evsnap probe = {.key = key};
    void *node = tfind(&probe, &events, cmp_event);
    return node ? *(evsnap **)node : NULL;
}

static void event_free(void *p)
{
    evsnap *e = p;
    free(e->vc);
    free(e);
}

void tc__san_clocks_forget(void)
{
    tdestroy(events, event_free);
    events = NULL;
    nevents = 0;
    for (int i = 0; i < tc__san_nactors; i++)
        free(tc__san_actors[i].vc);
    tc__san_nactors = 0;
    last_actor = 0;
}

size_t tc__san_clocks_bytes(void)
{
    size_t b = sizeof(actor) * (size_t)actors_cap +
               sizeof(uint64_t) * (size_t)vc_cap * (size_t)(tc__san_nactors + 1);
    /* events: their clocks are at most as long as the actor list */
    b += nevents * (sizeof(evsnap) + sizeof(uint64_t) * (size_t)tc__san_nactors);
    return b;
}

/* ---- happens-before hooks ------------------------------------------------------- */

void tc__san_stream_wait_stream(int dev, void *stream, int other_dev, void *other)
{
    if (!tc__san_lock_on())
        return;
    int s = tc__san_actor_of(dev, stream), o = tc__san_actor_of(other_dev, other);
    if (s >= 0 && o >= 0 && s != o) {
        tc__san_sync_host(o);
        tc__san_join_into(s, tc__san_actors[o].vc, tc__san_nactors);
    }
    pthread_mutex_unlock(&tc__san_mu);
}

void tc__san_event_record(const void *key, int dev, void *stream)
{
    if (!tc__san_lock_on())
        return;
    int s = tc__san_actor_of(dev, stream);
    evsnap *e = event_find(key);
    if (s >= 0 && !e && (e = calloc(1, sizeof *e))) {
        e->key = key;
        if (tsearch(e, &events, cmp_event))
            nevents++;
        else {
            free(e);
            e = NULL;
        }
    }
    if (s >= 0 && e) {
        tc__san_sync_host(s);
        uint64_t *vc = e->n >= tc__san_nactors
                           ? e->vc
                           : realloc(e->vc, sizeof(uint64_t) * (size_t)tc__san_nactors);
        if (vc) {
            memcpy(vc, tc__san_actors[s].vc, sizeof(uint64_t) * (size_t)tc__san_nactors);
            if (e->n < tc__san_nactors)
                e->n = tc__san_nactors;
            else
                memset(vc + tc__san_nactors, 0,
                       sizeof(uint64_t) * (size_t)(e->n - tc__san_nactors));
            e->vc = vc;
        }
    }
    pthread_mutex_unlock(&tc__san_mu);
}

void tc__san_event_wait(const void *key, int dev, void *stream)
{
    if (!tc__san_lock_on())
        return;
    int s = tc__san_actor_of(dev, stream);
    const evsnap *e = event_find(key);
    if (s >= 0 && e)
        tc__san_join_into(s, e->vc, e->n);
    pthread_mutex_unlock(&tc__san_mu);
}

void tc__san_event_sync(const void *key)
{
    if (!tc__san_lock_on())
        return;
    const evsnap *e = event_find(key);
    if (e)
        tc__san_join_into(0, e->vc, e->n);
    pthread_mutex_unlock(&tc__san_mu);
}

void tc__san_event_destroy(const void *key)
{
    if (!tc__san_lock_on())
        return;
    evsnap *e = event_find(key);
    if (e) {
        tdelete(e, &events, cmp_event);
        nevents--;
        event_free(e);
    }
    pthread_mutex_unlock(&tc__san_mu);
}

void tc__san_stream_sync(int dev, void *stream)
{
    if (!tc__san_lock_on())
        return;
    int s = tc__san_actor_of(dev, stream);
    if (s > 0) {
        tc__san_sync_host(s);
        tc__san_join_into(0, tc__san_actors[s].vc, tc__san_nactors);
    }
    pthread_mutex_unlock(&tc__san_mu);
}

void tc__san_device_sync(int dev)
{
    if (!tc__san_lock_on())
        return;
    for (int s = 1; s < tc__san_nactors; s++)
        if (tc__san_actors[s].dev == dev)
            tc__san_join_into(0, tc__san_actors[s].vc, tc__san_nactors);
    pthread_mutex_unlock(&tc__san_mu);
}
