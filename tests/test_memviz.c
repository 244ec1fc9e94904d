/* CPU-only: `tcuda memviz` on the snapshot of a recorded run (the plain host
 * provider; a few "training steps" with one large buffer at the peak). The
 * text summary names the peak and the large buffer's allocating function;
 * the page is self-contained (nothing fetched), draws one shape per
 * allocation, marks the peak and lists the large buffer with its stack; the
 * JSON dump gives the same summary as the pickle; a pickle that would run
 * code and a file that is no snapshot are refused, and so are hostile
 * snapshots (huge memo indices, lengths past the input, integers past 64
 * bits, pops below a mark, sizes that are no byte counts or add up past 64
 * bits), each with its reason. With --browser (the
 * test_memviz_browser entry), the page is opened in headless Chromium: the
 * DOM after its script ran has the timeline, the peak and the stack, and a
 * screenshot is taken (its path is printed); exits 77 when no browser is
 * installed. The tool comes from TCUDA_TOOL or ../tools/tcuda. */
#include <libgen.h>
#include <limits.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memory/alloc.h"
#include "tc_test.h"

#define MiB ((size_t)1 << 20)

static tc__allocator *A;

/* Exported (ENABLE_EXPORTS): the names the stacks must show. */
void *memviz_activation(size_t size);
void *memviz_big_buffer(void);
void memviz_train_step(int step);
__attribute__((noinline)) void *memviz_activation(size_t size)
{
    void *p = NULL;
    CHECK_OK(tc__alloc_malloc(A, size, 7, &p));
    __asm__ volatile("" ::: "memory");
    return p;
}

__attribute__((noinline)) void *memviz_big_buffer(void)
{
    void *p = NULL;
    CHECK_OK(tc__alloc_malloc(A, 48 * MiB, 7, &p));
    __asm__ volatile("" ::: "memory");
    return p;
}

static int nallocs;

__attribute__((noinline)) void memviz_train_step(int step)
{
    void *act[6];
    for (int i = 0; i < 6; i++, nallocs++)
        act[i] = memviz_activation((size_t)(i + 1) * MiB / 2 + (size_t)step * 4096);
    void *big = step == 2 ? memviz_big_buffer() : NULL;
    nallocs += big != NULL;
    for (int i = 5; i >= 0; i--)
        CHECK_OK(tc__alloc_free(A, act[i]));
    CHECK_OK(tc__alloc_free(A, big));
}

static int count(const char *s, const char *what)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)); p += strlen(what))
        n++;
    return n;
}

/* Runs a shell command; its exit status. */
static int sh(const char *fmt, const char *a, const char *b, const char *c)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, fmt, a, b, c);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void record_run(const char *pk, const char *js)
{
    static tc__host_provider_ctx hctx;
    tc__seg_provider prov;
    tc__host_provider_init(&prov, &hctx);
    tc__alloc_config cfg;
    tc__alloc_config_default(&cfg);
    CHECK_OK(tc__alloc_create(&prov, &cfg, 0, &A));
    tc_memory_history_options o = {true, TC_HISTORY_RECORD_ALL, TC_HISTORY_STACKS_ALLOC, 0};
    CHECK_OK(tc_memory_record_history(&o));
    void *weights = memviz_activation(3 * MiB); /* lives throughout */
    nallocs++;
    for (int step = 0; step < 5; step++)
        memviz_train_step(step);
    CHECK_OK(tc_memory_dump_snapshot(pk));
    CHECK_OK(tc_memory_dump_snapshot_json(js));
    o.enabled = false;
    CHECK_OK(tc_memory_record_history(&o));
    CHECK_OK(tc__alloc_free(A, weights));
    tc__alloc_destroy(A);
}

static void check_tool(const char *tool, const char *pk, const char *js, const char *html)
{
    char sum[1400], sumj[1400];
    snprintf(sum, sizeof sum, "%s.sum", pk);
    snprintf(sumj, sizeof sumj, "%s.sumj", pk);
    CHECK(sh("%s memviz --summary %s > %s", tool, pk, sum) == 0);
    CHECK(sh("%s memviz --summary %s > %s", tool, js, sumj) == 0);
    char *s = tc_test_read_file(sum), *sj = tc_test_read_file(sumj);
    printf("%s", s);
    /* weights 3 MiB + activations (1+...+6)/2 MiB + 6 * 8 KiB + the 48 MiB buffer */
    CHECK(strstr(s, "peak active memory: 61.55 MiB") != NULL);
    CHECK(strstr(s, "memviz_big_buffer") != NULL && strstr(s, "memviz_train_step") != NULL);
    CHECK(strstr(s, "48.00 MiB") != NULL);
    const char *a = strchr(s, '\n'), *b = strchr(sj, '\n'); /* past the line naming the file */
    CHECK(a && b && strcmp(a, b) == 0);
    free(s);
    free(sj);
    CHECK(sh("%s memviz %s > %s", tool, pk, html) == 0);
    char *h = tc_test_read_file(html);
    CHECK(strncmp(h, "<!DOCTYPE html>", 15) == 0);
    CHECK(strstr(h, "<svg id=\"timeline\"") && strstr(h, "id=\"peak\"") &&
          strstr(h, "id=\"segments\"") && strstr(h, "id=\"top-allocs\""));
    CHECK(count(h, "<polygon class=\"alloc\"") == nallocs);
    CHECK(strstr(h, "memviz_big_buffer") != NULL);
    CHECK(!strstr(h, "http://") && !strstr(h, "https://") && !strstr(h, " src=")); /* no network */
    free(h);
    unlink(sum);
    unlink(sumj);
    /* refused: a pickle that would call a function, a file that is no snapshot */
    char bad[1400];
    snprintf(bad, sizeof bad, "%s.bad", pk);
    FILE *f = fopen(bad, "wb");
    fwrite("\x80\x02"
           "cos\nsystem\n(X\x02\x00\x00\x00lstR.",
           1, 25, f);
    fclose(f);
    CHECK(sh("%s memviz %s > /dev/null 2> %s.err", tool, bad, bad) == 1);
    snprintf(sum, sizeof sum, "%.1300s.err", bad);
    char *e = tc_test_read_file(sum);
    CHECK(strstr(e, "opcode 0x63") != NULL); /* 'c', GLOBAL */
    free(e);
    f = fopen(bad, "wb");
    fputs("hello", f);
    fclose(f);
    CHECK(sh("%s memviz --summary %s > /dev/null 2>%s", tool, bad, "/dev/null") == 1);
    CHECK(sh("%s memviz > /dev/null 2>%s%s", tool, "/dev/null", "") == 2);
    unlink(bad);
    unlink(sum);
}

/* Writes n bytes to path. */
static void write_file(const char *path, const void *bytes, size_t n)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f)
        return;
    CHECK(fwrite(bytes, 1, n, f) == n);
    fclose(f);
}

/* `tool memviz [--summary] path` on the n bytes given: it must exit 1 (not
 * crash, not allocate what the bytes claim) with a message that names the
 * file and says `want`. */
static void refused(const char *tool, const char *path, const void *bytes, size_t n,
                    const char *want)
{
    char errp[1400];
    snprintf(errp, sizeof errp, "%.1300s.err", path);
    write_file(path, bytes, n);
    for (int sum = 0; sum < 2; sum++) {
        char cmd[4200];
        snprintf(cmd, sizeof cmd, "%s memviz %s %s > /dev/null 2> %s", tool, sum ? "--summary" : "",
                 path, errp);
        int st = system(cmd);
        char *e = tc_test_read_file(errp);
        if (!(WIFEXITED(st) && WEXITSTATUS(st) == 1 && strstr(e, want)))
            printf("hostile input for '%s': status %d, stderr: %s\n", want, st, e);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1);
        CHECK(strstr(e, "tcuda memviz: ") == e && strstr(e, want) != NULL);
        CHECK(strncmp(e + 14, path, strlen(path)) == 0); /* names the file first */
        free(e);
    }
    unlink(errp);
    unlink(path);
}

/* A JSON snapshot whose trace allocates n blocks of `size` (a JSON number). */
static char *json_allocs(int n, const char *size)
{
    size_t cap = 128 + (size_t)n * (64 + strlen(size));
    char *s = malloc(cap);
    size_t len = (size_t)snprintf(s, cap, "{\"segments\": [], \"device_traces\": [[");
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(s + len, cap - len,
                                "%s{\"action\": \"alloc\", \"addr\": %d, \"size\": %s}",
                                i ? ", " : "", 4096 * (i + 1), size);
    snprintf(s + len, cap - len, "]]}\n");
    return s;
}

/* Hostile snapshots (issue 26): each is refused with its reason, quickly
 * and without allocating what it claims. */
static void check_hostile(const char *tool, const char *dir)
{
    char path[1400];
    snprintf(path, sizeof path, "%.1300s/memviz_hostile", dir);
    /* 9 bytes: LONG_BINPUT 2^31 - 1 once sized the memo to 16 GiB */
    refused(tool, path, "\x80\x02Nr\xff\xff\xff\x7f.", 9,
            "memo index 2147483647 is past the 3 opcodes read so far");
    refused(tool, path, "\x80\x02j\xff\xff\xff\x7f.", 8, "memo index 2147483647 was never set");
    refused(tool, path, "\x80\x02Nq\x00h\x05.", 7, "memo index 5 was never set");
    /* LONG1 of 10 bytes: was cut to its low 8 */
    refused(tool, path, "\x80\x02\x8a\x0a\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a.", 15,
            "an integer of 10 bytes does not fit in 64 bits");
    /* SETITEM popping below a mark; APPENDS without a list */
    refused(tool, path, "\x80\x02}NN(s.", 8, "SETITEM wants 3 values on the stack, 0 there");
    refused(tool, path, "\x80\x02N(Ne.", 7, "APPENDS into a value that is not a list");
    refused(tool, path, "\x80\x02]NNNs.", 8, "SETITEM into a value that is not a dict");
    /* lengths past the input: a string of 2^64 - 1 bytes, a frame of 2^63 - 1 */
    refused(tool, path, "\x80\x04\x8d\xff\xff\xff\xff\xff\xff\xff\xff.", 12,
            "the pickle ends early (18446744073709551615 bytes wanted, 1 left)");
    refused(tool, path, "\x80\x04\x95\xff\xff\xff\xff\xff\xff\xff\x7f}.", 13,
            "the pickle ends early");
    refused(tool, path, "\x80\x04\x95\xff\xff\xff\xff\xff\xff\xff\xff}.", 13,
            "the pickle ends early (18446744073709551615 bytes wanted, 2 left)");
    refused(tool, path, "\x80\x07}.", 4, "pickle protocol 7");
    /* sizes that are no byte counts, and sums past 64 bits */
    char *j = json_allocs(1, "-5");
    refused(tool, path, j, strlen(j), "event 0 has size -5: not a byte count");
    free(j);
    j = json_allocs(2, "1e300");
    refused(tool, path, j, strlen(j), "event 0 has size 1e+300: not a byte count");
    free(j);
    j = json_allocs(1, "9007199254740993"); /* 2^53 + 1 */
    refused(tool, path, j, strlen(j), "has size 9007199254740993: not a byte count");
    free(j);
    j = json_allocs(1025, "9007199254740992"); /* 1025 * 2^53 > 2^63 */
    refused(tool, path, j, strlen(j), "the live allocations add up past 2^63 bytes");
    free(j);
    j = json_allocs(1, "99999999999999999999"); /* past 64 bits */
    refused(tool, path, j, strlen(j), "is neither a snapshot pickle nor JSON");
    free(j);
    static const char segs[] = "{\"segments\": [{\"device\": 0, \"total_size\": -1}]}";
    refused(tool, path, segs, strlen(segs), "segment 0 has total_size -1: not a byte count");
    static const char trailing[] = "{\"segments\": []} {";
    refused(tool, path, trailing, strlen(trailing), "is neither a snapshot pickle nor JSON");
    /* the largest sizes that are byte counts are drawn */
    j = json_allocs(1023, "9007199254740992");
    write_file(path, j, strlen(j));
    CHECK(sh("%s memviz %s > /dev/null%s", tool, path, "") == 0);
    free(j);
    unlink(path);
}

static const char *find_browser(void)
{
    static const char *const names[] = {"chromium", "chromium-browser", "google-chrome", NULL};
    for (int i = 0; names[i]; i++)
        if (sh("command -v %s > /dev/null 2>&1%s%s", names[i], "", "") == 0)
            return names[i];
    return NULL;
}

static int check_browser(const char *html, const char *png)
{
    const char *br = find_browser();
    if (!br) {
        printf("skipped: no chromium (the browser check of the memviz page)\n");
        return 77;
    }
    char dom[1400];
    snprintf(dom, sizeof dom, "%s.dom", html);
    const char *flags = "--headless --no-sandbox --disable-gpu --disable-dev-shm-usage "
                        "--no-first-run --window-size=1400,900";
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s %s --dump-dom file://%s > %s 2>/dev/null", br, flags, html, dom);
    CHECK(system(cmd) == 0);
    char *d = tc_test_read_file(dom);
    CHECK(strstr(d, "data-drawn=\"") != NULL); /* the page's script ran */
    CHECK(count(d, "<polygon class=\"alloc\"") == nallocs);
    CHECK(strstr(d, "id=\"peak\"") && strstr(d, "peak 61.55 MiB"));
    const char *top = strstr(d, "id=\"top-allocs\"");
    CHECK(top && strstr(top, "48.00 MiB") && strstr(top, "memviz_big_buffer"));
    free(d);
    unlink(dom);
    snprintf(cmd, sizeof cmd, "%s %s --screenshot=%s file://%s > /dev/null 2>&1", br, flags, png,
             html);
    CHECK(system(cmd) == 0);
    FILE *f = fopen(png, "rb");
    long n = 0;
    if (f) {
        fseek(f, 0, SEEK_END);
        n = ftell(f);
        fclose(f);
    }
    CHECK(n > 10000);
    printf("screenshot: %s (%ld bytes)\n", png, n);
    return 0;
}

int main(int argc, char **argv)
{
    tc_test_init();
    bool browser = argc > 1 && strcmp(argv[1], "--browser") == 0;
    char guess[4200];
    const char *tool = tc_test_find_tool(argv[0], guess, sizeof guess);
    if (!tool) {
        printf("skipped: set TCUDA_TOOL to the built tcuda program\n");
        return 77;
    }
    char dir[4096], absdir[4096], pk[1200], js[1300], html[1300], png[1300];
    snprintf(dir, sizeof dir, "%s", argv[0]);
    if (!realpath(dirname(dir), absdir)) /* file:// wants an absolute path */
        snprintf(absdir, sizeof absdir, "/tmp");
    snprintf(pk, sizeof pk, "%.1100s/memviz_%s.pickle", absdir, browser ? "browser" : "tool");
    snprintf(js, sizeof js, "%s.json", pk);
    snprintf(html, sizeof html, "%s.html", pk);
    snprintf(png, sizeof png, "%s.png", pk);
    record_run(pk, js);
    check_tool(tool, pk, js, html);
    check_hostile(tool, absdir);
    int rc = browser ? check_browser(html, png) : 0;
    if (rc == 77)
        return 77;
    return TC_TEST_DONE();
}
