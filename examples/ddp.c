/* DistributedDataParallel's pattern with a process group: one process per
 * GPU, each with its own shard of data, averaging gradients with all_reduce
 * (TC_REDUCE_OP_AVG) every step, so the replicas stay identical. The model is a
 * linear regression w (the true weights are 1, 2, ..., D); rank 0 prints the
 * loss, and every rank checks that it found the true weights.
 *
 *   tools/tcuda-run -n 2 -- build/examples/ddp     (one process per GPU)
 *   build/examples/ddp                             (alone: a group of one)
 *
 * Exit 77 without a GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

enum { D = 16, ROWS = 256, STEPS = 300 };

int main(void)
{
    if (!tc_is_available()) {
        printf("ddp: no GPU (%s)\n", tc_last_error());
        return 77;
    }
    tc_process_group *pg;
    if (getenv("RANK") || getenv("OMPI_COMM_WORLD_RANK") || getenv("SLURM_PROCID")) {
        TRY(tc_process_group_create_from_env(&pg));
    } else { /* started alone: a group of one */
        tc_dist_options o;
        memset(&o, 0, sizeof o);
        o.world_size = 1;
        o.local_rank = 0;
        strcpy(o.master_addr, "127.0.0.1");
        o.master_port = 29500;
        TRY(tc_process_group_create(&o, &pg));
    }
    int rank = tc_process_group_rank(pg), world = tc_process_group_size(pg);
    tc_device dev = {TC_CUDA, tc_process_group_device(pg)};
    TRY(tc_set_device(dev.index));

    /* this rank's shard: x random (seeded by rank), y = x @ w_true */
    tc_generator *g;
    TRY(tc_generator_create(dev, 1000 + (uint64_t)rank, &g));
    int64_t xs[2] = {ROWS, D}, ws[2] = {D, 1};
    float truth[D];
    for (int i = 0; i < D; i++)
        truth[i] = (float)(i + 1);
    tc_tensor *x, *xt, *w_true, *y, *w, *lr;
    TRY(tc_tensor_randn(2, xs, TC_FLOAT32, dev, g, &x));
    TRY(tc_tensor_transpose(x, 0, 1, &xt));
    TRY(tc_tensor_from_data(truth, 2, ws, TC_FLOAT32, dev, &w_true));
    TRY(tc_tensor_matmul(x, w_true, &y));
    /* every replica starts from rank 0's weights */
    TRY(tc_tensor_randn(2, ws, TC_FLOAT32, dev, g, &w));
    TRY(tc_dist_broadcast(pg, w, 0, NULL));
    TRY(tc_tensor_full(0, NULL, 2.0 * 0.05 / ROWS, TC_FLOAT32, dev, &lr));

    double loss = 0;
    for (int step = 0; step < STEPS; step++) {
        tc_tensor *pred, *err, *grad, *scaled, *next, *sq, *mean;
        TRY(tc_tensor_matmul(x, w, &pred));
        TRY(tc_tensor_sub(pred, y, &err));
        TRY(tc_tensor_matmul(xt, err, &grad)); /* X^T (Xw - y) */
        tc_work *work;
        TRY(tc_dist_all_reduce(pg, grad, TC_REDUCE_OP_AVG, &work)); /* the DDP step */
        TRY(tc_work_wait_stream(work, NULL)); /* the update waits on the GPU, not the host */
        TRY(tc_work_destroy(work));
        TRY(tc_tensor_mul(grad, lr, &scaled));
        TRY(tc_tensor_sub(w, scaled, &next));
        tc_tensor_release(w);
        w = next;
        if (step % 100 == 0 || step == STEPS - 1) {
            TRY(tc_tensor_mul(err, err, &sq));
            TRY(tc_tensor_mean(sq, TC_ALL_DIMS, false, &mean));
            TRY(tc_tensor_item(mean, &loss));
            if (rank == 0)
                printf("ddp: step %3d  loss (rank 0's shard) %.6f\n", step, loss);
            tc_tensor_release(sq), tc_tensor_release(mean);
        }
        tc_tensor_release(pred), tc_tensor_release(err), tc_tensor_release(grad);
        tc_tensor_release(scaled);
    }
    float got[D];
    TRY(tc_tensor_to_host(w, TC_FLOAT32, got));
    double worst = 0;
    for (int i = 0; i < D; i++)
        worst = maxd(worst, absd(got[i] - truth[i]));
    printf("ddp: rank %d of %d on cuda:%d: largest weight error %.2e\n", rank, world, dev.index,
           worst);
    TRY(tc_dist_barrier(pg));
    tc_tensor_release(x), tc_tensor_release(xt), tc_tensor_release(w_true);
    tc_tensor_release(y), tc_tensor_release(w), tc_tensor_release(lr);
    tc_generator_destroy(g);
    TRY(tc_process_group_destroy(pg));
    return worst < 1e-2 ? 0 : 1;
}
