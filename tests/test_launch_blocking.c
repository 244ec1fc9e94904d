/* GPU: a kernel that faults. With CUDA_LAUNCH_BLOCKING=1 the call that
 * launched it reports the fault; without, the launch returns TC_OK and the
 * next synchronizing call reports it with a hint. A fault ruins the CUDA
 * context, so each case runs in a child process (this program, run again
 * with --child, the blocking it must see, and the variable set). The
 * spellings of true and false count: 0.1 took "off" and "FALSE" for on.
 * The same for bad input that a kernel finds (a cross_entropy target out
 * of range), without a fault. */
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "tc_test.h"

#include "test_kernels.h"

extern char **environ;

/* A cross_entropy target out of range on the GPU: with blocking, the call
 * reports it; without, the next synchronize does. */
static int ce_child(bool blocking)
{
    if (tc_launch_blocking() != blocking)
        return 34;
    tc_device gpu = {TC_CUDA, 0};
    int64_t t[2] = {1, 9}, n = 2;
    tc_tensor *x = NULL, *tg = NULL, *y = NULL;
    if (tc_tensor_zeros(2, (int64_t[]){2, 4}, TC_FLOAT32, gpu, &x) != TC_OK ||
        tc_tensor_from_data(t, 1, &n, TC_INT64, gpu, &tg) != TC_OK)
        return 30;
    tc_status st = tc_nn_cross_entropy(x, tg, -100, TC_REDUCTION_SUM, &y);
    printf("child (cross_entropy, %s): call -> %s\n", blocking ? "blocking" : "async",
           tc_status_string(st));
    int rc;
    if (blocking)
        rc = st == TC_ERROR_INVALID_ARGUMENT && strstr(tc_last_error(), "target 9") ? 0 : 31;
    else if (st != TC_OK)
        rc = 32;
    else
        rc = tc_synchronize(-1) == TC_ERROR_INVALID_ARGUMENT && strstr(tc_last_error(), "target 9")
                 ? 0
                 : 33;
    tc_tensor_release(y);
    tc_tensor_release(tg);
    tc_tensor_release(x);
    return rc;
}

/* `want`: "1" blocking, "0" not, "p0" not, checking only what tcuda reads:
 * how the CUDA driver itself reads "off" or "FALSE" is not tcuda's to say. */
static int child(const char *want)
{
    if (strncmp(want, "ce", 2) == 0)
        return ce_child(want[2] == '1');
    bool blocking = tc_launch_blocking();
    if (blocking != (strcmp(want, "1") == 0))
        return 24;
    if (strcmp(want, "p0") == 0)
        return tc_init() == TC_OK ? 0 : 25;
    tc_stream *s = tc_test_current_stream(-1);
    if (!s)
        return 20;
    tc_status st = tc_test_fault(tc_stream_cuda_handle(s));
    if (blocking) {
        printf("child (blocking): launch -> %s: %s\n", tc_status_string(st), tc_last_error());
        return st == TC_ERROR_CUDA && strstr(tc_last_error(), "fault_kernel") &&
                       strstr(tc_last_error(), "CUDA_LAUNCH_BLOCKING=1")
                   ? 0
                   : 21;
    }
    if (st != TC_OK)
        return 22;
    st = tc_synchronize(-1);
    printf("child (async): launch -> TC_OK, synchronize -> %s: %s\n", tc_status_string(st),
           tc_last_error());
    return st == TC_ERROR_CUDA && strstr(tc_last_error(), "CUDA_LAUNCH_BLOCKING=1") ? 0 : 23;
}

static int run_child(char *self, const char *blocking, char *want)
{
    setenv("CUDA_LAUNCH_BLOCKING", blocking, 1);
    char *argv[] = {self, "--child", want, NULL};
    pid_t pid;
    if (posix_spawn(&pid, self, NULL, NULL, argv, environ) != 0)
        return -1;
    int status = -1;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -2;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--child") == 0)
        return child(argv[2]);
    tc_test_init();
    TC_TEST_REQUIRE_GPU();
    CHECK(run_child(argv[0], "1", "1") == 0);
    CHECK(run_child(argv[0], "0", "0") == 0);
    CHECK(run_child(argv[0], "TRUE", "1") == 0);
    CHECK(run_child(argv[0], "off", "p0") == 0);
    CHECK(run_child(argv[0], "FALSE", "p0") == 0);
    CHECK(run_child(argv[0], "1", "ce1") == 0);
    CHECK(run_child(argv[0], "0", "ce0") == 0);
    return TC_TEST_DONE();
}
