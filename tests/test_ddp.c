/* DDP's gradient buckets (include/tcuda/ddp.h).
 *
 * Everywhere: tc_ddp_bucket_assignment against assignments worked out by
 * hand from PyTorch's rule (caps, dtypes, a tensor over the cap, custom
 * caps), bad input, and the reducer's refusals without a group.
 *
 * With a GPU and NCCL: a group of one checks the buckets (views of the
 * parameters' shapes, each 256-byte aligned, zero at first), marking and
 * finishing (values kept: the average of one), no_sync, the refusals of a
 * step's state. With two or more GPUs the test runs itself again as one
 * rank per GPU: each rank's gradients differ, ranks mark them in different
 * orders, and after tc_ddp_finish every gradient is the mean over the ranks
 * (computed on the host); rank 0's parameters reach every rank; two
 * accumulated no_sync steps then a synced one give the mean of the sums. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dist_support.h"
#include "nccl_find.h"
#include "tc_test.h"
#include "tcuda/ddp.h"
#include "tcuda/graph.h"

#define MIB ((size_t)1 << 20)

static void assignment_is(const size_t *nbytes, const tc_dtype *dts, int n, size_t first,
                          size_t cap, const int *want, int want_n)
{
    int got[16], nb = -1;
    CHECK_OK(tc_ddp_bucket_assignment(nbytes, dts, n, first, cap, got, &nb));
    CHECK(nb == want_n);
    for (int i = 0; i < n; i++) {
        if (got[i] != want[i])
            printf("gradient %d: bucket %d, want %d\n", i, got[i], want[i]);
        CHECK(got[i] == want[i]);
    }
}

static void bucket_assignment(void)
{
    /* float32, default caps (1 MiB, then 25 MiB), from the last parameter:
     * {6,5} closes at 30.1 MiB, {4,3,2} at 31, {1,0} stays open (1.1 < 25) */
    const size_t a[] = {MIB / 2, MIB * 6 / 10, 10 * MIB, 20 * MIB, MIB, 30 * MIB, MIB / 10};
    tc_dtype f[7] = {TC_FLOAT32, TC_FLOAT32, TC_FLOAT32, TC_FLOAT32,
                     TC_FLOAT32, TC_FLOAT32, TC_FLOAT32};
    const int wa[] = {2, 2, 1, 1, 1, 0, 0};
    assignment_is(a, f, 7, 0, 0, wa, 3);
    /* two dtypes fill buckets of their own, each with its own first cap:
     * {5} and {4} close at 5 MiB; {3,1} and {2,0} stay open, last in the
     * order they opened */
    const size_t b[] = {MIB * 8 / 10, MIB * 8 / 10, MIB * 3 / 10, MIB * 3 / 10, 5 * MIB, 5 * MIB};
    tc_dtype mixed[6] = {TC_FLOAT32, TC_BFLOAT16, TC_FLOAT32, TC_BFLOAT16, TC_FLOAT32, TC_BFLOAT16};
    const int wb[] = {3, 2, 3, 2, 1, 0};
    assignment_is(b, mixed, 6, MIB, 25 * MIB, wb, 4);
    /* a tensor over the cap is a bucket by itself */
    const size_t c[] = {100 * MIB};
    const int wc[] = {0};
    assignment_is(c, f, 1, 0, 0, wc, 1);
    /* custom caps: 12 bytes close {4,3,2}; {1,0} stays open */
    const size_t d[] = {4, 4, 4, 4, 4};
    const int wd[] = {1, 1, 0, 0, 0};
    assignment_is(d, f, 5, 10, 10, wd, 2);
    /* none */
    int nb = -1;
    CHECK_OK(tc_ddp_bucket_assignment(NULL, NULL, 0, 0, 0, NULL, &nb));
    CHECK(nb == 0);

    /* bad input: refused, nothing written */
    int got[2] = {-7, -7};
    nb = -7;
    tc_dtype bad[2] = {TC_FLOAT32, (tc_dtype)99};
    CHECK_STATUS(tc_ddp_bucket_assignment(d, bad, 2, 0, 0, got, &nb), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "dtypes[1]") != NULL);
    CHECK(got[0] == -7 && got[1] == -7 && nb == -7);
    CHECK_STATUS(tc_ddp_bucket_assignment(d, f, -1, 0, 0, got, &nb), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_ddp_bucket_assignment(NULL, f, 2, 0, 0, got, &nb), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_ddp_bucket_assignment(d, f, 2, 0, 0, NULL, &nb), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_ddp_bucket_assignment(d, f, 2, 0, 0, got, NULL), TC_ERROR_INVALID_ARGUMENT);

    tc_ddp_options o = tc_ddp_options_default();
    CHECK(o.bucket_cap_bytes == 25 * MIB && o.first_bucket_cap_bytes == MIB && o.broadcast_params);
}

/* The reducer without a group: each call is refused by name. */
static void refusals(void)
{
    struct {
        uint32_t words[16];
    } fake = {{0}};
    tc_ddp *d = NULL;
    tc_tensor *t = NULL;
    CHECK_STATUS(tc_ddp_create(NULL, &t, 1, NULL, &d), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_ddp_create((tc_process_group *)&fake, &t, 1, NULL, &d),
                 TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_ddp_create((tc_process_group *)&fake, NULL, 1, NULL, &d),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_ddp_create((tc_process_group *)&fake, &t, 0, NULL, &d),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK(d == NULL);
    CHECK_STATUS(tc_ddp_destroy(NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_ddp_destroy((tc_ddp *)&fake), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_ddp_finish((tc_ddp *)&fake), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_ddp_grad_ready(NULL, 0), TC_ERROR_INVALID_ARGUMENT);
    CHECK(tc_ddp_num_buckets(NULL) == 0 && tc_ddp_num_buckets((tc_ddp *)&fake) == 0);
}

/* ---- with a GPU ------------------------------------------------------------ */

static const int64_t shapes[][3] = {{3, 5, 0}, {7, 0, 0}, {0, 0, 0}, {2, 3, 4}, {300, 0, 0}};
static const int ndims[] = {2, 1, 0, 3, 1};
enum { NP = 5 };

static int64_t numel_of(int i)
{
    int64_t n = 1;
    for (int k = 0; k < ndims[i]; k++)
        n *= shapes[i][k];
    return n;
}

/* The parameters: float32 but #3 bfloat16, filled with value(i, j, rank). */
static tc_tensor *make_param(int i, int dev, double (*value)(int, int64_t, int), int rank)
{
    int64_t n = numel_of(i);
    double *v = malloc(sizeof(double) * (size_t)n);
    for (int64_t j = 0; j < n; j++)
        v[j] = value(i, j, rank);
    tc_tensor *h = NULL, *t = NULL;
    CHECK_OK(tc_tensor_from_data(v, ndims[i], shapes[i], TC_FLOAT64, (tc_device){TC_CPU, -1}, &h));
    CHECK_OK(
        tc_tensor_to(h, (tc_device){TC_CUDA, dev}, i == 3 ? TC_BFLOAT16 : TC_FLOAT32, false, &t));
    tc_tensor_release(h);
    free(v);
    return t;
}

static double param_value(int i, int64_t j, int rank) { return i * 10 + (double)j * 0.5 + rank; }
/* small integers and halves: exact in bfloat16 and in every mean of 2..8 */
static double grad_value(int i, int64_t j, int rank) { return (double)((i + j) % 7) + rank * 2; }

/* Writes value(i, ., rank) into gradient i (a view into its bucket). */
static void write_grad(tc_ddp *d, int i, int dev, int rank, double scale)
{
    tc_tensor *g = NULL, *src = make_param(i, dev, grad_value, rank);
    CHECK_OK(tc_ddp_grad(d, i, &g));
    if (scale != 1.0) {
        tc_tensor *s = NULL, *sc = NULL;
        CHECK_OK(tc_tensor_full(0, NULL, scale, tc_tensor_dtype(src), tc_tensor_device(src), &sc));
        CHECK_OK(tc_tensor_mul(src, sc, &s));
        tc_tensor_release(src), tc_tensor_release(sc);
        src = s;
    }
    CHECK_OK(tc_tensor_add_(g, src));
    tc_tensor_release(g), tc_tensor_release(src);
}

/* Gradient i must hold want(j) for each element. */
static int grad_is(tc_ddp *d, int i, double (*want)(int, int64_t, int, int), int world)
{
    tc_tensor *g = NULL;
    CHECK_OK(tc_ddp_grad(d, i, &g));
    if (!g)
        return 1;
    double *v = tc_test_values(g);
    int bad = 0;
    for (int64_t j = 0; v && j < numel_of(i); j++)
        if (v[j] != want(i, j, world, 0)) {
            if (bad++ < 3)
                printf("grad %d [%lld]: %g, want %g\n", i, (long long)j, v[j],
                       want(i, j, world, 0));
        }
    free(v);
    tc_tensor_release(g);
    return bad;
}

static double mean_grad(int i, int64_t j, int world, int unused)
{
    (void)unused;
    double s = 0;
    for (int r = 0; r < world; r++)
        s += grad_value(i, j, r);
    return s / world;
}
static double zero(int i, int64_t j, int world, int unused)
{
    return (void)i, (void)j, (void)world, (void)unused, 0;
}
/* two no_sync steps of grad then a synced one of 0.5 * grad: the mean of 2.5 x */
static double mean_accumulated(int i, int64_t j, int world, int unused)
{
    return 2.5 * mean_grad(i, j, world, unused);
}

/* One synced step from device tensors only (what a graph can capture):
 * zero, add src[i] into each gradient, mark them last to first, finish. */
static void device_step(tc_ddp *d, tc_tensor *const *src)
{
    CHECK_OK(tc_ddp_zero_grad(d));
    for (int i = NP - 1; i >= 0; i--) {
        tc_tensor *g = NULL;
        CHECK_OK(tc_ddp_grad(d, i, &g));
        CHECK_OK(tc_tensor_add_(g, src[i]));
        tc_tensor_release(g);
        CHECK_OK(tc_ddp_grad_ready(d, i));
    }
    CHECK_OK(tc_ddp_finish(d));
}

/* A whole step captured into a CUDA graph (global mode): the buckets'
 * all_reduces on the ddp's stream join the capture and every replay
 * averages the gradients again. */
static void captured_step(tc_ddp *d, int dev, int rank, int world)
{
    tc_tensor *src[NP];
    for (int i = 0; i < NP; i++)
        src[i] = make_param(i, dev, grad_value, rank);
    tc_stream *s = NULL;
    tc_graph *gr = NULL;
    CHECK_OK(tc_stream_create(dev, 0, &s));
    CHECK_OK(tc_graph_create(&gr));
    tc_stream_guard sg = tc_stream_guard_enter(s);
    device_step(d, src); /* the warm-up a capture wants */
    CHECK_OK(tc_graph_capture_begin(gr, (tc_graph_pool_id){0}, s, TC_CAPTURE_MODE_GLOBAL));
    device_step(d, src);
    CHECK_OK(tc_graph_capture_end(gr));
    for (int replay = 0; replay < 2; replay++) {
        CHECK_OK(tc_ddp_zero_grad(d));
        CHECK_OK(tc_graph_replay(gr));
        CHECK_OK(tc_stream_synchronize(s));
        for (int i = 0; i < NP; i++)
            CHECK(grad_is(d, i, mean_grad, world) == 0);
    }
    tc_stream_guard_exit(&sg);
    CHECK_OK(tc_graph_destroy(gr));
    CHECK_OK(tc_stream_destroy(s));
    for (int i = 0; i < NP; i++)
        tc_tensor_release(src[i]);
}

/* What a group of any size checks; order: 0 forward, 1 reverse, others odd first. */
static void reducer_checks(tc_process_group *pg, int rank, int world)
{
    int dev = tc_process_group_device(pg);
    tc_tensor *params[NP];
    for (int i = 0; i < NP; i++)
        params[i] = make_param(i, dev, param_value, rank);
    tc_ddp_options o = tc_ddp_options_default();
    o.first_bucket_cap_bytes = 64; /* several buckets from small tensors */
    o.bucket_cap_bytes = 256;
    tc_ddp *d = NULL;
    CHECK_OK(tc_ddp_create(pg, params, NP, &o, &d));
    if (!d)
        return;
    /* rank 0's parameters everywhere */
    for (int i = 0; i < NP; i++) {
        double *v = tc_test_values(params[i]);
        for (int64_t j = 0; v && j < numel_of(i); j++)
            CHECK(v[j] == param_value(i, j, 0));
        free(v);
    }
    /* the buckets: every parameter once, sizes that hold them */
    int nb = tc_ddp_num_buckets(d), seen[NP] = {0}, total = 0;
    CHECK(nb >= 2);
    for (int b = 0; b < nb; b++) {
        int ps[NP], n = 0;
        size_t bytes = 0;
        CHECK_OK(tc_ddp_bucket_params(d, b, ps, NP, &n, &bytes));
        CHECK(bytes % 256 == 0 && bytes >= 256);
        for (int k = 0; k < n; k++)
            seen[ps[k]]++;
        total += n;
    }
    CHECK(total == NP);
    for (int i = 0; i < NP; i++) {
        CHECK(seen[i] == 1);
        tc_tensor *g = NULL;
        CHECK_OK(tc_ddp_grad(d, i, &g));
        CHECK(g && tc_tensor_ndim(g) == ndims[i] && tc_tensor_numel(g) == numel_of(i));
        CHECK(g && tc_tensor_dtype(g) == tc_tensor_dtype(params[i]));
        CHECK(g && (uintptr_t)tc_tensor_data_ptr(g) % 256 == 0);
        tc_tensor_release(g);
        CHECK(grad_is(d, i, zero, world) == 0);
    }
    /* one step: gradients marked in a rank-specific order */
    for (int i = 0; i < NP; i++)
        write_grad(d, i, dev, rank, 1.0);
    for (int k = 0; k < NP; k++) {
        int i = rank == 0 ? k : rank == 1 ? NP - 1 - k : (2 * k + 1) % NP;
        CHECK_OK(tc_ddp_grad_ready(d, i));
    }
    CHECK_STATUS(tc_ddp_grad_ready(d, 0), TC_ERROR_INVALID_STATE);
    CHECK_STATUS(tc_ddp_set_require_sync(d, false), TC_ERROR_INVALID_STATE);
    CHECK_OK(tc_ddp_finish(d));
    for (int i = 0; i < NP; i++)
        CHECK(grad_is(d, i, mean_grad, world) == 0);
    captured_step(d, dev, rank, world);
    /* accumulation: two steps without sync, one with; finish alone launches */
    CHECK_OK(tc_ddp_zero_grad(d));
    CHECK_OK(tc_ddp_set_require_sync(d, false));
    for (int step = 0; step < 2; step++) {
        for (int i = 0; i < NP; i++)
            write_grad(d, i, dev, rank, 1.0);
        CHECK_OK(tc_ddp_grad_ready(d, NP - 1));
        CHECK_OK(tc_ddp_finish(d));
    }
    CHECK_OK(tc_ddp_set_require_sync(d, true));
    for (int i = 0; i < NP; i++)
        write_grad(d, i, dev, rank, 0.5);
    CHECK_OK(tc_ddp_finish(d));
    for (int i = 0; i < NP; i++)
        CHECK(grad_is(d, i, mean_accumulated, world) == 0);
    /* bad input on a live ddp */
    tc_tensor *g = NULL;
    CHECK_STATUS(tc_ddp_grad(d, NP, &g), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_ddp_grad_ready(d, -1), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_ddp_bucket_params(d, nb, NULL, 0, &total, NULL), TC_ERROR_INVALID_ARGUMENT);
    /* a view outlives the ddp */
    CHECK_OK(tc_ddp_grad(d, 4, &g));
    CHECK_OK(tc_ddp_destroy(d));
    CHECK_STATUS(tc_ddp_destroy(d), TC_ERROR_INVALID_HANDLE);
    double *v = tc_test_values(g);
    CHECK(v && v[1] == mean_accumulated(4, 1, world, 0));
    free(v);
    tc_tensor_release(g);
    for (int i = 0; i < NP; i++)
        tc_tensor_release(params[i]);
}

static void bad_params(tc_process_group *pg)
{
    tc_tensor *p[2] = {NULL, NULL};
    int64_t n = 4;
    tc_ddp *d = NULL;
    CHECK_OK(tc_tensor_zeros(1, &n, TC_FLOAT32, (tc_device){TC_CPU, -1}, &p[0]));
    CHECK_STATUS(tc_ddp_create(pg, p, 1, NULL, &d), TC_ERROR_DEVICE_MISMATCH);
    tc_tensor_release(p[0]);
    CHECK_OK(
        tc_tensor_zeros(1, &n, TC_INT64, (tc_device){TC_CUDA, tc_process_group_device(pg)}, &p[0]));
    CHECK_STATUS(tc_ddp_create(pg, p, 1, NULL, &d), TC_ERROR_DTYPE);
    tc_tensor_release(p[0]);
    CHECK_OK(tc_tensor_zeros(1, &n, TC_FLOAT32, (tc_device){TC_CUDA, tc_process_group_device(pg)},
                             &p[0]));
    CHECK_STATUS(tc_ddp_create(pg, p, 2, NULL, &d), TC_ERROR_INVALID_ARGUMENT); /* p[1] NULL */
    CHECK(strstr(tc_last_error(), "params[1]") != NULL);
    p[1] = p[0]; /* a tied weight given twice */
    CHECK_STATUS(tc_ddp_create(pg, p, 2, NULL, &d), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "the same parameter") != NULL);
    tc_tensor_release(p[0]);
    CHECK(d == NULL);
}

static int rank_main(void)
{
    tc_test_init();
    tc_process_group *pg = NULL;
    CHECK_OK(tc_process_group_create_from_env(&pg));
    if (!pg)
        return TC_TEST_DONE();
    CHECK_OK(tc_set_device(tc_process_group_device(pg)));
    reducer_checks(pg, tc_process_group_rank(pg), tc_process_group_size(pg));
    CHECK_OK(tc_process_group_destroy(pg));
    return TC_TEST_DONE();
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "rank"))
        return rank_main();
    tc_test_init();
    bucket_assignment();
    refusals();
    if (!tc_is_available()) {
        printf("the reducer's GPU part skipped: %s\n", tc_last_error());
        return TC_TEST_DONE();
    }
    tc_test_find_nccl();
    tc_dist_options o = tc_test_dist_opts(0, 1, tc_test_free_port(29531), 60);
    o.local_rank = 0;
    tc_process_group *pg = NULL;
    tc_status st = tc_process_group_create(&o, &pg);
    if (st == TC_ERROR_NOT_SUPPORTED) {
        printf("the reducer's GPU part skipped: NCCL was not found: %s\n", tc_last_error());
        return TC_TEST_DONE();
    }
    CHECK_OK(st);
    if (pg) {
        reducer_checks(pg, 0, 1);
        bad_params(pg);
        CHECK_OK(tc_process_group_destroy(pg));
    }
    int n = tc_device_count();
    if (n >= 2)
        CHECK(tc_test_spawn_ranks("test_ddp", "rank", NULL, n > 8 ? 8 : n, tc_test_free_port(29532),
                                  "30", "test_ddp") == 0);
    else
        printf("the multi-rank part skipped: %d GPU\n", n);
    return TC_TEST_DONE();
}
