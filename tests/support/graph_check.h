/* Shared by test_graph and test_graph_order: the check of a call's message,
 * a function that queues nothing, float32 values in [-2, 2) for a graph's
 * static inputs, copied in before a replay, and the outputs a captured
 * function hands back. Static inline: each test program takes what it
 * uses. */
#ifndef TC_GRAPH_CHECK_H
#define TC_GRAPH_CHECK_H

#include <string.h>

#include "tc_test.h"

/* The last message starts with `fn` ": " and contains `what`. */
static inline bool says(const char *fn, const char *what)
{
    const char *m = tc_last_error();
    size_t n = strlen(fn);
    return strncmp(m, fn, n) == 0 && m[n] == ':' && strstr(m, what) != NULL;
}

static inline tc_status nothing(void *ctx)
{
    (void)ctx;
    return TC_OK;
}

static inline void fill_random(float *v, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)(tc_test_rand_uniform() * 4.0 - 2.0);
}

/* Copies new random values into the static tensor t (float32, on a GPU);
 * host gets them. */
static inline void refill(tc_tensor *t, float *host)
{
    fill_random(host, tc_tensor_numel(t));
    tc_tensor *src;
    CHECK_OK(tc_tensor_from_data(host, tc_tensor_ndim(t), tc_tensor_sizes(t), TC_FLOAT32,
                                 (tc_device){TC_CPU, -1}, &src));
    CHECK_OK(tc_tensor_copy_(t, src, false));
    tc_tensor_release(src);
}

/* Puts t in *slot, releasing what was there. */
static inline void set_out(tc_tensor **slot, tc_tensor *t)
{
    if (*slot)
        tc_tensor_release(*slot);
    *slot = t;
}

#endif
