/* tcuda: the stream sanitizer (torch.cuda._sanitizer, "CUDA Sanitizer").
 *
 * Finds unsynchronized accesses to the same memory from different streams
 * (and from the host), the bugs compute-sanitizer's racecheck cannot see
 * because they lie between kernels, not inside one. Every tcuda operation
 * that touches device memory declares what it reads and writes (element-wise
 * ops, reductions, matmul, copies, fills, random draws), the allocator's
 * alloc and free are watched, and so are host reads of pinned memory (item,
 * copies to the CPU). Happens-before comes from stream order, event record
 * and wait, wait_stream, stream/event/device synchronize (and a query that
 * answers TC_OK) and blocking copies, through one vector clock per stream
 * and one for the host, as in PyTorch's sanitizer. User kernels join in
 * through tc_sanitizer_access. The state is per live allocation: its last
 * write and every read since (as PyTorch keeps them), none dropped, so no
 * race is missed; its memory follows the reads made since the last write and
 * is freed by the next write over them, or the release. It is
 * thread-safe.
 *
 * Every race of an operation is reported (one launch writing 7 tensors that
 * another stream wrote unsynchronized gives 7 reports): a read is reported
 * with the write it races with, a write with each read it races with (or,
 * with none, the write). An operand that an operation both reads and writes
 * (an in-place op), or names twice, is one access, so one report at most, as
 * PyTorch merges an operation's operands by data pointer.
 *
 * Turn it on with TCUDA_SANITIZER=1 (or report, error, abort; 0 or off; any
 * letter case; any other value fails initialization like every TCUDA_
 * variable), read at CUDA initialization, or call tc_sanitizer_enable before
 * the first CUDA work: memory allocated before it was on is not watched.
 * When off, tensor operations pay nothing (the hooks are not installed) and
 * stream and event calls one predictable branch. CPU tensors have one
 * "stream", so a program on the CPU reports nothing and runs unchanged.
 *
 * ---- The classic bug, its report, and its fix -----------------------------
 *
 *     tc_stream *side;  tc_stream_create(-1, 0, &side);
 *     tc_tensor *x;     tc_tensor_empty(1, n, TC_FLOAT32, cuda, &x);
 *     tc_stream_guard g = tc_stream_guard_enter(side);
 *     tc_tensor_uniform_(x, 0, 1, NULL);          // writes x on `side`
 *     tc_stream_guard_exit(&g);
 *     tc_tensor_sum(x, TC_ALL_DIMS, false, &s);   // reads x on the default stream
 *
 * The sum may run before the fill finished. With TCUDA_SANITIZER=1 this
 * prints (addresses and frames shortened):
 *
 *     tcuda sanitizer: read-after-write race on memory of cuda:0
 *       memory: float32 [1024] at 0x7f3c5a000000, bytes 0..4096 of a 4096-byte
 *       allocation at 0x7f3c5a000000 made on the default stream of cuda:0 by
 *       tc_tensor_empty (allocation), at
 *             #0 libtcuda.so.0(tc_tensor_empty+0x4d) [0x7f3c...]
 *             #1 ./prog(main+0x8e) [0x55d0...]
 *       current access: read by tc_tensor_sum (reduce kernel) on the default
 *       stream of cuda:0, at
 *             #0 libtcuda.so.0(tc_tensor_sum+0x96) [0x7f3c...]
 *             #1 ./prog(main+0x131) [0x55d0...]
 *       earlier access: write by tc_tensor_uniform_ (random fill) on stream
 *       0x55d0c4a0 of cuda:0 (bytes 0..4096), at
 *             #0 libtcuda.so.0(tc_tensor_uniform_+0x5c) [0x7f3c...]
 *             #1 ./prog(main+0xe9) [0x55d0...]
 *       nothing orders the earlier access before the current one: make the
 *       current stream wait for the other (tc_stream_wait_stream, or
 *       tc_event_record + tc_stream_wait_event), or synchronize, in between.
 *
 * Each stack starts at the tcuda call and goes out to main. Stacks are kept
 * once per call site (the tcuda function and the line that called it): the
 * frames beyond that line are those of its first run.
 *
 * The fix: `tc_stream_wait_stream(NULL, side)` (the current stream waits for
 * the side stream) before the sum; and, if x is released while `side` may
 * still use it, `tc_tensor_record_stream(x, side)` before the release (else a
 * reuse-after-free report: the allocator may give the memory to new work on
 * x's own stream while `side` still uses it).
 *
 * Frames are named from the dynamic symbol table (backtrace_symbols): link
 * programs with -rdynamic to see their own function names. A kernel's
 * operands are shown with the shape the kernel walks (dimensions it can merge
 * are merged: a dense [4, 256] reads as [1024]); copies show the tensors'.
 *
 * What it does not see: memory touched through raw pointers
 * (tc_tensor_data_ptr, your own kernels) unless declared with
 * tc_sanitizer_access; CPU-generator draws into pinned memory; the implicit
 * ordering between the legacy default stream and blocking streams made
 * outside tcuda (tcuda's own streams are non-blocking); events recorded by
 * another process. Granularity is the byte range each operation touches, so
 * disjoint halves of one tensor used on two streams are not a race.
 *
 * CUDA graphs: work captured into a graph runs at each replay, not when it
 * is queued, so its accesses are checked at every tc_graph_replay as
 * accesses of the stream the graph is launched on (named "tc_graph_replay"
 * in reports, with the captured operation's kind). Only the capture stream
 * is followed: work forked to other streams inside a capture is checked when
 * queued. */
#ifndef TCUDA_SANITIZER_H
#define TCUDA_SANITIZER_H

#include <stddef.h>
#include <stdint.h>

#include "stream.h"

TCUDA_EXTERN_C_BEGIN

/* ---- modes and reports ----------------------------------------------------- */

/* What the sanitizer does (TCUDA_SANITIZER's 0, report, error, abort). */
typedef enum tc_sanitizer_mode {
    /* nothing is watched */
    TC_SANITIZER_MODE_OFF = 0,
    /* a race is reported (stderr or the report fn); the call goes on */
    TC_SANITIZER_MODE_REPORT,
    /* the offending call does nothing and returns TC_ERROR_RACE, with the
     * report as tc_last_error(); a release cannot fail, so a reuse-after-free
     * is reported as in REPORT mode and the memory is kept from reuse until
     * the other streams' work queued so far is done (as record_stream would) */
    TC_SANITIZER_MODE_ERROR,
    /* the report is printed to stderr, then abort() */
    TC_SANITIZER_MODE_ABORT
} tc_sanitizer_mode;

/* The kind of a race. */
typedef enum tc_sanitizer_race {
    TC_SANITIZER_RACE_WRITE_AFTER_READ,  /* a write not ordered after an earlier read */
    TC_SANITIZER_RACE_READ_AFTER_WRITE,  /* a read not ordered after an earlier write */
    TC_SANITIZER_RACE_WRITE_AFTER_WRITE, /* a write not ordered after an earlier write */
    /* memory freed while another stream may still use it (no record_stream):
     * the allocator may hand it out again */
    TC_SANITIZER_RACE_REUSE_AFTER_FREE
} tc_sanitizer_race;

/* "write-after-read", "read-after-write", "write-after-write",
 * "reuse-after-free"; "unknown" otherwise. Never NULL. */
TCUDA_API const char *tc_sanitizer_race_string(tc_sanitizer_race kind);

/* One race, as a report fn sees it. Strings belong to tcuda and live until
 * the fn returns. */
typedef struct tc_sanitizer_report {
    tc_sanitizer_race kind;
    const void *address;    /* start of the bytes both accesses touch */
    const void *allocation; /* the allocation they lie in */
    size_t allocation_bytes;
    const char *current_op; /* e.g. "tc_tensor_sum", or a user label */
    const char *earlier_op; /* "tc_tensor_release" for a reuse-after-free */
    const char *text;       /* the whole report, as printed */
} tc_sanitizer_report;

/* Receives each report in place of stderr (tc_sanitizer_set_report_fn). */
typedef void (*tc_sanitizer_report_fn)(const tc_sanitizer_report *report, void *ctx);

/* Sets the mode. Turning it on installs the hooks (once per process; they
 * stay, and cost nothing but a branch while the mode is OFF); memory
 * allocated while it was off is not watched. Turning it off forgets all
 * state. TC_ERROR_INVALID_ARGUMENT for a value that is not a mode. */
TCUDA_API tc_status tc_sanitizer_enable(tc_sanitizer_mode mode);

/* The mode in use (TC_SANITIZER_MODE_OFF until enabled or read from
 * TCUDA_SANITIZER at CUDA initialization). Cannot fail. */
TCUDA_API tc_sanitizer_mode tc_sanitizer_get_mode(void);

/* Races found since the process started, every one of them (every mode
 * counts them; error mode stops at an operation's first). Cannot fail. */
TCUDA_API uint64_t tc_sanitizer_report_count(void);

/* Sends each report to fn(report, ctx) (called on the thread that made the
 * racing call, outside tcuda's locks; it may call tcuda) instead of stderr.
 * NULL restores stderr. In abort mode the report also goes to stderr before
 * abort(). */
TCUDA_API tc_status tc_sanitizer_set_report_fn(tc_sanitizer_report_fn fn, void *ctx);

/* ---- user kernels ------------------------------------------------------------ */

/* What a user kernel does to the memory it names in tc_sanitizer_access.
 * TC_SANITIZER_ACCESS_BY_HOST may be or'ed in: the host itself touches the
 * memory (e.g. pinned memory read through tc_tensor_data_ptr), not a
 * stream. */
typedef enum tc_sanitizer_access_kind {
    TC_SANITIZER_ACCESS_READ = 1,
    TC_SANITIZER_ACCESS_WRITE = 2,
    TC_SANITIZER_ACCESS_READ_WRITE = 3,
    TC_SANITIZER_ACCESS_BY_HOST = 4
} tc_sanitizer_access_kind;

/* Declares that a user kernel queued (or about to be queued) on `stream`
 * (NULL: the current stream of the current device) reads and/or writes the
 * `bytes` at ptr, device memory from tcuda's allocator (tensor data or
 * tc_caching_allocator_alloc) or pinned host memory; other memory is watched
 * from its first declared access on. With TC_SANITIZER_ACCESS_BY_HOST in
 * `kind` the host does it now, and `stream` is ignored. `label` names the
 * kernel in reports (copied; NULL allowed). Call it before the launch: in
 * error mode a race gives TC_ERROR_RACE and the access is not recorded.
 * TC_OK without doing anything while the sanitizer is off.
 * TC_ERROR_INVALID_ARGUMENT for a NULL ptr with bytes > 0 or a kind without
 * READ or WRITE; TC_ERROR_INVALID_HANDLE for a destroyed stream. */
TCUDA_API tc_status tc_sanitizer_access(const void *ptr, size_t bytes, tc_stream *stream,
                                        tc_sanitizer_access_kind kind, const char *label);

TCUDA_EXTERN_C_END

#endif
