/* CPU-only (GPUs are hidden from the children): CUDA_LAUNCH_BLOCKING and
 * TCUDA_SYNC_DEBUG_MODE as a whole process sees them. Each is read once per
 * process, so each case runs this program again (--child) with the variables
 * set. A valid value sets the switch and initialization goes on (to
 * TC_ERROR_NO_DEVICE, the GPUs being hidden); an invalid one is never taken
 * for a default: tc_init and the first CUDA call fail with
 * TC_ERROR_INVALID_ARGUMENT naming the variable and its value, and nothing is
 * printed to stderr. 0.1 read TCUDA_SYNC_DEBUG_MODE=3|WARN|junk as 0 and
 * CUDA_LAUNCH_BLOCKING=off|no|FALSE as on.
 *
 * TCUDA_NO_CACHING and PyTorch's PYTORCH_NO_CUDA_MEMORY_CACHING likewise:
 * PyTorch's name counts when tcuda's is unset (its errors name it), and when
 * both are set tcuda's wins and stderr holds exactly one notice naming both.
 * TCUDA_JIT_READAHEAD (on when unset) likewise: a bad value fails
 * initialization, naming it. */
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/env.h"
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

/* The no-caching switch as the child sees it: want 1 or 0, or -1 when
 * `var`='value' is invalid (initialization fails naming it, caching stays). */
static int child_no_caching(int want, const char *var, const char *value)
{
    if (tc__no_caching_enabled() != (want == 1))
        return 20;
    tc_status st = tc_init();
    if (want >= 0)
        return st == TC_ERROR_NO_DEVICE ? 0 : 21;
    char text[128];
    snprintf(text, sizeof text, "%s='%s'", var, value);
    if (st != TC_ERROR_INVALID_ARGUMENT || !strstr(tc_last_error(), text))
        return 22;
    return 0;
}

/* TCUDA_JIT_READAHEAD as the child sees it: want 1 or 0, or -1 when `value` is
 * invalid (initialization fails naming it, and the read-ahead is off). */
static int child_readahead(int want, const char *value)
{
    if (tc__jit_readahead_enabled() != (want == 1))
        return 30;
    tc_status st = tc_init();
    if (want >= 0)
        return st == TC_ERROR_NO_DEVICE ? 0 : 31;
    char text[128];
    snprintf(text, sizeof text, "TCUDA_JIT_READAHEAD='%s'", value);
    if (st != TC_ERROR_INVALID_ARGUMENT || !strstr(tc_last_error(), text))
        return 32;
    return 0;
}

/* Sets `name` to `value` (NULL: unsets it). */
static void set_var(const char *name, const char *value)
{
    if (value)
        setenv(name, value, 1);
    else
        unsetenv(name);
}

/* Runs `self --child args...` with GPUs hidden, its stderr in err (at most
 * size - 1 bytes). Returns the exit code (negative: it did not run). */
static int spawn_child(char *self, char **args, char *err, size_t size)
{
    setenv("CUDA_VISIBLE_DEVICES", "", 1);
    err[0] = '\0';
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
    ssize_t n = pread(fd, err, size - 1, 0);
    close(fd);
    unlink(err_path);
    err[n > 0 ? n : 0] = '\0';
    return rc == 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -2;
}

/* Runs the child with the two variables (NULL: unset); its stderr must stay
 * empty. Returns the exit code. */
static int run_child(char *self, const char *blocking, const char *mode, char **args)
{
    set_var("CUDA_LAUNCH_BLOCKING", blocking);
    set_var("TCUDA_SYNC_DEBUG_MODE", mode);
    char text[512];
    int code = spawn_child(self, args, text, sizeof text);
    if (text[0]) {
        fprintf(stderr, "child printed to stderr: %s\n", text);
        return 100; /* nothing prints unless asked */
    }
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

/* Occurrences of `word` in `text`. */
static int count_of(const char *text, const char *word)
{
    int n = 0;
    for (const char *p = strstr(text, word); p; p = strstr(p + 1, word))
        n++;
    return n;
}

/* The child with TCUDA_NO_CACHING=`mine` and PYTORCH_NO_CUDA_MEMORY_CACHING=
 * `torch` (NULL: unset): caching off when want is 1, on when 0, an error
 * naming the variable read when -1; one notice when both are set, else
 * silence. */
static void no_caching(char *self, const char *mine, const char *torch, int want)
{
    set_var("CUDA_LAUNCH_BLOCKING", NULL);
    set_var("TCUDA_SYNC_DEBUG_MODE", NULL);
    set_var("TCUDA_NO_CACHING", mine);
    set_var("PYTORCH_NO_CUDA_MEMORY_CACHING", torch);
    char w[8];
    snprintf(w, sizeof w, "%d", want);
    const char *var = mine ? "TCUDA_NO_CACHING" : "PYTORCH_NO_CUDA_MEMORY_CACHING";
    const char *value = mine ? mine : torch ? torch : "";
    char *args[] = {"nocache", w, (char *)var, (char *)value, NULL};
    char err[1024];
    int code = spawn_child(self, args, err, sizeof err);
    int notices = count_of(err, "tcuda warning:");
    int want_notices = mine && torch ? 1 : 0;
    bool named = !want_notices ||
                 (strstr(err, "TCUDA_NO_CACHING") && strstr(err, "PYTORCH_NO_CUDA_MEMORY_CACHING"));
    if (code != 0 || notices != want_notices || !named)
        fprintf(stderr,
                "child TCUDA_NO_CACHING=%s PYTORCH_NO_CUDA_MEMORY_CACHING=%s exited %d, "
                "stderr: %s\n",
                mine ? mine : "(unset)", torch ? torch : "(unset)", code, err);
    CHECK(code == 0 && notices == want_notices && named);
    set_var("TCUDA_NO_CACHING", NULL);
    set_var("PYTORCH_NO_CUDA_MEMORY_CACHING", NULL);
}

/* The child with TCUDA_JIT_READAHEAD=`value` (NULL: unset): the read-ahead on
 * when want is 1, off when 0, an error naming the value when -1; silence. */
static void readahead(char *self, const char *value, int want)
{
    set_var("CUDA_LAUNCH_BLOCKING", NULL);
    set_var("TCUDA_SYNC_DEBUG_MODE", NULL);
    set_var("TCUDA_JIT_READAHEAD", value);
    char w[8];
    snprintf(w, sizeof w, "%d", want);
    char *args[] = {"readahead", w, (char *)(value ? value : ""), NULL};
    char err[1024];
    int code = spawn_child(self, args, err, sizeof err);
    if (code != 0 || err[0])
        fprintf(stderr, "child TCUDA_JIT_READAHEAD=%s exited %d, stderr: %s\n",
                value ? value : "(unset)", code, err);
    CHECK(code == 0 && !err[0]);
    set_var("TCUDA_JIT_READAHEAD", NULL);
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "--child") == 0 && strcmp(argv[2], "valid") == 0)
        return child_valid(atoi(argv[3]), atoi(argv[4]));
    if (argc == 5 && strcmp(argv[1], "--child") == 0 && strcmp(argv[2], "invalid") == 0)
        return child_invalid(argv[3], argv[4]);
    if (argc == 6 && strcmp(argv[1], "--child") == 0 && strcmp(argv[2], "nocache") == 0)
        return child_no_caching(atoi(argv[3]), argv[4], argv[5]);
    if (argc == 5 && strcmp(argv[1], "--child") == 0 && strcmp(argv[2], "readahead") == 0)
        return child_readahead(atoi(argv[3]), argv[4]);
    if (argc > 1 && strcmp(argv[1], "--child") == 0)
        return 99; /* a child of unknown arguments never runs the cases again */
    tc_test_init();
    set_var("TCUDA_NO_CACHING", NULL); /* the cases below set them */
    set_var("PYTORCH_NO_CUDA_MEMORY_CACHING", NULL);
    set_var("TCUDA_JIT_READAHEAD", NULL);

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

    no_caching(argv[0], NULL, NULL, 0);
    no_caching(argv[0], "1", NULL, 1);
    no_caching(argv[0], NULL, "1", 1); /* PyTorch's name alone counts */
    no_caching(argv[0], NULL, "0", 0);
    no_caching(argv[0], "0", "1", 0); /* tcuda's wins, with a notice */
    no_caching(argv[0], "yes", "0", 1);
    no_caching(argv[0], NULL, "maybe", -1); /* the error names PyTorch's variable */
    no_caching(argv[0], "maybe", "1", -1);  /* tcuda's read, and wrong */

    readahead(argv[0], NULL, 1);
    readahead(argv[0], "0", 0);
    readahead(argv[0], "off", 0);
    readahead(argv[0], "", 0);
    readahead(argv[0], "yes", 1);
    readahead(argv[0], "soon", -1);
    return TC_TEST_DONE();
}
