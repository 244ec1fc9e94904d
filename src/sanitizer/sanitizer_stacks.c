/* The stream sanitizer's call sites: the site record of each access and
 * allocation (public call, kind, label, stack) and the interned stacks the
 * reports print.
 *
 * Call stacks: backtrace() costs microseconds, so a stack is kept once per
 * call site: the public call (tc__api_name) and the return address into its
 * caller (tc__api_caller) name a site; its first capture is interned and
 * reused (deeper frames are those of the first time the line ran). At most
 * MAX_STACKS are interned, under their own mutex (stack_mu), which is taken
 * without the engine's; stacks are captured outside the engine's mutex. */
#define _GNU_SOURCE
#include <execinfo.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "sanitizer_engine.h"

#define MAX_FRAMES 24
#define MAX_STACKS 65536
#define STACK_BUCKETS 4096

/* ---- call stacks ------------------------------------------------------------ */

typedef struct san_stack {
    struct san_stack *next;
    const char *api;
    const void *caller;
    uint64_t hash;
    int n;
    void *frames[MAX_FRAMES];
    char **symbols; /* backtrace_symbols of frames, made for the first report */
} san_stack;

static pthread_mutex_t stack_mu = PTHREAD_MUTEX_INITIALIZER;
static san_stack *stack_tab[STACK_BUCKETS];
static size_t nstacks;
static san_stack no_stack; /* n == 0: "not kept" */
/* Interned stacks and their symbols live for the process (at most MAX_STACKS). */

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static bool same_stack(const san_stack *s, const char *api, const void *caller, int n,
                       void *const *frames)
{
    if (caller)
        return s->api == api && s->caller == caller;
    return !s->caller && s->n == n && memcmp(s->frames, frames, sizeof(void *) * (size_t)n) == 0;
}

static const san_stack *stack_find(uint64_t h, const char *api, const void *caller, int n,
                                   void *const *frames)
{
    for (san_stack *s = stack_tab[h % STACK_BUCKETS]; s; s = s->next)
        if (s->hash == h && same_stack(s, api, caller, n, frames))
            return s;
    return NULL;
}

/* The interned stack of the current call site. */
__attribute__((noinline)) const san_stack *tc__san_capture_stack(void)
{
    const char *api = tc__api_name;
    const void *caller = api ? tc__api_caller : NULL;
    uint64_t h = mix(mix(0, (uintptr_t)api), (uintptr_t)caller);
    const san_stack *found = NULL;
    if (caller) {
        pthread_mutex_lock(&stack_mu);
        found = stack_find(h, api, caller, 0, NULL);
        pthread_mutex_unlock(&stack_mu);
        if (found)
            return found;
    }
    void *frames[MAX_FRAMES];
    int n = backtrace(frames, MAX_FRAMES);
    if (!caller)
        for (int i = 0; i < n; i++)
            h = mix(h, (uintptr_t)frames[i]);
    pthread_mutex_lock(&stack_mu);
    found = stack_find(h, api, caller, n, frames);
    if (!found && nstacks < MAX_STACKS) {
        san_stack *s = malloc(sizeof *s);
        if (s) {
            *s = (san_stack){.next = stack_tab[h % STACK_BUCKETS],
                             .api = api,
                             .caller = caller,
                             .hash = h,
                             .n = n};
            memcpy(s->frames, frames, sizeof(void *) * (size_t)n);
            stack_tab[h % STACK_BUCKETS] = s;
            nstacks++;
            found = s;
        }
    }
    pthread_mutex_unlock(&stack_mu);
    return found ? found : &no_stack;
}

void tc__san_put_stack(tc__strbuf *t, const san_stack *st)
{
    if (!st || st->n == 0) {
        tc__strbuf_printf(t, "        (call stack not kept: too many distinct call sites)\n");
        return;
    }
    /* Start at the public call's frame: the one before the return address
     * into its caller, when the site has one; else after this file's frames. */
    int first = st->n > 2 ? 2 : 0;
    for (int i = 0; i < st->n; i++)
        if (st->caller && st->frames[i] == st->caller) {
            first = i > 0 ? i - 1 : 0;
            break;
        }
    pthread_mutex_lock(&stack_mu);
    san_stack *w = (san_stack *)st;
    if (!w->symbols)
        w->symbols = backtrace_symbols((void *const *)w->frames, w->n);
    char **sym = w->symbols;
    pthread_mutex_unlock(&stack_mu);
    for (int i = first; i < st->n; i++) {
        if (sym)
            tc__strbuf_printf(t, "        #%d %s\n", i - first, sym[i]);
        else
            tc__strbuf_printf(t, "        #%d %p\n", i - first, st->frames[i]);
    }
}

void tc__san_site_init(site *s, const char *what, const char *label)
{
    s->op = tc__api_name;
    s->what = what;
    s->stack = tc__san_capture_stack();
    size_t i = 0; /* a plain copy: this runs on every watched operation */
    for (; label && label[i] && i + 1 < sizeof s->label; i++)
        s->label[i] = label[i];
    s->label[i] = '\0';
}
