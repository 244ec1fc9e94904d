/* Fuzzes jiterator's reading of a code string (tc__jit_parse), of the
 * "alpha=1.0, beta=2" scalar options (tc__jit_parse_scalars), and
 * tc_jit_fn_create / tc_jit_fn_create_multi_output over both. Nothing is
 * compiled.
 *
 * The input is a flags byte, then the code, the entry name and the scalars
 * string, separated by NUL bytes (a missing part is NULL). The parser keeps
 * names in fixed buffers: every name it gives back must be NUL-ended, at most
 * TC_JIT_MAX_NAME_LENGTH characters, and a whole identifier of the code (a
 * longer one must be refused, never cut to a prefix); the entry must be the name asked for; counts
 * stay within their limits. A failed call must leave *out alone and set a
 * message that starts with the call's name; a function made must answer its
 * accessors as create's checks promise, and be destroyed. */
#include <math.h>
#include <string.h>

#include "fuzz_input.h"
#include "jit/jit_internal.h"
#include "tcuda/tcuda.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { MAX_INPUT = 1 << 16 };

static char sentinel_; /* never used: its address marks an untouched *out */
#define SENTINEL ((tc_jit_fn *)(void *)&sentinel_)

/* The next NUL-ended part of buf[*at, n), or NULL when none is left. */
static const char *next_part(const char *buf, size_t n, size_t *at)
{
    if (*at >= n)
        return NULL;
    const char *p = buf + *at;
    *at += strlen(p) + 1;
    return p;
}

static bool ident_char(char c)
{
    return c == '_' || (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'z');
}

/* name is short enough and a whole identifier of text (a cut name is a
 * prefix of one, so not whole), or "" (an unnamed parameter). The parser
 * starts an identifier at a letter or '_', so digits may come before. */
static bool name_ok(const char *name, const char *text)
{
    size_t len = strnlen(name, TC__JIT_NAME_MAX);
    if (len > TC_JIT_MAX_NAME_LENGTH)
        return false;
    if (len == 0)
        return true;
    for (const char *p = strstr(text, name); p; p = strstr(p + 1, name))
        if ((p == text || !ident_char(p[-1]) || (p[-1] >= '0' && p[-1] <= '9')) &&
            !ident_char(p[len]))
            return true;
    return false;
}

static void check_parse(const char *code, const char *name)
{
    tc__jit_sig sig;
    memset(&sig, 0x5a, sizeof sig);
    if (tc__jit_parse(code, name, &sig) != TC_OK) {
        FZ_CHECK(tc_last_error()[0] != '\0');
        return;
    }
    FZ_CHECK(sig.name[0] != '\0' && name_ok(sig.name, code));
    FZ_CHECK(!name || !strcmp(sig.name, name));
    FZ_CHECK(sig.nparams >= 0 && sig.nparams <= TC__JIT_MAX_PARAMS);
    FZ_CHECK(!sig.long_name && !sig.long_param);
    for (int i = 0; i < sig.nparams; i++)
        FZ_CHECK(name_ok(sig.params[i], code));
}

static void check_scalars(const char *spec)
{
    int n = -1;
    char names[TC_JIT_MAX_SCALARS][TC__JIT_NAME_MAX];
    double values[TC_JIT_MAX_SCALARS];
    if (tc__jit_parse_scalars(spec, &n, names, values) != TC_OK) {
        FZ_CHECK(n == -1 && tc_last_error()[0] != '\0');
        return;
    }
    FZ_CHECK(n >= 0 && n <= TC_JIT_MAX_SCALARS);
    for (int i = 0; i < n; i++) {
        FZ_CHECK(names[i][0] != '\0' && name_ok(names[i], spec));
        FZ_CHECK(!isnan(values[i]));
        for (int j = 0; j < i; j++)
            FZ_CHECK(strcmp(names[i], names[j]) != 0);
    }
}

static void check_create(const char *code, const char *name, const char *scalars, bool multi,
                         int num_outputs)
{
    tc_jit_options o = {.scalars = scalars, .name = name};
    tc_jit_fn *fn = SENTINEL;
    tc_status st = multi ? tc_jit_fn_create_multi_output(code, num_outputs, &o, &fn)
                         : tc_jit_fn_create(code, &o, &fn);
    const char *call = multi ? "tc_jit_fn_create_multi_output: " : "tc_jit_fn_create: ";
    if (st != TC_OK) {
        FZ_CHECK(fn == SENTINEL);
        FZ_CHECK(!strncmp(tc_last_error(), call, strlen(call)));
        return;
    }
    const char *got = tc_jit_fn_name(fn);
    FZ_CHECK(got && got[0] && name_ok(got, code));
    FZ_CHECK(!name || !strcmp(got, name));
    int n_in = tc_jit_fn_num_inputs(fn), n_out = tc_jit_fn_num_outputs(fn);
    FZ_CHECK(n_in >= 1 && n_out == (multi ? num_outputs : 1));
    FZ_CHECK(n_in + n_out <= TC_JIT_MAX_OPERANDS);
    int ns = tc_jit_fn_num_scalars(fn);
    FZ_CHECK(ns >= 0 && ns <= TC_JIT_MAX_SCALARS);
    FZ_CHECK(tc_jit_fn_destroy(fn) == TC_OK);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > MAX_INPUT)
        return 0;
    uint8_t flags = data[0];
    size_t n = size - 1;
    char *buf = malloc(n + 1);
    if (!buf)
        return 0;
    memcpy(buf, data + 1, n);
    buf[n] = '\0';
    size_t at = 0;
    const char *code = next_part(buf, n, &at);
    const char *name = flags & 1 ? next_part(buf, n, &at) : NULL;
    const char *scalars = flags & 2 ? next_part(buf, n, &at) : NULL;
    if (code) {
        check_parse(code, name);
        check_create(code, name, scalars, (flags & 4) != 0, 1 + (flags >> 4) % 8);
    }
    if (scalars)
        check_scalars(scalars);
    free(buf);
    return 0;
}
