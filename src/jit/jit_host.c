/* The CPU path of jiterator: the same code string, compiled by the host C++
 * compiler into a shared object, loaded with dlopen and run over CPU
 * tensors.
 *
 * The compiler is $CXX when it runs, else c++; its command and the first
 * line of its --version are part of every host binary's key. Flags: C++17,
 * -O2, -ffp-contract=off (no fused multiply-add, so float results are the
 * IEEE operations the code writes, as on the GPU, where NVRTC runs with
 * -fmad=false), -fwrapv (integer overflow wraps, as the built-in ops and the
 * GPU do). Work happens in a private mkdtemp directory that is removed
 * afterwards. A shared object from the cache is written to a temporary file,
 * dlopened and unlinked (dlopen needs a file; the cache file has a header).
 * Loaded objects stay loaded for the process.
 *
 * The compiler runs without a shell: $CXX is split at blanks (space, tab)
 * into words, with no quoting, escapes or expansion ("ccache g++" works,
 * "g++ '-DX=a b'" does not), the first word looked up in PATH; the flags and
 * the file names follow as words of their own. */
#define _GNU_SOURCE /* pipe2, environ */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jit_internal.h"

static const char host_flags[] =
    "-std=c++17 -O2 -fPIC -shared -fvisibility=hidden -ffp-contract=off -fwrapv -w";

static pthread_mutex_t compiler_lock = PTHREAD_MUTEX_INITIALIZER;
static int compiler_state; /* 0 unknown, 1 found, 2 none */
static char compiler_cmd[512], compiler_version[256], compiler_error[768];

/* Most words of $CXX plus the flags and the file names of a compile. */
#define MAX_ARGS 64

/* Splits buf in place at blanks (space, tab) into argv (NULL-ended): no
 * quotes, no escapes, no expansion. The count of words, or -1 when more
 * than max - 1 would not fit. */
static int split_words(char *buf, char **argv, int max)
{
    int n = 0;
    for (char *p = buf; *p;) {
        while (*p == ' ' || *p == '\t')
            *p++ = '\0';
        if (!*p)
            break;
        if (n == max - 1)
            return -1;
        argv[n++] = p;
        while (*p && *p != ' ' && *p != '\t')
            p++;
    }
    argv[n] = NULL;
    return n;
}

/* Runs argv[0] (looked up in PATH, no shell) with argv, stdin from
 * /dev/null; its stdout, and its stderr when keep_stderr (else discarded),
 * into out (cut to out_size, NUL-ended). Its exit status, or -1 when it did
 * not start or did not exit (a signal). posix_spawnp rather than fork: the
 * process may be large and have other threads; the pipe is close-on-exec so
 * that children other threads start meanwhile do not hold it open. */
static int run(char *const *argv, bool keep_stderr, char *out, size_t out_size)
{
    if (out && out_size)
        out[0] = '\0';
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return -1;
    posix_spawn_file_actions_t fa;
    pid_t pid = -1;
    int err = posix_spawn_file_actions_init(&fa);
    if (!err) {
        err = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        if (!err)
            err = posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
        if (!err && keep_stderr)
            err = posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
        else if (!err)
            err = posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
        if (!err)
            err = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
    }
    close(fds[1]);
    size_t used = 0;
    char buf[1024];
    for (;;) { /* to the end, so that the child never blocks on a full pipe */
        ssize_t n = err ? 0 : read(fds[0], buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        if (out && used + 1 < out_size) {
            size_t take = (size_t)n < out_size - 1 - used ? (size_t)n : out_size - 1 - used;
            memcpy(out + used, buf, take);
            used += take;
        }
    }
    close(fds[0]);
    if (out && out_size)
        out[used] = '\0';
    if (err)
        return -1;
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static bool try_compiler(const char *cxx)
{
    char words[sizeof compiler_cmd], out[1024];
    char *argv[MAX_ARGS];
    if ((size_t)snprintf(words, sizeof words, "%s", cxx) >= sizeof words)
        return false;
    int n = split_words(words, argv, MAX_ARGS - 1);
    if (n < 1)
        return false;
    argv[n] = "--version";
    argv[n + 1] = NULL;
    if (run(argv, false, out, sizeof out) != 0 || !out[0])
        return false;
    out[strcspn(out, "\n")] = '\0';
    snprintf(compiler_cmd, sizeof compiler_cmd, "%s", cxx);
    snprintf(compiler_version, sizeof compiler_version, "%.255s", out);
    return true;
}

tc_status tc__jit_host_compiler(const char **command, const char **version)
{
    pthread_mutex_lock(&compiler_lock);
    if (compiler_state == 0) {
        const char *cxx = getenv("CXX");
        bool have_env = cxx && cxx[0];
        if ((have_env && try_compiler(cxx)) || try_compiler("c++"))
            compiler_state = 1;
        else {
            compiler_state = 2;
            snprintf(compiler_error, sizeof compiler_error,
                     "no C++ compiler for jiterator's CPU path: tried %s%.500s%sc++ (set CXX to "
                     "a C++17 compiler, words split at blanks, or run on a GPU)",
                     have_env ? "$CXX=" : "", have_env ? cxx : "", have_env ? ", then " : "");
        }
    }
    int st = compiler_state;
    pthread_mutex_unlock(&compiler_lock);
    if (st != 1)
        return tc__fail(TC_ERROR_NOT_SUPPORTED, "%s", compiler_error);
    if (command)
        *command = compiler_cmd;
    if (version)
        *version = compiler_version;
    return TC_OK;
}

const char *tc__jit_host_flags(void) { return host_flags; }

static bool write_file(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return false;
    bool ok = fwrite(data, 1, size, f) == size;
    return fclose(f) == 0 && ok;
}

static void *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    void *data = NULL;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0) {
        data = malloc((size_t)n);
        if (data && fread(data, 1, (size_t)n, f) != (size_t)n) {
            free(data);
            data = NULL;
        }
    }
    fclose(f);
    if (data)
        *size = (size_t)n;
    return data;
}

static const char *tmp_root(void)
{
    const char *t = getenv("TMPDIR");
    return t && t[0] ? t : "/tmp";
}

tc_status tc__jit_host_compile(const char *source, void **so, size_t *size)
{
    const char *cxx;
    TC_TRY(tc__jit_host_compiler(&cxx, NULL));
    char dir[PATH_MAX], src[PATH_MAX + 16], obj[PATH_MAX + 16];
    if ((size_t)snprintf(dir, sizeof dir, "%s/tcuda-jit-XXXXXX", tmp_root()) >= sizeof dir ||
        !mkdtemp(dir))
        return tc__fail(TC_ERROR_IO, "cannot create a temporary directory under %s", tmp_root());
    snprintf(src, sizeof src, "%s/jit.cpp", dir);
    snprintf(obj, sizeof obj, "%s/jit.so", dir);
    tc_status st = TC_OK;
    /* the compiler's words, the flags' words, -o obj src */
    size_t words_size = strlen(cxx) + strlen(host_flags) + 2;
    char *words = malloc(words_size), *log = malloc(8192);
    char *argv[MAX_ARGS];
    int n = -1;
    if (!words || !log)
        st = tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
    else if (!write_file(src, source, strlen(source)))
        st = tc__fail(TC_ERROR_IO, "cannot write %s", src);
    else {
        snprintf(words, words_size, "%s %s", cxx, host_flags);
        n = split_words(words, argv, MAX_ARGS - 3);
        if (n < 1)
            st = tc__fail(TC_ERROR_NOT_SUPPORTED,
                          "$CXX and the compiler flags make more than %d words", MAX_ARGS - 4);
    }
    if (st == TC_OK) {
        argv[n] = "-o";
        argv[n + 1] = obj;
        argv[n + 2] = src;
        argv[n + 3] = NULL;
        int rc = run(argv, true, log, 8192);
        if (rc != 0)
            st = tc__fail(TC_ERROR_INVALID_ARGUMENT,
                          "the code does not compile for the CPU (%s %s):\n%s", cxx,
                          rc < 0 ? "did not run or exit" : "exited with an error", log);
        else if (!(*so = read_file(obj, size)))
            st = tc__fail(TC_ERROR_IO, "the compiler wrote no shared object at %s", obj);
    }
    free(words);
    free(log);
    (void)unlink(src);
    (void)unlink(obj);
    (void)rmdir(dir);
    return st;
}

tc_status tc__jit_host_load(const void *so, size_t size, tc__jit_host_fn *out)
{
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s/tcuda-jit-XXXXXX.so", tmp_root()) >= sizeof path)
        return tc__fail(TC_ERROR_IO, "temporary path too long");
    int fd = mkstemps(path, 3);
    if (fd < 0)
        return tc__fail(TC_ERROR_IO, "cannot create a temporary file under %s", tmp_root());
    const char *p = so;
    size_t left = size;
    bool ok = true;
    while (left && ok) {
        ssize_t w = write(fd, p, left);
        ok = w > 0;
        if (ok) {
            p += w;
            left -= (size_t)w;
        }
    }
    ok = close(fd) == 0 && ok;
    void *h = ok ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    const char *err = h ? NULL : dlerror();
    (void)unlink(path);
    if (!ok)
        return tc__fail(TC_ERROR_IO, "cannot write %s", path);
    /* the object compiled, so what stops it loading is in the user's code
     * (most often a function declared but defined nowhere: -shared links
     * with unresolved symbols, and RTLD_NOW finds them here) */
    if (!h)
        return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                        "the code compiles for the CPU but does not load (does it use a "
                        "function or variable it does not define?): %s",
                        err ? err : "dlopen failed");
    void *f = dlsym(h, "tc_jit_host");
    if (!f) {
        dlclose(h);
        return tc__fail(TC_ERROR_INTERNAL, "the compiled code lacks tc_jit_host");
    }
    *out = (tc__jit_host_fn)f;
    return TC_OK;
}
