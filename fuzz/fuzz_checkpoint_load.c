/* libFuzzer harness for loading training checkpoints (src/train/checkpoint.c):
 * any bytes as a whole file (an in-memory file, memfd) to tc_checkpoint_load
 * into a small live state made fresh for each input: two float32
 * parameters ("w" [3], "b" [2, 2]), AdamW with amsgrad over them, a CPU
 * GradScaler, the CPU's random state (rng true; no GPU in this build) and a
 * step.
 *
 * A refused file must leave everything as it was (the parameters' and the
 * optimizer's bytes, the scaler's state, the learning rate, the random
 * state, the step) and set a message naming the call. An accepted one must
 * have put exactly the file's bytes into the parameters and the optimizer's
 * state (read again here with tc_safetensors_get_copy), and its
 * "tcuda.step" into the step (0 for a plain model file, which loads only
 * with no optimizer, scaler or rng asked: the last input byte's low bit asks
 * for parameters only). An input that names "tcuda.optimizers" anywhere is
 * loaded into two optimizers instead (param groups: one over "w", one over
 * "b"), whose states the file names "optimizer.w..." and "optimizer1.b...". */
#define _GNU_SOURCE /* memfd_create (fuzz_file.h), memmem */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_file.h"
#include "fuzz_input.h"
#include "tcuda/tcuda.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const names[2] = {"w", "b"};
static const int ndims[2] = {1, 2};
static const int64_t sizes[2][2] = {{3, 0}, {2, 2}};
#define N_TENSORS 10 /* 2 parameters, 4 states each */

typedef struct live {
    tc_tensor *p[2];
    tc_optimizer *opt[2]; /* one over both parameters, or one per parameter */
    bool groups;
    tc_grad_scaler *scaler;
} live;

/* The state's tensors in file order: parameters, then each one's states,
 * with their names in the file. */
static void tensors_of(const live *l, tc_tensor **ts, char (*tnames)[64])
{
    static const char *const suffix[4] = {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
    int k = 0;
    for (int i = 0; i < 2; i++) {
        FZ_CHECK(tc_tensor_retain(l->p[i]) == TC_OK);
        ts[k] = l->p[i];
        snprintf(tnames[k++], 64, "%s", names[i]);
    }
    for (int i = 0; i < 2; i++)
        for (int s = 0; s < 4; s++) {
            tc_optimizer *opt = l->groups ? l->opt[i] : l->opt[0];
            FZ_CHECK(tc_optimizer_get_state(opt, l->groups ? 0 : i, (tc_optimizer_state)s,
                                            &ts[k]) == TC_OK);
            snprintf(tnames[k++], 64, "%s.%s.%s", l->groups && i ? "optimizer1" : "optimizer",
                     names[i], suffix[s]);
        }
}

/* Every byte of the live state that a load may change. */
typedef struct snapshot {
    uint8_t bytes[256];
    size_t size;
    tc_grad_scaler_state scaler;
    tc_rng_state rng;
    double lr[2];
} snapshot;

static void take(const live *l, snapshot *s)
{
    memset(s, 0, sizeof *s);
    tc_tensor *ts[N_TENSORS];
    char tnames[N_TENSORS][64];
    tensors_of(l, ts, tnames);
    for (int k = 0; k < N_TENSORS; k++) {
        size_t n = (size_t)tc_tensor_numel(ts[k]) * 4;
        FZ_CHECK(s->size + n <= sizeof s->bytes);
        FZ_CHECK(tc_tensor_to_host(ts[k], TC_FLOAT32, s->bytes + s->size) == TC_OK);
        s->size += n;
        tc_tensor_release(ts[k]);
    }
    FZ_CHECK(tc_grad_scaler_get_state(l->scaler, &s->scaler) == TC_OK);
    tc_generator *g;
    FZ_CHECK(tc_default_generator((tc_device){TC_CPU, -1}, &g) == TC_OK);
    FZ_CHECK(tc_generator_get_state(g, &s->rng) == TC_OK);
    for (int i = 0; i < (l->groups ? 2 : 1); i++)
        FZ_CHECK(tc_optimizer_get_lr(l->opt[i], &s->lr[i]) == TC_OK);
}

static void make(live *l, bool groups)
{
    l->groups = groups;
    l->opt[1] = NULL;
    for (int i = 0; i < 2; i++) {
        FZ_CHECK(tc_tensor_full(ndims[i], sizes[i], 0.5 + i, TC_FLOAT32, (tc_device){TC_CPU, -1},
                                &l->p[i]) == TC_OK);
    }
    tc_adamw_options o = tc_adamw_options_default();
    o.amsgrad = true;
    if (groups) {
        FZ_CHECK(tc_optimizer_create_adamw(&l->p[0], 1, &o, &l->opt[0]) == TC_OK);
        o.weight_decay = 0;
        FZ_CHECK(tc_optimizer_create_adamw(&l->p[1], 1, &o, &l->opt[1]) == TC_OK);
    } else {
        FZ_CHECK(tc_optimizer_create_adamw(l->p, 2, &o, &l->opt[0]) == TC_OK);
    }
    tc_grad_scaler_options so = tc_grad_scaler_options_default();
    FZ_CHECK(tc_grad_scaler_create((tc_device){TC_CPU, -1}, &so, &l->scaler) == TC_OK);
    tc_generator *g;
    FZ_CHECK(tc_default_generator((tc_device){TC_CPU, -1}, &g) == TC_OK);
    FZ_CHECK(tc_generator_manual_seed(g, 1) == TC_OK);
}

/* After a load: the live tensors hold the file's bytes. */
static void check_loaded(const char *path, const live *l, bool params_only, int64_t step)
{
    tc_safetensors *f = NULL;
    FZ_CHECK(tc_safetensors_open(path, &f) == TC_OK);
    tc_tensor *ts[N_TENSORS];
    char tnames[N_TENSORS][64];
    tensors_of(l, ts, tnames);
    for (int k = 0; k < (params_only ? 2 : N_TENSORS); k++) {
        tc_tensor *x = NULL;
        FZ_CHECK(tc_safetensors_get_copy(f, tnames[k], (tc_device){TC_CPU, -1}, &x) == TC_OK);
        size_t n = (size_t)tc_tensor_numel(ts[k]) * 4;
        uint8_t a[64], b[64];
        FZ_CHECK(n <= sizeof a && tc_tensor_numel(x) == tc_tensor_numel(ts[k]));
        FZ_CHECK(tc_tensor_to_host(ts[k], TC_FLOAT32, a) == TC_OK);
        FZ_CHECK(tc_tensor_to_host(x, TC_FLOAT32, b) == TC_OK);
        FZ_CHECK(memcmp(a, b, n) == 0);
        tc_tensor_release(x);
    }
    for (int k = 0; k < N_TENSORS; k++)
        tc_tensor_release(ts[k]);
    const char *v = NULL;
    FZ_CHECK(tc_safetensors_metadata(f, "tcuda.checkpoint", &v) == TC_OK);
    if (!v)
        FZ_CHECK(params_only && step == 0);
    else
        FZ_CHECK(tc_safetensors_metadata(f, "tcuda.step", &v) == TC_OK && v &&
                 strtoll(v, NULL, 10) == step);
    FZ_CHECK(tc_safetensors_close(f) == TC_OK);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fz_file(data, size);
    live l;
    static const char groups_key[] = "tcuda.optimizers";
    make(&l, memmem(data, size, groups_key, sizeof groups_key - 1) != NULL);
    bool params_only = size && (data[size - 1] & 1);
    tc_checkpoint ck = {.names = names, .params = l.p, .n = 2, .step = 12345};
    if (!params_only) {
        ck.scaler = l.scaler, ck.rng = true;
        if (l.groups)
            ck.optimizers = l.opt, ck.n_optimizers = 2;
        else
            ck.optimizer = l.opt[0];
    }
    snapshot before, after;
    take(&l, &before);
    tc_status st = tc_checkpoint_load(path, &ck);
    if (st != TC_OK) {
        FZ_CHECK(strncmp(tc_last_error(), "tc_checkpoint_load: ", 20) == 0);
        FZ_CHECK(ck.step == 12345);
        take(&l, &after);
        FZ_CHECK(memcmp(&before, &after, sizeof before) == 0);
    } else {
        check_loaded(path, &l, params_only, ck.step);
    }
    for (int i = 0; i < (l.groups ? 2 : 1); i++)
        FZ_CHECK(tc_optimizer_destroy(l.opt[i]) == TC_OK);
    FZ_CHECK(tc_grad_scaler_destroy(l.scaler) == TC_OK);
    tc_tensor_release(l.p[0]), tc_tensor_release(l.p[1]);
    return 0;
}
