/* base/libfile.c: a library's file found without loading it, and a file
 * read ahead.
 *
 * The reference for the lookup is the dynamic loader itself: for libraries
 * this process has loaded (libc, libm) and for NVRTC when the machine has
 * it, the file tc__library_file names is the file the loader opened (both
 * through realpath). The cache parser also reads caches built here: the new
 * format alone and after an old-format table; entries for another ABI, for
 * a CPU feature level, or naming a missing file are passed over. Every
 * prefix of a cache, offsets that point outside it, an entry count too
 * large, and random damage give "not found" or a real file, never a read
 * outside the bytes given (each copy is exactly its size, for ASan).
 * LD_LIBRARY_PATH comes before the cache, with empty folders and ';'
 * handled. No GPU needed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tc_test.h"

#include "base/libfile.h"

#if defined(__x86_64__)
#define MY_ABI 0x0303
#elif defined(__aarch64__)
#define MY_ABI 0x0a03
#else
#define MY_ABI 0x0003
#endif

static char tmpdir[PATH_MAX], file_a[PATH_MAX + 32], file_b[PATH_MAX + 32];

static void touch(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* Whether `a` and `b` name the same file after resolving links. */
static bool same_file(const char *a, const char *b)
{
    char ra[PATH_MAX], rb[PATH_MAX];
    return realpath(a, ra) && realpath(b, rb) && strcmp(ra, rb) == 0;
}

/* ---- a cache built here ------------------------------------------------- */

typedef struct entry {
    int32_t flags;
    const char *key, *value;
    uint64_t hwcap;
} entry;

static void put32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }

/* The cache of `n` entries into buf (zeroed first); its size. With `old`, an
 * old-format table of 3 entries comes first. */
static size_t build_cache(unsigned char *buf, size_t cap, const entry *e, int n, bool old)
{
    memset(buf, 0, cap);
    size_t at = 0;
    if (old) {
        memcpy(buf, "ld.so-1.7.0", 11);
        put32(buf + 12, 3);
        at = (16 + 3 * 12 + 7) & ~(size_t)7;
    }
    unsigned char *h = buf + at;
    memcpy(h, "glibc-ld.so.cache1.1", 20);
    put32(h + 20, (uint32_t)n);
    size_t str = 48 + 24 * (size_t)n, str0 = str;
    for (int i = 0; i < n; i++) {
        unsigned char *p = h + 48 + 24 * (size_t)i;
        put32(p, (uint32_t)e[i].flags);
        put32(p + 4, (uint32_t)str);
        strcpy((char *)h + str, e[i].key);
        str += strlen(e[i].key) + 1;
        put32(p + 8, (uint32_t)str);
        strcpy((char *)h + str, e[i].value);
        str += strlen(e[i].value) + 1;
        memcpy(p + 16, &e[i].hwcap, 8);
    }
    put32(h + 24, (uint32_t)(str - str0));
    CHECK(at + str <= cap);
    return at + str;
}

/* tc__ld_cache_lookup on an exact-size copy of the first `n` bytes. */
static bool lookup(const unsigned char *cache, size_t n, const char *soname, char *out, size_t size)
{
    unsigned char *copy = malloc(n ? n : 1);
    if (n)
        memcpy(copy, cache, n);
    bool found = tc__ld_cache_lookup(copy, n, soname, out, size);
    free(copy);
    return found;
}

static void built_caches(void)
{
    const char *x86 = "/nonexistent-tcuda/libtcfake.so.1";
    entry e[] = {
        {MY_ABI, "libtcfake.so.1", file_b, 2},                             /* a CPU feature level */
        {MY_ABI == 0x0003 ? 0x0303 : 0x0003, "libtcfake.so.1", file_b, 0}, /* another ABI */
        {0x0001, "libtcfake.so.1", file_b, 0}, /* not an ELF library for glibc */
        {MY_ABI, "libtcfake.so.1", x86, 0},    /* a file that is not there */
        {MY_ABI, "libtcfake.so.1", file_a, 0},
        {MY_ABI, "libother.so.2", file_b, 0},
    };
    static unsigned char buf[8192];
    char out[PATH_MAX + 32];
    for (int old = 0; old < 2; old++) {
        size_t n = build_cache(buf, sizeof buf, e, 6, old);
        CHECK(lookup(buf, n, "libtcfake.so.1", out, sizeof out) && strcmp(out, file_a) == 0);
        CHECK(lookup(buf, n, "libother.so.2", out, sizeof out) && strcmp(out, file_b) == 0);
        CHECK(!lookup(buf, n, "libnone.so", out, sizeof out));
        CHECK(!lookup(buf, n, "libtcfake.so.1", out, strlen(file_a))); /* no room */
        CHECK(lookup(buf, n, "libtcfake.so.1", out, strlen(file_a) + 1));
        /* every prefix: not found, or the right file */
        int wrong = 0, found = 0;
        for (size_t k = 0; k < n; k++) {
            out[0] = '\0';
            if (lookup(buf, k, "libtcfake.so.1", out, sizeof out)) {
                found++;
                wrong += strcmp(out, file_a) != 0;
            }
        }
        CHECK(wrong == 0);
        CHECK(found > 0); /* the strings of later entries are not needed */
        /* an entry count beyond the bytes */
        size_t at = old ? 56 : 0;
        put32(buf + at + 20, 0xffffffffu);
        CHECK(!lookup(buf, n, "libtcfake.so.1", out, sizeof out));
        put32(buf + at + 20, 6);
        /* the found entry's path offset outside the cache, then its key's */
        unsigned char *e4 = buf + at + 48 + 4 * 24;
        uint32_t key, value;
        memcpy(&key, e4 + 4, 4);
        memcpy(&value, e4 + 8, 4);
        put32(e4 + 8, (uint32_t)n * 4);
        CHECK(!lookup(buf, n, "libtcfake.so.1", out, sizeof out));
        put32(e4 + 8, value);
        put32(e4 + 4, 0xfffffff0u);
        CHECK(!lookup(buf, n, "libtcfake.so.1", out, sizeof out));
        put32(e4 + 4, key);
        CHECK(lookup(buf, n, "libtcfake.so.1", out, sizeof out) && strcmp(out, file_a) == 0);
        /* random damage: no crash, and an answer is a real file */
        unsigned char *bad = malloc(n);
        int unreal = 0;
        for (int t = 0; t < 2000; t++) {
            memcpy(bad, buf, n);
            for (int f = 0; f < 1 + rand() % 4; f++)
                bad[rand() % n] ^= (unsigned char)(1 + rand() % 255);
            if (lookup(bad, n, "libtcfake.so.1", out, sizeof out) ||
                lookup(bad, n, "libother.so.2", out, sizeof out))
                unreal += access(out, R_OK) != 0;
        }
        free(bad);
        CHECK(unreal == 0);
    }
    /* not a cache at all */
    char out2[64];
    CHECK(!lookup((const unsigned char *)"hello", 5, "libc.so.6", out2, sizeof out2));
    CHECK(!lookup((const unsigned char *)"", 0, "libc.so.6", out2, sizeof out2));
    CHECK(!tc__ld_cache_lookup(NULL, 10, "libc.so.6", out2, sizeof out2));
}

/* ---- the machine's own libraries, against the loader ------------------- */

/* The file the loader opened for the loaded library `soname`. */
static bool loaded_file(const char *soname, char *out, size_t size)
{
    void *h = dlopen(soname, RTLD_LAZY | RTLD_NOLOAD);
    struct link_map *map = NULL;
    bool ok = h && dlinfo(h, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name;
    if (ok)
        snprintf(out, size, "%s", map->l_name);
    if (h)
        dlclose(h);
    return ok;
}

static void machine_libraries(void)
{
    char mine[PATH_MAX], loader[PATH_MAX];
    const char *loaded[] = {"libc.so.6", "libm.so.6"};
    for (int i = 0; i < 2; i++) {
        bool found = tc__library_file(loaded[i], mine, sizeof mine);
        bool ok = found && loaded_file(loaded[i], loader, sizeof loader) && same_file(mine, loader);
        if (!ok)
            fprintf(stderr, "%s: found %d at '%s', the loader has '%s'\n", loaded[i], found,
                    found ? mine : "", loader);
        CHECK(ok);
    }
    /* NVRTC: where found, the loader opens the same file; where not, it
     * fails too */
    const char *nvrtc[] = {"libnvrtc.so.13", "libnvrtc.so.12"};
    for (int i = 0; i < 2; i++) {
        bool found = tc__library_file(nvrtc[i], mine, sizeof mine);
        void *h = dlopen(nvrtc[i], RTLD_LAZY | RTLD_LOCAL);
        CHECK(found == (h != NULL));
        if (found && h) {
            CHECK(loaded_file(nvrtc[i], loader, sizeof loader) && same_file(mine, loader));
            printf("%s: %s\n", nvrtc[i], mine);
        }
        /* NVRTC stays loaded: unloading it is not something tcuda does */
    }
}

static void library_path(void)
{
    char out[PATH_MAX + 64];
    const char *saved = getenv("LD_LIBRARY_PATH");
    char *keep = saved ? strdup(saved) : NULL;
    char list[3 * PATH_MAX];
    snprintf(list, sizeof list, "::/nonexistent-tcuda;%s:", tmpdir);
    setenv("LD_LIBRARY_PATH", list, 1);
    CHECK(tc__library_file("libtcfake.so.1", out, sizeof out) && strcmp(out, file_a) == 0);
    CHECK(!tc__library_file("libtcfake.so.1", out, 8)); /* no room */
    unsetenv("LD_LIBRARY_PATH");
    CHECK(!tc__library_file("libtcfake.so.1", out, sizeof out));
    CHECK(out[0] == '\0');
    if (keep) {
        setenv("LD_LIBRARY_PATH", keep, 1);
        free(keep);
    }
    CHECK(!tc__library_file(NULL, out, sizeof out));
    CHECK(!tc__library_file("", out, sizeof out));
    CHECK(!tc__library_file("lib/libc.so.6", out, sizeof out));
    CHECK(!tc__library_file("libc.so.6", NULL, sizeof out));
    CHECK(!tc__library_file("libc.so.6", out, 0));
}

static void read_ahead(void)
{
    char empty[PATH_MAX + 32];
    snprintf(empty, sizeof empty, "%s/empty", tmpdir);
    touch(empty, "");
    CHECK(tc__read_ahead(file_a));
    CHECK(tc__read_ahead(empty));
    CHECK(!tc__read_ahead("/nonexistent-tcuda/file"));
    unlink(empty);
}

int main(void)
{
    tc_test_init();
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/tc-libfile-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(file_a, sizeof file_a, "%s/libtcfake.so.1", tmpdir);
    snprintf(file_b, sizeof file_b, "%s/libother.so.2", tmpdir);
    touch(file_a, "not really a library\n");
    touch(file_b, "nor this\n");
    built_caches();
    machine_libraries();
    library_path();
    read_ahead();
    unlink(file_a);
    unlink(file_b);
    rmdir(tmpdir);
    return TC_TEST_DONE();
}
