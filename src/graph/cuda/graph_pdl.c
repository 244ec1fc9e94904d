/* Programmatic edges into tcuda's kernels in captured graphs.
 *
 * A graph's kernel nodes wait, by default, for the full completion of the
 * kernels they depend on before they are even launched: a chain of small
 * kernels pays a launch latency per edge. On compute capability 9.0 and
 * later an edge may instead be programmatic (Programmatic Dependent
 * Launch): the downstream kernel is launched once every block of the
 * upstream one has started its last part (griddepcontrol.launch_dependents)
 * or ended, and it waits on the device (griddepcontrol.wait) for the
 * upstream kernel to complete and its memory to be visible.
 *
 * Every tcuda kernel begins with that wait (kernels/pdl.cuh) before it
 * touches memory, so any edge from a kernel node into a tcuda kernel node
 * can be programmatic without changing what the kernel sees. Edges into
 * other kernels (cuBLAS's, the caller's, jiterator kernels) and edges from
 * or to other nodes (copies, memsets) stay as captured. tcuda's kernels are
 * told apart by their names: they live in the namespace tcuda_kernels. */
#include <stdlib.h>
#include <string.h>

#include "runtime/cuda/cuda_internal.h"
#include "graph_pdl.h"

static const char kernel_prefix[] = "_ZN13tcuda_kernels"; /* the mangled namespace */

_Atomic long tc__graph_pdl_edges;

static bool kernel_node(cudaGraphNode_t n)
{
    enum cudaGraphNodeType t;
    return cudaGraphNodeGetType(n, &t) == cudaSuccess && t == cudaGraphNodeTypeKernel;
}

/* Is node n a launch of one of tcuda's kernels? */
static bool tcuda_kernel(cudaGraphNode_t n)
{
    struct cudaKernelNodeParams p;
    const char *name = NULL;
    if (!kernel_node(n) || cudaGraphKernelNodeGetParams(n, &p) != cudaSuccess ||
        cudaFuncGetName(&name, p.func) != cudaSuccess || !name) {
        (void)cudaGetLastError();
        return false;
    }
    return strncmp(name, kernel_prefix, sizeof kernel_prefix - 1) == 0;
}

tc_status tc__graph_programmatic_edges(int device, cudaGraph_t graph)
{
    if (tc__cc_major(device) < 9)
        return TC_OK;
    size_t n = 0;
    TC_CUDA_CHECK(cudaGraphGetEdges(graph, NULL, NULL, NULL, &n));
    if (n == 0)
        return TC_OK;
    cudaGraphNode_t *from = malloc(n * sizeof *from), *to = malloc(n * sizeof *to);
    cudaGraphEdgeData *data = malloc(n * sizeof *data);
    tc_status st = from && to && data
                       ? TC_OK
                       : tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory for a graph's edges");
    if (st == TC_OK) {
        cudaError_t err = cudaGraphGetEdges(graph, from, to, data, &n);
        if (err != cudaSuccess)
            st = tc__cuda_fail(err, "cudaGraphGetEdges", __FILE__, __LINE__);
    }
    cudaGraphEdgeData prog;
    memset(&prog, 0, sizeof prog);
    prog.from_port = cudaGraphKernelNodePortProgrammatic;
    prog.type = cudaGraphDependencyTypeProgrammatic;
    long made = 0;
    for (size_t i = 0; i < n && st == TC_OK; i++) {
        if (data[i].type != cudaGraphDependencyTypeDefault || data[i].from_port != 0 ||
            !kernel_node(from[i]) || !tcuda_kernel(to[i]))
            continue;
        /* An edge CUDA will not change (seen on an H200 with CUDA 13 in a
         * training step's graph: cudaErrorNotSupported) stays as captured:
         * the edge is an optimization, never a need. */
        cudaError_t err = cudaGraphRemoveDependencies(graph, &from[i], &to[i], &data[i], 1);
        if (err != cudaSuccess) {
            (void)cudaGetLastError();
            continue;
        }
        err = cudaGraphAddDependencies(graph, &from[i], &to[i], &prog, 1);
        if (err == cudaSuccess) {
            made++;
            continue;
        }
        (void)cudaGetLastError(); /* put the edge back as it was */
        err = cudaGraphAddDependencies(graph, &from[i], &to[i], &data[i], 1);
        if (err != cudaSuccess) {
            (void)cudaGetLastError();
            err = cudaGraphAddDependencies(graph, &from[i], &to[i], NULL, 1);
        }
        if (err == cudaSuccess)
            continue;
        st = tc__cuda_fail(err, "cudaGraphAddDependencies (restoring an edge)", __FILE__, __LINE__);
    }
    atomic_fetch_add(&tc__graph_pdl_edges, made);
    free(from);
    free(to);
    free(data);
    return st;
}
