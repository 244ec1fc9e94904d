/* Trains GPT-2 on tcuda, with the backward pass written out op by op
 * (train_gpt2_model.c) as llm.c does, on the CPU, one GPU, or several GPUs
 * under tools/tcuda-run (DDP).
 *
 *   train_gpt2 --train TRAIN.bin [--val VAL.bin] [--init MODEL.safetensors]
 *       [--layers 12 --heads 12 --width 768 --vocab 50257 --ctx 1024]
 *       [--device cpu|cuda] [--dtype float32|bfloat16] [--tf32] [--graph]
 *       [--batch 4] [--seq 64] [--steps 20] [--grad-accum 1]
 *       [--lr 3e-4] [--warmup 0] [--min-lr-frac 0.1] [--weight-decay 0.1]
 *       [--grad-clip 1.0] [--val-every 0] [--val-steps 10] [--seed 1337]
 *       [--deterministic] [--log FILE] [--save MODEL.safetensors]
 *       [--checkpoint FILE [--checkpoint-every K]] [--resume FILE] [--stop-after S]
 *   tools/tcuda-run -n 4 -- train_gpt2 ...          (one process per GPU)
 *
 * The model is GPT-2 small unless the flags say otherwise, initialized as
 * GPT-2 is (train_gpt2_model.h), or read from a Hugging Face GPT-2
 * checkpoint (--init; the model flags are then ignored, but --heads, used
 * when the file has no "n_head" metadata). --save writes the trained
 * weights in the same layout: examples/gpt generates from them.
 *
 * Token files are llm.c's: 256 int32 (magic 20240520, version 1, the token
 * count), then the tokens as uint16 (tools/tcuda-tokens writes them).
 * A micro-batch is B*T+1 consecutive tokens: x the first B*T, y the last
 * B*T (x shifted by one), as B rows of T; the next micro-batch starts B*T
 * further on, and reading wraps to the start when fewer than B*T+1 are
 * left. Under DDP with N ranks, a global micro-batch is N*B*T+1 tokens and
 * rank r takes the r-th B*T of it: exactly the rows one process with
 * --batch N*B would read, so N ranks with --batch B train the same model as
 * one process with --batch N*B (gradients are averaged, losses are means).
 *
 * A step, as a PyTorch training loop: zero_grad; for each of --grad-accum K
 * micro-batches, forward, loss / K, backward (under DDP the first K-1
 * without communication, as no_sync()); clip_grad_norm_(1.0); the AdamW
 * step (betas 0.9, 0.95, eps 1e-8, fused; weight decay on the 2-d
 * parameters only, as nanoGPT: two optimizers). The learning rate of step s
 * (0-based, of N) is llm.c's and nanoGPT's schedule:
 *   s < W:  lr * (s + 1) / W
 *   else:   min_lr + 0.5 * (1 + cos(pi * (s - W) / (N - W))) * (lr - min_lr),
 *           min_lr = lr * min_lr_frac.
 * The host runs ahead of the GPU: batches go through pinned memory with
 * non-blocking copies, the next batch is read while the step runs, and the
 * only wait is for the numbers each progress line prints.
 *
 * --graph captures one whole step (forward, backward, clipping, optimizer)
 * as a CUDA graph after an eager warm-up step and replays it: batches are
 * copied into the same device buffers, and the learning rate lives in a
 * device tensor (tc_optimizer_set_lr_tensor) filled before each replay.
 * Under DDP the buckets' all_reduces are captured too (NCCL inside the
 * graph); a replayed collective is not watched (dist.h): a dead peer then
 * hangs the replay, as in PyTorch.
 *
 * --deterministic makes the GPU's embedding backward sum its rows, and the
 * attention backward its dq, in a fixed order (tc_use_deterministic_algorithms)
 * instead of with atomic adds, so that two runs on a GPU give the same bits
 * (the CPU always does).
 *
 * Checkpoints (checkpoint.h): --checkpoint FILE writes the whole training
 * state every --checkpoint-every K steps (0: never in between) and after
 * the last step this run takes: the parameters under Hugging Face's names
 * and layout (the file is also a model for --init and examples/gpt), both
 * AdamW optimizers' state (the second group's names start "optimizer1."),
 * the CPU's and every visible GPU's random state, the step, the model's
 * "n_head" and the run's batch shape. --resume FILE loads one into the
 * model and optimizers built from the flags (a file of another model, or
 * another weight decay, is refused, exit 2) and continues at the step
 * after the saved one: the learning rate is the schedule's at that step,
 * the data position is where the loader stands after step * grad-accum
 * global micro-batches (derived from the step, wrapping as the loader
 * does), and the random states are the file's. With the same flags the
 * next steps are those of a run that never stopped, bit for bit (on a GPU
 * with --deterministic). --stop-after S ends this run after step S of the
 * --steps schedule, as a job cut short would. Under DDP, rank 0 writes the
 * file: the parameters and the optimizers' state are the same on every
 * rank (every rank applies the same averaged gradients), so rank 0's are
 * everyone's; the random states in it are rank 0's, and on --resume every
 * rank loads the same file, so each rank continues with rank 0's random
 * states (training draws none: the model has no dropout).
 *
 * Output (rank 0): one line per step, a validation loss every --val-every
 * steps and after the last (with --val), and with --log one line per step
 * "step loss lr grad_norm" (losses %.9g, for scripts). Exit 0; 2 for bad
 * flags, token files or checkpoints (with a message); 1 when training fails. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tcuda/tcuda.h>

#include "train_gpt2_args.h"
#include "train_gpt2_model.h"

/* ---- errors ---------------------------------------------------------------------- */

static int g_rank; /* for messages */

/* A failure while training: the call, tcuda's message, exit 1. */
_Noreturn static void die(const char *what, tc_status st)
{
    fprintf(stderr, "train_gpt2 (rank %d): %s: %s: %s\n", g_rank, what, tc_status_string(st),
            tc_last_error());
    exit(1);
}
#define TRY(call)                                                                                  \
    do {                                                                                           \
        tc_status st_ = (call);                                                                    \
        if (st_ != TC_OK)                                                                          \
            die(#call, st_);                                                                       \
    } while (0)
/* In functions that return a status (the step, which a graph captures). */
#define TRYS(call)                                                                                 \
    do {                                                                                           \
        tc_status st_ = (call);                                                                    \
        if (st_ != TC_OK)                                                                          \
            return st_;                                                                            \
    } while (0)

/* ---- the trainer ---------------------------------------------------------------------- */

/* The run's shape, saved in a checkpoint beside the state, with the flag
 * that sets each. */
enum { RUN_KEYS = 6 };
static const char *const run_keys[RUN_KEYS] = {"train_gpt2.batch",      "train_gpt2.seq",
                                               "train_gpt2.grad_accum", "train_gpt2.ranks",
                                               "train_gpt2.steps",      "train_gpt2.dtype"};
static const char *const run_flags[RUN_KEYS] = {"--batch", "--seq",   "--grad-accum",
                                                "ranks",   "--steps", "--dtype"};

/* What --checkpoint and --resume hand to tc_checkpoint. */
typedef struct ckpt {
    char (*name)[96];   /* Hugging Face's name of each parameter */
    const char **names; /* -> name */
    tc_tensor **params; /* each parameter in Hugging Face's layout (Conv1D's transposed views) */
    char heads[16], run[RUN_KEYS][32];
    const char *meta[2 * (RUN_KEYS + 1) + 1]; /* "n_head", then the run's shape */
} ckpt;

typedef struct trainer {
    opts o;
    gpt2 m;
    int rank, world;
    tc_process_group *pg;
    tc_ddp *ddp;
    tc_optimizer *opt[2]; /* with weight decay, without */
    tc_tensor **pgrads[2];
    int np[2];
    tc_tensor **x, **y;          /* the step's K micro-batches: views of dev_tok */
    tc_tensor *host_tok[2];      /* [K, B*T+1] int64, pinned on a GPU: two, filled in turn */
    tc_tensor *dev_tok;          /* [K, B*T+1] int64 on the device */
    tc_tensor *loss, *norm, *lr; /* float32 0-d: the step's summed loss, grad norm, lr */
    tokens train, val;
    int64_t train_pos;
    ckpt ck; /* with --checkpoint or --resume */
} trainer;

static double lr_at(const opts *o, long long s)
{
    if (s < o->warmup)
        return o->lr * (double)(s + 1) / (double)o->warmup;
    double ratio = (double)(s - o->warmup) / (double)(o->steps - o->warmup);
    double min_lr = o->lr * o->min_lr_frac;
    return min_lr + 0.5 * (1.0 + cos(acos(-1.0) * ratio)) * (o->lr - min_lr);
}

static tc_status ddp_ready(int param, void *ctx) { return tc_ddp_grad_ready(ctx, param); }

/* x and y [B, T] of row k of a [K, B*T+1] token tensor. */
static void xy_views(tc_tensor *tok, int64_t k, int64_t B, int64_t T, tc_tensor **x, tc_tensor **y)
{
    tc_tensor *row, *flat, *a, *b;
    int64_t n = B * T + 1, bt[2] = {B, T};
    TRY(tc_tensor_narrow(tok, 0, k, 1, &row));
    TRY(tc_tensor_view(row, 1, &n, &flat));
    TRY(tc_tensor_narrow(flat, 0, 0, B * T, &a));
    TRY(tc_tensor_narrow(flat, 0, 1, B * T, &b));
    TRY(tc_tensor_view(a, 2, bt, x));
    TRY(tc_tensor_view(b, 2, bt, y));
    tc_tensor_release(row), tc_tensor_release(flat), tc_tensor_release(a), tc_tensor_release(b);
}

/* One training step on the micro-batches already in dev_tok; queues work
 * only (a graph captures exactly this). */
static tc_status train_step(void *ctx)
{
    trainer *t = ctx;
    gpt2 *m = &t->m;
    TRYS(t->ddp ? tc_ddp_zero_grad(t->ddp) : tc_optimizer_zero_grad(m->grads, m->n));
    TRYS(tc_tensor_fill_(t->loss, 0));
    TRYS(gpt2_cast_weights(m));
    for (long long k = 0; k < t->o.accum; k++) {
        if (t->ddp) /* no_sync() for all but the last micro-step */
            TRYS(tc_ddp_set_require_sync(t->ddp, k == t->o.accum - 1));
        TRYS(gpt2_forward_backward(m, t->x[k], t->y[k], 1.0 / (double)t->o.accum, true, t->loss));
        if (t->ddp)
            TRYS(tc_ddp_finish(t->ddp));
    }
    tc_tensor *norm;
    double max_norm = t->o.grad_clip > 0 ? t->o.grad_clip : INFINITY;
    TRYS(tc_clip_grad_norm_(m->grads, m->n, max_norm, 2.0, false, &norm));
    tc_status st = tc_tensor_copy_(t->norm, norm, false);
    tc_tensor_release(norm);
    TRYS(st);
    for (int g = 0; g < 2; g++)
        TRYS(tc_optimizer_step(t->opt[g], t->pgrads[g], t->np[g]));
    return TC_OK;
}

/* The mean over ranks of a float32 0-d tensor, read on the host (a wait). */
static double read_mean(trainer *t, tc_tensor *v)
{
    if (t->pg) {
        tc_work *w;
        TRY(tc_dist_all_reduce(t->pg, v, TC_REDUCE_OP_AVG, &w));
        TRY(tc_work_wait_stream(w, NULL));
        TRY(tc_work_destroy(w));
    }
    double x;
    TRY(tc_tensor_item(v, &x));
    return x;
}

/* The mean validation loss over val_steps micro-batches from the start of
 * the validation file. */
static double validate(trainer *t)
{
    const opts *o = &t->o;
    int64_t BT = o->B * o->T, pos = 0, sizes[2] = {1, BT + 1};
    tc_tensor *host, *dev, *x, *y, *sum;
    TRY(tc_tensor_empty(2, sizes, TC_INT64, (tc_device){TC_CPU, -1}, &host));
    TRY(tc_tensor_empty(2, sizes, TC_INT64, t->m.dev, &dev));
    TRY(tc_tensor_zeros(0, NULL, TC_FLOAT32, t->m.dev, &sum));
    xy_views(dev, 0, o->B, o->T, &x, &y);
    TRY(gpt2_cast_weights(&t->m));
    for (long long i = 0; i < o->val_steps; i++) {
        next_batch(&t->val, &pos, t->rank, t->world, BT, tc_tensor_data_ptr(host));
        TRY(tc_tensor_copy_(dev, host, false));
        TRY(gpt2_forward_backward(&t->m, x, y, 1.0, false, sum));
    }
    double loss = read_mean(t, sum) / (double)o->val_steps;
    tc_tensor *ts[] = {host, dev, x, y, sum};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        tc_tensor_release(ts[i]);
    return loss;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- setup ------------------------------------------------------------------------------ */

static void setup_device(trainer *t)
{
    opts *o = &t->o;
    t->world = 1;
    const char *ws = getenv("WORLD_SIZE");
    if (ws) { /* started by tools/tcuda-run (or torchrun) */
        if (o->dev_set && o->dev.type == TC_CPU)
            die_input("DDP (WORLD_SIZE is set) needs --device cuda");
        TRY(tc_process_group_create_from_env(&t->pg));
        t->rank = g_rank = tc_process_group_rank(t->pg);
        t->world = tc_process_group_size(t->pg);
        o->dev = (tc_device){TC_CUDA, tc_process_group_device(t->pg)};
    } else if (!o->dev_set) {
        o->dev = tc_is_available() ? (tc_device){TC_CUDA, 0} : (tc_device){TC_CPU, -1};
    }
    if (o->dev.type == TC_CUDA) {
        if (!tc_is_available())
            die_input("--device cuda: no GPU (%s)", tc_last_error());
        TRY(tc_set_device(o->dev.index));
    }
    if (o->graph && o->dev.type != TC_CUDA)
        die_input("--graph needs --device cuda");
    if (o->tf32)
        TRY(tc_set_float32_matmul_precision("high"));
    if (o->deterministic)
        TRY(tc_use_deterministic_algorithms(true));
}

static void setup_model(trainer *t)
{
    opts *o = &t->o;
    char err[512];
    tc_status st = o->init
                       ? gpt2_load(o->init, o->cfg.n_head, o->dev, o->dtype, &t->m, err, sizeof err)
                       : gpt2_create(&o->cfg, o->dev, o->dtype, o->seed, &t->m, err, sizeof err);
    if (st != TC_OK) /* a bad checkpoint or config is the input's fault */
        die_input("%s", err);
    o->cfg = t->m.cfg;
    if (o->T > o->cfg.maxT)
        die_input("--seq %lld is longer than the model's %lld positions", o->T,
                  (long long)o->cfg.maxT);
    gpt2 *m = &t->m;
    if (t->pg) { /* gradients are views into DDP's buckets; rank 0's weights everywhere */
        TRY(tc_ddp_create(t->pg, m->params, m->n, NULL, &t->ddp));
        for (int i = 0; i < m->n; i++)
            TRY(tc_ddp_grad(t->ddp, i, &m->grads[i]));
        m->ready = ddp_ready;
        m->ready_ctx = t->ddp;
    } else {
        for (int i = 0; i < m->n; i++)
            TRY(tc_tensor_zeros_like(m->params[i], &m->grads[i]));
    }
    /* two AdamW optimizers: the 2-d parameters with weight decay, the rest without */
    tc_tensor **pp[2];
    for (int g = 0; g < 2; g++) {
        pp[g] = calloc((size_t)m->n, sizeof *pp[g]);
        t->pgrads[g] = calloc((size_t)m->n, sizeof *t->pgrads[g]);
        if (!pp[g] || !t->pgrads[g])
            die("allocating parameter lists", TC_ERROR_OUT_OF_MEMORY);
    }
    for (int i = 0; i < m->n; i++) {
        int g = gpt2_param_decays(m, i) ? 0 : 1;
        pp[g][t->np[g]] = m->params[i];
        t->pgrads[g][t->np[g]++] = m->grads[i];
    }
    for (int g = 0; g < 2; g++) {
        tc_adamw_options ao = tc_adamw_options_default();
        ao.lr = o->lr;
        ao.beta2 = 0.95;
        ao.weight_decay = g == 0 ? o->weight_decay : 0.0;
        TRY(tc_optimizer_create_adamw(pp[g], t->np[g], &ao, &t->opt[g]));
        free(pp[g]);
    }
}

static void setup_data(trainer *t)
{
    opts *o = &t->o;
    int64_t BT = o->B * o->T, need = t->world * BT + 1, sizes[2] = {o->accum, BT + 1};
    t->train = tokens_load(o->train, o->cfg.V, need);
    if (o->val)
        t->val = tokens_load(o->val, o->cfg.V, need);
    tc_device cpu = {TC_CPU, -1};
    for (int i = 0; i < 2; i++) {
        tc_tensor *h;
        TRY(tc_tensor_empty(2, sizes, TC_INT64, cpu, &h));
        if (o->dev.type == TC_CUDA) { /* pinned, so copies need not wait */
            TRY(tc_tensor_pin_memory(h, &t->host_tok[i]));
            tc_tensor_release(h);
        } else {
            t->host_tok[i] = h;
        }
    }
    TRY(tc_tensor_empty(2, sizes, TC_INT64, o->dev, &t->dev_tok));
    t->x = calloc((size_t)o->accum, sizeof *t->x);
    t->y = calloc((size_t)o->accum, sizeof *t->y);
    if (!t->x || !t->y)
        die("allocating batch views", TC_ERROR_OUT_OF_MEMORY);
    for (long long k = 0; k < o->accum; k++)
        xy_views(t->dev_tok, k, o->B, o->T, &t->x[k], &t->y[k]);
    TRY(tc_tensor_zeros(0, NULL, TC_FLOAT32, o->dev, &t->loss));
    TRY(tc_tensor_zeros(0, NULL, TC_FLOAT32, o->dev, &t->norm));
    TRY(tc_tensor_zeros(0, NULL, TC_FLOAT32, o->dev, &t->lr));
}

/* The K micro-batches of the next step into host buffer i. */
static void fill_host(trainer *t, int i)
{
    int64_t BT = t->o.B * t->o.T;
    int64_t *p = tc_tensor_data_ptr(t->host_tok[i]);
    for (long long k = 0; k < t->o.accum; k++)
        next_batch(&t->train, &t->train_pos, t->rank, t->world, BT, p + k * (BT + 1));
}

/* ---- checkpoints ------------------------------------------------------------------------- */

static void run_values(const trainer *t, char v[RUN_KEYS][32])
{
    const opts *o = &t->o;
    const long long n[5] = {o->B, o->T, o->accum, t->world, o->steps};
    for (int k = 0; k < 5; k++)
        snprintf(v[k], 32, "%lld", n[k]);
    snprintf(v[5], 32, "%s", tc_dtype_string(o->dtype));
}

/* The names, the parameters as the file holds them, and the metadata. */
static void setup_checkpoint(trainer *t)
{
    if (!t->o.checkpoint && !t->o.resume)
        return;
    gpt2 *m = &t->m;
    ckpt *c = &t->ck;
    c->name = calloc((size_t)m->n, sizeof *c->name);
    c->names = calloc((size_t)m->n, sizeof *c->names);
    c->params = calloc((size_t)m->n, sizeof *c->params);
    if (!c->name || !c->names || !c->params)
        die("allocating the checkpoint's lists", TC_ERROR_OUT_OF_MEMORY);
    for (int i = 0; i < m->n; i++) {
        gpt2_param_name(m, i, c->name[i], (int)sizeof c->name[i]);
        c->names[i] = c->name[i];
        if (gpt2_param_is_conv1d(m, i)) { /* a view: the optimizers know it by its memory */
            TRY(tc_tensor_transpose(m->params[i], 0, 1, &c->params[i]));
        } else {
            TRY(tc_tensor_retain(m->params[i]));
            c->params[i] = m->params[i];
        }
    }
    snprintf(c->heads, sizeof c->heads, "%d", m->cfg.n_head);
    run_values(t, c->run);
    int k = 0;
    c->meta[k++] = "n_head", c->meta[k++] = c->heads;
    for (int i = 0; i < RUN_KEYS; i++)
        c->meta[k++] = run_keys[i], c->meta[k++] = c->run[i];
    c->meta[k] = NULL;
}

static tc_checkpoint checkpoint_of(trainer *t, long long step)
{
    return (tc_checkpoint){.names = t->ck.names,
                           .params = t->ck.params,
                           .n = t->m.n,
                           .optimizers = t->opt,
                           .n_optimizers = 2,
                           .rng = true,
                           .step = step,
                           .metadata = t->ck.meta};
}

/* The whole state after `step` steps to --checkpoint (rank 0: the state is
 * every rank's, see the top). */
static void save_checkpoint(trainer *t, long long step)
{
    if (t->rank != 0)
        return;
    tc_checkpoint ck = checkpoint_of(t, step);
    TRY(tc_checkpoint_save(t->o.checkpoint, &ck));
    printf("checkpoint %s (step %lld)\n", t->o.checkpoint, step);
    fflush(stdout);
}

/* What --resume's file says of the model and the run, before loading it:
 * another head count is another model (its shapes cannot tell); another
 * run shape is allowed, with a note (rank 0). A file that does not open is
 * left to tc_checkpoint_load's message. */
static void check_resume_file(trainer *t)
{
    const char *path = t->o.resume, *v = NULL;
    tc_safetensors *f;
    if (tc_safetensors_open(path, &f) != TC_OK)
        return;
    if (tc_safetensors_metadata(f, "n_head", &v) == TC_OK && v && atoi(v) != t->m.cfg.n_head)
        die_input("--resume %s: was saved from a model of %s heads, this one has %d (--heads)",
                  path, v, t->m.cfg.n_head);
    char now[RUN_KEYS][32];
    run_values(t, now);
    for (int k = 0; k < RUN_KEYS && t->rank == 0; k++)
        if (tc_safetensors_metadata(f, run_keys[k], &v) == TC_OK && v && strcmp(v, now[k]))
            printf("train_gpt2: note: %s was saved by a run with %s %s, this one has %s: the "
                   "schedule and data position follow this run's flags\n",
                   path, run_flags[k], v, now[k]);
    tc_safetensors_close(f);
}

/* Where the loader stands after `micro` global micro-batches from the start:
 * it reads them at 0, g, 2g, ... (g = ranks * B * T) and wraps to 0 when one
 * would run past the end, so its positions repeat every (n - 1) / g. */
static int64_t train_pos_after(const trainer *t, int64_t micro)
{
    int64_t g = t->world * t->o.B * t->o.T, per_pass = (t->train.n - 1) / g;
    return (micro % per_pass) * g;
}

/* --resume: the file into the model, both optimizers and the random
 * states; the step to start from, and the loader there. Exit 2 for a file
 * that does not fit. */
static long long resume(trainer *t)
{
    const opts *o = &t->o;
    check_resume_file(t);
    tc_checkpoint ck = checkpoint_of(t, 0);
    if (tc_checkpoint_load(o->resume, &ck) != TC_OK) {
        const char *why = tc_last_error();
        die_input("--resume: %s%s", why,
                  strstr(why, "model file") ? " (--resume reads a --checkpoint file; --init reads "
                                              "weights only)"
                                            : "");
    }
    if (ck.step < 0 || ck.step >= o->stop_after)
        die_input("--resume %s is at step %lld: --steps %lld%s leaves nothing to train", o->resume,
                  (long long)ck.step, o->steps, o->stop_after < o->steps ? " (--stop-after)" : "");
    t->train_pos = train_pos_after(t, ck.step * o->accum);
    if (t->rank == 0)
        printf("resumed from %s at step %lld\n", o->resume, (long long)ck.step);
    return ck.step;
}

/* ---- the loop --------------------------------------------------------------------------- */

/* Rank 0's line for step s (0-based), and the log's. */
static void report(trainer *t, FILE *log, long long s, double loss, double lr, double norm,
                   double dt)
{
    const opts *o = &t->o;
    double tokens_per_step = (double)(o->B * o->T * o->accum * t->world);
    char peak[32] = "peak n/a";
    if (o->dev.type == TC_CUDA) {
        size_t bytes;
        TRY(tc_max_memory_allocated(o->dev.index, &bytes));
        snprintf(peak, sizeof peak, "peak %zu MiB", bytes >> 20);
    }
    printf("step %lld/%lld | loss %.6f | lr %.1e | norm %.3f | %.1f ms | %.0f tok/s | %s\n", s + 1,
           o->steps, loss, lr, norm, 1e3 * dt, tokens_per_step / dt, peak);
    fflush(stdout);
    if (log) {
        fprintf(log, "%lld %.9g %.9g %.9g\n", s + 1, loss, lr, norm);
        fflush(log);
    }
}

/* Steps first..stop_after-1 of the schedule. */
static void train(trainer *t, long long first)
{
    opts *o = &t->o;
    FILE *log = NULL;
    if (o->log && t->rank == 0 && !(log = fopen(o->log, "w")))
        die_input("cannot write the log %s", o->log);
    tc_graph *graph = NULL;
    if (o->graph) /* the learning rate is read on the device at each step */
        for (int g = 0; g < 2; g++)
            TRY(tc_optimizer_set_lr_tensor(t->opt[g], t->lr));
    fill_host(t, (int)(first % 2));
    for (long long s = first; s < o->stop_after; s++) {
        if (o->val && o->val_every > 0 && s % o->val_every == 0) {
            double vl = validate(t);
            if (t->rank == 0)
                printf("val loss %.6f (before step %lld)\n", vl, s + 1);
        }
        double lr = lr_at(o, s), t0 = now_s();
        char range[32]; /* "step N" for profilers: scripts/profile.sh train */
        snprintf(range, sizeof range, "step %lld", s + 1);
        tc_nvtx_range_push(range, NULL);
        TRY(tc_tensor_copy_(t->dev_tok, t->host_tok[s % 2], true));
        if (o->graph) {
            TRY(tc_tensor_fill_(t->lr, lr));
        } else {
            for (int g = 0; g < 2; g++)
                TRY(tc_optimizer_set_lr(t->opt[g], lr));
        }
        if (graph) {
            TRY(tc_graph_replay(graph));
        } else {
            TRY(train_step(t));
        }
        if (o->graph && !graph) { /* warmed up: capture the step once */
            TRY(tc_graph_create(&graph));
            tc_graph_capture_guard cg = tc_graph_capture_guard_enter(graph, (tc_graph_pool_id){0},
                                                                     NULL, TC_CAPTURE_MODE_GLOBAL);
            TRY(cg.status);
            tc_status st = train_step(t);
            tc_status end = tc_graph_capture_guard_exit(&cg);
            TRY(st);
            TRY(end);
        }
        tc_nvtx_range_pop(NULL);
        if (s + 1 < o->stop_after) /* the next batch, while the GPU works */
            fill_host(t, (int)((s + 1) % 2));
        double loss = read_mean(t, t->loss) / (double)o->accum, norm;
        TRY(tc_tensor_item(t->norm, &norm));
        double dt = now_s() - t0;
        if (t->rank == 0)
            report(t, log, s, loss, lr, norm, dt);
        bool every = o->checkpoint_every && (s + 1) % o->checkpoint_every == 0;
        if (o->checkpoint && (every || s + 1 == o->stop_after))
            save_checkpoint(t, s + 1);
    }
    if (o->val) {
        double vl = validate(t);
        if (t->rank == 0)
            printf("val loss %.6f (after step %lld)\n", vl, o->stop_after);
    }
    if (graph)
        TRY(tc_graph_destroy(graph));
    if (log)
        fclose(log);
}

static void cleanup(trainer *t)
{
    for (int g = 0; g < 2; g++) {
        TRY(tc_optimizer_destroy(t->opt[g]));
        free(t->pgrads[g]);
    }
    for (long long k = 0; k < t->o.accum; k++) {
        tc_tensor_release(t->x[k]);
        tc_tensor_release(t->y[k]);
    }
    free(t->x);
    free(t->y);
    tc_tensor *ts[] = {t->host_tok[0], t->host_tok[1], t->dev_tok, t->loss, t->norm, t->lr};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        tc_tensor_release(ts[i]);
    for (int i = 0; i < t->m.n; i++) {
        tc_tensor_release(t->m.grads[i]);
        if (t->ck.params)
            tc_tensor_release(t->ck.params[i]);
    }
    free(t->ck.name);
    free(t->ck.names);
    free(t->ck.params);
    if (t->ddp)
        TRY(tc_ddp_destroy(t->ddp));
    gpt2_free(&t->m);
    free(t->train.tok);
    free(t->val.tok);
    if (t->pg)
        TRY(tc_process_group_destroy(t->pg));
}

int main(int argc, char **argv)
{
    trainer t = {.o = parse_flags(argc, argv)};
    setup_device(&t);
    setup_model(&t);
    setup_data(&t);
    setup_checkpoint(&t);
    opts *o = &t.o;
    if (t.rank == 0) {
        char dev[32];
        tc_device_format(o->dev, dev, sizeof dev);
        printf("train_gpt2: %d layers, %d heads, width %lld, vocabulary %lld, %lld positions; "
               "%s %s; %d rank%s x batch %lld x seq %lld x accum %lld; %lld train tokens\n",
               o->cfg.n_layer, o->cfg.n_head, (long long)o->cfg.C, (long long)o->cfg.V,
               (long long)o->cfg.maxT, dev, tc_dtype_string(o->dtype), t.world,
               t.world > 1 ? "s" : "", o->B, o->T, o->accum, (long long)t.train.n);
    }
    train(&t, o->resume ? resume(&t) : 0);
    if (o->save && t.rank == 0) {
        TRY(gpt2_save(&t.m, o->save));
        printf("saved %s\n", o->save);
    }
    cleanup(&t);
    return 0;
}
