/* scaled_dot_product_attention on the GPU at GPT-2 small's prefill shape
 * (batch 8, 12 heads, 512 tokens, head size 64, causal), q, k and v the
 * head views of one [8, 512, 3 * 768] projection as examples/gpt.c makes
 * them: the fused kernel, and the unfused path (scores GEMM, masked
 * softmax, GEMM, with the copies its GEMMs need) for comparison, in float32
 * and bfloat16. Each row is the median of repeats timed with CUDA events on
 * the current stream; TFLOP/s counts the causal half of both products.
 * Prints CSV (bench/run.sh attention puts PyTorch's numbers beside it).
 * Usage: bench_attention [repeats] */
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"
#include "tcuda/tcuda.h"

#include "tensor/nn_internal.h" /* the fused path's switch */

enum { B = 8, H = 12, T = 512, D = 64 };

/* One attention call on q, k, v (causal); the result is dropped. */
static void run_attention(void *qkv)
{
    tc_tensor *const *t = qkv, *y = NULL;
    TRY(tc_nn_scaled_dot_product_attention(t[0], t[1], t[2], true, NULL, &y));
    tc_tensor_release(y);
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 51;
    if (tc_device_count() == 0) {
        printf("bench_attention: no GPU\n");
        return 0;
    }
    tc_device gpu = {TC_CUDA, -1};
    static const tc_dtype dts[2] = {TC_FLOAT32, TC_BFLOAT16};
    double flops = 2.0 * 2.0 * B * H * (double)T * T * D / 2;
    printf("dtype,path,ms,TFLOPs\n");
    for (int di = 0; di < 2; di++) {
        int64_t ps[3] = {B, T, 3 * H * D}, hs[4] = {B, T, H, D};
        tc_tensor *proj = NULL, *qkv[3];
        TRY(tc_tensor_randn(3, ps, dts[di], gpu, NULL, &proj));
        for (int i = 0; i < 3; i++) {
            tc_tensor *part = NULL, *split = NULL;
            TRY(tc_tensor_narrow(proj, 2, i * H * D, H * D, &part));
            TRY(tc_tensor_view(part, 4, hs, &split));
            TRY(tc_tensor_transpose(split, 1, 2, &qkv[i]));
            tc_tensor_release(part);
            tc_tensor_release(split);
        }
        for (int fused = 1; fused >= 0; fused--) {
            tc__nn_attention_set_fused(fused);
            double ms = bench_gpu_median_ms(run_attention, qkv, reps);
            printf("%s,%s,%.4f,%.1f\n", di ? "bfloat16" : "float32", fused ? "fused" : "unfused",
                   ms, flops / ms / 1e9);
        }
        tc__nn_attention_set_fused(true);
        for (int i = 0; i < 3; i++)
            tc_tensor_release(qkv[i]);
        tc_tensor_release(proj);
    }
    return 0;
}
