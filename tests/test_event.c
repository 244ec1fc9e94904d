/* GPU: events. Unrecorded events, lazy creation on the stream's device,
 * elapsed time of a kernel of known duration, query (TC_ERROR_NOT_READY,
 * then TC_OK), the state errors, bad handles (NULL, destroyed, destroyed
 * twice, garbage bytes) with no out-parameter written, and an interprocess
 * event recorded here and waited on by a child process (this program run
 * again with --ipc-child HEX). */
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "tc_test.h"

#include "test_kernels.h"

extern char **environ;

static void to_hex(const tc_ipc_event_handle *h, char *out)
{
    for (size_t i = 0; i < sizeof h->bytes; i++)
        sprintf(out + 2 * i, "%02x", h->bytes[i]);
}

static int from_hex(const char *text, tc_ipc_event_handle *h)
{
    if (strlen(text) != 2 * sizeof h->bytes)
        return 0;
    for (size_t i = 0; i < sizeof h->bytes; i++) {
        unsigned v;
        if (sscanf(text + 2 * i, "%2x", &v) != 1)
            return 0;
        h->bytes[i] = (unsigned char)v;
    }
    return 1;
}

/* The child: opens the parent's event, which completes only when the
 * parent's 3 s kernel does; it must be pending at first, then be waited for.
 * `launched` is when the parent launched that kernel (CLOCK_MONOTONIC, ms):
 * a child that starts too late to see it pending (under compute-sanitizer,
 * starting takes seconds) checks only the completed state. */
static int ipc_child(const char *hex, double launched)
{
    tc_ipc_event_handle h;
    if (!from_hex(hex, &h))
        return 10;
    tc_event *e;
    if (tc_event_from_ipc_handle(0, &h, &e) != TC_OK) {
        fprintf(stderr, "child: %s\n", tc_last_error());
        return 11;
    }
    double opened = tc_test_now_ms() - launched;
    int pending = tc_event_query(e) == TC_ERROR_NOT_READY;
    tc_stream *s;
    if (tc_stream_create(0, 0, &s) != TC_OK || tc_event_wait(e, s) != TC_OK)
        return 12;
    tc_event *after;
    if (tc_stream_record_event(s, &after) != TC_OK)
        return 13;
    double t0 = tc_test_now_ms();
    if (tc_event_synchronize(after) != TC_OK) /* waits through the parent's event */
        return 14;
    double waited = tc_test_now_ms() - t0;
    int done = tc_event_query(e) == TC_OK;
    printf("child: opened %.0f ms after the launch, pending at open %d, waited %.0f ms, "
           "complete after %d\n",
           opened, pending, waited, done);
    tc_event_destroy(after);
    tc_event_destroy(e);
    tc_stream_destroy(s);
    if (opened > 2500) /* too late to see the 3 s kernel running */
        return done ? 0 : 15;
    return pending && done && waited > 100 ? 0 : 15;
}

static void check_ipc(char *self)
{
    tc_event *e;
    CHECK_OK(tc_event_create(TC_EVENT_FLAG_INTERPROCESS | TC_EVENT_FLAG_BLOCKING, &e));
    tc_stream *s;
    CHECK_OK(tc_stream_create(0, 0, &s));
    double launched = tc_test_now_ms();
    CHECK_OK(tc_test_spin(tc_stream_cuda_handle(s), 3000ull * 1000 * 1000));
    CHECK_OK(tc_event_record(e, s));
    tc_ipc_event_handle h;
    CHECK_OK(tc_event_ipc_handle(e, &h));
    char hex[2 * sizeof h.bytes + 1];
    to_hex(&h, hex);
    char when[32];
    snprintf(when, sizeof when, "%.3f", launched);
    char *argv[] = {self, "--ipc-child", hex, when, NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, self, NULL, NULL, argv, environ);
    CHECK(rc == 0);
    int status = -1;
    if (rc == 0)
        waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0))
        fprintf(stderr, "ipc child exit status %d\n", WEXITSTATUS(status));
    CHECK_OK(tc_event_query(e));
    CHECK_OK(tc_event_destroy(e));
    CHECK_OK(tc_stream_destroy(s));
}

/* Every call on a destroyed and on a garbage event fails with
 * TC_ERROR_INVALID_HANDLE naming the call, and writes nothing. */
static void check_bad_handles(tc_event *dead, tc_event *live, tc_stream *s)
{
    tc_event *junk = tc_test_garbage(sizeof(void *) * 16);
    tc_event *bad[2] = {dead, junk};
    for (int i = 0; i < 2; i++) {
        tc_event *e = bad[i];
        const char *what = i == 0 ? "already destroyed" : "is not a live tc_event";
        CHECK_STATUS(tc_event_destroy(e), TC_ERROR_INVALID_HANDLE);
        CHECK(strncmp(tc_last_error(), "tc_event_destroy: ", 18) == 0);
        CHECK(strstr(tc_last_error(), what) != NULL);
        CHECK_STATUS(tc_event_record(e, s), TC_ERROR_INVALID_HANDLE);
        CHECK_STATUS(tc_event_query(e), TC_ERROR_INVALID_HANDLE);
        CHECK(strncmp(tc_last_error(), "tc_event_query: ", 16) == 0);
        CHECK_STATUS(tc_event_synchronize(e), TC_ERROR_INVALID_HANDLE);
        CHECK_STATUS(tc_event_wait(e, s), TC_ERROR_INVALID_HANDLE);
        CHECK_STATUS(tc_stream_wait_event(s, e), TC_ERROR_INVALID_HANDLE);
        CHECK(strncmp(tc_last_error(), "tc_stream_wait_event: ", 22) == 0);
        float ms = -5;
        CHECK_STATUS(tc_event_elapsed_time(e, live, &ms), TC_ERROR_INVALID_HANDLE);
        CHECK_STATUS(tc_event_elapsed_time(live, e, &ms), TC_ERROR_INVALID_HANDLE);
        CHECK(ms == -5);
        tc_ipc_event_handle h;
        memset(&h, 0x33, sizeof h);
        CHECK_STATUS(tc_event_ipc_handle(e, &h), TC_ERROR_INVALID_HANDLE);
        CHECK(h.bytes[0] == 0x33 && h.bytes[63] == 0x33);
        char before[256];
        snprintf(before, sizeof before, "%s", tc_last_error());
        CHECK(tc_event_device(e) == -1);
        CHECK(strcmp(before, tc_last_error()) == 0);
    }
    CHECK(tc_event_device(NULL) == -1);
    CHECK_STATUS(tc_event_query(NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(tc_last_error(), "tc_event is NULL") != NULL);
    CHECK_STATUS(tc_event_record(NULL, s), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_event_synchronize(NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_event_create(0, NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_stream_record_event(s, NULL), TC_ERROR_INVALID_ARGUMENT);
    tc_event *out = (tc_event *)0x1;
    CHECK_STATUS(tc_event_from_ipc_handle(0, NULL, &out), TC_ERROR_INVALID_ARGUMENT);
    CHECK(out == (tc_event *)0x1);
    free(junk);
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--ipc-child") == 0)
        return ipc_child(argv[2], atof(argv[3]));
    tc_test_init();
    TC_TEST_REQUIRE_GPU();

    tc_event *start, *end, *plain;
    CHECK_OK(tc_event_create(TC_EVENT_FLAG_TIMING, &start));
    CHECK_OK(tc_event_create(TC_EVENT_FLAG_TIMING | TC_EVENT_FLAG_BLOCKING, &end));
    CHECK_OK(tc_event_create(TC_EVENT_FLAG_DEFAULT, &plain));
    tc_event *bad = (tc_event *)0x1;
    CHECK_STATUS(tc_event_create(0x80, &bad), TC_ERROR_INVALID_ARGUMENT);
    CHECK(strncmp(tc_last_error(), "tc_event_create: unknown flags 0x80", 35) == 0);
    CHECK_STATUS(tc_event_create(TC_EVENT_FLAG_TIMING | TC_EVENT_FLAG_INTERPROCESS, &bad),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK(bad == (tc_event *)0x1);

    /* never recorded: complete, and waits are no-ops */
    CHECK(tc_event_device(start) == -1);
    CHECK_OK(tc_event_query(start));
    CHECK_OK(tc_event_synchronize(start));
    CHECK_OK(tc_event_wait(start, NULL));
    float ms = -1;
    CHECK_STATUS(tc_event_elapsed_time(start, end, &ms), TC_ERROR_INVALID_STATE);
    CHECK(ms == -1);

    /* elapsed time of a kernel of known duration, on the current stream */
    tc_stream *s;
    CHECK_OK(tc_stream_create(-1, 0, &s));
    for (int i = 0; i < 3; i++) {
        uint64_t ns = (uint64_t)(20 + tc_test_rand() % 80) * 1000 * 1000; /* 20-100 ms */
        CHECK_OK(tc_event_record(start, s));
        CHECK(tc_event_device(start) == 0);
        CHECK_OK(tc_test_spin(tc_stream_cuda_handle(s), ns));
        CHECK_OK(tc_event_record(end, s));
        /* NOT_READY is an answer: polling leaves the last message alone */
        CHECK_STATUS(tc_event_destroy(NULL), TC_ERROR_INVALID_ARGUMENT);
        char prior[256];
        snprintf(prior, sizeof prior, "%s", tc_last_error());
        CHECK_STATUS(tc_event_query(end), TC_ERROR_NOT_READY);
        for (int k = 0; k < 1000 && tc_event_query(end) == TC_ERROR_NOT_READY; k++)
            ;
        CHECK(strcmp(tc_last_error(), prior) == 0 && strstr(prior, "tc_event_destroy") != NULL);
        float before = ms;
        CHECK_STATUS(tc_event_elapsed_time(start, end, &ms), TC_ERROR_NOT_READY);
        CHECK(ms == before);
        CHECK_OK(tc_event_synchronize(end));
        CHECK_OK(tc_event_query(end));
        CHECK_OK(tc_event_elapsed_time(start, end, &ms));
        double want = ns / 1e6;
        printf("kernel of %.0f ms measured %.2f ms\n", want, ms);
        /* The kernel spins at least `ns` by the GPU's clock; other processes
         * sharing the GPU can only lengthen it, so the upper bound is loose. */
        CHECK(ms >= want * 0.98 && ms <= want * 20 + 1000);
    }
    /* an event without timing */
    CHECK_OK(tc_event_record(plain, s));
    CHECK_STATUS(tc_event_elapsed_time(start, plain, &ms), TC_ERROR_INVALID_STATE);
    CHECK(strstr(tc_last_error(), "TC_EVENT_FLAG_TIMING") != NULL);
    CHECK_STATUS(tc_event_elapsed_time(start, end, NULL), TC_ERROR_INVALID_ARGUMENT);

    /* recorded on the current stream (NULL) */
    tc_stream_guard g = tc_stream_guard_enter(s);
    CHECK_OK(tc_event_record(plain, NULL));
    tc_stream_guard_exit(&g);
    CHECK_OK(tc_event_synchronize(plain));

    /* IPC handle needs the interprocess flag */
    tc_ipc_event_handle h;
    CHECK_STATUS(tc_event_ipc_handle(plain, &h), TC_ERROR_INVALID_STATE);
    memset(&h, 0x5a, sizeof h);
    tc_event *opened = (tc_event *)0x1;
    tc_status st = tc_event_from_ipc_handle(0, &h, &opened);
    CHECK(st != TC_OK && opened == (tc_event *)0x1 && tc_last_error()[0]);
    CHECK(strncmp(tc_last_error(), "tc_event_from_ipc_handle: ", 26) == 0);
    CHECK_STATUS(tc_event_from_ipc_handle(99, &h, &opened), TC_ERROR_INVALID_DEVICE);
    CHECK(opened == (tc_event *)0x1);

    /* a record on another device's stream is refused (needs two GPUs) */
    if (tc_device_count() > 1) {
        tc_stream *s1;
        CHECK_OK(tc_stream_create(1, 0, &s1));
        CHECK_STATUS(tc_event_record(plain, s1), TC_ERROR_DEVICE_MISMATCH);
        CHECK(strstr(tc_last_error(), "cuda:0") && strstr(tc_last_error(), "cuda:1"));
        CHECK(strncmp(tc_last_error(), "tc_event_record: ", 17) == 0);
        CHECK_OK(tc_event_wait(plain, s1)); /* waiting across devices is fine */
        CHECK_OK(tc_stream_synchronize(s1));
        CHECK_OK(tc_stream_destroy(s1));
    }

    /* destroyed handles */
    CHECK_OK(tc_event_destroy(plain));
    CHECK_STATUS(tc_event_record(plain, s), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_event_destroy(plain), TC_ERROR_INVALID_HANDLE); /* twice */
    CHECK(strstr(tc_last_error(), "already destroyed") != NULL);
    CHECK_STATUS(tc_event_query(plain), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_event_destroy(NULL), TC_ERROR_INVALID_ARGUMENT);
    check_bad_handles(plain, start, s);

    check_ipc(argv[0]);

    CHECK_OK(tc_event_destroy(start));
    CHECK_OK(tc_event_destroy(end));
    CHECK_OK(tc_stream_destroy(s));
    return TC_TEST_DONE();
}
