/* Stands in for a benchmark that needs CUDA to compile (TCUDA_CUDA_BENCHES
 * in bench/CMakeLists.txt) in a build without CUDA: it says so, which is
 * what bench/run.sh then prints instead of a table. */
#include <stdio.h>

int main(void)
{
    printf("%s: built without CUDA\n", TC_BENCH_NAME);
    return 0;
}
