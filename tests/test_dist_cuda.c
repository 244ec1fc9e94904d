/* GPU: NCCL process groups. With one GPU: a group of one process runs every
 * operation (all_reduce with each op, broadcast, reduce, all_gather,
 * reduce_scatter, all_to_all, barrier) on several dtypes, works are waited,
 * queried and destroyed, and bad arguments are refused. With two or more
 * GPUs: the test runs itself again (fork + exec) as one rank per GPU, formed
 * from the environment as torchrun sets it, and checks every operation and a
 * send/recv ring against values computed on the host; then a group whose
 * rank 1 exits without taking part: rank 0's all_reduce (at the
 * call or at the wait) ends with TC_ERROR_INVALID_STATE after the timeout,
 * not a hang. Exits 77 without a
 * GPU or without NCCL (say where it is with TCUDA_NCCL_LIBRARY).
 *
 * On one GPU, with a fake NCCL (support/fake_nccl.c) in a child process:
 * a communicator whose setup never returns fails tc_process_group_create
 * with TC_ERROR_IO after the timeout (the setup is left to its thread); an
 * operation that stays inside NCCL is aborted under it by the watchdog
 * (after the timeout and 2 s) while another thread waits to queue on the
 * same group: both fail with TC_ERROR_INVALID_STATE, the communicator is
 * aborted once and never used after; a healthy group's init, operation and
 * destroy (its ops drained, then ncclCommDestroy) work. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dist_support.h"
#include "nccl_find.h"
#include "tc_test.h"
#include "tcuda/dist.h"
#include "tcuda/graph.h"

static tc_tensor *filled(int dev, int64_t n, tc_dtype dt, double (*f)(int64_t, int), int rank)
{
    double *v = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        v[i] = f(i, rank);
    tc_tensor *d = NULL, *t = NULL;
    CHECK_OK(tc_tensor_from_data(v, 1, &n, TC_FLOAT64, (tc_device){TC_CPU, -1}, &d));
    CHECK_OK(tc_tensor_to(d, (tc_device){TC_CUDA, dev}, dt, false, &t));
    tc_tensor_release(d);
    free(v);
    return t;
}

/* rank r's value at i: small integers (exact in every dtype, products too) */
static double val(int64_t i, int r) { return (double)((i * 7 + r * 3) % 5 + 1); }
static double idx(int64_t i, int r) { return (double)(r * 1000 + i); }

static bool all_near(const tc_tensor *t, double (*want)(int64_t, void *), void *ctx)
{
    double *v = tc_test_values(t);
    bool ok = v != NULL;
    for (int64_t i = 0; ok && i < tc_tensor_numel(t); i++)
        ok = fabs(v[i] - want(i, ctx)) <= 1e-6 * fabs(want(i, ctx)) + 1e-9;
    free(v);
    return ok;
}

/* The reduction of val over `world` ranks at i. */
typedef struct {
    int world;
    tc_reduce_op op;
} red_ctx;
static double reduced(int64_t i, void *p)
{
    red_ctx *c = p;
    double acc = val(i, 0);
    for (int r = 1; r < c->world; r++) {
        double x = val(i, r);
        switch (c->op) {
        case TC_REDUCE_OP_SUM:
        case TC_REDUCE_OP_AVG: acc += x; break;
        case TC_REDUCE_OP_PROD: acc *= x; break;
        case TC_REDUCE_OP_MIN: acc = fmin(acc, x); break;
        case TC_REDUCE_OP_MAX: acc = fmax(acc, x); break;
        }
    }
    return c->op == TC_REDUCE_OP_AVG ? acc / c->world : acc;
}
static double of_rank(int64_t i, void *p) { return val(i, *(int *)p); }
typedef struct {
    int64_t per;
    int world, rank;
} slice_ctx;
static double gathered(int64_t i, void *p)
{
    slice_ctx *c = p;
    return idx(i % c->per, (int)(i / c->per));
}
static double scattered(int64_t i, void *p)
{
    slice_ctx *c = p;
    red_ctx sum = {c->world, TC_REDUCE_OP_SUM};
    return reduced(c->rank * c->per + i, &sum);
}
/* all_to_all: slice s of rank r's input is idx(s * per + k, r) */
static double exchanged(int64_t i, void *p)
{
    slice_ctx *c = p;
    int64_t from = i / c->per, k = i % c->per;
    return idx(c->rank * c->per + k, (int)from);
}

static void wait_destroy(tc_work *w)
{
    CHECK_OK(tc_work_wait(w));
    CHECK_OK(tc_work_destroy(w));
}

/* Every operation on a group; values checked for any world size. */
static void run_all(tc_process_group *pg)
{
    int rank = tc_process_group_rank(pg), world = tc_process_group_size(pg),
        dev = tc_process_group_device(pg);
    const int64_t n = 1000;
    tc_dtype dts[3] = {TC_FLOAT32, TC_INT32, TC_FLOAT64};
    for (int d = 0; d < 3; d++)
        for (tc_reduce_op op = TC_REDUCE_OP_SUM; op <= TC_REDUCE_OP_AVG; op++) {
            if (op == TC_REDUCE_OP_AVG && dts[d] == TC_INT32)
                continue; /* an integer average truncates: not compared */
            tc_tensor *t = filled(dev, n, dts[d], val, rank);
            tc_work *w = NULL;
            CHECK_OK(tc_dist_all_reduce(pg, t, op, &w));
            wait_destroy(w);
            red_ctx c = {world, op};
            CHECK(all_near(t, reduced, &c));
            tc_tensor_release(t);
        }
    /* broadcast and reduce from the last rank, no work handle */
    int root = world - 1;
    tc_tensor *t = filled(dev, n, TC_FLOAT32, val, rank);
    CHECK_OK(tc_dist_broadcast(pg, t, root, NULL));
    CHECK(all_near(t, of_rank, &root));
    tc_tensor_release(t);
    t = filled(dev, n, TC_FLOAT32, val, rank);
    tc_work *w = NULL;
    CHECK_OK(tc_dist_reduce(pg, t, root, TC_REDUCE_OP_MAX, &w));
    CHECK_OK(tc_work_wait_stream(w, NULL));
    red_ctx mx = {world, TC_REDUCE_OP_MAX};
    if (rank == root)
        CHECK(all_near(t, reduced, &mx));
    else
        CHECK(all_near(t, of_rank, &rank));
    CHECK_OK(tc_work_wait(w));
    CHECK_OK(tc_work_query(w));
    CHECK_OK(tc_work_destroy(w));
    CHECK_STATUS(tc_work_destroy(w), TC_ERROR_INVALID_HANDLE);
    tc_tensor_release(t);

    /* all_gather, reduce_scatter, all_to_all */
    int64_t per = 64, all = per * world;
    slice_ctx sc = {per, world, rank};
    tc_tensor *in = filled(dev, per, TC_FLOAT32, idx, rank), *out = NULL;
    CHECK_OK(tc_tensor_zeros(1, &all, TC_FLOAT32, (tc_device){TC_CUDA, dev}, &out));
    CHECK_OK(tc_dist_all_gather(pg, out, in, &w));
    wait_destroy(w);
    CHECK(all_near(out, gathered, &sc));
    tc_tensor_release(in);
    tc_tensor_release(out);

    in = filled(dev, all, TC_FLOAT32, val, rank);
    CHECK_OK(tc_tensor_zeros(1, &per, TC_FLOAT32, (tc_device){TC_CUDA, dev}, &out));
    CHECK_OK(tc_dist_reduce_scatter(pg, out, in, TC_REDUCE_OP_SUM, &w));
    wait_destroy(w);
    CHECK(all_near(out, scattered, &sc));
    tc_tensor_release(in);
    tc_tensor_release(out);

    in = filled(dev, all, TC_FLOAT32, idx, rank);
    CHECK_OK(tc_tensor_zeros(1, &all, TC_FLOAT32, (tc_device){TC_CUDA, dev}, &out));
    CHECK_OK(tc_dist_all_to_all(pg, out, in, &w));
    wait_destroy(w);
    CHECK(all_near(out, exchanged, &sc));
    tc_tensor_release(in);
    tc_tensor_release(out);

    /* send/recv around a ring */
    if (world > 1) {
        int next = (rank + 1) % world, prev = (rank + world - 1) % world;
        tc_tensor *s = filled(dev, n, TC_FLOAT32, val, rank), *r = NULL;
        CHECK_OK(tc_tensor_zeros(1, &n, TC_FLOAT32, (tc_device){TC_CUDA, dev}, &r));
        tc_work *ws = NULL, *wr = NULL;
        if (rank % 2 == 0) { /* an order that cannot deadlock */
            CHECK_OK(tc_dist_send(pg, s, next, &ws));
            CHECK_OK(tc_dist_recv(pg, r, prev, &wr));
        } else {
            CHECK_OK(tc_dist_recv(pg, r, prev, &wr));
            CHECK_OK(tc_dist_send(pg, s, next, &ws));
        }
        wait_destroy(ws);
        wait_destroy(wr);
        CHECK(all_near(r, of_rank, &prev));
        tc_tensor_release(s);
        tc_tensor_release(r);
    }
    CHECK_OK(tc_dist_barrier(pg));
}

/* The sum of val over `world` ranks at i, reduced `times` more times (each
 * all_reduce of equal values multiplies by world). */
typedef struct {
    int world, times;
} again_ctx;
static double summed_again(int64_t i, void *p)
{
    again_ctx *c = p;
    red_ctx r = {c->world, TC_REDUCE_OP_SUM};
    return reduced(i, &r) * pow(c->world, c->times);
}

/* Collectives captured into a graph in global mode (PyTorch's default)
 * while the watchdog looks at the group: a tail queued on the stream just
 * before the capture and an op in flight must not put their events into
 * the capture or invalidate it; each replay reduces again; a captured work
 * orders streams but has no host wait. */
static void captured(tc_process_group *pg)
{
    int rank = tc_process_group_rank(pg), world = tc_process_group_size(pg),
        dev = tc_process_group_device(pg);
    const int64_t n = 4096;
    tc_tensor *t = filled(dev, n, TC_FLOAT32, val, rank);
    tc_tensor *tail = filled(dev, n, TC_FLOAT32, val, rank);
    tc_tensor *other = filled(dev, n, TC_FLOAT32, val, rank);
    tc_stream *s = NULL, *side = NULL;
    CHECK_OK(tc_stream_create(dev, 0, &s));
    CHECK_OK(tc_stream_create(dev, 0, &side));
    tc_graph *g = NULL;
    CHECK_OK(tc_graph_create(&g));
    tc_work *pending = NULL, *w = NULL;
    tc_stream_guard sg = tc_stream_guard_enter(side);
    CHECK_OK(tc_dist_all_reduce(pg, other, TC_REDUCE_OP_SUM, &pending)); /* in the list */
    tc_stream_guard_exit(&sg);
    sg = tc_stream_guard_enter(s);
    CHECK_OK(tc_dist_all_reduce(pg, tail, TC_REDUCE_OP_SUM, NULL)); /* a tail on s */
    CHECK_OK(tc_graph_capture_begin(g, (tc_graph_pool_id){0}, s, TC_CAPTURE_MODE_GLOBAL));
    CHECK_OK(tc_dist_all_reduce(pg, t, TC_REDUCE_OP_SUM, NULL));
    CHECK_OK(tc_dist_all_reduce(pg, t, TC_REDUCE_OP_SUM, &w));
    CHECK_STATUS(tc_work_wait(w), TC_ERROR_INVALID_STATE);
    CHECK_STATUS(tc_work_query(w), TC_ERROR_INVALID_STATE);
    CHECK_OK(tc_work_wait_stream(w, s));
    usleep(300 * 1000); /* the watchdog looks every 10 to 100 ms */
    CHECK_OK(tc_graph_capture_end(g));
    CHECK_OK(tc_work_destroy(w));
    wait_destroy(pending);
    CHECK_OK(tc_stream_synchronize(s));
    again_ctx once = {world, 0};
    CHECK(all_near(tail, summed_again, &once));
    CHECK(all_near(t, of_rank, &rank)); /* captured, not run */
    CHECK_OK(tc_graph_replay(g));
    CHECK_OK(tc_graph_replay(g));
    CHECK_OK(tc_stream_synchronize(s));
    again_ctx four = {world, 3}; /* four all_reduces: the sum, then times world three times */
    CHECK(all_near(t, summed_again, &four));
    tc_stream_guard_exit(&sg);
    CHECK_OK(tc_graph_destroy(g));
    CHECK_OK(tc_stream_destroy(s));
    CHECK_OK(tc_stream_destroy(side));
    tc_tensor_release(t);
    tc_tensor_release(tail);
    tc_tensor_release(other);
    CHECK_OK(tc_dist_barrier(pg));
}

static void bad_arguments(tc_process_group *pg)
{
    int dev = tc_process_group_device(pg);
    int64_t n = 8;
    tc_tensor *cpu = NULL, *b = NULL, *g = NULL, *wide = NULL, *tr = NULL;
    CHECK_OK(tc_tensor_zeros(1, &n, TC_FLOAT32, (tc_device){TC_CPU, -1}, &cpu));
    CHECK_OK(tc_tensor_zeros(1, &n, TC_BOOL, (tc_device){TC_CUDA, dev}, &b));
    CHECK_OK(tc_tensor_zeros(1, &n, TC_FLOAT32, (tc_device){TC_CUDA, dev}, &g));
    int64_t sz[2] = {4, 6};
    CHECK_OK(tc_tensor_zeros(2, sz, TC_FLOAT32, (tc_device){TC_CUDA, dev}, &wide));
    CHECK_OK(tc_tensor_transpose(wide, 0, 1, &tr));
    tc_work *w = (tc_work *)0x1;
    CHECK_STATUS(tc_dist_all_reduce(pg, cpu, TC_REDUCE_OP_SUM, &w), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_dist_all_reduce(pg, b, TC_REDUCE_OP_SUM, &w), TC_ERROR_DTYPE);
    CHECK_STATUS(tc_dist_all_reduce(pg, tr, TC_REDUCE_OP_SUM, &w), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_dist_all_reduce(pg, g, (tc_reduce_op)9, &w), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_dist_broadcast(pg, g, tc_process_group_size(pg), &w),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_dist_all_gather(pg, g, wide, &w), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_dist_send(pg, g, tc_process_group_rank(pg), &w), TC_ERROR_INVALID_ARGUMENT);
    CHECK(w == (tc_work *)0x1);
    tc_tensor_release(cpu);
    tc_tensor_release(b);
    tc_tensor_release(g);
    tc_tensor_release(tr);
    tc_tensor_release(wide);
}

/* Several threads queue collectives on one group at once: NCCL's calls on a
 * communicator are not thread-safe, so tcuda makes them one at a time;
 * every thread's sums come out right. (A group of one process: with more,
 * the ranks would have to agree on the order.) */
typedef struct {
    tc_process_group *pg;
    int id;
    bool ok;
} thread_arg;

static void *all_reduce_loop(void *p)
{
    thread_arg *a = p;
    int dev = tc_process_group_device(a->pg);
    int64_t n = 4096;
    tc_tensor *t = NULL;
    a->ok = tc_tensor_full(1, &n, (double)a->id, TC_FLOAT32, (tc_device){TC_CUDA, dev}, &t) ==
            TC_OK;
    for (int i = 0; i < 200 && a->ok; i++) {
        tc_work *w = NULL;
        a->ok = tc_dist_all_reduce(a->pg, t, TC_REDUCE_OP_SUM, i % 2 ? &w : NULL) == TC_OK;
        if (a->ok && w)
            a->ok = tc_work_wait(w) == TC_OK && tc_work_destroy(w) == TC_OK;
    }
    if (a->ok) {
        double *v = tc_test_values(t);
        for (int64_t i = 0; v && i < n && a->ok; i++)
            a->ok = v[i] == (double)a->id; /* a sum over one rank */
        free(v);
    }
    tc_tensor_release(t);
    return NULL;
}

static void threads_share_a_group(tc_process_group *pg)
{
    pthread_t th[4];
    thread_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (thread_arg){pg, i + 1, false};
        CHECK(pthread_create(&th[i], NULL, all_reduce_loop, &args[i]) == 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK(args[i].ok);
    }
}

/* ---- a fake NCCL (argv: fake MODE) -------------------------------------------------------- */

#ifdef TC_TEST_FAKE_NCCL
#include <dlfcn.h>
#include <stdatomic.h>

/* One of fake_nccl.c's counters. */
static int fake_count(const char *name)
{
    void *h = dlopen(TC_TEST_FAKE_NCCL, RTLD_NOW | RTLD_NOLOAD);
    atomic_int *p = h ? (atomic_int *)dlsym(h, name) : NULL;
    int v = p ? atomic_load(p) : -1;
    if (h)
        dlclose(h);
    return v;
}

typedef struct racer {
    tc_process_group *pg;
    tc_tensor *t;
    unsigned delay_us;
    tc_status st;
    double took_s;
} racer;

static void *race(void *p)
{
    racer *r = p;
    usleep(r->delay_us);
    double t0 = tc_test_now_ms();
    r->st = tc_dist_all_reduce(r->pg, r->t, TC_REDUCE_OP_SUM, NULL);
    r->took_s = (tc_test_now_ms() - t0) / 1000;
    return NULL;
}

static int fake_main(const char *mode)
{
    tc_test_init();
    tc_dist_options o = tc_test_dist_opts(0, 1, 1, 1);
    o.local_rank = 0;
    tc_process_group *pg = NULL;
    CHECK_OK(tc_synchronize(0)); /* CUDA's own setup, before the clock */
    double t0 = tc_test_now_ms();
    tc_status st = tc_process_group_create(&o, &pg);
    double took = (tc_test_now_ms() - t0) / 1000;
    if (!strcmp(mode, "init_hangs")) { /* NCCL never returns: the caller does, after 1 s */
        CHECK(st == TC_ERROR_IO && took >= 0.9 && took < 10);
        CHECK(strstr(tc_last_error(), "not ready within") != NULL);
        CHECK(fake_count("fake_nccl_misuse") == 0);
        return TC_TEST_DONE();
    }
    CHECK_OK(st);
    if (st != TC_OK)
        return TC_TEST_DONE();
    int64_t n = 64;
    tc_tensor *t = NULL;
    CHECK_OK(tc_tensor_ones(1, &n, TC_FLOAT32, (tc_device){TC_CUDA, 0}, &t));
    if (!strcmp(mode, "op_hangs")) { /* the second thread is inside when the first aborts */
        /* A stays inside NCCL; the watchdog aborts under it after the
         * timeout and 2 s; B waits for A's launch lock meanwhile */
        racer a = {pg, t, 0, TC_OK, 0}, b = {pg, t, 300000, TC_OK, 0};
        pthread_t ta, tb;
        CHECK(pthread_create(&ta, NULL, race, &a) == 0 && pthread_create(&tb, NULL, race, &b) == 0);
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        printf("fake op_hangs: %s after %.2f s, %s after %.2f s\n", tc_status_string(a.st),
               a.took_s, tc_status_string(b.st), b.took_s);
        CHECK(a.st == TC_ERROR_INVALID_STATE && b.st == TC_ERROR_INVALID_STATE);
        CHECK(a.took_s >= 2.9 && a.took_s < 10 && b.took_s < 10);
        CHECK(fake_count("fake_nccl_aborts") == 1 && fake_count("fake_nccl_misuse") == 0);
        CHECK_STATUS(tc_dist_barrier(pg), TC_ERROR_INVALID_STATE);
        CHECK(strstr(tc_last_error(), "aborted") != NULL);
        CHECK_OK(tc_process_group_destroy(pg));
        CHECK(fake_count("fake_nccl_aborts") == 1 && fake_count("fake_nccl_destroys") == 0);
    } else { /* "ok" */
        tc_work *w = NULL;
        CHECK_OK(tc_dist_all_reduce(pg, t, TC_REDUCE_OP_SUM, &w));
        CHECK_OK(tc_work_wait(w));
        CHECK_OK(tc_process_group_destroy(pg)); /* the work holds the group */
        CHECK(fake_count("fake_nccl_finalizes") == 0);
        CHECK_OK(tc_work_destroy(w)); /* the last reference: drain, destroy */
        CHECK(fake_count("fake_nccl_destroys") == 1);
        CHECK(fake_count("fake_nccl_aborts") == 0);
    }
    CHECK(fake_count("fake_nccl_misuse") == 0);
    tc_tensor_release(t);
    return TC_TEST_DONE();
}

/* Runs fake_main(mode) in a new process with the fake NCCL. */
static int spawn_fake(const char *mode)
{
    pid_t pid = fork();
    if (pid == 0) {
        setenv("TCUDA_NCCL_LIBRARY", TC_TEST_FAKE_NCCL, 1);
        setenv("FAKE_NCCL", mode, 1);
        execl("/proc/self/exe", "test_dist_cuda", "fake", mode, (char *)NULL);
        _exit(99);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok)
        printf("fake NCCL %s: the child ended with status 0x%x\n", mode, status);
    return ok ? 0 : 1;
}
#endif

/* ---- one rank of a multi-process group (argv: rank MODE) -------------------------------- */

static int rank_main(const char *mode)
{
    tc_test_init();
    tc_process_group *pg = NULL;
    if (tc_process_group_create_from_env(&pg) != TC_OK) {
        fprintf(stderr, "rank %s: %s\n", getenv("RANK"), tc_last_error());
        return 20;
    }
    if (!strcmp(mode, "all")) {
        run_all(pg);
        captured(pg);
        bad_arguments(pg);
    } else { /* "die": rank 1 leaves; rank 0's all_reduce must fail cleanly */
        if (tc_process_group_rank(pg) == 1)
            _exit(0);
        int64_t n = 1 << 20;
        tc_tensor *t = NULL;
        CHECK_OK(tc_tensor_ones(1, &n, TC_FLOAT32,
                                (tc_device){TC_CUDA, tc_process_group_device(pg)}, &t));
        tc_work *w = NULL;
        double t0 = tc_test_now_ms();
        /* The first collective sets up NCCL's connections, which needs the
         * peer: it may fail at the call already, or later at the wait. */
        tc_status st = tc_dist_all_reduce(pg, t, TC_REDUCE_OP_SUM, &w);
        if (st == TC_OK)
            st = tc_work_wait(w);
        printf("rank 0: all_reduce after the peer left: %s (%.1f s): %s\n", tc_status_string(st),
               (tc_test_now_ms() - t0) / 1000, tc_last_error());
        CHECK(st == TC_ERROR_INVALID_STATE || st == TC_ERROR_CUDA);
        const char *slow = getenv("TC_TEST_DIST_TIMEOUT");
        CHECK((tc_test_now_ms() - t0) / 1000 < (slow ? atof(slow) : 5) + 10);
        CHECK_STATUS(tc_dist_barrier(pg), TC_ERROR_INVALID_STATE);
        if (w)
            tc_work_destroy(w);
        _exit(tc_test_failed ? 1 : 0); /* the GPU may be left busy: no orderly teardown */
    }
    CHECK_OK(tc_process_group_destroy(pg));
    return TC_TEST_DONE();
}

/* The group `mode` of `world` ranks (this test again, "rank MODE"). */
static int spawn_group(int world, const char *mode, int port)
{
    char label[64];
    snprintf(label, sizeof label, "%s group", mode);
    return tc_test_spawn_ranks("test_dist_cuda", "rank", mode, world, port,
                               strcmp(mode, "die") ? "20" : "5", label);
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "rank"))
        return rank_main(argv[2]);
#ifdef TC_TEST_FAKE_NCCL
    if (argc == 3 && !strcmp(argv[1], "fake"))
        return fake_main(argv[2]);
#endif
    tc_test_init();
    TC_TEST_REQUIRE_GPU();
    tc_test_find_nccl(); /* before tcuda loads it; the ranks inherit the setting */

    tc_dist_options o = tc_test_dist_opts(0, 1, 29517, 60);
    o.local_rank = 0;
    tc_process_group *pg = NULL;
    tc_status st = tc_process_group_create(&o, &pg);
    if (st == TC_ERROR_NOT_SUPPORTED) {
        printf("skipped: NCCL was not found: %s\n", tc_last_error());
        return 77;
    }
    CHECK_OK(st);
    if (st != TC_OK)
        return TC_TEST_DONE();
    CHECK(tc_process_group_rank(pg) == 0 && tc_process_group_size(pg) == 1 &&
          tc_process_group_device(pg) == 0);
    run_all(pg);
    captured(pg);
    bad_arguments(pg);
    threads_share_a_group(pg);
    CHECK_OK(tc_process_group_destroy(pg));
    CHECK_STATUS(tc_process_group_destroy(pg), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_dist_barrier(pg), TC_ERROR_INVALID_HANDLE);
#ifdef TC_TEST_FAKE_NCCL
    CHECK(spawn_fake("ok") == 0);
    CHECK(spawn_fake("init_hangs") == 0);
    CHECK(spawn_fake("op_hangs") == 0);
#endif

    int n = tc_device_count();
    if (n >= 2) {
        int world = n > 8 ? 8 : n;
        CHECK(spawn_group(world, "all", 29518) == 0);
        CHECK(spawn_group(2, "die", 29519) == 0);
    } else {
        printf("multi-process part skipped: %d GPU (a group of 2 needs 2 GPUs: NCCL refuses "
               "two ranks on one GPU)\n",
               n);
    }
    return TC_TEST_DONE();
}
