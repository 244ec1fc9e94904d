/* train_gpt2's command line and token files: the flags parsed into opts
 * (bad ones: a message and exit 2), and llm.c's token files read, checked
 * and cut into micro-batches. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "train_gpt2_args.h"

/* Bad flags, token files or checkpoints: the message, exit 2. */
_Noreturn void die_input(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "train_gpt2: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(2);
}

/* ---- flags -------------------------------------------------------------------------- */

static void usage(void)
{
    fprintf(stderr,
            "usage: train_gpt2 --train TRAIN.bin [--val VAL.bin] [--init MODEL.safetensors]\n"
            "  [--layers N] [--heads N] [--width N] [--vocab N] [--ctx N]\n"
            "  [--device cpu|cuda] [--dtype float32|bfloat16] [--tf32] [--graph]\n"
            "  [--batch B] [--seq T] [--steps N] [--grad-accum K] [--lr X] [--warmup W]\n"
            "  [--min-lr-frac F] [--weight-decay X] [--grad-clip X] [--val-every K]\n"
            "  [--val-steps M] [--seed S] [--deterministic] [--log FILE]\n"
            "  [--save MODEL.safetensors] [--checkpoint FILE] [--checkpoint-every K]\n"
            "  [--resume FILE] [--stop-after S]\n");
    exit(2);
}

static long long int_flag(const char *flag, const char *v, long long lo, long long hi)
{
    char *end;
    long long x = strtoll(v, &end, 10);
    if (!*v || *end || x < lo || x > hi) {
        char range[64];
        snprintf(range, sizeof range, "%lld..%lld", lo, hi);
        fprintf(stderr, "train_gpt2: %s wants an integer in %s, got \"%s\"\n", flag, range, v);
        exit(2);
    }
    return x;
}

static double num_flag(const char *flag, const char *v, double lo, double hi)
{
    char *end;
    double x = strtod(v, &end);
    if (!*v || *end || !(x >= lo && x <= hi)) {
        fprintf(stderr, "train_gpt2: %s wants a number in [%g, %g], got \"%s\"\n", flag, lo, hi, v);
        exit(2);
    }
    return x;
}

opts parse_flags(int argc, char **argv)
{
    opts o = {.cfg = {12, 12, 768, 50257, 1024},
              .dtype = TC_FLOAT32,
              .B = 4,
              .T = 64,
              .steps = 20,
              .accum = 1,
              .val_steps = 10,
              .lr = 3e-4,
              .min_lr_frac = 0.1,
              .weight_decay = 0.1,
              .grad_clip = 1.0,
              .seed = 1337};
    const long long big = 1LL << 40;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--tf32")) {
            o.tf32 = true;
            continue;
        }
        if (!strcmp(a, "--graph")) {
            o.graph = true;
            continue;
        }
        if (!strcmp(a, "--deterministic")) {
            o.deterministic = true;
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h"))
            usage();
        if (strncmp(a, "--", 2) != 0) {
            fprintf(stderr, "train_gpt2: unexpected argument \"%s\"\n", a);
            usage();
        }
        if (!v) {
            fprintf(stderr, "train_gpt2: %s needs a value\n", a);
            usage();
        }
        i++;
        if (!strcmp(a, "--train"))
            o.train = v;
        else if (!strcmp(a, "--val"))
            o.val = v;
        else if (!strcmp(a, "--init"))
            o.init = v;
        else if (!strcmp(a, "--save"))
            o.save = v;
        else if (!strcmp(a, "--log"))
            o.log = v;
        else if (!strcmp(a, "--checkpoint"))
            o.checkpoint = v;
        else if (!strcmp(a, "--checkpoint-every"))
            o.checkpoint_every = int_flag(a, v, 0, big);
        else if (!strcmp(a, "--resume"))
            o.resume = v;
        else if (!strcmp(a, "--stop-after"))
            o.stop_after = int_flag(a, v, 1, big);
        else if (!strcmp(a, "--device") && (!strcmp(v, "cpu") || !strcmp(v, "cuda")))
            o.dev = (tc_device){v[1] == 'u' ? TC_CUDA : TC_CPU, v[1] == 'u' ? 0 : -1},
            o.dev_set = true;
        else if (!strcmp(a, "--dtype") && (!strcmp(v, "float32") || !strcmp(v, "bfloat16")))
            o.dtype = v[0] == 'f' ? TC_FLOAT32 : TC_BFLOAT16;
        else if (!strcmp(a, "--layers"))
            o.cfg.n_layer = (int)int_flag(a, v, 1, 1000);
        else if (!strcmp(a, "--heads"))
            o.cfg.n_head = (int)int_flag(a, v, 1, 1000);
        else if (!strcmp(a, "--width"))
            o.cfg.C = int_flag(a, v, 1, 1 << 20);
        else if (!strcmp(a, "--vocab")) /* token files hold uint16 */
            o.cfg.V = int_flag(a, v, 1, 65536);
        else if (!strcmp(a, "--ctx"))
            o.cfg.maxT = int_flag(a, v, 1, 1 << 20);
        else if (!strcmp(a, "--batch"))
            o.B = int_flag(a, v, 1, 1 << 20);
        else if (!strcmp(a, "--seq"))
            o.T = int_flag(a, v, 1, 1 << 20);
        else if (!strcmp(a, "--steps"))
            o.steps = int_flag(a, v, 1, big);
        else if (!strcmp(a, "--grad-accum"))
            o.accum = int_flag(a, v, 1, 1 << 16);
        else if (!strcmp(a, "--warmup"))
            o.warmup = int_flag(a, v, 0, big);
        else if (!strcmp(a, "--val-every"))
            o.val_every = int_flag(a, v, 0, big);
        else if (!strcmp(a, "--val-steps"))
            o.val_steps = int_flag(a, v, 1, big);
        else if (!strcmp(a, "--seed"))
            o.seed = (unsigned long long)int_flag(a, v, 0, big);
        else if (!strcmp(a, "--lr"))
            o.lr = num_flag(a, v, 0, 1e3);
        else if (!strcmp(a, "--min-lr-frac"))
            o.min_lr_frac = num_flag(a, v, 0, 1);
        else if (!strcmp(a, "--weight-decay"))
            o.weight_decay = num_flag(a, v, 0, 1e3);
        else if (!strcmp(a, "--grad-clip")) /* 0: no clipping */
            o.grad_clip = num_flag(a, v, 0, 1e30);
        else {
            fprintf(stderr, "train_gpt2: unknown flag or value: %s %s\n", a, v);
            usage();
        }
    }
    if (!o.train) {
        fprintf(stderr, "train_gpt2: --train is required\n");
        usage();
    }
    if (o.checkpoint_every && !o.checkpoint) {
        fprintf(stderr, "train_gpt2: --checkpoint-every needs --checkpoint FILE\n");
        usage();
    }
    if (!o.stop_after || o.stop_after > o.steps)
        o.stop_after = o.steps;
    return o;
}

/* ---- token files -------------------------------------------------------------------- */

/* Reads an llm.c token file and checks it: header, size, tokens < V, at
 * least `need` tokens. Exits 2 with a message on any fault. */
tokens tokens_load(const char *path, int64_t V, int64_t need)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        die_input("cannot open token file %s", path);
    int32_t h[256];
    struct stat sb;
    if (fread(h, sizeof h, 1, f) != 1 || fstat(fileno(f), &sb) != 0)
        die_input("%s is shorter than a token file's 1024-byte header", path);
    if (h[0] != 20240520 || h[1] != 1)
        die_input("%s is not an llm.c token file (magic 20240520, version 1 expected)", path);
    if (h[2] < 0 || (int64_t)sb.st_size != 1024 + 2 * (int64_t)h[2])
        die_input("%s: the header's token count does not match the file's size", path);
    tokens t = {malloc((size_t)h[2] * 2 + 2), h[2]};
    if (!t.tok || (t.n && fread(t.tok, 2, (size_t)t.n, f) != (size_t)t.n))
        die_input("cannot read the tokens of %s", path);
    fclose(f);
    for (int64_t i = 0; i < t.n; i++)
        if (t.tok[i] >= V)
            die_input("%s holds a token outside the model's vocabulary (token %lld is %u; the "
                      "vocabulary is %lld)",
                      path, (long long)i, t.tok[i], (long long)V);
    if (t.n < need)
        die_input("%s holds %lld tokens, a global micro-batch needs %lld", path, (long long)t.n,
                  (long long)need);
    return t;
}

/* This rank's next micro-batch (B*T+1 tokens as int64 into dst); *pos is
 * the global batch's start. */
void next_batch(const tokens *d, int64_t *pos, int rank, int world, int64_t BT, int64_t *dst)
{
    if (*pos + world * BT + 1 > d->n)
        *pos = 0;
    const uint16_t *src = d->tok + *pos + rank * BT;
    for (int64_t i = 0; i <= BT; i++)
        dst[i] = src[i];
    *pos += world * BT;
}
