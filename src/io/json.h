/* A strict reader of the JSON that safetensors headers are made of: objects,
 * arrays, strings and non-negative integers, nothing else. Not installed.
 *
 * The caller walks the grammar it expects with these calls; each consumes
 * the whitespace before its token. A failure is TC_ERROR_IO with a message
 * "<what>: header byte N: <why>" (N counted from the start of the JSON text).
 * Strings are checked as RFC 8259 says (escapes, no raw control characters)
 * and as UTF-8 (no overlong forms, surrogates or code points above U+10FFFF);
 * \u0000 is refused, since the result is a C string. */
#ifndef TCUDA_IO_JSON_H
#define TCUDA_IO_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tc__json {
    const char *begin, *p, *end;
    const char *what; /* named first in every message, e.g. the file's path */
} tc__json;

/* Fails with TC_ERROR_IO at the current position. */
tc_status tc__json_fail(const tc__json *j, const char *fmt, ...) TC_PRINTF(2, 3);
/* Skips spaces, tabs, line feeds and carriage returns. */
void tc__json_ws(tc__json *j);
/* True (and consumed) when the next token is the character c. */
bool tc__json_accept(tc__json *j, char c);
/* Consumes the character c, or fails saying `context` expected it. */
tc_status tc__json_expect(tc__json *j, char c, const char *context);
/* A string, decoded into a new NUL-terminated UTF-8 string (caller frees). */
tc_status tc__json_string(tc__json *j, char **out);
/* An integer without sign, fraction or exponent, at most UINT64_MAX. */
tc_status tc__json_uint(tc__json *j, uint64_t *out);

/* True when s[0..n) is well-formed UTF-8 without NUL bytes. */
bool tc__utf8_valid(const char *s, size_t n);

#ifdef __cplusplus
}
#endif

#endif
