/* The strict JSON reader of json.h.
 *
 * Nothing here recurses or allocates more than the string it returns (at
 * most as long as its source text), so depth and size are bounded by the
 * caller's grammar and the header's length. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

tc_status tc__json_fail(const tc__json *j, const char *fmt, ...)
{
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return tc__fail(TC_ERROR_IO, "%s: header byte %zu: %s", j->what, (size_t)(j->p - j->begin),
                    why);
}

void tc__json_ws(tc__json *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

bool tc__json_accept(tc__json *j, char c)
{
    tc__json_ws(j);
    if (j->p < j->end && *j->p == c) {
        j->p++;
        return true;
    }
    return false;
}

/* The next character, printable, for messages. */
static const char *seen(const tc__json *j, char *buf, size_t n)
{
    if (j->p >= j->end)
        return "the end of the header";
    unsigned char c = (unsigned char)*j->p;
    if (c >= 0x20 && c < 0x7f)
        snprintf(buf, n, "'%c'", c);
    else
        snprintf(buf, n, "byte 0x%02x", c);
    return buf;
}

tc_status tc__json_expect(tc__json *j, char c, const char *context)
{
    if (tc__json_accept(j, c))
        return TC_OK;
    char buf[16];
    return tc__json_fail(j, "expected '%c' %s, found %s", c, context, seen(j, buf, sizeof buf));
}

/* Length of the UTF-8 sequence at s (at most n bytes), 0 when malformed. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return c ? 1 : 0;
    size_t len;
    uint32_t cp, min;
    if ((c & 0xe0) == 0xc0)
        len = 2, cp = c & 0x1f, min = 0x80;
    else if ((c & 0xf0) == 0xe0)
        len = 3, cp = c & 0x0f, min = 0x800;
    else if ((c & 0xf8) == 0xf0)
        len = 4, cp = c & 0x07, min = 0x10000;
    else
        return 0;
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

bool tc__utf8_valid(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_seq(u + i, n - i);
        if (!k)
            return false;
        i += k;
    }
    return true;
}

static int hex4(const char *p)
{
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

static size_t put_utf8(char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xc0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | cp >> 12);
        o[1] = (char)(0x80 | (cp >> 6 & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | cp >> 18);
    o[1] = (char)(0x80 | (cp >> 12 & 0x3f));
    o[2] = (char)(0x80 | (cp >> 6 & 0x3f));
    o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* The code point of a \u escape at j->p (just after the "\u"), joining a
 * surrogate pair; advances past it. */
static tc_status unicode_escape(tc__json *j, uint32_t *cp)
{
    int hi = j->end - j->p >= 4 ? hex4(j->p) : -1;
    if (hi < 0)
        return tc__json_fail(j, "\\u must be followed by 4 hex digits");
    j->p += 4;
    if (hi >= 0xdc00 && hi <= 0xdfff)
        return tc__json_fail(j, "\\u%04x is a low surrogate without a high one", hi);
    if (hi < 0xd800 || hi > 0xdbff) {
        *cp = (uint32_t)hi;
        return TC_OK;
    }
    int lo = j->end - j->p >= 6 && j->p[0] == '\\' && j->p[1] == 'u' ? hex4(j->p + 2) : -1;
    if (lo < 0xdc00 || lo > 0xdfff)
        return tc__json_fail(j, "\\u%04x is a high surrogate without a low one", hi);
    j->p += 6;
    *cp = 0x10000 + ((uint32_t)(hi - 0xd800) << 10) + (uint32_t)(lo - 0xdc00);
    return TC_OK;
}

static tc_status escape(tc__json *j, char *o, size_t *len)
{
    if (j->p >= j->end)
        return tc__json_fail(j, "the header ends inside a string");
    char c = *j->p++;
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    const char *k = c ? strchr(from, c) : NULL;
    if (k) {
        o[0] = to[k - from];
        *len = 1;
        return TC_OK;
    }
    if (c != 'u') {
        j->p--;
        return tc__json_fail(j, "'\\%c' is not a JSON escape", c >= 0x20 && c < 0x7f ? c : '?');
    }
    uint32_t cp = 0;
    TC_TRY(unicode_escape(j, &cp));
    if (cp == 0)
        return tc__json_fail(j, "\\u0000 (a NUL character) is not allowed in names and values");
    *len = put_utf8(o, cp);
    return TC_OK;
}

tc_status tc__json_string(tc__json *j, char **out)
{
    TC_TRY(tc__json_expect(j, '"', "to start a string"));
    const char *start = j->p;
    /* The decoded string is never longer than its source: find where it ends. */
    const char *e = start;
    while (e < j->end && *e != '"')
        e += *e == '\\' && j->end - e > 1 ? 2 : 1;
    size_t cap = (size_t)(e - start);
    char *s = malloc(cap + 1);
    if (!s)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "could not allocate %zu bytes for a string",
                        cap + 1);
    size_t n = 0;
    tc_status st = TC_OK;
    for (;;) {
        if (j->p >= j->end) {
            st = tc__json_fail(j, "the header ends inside a string");
            break;
        }
        unsigned char c = (unsigned char)*j->p;
        if (c == '"') {
            j->p++;
            break;
        }
        if (c < 0x20) {
            st = tc__json_fail(j,
                               "control character 0x%02x inside a string (JSON needs it "
                               "escaped)",
                               c);
            break;
        }
        size_t k = 0;
        char buf[4];
        if (c == '\\') {
            j->p++;
            st = escape(j, buf, &k);
            if (st != TC_OK)
                break;
        } else {
            k = utf8_seq((const unsigned char *)j->p, (size_t)(j->end - j->p));
            if (!k) {
                st = tc__json_fail(j, "the string is not valid UTF-8");
                break;
            }
            memcpy(buf, j->p, k);
            j->p += k;
        }
        if (n + k > cap) { /* cannot happen (see cap); kept so a mistake is no overflow */
            st = tc__fail(TC_ERROR_INTERNAL, "%s: a string outgrew its buffer", j->what);
            break;
        }
        memcpy(s + n, buf, k);
        n += k;
    }
    if (st != TC_OK) {
        free(s);
        return st;
    }
    s[n] = '\0';
    *out = s;
    return TC_OK;
}

tc_status tc__json_uint(tc__json *j, uint64_t *out)
{
    tc__json_ws(j);
    const char *start = j->p;
    if (j->p >= j->end || *j->p < '0' || *j->p > '9') {
        char buf[16];
        return tc__json_fail(j, "expected a non-negative integer, found %s",
                             seen(j, buf, sizeof buf));
    }
    uint64_t v = 0;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
        unsigned d = (unsigned)(*j->p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return tc__json_fail(j, "the integer does not fit in 64 bits");
        v = v * 10 + d;
        j->p++;
    }
    if (*start == '0' && j->p - start > 1) {
        j->p = start;
        return tc__json_fail(j, "an integer with a leading zero is not JSON");
    }
    if (j->p < j->end && (*j->p == '.' || *j->p == 'e' || *j->p == 'E'))
        return tc__json_fail(j, "expected an integer, found a fraction or an exponent");
    *out = v;
    return TC_OK;
}
