/* `tcuda memviz`: a memory snapshot as one HTML page or a text summary
 * (memviz.c), read by memviz_read.c into a tree of plain values.
 *
 * The snapshot is untrusted input: the reader and the writer refuse what
 * they cannot justify with a message (in the caller's err buffer), and
 * allocate in proportion to the input, never to a number it claims. */
#ifndef TCUDA_TOOL_MEMVIZ_H
#define TCUDA_TOOL_MEMVIZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum { MV_NONE, MV_BOOL, MV_INT, MV_FLOAT, MV_STR, MV_LIST, MV_DICT } mv_kind;

/* A value; a dict's items are key, value, key, value... */
typedef struct mv_val {
    mv_kind k;
    int64_t i;
    double f;
    char *s;
    struct mv_val **items;
    size_t n, cap;
} mv_val;

/* realloc that ends the program with a message when memory runs out. */
void *mv_xrealloc(void *p, size_t n);

/* The snapshot in the n bytes at p (a pickle, or JSON: p need not end in a
 * NUL), named `name` in messages; NULL with the reason in err. The values
 * live until mv_free_all. */
mv_val *mv_read_buf(const unsigned char *p, size_t n, const char *name, char *err, size_t errn);
/* The snapshot in the file at path, as mv_read_buf; NULL with a reason in
 * err (also when the file cannot be opened or read). */
mv_val *mv_read(const char *path, char *err, size_t errn);
const mv_val *mv_get(const mv_val *dict, const char *key); /* NULL when absent */
int64_t mv_int(const mv_val *v);     /* 0 when not a number (or a float past int64) */
const char *mv_str(const mv_val *v); /* "" when not a string */
/* Frees every value mv_read and mv_read_buf made. */
void mv_free_all(void);

/* Writes root (a snapshot read by mv_read), named path, to out: the HTML
 * page, or with `summary` the text table, of device `device`'s trace (-1:
 * the first with events). 0, or 1 with the reason in err when root is no
 * snapshot or holds a size that is no byte count (negative, past 2^53, or
 * live sizes that add up past 64 bits); then part of the page may have been
 * written. */
int mv_render(const mv_val *root, const char *path, int device, bool summary, FILE *out, char *err,
              size_t errn);

/* `tcuda memviz [--summary] [--device N] SNAPSHOT`: exit status (0, 1 for a
 * snapshot refused, 2 for bad arguments; --help prints the usage, 0). */
int tc_tool_memviz(int argc, char **argv);

#endif
