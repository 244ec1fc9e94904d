/* What src/train's two files share: the plan of a checkpoint's tensors
 * (checkpoint.c: the parameters, the optimizers' state, the random states,
 * and the arguments that make them) and its metadata (checkpoint_meta.c:
 * the step, the optimizers' kinds and options, the scaler's state, written
 * as strings and read back with every check). */
#ifndef TCUDA_TRAIN_CHECKPOINT_INTERNAL_H
#define TCUDA_TRAIN_CHECKPOINT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "optim/optim_front.h"
#include "tcuda/amp.h"
#include "tcuda/checkpoint.h"
#include "tcuda/random.h"
#include "tcuda/safetensors.h"

/* ---- the plan ---- */

/* One tensor of the file. */
typedef struct tc__train_entry {
    char *name;      /* in the file */
    tc_tensor *live; /* a reference: a live tensor, or a random state's holder */
    tc_tensor *read; /* load: the file's value, on the CPU */
} tc__train_entry;

/* One optimizer of the checkpoint. */
typedef struct tc__train_group {
    tc_optimizer *opt;
    tc__optimizer_info info;
    int *param;      /* the index in ck->params of each of info.n parameters */
    char prefix[24]; /* of its states' names: "optimizer." or "optimizer<g>." */
    char keys[32];   /* of its metadata keys: "tcuda.optimizer." or "tcuda.optimizer<g>." */
} tc__train_group;

typedef struct tc__train_plan {
    tc__train_entry *e;
    int n, cap;
    int rng_first;      /* entries from here on are random states */
    tc__train_group *g; /* the optimizers, ck->optimizer's or ck->optimizers' */
    int n_g;
} tc__train_plan;

/* ---- the metadata ---- */

/* The checkpoint's metadata, key and value strings of its own; a failure
 * to grow is kept in st and returned at the end. */
typedef struct tc__train_meta_item {
    char key[64], value[48];
} tc__train_meta_item;
typedef struct tc__train_meta {
    tc__train_meta_item *item;
    int n, cap;
    tc_status st;
} tc__train_meta;

/* ---- load ---- */

/* The file being loaded, for messages. */
typedef struct tc__train_source {
    const tc_safetensors *f;
    const char *path;
} tc__train_source;

/* What load sets after the tensors' copies, once all is checked. */
typedef struct tc__train_loaded {
    int64_t step;
    double *lr; /* each optimizer's */
    tc_grad_scaler_state scaler;
    tc_rng_state *rng; /* the CPU's, then GPU 0, 1, ... */
    int n_rng;
} tc__train_loaded;

/* The metadata of ck and its plan: "format", the version, the step, the
 * optimizers', the scaler's and the random states' keys. */
tc_status tc__train_meta_build(const tc_checkpoint *ck, const tc__train_plan *p, tc__train_meta *m);
/* The caller's metadata: pairs, none of the checkpoint's keys. *n_out: the
 * number of strings. */
tc_status tc__train_check_user_metadata(const char *const *md, int *n_out);
/* The file's header against what ck and its plan ask: version, step, each
 * optimizer's kind and options (their learning rates into l), the
 * scaler's state, the number of random states. */
tc_status tc__train_read_header(const tc__train_source *s, const tc_checkpoint *ck,
                                const tc__train_plan *p, tc__train_loaded *l);
/* The message of the last failure without its "tc_x: " prefix, copied
 * (tc__fail rewrites the buffer it lives in). */
void tc__train_last_message(char *buf, size_t size);

#endif
