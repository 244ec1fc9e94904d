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
 * Loaded objects stay loaded for the process. */
#include <dlfcn.h>
#include <limits.h>
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

/* Runs cmd through the shell; its output (stdout and stderr) into out. */
static int run(const char *cmd, char *out, size_t out_size)
{
    FILE *f = popen(cmd, "r");
    if (!f)
        return -1;
    size_t used = 0;
    char buf[1024];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        if (out && used + 1 < out_size) {
            size_t take = n < out_size - 1 - used ? n : out_size - 1 - used;
            memcpy(out + used, buf, take);
            used += take;
        }
    }
    if (out && out_size)
        out[used] = '\0';
    int status = pclose(f);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static bool try_compiler(const char *cxx)
{
    char cmd[640], out[1024];
    if ((size_t)snprintf(cmd, sizeof cmd, "%s --version 2>/dev/null", cxx) >= sizeof cmd)
        return false;
    if (run(cmd, out, sizeof out) != 0 || !out[0])
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
                     "no C++ compiler for jiterator's CPU path: tried %s%s%sc++ (set CXX to "
                     "a C++17 compiler, or run on a GPU)",
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
    return t && t[0] && !strchr(t, '\'') ? t : "/tmp";
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
    size_t cmd_size = strlen(cxx) + strlen(host_flags) + 2 * sizeof src + 64;
    char *cmd = malloc(cmd_size), *log = malloc(8192);
    if (!cmd || !log)
        st = tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
    else if (!write_file(src, source, strlen(source)))
        st = tc__fail(TC_ERROR_IO, "cannot write %s", src);
    if (st == TC_OK) {
        snprintf(cmd, cmd_size, "%s %s -o '%s' '%s' 2>&1", cxx, host_flags, obj, src);
        int rc = run(cmd, log, 8192);
        if (rc != 0)
            st = tc__fail(TC_ERROR_INVALID_ARGUMENT,
                          "the code does not compile for the CPU (%s exited with %d):\n%s", cxx, rc,
                          log);
        else if (!(*so = read_file(obj, size)))
            st = tc__fail(TC_ERROR_IO, "the compiler wrote no shared object at %s", obj);
    }
    free(cmd);
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
    if (!h)
        return tc__fail(TC_ERROR_INTERNAL, "cannot load the compiled code: %s",
                        err ? err : "dlopen failed");
    void *f = dlsym(h, "tc_jit_host");
    if (!f) {
        dlclose(h);
        return tc__fail(TC_ERROR_INTERNAL, "the compiled code lacks tc_jit_host");
    }
    *out = (tc__jit_host_fn)f;
    return TC_OK;
}
