/* CUDA graphs in a build without CUDA (see src/nocuda/runtime.c for the rules):
 * arguments are checked first (a NULL out-parameter or function is
 * TC_ERROR_INVALID_ARGUMENT; no graph or callable can exist here, so any
 * non-NULL handle is TC_ERROR_INVALID_HANDLE), then every call answers
 * TC_ERROR_NO_DEVICE with a message that starts with the call's name. */
#include <string.h>

#include "graph/graph_args.h"
#include "nocuda.h"
#include "base/handle_pool.h"
#include "base/internal.h"
#include "tcuda/graph.h"

static tc_status graph_arg(const tc_graph *g) { return tc__handle_fail(g, 0, "tc_graph"); }

static tc_status callable_arg(const tc_graphed_callable *c)
{
    return tc__handle_fail(c, 0, "tc_graphed_callable");
}

tc_status tc_graph_create(tc_graph **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    return tc__nocuda();
}

tc_status tc_graph_destroy(tc_graph *graph)
{
    TC_API_BEGIN;
    return graph_arg(graph);
}

tc_status tc_graph_capture_begin(tc_graph *graph, tc_graph_pool_id pool, tc_stream *stream,
                                 tc_capture_mode mode)
{
    TC_API_BEGIN;
    (void)pool, (void)stream, (void)mode;
    return graph_arg(graph);
}

tc_status tc_graph_set_order(tc_graph *graph, tc_graph_order order)
{
    TC_API_BEGIN;
    (void)order;
    return graph_arg(graph);
}

tc_status tc_graph_capture_end(tc_graph *graph)
{
    TC_API_BEGIN;
    return graph_arg(graph);
}

tc_status tc_graph_replay(tc_graph *graph)
{
    TC_API_BEGIN;
    return graph_arg(graph);
}

tc_status tc_graph_reset(tc_graph *graph)
{
    TC_API_BEGIN;
    return graph_arg(graph);
}

tc_status tc_graph_pool(const tc_graph *graph, tc_graph_pool_id *out)
{
    TC_API_BEGIN;
    (void)out;
    return graph_arg(graph);
}

tc_status tc_graph_debug_dump(const tc_graph *graph, const char *path)
{
    TC_API_BEGIN;
    (void)path;
    return graph_arg(graph);
}

tc_status tc_graph_pool_handle(tc_graph_pool_id *out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(out, "out is NULL");
    return tc__nocuda();
}

bool tc_is_current_stream_capturing(void) { return false; }

tc_status tc_graph_update(tc_graph *graph, tc_graph_fn fn, void *ctx, tc_graph_update_result *how)
{
    TC_API_BEGIN;
    (void)fn, (void)ctx, (void)how;
    return graph_arg(graph);
}

tc_graph_capture_guard tc_graph_capture_guard_enter(tc_graph *graph, tc_graph_pool_id pool,
                                                    tc_stream *stream, tc_capture_mode mode)
{
    TC_API_BEGIN;
    (void)pool, (void)stream, (void)mode;
    tc_graph_capture_guard g;
    memset(&g, 0, sizeof g);
    g.status = graph_arg(graph);
    return g;
}

tc_status tc_graph_capture_guard_exit(tc_graph_capture_guard *guard)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(guard, "guard is NULL");
    return guard->status;
}

tc_status tc_make_graphed_callable(tc_graph_fn fn, void *ctx, int warmup_iters,
                                   tc_graphed_callable **out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(fn, "fn is NULL"); /* then as the list of one, as with CUDA */
    void *ctxs[1] = {ctx};
    return tc_make_graphed_callables(&fn, ctxs, 1, warmup_iters, out);
}

tc_status tc_make_graphed_callables_ordered(const tc_graph_fn *fns, void *const *ctxs, int n,
                                            int warmup_iters, tc_graph_order order,
                                            tc_graphed_callable **out)
{
    TC_API_BEGIN;
    (void)ctxs;
    TC_TRY(tc__graphed_callables_check(fns, n, warmup_iters, order, out));
    return tc__nocuda();
}

tc_status tc_make_graphed_callables(const tc_graph_fn *fns, void *const *ctxs, int n,
                                    int warmup_iters, tc_graphed_callable **out)
{
    TC_API_BEGIN;
    return tc_make_graphed_callables_ordered(fns, ctxs, n, warmup_iters, TC_GRAPH_ORDER_STREAM,
                                             out);
}

tc_status tc_graphed_callable_call(tc_graphed_callable *callable)
{
    TC_API_BEGIN;
    return callable_arg(callable);
}

tc_graph *tc_graphed_callable_graph(const tc_graphed_callable *callable)
{
    (void)callable;
    return NULL;
}

tc_status tc_graphed_callable_destroy(tc_graphed_callable *callable)
{
    TC_API_BEGIN;
    return callable_arg(callable);
}
