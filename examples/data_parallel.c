/* torch.nn.DataParallel's pattern with torch.cuda.comm: one process, every
 * GPU. The weights are broadcast to all GPUs, a batch is scattered over
 * them, each GPU computes relu(x @ w) on its slice, and the results are
 * gathered on GPU 0; the per-GPU "gradients" (here: column sums) are added
 * with reduce_add. The result is checked against the same computation on the
 * CPU. Runs on one GPU too (the lists have one entry). Exit 77 without a GPU. */
#include <stdio.h>
#include <stdlib.h>

#include <tcuda/tcuda.h>

/* (no libm: the examples link tcuda only) */
static double absd(double v) { return v < 0 ? -v : v; }
static double maxd(double a, double b) { return a > b ? a : b; }

#define TRY(call)                                                                                  \
    do {                                                                                           \
        tc_status st_ = (call);                                                                    \
        if (st_ != TC_OK) {                                                                        \
            fprintf(stderr, "%s failed: %s\n", #call, tc_last_error());                            \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

enum { MAX_GPUS = 16 };

int main(void)
{
    if (!tc_is_available()) {
        printf("data_parallel: no GPU (%s)\n", tc_last_error());
        return 77;
    }
    int n = tc_device_count() > MAX_GPUS ? MAX_GPUS : tc_device_count();
    int devices[MAX_GPUS];
    for (int i = 0; i < n; i++)
        devices[i] = i;
    const tc_device cpu = {TC_CPU, -1}, gpu0 = {TC_CUDA, 0};
    tc_generator *g;
    TRY(tc_generator_create(cpu, 7, &g));
    int64_t xs[2] = {1000, 64}, ws[2] = {64, 32};
    tc_tensor *x, *w0, *w_cpu;
    TRY(tc_tensor_randn(2, xs, TC_FLOAT32, cpu, g, &x)); /* the batch, on the host */
    TRY(tc_tensor_randn(2, ws, TC_FLOAT32, cpu, g, &w_cpu));
    TRY(tc_tensor_to(w_cpu, gpu0, TC_FLOAT32, false, &w0));

    /* replicate the model, split the batch */
    tc_tensor *w[MAX_GPUS], *xi[MAX_GPUS], *yi[MAX_GPUS], *gi[MAX_GPUS];
    int chunks = 0;
    TRY(tc_comm_broadcast(w0, devices, n, w));
    TRY(tc_comm_scatter(x, devices, n, NULL, 0, NULL, xi, &chunks));
    for (int i = 0; i < chunks; i++) { /* each on its GPU's current stream */
        tc_tensor *z;
        TRY(tc_tensor_matmul(xi[i], w[i], &z));
        TRY(tc_tensor_relu(z, &yi[i]));
        TRY(tc_tensor_sum(yi[i], 0, false, &gi[i]));
        tc_tensor_release(z);
    }
    tc_tensor *y, *grad;
    TRY(tc_comm_gather((const tc_tensor *const *)yi, chunks, 0, 0, &y));
    TRY(tc_comm_reduce_add((const tc_tensor *const *)gi, chunks, 0, &grad));

    /* the same on the CPU */
    tc_tensor *z, *y_ref, *grad_ref;
    TRY(tc_tensor_matmul(x, w_cpu, &z));
    TRY(tc_tensor_relu(z, &y_ref));
    TRY(tc_tensor_sum(y_ref, 0, false, &grad_ref));
    double max_err = 0;
    tc_tensor *pair[2][2] = {{y, y_ref}, {grad, grad_ref}};
    for (int k = 0; k < 2; k++) {
        int64_t m = tc_tensor_numel(pair[k][1]);
        float *a = malloc(sizeof(float) * (size_t)m), *b = malloc(sizeof(float) * (size_t)m);
        TRY(tc_tensor_to_host(pair[k][0], TC_FLOAT32, a));
        TRY(tc_tensor_to_host(pair[k][1], TC_FLOAT32, b));
        for (int64_t i = 0; i < m; i++)
            max_err = maxd(max_err, absd(a[i] - b[i]) / (1 + absd(b[i])));
        free(a), free(b);
    }
    printf("data_parallel: batch of %lld over %d GPU(s) in %d chunks; output [%lld, %lld] "
           "on cuda:0; max relative error vs CPU %.2e\n",
           (long long)xs[0], n, chunks, (long long)tc_tensor_size(y, 0),
           (long long)tc_tensor_size(y, 1), max_err);
    for (int i = 0; i < n; i++)
        tc_tensor_release(w[i]);
    for (int i = 0; i < chunks; i++)
        tc_tensor_release(xi[i]), tc_tensor_release(yi[i]), tc_tensor_release(gi[i]);
    tc_tensor_release(y), tc_tensor_release(grad), tc_tensor_release(z);
    tc_tensor_release(y_ref), tc_tensor_release(grad_ref);
    tc_tensor_release(x), tc_tensor_release(w0), tc_tensor_release(w_cpu);
    tc_generator_destroy(g);
    return max_err < 1e-3 ? 0 : 1;
}
