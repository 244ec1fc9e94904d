/* The precision switches of tcuda/backends.h, and the deterministic
 * switch (off by default, as PyTorch's; on and off again; a NULL out).
 *
 * Without a GPU: the getters and setters as PyTorch's (allow_tf32 and the
 * float32 matmul precision are one setting seen two ways; the 16-bit
 * reduction switches default to allowed), invalid precisions refused with
 * the value named and the setting kept, NULL outs, and
 * TORCH_ALLOW_TF32_CUBLAS_OVERRIDE in a child (this program run again with
 * --child and the variable set). A CPU matmul is the same whatever the
 * setting.
 *
 * With a GPU (this part only; the rest runs in both builds): a 1024^3 float32 matmul and linear (the
 * cuBLAS and the cuBLASLt paths) of inputs with all 24 mantissa bits against
 * a float64 reference on the host: full float32 accuracy by default, TF32's
 * after "high" (the inputs' rounding to 10 mantissa bits shows: relative
 * error above 1e-4, below 1e-2), full accuracy again after "highest" (no plan
 * or handle keeps the old setting). Unless NVIDIA_TF32_OVERRIDE=0, which
 * makes cuBLAS ignore TF32 altogether. tcuda's own small-GEMM kernel stays
 * full float32 under "high", as backends.h says. */
#include <math.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tc_test.h"

extern char **environ;

static const char *precision(void)
{
    const char *p = NULL;
    CHECK_OK(tc_get_float32_matmul_precision(&p));
    return p ? p : "(none)";
}

static bool allow_tf32(void)
{
    bool on = false;
    CHECK_OK(tc_backends_cuda_matmul_get_allow_tf32(&on));
    return on;
}

/* ---- without a GPU ---- */

static void defaults(void)
{
    CHECK(strcmp(precision(), "highest") == 0);
    CHECK(!allow_tf32());
    bool on = false;
    CHECK_OK(tc_backends_cuda_matmul_get_allow_fp16_reduced_precision_reduction(&on));
    CHECK(on);
    on = false;
    CHECK_OK(tc_backends_cuda_matmul_get_allow_bf16_reduced_precision_reduction(&on));
    CHECK(on);
}

static void one_setting_two_views(void)
{
    CHECK_OK(tc_set_float32_matmul_precision("high"));
    CHECK(strcmp(precision(), "high") == 0 && allow_tf32());
    CHECK_OK(tc_set_float32_matmul_precision("medium"));
    CHECK(strcmp(precision(), "medium") == 0 && allow_tf32());
    CHECK_OK(tc_set_float32_matmul_precision("highest"));
    CHECK(strcmp(precision(), "highest") == 0 && !allow_tf32());
    CHECK_OK(tc_backends_cuda_matmul_set_allow_tf32(true));
    CHECK(strcmp(precision(), "high") == 0 && allow_tf32());
    CHECK_OK(tc_set_float32_matmul_precision("medium"));
    CHECK_OK(tc_backends_cuda_matmul_set_allow_tf32(false));
    CHECK(strcmp(precision(), "highest") == 0 && !allow_tf32());
}

static void reduction_switches(void)
{
    bool on = true;
    CHECK_OK(tc_backends_cuda_matmul_set_allow_fp16_reduced_precision_reduction(false));
    CHECK_OK(tc_backends_cuda_matmul_get_allow_fp16_reduced_precision_reduction(&on));
    CHECK(!on);
    CHECK_OK(tc_backends_cuda_matmul_get_allow_bf16_reduced_precision_reduction(&on));
    CHECK(on); /* the two are separate */
    CHECK_OK(tc_backends_cuda_matmul_set_allow_bf16_reduced_precision_reduction(false));
    CHECK_OK(tc_backends_cuda_matmul_get_allow_bf16_reduced_precision_reduction(&on));
    CHECK(!on);
    CHECK_OK(tc_backends_cuda_matmul_set_allow_fp16_reduced_precision_reduction(true));
    CHECK_OK(tc_backends_cuda_matmul_set_allow_bf16_reduced_precision_reduction(true));
    CHECK_OK(tc_backends_cuda_matmul_get_allow_fp16_reduced_precision_reduction(&on));
    CHECK(on);
    CHECK_OK(tc_backends_cuda_matmul_get_allow_bf16_reduced_precision_reduction(&on));
    CHECK(on);
}

static void bad_input(void)
{
    const char *bad[] = {"HIGH", "Highest", "low", "", "high ", "mediumm"};
    CHECK_OK(tc_set_float32_matmul_precision("high"));
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_STATUS(tc_set_float32_matmul_precision(bad[i]), TC_ERROR_INVALID_ARGUMENT);
        char want[64];
        snprintf(want, sizeof want, "'%s'", bad[i]);
        CHECK(strstr(tc_last_error(), want) != NULL);
        CHECK(strstr(tc_last_error(), "tc_set_float32_matmul_precision") != NULL);
        CHECK(strcmp(precision(), "high") == 0); /* unchanged */
    }
    /* a long value is named, cut, without overrunning the message */
    char long_value[4096];
    memset(long_value, 'x', sizeof long_value - 1);
    long_value[sizeof long_value - 1] = '\0';
    CHECK_STATUS(tc_set_float32_matmul_precision(long_value), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_set_float32_matmul_precision(NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "precision is NULL") != NULL);
    CHECK_STATUS(tc_get_float32_matmul_precision(NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_backends_cuda_matmul_get_allow_tf32(NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_backends_cuda_matmul_get_allow_fp16_reduced_precision_reduction(NULL),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_backends_cuda_matmul_get_allow_bf16_reduced_precision_reduction(NULL),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK(strcmp(precision(), "high") == 0);
    CHECK_OK(tc_set_float32_matmul_precision("highest"));
}

/* The child: allow_tf32 as the variable should have set it (want 1 or 0),
 * and the setters still work after it. */
static int child(int want)
{
    bool on = !want;
    if (tc_backends_cuda_matmul_get_allow_tf32(&on) != TC_OK || on != (want == 1))
        return 10;
    const char *p = NULL;
    if (tc_get_float32_matmul_precision(&p) != TC_OK || strcmp(p, want ? "high" : "highest"))
        return 11;
    if (tc_backends_cuda_matmul_set_allow_tf32(false) != TC_OK ||
        tc_backends_cuda_matmul_get_allow_tf32(&on) != TC_OK || on)
        return 12;
    return 0;
}

/* Runs the child with TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=value (NULL: unset). */
static int run_child(char *self, const char *value, int want)
{
    if (value)
        setenv("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", value, 1);
    else
        unsetenv("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE");
    char want_s[4];
    snprintf(want_s, sizeof want_s, "%d", want);
    char *argv[] = {self, "--child", want_s, NULL};
    pid_t pid;
    int status = -1;
    int rc = posix_spawn(&pid, self, NULL, NULL, argv, environ);
    if (rc == 0)
        waitpid(pid, &status, 0);
    unsetenv("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE");
    int code = rc == 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (code != 0)
        fprintf(stderr, "child with TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=%s exited %d\n",
                value ? value : "(unset)", code);
    return code;
}

static void environment(char *self)
{
    CHECK(run_child(self, NULL, 0) == 0);
    CHECK(run_child(self, "1", 1) == 0);
    CHECK(run_child(self, "0", 0) == 0);
    CHECK(run_child(self, "", 0) == 0);
}

/* ---- matmuls against a float64 reference ---- */

/* n x n values in [-1, 1) with all float32 mantissa bits in use. */
static float *rand_matrix(int64_t rows, int64_t cols)
{
    float *v = malloc((size_t)(rows * cols) * sizeof *v);
    for (int64_t i = 0; v && i < rows * cols; i++)
        v[i] = (float)(2 * tc_test_rand_uniform() - 1);
    return v;
}

/* ||got - want||_F / ||want||_F of n values. */
static double rel_error(const double *got, const double *want, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        num += (got[i] - want[i]) * (got[i] - want[i]);
        den += want[i] * want[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* want[i][j] = sum_k a[i][k] * (b_t ? b[j][k] : b[k][j]) (+ bias[j]), in float64. */
static double *reference(const float *a, const float *b, const float *bias, int64_t m, int64_t k,
                         int64_t n, bool b_t)
{
    double *want = calloc((size_t)(m * n), sizeof *want);
    for (int64_t i = 0; want && i < m; i++)
        for (int64_t p = 0; p < k; p++) {
            double av = a[i * k + p];
            for (int64_t j = 0; j < n; j++)
                want[i * n + j] += av * (b_t ? b[j * k + p] : b[p * n + j]);
        }
    for (int64_t i = 0; want && bias && i < m * n; i++)
        want[i] += bias[i % n];
    return want;
}

/* The relative error of a @ b (linear: a @ b^T + bias) on `dev` (a
 * tc_device), or -1 when it failed. */
static double gemm_error(tc_device dev, const float *a, const float *b, const float *bias,
                         const double *want, int64_t m, int64_t k, int64_t n, bool linear)
{
    int64_t sa[2] = {m, k}, sb[2] = {linear ? n : k, linear ? k : n}, sbias[1] = {n};
    tc_tensor *ta = NULL, *tb = NULL, *tbias = NULL, *tc = NULL;
    double err = -1;
    CHECK_OK(tc_tensor_from_data(a, 2, sa, TC_FLOAT32, dev, &ta));
    CHECK_OK(tc_tensor_from_data(b, 2, sb, TC_FLOAT32, dev, &tb));
    if (linear)
        CHECK_OK(tc_tensor_from_data(bias, 1, sbias, TC_FLOAT32, dev, &tbias));
    if (ta && tb && (!linear || tbias)) {
        if (linear)
            CHECK_OK(tc_nn_linear(ta, tb, tbias, &tc));
        else
            CHECK_OK(tc_tensor_matmul(ta, tb, &tc));
    }
    if (tc) {
        double *got = tc_test_values(tc);
        if (got)
            err = rel_error(got, want, m * n);
        free(got);
    }
    tc_tensor_release(ta);
    tc_tensor_release(tb);
    tc_tensor_release(tbias);
    tc_tensor_release(tc);
    return err;
}

/* A CPU matmul ignores the setting: the same values under "high". */
static void cpu_unchanged(void)
{
    const int64_t n = 16;
    float *a = rand_matrix(n, n), *b = rand_matrix(n, n);
    double *want = reference(a, b, NULL, n, n, n, false);
    tc_device cpu = {TC_CPU, -1};
    double e_highest = gemm_error(cpu, a, b, NULL, want, n, n, n, false);
    CHECK_OK(tc_set_float32_matmul_precision("high"));
    double e_high = gemm_error(cpu, a, b, NULL, want, n, n, n, false);
    CHECK_OK(tc_set_float32_matmul_precision("highest"));
    CHECK(e_highest >= 0 && e_highest < 1e-6);
    CHECK(e_high == e_highest);
    free(a), free(b), free(want);
}

/* One GEMM (matmul or linear) at each setting. */
static void gpu_case(bool linear, bool tf32_possible)
{
    const int64_t n = 1024;
    tc_device gpu = {TC_CUDA, 0};
    float *a = rand_matrix(n, n), *b = rand_matrix(n, n), *bias = rand_matrix(1, n);
    double *want = reference(a, b, linear ? bias : NULL, n, n, n, linear);
    CHECK(a && b && bias && want);
    if (!a || !b || !bias || !want)
        goto done;
    double e_default = gemm_error(gpu, a, b, bias, want, n, n, n, linear);
    CHECK_OK(tc_set_float32_matmul_precision("high"));
    double e_high = gemm_error(gpu, a, b, bias, want, n, n, n, linear);
    CHECK_OK(tc_set_float32_matmul_precision("highest"));
    double e_highest = gemm_error(gpu, a, b, bias, want, n, n, n, linear);
    CHECK_OK(tc_backends_cuda_matmul_set_allow_tf32(true));
    double e_allow = gemm_error(gpu, a, b, bias, want, n, n, n, linear);
    CHECK_OK(tc_backends_cuda_matmul_set_allow_tf32(false));
    printf("%s 1024^3 float32 relative error: default %.3g, high %.3g, highest %.3g, "
           "allow_tf32 %.3g\n",
           linear ? "linear" : "matmul", e_default, e_high, e_highest, e_allow);
    CHECK(e_default >= 0 && e_default < 1e-5);
    CHECK(e_highest >= 0 && e_highest < 1e-5);
    if (tf32_possible) {
        CHECK(e_high > 1e-4 && e_high < 1e-2);
        CHECK(e_allow > 1e-4 && e_allow < 1e-2);
    } else {
        CHECK(e_high >= 0 && e_high < 1e-5);
    }
done:
    free(a), free(b), free(bias), free(want);
}

/* tcuda's small-GEMM kernel (64^3) stays full float32 under "high". */
static void gpu_small_kernel(void)
{
    const int64_t n = 64;
    float *a = rand_matrix(n, n), *b = rand_matrix(n, n);
    double *want = reference(a, b, NULL, n, n, n, false);
    CHECK_OK(tc_set_float32_matmul_precision("high"));
    double e = gemm_error((tc_device){TC_CUDA, 0}, a, b, NULL, want, n, n, n, false);
    CHECK_OK(tc_set_float32_matmul_precision("highest"));
    CHECK(e >= 0 && e < 1e-5);
    free(a), free(b), free(want);
}

/* torch.use_deterministic_algorithms: off by default, set and read back. */
static void deterministic_switch(void)
{
    bool on = true;
    CHECK_OK(tc_are_deterministic_algorithms_enabled(&on));
    CHECK(!on);
    CHECK_OK(tc_use_deterministic_algorithms(true));
    CHECK_OK(tc_are_deterministic_algorithms_enabled(&on));
    CHECK(on);
    CHECK_OK(tc_use_deterministic_algorithms(false));
    CHECK_OK(tc_are_deterministic_algorithms_enabled(&on));
    CHECK(!on);
    CHECK_STATUS(tc_are_deterministic_algorithms_enabled(NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "out is NULL") != NULL);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--child") == 0)
        return child(atoi(argv[2]));
    if (argc > 1 && strcmp(argv[1], "--child") == 0)
        return 99; /* a child of unknown arguments never runs the cases again */
    tc_test_init();
    unsetenv("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE"); /* read at the first call, below */
    defaults();
    one_setting_two_views();
    reduction_switches();
    bad_input();
    cpu_unchanged();
    environment(argv[0]);
    deterministic_switch();
    if (!tc_is_available()) {
        printf("no GPU: the GPU GEMMs are not checked\n");
        return TC_TEST_DONE();
    }
    const char *override = getenv("NVIDIA_TF32_OVERRIDE");
    bool tf32_possible = !(override && strcmp(override, "0") == 0);
    if (!tf32_possible)
        printf("NVIDIA_TF32_OVERRIDE=0: cuBLAS uses no TF32; checked as such\n");
    gpu_case(false, tf32_possible);
    gpu_case(true, tf32_possible);
    gpu_small_kernel();
    return TC_TEST_DONE();
}
