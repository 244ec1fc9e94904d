/* What the optimizer module's front end (optim.c, foreach.c, amp.c) shares:
 * building a checked tc__mt_list from arrays of tensors, and finding the
 * backend of a device. Not installed. */
#ifndef TCUDA_OPTIM_FRONT_H
#define TCUDA_OPTIM_FRONT_H

#include "optim_internal.h"
#include "tcuda/optim.h"
#include "tensor/tensor_internal.h"

/* A list being built over n tensors; its arrays are the builder's. */
typedef struct tc__mt_build {
    tc__mt_list l;
    int64_t *numel;
    void **ptr[TC__MT_SLOTS];
    tc_device device;              /* resolved */
    const tc_tensor *const *first; /* the list that set dtype, device, sizes */
} tc__mt_build;

/* Allocates the arrays for n >= 0 tensors (TC_ERROR_OUT_OF_MEMORY). */
tc_status tc__mt_build_init(tc__mt_build *b, int n);
void tc__mt_build_free(tc__mt_build *b);
/* Checks ts[0..n) (the builder's n; `what` names the list in messages) and
 * puts their data pointers in `slot`. The first list given sets the dtype
 * (a floating one), the device and the sizes; every later list must match
 * it tensor by tensor. Every tensor must be live and contiguous. */
tc_status tc__mt_build_slot(tc__mt_build *b, int slot, const tc_tensor *const *ts,
                            const char *what);
/* A number no other optimizer of this process had or will have (a handle's
 * memory may serve a later optimizer): how the scaler tells them apart.
 * 0 for a handle that is not a live optimizer. */
uint64_t tc__optimizer_serial(const tc_optimizer *opt);
/* What a checkpoint (src/train) reads of an optimizer that the public calls
 * do not give: its kind, its options (the kind's; lr is the number set
 * last), whether it reads its learning rate from a tensor, and its
 * parameters (borrowed, params[0..n)). TC_ERROR_INVALID_HANDLE for a handle
 * that is not a live optimizer. */
typedef enum tc__optimizer_kind {
    TC__OPTIMIZER_ADAM,
    TC__OPTIMIZER_ADAMW,
    TC__OPTIMIZER_SGD
} tc__optimizer_kind;
typedef struct tc__optimizer_info {
    tc__optimizer_kind kind;
    tc_adamw_options adam; /* Adam and AdamW */
    tc_sgd_options sgd;    /* SGD */
    bool lr_tensor;
    tc_tensor *const *params;
    int n;
} tc__optimizer_info;
tc_status tc__optimizer_info_get(const tc_optimizer *opt, tc__optimizer_info *out);
/* Checks an array argument and its count: not NULL where n > 0, n >= 0. */
tc_status tc__mt_check_count(const void *arr, int n, const char *what);
/* A one-element float32 tensor on `device` (lr, grad_scale, found_inf) or
 * NULL when optional and absent; *out its data. */
tc_status tc__mt_scalar(const tc_tensor *t, tc_device device, const char *what, float **out);
/* A one-element float32 operand (a scalar read or written beside a list),
 * for tc__mt_publish. */
typedef struct tc__mt_scalar_use {
    const void *ptr; /* NULL: none */
    tc_dtype dtype;
    bool write;
} tc__mt_scalar_use;
/* Declares a GPU operation on the list to the access layer's watchers (the
 * stream sanitizer, captures ordered by data) before it is queued: the
 * slots whose bit is set in write_slots are written, the other slots in
 * use read, and the scalars as they say. Nothing for a CPU list or while
 * nobody watches; a watcher's refusal (TC_ERROR_RACE) is returned. */
tc_status tc__mt_publish(const tc__mt_build *b, unsigned write_slots,
                         const tc__mt_scalar_use *scalars, int n_scalars, const char *what);
/* The optimizer backend of a resolved device (TC_ERROR_NO_DEVICE where
 * there is none). */
tc_status tc__optim_backend_of(tc_device device, const tc__optim_backend **out);

#endif
