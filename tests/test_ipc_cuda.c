/* GPU: memory IPC between two processes on the same GPU. The test runs
 * itself again (fork + exec of /proc/self/exe) as the consumer:
 *  1. the consumer opens the producer's handle; the producer then releases
 *     its tensor, allocates and fills a tensor of the same size (which must
 *     not get the shared block) and calls tc_ipc_collect (which must keep
 *     it); the consumer then reads: the data is intact;
 *  2. after the consumer released and exited, tc_ipc_collect frees the block
 *     (memory_allocated drops, ipc_shared_blocks goes to 0), and the handle
 *     is stale: refused in a new consumer and in the producer;
 *  3. a consumer that exits without releasing (a crash) does not pin the
 *     block: the next collect frees it;
 *  4. forged and corrupted handles are refused by the consumer;
 *  5. record_stream works on the consumer's tensor: the consumer queues
 *     long work and then a copy of the shared data on a side stream it
 *     recorded, releases the tensor at once, and only then lets the producer
 *     collect the block and overwrite memory; the copy still reads the
 *     original data (the release waited for the recorded stream).
 * Also the producer opening its own handle (a view of its storage). */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tc_test.h"
#include "tcuda/ipc.h"
#include "tcuda/stream.h"

enum { N = 1 << 20 }; /* 4 MiB of float32: a block of its own */

static float expected(int64_t i) { return (float)(i % 1000) - 250.0f; }

static void to_hex(const tc_ipc_mem_handle *h, char *out)
{
    for (int i = 0; i < TC_IPC_MEM_HANDLE_SIZE; i++)
        sprintf(out + 2 * i, "%02x", h->bytes[i]);
}

static bool from_hex(const char *s, tc_ipc_mem_handle *h)
{
    if (strlen(s) != 2 * TC_IPC_MEM_HANDLE_SIZE)
        return false;
    for (int i = 0; i < TC_IPC_MEM_HANDLE_SIZE; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1)
            return false;
        h->bytes[i] = (unsigned char)v;
    }
    return true;
}

static bool intact(const tc_tensor *t)
{
    double *v = tc_test_values(t);
    bool ok = v != NULL && tc_tensor_numel(t) == N;
    for (int64_t i = 0; ok && i < N; i++)
        ok = v[i] == (double)expected(i);
    free(v);
    return ok;
}

/* Mode "stream" (5): the shared tensor t is read on a side stream that was
 * recorded on it, after a good amount of other work there, and released
 * before that stream is done. 0 when the copy holds the original data. */
static int consume_on_side_stream(tc_tensor *t, int to_parent, int from_parent)
{
    tc_stream *side = NULL;
    if (tc_stream_create(0, 0, &side) != TC_OK)
        return 20;
    if (tc_tensor_record_stream(t, side) != TC_OK || tc_tensor_record_stream(t, NULL) != TC_OK) {
        fprintf(stderr, "consumer: record_stream: %s\n", tc_last_error());
        return 21;
    }
    tc_tensor *a = NULL, *copy = NULL;
    tc_stream_guard g = tc_stream_guard_enter(side);
    tc_status st = tc_tensor_full(2, (const int64_t[]){2048, 2048}, 0.5, TC_FLOAT32,
                                  (tc_device){TC_CUDA, 0}, &a);
    for (int i = 0; i < 20 && st == TC_OK; i++) { /* ~ms of work ahead of the copy */
        tc_tensor *p = NULL;
        st = tc_tensor_matmul(a, a, &p);
        tc_tensor_release(p);
    }
    if (st == TC_OK) /* queued behind the matmuls */
        st = tc_tensor_empty(1, (const int64_t[]){N}, TC_FLOAT32, (tc_device){TC_CUDA, 0}, &copy);
    if (st == TC_OK)
        st = tc_tensor_copy_(copy, t, true);
    tc_stream_guard_exit(&g);
    tc_tensor_release(a);
    if (st != TC_OK) {
        fprintf(stderr, "consumer: %s\n", tc_last_error());
        return 22;
    }
    tc_tensor_release(t); /* waits for `side`, then tells the producer */
    char c = 'r';
    if (write(to_parent, &c, 1) != 1 || read(from_parent, &c, 1) != 1) /* overwritten; check */
        return 23;
    if (tc_stream_synchronize(side) != TC_OK || !intact(copy)) {
        fprintf(stderr, "consumer: the copy on the recorded stream saw other data\n");
        return 24;
    }
    tc_tensor_release(copy);
    tc_stream_destroy(side);
    return 0;
}

/* ---- the consumer (argv: consumer MODE HEX TO_PARENT_FD FROM_PARENT_FD) --------------- */

static int consumer(const char *mode, const char *hex, int to_parent, int from_parent)
{
    tc_ipc_mem_handle h;
    if (!from_hex(hex, &h))
        return 10;
    tc_tensor *t = NULL;
    tc_status st = tc_tensor_from_ipc_handle(&h, &t);
    if (!strcmp(mode, "stale"))
        return st == TC_ERROR_INVALID_HANDLE && strstr(tc_last_error(), "stale") ? 0 : 11;
    if (st != TC_OK) {
        fprintf(stderr, "consumer: %s\n", tc_last_error());
        return 12;
    }
    if (!strcmp(mode, "stream"))
        return consume_on_side_stream(t, to_parent, from_parent);
    char c = 'o';
    if (write(to_parent, &c, 1) != 1 || read(from_parent, &c, 1) != 1) /* opened; go */
        return 13;
    if (!intact(t)) {
        fprintf(stderr, "consumer: the shared data changed\n");
        return 14;
    }
    /* forged and corrupted handles: refused, nothing mapped */
    tc_ipc_mem_handle bad = h;
    bad.bytes[100] ^= 0x40;
    tc_tensor *x = (tc_tensor *)0x1;
    if (tc_tensor_from_ipc_handle(&bad, &x) != TC_ERROR_INVALID_HANDLE || x != (tc_tensor *)0x1)
        return 15;
    for (int i = 0; i < TC_IPC_MEM_HANDLE_SIZE; i++)
        bad.bytes[i] = (unsigned char)(i * 31 + 7);
    if (tc_tensor_from_ipc_handle(&bad, &x) != TC_ERROR_INVALID_HANDLE)
        return 16;
    if (!strcmp(mode, "crash"))
        _exit(0); /* no release: the producer must notice this process is gone */
    tc_tensor_release(t);
    return 0;
}

/* ---- the producer ---------------------------------------------------------------------- */

static pid_t start(const char *mode, const tc_ipc_mem_handle *h, int *to_child, int *from_child)
{
    int up[2], down[2];
    CHECK(pipe(up) == 0 && pipe(down) == 0);
    static char hex[2 * TC_IPC_MEM_HANDLE_SIZE + 1];
    to_hex(h, hex);
    pid_t pid = fork();
    if (pid == 0) {
        char a[16], b[16];
        snprintf(a, sizeof a, "%d", up[1]);
        snprintf(b, sizeof b, "%d", down[0]);
        close(up[0]);
        close(down[1]);
        execl("/proc/self/exe", "test_ipc_cuda", "consumer", mode, hex, a, b, (char *)NULL);
        _exit(99);
    }
    close(up[1]);
    close(down[0]);
    *from_child = up[0];
    *to_child = down[1];
    return pid;
}

static int finish(pid_t pid, int to_child, int from_child)
{
    close(to_child);
    close(from_child);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

static tc_tensor *make_shared(void)
{
    float *v = malloc(sizeof(float) * N);
    for (int64_t i = 0; i < N; i++)
        v[i] = expected(i);
    int64_t n = N;
    tc_tensor *t = NULL;
    CHECK_OK(tc_tensor_from_data(v, 1, &n, TC_FLOAT32, (tc_device){TC_CUDA, 0}, &t));
    free(v);
    return t;
}

static int64_t shared_blocks(void) { return tc_test_stat(0, "ipc_shared_blocks"); }

int main(int argc, char **argv)
{
    if (argc == 6 && !strcmp(argv[1], "consumer"))
        return consumer(argv[2], argv[3], atoi(argv[4]), atoi(argv[5]));
    tc_test_init();
    TC_TEST_REQUIRE_GPU();
    char dir[] = "/tmp/tcuda_ipc_cuda_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    setenv("TCUDA_IPC_DIR", dir, 1); /* the consumers inherit it */

    /* 1. the producer releases while the consumer reads */
    tc_tensor *t = make_shared();
    tc_ipc_mem_handle h;
    tc_status st = tc_tensor_ipc_handle(t, &h);
    if (st != TC_OK) {
        printf("tc_tensor_ipc_handle: %s\n", tc_last_error());
        CHECK_OK(st);
        return TC_TEST_DONE();
    }
    CHECK(shared_blocks() == 1);
    CHECK(tc_test_stat(0, "ipc_shared_bytes") >= (int64_t)N * 4);
    tc_tensor *own = NULL;
    CHECK_OK(tc_tensor_from_ipc_handle(&h, &own)); /* this process: a view */
    CHECK(own && tc_tensor_data_ptr(own) == tc_tensor_data_ptr(t) && intact(own));
    tc_tensor_release(own);

    int to_child, from_child;
    pid_t pid = start("read", &h, &to_child, &from_child);
    char c = 0;
    CHECK(read(from_child, &c, 1) == 1 && c == 'o');
    void *old_ptr = tc_tensor_data_ptr(t);
    tc_tensor_release(t);
    tc_tensor *other = NULL;
    CHECK_OK(
        tc_tensor_full(1, (const int64_t[]){N}, 7.0, TC_FLOAT32, (tc_device){TC_CUDA, 0}, &other));
    CHECK(tc_tensor_data_ptr(other) != old_ptr); /* the shared block is not reused */
    CHECK_OK(tc_synchronize(0));
    CHECK_OK(tc_ipc_collect());
    CHECK(shared_blocks() == 1); /* the consumer still holds it */
    c = 'g';
    CHECK(write(to_child, &c, 1) == 1);
    int rc = finish(pid, to_child, from_child);
    CHECK(rc == 0);
    if (rc)
        printf("consumer exited with %d\n", rc);

    /* 2. collected after the consumer left: the memory comes back */
    size_t before = tc_test_bytes(tc_memory_allocated, 0);
    CHECK_OK(tc_ipc_collect());
    CHECK(shared_blocks() == 0);
    CHECK(tc_test_bytes(tc_memory_allocated, 0) + (size_t)N * 4 <= before);
    pid = start("stale", &h, &to_child, &from_child);
    CHECK(finish(pid, to_child, from_child) == 0);
    CHECK_STATUS(tc_tensor_from_ipc_handle(&h, &own), TC_ERROR_INVALID_HANDLE);

    /* 3. a consumer that dies holding the block */
    t = make_shared();
    CHECK_OK(tc_tensor_ipc_handle(t, &h));
    pid = start("crash", &h, &to_child, &from_child);
    CHECK(read(from_child, &c, 1) == 1);
    tc_tensor_release(t);
    c = 'g';
    CHECK(write(to_child, &c, 1) == 1);
    CHECK(finish(pid, to_child, from_child) == 0);
    CHECK(shared_blocks() == 1);
    CHECK_OK(tc_ipc_collect());
    CHECK(shared_blocks() == 0);

    /* 4. a handle that was never opened stays held: the consumer may come later */
    t = make_shared();
    CHECK_OK(tc_tensor_ipc_handle(t, &h));
    tc_tensor_release(t);
    CHECK_OK(tc_ipc_collect());
    CHECK(shared_blocks() == 1);

    /* 5. the consumer's side stream, recorded on its tensor, is waited for */
    tc_tensor_release(other);
    t = make_shared();
    CHECK_OK(tc_tensor_ipc_handle(t, &h));
    void *shared_ptr = tc_tensor_data_ptr(t);
    tc_tensor_release(t);
    pid = start("stream", &h, &to_child, &from_child);
    CHECK(read(from_child, &c, 1) == 1 && c == 'r'); /* released */
    CHECK_OK(tc_ipc_collect());
    CHECK(shared_blocks() == 1); /* 4.'s handle, never opened; 5.'s came back */
    tc_tensor *over[4] = {0};    /* likely to take the freed block: overwrite it */
    bool reused = false;
    for (int i = 0; i < 4; i++) {
        CHECK_OK(tc_tensor_full(1, (const int64_t[]){N}, -9.0, TC_FLOAT32, (tc_device){TC_CUDA, 0},
                                &over[i]));
        reused = reused || tc_tensor_data_ptr(over[i]) == shared_ptr;
    }
    CHECK_OK(tc_synchronize(0));
    printf("test_ipc_cuda: the freed shared block %s reused before the consumer checked\n",
           reused ? "was" : "was not");
    c = 'g';
    CHECK(write(to_child, &c, 1) == 1);
    rc = finish(pid, to_child, from_child);
    CHECK(rc == 0);
    if (rc)
        printf("stream consumer exited with %d\n", rc);
    for (int i = 0; i < 4; i++)
        tc_tensor_release(over[i]);

    CHECK_STATUS(tc_tensor_ipc_handle(NULL, &h), TC_ERROR_INVALID_ARGUMENT);
    rmdir(dir); /* fails while the last count file is there; removed at exit */
    return TC_TEST_DONE();
}
