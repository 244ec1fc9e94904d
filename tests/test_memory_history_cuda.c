/* Memory history on a real GPU: a recorded run of tensor work (randn,
 * matmul, add on device 0), the snapshot dumped as pickle and JSON, read
 * back by Python's pickle (events on device 0 with the work function in
 * their stacks) and, when torch imports, by torch.cuda._memory_viz
 * (trace_plot and segment_plot return pages); the out-of-memory observer on
 * real out-of-memory errors (1 TiB through the allocator and through a
 * tensor), once each, with the device's total memory and a snapshot, able to
 * dump a snapshot itself; and, in a child run with TCUDA_NO_CACHING=1,
 * reserved memory equal to what is live and nothing left after the frees;
 * a user memory pool serving a tensor made inside its use, and only that,
 * also with a user allocator's functions for its segments.
 * Exits 77 without a GPU. */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tc_test.h"

#include <cuda_runtime_api.h>

#define MiB ((size_t)1 << 20)
static const tc_device GPU = {TC_CUDA, 0};

void hist_cuda_tensor_work(int steps); /* exported: the stacks name it */
void hist_cuda_tensor_work(int steps)
{
    int64_t sz[2] = {512, 512};
    for (int s = 0; s < steps; s++) {
        tc_tensor *a = NULL, *b = NULL, *c = NULL, *d = NULL;
        CHECK_OK(tc_tensor_randn(2, sz, TC_FLOAT32, GPU, NULL, &a));
        CHECK_OK(tc_tensor_randn(2, sz, TC_FLOAT32, GPU, NULL, &b));
        CHECK_OK(tc_tensor_matmul(a, b, &c));
        CHECK_OK(tc_tensor_add(c, a, &d));
        tc_tensor_release(d);
        tc_tensor_release(c);
        tc_tensor_release(b);
        tc_tensor_release(a);
    }
    __asm__ volatile("" ::: "memory"); /* not a tail call */
}

static int oom_calls;
static tc_oom_info oom_last;
static size_t oom_segments;
static char oom_dump[1200];
static tc_status oom_dump_status = TC_ERROR_INTERNAL;

static void on_oom(const tc_oom_info *info, void *ctx)
{
    (void)ctx;
    oom_calls++;
    oom_last = *info;
    oom_segments = info->snapshot ? info->snapshot->num_segments : 0;
    oom_dump_status = tc_memory_dump_snapshot(oom_dump);
}

static int sh(const char *cmd)
{
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static const char *py_check =
    "import pickle, json, sys\n"
    "d = pickle.load(open(sys.argv[1], 'rb'))\n"
    "assert d == json.load(open(sys.argv[2])), 'pickle and json differ'\n"
    "t = d['device_traces'][0]\n"
    "acts = [e['action'] for e in t]\n"
    "print('events on device 0:', {a: acts.count(a) for a in set(acts)})\n"
    "assert acts.count('alloc') >= 4 * int(sys.argv[3]), acts.count('alloc')\n"
    "assert acts.count('free_completed') <= acts.count('alloc')\n"
    "names = {f['name'] for e in t for f in e['frames']}\n"
    "assert 'hist_cuda_tensor_work' in names, sorted(names)[:40]\n"
    "assert d['segments'] and all(s['device'] == 0 for s in d['segments'])\n"
    "try:\n"
    "    import torch\n"
    "    from torch.cuda import _memory_viz as mv\n"
    "except Exception as e:\n"
    "    print('torch not importable (%s): _memory_viz not tried' % e)\n"
    "    sys.exit(0)\n"
    "a = mv.trace_plot(d)\n"
    "b = mv.segment_plot(d)\n"
    "assert isinstance(a, str) and len(a) > 1000 and isinstance(b, str) and len(b) > 1000\n"
    "print('torch', torch.__version__, '_memory_viz: trace_plot', len(a), 'chars, segment_plot',"
    " len(b), 'chars')\n";

static void recorded_run(const char *dir)
{
    char pk[1200], js[1300], py[1300], cmd[4200];
    snprintf(pk, sizeof pk, "%.1100s/memory_history_cuda.pickle", dir);
    snprintf(js, sizeof js, "%s.json", pk);
    snprintf(py, sizeof py, "%s.py", pk);
    tc_memory_history_options o = {true, TC_HISTORY_RECORD_ALL, TC_HISTORY_STACKS_ALL, 100000};
    CHECK_OK(tc_memory_record_history(&o));
    const int steps = 20;
    hist_cuda_tensor_work(steps);
    CHECK_OK(tc_synchronize(0));
    CHECK_OK(tc_memory_dump_snapshot(pk));
    CHECK_OK(tc_memory_dump_snapshot_json(js));
    o.enabled = false;
    CHECK_OK(tc_memory_record_history(&o));
    printf("snapshot: %s (and .json)\n", pk);
    if (sh("python3 -c 'import pickle' 2>/dev/null") != 0) {
        printf("python3 not found: the snapshot is not read back\n");
        return;
    }
    FILE *f = fopen(py, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    fputs(py_check, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "python3 %s %s %s %d", py, pk, js, steps);
    CHECK(sh(cmd) == 0);
}

static void oom_observer(const char *dir)
{
    snprintf(oom_dump, sizeof oom_dump, "%.1100s/memory_history_oom.pickle", dir);
    size_t fr = 0, tot = 0;
    CHECK_OK(tc_mem_get_info(0, &fr, &tot));
    CHECK_OK(tc_memory_attach_oom_observer(on_oom, NULL));
    void *keep = NULL, *p = NULL;
    CHECK_OK(tc_caching_allocator_alloc(64 * MiB, 0, NULL, &keep));
    CHECK_STATUS(tc_caching_allocator_alloc((size_t)1 << 40, 0, NULL, &p), TC_ERROR_OUT_OF_MEMORY);
    CHECK(strstr(tc_last_error(), "tc_caching_allocator_alloc") != NULL); /* the message kept */
    CHECK(strstr(tc_last_error(), "out of memory") != NULL);
    CHECK(oom_calls == 1);
    CHECK(oom_last.device == 0 && oom_last.requested == (size_t)1 << 40);
    CHECK(oom_last.total_bytes == tot && oom_last.free_bytes <= tot);
    CHECK(oom_segments >= 1);
    CHECK(oom_dump_status == TC_OK);
    CHECK(access(oom_dump, R_OK) == 0);
    int64_t sz[1] = {(int64_t)1 << 38}; /* 1 TiB of float32 */
    tc_tensor *t = NULL;
    CHECK_STATUS(tc_tensor_empty(1, sz, TC_FLOAT32, GPU, &t), TC_ERROR_OUT_OF_MEMORY);
    CHECK(oom_calls == 2);
    CHECK_OK(tc_memory_detach_oom_observer(on_oom, NULL));
    CHECK_STATUS(tc_caching_allocator_alloc((size_t)1 << 40, 0, NULL, &p), TC_ERROR_OUT_OF_MEMORY);
    CHECK(oom_calls == 2);
    CHECK_OK(tc_caching_allocator_delete(keep));
    printf("OOM observer: called %d times, device %d, %zu of %zu bytes free\n", oom_calls,
           oom_last.device, oom_last.free_bytes, oom_last.total_bytes);
}

static void user_pool(void)
{
    tc_mempool *pool = NULL;
    CHECK_OK(tc_mempool_create(0, NULL, &pool));
    int64_t n = 1 << 20; /* 4 MiB of float32 */
    tc_tensor *in = NULL, *out = NULL;
    CHECK_OK(tc_mempool_use_begin(pool));
    CHECK_OK(tc_tensor_zeros(1, &n, TC_FLOAT32, GPU, &in));
    CHECK_OK(tc_mempool_use_end(pool));
    CHECK_OK(tc_tensor_zeros(1, &n, TC_FLOAT32, GPU, &out));
    tc_mempool_stats_info st;
    CHECK_OK(tc_mempool_stats(pool, &st));
    CHECK(st.device == 0 && st.blocks == 1 && st.requested_bytes >= 4 * MiB);
    CHECK(st.segments == 1 && st.reserved_bytes >= 4 * MiB);
    tc_tensor_release(in);
    tc_tensor_release(out);
    CHECK_OK(tc_synchronize(0));
    CHECK_OK(tc_mempool_stats(pool, &st));
    CHECK(st.blocks == 0);
    CHECK_OK(tc_mempool_destroy(pool));
    CHECK_STATUS(tc_mempool_destroy(pool), TC_ERROR_INVALID_HANDLE);
}

static int user_allocs, user_frees;
static void *user_alloc_fn(size_t size, int device, void *stream)
{
    (void)device, (void)stream;
    void *p = NULL;
    user_allocs++;
    return cudaMalloc(&p, size) == cudaSuccess ? p : NULL;
}
static void user_free_fn(void *ptr, size_t size, int device, void *stream)
{
    (void)size, (void)device, (void)stream;
    user_frees++;
    (void)cudaFree(ptr);
}

/* A pool whose segments come from a user allocator's functions. */
static void user_pool_pluggable(void)
{
    tc_allocator *ua = NULL;
    CHECK_OK(tc_allocator_create(user_alloc_fn, user_free_fn, &ua));
    tc_mempool *pool = NULL;
    CHECK_OK(tc_mempool_create(0, ua, &pool));
    int64_t n = 1 << 20;
    tc_tensor *t = NULL, *u = NULL;
    CHECK_OK(tc_mempool_use_begin(pool));
    CHECK_OK(tc_tensor_full(1, &n, 2.0, TC_FLOAT32, GPU, &t));
    CHECK_OK(tc_mempool_use_end(pool));
    CHECK_OK(tc_tensor_zeros(1, &n, TC_FLOAT32, GPU, &u)); /* the device's memory */
    CHECK(user_allocs == 1 && user_frees == 0);
    tc_mempool_stats_info st;
    CHECK_OK(tc_mempool_stats(pool, &st));
    CHECK(st.blocks == 1 && st.segments == 1);
    double sum = -1;
    tc_tensor *s = NULL;
    CHECK_OK(tc_tensor_sum(t, TC_ALL_DIMS, false, &s));
    if (s)
        CHECK_OK(tc_tensor_item(s, &sum));
    CHECK(sum == 2.0 * (double)n); /* the pool's memory works like any */
    tc_tensor_release(s);
    tc_tensor_release(t);
    tc_tensor_release(u);
    CHECK_OK(tc_mempool_destroy(pool)); /* its allocator goes: the user's free is called */
    CHECK(user_frees == 1);
    CHECK_OK(tc_allocator_destroy(ua));
    printf("pluggable pool: %d user allocations, %d user frees\n", user_allocs, user_frees);
}

/* The child: TCUDA_NO_CACHING=1 is in its environment. */
static int no_caching_child(void)
{
    CHECK_OK(tc_empty_cache());
    size_t base = tc_test_bytes(tc_memory_reserved, 0);
    CHECK(base == 0);
    tc_tensor *t[4];
    int64_t sizes[4] = {1000, 250000, 3 << 20, 77};
    size_t total = 0;
    for (int i = 0; i < 4; i++) {
        CHECK_OK(tc_tensor_empty(1, &sizes[i], TC_FLOAT32, GPU, &t[i]));
        total += ((size_t)sizes[i] * 4 + 511) / 512 * 512;
    }
    CHECK(tc_test_bytes(tc_memory_reserved, 0) == total);
    CHECK(tc_test_bytes(tc_memory_allocated, 0) == total);
    for (int i = 0; i < 4; i++)
        tc_tensor_release(t[i]);
    CHECK_OK(tc_synchronize(0));
    CHECK(tc_test_bytes(tc_memory_reserved, 0) == 0);
    CHECK(tc_test_bytes(tc_memory_allocated, 0) == 0);
    CHECK(tc_test_stat(0, "num_device_alloc") == 4);
    CHECK(tc_test_stat(0, "num_device_free") == 4);
    return TC_TEST_DONE();
}

static void no_caching(const char *self)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "TCUDA_NO_CACHING=1 %.4000s --no-caching-child", self);
    CHECK(sh(cmd) == 0);
    snprintf(cmd, sizeof cmd, "TCUDA_NO_CACHING=maybe %.4000s --bad-env-child", self);
    CHECK(sh(cmd) == 0);
}

/* The child with TCUDA_NO_CACHING=maybe: initialization fails and names it. */
static int bad_env_child(void)
{
    CHECK_STATUS(tc_init(), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "TCUDA_NO_CACHING") != NULL);
    return TC_TEST_DONE();
}

int main(int argc, char **argv)
{
    tc_test_init();
    if (argc > 1 && strcmp(argv[1], "--bad-env-child") == 0)
        return bad_env_child(); /* before anything initializes CUDA */
    TC_TEST_REQUIRE_GPU();
    if (argc > 1 && strcmp(argv[1], "--no-caching-child") == 0)
        return no_caching_child();
    char dir[4096], absdir[4096];
    snprintf(dir, sizeof dir, "%s", argv[0]);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = 0;
    if (!slash || !realpath(dir, absdir))
        snprintf(absdir, sizeof absdir, "/tmp");
    recorded_run(absdir);
    oom_observer(absdir);
    user_pool();
    user_pool_pluggable();
    no_caching(argv[0]);
    return TC_TEST_DONE();
}
