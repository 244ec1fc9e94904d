/* The per-thread range depth behind tc_nvtx_range_push/pop, shared by the
 * NVTX build (nvtx.c) and the one without CUDA (nocuda/nvtx.c), so push and
 * pop return the same depths whether or not a tool listens. Not installed.
 *
 * The ranges are also the memory history's annotations (PyTorch's
 * record_function): while the history records, a push records START with
 * the range's name and a pop END with the name pushed. For that the thread
 * keeps a stack of names, one slot per open range: a copy of the name when
 * it was pushed while recording, else NULL (such a range records no END,
 * even if recording started meanwhile; one pushed while recording records
 * its END only if recording is still on). The stack is allocated by the
 * first push while recording and freed when the thread's last range
 * closes, so nothing is allocated while the history is off; a thread that
 * exits with ranges open leaks their names and the stack. */
#ifndef TCUDA_NVTX_DEPTH_H
#define TCUDA_NVTX_DEPTH_H

#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "memory/alloc_history_notes.h"

static _Thread_local int tc__nvtx_depth;
static _Thread_local char **tc__nvtx_names; /* slot d: range d's name, or NULL */
static _Thread_local int tc__nvtx_names_cap;

/* Keeps range d's name (a copy) and records its START on device(). A name
 * that cannot be kept (out of host memory) records nothing. */
static inline void tc__nvtx_note_push(const char *message, int d, int (*device)(void))
{
    if (d >= tc__nvtx_names_cap) {
        int nc = tc__nvtx_names_cap ? tc__nvtx_names_cap * 2 : 16;
        while (nc <= d)
            nc *= 2;
        char **t = realloc(tc__nvtx_names, (size_t)nc * sizeof *t);
        if (!t)
            return;
        memset(t + tc__nvtx_names_cap, 0, (size_t)(nc - tc__nvtx_names_cap) * sizeof *t);
        tc__nvtx_names = t;
        tc__nvtx_names_cap = nc;
    }
    tc__nvtx_names[d] = strdup(message);
    if (tc__nvtx_names[d])
        tc__hist_annotate(message, true, device());
}

/* Range d closed: records its END if it has a name and the history records,
 * and forgets the name; frees the stack when no range is open. */
static inline void tc__nvtx_note_pop(int d, int (*device)(void))
{
    if (d >= tc__nvtx_names_cap)
        return;
    char *name = tc__nvtx_names[d];
    tc__nvtx_names[d] = NULL;
    if (name && tc__hist_recording())
        tc__hist_annotate(name, false, device());
    free(name);
    if (d == 0) {
        free(tc__nvtx_names);
        tc__nvtx_names = NULL;
        tc__nvtx_names_cap = 0;
    }
}

/* Counts a push of `message`; the depth before it into *depth (if not NULL).
 * While the history records, notes the range (device() names its device).
 * TC_ERROR_INVALID_ARGUMENT for a NULL message. */
static inline tc_status tc__nvtx_depth_push(const char *message, int *depth, int (*device)(void))
{
    if (!message)
        return tc__fail(TC_ERROR_INVALID_ARGUMENT, "tc_nvtx_range_push: message is NULL");
    int d = tc__nvtx_depth++;
    if (TC_UNLIKELY(tc__hist_recording()))
        tc__nvtx_note_push(message, d, device);
    else if (d < tc__nvtx_names_cap)
        tc__nvtx_names[d] = NULL;
    if (depth)
        *depth = d;
    return TC_OK;
}

/* Counts a pop; the depth after it into *depth (if not NULL).
 * TC_ERROR_INVALID_STATE when no range is open. */
static inline tc_status tc__nvtx_depth_pop(int *depth, int (*device)(void))
{
    if (tc__nvtx_depth == 0)
        return tc__fail(TC_ERROR_INVALID_STATE,
                        "tc_nvtx_range_pop: no range is open on this thread");
    int d = --tc__nvtx_depth;
    if (TC_UNLIKELY(tc__nvtx_names != NULL))
        tc__nvtx_note_pop(d, device);
    if (depth)
        *depth = d;
    return TC_OK;
}

#endif
