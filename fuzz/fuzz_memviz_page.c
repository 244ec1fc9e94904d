/* libFuzzer harness for `tcuda memviz`'s writer (tools/memviz.c): a
 * snapshot read by mv_read_buf, then its HTML page (into memory) and its text
 * summaries for the first device with events and for device 1.
 *
 * mv_render must refuse a snapshot with a message naming it, or write the
 * whole page: one doctype to one closing tag, one script and no other (the
 * snapshot's strings are escaped, so a frame named "</script>" cannot end
 * it). ASan and UBSan check the replay's arithmetic on hostile sizes,
 * addresses and event orders. */
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "memviz.h"

static size_t count(const char *s, const char *what)
{
    size_t n = 0;
    for (const char *p = s; (p = strstr(p, what)); p += strlen(what))
        n++;
    return n;
}

/* Renders root to a memory buffer; checks the result, frees the buffer. */
static void render_page(const mv_val *root)
{
    char *buf = NULL, err[320];
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    FZ_CHECK(f);
    int rc = mv_render(root, "fuzz", -1, false, f, err, sizeof err);
    FZ_CHECK(fclose(f) == 0);
    FZ_CHECK(rc == 0 || rc == 1);
    if (rc) {
        FZ_CHECK(strncmp(err, "fuzz: ", 6) == 0);
    } else {
        FZ_CHECK(strlen(buf) == len); /* no NUL from the snapshot */
        FZ_CHECK(strncmp(buf, "<!DOCTYPE html>", 15) == 0);
        FZ_CHECK(len >= 15 && strcmp(buf + len - 15, "</body></html>\n") == 0);
        FZ_CHECK(count(buf, "<script") == 1 && count(buf, "</script") == 1);
        FZ_CHECK(count(buf, "<svg id=\"timeline\"") == 1);
    }
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *null;
    if (!null)
        null = fopen("/dev/null", "w");
    FZ_CHECK(null);
    uint8_t *file = malloc(size ? size : 1);
    FZ_CHECK(file);
    memcpy(file, data, size);
    char err[320];
    mv_val *root = mv_read_buf(file, size, "fuzz", err, sizeof err);
    if (root) {
        render_page(root);
        for (int device = -1; device <= 1; device += 2) {
            int rc = mv_render(root, "fuzz", device, true, null, err, sizeof err);
            FZ_CHECK(rc == 0 || (rc == 1 && strncmp(err, "fuzz: ", 6) == 0));
        }
    }
    mv_free_all();
    free(file);
    return 0;
}
