/* Decode's attention over a KV cache (tc_nn_attention_with_kv_cache: the
 * new key and value written at position n, one query over positions
 * 0..n) against the copy floor: GB/s counting the keys and values read
 * (n + 1 positions of every kv head), q, the new rows and the output once,
 * beside a device-to-device cudaMemcpyAsync of the keys' and values'
 * bytes. Shapes: GPT-2 small (12 heads of 64, a cache of 1,024) at batch 1
 * and 8, and a 7B model's (32 heads of 128, a cache of 4,096) at batch 1,
 * at a short, a middle and a full length; bfloat16 and float32. Each
 * figure is the median of `samples` event-timed replays of a CUDA graph of
 * 20 calls, per call, as in a decode step replayed from a graph; "eager"
 * queues the 20 calls from the host. Prints CSV (bench/run.sh kv_attention
 * joins it with PyTorch's way: index_copy_ into the caches, then
 * scaled_dot_product_attention with a mask over the whole cache).
 * Usage: bench_kv_attention [samples] */
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"
#include "tcuda/tcuda.h"

#include <cuda_runtime_api.h>

enum { CALLS = 20 };

typedef struct job {
    bool copy;                              /* the floor */
    tc_tensor *q, *kc, *vc, *kn, *vn, *len; /* the op's operands */
    tc_tensor *src, *dst;                   /* the floor's */
    size_t floor_bytes;
} job;

static void run(void *ctx)
{
    const job *j = ctx;
    for (int i = 0; i < CALLS; i++) {
        if (j->copy) {
            if (cudaMemcpyAsync(tc_tensor_data_ptr(j->dst), tc_tensor_data_ptr(j->src),
                                j->floor_bytes, cudaMemcpyDeviceToDevice,
                                (cudaStream_t)bench_cuda_stream()) != cudaSuccess) {
                fprintf(stderr, "bench_kv_attention: cudaMemcpyAsync failed\n");
                exit(1);
            }
            continue;
        }
        tc_tensor *y = NULL;
        TRY(tc_nn_attention_with_kv_cache(j->q, j->kc, j->vc, j->kn, j->vn, j->len, true, NULL,
                                          &y));
        tc_tensor_release(y);
    }
}

int main(int argc, char **argv)
{
    int samples = argc > 1 ? atoi(argv[1]) : 21;
    if (tc_device_count() == 0) {
        printf("bench_kv_attention: no GPU\n");
        return 0;
    }
    /* batch, heads, head size, cache length, and the three lengths n */
    static const int64_t shapes[][7] = {{1, 12, 64, 1024, 128, 512, 1023},
                                        {8, 12, 64, 1024, 128, 512, 1023},
                                        {1, 32, 128, 4096, 512, 2048, 4095}};
    static const tc_dtype dts[2] = {TC_BFLOAT16, TC_FLOAT32};
    tc_device gpu = {TC_CUDA, -1};
    printf("dtype,b,h,e,s,n,ms,GBps,eager_ms,floor_ms,floor_GBps\n");
    for (int di = 0; di < 2; di++)
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            int64_t b = shapes[si][0], h = shapes[si][1], e = shapes[si][2], s = shapes[si][3];
            int64_t qs[4] = {b, h, 1, e}, cs[4] = {b, h, s, e}, one = 1;
            double es = (double)tc_dtype_size(dts[di]);
            job j = {0};
            TRY(tc_tensor_randn(4, qs, dts[di], gpu, NULL, &j.q));
            TRY(tc_tensor_randn(4, qs, dts[di], gpu, NULL, &j.kn));
            TRY(tc_tensor_randn(4, qs, dts[di], gpu, NULL, &j.vn));
            TRY(tc_tensor_randn(4, cs, dts[di], gpu, NULL, &j.kc));
            TRY(tc_tensor_randn(4, cs, dts[di], gpu, NULL, &j.vc));
            for (int ni = 0; ni < 3; ni++) {
                int64_t n = shapes[si][4 + ni];
                TRY(tc_tensor_full(1, &one, (double)n, TC_INT64, gpu, &j.len));
                /* keys and values of n + 1 positions; q, the new rows, the output */
                double kv = 2 * es * (double)(b * h * (n + 1) * e);
                double bytes = kv + 4 * es * (double)(b * h * e);
                j.floor_bytes = (size_t)kv;
                int64_t fs = (int64_t)j.floor_bytes;
                TRY(tc_tensor_empty(1, &fs, TC_UINT8, gpu, &j.src));
                TRY(tc_tensor_empty(1, &fs, TC_UINT8, gpu, &j.dst));
                j.copy = true;
                double floor_ms = bench_graph_median_ms(run, &j, samples) / CALLS;
                j.copy = false;
                double ms = bench_graph_median_ms(run, &j, samples) / CALLS;
                double eager_ms = bench_gpu_median_ms(run, &j, samples) / CALLS;
                printf("%s,%lld,%lld,%lld,%lld,%lld,%.5f,%.1f,%.5f,%.5f,%.1f\n",
                       tc_dtype_string(dts[di]), (long long)b, (long long)h, (long long)e,
                       (long long)s, (long long)n, ms, bytes / ms / 1e6, eager_ms, floor_ms,
                       2 * kv / floor_ms / 1e6);
                tc_tensor_release(j.len);
                tc_tensor_release(j.src);
                tc_tensor_release(j.dst);
            }
            tc_tensor *all[] = {j.q, j.kn, j.vn, j.kc, j.vc};
            for (size_t i = 0; i < 5; i++)
                tc_tensor_release(all[i]);
        }
    return 0;
}
