/* The stream sanitizer on a GPU: the classic bugs of the CUDA semantics note,
 * each reported with both call sites, and the same programs correctly
 * synchronized reporting nothing (and computing the right values):
 *   1. an in-place op on a side stream racing a read on the default stream
 *      (fixed by wait_stream, or by an event);
 *   2. a tensor used on a side stream, released without record_stream, its
 *      memory then reused on its own stream (fixed by record_stream);
 *   3. a non_blocking copy to pinned memory read by the host before a sync
 *      (fixed by a stream synchronize);
 * plus error mode (the reading call fails with TC_ERROR_RACE and writes
 * nothing), a user kernel declared with tc_sanitizer_access, a jiterator
 * kernel on a side stream, a plain one-stream program that reports nothing,
 * and graph replays (a graph-pool tensor released after replays on another
 * stream is silent; a racing replay in error mode is refused). Issue 26: a
 * writer that skips one of 20 readers, an unordered read after 16 ordered
 * ones, a launch with 7 racing outputs (7 reports) and PyTorch's doc example
 * (an in-place mul on a side stream: 1 report). Needs a GPU (exit 77 without). */
#include <math.h>
#include <stdlib.h>

#define TC_TEST_PRINT_REPORTS  /* the first report of each kind, for the log */
#include "sanitizer_reports.h" /* on_report, reports(), last_kind, last_text, ... */
#include "tc_test.h"

static const tc_device GPU = {TC_CUDA, -1}, CPU = {TC_CPU, -1};
enum { N = 1 << 20 };

/* The report names both operations and has a call stack for each. */
static void check_report(tc_sanitizer_race kind, const char *cur, const char *earlier)
{
    CHECK(last_kind == kind);
    CHECK(strcmp(last_cur, cur) == 0);
    CHECK(strcmp(last_earlier, earlier) == 0);
    CHECK(strstr(last_text, tc_sanitizer_race_string(kind)) != NULL);
    const char *c = strstr(last_text, "current access:"), *e = strstr(last_text, "earlier access:");
    CHECK(c && e && strstr(c, "#0 ") && strstr(e, "#0 "));
    CHECK(strstr(last_text, "main") != NULL); /* the test's frames are named (-rdynamic) */
    if (last_kind != kind || strcmp(last_cur, cur) || strcmp(last_earlier, earlier))
        fprintf(stderr, "unexpected report:\n%s\n", last_text);
}

static double host_sum(const tc_tensor *t)
{
    double *v = tc_test_values(t), s = 0;
    for (int64_t i = 0; v && i < tc_tensor_numel(t); i++)
        s += v[i];
    free(v);
    return s;
}

static double item_of(const tc_tensor *t)
{
    double v = NAN;
    CHECK_OK(tc_tensor_item(t, &v));
    return v;
}

/* 1. in place on a side stream, then read on the default stream */
static void test_side_stream_write(tc_stream *side)
{
    int64_t n = N;
    tc_tensor *x = NULL, *s = NULL;
    CHECK_OK(tc_tensor_zeros(1, &n, TC_FLOAT32, GPU, &x));
    CHECK_OK(tc_stream_wait_stream(side, NULL)); /* the side stream starts after the zeros */
    tc_stream_guard g = tc_stream_guard_enter(side);
    CHECK_OK(tc_tensor_uniform_(x, 0, 1, NULL));
    tc_stream_guard_exit(&g);
    CHECK_OK(tc_tensor_sum(x, TC_ALL_DIMS, false, &s)); /* the bug: no wait */
    CHECK(reports() == 1);
    check_report(TC_SANITIZER_RACE_READ_AFTER_WRITE, "tc_tensor_sum", "tc_tensor_uniform_");
    tc_tensor_release(s);
    CHECK_OK(tc_synchronize(-1));

    /* fixed with wait_stream */
    CHECK_OK(tc_stream_wait_stream(side, NULL));
    g = tc_stream_guard_enter(side);
    CHECK_OK(tc_tensor_uniform_(x, 0, 1, NULL));
    tc_stream_guard_exit(&g);
    CHECK_OK(tc_stream_wait_stream(NULL, side));
    CHECK_OK(tc_tensor_sum(x, TC_ALL_DIMS, false, &s));
    double got = item_of(s), want = host_sum(x);
    CHECK(fabs(got - want) <= 1e-4 * fabs(want));
    CHECK(want > 0.4 * N && want < 0.6 * N);
    tc_tensor_release(s);
    CHECK(reports() == 0);

    /* fixed with an event */
    tc_event *done = NULL;
    CHECK_OK(tc_event_create(TC_EVENT_FLAG_DEFAULT, &done));
    CHECK_OK(tc_stream_wait_stream(side, NULL));
    g = tc_stream_guard_enter(side);
    CHECK_OK(tc_tensor_normal_(x, 0, 1, NULL));
    tc_stream_guard_exit(&g);
    CHECK_OK(tc_event_record(done, side));
    CHECK_OK(tc_stream_wait_event(NULL, done));
    CHECK_OK(tc_tensor_sum(x, TC_ALL_DIMS, false, &s));
    got = item_of(s), want = host_sum(x);
    CHECK(fabs(got - want) <= 1e-3 * sqrt((double)N) + 1e-4 * fabs(want));
    tc_tensor_release(s);
    CHECK(reports() == 0);

    /* error mode: the reading call fails, writes nothing, carries the report */
    CHECK_OK(tc_sanitizer_enable(TC_SANITIZER_MODE_ERROR));
    CHECK_OK(tc_stream_wait_stream(side, NULL));
    g = tc_stream_guard_enter(side);
    CHECK_OK(tc_tensor_uniform_(x, 0, 1, NULL));
    tc_stream_guard_exit(&g);
    s = NULL;
    CHECK_STATUS(tc_tensor_sum(x, TC_ALL_DIMS, false, &s), TC_ERROR_RACE);
    CHECK(s == NULL);
    CHECK(strstr(tc_last_error(), "tc_tensor_sum: tcuda sanitizer: read-after-write") ==
          tc_last_error());
    CHECK(strstr(tc_last_error(), "tc_tensor_uniform_") != NULL);
    CHECK_OK(tc_event_record(done, side));
    CHECK_OK(tc_event_synchronize(done));
    CHECK_OK(tc_tensor_sum(x, TC_ALL_DIMS, false, &s)); /* the host waited: fine now */
    CHECK_OK(tc_sanitizer_enable(TC_SANITIZER_MODE_REPORT));
    reports();
    tc_tensor_release(s);
    CHECK_OK(tc_event_destroy(done));
    tc_tensor_release(x);
    CHECK_OK(tc_synchronize(-1));
    CHECK(reports() == 0);
}

/* 2. freed while a side stream may still read it, the memory then reused */
static void test_reuse(tc_stream *side)
{
    int64_t n = N;
    tc_tensor *y = NULL, *z = NULL, *w = NULL;
    CHECK_OK(tc_tensor_full(1, &n, 1.5, TC_FLOAT32, GPU, &y));
    void *yp = tc_tensor_data_ptr(y);
    CHECK_OK(tc_stream_wait_stream(side, NULL));
    tc_stream_guard g = tc_stream_guard_enter(side);
    CHECK_OK(tc_tensor_mul(y, y, &z)); /* reads y on the side stream */
    tc_stream_guard_exit(&g);
    CHECK_OK(tc_tensor_release(y)); /* the bug: no record_stream */
    CHECK(reports() == 1);
    check_report(TC_SANITIZER_RACE_REUSE_AFTER_FREE, "tc_tensor_release", "tc_tensor_mul");
    CHECK(strstr(last_text, "record_stream") != NULL);
    CHECK_OK(tc_tensor_full(1, &n, 7, TC_FLOAT32, GPU, &w)); /* may reuse y's block */
    printf("reuse: the new tensor %s the freed block\n",
           tc_tensor_data_ptr(w) == yp ? "got" : "did not get");
    CHECK(reports() == 0);
    CHECK_OK(tc_synchronize(-1));
    tc_tensor_release(w);
    tc_tensor_release(z);

    /* fixed with record_stream: values stay right */
    CHECK_OK(tc_tensor_full(1, &n, 1.5, TC_FLOAT32, GPU, &y));
    CHECK_OK(tc_stream_wait_stream(side, NULL));
    g = tc_stream_guard_enter(side);
    CHECK_OK(tc_tensor_mul(y, y, &z));
    tc_stream_guard_exit(&g);
    CHECK_OK(tc_tensor_record_stream(y, side));
    CHECK_OK(tc_tensor_release(y));
    CHECK_OK(tc_tensor_full(1, &n, 7, TC_FLOAT32, GPU, &w));
    CHECK_OK(tc_stream_wait_stream(NULL, side));
    tc_tensor *s = NULL;
    CHECK_OK(tc_tensor_sum(z, TC_ALL_DIMS, false, &s));
    CHECK(item_of(s) == 2.25 * N);
    tc_tensor_release(s), tc_tensor_release(w), tc_tensor_release(z);
    CHECK_OK(tc_synchronize(-1));
    CHECK(reports() == 0);
}

/* 3. a non_blocking copy into pinned memory, read by the host before a sync */
static void test_pinned_read(void)
{
    int64_t n = N;
    tc_tensor *g = NULL, *h = NULL, *s = NULL;
    CHECK_OK(tc_tensor_full(1, &n, 3, TC_FLOAT32, GPU, &g));
    CHECK_OK(tc_tensor_to(g, CPU, TC_FLOAT32, true, &h));
    CHECK(tc_tensor_is_pinned(h));
    CHECK_OK(tc_tensor_sum(h, TC_ALL_DIMS, false, &s)); /* the bug: the copy may not be done */
    CHECK(reports() == 1);
    check_report(TC_SANITIZER_RACE_READ_AFTER_WRITE, "tc_tensor_sum", "tc_tensor_to");
    CHECK(strstr(last_text, "pinned host allocation") != NULL);
    tc_tensor_release(s), tc_tensor_release(h);
    CHECK_OK(tc_synchronize(-1));

    /* fixed with a synchronize */
    CHECK_OK(tc_tensor_to(g, CPU, TC_FLOAT32, true, &h));
    CHECK_OK(tc_stream_synchronize(NULL));
    CHECK_OK(tc_tensor_sum(h, TC_ALL_DIMS, false, &s));
    CHECK(item_of(s) == 3.0 * N);
    tc_tensor_release(s);
    /* or an event the host waits for */
    tc_tensor *h2 = NULL;
    tc_event *e = NULL;
    CHECK_OK(tc_tensor_to(g, CPU, TC_FLOAT32, true, &h2));
    CHECK_OK(tc_stream_record_event(NULL, &e));
    CHECK_OK(tc_event_synchronize(e));
    tc_tensor *one = NULL;
    CHECK_OK(tc_tensor_narrow(h2, 0, 0, 1, &one));
    CHECK(item_of(one) == 3.0);
    CHECK(reports() == 0);
    tc_tensor_release(one), tc_tensor_release(h2), tc_tensor_release(h), tc_tensor_release(g);
    CHECK_OK(tc_event_destroy(e));
}

/* A user kernel joins in with tc_sanitizer_access. */
static void test_user_kernel(tc_stream *side)
{
    void *p = NULL;
    CHECK_OK(tc_caching_allocator_alloc(4096, -1, NULL, &p));
    CHECK_OK(tc_stream_wait_stream(side, NULL));
    CHECK_OK(tc_sanitizer_access(p, 4096, side, TC_SANITIZER_ACCESS_WRITE, "my_producer"));
    CHECK_OK(tc_sanitizer_access(p, 1024, NULL, TC_SANITIZER_ACCESS_READ, "my_consumer"));
    CHECK(reports() == 1);
    check_report(TC_SANITIZER_RACE_READ_AFTER_WRITE, "my_consumer", "my_producer");
    CHECK_OK(tc_stream_synchronize(side));
    CHECK_OK(tc_sanitizer_access(p, 1024, NULL, TC_SANITIZER_ACCESS_READ, "my_consumer"));
    CHECK_OK(tc_stream_synchronize(NULL));
    CHECK_OK(tc_caching_allocator_delete(p));
    CHECK(reports() == 0);
}

/* A jiterator kernel on a side stream writes; a built-in op reads without a
 * wait: reported, naming the jiterator call. With the wait: silent. */
static void test_jiterator(tc_stream *side)
{
    tc_jit_fn *fn = NULL;
    CHECK_OK(tc_jit_fn_create("template <typename T> T twice(T x) { return x + x; }", NULL, &fn));
    int64_t n = 4096;
    tc_tensor *x = NULL, *y = NULL, *s = NULL;
    CHECK_OK(tc_tensor_ones(1, &n, TC_FLOAT32, GPU, &x));
    CHECK_OK(tc_tensor_zeros(1, &n, TC_FLOAT32, GPU, &y));
    CHECK_OK(tc_stream_wait_stream(side, NULL));
    const tc_tensor *in[1] = {x};
    tc_tensor *out[1] = {y};
    tc_stream_guard g = tc_stream_guard_enter(side);
    CHECK_OK(tc_jit_fn_call(fn, in, 1, NULL, out));
    tc_stream_guard_exit(&g);
    CHECK_OK(tc_tensor_sum(y, TC_ALL_DIMS, false, &s)); /* the bug: no wait */
    CHECK(reports() == 1);
    check_report(TC_SANITIZER_RACE_READ_AFTER_WRITE, "tc_tensor_sum", "twice"); /* its label */
    tc_tensor_release(s);
    CHECK_OK(tc_stream_wait_stream(NULL, side));
    CHECK_OK(tc_tensor_sum(y, TC_ALL_DIMS, false, &s));
    CHECK(item_of(s) == 2.0 * (double)n);
    CHECK(reports() == 0);
    tc_tensor_release(s);
    tc_tensor_release(x);
    tc_tensor_release(y);
    CHECK_OK(tc_jit_fn_destroy(fn));
    CHECK_OK(tc_synchronize(-1));
}

/* One stream, the usual things: nothing to report. */
static void test_one_stream_silent(void)
{
    int64_t sz[2] = {64, 64};
    tc_tensor *a = NULL, *b = NULL, *c = NULL, *s = NULL, *h = NULL, *back = NULL;
    CHECK_OK(tc_tensor_rand(2, sz, TC_FLOAT32, GPU, NULL, &a));
    CHECK_OK(tc_tensor_matmul(a, a, &b));
    CHECK_OK(tc_tensor_add(a, b, &c));
    CHECK_OK(tc_tensor_to(c, CPU, TC_FLOAT32, false, &h));
    CHECK_OK(tc_tensor_to(h, GPU, TC_FLOAT32, true, &back));
    CHECK_OK(tc_tensor_sub(back, c, &s));
    tc_tensor *m = NULL;
    CHECK_OK(tc_tensor_max(s, TC_ALL_DIMS, false, &m));
    CHECK(item_of(m) == 0);
    tc_tensor *ts[] = {a, b, c, s, h, back, m};
    for (int i = 0; i < 7; i++)
        tc_tensor_release(ts[i]);
    CHECK(reports() == 0);
}

/* A graph's pool tensor, written by replays on the default stream, then
 * released: the pool hands it to no stream, so no report (it was once a
 * reuse-after-free on the capture stream, under TCUDA_SANITIZER=1). A
 * replay racing an unsynchronized read is reported; in error mode the
 * replay is refused and nothing of it recorded. */
static void test_graph_replay(tc_stream *side)
{
    tc_tensor *x = NULL, *y = NULL;
    CHECK_OK(tc_tensor_full(1, (int64_t[]){N}, 2.0, TC_FLOAT32, GPU, &x));
    CHECK_OK(tc_synchronize(-1));
    tc_graph *g = NULL;
    CHECK_OK(tc_graph_create(&g));
    tc_graph_pool_id none = {0};
    tc_graph_capture_guard gd = tc_graph_capture_guard_enter(g, none, NULL, TC_CAPTURE_MODE_GLOBAL);
    CHECK_OK(gd.status);
    CHECK_OK(tc_tensor_mul(x, x, &y)); /* y from the graph's pool */
    CHECK_OK(tc_graph_capture_guard_exit(&gd));
    for (int i = 0; i < 3; i++)
        CHECK_OK(tc_graph_replay(g)); /* on the default stream */
    CHECK(reports() == 0);
    /* a side stream writes x (after the replays), and the next replay reads
     * it without waiting for the side stream */
    tc_tensor *three = NULL;
    CHECK_OK(tc_tensor_full(1, (int64_t[]){N}, 3.0, TC_FLOAT32, GPU, &three));
    CHECK_OK(tc_stream_wait_stream(side, NULL));
    tc_stream_guard sg = tc_stream_guard_enter(side);
    CHECK_OK(tc_tensor_copy_(x, three, false));
    tc_stream_guard_exit(&sg);
    CHECK(reports() == 0);
    CHECK_OK(tc_sanitizer_enable(TC_SANITIZER_MODE_ERROR));
    CHECK_STATUS(tc_graph_replay(g), TC_ERROR_RACE);
    CHECK(strstr(tc_last_error(), "read-after-write") != NULL);
    CHECK_OK(tc_sanitizer_enable(TC_SANITIZER_MODE_REPORT));
    reports();
    CHECK_OK(tc_stream_wait_stream(tc_test_current_stream(-1), side));
    CHECK_OK(tc_graph_replay(g));
    CHECK(host_sum(y) == 9.0 * N);
    CHECK_OK(tc_graph_replay(g));
    CHECK_OK(tc_graph_destroy(g));
    tc_tensor_release(y); /* written on the default stream, unsynchronized */
    tc_tensor_release(x);
    tc_tensor_release(three);
    CHECK(reports() == 0);
    CHECK_OK(tc_synchronize(-1));
}

/* The nn and indexing kernels declare what they touch: a softmax, a
 * gather and a GEMM read on the default stream what a side stream writes */
static void test_nn_and_indexing(tc_stream *side)
{
    int64_t sz[2] = {8, 64};
    tc_tensor *x = NULL, *w = NULL, *idx = NULL, *y = NULL, *bias = NULL;
    CHECK_OK(tc_tensor_zeros(1, &sz[0], TC_FLOAT32, GPU, &bias));
    CHECK_OK(tc_tensor_zeros(2, sz, TC_FLOAT32, GPU, &x));
    CHECK_OK(tc_tensor_zeros(2, sz, TC_FLOAT32, GPU, &w));
    CHECK_OK(tc_tensor_arange(0, 8, 1, TC_INT64, GPU, &idx));
    for (int op = 0; op < 3; op++) {
        CHECK_OK(tc_stream_wait_stream(side, NULL));
        tc_stream_guard g = tc_stream_guard_enter(side);
        CHECK_OK(tc_tensor_uniform_(x, 0, 1, NULL));
        tc_stream_guard_exit(&g);
        const char *name = op == 0   ? "tc_nn_softmax"
                           : op == 1 ? "tc_tensor_index_select"
                                     : "tc_nn_linear";
        if (op == 0)
            CHECK_OK(tc_nn_softmax(x, -1, &y)); /* the bug: no wait */
        else if (op == 1)
            CHECK_OK(tc_tensor_index_select(x, 0, idx, &y));
        else
            CHECK_OK(tc_nn_linear(w, x, bias, &y)); /* one cuBLASLt call where it can */
        CHECK(reports() == 1);
        check_report(TC_SANITIZER_RACE_READ_AFTER_WRITE, name, "tc_tensor_uniform_");
        tc_tensor_release(y);
        CHECK_OK(tc_synchronize(-1));
        /* fixed with wait_stream: silent */
        CHECK_OK(tc_stream_wait_stream(side, NULL));
        g = tc_stream_guard_enter(side);
        CHECK_OK(tc_tensor_uniform_(x, 0, 1, NULL));
        tc_stream_guard_exit(&g);
        CHECK_OK(tc_stream_wait_stream(NULL, side));
        CHECK_OK(tc_nn_softmax(x, -1, &y));
        tc_tensor_release(y);
        CHECK(reports() == 0);
    }
    tc_tensor_release(x);
    tc_tensor_release(w);
    tc_tensor_release(idx);
    tc_tensor_release(bias);
    CHECK_OK(tc_synchronize(-1));
}

/* ---- issue 26: every access kept, every race reported, one per operand ---- */

enum { READERS = 20 };

/* 20 streams each read x (a sum) after the default stream wrote it; a
 * writer on the side stream that waits for all of them but reader k races
 * with k only: one write-after-read report, for each k (16 accesses were
 * kept per allocation, the oldest dropped: 4 of the 20 went unreported). The
 * other readers' sums are right. */
static void test_many_readers(tc_stream *side)
{
    tc_stream *rs[READERS];
    for (int i = 0; i < READERS; i++)
        CHECK_OK(tc_stream_create(-1, 0, &rs[i]));
    int64_t n = 4096;
    tc_tensor *x = NULL;
    CHECK_OK(tc_tensor_zeros(1, &n, TC_FLOAT32, GPU, &x));
    for (int k = 0; k < READERS; k++) {
        tc_tensor *s[READERS] = {0};
        for (int i = 0; i < READERS; i++) {
            CHECK_OK(tc_stream_wait_stream(rs[i], NULL));
            tc_stream_guard g = tc_stream_guard_enter(rs[i]);
            CHECK_OK(tc_tensor_sum(x, TC_ALL_DIMS, false, &s[i]));
            tc_stream_guard_exit(&g);
        }
        CHECK(reports() == 0);
        for (int i = 0; i < READERS; i++)
            if (i != k)
                CHECK_OK(tc_stream_wait_stream(side, rs[i]));
        tc_stream_guard g = tc_stream_guard_enter(side);
        CHECK_OK(tc_tensor_fill_(x, (double)(k + 1))); /* the bug: no wait for reader k */
        tc_stream_guard_exit(&g);
        CHECK(reports() == 1);
        check_report(TC_SANITIZER_RACE_WRITE_AFTER_READ, "tc_tensor_fill_", "tc_tensor_sum");
        CHECK_OK(tc_synchronize(-1));
        for (int i = 0; i < READERS; i++) {
            if (i != k) /* reader k raced: either value */
                CHECK(item_of(s[i]) == (double)k * (double)n);
            tc_tensor_release(s[i]);
        }
        CHECK_OK(tc_tensor_fill_(x, (double)(k + 1))); /* the default stream, after the sync */
        CHECK(reports() == 0);
    }
    tc_tensor_release(x);
    CHECK_OK(tc_synchronize(-1));
    for (int i = 0; i < READERS; i++)
        CHECK_OK(tc_stream_destroy(rs[i]));
    CHECK(reports() == 0);
}

/* The side stream writes x; 16 streams read it, each after waiting for the
 * side stream; then the default stream reads it without waiting: a
 * read-after-write race with the side stream's write (once forgotten: the
 * write was the access dropped when the 17th came). */
static void test_ordered_readers(tc_stream *side)
{
    enum { ORDERED = 16 };
    tc_stream *rs[ORDERED];
    int64_t n = 4096;
    tc_tensor *x = NULL, *s[ORDERED] = {0}, *last = NULL;
    CHECK_OK(tc_tensor_zeros(1, &n, TC_FLOAT32, GPU, &x));
    CHECK_OK(tc_stream_wait_stream(side, NULL));
    tc_stream_guard g = tc_stream_guard_enter(side);
    CHECK_OK(tc_tensor_uniform_(x, 0, 1, NULL));
    tc_stream_guard_exit(&g);
    for (int i = 0; i < ORDERED; i++) {
        CHECK_OK(tc_stream_create(-1, 0, &rs[i]));
        CHECK_OK(tc_stream_wait_stream(rs[i], side));
        g = tc_stream_guard_enter(rs[i]);
        CHECK_OK(tc_tensor_sum(x, TC_ALL_DIMS, false, &s[i]));
        tc_stream_guard_exit(&g);
    }
    CHECK(reports() == 0);
    CHECK_OK(tc_tensor_sum(x, TC_ALL_DIMS, false, &last)); /* the bug: no wait */
    CHECK(reports() == 1);
    check_report(TC_SANITIZER_RACE_READ_AFTER_WRITE, "tc_tensor_sum", "tc_tensor_uniform_");
    CHECK_OK(tc_synchronize(-1));
    double want = host_sum(x);
    for (int i = 0; i < ORDERED; i++) {
        CHECK(fabs(item_of(s[i]) - want) <= 1e-4 * fabs(want));
        tc_tensor_release(s[i]);
        CHECK_OK(tc_stream_destroy(rs[i]));
    }
    tc_tensor_release(last);
    tc_tensor_release(x);
    CHECK(reports() == 0);
}

/* One jiterator launch on the side stream writes 7 outputs the default
 * stream made, without waiting: 7 write-after-write reports, 7 counted
 * (there were at most 4 per operation). With the wait: silent, and the
 * values right. */
static void test_seven_outputs(tc_stream *side)
{
    enum { NOUT = 7 };
    tc_jit_fn *fn = NULL;
    CHECK_OK(tc_jit_fn_create_multi_output(
        "template <typename T> void seven(T x, T &a, T &b, T &c, T &d, T &e, T &f, T &g) "
        "{ a = x; b = x + 1; c = x + 2; d = x + 3; e = x + 4; f = x + 5; g = x + 6; }",
        NOUT, NULL, &fn));
    int64_t n = 4096;
    tc_tensor *out[NOUT] = {0}, *x = NULL;
    for (int i = 0; i < NOUT; i++)
        CHECK_OK(tc_tensor_zeros(1, &n, TC_FLOAT32, GPU, &out[i]));
    tc_stream_guard g = tc_stream_guard_enter(side);
    CHECK_OK(tc_tensor_ones(1, &n, TC_FLOAT32, GPU, &x)); /* made on the side stream */
    const tc_tensor *in[1] = {x};
    uint64_t before = tc_sanitizer_report_count();
    CHECK_OK(tc_jit_fn_call(fn, in, 1, NULL, out)); /* the bug: no wait for the zeros */
    tc_stream_guard_exit(&g);
    CHECK(reports() == NOUT);
    CHECK(tc_sanitizer_report_count() - before == NOUT);
    check_report(TC_SANITIZER_RACE_WRITE_AFTER_WRITE, "seven", "tc_tensor_zeros");
    CHECK_OK(tc_synchronize(-1));
    /* fixed: the side stream waits for the default stream */
    for (int i = 0; i < NOUT; i++)
        CHECK_OK(tc_tensor_fill_(out[i], 0));
    CHECK_OK(tc_stream_wait_stream(side, NULL));
    g = tc_stream_guard_enter(side);
    CHECK_OK(tc_jit_fn_call(fn, in, 1, NULL, out));
    tc_stream_guard_exit(&g);
    CHECK_OK(tc_stream_wait_stream(NULL, side));
    for (int i = 0; i < NOUT; i++)
        CHECK(host_sum(out[i]) == (double)(i + 1) * (double)n);
    CHECK(reports() == 0);
    for (int i = 0; i < NOUT; i++)
        tc_tensor_release(out[i]);
    tc_tensor_release(x);
    CHECK_OK(tc_jit_fn_destroy(fn));
    CHECK_OK(tc_synchronize(-1));
}

/* PyTorch's doc example: a = torch.rand(4, 2, device="cuda"), then on a new
 * stream torch.mul(a, 5, out=a). Operand 0 is both read and written: one
 * write-after-write report, not two. */
static void test_doc_example(tc_stream *side)
{
    int64_t sz[2] = {4, 2};
    tc_tensor *a = NULL, *five = NULL;
    CHECK_OK(tc_tensor_rand(2, sz, TC_FLOAT32, GPU, NULL, &a));
    tc_stream_guard g = tc_stream_guard_enter(side);
    CHECK_OK(tc_tensor_full(2, sz, 5, TC_FLOAT32, GPU, &five)); /* on the side stream */
    uint64_t before = tc_sanitizer_report_count();
    CHECK_OK(tc_tensor_mul_(a, five)); /* the bug: no wait for the rand */
    tc_stream_guard_exit(&g);
    CHECK(reports() == 1);
    CHECK(tc_sanitizer_report_count() - before == 1);
    check_report(TC_SANITIZER_RACE_WRITE_AFTER_WRITE, "tc_tensor_mul_", "tc_tensor_rand");
    CHECK_OK(tc_synchronize(-1));
    tc_tensor_release(a);
    tc_tensor_release(five);
    CHECK(reports() == 0);
}

int main(void)
{
    tc_test_init();
    TC_TEST_REQUIRE_GPU();
    CHECK_OK(tc_sanitizer_set_report_fn(on_report, NULL));
    CHECK_OK(tc_sanitizer_enable(TC_SANITIZER_MODE_REPORT));
    tc_stream *side = NULL;
    CHECK_OK(tc_stream_create(-1, 0, &side));
    uint64_t before = tc_sanitizer_report_count();
    test_side_stream_write(side);
    test_reuse(side);
    test_pinned_read();
    test_user_kernel(side);
    test_jiterator(side);
    test_one_stream_silent();
    test_graph_replay(side);
    test_nn_and_indexing(side);
    test_many_readers(side);
    test_ordered_readers(side);
    test_seven_outputs(side);
    test_doc_example(side);
    printf("reports: %llu\n", (unsigned long long)(tc_sanitizer_report_count() - before));
    /* 8 in report mode, 2 in error mode; then 20 + 1 + 7 + 1 (issue 26) */
    CHECK(tc_sanitizer_report_count() - before == 10 + READERS + 1 + 7 + 1);
    CHECK_OK(tc_synchronize(-1));
    CHECK_OK(tc_stream_destroy(side));
    return TC_TEST_DONE();
}
