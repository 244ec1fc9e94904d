/* train_gpt2's command line and token files (train_gpt2_args.c). */
#ifndef TRAIN_GPT2_ARGS_H
#define TRAIN_GPT2_ARGS_H

#include <stdbool.h>
#include <stdint.h>

#include <tcuda/tcuda.h>

#include "train_gpt2_model.h"

/* The flags (train_gpt2.c's header says what each does). */
typedef struct opts {
    gpt2_config cfg;
    const char *train, *val, *init, *save, *log, *checkpoint, *resume;
    tc_device dev;
    bool dev_set;
    tc_dtype dtype;
    bool tf32, graph, deterministic;
    long long B, T, steps, accum, warmup, val_every, val_steps, checkpoint_every, stop_after;
    double lr, min_lr_frac, weight_decay, grad_clip;
    unsigned long long seed;
} opts;

/* Parses argv; prints the usage and exits 2 on a bad flag or value. */
opts parse_flags(int argc, char **argv);

/* Bad flags, token files or checkpoints: "train_gpt2: " and the message on
 * stderr, exit 2. */
_Noreturn void die_input(const char *fmt, ...);

/* An llm.c token file in memory. */
typedef struct tokens {
    uint16_t *tok;
    int64_t n;
} tokens;

/* Reads an llm.c token file and checks it: header, size, tokens < V, at
 * least `need` tokens. Exits 2 with a message on any fault. */
tokens tokens_load(const char *path, int64_t V, int64_t need);

/* This rank's next micro-batch (B*T+1 tokens as int64 into dst); *pos is
 * the global batch's start, advanced past this global batch (wrapping to
 * the file's start when the next would run past its end). */
void next_batch(const tokens *d, int64_t *pos, int rank, int world, int64_t BT, int64_t *dst);

#endif
