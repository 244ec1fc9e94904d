/* libFuzzer harness for `tcuda memviz`'s reader (tools/memviz_read.c).
 *
 * The input is a whole snapshot file, a pickle (first byte 0x80) or JSON,
 * in a buffer of exactly its size and with no NUL after it. mv_read_buf must
 * refuse it with a message naming it, or give a value (a dict, for JSON)
 * whose tree is readable (ASan checks every read stays in the input; UBSan
 * every integer). What it allocates is bounded by the input, so a short
 * input never asks for gigabytes (libFuzzer's -rss_limit_mb and
 * -malloc_limit_mb catch one that does). */
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "memviz.h"

/* Visits the values below v, at most *budget of them (the memo may share a
 * value many times, or make a list hold itself), checking each one's shape. */
static void walk(const mv_val *v, size_t *budget)
{
    if (!*budget)
        return;
    (*budget)--;
    FZ_CHECK(v != NULL);
    FZ_CHECK(v->k >= MV_NONE && v->k <= MV_DICT);
    FZ_CHECK(v->n <= v->cap);
    if (v->k == MV_STR)
        FZ_CHECK(v->s != NULL);
    if (v->k == MV_DICT)
        FZ_CHECK(v->n % 2 == 0);
    (void)mv_int(v);
    (void)mv_str(v);
    for (size_t i = 0; i < v->n && *budget; i++)
        walk(v->items[i], budget);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *file = malloc(size ? size : 1);
    FZ_CHECK(file);
    memcpy(file, data, size);
    char err[320];
    memset(err, 0x5a, sizeof err);
    mv_val *root = mv_read_buf(file, size, "fuzz", err, sizeof err);
    if (!root) {
        FZ_CHECK(strncmp(err, "fuzz", 4) == 0 && strlen(err) > 5);
    } else {
        FZ_CHECK(err[0] == 0);
        if (!size || file[0] != 0x80)
            FZ_CHECK(root->k == MV_DICT);
        size_t budget = 4 * size + 16; /* a tree made of shared values can be walked forever */
        walk(root, &budget);
        (void)mv_get(root, "segments");
    }
    mv_free_all();
    free(file);
    return 0;
}
