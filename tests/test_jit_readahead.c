/* GPU: NVRTC's files read ahead when CUDA initializes
 * (runtime/cuda/nvrtc_readahead.c). Nothing starts before initialization;
 * after it, the thread finds NVRTC and its builtins library and finishes,
 * and neither library is loaded by it; the first compile then loads exactly
 * the files it read (the loader's own paths, through realpath) and gives the
 * right values. With TCUDA_JIT_READAHEAD=0 (a second process, this program
 * run again) nothing starts, and the compile still works. Processes that
 * end right after initializing, while the thread may run, exit cleanly
 * (loading NVRTC on such a thread made them crash or hang). The parser's
 * cases run without a GPU. The disk cache is off, so every call compiles.
 * Exits 77 without a GPU. */
#define _GNU_SOURCE
#include <limits.h>
#include <link.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tc_test.h"

#include "base/env.h"
#include "runtime/cuda/cuda_internal.h"

extern char **environ;

static const tc_device gpu = {TC_CUDA, 0};

static int readahead_state(void)
{
    return __atomic_load_n(&tc__nvrtc_readahead.state, __ATOMIC_ACQUIRE);
}

static bool same_file(const char *a, const char *b)
{
    char ra[PATH_MAX], rb[PATH_MAX];
    return realpath(a, ra) && realpath(b, rb) && strcmp(ra, rb) == 0;
}

static int match_object(struct dl_phdr_info *info, size_t size, void *path)
{
    (void)size;
    return info->dlpi_name && info->dlpi_name[0] && same_file(info->dlpi_name, path);
}

/* Whether the loader has the file `path` in this process. */
static bool loaded(const char *path)
{
    return path[0] && dl_iterate_phdr(match_object, (void *)path) != 0;
}

/* x * 3 - y on 1,000 float32 elements: 0 when every element is right. */
static int jit_call_ok(void)
{
    tc_jit_fn *fn = NULL;
    tc_jit_options o = {.scalars = "beta=3"};
    if (tc_jit_fn_create("template <typename T> T f(T x, T y, T beta) { return x * beta - y; }", &o,
                         &fn) != TC_OK)
        return 1;
    int64_t n = 1000;
    tc_tensor *x = NULL, *y = NULL, *out[1] = {NULL};
    int bad = 2;
    if (tc_tensor_arange(0, (double)n, 1, TC_FLOAT32, gpu, &x) == TC_OK &&
        tc_tensor_full(1, &n, 0.5, TC_FLOAT32, gpu, &y) == TC_OK) {
        const tc_tensor *in[2] = {x, y};
        if (tc_jit_fn_call(fn, in, 2, NULL, out) == TC_OK) {
            double *v = tc_test_values(out[0]);
            bad = v ? 0 : 3;
            for (int64_t i = 0; v && i < n; i++)
                if (v[i] != 3.0 * (double)i - 0.5)
                    bad = 4;
            free(v);
        }
    }
    tc_tensor_release(out[0]);
    tc_tensor_release(x);
    tc_tensor_release(y);
    tc_jit_fn_destroy(fn);
    return bad;
}

/* TCUDA_JIT_READAHEAD=0: exit 0 when nothing starts and a compile works. */
static int child_off(void)
{
    if (!getenv("TCUDA_JIT_READAHEAD") || tc__jit_readahead_enabled())
        return 10;
    if (tc_init() != TC_OK)
        return 11;
    usleep(100 * 1000);
    if (readahead_state() != 0 || tc__nvrtc_readahead.files != 0)
        return 12;
    int bad = jit_call_ok();
    return bad ? 20 + bad : 0;
}

/* The variable's parser: unset is on, the booleans as the other switches
 * take them, anything else an error that leaves the result alone. */
static void parser_checks(void)
{
    bool on = false;
    CHECK_OK(tc__parse_jit_readahead(NULL, &on));
    CHECK(on);
    const char *yes[] = {"1", "true", "YES", "On"};
    const char *no[] = {"0", "false", "No", "OFF", ""};
    for (int i = 0; i < 4; i++) {
        on = false;
        CHECK(tc__parse_jit_readahead(yes[i], &on) == TC_OK && on);
    }
    for (int i = 0; i < 5; i++) {
        on = true;
        CHECK(tc__parse_jit_readahead(no[i], &on) == TC_OK && !on);
    }
    on = true;
    CHECK_STATUS(tc__parse_jit_readahead("later", &on), TC_ERROR_INVALID_ARGUMENT);
    CHECK(on && strstr(tc_last_error(), "TCUDA_JIT_READAHEAD='later'"));
}

/* Runs this program again with `arg` (TCUDA_JIT_READAHEAD=0 for
 * --child-off); its exit code, or -1 when it did not exit (a signal). */
static int run_child(char *self, char *arg)
{
    bool off = strcmp(arg, "--child-off") == 0;
    if (off)
        setenv("TCUDA_JIT_READAHEAD", "0", 1);
    char *argv[] = {self, arg, NULL};
    pid_t pid;
    int status = -1;
    int rc = posix_spawn(&pid, self, NULL, NULL, argv, environ);
    if (rc == 0)
        waitpid(pid, &status, 0);
    unsetenv("TCUDA_JIT_READAHEAD");
    int code = rc == 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (code != 0)
        fprintf(stderr, "the child %s exited %d (status %#x)\n", arg, code, status);
    return code;
}

int main(int argc, char **argv)
{
    setenv("TCUDA_JIT_CACHE_DIR", "", 1); /* every call compiles */
    if (argc == 2 && strcmp(argv[1], "--child-off") == 0)
        return child_off();
    if (argc == 2 && strcmp(argv[1], "--child-exit") == 0)
        return tc_init() == TC_OK ? 0 : 9; /* exit while the thread may run */
    unsetenv("TCUDA_JIT_READAHEAD");
    tc_test_init();
    CHECK(readahead_state() == 0); /* nothing before initialization */
    TC_TEST_REQUIRE_GPU_AFTER(parser_checks);
    parser_checks();
    CHECK(tc__jit_readahead_enabled());

    /* initialized: the thread finishes (up to 30 s, for a slow disk) */
    double t0 = tc_test_now_ms();
    while (tc_test_now_ms() - t0 < 30000 && readahead_state() != 2)
        usleep(1000);
    const tc__readahead_report *r = &tc__nvrtc_readahead;
    CHECK(readahead_state() == 2);
    CHECK(r->files >= 2); /* NVRTC and its builtins library */
    printf("read ahead %d files: %s, %s (%.1f ms after tc_init)\n", r->files, r->nvrtc, r->builtins,
           tc_test_now_ms() - t0);
    CHECK(!loaded(r->nvrtc) && !loaded(r->builtins)); /* read, not loaded */

    /* the first compile loads exactly the files that were read */
    CHECK(jit_call_ok() == 0);
    CHECK(loaded(r->nvrtc));
    CHECK(loaded(r->builtins));

    CHECK(run_child(argv[0], "--child-off") == 0);
    int clean = 0;
    for (int i = 0; i < 16; i++)
        clean += run_child(argv[0], "--child-exit") == 0;
    CHECK(clean == 16);
    return TC_TEST_DONE();
}
