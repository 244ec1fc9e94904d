/* scaled_dot_product_attention on the GPU at GPT-2 small's prefill shape
 * (batch 8, 12 heads, 512 tokens, head size 64, causal), q, k and v the
 * head views of one [8, 512, 3 * 768] projection as examples/gpt.c makes
 * them: the fused kernel, and the unfused path (scores GEMM, masked
 * softmax, GEMM, with the copies its GEMMs need) for comparison, in float32
 * and bfloat16. Each row is the median of repeats timed with CUDA events on
 * the current stream; TFLOP/s counts the causal half of both products.
 * Then the backward at batch 8, 12 heads, 1024 tokens, head size 64,
 * causal, in float32, float16 and bfloat16: tc_nn_scaled_dot_product_attention_backward_lse
 * from the lse forward's out and lse, fused and on the math path, rows whose
 * dtype cell reads "<dtype> backward 1024" (TFLOP/s counts the causal half
 * of its five products: the scores again, dP, dV, dK, dQ); for 16-bit
 * dtypes also each other shape of the mma.sync dK/dV kernel ("fused dkv
 * variant N"). On a compute capability 9.0 GPU the 16-bit fused rows run
 * Hopper's kernels where they take the problem (path "fused sm90"), and a
 * "fused mma.sync" row runs the mma.sync kernels beside them (their test
 * hooks), the variants too.
 * Prints CSV (bench/run.sh attention puts PyTorch's numbers beside it).
 * Usage: bench_attention [repeats] */
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"
#include "tcuda/tcuda.h"

#include "tensor/cuda/kernels/nn_kernels.h" /* the backward's kernel shapes */
#include "tensor/nn_internal.h"             /* the fused path's switch */

enum { B = 8, H = 12, T = 512, D = 64 };

/* A row's path column. */
static const char *path_of(bool fused, bool sm90)
{
    return !fused ? "unfused" : sm90 ? "fused sm90" : "fused";
}

/* One attention call on q, k, v (causal); the result is dropped. */
static void run_attention(void *qkv)
{
    tc_tensor *const *t = qkv, *y = NULL;
    TRY(tc_nn_scaled_dot_product_attention(t[0], t[1], t[2], true, NULL, &y));
    tc_tensor_release(y);
}

enum { BT = 1024 }; /* the backward's tokens */

/* The backward's operands: grad_out, q, k, v, out, lse. */
typedef struct bwd_in {
    tc_tensor *t[6];
} bwd_in;

/* One backward from lse (causal); the gradients are dropped. */
static void run_backward(void *arg)
{
    tc_tensor *const *t = ((bwd_in *)arg)->t, *g[3] = {NULL, NULL, NULL};
    TRY(tc_nn_scaled_dot_product_attention_backward_lse(t[0], t[1], t[2], t[3], t[4], t[5], true,
                                                        NULL, &g[0], &g[1], &g[2]));
    for (int i = 0; i < 3; i++)
        tc_tensor_release(g[i]);
}

/* q, k and v: the head views of one [B, tokens, 3 * H * D] projection. */
static void head_views(tc_device gpu, tc_dtype dt, int64_t tokens, tc_tensor **proj,
                       tc_tensor *qkv[3])
{
    int64_t ps[3] = {B, tokens, 3 * H * D}, hs[4] = {B, tokens, H, D};
    TRY(tc_tensor_randn(3, ps, dt, gpu, NULL, proj));
    for (int i = 0; i < 3; i++) {
        tc_tensor *part = NULL, *split = NULL;
        TRY(tc_tensor_narrow(*proj, 2, i * H * D, H * D, &part));
        TRY(tc_tensor_view(part, 4, hs, &split));
        TRY(tc_tensor_transpose(split, 1, 2, &qkv[i]));
        tc_tensor_release(part);
        tc_tensor_release(split);
    }
}

/* The backward rows: fused, then the math path, per dtype. */
static void bench_backward(tc_device gpu, int reps)
{
    static const tc_dtype dts[3] = {TC_FLOAT32, TC_FLOAT16, TC_BFLOAT16};
    double flops = 5.0 * 2.0 * B * H * (double)BT * BT * D / 2;
    for (int di = 0; di < 3; di++) {
        tc_tensor *proj = NULL, *gproj = NULL;
        bwd_in in;
        head_views(gpu, dts[di], BT, &proj, &in.t[1]);
        int64_t gs[4] = {B, BT, H, D};
        TRY(tc_tensor_randn(4, gs, dts[di], gpu, NULL, &gproj));
        TRY(tc_tensor_transpose(gproj, 1, 2, &in.t[0]));
        TRY(tc_nn_scaled_dot_product_attention_lse(in.t[1], in.t[2], in.t[3], true, NULL, &in.t[4],
                                                   &in.t[5]));
        for (int fused = 1; fused >= 0; fused--) {
            tc__nn_attention_set_fused(fused);
            uint64_t h0 = tc__k_nn_attention_backward_sm90_count();
            double ms = bench_gpu_median_ms(run_backward, &in, reps);
            bool sm90 = tc__k_nn_attention_backward_sm90_count() > h0;
            printf("%s backward %d,%s,%.4f,%.1f\n", tc_dtype_string(dts[di]), BT,
                   path_of(fused, sm90), ms, flops / ms / 1e9);
            if (fused && sm90) { /* the mma.sync kernels beside Hopper's */
                tc__k_nn_attention_backward_set_sm90(false);
                ms = bench_gpu_median_ms(run_backward, &in, reps);
                printf("%s backward %d,fused mma.sync,%.4f,%.1f\n", tc_dtype_string(dts[di]), BT,
                       ms, flops / ms / 1e9);
                tc__k_nn_attention_backward_set_sm90(true);
            }
        }
        tc__nn_attention_set_fused(true);
        /* the mma.sync dK/dV kernel's other shapes (16-bit only) */
        bool was = tc__k_nn_attention_backward_set_sm90(false);
        int variants = tc__k_nn_attention_backward_set_variant(0);
        for (int v = 1; v < variants && dts[di] != TC_FLOAT32; v++) {
            tc__k_nn_attention_backward_set_variant(v);
            double ms = bench_gpu_median_ms(run_backward, &in, reps);
            printf("%s backward %d,fused dkv variant %d,%.4f,%.1f\n", tc_dtype_string(dts[di]), BT,
                   v, ms, flops / ms / 1e9);
        }
        tc__k_nn_attention_backward_set_variant(0);
        tc__k_nn_attention_backward_set_sm90(was);
        for (int i = 0; i < 6; i++)
            tc_tensor_release(in.t[i]);
        tc_tensor_release(proj);
        tc_tensor_release(gproj);
    }
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
        tc_tensor *proj = NULL, *qkv[3];
        head_views(gpu, dts[di], T, &proj, qkv);
        for (int fused = 1; fused >= 0; fused--) {
            tc__nn_attention_set_fused(fused);
            uint64_t h0 = tc__k_nn_attention_sm90_count();
            double ms = bench_gpu_median_ms(run_attention, qkv, reps);
            bool sm90 = tc__k_nn_attention_sm90_count() > h0;
            printf("%s,%s,%.4f,%.1f\n", di ? "bfloat16" : "float32", path_of(fused, sm90), ms,
                   flops / ms / 1e9);
            if (fused && sm90) { /* the mma.sync kernel beside Hopper's */
                tc__k_nn_attention_set_sm90(false);
                ms = bench_gpu_median_ms(run_attention, qkv, reps);
                printf("%s,fused mma.sync,%.4f,%.1f\n", di ? "bfloat16" : "float32", ms,
                       flops / ms / 1e9);
                tc__k_nn_attention_set_sm90(true);
            }
        }
        tc__nn_attention_set_fused(true);
        for (int i = 0; i < 3; i++)
            tc_tensor_release(qkv[i]);
        tc_tensor_release(proj);
    }
    bench_backward(gpu, reps);
    return 0;
}
