/* GPU: jiterator through NVRTC. Results equal the built-in ops bit for bit
 * over every dtype, broadcast, strided, 0-d, empty and mixed inputs,
 * scalars, multi-output and given outputs (tc_jit_check.h); the CPU path
 * and the GPU agree for float ops written with the basic operators;
 * float16 and bfloat16 load and store every bit pattern as the CPU does; a
 * compile error is INVALID_ARGUMENT with NVRTC's log; the kernel runs on the
 * current stream; two threads compile one function once; a second process
 * (this program run again with TC_JIT_CUDA_CHILD set) loads the kernel from
 * the disk cache without compiling, and a damaged cache file is compiled
 * again and replaced. Exits 77 without a GPU. */
#include <dirent.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tc_test.h"

#include "jit/jit_internal.h"
#include "tc_jit_check.h"
#include "test_kernels.h"

static const tc_device gpu = {TC_CUDA, 0};
static const tc_device cpu = {TC_CPU, -1};
static char cache_dir[256];

static const char child_code[] =
    "template <typename T> T child_gpu_op(T x, T y, T beta) { return x * beta - y; }";

/* The second process: one GPU call; exit 10 + the number of compiles. */
static int child_main(void)
{
    tc_jit_fn *fn = NULL;
    tc_jit_options o = {.scalars = "beta=3"};
    if (tc_jit_fn_create(child_code, &o, &fn) != TC_OK)
        return 2;
    enum { N = 1000 };
    int64_t s[1] = {N};
    static float xs[N], ys[N], r[N];
    for (int i = 0; i < N; i++) {
        xs[i] = (float)i * 0.5f;
        ys[i] = 100.0f - (float)i;
    }
    tc_tensor *x = NULL, *y = NULL, *out[1] = {NULL};
    if (tc_tensor_from_data(xs, 1, s, TC_FLOAT32, gpu, &x) != TC_OK ||
        tc_tensor_from_data(ys, 1, s, TC_FLOAT32, gpu, &y) != TC_OK)
        return 3;
    const tc_tensor *in[2] = {x, y};
    int before = tc__jit_compile_count();
    double t0 = tc_test_now_ms();
    if (tc_jit_fn_call(fn, in, 2, NULL, out) != TC_OK) {
        fprintf(stderr, "child: %s\n", tc_last_error());
        return 4;
    }
    double ms = tc_test_now_ms() - t0;
    if (tc_tensor_to_host(out[0], TC_FLOAT32, r) != TC_OK)
        return 5;
    for (int i = 0; i < N; i++)
        if (r[i] != xs[i] * 3.0f - ys[i])
            return 6;
    int compiles = tc__jit_compile_count() - before;
    printf("child: first call %.2f ms (%s)\n", ms, compiles ? "compiled" : "from the disk cache");
    tc_tensor_release(x);
    tc_tensor_release(y);
    tc_tensor_release(out[0]);
    tc_jit_fn_destroy(fn);
    return 10 + compiles;
}

static int run_child(void)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("TC_JIT_CUDA_CHILD", "1", 1);
        execl("/proc/self/exe", "test_jit_cuda", (char *)NULL);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_disk_cache_second_process(void)
{
    CHECK(run_child() == 11); /* a fresh cache directory: compiles */
    CHECK(run_child() == 10); /* from the disk cache */
    DIR *d = opendir(cache_dir);
    int damaged = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (n > 6 && !strcmp(e->d_name + n - 6, ".cubin")) {
            char path[600];
            snprintf(path, sizeof path, "%s/%s", cache_dir, e->d_name);
            FILE *f = fopen(path, "r+b");
            if (f && fseek(f, -50, SEEK_END) == 0) {
                int c = fgetc(f);
                fseek(f, -50, SEEK_END);
                damaged += fputc(c ^ 0xff, f) != EOF;
            }
            if (f)
                fclose(f);
        }
    }
    if (d)
        closedir(d);
    CHECK(damaged > 0);
    CHECK(run_child() == 11); /* damaged: ignored, compiled, replaced */
    CHECK(run_child() == 10);
}

/* float16 and bfloat16 on the GPU: the kernel converts with the hardware's
 * cvt instructions and keeps the integer conversions' NaNs. Every 16-bit
 * pattern x through an identity (the bits back; a NaN made quiet, its sign
 * kept), and x * y for six y (rounding to nearest even, subnormals,
 * overflow; the product is exact in float) against the built-in CPU
 * multiply (NaN results compared as NaN: the GPU's arithmetic gives its own
 * NaN). Both through the vector path and the grid-stride loop. */
static bool nan16(tc_dtype dt, uint16_t h)
{
    return (h & 0x7fffu) > (dt == TC_FLOAT16 ? 0x7c00u : 0x7f80u);
}

static void test_16bit_every_pattern(void)
{
    tc_jit_fn *id = NULL, *mul = NULL;
    CHECK_OK(tc_jit_fn_create("template <typename T> T ident(T x) { return x; }", NULL, &id));
    CHECK_OK(tc_jit_fn_create(jc_mul, NULL, &mul));
    enum { N = 65536 };
    static uint16_t bits[N + 1], ys[N + 1], got[N], want[N];
    tc_dtype dts[2] = {TC_FLOAT16, TC_BFLOAT16};
    /* 1 + ulp, 0.1, 3, 1/3, 2^-10, 1000 */
    static const uint16_t yv[2][6] = {{0x3c01, 0x2e66, 0x4200, 0x3555, 0x1400, 0x63d0},
                                      {0x3f81, 0x3dcd, 0x4040, 0x3eab, 0x3a80, 0x447a}};
    for (int i = 0; i < N + 1; i++)
        bits[i] = (uint16_t)(i - 1); /* bits[0] is a pad: from 1 on, not 16-byte aligned */
    for (int k = 0; k < 2; k++) {
        tc_dtype dt = dts[k];
        for (int i = 0; i < N + 1; i++)
            ys[i] = yv[k][i % 6];
        int64_t s[1] = {N + 1};
        tc_tensor *xa = NULL, *ya = NULL, *xc = NULL, *yc = NULL;
        CHECK_OK(tc_tensor_from_data(bits, 1, s, dt, gpu, &xa));
        CHECK_OK(tc_tensor_from_data(ys, 1, s, dt, gpu, &ya));
        CHECK_OK(tc_tensor_from_data(bits, 1, s, dt, cpu, &xc));
        CHECK_OK(tc_tensor_from_data(ys, 1, s, dt, cpu, &yc));
        for (int off = 0; off < 2; off++) { /* 0: aligned (vector path), 1: not */
            tc_tensor *x = NULL, *y = NULL, *xh = NULL, *yh = NULL, *ref = NULL;
            tc_tensor *o1[1] = {NULL}, *o2[1] = {NULL};
            CHECK_OK(tc_tensor_narrow(xa, 0, off, N, &x));
            CHECK_OK(tc_tensor_narrow(ya, 0, off, N, &y));
            CHECK_OK(tc_tensor_narrow(xc, 0, off, N, &xh));
            CHECK_OK(tc_tensor_narrow(yc, 0, off, N, &yh));
            const tc_tensor *in1[1] = {x}, *in2[2] = {x, y};
            CHECK_OK(tc_jit_fn_call(id, in1, 1, NULL, o1));
            CHECK_OK(tc_tensor_to_host(o1[0], dt, got));
            int bad = 0;
            for (int i = 0; i < N; i++) {
                uint16_t h = (uint16_t)(i - 1 + off), w = h;
                if (nan16(dt, h))
                    w = dt == TC_FLOAT16 ? (uint16_t)((h & 0x8000u) | 0x7e00u)
                                         : (uint16_t)(h | 0x40u);
                bad += got[i] != w;
            }
            CHECK(bad == 0);
            CHECK_OK(tc_jit_fn_call(mul, in2, 2, NULL, o2));
            CHECK_OK(tc_tensor_mul(xh, yh, &ref));
            CHECK_OK(tc_tensor_to_host(o2[0], dt, got));
            CHECK_OK(tc_tensor_to_host(ref, dt, want));
            bad = 0;
            for (int i = 0; i < N; i++)
                bad += nan16(dt, want[i]) ? !nan16(dt, got[i]) : got[i] != want[i];
            CHECK(bad == 0);
            tc_tensor *rel[] = {x, y, xh, yh, ref, o1[0], o2[0]};
            for (int i = 0; i < 7; i++)
                tc_tensor_release(rel[i]);
        }
        tc_tensor *rel[] = {xa, ya, xc, yc};
        for (int i = 0; i < 4; i++)
            tc_tensor_release(rel[i]);
    }
    tc_jit_fn_destroy(id);
    tc_jit_fn_destroy(mul);
}

/* float ops with the basic operators: CPU path and GPU within 1 ulp. */
static void test_cpu_gpu_agree(void)
{
    static const char code[] = "template <typename T> T mix(T x, T y, T a) { return (x * a - y) "
                               "/ (y + a) + x * y; }";
    tc_jit_fn *fn = NULL;
    tc_jit_options o = {.scalars = "a=1.5"};
    CHECK_OK(tc_jit_fn_create(code, &o, &fn));
    if (tc__jit_host_compiler(NULL, NULL) != TC_OK) {
        printf("CPU/GPU agreement not checked: %s\n", tc_last_error());
        tc_jit_fn_destroy(fn);
        return;
    }
    tc_dtype dts[] = {TC_FLOAT32, TC_FLOAT64, TC_FLOAT16, TC_BFLOAT16};
    for (int k = 0; k < 4; k++) {
        int64_t s[1] = {5000};
        tc_tensor *xc = jc_rand(cpu, dts[k], 1, s), *yc = jc_rand(cpu, dts[k], 1, s);
        tc_tensor *xg = NULL, *yg = NULL, *oc[1] = {NULL}, *og[1] = {NULL}, *ogc = NULL;
        CHECK_OK(tc_tensor_to(xc, gpu, dts[k], false, &xg));
        CHECK_OK(tc_tensor_to(yc, gpu, dts[k], false, &yg));
        const tc_tensor *ic[2] = {xc, yc}, *ig[2] = {xg, yg};
        CHECK_OK(tc_jit_fn_call(fn, ic, 2, NULL, oc));
        CHECK_OK(tc_jit_fn_call(fn, ig, 2, NULL, og));
        CHECK_OK(tc_tensor_cpu(og[0], &ogc));
        /* identical operations in the same precision: expected bit-equal;
         * the promise is 1 ulp */
        CHECK(jc_same(oc[0], ogc));
        tc_tensor *rel[] = {xc, yc, xg, yg, oc[0], og[0], ogc};
        for (int i = 0; i < 7; i++)
            tc_tensor_release(rel[i]);
    }
    CHECK_OK(tc_jit_fn_destroy(fn));
}

static void test_compile_error(void)
{
    tc_jit_fn *fn = NULL;
    CHECK_OK(tc_jit_fn_create("template <typename T> T broken(T x) { return x + undefined_y; }",
                              NULL, &fn));
    int64_t s[1] = {16};
    tc_tensor *x = jc_rand(gpu, TC_FLOAT32, 1, s), *out[1] = {NULL};
    const tc_tensor *in[1] = {x};
    CHECK_STATUS(tc_jit_fn_call(fn, in, 1, NULL, out), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "undefined_y") != NULL);
    CHECK(strstr(tc_last_error(), "jit_code") != NULL);
    CHECK(out[0] == NULL);
    /* the device is fine afterwards */
    tc_jit_fn *ok = NULL;
    CHECK_OK(tc_jit_fn_create(jc_add, NULL, &ok));
    const tc_tensor *in2[2] = {x, x};
    CHECK_OK(tc_jit_fn_call(ok, in2, 2, NULL, out));
    tc_tensor *ref = NULL;
    CHECK_OK(tc_tensor_add(x, x, &ref));
    CHECK(jc_same(out[0], ref));
    tc_tensor_release(out[0]);
    tc_tensor_release(ref);
    tc_tensor_release(x);
    tc_jit_fn_destroy(fn);
    tc_jit_fn_destroy(ok);
}

/* The kernel goes on the current stream: queued behind a spinning kernel
 * there, it is not done until the spin is. */
static void test_current_stream(void)
{
    tc_stream *s = NULL;
    CHECK_OK(tc_stream_create(0, 0, &s));
    tc_jit_fn *fn = NULL;
    CHECK_OK(tc_jit_fn_create(jc_mul, NULL, &fn));
    int64_t n[1] = {1 << 20};
    tc_tensor *x = jc_rand(gpu, TC_FLOAT32, 1, n), *out[1] = {NULL}, *ref = NULL;
    const tc_tensor *in[2] = {x, x};
    CHECK_OK(tc_jit_fn_call(fn, in, 2, NULL, out)); /* compiled and loaded now */
    tc_tensor_release(out[0]);
    out[0] = NULL;
    CHECK_OK(tc_synchronize(0));
    CHECK_OK(tc_set_stream(s));
    CHECK_OK(tc_test_spin(tc_stream_cuda_handle(s), 300u * 1000 * 1000));
    CHECK_OK(tc_jit_fn_call(fn, in, 2, NULL, out));
    CHECK_STATUS(tc_stream_query(s), TC_ERROR_NOT_READY);
    CHECK_OK(tc_stream_synchronize(s));
    CHECK_OK(tc_stream_query(s));
    CHECK_OK(tc_tensor_mul(x, x, &ref));
    CHECK(jc_same(out[0], ref));
    tc_tensor_release(ref);
    tc_tensor_release(out[0]);
    tc_tensor_release(x);
    tc_stream *def = NULL;
    CHECK_OK(tc_default_stream(0, &def));
    CHECK_OK(tc_set_stream(def));
    CHECK_OK(tc_stream_destroy(s));
    tc_jit_fn_destroy(fn);
}

static void test_threads_compile_once(void)
{
    char code[160];
    snprintf(code, sizeof code,
             "template <typename T> T gpu_twice_%llu(T x, T y) { return x + y; }",
             (unsigned long long)(tc_test_rand() % 1000000));
    int before = tc__jit_compile_count();
    pthread_t th[4];
    int64_t n[1] = {4096};
    jc_thread_job jobs[4];
    for (int i = 0; i < 4; i++)
        jobs[i] = (jc_thread_job){code, jc_rand(gpu, TC_FLOAT32, 1, n), false};
    for (int i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, jc_thread_call, &jobs[i]);
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK(jobs[i].ok);
        tc_tensor_release(jobs[i].x);
    }
    CHECK(tc__jit_compile_count() - before == 1);
}

int main(void)
{
    if (getenv("TC_JIT_CUDA_CHILD"))
        return child_main();
    TC_TEST_REQUIRE_GPU();
    tc_test_init();
    snprintf(cache_dir, sizeof cache_dir, "%s/tcuda-test-jit-cuda-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(cache_dir)) {
        perror("mkdtemp");
        return 1;
    }
    setenv("TCUDA_JIT_CACHE_DIR", cache_dir, 1);
    double t0 = tc_test_now_ms();
    jc_parity_suite(gpu);
    printf("GPU parity suite: %.0f ms\n", tc_test_now_ms() - t0);
    test_cpu_gpu_agree();
    test_16bit_every_pattern();
    test_compile_error();
    test_current_stream();
    test_threads_compile_once();
    test_disk_cache_second_process();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache_dir);
    if (system(cmd) != 0)
        printf("could not remove %s\n", cache_dir);
    return TC_TEST_DONE();
}
