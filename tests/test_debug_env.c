/* CPU-only (GPUs are hidden from the children): CUDA_LAUNCH_BLOCKING and
 * TCUDA_SYNC_DEBUG_MODE as a whole process sees them. Each is read once per
 * process, so each case runs this program again (--child) with the variables
 * set. A valid value sets the switch and initialization goes on (to
 * TC_ERROR_NO_DEVICE, the GPUs being hidden); an invalid one is never taken
 * for a default: tc_init and the first CUDA call fail with
 * TC_ERROR_INVALID_ARGUMENT naming the variable and its value, and nothing is
 * printed to stderr. 0.1 read TCUDA_SYNC_DEBUG_MODE=3|WARN|junk as 0 and
 * CUDA_LAUNCH_BLOCKING=off|no|FALSE as on. */
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tc_test.h"

extern char **environ;

/* Child exit codes: 0 as expected, 1.. the first check that failed. */
static int child_valid(int want_mode, int want_blocking)
{
    tc_sync_debug_mode mode;
    if (tc_get_sync_debug_mode(&mode) != TC_OK || (int)mode != want_mode)
        return 1;
    if (tc_launch_blocking() != (want_blocking != 0))
        return 2;
    tc_status st = tc_init();
    if (st != TC_ERROR_NO_DEVICE || strstr(tc_last_error(), "CUDA is not available") == NULL)
        return 3;
    return 0;
}

/* `var`='value' is invalid: every way in says so. */
static int child_invalid(const char *var, const char *value)
{
    char want[128];
    snprintf(want, sizeof want, "%s='%s'", var, value);
    bool sync_var = strcmp(var, "TCUDA_SYNC_DEBUG_MODE") == 0;
    if (sync_var) {
        /* the getter does not pretend the mode is 0 */
        tc_sync_debug_mode mode = TC_SYNC_DEBUG_MODE_WARN;
        if (tc_get_sync_debug_mode(&mode) != TC_ERROR_INVALID_ARGUMENT ||
            mode != TC_SYNC_DEBUG_MODE_WARN || !strstr(tc_last_error(), want) ||
            strncmp(tc_last_error(), "tc_get_sync_debug_mode: ", 24) != 0)
            return 10;
    } else if (tc_launch_blocking()) {
        return 11;
    }
    tc_status st = tc_init();
    if (st != TC_ERROR_INVALID_ARGUMENT || !strstr(tc_last_error(), want) ||
        strncmp(tc_last_error(), "tc_init: ", 9) != 0)
        return 12;
    if (tc_is_available() || !strstr(tc_last_error(), want))
        return 13;
    tc_stream *s = (tc_stream *)0x1;
    st = tc_stream_create(-1, 0, &s);
    if (st != TC_ERROR_INVALID_ARGUMENT || s != (tc_stream *)0x1 ||
        strncmp(tc_last_error(), "tc_stream_create: ", 18) != 0 || !strstr(tc_last_error(), want))
        return 14;
    if (tc_device_count() != 0 || tc_synchronize(-1) != TC_ERROR_INVALID_ARGUMENT)
        return 15;
    if (sync_var) {
        /* setting a mode replaces the bad value: initialization goes on */
        tc_sync_debug_mode mode;
        if (tc_set_sync_debug_mode(TC_SYNC_DEBUG_MODE_WARN) != TC_OK ||
            tc_get_sync_debug_mode(&mode) != TC_OK || mode != TC_SYNC_DEBUG_MODE_WARN)
            return 16;
        if (tc_init() != TC_ERROR_NO_DEVICE)
            return 17;
    } else if (tc_init() != TC_ERROR_INVALID_ARGUMENT) {
        return 18; /* CUDA_LAUNCH_BLOCKING cannot be replaced: it stays an error */
    }
    return 0;
}

/* Runs the child with the two variables (NULL: unset) and GPUs hidden; its
 * stderr goes to a file that must stay empty. Returns the exit code. */
static int run_child(char *self, const char *blocking, const char *mode, char **args)
{
    if (blocking)
        setenv("CUDA_LAUNCH_BLOCKING", blocking, 1);
    else
        unsetenv("CUDA_LAUNCH_BLOCKING");
    if (mode)
        setenv("TCUDA_SYNC_DEBUG_MODE", mode, 1);
    else
        unsetenv("TCUDA_SYNC_DEBUG_MODE");
    setenv("CUDA_VISIBLE_DEVICES", "", 1);
    char err_path[] = "/tmp/tc_debug_env_XXXXXX";
    int fd = mkstemp(err_path);
    if (fd < 0)
        return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fd, 2);
    char *argv[8] = {self, "--child"};
    for (int i = 0; args[i] && i < 5; i++)
        argv[2 + i] = args[i];
    pid_t pid;
    int rc = posix_spawn(&pid, self, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    int status = -1;
    if (rc == 0)
        waitpid(pid, &status, 0);
    char text[512] = "";
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    close(fd);
    unlink(err_path);
    if (n > 0) {
        text[n] = '\0';
        fprintf(stderr, "child printed to stderr: %s\n", text);
        return 100; /* nothing prints unless asked */
    }
    int code = rc == 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -2;
    if (code != 0)
        fprintf(stderr, "child CUDA_LAUNCH_BLOCKING=%s TCUDA_SYNC_DEBUG_MODE=%s exited %d\n",
                blocking ? blocking : "(unset)", mode ? mode : "(unset)", code);
    return code;
}

static void valid(char *self, const char *blocking, const char *mode, int want_mode,
                  int want_blocking)
{
    char m[8], b[8];
    snprintf(m, sizeof m, "%d", want_mode);
    snprintf(b, sizeof b, "%d", want_blocking);
    char *args[] = {"valid", m, b, NULL};
    CHECK(run_child(self, blocking, mode, args) == 0);
}

static void invalid(char *self, const char *blocking, const char *mode)
{
    char *args[] = {"invalid", mode ? "TCUDA_SYNC_DEBUG_MODE" : "CUDA_LAUNCH_BLOCKING",
                    (char *)(mode ? mode : blocking), NULL};
    CHECK(run_child(self, blocking, mode, args) == 0);
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "--child") == 0 && strcmp(argv[2], "valid") == 0)
        return child_valid(atoi(argv[3]), atoi(argv[4]));
    if (argc == 5 && strcmp(argv[1], "--child") == 0 && strcmp(argv[2], "invalid") == 0)
        return child_invalid(argv[3], argv[4]);
    tc_test_init();

    valid(argv[0], NULL, NULL, 0, 0);
    valid(argv[0], "1", "1", 1, 1);
    valid(argv[0], "TRUE", "WARN", 1, 1);
    valid(argv[0], "on", "error", 2, 1);
    valid(argv[0], "off", "2", 2, 0);
    valid(argv[0], "no", "Default", 0, 0);
    valid(argv[0], "FALSE", "0", 0, 0);
    valid(argv[0], "", "", 0, 0);

    invalid(argv[0], NULL, "3");
    invalid(argv[0], NULL, "junk");
    invalid(argv[0], "1", "warning");
    invalid(argv[0], "2", NULL);
    invalid(argv[0], "offf", NULL);
    invalid(argv[0], "enable", NULL);
    return TC_TEST_DONE();
}
