/* CPU-only: the `tcuda` program as a user runs it. Its path comes from
 * TCUDA_TOOL (CTest sets it to the built tool); without it, ../tools/tcuda
 * beside this test's build directory is tried, and the test is skipped (77)
 * when neither exists. `tcuda info` prints and exits 0; with its output on
 * /dev/full it must fail (0.1 exited 0 having written nothing); an unknown
 * command is named in the error, with the list of commands. Its NCCL line
 * gives the version and file of the library TCUDA_NCCL_LIBRARY names (the
 * fake of tests/support, where built), or why there is none: a wrong
 * TCUDA_NCCL_LIBRARY is named, with the loader's words. Every command
 * answers -h and --help with its usage (exit 0), and `tcuda memviz` refuses
 * a --device that is not a whole index in range (exit 2). */
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tc_test.h"

extern char **environ;

typedef struct {
    int code; /* exit status; -1 if it did not exit normally */
    char out[8192], err[4096];
} run_result;

/* Reads the whole of fd (a temporary file) into buf. */
static void slurp(int fd, char *buf, size_t size)
{
    ssize_t n = pread(fd, buf, size - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
}

/* Runs `tool args...` with stdout to `out_path` (NULL: a temporary file whose
 * text is kept) and stderr to a temporary file. */
static void run(const char *tool, char *const args[], const char *out_path, run_result *r)
{
    char out_tmp[] = "/tmp/tc_tool_out_XXXXXX", err_tmp[] = "/tmp/tc_tool_err_XXXXXX";
    int out_fd = out_path ? open(out_path, O_WRONLY) : mkstemp(out_tmp);
    int err_fd = mkstemp(err_tmp);
    r->code = -1;
    r->out[0] = r->err[0] = '\0';
    CHECK(out_fd >= 0 && err_fd >= 0);
    if (out_fd < 0 || err_fd < 0)
        return;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
    posix_spawn_file_actions_adddup2(&fa, err_fd, 2);
    char *argv[8] = {(char *)tool};
    for (int i = 0; args[i] && i < 6; i++)
        argv[1 + i] = args[i];
    pid_t pid;
    int status = 0;
    if (posix_spawn(&pid, tool, &fa, NULL, argv, environ) == 0 && waitpid(pid, &status, 0) == pid)
        r->code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    posix_spawn_file_actions_destroy(&fa);
    if (!out_path)
        slurp(out_fd, r->out, sizeof r->out);
    slurp(err_fd, r->err, sizeof r->err);
    close(out_fd);
    close(err_fd);
    if (!out_path)
        unlink(out_tmp);
    unlink(err_tmp);
}

/* The text of the "  NCCL: " line of r->out (without the newline), or "". */
static const char *nccl_text(const run_result *r, char *buf, size_t size)
{
    const char *line = strstr(r->out, "\n  NCCL: ");
    buf[0] = '\0';
    if (line)
        snprintf(buf, size, "%.*s", (int)strcspn(line + 1, "\n"), line + 1);
    return buf;
}

/* `tcuda info`'s NCCL line with TCUDA_NCCL_LIBRARY unset, wrong, and (where
 * the fake NCCL is built) pointing at the fake; the program exits 0 in every
 * case: no NCCL is an answer, not a failure. */
static void nccl_line(const char *tool, run_result *r)
{
    char *info[] = {"info", NULL};
    char line[1024];
    const char *saved = getenv("TCUDA_NCCL_LIBRARY");
    char *keep = saved ? strdup(saved) : NULL;

    unsetenv("TCUDA_NCCL_LIBRARY");
    run(tool, info, NULL, r);
    printf("unset: %s\n", nccl_text(r, line, sizeof line));
    CHECK(r->code == 0 && strncmp(line, "  NCCL: ", 8) == 0);
    CHECK(strstr(line, "tc_nccl") == NULL); /* the call's name is not repeated */

    setenv("TCUDA_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
    run(tool, info, NULL, r);
    printf("wrong: %s\n", nccl_text(r, line, sizeof line));
    CHECK(r->code == 0 && r->err[0] == '\0');
    CHECK(strncmp(line, "  NCCL: not available: ", 23) == 0);
#ifdef TCUDA_HAVE_CUDA
    CHECK(strstr(line, "TCUDA_NCCL_LIBRARY=/nonexistent/libnccl.so.2 does not load: ") != NULL);
    CHECK(strstr(line, "/nonexistent/libnccl.so.2: cannot open shared object file") != NULL);
#else
    CHECK(strstr(line, "CUDA is not available: tcuda was built without CUDA") != NULL);
#endif

#ifdef TC_TEST_FAKE_NCCL
    setenv("TCUDA_NCCL_LIBRARY", TC_TEST_FAKE_NCCL, 1);
    run(tool, info, NULL, r);
    printf("fake: %s\n", nccl_text(r, line, sizeof line));
    char real[4096], want[4200];
    CHECK(realpath(TC_TEST_FAKE_NCCL, real) != NULL);
    snprintf(want, sizeof want, "  NCCL: 2.20.0 (%s)", real); /* fake_nccl.c's 22000 */
    CHECK(r->code == 0 && strcmp(line, want) == 0);
#endif

    if (keep)
        setenv("TCUDA_NCCL_LIBRARY", keep, 1);
    else
        unsetenv("TCUDA_NCCL_LIBRARY");
    free(keep);
}

/* Every command takes -h and --help: its usage on stdout, exit status 0,
 * nothing on stderr (`tcuda memviz --help` was an unexpected argument). */
static void help_flags(const char *tool, run_result *r)
{
    static const char *const cmds[] = {"info", "memviz", "help", NULL};
    static const char *const flags[] = {"--help", "-h"};
    for (int c = 0; cmds[c]; c++) {
        for (int f = 0; f < 2; f++) {
            char *args[] = {(char *)cmds[c], (char *)flags[f], NULL};
            run(tool, args, NULL, r);
            printf("tcuda %s %s: exit %d\n", cmds[c], flags[f], r->code);
            CHECK(r->code == 0 && r->err[0] == '\0');
            CHECK(strstr(r->out, c == 1 ? "usage: tcuda memviz" : "usage: tcuda info") != NULL);
        }
    }
    char *args[] = {"memviz", "--summary", "x.pickle", "--help", NULL};
    run(tool, args, NULL, r);
    CHECK(r->code == 0 && strstr(r->out, "usage: tcuda memviz") != NULL);
    char *top[] = {"-h", NULL};
    run(tool, top, NULL, r);
    CHECK(r->code == 0 && strstr(r->out, "usage: tcuda info") != NULL);
}

/* `tcuda memviz --device N` takes digits only, 0 to 1023: anything else
 * (the empty string was device 0) is a usage error, exit status 2, naming
 * the value; a good index goes on to read the file (exit 1, no file). */
static void memviz_args(const char *tool, run_result *r)
{
    static const char *const bad[] = {
        "", " 1", "1 ", "+1", "-1", "1x", "0x1", "1024", "99999999999999999999", NULL};
    for (int i = 0; bad[i]; i++) {
        char *args[] = {"memviz", "--device", (char *)bad[i], "/nonexistent.pickle", NULL};
        run(tool, args, NULL, r);
        printf("--device '%s': exit %d, %s", bad[i], r->code, r->err);
        CHECK(r->code == 2);
        char want[128];
        snprintf(want, sizeof want, "--device wants a device index (0 to 1023), not '%s'", bad[i]);
        CHECK(strstr(r->err, want) != NULL);
        CHECK(r->out[0] == '\0');
    }
    char *last[] = {"memviz", "/nonexistent.pickle", "--device", NULL};
    run(tool, last, NULL, r);
    CHECK(r->code == 2 && strstr(r->err, "--device wants a device index") != NULL);
    char *good[] = {"memviz", "--device", "1023", "/nonexistent.pickle", NULL};
    run(tool, good, NULL, r);
    CHECK(r->code == 1 && strstr(r->err, "cannot open /nonexistent.pickle") != NULL);
    char *two[] = {"memviz", "a.pickle", "b.pickle", NULL};
    run(tool, two, NULL, r);
    CHECK(r->code == 2 && strstr(r->err, "unexpected argument 'b.pickle'") != NULL);
    char *opt[] = {"memviz", "--sumary", "a.pickle", NULL};
    run(tool, opt, NULL, r);
    CHECK(r->code == 2 && strstr(r->err, "unexpected argument '--sumary'") != NULL);
}

int main(int argc, char **argv)
{
    (void)argc;
    tc_test_init();
    char guess[4200];
    const char *tool = tc_test_find_tool(argv[0], guess, sizeof guess);
    if (!tool) {
        printf("skipped: set TCUDA_TOOL to the built tcuda program\n");
        return 77;
    }
    printf("tool: %s\n", tool);
    static run_result r;

    char *info[] = {"info", NULL};
    run(tool, info, NULL, &r);
    CHECK(r.code == 0);
    CHECK(strncmp(r.out, "tcuda ", 6) == 0 && strstr(r.out, "CUDA available: ") != NULL);
    CHECK(strstr(r.out, tc_version()) != NULL); /* the library it runs on is this one */
    CHECK(r.err[0] == '\0');

    nccl_line(tool, &r);

    /* a full disk: the output is lost, so the tool must fail and say so */
    if (access("/dev/full", W_OK) == 0) {
        run(tool, info, "/dev/full", &r);
        printf("tcuda info > /dev/full: exit %d, stderr: %s", r.code, r.err);
        CHECK(r.code != 0);
        CHECK(strstr(r.err, "tcuda: cannot write the output") != NULL);
        CHECK(strstr(r.err, "No space left on device") != NULL);
        char *help[] = {"--help", NULL};
        run(tool, help, "/dev/full", &r);
        CHECK(r.code != 0 && strstr(r.err, "cannot write") != NULL);
    }

    /* unknown commands are named, with what would be right */
    char *unknown[] = {"xyz", NULL};
    run(tool, unknown, NULL, &r);
    CHECK(r.code == 2);
    CHECK(strstr(r.err, "tcuda: unknown command 'xyz'; commands: info") != NULL);
    CHECK(r.out[0] == '\0');
    char *unknown_extra[] = {"infoo", "now", NULL};
    run(tool, unknown_extra, NULL, &r);
    CHECK(r.code == 2 && strstr(r.err, "unknown command 'infoo'") != NULL);
    char *extra[] = {"info", "now", NULL};
    run(tool, extra, NULL, &r);
    CHECK(r.code == 2 && strstr(r.err, "'now'") != NULL);
    char *none[] = {NULL};
    run(tool, none, NULL, &r);
    CHECK(r.code == 2 && strstr(r.err, "usage: tcuda info") != NULL);
    char *help[] = {"help", NULL};
    run(tool, help, NULL, &r);
    CHECK(r.code == 0 && strstr(r.out, "usage: tcuda info") != NULL && r.err[0] == '\0');

    help_flags(tool, &r);
    memviz_args(tool, &r);
    return TC_TEST_DONE();
}
