/* jiterator on a GPU: what a user waits for and what the kernel streams.
 *
 *   first call, cold:     create + first call + synchronize of
 *                         x + alpha * y in a process that has not loaded
 *                         NVRTC yet, with an empty disk cache (load NVRTC,
 *                         compile, load the module, launch);
 *   first call, compile:  the same for a second code string (NVRTC loaded);
 *   second process:       a new process (this program run again) with the
 *                         disk cache filled: its first call (median of 5);
 *   warm call, host:      host time per later call (2^10 elements);
 *   kernel bandwidth:     x + alpha * y on 2^28 float32 (read 2, write 1),
 *                         median of event-timed calls, beside tcuda's
 *                         built-in add (same bytes).
 * Latency rows use 2^20 elements, so that they time the machinery rather
 * than the kernel. Prints "key,value" lines for bench/run.sh jit.
 *   bench_jit [log2 n] [repeats] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"
#include "tcuda/tcuda.h"

static const char axpy_code[] =
    "template <typename T> T axpy(T x, T y, T alpha) { return x + alpha * y; }";
static const char axmy_code[] =
    "template <typename T> T axmy(T x, T y, T alpha) { return x - alpha * y; }";
static const tc_device gpu = {TC_CUDA, 0};

static tc_tensor *filled(int64_t n, double v)
{
    tc_tensor *t = NULL;
    TRY(tc_tensor_full(1, &n, v, TC_FLOAT32, gpu, &t));
    return t;
}

/* ms of create + first call + synchronize of `code` on 2^20 elements. */
static double first_call_ms(const char *code)
{
    tc_tensor *x = filled(1 << 20, 1.5), *y = filled(1 << 20, 2.0), *out[1] = {NULL};
    TRY(tc_synchronize(0));
    const tc_tensor *in[2] = {x, y};
    tc_jit_options o = {.scalars = "alpha=2.0"};
    tc_jit_fn *fn = NULL;
    double t0 = bench_now_ns();
    TRY(tc_jit_fn_create(code, &o, &fn));
    TRY(tc_jit_fn_call(fn, in, 2, NULL, out));
    TRY(tc_synchronize(0));
    double ms = (bench_now_ns() - t0) / 1e6;
    double v = 0;
    int64_t i = 12345;
    tc_tensor *one = NULL;
    TRY(tc_tensor_narrow(out[0], 0, i, 1, &one));
    TRY(tc_tensor_item(one, &v));
    if (v != (code == axpy_code ? 5.5 : -2.5)) {
        fprintf(stderr, "bench_jit: wrong value %g\n", v);
        exit(1);
    }
    tc_tensor_release(one);
    tc_tensor_release(out[0]);
    tc_tensor_release(x);
    tc_tensor_release(y);
    tc_jit_fn_destroy(fn);
    return ms;
}

typedef struct job {
    tc_jit_fn *fn;
    const tc_tensor *in[2];
    double alpha;
} job;

static void run_jit(void *p)
{
    job *j = p;
    tc_tensor *out[1] = {NULL};
    TRY(tc_jit_fn_call(j->fn, j->in, 2, &j->alpha, out));
    tc_tensor_release(out[0]); /* back to the cache, reused by the next call */
}

static void run_add(void *p)
{
    job *j = p;
    tc_tensor *out = NULL;
    TRY(tc_tensor_add(j->in[0], j->in[1], &out));
    tc_tensor_release(out);
}

static int child(void)
{
    printf("%.3f\n", first_call_ms(axpy_code));
    return 0;
}

int main(int argc, char **argv)
{
    if (getenv("BENCH_JIT_CHILD"))
        return child();
    int lg = argc > 1 ? atoi(argv[1]) : 28;
    int reps = argc > 2 ? atoi(argv[2]) : 21;
    if (!tc_is_available()) {
        printf("skipped: no GPU (%s)\n", tc_last_error());
        return 0;
    }
    char dir[] = "/tmp/bench-jit-cache-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    setenv("TCUDA_JIT_CACHE_DIR", dir, 1);
    tc_device_properties props;
    TRY(tc_get_device_properties(0, &props));
    printf("device,%s\n", props.name);

    printf("first_call_cold_ms,%.3f\n", first_call_ms(axpy_code));
    printf("first_call_compile_ms,%.3f\n", first_call_ms(axmy_code));

    /* the path of this program, for the second process (popen runs sh) */
    char self[1024], cmd[1200];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0)
        return 1;
    self[len] = '\0';
    snprintf(cmd, sizeof cmd, "BENCH_JIT_CHILD=1 '%s'", self);
    double second[5];
    for (int i = 0; i < 5; i++) {
        fflush(stdout);
        FILE *p = popen(cmd, "r");
        if (!p || fscanf(p, "%lf", &second[i]) != 1) {
            fprintf(stderr, "bench_jit: the second process failed\n");
            return 1;
        }
        pclose(p);
    }
    printf("second_process_first_call_ms,%.3f\n", bench_median(second, 5));

    /* host time per warm call, tiny tensors */
    tc_jit_fn *fn = NULL;
    tc_jit_options o = {.scalars = "alpha=2.0"};
    TRY(tc_jit_fn_create(axpy_code, &o, &fn));
    {
        tc_tensor *x = filled(1024, 1), *y = filled(1024, 2);
        job j = {fn, {x, y}, 2.0};
        for (int i = 0; i < 100; i++)
            run_jit(&j);
        TRY(tc_synchronize(0));
        double t0 = bench_now_ns();
        for (int i = 0; i < 2000; i++)
            run_jit(&j);
        double us = (bench_now_ns() - t0) / 1e3 / 2000;
        TRY(tc_synchronize(0));
        printf("warm_call_host_us,%.2f\n", us);
        tc_tensor_release(x);
        tc_tensor_release(y);
    }

    int64_t n = (int64_t)1 << lg;
    tc_tensor *x = filled(n, 1.25), *y = filled(n, -0.5);
    job j = {fn, {x, y}, 3.0};
    double bytes = 3.0 * 4.0 * (double)n;
    double ms_jit = bench_gpu_median_ms(run_jit, &j, reps);
    double ms_add = bench_gpu_median_ms(run_add, &j, reps);
    printf("n_log2,%d\n", lg);
    printf("jit_axpy_ms,%.4f\njit_axpy_gbs,%.1f\n", ms_jit, bytes / ms_jit / 1e6);
    printf("builtin_add_ms,%.4f\nbuiltin_add_gbs,%.1f\n", ms_add, bytes / ms_add / 1e6);
    tc_tensor_release(x);
    tc_tensor_release(y);
    tc_jit_fn_destroy(fn);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return 0;
}
