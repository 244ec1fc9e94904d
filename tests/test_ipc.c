/* Memory IPC without a GPU: the handle's encoding and check value (every
 * flipped byte, a truncated handle, garbage are refused), and the count
 * files: a consumer process's references, a wrong key refused, a stale
 * handle refused once collected, and a consumer that dies without releasing
 * (fork + _exit) counted as released; a consumer that opened the count file
 * just before the producer unlinked it (and a new file took the name) is
 * refused, never counting on the orphan or the newcomer; and the removal at
 * the producer's exit waits for a consumer that holds the lock. */
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dist/ipc_handle.h"
#include "tc_test.h"

static tc__ipc_info sample(void)
{
    tc__ipc_info in;
    memset(&in, 0, sizeof in);
    in.producer_pid = (uint32_t)getpid();
    in.device = 0;
    in.dtype = TC_FLOAT32;
    in.ndim = 2;
    in.seq = 7;
    in.nonce = 0x1234567890abcdefull;
    in.segment_offset = 512;
    in.storage_bytes = 4096;
    in.offset = 3;
    in.sizes[0] = 10, in.sizes[1] = 20;
    in.strides[0] = 20, in.strides[1] = 1;
    for (int i = 0; i < TC__IPC_CUDA_HANDLE_BYTES; i++)
        in.cuda_handle[i] = (unsigned char)(i * 7 + 1);
    return in;
}

static void test_encoding(void)
{
    tc__ipc_info in = sample(), back;
    tc_ipc_mem_handle h, parsed;
    uint64_t made = tc__ipc_encode(&in, &h), check = 0;
    CHECK_OK(tc__ipc_decode(&h, &back, &check));
    CHECK(check == made);
    CHECK(memcmp(&in, &back, sizeof in) == 0);
    CHECK_OK(tc_ipc_mem_handle_parse(h.bytes, sizeof h.bytes, &parsed));
    CHECK(memcmp(&parsed, &h, sizeof h) == 0);

    /* every single flipped bit of the handle is refused */
    int refused = 0;
    for (size_t i = 0; i < sizeof h.bytes; i++) {
        tc_ipc_mem_handle bad = h;
        bad.bytes[i] ^= (unsigned char)(1u << (i % 8));
        refused += tc__ipc_decode(&bad, &back, NULL) == TC_ERROR_INVALID_HANDLE;
    }
    CHECK(refused == (int)sizeof h.bytes);

    /* truncated: too few bytes, or the tail zeroed */
    CHECK_STATUS(tc_ipc_mem_handle_parse(h.bytes, sizeof h.bytes - 1, &parsed),
                 TC_ERROR_INVALID_HANDLE);
    CHECK(strstr(tc_last_error(), "truncated") != NULL);
    tc_ipc_mem_handle cut = h;
    memset(cut.bytes + 200, 0, sizeof cut.bytes - 200);
    CHECK_STATUS(tc_ipc_mem_handle_parse(cut.bytes, sizeof cut.bytes, &parsed),
                 TC_ERROR_INVALID_HANDLE);

    /* garbage, and a consistent handle with out-of-range fields */
    tc_ipc_mem_handle junk;
    for (size_t i = 0; i < sizeof junk.bytes; i++)
        junk.bytes[i] = (unsigned char)tc_test_rand();
    CHECK_STATUS(tc__ipc_decode(&junk, &back, NULL), TC_ERROR_INVALID_HANDLE);
    tc__ipc_info odd = sample();
    odd.ndim = 9;
    tc__ipc_encode(&odd, &h);
    CHECK_STATUS(tc__ipc_decode(&h, &back, NULL), TC_ERROR_INVALID_HANDLE);
    odd = sample();
    odd.dtype = 99;
    tc__ipc_encode(&odd, &h);
    CHECK_STATUS(tc__ipc_decode(&h, &back, NULL), TC_ERROR_INVALID_HANDLE);

    /* the public entry refuses before touching a GPU */
    tc_tensor *t = (tc_tensor *)0x1;
    CHECK_STATUS(tc_tensor_from_ipc_handle(&junk, &t), TC_ERROR_INVALID_HANDLE);
    CHECK(t == (tc_tensor *)0x1);
    CHECK_STATUS(tc_tensor_from_ipc_handle(NULL, &t), TC_ERROR_INVALID_ARGUMENT);
    tc_tensor *cpu;
    int64_t n = 4;
    CHECK_OK(tc_tensor_zeros(1, &n, TC_FLOAT32, (tc_device){TC_CPU, -1}, &cpu));
    CHECK_STATUS(tc_tensor_ipc_handle(cpu, &h), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_tensor_ipc_handle(cpu, NULL), TC_ERROR_INVALID_ARGUMENT);
    tc_tensor_release(cpu);
}

/* A child that takes one reference and exits: released (1) or crashed (0). */
static void child_acquires(uint32_t pid, uint64_t seq, uint64_t key, int release)
{
    pid_t c = fork();
    if (c == 0) {
        int ok = tc__ipc_ref_acquire(pid, seq, key) == TC_OK;
        if (ok && release)
            tc__ipc_ref_release(pid, seq);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    waitpid(c, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void test_count_files(void)
{
    uint32_t me = (uint32_t)getpid();
    uint64_t key = 0xfeedull;
    CHECK_OK(tc__ipc_ref_create(me, 1, key));
    CHECK_STATUS(tc__ipc_ref_create(me, 1, key), TC_ERROR_IO); /* exists already */
    CHECK(!tc__ipc_ref_done(me, 1)); /* pending: nobody has opened it yet */
    CHECK_STATUS(tc__ipc_ref_acquire(me, 1, key + 1), TC_ERROR_INVALID_HANDLE);
    CHECK(!tc__ipc_ref_done(me, 1));

    /* this process as consumer: two references, done after both go */
    CHECK_OK(tc__ipc_ref_acquire(me, 1, key));
    CHECK_OK(tc__ipc_ref_acquire(me, 1, key));
    CHECK(!tc__ipc_ref_done(me, 1));
    tc__ipc_ref_release(me, 1);
    CHECK(!tc__ipc_ref_done(me, 1));
    tc__ipc_ref_release(me, 1);
    CHECK(tc__ipc_ref_done(me, 1));
    /* collected: the handle is stale now */
    CHECK_STATUS(tc__ipc_ref_acquire(me, 1, key), TC_ERROR_INVALID_HANDLE);
    CHECK(strstr(tc_last_error(), "stale") != NULL);

    /* a handle re-encoded with other fields has a valid check value of its
     * own, but not the key of the count file: refused */
    tc__ipc_info real = sample(), forged = sample();
    tc_ipc_mem_handle hr, hf;
    real.seq = forged.seq = 4;
    uint64_t real_key = tc__ipc_encode(&real, &hr);
    forged.storage_bytes = 1u << 30; /* a bigger window into the producer's memory */
    uint64_t forged_key = tc__ipc_encode(&forged, &hf);
    tc__ipc_info back;
    CHECK_OK(tc__ipc_decode(&hf, &back, NULL)); /* well-formed */
    CHECK_OK(tc__ipc_ref_create(me, 4, real_key));
    CHECK_STATUS(tc__ipc_ref_acquire(me, 4, forged_key), TC_ERROR_INVALID_HANDLE);
    CHECK_OK(tc__ipc_ref_acquire(me, 4, real_key));
    tc__ipc_ref_release(me, 4);
    CHECK(tc__ipc_ref_done(me, 4));

    /* a consumer process that releases, and one that dies holding it */
    CHECK_OK(tc__ipc_ref_create(me, 2, key));
    child_acquires(me, 2, key, 1);
    CHECK(tc__ipc_ref_done(me, 2));
    CHECK_OK(tc__ipc_ref_create(me, 3, key));
    child_acquires(me, 3, key, 0); /* reaped: its pid no longer exists */
    CHECK(tc__ipc_ref_done(me, 3));
    char path[256];
    tc__ipc_ref_path(me, 3, path, sizeof path);
    CHECK(access(path, F_OK) != 0);
}

typedef struct acquirer {
    uint32_t pid;
    uint64_t seq, key;
    tc_status st;
    char msg[512];
} acquirer;

static void *acquire_main(void *p)
{
    acquirer *a = p;
    a->st = tc__ipc_ref_acquire(a->pid, a->seq, a->key);
    snprintf(a->msg, sizeof a->msg, "%s", tc_last_error()); /* thread-local */
    return NULL;
}

/* Waits (at most 2 s) until /proc/locks shows a process blocked on the
 * flock of inode `ino`; false when it cannot tell. */
static bool lock_waiter_seen(ino_t ino)
{
    char want[64];
    snprintf(want, sizeof want, ":%llu ", (unsigned long long)ino);
    for (int i = 0; i < 200; i++) {
        FILE *f = fopen("/proc/locks", "r"); /* its size reads as 0: read lines */
        if (!f)
            return false;
        char line[256];
        bool seen = false;
        while (!seen && fgets(line, sizeof line, f))
            seen = strstr(line, "->") && strstr(line, want);
        fclose(f);
        if (seen)
            return true;
        usleep(10000);
    }
    return false;
}

/* The race a collection can lose against a consumer: the consumer opened
 * the count file, the producer (holding the lock) found it done and
 * unlinked it, and a new file was made under the same name (pid reuse; here
 * with the same key, the worst case). The consumer that gets the lock then
 * must refuse: the producer has already let the block go. */
static void test_unlinked_under_the_consumer(void)
{
    uint32_t me = (uint32_t)getpid();
    uint64_t key = 0xabcdefull;
    char path[256];
    tc__ipc_ref_path(me, 5, path, sizeof path);
    CHECK_OK(tc__ipc_ref_create(me, 5, key));
    int held = open(path, O_RDWR);
    struct stat st;
    CHECK(held >= 0 && flock(held, LOCK_EX) == 0 && fstat(held, &st) == 0);
    acquirer a = {.pid = me, .seq = 5, .key = key};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, acquire_main, &a) == 0);
    if (!lock_waiter_seen(st.st_ino)) /* then only the plain stale case is tested */
        printf("test_ipc: could not see the consumer wait for the lock\n");
    CHECK(unlink(path) == 0);                 /* the producer collects ... */
    CHECK_OK(tc__ipc_ref_create(me, 5, key)); /* ... and the name is taken again */
    CHECK(flock(held, LOCK_UN) == 0);
    close(held);
    CHECK(pthread_join(th, NULL) == 0);
    CHECK(a.st == TC_ERROR_INVALID_HANDLE);
    CHECK(strstr(a.msg, "stale") != NULL && strstr(a.msg, "gone") != NULL);
    /* nobody counted on the new file: it is still pending, with no holder */
    CHECK(!tc__ipc_ref_done(me, 5));
    CHECK_OK(tc__ipc_ref_acquire(me, 5, key));
    tc__ipc_ref_release(me, 5);
    CHECK(tc__ipc_ref_done(me, 5));

    /* a file replaced by another (rename over the name) is refused too */
    CHECK_OK(tc__ipc_ref_create(me, 6, key));
    char path6[256], tmp[300];
    tc__ipc_ref_path(me, 6, path6, sizeof path6);
    snprintf(tmp, sizeof tmp, "%s.new", path6);
    int fd = open(tmp, O_RDWR | O_CREAT, 0600);
    CHECK(fd >= 0);
    close(fd);
    held = open(path6, O_RDWR);
    CHECK(held >= 0 && flock(held, LOCK_EX) == 0 && fstat(held, &st) == 0);
    a = (acquirer){.pid = me, .seq = 6, .key = key};
    CHECK(pthread_create(&th, NULL, acquire_main, &a) == 0);
    (void)lock_waiter_seen(st.st_ino);
    CHECK(rename(tmp, path6) == 0);
    CHECK(flock(held, LOCK_UN) == 0);
    close(held);
    CHECK(pthread_join(th, NULL) == 0);
    CHECK(a.st == TC_ERROR_INVALID_HANDLE); /* the new file is empty: no record, or gone */
    tc__ipc_ref_remove(me, 6);
}

static void *remove_main(void *p)
{
    acquirer *a = p;
    tc__ipc_ref_remove(a->pid, a->seq);
    return NULL;
}

/* The producer's removal at exit unlinks under the lock, as a collection
 * does: a consumer that holds the lock (it checked that the file is live
 * and is about to count) keeps the file until it is done, and is never left
 * counting on an orphan. Then the file goes, and the handle is stale. */
static void test_remove_waits_for_the_lock(void)
{
    uint32_t me = (uint32_t)getpid();
    uint64_t key = 0x5eedull;
    char path[256];
    tc__ipc_ref_path(me, 8, path, sizeof path);
    CHECK_OK(tc__ipc_ref_create(me, 8, key));
    int held = open(path, O_RDWR); /* the consumer, inside tc__ipc_ref_acquire */
    struct stat st;
    CHECK(held >= 0 && flock(held, LOCK_EX) == 0 && fstat(held, &st) == 0);
    acquirer a = {.pid = me, .seq = 8, .key = key};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, remove_main, &a) == 0);
    if (!lock_waiter_seen(st.st_ino)) /* an unlink without the lock is done by now */
        printf("test_ipc: could not see the removal wait for the lock\n");
    struct stat now;
    CHECK(fstat(held, &now) == 0 && now.st_nlink == 1); /* still the live file */
    CHECK(access(path, F_OK) == 0);
    CHECK(flock(held, LOCK_UN) == 0);
    close(held);
    CHECK(pthread_join(th, NULL) == 0);
    CHECK(access(path, F_OK) != 0);
    CHECK_STATUS(tc__ipc_ref_acquire(me, 8, key), TC_ERROR_INVALID_HANDLE);
    CHECK(strstr(tc_last_error(), "stale") != NULL);
    tc__ipc_ref_remove(me, 8); /* gone already: nothing to do */
}

int main(void)
{
    tc_test_init();
    char dir[] = "/tmp/tcuda_ipc_test_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    setenv("TCUDA_IPC_DIR", dir, 1);
    test_encoding();
    test_count_files();
    test_unlinked_under_the_consumer();
    test_remove_waits_for_the_lock();
    rmdir(dir);
    return TC_TEST_DONE();
}
