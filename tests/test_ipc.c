/* Memory IPC without a GPU: the handle's encoding and check value (every
 * flipped byte, a truncated handle, garbage are refused), and the count
 * files: a consumer process's references, a wrong key refused, a stale
 * handle refused once collected, and a consumer that dies without releasing
 * (fork + _exit) counted as released. */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/ipc_handle.h"
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

int main(void)
{
    tc_test_init();
    char dir[] = "/tmp/tcuda_ipc_test_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    setenv("TCUDA_IPC_DIR", dir, 1);
    test_encoding();
    test_count_files();
    rmdir(dir);
    return TC_TEST_DONE();
}
