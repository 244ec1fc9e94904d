/* jiterator's compile, without a GPU: where a first call's time goes for a
 * few representative functions, with the memory and disk caches out of the
 * way (it calls the generator and NVRTC directly, as a cache miss does):
 *   source:   tc__jit_source (the generated C++), in microseconds;
 *   create, compile, get:  nvrtcCreateProgram, nvrtcCompileProgram (to a
 *             cubin for sm_<arch>), getting the cubin and destroying the
 *             program, in milliseconds;
 *   total:    the call of the seam's jit compile, in milliseconds, and the
 *             thread's CPU time in it ("cpu": NVRTC compiles on the calling
 *             thread, so on a busy machine this is the steadier number);
 * each the median (and minimum) of `repeats` compiles, after one untimed
 * compile of each function (NVRTC itself is loaded before: "nvrtc_load_ms").
 * Needs NVRTC, not a GPU. Prints a table, then "key,value" lines.
 *   bench_jit_compile [repeats] [arch] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "jit/jit_internal.h"
#include "runtime/device_ops.h"
#include "tcuda/tcuda.h"

static const char axpy[] =
    "template <typename T> T axpy(T x, T y, T alpha) { return x + alpha * y; }";
static const char addsub[] =
    "template <typename T> void addsub(T x, T y, T &s, T &d) { s = x + y; d = x - y; }";
static const char gelu[] = "template <typename T> T gelu(T x) { return T(0.5) * x * (T(1) + "
                           "erf(x * T(0.70710678118654752))); }";

typedef struct bench_case {
    const char *label;
    tc__jit_spec spec;
} bench_case;

static const bench_case cases[] = {
    {"f32_axpy", {axpy, "axpy", TC_FLOAT32, 2, 1, 1, false, true}},
    {"f32_axpy_strided", {axpy, "axpy", TC_FLOAT32, 2, 1, 1, false, false}},
    {"f16_axpy", {axpy, "axpy", TC_FLOAT16, 2, 1, 1, false, true}},
    {"bf16_axpy", {axpy, "axpy", TC_BFLOAT16, 2, 1, 1, false, true}},
    {"f32_addsub_2out", {addsub, "addsub", TC_FLOAT32, 2, 2, 0, true, true}},
    {"f32_gelu_erf", {gelu, "gelu", TC_FLOAT32, 1, 1, 0, false, true}},
};
#define N_CASES (int)(sizeof cases / sizeof cases[0])

static double cpu_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static double minimum(const double *v, int n)
{
    double m = v[0];
    for (int i = 1; i < n; i++)
        m = v[i] < m ? v[i] : m;
    return m;
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 9;
    int arch = argc > 2 ? atoi(argv[2]) : 90;
    if (reps < 1 || reps > 1000 || arch < 50) {
        fprintf(stderr, "usage: bench_jit_compile [repeats 1..1000] [arch >= 50]\n");
        return 2;
    }
    const char *ver = NULL;
    double t0 = bench_now_ns();
    if (tc__dev()->jit->nvrtc_version(&ver) != TC_OK) {
        printf("skipped: %s\n", tc_last_error());
        return 0;
    }
    double load_ms = (bench_now_ns() - t0) / 1e6;
    printf("%s, sm_%d, %d repeats, median (min) ms; source in us\n", ver, arch, reps);
    printf("%-18s %7s %7s %15s %7s %15s %15s %7s\n", "function", "source", "create", "compile",
           "get", "total", "total cpu", "cubin");
    enum { NT = 6 };
    double *t[NT];
    for (int k = 0; k < NT; k++)
        t[k] = malloc(sizeof(double) * (size_t)reps);
    double med[N_CASES][NT], mins[N_CASES][NT];
    size_t sizes[N_CASES];
    for (int c = 0; c < N_CASES; c++) {
        for (int r = -1; r < reps; r++) { /* r = -1: untimed (NVRTC's first compile) */
            double a = bench_now_ns();
            char *src = tc__jit_source(&cases[c].spec, true);
            double b = bench_now_ns(), bc = cpu_now_ms();
            void *bin = NULL;
            size_t size = 0;
            TRY(src ? tc__dev()->jit->compile(src, arch, &bin, &size) : TC_ERROR_OUT_OF_MEMORY);
            double e = bench_now_ns(), ec = cpu_now_ms();
            double ph[3];
            tc__dev()->jit->compile_phases(ph);
            free(bin);
            free(src);
            sizes[c] = size;
            if (r < 0)
                continue;
            t[0][r] = (b - a) / 1e3;
            for (int k = 0; k < 3; k++)
                t[1 + k][r] = ph[k];
            t[4][r] = (e - b) / 1e6;
            t[5][r] = ec - bc;
        }
        for (int k = 0; k < NT; k++) {
            mins[c][k] = minimum(t[k], reps);
            med[c][k] = bench_median(t[k], reps);
        }
        printf("%-18s %7.1f %7.3f %7.1f (%5.1f) %7.3f %7.1f (%5.1f) %7.1f (%5.1f) %7zu\n",
               cases[c].label, med[c][0], med[c][1], med[c][2], mins[c][2], med[c][3], med[c][4],
               mins[c][4], med[c][5], mins[c][5], sizes[c]);
    }
    printf("nvrtc_load_ms,%.2f\n", load_ms);
    for (int c = 0; c < N_CASES; c++)
        printf("%s_total_ms,%.2f\n%s_total_min_ms,%.2f\n%s_total_cpu_ms,%.2f\n"
               "%s_compile_ms,%.2f\n%s_cubin_bytes,%zu\n",
               cases[c].label, med[c][4], cases[c].label, mins[c][4], cases[c].label, med[c][5],
               cases[c].label, med[c][2], cases[c].label, sizes[c]);
    for (int k = 0; k < NT; k++)
        free(t[k]);
    return 0;
}
