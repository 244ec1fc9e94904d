/* Training checkpoints (include/tcuda/checkpoint.h) on the CPU: round trips
 * of parameters of several dtypes and layouts, AdamW (amsgrad) and SGD
 * (momentum) state, the scaler, the CPU's random state, the step and the
 * caller's metadata, checked byte for byte against the live objects they
 * came from and against the file as tc_safetensors reads it; a resume that
 * takes the same steps, bit for bit, as a run that never stopped
 * (support/checkpoint_train.h); a plain model file loaded as parameters;
 * and every bad input: each failed load is checked to change nothing (the
 * parameters' and the optimizer's bytes, the scaler, the random state and
 * the step); several optimizers (param groups) in one file: a resume,
 * their names, and lists or files that do not match. test_checkpoint_cuda
 * runs the resume on a GPU. */
#include <stdlib.h>
#include <unistd.h>

#include "checkpoint_train.h"

static const tc_device CPU = {TC_CPU, -1};
static char dir[] = "/tmp/tcuda_ckpt_test_XXXXXX";

static const char *file_named(const char *name)
{
    static char paths[4][256];
    static int next;
    char *p = paths[next++ % 4];
    snprintf(p, sizeof paths[0], "%s/%s", dir, name);
    return p;
}

static bool says(const char *what) { return strstr(tc_last_error(), what) != NULL; }

/* f's metadata `key` is the text `want`. */
static void meta_is(const tc_safetensors *f, const char *key, const char *want)
{
    const char *v = NULL;
    CHECK_OK(tc_safetensors_metadata(f, key, &v));
    CHECK(v && !strcmp(v, want));
}

/* f's metadata `key` read as a number (NaN when absent: no comparison holds). */
static double meta_num(const tc_safetensors *f, const char *key)
{
    const char *v = NULL;
    CHECK_OK(tc_safetensors_metadata(f, key, &v));
    return v ? strtod(v, NULL) : NAN;
}

static bool same_bytes(const tc_tensor *a, const tc_tensor *b)
{
    size_t n = (size_t)tc_tensor_numel(a) * tc_dtype_size(tc_tensor_dtype(a));
    if (tc_tensor_dtype(a) != tc_tensor_dtype(b) || tc_tensor_numel(a) != tc_tensor_numel(b))
        return false;
    unsigned char *x = malloc(n + 1), *y = malloc(n + 1);
    CHECK_OK(tc_tensor_to_host(a, tc_tensor_dtype(a), x));
    CHECK_OK(tc_tensor_to_host(b, tc_tensor_dtype(b), y));
    bool same = !memcmp(x, y, n);
    free(x), free(y);
    return same;
}

static tc_generator *cpu_gen(void)
{
    tc_generator *g = NULL;
    CHECK_OK(tc_default_generator(CPU, &g));
    return g;
}

static tc_rng_state cpu_rng(void)
{
    tc_rng_state s;
    memset(&s, 0, sizeof s);
    CHECK_OK(tc_generator_get_state(cpu_gen(), &s));
    return s;
}

/* ---- round trips ------------------------------------------------------------------------ */

/* AdamW with amsgrad, a scaler, the CPU's random state, the step and the
 * caller's metadata: saved after 2 steps, loaded into fresh objects, equal
 * byte for byte; the file holds what the header says under those names. */
static void test_round_trip_adamw(void)
{
    const char *path = file_named("adamw.safetensors");
    trainer a;
    train_seed(CPU, 7);
    train_make(&a, CPU, 7);
    train_step(&a), train_step(&a);
    train_state want = train_state_of(&a);
    tc_checkpoint ck = train_ck(&a);
    const char *md[] = {"run", "test", "lr_schedule", "linear", NULL};
    ck.metadata = md;
    CHECK_OK(tc_checkpoint_save(path, &ck));

    /* the file, read as safetensors */
    tc_safetensors *f = NULL;
    CHECK_OK(tc_safetensors_open(path, &f));
    /* params, 4 states each, rng.cpu, and rng.cuda.<i> for each GPU there is */
    int gpus = tc_device_count() > 0 ? tc_device_count() : 0;
    CHECK(tc_safetensors_count(f) == TRAIN_N * 5 + 1 + gpus);
    meta_is(f, "format", "pt");
    meta_is(f, "tcuda.checkpoint", "1");
    meta_is(f, "tcuda.step", "2");
    meta_is(f, "tcuda.optimizer.kind", "adamw");
    CHECK(meta_num(f, "tcuda.optimizer.lr") == want.lr);
    meta_is(f, "tcuda.optimizer.amsgrad", "true");
    CHECK(meta_num(f, "tcuda.scaler.scale") == want.scaler.scale);
    CHECK(meta_num(f, "tcuda.rng.cuda_devices") == gpus);
    meta_is(f, "lr_schedule", "linear");
    for (int i = 0; i < TRAIN_N; i++) {
        tc_tensor *x = NULL, *live = NULL;
        CHECK_OK(tc_safetensors_get_copy(f, train_names[i], CPU, &x));
        CHECK(x && same_bytes(x, a.p[i]));
        tc_tensor_release(x);
        char name[128];
        snprintf(name, sizeof name, "optimizer.%s.exp_avg_sq", train_names[i]);
        CHECK_OK(tc_safetensors_get_copy(f, name, CPU, &x));
        CHECK_OK(tc_optimizer_get_state(a.opt, i, TC_OPTIMIZER_STATE_EXP_AVG_SQ, &live));
        CHECK(x && live && same_bytes(x, live));
        tc_tensor_release(x), tc_tensor_release(live);
        snprintf(name, sizeof name, "optimizer.%s.step", train_names[i]);
        double steps = 0;
        CHECK_OK(tc_safetensors_get_copy(f, name, CPU, &x));
        CHECK_OK(tc_tensor_item(x, &steps));
        CHECK(tc_tensor_ndim(x) == 0 && steps == 1); /* step 1 was skipped (an infinity) */
        tc_tensor_release(x);
    }
    tc_tensor *rng = NULL;
    CHECK_OK(tc_safetensors_get_copy(f, "rng.cpu", CPU, &rng));
    CHECK(rng && tc_tensor_dtype(rng) == TC_UINT8 && tc_tensor_numel(rng) == TC_RNG_STATE_SIZE);
    CHECK(rng && !memcmp(tc_tensor_data_ptr(rng), want.cpu.bytes, TC_RNG_STATE_SIZE));
    tc_tensor_release(rng);
    CHECK_OK(tc_safetensors_close(f));
    train_free(&a);

    /* into fresh objects, from another seed */
    trainer b;
    train_seed(CPU, 99);
    train_make(&b, CPU, 99);
    train_step(&b);
    tc_checkpoint ck2 = train_ck(&b);
    CHECK_OK(tc_checkpoint_load(path, &ck2));
    b.step = ck2.step;
    CHECK(ck2.step == 2);
    train_state got = train_state_of(&b);
    CHECK(train_state_equal(&want, &got));
    train_free(&b);
    free(want.bytes), free(got.bytes);
}

/* SGD with momentum over float64 parameters, no scaler, no random states. */
static void test_round_trip_sgd(void)
{
    const char *path = file_named("sgd.safetensors");
    const char *names[2] = {"a", "b"};
    int64_t sa[2] = {3, 4}, sb = 6;
    tc_tensor *p[2] = {NULL, NULL}, *g[2] = {NULL, NULL};
    tc_sgd_options o = tc_sgd_options_default();
    o.momentum = 0.9, o.nesterov = true, o.lr = 0.1;
    tc_optimizer *opt = NULL;
    CHECK_OK(tc_tensor_randn(2, sa, TC_FLOAT64, CPU, NULL, &p[0]));
    CHECK_OK(tc_tensor_randn(1, &sb, TC_FLOAT64, CPU, NULL, &p[1]));
    CHECK_OK(tc_tensor_randn(2, sa, TC_FLOAT64, CPU, NULL, &g[0]));
    CHECK_OK(tc_tensor_randn(1, &sb, TC_FLOAT64, CPU, NULL, &g[1]));
    CHECK_OK(tc_optimizer_create_sgd(p, 2, &o, &opt));
    CHECK_OK(tc_optimizer_step(opt, g, 2));
    CHECK_OK(tc_optimizer_step(opt, g, 2));
    tc_checkpoint ck = {.names = names, .params = p, .n = 2, .optimizer = opt, .step = -5};
    CHECK_OK(tc_checkpoint_save(path, &ck));

    tc_tensor *q[2] = {NULL, NULL};
    tc_optimizer *opt2 = NULL;
    CHECK_OK(tc_tensor_zeros(2, sa, TC_FLOAT64, CPU, &q[0]));
    CHECK_OK(tc_tensor_zeros(1, &sb, TC_FLOAT64, CPU, &q[1]));
    o.lr = 0.5; /* the learning rate is restored, not compared */
    CHECK_OK(tc_optimizer_create_sgd(q, 2, &o, &opt2));
    tc_checkpoint ck2 = {.names = names, .params = q, .n = 2, .optimizer = opt2};
    CHECK_OK(tc_checkpoint_load(path, &ck2));
    CHECK(ck2.step == -5);
    double lr = 0;
    CHECK_OK(tc_optimizer_get_lr(opt2, &lr));
    CHECK(lr == 0.1);
    for (int i = 0; i < 2; i++) {
        CHECK(same_bytes(p[i], q[i]));
        for (int s = TC_OPTIMIZER_STATE_STEP; s <= TC_OPTIMIZER_STATE_MOMENTUM_BUFFER; s++) {
            if (s != TC_OPTIMIZER_STATE_STEP && s != TC_OPTIMIZER_STATE_MOMENTUM_BUFFER)
                continue;
            tc_tensor *x = NULL, *y = NULL;
            CHECK_OK(tc_optimizer_get_state(opt, i, (tc_optimizer_state)s, &x));
            CHECK_OK(tc_optimizer_get_state(opt2, i, (tc_optimizer_state)s, &y));
            CHECK(x && y && same_bytes(x, y));
            tc_tensor_release(x), tc_tensor_release(y);
        }
    }
    /* both take the same next step */
    CHECK_OK(tc_optimizer_step(opt, g, 2));
    CHECK_OK(tc_optimizer_step(opt2, g, 2));
    CHECK(same_bytes(p[0], q[0]) && same_bytes(p[1], q[1]));
    CHECK_OK(tc_optimizer_destroy(opt));
    CHECK_OK(tc_optimizer_destroy(opt2));
    for (int i = 0; i < 2; i++)
        tc_tensor_release(p[i]), tc_tensor_release(q[i]), tc_tensor_release(g[i]);
}

/* An optimizer that reads its learning rate from a tensor: the tensor is the
 * caller's schedule, which a load leaves alone (its value and the number). */
static void test_lr_tensor(void)
{
    const char *path = file_named("lr_tensor.safetensors");
    const char *name = "w";
    int64_t n = 4;
    tc_tensor *p = NULL, *g = NULL, *lr = NULL;
    CHECK_OK(tc_tensor_full(1, &n, 1, TC_FLOAT32, CPU, &p));
    CHECK_OK(tc_tensor_full(1, &n, 0.5, TC_FLOAT32, CPU, &g));
    CHECK_OK(tc_tensor_full(0, NULL, 0.25, TC_FLOAT32, CPU, &lr));
    tc_adamw_options o = tc_adamw_options_default();
    tc_optimizer *opt = NULL;
    CHECK_OK(tc_optimizer_create_adamw(&p, 1, &o, &opt));
    CHECK_OK(tc_optimizer_set_lr(opt, 0.125));
    tc_checkpoint ck = {.names = &name, .params = &p, .n = 1, .optimizer = opt};
    CHECK_OK(tc_checkpoint_save(path, &ck)); /* lr 0.125 */
    CHECK_OK(tc_optimizer_set_lr(opt, 0.5));
    CHECK_OK(tc_optimizer_set_lr_tensor(opt, lr));
    CHECK_OK(tc_checkpoint_load(path, &ck));
    double v = 0, num = 0;
    CHECK_OK(tc_tensor_item(lr, &v));
    CHECK_OK(tc_optimizer_get_lr(opt, &num));
    CHECK(v == 0.25 && num == 0.5);
    /* the step still reads the tensor */
    CHECK_OK(tc_optimizer_step(opt, &g, 1));
    double got = 0;
    tc_tensor *first = NULL;
    CHECK_OK(tc_tensor_narrow(p, 0, 0, 1, &first));
    CHECK_OK(tc_tensor_item(first, &got));
    /* AdamW's first step moves by lr (m / sqrt(v) = 1) after the decay */
    CHECK(fabs(got - (1 * (1 - 0.25 * 0.01) - 0.25)) < 1e-6);
    tc_tensor_release(first);
    CHECK_OK(tc_optimizer_destroy(opt));
    tc_tensor_release(p), tc_tensor_release(g), tc_tensor_release(lr);
}

/* Parameters only, of several dtypes, one of them a strided view (saved
 * row-major, loaded through its strides); a disabled scaler. */
static void test_round_trip_params(void)
{
    const char *path = file_named("params.safetensors");
    const char *names[3] = {"bf", "idx", "t"};
    int64_t s2[2] = {4, 3};
    tc_tensor *p[3] = {NULL, NULL, NULL}, *q[3] = {NULL, NULL, NULL}, *base = NULL;
    CHECK_OK(tc_tensor_randn(2, s2, TC_BFLOAT16, CPU, NULL, &p[0]));
    CHECK_OK(tc_tensor_arange(-5, 7, 1, TC_INT64, CPU, &p[1]));
    CHECK_OK(tc_tensor_randn(2, s2, TC_FLOAT16, CPU, NULL, &base));
    CHECK_OK(tc_tensor_transpose(base, 0, 1, &p[2]));
    tc_grad_scaler_options so = tc_grad_scaler_options_default();
    so.enabled = false;
    tc_grad_scaler *sc = NULL;
    CHECK_OK(tc_grad_scaler_create(CPU, &so, &sc));
    tc_checkpoint ck = {.names = names, .params = p, .n = 3, .scaler = sc, .step = 41};
    CHECK_OK(tc_checkpoint_save(path, &ck));

    int64_t s1 = 12, st[2] = {3, 4};
    CHECK_OK(tc_tensor_zeros(2, s2, TC_BFLOAT16, CPU, &q[0]));
    CHECK_OK(tc_tensor_zeros(1, &s1, TC_INT64, CPU, &q[1]));
    tc_tensor *qbase = NULL;
    CHECK_OK(tc_tensor_zeros(2, s2, TC_FLOAT16, CPU, &qbase));
    CHECK_OK(tc_tensor_transpose(qbase, 0, 1, &q[2]));
    CHECK(tc_tensor_size(q[2], 0) == st[0] && !tc_tensor_is_contiguous(q[2]));
    tc_checkpoint ck2 = {.names = names, .params = q, .n = 3, .scaler = sc};
    CHECK_OK(tc_checkpoint_load(path, &ck2));
    CHECK(ck2.step == 41);
    CHECK(same_bytes(p[0], q[0]) && same_bytes(p[1], q[1]));
    CHECK(same_bytes(base, qbase)); /* the transposed view wrote through */
    tc_tensor *contig = NULL;
    CHECK_OK(tc_tensor_contiguous(q[2], &contig));
    tc_tensor *pc = NULL;
    CHECK_OK(tc_tensor_contiguous(p[2], &pc));
    CHECK(same_bytes(pc, contig));
    tc_tensor_release(contig), tc_tensor_release(pc);
    CHECK_OK(tc_grad_scaler_destroy(sc));
    for (int i = 0; i < 3; i++)
        tc_tensor_release(p[i]), tc_tensor_release(q[i]);
    tc_tensor_release(base), tc_tensor_release(qbase);
}

/* A plain model file (no checkpoint metadata, an extra tensor): its
 * parameters load, the step becomes 0, the extra is ignored, and asking it
 * for an optimizer, a scaler or random states is refused. */
static void test_model_file(void)
{
    const char *path = file_named("model.safetensors");
    int64_t n = 5;
    tc_tensor *w = NULL, *extra = NULL, *live = NULL;
    CHECK_OK(tc_tensor_randn(1, &n, TC_FLOAT32, CPU, NULL, &w));
    CHECK_OK(tc_tensor_zeros(1, &n, TC_FLOAT32, CPU, &extra));
    CHECK_OK(tc_tensor_zeros(1, &n, TC_FLOAT32, CPU, &live));
    const char *names[2] = {"w", "lm_head.weight"};
    const tc_tensor *ts[2] = {w, extra};
    CHECK_OK(tc_safetensors_save(path, names, ts, 2, NULL));
    tc_checkpoint ck = {.names = names, .params = &live, .n = 1, .step = 9};
    CHECK_OK(tc_checkpoint_load(path, &ck));
    CHECK(ck.step == 0 && same_bytes(w, live));
    tc_optimizer *opt = NULL;
    tc_sgd_options o = tc_sgd_options_default();
    CHECK_OK(tc_optimizer_create_sgd(&live, 1, &o, &opt));
    ck.optimizer = opt, ck.step = 9;
    CHECK_STATUS(tc_checkpoint_load(path, &ck), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("model file") && says("optimizer") && ck.step == 9);
    ck.optimizer = NULL, ck.rng = true;
    CHECK_STATUS(tc_checkpoint_load(path, &ck), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("random states"));
    CHECK_OK(tc_optimizer_destroy(opt));
    tc_tensor_release(w), tc_tensor_release(extra), tc_tensor_release(live);
}

/* ---- bad input ----------------------------------------------------------------------------- */

/* Writes src's tensors and metadata to dst, with metadata `key` set to
 * `value` (NULL: removed), tensor `drop` left out and tensor `swap` given
 * `with`'s value instead (any may be NULL). */
static void rewrite(const char *src, const char *dst, const char *key, const char *value,
                    const char *drop, const char *swap, const tc_tensor *with)
{
    tc_safetensors *f = NULL;
    CHECK_OK(tc_safetensors_open(src, &f));
    int n = tc_safetensors_count(f), m = tc_safetensors_metadata_count(f), k = 0, j = 0;
    const char **names = calloc((size_t)n + 1, sizeof *names);
    tc_tensor **ts = calloc((size_t)n + 1, sizeof *ts);
    const char **md = calloc((size_t)(2 * m + 3), sizeof *md);
    for (int i = 0; i < n; i++) {
        const char *name = tc_safetensors_name(f, i);
        if (drop && !strcmp(name, drop))
            continue;
        names[k] = name;
        if (swap && !strcmp(name, swap)) {
            CHECK_OK(tc_tensor_retain((tc_tensor *)with));
            ts[k] = (tc_tensor *)with;
        } else {
            CHECK_OK(tc_safetensors_get_copy(f, name, CPU, &ts[k]));
        }
        k++;
    }
    bool seen = false;
    for (int i = 0; i < m; i++) {
        const char *mk = tc_safetensors_metadata_key(f, i), *mv = NULL;
        CHECK_OK(tc_safetensors_metadata(f, mk, &mv));
        if (key && !strcmp(mk, key)) {
            seen = true;
            if (!value)
                continue;
            mv = value;
        }
        md[j++] = mk, md[j++] = mv;
    }
    if (key && value && !seen)
        md[j++] = key, md[j++] = value;
    CHECK_OK(tc_safetensors_save(dst, names, (const tc_tensor *const *)ts, k, md));
    for (int i = 0; i < k; i++)
        tc_tensor_release(ts[i]);
    free(names), free(ts), free(md);
    CHECK_OK(tc_safetensors_close(f));
}

/* The first `keep` bytes of src, or src's bytes with byte `at` flipped. */
static void copy_cut(const char *src, const char *dst, long keep, long flip_at)
{
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    CHECK(in && out);
    if (!in || !out)
        return;
    int c;
    for (long i = 0; (c = fgetc(in)) != EOF && (keep < 0 || i < keep); i++)
        fputc(i == flip_at ? c ^ 0xff : c, out);
    fclose(in), fclose(out);
}

/* A failed load must leave every piece of b as it was. */
static void check_unchanged(const trainer *b, const train_state *before, int64_t step)
{
    train_state now = train_state_of(b);
    CHECK(train_state_equal(before, &now) && step == before->step);
    free(now.bytes);
}

#define BAD_LOAD(file, status, needle)                                                             \
    do {                                                                                           \
        tc_checkpoint ck_ = train_ck(&b);                                                          \
        CHECK_STATUS(tc_checkpoint_load(file, &ck_), status);                                      \
        if (!says(needle))                                                                         \
            printf("  message \"%s\" lacks \"%s\"\n", tc_last_error(), needle);                    \
        CHECK(says(needle));                                                                       \
        check_unchanged(&b, &before, ck_.step);                                                    \
    } while (0)

static void test_bad_files(void)
{
    const char *good = file_named("good.safetensors");
    trainer b;
    train_seed(CPU, 5);
    train_make(&b, CPU, 5);
    train_step(&b), train_step(&b);
    tc_checkpoint ck = train_ck(&b);
    CHECK_OK(tc_checkpoint_save(good, &ck));
    train_step(&b); /* now unlike the file: a partial load would show */
    train_state before = train_state_of(&b);

    const char *last = "optimizer.wte.weight.max_exp_avg_sq"; /* the last state of the plan */
    const char *bad = file_named("bad.safetensors");
    BAD_LOAD(file_named("no-such-file"), TC_ERROR_IO, "no-such-file");
    rewrite(good, bad, NULL, NULL, last, NULL, NULL);
    BAD_LOAD(bad, TC_ERROR_INVALID_ARGUMENT, last);
    rewrite(good, bad, NULL, NULL, "rng.cpu", NULL, NULL);
    BAD_LOAD(bad, TC_ERROR_INVALID_ARGUMENT, "rng.cpu");
    int64_t wrong[2] = {9, 4};
    tc_tensor *x = NULL;
    CHECK_OK(tc_tensor_zeros(2, wrong, TC_FLOAT32, CPU, &x));
    rewrite(good, bad, NULL, NULL, NULL, last, x);
    BAD_LOAD(bad, TC_ERROR_SHAPE, "[9, 4] in the file, [4, 9] live");
    tc_tensor_release(x);
    int64_t right[2] = {4, 9};
    CHECK_OK(tc_tensor_zeros(2, right, TC_FLOAT64, CPU, &x));
    rewrite(good, bad, NULL, NULL, NULL, last, x);
    BAD_LOAD(bad, TC_ERROR_DTYPE, "float64");
    tc_tensor_release(x);
    int64_t rs = TC_RNG_STATE_SIZE;
    CHECK_OK(tc_tensor_full(1, &rs, 7, TC_UINT8, CPU, &x));
    rewrite(good, bad, NULL, NULL, NULL, "rng.cpu", x); /* not a state blob */
    BAD_LOAD(bad, TC_ERROR_INVALID_ARGUMENT, "rng.cpu");
    tc_tensor_release(x);

    /* metadata */
    rewrite(good, bad, "tcuda.optimizer.kind", "sgd", NULL, NULL, NULL);
    BAD_LOAD(bad, TC_ERROR_INVALID_ARGUMENT, "\"sgd\"");
    rewrite(good, bad, "tcuda.optimizer.beta2", "0.99", NULL, NULL, NULL);
    BAD_LOAD(bad, TC_ERROR_INVALID_ARGUMENT, "beta2");
    rewrite(good, bad, "tcuda.optimizer.amsgrad", "false", NULL, NULL, NULL);
    BAD_LOAD(bad, TC_ERROR_INVALID_ARGUMENT, "amsgrad");
    rewrite(good, bad, "tcuda.optimizer.lr", "nan", NULL, NULL, NULL);
    BAD_LOAD(bad, TC_ERROR_INVALID_ARGUMENT, "lr");
    rewrite(good, bad, "tcuda.optimizer.eps", "1e-8x", NULL, NULL, NULL);
    BAD_LOAD(bad, TC_ERROR_INVALID_ARGUMENT, "not a number");
    rewrite(good, bad, "tcuda.step", "3.5", NULL, NULL, NULL);
    BAD_LOAD(bad, TC_ERROR_INVALID_ARGUMENT, "tcuda.step");
    rewrite(good, bad, "tcuda.step", NULL, NULL, NULL, NULL);
    BAD_LOAD(bad, TC_ERROR_INVALID_ARGUMENT, "tcuda.step");
    rewrite(good, bad, "tcuda.checkpoint", "2", NULL, NULL, NULL);
    BAD_LOAD(bad, TC_ERROR_NOT_SUPPORTED, "version \"2\"");
    rewrite(good, bad, "tcuda.scaler.scale", "-1", NULL, NULL, NULL);
    BAD_LOAD(bad, TC_ERROR_INVALID_ARGUMENT, "scale");
    rewrite(good, bad, "tcuda.scaler.growth_interval", "0", NULL, NULL, NULL);
    BAD_LOAD(bad, TC_ERROR_INVALID_ARGUMENT, "growth_interval");
    rewrite(good, bad, "tcuda.scaler.enabled", "false", NULL, NULL, NULL);
    BAD_LOAD(bad, TC_ERROR_INVALID_ARGUMENT, "disabled");
    rewrite(good, bad, "tcuda.scaler.growth_tracker", "99999999999", NULL, NULL, NULL);
    BAD_LOAD(bad, TC_ERROR_INVALID_ARGUMENT, "growth_tracker");
    /* one GPU more than this machine has */
    char more[16], more_msg[32];
    snprintf(more, sizeof more, "%d", (tc_device_count() > 0 ? tc_device_count() : 0) + 1);
    snprintf(more_msg, sizeof more_msg, "%s GPUs", more);
    rewrite(good, bad, "tcuda.rng.cuda_devices", more, NULL, NULL, NULL);
    BAD_LOAD(bad, TC_ERROR_INVALID_ARGUMENT, more_msg);

    /* truncated and corrupt files */
    FILE *fp = fopen(good, "rb");
    fseek(fp, 0, SEEK_END);
    long size = ftell(fp);
    fclose(fp);
    copy_cut(good, bad, size - 3, -1);
    BAD_LOAD(bad, TC_ERROR_IO, bad);
    copy_cut(good, bad, 5, -1);
    BAD_LOAD(bad, TC_ERROR_IO, bad);
    copy_cut(good, bad, -1, 20); /* inside the JSON header */
    BAD_LOAD(bad, TC_ERROR_IO, bad);

    /* the live side unlike the file */
    tc_optimizer *sgd = NULL;
    tc_sgd_options so = tc_sgd_options_default();
    CHECK_OK(tc_optimizer_create_sgd(b.p, TRAIN_N, &so, &sgd));
    tc_checkpoint ck2 = train_ck(&b);
    ck2.optimizer = sgd;
    CHECK_STATUS(tc_checkpoint_load(good, &ck2), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("\"adamw\"") && says("\"sgd\""));
    check_unchanged(&b, &before, ck2.step);
    CHECK_OK(tc_optimizer_destroy(sgd));
    tc_adamw_options ao = tc_adamw_options_default();
    ao.amsgrad = true, ao.weight_decay = 0.2;
    tc_optimizer *other = NULL;
    CHECK_OK(tc_optimizer_create_adamw(b.p, TRAIN_N, &ao, &other));
    ck2.optimizer = other;
    CHECK_STATUS(tc_checkpoint_load(good, &ck2), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("weight_decay") && says("0.10000000000000001") && says("0.20000000000000001"));
    check_unchanged(&b, &before, ck2.step);
    CHECK_OK(tc_optimizer_destroy(other));
    const char *renamed[TRAIN_N] = {train_names[0], "h.0.ln_2.bias", train_names[2]};
    ck2 = train_ck(&b);
    ck2.names = renamed;
    CHECK_STATUS(tc_checkpoint_load(good, &ck2), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("h.0.ln_2.bias"));
    check_unchanged(&b, &before, ck2.step);

    train_free(&b);
    free(before.bytes);
}

/* ---- several optimizers -------------------------------------------------------------------- */

/* Two optimizers over four parameters, as nanoGPT's param groups: AdamW
 * with weight decay over the weights, SGD with momentum over the biases
 * (listed out of the parameters' order), gradients from a generator seeded
 * by the step, a learning rate per group from the step. */
#define DUO_N 4
static const char *const duo_names[DUO_N] = {"a.weight", "a.bias", "b.weight", "b.bias"};
static const int64_t duo_sizes[DUO_N][2] = {{3, 4}, {4, 1}, {4, 2}, {2, 1}};

typedef struct duo {
    tc_tensor *p[DUO_N], *g[DUO_N];
    tc_optimizer *opt[2];
    int64_t step;
} duo;

static void duo_make(duo *d, uint64_t seed, double momentum)
{
    *d = (duo){0};
    tc_generator *gen = NULL;
    CHECK_OK(tc_generator_create(CPU, seed, &gen));
    for (int i = 0; i < DUO_N; i++) {
        CHECK_OK(tc_tensor_randn(2, duo_sizes[i], TC_FLOAT32, CPU, gen, &d->p[i]));
        CHECK_OK(tc_tensor_zeros(2, duo_sizes[i], TC_FLOAT32, CPU, &d->g[i]));
    }
    CHECK_OK(tc_generator_destroy(gen));
    tc_tensor *weights[2] = {d->p[0], d->p[2]}, *biases[2] = {d->p[3], d->p[1]};
    tc_adamw_options ao = tc_adamw_options_default();
    ao.weight_decay = 0.1;
    CHECK_OK(tc_optimizer_create_adamw(weights, 2, &ao, &d->opt[0]));
    tc_sgd_options so = tc_sgd_options_default();
    so.momentum = momentum;
    CHECK_OK(tc_optimizer_create_sgd(biases, 2, &so, &d->opt[1]));
}

static void duo_free(duo *d)
{
    for (int k = 0; k < 2; k++)
        CHECK_OK(tc_optimizer_destroy(d->opt[k]));
    for (int i = 0; i < DUO_N; i++)
        tc_tensor_release(d->p[i]), tc_tensor_release(d->g[i]);
}

static void duo_step(duo *d)
{
    tc_generator *gen = NULL;
    CHECK_OK(tc_generator_create(CPU, 1000 + (uint64_t)d->step, &gen));
    for (int i = 0; i < DUO_N; i++)
        CHECK_OK(tc_tensor_normal_(d->g[i], 0, 1, gen));
    CHECK_OK(tc_generator_destroy(gen));
    CHECK_OK(tc_optimizer_set_lr(d->opt[0], 1e-2 / (double)(d->step + 1)));
    CHECK_OK(tc_optimizer_set_lr(d->opt[1], 0.1 / (double)(d->step + 2)));
    tc_tensor *gw[2] = {d->g[0], d->g[2]}, *gb[2] = {d->g[3], d->g[1]};
    CHECK_OK(tc_optimizer_step(d->opt[0], gw, 2));
    CHECK_OK(tc_optimizer_step(d->opt[1], gb, 2));
    d->step++;
}

/* The parameters', both optimizers' state and learning rates, as bytes. */
static train_state duo_state(const duo *d)
{
    train_state s = {0};
    for (int i = 0; i < DUO_N; i++)
        put_bytes(&s, d->p[i]);
    static const tc_optimizer_state adam[] = {TC_OPTIMIZER_STATE_STEP, TC_OPTIMIZER_STATE_EXP_AVG,
                                              TC_OPTIMIZER_STATE_EXP_AVG_SQ};
    static const tc_optimizer_state sgd[] = {TC_OPTIMIZER_STATE_STEP,
                                             TC_OPTIMIZER_STATE_MOMENTUM_BUFFER};
    for (int i = 0; i < 2; i++) {
        for (int k = 0; k < 3; k++) {
            tc_tensor *x = NULL;
            CHECK_OK(tc_optimizer_get_state(d->opt[0], i, adam[k], &x));
            put_bytes(&s, x);
            tc_tensor_release(x);
        }
        for (int k = 0; k < 2; k++) {
            tc_tensor *x = NULL;
            CHECK_OK(tc_optimizer_get_state(d->opt[1], i, sgd[k], &x));
            put_bytes(&s, x);
            tc_tensor_release(x);
        }
    }
    double lr1 = 0;
    CHECK_OK(tc_optimizer_get_lr(d->opt[0], &s.lr));
    CHECK_OK(tc_optimizer_get_lr(d->opt[1], &lr1));
    s.lr += 1e3 * lr1; /* both in one number: either changing shows */
    s.step = d->step;
    return s;
}

/* The parameters' and an AdamW's state, as bytes. */
static train_state adam_bytes(const tc_optimizer *opt, tc_tensor *const *p, int n)
{
    train_state s = {0};
    for (int i = 0; i < n; i++) {
        put_bytes(&s, p[i]);
        for (int k = TC_OPTIMIZER_STATE_STEP; k <= TC_OPTIMIZER_STATE_EXP_AVG_SQ; k++) {
            tc_tensor *x = NULL;
            CHECK_OK(tc_optimizer_get_state(opt, i, (tc_optimizer_state)k, &x));
            put_bytes(&s, x);
            tc_tensor_release(x);
        }
    }
    return s;
}

static tc_checkpoint duo_ck(duo *d)
{
    return (tc_checkpoint){.names = duo_names,
                           .params = d->p,
                           .n = DUO_N,
                           .optimizers = d->opt,
                           .n_optimizers = 2,
                           .step = d->step};
}

/* 4 steps in one go against 2, a save, fresh objects, a load and 2 more:
 * the same bytes; the file names the second optimizer's state and keys
 * "optimizer1." and "tcuda.optimizer1.". */
static void test_two_optimizers_resume(void)
{
    const char *path = file_named("duo.safetensors");
    duo a;
    duo_make(&a, 3, 0.9);
    for (int s = 0; s < 4; s++)
        duo_step(&a);
    train_state want = duo_state(&a);
    duo_free(&a);

    duo b;
    duo_make(&b, 3, 0.9);
    duo_step(&b), duo_step(&b);
    train_state saved = duo_state(&b);
    tc_checkpoint ck = duo_ck(&b);
    CHECK_OK(tc_checkpoint_save(path, &ck));
    duo_free(&b);

    tc_safetensors *f = NULL;
    CHECK_OK(tc_safetensors_open(path, &f));
    CHECK(tc_safetensors_count(f) == DUO_N + 2 * 3 + 2 * 2);
    meta_is(f, "tcuda.optimizers", "2");
    meta_is(f, "tcuda.optimizer.kind", "adamw");
    meta_is(f, "tcuda.optimizer1.kind", "sgd");
    CHECK(meta_num(f, "tcuda.optimizer1.momentum") == 0.9);
    CHECK(meta_num(f, "tcuda.optimizer1.lr") == 0.1 / 3);
    tc_dtype dt;
    int nd;
    int64_t sz[TC_MAX_DIMS];
    CHECK_OK(tc_safetensors_info(f, "optimizer.b.weight.exp_avg", &dt, &nd, sz));
    CHECK(nd == 2 && sz[0] == 4 && sz[1] == 2);
    CHECK_OK(tc_safetensors_info(f, "optimizer1.a.bias.momentum_buffer", &dt, &nd, sz));
    CHECK(nd == 2 && sz[0] == 4 && sz[1] == 1);
    CHECK_STATUS(tc_safetensors_info(f, "optimizer.a.bias.step", &dt, &nd, sz),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_OK(tc_safetensors_close(f));

    duo c;
    duo_make(&c, 77, 0.9);
    duo_step(&c);
    tc_checkpoint ck2 = duo_ck(&c);
    CHECK_OK(tc_checkpoint_load(path, &ck2));
    CHECK(ck2.step == 2);
    c.step = ck2.step;
    train_state loaded = duo_state(&c);
    CHECK(train_state_equal(&saved, &loaded));
    duo_step(&c), duo_step(&c);
    train_state got = duo_state(&c);
    CHECK(train_state_equal(&want, &got));
    duo_free(&c);
    free(want.bytes), free(saved.bytes), free(loaded.bytes), free(got.bytes);
}

/* Bad lists and files unlike the live optimizers: each refused, naming
 * the problem, and a failed load changes nothing. A file of one optimizer
 * without "tcuda.optimizers" (as the first version wrote) still loads. */
static void test_two_optimizers_bad(void)
{
    const char *path = file_named("duo_bad.safetensors"), *bad = file_named("duo_bad2.safetensors");
    duo d;
    duo_make(&d, 5, 0.9);
    duo_step(&d);
    tc_checkpoint ck = duo_ck(&d);
    CHECK_OK(tc_checkpoint_save(path, &ck));
    duo_step(&d); /* now unlike the file */
    train_state before = duo_state(&d);

    tc_checkpoint x = ck;
    x.optimizer = d.opt[0];
    CHECK_STATUS(tc_checkpoint_save(path, &x), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("both set"));
    x = ck, x.n_optimizers = -1;
    CHECK_STATUS(tc_checkpoint_load(path, &x), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("n_optimizers is -1"));
    x = ck, x.optimizers = NULL;
    CHECK_STATUS(tc_checkpoint_save(path, &x), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("ck->optimizers is NULL"));
    tc_optimizer *with_null[2] = {d.opt[0], NULL};
    x = ck, x.optimizers = with_null;
    CHECK_STATUS(tc_checkpoint_save(path, &x), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("ck->optimizers[1] is NULL"));
    tc_optimizer *twice[2] = {d.opt[0], d.opt[0]};
    x = ck, x.optimizers = twice;
    CHECK_STATUS(tc_checkpoint_load(path, &x), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("ck->params[0] (\"a.weight\")") && says("one optimizer"));
    void *garbage = tc_test_garbage(256);
    tc_optimizer *with_garbage[2] = {d.opt[0], garbage};
    x = ck, x.optimizers = with_garbage;
    CHECK_STATUS(tc_checkpoint_save(path, &x), TC_ERROR_INVALID_HANDLE);
    free(garbage);
    /* an optimizer over a tensor that is not a parameter of the checkpoint */
    tc_tensor *other = NULL;
    CHECK_OK(tc_tensor_zeros(2, duo_sizes[1], TC_FLOAT32, CPU, &other));
    tc_tensor *foreign_params[2] = {d.p[3], other};
    tc_optimizer *foreign = NULL;
    tc_sgd_options so = tc_sgd_options_default();
    so.momentum = 0.9;
    CHECK_OK(tc_optimizer_create_sgd(foreign_params, 2, &so, &foreign));
    tc_optimizer *list[2] = {d.opt[0], foreign};
    x = ck, x.optimizers = list;
    CHECK_STATUS(tc_checkpoint_save(path, &x), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("ck->optimizers[1]'s parameter 1 is none of ck->params"));
    CHECK_OK(tc_optimizer_destroy(foreign));
    tc_tensor_release(other);

#define DUO_BAD_LOAD(file, ckp, status, needle)                                                    \
    do {                                                                                           \
        tc_checkpoint c_ = (ckp);                                                                  \
        int64_t step_ = c_.step;                                                                   \
        CHECK_STATUS(tc_checkpoint_load(file, &c_), status);                                       \
        if (!says(needle))                                                                         \
            printf("  message \"%s\" lacks \"%s\"\n", tc_last_error(), needle);                    \
        CHECK(says(needle));                                                                       \
        train_state now_ = duo_state(&d);                                                          \
        CHECK(train_state_equal(&before, &now_) && c_.step == step_);                              \
        free(now_.bytes);                                                                          \
    } while (0)

    /* one optimizer over everything, or a list of one, for a file of two */
    tc_optimizer *all = NULL;
    tc_adamw_options ao = tc_adamw_options_default();
    ao.weight_decay = 0.1;
    CHECK_OK(tc_optimizer_create_adamw(d.p, DUO_N, &ao, &all));
    x = ck, x.optimizers = NULL, x.n_optimizers = 0, x.optimizer = all;
    DUO_BAD_LOAD(path, x, TC_ERROR_INVALID_ARGUMENT, "state of 2 optimizer(s)");
    x = ck, x.optimizers = &all, x.n_optimizers = 1;
    DUO_BAD_LOAD(path, x, TC_ERROR_INVALID_ARGUMENT, "the checkpoint names 1");
    CHECK_OK(tc_optimizer_destroy(all));
    /* the second optimizer's options unlike the file's */
    tc_tensor *biases[2] = {d.p[3], d.p[1]};
    tc_optimizer *slow = NULL;
    so.momentum = 0.8;
    CHECK_OK(tc_optimizer_create_sgd(biases, 2, &so, &slow));
    tc_optimizer *unlike[2] = {d.opt[0], slow};
    x = ck, x.optimizers = unlike;
    DUO_BAD_LOAD(path, x, TC_ERROR_INVALID_ARGUMENT, "\"tcuda.optimizer1.momentum\" is 0.9");
    CHECK_OK(tc_optimizer_destroy(slow));
    /* the groups in the other order: kinds unlike */
    tc_optimizer *swapped[2] = {d.opt[1], d.opt[0]};
    x = ck, x.optimizers = swapped;
    DUO_BAD_LOAD(path, x, TC_ERROR_INVALID_ARGUMENT, "tcuda.optimizer.kind");
    /* a parameter in the other group than in the file: its state is missing */
    tc_tensor *w3[3] = {d.p[0], d.p[2], d.p[1]}, *b1[1] = {d.p[3]};
    tc_optimizer *moved[2] = {NULL, NULL};
    so.momentum = 0.9;
    CHECK_OK(tc_optimizer_create_adamw(w3, 3, &ao, &moved[0]));
    CHECK_OK(tc_optimizer_create_sgd(b1, 1, &so, &moved[1]));
    x = ck, x.optimizers = moved;
    DUO_BAD_LOAD(path, x, TC_ERROR_INVALID_ARGUMENT, "no tensor \"optimizer.a.bias.step\"");
    CHECK_OK(tc_optimizer_destroy(moved[0]));
    CHECK_OK(tc_optimizer_destroy(moved[1]));
    /* the count: missing (a file of one, then), or not a number */
    rewrite(path, bad, "tcuda.optimizers", NULL, NULL, NULL, NULL);
    DUO_BAD_LOAD(bad, ck, TC_ERROR_INVALID_ARGUMENT, "state of 1 optimizer(s)");
    rewrite(path, bad, "tcuda.optimizers", "two", NULL, NULL, NULL);
    DUO_BAD_LOAD(bad, ck, TC_ERROR_INVALID_ARGUMENT, "\"tcuda.optimizers\" is \"two\"");
    rewrite(path, bad, "tcuda.optimizer1.kind", NULL, NULL, NULL, NULL);
    DUO_BAD_LOAD(bad, ck, TC_ERROR_INVALID_ARGUMENT, "tcuda.optimizer1.kind");
#undef DUO_BAD_LOAD
    free(before.bytes);

    /* a file of one optimizer without the count loads, through the list too */
    tc_checkpoint one = {.names = duo_names, .params = d.p, .n = 2, .optimizer = NULL};
    tc_tensor *first2[2] = {d.p[0], d.p[1]};
    tc_optimizer *opt = NULL;
    CHECK_OK(tc_optimizer_create_adamw(first2, 2, &ao, &opt));
    CHECK_OK(tc_optimizer_step(opt, d.g, 2));
    one.optimizer = opt, one.step = 12;
    CHECK_OK(tc_checkpoint_save(path, &one));
    rewrite(path, bad, "tcuda.optimizers", NULL, NULL, NULL, NULL);
    train_state one_before = adam_bytes(opt, first2, 2);
    CHECK_OK(tc_optimizer_step(opt, d.g, 2)); /* now unlike the file */
    one.optimizer = NULL, one.optimizers = &opt, one.n_optimizers = 1, one.step = 0;
    CHECK_OK(tc_checkpoint_load(bad, &one));
    train_state one_after = adam_bytes(opt, first2, 2);
    CHECK(one.step == 12 && one_before.size == one_after.size &&
          !memcmp(one_before.bytes, one_after.bytes, one_before.size));
    CHECK_OK(tc_optimizer_destroy(opt));
    free(one_before.bytes), free(one_after.bytes);
    duo_free(&d);
}

static void test_bad_args(void)
{
    const char *path = file_named("args.safetensors");
    int64_t n = 4;
    tc_tensor *p[2] = {NULL, NULL};
    CHECK_OK(tc_tensor_zeros(1, &n, TC_FLOAT32, CPU, &p[0]));
    CHECK_OK(tc_tensor_zeros(1, &n, TC_FLOAT32, CPU, &p[1]));
    const char *names[2] = {"a", "b"};
    tc_checkpoint ck = {.names = names, .params = p, .n = 2};
    CHECK_OK(tc_checkpoint_save(path, &ck));

    CHECK_STATUS(tc_checkpoint_save(NULL, &ck), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("path is NULL"));
    CHECK_STATUS(tc_checkpoint_save("", &ck), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_checkpoint_save(path, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("tc_checkpoint_save: ck is NULL"));
    CHECK_STATUS(tc_checkpoint_load(NULL, &ck), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_checkpoint_load("", &ck), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_checkpoint_load(path, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("tc_checkpoint_load: ck is NULL"));

    tc_checkpoint bad = ck;
    bad.n = -1;
    CHECK_STATUS(tc_checkpoint_save(path, &bad), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_checkpoint_load(path, &bad), TC_ERROR_INVALID_ARGUMENT);
    bad = ck, bad.names = NULL;
    CHECK_STATUS(tc_checkpoint_save(path, &bad), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("ck->names is NULL"));
    bad = ck, bad.params = NULL;
    CHECK_STATUS(tc_checkpoint_load(path, &bad), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("ck->params is NULL"));
    const char *null_name[2] = {"a", NULL};
    bad = ck, bad.names = null_name;
    CHECK_STATUS(tc_checkpoint_save(path, &bad), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("ck->names[1] is NULL"));
    const char *twice[2] = {"a", "a"};
    bad = ck, bad.names = twice;
    CHECK_STATUS(tc_checkpoint_save(path, &bad), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("\"a\""));
    CHECK_STATUS(tc_checkpoint_load(path, &bad), TC_ERROR_INVALID_ARGUMENT);
    void *garbage = tc_test_garbage(256);
    tc_tensor *with_garbage[2] = {p[0], garbage};
    bad = ck, bad.params = with_garbage;
    CHECK_STATUS(tc_checkpoint_save(path, &bad), TC_ERROR_INVALID_HANDLE);
    CHECK(says("ck->params[1]"));
    CHECK_STATUS(tc_checkpoint_load(path, &bad), TC_ERROR_INVALID_HANDLE);
    tc_tensor *one_null[2] = {p[0], NULL};
    bad = ck, bad.params = one_null;
    CHECK_STATUS(tc_checkpoint_save(path, &bad), TC_ERROR_INVALID_ARGUMENT);
    bad = ck, bad.optimizer = garbage;
    CHECK_STATUS(tc_checkpoint_save(path, &bad), TC_ERROR_INVALID_HANDLE);
    bad = ck, bad.scaler = garbage;
    CHECK_STATUS(tc_checkpoint_save(path, &bad), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_checkpoint_load(path, &bad), TC_ERROR_INVALID_HANDLE);
    free(garbage);

    /* an optimizer over other parameters, or in another order */
    tc_optimizer *opt = NULL;
    tc_tensor *swapped[2] = {p[1], p[0]};
    tc_sgd_options so = tc_sgd_options_default();
    CHECK_OK(tc_optimizer_create_sgd(swapped, 2, &so, &opt));
    bad = ck, bad.optimizer = opt;
    CHECK_STATUS(tc_checkpoint_save(path, &bad), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("ck->params[0]"));
    CHECK_STATUS(tc_checkpoint_load(path, &bad), TC_ERROR_INVALID_ARGUMENT);
    bad.n = 1;
    CHECK_STATUS(tc_checkpoint_save(path, &bad), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("2 parameters"));
    CHECK_OK(tc_optimizer_destroy(opt));
    bad = ck, bad.optimizer = opt; /* destroyed */
    CHECK_STATUS(tc_checkpoint_save(path, &bad), TC_ERROR_INVALID_HANDLE);

    /* a parameter named as a state of the checkpoint */
    const char *clash[2] = {"rng.cpu", "b"};
    bad = ck, bad.names = clash, bad.rng = true;
    CHECK_STATUS(tc_checkpoint_save(path, &bad), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("rng.cpu"));

    /* the caller's metadata */
    const char *own[] = {"tcuda.step", "1", NULL};
    bad = ck, bad.metadata = own;
    CHECK_STATUS(tc_checkpoint_save(path, &bad), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("tcuda.step"));
    const char *format[] = {"format", "tf", NULL};
    bad.metadata = format;
    CHECK_STATUS(tc_checkpoint_save(path, &bad), TC_ERROR_INVALID_ARGUMENT);
    const char *odd[] = {"k", NULL};
    bad.metadata = odd;
    CHECK_STATUS(tc_checkpoint_save(path, &bad), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("\"k\" has no value"));

    /* a failed save leaves the old file whole */
    tc_safetensors *f = NULL;
    CHECK_OK(tc_safetensors_open(path, &f));
    CHECK(tc_safetensors_count(f) == 2);
    CHECK_OK(tc_safetensors_close(f));
    CHECK_STATUS(tc_checkpoint_save(dir, &ck), TC_ERROR_IO); /* a directory */

    /* nothing at all: no parameters, only the step and the random state */
    tc_checkpoint empty = {.rng = true, .step = 77};
    CHECK_OK(tc_checkpoint_save(path, &empty));
    tc_rng_state s0 = cpu_rng();
    CHECK_OK(tc_tensor_normal_(p[0], 0, 1, NULL)); /* draws */
    empty.step = 0;
    CHECK_OK(tc_checkpoint_load(path, &empty));
    tc_rng_state s1 = cpu_rng();
    CHECK(empty.step == 77 && !memcmp(&s0, &s1, sizeof s0));
    tc_tensor_release(p[0]), tc_tensor_release(p[1]);
}

int main(void)
{
    tc_test_init();
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_round_trip_adamw();
    test_round_trip_sgd();
    test_round_trip_params();
    test_lr_tensor();
    test_model_file();
    train_resume_check(CPU, file_named("resume.safetensors"), tc_test_seed());
    test_bad_files();
    test_bad_args();
    test_two_optimizers_resume();
    test_two_optimizers_bad();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        printf("could not remove %s\n", dir);
    return TC_TEST_DONE();
}
