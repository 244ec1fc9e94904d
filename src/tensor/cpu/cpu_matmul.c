/* The CPU matmul: operands converted to double, multiplied in cache blocks
 * (i-k-j order inside blocks so the innermost loop streams rows of b and c),
 * accumulated in double and stored in the output dtype. Accurate rather than
 * fast: it is the reference the GPU is compared with. */
#include <stdlib.h>
#include <string.h>

#include "tensor/tensor_internal.h"

#define BLOCK 64

/* n dense elements from src (of dtype st) to dst (of dtype dt), through the
 * backend's converting copy on a flat iter. */
static void flat_convert(void *dst, tc_dtype dt, const void *src, tc_dtype st, int64_t n)
{
    tc__iter it;
    int64_t sz[1] = {n};
    tc__iter_init(&it, 1, sz, 2);
    it.strides[0][0] = it.strides[1][0] = 1;
    it.data[0] = dst;
    it.data[1] = (void *)src;
    (void)tc__cpu_backend.convert(-1, dt, st, &it);
}

tc_status tc__cpu_matmul(int device, tc_dtype dt, const void *a, const void *b, void *c,
                         int64_t batch, int64_t m, int64_t n, int64_t k, int64_t sa, int64_t sb)
{
    size_t es = tc_dtype_size(dt);
    double *A = malloc(sizeof(double) * (size_t)(m * k));
    double *B = malloc(sizeof(double) * (size_t)(k * n));
    double *C = malloc(sizeof(double) * (size_t)(m * n));
    if (!A || !B || !C) {
        free(A), free(B), free(C);
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "tc_tensor_matmul: no memory for the CPU "
                                                "matmul's buffers");
    }
    for (int64_t p = 0; p < batch; p++) {
        /* a broadcast operand (batch stride 0) is converted once */
        if (p == 0 || sa)
            flat_convert(A, TC_FLOAT64, (const char *)a + p * sa * (int64_t)es, dt, m * k);
        if (p == 0 || sb)
            flat_convert(B, TC_FLOAT64, (const char *)b + p * sb * (int64_t)es, dt, k * n);
        memset(C, 0, sizeof(double) * (size_t)(m * n));
        for (int64_t i0 = 0; i0 < m; i0 += BLOCK)
            for (int64_t k0 = 0; k0 < k; k0 += BLOCK)
                for (int64_t j0 = 0; j0 < n; j0 += BLOCK) {
                    int64_t i1 = i0 + BLOCK < m ? i0 + BLOCK : m;
                    int64_t k1 = k0 + BLOCK < k ? k0 + BLOCK : k;
                    int64_t j1 = j0 + BLOCK < n ? j0 + BLOCK : n;
                    for (int64_t i = i0; i < i1; i++)
                        for (int64_t kk = k0; kk < k1; kk++) {
                            double x = A[i * k + kk];
                            const double *brow = B + kk * n;
                            double *crow = C + i * n;
                            for (int64_t j = j0; j < j1; j++)
                                crow[j] += x * brow[j];
                        }
                }
        flat_convert((char *)c + p * m * n * (int64_t)es, dt, C, TC_FLOAT64, m * n);
    }
    free(A), free(B), free(C);
    return TC_OK;
}
