/* `tcuda memviz`: a memory snapshot as one HTML page or a text summary
 * (memviz.c), read by memviz_read.c into a tree of plain values. */
#ifndef TCUDA_TOOL_MEMVIZ_H
#define TCUDA_TOOL_MEMVIZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* The snapshot at path (pickle or JSON); NULL with a reason in err. */
/* realloc that ends the program with a message when memory runs out. */
void *mv_xrealloc(void *p, size_t n);

mv_val *mv_read(const char *path, char *err, size_t errn);
const mv_val *mv_get(const mv_val *dict, const char *key); /* NULL when absent */
int64_t mv_int(const mv_val *v);                           /* 0 when not a number */
const char *mv_str(const mv_val *v);
/* Frees every value mv_read made. */
void mv_free_all(void); /* "" when not a string */

/* `tcuda memviz [--summary] [--device N] SNAPSHOT`: exit status. */
int tc_tool_memviz(int argc, char **argv);

#endif
