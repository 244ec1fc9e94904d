/* jiterator without a GPU: name discovery and parameter parsing, the scalar
 * options, every bad input of create and call (clear errors, nothing
 * written), cache keys, the disk cache (round trip, corrupt, truncated and
 * foreign files, concurrent writer processes), and the CPU path compiled by
 * the host compiler, compared bit for bit with the built-in ops
 * (tc_jit_check.h), including a second process that loads from the disk
 * cache, two threads that compile one function once, and two threads that
 * compile two functions at once. The CPU path needs
 * a C++ compiler: without one those parts check the NOT_SUPPORTED answer. */
#include <dirent.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tensor/tensor_internal.h"
#include "jit/jit_internal.h"
#include "tc_jit_check.h"
#include "tc_test.h"

static const tc_device cpu = {TC_CPU, -1};
static char cache_dir[256];

/* ---- parsing -------------------------------------------------------------------- */

static void test_parse(void)
{
    tc__jit_sig s;
    CHECK_OK(tc__jit_parse("template <typename T> T my_kernel(T x, T y, T alpha) { return -x + "
                           "alpha * y; }",
                           NULL, &s));
    CHECK(!strcmp(s.name, "my_kernel") && s.nparams == 3 && !s.returns_void);
    CHECK(!strcmp(s.params[0], "x") && !strcmp(s.params[2], "alpha") && !s.is_ref[2]);
    /* helpers first: the last function is the entry; comments and strings skipped */
    const char *two = "// template <typename T> T fake(T a) { return a; }\n"
                      "template <typename T> T util_fn(T x, T y) { return x > y ? x : y; }\n"
                      "/* template <typename T> T fake2(T a) {} */\n"
                      "#define TWO 2\n"
                      "template <typename T>\n__device__ T my_kernel(T x, T y, T val)\n{\n"
                      "  const char *s = \"template <class Q> Q bad(Q q) {\"; (void)s;\n"
                      "  return util_fn(x, y) * val;\n}\n";
    CHECK_OK(tc__jit_parse(two, NULL, &s));
    CHECK(!strcmp(s.name, "my_kernel") && s.nparams == 3 && !strcmp(s.params[2], "val"));
    CHECK_OK(tc__jit_parse(two, "util_fn", &s));
    CHECK(!strcmp(s.name, "util_fn") && s.nparams == 2);
    CHECK_STATUS(tc__jit_parse(two, "nope", &s), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "nope") != NULL);
    /* `<` and `->` in a body are not angle brackets (the body was once
     * never closed, and the helper taken for the entry) */
    const char *lt = "template <typename T> T h(T a, T b) { return a < b ? a : b; }\n"
                     "template <typename T> T f(T x, T y) { return h(x, y) << 1; }\n";
    CHECK_OK(tc__jit_parse(lt, NULL, &s));
    CHECK(!strcmp(s.name, "f") && s.nparams == 2);
    CHECK_OK(tc__jit_parse(lt, "f", &s));
    CHECK(!strcmp(s.name, "f"));
    /* references, void, nested template arguments, a default */
    CHECK_OK(tc__jit_parse("template <typename T, int N = 2> inline void f(T a, Pair<T, T> b, T "
                           "&o1, T& o2) { o1 = a; o2 = a; }",
                           NULL, &s));
    CHECK(s.returns_void && s.nparams == 4 && s.is_ref[2] && s.is_ref[3] && !s.is_ref[1]);
    CHECK(!strcmp(s.params[1], "b") && !strcmp(s.params[3], "o2"));
    CHECK_OK(tc__jit_parse("template <typename T> T g(T) { return 1; }", NULL, &s));
    CHECK(s.nparams == 1 && s.params[0][0] == '\0');
    /* errors */
    CHECK_STATUS(tc__jit_parse("", NULL, &s), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "empty") != NULL);
    CHECK_STATUS(tc__jit_parse("  \n // just a comment\n", NULL, &s), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc__jit_parse("float f(float x) { return x; }", NULL, &s),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "template") != NULL);
    CHECK_STATUS(tc__jit_parse("template <typename T> T f(T x);", NULL, &s),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc__jit_parse(NULL, NULL, &s), TC_ERROR_INVALID_ARGUMENT);
}

/* Random token soup (unbalanced brackets, open comments and literals, #
 * lines): the parser answers, never reads out of bounds (ASan in CI). */
static void test_parse_random(void)
{
    static const char *const tokens[] = {
        "template", "<", ">",  "(", ")",  "{", "}", "T",        " x",   ",", "&", "/*", "*/", "//",
        "\"",       "'", "\\", "#", "\n", ";", " ", "typename", "void", "=", "[", "]",  "f"};
    int ntok = (int)(sizeof tokens / sizeof *tokens), ok = 0;
    char code[512];
    for (int r = 0; r < 3000; r++) {
        /* a third start as a function template, so that some parse */
        size_t len = 0;
        if (r % 3 == 0)
            len = (size_t)snprintf(code, sizeof code, "template <typename T> T f(T x");
        int n = 1 + (int)(tc_test_rand() % 40);
        for (int i = 0; i < n; i++) {
            const char *t = tokens[tc_test_rand() % (uint64_t)ntok];
            size_t l = strlen(t);
            if (len + l >= sizeof code)
                break;
            memcpy(code + len, t, l);
            len += l;
        }
        code[len] = '\0';
        if (r % 6 == 0 && len + 8 < sizeof code)
            strcat(code, ") { }");
        tc__jit_sig s;
        char names[TC_JIT_MAX_SCALARS][TC__JIT_NAME_MAX];
        double v[TC_JIT_MAX_SCALARS];
        int ns;
        tc_status st = tc__jit_parse(code, NULL, &s);
        ok += st == TC_OK;
        CHECK(st == TC_OK || (st == TC_ERROR_INVALID_ARGUMENT && tc_last_error()[0]));
        if (st == TC_OK)
            CHECK(s.name[0] != '\0' && s.nparams >= 0 && s.nparams <= TC__JIT_MAX_PARAMS);
        st = tc__jit_parse_scalars(code, &ns, names, v);
        CHECK(st == TC_OK || st == TC_ERROR_INVALID_ARGUMENT);
    }
    printf("parser: %d of 3000 random strings had a function template\n", ok);
}

static void test_scalar_options(void)
{
    int n = -1;
    char names[TC_JIT_MAX_SCALARS][TC__JIT_NAME_MAX];
    double v[TC_JIT_MAX_SCALARS];
    CHECK_OK(tc__jit_parse_scalars("alpha=1.0, beta = -2.5e3,gamma=3", &n, names, v));
    CHECK(n == 3 && !strcmp(names[1], "beta") && v[1] == -2500.0 && v[2] == 3.0);
    CHECK_OK(tc__jit_parse_scalars(NULL, &n, names, v));
    CHECK(n == 0);
    CHECK_OK(tc__jit_parse_scalars("  ", &n, names, v));
    CHECK(n == 0);
    const char *bad[] = {"alpha",   "alpha=", "1x=2",    "a=1 b=2",
                         "a=1,a=2", "a=nan",  "a=1e999", "=1",
                         "a=1,,",   "a=1x",   "a-b=1",   "a=1,b=2,c=3,d=4,e=5,f=6,g=7,h=8,i=9"};
    for (int i = 0; i < 12; i++) {
        n = -1;
        CHECK_STATUS(tc__jit_parse_scalars(bad[i], &n, names, v), TC_ERROR_INVALID_ARGUMENT);
        CHECK(n == -1);
    }
}

/* ---- create and call: bad inputs ------------------------------------------------ */

static void test_create_errors(void)
{
    tc_jit_fn *fn = (tc_jit_fn *)0x1;
    tc_jit_options o = {0};
    CHECK_STATUS(tc_jit_fn_create(NULL, NULL, &fn), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_jit_fn_create("", NULL, &fn), TC_ERROR_INVALID_ARGUMENT);
    CHECK(!strncmp(tc_last_error(), "tc_jit_fn_create: ", 18));
    CHECK_STATUS(tc_jit_fn_create("int f(int x) { return x; }", NULL, &fn),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_jit_fn_create(jc_add, NULL, NULL), TC_ERROR_INVALID_ARGUMENT);
    /* single output must return a value; multi-output must not */
    CHECK_STATUS(tc_jit_fn_create(jc_sumdiff, NULL, &fn), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_jit_fn_create_multi_output(jc_add, 1, NULL, &fn), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_jit_fn_create_multi_output(jc_sumdiff, 0, NULL, &fn),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_jit_fn_create_multi_output(jc_sumdiff, 8, NULL, &fn),
                 TC_ERROR_INVALID_ARGUMENT);
    /* 3 outputs: only 1 parameter left, and it is not a reference mismatch */
    CHECK_STATUS(tc_jit_fn_create_multi_output(jc_sumdiff, 3, NULL, &fn),
                 TC_ERROR_INVALID_ARGUMENT);
    /* scalars: unknown name, too many, bad syntax */
    o.scalars = "beta=1";
    CHECK_STATUS(tc_jit_fn_create(jc_axpy, &o, &fn), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "alpha") != NULL);
    o.scalars = "alpha=2, y=1";
    CHECK_STATUS(tc_jit_fn_create(jc_axpy, &o, &fn), TC_ERROR_INVALID_ARGUMENT);
    o.scalars = "x=1, y=1, alpha=2";
    CHECK_STATUS(tc_jit_fn_create(jc_axpy, &o, &fn), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "no tensor input") != NULL);
    o.scalars = "alpha";
    CHECK_STATUS(tc_jit_fn_create(jc_axpy, &o, &fn), TC_ERROR_INVALID_ARGUMENT);
    o.scalars = NULL;
    o.name = "missing";
    CHECK_STATUS(tc_jit_fn_create(jc_axpy, &o, &fn), TC_ERROR_INVALID_ARGUMENT);
    CHECK(fn == (tc_jit_fn *)0x1); /* never written on failure */

    /* names: up to TC_JIT_MAX_NAME_LENGTH characters, never cut (a longer
     * entry name was once cut at 127 and the cut name compiled) */
    char longest[TC_JIT_MAX_NAME_LENGTH + 2], code[1024];
    memset(longest, 'n', sizeof longest);
    longest[TC_JIT_MAX_NAME_LENGTH] = '\0';
    snprintf(code, sizeof code, "template <typename T> T %s(T x) { return x; }", longest);
    o = (tc_jit_options){0};
    CHECK_OK(tc_jit_fn_create(code, NULL, &fn));
    CHECK(!strcmp(tc_jit_fn_name(fn), longest));
    CHECK_OK(tc_jit_fn_destroy(fn));
    o.name = longest;
    CHECK_OK(tc_jit_fn_create(code, &o, &fn));
    CHECK_OK(tc_jit_fn_destroy(fn));
    fn = (tc_jit_fn *)0x1;
    longest[TC_JIT_MAX_NAME_LENGTH] = 'n'; /* one more */
    longest[TC_JIT_MAX_NAME_LENGTH + 1] = '\0';
    snprintf(code, sizeof code, "template <typename T> T %s(T x) { return x; }", longest);
    CHECK_STATUS(tc_jit_fn_create(code, NULL, &fn), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "128 characters") && strstr(tc_last_error(), "at most 127"));
    o.name = longest; /* the options' name */
    CHECK_STATUS(tc_jit_fn_create(jc_add, &o, &fn), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "options.name") && strstr(tc_last_error(), "at most 127"));
    o.name = NULL;
    snprintf(code, sizeof code, "template <typename T> T f(T x, T %s) { return x + %s; }", longest,
             longest); /* a parameter's */
    o.scalars = NULL;
    CHECK_STATUS(tc_jit_fn_create(code, NULL, &fn), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "parameter 2") && strstr(tc_last_error(), "at most 127"));
    char spec[300];
    snprintf(spec, sizeof spec, "%s=1", longest); /* a scalar's */
    o.scalars = spec;
    CHECK_STATUS(tc_jit_fn_create(jc_axpy, &o, &fn), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "options.scalars") && strstr(tc_last_error(), "at most 127"));
    o.scalars = NULL;
    /* a helper's long name is no matter when another function is the entry */
    snprintf(code, sizeof code,
             "template <typename T> T %s(T x) { return x; }\n"
             "template <typename T> T g(T x) { return %s(x); }",
             longest, longest);
    CHECK_OK(tc_jit_fn_create(code, NULL, &fn));
    CHECK(!strcmp(tc_jit_fn_name(fn), "g"));
    CHECK_OK(tc_jit_fn_destroy(fn));
    fn = (tc_jit_fn *)0x1;

    /* a good one, its accessors, and the handle rules */
    o = (tc_jit_options){.scalars = "alpha=0.5"};
    CHECK_OK(tc_jit_fn_create(jc_axpy, &o, &fn));
    CHECK(!strcmp(tc_jit_fn_name(fn), "axpy"));
    CHECK(tc_jit_fn_num_inputs(fn) == 2 && tc_jit_fn_num_scalars(fn) == 1 &&
          tc_jit_fn_num_outputs(fn) == 1);
    CHECK_OK(tc_jit_fn_destroy(fn));
    CHECK(tc_jit_fn_name(fn) == NULL && tc_jit_fn_num_inputs(fn) == -1);
    CHECK_STATUS(tc_jit_fn_destroy(fn), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_jit_fn_destroy(NULL), TC_ERROR_INVALID_ARGUMENT);
    tc_jit_fn *junk = tc_test_garbage(256);
    CHECK_STATUS(tc_jit_fn_destroy(junk), TC_ERROR_INVALID_HANDLE);
    const tc_tensor *none[1] = {NULL};
    tc_tensor *out[1] = {NULL};
    CHECK_STATUS(tc_jit_fn_call(fn, none, 1, NULL, out), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_jit_fn_call(junk, none, 1, NULL, out), TC_ERROR_INVALID_HANDLE);
    free(junk);
}

static void test_call_errors(void)
{
    tc_jit_fn *fn = NULL;
    CHECK_OK(tc_jit_fn_create(jc_add, NULL, &fn));
    int64_t s3[1] = {3}, s4[1] = {4};
    tc_tensor *a = jc_rand(cpu, TC_FLOAT32, 1, s3), *b = jc_rand(cpu, TC_FLOAT32, 1, s4);
    tc_tensor *c = jc_rand(cpu, TC_FLOAT32, 1, s3), *dead = jc_rand(cpu, TC_FLOAT32, 1, s3);
    tc_tensor_release(dead);
    tc_tensor *out[1] = {NULL};
    const tc_tensor *ab[2] = {a, b}, *ac[2] = {a, c}, *a1[1] = {a}, *ad[2] = {a, dead};
    const tc_tensor *an[2] = {a, NULL}, *acc[3] = {a, c, c};
    /* wrong arity */
    CHECK_STATUS(tc_jit_fn_call(fn, a1, 1, NULL, out), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "takes 2 tensor inputs") != NULL);
    CHECK(!strncmp(tc_last_error(), "tc_jit_fn_call: ", 16));
    CHECK_STATUS(tc_jit_fn_call(fn, acc, 3, NULL, out), TC_ERROR_INVALID_ARGUMENT);
    /* NULLs, dead tensors */
    CHECK_STATUS(tc_jit_fn_call(fn, NULL, 2, NULL, out), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_jit_fn_call(fn, ac, 2, NULL, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_jit_fn_call(fn, an, 2, NULL, out), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_jit_fn_call(fn, ad, 2, NULL, out), TC_ERROR_INVALID_HANDLE);
    CHECK(strstr(tc_last_error(), "inputs[1]") != NULL);
    /* shapes that do not broadcast; a given output of the wrong shape */
    CHECK_STATUS(tc_jit_fn_call(fn, ab, 2, NULL, out), TC_ERROR_SHAPE);
    tc_tensor *wrong = jc_rand(cpu, TC_FLOAT32, 1, s4);
    out[0] = wrong;
    CHECK_STATUS(tc_jit_fn_call(fn, ac, 2, NULL, out), TC_ERROR_SHAPE);
    CHECK(out[0] == wrong);
    out[0] = NULL;
    /* device mismatch: a GPU tensor with a CPU one (only where a GPU exists) */
    if (tc_is_available()) {
        tc_tensor *g = NULL;
        CHECK_OK(tc_tensor_to(c, (tc_device){TC_CUDA, 0}, TC_FLOAT32, false, &g));
        const tc_tensor *ag[2] = {a, g};
        CHECK_STATUS(tc_jit_fn_call(fn, ag, 2, NULL, out), TC_ERROR_DEVICE_MISMATCH);
        tc_tensor_release(g);
    }
    CHECK(out[0] == NULL);
    tc_tensor_release(a);
    tc_tensor_release(b);
    tc_tensor_release(c);
    tc_tensor_release(wrong);
    CHECK_OK(tc_jit_fn_destroy(fn));
}

/* ---- outputs that overlap the inputs --------------------------------------------- */

/* A view of t with the given geometry (offset in elements). */
static tc_tensor *view_of(const tc_tensor *t, int ndim, const int64_t *sizes,
                          const int64_t *strides, int64_t offset)
{
    tc_tensor *v = NULL;
    CHECK_OK(tc__make_view(t, ndim, sizes, strides, offset, &v));
    return v;
}

static void host_values(const tc_tensor *t, double *v)
{
    CHECK_OK(tc_tensor_to_host(t, TC_FLOAT64, v));
}

/* Outputs that PyTorch refuses: a partial overlap with an input (a.T of a,
 * shifted windows of one buffer), several elements in one place (expanded),
 * two outputs over one memory. INVALID_ARGUMENT naming the operands, before
 * anything is compiled or written (it once returned TC_OK with wrong
 * values). The check is the device-independent part of the call: the same on
 * a GPU. */
static void test_overlap_errors(tc_device dev)
{
    tc_jit_fn *add = NULL, *sd = NULL;
    CHECK_OK(tc_jit_fn_create(jc_add, NULL, &add));
    CHECK_OK(tc_jit_fn_create_multi_output(jc_sumdiff, 2, NULL, &sd));
    int64_t s44[2] = {4, 4}, s14[2] = {1, 4}, s9[1] = {9}, s8[1] = {8};
    tc_tensor *a = jc_rand(dev, TC_FLOAT32, 2, s44), *c = jc_rand(dev, TC_FLOAT32, 2, s44);
    tc_tensor *at = NULL, *row = jc_rand(dev, TC_FLOAT32, 2, s14), *e = NULL;
    CHECK_OK(tc_tensor_transpose(a, 0, 1, &at));
    CHECK_OK(tc_tensor_expand(row, 2, s44, &e));
    double before[16], after[16];
    host_values(a, before);

    const tc_tensor *ac[2] = {a, c}, *ca[2] = {c, a};
    tc_tensor *out[2] = {at, NULL};
    CHECK_STATUS(tc_jit_fn_call(add, ac, 2, NULL, out), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "outputs[0] and inputs[0]") &&
          strstr(tc_last_error(), "single memory location"));
    CHECK_STATUS(tc_jit_fn_call(add, ca, 2, NULL, out), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "outputs[0] and inputs[1]") != NULL);
    /* float64 operands (c is converted first): refused all the same */
    tc_tensor *a64 = jc_rand(dev, TC_FLOAT64, 2, s44), *a64t = NULL;
    CHECK_OK(tc_tensor_transpose(a64, 0, 1, &a64t));
    const tc_tensor *a64c[2] = {a64, c};
    out[0] = a64t;
    CHECK_STATUS(tc_jit_fn_call(add, a64c, 2, NULL, out), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "outputs[0] and inputs[0]") != NULL);
    /* expanded: stride 0, several elements in one place */
    out[0] = e;
    CHECK_STATUS(tc_jit_fn_call(add, ac, 2, NULL, out), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "outputs[0]") && strstr(tc_last_error(), "stride 0"));
    /* two windows of one buffer, one element apart */
    tc_tensor *buf = jc_rand(dev, TC_FLOAT32, 1, s9), *lo = NULL, *hi = NULL;
    tc_tensor *c8 = jc_rand(dev, TC_FLOAT32, 1, s8);
    CHECK_OK(tc_tensor_narrow(buf, 0, 0, 8, &lo));
    CHECK_OK(tc_tensor_narrow(buf, 0, 1, 8, &hi));
    const tc_tensor *loc[2] = {lo, c8};
    out[0] = hi;
    CHECK_STATUS(tc_jit_fn_call(add, loc, 2, NULL, out), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "outputs[0] and inputs[0]") != NULL);
    /* two outputs: the same elements through two tensors, or overlapping */
    tc_tensor *a2 = view_of(a, 2, s44, (int64_t[]){4, 1}, 0);
    const tc_tensor *cc[2] = {c, c};
    out[0] = a, out[1] = a2;
    CHECK_STATUS(tc_jit_fn_call(sd, cc, 2, NULL, out), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "outputs[0] and outputs[1]") != NULL);
    out[0] = a, out[1] = at;
    CHECK_STATUS(tc_jit_fn_call(sd, cc, 2, NULL, out), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "outputs[0] and outputs[1]") != NULL);
    out[0] = NULL, out[1] = e;
    CHECK_STATUS(tc_jit_fn_call(sd, cc, 2, NULL, out), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "outputs[1]") != NULL);
    CHECK(out[0] == NULL && out[1] == e); /* nothing written */
    host_values(a, after);
    CHECK(!memcmp(before, after, sizeof before));

    tc_tensor *ts[] = {a, c, at, row, e, a64, a64t, buf, lo, hi, c8, a2};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        tc_tensor_release(ts[i]);
    tc_jit_fn_destroy(add);
    tc_jit_fn_destroy(sd);
}

/* Outputs that are allowed, with values against the host: an input itself
 * (in place, either input), and a strided output over the same buffer as a
 * strided input, which may or may not share elements (the input is read
 * from a copy): interleaved ones (none shared) and a window that reads
 * elements the call writes. */
static void test_overlap_values(tc_device dev)
{
    tc_jit_fn *add = NULL;
    CHECK_OK(tc_jit_fn_create(jc_add, NULL, &add));
    int64_t s44[2] = {4, 4}, s4[1] = {4}, s8[1] = {8};
    for (int which = 0; which < 2; which++) {
        tc_tensor *a = jc_rand(dev, TC_FLOAT32, 2, s44), *c = jc_rand(dev, TC_FLOAT32, 2, s44);
        double va[16], vc[16], got[16];
        host_values(a, va);
        host_values(c, vc);
        const tc_tensor *in[2] = {which ? c : a, which ? a : c};
        tc_tensor *out[1] = {a};
        CHECK_OK(tc_jit_fn_call(add, in, 2, NULL, out));
        host_values(a, got);
        int bad = 0;
        for (int i = 0; i < 16; i++) {
            float x = (float)(which ? vc[i] : va[i]), y = (float)(which ? va[i] : vc[i]);
            bad += got[i] != (double)(float)(x + y);
        }
        CHECK(bad == 0 && out[0] == a);
        tc_tensor_release(a);
        tc_tensor_release(c);
    }
    /* v[1::2] = v[0::2] + c (interleaved); then v[2:6] = v[0::2] + c (the
     * window holds v[2] and v[4], which the input reads) */
    for (int window = 0; window < 2; window++) {
        tc_tensor *v = jc_rand(dev, TC_FLOAT32, 1, s8), *c = jc_rand(dev, TC_FLOAT32, 1, s4);
        double vv[8], vc[4], got[8], want[8];
        host_values(v, vv);
        host_values(c, vc);
        tc_tensor *even = view_of(v, 1, s4, (int64_t[]){2}, 0);
        tc_tensor *dst = window ? view_of(v, 1, s4, (int64_t[]){1}, 2)
                                : view_of(v, 1, s4, (int64_t[]){2}, 1);
        const tc_tensor *in[2] = {even, c};
        tc_tensor *out[1] = {dst};
        CHECK_OK(tc_jit_fn_call(add, in, 2, NULL, out));
        memcpy(want, vv, sizeof want);
        for (int j = 0; j < 4; j++)
            want[window ? 2 + j : 2 * j + 1] = (double)(float)((float)vv[2 * j] + (float)vc[j]);
        host_values(v, got);
        CHECK(!memcmp(got, want, sizeof got));
        tc_tensor_release(even);
        tc_tensor_release(dst);
        tc_tensor_release(v);
        tc_tensor_release(c);
    }
    tc_jit_fn_destroy(add);
}

/* ---- keys and the disk cache ------------------------------------------------------- */

static void test_keys(void)
{
    char k1[TC__JIT_KEY_LEN + 1], k2[TC__JIT_KEY_LEN + 1], k3[TC__JIT_KEY_LEN + 1];
    const char *p1[] = {"cuda", "src", "sm_90"}, *p2[] = {"cuda", "src", "sm_80"};
    const char *p3[] = {"cud", "asrc", "sm_90"};
    tc__jit_key(p1, 3, k1);
    tc__jit_key(p2, 3, k2);
    tc__jit_key(p3, 3, k3);
    CHECK(strlen(k1) == TC__JIT_KEY_LEN && strcmp(k1, k2) && strcmp(k1, k3));
    tc__jit_key(p1, 3, k2);
    CHECK(!strcmp(k1, k2));
    /* the generated source changes with everything that changes the binary */
    tc__jit_spec sp = {jc_add, "jadd", TC_FLOAT32, 2, 1, 0, false, true};
    char *a = tc__jit_source(&sp, true);
    sp.dtype = TC_FLOAT16;
    char *b = tc__jit_source(&sp, true);
    sp.dtype = TC_FLOAT32;
    sp.contiguous = false;
    char *c = tc__jit_source(&sp, true);
    char *h = tc__jit_source(&sp, false);
    CHECK(a && b && c && h && strcmp(a, b) && strcmp(a, c) && strcmp(c, h));
    CHECK(strstr(a, jc_add) && strstr(h, jc_add) && strstr(a, "tc_jit_kernel") &&
          strstr(h, "tc_jit_host"));
    /* a minimal prelude (NVRTC parses all of it): no header, and the 16-bit
     * conversions only for their dtype, the hardware's on the GPU */
    CHECK(!strstr(a, "#include") && !strstr(a, "tcj_f32_to_f16") && !strstr(a, "bf16"));
    CHECK(strstr(b, "cvt.rn.f16.f32") && strstr(b, "tcj_f16_to_f32") && !strstr(b, "bf16"));
    sp.dtype = TC_BFLOAT16;
    char *bf = tc__jit_source(&sp, true);
    CHECK(bf && strstr(bf, "cvt.rn.bf16.f32") && !strstr(bf, "tcj_f32_to_f16"));
    free(bf);
    sp.dtype = (tc_dtype)TC_NUM_DTYPES; /* not a dtype: no source */
    CHECK(tc__jit_source(&sp, true) == NULL && tc__jit_source(&sp, false) == NULL);
    free(a);
    free(b);
    free(c);
    free(h);
    /* the cache directory: the variable, its empty value (off) */
    char dir[512];
    setenv("TCUDA_JIT_CACHE_DIR", "", 1);
    CHECK(!tc__jit_cache_dir(dir, sizeof dir));
    setenv("TCUDA_JIT_CACHE_DIR", "/some/where", 1);
    CHECK(tc__jit_cache_dir(dir, sizeof dir) && !strcmp(dir, "/some/where"));
    unsetenv("TCUDA_JIT_CACHE_DIR");
    setenv("HOME", "/home/someone", 1);
    unsetenv("XDG_CACHE_HOME");
    CHECK(tc__jit_cache_dir(dir, sizeof dir) && !strcmp(dir, "/home/someone/.cache/tcuda/jit"));
    setenv("TCUDA_JIT_CACHE_DIR", cache_dir, 1);
}

static long file_size(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

static void test_disk_cache(void)
{
    char dir[400], path[600];
    snprintf(dir, sizeof dir, "%s/unit/nested", cache_dir);
    const char *key = "0123456789abcdef0123456789abcdef";
    unsigned char payload[5000];
    for (size_t i = 0; i < sizeof payload; i++)
        payload[i] = (unsigned char)tc_test_rand();
    void *data = NULL;
    size_t size = 0;
    char note[64];
    CHECK(!tc__jit_cache_read(dir, key, "bin", &data, &size, note, sizeof note));
    CHECK(tc__jit_cache_write(dir, key, "bin", payload, sizeof payload, "NVRTC 13.0"));
    CHECK(tc__jit_cache_read(dir, key, "bin", &data, &size, note, sizeof note));
    CHECK(size == sizeof payload && data && !memcmp(data, payload, size));
    CHECK(!strcmp(note, "NVRTC 13.0"));
    free(data);
    snprintf(path, sizeof path, "%s/%s.bin", dir, key);
    long full = file_size(path);
    CHECK(full > (long)sizeof payload);
    /* a flipped byte in the payload: detected, removed, a miss */
    FILE *f = fopen(path, "r+b");
    CHECK(f && fseek(f, full - 100, SEEK_SET) == 0 &&
          fputc(0x5a ^ payload[sizeof payload - 100 + 0], f) != EOF);
    fclose(f);
    data = NULL;
    CHECK(!tc__jit_cache_read(dir, key, "bin", &data, &size, NULL, 0));
    CHECK(data == NULL && file_size(path) == -1);
    /* truncated */
    CHECK(tc__jit_cache_write(dir, key, "bin", payload, sizeof payload, NULL));
    CHECK(truncate(path, full - 1) == 0);
    CHECK(!tc__jit_cache_read(dir, key, "bin", &data, &size, NULL, 0));
    /* another entry's file under this name */
    const char *other = "ffffffffffffffffffffffffffffffff";
    char opath[600];
    CHECK(tc__jit_cache_write(dir, other, "bin", payload, sizeof payload, NULL));
    snprintf(opath, sizeof opath, "%s/%s.bin", dir, other);
    CHECK(rename(opath, path) == 0);
    CHECK(!tc__jit_cache_read(dir, key, "bin", &data, &size, NULL, 0));
    /* garbage, and an empty file */
    f = fopen(path, "wb");
    CHECK(f && fwrite(payload, 1, 100, f) == 100);
    fclose(f);
    CHECK(!tc__jit_cache_read(dir, key, "bin", &data, &size, NULL, 0));
    f = fopen(path, "wb");
    fclose(f);
    CHECK(!tc__jit_cache_read(dir, key, "bin", &data, &size, NULL, 0));

    /* a FIFO at the entry's name: a miss found without waiting for a
     * writer (it once blocked forever), then replaced by a write; the alarm
     * ends the test if the read blocks */
    (void)unlink(path);
    CHECK(mkfifo(path, 0600) == 0);
    alarm(60);
    data = NULL;
    CHECK(!tc__jit_cache_read(dir, key, "bin", &data, &size, NULL, 0));
    alarm(0);
    struct stat fsb;
    CHECK(data == NULL && stat(path, &fsb) == 0 && S_ISFIFO(fsb.st_mode));
    CHECK(tc__jit_cache_write(dir, key, "bin", payload, sizeof payload, NULL));
    CHECK(stat(path, &fsb) == 0 && S_ISREG(fsb.st_mode));
    CHECK(tc__jit_cache_read(dir, key, "bin", &data, &size, NULL, 0));
    CHECK(size == sizeof payload && data && !memcmp(data, payload, size));
    free(data);
    /* a directory there: a miss, and the write fails without harm */
    CHECK(unlink(path) == 0 && mkdir(path, 0700) == 0);
    CHECK(!tc__jit_cache_read(dir, key, "bin", &data, &size, NULL, 0));
    CHECK(!tc__jit_cache_write(dir, key, "bin", payload, sizeof payload, NULL));
    CHECK(rmdir(path) == 0);

    /* concurrent writer processes on one entry (different payload sizes, so
     * a mix would show), the parent reading meanwhile: every read that hits
     * is one of the two whole payloads */
    enum { WRITERS = 4, ROUNDS = 200 };
    pid_t pids[WRITERS];
    for (int w = 0; w < WRITERS; w++) {
        pids[w] = fork();
        if (pids[w] == 0) {
            size_t n = w % 2 ? sizeof payload : sizeof payload / 2;
            for (int r = 0; r < ROUNDS; r++)
                if (!tc__jit_cache_write(dir, key, "bin", payload, n, "w"))
                    _exit(1);
            _exit(0);
        }
    }
    int hits = 0, bad = 0;
    for (int r = 0; r < 400; r++) {
        if (tc__jit_cache_read(dir, key, "bin", &data, &size, NULL, 0)) {
            hits++;
            bad += !((size == sizeof payload || size == sizeof payload / 2) &&
                     !memcmp(data, payload, size));
            free(data);
        }
    }
    int failed_children = 0;
    for (int w = 0; w < WRITERS; w++) {
        int status = 0;
        waitpid(pids[w], &status, 0);
        failed_children += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    CHECK(failed_children == 0 && bad == 0);
    CHECK(tc__jit_cache_read(dir, key, "bin", &data, &size, NULL, 0));
    free(data);
    /* no temporary files left behind */
    DIR *d = opendir(dir);
    int temps = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        temps += e->d_name[0] == '.' && strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d)
        closedir(d);
    CHECK(temps == 0);
    printf("disk cache: %d of 400 reads hit while 4 processes wrote\n", hits);
}

/* ---- the CPU path ---------------------------------------------------------------------- */

static const char child_code[] =
    "template <typename T> T child_op(T x, T y, T beta) { return x * beta - y; }";

/* The key the child compiled (its build hook's), written for the parent to
 * the file named by TC_JIT_TEST_KEY_FILE. */
static char child_key[TC__JIT_KEY_LEN + 1];
static void record_key(const char *key) { snprintf(child_key, sizeof child_key, "%s", key); }

/* The work of the second process: one call, checked against built-ins. The
 * alarm ends a child that blocks (on a FIFO in the cache). */
static int child_main(void)
{
    alarm(120);
    tc__jit_test_build_hook = record_key;
    tc_jit_fn *fn = NULL;
    tc_jit_options o = {.scalars = "beta=3"};
    if (tc_jit_fn_create(child_code, &o, &fn) != TC_OK)
        return 2;
    int64_t s[1] = {64};
    double xs[64], ys[64];
    for (int i = 0; i < 64; i++) {
        xs[i] = i * 0.5;
        ys[i] = 100 - i;
    }
    tc_tensor *x = NULL, *y = NULL, *out[1] = {NULL};
    if (tc_tensor_from_data(xs, 1, s, TC_FLOAT64, cpu, &x) != TC_OK ||
        tc_tensor_from_data(ys, 1, s, TC_FLOAT64, cpu, &y) != TC_OK)
        return 3;
    const tc_tensor *in[2] = {x, y};
    int before = tc__jit_compile_count();
    if (tc_jit_fn_call(fn, in, 2, NULL, out) != TC_OK) {
        fprintf(stderr, "child: %s\n", tc_last_error());
        return 4;
    }
    double r[64];
    if (tc_tensor_to_host(out[0], TC_FLOAT64, r) != TC_OK)
        return 5;
    for (int i = 0; i < 64; i++)
        if (r[i] != xs[i] * 3 - ys[i])
            return 6;
    tc_tensor_release(x);
    tc_tensor_release(y);
    tc_tensor_release(out[0]);
    tc_jit_fn_destroy(fn);
    const char *key_file = getenv("TC_JIT_TEST_KEY_FILE");
    FILE *kf = key_file && child_key[0] ? fopen(key_file, "w") : NULL;
    if (kf) {
        fputs(child_key, kf);
        fclose(kf);
    }
    /* exit 10 + compiles: the parent learns whether the disk cache served it */
    return 10 + (tc__jit_compile_count() - before);
}

static int run_child(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        setenv("TC_JIT_TEST_CHILD", "1", 1);
        execl("/proc/self/exe", "test_jit", (char *)NULL);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Two threads compiling two different functions: each build waits in the
 * test's hook until the other has started, which it can only do if no lock
 * is held across a build (it once was: the table lock, around NVRTC). */
static pthread_mutex_t hook_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hook_cv = PTHREAD_COND_INITIALIZER;
static int hook_started, hook_alone;

static void both_at_once(const char *key)
{
    (void)key;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 20;
    pthread_mutex_lock(&hook_mu);
    hook_started++;
    pthread_cond_broadcast(&hook_cv);
    while (hook_started < 2)
        if (pthread_cond_timedwait(&hook_cv, &hook_mu, &until) != 0)
            break;
    hook_alone += hook_started < 2; /* gave up: the other could not start */
    pthread_mutex_unlock(&hook_mu);
}

static void test_compiles_at_once(void)
{
    unsigned long long r = (unsigned long long)(tc_test_rand() % 1000000);
    char code[2][160];
    for (int i = 0; i < 2; i++)
        snprintf(code[i], sizeof code[i],
                 "template <typename T> T both%d_%llu(T x, T y) { return x + y; }", i, r);
    int before = tc__jit_compile_count();
    tc__jit_test_build_hook = both_at_once;
    pthread_t th[2];
    int64_t n[1] = {64};
    jc_thread_job jobs[2];
    for (int i = 0; i < 2; i++)
        jobs[i] = (jc_thread_job){code[i], jc_rand(cpu, TC_FLOAT32, 1, n), false};
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, jc_thread_call, &jobs[i]);
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        CHECK(jobs[i].ok);
        tc_tensor_release(jobs[i].x);
    }
    tc__jit_test_build_hook = NULL;
    CHECK(tc__jit_compile_count() - before == 2);
    CHECK(hook_started == 2 && hook_alone == 0);
}

/* A FIFO at the exact path of a cache entry (the key a first process
 * compiled): a second process treats it as a miss, compiles, and its write
 * replaces the FIFO; a third loads from the disk. The call once blocked in
 * open() forever (the child's alarm turns that into a failure). */
static void test_cache_fifo(void)
{
    char dir[400], key_file[450], key[TC__JIT_KEY_LEN + 1] = "", path[600];
    snprintf(dir, sizeof dir, "%s/fifo", cache_dir);
    snprintf(key_file, sizeof key_file, "%s/key", cache_dir);
    setenv("TCUDA_JIT_CACHE_DIR", dir, 1);
    setenv("TC_JIT_TEST_KEY_FILE", key_file, 1);
    CHECK(run_child() == 11);
    FILE *f = fopen(key_file, "r");
    CHECK(f && fgets(key, sizeof key, f) && strlen(key) == TC__JIT_KEY_LEN);
    if (f)
        fclose(f);
    snprintf(path, sizeof path, "%s/%s.so", dir, key);
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && S_ISREG(sb.st_mode));
    CHECK(unlink(path) == 0 && mkfifo(path, 0600) == 0);
    CHECK(run_child() == 11); /* a miss: compiled, not blocked */
    CHECK(stat(path, &sb) == 0 && S_ISREG(sb.st_mode));
    CHECK(run_child() == 10); /* the entry that replaced the FIFO */
    unsetenv("TC_JIT_TEST_KEY_FILE");
    setenv("TCUDA_JIT_CACHE_DIR", cache_dir, 1);
}

/* $CXX runs without a shell: split at blanks, each word passed as it is
 * ($HOME and quotes reach the compiler unexpanded). A wrapper script logs
 * the words it is given and runs the compiler with them; the child, which
 * finds its compiler afresh, compiles with it (a fresh cache directory). */
static void test_cxx_words(void)
{
    char wrapper[400], log[450], dir[400], cxx[600];
    snprintf(wrapper, sizeof wrapper, "%s/cxx-wrapper", cache_dir);
    snprintf(log, sizeof log, "%s.log", wrapper);
    snprintf(dir, sizeof dir, "%s/cxx", cache_dir);
    FILE *f = fopen(wrapper, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    const char *found = "c++"; /* the compiler this process found, which runs */
    CHECK_OK(tc__jit_host_compiler(&found, NULL));
    fprintf(f, "#!/bin/sh\nprintf '%%s\\n' \"$@\" >> \"$0.log\"\nexec %s \"$@\"\n", found);
    fclose(f);
    CHECK(chmod(wrapper, 0700) == 0);
    snprintf(cxx, sizeof cxx, "  %s -DTC_JIT_HOME=$HOME\t-DTC_JIT_Q='q' ", wrapper);
    const char *old_cxx = getenv("CXX");
    char saved[600] = "";
    if (old_cxx)
        snprintf(saved, sizeof saved, "%s", old_cxx);
    setenv("CXX", cxx, 1);
    setenv("TCUDA_JIT_CACHE_DIR", dir, 1);
    CHECK(run_child() == 11);
    if (old_cxx)
        setenv("CXX", saved, 1);
    else
        unsetenv("CXX");
    setenv("TCUDA_JIT_CACHE_DIR", cache_dir, 1);
    char *words = NULL;
    size_t n = 0;
    f = fopen(log, "r");
    CHECK(f != NULL);
    int version = 0, home = 0, quoted = 0, output = 0;
    for (ssize_t len; f && (len = getline(&words, &n, f)) > 0;) {
        words[strcspn(words, "\n")] = '\0';
        version += !strcmp(words, "--version");
        home += !strcmp(words, "-DTC_JIT_HOME=$HOME");
        quoted += !strcmp(words, "-DTC_JIT_Q='q'");
        output += !strcmp(words, "-o");
    }
    free(words);
    if (f)
        fclose(f);
    /* once to ask its version, once to compile */
    CHECK(version == 1 && output == 1 && home == 2 && quoted == 2);
}

/* Code that compiles but does not load (a function declared, defined
 * nowhere): the user's error, INVALID_ARGUMENT with the loader's words, not
 * INTERNAL. */
static void test_load_error(void)
{
    tc_jit_fn *fn = NULL;
    CHECK_OK(tc_jit_fn_create("float tc_jit_test_defined_nowhere(float);\n"
                              "template <typename T> T undef(T x) {\n"
                              "  return (T)tc_jit_test_defined_nowhere((float)x); }",
                              NULL, &fn));
    int64_t s[1] = {8};
    tc_tensor *x = jc_rand(cpu, TC_FLOAT32, 1, s), *out[1] = {NULL};
    const tc_tensor *in[1] = {x};
    CHECK_STATUS(tc_jit_fn_call(fn, in, 1, NULL, out), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "does not load") &&
          strstr(tc_last_error(), "tc_jit_test_defined_nowhere"));
    CHECK(out[0] == NULL);
    tc_tensor_release(x);
    tc_jit_fn_destroy(fn);
}

static void test_cpu_path(void)
{
    if (tc__jit_host_compiler(NULL, NULL) != TC_OK) {
        printf("no host C++ compiler: %s\n", tc_last_error());
        CHECK(strstr(tc_last_error(), "c++") != NULL);
        tc_jit_fn *fn = NULL;
        int64_t s[1] = {2};
        tc_tensor *x = jc_rand(cpu, TC_FLOAT32, 1, s), *out[1] = {NULL};
        const tc_tensor *in[2] = {x, x};
        CHECK_OK(tc_jit_fn_create(jc_add, NULL, &fn));
        CHECK_STATUS(tc_jit_fn_call(fn, in, 2, NULL, out), TC_ERROR_NOT_SUPPORTED);
        tc_tensor_release(x);
        tc_jit_fn_destroy(fn);
        return;
    }
    double t0 = tc_test_now_ms();
    jc_parity_suite(cpu);
    printf("CPU parity suite (compiling each dtype once): %.0f ms\n", tc_test_now_ms() - t0);

    /* a compile error: INVALID_ARGUMENT with the compiler's words; nothing written */
    tc_jit_fn *bad = NULL;
    CHECK_OK(tc_jit_fn_create("template <typename T> T oops(T x) { return x +* ; }", NULL, &bad));
    int64_t s[1] = {8};
    tc_tensor *x = jc_rand(cpu, TC_FLOAT32, 1, s), *out[1] = {NULL};
    const tc_tensor *in1[1] = {x};
    CHECK_STATUS(tc_jit_fn_call(bad, in1, 1, NULL, out), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "does not compile") && strstr(tc_last_error(), "jit_code"));
    CHECK(out[0] == NULL);
    /* again: the same error (a failed build is retried, not cached as good) */
    CHECK_STATUS(tc_jit_fn_call(bad, in1, 1, NULL, out), TC_ERROR_INVALID_ARGUMENT);
    tc_jit_fn_destroy(bad);
    tc_tensor_release(x);

    /* two threads, one new function: compiled once */
    char code[160];
    snprintf(code, sizeof code, "template <typename T> T twice_%llu(T x, T y) { return x + y; }",
             (unsigned long long)(tc_test_rand() % 1000000));
    int before = tc__jit_compile_count();
    pthread_t th[2];
    int64_t n[1] = {100};
    jc_thread_job jobs[2];
    for (int i = 0; i < 2; i++)
        jobs[i] = (jc_thread_job){code, jc_rand(cpu, TC_FLOAT32, 1, n), false};
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, jc_thread_call, &jobs[i]);
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        CHECK(jobs[i].ok);
        tc_tensor_release(jobs[i].x);
    }
    CHECK(tc__jit_compile_count() - before == 1);
    test_compiles_at_once();

    /* a second process: the first run compiles (fresh cache), the second
     * loads from the disk cache; a corrupted entry is recompiled and replaced */
    CHECK(run_child() == 11);
    CHECK(run_child() == 10);
    DIR *d = opendir(cache_dir);
    int corrupted = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len > 3 && !strcmp(e->d_name + len - 3, ".so")) {
            char path[600];
            snprintf(path, sizeof path, "%s/%s", cache_dir, e->d_name);
            long size = file_size(path);
            corrupted += truncate(path, size / 2) == 0;
        }
    }
    if (d)
        closedir(d);
    CHECK(corrupted > 0);
    CHECK(run_child() == 11);
    CHECK(run_child() == 10);
    test_cache_fifo();
    test_cxx_words();
    test_load_error();
    test_overlap_values(cpu);
    if (tc_is_available() && tc__dev()->jit->nvrtc_version(&(const char *){NULL}) == TC_OK)
        test_overlap_values((tc_device){TC_CUDA, 0});
}

/* The GPU kernel's source, run on the CPU: compiled by the host compiler
 * with blockIdx/threadIdx emulated, every block and thread run in turn. This
 * checks the vector path (with its tail), the grid-stride loop and the
 * strided offsets without a GPU, against the built-in CPU ops. */
static const char emu_head[] =
    "struct tcj_dim3 { unsigned x, y, z; };\n"
    "static tcj_dim3 blockIdx, threadIdx, blockDim, gridDim;\n"
    "#define __global__\n#define __device__\n#define __forceinline__ inline\n"
    "#define __launch_bounds__(n)\n";
static const char emu_tail[] =
    "extern \"C\" __attribute__((visibility(\"default\"))) void tc_jit_host(const tcj_args *a)\n"
    "{\n"
    "    gridDim.x = (unsigned)a->pad;\n"
    "    blockDim.x = 128;\n"
    "    for (unsigned b = 0; b < gridDim.x; b++)\n"
    "        for (unsigned t = 0; t < 128; t++) {\n"
    "            blockIdx.x = b;\n"
    "            threadIdx.x = t;\n"
    "            tc_jit_kernel(*a);\n"
    "        }\n"
    "}\n";

/* out = jadd(a, b) through the emulated kernel; NULL on failure. */
static tc_tensor *emu_add(const tc_tensor *a, const tc_tensor *b)
{
    const tc_tensor *in[2] = {a, b};
    int ndim;
    int64_t sizes[TC_MAX_DIMS];
    if (tc__broadcast_shapes("emu", 2, in, &ndim, sizes) != TC_OK)
        return NULL;
    tc_dtype dt = tc_tensor_dtype(a);
    tc_tensor *out = NULL;
    CHECK_OK(tc_tensor_empty(ndim, sizes, dt, cpu, &out));
    tc__iter it;
    tc__iter_init(&it, ndim, sizes, 3);
    tc__iter_set(&it, 0, out);
    tc__iter_set(&it, 1, a);
    tc__iter_set(&it, 2, b);
    tc__iter_coalesce(&it);
    tc__jit_spec sp = {jc_add, "jadd", dt, 2, 1, 0, false, it.contiguous};
    char *kernel = tc__jit_source(&sp, true);
    size_t n = strlen(emu_head) + strlen(kernel) + strlen(emu_tail) + 1;
    char *src = malloc(n);
    snprintf(src, n, "%s%s%s", emu_head, kernel, emu_tail);
    void *so = NULL;
    size_t size = 0;
    tc__jit_host_fn f = NULL;
    CHECK_OK(tc__jit_host_compile(src, &so, &size));
    if (so)
        CHECK_OK(tc__jit_host_load(so, size, &f));
    free(so);
    free(src);
    free(kernel);
    if (!f) {
        tc_tensor_release(out);
        return NULL;
    }
    tc__jit_args args;
    tc__jit_args_fill(&args, &it, NULL, 0, !it.contiguous);
    bool aligned = true;
    for (int k = 0; k < 3; k++)
        aligned &= (uintptr_t)it.data[k] % 16 == 0;
    args.flat = it.contiguous && aligned;
    args.pad = tc__jit_grid(&args, tc_dtype_size(dt), 2); /* 2 SMs: the grid-stride loop loops */
    f(&args);
    return out;
}

static void test_gpu_kernel_emulated(void)
{
    if (tc__jit_host_compiler(NULL, NULL) != TC_OK)
        return;
    struct {
        tc_dtype dt;
        int64_t n;
        int64_t off; /* elements to skip: unaligned when not 0 */
    } flat[] = {{TC_FLOAT32, 70000, 0},
                {TC_FLOAT16, 4099, 0},
                {TC_INT8, 1000, 3},
                {TC_FLOAT64, 5, 0},
                {TC_BOOL, 33, 0}};
    for (int k = 0; k < 5; k++) {
        int64_t s[1] = {flat[k].n + flat[k].off};
        tc_tensor *a = jc_rand(cpu, flat[k].dt, 1, s), *b = jc_rand(cpu, flat[k].dt, 1, s);
        tc_tensor *av = NULL, *bv = NULL, *ref = NULL;
        CHECK_OK(tc_tensor_narrow(a, 0, flat[k].off, flat[k].n, &av));
        CHECK_OK(tc_tensor_narrow(b, 0, flat[k].off, flat[k].n, &bv));
        tc_tensor *out = emu_add(av, bv);
        CHECK_OK(tc_tensor_add(av, bv, &ref));
        CHECK(jc_same(out, ref));
        tc_tensor *rel[] = {a, b, av, bv, ref, out};
        for (int i = 0; i < 6; i++)
            tc_tensor_release(rel[i]);
    }
    /* strided: broadcast and transposed */
    int64_t s1[3] = {7, 1, 30}, s2[2] = {9, 1}, s3[2] = {30, 9};
    tc_tensor *a = jc_rand(cpu, TC_BFLOAT16, 3, s1), *b = jc_rand(cpu, TC_BFLOAT16, 2, s2);
    tc_tensor *c = jc_rand(cpu, TC_BFLOAT16, 2, s3), *ct = NULL, *ref = NULL, *ref2 = NULL;
    CHECK_OK(tc_tensor_transpose(c, 0, 1, &ct));
    tc_tensor *out = emu_add(a, b), *out2 = emu_add(ct, b);
    CHECK_OK(tc_tensor_add(a, b, &ref));
    CHECK_OK(tc_tensor_add(ct, b, &ref2));
    CHECK(jc_same(out, ref));
    CHECK(jc_same(out2, ref2));
    tc_tensor *rel[] = {a, b, c, ct, ref, ref2, out, out2};
    for (int i = 0; i < 8; i++)
        tc_tensor_release(rel[i]);
}

/* The argument block as the generated code declares it (compiled by the host
 * compiler, the GPU kernel's source with the CUDA words emulated) has the
 * size and layout tc__jit_args_fill packs: per variant, only the operands it
 * has, and sizes and strides only in the strided class. */
static void test_args_layout(void)
{
    CHECK(tc__jit_args_bytes(3, 1, false) == 64); /* x + alpha * y, dense: was 736 */
    CHECK(tc__jit_args_bytes(3, 1, true) == 64 + 32 * 8);
    if (tc__jit_host_compiler(NULL, NULL) != TC_OK)
        return;
    static const char probe[] =
        "#include <stddef.h>\n"
        "extern \"C\" __attribute__((visibility(\"default\"))) void tc_jit_host(const tcj_args "
        "*a)\n{\n"
        "    tcj_args *w = (tcj_args *)a;\n"
        "    w->numel = sizeof(tcj_args);\n"
        "    w->ndim = offsetof(tcj_args, data);\n"
        "    w->flat = offsetof(tcj_args, scalars);\n"
        "    w->pad = (tcj_i64)(a->scalars[NSC - 1] * 10);\n"
        "}\n";
    struct {
        int n_in, n_out, ns;
        bool by_ref, contiguous;
    } v[] = {{2, 1, 1, false, true},
             {2, 1, 1, false, false},
             {2, 2, 0, true, true},
             {1, 1, 3, false, false}};
    const char *codes[] = {jc_axpy, jc_axpy, jc_sumdiff,
                           "template <typename T> T f3(T x, T a, T b, T c) { return x; }"};
    const char *names[] = {"axpy", "axpy", "sumdiff", "f3"};
    for (int k = 0; k < 4; k++) {
        tc__jit_spec sp = {codes[k],   names[k], TC_FLOAT32,  v[k].n_in,
                           v[k].n_out, v[k].ns,  v[k].by_ref, v[k].contiguous};
        char *kernel = tc__jit_source(&sp, true);
        size_t n = strlen(emu_head) + strlen(kernel) + sizeof probe + 32;
        char *src = malloc(n);
        snprintf(src, n, "%s%s#define NSC %d\n%s", emu_head, kernel, v[k].ns > 0 ? v[k].ns : 1,
                 probe);
        void *so = NULL;
        size_t size = 0;
        tc__jit_host_fn f = NULL;
        CHECK_OK(tc__jit_host_compile(src, &so, &size));
        if (so)
            CHECK_OK(tc__jit_host_load(so, size, &f));
        free(so);
        free(src);
        free(kernel);
        if (!f)
            continue;
        int nops = v[k].n_in + v[k].n_out;
        tc__iter it;
        int64_t sizes[2] = {3, 5};
        tc__iter_init(&it, 2, sizes, nops);
        for (int i = 0; i < nops; i++)
            it.data[i] = (void *)(uintptr_t)(0x1000 * (i + 1));
        double sc[3] = {1.5, 2.5, 3.5};
        tc__jit_args args;
        bool strided = !v[k].contiguous;
        tc__jit_args_fill(&args, &it, sc, v[k].ns, strided);
        size_t data_at = 32 + (strided ? (size_t)(1 + nops) * 64 : 0);
        CHECK(args.packed[(data_at - 32) / 8 + 1] == 0x2000); /* operand 1's pointer */
        f(&args);
        CHECK((size_t)args.numel == tc__jit_args_bytes(nops, v[k].ns, strided));
        CHECK((size_t)args.ndim == data_at);
        CHECK((size_t)args.flat == data_at + 8 * (size_t)nops);
        CHECK(args.pad == (v[k].ns > 0 ? (int64_t)(sc[v[k].ns - 1] * 10) : 0));
    }
}

/* NVRTC needs no GPU: where it loads, every generated kernel (each dtype,
 * both classes, one and several outputs) compiles to an sm_90 cubin, and a
 * user's syntax error comes back as INVALID_ARGUMENT with NVRTC's log. */
static void test_nvrtc_compiles(void)
{
    const char *ver = NULL;
    if (tc__dev()->jit->nvrtc_version(&ver) != TC_OK) {
        printf("NVRTC not checked: %s\n", tc_last_error());
        return;
    }
    double t0 = tc_test_now_ms();
    int compiled = 0;
    for (int d = 0; d < TC_NUM_DTYPES; d++)
        for (int contiguous = 0; contiguous < 2; contiguous++) {
            tc__jit_spec sp = {jc_axpy, "axpy", (tc_dtype)d, 2, 1, 1, false, contiguous};
            if (d % 3 == 0) /* some of them multi-output */
                sp = (tc__jit_spec){jc_sumdiff, "sumdiff", (tc_dtype)d, 2, 2, 0, true, contiguous};
            char *src = tc__jit_source(&sp, true);
            void *cubin = NULL;
            size_t size = 0;
            tc_status st = tc__dev()->jit->compile(src, 90, &cubin, &size);
            CHECK_OK(st);
            if (st != TC_OK)
                fprintf(stderr, "%s\n", src);
            compiled += st == TC_OK && size > 0;
            free(cubin);
            free(src);
        }
    CHECK(compiled == 2 * TC_NUM_DTYPES);
    /* what an element-wise function may use is there under -minimal: math
     * functions, min/max, isnan, device printf and atomics */
    tc__jit_spec uses = {"template <typename T> T uses(T x, T y) { if (isnan(x)) printf(\"%f\", "
                         "x); return sinf(x) + erf(y) + fmaxf(x, y) + min(x, y) + max(x, T(0)) + "
                         "rsqrtf(y) + __expf(x) + (T)atomicAdd((int *)0, 0); }",
                         "uses",
                         TC_FLOAT32,
                         2,
                         1,
                         0,
                         false,
                         true};
    char *usrc = tc__jit_source(&uses, true);
    void *ubin = NULL;
    size_t usize = 0;
    CHECK_OK(tc__dev()->jit->compile(usrc, 90, &ubin, &usize));
    free(ubin);
    free(usrc);
    tc__jit_spec sp = {"template <typename T> T oops(T x) { return x +* ; }",
                       "oops",
                       TC_FLOAT32,
                       1,
                       1,
                       0,
                       false,
                       true};
    char *src = tc__jit_source(&sp, true);
    void *cubin = NULL;
    size_t size = 0;
    CHECK_STATUS(tc__dev()->jit->compile(src, 90, &cubin, &size), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "jit_code") != NULL && cubin == NULL);
    free(src);
    printf("%s: %d kernels compiled for sm_90 in %.0f ms\n", ver, compiled, tc_test_now_ms() - t0);
}

int main(void)
{
    if (getenv("TC_JIT_TEST_CHILD"))
        return child_main();
    tc_test_init();
    snprintf(cache_dir, sizeof cache_dir, "%s/tcuda-test-jit-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(cache_dir)) {
        perror("mkdtemp");
        return 1;
    }
    setenv("TCUDA_JIT_CACHE_DIR", cache_dir, 1);
    test_parse();
    test_parse_random();
    test_scalar_options();
    test_create_errors();
    test_call_errors();
    test_overlap_errors(cpu);
    if (tc_is_available())
        test_overlap_errors((tc_device){TC_CUDA, 0});
    test_keys();
    test_disk_cache();
    test_cpu_path();
    test_gpu_kernel_emulated();
    test_args_layout();
    test_nvrtc_compiles();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache_dir);
    if (system(cmd) != 0)
        printf("could not remove %s\n", cache_dir);
    return TC_TEST_DONE();
}
