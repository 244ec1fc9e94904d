/* softmax and layer_norm on the GPU against the copy floor: GB/s of tcuda's
 * fused kernels (bytes read once and written once) beside a device-to-device
 * cudaMemcpyAsync of the same bytes, for GPT-2's shapes (rows of 768 and of
 * 50257) and two square-ish ones, in float32 and bfloat16. Each row is the
 * median of repeats timed with CUDA events on the current stream. Rows
 * longer than 1024 (past the warp-per-row kernel) are also timed on each
 * kernel path forced (registers with the fewest threads or about 4 vectors
 * a thread, shared memory, two reads), to show why the automatic choice is
 * what it is. Prints CSV
 * (bench/run.sh nn joins it with PyTorch's numbers on the same shapes).
 * Usage: bench_nn [repeats] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "tcuda/tcuda.h"

#include <cuda_runtime_api.h>

#include "tensor/cuda/kernels/nn_kernels.h"

static const char *const PATHS[] = {"auto", "regs", "regs_wide", "smem", "loop"};

typedef struct job {
    int op; /* 0 softmax, 1 layer_norm, 2 the memcpy floor */
    tc_tensor *x, *w, *b;
    int64_t cols;
} job;

/* The floor: the same bytes read and written by the copy engine. */
static tc_status copy_floor(const tc_tensor *x, tc_tensor **y)
{
    TRY(tc_tensor_empty_like(x, y));
    size_t bytes = (size_t)tc_tensor_numel(x) * tc_dtype_size(tc_tensor_dtype(x));
    cudaStream_t s = (cudaStream_t)bench_cuda_stream();
    if (cudaMemcpyAsync(tc_tensor_data_ptr(*y), tc_tensor_data_ptr(x), bytes,
                        cudaMemcpyDeviceToDevice, s) != cudaSuccess) {
        fprintf(stderr, "bench_nn: cudaMemcpyAsync failed\n");
        exit(1);
    }
    return TC_OK;
}

static int run(const job *j)
{
    tc_tensor *y = NULL;
    tc_status st;
    if (j->op == 0)
        st = tc_nn_softmax(j->x, -1, &y);
    else if (j->op == 1)
        st = tc_nn_layer_norm(j->x, 1, &j->cols, j->w, j->b, 1e-5, &y);
    else
        st = copy_floor(j->x, &y);
    if (st != TC_OK) {
        fprintf(stderr, "bench_nn: %s\n", tc_last_error());
        return 1;
    }
    tc_tensor_release(y);
    return 0;
}

/* Median milliseconds of `reps` timed runs after 3 warm-ups; -1 on error. */
static double time_job(const job *j, int reps)
{
    for (int i = 0; i < 3; i++)
        if (run(j))
            return -1;
    cudaStream_t s = (cudaStream_t)bench_cuda_stream();
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    double *ms = calloc((size_t)reps, sizeof *ms), med = -1;
    int i = 0;
    for (; i < reps; i++) {
        cudaEventRecord(a, s);
        if (run(j))
            break;
        cudaEventRecord(b, s);
        cudaEventSynchronize(b);
        float t;
        cudaEventElapsedTime(&t, a, b);
        ms[i] = t;
    }
    if (i == reps)
        med = bench_median(ms, reps);
    free(ms);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return med;
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 51;
    if (tc_device_count() == 0) {
        printf("bench_nn: no GPU\n");
        return 0;
    }
    static const int64_t shapes[][2] = {
        {8 * 1024, 768}, {4096, 4096}, {32 * 1024, 1024}, {1024, 50257}};
    static const tc_dtype dts[2] = {TC_FLOAT32, TC_BFLOAT16};
    tc_device gpu = {TC_CUDA, -1};
    printf("op,path,dtype,rows,cols,ms,GBps,floor_ms,floor_GBps\n");
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (int di = 0; di < 2; di++) {
            job j = {.cols = shapes[si][1]};
            TRY(tc_tensor_randn(2, shapes[si], dts[di], gpu, NULL, &j.x));
            TRY(tc_tensor_randn(1, &j.cols, dts[di], gpu, NULL, &j.w));
            TRY(tc_tensor_randn(1, &j.cols, dts[di], gpu, NULL, &j.b));
            double bytes = 2.0 * (double)(shapes[si][0] * shapes[si][1]) * tc_dtype_size(dts[di]);
            j.op = 2;
            double floor_ms = time_job(&j, reps);
            for (int op = 0; op < 2; op++)
                for (int path = 0; path < 5; path++) {
                    if (path && shapes[si][1] <= 1024)
                        break;
                    j.op = op;
                    tc__k_nn_rows_path(path);
                    double ms = time_job(&j, reps);
                    tc__k_nn_rows_path(TC__NN_PATH_AUTO);
                    printf("%s,%s,%s,%lld,%lld,%.4f,%.1f,%.4f,%.1f\n",
                           op ? "layer_norm" : "softmax", PATHS[path], di ? "bfloat16" : "float32",
                           (long long)shapes[si][0], (long long)shapes[si][1], ms, bytes / ms / 1e6,
                           floor_ms, bytes / floor_ms / 1e6);
                }
            tc_tensor_release(j.x);
            tc_tensor_release(j.w);
            tc_tensor_release(j.b);
        }
    return 0;
}
