/* GPU, two or more GPUs: the fault matrix of process groups. Every way of
 * waiting on a group ends with a clear tc_status within the group's timeout
 * (plus a few seconds) when its peer dies, exits or stops, never a hang.
 *
 * Each cell is a group of two processes (fork + exec of this program, one
 * GPU each, with the environment torchrun gives). The victim does its fault
 * at the cell's point; the survivor does what the point says and must see
 * a failing tc_status, with a message, within TIMEOUT + SLACK seconds:
 *
 *   faults:  exit (the victim's _exit), kill (SIGKILL), stop (SIGSTOP; the
 *            parent kills it afterwards)
 *   points:  init        the victim faults before joining: the survivor's
 *                        tc_process_group_create fails
 *            wait        an all_reduce, then tc_work_wait
 *            stream      an all_reduce, tc_work_wait_stream, then
 *                        tc_stream_synchronize of the current stream (the
 *                        rank's GPU is the current device)
 *            to_host     an all_reduce, tc_work_wait_stream, then a copy of
 *                        its tensor to the CPU (a blocking copy)
 *            device      an all_reduce without a work, then tc_synchronize
 *            barrier     tc_dist_barrier
 *            destroy     an all_reduce without a work, then
 *                        tc_process_group_destroy
 *
 * (destroy passes with TC_OK too: finishing a group may not need the peer.)
 * Except at init, both ranks first run an all_reduce together, so that
 * NCCL's connections are up and the fault hits a running collective. The
 * victim is rank 1, and rank 0 too for a kill at the `wait` point. The parent watches
 * each survivor with a wall-clock limit of its own, so a hang is reported
 * as one rather than hanging the test. Exits 77 with fewer than 2 GPUs or
 * without NCCL. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dist_support.h"
#include "nccl_find.h"
#include "tc_test.h"
#include "tcuda/dist.h"

/* Cells run one at a time on each pair of GPUs: the GPU time-slices the
 * processes of several groups, and NCCL's kernels, which must run at the
 * same time on both GPUs of a group, then crawl (with 8 groups on 2 H200s
 * no group finished its setup within 10 s). */
enum { TIMEOUT = 5, SLACK = 8, PORT0 = 29640 };

static const char *faults[] = {"exit", "kill", "stop"};
static const char *points[] = {"init", "wait", "stream", "to_host", "device", "barrier", "destroy"};
enum { N_FAULTS = 3, N_POINTS = 7 };

static void fault(const char *how)
{
    fflush(stdout);
    if (!strcmp(how, "exit"))
        _exit(0);
    raise(!strcmp(how, "kill") ? SIGKILL : SIGSTOP);
    pause(); /* stopped: the parent kills it */
    _exit(0);
}

/* The survivor's part after the victim's fault; returns the first status
 * that is not TC_OK (TC_OK when every call succeeded). */
static tc_status survive(tc_process_group *pg, const char *point, tc_tensor *t)
{
    int dev = tc_process_group_device(pg);
    tc_work *w = NULL;
    tc_status st = TC_OK;
    if (!strcmp(point, "barrier"))
        return tc_dist_barrier(pg);
    bool want_work = strcmp(point, "device") && strcmp(point, "destroy");
    st = tc_dist_all_reduce(pg, t, TC_REDUCE_OP_SUM, want_work ? &w : NULL);
    if (st != TC_OK) /* it may fail already (an error NCCL saw) */
        return st;
    if (!strcmp(point, "wait")) {
        st = tc_work_wait(w);
    } else if (!strcmp(point, "stream") || !strcmp(point, "to_host")) {
        st = tc_work_wait_stream(w, NULL);
        if (st == TC_OK && !strcmp(point, "stream")) {
            st = tc_stream_synchronize(NULL);
        } else if (st == TC_OK) {
            tc_tensor *h = NULL;
            st = tc_tensor_to(t, (tc_device){TC_CPU, -1}, tc_tensor_dtype(t), false, &h);
            tc_tensor_release(h);
        }
    } else if (!strcmp(point, "device")) {
        st = tc_synchronize(dev);
    }
    if (w)
        (void)tc_work_destroy(w);
    return st;
}

/* One rank of a cell: argv "rank FAULT POINT VICTIM". */
static int rank_main(const char *how, const char *point, int victim)
{
    tc_test_init();
    int rank = atoi(getenv("RANK"));
    bool is_victim = rank == victim;
    if (!strcmp(point, "init") && is_victim)
        fault(how);
    int local = atoi(getenv("LOCAL_RANK"));
    CHECK_OK(tc_set_device(local));  /* as a torchrun program does: its GPU is the current one */
    CHECK_OK(tc_synchronize(local)); /* CUDA's own setup, before the clock */
    double t0 = tc_test_now_ms();
    tc_process_group *pg = NULL;
    tc_status st = tc_process_group_create_from_env(&pg);
    if (!strcmp(point, "init")) {
        double s = (tc_test_now_ms() - t0) / 1000;
        printf("cell %s/%s: create after %.1f s: %s: %s\n", how, point, s, tc_status_string(st),
               st ? tc_last_error() : "");
        CHECK(st != TC_OK && s < TIMEOUT + SLACK);
        return TC_TEST_DONE();
    }
    printf("cell %s/%s: rank %d joined in %.1f s\n", how, point, rank,
           (tc_test_now_ms() - t0) / 1000);
    CHECK_OK(st);
    if (st != TC_OK) { /* NCCL's setup may still run in its thread: no teardown */
        fflush(stdout);
        _exit(1);
    }
    int64_t n = 1 << 20;
    tc_tensor *t = NULL;
    CHECK_OK(
        tc_tensor_ones(1, &n, TC_FLOAT32, (tc_device){TC_CUDA, tc_process_group_device(pg)}, &t));
    tc_work *w = NULL;
    CHECK_OK(tc_dist_all_reduce(pg, t, TC_REDUCE_OP_SUM, &w)); /* together: connections up */
    CHECK_OK(tc_work_wait(w));
    CHECK_OK(tc_work_destroy(w));
    if (is_victim)
        fault(how);
    nanosleep(&(struct timespec){0, 200 * 1000 * 1000}, NULL); /* the victim is gone */
    t0 = tc_test_now_ms();
    st = survive(pg, point, t);
    double s = (tc_test_now_ms() - t0) / 1000;
    printf("cell %s/%s (victim %d): %s after %.1f s: %s\n", how, point, victim,
           tc_status_string(st), s, st ? tc_last_error() : "");
    if (strcmp(point, "destroy")) {
        CHECK(st != TC_OK);
        CHECK(st == TC_OK || strstr(tc_last_error(), "rank") != NULL);
        t0 = tc_test_now_ms();
        tc_status end = tc_process_group_destroy(pg);
        printf("cell %s/%s: destroy after %.1f s: %s\n", how, point, (tc_test_now_ms() - t0) / 1000,
               tc_status_string(end));
        s += (tc_test_now_ms() - t0) / 1000;
    }
    CHECK(s < TIMEOUT + SLACK);
    tc_tensor_release(t);
    fflush(stdout);
    _exit(tc_test_failed ? 1 : 0); /* the GPU may be left busy: no orderly teardown */
}

typedef struct cell {
    int fault, point, victim, port, gpu0; /* its ranks use GPUs gpu0 and gpu0 + 1 */
    pid_t kids[2];
    int status[2];
    bool done[2];
    double started;
} cell;

static void start(cell *c)
{
    c->started = tc_test_now_ms();
    for (int r = 0; r < 2; r++) {
        c->done[r] = false;
        c->kids[r] = fork();
        if (c->kids[r] == 0) {
            char v[32];
            snprintf(v, sizeof v, "%d", r), setenv("RANK", v, 1);
            snprintf(v, sizeof v, "%d", c->gpu0 + r), setenv("LOCAL_RANK", v, 1);
            setenv("WORLD_SIZE", "2", 1);
            snprintf(v, sizeof v, "%d", c->port), setenv("MASTER_PORT", v, 1);
            setenv("MASTER_ADDR", "127.0.0.1", 1);
            snprintf(v, sizeof v, "%d", TIMEOUT), setenv("TCUDA_DIST_TIMEOUT", v, 1);
            setenv("NCCL_NVLS_ENABLE", "0", 1);
            char victim[8];
            snprintf(victim, sizeof victim, "%d", c->victim);
            execl("/proc/self/exe", "test_dist_faults", "rank", faults[c->fault], points[c->point],
                  victim, (char *)NULL);
            _exit(99);
        }
    }
}

/* Waits for a batch of cells: each survivor must end by its limit; then
 * the victims (stopped ones too) are killed and reaped. */
static int finish(cell *cells, int n)
{
    int failed = 0;
    double limit_ms = (TIMEOUT + SLACK + 15) * 1000.0; /* process start and CUDA init too */
    for (;;) {
        bool waiting = false;
        for (int i = 0; i < n; i++) {
            cell *c = &cells[i];
            int survivor = 1 - c->victim;
            if (c->done[survivor])
                continue;
            pid_t p = waitpid(c->kids[survivor], &c->status[survivor], WNOHANG);
            if (p == c->kids[survivor]) {
                c->done[survivor] = true;
            } else if (tc_test_now_ms() - c->started > limit_ms) {
                printf("cell %s/%s (victim %d): HANG: the survivor did not end within %.0f s\n",
                       faults[c->fault], points[c->point], c->victim, limit_ms / 1000);
                kill(c->kids[survivor], SIGKILL);
                waitpid(c->kids[survivor], &c->status[survivor], 0);
                c->done[survivor] = true;
                c->status[survivor] = -1;
            } else {
                waiting = true;
            }
        }
        if (!waiting)
            break;
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    }
    for (int i = 0; i < n; i++) {
        cell *c = &cells[i];
        kill(c->kids[c->victim], SIGKILL);
        waitpid(c->kids[c->victim], NULL, 0);
        int s = c->status[1 - c->victim];
        bool ok = s != -1 && WIFEXITED(s) && WEXITSTATUS(s) == 0;
        if (!ok) {
            printf("cell %s/%s (victim %d): FAILED (survivor status 0x%x)\n", faults[c->fault],
                   points[c->point], c->victim, s);
            failed++;
        }
    }
    return failed;
}

int main(int argc, char **argv)
{
    if (argc == 5 && !strcmp(argv[1], "rank"))
        return rank_main(argv[2], argv[3], atoi(argv[4]));
    tc_test_init();
    TC_TEST_REQUIRE_GPU();
    if (tc_device_count() < 2) {
        printf("skipped: the fault matrix needs 2 GPUs, this machine has %d\n", tc_device_count());
        return 77;
    }
    tc_test_find_nccl();                                       /* the ranks inherit the setting */
    tc_dist_options o = tc_test_dist_opts(0, 1, PORT0 - 1, 0); /* the default timeout */
    o.local_rank = 0;
    tc_process_group *pg = NULL;
    tc_status st = tc_process_group_create(&o, &pg);
    if (st == TC_ERROR_NOT_SUPPORTED) {
        printf("skipped: NCCL was not found: %s\n", tc_last_error());
        return 77;
    }
    CHECK_OK(st);
    CHECK_OK(tc_process_group_destroy(pg));

    /* every fault at every point, and the wait point with rank 0 the victim */
    cell all[N_FAULTS * (N_POINTS + 1)];
    int n = 0, port = PORT0;
    for (int f = 0; f < N_FAULTS; f++) {
        for (int p = 0; p < N_POINTS; p++)
            all[n++] = (cell){.fault = f, .point = p, .victim = 1, .port = port++};
        if (f == 1) /* kill */
            all[n++] = (cell){.fault = f, .point = 1, .victim = 0, .port = port++};
    }
    int pairs = tc_device_count() / 2, failed = 0, cells_run = n;
    for (int i = 0; i < n; i += pairs) {
        int k = n - i < pairs ? n - i : pairs;
        for (int j = 0; j < k; j++) {
            all[i + j].gpu0 = 2 * j;
            start(&all[i + j]);
        }
        failed += finish(&all[i], k);
        /* the driver tears down the contexts of killed ranks, which held
         * aborted kernels: let it finish before the next groups start */
        nanosleep(&(struct timespec){0, 500 * 1000 * 1000}, NULL);
    }
    printf("fault matrix: %d of %d cells held\n", cells_run - failed, cells_run);
    CHECK(failed == 0);
    return TC_TEST_DONE();
}
