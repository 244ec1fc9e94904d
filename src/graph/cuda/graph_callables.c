/* Graphed callables (tc_make_graphed_callables): functions warmed up on
 * tcuda's side stream, then captured one by one into graphs that share a
 * pool; a call replays its graph. Callables are checked handles; destroyed
 * ones are parked in a handle pool. */
#include <stdio.h>
#include <stdlib.h>

#include "graph/graph_args.h"
#include "base/handle_pool.h"
#include "runtime/cuda/cuda_internal.h"
#include "graph_object.h"

#define TC_CALLABLE_MAGIC 0x7cca1171u

struct tc_graphed_callable {
    uint32_t magic;
    tc_graph *graph;
};

static tc__handle_pool callable_pool = TC_HANDLE_POOL_INIT(struct tc_graphed_callable);

/* Captures fn(ctx) into a new graph on the current stream (a side stream),
 * in pool `pool`; *out on success. fn's own error is returned as it is. */
static tc_status capture_one(tc_graph_fn fn, void *ctx, tc_stream *side, tc_graph_pool_id pool,
                             tc_graph_order order, tc_graph **out)
{
    tc_graph *g;
    TC_TRY(tc_graph_create(&g));
    tc_status st = tc_graph_set_order(g, order);
    if (st == TC_OK)
        st = tc_graph_capture_begin(g, pool, side, TC_CAPTURE_MODE_GLOBAL);
    tc_status fst = st == TC_OK ? fn(ctx) : st;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", tc_last_error());
    if (st == TC_OK)
        st = tc_graph_capture_end(g);
    if (fst != TC_OK || st != TC_OK) {
        if (fst == TC_OK)
            snprintf(msg, sizeof msg, "%s", tc_last_error());
        (void)tc_graph_destroy(g);
        return tc__fail(fst != TC_OK ? fst : st, "%s", msg);
    }
    *out = g;
    return TC_OK;
}

/* Warms every fn up on the side stream, then captures each in order into
 * graphs[i] sharing one pool. */
static tc_status warm_and_capture(int n, const tc_graph_fn *fns, void *const *ctxs, int warmup,
                                  tc_graph_order order, tc_graph **graphs)
{
    int d;
    TC_TRY(tc__resolve_device(-1, &d));
    tc_stream *side;
    TC_TRY(tc__graph_side_stream(d, &side));
    TC_TRY(tc_synchronize(d));
    tc_stream_guard sg = tc_stream_guard_enter(side);
    TC_TRY(sg.status);
    tc_status st = TC_OK;
    for (int i = 0; i < n && st == TC_OK; i++)
        for (int k = 0; k < warmup && st == TC_OK; k++)
            st = fns[i](ctxs ? ctxs[i] : NULL);
    if (st == TC_OK)
        st = tc_stream_synchronize(side);
    tc_graph_pool_id pool = {0};
    for (int i = 0; i < n && st == TC_OK; i++) {
        st = capture_one(fns[i], ctxs ? ctxs[i] : NULL, side, pool, order, &graphs[i]);
        if (st == TC_OK && i == 0)
            st = tc_graph_pool(graphs[0], &pool);
    }
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", tc_last_error());
    tc_stream_guard_exit(&sg);
    if (st != TC_OK) {
        for (int i = 0; i < n; i++)
            if (graphs[i])
                (void)tc_graph_destroy(graphs[i]);
        return tc__fail(st, "%s", msg);
    }
    return TC_OK;
}

tc_status tc_make_graphed_callables_ordered(const tc_graph_fn *fns, void *const *ctxs, int n,
                                            int warmup_iters, tc_graph_order order,
                                            tc_graphed_callable **out)
{
    TC_API_BEGIN;
    TC_TRY(tc__graphed_callables_check(fns, n, warmup_iters, order, out));
    TC_TRY(tc__ensure_init());
    tc_graph **graphs = calloc((size_t)n, sizeof *graphs);
    tc_graphed_callable **cs = calloc((size_t)n, sizeof *cs);
    tc_status st = graphs && cs ? TC_OK : tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
    for (int i = 0; i < n && st == TC_OK; i++) {
        cs[i] = tc__handle_get(&callable_pool);
        if (!cs[i])
            st = tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory for a callable");
    }
    if (st == TC_OK)
        st = warm_and_capture(n, fns, ctxs, warmup_iters, order, graphs);
    for (int i = 0; i < n && cs; i++) {
        if (!cs[i])
            continue;
        if (st == TC_OK) {
            cs[i]->magic = TC_CALLABLE_MAGIC;
            cs[i]->graph = graphs[i];
            out[i] = cs[i];
        } else {
            tc__handle_put(&callable_pool, cs[i]);
        }
    }
    free(graphs);
    free(cs);
    return st;
}

tc_status tc_make_graphed_callables(const tc_graph_fn *fns, void *const *ctxs, int n,
                                    int warmup_iters, tc_graphed_callable **out)
{
    TC_API_BEGIN;
    return tc_make_graphed_callables_ordered(fns, ctxs, n, warmup_iters, TC_GRAPH_ORDER_STREAM,
                                             out);
}

tc_status tc_make_graphed_callable(tc_graph_fn fn, void *ctx, int warmup_iters,
                                   tc_graphed_callable **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(fn, "fn is NULL");
    void *ctxs[1] = {ctx};
    return tc_make_graphed_callables(&fn, ctxs, 1, warmup_iters, out);
}

static tc_status check_callable(const tc_graphed_callable *c)
{
    return tc__handle_check(c, TC_CALLABLE_MAGIC, "tc_graphed_callable");
}

tc_status tc_graphed_callable_call(tc_graphed_callable *callable)
{
    TC_API_BEGIN;
    TC_TRY(check_callable(callable));
    return tc_graph_replay(callable->graph);
}

tc_graph *tc_graphed_callable_graph(const tc_graphed_callable *callable)
{
    return tc__handle_live(callable, TC_CALLABLE_MAGIC) ? callable->graph : NULL;
}

tc_status tc_graphed_callable_destroy(tc_graphed_callable *callable)
{
    TC_API_BEGIN;
    TC_TRY(check_callable(callable));
    tc_status st = tc_graph_destroy(callable->graph);
    tc__handle_put(&callable_pool, callable);
    return st;
}
