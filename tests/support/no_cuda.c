/* Stands in for a test that needs CUDA to compile (TCUDA_CUDA_TESTS in
 * tests/CMakeLists.txt) in a build without CUDA: it says so and exits 77,
 * which CTest reports as skipped, as the test itself does without a GPU. */
#include <stdio.h>

int main(void)
{
    printf("skipped: %s needs a build with CUDA\n", TC_TEST_NAME);
    return 77;
}
