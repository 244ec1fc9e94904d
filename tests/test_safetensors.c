/* safetensors (include/tcuda/safetensors.h): round trips of every dtype, of
 * strided, 0-d and empty tensors and of metadata, with values checked against
 * the test's own arrays and the file's bytes against a layout the test
 * computes; zero-copy and lifetime; copying reads and a file truncated under
 * them; one hand-built file per rule of the header check; what open and save
 * do with FIFOs, devices, directories, links and modes; bad arguments. The
 * GPU part runs only where there is one. */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tc_test.h"

static const tc_device CPU = {TC_CPU, -1};
static char dir[] = "/tmp/tcuda_st_test_XXXXXX";
static char path[256];

static bool says(const char *what) { return strstr(tc_last_error(), what) != NULL; }

static const char *file_named(const char *name)
{
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return path;
}

/* A file of the 8-byte length of `header`, `header`, then `data_len` bytes. */
static const char *make_file(const char *header, size_t data_len)
{
    FILE *fp = fopen(file_named("hand.safetensors"), "wb");
    uint64_t n = strlen(header);
    unsigned char len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)(n >> (8 * i));
    fwrite(len, 1, 8, fp);
    fwrite(header, 1, n, fp);
    for (size_t i = 0; i < data_len; i++)
        fputc((int)(i & 0xff), fp);
    fclose(fp);
    return path;
}

static unsigned char *read_all(const char *p, size_t *n)
{
    FILE *fp = fopen(p, "rb");
    if (!fp)
        return NULL;
    fseek(fp, 0, SEEK_END);
    *n = (size_t)ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *b = malloc(*n + 1);
    *n = fread(b, 1, *n, fp);
    fclose(fp);
    return b;
}

/* ---- round trips ----------------------------------------------------------------------- */

/* Value i of the test's tensors: small integers every dtype holds exactly. */
static double value(tc_dtype dt, int i)
{
    if (dt == TC_BOOL)
        return i % 3 == 0;
    if (dt == TC_UINT8)
        return (i * 7) % 251;
    return (double)((i * 7) % 101) - 50;
}

static void test_round_trip_dtypes(void)
{
    const char *names[TC_NUM_DTYPES];
    tc_tensor *ts[TC_NUM_DTYPES];
    char namebuf[TC_NUM_DTYPES][16];
    int64_t sz[2] = {3, 5};
    for (int d = 0; d < TC_NUM_DTYPES; d++) {
        double v[15];
        for (int i = 0; i < 15; i++)
            v[i] = value((tc_dtype)d, i);
        tc_tensor *t64 = NULL;
        ts[d] = NULL;
        CHECK_OK(tc_tensor_from_data(v, 2, sz, TC_FLOAT64, CPU, &t64));
        CHECK_OK(tc_tensor_to(t64, CPU, (tc_dtype)d, false, &ts[d]));
        tc_tensor_release(t64);
        snprintf(namebuf[d], sizeof namebuf[d], "t_%s", tc_dtype_string((tc_dtype)d));
        names[d] = namebuf[d];
    }
    const char *md[] = {"format", "pt", "note", "quote \" and \\ and \n newline", NULL};
    CHECK_OK(tc_safetensors_save(file_named("all.safetensors"), names, (const tc_tensor *const *)ts,
                                 TC_NUM_DTYPES, md));
    /* The header length makes the data start at a multiple of 8. */
    size_t n = 0;
    unsigned char *raw = read_all(path, &n);
    uint64_t hl = 0;
    for (int i = 0; raw && i < 8; i++)
        hl |= (uint64_t)raw[i] << (8 * i);
    CHECK(raw && hl % 8 == 0 && raw[8] == '{' && raw[8 + hl - 1] == ' ');
    /* The data: by decreasing element size, then name (the reference order),
     * each tensor's values in row-major order. */
    static const tc_dtype order[] = {TC_FLOAT64, TC_INT64, TC_FLOAT32, TC_INT32, TC_BFLOAT16,
                                     TC_FLOAT16, TC_INT16, TC_BOOL,    TC_INT8,  TC_UINT8};
    /* (names: t_bfloat16 < t_float16 < t_int16; t_bool < t_int8 < t_uint8) */
    size_t at = 8 + hl;
    for (int k = 0; raw && k < TC_NUM_DTYPES; k++) {
        tc_dtype d = order[k];
        size_t es = tc_dtype_size(d);
        if (d == TC_FLOAT32) {
            float f[15];
            memcpy(f, raw + at, sizeof f);
            CHECK(f[0] == (float)value(d, 0) && f[14] == (float)value(d, 14));
        } else if (d == TC_INT64) {
            int64_t x[15];
            memcpy(x, raw + at, sizeof x);
            CHECK(x[3] == (int64_t)value(d, 3));
        } else if (d == TC_UINT8) {
            CHECK(raw[at + 4] == (unsigned char)value(d, 4));
        }
        at += 15 * es;
    }
    CHECK(at == n);
    free(raw);
    for (int d = 0; d < TC_NUM_DTYPES; d++)
        tc_tensor_release(ts[d]);

    tc_safetensors *f = NULL;
    CHECK_OK(tc_safetensors_open(file_named("all.safetensors"), &f));
    CHECK(tc_safetensors_count(f) == TC_NUM_DTYPES);
    CHECK(tc_safetensors_name(f, 0) && !strcmp(tc_safetensors_name(f, 0), "t_float64"));
    CHECK(tc_safetensors_name(f, TC_NUM_DTYPES) == NULL && tc_safetensors_name(f, -1) == NULL);
    for (int d = 0; d < TC_NUM_DTYPES; d++) {
        tc_dtype dt = TC_NUM_DTYPES;
        int nd = -1;
        int64_t s[TC_MAX_DIMS] = {0};
        CHECK_OK(tc_safetensors_info(f, names[d], &dt, &nd, s));
        CHECK(dt == (tc_dtype)d && nd == 2 && s[0] == 3 && s[1] == 5);
        tc_tensor *t = NULL;
        CHECK_OK(tc_safetensors_get(f, names[d], CPU, &t));
        CHECK(tc_tensor_dtype(t) == (tc_dtype)d && tc_tensor_is_contiguous(t));
        double *v = tc_test_values(t);
        for (int i = 0; v && i < 15; i++)
            CHECK(v[i] == value((tc_dtype)d, i));
        free(v);
        tc_tensor_release(t);
    }
    const char *val = NULL;
    CHECK(tc_safetensors_metadata_count(f) == 2);
    CHECK(!strcmp(tc_safetensors_metadata_key(f, 0), "format")); /* sorted by key */
    CHECK(!strcmp(tc_safetensors_metadata_key(f, 1), "note"));
    CHECK(tc_safetensors_metadata_key(f, 2) == NULL && tc_safetensors_metadata_key(f, -1) == NULL);
    CHECK_OK(tc_safetensors_metadata(f, "note", &val));
    CHECK(val && !strcmp(val, "quote \" and \\ and \n newline"));
    CHECK_OK(tc_safetensors_metadata(f, "absent", &val));
    CHECK(val == NULL);
    CHECK_OK(tc_safetensors_close(f));
}

/* Strided, 0-d and empty tensors are saved row-major; no metadata. */
static void test_round_trip_shapes(void)
{
    int64_t sz[2] = {3, 4};
    tc_tensor *a = NULL, *m = NULL, *tr = NULL, *s = NULL, *e = NULL;
    CHECK_OK(tc_tensor_arange(0, 12, 1, TC_FLOAT32, CPU, &a));
    CHECK_OK(tc_tensor_view(a, 2, sz, &m));
    CHECK_OK(tc_tensor_transpose(m, 0, 1, &tr)); /* [4, 3]: element [i][j] = 4j + i */
    CHECK_OK(tc_tensor_full(0, NULL, 2.5, TC_FLOAT64, CPU, &s));
    int64_t ez[3] = {2, 0, 5};
    CHECK_OK(tc_tensor_empty(3, ez, TC_INT16, CPU, &e));
    const char *names[] = {"transposed", "scalar", "empty"};
    const tc_tensor *ts[] = {tr, s, e};
    CHECK_OK(tc_safetensors_save(file_named("shapes.safetensors"), names, ts, 3, NULL));
    tc_safetensors *f = NULL;
    CHECK_OK(tc_safetensors_open(path, &f));
    tc_tensor *t = NULL;
    CHECK_OK(tc_safetensors_get(f, "transposed", CPU, &t));
    CHECK(tc_tensor_size(t, 0) == 4 && tc_tensor_size(t, 1) == 3);
    double *v = tc_test_values(t);
    for (int i = 0; v && i < 4; i++)
        for (int j = 0; j < 3; j++)
            CHECK(v[i * 3 + j] == 4.0 * j + i);
    free(v);
    tc_tensor_release(t);
    CHECK_OK(tc_safetensors_get(f, "scalar", CPU, &t));
    double x = 0;
    CHECK(tc_tensor_ndim(t) == 0);
    CHECK_OK(tc_tensor_item(t, &x));
    CHECK(x == 2.5);
    tc_tensor_release(t);
    CHECK_OK(tc_safetensors_get(f, "empty", CPU, &t));
    CHECK(tc_tensor_ndim(t) == 3 && tc_tensor_size(t, 2) == 5 && tc_tensor_numel(t) == 0);
    tc_tensor_release(t);
    CHECK(tc_safetensors_metadata_count(f) == 0);
    CHECK_OK(tc_safetensors_close(f));
    /* No tensors at all: "{}" padded, and an empty buffer. */
    CHECK_OK(tc_safetensors_save(file_named("none.safetensors"), NULL, NULL, 0, NULL));
    CHECK_OK(tc_safetensors_open(path, &f));
    CHECK(tc_safetensors_count(f) == 0);
    CHECK_OK(tc_safetensors_close(f));
    tc_tensor_release(a);
    tc_tensor_release(m);
    tc_tensor_release(tr);
    tc_tensor_release(s);
    tc_tensor_release(e);
}

/* CPU tensors view the mapping: two gets share memory, at the distance the
 * header's offsets say; writes reach other views, never the file; the
 * tensors outlive the file's handle. */
static void test_zero_copy_and_lifetime(void)
{
    /* a: F32 [2] at [0, 8); b: F32 [3] at [8, 20); padded header. */
    const char *h = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                    "\"b\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[8,20]}}   ";
    char hdr[256];
    snprintf(hdr, sizeof hdr, "%s", h);
    while (strlen(hdr) % 8)
        strcat(hdr, " ");
    FILE *fp = fopen(file_named("zc.safetensors"), "wb");
    uint64_t n = strlen(hdr);
    for (int i = 0; i < 8; i++)
        fputc((int)(n >> (8 * i)) & 0xff, fp);
    fputs(hdr, fp);
    float vals[5] = {1, 2, 3, 4, 5};
    fwrite(vals, sizeof(float), 5, fp);
    fclose(fp);
    tc_safetensors *f = NULL;
    CHECK_OK(tc_safetensors_open(path, &f));
    tc_tensor *a = NULL, *b = NULL, *a2 = NULL;
    CHECK_OK(tc_safetensors_get(f, "a", CPU, &a));
    CHECK_OK(tc_safetensors_get(f, "b", CPU, &b));
    CHECK_OK(tc_safetensors_get(f, "a", CPU, &a2));
    CHECK(tc_tensor_data_ptr(a) == tc_tensor_data_ptr(a2));
    CHECK((char *)tc_tensor_data_ptr(b) - (char *)tc_tensor_data_ptr(a) == 8);
    CHECK(((uintptr_t)tc_tensor_data_ptr(a) - 8 - n) % 4096 == 0); /* file offset 8 + n */
    CHECK(tc_safetensors_name(f, 0) && !strcmp(tc_safetensors_name(f, 0), "a"));
    tc_tensor *z = NULL;
    int64_t two = 2;
    CHECK_OK(tc_tensor_zeros(1, &two, TC_FLOAT32, CPU, &z));
    CHECK_OK(tc_tensor_copy_(a, z, false));
    double *v = tc_test_values(a2);
    CHECK(v && v[0] == 0 && v[1] == 0);
    free(v);
    tc_tensor_release(z);
    CHECK_OK(tc_safetensors_close(f));
    CHECK(tc_safetensors_count(f) == 0); /* closed: "no file" */
    v = tc_test_values(b);               /* the mapping outlives the handle */
    CHECK(v && v[0] == 3 && v[2] == 5);
    free(v);
    tc_tensor_release(a);
    tc_tensor_release(a2);
    tc_tensor_release(b);
    size_t len = 0;
    unsigned char *raw = read_all(path, &len);
    float first = 0;
    if (raw)
        memcpy(&first, raw + 8 + n, sizeof first);
    CHECK(first == 1); /* the file never changed */
    free(raw);
}

/* A tensor misaligned in the file (an F32 at an odd offset) is copied. */
static void test_misaligned(void)
{
    char hdr[160] = "{\"u\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                    "\"f\":{\"dtype\":\"I16\",\"shape\":[2],\"data_offsets\":[1,5]}}";
    while (strlen(hdr) % 8) /* the data starts 8-aligned, so "f" starts at an odd address */
        strcat(hdr, " ");
    const char *p = make_file(hdr, 5);
    tc_safetensors *f = NULL;
    CHECK_OK(tc_safetensors_open(p, &f));
    tc_tensor *t = NULL;
    CHECK_OK(tc_safetensors_get(f, "f", CPU, &t));
    CHECK((uintptr_t)tc_tensor_data_ptr(t) % 2 == 0);
    double *v = tc_test_values(t);
    CHECK(v && v[0] == (1 | 2 << 8) && v[1] == (3 | 4 << 8)); /* make_file writes bytes 0,1,2.. */
    free(v);
    tc_tensor_release(t);
    CHECK_OK(tc_safetensors_close(f));
}

/* ---- malformed files: one per rule ------------------------------------------------------ */

static void refused(const char *header, size_t data_len, tc_status want, const char *text)
{
    tc_safetensors *const SENT = (tc_safetensors *)(uintptr_t)0x5e5e5e5e;
    tc_safetensors *f = SENT;
    tc_status st = tc_safetensors_open(make_file(header, data_len), &f);
    CHECK(st == want && f == SENT);
    if (st != want || !says(text) || !says("hand.safetensors") ||
        strncmp(tc_last_error(), "tc_safetensors_open: ", 21) != 0)
        printf("  header %s\n  -> %s: %s (wanted %s, '%s')\n", header, tc_status_string(st),
               tc_last_error(), tc_status_string(want), text);
    CHECK(says(text));
    if (st == TC_OK)
        tc_safetensors_close(f);
}

#define T1(name, dt, shape, b, e)                                                                  \
    "\"" name "\":{\"dtype\":\"" dt "\",\"shape\":" shape ",\"data_offsets\":[" #b "," #e "]}"

static void test_malformed(void)
{
    const tc_status IO = TC_ERROR_IO;
    /* The header length. */
    FILE *fp = fopen(file_named("hand.safetensors"), "wb");
    fputs("\x02\0\0", fp);
    fclose(fp);
    tc_safetensors *f = NULL;
    CHECK_STATUS(tc_safetensors_open(path, &f), IO);
    CHECK(says("fewer than the 8"));
    fp = fopen(path, "wb");
    fwrite("\xff\0\0\0\0\0\0\0{}", 1, 10, fp);
    fclose(fp);
    CHECK_STATUS(tc_safetensors_open(path, &f), IO);
    CHECK(says("header length is 255 bytes, but only 2 follow"));
    /* Above 100 MB (a sparse file, so nothing is written). */
    int fd = open(file_named("big.safetensors"), O_CREAT | O_TRUNC | O_WRONLY, 0600);
    uint64_t big = 100000001;
    unsigned char len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)(big >> (8 * i));
    CHECK(write(fd, len, 8) == 8 && ftruncate(fd, 8 + (off_t)big) == 0);
    close(fd);
    CHECK_STATUS(tc_safetensors_open(path, &f), IO);
    CHECK(says("above the limit"));
    unlink(path);

    /* JSON. */
    refused(" {}", 0, IO, "does not start with '{'");
    refused("", 0, IO, "does not start with '{'");
    refused("{\"a\" {}}", 0, IO, "expected ':' after a tensor's name");
    refused("{}x", 0, IO, "only whitespace may follow");
    refused("{", 0, IO, "expected '\"' to start a string, found the end");
    refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}", 4, IO,
            "or ',' after a tensor's entry");
    refused("{\"a\x01\":{}}", 0, IO, "control character 0x01");
    refused("{\"\xc3\x28\":{}}", 0, IO, "not valid UTF-8");
    refused("{\"\xed\xa0\x80\":{}}", 0, IO, "not valid UTF-8"); /* an encoded surrogate */
    refused("{\"\xc0\xaf\":{}}", 0, IO, "not valid UTF-8");     /* overlong */
    refused("{\"a\\q\":{}}", 0, IO, "'\\q' is not a JSON escape");
    refused("{\"a\\u00\":{}}", 0, IO, "4 hex digits");
    refused("{\"a\\u0000\":{}}", 0, IO, "NUL");
    refused("{\"a\\ud800x\":{}}", 0, IO, "high surrogate without a low one");
    refused("{\"a\\udc00\":{}}", 0, IO, "low surrogate");
    refused("{" T1("a", "F32", "[-1]", 0, 4) "}", 4, IO, "non-negative integer, found '-'");
    refused("{" T1("a", "F32", "[01]", 0, 4) "}", 4, IO, "leading zero");
    refused("{" T1("a", "F32", "[1.0]", 0, 4) "}", 4, IO, "fraction or an exponent");
    refused("{" T1("a", "F32", "[1e0]", 0, 4) "}", 4, IO, "fraction or an exponent");
    refused("{" T1("a", "F32", "[99999999999999999999]", 0, 4) "}", 4, IO, "64 bits");
    refused("{" T1("a", "F32", "[9223372036854775808]", 0, 4) "}", 4, IO, "too large");
    refused("{" T1("a", "F32", "[1,]", 0, 4) "}", 4, IO, "non-negative integer");
    refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, IO,
            "between the two data_offsets");
    refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 4, IO,
            "after the two data_offsets");
    /* The format's keys. */
    refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, IO, "tensor 'a' has no 'data_offsets'");
    refused("{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
            IO, "tensor 'a' has 'dtype' twice");
    refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", 4, IO,
            "has key 'x'");
    refused("{\"a\":[]}", 0, IO, "expected '{' to start a tensor's entry");
    refused("{\"a\":{\"dtype\":3,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, IO,
            "expected '\"' to start a string");
    refused("{\"__metadata__\":{\"k\":1}}", 0, IO, "metadata 'k' is not a string");
    refused("{\"__metadata__\":[]}", 0, IO, "to start __metadata__");
    refused("{\"__metadata__\":{},\"__metadata__\":{}}", 0, IO, "'__metadata__' appears twice");
    refused("{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0, IO,
            "metadata key 'k' appears twice");
    refused("{" T1("a", "F32", "[1]", 0, 4) "," T1("a", "F32", "[1]", 4, 8) "}", 8, IO,
            "tensor name 'a' appears twice");
    /* dtypes and shapes. */
    refused("{" T1("w", "F8_E4M3", "[4]", 0, 4) "}", 4, TC_ERROR_DTYPE,
            "tensor 'w' has dtype 'F8_E4M3'");
    refused("{" T1("w", "U16", "[2]", 0, 4) "}", 4, TC_ERROR_DTYPE, "tensor 'w' has dtype 'U16'");
    refused("{" T1("w", "F32", "[1,1,1,1,1,1,1,1,1]", 0, 4) "}", 4, TC_ERROR_NOT_SUPPORTED,
            "more than 8 dimensions");
    refused("{" T1("w", "F32", "[2,3]", 0, 20) "}", 20, IO,
            "tensor 'w': data_offsets [0, 20] hold 20 bytes, but its shape of 2 dimensions and "
            "dtype F32 need 24");
    refused("{" T1("w", "F64", "[4294967296,4294967296]", 0, 8) "}", 8, IO, "more than 2^64");
    refused("{" T1("w", "F32", "[1]", 8, 4) "}", 8, IO, "end before they begin");
    /* No bytes, but sizes whose product (a 0 counted as 1) passes 2^63: the
     * contiguous strides would overflow. tc_tensor_empty refuses the same. */
    refused("{" T1("w", "F32", "[0,4294967296,4294967296]", 0, 0) "}", 0, TC_ERROR_SHAPE,
            "tensor 'w': shape [0, 4294967296, 4294967296]: its sizes multiply past 2^63");
    refused("{" T1("w", "I8", "[3,0,4611686018427387904]", 0, 0) "}", 0, TC_ERROR_SHAPE,
            "multiply past 2^63");
    refused(
        "{" T1("a", "F32", "[1]", 0, 4) "," T1("z", "BOOL", "[0,9223372036854775807,2]", 4, 4) "}",
        4, TC_ERROR_SHAPE, "tensor 'z'");
    tc_tensor *none = NULL;
    int64_t huge[3] = {0, INT64_C(1) << 32, INT64_C(1) << 32};
    CHECK_STATUS(tc_tensor_empty(3, huge, TC_FLOAT32, CPU, &none), TC_ERROR_SHAPE);
    /* Offsets against the buffer. */
    refused("{" T1("a", "F32", "[2]", 0, 8) "}", 4, IO,
            "need 8 bytes of data, but the file holds 4");
    refused("{" T1("a", "F32", "[2]", 0, 8) "," T1("b", "F32", "[2]", 4, 12) "}", 12, IO,
            "tensors 'a' and 'b' overlap");
    refused("{" T1("a", "F32", "[1]", 0, 4) "," T1("b", "F32", "[1]", 8, 12) "}", 12, IO,
            "bytes [4, 8) of the data buffer belong to no tensor");
    refused("{" T1("a", "F32", "[1]", 4, 8) "}", 8, IO, "bytes [0, 4) of the data buffer");
    refused("{" T1("a", "F32", "[1]", 0, 4) "}", 6, IO,
            "cover 4 bytes of data, but the file holds 6");
    /* What is allowed: whitespace around tokens, zero-size tensors sharing an
     * offset, escaped names. */
    tc_safetensors *ok = NULL;
    CHECK_OK(tc_safetensors_open(
        make_file(
            "{ \"e1\" : {\"dtype\":\"F32\",\"shape\":[0],"
            "\"data_offsets\":[4,4]},\n\t" T1("a", "F32", "[1]", 0, 4) ", " T1(
                "e0", "I8", "[0, 3]", 4, 4) ",\"\\u00e9\\ud83d"
                                            "\\ude00\\\"\":{\"shape\":[],\"data_offsets\":[4,5],"
                                            "\"dtype\":\"BOOL\"}}\r\n   ",
            5),
        &ok));
    CHECK(tc_safetensors_count(ok) == 4);
    tc_dtype dt;
    int nd = -1;
    CHECK_OK(tc_safetensors_info(ok, "\xc3\xa9\xf0\x9f\x98\x80\"", &dt, &nd, NULL));
    CHECK(dt == TC_BOOL && nd == 0);
    tc_safetensors_close(ok);
}

/* ---- what open and save find at the path ------------------------------------------------ */

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "test_safetensors: FAILED: a call blocked for 20 s\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(1);
}

/* Open refuses what is not a regular file, and never blocks on a FIFO that
 * has no writer (the alarm turns a hang into a failure). */
static void test_open_not_regular(void)
{
    signal(SIGALRM, on_alarm);
    alarm(20);
    tc_safetensors *const SENT = (tc_safetensors *)(uintptr_t)0x5e5e5e5e;
    tc_safetensors *f = SENT;
    const char *fifo = file_named("fifo.safetensors");
    CHECK(mkfifo(fifo, 0600) == 0);
    CHECK_STATUS(tc_safetensors_open(fifo, &f), TC_ERROR_IO);
    CHECK(says("fifo.safetensors: is a FIFO, not a regular file") && f == SENT);
    char link[256];
    snprintf(link, sizeof link, "%s/to_fifo", dir);
    CHECK(symlink(fifo, link) == 0);
    CHECK_STATUS(tc_safetensors_open(link, &f), TC_ERROR_IO);
    CHECK(says("to_fifo: is a FIFO") && f == SENT);
    unlink(link);
    CHECK_STATUS(tc_safetensors_open("/dev/null", &f), TC_ERROR_IO);
    CHECK(says("/dev/null: is a character device") && f == SENT);
    CHECK_STATUS(tc_safetensors_open(dir, &f), TC_ERROR_IO);
    CHECK(says("is a directory") && f == SENT);
    alarm(0);
}

/* A file of tensors "a" (F32 [4] = 1..4) and "b" (I64 [2] = 7, -9), saved. */
static const char *save_ab(const char *name)
{
    tc_tensor *a = NULL, *b = NULL;
    float av[4] = {1, 2, 3, 4};
    int64_t bv[2] = {7, -9}, four = 4, two = 2;
    CHECK_OK(tc_tensor_from_data(av, 1, &four, TC_FLOAT32, CPU, &a));
    CHECK_OK(tc_tensor_from_data(bv, 1, &two, TC_INT64, CPU, &b));
    const char *names[] = {"a", "b"};
    const tc_tensor *ts[] = {a, b};
    const char *p = file_named(name);
    CHECK_OK(tc_safetensors_save(p, names, ts, 2, NULL));
    tc_tensor_release(a);
    tc_tensor_release(b);
    return p;
}

/* get_copy: a tensor of its own, read from the file; a truncated file is an
 * error, not a SIGBUS, and copies made before stay readable. */
static void test_get_copy(void)
{
    const char *p = save_ab("copy.safetensors");
    tc_safetensors *f = NULL;
    CHECK_OK(tc_safetensors_open(p, &f));
    tc_tensor *view = NULL, *a = NULL, *a2 = NULL, *b = NULL;
    CHECK_OK(tc_safetensors_get(f, "a", CPU, &view));
    CHECK_OK(tc_safetensors_get_copy(f, "a", CPU, &a));
    CHECK_OK(tc_safetensors_get_copy(f, "a", CPU, &a2));
    CHECK_OK(tc_safetensors_get_copy(f, "b", CPU, &b));
    CHECK(tc_tensor_dtype(a) == TC_FLOAT32 && tc_tensor_ndim(a) == 1 && tc_tensor_size(a, 0) == 4);
    CHECK(tc_tensor_data_ptr(a) != tc_tensor_data_ptr(view) &&
          tc_tensor_data_ptr(a) != tc_tensor_data_ptr(a2));
    double *v = tc_test_values(a);
    for (int i = 0; v && i < 4; i++)
        CHECK(v[i] == i + 1);
    free(v);
    v = tc_test_values(b);
    CHECK(v && v[0] == 7 && v[1] == -9);
    free(v);
    /* A write to the copy reaches nothing else. */
    tc_tensor *z = NULL;
    int64_t four = 4;
    CHECK_OK(tc_tensor_zeros(1, &four, TC_FLOAT32, CPU, &z));
    CHECK_OK(tc_tensor_copy_(a, z, false));
    v = tc_test_values(view);
    CHECK(v && v[0] == 1 && v[3] == 4);
    free(v);
    v = tc_test_values(a2);
    CHECK(v && v[0] == 1 && v[3] == 4);
    free(v);
    tc_tensor_release(z);
    tc_tensor_release(view); /* never read again: the file is cut below */
    /* Another writer truncates the file to its header: the copying read says
     * so; what was copied before is whole. */
    size_t len = 0;
    unsigned char *raw = read_all(p, &len);
    uint64_t hl = 0;
    for (int i = 0; raw && i < 8; i++)
        hl |= (uint64_t)raw[i] << (8 * i);
    free(raw);
    CHECK(truncate(p, (off_t)(8 + hl)) == 0);
    tc_tensor *const SENT = (tc_tensor *)(uintptr_t)0x5e5e5e5e;
    tc_tensor *o = SENT;
    CHECK_STATUS(tc_safetensors_get_copy(f, "b", CPU, &o), TC_ERROR_IO);
    CHECK(says("tc_safetensors_get_copy: ") && says("copy.safetensors: tensor 'b'") &&
          says("truncated") && o == SENT);
    CHECK_STATUS(tc_safetensors_get_copy(f, "a", CPU, &o), TC_ERROR_IO);
    CHECK(o == SENT);
    v = tc_test_values(b);
    CHECK(v && v[0] == 7 && v[1] == -9);
    free(v);
    v = tc_test_values(a2);
    CHECK(v && v[0] == 1 && v[3] == 4);
    free(v);
    /* The arguments are checked as get checks them. */
    CHECK_STATUS(tc_safetensors_get_copy(f, "nope", CPU, &o), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("no tensor named 'nope'"));
    CHECK_STATUS(tc_safetensors_get_copy(f, "a", CPU, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_safetensors_get_copy(f, NULL, CPU, &o), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_safetensors_get_copy(f, "a", (tc_device){TC_CPU, 3}, &o),
                 TC_ERROR_INVALID_ARGUMENT);
    if (!tc_is_available())
        CHECK_STATUS(tc_safetensors_get_copy(f, "a", (tc_device){TC_CUDA, 0}, &o),
                     TC_ERROR_NO_DEVICE);
    CHECK(o == SENT);
    CHECK_OK(tc_safetensors_close(f));
    CHECK_STATUS(tc_safetensors_get_copy(f, "a", CPU, &o), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_safetensors_get_copy(NULL, "a", CPU, &o), TC_ERROR_INVALID_ARGUMENT);
    tc_tensor_release(a);
    tc_tensor_release(a2);
    tc_tensor_release(b);
    unlink(p);
}

static mode_t mode_of(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 ? sb.st_mode & 07777 : (mode_t)-1;
}

/* Reads tensor "a" of the file at p, value 0, as a double (NaN if it fails). */
static double first_a(const char *p)
{
    tc_safetensors *f = NULL;
    tc_tensor *t = NULL;
    double r = 0.0 / 0.0;
    if (tc_safetensors_open(p, &f) != TC_OK)
        return r;
    if (tc_safetensors_get_copy(f, "a", CPU, &t) == TC_OK) {
        double *v = tc_test_values(t);
        if (v)
            r = v[0];
        free(v);
    }
    tc_tensor_release(t);
    tc_safetensors_close(f);
    return r;
}

/* Saves "a" = {x} to p. */
static tc_status save_a(const char *p, float x)
{
    tc_tensor *a = NULL;
    int64_t one = 1;
    CHECK_OK(tc_tensor_from_data(&x, 1, &one, TC_FLOAT32, CPU, &a));
    const char *names[] = {"a"};
    const tc_tensor *ts[] = {a};
    tc_status st = tc_safetensors_save(p, names, ts, 1, NULL);
    tc_tensor_release(a);
    return st;
}

static void test_save_targets(void)
{
    char p[256], q[256], l[256];
    snprintf(p, sizeof p, "%s/t.safetensors", dir);
    snprintf(q, sizeof q, "%s/t_hard.safetensors", dir);
    snprintf(l, sizeof l, "%s/t_link.safetensors", dir);
    /* A new file follows the umask, as fopen's files do. */
    mode_t old = umask(022);
    CHECK_OK(save_a(p, 1));
    CHECK(mode_of(p) == 0644);
    unlink(p);
    umask(027);
    CHECK_OK(save_a(p, 1));
    CHECK(mode_of(p) == 0640);
    umask(old);
    /* A file replaced keeps its mode. */
    CHECK(chmod(p, 0604) == 0);
    CHECK_OK(save_a(p, 2));
    CHECK(mode_of(p) == 0604 && first_a(p) == 2);
    CHECK(chmod(p, 0644) == 0);
    CHECK_OK(save_a(p, 3));
    CHECK(mode_of(p) == 0644 && first_a(p) == 3);
    /* A symbolic link is written through: the link stays, its file changes. */
    CHECK(symlink("t.safetensors", l) == 0);
    CHECK_OK(save_a(l, 4));
    struct stat sb;
    CHECK(lstat(l, &sb) == 0 && S_ISLNK(sb.st_mode));
    CHECK(first_a(p) == 4 && first_a(l) == 4 && mode_of(p) == 0644);
    unlink(l);
    /* A hard link is broken: the path has the new file, the other name the
     * old one (as the header says). */
    CHECK(link(p, q) == 0);
    CHECK_OK(save_a(p, 5));
    CHECK(first_a(p) == 5 && first_a(q) == 4);
    unlink(q);
    /* Refused, nothing written: a FIFO, a directory, a link to a device, a
     * link to nothing. */
    snprintf(q, sizeof q, "%s/t_fifo", dir);
    CHECK(mkfifo(q, 0600) == 0);
    CHECK_STATUS(save_a(q, 6), TC_ERROR_IO);
    CHECK(says("t_fifo: is a FIFO") && lstat(q, &sb) == 0 && S_ISFIFO(sb.st_mode));
    unlink(q);
    snprintf(q, sizeof q, "%s/t_dir", dir);
    CHECK(mkdir(q, 0700) == 0);
    CHECK_STATUS(save_a(q, 6), TC_ERROR_IO);
    CHECK(says("t_dir: is a directory") && lstat(q, &sb) == 0 && S_ISDIR(sb.st_mode));
    rmdir(q);
    CHECK(symlink("/dev/null", l) == 0);
    CHECK_STATUS(save_a(l, 6), TC_ERROR_IO);
    CHECK(says("is a character device through a link to /dev/null"));
    CHECK(lstat(l, &sb) == 0 && S_ISLNK(sb.st_mode));
    unlink(l);
    CHECK(symlink("missing-target", l) == 0);
    CHECK_STATUS(save_a(l, 6), TC_ERROR_IO);
    CHECK(says("a symbolic link that leads to no file"));
    CHECK(lstat(l, &sb) == 0 && S_ISLNK(sb.st_mode));
    unlink(l);
    /* No temporary was left behind by any of it. */
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));)
        if (strstr(e->d_name, ".tmp.")) {
            printf("  left behind: %s\n", e->d_name);
            CHECK(!"a temporary was left behind");
        }
    if (d)
        closedir(d);
    unlink(p);
}

/* ---- bad arguments --------------------------------------------------------------------- */

static void test_bad_arguments(void)
{
    tc_safetensors *f = NULL;
    CHECK_STATUS(tc_safetensors_open(NULL, &f), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_safetensors_open("x", NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_safetensors_open(file_named("missing.safetensors"), &f), TC_ERROR_IO);
    CHECK(says("missing.safetensors") && says("No such file"));
    CHECK_STATUS(tc_safetensors_open(dir, &f), TC_ERROR_IO);
    CHECK(says("not a regular file"));
    CHECK_STATUS(tc_safetensors_close(NULL), TC_ERROR_INVALID_ARGUMENT);

    int64_t two = 2;
    tc_tensor *t = NULL, *dead = NULL;
    CHECK_OK(tc_tensor_ones(1, &two, TC_FLOAT32, CPU, &t));
    CHECK_OK(tc_tensor_ones(1, &two, TC_FLOAT32, CPU, &dead));
    tc_tensor_release(dead);
    const tc_tensor *one[] = {t}, *two_t[] = {t, t}, *bad[] = {dead}, *nul[] = {NULL};
    const char *nm[] = {"x"}, *dup[] = {"x", "x"}, *md_key[] = {"__metadata__"},
               *bad_utf8[] = {"\xff"}, *nonm[] = {NULL};
    const char *p = file_named("out.safetensors");
    CHECK_STATUS(tc_safetensors_save(NULL, nm, one, 1, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_safetensors_save("", nm, one, 1, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("path is empty"));
    CHECK_STATUS(tc_safetensors_save(p, NULL, one, 1, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_safetensors_save(p, nm, NULL, 1, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_safetensors_save(p, nm, one, -1, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_safetensors_save(p, dup, two_t, 2, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("name 'x' is given twice"));
    CHECK_STATUS(tc_safetensors_save(p, md_key, one, 1, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_safetensors_save(p, bad_utf8, one, 1, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("UTF-8"));
    CHECK_STATUS(tc_safetensors_save(p, nonm, one, 1, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_safetensors_save(p, nm, bad, 1, NULL), TC_ERROR_INVALID_HANDLE);
    CHECK(says("tensors[0]"));
    CHECK_STATUS(tc_safetensors_save(p, nm, nul, 1, NULL), TC_ERROR_INVALID_ARGUMENT);
    const char *md_odd[] = {"k", NULL, NULL}, *md_dup[] = {"k", "1", "k", "2", NULL};
    CHECK_STATUS(tc_safetensors_save(p, nm, one, 1, md_odd), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("metadata key 'k' has no value"));
    CHECK_STATUS(tc_safetensors_save(p, nm, one, 1, md_dup), TC_ERROR_INVALID_ARGUMENT);
    CHECK(access(p, F_OK) != 0); /* nothing was written */
    CHECK_STATUS(tc_safetensors_save("/nonexistent-dir/x.safetensors", nm, one, 1, NULL),
                 TC_ERROR_IO);
    CHECK(says("temporary"));

    CHECK_OK(tc_safetensors_save(p, nm, one, 1, NULL));
    CHECK_OK(tc_safetensors_open(p, &f));
    tc_tensor *const SENT = (tc_tensor *)(uintptr_t)0x5e5e5e5e;
    tc_tensor *o = SENT;
    CHECK_STATUS(tc_safetensors_get(f, "y", CPU, &o), TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("no tensor named 'y'"));
    CHECK_STATUS(tc_safetensors_get(f, NULL, CPU, &o), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_safetensors_get(f, "x", CPU, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_safetensors_get(f, "x", (tc_device){TC_CPU, 3}, &o), TC_ERROR_INVALID_ARGUMENT);
    if (!tc_is_available())
        CHECK_STATUS(tc_safetensors_get(f, "x", (tc_device){TC_CUDA, 0}, &o), TC_ERROR_NO_DEVICE);
    CHECK(o == SENT);
    CHECK_STATUS(tc_safetensors_info(f, "y", NULL, NULL, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_safetensors_metadata(f, NULL, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_OK(tc_safetensors_close(f));
    CHECK_STATUS(tc_safetensors_close(f), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_safetensors_get(f, "x", CPU, &o), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_safetensors_info(f, "x", NULL, NULL, NULL), TC_ERROR_INVALID_HANDLE);
    CHECK(tc_safetensors_name(f, 0) == NULL && tc_safetensors_metadata_key(f, 0) == NULL);
    void *garbage = tc_test_garbage(64);
    CHECK_STATUS(tc_safetensors_close(garbage), TC_ERROR_INVALID_HANDLE);
    free(garbage);
    tc_tensor_release(t);
    unlink(p);
}

/* ---- GPU ------------------------------------------------------------------------------- */

static void test_gpu(void)
{
    if (!tc_is_available()) {
        printf("test_safetensors: no GPU, the GPU part is skipped\n");
        return;
    }
    const tc_device GPU = {TC_CUDA, 0};
    int64_t sz[2] = {3, 4};
    tc_tensor *a = NULL, *m = NULL, *tr = NULL, *g = NULL;
    CHECK_OK(tc_tensor_arange(0, 12, 1, TC_BFLOAT16, GPU, &a));
    CHECK_OK(tc_tensor_view(a, 2, sz, &m));
    CHECK_OK(tc_tensor_transpose(m, 0, 1, &tr));
    const char *names[] = {"gpu_t"};
    const tc_tensor *ts[] = {tr};
    CHECK_OK(tc_safetensors_save(file_named("gpu.safetensors"), names, ts, 1, NULL));
    tc_safetensors *f = NULL;
    CHECK_OK(tc_safetensors_open(path, &f));
    CHECK_OK(tc_safetensors_get(f, "gpu_t", GPU, &g));
    CHECK(tc_tensor_is_cuda(g) && tc_tensor_dtype(g) == TC_BFLOAT16);
    tc_tensor *gc = NULL;
    CHECK_OK(tc_safetensors_get_copy(f, "gpu_t", GPU, &gc));
    CHECK(tc_tensor_is_cuda(gc) && tc_tensor_dtype(gc) == TC_BFLOAT16);
    CHECK_OK(tc_safetensors_close(f));
    double *v = tc_test_values(g), *vc = tc_test_values(gc);
    for (int i = 0; v && vc && i < 4; i++)
        for (int j = 0; j < 3; j++)
            CHECK(v[i * 3 + j] == 4.0 * j + i && vc[i * 3 + j] == 4.0 * j + i);
    free(v);
    free(vc);
    tc_tensor_release(gc);
    tc_tensor_release(a);
    tc_tensor_release(m);
    tc_tensor_release(tr);
    tc_tensor_release(g);
}

int main(void)
{
    tc_test_init();
    CHECK(mkdtemp(dir) != NULL);
    test_round_trip_dtypes();
    test_round_trip_shapes();
    test_zero_copy_and_lifetime();
    test_misaligned();
    test_malformed();
    test_open_not_regular();
    test_get_copy();
    test_save_targets();
    test_bad_arguments();
    test_gpu();
    const char *left[] = {"all", "shapes", "none", "zc", "hand", "gpu", "fifo"};
    for (size_t i = 0; i < sizeof left / sizeof *left; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s.safetensors", left[i]);
        unlink(file_named(name));
    }
    rmdir(dir);
    return TC_TEST_DONE();
}
