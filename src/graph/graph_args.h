/* The argument checks of graph.h's calls that are more than a NULL check,
 * shared by their implementations (graph/cuda) and the stand-ins of a
 * build without CUDA (nocuda/graph.c), so that both answer bad input
 * alike. Not installed. */
#ifndef TCUDA_GRAPH_ARGS_H
#define TCUDA_GRAPH_ARGS_H

#include "base/internal.h"
#include "tcuda/graph.h"

/* tc_make_graphed_callables(_ordered): 1 to 1024 functions, none NULL, a
 * warm-up count >= 0, a known order and out. */
static inline tc_status tc__graphed_callables_check(const tc_graph_fn *fns, int n, int warmup_iters,
                                                    tc_graph_order order, tc_graphed_callable **out)
{
    TC_CHECK_ARG(n > 0 && n <= 1024, "n is %d; give 1 to 1024 callables", n);
    TC_CHECK_ARG(fns, "fns is NULL");
    TC_CHECK_ARG(out, "out is NULL");
    TC_CHECK_ARG(warmup_iters >= 0, "warmup_iters is %d; it must be >= 0", warmup_iters);
    TC_CHECK_ARG(order == TC_GRAPH_ORDER_STREAM || order == TC_GRAPH_ORDER_DATA,
                 "order %d is not TC_GRAPH_ORDER_STREAM or TC_GRAPH_ORDER_DATA", (int)order);
    for (int i = 0; i < n; i++)
        TC_CHECK_ARG(fns[i], "fns[%d] is NULL", i);
    return TC_OK;
}

#endif
