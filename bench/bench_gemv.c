/* Linear layers of 1 to 16 rows (decode's matrix-vector products) against
 * the copy floor: GB/s of tc_nn_linear (the weight, the input, the bias and
 * the output, each read or written once) beside a device-to-device
 * cudaMemcpyAsync of the weight's bytes (read and written: the bandwidth a
 * kernel that streams the weight could reach), and beside the same linear
 * through cuBLAS (tcuda's skinny kernel switched off; rows where tcuda
 * itself leaves the product to cuBLAS show the same time twice). Shapes: GPT-2
 * small's four block linears and its logits, and two of a 7B model's
 * (4096 -> 4096, 4096 -> 11008), in float32, bfloat16 and float16, at 1, 8
 * and 16 rows. Each figure is the median of `samples` event-timed replays
 * of a CUDA graph of 20 calls, per call: the GPU's time, as in a decode
 * step replayed from a graph. "eager" is the same 20 calls queued from the
 * host one by one (the host's cost per call shows there at these sizes).
 * Prints CSV (bench/run.sh gemv joins it with PyTorch's F.linear on the
 * same shapes).
 * Usage: bench_gemv [samples] */
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"
#include "tcuda/tcuda.h"

#include <cuda_runtime_api.h>

#include "tensor/cuda/kernels/nn_kernels.h"

enum { CALLS = 20 };

typedef struct job {
    bool copy; /* the floor: the weight's bytes copied */
    tc_tensor *x, *w, *b, *dst;
} job;

static void run(void *ctx)
{
    const job *j = ctx;
    for (int i = 0; i < CALLS; i++) {
        if (j->copy) {
            size_t bytes = (size_t)tc_tensor_numel(j->w) * tc_dtype_size(tc_tensor_dtype(j->w));
            if (cudaMemcpyAsync(tc_tensor_data_ptr(j->dst), tc_tensor_data_ptr(j->w), bytes,
                                cudaMemcpyDeviceToDevice,
                                (cudaStream_t)bench_cuda_stream()) != cudaSuccess) {
                fprintf(stderr, "bench_gemv: cudaMemcpyAsync failed\n");
                exit(1);
            }
            continue;
        }
        tc_tensor *y = NULL;
        TRY(tc_nn_linear(j->x, j->w, j->b, &y));
        tc_tensor_release(y);
    }
}

int main(int argc, char **argv)
{
    int samples = argc > 1 ? atoi(argv[1]) : 21;
    if (tc_device_count() == 0) {
        printf("bench_gemv: no GPU\n");
        return 0;
    }
    /* out, in: GPT-2 small's qkv, proj, fc, fc proj and logits; 7B's */
    static const int64_t shapes[][2] = {{2304, 768},  {768, 768},   {3072, 768},  {768, 3072},
                                        {50257, 768}, {4096, 4096}, {11008, 4096}};
    static const tc_dtype dts[3] = {TC_FLOAT32, TC_BFLOAT16, TC_FLOAT16};
    static const int64_t rows[3] = {1, 8, 16};
    tc_device gpu = {TC_CUDA, -1};
    printf("dtype,m,n,k,ms,GBps,eager_ms,cublas_ms,cublas_GBps,floor_ms,floor_GBps\n");
    for (int di = 0; di < 3; di++)
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            int64_t n = shapes[si][0], k = shapes[si][1];
            double es = (double)tc_dtype_size(dts[di]);
            job j = {0};
            TRY(tc_tensor_randn(2, shapes[si], dts[di], gpu, NULL, &j.w));
            TRY(tc_tensor_empty_like(j.w, &j.dst));
            /* the logits have no bias (GPT-2 ties them to the embedding) */
            if (n != 50257)
                TRY(tc_tensor_randn(1, &n, dts[di], gpu, NULL, &j.b));
            j.copy = true;
            double floor_ms = bench_graph_median_ms(run, &j, samples) / CALLS;
            j.copy = false;
            for (int ri = 0; ri < 3; ri++) {
                int64_t m = rows[ri], xs[2] = {m, k};
                TRY(tc_tensor_randn(2, xs, dts[di], gpu, NULL, &j.x));
                double bytes = es * (double)(n * k + m * k + m * n + (j.b ? n : 0));
                double ms = bench_graph_median_ms(run, &j, samples) / CALLS;
                double eager_ms = bench_gpu_median_ms(run, &j, samples) / CALLS;
                tc__k_gemm_skinny_set_enabled(false);
                double cublas_ms = bench_graph_median_ms(run, &j, samples) / CALLS;
                tc__k_gemm_skinny_set_enabled(true);
                printf("%s,%lld,%lld,%lld,%.5f,%.1f,%.5f,%.5f,%.1f,%.5f,%.1f\n",
                       tc_dtype_string(dts[di]), (long long)m, (long long)n, (long long)k, ms,
                       bytes / ms / 1e6, eager_ms, cublas_ms, bytes / cublas_ms / 1e6, floor_ms,
                       2 * es * (double)(n * k) / floor_ms / 1e6);
                tc_tensor_release(j.x);
            }
            tc_tensor_release(j.w);
            tc_tensor_release(j.b);
            tc_tensor_release(j.dst);
        }
    return 0;
}
