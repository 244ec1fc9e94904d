/* bench_loss: tc_nn_cross_entropy on a GPU with work queued ahead of it.
 *
 * The logits of a language model's batch (2048 rows of GPT-2's 50257
 * classes, float32), mean over the rows. Behind a queue of GPU work (a
 * 4096^3 float32 matmul, milliseconds), the host time of the call itself:
 * a call that waits for the device takes the queue's time, one that does
 * not takes its launches'. Beside it the host time of tc_synchronize behind
 * the same queue (what a wait costs here), and the GPU time of the call
 * (timing events, idle GPU). Medians of 15. Last the GPU time of the mean
 * over many short rows (2^20 rows of 10 classes), where a row is a few
 * loads. Prints "name value unit" rows; bench/run.sh loss puts PyTorch's beside
 * them. */
#include <stdio.h>

#include "bench_util.h"
#include "tcuda/tcuda.h"

enum { ROWS = 2048, CLASSES = 50257, REPS = 15, BIG = 4096, SHORT_ROWS = 1 << 20, SHORT = 10 };

static const tc_device GPU = {TC_CUDA, 0};

typedef struct job {
    tc_tensor *logits, *target, *a, *b;
} job;

static void queue_work(job *j)
{
    tc_tensor *c;
    TRY(tc_tensor_matmul(j->a, j->b, &c));
    tc_tensor_release(c);
}

static void loss(void *p)
{
    job *j = p;
    tc_tensor *y;
    TRY(tc_nn_cross_entropy(j->logits, j->target, -100, TC_REDUCTION_MEAN, &y));
    tc_tensor_release(y);
}

/* Median host microseconds of fn(j) called behind queue_work. */
static double behind_queue_us(job *j, void (*fn)(void *))
{
    double t[REPS];
    for (int r = 0; r < REPS; r++) {
        TRY(tc_synchronize(-1));
        queue_work(j);
        double t0 = bench_now_ns();
        fn(j);
        t[r] = (bench_now_ns() - t0) * 1e-3;
        TRY(tc_synchronize(-1));
    }
    return bench_median(t, REPS);
}

static void sync_all(void *p)
{
    (void)p;
    TRY(tc_synchronize(-1));
}

/* int64 targets for `rows` rows of `classes` classes, uniform in [0, classes - 1). */
static tc_tensor *targets(int64_t rows, int64_t classes)
{
    tc_tensor *u, *s, *sc, *t;
    TRY(tc_tensor_rand(1, &rows, TC_FLOAT32, GPU, NULL, &u));
    TRY(tc_tensor_full(0, NULL, (double)(classes - 1), TC_FLOAT32, GPU, &sc));
    TRY(tc_tensor_mul(u, sc, &s));
    TRY(tc_tensor_to(s, GPU, TC_INT64, false, &t));
    tc_tensor_release(u);
    tc_tensor_release(s);
    tc_tensor_release(sc);
    return t;
}

int main(void)
{
    if (!tc_is_available()) {
        printf("bench_loss: no GPU (%s)\n", tc_last_error());
        return 0;
    }
    job j;
    TRY(tc_tensor_randn(2, (int64_t[]){ROWS, CLASSES}, TC_FLOAT32, GPU, NULL, &j.logits));
    j.target = targets(ROWS, CLASSES);
    TRY(tc_tensor_randn(2, (int64_t[]){BIG, BIG}, TC_FLOAT32, GPU, NULL, &j.a));
    TRY(tc_tensor_randn(2, (int64_t[]){BIG, BIG}, TC_FLOAT32, GPU, NULL, &j.b));
    loss(&j); /* warm-up */
    queue_work(&j);
    TRY(tc_synchronize(-1));

    printf("bench_loss on %s: cross_entropy mean of [%d, %d] float32\n", bench_device_name(0), ROWS,
           CLASSES);
    double call = behind_queue_us(&j, loss), wait = behind_queue_us(&j, sync_all);
    double gpu = bench_gpu_median_ms(loss, &j, REPS);
    printf("%-34s %12.3f  %s\n", "cross_entropy host, work queued", call, "us (the call)");
    printf("%-34s %12.3f  %s\n", "synchronize host, work queued", wait, "us (a wait, for scale)");
    printf("%-34s %12.3f  %s\n", "cross_entropy GPU", gpu * 1e3, "us (events, idle GPU)");
    job k = j;
    TRY(tc_tensor_randn(2, (int64_t[]){SHORT_ROWS, SHORT}, TC_FLOAT32, GPU, NULL, &k.logits));
    k.target = targets(SHORT_ROWS, SHORT);
    loss(&k);
    double short_gpu = bench_gpu_median_ms(loss, &k, REPS);
    printf("%-34s %12.3f  %s\n", "cross_entropy GPU, 2^20 x 10", short_gpu * 1e3,
           "us (events, idle GPU)");
    tc_tensor *all[] = {j.logits, j.target, j.a, j.b, k.logits, k.target};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tc_tensor_release(all[i]);
    return 0;
}
