/* CPU-only: how tcuda finds NCCL (include/tcuda/nccl.h). NCCL is loaded once
 * per process, so each case runs in a child, this program again ("child
 * CASE"), which sets TCUDA_NCCL_LIBRARY itself before its first tcuda call:
 *   wrong  a path that does not exist: TC_ERROR_NOT_SUPPORTED naming the
 *          variable, the path and the loader's words, from both calls, and
 *          still after the variable is corrected (the load is tried once);
 *          never another NCCL, though one may be on the loader's path;
 *   libc   a library without NCCL's functions (libc.so.6): refused, naming
 *          it and the function it lacks;
 *   fake   tests/support/fake_nccl.c (where built): its version, 22000, and
 *          its file; and tcuda sets no variable of NCCL's (NCCL_NVLS_ENABLE
 *          stays unset);
 *   empty  "" is as unset: the default search, checked against dlopen of
 *          libnccl.so.2 and libnccl.so by this test;
 *   found  the NCCL tests/support/nccl_find.h finds (PyTorch's, on a GPU
 *          machine): version 2.14 or later, and its file, opened by this test,
 *          answers the same version; skipped where there is none.
 * The parent checks tc_nccl_version_split on known codes and bad input. A
 * build without CUDA answers TC_ERROR_NO_DEVICE, whatever the variable says. */
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nccl_find.h"
#include "tc_test.h"
#include "tcuda/nccl.h"

/* Both calls refuse with `status`, each message starting with its call's
 * name and holding every one of `words` (NULL-terminated). */
static void expect_refused(tc_status status, const char *const *words)
{
    int v = -7;
    const char *path = "untouched";
    CHECK_STATUS(tc_nccl_version(&v), status);
    printf("  %s\n", tc_last_error());
    CHECK(v == -7);
    CHECK(strncmp(tc_last_error(), "tc_nccl_version: ", 17) == 0);
    for (const char *const *w = words; *w; w++)
        CHECK(strstr(tc_last_error(), *w) != NULL);
    CHECK_STATUS(tc_nccl_get_library_path(&path), status);
    CHECK(!strcmp(path, "untouched"));
    CHECK(strncmp(tc_last_error(), "tc_nccl_get_library_path: ", 26) == 0);
    for (const char *const *w = words; *w; w++)
        CHECK(strstr(tc_last_error(), *w) != NULL);
}

#ifdef TCUDA_HAVE_CUDA
/* ncclGetVersion of the library at `path`, opened by the test itself (the
 * reference for what tcuda reports); -1 when it cannot be asked. */
static int version_of(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return -1;
    int (*get)(int *) = NULL;
    *(void **)&get = dlsym(h, "ncclGetVersion");
    int v = -1;
    if (!get || get(&v) != 0)
        v = -1;
    dlclose(h);
    return v;
}

/* tcuda found the NCCL of file `want` (NULL: any): the version it reports
 * is that file's own, and so is the path. */
static void expect_loaded(const char *want, int *version)
{
    int v = 0;
    const char *path = NULL;
    CHECK_OK(tc_nccl_version(&v));
    CHECK_OK(tc_nccl_get_library_path(&path));
    printf("  NCCL %d from %s\n", v, path ? path : "(none)");
    if (!path)
        return;
    CHECK(path[0] == '/');
    CHECK(version_of(path) == v);
    if (want) {
        char real[4096];
        CHECK(realpath(want, real) && !strcmp(path, real));
    }
    *version = v;
}

/* What the search without TCUDA_NCCL_LIBRARY must find, asked of the loader
 * directly: libnccl.so.2, else libnccl.so. */
static bool default_loads(void)
{
    const char *names[] = {"libnccl.so.2", "libnccl.so"};
    for (int i = 0; i < 2; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        bool nccl = h && dlsym(h, "ncclGetVersion");
        if (h)
            dlclose(h);
        if (nccl)
            return true;
    }
    return false;
}
#endif

static int child(const char *what)
{
    unsetenv("NCCL_NVLS_ENABLE"); /* to see that tcuda sets none (no communicator is made) */
    tc_test_init();
    printf("case %s:\n", what);
#ifndef TCUDA_HAVE_CUDA
    setenv("TCUDA_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
    expect_refused(TC_ERROR_NO_DEVICE, (const char *const[]){"CUDA is not available", NULL});
#else
    int v = 0;
    if (!strcmp(what, "wrong")) {
        setenv("TCUDA_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
        const char *const words[] = {
            "NCCL is not available: TCUDA_NCCL_LIBRARY=/nonexistent/libnccl.so.2 does not load: ",
            "/nonexistent/libnccl.so.2: cannot open shared object file", NULL};
        expect_refused(TC_ERROR_NOT_SUPPORTED, words);
        expect_refused(TC_ERROR_NOT_SUPPORTED, words);      /* the same answer again */
#ifdef TC_TEST_FAKE_NCCL
        setenv("TCUDA_NCCL_LIBRARY", TC_TEST_FAKE_NCCL, 1); /* too late: loaded once */
        expect_refused(TC_ERROR_NOT_SUPPORTED, words);
#endif
    } else if (!strcmp(what, "libc")) {
        setenv("TCUDA_NCCL_LIBRARY", "libc.so.6", 1);
        expect_refused(
            TC_ERROR_NOT_SUPPORTED,
            (const char *const[]){"TCUDA_NCCL_LIBRARY=libc.so.6 is not NCCL 2.4 or later: ",
                                  "undefined symbol: ncclGetVersion", NULL});
    } else if (!strcmp(what, "fake")) {
#ifdef TC_TEST_FAKE_NCCL
        setenv("TCUDA_NCCL_LIBRARY", TC_TEST_FAKE_NCCL, 1);
        expect_loaded(TC_TEST_FAKE_NCCL, &v);
        CHECK(v == 22000); /* fake_nccl.c's */
        CHECK(getenv("NCCL_NVLS_ENABLE") == NULL);
#endif
    } else if (!strcmp(what, "empty")) {
        setenv("TCUDA_NCCL_LIBRARY", "", 1);
        if (default_loads()) {
            expect_loaded(NULL, &v);
        } else {
            const char *const words[] = {
                "NCCL is not available: libnccl.so.2: cannot open shared object file",
                "libnccl.so: cannot open shared object file",
                "(set TCUDA_NCCL_LIBRARY to NCCL's path)", NULL};
            expect_refused(TC_ERROR_NOT_SUPPORTED, words);
        }
        CHECK(getenv("NCCL_NVLS_ENABLE") == NULL);
    } else if (!strcmp(what, "found")) {
        tc_test_find_nccl();
        const char *set = getenv("TCUDA_NCCL_LIBRARY");
        if (!(set && *set) && !default_loads()) {
            printf("  no NCCL here: skipped\n");
            return TC_TEST_DONE();
        }
        expect_loaded(set && *set ? set : NULL, &v);
        int major = 0, minor = 0, patch = 0;
        CHECK_OK(tc_nccl_version_split(v, &major, &minor, &patch));
        printf("  NCCL %d.%d.%d\n", major, minor, patch);
        CHECK(v >= 21400); /* non-blocking communicators, which dist.c's timeouts need */
    } else {
        printf("unknown case\n");
        return 2;
    }
#endif
    return TC_TEST_DONE();
}

static bool child_passes(const char *self, const char *what)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        execl(self, self, "child", what, (char *)NULL);
        _exit(99);
    }
    int status = 0;
    bool ok = pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
              WEXITSTATUS(status) == 0;
    if (!ok)
        printf("case %s: the child ended with status 0x%x\n", what, status);
    return ok;
}

static void split_codes(void)
{
    static const int cases[][4] = {{22703, 2, 27, 3}, {21400, 2, 14, 0}, {20903, 2, 9, 3},
                                   {2408, 2, 4, 8},   {2804, 2, 8, 4},   {31002, 3, 10, 2}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int major = -1, minor = -1, patch = -1;
        CHECK_OK(tc_nccl_version_split(cases[i][0], &major, &minor, &patch));
        CHECK(major == cases[i][1] && minor == cases[i][2] && patch == cases[i][3]);
    }
    int a = -1, b = -1, c = -1;
    CHECK_STATUS(tc_nccl_version_split(999, &a, &b, &c), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "tc_nccl_version_split: 999 is not an NCCL version code") ==
          tc_last_error());
    CHECK_STATUS(tc_nccl_version_split(-1, &a, &b, &c), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nccl_version_split(22703, NULL, &b, &c), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nccl_version_split(22703, &a, NULL, &c), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_nccl_version_split(22703, &a, &b, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "major, minor or patch is NULL") != NULL);
    CHECK(a == -1 && b == -1 && c == -1); /* written only on success */
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "child"))
        return child(argv[2]);
    tc_test_init();
    split_codes();
    CHECK_STATUS(tc_nccl_version(NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "tc_nccl_version: out is NULL") == tc_last_error());
    CHECK_STATUS(tc_nccl_get_library_path(NULL), TC_ERROR_INVALID_ARGUMENT);
    const char *self = "/proc/self/exe";
    static const char *const cases[] = {"wrong", "libc", "fake", "empty", "found"};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        CHECK(child_passes(self, cases[i]));
    return TC_TEST_DONE();
}
