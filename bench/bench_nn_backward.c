/* bench_nn_backward: each backward op of nn_backward.h on the GPU at GPT-2
 * small's training shapes (8 x 1024 tokens, width 768, MLP width 3072,
 * vocabulary 50257, 12 heads of 64, causal attention over 1024 tokens), in
 * float32 and bfloat16, and float16 too for the GEMM-bound ops (linear,
 * attention), whose kernels differ by dtype.
 *
 * Each row has two times. The GPU time: the median of `repeats` calls timed
 * with events on the current stream, after 3 warm-ups. The host time of the
 * call with GPU work queued ahead of it (a 4096^3 float32 matmul queued just
 * before, the median of 15): a backward op in a training step must let the
 * host run ahead, so this is its launches' cost; one that waits for the
 * device takes the queue's time instead, which the "synchronize" row (the
 * host time of a wait behind the same queue) gives for scale. The rate is
 * GB/s of the bytes the op must move at least (each input read once, each
 * output written once) for the memory-bound ops, TFLOP/s for linear's GEMMs
 * (2 * rows * in * out each) and attention (the causal half of its five
 * products; the row that recomputes the forward is credited the same five).
 * Outputs are new tensors, released after each call: the caching allocator
 * hands the same blocks back, as in a training step. The classifier's 16-bit
 * rows (linear's backward, the fused cross entropy) run twice: dense, and
 * with the logits or their gradient in rows padded to 50264 ("rows 50264"),
 * the layout tc_nn_linear and then tc_nn_cross_entropy_fused return.
 * Prints CSV: op,dtype,shape,us,rate,unit,host_us (bench/run.sh
 * nn_backward joins it with bench/torch/bench_nn_backward_torch.py's rows).
 * Usage: bench_nn_backward [repeats] */
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"
#include "tcuda/tcuda.h"

#include "tensor/nn_internal.h" /* attention's fused switch */

enum { B = 8, T = 1024, C = 768, C4 = 4 * 768, V = 50257, H = 12, HD = 64, ROWS = B * T };
enum { HOST_REPS = 15, QUEUE = 4096 };
#define P_DROP 0.1

static const tc_device GPU = {TC_CUDA, -1};

/* Which call a job makes, and the operands it reads from job.t. */
typedef enum kind {
    GELU,           /* grad, x */
    SOFTMAX,        /* grad, y */
    LOG_SOFTMAX,    /* grad, y */
    LAYER_NORM,     /* grad, x, mean, rstd, weight */
    CE_FUSED,       /* logits, target */
    CE_BACKWARD,    /* grad_loss, logits, target */
    EMBEDDING,      /* grad, indices */
    EMBEDDING_INTO, /* grad_weight (accumulated into), grad, indices */
    LINEAR,         /* grad, x, weight */
    LINEAR_INTO,    /* grad, x, weight, grad_weight and grad_bias (accumulated into) */
    DROPOUT,        /* grad, mask */
    SDPA,           /* grad_out, q, k, v */
    SDPA_LSE        /* grad_out, q, k, v, out, lse */
} kind;

typedef struct job {
    kind kind;
    tc_tensor *t[6];
    int64_t n;     /* layer_norm's width; embedding's number of rows */
    unsigned want; /* linear's tc_nn_linear_grad bits; gelu's approximate */
} job;

/* One call of j's op; the gradients it returns are released. */
static void run(void *p)
{
    job *j = p;
    tc_tensor **t = j->t, *r[3] = {NULL, NULL, NULL};
    switch (j->kind) {
    case GELU: TRY(tc_nn_gelu_backward(t[0], t[1], (tc_gelu_approximate)j->want, &r[0])); break;
    case SOFTMAX: TRY(tc_nn_softmax_backward(t[0], t[1], -1, &r[0])); break;
    case LOG_SOFTMAX: TRY(tc_nn_log_softmax_backward(t[0], t[1], -1, &r[0])); break;
    case LAYER_NORM:
        TRY(tc_nn_layer_norm_backward(t[0], t[1], 1, &j->n, t[2], t[3], t[4], &r[0], &r[1], &r[2]));
        break;
    case CE_FUSED:
        TRY(tc_nn_cross_entropy_fused(t[0], t[1], -100, TC_REDUCTION_MEAN, 1.0, &r[0], &r[1]));
        break;
    case CE_BACKWARD:
        TRY(tc_nn_cross_entropy_backward(t[0], t[1], t[2], -100, TC_REDUCTION_MEAN, &r[0]));
        break;
    case EMBEDDING: TRY(tc_nn_embedding_backward(t[0], t[1], j->n, -1, false, &r[0])); break;
    case EMBEDDING_INTO: TRY(tc_nn_embedding_backward_(t[0], t[1], t[2], -1, false)); break;
    case LINEAR: TRY(tc_nn_linear_backward(t[0], t[1], t[2], j->want, &r[0], &r[1], &r[2])); break;
    case LINEAR_INTO:
        TRY(tc_nn_linear_backward_into(t[0], t[1], t[2], true, NULL, t[3], t[4]));
        break;
    case DROPOUT: TRY(tc_nn_dropout_backward(t[0], t[1], P_DROP, &r[0])); break;
    case SDPA:
        TRY(tc_nn_scaled_dot_product_attention_backward(t[0], t[1], t[2], t[3], true, NULL, &r[0],
                                                        &r[1], &r[2]));
        break;
    case SDPA_LSE:
        TRY(tc_nn_scaled_dot_product_attention_backward_lse(t[0], t[1], t[2], t[3], t[4], t[5],
                                                            true, NULL, &r[0], &r[1], &r[2]));
        break;
    }
    for (int i = 0; i < 3; i++)
        tc_tensor_release(r[i]);
}

static void job_release(job *j)
{
    for (int i = 0; i < 6; i++)
        tc_tensor_release(j->t[i]);
}

/* ---- the queue ahead of the host-timed calls ----------------------------------------- */

static tc_tensor *queue_a, *queue_b;

static void queue_work(void)
{
    tc_tensor *c = NULL;
    TRY(tc_tensor_matmul(queue_a, queue_b, &c));
    tc_tensor_release(c);
}

/* Median host microseconds of fn(ctx) called right after queue_work, the
 * device idle before each. */
static double behind_queue_us(void (*fn)(void *), void *ctx)
{
    double t[HOST_REPS];
    for (int r = 0; r < HOST_REPS; r++) {
        TRY(tc_synchronize(-1));
        queue_work();
        double t0 = bench_now_ns();
        fn(ctx);
        t[r] = (bench_now_ns() - t0) * 1e-3;
        TRY(tc_synchronize(-1));
    }
    return bench_median(t, HOST_REPS);
}

static void sync_all(void *ctx)
{
    (void)ctx;
    TRY(tc_synchronize(-1));
}

/* ---- rows ------------------------------------------------------------------------------ */

static int reps = 51;

/* One CSV row for j: the GPU time and rate (GB/s of `bytes` when it is
 * positive, else TFLOP/s of `flops`) and the host time behind the queue. */
static void row(const char *op, tc_dtype dt, const char *shape, job *j, double bytes, double flops)
{
    double ms = bench_gpu_median_ms(run, j, reps);
    double host = behind_queue_us(run, j);
    double rate = bytes > 0 ? bytes / ms / 1e6 : flops / ms / 1e9;
    printf("%s,%s,%s,%.2f,%.1f,%s,%.1f\n", op, tc_dtype_string(dt), shape, ms * 1e3, rate,
           bytes > 0 ? "GB/s" : "TFLOP/s", host);
    fflush(stdout);
}

static tc_tensor *randn(int ndim, const int64_t *sizes, tc_dtype dt)
{
    tc_tensor *t = NULL;
    TRY(tc_tensor_randn(ndim, sizes, dt, GPU, NULL, &t));
    return t;
}

/* A normal [rows, cols] in rows padded to whole 16-byte vectors of 16-bit
 * dt: a view of the first cols of [rows, cols rounded up to 8]. */
static tc_tensor *randn_padded(int64_t rows, int64_t cols, tc_dtype dt)
{
    int64_t s[2] = {rows, (cols + 7) / 8 * 8};
    tc_tensor *wide = randn(2, s, dt), *t = NULL;
    TRY(tc_tensor_narrow(wide, 1, 0, cols, &t));
    tc_tensor_release(wide);
    return t;
}

/* int64 indices in [0, hi), uniform. */
static tc_tensor *indices(int ndim, const int64_t *sizes, int64_t hi)
{
    tc_tensor *t = NULL;
    TRY(tc_tensor_empty(ndim, sizes, TC_INT64, GPU, &t));
    TRY(tc_tensor_random_(t, 0, hi, NULL));
    return t;
}

/* "8192x3072": the sizes joined by x, in a buffer that the next call
 * overwrites (a row's shape cell). */
static const char *dims(int ndim, const int64_t *sizes)
{
    static char buf[96];
    int at = 0;
    for (int i = 0; i < ndim && at < (int)sizeof buf; i++)
        at += snprintf(buf + at, sizeof buf - (size_t)at, "%s%lld", i ? "x" : "",
                       (long long)sizes[i]);
    return buf;
}

static double esize(tc_dtype dt) { return (double)tc_dtype_size(dt); }

/* ---- the ops ---------------------------------------------------------------------------- */

/* gelu's backward on the MLP's hidden activations [B*T, 4C]. */
static void bench_gelu(tc_dtype dt)
{
    int64_t s[2] = {ROWS, C4};
    job j = {.kind = GELU, .t = {randn(2, s, dt), randn(2, s, dt)}};
    double bytes = 3.0 * ROWS * C4 * esize(dt);
    j.want = TC_GELU_APPROXIMATE_TANH;
    row("gelu_backward tanh", dt, dims(2, s), &j, bytes, 0);
    j.want = TC_GELU_APPROXIMATE_NONE;
    row("gelu_backward none", dt, dims(2, s), &j, bytes, 0);
    job_release(&j);
}

/* softmax's backward on attention's probabilities [B*H*T, T] (the math
 * path's rows); log_softmax's on the logits [B*T, V]. */
static void bench_softmax(tc_dtype dt)
{
    int64_t s[2] = {(int64_t)B * H * T, T}, l[2] = {ROWS, V};
    job j = {.kind = SOFTMAX, .t = {randn(2, s, dt)}};
    tc_tensor *x = randn(2, s, dt);
    TRY(tc_nn_softmax(x, -1, &j.t[1]));
    tc_tensor_release(x);
    row("softmax_backward", dt, dims(2, s), &j, 3.0 * s[0] * s[1] * esize(dt), 0);
    job_release(&j);

    job k = {.kind = LOG_SOFTMAX, .t = {randn(2, l, dt)}};
    x = randn(2, l, dt);
    TRY(tc_nn_log_softmax(x, -1, &k.t[1]));
    tc_tensor_release(x);
    row("log_softmax_backward", dt, dims(2, l), &k, 3.0 * l[0] * l[1] * esize(dt), 0);
    job_release(&k);
}

/* layer_norm's dx, dweight and dbias over [B*T, C], from the forward's mean
 * and rstd. */
static void bench_layer_norm(tc_dtype dt)
{
    int64_t s[2] = {ROWS, C}, c = C;
    job j = {.kind = LAYER_NORM, .n = C, .t = {randn(2, s, dt), randn(2, s, dt)}};
    tc_tensor *w = randn(1, &c, dt), *b = randn(1, &c, dt), *out = NULL;
    TRY(tc_nn_native_layer_norm(j.t[1], 1, &c, w, b, 1e-5, &out, &j.t[2], &j.t[3]));
    j.t[4] = w;
    tc_tensor_release(b);
    tc_tensor_release(out);
    double bytes = 3.0 * ROWS * C * esize(dt) + 2.0 * ROWS * 4 + 3.0 * C * esize(dt);
    row("layer_norm_backward", dt, dims(2, s), &j, bytes, 0);
    job_release(&j);
}

/* cross_entropy over the logits [B*T, V], mean: forward and backward in one
 * pass, and the backward alone. */
static void bench_cross_entropy(tc_dtype dt)
{
    int64_t s[2] = {ROWS, V}, rows = ROWS;
    job j = {.kind = CE_FUSED, .t = {randn(2, s, dt), indices(1, &rows, V)}};
    double bytes = 2.0 * ROWS * V * esize(dt) + 8.0 * ROWS;
    row("cross_entropy_fused", dt, dims(2, s), &j, bytes, 0);
    job k = {.kind = CE_BACKWARD, .t = {NULL, j.t[0], j.t[1]}};
    TRY(tc_tensor_full(0, NULL, 1.0, dt, GPU, &k.t[0]));
    row("cross_entropy_backward", dt, dims(2, s), &k, bytes, 0);
    tc_tensor_release(k.t[0]);
    if (dt != TC_FLOAT32) { /* the logits as tc_nn_linear returns them: rows padded to 50264 */
        tc_tensor_release(j.t[0]);
        j.t[0] = randn_padded(ROWS, V, dt);
        char shape[200]; /* dims() and a suffix */
        snprintf(shape, sizeof shape, "%s rows %lld", dims(2, s), (long long)(V + 7) / 8 * 8);
        row("cross_entropy_fused", dt, shape, &j, bytes, 0);
    }
    job_release(&j);
}

/* The token embedding's gradient [V, C] from [B, T, C]: a new tensor with
 * atomic adds and deterministic, and added into a tied gradient. */
static void bench_embedding(tc_dtype dt)
{
    int64_t s[3] = {B, T, C}, w[2] = {V, C};
    job j = {.kind = EMBEDDING, .n = V, .t = {randn(3, s, dt), indices(2, s, V)}};
    double read = (double)ROWS * C * esize(dt) + 8.0 * ROWS;
    double bytes = read + (double)V * C * esize(dt);
    char shape[200]; /* dims() and a suffix */
    snprintf(shape, sizeof shape, "%s->%d", dims(3, s), V);
    row("embedding_backward", dt, shape, &j, bytes, 0);
    TRY(tc_use_deterministic_algorithms(true));
    row("embedding_backward det", dt, shape, &j, bytes, 0);
    TRY(tc_use_deterministic_algorithms(false));
    /* into: only the rows picked are read and written (at most one a token) */
    job k = {.kind = EMBEDDING_INTO, .t = {NULL, j.t[0], j.t[1]}};
    TRY(tc_tensor_zeros(2, w, dt, GPU, &k.t[0]));
    row("embedding_backward_ into", dt, shape, &k, read + 2.0 * ROWS * C * esize(dt), 0);
    tc_tensor_release(k.t[0]);
    job_release(&j);
}

/* GPT-2's linears over B*T rows: attention's qkv and projection, the MLP's
 * two, and the tied classifier (no bias). */
static const struct {
    int64_t in, out;
    bool bias;
} LINEARS[] = {{C, 3 * C, true}, {C, C, true}, {C, C4, true}, {C4, C, true}, {C, V, false}};

static void bench_linear(tc_dtype dt)
{
    for (size_t i = 0; i < sizeof LINEARS / sizeof LINEARS[0]; i++) {
        int64_t in = LINEARS[i].in, out = LINEARS[i].out, g[2] = {ROWS, out}, x[2] = {ROWS, in},
                w[2] = {out, in};
        char shape[200]; /* dims() and a suffix */
        snprintf(shape, sizeof shape, "%s->%lld", dims(2, x), (long long)out);
        job j = {.kind = LINEAR, .t = {randn(2, g, dt), randn(2, x, dt), randn(2, w, dt)}};
        double flops = 2.0 * ROWS * (double)in * (double)out;
        j.want = TC_NN_LINEAR_GRAD_X;
        row("linear_backward dx", dt, shape, &j, 0, flops);
        j.want = TC_NN_LINEAR_GRAD_WEIGHT | (LINEARS[i].bias ? TC_NN_LINEAR_GRAD_BIAS : 0);
        row(LINEARS[i].bias ? "linear_backward dw+db" : "linear_backward dw", dt, shape, &j, 0,
            flops);
        if (dt == TC_FLOAT32) { /* train_gpt2's float32 step: into the gradients, beta = 1 */
            job k = {.kind = LINEAR_INTO, .t = {j.t[0], j.t[1], j.t[2]}};
            TRY(tc_tensor_zeros(2, w, dt, GPU, &k.t[3]));
            if (LINEARS[i].bias)
                TRY(tc_tensor_zeros(1, &out, dt, GPU, &k.t[4]));
            row(LINEARS[i].bias ? "linear_backward_into dw+db" : "linear_backward_into dw", dt,
                shape, &k, 0, flops);
            tc_tensor_release(k.t[3]);
            tc_tensor_release(k.t[4]);
        }
        if (dt != TC_FLOAT32 && out % 8) {
            /* the gradient in rows padded to whole 16-byte vectors, as
             * tc_nn_cross_entropy_fused returns it: read as it lies */
            tc_tensor_release(j.t[0]);
            j.t[0] = randn_padded(ROWS, out, dt);
            snprintf(shape, sizeof shape, "%s->%lld rows %lld", dims(2, x), (long long)out,
                     (long long)(out + 7) / 8 * 8);
            j.want = TC_NN_LINEAR_GRAD_X;
            row("linear_backward dx", dt, shape, &j, 0, flops);
            j.want = TC_NN_LINEAR_GRAD_WEIGHT;
            row("linear_backward dw", dt, shape, &j, 0, flops);
        }
        job_release(&j);
    }
}

/* dropout's backward on the residual stream [B*T, C], p = 0.1. */
static void bench_dropout(tc_dtype dt)
{
    int64_t s[2] = {ROWS, C};
    job j = {.kind = DROPOUT, .t = {randn(2, s, dt)}};
    tc_tensor *x = randn(2, s, dt), *y = NULL;
    TRY(tc_nn_dropout(x, P_DROP, true, NULL, &y, &j.t[1]));
    tc_tensor_release(x);
    tc_tensor_release(y);
    row("dropout_backward", dt, dims(2, s), &j, (double)ROWS * C * (2.0 * esize(dt) + 1), 0);
    job_release(&j);
}

/* Attention's backward, causal, q, k and v the head views of one
 * [B, T, 3C] projection and grad_out a head view of [B, T, C], as
 * examples/train_gpt2 has them: recomputing the forward (the plain
 * backward call), and from the lse forward's out and lse (the call
 * train_gpt2 makes), fused and on the math path. */
static void bench_attention(tc_dtype dt)
{
    int64_t ps[3] = {B, T, 3 * C}, hs[4] = {B, T, H, HD};
    job j = {.kind = SDPA};
    tc_tensor *proj = randn(3, ps, dt), *gproj = randn(4, hs, dt);
    TRY(tc_tensor_transpose(gproj, 1, 2, &j.t[0]));
    for (int i = 0; i < 3; i++) {
        tc_tensor *part = NULL, *split = NULL;
        TRY(tc_tensor_narrow(proj, 2, i * C, C, &part));
        TRY(tc_tensor_view(part, 4, hs, &split));
        TRY(tc_tensor_transpose(split, 1, 2, &j.t[1 + i]));
        tc_tensor_release(part);
        tc_tensor_release(split);
    }
    TRY(tc_nn_scaled_dot_product_attention_lse(j.t[1], j.t[2], j.t[3], true, NULL, &j.t[4],
                                               &j.t[5]));
    double flops = 5.0 * 2.0 * B * H * (double)T * T * HD / 2;
    char shape[200]; /* dims() and a suffix */
    snprintf(shape, sizeof shape, "%s causal", dims(4, (int64_t[]){B, H, T, HD}));
    row("sdpa_backward", dt, shape, &j, 0, flops);
    j.kind = SDPA_LSE;
    row("sdpa_backward_lse", dt, shape, &j, 0, flops);
    tc__nn_attention_set_fused(false);
    row("sdpa_backward_lse math", dt, shape, &j, 0, flops);
    tc__nn_attention_set_fused(true);
    job_release(&j);
    tc_tensor_release(proj);
    tc_tensor_release(gproj);
}

int main(int argc, char **argv)
{
    if (argc > 1 && atoi(argv[1]) > 0)
        reps = atoi(argv[1]);
    if (tc_device_count() == 0) {
        printf("bench_nn_backward: no GPU\n");
        return 0;
    }
    int64_t q[2] = {QUEUE, QUEUE};
    queue_a = randn(2, q, TC_FLOAT32);
    queue_b = randn(2, q, TC_FLOAT32);
    queue_work(); /* warm-up: cuBLAS's handle and workspace */
    TRY(tc_synchronize(-1));
    printf("# bench_nn_backward on %s, median of %d (GPU) and %d (host behind a %d^3 float32 "
           "matmul)\n",
           bench_device_name(0), reps, HOST_REPS, QUEUE);
    printf("op,dtype,shape,us,rate,unit,host_us\n");
    printf("synchronize,-,-,,,,%.1f\n", behind_queue_us(sync_all, NULL));
    static const tc_dtype two[2] = {TC_FLOAT32, TC_BFLOAT16};
    static const tc_dtype three[3] = {TC_FLOAT32, TC_FLOAT16, TC_BFLOAT16};
    for (int i = 0; i < 2; i++) {
        bench_gelu(two[i]);
        bench_softmax(two[i]);
        bench_layer_norm(two[i]);
        bench_cross_entropy(two[i]);
        bench_embedding(two[i]);
        bench_dropout(two[i]);
    }
    for (int i = 0; i < 3; i++) {
        bench_linear(three[i]);
        bench_attention(three[i]);
    }
    tc_tensor_release(queue_a);
    tc_tensor_release(queue_b);
    return 0;
}
