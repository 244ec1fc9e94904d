/* A growable string that printf appends to: for reports, summaries and
 * generated source. Not installed.
 *
 * Start from {0}. After a failure (out of memory, a bad format) `failed` is
 * set and later appends do nothing; `p` then holds what fit (or is NULL).
 * The caller frees `p`. */
#ifndef TCUDA_STRBUF_H
#define TCUDA_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

#include "internal.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tc__strbuf {
    char *p;
    size_t len, cap;
    bool failed;
} tc__strbuf;

void tc__strbuf_printf(tc__strbuf *b, const char *fmt, ...) TC_PRINTF(2, 3);

#ifdef __cplusplus
}
#endif

#endif
