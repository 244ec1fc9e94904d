/* Reading a jiterator code string: which function is the entry, and what its
 * parameters are called; and the "alpha=1.0, beta=2" scalar options.
 *
 * Not a C++ parser: the code is first blanked of comments, string and
 * character literals and preprocessor lines, then scanned at brace depth 0
 * for `template <...> ... name ( params ) {`. Parameters are split at commas
 * outside (), <>, [] and {}; a parameter's name is its last identifier when
 * it has more than one word ("T x" names x, "T" is unnamed). Anything the
 * scan does not understand is reported, never guessed. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "jit_internal.h"

/* A copy of code with comments, literals and # lines turned into spaces. */
static char *blank_code(const char *code)
{
    size_t n = strlen(code);
    char *s = malloc(n + 1);
    if (!s)
        return NULL;
    memcpy(s, code, n + 1);
    bool line_start = true;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '/' && s[i + 1] == '/') {
            while (i < n && s[i] != '\n')
                s[i++] = ' ';
        } else if (c == '/' && s[i + 1] == '*') {
            s[i++] = ' ';
            s[i++] = ' ';
            for (; i < n && !(s[i] == '*' && s[i + 1] == '/'); i++)
                if (s[i] != '\n')
                    s[i] = ' ';
            if (i < n) {
                s[i++] = ' ';
                s[i] = ' ';
            }
        } else if (c == '"' || c == '\'') {
            s[i++] = ' ';
            while (i < n && s[i] != c) {
                if (s[i] == '\\' && i + 1 < n)
                    s[i++] = ' ';
                s[i++] = ' ';
            }
            if (i < n)
                s[i] = ' ';
        } else if (c == '#' && line_start) {
            while (i < n && s[i] != '\n')
                s[i++] = ' ';
        }
        if (i < n && s[i] == '\n')
            line_start = true;
        else if (i < n && !isspace((unsigned char)s[i]))
            line_start = false;
    }
    return s;
}

static bool is_ident_char(char c) { return isalnum((unsigned char)c) || c == '_'; }

/* Index just past the bracket matching s[i] (one of ( < [ {), or n. Only
 * brackets of the same kind count: a body's `a < b` or `p->x` must not
 * count as angle brackets, nor a template argument list's parentheses. */
static size_t skip_group(const char *s, size_t n, size_t i)
{
    char open = s[i], close = open == '(' ? ')' : open == '<' ? '>' : open == '[' ? ']' : '}';
    int depth = 0;
    for (; i < n; i++) {
        if (s[i] == open)
            depth++;
        else if (s[i] == close && --depth == 0)
            return i + 1;
    }
    return n;
}

/* Copies the last identifier of s[a, b) into out ("" if none, cut at
 * TC_JIT_MAX_NAME_LENGTH, its full length in *len); counts words. */
static int last_ident(const char *s, size_t a, size_t b, char *out, size_t *full_len)
{
    int words = 0;
    out[0] = '\0';
    *full_len = 0;
    for (size_t i = a; i < b;) {
        if (is_ident_char(s[i]) && !isdigit((unsigned char)s[i])) {
            size_t j = i;
            while (j < b && is_ident_char(s[j]))
                j++;
            size_t len = j - i < TC__JIT_NAME_MAX - 1 ? j - i : TC__JIT_NAME_MAX - 1;
            *full_len = j - i;
            memcpy(out, s + i, len);
            out[len] = '\0';
            words++;
            i = j;
        } else {
            i++;
        }
    }
    return words;
}

/* Is the return type s[a, b) void (qualifiers aside)? */
static bool type_is_void(const char *s, size_t a, size_t b)
{
    static const char *const quals[] = {"inline",          "static",    "__device__", "__host__",
                                        "__forceinline__", "constexpr", NULL};
    bool is_void = false, other = false;
    for (size_t i = a; i < b;) {
        if (!is_ident_char(s[i])) {
            if (!isspace((unsigned char)s[i]))
                other = true;
            i++;
            continue;
        }
        size_t j = i;
        while (j < b && is_ident_char(s[j]))
            j++;
        bool q = false;
        for (int k = 0; quals[k]; k++)
            q |= strlen(quals[k]) == j - i && !memcmp(s + i, quals[k], j - i);
        if (j - i == 4 && !memcmp(s + i, "void", 4))
            is_void = true;
        else if (!q)
            other = true;
        i = j;
    }
    return is_void && !other;
}

/* The parameters in s[a, b) (inside the parentheses). */
static tc_status parse_params(const char *s, size_t a, size_t b, tc__jit_sig *sig)
{
    sig->nparams = 0;
    size_t start = a;
    bool any = false;
    for (size_t i = a; i < b; i++)
        any |= !isspace((unsigned char)s[i]);
    if (!any)
        return TC_OK;
    for (size_t i = a; i <= b;) {
        if (i < b && (s[i] == '(' || s[i] == '<' || s[i] == '[' || s[i] == '{')) {
            i = skip_group(s, b, i);
            continue;
        }
        if (i == b || s[i] == ',') {
            if (sig->nparams == TC__JIT_MAX_PARAMS)
                return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                                "the function %s has more than %d parameters", sig->name,
                                TC__JIT_MAX_PARAMS);
            size_t end = i;
            for (size_t k = start; k < i; k++)
                if (s[k] == '=') { /* a default value: the name comes before it */
                    end = k;
                    break;
                }
            int p = sig->nparams++;
            bool ref = false;
            for (size_t k = start; k < end; k++)
                ref |= s[k] == '&';
            sig->is_ref[p] = ref;
            size_t len;
            if (last_ident(s, start, end, sig->params[p], &len) < 2)
                sig->params[p][0] = '\0';
            else if (len > TC_JIT_MAX_NAME_LENGTH && !sig->long_param) {
                sig->long_param = len;
                sig->long_param_index = p;
            }
            start = i + 1;
        }
        i++;
    }
    return TC_OK;
}

/* One `template <...> ret name (params)` at i (just past "template");
 * returns the index after it, or n when it is not a function definition. */
static size_t parse_template(const char *s, size_t n, size_t i, tc__jit_sig *sig, bool *found,
                             tc_status *st)
{
    *found = false;
    while (i < n && isspace((unsigned char)s[i]))
        i++;
    if (i >= n || s[i] != '<')
        return i;
    i = skip_group(s, n, i);
    size_t type_start = i;
    /* up to the first '(' , or a ';' / '{' that ends something else */
    while (i < n && s[i] != '(' && s[i] != ';' && s[i] != '{')
        i++;
    if (i >= n || s[i] != '(')
        return i;
    size_t open = i, name_end = i;
    while (name_end > type_start && isspace((unsigned char)s[name_end - 1]))
        name_end--;
    size_t name_start = name_end;
    while (name_start > type_start && is_ident_char(s[name_start - 1]))
        name_start--;
    if (name_start == name_end)
        return i + 1;
    size_t close = skip_group(s, n, open);
    size_t j = close;
    while (j < n && s[j] != '{' && s[j] != ';')
        j++; /* const, noexcept, -> ret ... */
    if (j >= n || s[j] != '{')
        return j; /* a declaration */
    size_t len = name_end - name_start;
    if (len > TC_JIT_MAX_NAME_LENGTH) { /* refused if it is the entry (tc__jit_parse) */
        sig->long_name = len;
        len = TC_JIT_MAX_NAME_LENGTH;
    }
    memcpy(sig->name, s + name_start, len);
    sig->name[len] = '\0';
    sig->returns_void = type_is_void(s, type_start, name_start);
    *st = parse_params(s, open + 1, close - 1, sig);
    if (*st != TC_OK)
        return n;
    *found = true;
    return skip_group(s, n, j);
}

tc_status tc__jit_parse(const char *code, const char *name, tc__jit_sig *out)
{
    TC_CHECK_ARG(code, "the code is NULL");
    TC_CHECK_ARG(!name || strlen(name) <= TC_JIT_MAX_NAME_LENGTH,
                 "options.name has %zu characters; jiterator names are at most %d "
                 "(TC_JIT_MAX_NAME_LENGTH)",
                 name ? strlen(name) : 0, TC_JIT_MAX_NAME_LENGTH);
    char *s = blank_code(code);
    if (!s)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory");
    size_t n = strlen(s);
    bool any = false, have = false;
    for (size_t i = 0; i < n; i++)
        any |= !isspace((unsigned char)s[i]);
    tc__jit_sig best, cur;
    memset(&best, 0, sizeof best);
    tc_status st = TC_OK;
    for (size_t i = 0; i < n && st == TC_OK;) {
        if (s[i] == '{') { /* a body or a namespace at top level: not entered */
            i = skip_group(s, n, i);
            continue;
        }
        bool word_start = is_ident_char(s[i]) && (i == 0 || !is_ident_char(s[i - 1]));
        if (word_start && !strncmp(s + i, "template", 8) && !is_ident_char(s[i + 8])) {
            bool found;
            memset(&cur, 0, sizeof cur);
            size_t next = parse_template(s, n, i + 8, &cur, &found, &st);
            /* a cut name never equals `name`, which is short enough */
            if (found && (!name || (!cur.long_name && !strcmp(cur.name, name)))) {
                best = cur;
                have = true;
            }
            i = next > i + 8 ? next : i + 8;
            continue;
        }
        i++;
    }
    free(s);
    if (st != TC_OK)
        return st;
    if (!any)
        return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                        "the code is empty; give a function template such as \"template "
                        "<typename T> T f(T x, T y) { return x + y; }\"");
    if (!have && name)
        return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                        "the code defines no function template named \"%s\"", name);
    if (!have)
        return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                        "the code defines no function template; write the element function "
                        "as \"template <typename T> T f(T x, T y) { return x + y; }\"");
    if (best.long_name)
        return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                        "the entry function's name (%.40s...) has %zu characters; jiterator "
                        "names are at most %d (TC_JIT_MAX_NAME_LENGTH)",
                        best.name, best.long_name, TC_JIT_MAX_NAME_LENGTH);
    if (best.long_param)
        return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                        "parameter %d of %s has a name (%.40s...) of %zu characters; jiterator "
                        "names are at most %d (TC_JIT_MAX_NAME_LENGTH)",
                        best.long_param_index + 1, best.name, best.params[best.long_param_index],
                        best.long_param, TC_JIT_MAX_NAME_LENGTH);
    *out = best;
    return TC_OK;
}

static const char *skip_ws(const char *p)
{
    while (isspace((unsigned char)*p))
        p++;
    return p;
}

tc_status tc__jit_parse_scalars(const char *spec, int *n, char names[][TC__JIT_NAME_MAX],
                                double *values)
{
    int k = 0;
    const char *p = spec ? skip_ws(spec) : "";
    while (*p) {
        const char *a = p;
        while (is_ident_char(*p))
            p++;
        if (p == a || isdigit((unsigned char)*a))
            return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                            "options.scalars: expected a parameter name at \"%s\" (write "
                            "\"alpha=1.0, beta=2\")",
                            a);
        if (k == TC_JIT_MAX_SCALARS)
            return tc__fail(TC_ERROR_INVALID_ARGUMENT, "options.scalars: more than %d scalars",
                            TC_JIT_MAX_SCALARS);
        size_t len = (size_t)(p - a);
        if (len > TC_JIT_MAX_NAME_LENGTH)
            return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                            "options.scalars: the name \"%.40s...\" has %zu characters; "
                            "jiterator names are at most %d (TC_JIT_MAX_NAME_LENGTH)",
                            a, len, TC_JIT_MAX_NAME_LENGTH);
        memcpy(names[k], a, len);
        names[k][len] = '\0';
        for (int j = 0; j < k; j++)
            if (!strcmp(names[j], names[k]))
                return tc__fail(TC_ERROR_INVALID_ARGUMENT, "options.scalars: \"%s\" is given twice",
                                names[k]);
        p = skip_ws(p);
        if (*p != '=')
            return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                            "options.scalars: \"%s\" needs a default value (\"%s=1.0\")", names[k],
                            names[k]);
        p = skip_ws(p + 1);
        char *end;
        errno = 0;
        double v = strtod(p, &end);
        if (end == p || errno == ERANGE || isnan(v))
            return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                            "options.scalars: the default of \"%s\" is not a number: \"%.20s\"",
                            names[k], p);
        values[k++] = v;
        p = skip_ws(end);
        if (*p == ',')
            p = skip_ws(p + 1);
        else if (*p)
            return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                            "options.scalars: expected ',' or the end at \"%s\"", p);
    }
    *n = k;
    return TC_OK;
}
