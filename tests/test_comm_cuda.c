/* GPU: torch.cuda.comm collectives, checked against values computed on the
 * host. With one GPU every collective runs on a device list of one (and
 * gather of several tensors of one GPU); with two or more, every collective
 * runs over all GPUs (broadcast, coalesced forms with several buffers,
 * reduce_add, scatter even and by chunk sizes along two dims with streams,
 * gather to a GPU and to the CPU), once with peer copies (TCUDA_COMM_NCCL=0)
 * and once on NCCL where it is found; otherwise that
 * part prints why it was skipped. Errors: shape, dtype, devices listed twice,
 * a device that does not exist. With two or more GPUs also: four threads
 * running broadcast and reduce_add on the same devices at once (NCCL's
 * communicators shared: no deadlock, right values), and, with a fake NCCL
 * whose ncclCommInitAll fails (support/fake_nccl.c, in a child process),
 * broadcast and broadcast_out fail with NCCL's message instead of falling
 * back to copies. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nccl_find.h"
#include "tc_test.h"
#include "tcuda/comm.h"

static const tc_device CPU = {TC_CPU, -1};

/* Host values: small integers, so float sums are exact. */
static float *values(int64_t n)
{
    float *v = malloc(sizeof(float) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)((int)(tc_test_rand() % 1000) - 500);
    return v;
}

static tc_tensor *on(int dev, int ndim, const int64_t *sizes, const float *v)
{
    tc_tensor *t = NULL;
    CHECK_OK(tc_tensor_from_data(v, ndim, sizes, TC_FLOAT32, (tc_device){TC_CUDA, dev}, &t));
    return t;
}

/* True when t (any device) holds exactly v[0..n). */
static bool holds(const tc_tensor *t, const float *v, int64_t n)
{
    if (!t || tc_tensor_numel(t) != n)
        return false;
    double *got = tc_test_values(t);
    bool ok = got != NULL;
    for (int64_t i = 0; ok && i < n; i++)
        ok = got[i] == (double)v[i];
    free(got);
    return ok;
}

static void release_n(tc_tensor **t, int n)
{
    for (int i = 0; i < n; i++)
        tc_tensor_release(t[i]);
}

static void test_one_device(void)
{
    int64_t sz[2] = {6, 5};
    float *v = values(30), *w = values(30);
    tc_tensor *t = on(0, 2, sz, v);
    int dev0[1] = {0}, cur[1] = {-1};

    tc_tensor *out[8] = {0};
    CHECK_OK(tc_comm_broadcast(t, dev0, 1, out));
    CHECK(out[0] == t); /* the source device gets the tensor itself, as in PyTorch */
    tc_tensor_release(out[0]);
    CHECK_OK(tc_comm_broadcast(t, cur, 1, out));
    CHECK(out[0] == t);
    tc_tensor_release(out[0]);

    tc_tensor *dst = on(0, 2, sz, w);
    CHECK_OK(tc_comm_broadcast_out(t, &dst, 1));
    CHECK(holds(dst, v, 30));

    /* broadcast_coalesced: tensors themselves on their own device */
    int64_t s3 = 3;
    float *x = values(3);
    tc_tensor *small = on(0, 1, &s3, x);
    const tc_tensor *list[3] = {t, small, dst};
    CHECK_OK(tc_comm_broadcast_coalesced(list, 3, dev0, 1, 64, out));
    CHECK(out[0] == t && out[1] == small && out[2] == dst);
    release_n(out, 3);

    /* reduce_add of one input: a new tensor with its values */
    const tc_tensor *one[1] = {t};
    tc_tensor *sum = NULL;
    CHECK_OK(tc_comm_reduce_add(one, 1, 0, &sum));
    CHECK(sum != t && holds(sum, v, 30));
    tc_tensor_release(sum);
    CHECK_OK(tc_comm_reduce_add_coalesced(list, 1, 3, -1, 64, out));
    CHECK(holds(out[0], v, 30) && holds(out[1], x, 3) && holds(out[2], v, 30));
    CHECK(out[0] != t);
    release_n(out, 3);

    /* scatter to one device: the whole tensor, from the CPU and from the GPU */
    tc_tensor *host = NULL;
    CHECK_OK(tc_tensor_from_data(v, 2, sz, TC_FLOAT32, CPU, &host));
    int n_out = 0;
    CHECK_OK(tc_comm_scatter(host, dev0, 1, NULL, 0, NULL, out, &n_out));
    CHECK(n_out == 1 && tc_tensor_is_cuda(out[0]) && holds(out[0], v, 30));
    tc_tensor_release(out[0]);
    tc_stream *s = NULL;
    CHECK_OK(tc_stream_create(0, 0, &s));
    int64_t five = 5;
    CHECK_OK(tc_comm_scatter(t, dev0, 1, &five, 1, &s, out, &n_out));
    CHECK_OK(tc_stream_synchronize(s)); /* the copy ran on s */
    CHECK(n_out == 1 && holds(out[0], v, 30) && out[0] != t);
    tc_tensor_release(out[0]);

    /* gather of three tensors of one GPU, along both dims, to the GPU and the CPU */
    const tc_tensor *three[3] = {t, dst, t};
    tc_tensor *g = NULL;
    CHECK_OK(tc_comm_gather(three, 3, 0, 0, &g));
    float *ref = malloc(sizeof(float) * 90);
    memcpy(ref, v, 120), memcpy(ref + 30, v, 120), memcpy(ref + 60, v, 120);
    CHECK(g && tc_tensor_size(g, 0) == 18 && holds(g, ref, 90));
    tc_tensor_release(g);
    CHECK_OK(tc_comm_gather(three, 3, -1, -1, &g)); /* dim -1 (1), to the CPU */
    for (int r = 0; r < 6; r++)
        for (int k = 0; k < 3; k++)
            memcpy(ref + r * 15 + k * 5, v + r * 5, 20);
    CHECK(g && !tc_tensor_is_cuda(g) && tc_tensor_size(g, 1) == 15 && holds(g, ref, 90));
    tc_tensor_release(g);
    CHECK_OK(tc_comm_gather(three, 3, 1, TC_COMM_CURRENT_DEVICE, &g));
    CHECK(g && tc_tensor_is_cuda(g) && holds(g, ref, 90));
    tc_tensor_release(g);

    /* errors */
    int64_t other[2] = {5, 6};
    tc_tensor *wrong = on(0, 2, other, v), *i64 = NULL;
    CHECK_OK(tc_tensor_zeros(2, sz, TC_INT64, (tc_device){TC_CUDA, 0}, &i64));
    tc_tensor *keep = (tc_tensor *)0x1;
    CHECK_STATUS(tc_comm_broadcast_out(t, &wrong, 1), TC_ERROR_SHAPE);
    CHECK_STATUS(tc_comm_broadcast_out(t, &i64, 1), TC_ERROR_DTYPE);
    const tc_tensor *same_dev[2] = {t, dst};
    CHECK_STATUS(tc_comm_reduce_add(same_dev, 2, 0, &keep), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "same device") != NULL);
    const tc_tensor *mixed[2] = {t, wrong};
    CHECK_STATUS(tc_comm_gather(mixed, 2, 0, 0, &keep), TC_ERROR_SHAPE);
    int twice[2] = {0, -1}, missing[1] = {99};
    CHECK_STATUS(tc_comm_broadcast(t, twice, 2, out), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_comm_broadcast(t, missing, 1, out), TC_ERROR_INVALID_DEVICE);
    CHECK_STATUS(tc_comm_reduce_add(one, 1, 99, &keep), TC_ERROR_INVALID_DEVICE);
    CHECK(keep == (tc_tensor *)0x1);

    tc_stream_destroy(s);
    tc_tensor_release(wrong);
    tc_tensor_release(i64);
    tc_tensor_release(host);
    tc_tensor_release(small);
    tc_tensor_release(dst);
    tc_tensor_release(t);
    free(ref);
    free(x);
    free(v);
    free(w);
}

static void test_many_devices(int n)
{
    int devs[8];
    for (int i = 0; i < n; i++)
        devs[i] = n - 1 - i; /* the source (0) last */
    bool peer = false;
    CHECK_OK(tc_can_device_access_peer(0, 1, &peer));
    printf("%d GPUs; peer access 0->1: %s\n", n, peer ? "yes" : "no");

    int64_t sz[2] = {64, 33};
    int64_t numel = 64 * 33;
    float *v = values(numel);
    tc_tensor *t = on(0, 2, sz, v), *out[64] = {0};
    CHECK_OK(tc_comm_broadcast(t, devs, n, out));
    for (int i = 0; i < n; i++)
        CHECK(tc_tensor_device(out[i]).index == devs[i] && holds(out[i], v, numel));
    CHECK(out[n - 1] == t);

    /* broadcast_out into tensors on every device */
    tc_tensor *dst[8];
    for (int i = 0; i < n; i++)
        CHECK_OK(tc_tensor_zeros(2, sz, TC_FLOAT32, (tc_device){TC_CUDA, i}, &dst[i]));
    CHECK_OK(tc_comm_broadcast_out(t, dst, n));
    for (int i = 0; i < n; i++)
        CHECK(holds(dst[i], v, numel));

    /* reduce_add: the broadcast copies plus one distinct tensor per device */
    const tc_tensor *ins[8];
    float *sum = calloc((size_t)numel, sizeof(float));
    float *parts[8];
    for (int i = 0; i < n; i++) {
        parts[i] = values(numel);
        tc_tensor_release(dst[i]);
        dst[i] = on(i, 2, sz, parts[i]);
        ins[i] = dst[i];
        for (int64_t k = 0; k < numel; k++)
            sum[k] += parts[i][k];
    }
    for (int d = 0; d < n; d++) {
        tc_tensor *r = NULL;
        CHECK_OK(tc_comm_reduce_add(ins, n, d, &r));
        CHECK(r && tc_tensor_device(r).index == d && holds(r, sum, numel));
        tc_tensor_release(r);
    }

    /* coalesced: 4 tensors (two dtypes) in buffers of 1 KiB: a shared one, and single ones */
    int64_t s1 = 100, s2 = 150; /* 400 + 600 bytes: one buffer */
    float *a = values(s1), *b = values(s2);
    tc_tensor *ta = on(0, 1, &s1, a), *tb = on(0, 1, &s2, b), *ti = NULL;
    CHECK_OK(tc_tensor_arange(0, 50, 1, TC_INT64, (tc_device){TC_CUDA, 0}, &ti));
    const tc_tensor *list[4] = {ta, tb, ti, t};
    tc_tensor **co = calloc((size_t)(4 * n), sizeof *co);
    CHECK_OK(tc_comm_broadcast_coalesced(list, 4, devs, n, 1024, co));
    float *iota = malloc(sizeof(float) * 50);
    for (int k = 0; k < 50; k++)
        iota[k] = (float)k;
    for (int d = 0; d < n; d++) {
        CHECK(holds(co[d * 4 + 0], a, s1) && holds(co[d * 4 + 1], b, s2));
        CHECK(holds(co[d * 4 + 2], iota, 50) && holds(co[d * 4 + 3], v, numel));
        CHECK(tc_tensor_dtype(co[d * 4 + 2]) == TC_INT64);
        CHECK(tc_tensor_device(co[d * 4 + 1]).index == devs[d]);
    }
    /* reduce_add_coalesced over the received copies: n times each */
    tc_tensor *red[4] = {0};
    CHECK_OK(tc_comm_reduce_add_coalesced((const tc_tensor *const *)co, n, 4, 0, 1024, red));
    for (int64_t k = 0; k < s2; k++)
        b[k] *= (float)n;
    for (int k = 0; k < 50; k++)
        iota[k] *= (float)n;
    CHECK(holds(red[1], b, s2) && holds(red[2], iota, 50));
    release_n(red, 4);
    release_n(co, 4 * n);
    free(co);

    /* scatter: even chunks along dim 0 (64 rows), given sizes along dim 1 */
    int n_out = 0;
    tc_stream *streams[8];
    for (int i = 0; i < n; i++)
        CHECK_OK(tc_stream_create(devs[i], 0, &streams[i]));
    CHECK_OK(tc_comm_scatter(t, devs, n, NULL, 0, streams, out, &n_out));
    int64_t each = (64 + n - 1) / n, row = 0;
    CHECK(n_out == (int)((64 + each - 1) / each));
    for (int i = 0; i < n_out; i++) {
        CHECK_OK(tc_stream_synchronize(streams[i]));
        int64_t rows = tc_tensor_size(out[i], 0);
        CHECK(tc_tensor_device(out[i]).index == devs[i] && holds(out[i], v + row * 33, rows * 33));
        row += rows;
    }
    CHECK(row == 64);
    const tc_tensor *back[8];
    for (int i = 0; i < n_out; i++)
        back[i] = out[i];
    tc_tensor *g = NULL;
    CHECK_OK(tc_comm_gather(back, n_out, 0, -1, &g));
    CHECK(holds(g, v, numel));
    tc_tensor_release(g);
    release_n(out, n_out);

    int64_t chunks[8], left = 33;
    for (int i = 0; i < n; i++) {
        chunks[i] = i == n - 1 ? left : 1 + i;
        left -= chunks[i];
    }
    CHECK_OK(tc_comm_scatter(t, devs, n, chunks, 1, NULL, out, &n_out));
    CHECK(n_out == n);
    for (int i = 0; i < n; i++)
        back[i] = out[i];
    CHECK_OK(tc_comm_gather(back, n, 1, 1, &g));
    CHECK(g && tc_tensor_device(g).index == 1 && holds(g, v, numel));
    tc_tensor_release(g);
    release_n(out, n);

    for (int i = 0; i < n; i++) {
        tc_stream_destroy(streams[i]);
        tc_tensor_release(dst[i]);
        free(parts[i]);
    }
    tc_tensor_release(ta);
    tc_tensor_release(tb);
    tc_tensor_release(ti);
    tc_tensor_release(t);
    free(iota);
    free(a);
    free(b);
    free(sum);
    free(v);
}

/* One thread of test_threads: rounds of broadcast and reduce_add over
 * devices {0, 1}, each checked; the failures are counted. */
typedef struct worker {
    int rounds, failed;
    float *v;
} worker;

static void *work(void *p)
{
    worker *w = p;
    int64_t n = 4096;
    int devs[2] = {0, 1};
    for (int r = 0; r < w->rounds; r++) {
        tc_tensor *t = NULL, *out[2] = {0}, *sum = NULL;
        if (tc_tensor_from_data(w->v, 1, &n, TC_FLOAT32, (tc_device){TC_CUDA, 0}, &t) != TC_OK ||
            tc_comm_broadcast(t, devs, 2, out) != TC_OK ||
            tc_comm_reduce_add((const tc_tensor *const *)out, 2, 0, &sum) != TC_OK) {
            w->failed++;
        } else {
            double *got = tc_test_values(sum);
            for (int64_t i = 0; got && i < n; i++)
                if (got[i] != 2.0 * w->v[i]) {
                    w->failed++;
                    break;
                }
            free(got);
        }
        tc_tensor_release(sum);
        release_n(out, 2);
        tc_tensor_release(t);
    }
    return NULL;
}

/* Collectives of several threads on one device list at once. */
static void test_threads(void)
{
    worker w[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (worker){50, 0, values(4096)};
        CHECK(pthread_create(&th[i], NULL, work, &w[i]) == 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK(w[i].failed == 0);
        free(w[i].v);
    }
}

#ifdef TC_TEST_FAKE_NCCL
/* The child (argv: fake-initall): NCCL there, its ncclCommInitAll failing. */
static int fake_initall_main(void)
{
    tc_test_init();
    int64_t n = 256;
    float *v = values(n);
    int devs[2] = {0, 1};
    tc_tensor *t = on(0, 1, &n, v), *out[2] = {(tc_tensor *)0x1, (tc_tensor *)0x1};
    CHECK_STATUS(tc_comm_broadcast(t, devs, 2, out), TC_ERROR_CUDA);
    CHECK(strstr(tc_last_error(), "ncclCommInitAll") != NULL);
    CHECK(strstr(tc_last_error(), "failed on purpose") != NULL);
    CHECK(out[0] == (tc_tensor *)0x1 && out[1] == (tc_tensor *)0x1);
    tc_tensor *dst = NULL;
    CHECK_OK(tc_tensor_empty(1, &n, TC_FLOAT32, (tc_device){TC_CUDA, 1}, &dst));
    CHECK_STATUS(tc_comm_broadcast_out(t, &dst, 1), TC_ERROR_CUDA);
    CHECK(strstr(tc_last_error(), "failed on purpose") != NULL);
    tc_tensor_release(dst);
    tc_tensor_release(t);
    free(v);
    return TC_TEST_DONE();
}

static void test_fake_initall(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        setenv("TCUDA_NCCL_LIBRARY", TC_TEST_FAKE_NCCL, 1);
        setenv("FAKE_NCCL", "initall_fails", 1);
        execl("/proc/self/exe", "test_comm_cuda", "fake-initall", (char *)NULL);
        _exit(99);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
#endif

int main(int argc, char **argv)
{
#ifdef TC_TEST_FAKE_NCCL
    if (argc == 2 && !strcmp(argv[1], "fake-initall"))
        return fake_initall_main();
#else
    (void)argv;
#endif
    (void)argc;
    tc_test_init();
    TC_TEST_REQUIRE_GPU();
    test_one_device();
    int n = tc_device_count();
    if (n >= 2) { /* peer copies, then NCCL (when it is there) */
        setenv("TCUDA_COMM_NCCL", "0", 1);
        printf("-- with peer copies (TCUDA_COMM_NCCL=0)\n");
        test_many_devices(n > 8 ? 8 : n);
        unsetenv("TCUDA_COMM_NCCL");
        tc_test_find_nccl();
        printf("-- with NCCL where it is found\n");
        test_many_devices(n > 8 ? 8 : n);
        test_threads();
#ifdef TC_TEST_FAKE_NCCL
        test_fake_initall();
#endif
    } else
        printf("multi-GPU part skipped: %d GPU (needs 2 or more)\n", n);
    return TC_TEST_DONE();
}
