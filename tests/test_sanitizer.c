/* The stream sanitizer without a GPU (CI).
 *
 * Part 1 drives the happens-before engine with recorded event sequences, as
 * the CUDA runtime's hooks would (streams are made-up handles, memory is malloc'd and
 * registered as allocations): each race kind (write-after-read,
 * read-after-write, write-after-write, reuse-after-free, and a host read
 * before a sync) is detected, and the same sequence correctly synchronized
 * (event record/wait, wait_stream, stream/event/device synchronize,
 * record_stream, transitive orders) is silent. Error mode refuses and records
 * nothing, for a whole graph replay too. A graph-pool block released after a
 * replay on another stream is no reuse-after-free. 10^6 random accesses keep the state bounded.
 * Every access is kept (20 readers and a writer that skips one; a 17th
 * unordered read after 16 ordered ones), every race of an operation is
 * reported and counted (7 racing outputs: 7 reports), and an operand an
 * operation reads and writes is one access (one report for an in-place op).
 *
 * Part 2 runs real tensor operations on a fake "CUDA" device installed on the
 * device seam below the sanitizer (its memory is host memory, its kernels the
 * CPU's, its current stream a made-up handle per test): the classic bug (a
 * write on a side stream read on the default stream) is reported with both
 * operations and call sites; with wait_stream it is silent; error mode makes
 * the reading call fail with TC_ERROR_RACE; a release without record_stream is
 * a reuse-after-free. CPU tensors report nothing. */
#include <pthread.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "base/env.h"
#include "tensor/tensor_internal.h"
#include "sanitizer/sanitizer_internal.h"
#include "sanitizer_reports.h" /* on_report, reports(), last_kind, last_text, ... */
#include "tc_test.h"

/* ---- part 1: the engine ------------------------------------------------------ */

#define S1 ((void *)0x1001)
#define S2 ((void *)0x1002)
#define S3 ((void *)0x1003)
#define DEF NULL
#define HOST TC__ACCESS_HOST

static tc_status touch_at(int dev, void *stream, const void *p, size_t bytes, bool write,
                          const char *label)
{
    TC_API_BEGIN; /* names the call site as a public call would */
    tc__span sp;
    tc__span_dense(p, bytes, TC_FLOAT32, 1, (const int64_t[]){(int64_t)bytes / 4}, write, &sp);
    tc__access_op op = {
        .dev = dev, .stream = stream, .spans = &sp, .n = 1, .what = "test access", .label = label};
    return tc__san_access(&op);
}
static tc_status wr(void *stream, const void *p, size_t n)
{
    return touch_at(0, stream, p, n, true, "writer");
}
static tc_status rd(void *stream, const void *p, size_t n)
{
    return touch_at(0, stream, p, n, false, "reader");
}

enum { BYTES = 4096 };

/* A fresh allocation made on `stream` of device 0. */
static void *region(void *stream)
{
    void *p = calloc(1, BYTES);
    tc__san_alloc(p, BYTES, 0, stream, false);
    return p;
}
static void drop(void *p)
{
    tc__san_free(p, NULL);
    free(p);
}

static void test_read_after_write(void)
{
    void *m = region(DEF);
    CHECK_OK(wr(S1, m, BYTES));
    CHECK_OK(rd(S2, m, BYTES));
    CHECK(reports() == 1 && last_kind == TC_SANITIZER_RACE_READ_AFTER_WRITE);
    CHECK(strcmp(last_cur, "reader") == 0 && strcmp(last_earlier, "writer") == 0);
    CHECK(strstr(last_text, "read-after-write") && strstr(last_text, "current access: read") &&
          strstr(last_text, "earlier access: write"));
    tc__san_device_sync(0);
    /* fixed by an event */
    int ev;
    CHECK_OK(wr(S1, m, BYTES));
    tc__san_event_record(&ev, 0, S1);
    tc__san_event_wait(&ev, 0, S2);
    CHECK_OK(rd(S2, m, BYTES));
    CHECK(reports() == 0);
    tc__san_event_destroy(&ev);
    /* the same stream never races with itself */
    CHECK_OK(wr(S2, m, BYTES));
    CHECK_OK(rd(S2, m, BYTES));
    CHECK_OK(wr(S2, m, BYTES));
    CHECK(reports() == 0);
    tc__san_device_sync(0);
    drop(m);
}

/* A graph capture: accesses on the capturing stream are not checked when
 * queued (nothing runs then) but at each replay, on the replay stream. */
static void test_graph_capture(void)
{
    void *m = region(DEF);
    tc__san_capture_begin(0, S3);
    CHECK_OK(wr(S3, m, BYTES)); /* captured: not run, not checked */
    CHECK_OK(rd(DEF, m, BYTES));
    CHECK(reports() == 0);
    tc__san_recording *rec = tc__san_capture_end(0, S3);
    CHECK(rec != NULL);
    CHECK_OK(rd(DEF, m, BYTES)); /* still nothing wrote m */
    CHECK(reports() == 0);
    CHECK_OK(tc__san_replay(rec, 0, S1)); /* the replay writes m on S1 ... */
    CHECK(reports() == 1 &&
          last_kind == TC_SANITIZER_RACE_WRITE_AFTER_READ); /* ... racing DEF's reads */
    CHECK(strcmp(last_cur, "writer") == 0 && strcmp(last_earlier, "reader") == 0);
    CHECK_OK(rd(DEF, m, BYTES)); /* and DEF reads without waiting for S1 */
    CHECK(reports() == 1 && last_kind == TC_SANITIZER_RACE_READ_AFTER_WRITE);
    tc__san_stream_wait_stream(0, S1, 0, DEF); /* ordered: silent */
    CHECK_OK(tc__san_replay(rec, 0, S1));
    tc__san_stream_wait_stream(0, DEF, 0, S1);
    CHECK_OK(rd(DEF, m, BYTES));
    CHECK(reports() == 0);
    tc__san_recording_free(rec);
    CHECK(tc__san_capture_end(0, S3) == NULL); /* no capture underway */
    tc__san_device_sync(0);
    drop(m);
}

/* A block of a graph's private pool (allocated on the capturing stream),
 * written by replays on another stream and then released: the free hands it
 * to no stream (only a later capture into the pool reuses it, and that
 * graph's replays are checked as they run), so it is no reuse-after-free.
 * It once was reported so (TCUDA_SANITIZER=1 on tests/test_graph.c). The
 * same use of a block made outside capture still is. */
static void test_graph_pool_free(void)
{
    tc__san_capture_begin(0, S3);
    void *m = region(S3); /* from the graph's pool */
    CHECK_OK(wr(S3, m, BYTES));
    tc__san_recording *rec = tc__san_capture_end(0, S3);
    CHECK(rec != NULL);
    CHECK_OK(tc__san_replay(rec, 0, S1)); /* the replay writes m on S1 */
    CHECK(reports() == 0);
    drop(m); /* released without any sync with S1 */
    CHECK(reports() == 0 && tc__san_watched() == 0);
    /* made outside capture on S3, written by S1 and released: reported */
    m = region(S3);
    CHECK_OK(wr(S1, m, BYTES));
    drop(m);
    CHECK(reports() == 1 && last_kind == TC_SANITIZER_RACE_REUSE_AFTER_FREE);
    tc__san_recording_free(rec);
    tc__san_device_sync(0);
}

/* Error mode: a replay whose second operation races is refused as a whole;
 * its first operation (no race of its own) is not recorded either, so the
 * state is as if the replay had not been asked for. */
static void test_replay_refused_whole(void)
{
    CHECK_OK(tc_sanitizer_enable(TC_SANITIZER_MODE_ERROR));
    void *a = region(DEF), *b = region(DEF);
    tc__san_capture_begin(0, S3);
    CHECK_OK(wr(S3, a, BYTES)); /* op 1: writes a */
    CHECK_OK(wr(S3, b, BYTES)); /* op 2: writes b */
    tc__san_recording *rec = tc__san_capture_end(0, S3);
    CHECK_OK(rd(S2, b, BYTES)); /* S2 reads b; nothing orders S1 after it */
    CHECK_STATUS(tc__san_replay(rec, 0, S1), TC_ERROR_RACE);
    CHECK(strstr(tc_last_error(), "write-after-read") && strstr(tc_last_error(), "writer"));
    reports();
    /* op 1 was not recorded: S2 reading a without waiting for S1 is fine */
    CHECK_OK(rd(S2, a, BYTES));
    CHECK(reports() == 0);
    /* ordered, the replay goes through and records both */
    tc__san_stream_wait_stream(0, S1, 0, S2);
    CHECK_OK(tc__san_replay(rec, 0, S1));
    CHECK_STATUS(rd(S2, a, BYTES), TC_ERROR_RACE);
    reports();
    tc__san_recording_free(rec);
    tc__san_device_sync(0);
    drop(a);
    drop(b);
    CHECK_OK(tc_sanitizer_enable(TC_SANITIZER_MODE_REPORT));
}

static void test_write_after_read(void)
{
    void *m = region(DEF);
    CHECK_OK(wr(DEF, m, BYTES));
    tc__san_stream_wait_stream(0, S1, 0, DEF);
    CHECK_OK(rd(S1, m, BYTES)); /* ordered after the write */
    CHECK(reports() == 0);
    CHECK_OK(wr(S2, m, BYTES)); /* not after S1's read (nor DEF's write) */
    CHECK(reports() == 1 && (last_kind == TC_SANITIZER_RACE_WRITE_AFTER_READ ||
                             last_kind == TC_SANITIZER_RACE_WRITE_AFTER_WRITE));
    tc__san_device_sync(0);
    /* fixed by wait_stream */
    CHECK_OK(rd(S1, m, BYTES));
    tc__san_stream_wait_stream(0, S2, 0, S1);
    CHECK_OK(wr(S2, m, BYTES));
    CHECK(reports() == 0);
    tc__san_device_sync(0);
    /* a read by S1 then a write by S2: exactly write-after-read */
    CHECK_OK(rd(S1, m, BYTES));
    CHECK_OK(wr(S2, m, BYTES));
    CHECK(reports() == 1 && last_kind == TC_SANITIZER_RACE_WRITE_AFTER_READ);
    tc__san_device_sync(0);
    drop(m);
}

static void test_write_after_write(void)
{
    void *m = region(DEF);
    CHECK_OK(wr(S1, m, BYTES));
    CHECK_OK(wr(S2, m, BYTES));
    CHECK(reports() == 1 && last_kind == TC_SANITIZER_RACE_WRITE_AFTER_WRITE);
    tc__san_device_sync(0); /* the racing write was recorded too: start over */
    /* fixed by a stream synchronize: work queued afterwards is ordered */
    CHECK_OK(wr(S1, m, BYTES));
    tc__san_stream_sync(0, S1);
    tc__san_stream_sync(0, S2);
    CHECK_OK(wr(S2, m, BYTES));
    CHECK(reports() == 0);
    /* and by an event synchronize */
    int ev;
    tc__san_stream_sync(0, S2);
    CHECK_OK(wr(S1, m, BYTES));
    tc__san_event_record(&ev, 0, S1);
    tc__san_event_sync(&ev);
    CHECK_OK(wr(S2, m, BYTES));
    CHECK(reports() == 0);
    /* an event recorded before the write orders nothing */
    tc__san_event_record(&ev, 0, S1);
    tc__san_stream_sync(0, S2);
    CHECK_OK(wr(S1, m, BYTES));
    tc__san_event_wait(&ev, 0, S2);
    CHECK_OK(wr(S2, m, BYTES));
    CHECK(reports() == 1 && last_kind == TC_SANITIZER_RACE_WRITE_AFTER_WRITE);
    tc__san_event_destroy(&ev);
    tc__san_device_sync(0);
    drop(m);
}

static void test_transitive_and_ranges(void)
{
    void *m = region(DEF);
    int e1, e2;
    CHECK_OK(wr(S1, m, BYTES));
    tc__san_event_record(&e1, 0, S1);
    tc__san_event_wait(&e1, 0, S2);
    tc__san_event_record(&e2, 0, S2);
    tc__san_event_wait(&e2, 0, S3);
    CHECK_OK(rd(S3, m, BYTES)); /* S1 -> S2 -> S3 */
    CHECK(reports() == 0);
    tc__san_event_destroy(&e1);
    tc__san_event_destroy(&e2);
    tc__san_device_sync(0);
    /* disjoint halves on two streams are no race; the whole then is */
    char *c = m;
    CHECK_OK(wr(S1, c, BYTES / 2));
    CHECK_OK(wr(S2, c + BYTES / 2, BYTES / 2));
    CHECK(reports() == 0);
    CHECK_OK(rd(S3, c + BYTES / 2, 16));
    CHECK(reports() == 1 && last_kind == TC_SANITIZER_RACE_READ_AFTER_WRITE &&
          strstr(last_text, "on stream 0x1002"));
    tc__san_device_sync(0);
    drop(m);
}

static void test_reuse_after_free(void)
{
    /* used on S1 then freed: the allocator may hand it to DEF's next work */
    void *m = region(DEF);
    CHECK_OK(wr(DEF, m, BYTES));
    tc__san_stream_wait_stream(0, S1, 0, DEF);
    CHECK_OK(rd(S1, m, BYTES));
    drop(m);
    CHECK(reports() == 1 && last_kind == TC_SANITIZER_RACE_REUSE_AFTER_FREE &&
          strstr(last_text, "record_stream") && strcmp(last_earlier, "reader") == 0);
    CHECK(tc__san_watched() == 0);
    /* fixed by record_stream */
    m = region(DEF);
    CHECK_OK(rd(S1, m, BYTES));
    tc__san_record_stream(m, S1);
    drop(m);
    /* by the allocation's stream waiting for the user */
    m = region(DEF);
    CHECK_OK(rd(S1, m, BYTES));
    tc__san_stream_wait_stream(0, DEF, 0, S1);
    drop(m);
    /* by a synchronize */
    m = region(DEF);
    CHECK_OK(wr(S2, m, BYTES));
    tc__san_stream_sync(0, S2);
    drop(m);
    /* used only on its own stream */
    m = region(S1);
    CHECK_OK(wr(S1, m, BYTES));
    drop(m);
    CHECK(reports() == 0);
}

static void test_host_read(void)
{
    /* pinned memory written by a stream (a non_blocking copy), read by the host */
    void *h = calloc(1, BYTES);
    tc__san_alloc(h, BYTES, -1, NULL, true);
    CHECK_OK(wr(S1, h, BYTES));
    CHECK_OK(touch_at(HOST, NULL, h, BYTES, false, "host read"));
    CHECK(reports() == 1 && last_kind == TC_SANITIZER_RACE_READ_AFTER_WRITE &&
          strstr(last_text, "on the host") && strstr(last_text, "synchronize the stream"));
    CHECK_OK(wr(S1, h, BYTES));
    tc__san_stream_sync(0, S1);
    CHECK_OK(touch_at(HOST, NULL, h, BYTES, false, "host read"));
    /* the host wrote it, then a stream reads it (a copy queued afterwards) */
    CHECK_OK(touch_at(HOST, NULL, h, BYTES, true, "host write"));
    CHECK_OK(rd(S2, h, BYTES));
    CHECK(reports() == 0);
    tc__san_free(h, NULL); /* pinned: the cache waits for its streams itself */
    free(h);
    CHECK(reports() == 0);
}

static void test_error_mode(void)
{
    CHECK_OK(tc_sanitizer_enable(TC_SANITIZER_MODE_ERROR));
    void *m = region(DEF);
    CHECK_OK(wr(S1, m, BYTES));
    CHECK_STATUS(wr(S2, m, BYTES), TC_ERROR_RACE);
    CHECK(strncmp(tc_last_error(), "touch_at: tcuda sanitizer: write-after-write", 44) == 0);
    reports();
    /* the refused write was not recorded: S1 reading again is fine */
    CHECK_OK(rd(S1, m, BYTES));
    CHECK(reports() == 0);
    tc__san_device_sync(0);
    drop(m);
    /* user accesses adopt memory tcuda did not allocate */
    static char ext[256];
    CHECK_STATUS(tc_sanitizer_access(ext, 0, NULL, (tc_sanitizer_access_kind)9, "k"),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_sanitizer_access(NULL, 4, NULL, TC_SANITIZER_ACCESS_READ, "k"),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_sanitizer_enable((tc_sanitizer_mode)9), TC_ERROR_INVALID_ARGUMENT);
    CHECK_OK(tc_sanitizer_enable(TC_SANITIZER_MODE_REPORT));
    CHECK(tc_sanitizer_get_mode() == TC_SANITIZER_MODE_REPORT);
}

/* 10^6 random accesses, syncs and reallocations over 64 allocations and 8
 * streams: the state stays the size of the live allocations and the reads
 * since the writes over them (every one is kept, none merged), whatever the
 * number of steps. */
static void test_bounded(void)
{
    enum { NALLOC = 64, NSTREAM = 8, STEPS = 1000000 };
    void *m[NALLOC];
    for (int i = 0; i < NALLOC; i++)
        m[i] = region((void *)(uintptr_t)(0x2000 + i % NSTREAM));
    size_t at_tenth = 0, peak = 0;
    double t0 = tc_test_now_ms();
    for (int step = 0; step < STEPS; step++) {
        uint64_t r = tc_test_rand();
        int a = (int)(r % NALLOC);
        void *s = (void *)(uintptr_t)(0x2000 + (r >> 8) % NSTREAM);
        size_t off = (size_t)((r >> 16) % (BYTES / 64)) * 64, len = 64 * (1 + (r >> 24) % 8);
        if (off + len > BYTES)
            len = BYTES - off;
        switch ((r >> 32) % 16) {
        case 0: tc__san_stream_sync(0, s); break;
        case 1:
            tc__san_stream_wait_stream(0, s, 0, (void *)(uintptr_t)(0x2000 + (r >> 40) % NSTREAM));
            break;
        case 2:
            drop(m[a]);
            m[a] = region(s);
            break;
        default: (void)touch_at(0, s, (char *)m[a] + off, len, (r >> 36) & 1, "random"); break;
        }
        if (step == STEPS / 10)
            at_tenth = tc__san_state_bytes();
        if (step % 1000 == 0) {
            size_t b = tc__san_state_bytes();
            peak = b > peak ? b : peak;
        }
    }
    double ms = tc_test_now_ms() - t0;
    size_t end = tc__san_state_bytes();
    printf("bounded: %d steps in %.0f ms, state %zu bytes after 10^5, %zu after 10^6, peak %zu "
           "(%d allocations)\n",
           STEPS, ms, at_tenth, end, peak, NALLOC);
    CHECK(tc__san_watched() == NALLOC);
    /* a write drops what it covers: a few dozen accesses per allocation, not growing */
    CHECK(peak < (size_t)NALLOC * 16 * 512 + 65536);
    CHECK(end <= at_tenth + (size_t)NALLOC * 16 * 512);
    for (int i = 0; i < NALLOC; i++)
        drop(m[i]);
    tc__san_device_sync(0);
    CHECK(tc__san_watched() == 0);
    reports();
}

/* Four threads, each with its stream and allocation, all reading one
 * allocation written before they started: thread-safe, and silent. */
static char *shared_mem;
static int thread_events[4];

static void *thread_body(void *arg)
{
    int id = (int)(intptr_t)arg;
    void *s = (void *)(uintptr_t)(0x3000 + id);
    char *mine = region(s);
    for (int i = 0; i < 20000; i++) {
        (void)wr(s, mine + (i % 64) * 64, 64);
        (void)rd(s, shared_mem + (i % 32) * 128, 128);
        if (i % 100 == 0) {
            tc__san_event_record(&thread_events[id], 0, s);
            tc__san_event_sync(&thread_events[id]);
        }
    }
    tc__san_event_destroy(&thread_events[id]);
    drop(mine);
    return NULL;
}

static void test_threads(void)
{
    shared_mem = region(DEF);
    CHECK_OK(wr(DEF, shared_mem, BYTES));
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        tc__san_stream_wait_stream(0, (void *)(uintptr_t)(0x3000 + i), 0, DEF);
    for (int i = 0; i < 4; i++)
        CHECK(pthread_create(&th[i], NULL, thread_body, (void *)(intptr_t)i) == 0);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    CHECK(reports() == 0);
    tc__san_device_sync(0);
    drop(shared_mem);
    CHECK(reports() == 0 && tc__san_watched() == 0);
}

/* A user kernel and a host read declared with tc_sanitizer_access (the fake
 * device's stream_of, as the access layer's resolver, gives the made-up
 * handles). */
static void test_user_access(void)
{
    static char buf[1024];
    CHECK_OK(
        tc_sanitizer_access(buf, sizeof buf, (tc_stream *)S1, TC_SANITIZER_ACCESS_WRITE, "k1"));
    CHECK_OK(tc_sanitizer_access(
        buf, 16, NULL, TC_SANITIZER_ACCESS_READ | TC_SANITIZER_ACCESS_BY_HOST, "host read"));
    CHECK(reports() == 1 && last_kind == TC_SANITIZER_RACE_READ_AFTER_WRITE &&
          strcmp(last_cur, "host read") == 0 && strcmp(last_earlier, "k1") == 0 &&
          strstr(last_text, "not from tcuda's allocator"));
    tc__san_stream_sync(0, S1);
    CHECK_OK(tc_sanitizer_access(
        buf, 16, NULL, TC_SANITIZER_ACCESS_READ | TC_SANITIZER_ACCESS_BY_HOST, "host read"));
    CHECK(reports() == 0);
    CHECK_STATUS(tc_sanitizer_access(buf, 16, NULL, TC_SANITIZER_ACCESS_BY_HOST, "k"),
                 TC_ERROR_INVALID_ARGUMENT);
    /* stale state inside memory being allocated is dropped */
    static char big[4096];
    CHECK_OK(tc_sanitizer_access(big + 100, 10, (tc_stream *)S1, TC_SANITIZER_ACCESS_WRITE, "k2"));
    size_t before = tc__san_watched();
    tc__san_alloc(big, sizeof big, 0, DEF, false);
    CHECK(tc__san_watched() == before);
    CHECK_OK(wr(DEF, big, sizeof big)); /* no race with the stale write */
    CHECK(reports() == 0);
    tc__san_free(big, NULL);
    CHECK(tc__san_watched() == before - 1);
}

/* ---- every access and every report kept (issue 26) ---------------------------- */

static tc__span span_of(const void *p, size_t bytes, bool write)
{
    tc__span sp;
    tc__span_dense(p, bytes, TC_FLOAT32, 1, (const int64_t[]){(int64_t)bytes / 4}, write, &sp);
    return sp;
}

/* One operation of n spans on `stream` of device 0. */
static tc_status touch_spans(void *stream, const tc__span *sp, int n, const char *label)
{
    TC_API_BEGIN;
    tc__access_op op = {
        .dev = 0, .stream = stream, .spans = sp, .n = n, .what = "test access", .label = label};
    return tc__san_access(&op);
}

enum { READERS = 20 };
static void *reader_stream(int i) { return (void *)(uintptr_t)(0x4000 + i); }

/* DEF writes m; each of READERS streams waits for that and reads all of m,
 * labelled "reader <i>". */
static void write_then_readers(void *m, int nreaders)
{
    CHECK_OK(wr(DEF, m, BYTES));
    for (int i = 0; i < nreaders; i++) {
        char label[16];
        snprintf(label, sizeof label, "reader %d", i);
        tc__san_stream_wait_stream(0, reader_stream(i), 0, DEF);
        CHECK_OK(touch_at(0, reader_stream(i), m, BYTES, false, label));
    }
    CHECK(reports() == 0);
}

/* 20 readers of one write, each on its own stream; a writer (S1) that waits
 * for all of them but reader k races with k only, for each k. Only 16
 * accesses were kept per allocation, the oldest dropped, so 4 of the 20
 * choices went unreported. A writer that skips 3 of them is reported 3
 * times, once per read, as PyTorch does. The reads are forgotten once a write
 * is ordered after them: the state is back to its size before them. */
static void test_many_readers(void)
{
    void *m = region(DEF);
    for (int i = 0; i < READERS; i++) /* the readers' actors, made before the measure */
        tc__san_stream_wait_stream(0, reader_stream(i), 0, DEF);
    size_t base = tc__san_state_bytes(); /* m has no access yet */
    for (int k = 0; k < READERS; k++) {
        write_then_readers(m, READERS);
        CHECK(tc__san_state_bytes() > base); /* 21 accesses: on the heap */
        for (int i = 0; i < READERS; i++)
            if (i != k)
                tc__san_stream_wait_stream(0, S1, 0, reader_stream(i));
        CHECK_OK(wr(S1, m, BYTES));
        char want[16];
        snprintf(want, sizeof want, "reader %d", k);
        CHECK(reports() == 1 && last_kind == TC_SANITIZER_RACE_WRITE_AFTER_READ &&
              strcmp(last_cur, "writer") == 0 && strcmp(last_earlier, want) == 0);
        tc__san_device_sync(0);
        CHECK_OK(wr(DEF, m, BYTES));          /* ordered after all: the list is one write again, */
        CHECK(tc__san_state_bytes() == base); /* in place, the heap given back */
    }
    /* three skipped: three reports, each counted */
    write_then_readers(m, READERS);
    for (int i = 3; i < READERS; i++)
        tc__san_stream_wait_stream(0, S1, 0, reader_stream(i));
    uint64_t before = tc_sanitizer_report_count();
    CHECK_OK(wr(S1, m, BYTES));
    CHECK(reports() == 3 && tc_sanitizer_report_count() - before == 3);
    tc__san_device_sync(0);
    drop(m);
}

/* A write, 16 readers ordered after it (each on its own stream), then a
 * 17th read on a stream nothing orders after the write: a race with the
 * write. With 16 accesses kept, the write was the one dropped. */
static void test_ordered_readers(void)
{
    void *m = region(DEF);
    CHECK_OK(wr(S1, m, BYTES));
    for (int i = 0; i < 16; i++) {
        tc__san_stream_wait_stream(0, reader_stream(i), 0, S1);
        CHECK_OK(touch_at(0, reader_stream(i), m, BYTES, false, "ordered reader"));
    }
    CHECK(reports() == 0);
    CHECK_OK(rd(S2, m, BYTES));
    CHECK(reports() == 1 && last_kind == TC_SANITIZER_RACE_READ_AFTER_WRITE &&
          strcmp(last_cur, "reader") == 0 && strcmp(last_earlier, "writer") == 0);
    /* many reads of distinct bytes by one stream are each kept too */
    tc__san_device_sync(0);
    CHECK_OK(wr(S1, m, BYTES));
    tc__san_stream_wait_stream(0, S2, 0, S1);
    for (int i = 0; i < 64; i++)
        CHECK_OK(rd(S2, (char *)m + 64 * i, 64));
    CHECK_OK(wr(S3, (char *)m + 64 * 63, 64)); /* races with the last read (and the write) */
    CHECK(reports() == 1 && last_kind == TC_SANITIZER_RACE_WRITE_AFTER_READ);
    tc__san_device_sync(0);
    drop(m);
}

/* One operation writing 7 allocations a stream wrote unsynchronized: 7
 * reports, 7 counted (there were at most 4 per operation). The same for a
 * graph replay of 7 such operations. In error mode the first refuses it. */
static void test_reports_per_op(void)
{
    enum { NOUT = 7 };
    void *m[NOUT];
    tc__span sp[NOUT];
    for (int i = 0; i < NOUT; i++) {
        m[i] = region(DEF);
        CHECK_OK(wr(S1, m[i], BYTES));
        sp[i] = span_of(m[i], BYTES, true);
    }
    uint64_t before = tc_sanitizer_report_count();
    CHECK_OK(touch_spans(S2, sp, NOUT, "seven outputs"));
    CHECK(reports() == NOUT && tc_sanitizer_report_count() - before == NOUT);
    CHECK(last_kind == TC_SANITIZER_RACE_WRITE_AFTER_WRITE &&
          strcmp(last_cur, "seven outputs") == 0 && strcmp(last_earlier, "writer") == 0);
    tc__san_device_sync(0);
    /* a replay of 7 captured writes on S3, each racing S1's write */
    tc__san_capture_begin(0, S3);
    for (int i = 0; i < NOUT; i++)
        CHECK_OK(wr(S3, m[i], BYTES));
    tc__san_recording *rec = tc__san_capture_end(0, S3);
    for (int i = 0; i < NOUT; i++)
        CHECK_OK(wr(S1, m[i], BYTES));
    before = tc_sanitizer_report_count();
    CHECK_OK(tc__san_replay(rec, 0, S2));
    CHECK(reports() == NOUT && tc_sanitizer_report_count() - before == NOUT);
    tc__san_recording_free(rec);
    tc__san_device_sync(0);
    /* error mode: refused on the first race, one report */
    CHECK_OK(tc_sanitizer_enable(TC_SANITIZER_MODE_ERROR));
    for (int i = 0; i < NOUT; i++)
        CHECK_OK(wr(S1, m[i], BYTES));
    CHECK_STATUS(touch_spans(S2, sp, NOUT, "seven outputs"), TC_ERROR_RACE);
    CHECK(reports() == 1 && strstr(tc_last_error(), "write-after-write"));
    tc__san_device_sync(0);
    for (int i = 0; i < NOUT; i++)
        drop(m[i]);
    CHECK_OK(tc_sanitizer_enable(TC_SANITIZER_MODE_REPORT));
}

/* ---- against a reference --------------------------------------------------------- */

/* PyTorch's rules on whole allocations, written out plainly: per allocation
 * the last write and, per stream, its latest read since; a read races with
 * an unordered write, a write with each unordered read or, with none, an
 * unordered write; an allocation an operation reads and writes is written.
 * Its own vector clocks: index 0 the host, 1..REF_STREAMS the streams. */
enum { REF_STREAMS = 6, REF_ALLOCS = 4, REF_STEPS = 20000 };
typedef struct ref_state {
    uint64_t vc[REF_STREAMS + 1][REF_STREAMS + 1];
    int wactor[REF_ALLOCS]; /* 0: no write yet */
    uint64_t wepoch[REF_ALLOCS], reads[REF_ALLOCS][REF_STREAMS + 1];
} ref_state;

static void ref_join(uint64_t *dst, const uint64_t *src)
{
    for (int i = 0; i <= REF_STREAMS; i++)
        dst[i] = src[i] > dst[i] ? src[i] : dst[i];
}

/* One operation of stream x touching allocations (writes[a]: 0 none, 1 read,
 * 2 written); returns the races PyTorch's rules count. */
static int ref_op(ref_state *st, int x, const int *what)
{
    uint64_t *c = st->vc[x];
    ref_join(c, st->vc[0]); /* work the host queues follows what it knows */
    int races = 0;
    for (int a = 0; a < REF_ALLOCS; a++) {
        bool wrote = st->wactor[a] && st->wactor[a] != x && c[st->wactor[a]] < st->wepoch[a];
        if (what[a] == 1)
            races += wrote;
        if (what[a] == 2) {
            int r = 0;
            for (int y = 1; y <= REF_STREAMS; y++)
                r += y != x && st->reads[a][y] && c[y] < st->reads[a][y];
            races += r ? r : wrote;
        }
    }
    uint64_t e = ++c[x];
    for (int a = 0; a < REF_ALLOCS; a++) {
        if (what[a] == 2) {
            st->wactor[a] = x, st->wepoch[a] = e;
            memset(st->reads[a], 0, sizeof st->reads[a]);
        } else if (what[a] == 1) {
            st->reads[a][x] = e;
        }
    }
    return races;
}

/* Random operations (1 to 4 spans over 4 allocations, the same one named
 * twice at times, read and written), waits and synchronizes on 6 streams:
 * each operation's report count equals the reference's. */
static void test_against_reference(void)
{
    static ref_state st;
    memset(&st, 0, sizeof st);
    void *m[REF_ALLOCS];
    for (int a = 0; a < REF_ALLOCS; a++)
        m[a] = region(DEF);
    tc__san_device_sync(0);
    int mismatches = 0;
    uint64_t total = 0;
    for (int step = 0; step < REF_STEPS; step++) {
        uint64_t r = tc_test_rand();
        int x = 1 + (int)(r % REF_STREAMS), y = 1 + (int)((r >> 8) % REF_STREAMS);
        void *sx = (void *)(uintptr_t)(0x5000 + x), *sy = (void *)(uintptr_t)(0x5000 + y);
        switch ((r >> 16) % 10) {
        case 0: /* x waits for y */
            if (x != y) {
                tc__san_stream_wait_stream(0, sx, 0, sy);
                ref_join(st.vc[y], st.vc[0]);
                ref_join(st.vc[x], st.vc[y]);
            }
            break;
        case 1: /* the host waits for x */
            tc__san_stream_sync(0, sx);
            ref_join(st.vc[0], st.vc[x]);
            break;
        default: {
            tc__span sp[4];
            int n = 1 + (int)((r >> 24) % 4), what[REF_ALLOCS] = {0};
            for (int i = 0; i < n; i++) {
                int a = (int)((r >> (28 + 3 * i)) % REF_ALLOCS);
                bool w = (r >> (44 + i)) & 1;
                sp[i] = span_of(m[a], BYTES, w);
                what[a] = w ? 2 : what[a] ? what[a] : 1;
            }
            int want = ref_op(&st, x, what);
            CHECK_OK(touch_spans(sx, sp, n, "random op"));
            int got = reports();
            total += (uint64_t)got;
            if (got != want && mismatches++ < 5)
                fprintf(stderr, "step %d: %d reports, the reference says %d\n", step, got, want);
        }
        }
    }
    printf("against the reference: %d steps, %llu reports\n", REF_STEPS, (unsigned long long)total);
    CHECK(mismatches == 0 && total > 0);
    tc__san_device_sync(0);
    for (int a = 0; a < REF_ALLOCS; a++)
        drop(m[a]);
    reports();
}

/* The protect function of a free, counting the streams it is given. */
static int nprotected;
static void count_protect(void *ptr, int dev, void *stream)
{
    (void)ptr, (void)dev, (void)stream;
    nprotected++;
}

/* Error mode: an allocation read by 12 streams nothing orders before its
 * free is one reuse-after-free report, and every one of the 12 streams is
 * handed to the allocator to protect the memory (8 were, at most). */
static void test_free_protects_every_stream(void)
{
    CHECK_OK(tc_sanitizer_enable(TC_SANITIZER_MODE_ERROR));
    void *m = region(DEF);
    write_then_readers(m, 12);
    nprotected = 0;
    tc__san_free(m, count_protect);
    free(m);
    CHECK(reports() == 1 && last_kind == TC_SANITIZER_RACE_REUSE_AFTER_FREE && nprotected == 12);
    tc__san_device_sync(0);
    CHECK_OK(tc_sanitizer_enable(TC_SANITIZER_MODE_REPORT));
}

/* An operand read and written by one operation (an in-place op) is one
 * access, a write: racing an earlier write, one report, not a write-after-
 * write and a read-after-write. So are the same bytes read twice (x * x), or
 * a read of part of what the operation writes, in either order. */
static void test_read_write_operand(void)
{
    void *m = region(DEF), *o = region(S2);
    CHECK_OK(wr(DEF, m, BYTES));
    tc__span inplace[2] = {span_of(m, BYTES, true), span_of(m, BYTES, false)};
    CHECK_OK(touch_spans(S1, inplace, 2, "mul_"));
    CHECK(reports() == 1 && last_kind == TC_SANITIZER_RACE_WRITE_AFTER_WRITE &&
          strcmp(last_cur, "mul_") == 0);
    /* then a read on DEF, unordered: one report, against the in-place write */
    CHECK_OK(rd(DEF, m, BYTES));
    CHECK(reports() == 1 && last_kind == TC_SANITIZER_RACE_READ_AFTER_WRITE &&
          strcmp(last_earlier, "mul_") == 0);
    tc__san_device_sync(0);
    /* read first, then write; and a part of it read */
    CHECK_OK(wr(DEF, m, BYTES));
    tc__span rw[3] = {span_of(m, BYTES / 2, false), span_of(m, BYTES, false),
                      span_of(m, BYTES, true)};
    CHECK_OK(touch_spans(S1, rw, 3, "reads and writes"));
    CHECK(reports() == 1 && last_kind == TC_SANITIZER_RACE_WRITE_AFTER_WRITE);
    tc__san_device_sync(0);
    /* x * x into another allocation: x read twice, one read-after-write */
    CHECK_OK(wr(S1, m, BYTES));
    tc__span sq[3] = {span_of(o, BYTES, true), span_of(m, BYTES, false), span_of(m, BYTES, false)};
    CHECK_OK(touch_spans(S2, sq, 3, "square"));
    CHECK(reports() == 1 && last_kind == TC_SANITIZER_RACE_READ_AFTER_WRITE);
    tc__san_device_sync(0);
    drop(m);
    drop(o);
}

/* ---- part 2: tensors on a fake device -------------------------------------------- */

static _Thread_local void *fake_stream;

static tc_status fake_resolve(int index, int *out)
{
    *out = 0;
    return index <= 0 ? TC_OK : tc__fail(TC_ERROR_INVALID_DEVICE, "fake: one device");
}
static tc_status fake_alloc(int device, size_t bytes, void **out)
{
    (void)device;
    *out = bytes ? malloc(bytes) : NULL;
    return TC_OK;
}
static void fake_free(void *p) { free(p); }
static void *fake_recorded; /* the last stream record_stream named */
static tc_status fake_record_stream(void *p, bool host, int device, void *s)
{
    (void)p, (void)host, (void)device;
    fake_recorded = s;
    return TC_OK;
}
static void *fake_current(int device)
{
    (void)device;
    return fake_stream;
}
static tc_status fake_stream_of(tc_stream *s, int *device, void **handle)
{
    *device = 0;
    *handle = s ? (void *)s : fake_stream;
    return TC_OK;
}
/* Both dense, of one dtype and shape (the seam's transfer). */
static tc_status fake_transfer(tc_tensor *d, const tc_tensor *s, bool wait)
{
    (void)wait;
    memcpy(tc__data(d), tc__data(s),
           (size_t)tc__numel(d->ndim, d->sizes) * tc_dtype_size(d->dtype));
    return TC_OK;
}
/* The table in use with the fake device's functions in place. */
static tc__device_ops fake_ops;
static void fake_install(void)
{
    fake_ops = *tc__dev();
    fake_ops.name = "fake";
    fake_ops.backend = &tc__cpu_backend;
    fake_ops.resolve = fake_resolve;
    fake_ops.alloc = fake_alloc;
    fake_ops.free = fake_free;
    fake_ops.record_stream = fake_record_stream;
    fake_ops.current_stream = fake_current;
    fake_ops.stream_of = fake_stream_of;
    fake_ops.transfer = fake_transfer;
    tc__device_ops_install(&fake_ops, NULL); /* below the sanitizer */
}

static const tc_device GPU = {TC_CUDA, 0};

static tc_tensor *gpu_filled(double v)
{
    tc_tensor *t = NULL;
    CHECK_OK(tc_tensor_full(1, (const int64_t[]){256}, v, TC_FLOAT32, GPU, &t));
    return t;
}

static void test_tensor_classic_bug(void)
{
    reports();
    fake_stream = DEF;
    tc_tensor *x = gpu_filled(1), *y = gpu_filled(2), *s = NULL;
    tc__san_stream_wait_stream(0, S1, 0, DEF); /* the side stream starts after the fills */
    fake_stream = S1;                          /* ... and writes x in place ... */
    CHECK_OK(tc_tensor_copy_(x, y, false));
    fake_stream = DEF; /* ... and the default stream reads it */
    CHECK_OK(tc_tensor_sum(x, TC_ALL_DIMS, false, &s));
    CHECK(reports() == 1 && last_kind == TC_SANITIZER_RACE_READ_AFTER_WRITE);
    CHECK(strcmp(last_cur, "tc_tensor_sum") == 0 && strcmp(last_earlier, "tc_tensor_copy_") == 0);
    CHECK(strstr(last_text, "float32 [256]") && strstr(last_text, "made on the default stream") &&
          strstr(last_text, "by tc_tensor_full") && strstr(last_text, "#0 "));
    tc_tensor_release(s);
    /* the fix: the default stream waits for the side stream (which waited for
     * the default stream's earlier read) */
    tc__san_stream_wait_stream(0, S1, 0, DEF);
    fake_stream = S1;
    CHECK_OK(tc_tensor_copy_(x, y, false));
    tc__san_stream_wait_stream(0, DEF, 0, S1);
    fake_stream = DEF;
    CHECK_OK(tc_tensor_sum(x, TC_ALL_DIMS, false, &s));
    double v = 0;
    CHECK_OK(tc_tensor_item(s, &v));
    CHECK(v == 512);
    CHECK(reports() == 0);
    tc__san_stream_wait_stream(0, S1, 0, DEF);
    tc_tensor_release(s);
    /* error mode: the reading call fails and does nothing */
    CHECK_OK(tc_sanitizer_enable(TC_SANITIZER_MODE_ERROR));
    fake_stream = S1;
    CHECK_OK(tc_tensor_copy_(x, y, false));
    fake_stream = DEF;
    s = NULL;
    CHECK_STATUS(tc_tensor_sum(x, TC_ALL_DIMS, false, &s), TC_ERROR_RACE);
    CHECK(s == NULL);
    CHECK(strncmp(tc_last_error(), "tc_tensor_sum: tcuda sanitizer: read-after-write", 48) == 0);
    CHECK(strstr(tc_last_error(), "tc_tensor_copy_") != NULL);
    tc__san_stream_wait_stream(0, DEF, 0, S1);
    CHECK_OK(tc_tensor_sum(x, TC_ALL_DIMS, false, &s));
    CHECK_OK(tc_sanitizer_enable(TC_SANITIZER_MODE_REPORT));
    reports();
    tc_tensor_release(s);
    /* reuse: y read on S1, released without record_stream */
    tc__san_device_sync(0);
    fake_stream = S1;
    tc_tensor *n = NULL;
    CHECK_OK(tc_tensor_neg(y, &n));
    fake_stream = DEF;
    tc_tensor_release(y);
    CHECK(reports() == 1 && last_kind == TC_SANITIZER_RACE_REUSE_AFTER_FREE &&
          strcmp(last_earlier, "tc_tensor_neg") == 0);
    /* with record_stream: silent */
    fake_stream = S1;
    CHECK_OK(tc_tensor_neg(x, &s));
    CHECK_OK(tc_tensor_record_stream(x, NULL)); /* NULL: the current stream, S1 */
    fake_stream = DEF;
    tc_tensor_release(x);
    CHECK(reports() == 0);
    tc__san_device_sync(0);
    tc_tensor_release(n);
    tc_tensor_release(s);
    CHECK(reports() == 0);
    /* error mode: a release cannot fail; the sanitizer records the stream */
    CHECK_OK(tc_sanitizer_enable(TC_SANITIZER_MODE_ERROR));
    tc_tensor *z = gpu_filled(3);
    tc__san_stream_wait_stream(0, S2, 0, DEF);
    fake_stream = S2;
    CHECK_OK(tc_tensor_neg(z, &n));
    fake_stream = DEF;
    fake_recorded = NULL;
    CHECK_OK(tc_tensor_release(z));
    CHECK(reports() == 1 && last_kind == TC_SANITIZER_RACE_REUSE_AFTER_FREE && fake_recorded == S2);
    CHECK_OK(tc_sanitizer_enable(TC_SANITIZER_MODE_REPORT));
    tc__san_device_sync(0);
    tc_tensor_release(n);
    CHECK(reports() == 0);
}

/* PyTorch's doc example: x made on the default stream, multiplied in place
 * on a side stream that did not wait (torch.mul(a, 5, out=a)). Operand 0 is
 * written and read: one write-after-write report, not two. */
static void test_tensor_inplace_side_stream(void)
{
    reports();
    fake_stream = DEF;
    tc_tensor *x = gpu_filled(1);
    fake_stream = S1;
    tc_tensor *five = gpu_filled(5); /* made and written on S1 itself */
    uint64_t before = tc_sanitizer_report_count();
    CHECK_OK(tc_tensor_mul_(x, five));
    CHECK(reports() == 1 && tc_sanitizer_report_count() - before == 1);
    CHECK(last_kind == TC_SANITIZER_RACE_WRITE_AFTER_WRITE &&
          strcmp(last_cur, "tc_tensor_mul_") == 0 && strcmp(last_earlier, "tc_tensor_full") == 0);
    fake_stream = DEF;
    tc__san_device_sync(0);
    double v = 0;
    tc_tensor *s = NULL;
    CHECK_OK(tc_tensor_sum(x, TC_ALL_DIMS, false, &s));
    CHECK_OK(tc_tensor_item(s, &v));
    CHECK(v == 5 * 256);
    tc_tensor_release(s);
    tc_tensor_release(x);
    tc_tensor_release(five);
    CHECK(reports() == 0);
}

static void test_cpu_tensors_silent(void)
{
    uint64_t before = tc_sanitizer_report_count();
    tc_tensor *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(
        tc_tensor_full(2, (const int64_t[]){8, 8}, 3, TC_FLOAT32, (tc_device){TC_CPU, -1}, &a));
    CHECK_OK(tc_tensor_matmul(a, a, &b));
    CHECK_OK(tc_tensor_add(a, b, &c));
    double v = 0;
    tc_tensor *s = NULL;
    CHECK_OK(tc_tensor_sum(c, TC_ALL_DIMS, false, &s));
    CHECK_OK(tc_tensor_item(s, &v));
    CHECK(v == 64 * (3 + 8 * 9));
    CHECK(tc_sanitizer_report_count() == before);
    tc_tensor_release(a);
    tc_tensor_release(b);
    tc_tensor_release(c);
    tc_tensor_release(s);
}

/* ---- TCUDA_SANITIZER, as a whole process sees it ------------------------------- */

extern char **environ;

/* In a child with TCUDA_SANITIZER=value and GPUs hidden: 0 when tc_init
 * answers as it should (a bad value: TC_ERROR_INVALID_ARGUMENT naming it; a
 * good one: TC_ERROR_NO_DEVICE, and with CUDA built the mode is on). */
static int child(const char *value, int want_mode)
{
    tc_status st = tc_init();
    if (want_mode < 0) {
        char want[96];
        snprintf(want, sizeof want, "tc_init: TCUDA_SANITIZER='%s' is not a sanitizer mode", value);
        return st == TC_ERROR_INVALID_ARGUMENT && strstr(tc_last_error(), want) ? 0 : 1;
    }
    if (st != TC_ERROR_NO_DEVICE)
        return 2;
#if defined(TCUDA_HAVE_CUDA)
    if ((int)tc_sanitizer_get_mode() != want_mode)
        return 3;
#endif
    return 0;
}

static int run_child(char *self, const char *value, int want_mode)
{
    setenv("TCUDA_SANITIZER", value, 1);
    setenv("CUDA_VISIBLE_DEVICES", "", 1);
    char mode[8];
    snprintf(mode, sizeof mode, "%d", want_mode);
    char *argv[] = {self, "--child", (char *)value, mode, NULL};
    pid_t pid;
    int status = -1;
    if (posix_spawn(&pid, self, NULL, NULL, argv, environ) == 0)
        waitpid(pid, &status, 0);
    unsetenv("TCUDA_SANITIZER");
    unsetenv("CUDA_VISIBLE_DEVICES");
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_env(char *self)
{
    CHECK(run_child(self, "junk", -1) == 0);
    CHECK(run_child(self, "2", -1) == 0);
    CHECK(run_child(self, "Report", TC_SANITIZER_MODE_REPORT) == 0);
    CHECK(run_child(self, "1", TC_SANITIZER_MODE_REPORT) == 0);
    CHECK(run_child(self, "ERROR", TC_SANITIZER_MODE_ERROR) == 0);
    CHECK(run_child(self, "off", TC_SANITIZER_MODE_OFF) == 0);
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--child") == 0)
        return child(argv[2], atoi(argv[3]));
    tc_test_init();
    test_env(argv[0]);
    CHECK(tc_sanitizer_get_mode() == TC_SANITIZER_MODE_OFF);
    CHECK(strcmp(tc_sanitizer_race_string(TC_SANITIZER_RACE_REUSE_AFTER_FREE),
                 "reuse-after-free") == 0);
    CHECK(strcmp(tc_status_string(TC_ERROR_RACE), "TC_ERROR_RACE") == 0);
    int mode = -1;
    CHECK_OK(tc__parse_sanitizer("Error", &mode));
    CHECK(mode == TC_SANITIZER_MODE_ERROR);
    CHECK_STATUS(tc__parse_sanitizer("yes", &mode), TC_ERROR_INVALID_ARGUMENT);
    CHECK(mode == TC_SANITIZER_MODE_ERROR && strstr(tc_last_error(), "TCUDA_SANITIZER='yes'"));
    /* off: hooks do nothing */
    void *m = calloc(1, 16);
    tc__san_alloc(m, 16, 0, S1, false);
    CHECK(tc__san_watched() == 0);
    free(m);

    fake_install();
    tc__access_set_stream_resolver(fake_stream_of);
    CHECK_OK(tc_sanitizer_set_report_fn(on_report, NULL));
    CHECK_OK(tc_sanitizer_enable(TC_SANITIZER_MODE_REPORT));
    test_read_after_write();
    test_write_after_read();
    test_graph_capture();
    test_graph_pool_free();
    test_replay_refused_whole();
    test_write_after_write();
    test_transitive_and_ranges();
    test_reuse_after_free();
    test_host_read();
    test_error_mode();
    test_bounded();
    test_many_readers();
    test_ordered_readers();
    test_reports_per_op();
    test_read_write_operand();
    test_free_protects_every_stream();
    test_against_reference();
    test_threads();
    test_user_access();
    test_tensor_classic_bug();
    test_tensor_inplace_side_stream();
    test_cpu_tensors_silent();
    CHECK(tc_sanitizer_report_count() > 0);
    CHECK_OK(tc_sanitizer_enable(TC_SANITIZER_MODE_OFF));
    CHECK(tc__san_watched() == 0 && tc_sanitizer_get_mode() == TC_SANITIZER_MODE_OFF);
    return TC_TEST_DONE();
}
