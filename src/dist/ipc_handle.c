/* Memory IPC handles and their count files (no CUDA here).
 *
 * A handle is a fixed layout: magic "TCUDAIPC", version, the fields of
 * tc__ipc_info, then a 64-bit check value over everything before it; the
 * rest of the bytes are zero. Decoding refuses any difference, so a forged,
 * corrupted or truncated handle never reaches cudaIpcOpenMemHandle.
 *
 * The count file (one per handle, /dev/shm/tcuda_ipc_<pid>_<seq>) holds the
 * handle's check value as its key (the check covers a random nonce, so only
 * the handle as made matches it, not one whose fields were changed and its
 * check recomputed), a "pending" flag (set by the producer: one consumer is
 * expected, as each pickled tensor is in PyTorch) and slots {pid, count} of
 * consumer processes. Every access holds flock(LOCK_EX) on it, and checks
 * under the lock that the open file is still the one of that name (not
 * unlinked by a collection that held the lock first, nor replaced): a
 * count is only ever taken on the live file. That check holds only because
 * every unlink is made under the lock too (a collection, the removal at the
 * producer's exit, a create that failed): an unlink between a consumer's
 * check and its write would leave its count in an orphan. The block is
 * done when nothing is pending and no live process holds a count: a slot
 * whose pid no longer exists (kill(pid, 0) == ESRCH) is cleared, so a
 * crashed consumer does not pin the memory forever. */
#include "ipc_handle.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/hash.h"
#include "base/internal.h"
#include "tcuda/dtype.h"

static const char magic[8] = {'T', 'C', 'U', 'D', 'A', 'I', 'P', 'C'};

/* The wire layout (same machine on both ends: native byte order). */
typedef struct wire {
    char magic[8];
    uint32_t version;
    uint32_t pad;
    tc__ipc_info info;
    uint64_t check;
} wire;
_Static_assert(sizeof(wire) <= TC_IPC_MEM_HANDLE_SIZE, "tc_ipc_mem_handle is too small");

uint64_t tc__ipc_encode(const tc__ipc_info *info, tc_ipc_mem_handle *out)
{
    wire w;
    memset(&w, 0, sizeof w);
    memcpy(w.magic, magic, sizeof magic);
    w.version = TC__IPC_VERSION;
    w.info = *info;
    w.check = tc__hash64(&w, offsetof(wire, check), 0);
    memset(out, 0, sizeof *out);
    memcpy(out->bytes, &w, sizeof w);
    return w.check;
}

static tc_status bad(const char *why)
{
    return tc__fail(TC_ERROR_INVALID_HANDLE, "not a valid tcuda IPC memory handle: %s", why);
}

tc_status tc__ipc_decode(const tc_ipc_mem_handle *h, tc__ipc_info *out, uint64_t *check)
{
    wire w;
    memcpy(&w, h->bytes, sizeof w);
    if (memcmp(w.magic, magic, sizeof magic) != 0)
        return bad("its magic word is wrong");
    if (w.version != TC__IPC_VERSION)
        return bad("it is of another version");
    for (size_t i = sizeof w; i < TC_IPC_MEM_HANDLE_SIZE; i++)
        if (h->bytes[i])
            return bad("its padding is not zero");
    if (w.check != tc__hash64(&w, offsetof(wire, check), 0))
        return bad("its check value does not match (corrupted or forged)");
    const tc__ipc_info *in = &w.info;
    if (in->ndim > TC_MAX_DIMS || tc_dtype_size((tc_dtype)in->dtype) == 0 ||
        in->device >= TC_MAX_DEVICES || in->offset < 0 || in->producer_pid == 0)
        return bad("a field is out of range");
    for (uint32_t i = 0; i < in->ndim; i++)
        if (in->sizes[i] < 0 || in->strides[i] < 0)
            return bad("a size or stride is negative");
    *out = *in;
    if (check)
        *check = w.check;
    return TC_OK;
}

tc_status tc_ipc_mem_handle_parse(const void *bytes, size_t n, tc_ipc_mem_handle *out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(bytes && out, "bytes or out is NULL");
    if (n != TC_IPC_MEM_HANDLE_SIZE)
        return tc__fail(TC_ERROR_INVALID_HANDLE,
                        "an IPC memory handle has %d bytes, not %zu (truncated?)",
                        TC_IPC_MEM_HANDLE_SIZE, n);
    tc_ipc_mem_handle h;
    memcpy(h.bytes, bytes, n);
    tc__ipc_info info;
    TC_TRY(tc__ipc_decode(&h, &info, NULL));
    *out = h;
    return TC_OK;
}

/* ---- count files ------------------------------------------------------------------- */

#define REF_MAGIC 0x7c1bcf11u
#define REF_SLOTS 32

typedef struct ref_file {
    uint64_t key; /* the handle's check value */
    uint32_t magic;
    uint32_t pending;
    struct {
        int32_t pid;
        int32_t count;
    } slot[REF_SLOTS];
} ref_file;

void tc__ipc_ref_path(uint32_t pid, uint64_t seq, char *buf, size_t n)
{
    const char *dir = getenv("TCUDA_IPC_DIR");
    snprintf(buf, n, "%s/tcuda_ipc_%u_%llu", dir && *dir ? dir : "/dev/shm", pid,
             (unsigned long long)seq);
}

/* Opens and locks the file: the descriptor, or -1 when it does not exist
 * or is no longer the file of that name. The check is made under the lock:
 * a consumer that opened the file just before its producer collected it
 * (which unlinks it under the lock) gets the lock after the unlink, and
 * must not count on the orphan nor on a new file made under the same name. */
static int ref_open(uint32_t pid, uint64_t seq, int flags)
{
    char path[256];
    tc__ipc_ref_path(pid, seq, path, sizeof path);
    int fd = open(path, flags | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    struct stat mine, named;
    if (flock(fd, LOCK_EX) != 0 || fstat(fd, &mine) != 0 || mine.st_nlink == 0 ||
        stat(path, &named) != 0 || named.st_dev != mine.st_dev || named.st_ino != mine.st_ino) {
        close(fd); /* closing drops the lock */
        errno = ENOENT;
        return -1;
    }
    return fd;
}

static bool ref_read(int fd, ref_file *r)
{
    return pread(fd, r, sizeof *r, 0) == (ssize_t)sizeof *r && r->magic == REF_MAGIC;
}

static bool ref_write(int fd, const ref_file *r)
{
    return pwrite(fd, r, sizeof *r, 0) == (ssize_t)sizeof *r;
}

static void ref_close(int fd)
{
    (void)flock(fd, LOCK_UN);
    close(fd);
}

tc_status tc__ipc_ref_create(uint32_t pid, uint64_t seq, uint64_t key)
{
    char path[256];
    tc__ipc_ref_path(pid, seq, path, sizeof path);
    int fd = ref_open(pid, seq, O_RDWR | O_CREAT | O_EXCL);
    if (fd < 0)
        return tc__fail(TC_ERROR_IO, "could not create the IPC count file %s: %s", path,
                        strerror(errno));
    ref_file r;
    memset(&r, 0, sizeof r);
    r.key = key;
    r.magic = REF_MAGIC;
    r.pending = 1;
    bool ok = ref_write(fd, &r);
    if (!ok)
        unlink(path); /* under the lock, as every unlink */
    ref_close(fd);
    if (!ok)
        return tc__fail(TC_ERROR_IO, "could not write the IPC count file %s", path);
    return TC_OK;
}

static bool alive(int32_t pid) { return pid > 0 && (kill(pid, 0) == 0 || errno != ESRCH); }

tc_status tc__ipc_ref_acquire(uint32_t pid, uint64_t seq, uint64_t key)
{
    int fd = ref_open(pid, seq, O_RDWR);
    if (fd < 0) {
        char path[256];
        tc__ipc_ref_path(pid, seq, path, sizeof path);
        return tc__fail(TC_ERROR_INVALID_HANDLE,
                        "stale IPC memory handle: its count file %s is gone (removed or replaced): "
                        "its producer (pid %u) has collected the block or exited",
                        path, pid);
    }
    ref_file r;
    tc_status st = TC_OK;
    if (!ref_read(fd, &r) || r.key != key) {
        st = tc__fail(TC_ERROR_INVALID_HANDLE,
                      "IPC memory handle refused: it does not match its producer's record");
    } else {
        int32_t me = (int32_t)getpid();
        int free_slot = -1, mine = -1;
        for (int i = 0; i < REF_SLOTS; i++) {
            if (r.slot[i].pid == me)
                mine = i;
            else if (free_slot < 0 && (r.slot[i].count == 0 || !alive(r.slot[i].pid)))
                free_slot = i;
        }
        if (mine < 0 && free_slot >= 0) {
            mine = free_slot;
            r.slot[mine].pid = me;
            r.slot[mine].count = 0;
        }
        if (mine < 0) {
            st = tc__fail(TC_ERROR_INVALID_STATE, "too many processes (%d) opened one IPC handle",
                          REF_SLOTS);
        } else {
            r.slot[mine].count++;
            r.pending = 0;
            if (!ref_write(fd, &r))
                st = tc__fail(TC_ERROR_IO, "could not update an IPC count file");
        }
    }
    ref_close(fd);
    return st;
}

void tc__ipc_ref_release(uint32_t pid, uint64_t seq)
{
    int fd = ref_open(pid, seq, O_RDWR);
    if (fd < 0)
        return;
    ref_file r;
    if (ref_read(fd, &r)) {
        int32_t me = (int32_t)getpid();
        for (int i = 0; i < REF_SLOTS; i++)
            if (r.slot[i].pid == me && r.slot[i].count > 0) {
                if (--r.slot[i].count == 0)
                    r.slot[i].pid = 0;
                (void)ref_write(fd, &r);
                break;
            }
    }
    ref_close(fd);
}

bool tc__ipc_ref_done(uint32_t pid, uint64_t seq)
{
    int fd = ref_open(pid, seq, O_RDWR);
    if (fd < 0)
        return true;
    ref_file r;
    bool done = true;
    if (ref_read(fd, &r)) {
        done = !r.pending;
        for (int i = 0; i < REF_SLOTS; i++) {
            if (r.slot[i].count > 0 && !alive(r.slot[i].pid))
                r.slot[i].pid = 0, r.slot[i].count = 0; /* a consumer that died */
            if (r.slot[i].count > 0)
                done = false;
        }
        if (!done)
            (void)ref_write(fd, &r);
    }
    if (done) {
        char path[256];
        tc__ipc_ref_path(pid, seq, path, sizeof path);
        unlink(path);
    }
    ref_close(fd);
    return done;
}

void tc__ipc_ref_remove(uint32_t pid, uint64_t seq)
{
    int fd = ref_open(pid, seq, O_RDWR);
    if (fd < 0)
        return; /* gone already, or the name is another file's now */
    char path[256];
    tc__ipc_ref_path(pid, seq, path, sizeof path);
    unlink(path);
    ref_close(fd);
}
