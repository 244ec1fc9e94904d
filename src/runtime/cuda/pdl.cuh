/* The first statement of every tcuda kernel (graph_pdl.c says why).
 *
 * In a captured graph, tcuda makes the edges into its own kernels
 * programmatic on compute capability 9.0 and later: such a kernel may be
 * launched before the kernels it depends on have finished, so that its
 * launch overlaps their run. It must then wait before it touches memory:
 * griddepcontrol.wait returns once every kernel it depends on has completed
 * and its writes are visible. Then launch_dependents lets the kernels that
 * depend on this one launch early in turn (they wait the same way). Outside
 * programmatic edges (a stream launch, an ordinary edge) both return at once.
 * tcuda's kernels live in the namespace tcuda_kernels, by which graph_pdl.c
 * tells them from kernels that do not wait (cuBLAS's, the caller's). Not
 * installed. */
#ifndef TCUDA_KERNELS_PDL_CUH
#define TCUDA_KERNELS_PDL_CUH

__device__ __forceinline__ void tck_pdl_entry()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

#endif
