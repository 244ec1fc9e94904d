/* tcuda: memory management, the caching allocator (torch.cuda's memory API).
 *
 * Device memory comes from one caching allocator per device, created on first
 * use and configured by TCUDA_ALLOC_CONF. Freeing returns a block to the cache
 * without synchronizing; a block is reused on its own stream at once and, if
 * record_stream marked other streams, only after their work has completed.
 *
 * TCUDA_ALLOC_CONF takes PYTORCH_CUDA_ALLOC_CONF's keys, "key:value" joined
 * by commas: backend (native | cudaMallocAsync), max_split_size_mb,
 * roundup_power2_divisions (one number, or a list like [256:1,512:2,>:8],
 * read as PyTorch reads it: sizes below 512 MiB in 1 division, from 512 MiB
 * to 1 GiB in 2, larger in 8; the same setting rounds sizes as PyTorch),
 * garbage_collection_threshold (0 to 1), expandable_segments (True | False).
 * An unknown key or bad value fails tc_init, tc_get_allocator_backend and
 * every allocation with a message naming it. When TCUDA_ALLOC_CONF is unset,
 * PyTorch's PYTORCH_ALLOC_CONF is read, else PYTORCH_CUDA_ALLOC_CONF (the
 * older name); TCUDA_NO_CACHING likewise falls back to
 * PYTORCH_NO_CUDA_MEMORY_CACHING. tcuda's name, set (even empty), wins, and
 * a variable hidden by the one read gets one notice on stderr per process;
 * messages name the variable read. In PyTorch's variables, PyTorch's keys
 * that tcuda has no setting for (release_lock_on_cudamalloc, the pinned_*
 * keys, max_non_split_rounding_mb, ...) are skipped with one notice each.
 * With expandable_segments, each
 * stream's memory is one address range backed in chunks of up to 32 MiB;
 * free chunks go back to the driver when reserved memory would otherwise
 * grow past 1/16 over the most ever in use (and on empty_cache), so
 * reserved stays close to live memory at the cost
 * of driver calls (bench/run.sh alloc: peak reserved about 1.06x peak live
 * against 1.24x, and about twice the time per allocation). */
#ifndef TCUDA_MEMORY_H
#define TCUDA_MEMORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "export.h"
#include "status.h"
#include "stream.h"

TCUDA_EXTERN_C_BEGIN

/* ---- what statistics and snapshots hold -------------------------------------- */

/* One statistic: current value, peak since reset, and the running totals. */
typedef struct tc_memory_stat {
    int64_t current, peak, allocated, freed;
} tc_memory_stat;

/* Index into each per-pool array below (PyTorch's "all", "small_pool",
 * "large_pool"); TC_STAT_POOL_COUNT is the arrays' length. */
typedef enum tc_stat_pool {
    TC_STAT_POOL_ALL = 0,
    TC_STAT_POOL_SMALL = 1,
    TC_STAT_POOL_LARGE = 2,
    TC_STAT_POOL_COUNT = 3
} tc_stat_pool;

/* torch.cuda.memory_stats as a value struct (tc_memory_stats fills it). */
typedef struct tc_memory_stats_info {
    tc_memory_stat allocation[TC_STAT_POOL_COUNT];
    tc_memory_stat segment[TC_STAT_POOL_COUNT];
    tc_memory_stat active[TC_STAT_POOL_COUNT];
    tc_memory_stat inactive_split[TC_STAT_POOL_COUNT];
    tc_memory_stat allocated_bytes[TC_STAT_POOL_COUNT];
    tc_memory_stat reserved_bytes[TC_STAT_POOL_COUNT];
    tc_memory_stat active_bytes[TC_STAT_POOL_COUNT];
    tc_memory_stat inactive_split_bytes[TC_STAT_POOL_COUNT];
    tc_memory_stat requested_bytes[TC_STAT_POOL_COUNT];
    int64_t num_alloc_retries, num_ooms, num_sync_all_streams;
    int64_t num_device_alloc, num_device_free;
    tc_memory_stat oversize_allocations, oversize_segments;
    int64_t max_split_size; /* -1: no limit */
    /* Calls that made the host wait for the GPU (a segment's cudaFree, an
     * event synchronize): only on empty_cache, an out-of-memory retry, the
     * garbage-collection threshold and a pool's destroy, never in malloc or
     * free otherwise. */
    int64_t num_device_synchronize;
} tc_memory_stats_info;

/* A block's state in a snapshot. */
typedef enum tc_memory_block_state {
    /* handed out and not freed */
    TC_MEMORY_BLOCK_STATE_ACTIVE_ALLOCATED = 0,
    /* freed, its reuse waits for other streams' work */
    TC_MEMORY_BLOCK_STATE_ACTIVE_PENDING_FREE = 1,
    /* free, in the cache */
    TC_MEMORY_BLOCK_STATE_INACTIVE = 2,
} tc_memory_block_state;

/* The pool a segment serves: small (requests up to 1 MiB) or large. */
typedef enum tc_memory_segment_type {
    TC_MEMORY_SEGMENT_TYPE_SMALL = 0,
    TC_MEMORY_SEGMENT_TYPE_LARGE = 1,
} tc_memory_segment_type;

/* PyTorch's names: "active_allocated", "active_pending_free", "inactive";
 * "small", "large". "unknown" for a value outside the enum; never NULL. */
TCUDA_API const char *tc_memory_block_state_string(tc_memory_block_state state);
TCUDA_API const char *tc_memory_segment_type_string(tc_memory_segment_type type);

/* A snapshot (tc_memory_snapshot), plain data the caller walks and gives back
 * with tc_memory_snapshot_destroy: its segments, each with its blocks. */
typedef struct tc_memory_block_info {
    uint64_t address;
    size_t size, requested_size;
    tc_memory_block_state state;
} tc_memory_block_info;

typedef struct tc_memory_segment_info {
    int device;
    uint64_t address;
    size_t total_size, allocated_size, active_size, requested_size;
    uint64_t stream; /* the cudaStream_t (or id) that owns it */
    tc_memory_segment_type segment_type;
    uint64_t segment_pool_id; /* 0: the default pool; else a private pool id */
    bool is_expandable;
    size_t num_blocks;
    tc_memory_block_info *blocks;
} tc_memory_segment_info;

typedef struct tc_memory_snapshot_info {
    size_t num_segments;
    tc_memory_segment_info *segments;
} tc_memory_snapshot_info;

/* ---- the caching allocator ---------------------------------------------------- */

/* Allocates size bytes on device (TC_CURRENT_DEVICE: current) for stream
 * (NULL: current).
 * size 0 gives NULL. TC_ERROR_OUT_OF_MEMORY with a message saying what was
 * asked, what the GPU has, what tcuda holds, and which setting may help. */
TCUDA_API tc_status tc_caching_allocator_alloc(size_t size, int device, tc_stream *stream,
                                               void **out);
/* Returns a block to the cache (NULL is a no-op). Unknown pointer: error. */
TCUDA_API tc_status tc_caching_allocator_delete(void *ptr);
/* The block's memory is in use on `stream` too: reuse waits for its work. */
TCUDA_API tc_status tc_caching_allocator_record_stream(void *ptr, tc_stream *stream);
/* Releases every unused cached segment of every device; nothing in use. */
TCUDA_API tc_status tc_empty_cache(void);

/* ---- statistics ---------------------------------------------------------------- */

/* Bytes held by live blocks / by segments, and their maxima, into *out
 * (device TC_CURRENT_DEVICE: current); 0 before the device's first
 * allocation. TC_ERROR_INVALID_ARGUMENT for a NULL out,
 * TC_ERROR_INVALID_DEVICE, TC_ERROR_NO_DEVICE. */
TCUDA_API tc_status tc_memory_allocated(int device, size_t *out);
TCUDA_API tc_status tc_max_memory_allocated(int device, size_t *out);
TCUDA_API tc_status tc_reset_max_memory_allocated(int device);
TCUDA_API tc_status tc_memory_reserved(int device, size_t *out);
TCUDA_API tc_status tc_max_memory_reserved(int device, size_t *out);
/* Deprecated names of the reserved functions (as torch.cuda keeps them). */
TCUDA_API tc_status tc_memory_cached(int device, size_t *out);
TCUDA_API tc_status tc_max_memory_cached(int device, size_t *out);
TCUDA_API tc_status tc_reset_max_memory_cached(int device);
/* Sets every statistic's peak to its current value (torch.cuda's
 * reset_peak_memory_stats); totals (allocated, freed) and event counters are
 * kept. The three reset functions above are this one, as in torch.cuda. */
TCUDA_API tc_status tc_reset_peak_memory_stats(int device);

/* Fills *out with the device's statistics (all zero before first use). */
TCUDA_API tc_status tc_memory_stats(int device, tc_memory_stats_info *out);
/* One statistic by torch's key: "NAME.POOL.METRIC" with NAME allocation (or
 * its older name "allocated"), segment, active, inactive_split,
 * allocated_bytes, reserved_bytes, active_bytes, inactive_split_bytes or
 * requested_bytes, POOL all, small_pool or large_pool, METRIC current, peak,
 * allocated or freed; "oversize_allocations.METRIC", "oversize_segments.METRIC";
 * num_alloc_retries, num_ooms, num_sync_all_streams, num_device_alloc,
 * num_device_free, max_split_size (-1 when unlimited), into *out.
 * TC_ERROR_INVALID_ARGUMENT for an unknown key or a NULL key or out; the
 * device's errors as tc_memory_stats. */
TCUDA_API tc_status tc_memory_stats_get(int device, const char *key, int64_t *out);
/* A readable table of the statistics into *out; the caller frees it with
 * tc_free. Errors: the device's, TC_ERROR_OUT_OF_MEMORY. */
TCUDA_API tc_status tc_memory_summary(int device, bool abbreviated, char **out);

/* ---- snapshots ----------------------------------------------------------------- */

/* Every segment and block of every device (torch.cuda.memory_snapshot): a
 * new snapshot in *out, which the caller destroys with
 * tc_memory_snapshot_destroy. */
TCUDA_API tc_status tc_memory_snapshot(tc_memory_snapshot_info **out);
/* Writes a snapshot as JSON to `path`. */
TCUDA_API tc_status tc_memory_snapshot_write_json(const tc_memory_snapshot_info *snap,
                                                  const char *path);
/* Gives back a snapshot and everything in it. TC_ERROR_INVALID_ARGUMENT for
 * NULL. */
TCUDA_API tc_status tc_memory_snapshot_destroy(tc_memory_snapshot_info *snap);

/* ---- settings ------------------------------------------------------------------ */

/* Caps this process's reserved memory on device at fraction * total, 0..1. */
TCUDA_API tc_status tc_set_per_process_memory_fraction(int device, double fraction);
/* "native" or "cudaMallocAsync" (from TCUDA_ALLOC_CONF) into *out; the
 * string belongs to tcuda. TC_ERROR_INVALID_ARGUMENT with the parser's
 * message when TCUDA_ALLOC_CONF is invalid (a bad setting is an error, never
 * silently "native"). Works without a GPU. */
TCUDA_API tc_status tc_get_allocator_backend(const char **out);

/* ---- user allocators (torch.cuda.memory.CUDAPluggableAllocator) --------------- */

/* A user allocator, made from two functions. */
typedef struct tc_allocator tc_allocator;

/* The two functions: alloc(size, device, cuda_stream) and
 * free(ptr, size, device, cuda_stream), PyTorch's CUDAPluggableAllocator
 * ABI (so no ctx: they are loaded by name from a shared object). */
typedef void *(*tc_alloc_fn)(size_t size, int device, void *cuda_stream);
typedef void (*tc_free_fn)(void *ptr, size_t size, int device, void *cuda_stream);
/* An allocator from two functions (torch.cuda.memory.CUDAPluggableAllocator's
 * functions); the caller destroys *out with tc_allocator_destroy. */
TCUDA_API tc_status tc_allocator_create(tc_alloc_fn alloc_fn, tc_free_fn free_fn,
                                        tc_allocator **out);
/* The same with alloc_fn and free_fn loaded by name from the shared object
 * at so_path (CUDAPluggableAllocator(path, alloc_fn_name, free_fn_name);
 * dlopen; an empty path or NULL name is TC_ERROR_INVALID_ARGUMENT).
 * tc_allocator_destroy also unloads the object. */
TCUDA_API tc_status tc_allocator_create_from_library(const char *so_path, const char *alloc_fn,
                                                     const char *free_fn, tc_allocator **out);
/* Makes `allocator` the device allocator, for the rest of the process;
 * TC_ERROR_INVALID_STATE once any device memory was allocated,
 * TC_ERROR_INVALID_HANDLE for a destroyed or foreign handle. */
TCUDA_API tc_status tc_change_current_allocator(tc_allocator *allocator);
/* Destroys an allocator (and unloads its shared object). The current
 * allocator serves memory until exit and is refused (TC_ERROR_INVALID_STATE),
 * as is one a memory pool still uses (live, or destroyed with blocks still
 * live: the message says how many); a destroyed handle gives
 * TC_ERROR_INVALID_HANDLE. */
TCUDA_API tc_status tc_allocator_destroy(tc_allocator *allocator);

/* ---- pinned host memory ------------------------------------------------------- */

/* Pinned host memory through a caching allocator; a freed block is reused
 * only after the work on the current stream at free time has completed. */
TCUDA_API tc_status tc_host_alloc(size_t size, void **out);
TCUDA_API tc_status tc_host_free(void *ptr);
/* The pinned block is used by work on `stream`: its reuse waits for it. */
TCUDA_API tc_status tc_host_record_stream(void *ptr, tc_stream *stream);

/* ---- memory history (torch.cuda.memory._record_memory_history) ------------
 * While recording, every allocation, free, segment allocation and release,
 * and out-of-memory of the caching allocators is kept in a ring buffer with
 * its time, device, stream, address, size, requested size, pool and
 * (optionally) the C call stack, captured by walking frame pointers (build
 * programs with -fno-omit-frame-pointer; TCUDA_HISTORY_UNWIND=backtrace
 * uses glibc's backtrace() instead, slower but needing none) and turned
 * into names only when a snapshot is dumped (so exported functions get
 * names: link programs with -rdynamic). Equal stacks are kept once, in a
 * table of at most 65536 stacks. Recording costs nothing but one branch per
 * allocator call when off. Memory of cudaMallocAsync and of a user allocator
 * (tc_change_current_allocator) does not go through the caching allocator
 * and is not recorded; pinned host memory is not either.
 * NVTX ranges (tc_nvtx_range_push / pop, nvtx.h) are tcuda's record_function
 * here: while recording, each range opened and closed is kept as a START and
 * an END annotation, which snapshots list as "external_annotations". */

/* What to record: bits, or'ed into tc_memory_history_options.record.
 * TC_HISTORY_RECORD_SEGMENT: "segment_alloc" and "segment_free", and for
 * expandable segments "segment_map" and "segment_unmap". */
typedef enum tc_history_record {
    TC_HISTORY_RECORD_ALLOC = 1,   /* "alloc" */
    TC_HISTORY_RECORD_FREE = 2,    /* "free_requested" and "free_completed" */
    TC_HISTORY_RECORD_SEGMENT = 4, /* segments taken, given back, mapped, unmapped */
    TC_HISTORY_RECORD_OOM = 8,     /* "oom" */
    TC_HISTORY_RECORD_ALL = 15,
} tc_history_record;

/* Which events carry a C stack (PyTorch's stacks/context "alloc", "all"). */
typedef enum tc_history_stacks {
    TC_HISTORY_STACKS_NONE = 0,
    TC_HISTORY_STACKS_ALLOC = 1, /* allocations and segment allocations */
    TC_HISTORY_STACKS_ALL = 2,   /* every event */
} tc_history_stacks;

typedef struct tc_memory_history_options {
    bool enabled;             /* false: stop recording (what was kept stays for a dump) */
    unsigned record;          /* tc_history_record bits; 0 means TC_HISTORY_RECORD_ALL */
    tc_history_stacks stacks; /* which events carry a stack */
    size_t max_entries;       /* ring size per allocator (PyTorch: per device): the newest
                               * events are kept; 0: 100000 */
} tc_memory_history_options;

/* Starts (enabled) or stops recording. Starting clears what was recorded
 * before and sizes the ring for max_entries events (at most 2^28).
 * TC_ERROR_INVALID_ARGUMENT: NULL options, unknown bits, bad stacks mode,
 * too many entries, with stacks a TCUDA_HISTORY_UNWIND other than "fp" or
 * "backtrace"; TC_ERROR_OUT_OF_MEMORY when the ring cannot be had. A
 * refused call changes nothing. */
TCUDA_API tc_status tc_memory_record_history(const tc_memory_history_options *opts);

/* Sets the user metadata (torch.cuda.memory._set_memory_metadata): every
 * event recorded afterwards, on any thread, carries a copy of `metadata` as
 * its "user_metadata" until it is set again; "" (the start) clears it. It
 * stays across a stop and a start of recording. TC_ERROR_INVALID_ARGUMENT
 * for NULL or a string of more than 4096 bytes; TC_ERROR_INVALID_STATE
 * when 65535 distinct strings were set since recording last started (a
 * start clears them). A refused call changes nothing. */
TCUDA_API tc_status tc_memory_set_history_metadata(const char *metadata);
/* Copies the user metadata now (torch.cuda.memory._get_memory_metadata),
 * NUL-terminated, into buf of `size` bytes (4097 always suffice).
 * TC_ERROR_INVALID_ARGUMENT for a NULL buf or one too small. */
TCUDA_API tc_status tc_memory_get_history_metadata(char *buf, size_t size);

/* Writes the segments and blocks of every device (each block with the stack
 * that allocated it, when recorded) and the recorded events, in the format
 * of torch.cuda.memory._dump_snapshot: a pickle (protocol 2) of a dict with
 * "segments", "device_traces" (one list of events per device: action, addr
 * (an "oom" has "device_free", the device's free bytes, instead), size,
 * stream, compile_context ("N/A": tcuda has no compiled regions),
 * user_metadata, time_us, frames), "allocator_settings" (PyTorch's keys,
 * roundup_power2_divisions a dict keyed by MiB) and "external_annotations"
 * (the NVTX ranges: name, stage "START" or "END", device, time_us), which
 * PyTorch's torch.cuda._memory_viz and the memory_viz page read. The _json variant
 * writes the same content as JSON. TC_ERROR_INVALID_ARGUMENT for a NULL or
 * empty path, TC_ERROR_IO (with the reason) when the file cannot be written. */
TCUDA_API tc_status tc_memory_dump_snapshot(const char *path);
TCUDA_API tc_status tc_memory_dump_snapshot_json(const char *path);

/* What an out-of-memory observer is told; valid during the call only. */
typedef struct tc_oom_info {
    int device;                              /* -1: the pinned host cache */
    size_t requested;                        /* bytes asked for */
    size_t free_bytes, total_bytes;          /* the device's, as the driver says */
    const tc_memory_snapshot_info *snapshot; /* the device's segments at the failure */
} tc_oom_info;
typedef void (*tc_oom_observer_fn)(const tc_oom_info *info, void *ctx);

/* Calls fn(info, ctx) on every out-of-memory of the caching allocator, on
 * the failing thread, after the allocator gave up and before the error
 * returns (the observer may call tcuda, tc_memory_dump_snapshot included;
 * the caller's error message is kept). At most 16 observers:
 * TC_ERROR_INVALID_STATE beyond. */
TCUDA_API tc_status tc_memory_attach_oom_observer(tc_oom_observer_fn fn, void *ctx);
/* Removes an observer attached with the same fn and ctx
 * (TC_ERROR_INVALID_ARGUMENT when there is none). */
TCUDA_API tc_status tc_memory_detach_oom_observer(tc_oom_observer_fn fn, void *ctx);

/* ---- user memory pools (torch.cuda.MemPool, use_mem_pool) -----------------
 * A pool is a part of a device's caching allocator whose memory serves only
 * the allocations made inside tc_mempool_use_begin/end on the threads that
 * called it (on the pool's device); what is freed goes back to the pool, not
 * to the others, and other allocations never take its memory. Snapshots
 * show its segments with its id as segment_pool_id. (Graph capture's
 * private pools are the same mechanism, routed by stream.) */
typedef struct tc_mempool tc_mempool;

/* What a pool holds (tc_mempool_stats fills it). */
typedef struct tc_mempool_stats_info {
    uint64_t id;
    int device;
    size_t segments, reserved_bytes;                 /* its segments */
    size_t blocks, allocated_bytes, requested_bytes; /* its live blocks */
    size_t active_bytes;                             /* live + freed awaiting streams */
} tc_mempool_stats_info;

/* A new pool on device (TC_CURRENT_DEVICE: current); the caller destroys it
 * with tc_mempool_destroy. With `allocator` (tc_allocator_create or
 * tc_allocator_create_from_library; NULL: none) the pool's segments come from
 * its functions instead of cudaMalloc, cached like the device's own; the
 * allocator must outlive the pool's memory. TC_ERROR_NO_DEVICE without
 * CUDA; TC_ERROR_INVALID_HANDLE for a destroyed allocator;
 * TC_ERROR_NOT_SUPPORTED when TCUDA_ALLOC_CONF selects cudaMallocAsync or a
 * user allocator replaced the device's; TC_ERROR_OUT_OF_MEMORY for host
 * memory. */
TCUDA_API tc_status tc_mempool_create(int device, tc_allocator *allocator, tc_mempool **out);
/* From now on, this thread's allocations on the pool's device come from the
 * pool, until the matching tc_mempool_use_end (uses nest, up to 8 deep; the
 * innermost wins). TC_ERROR_INVALID_HANDLE for a destroyed pool;
 * TC_ERROR_INVALID_STATE when 8 are active on this thread. */
TCUDA_API tc_status tc_mempool_use_begin(tc_mempool *pool);
/* Ends the innermost use of this thread, which must be `pool`
 * (TC_ERROR_INVALID_STATE otherwise). */
TCUDA_API tc_status tc_mempool_use_end(tc_mempool *pool);
/* The pool's id (as in snapshots' segment_pool_id) and what it holds. */
TCUDA_API tc_status tc_mempool_stats(const tc_mempool *pool, tc_mempool_stats_info *out);
/* Destroys the handle: the pool's wholly free segments go back to the device
 * now, the others once their blocks are freed (on the next empty_cache).
 * Live blocks stay valid and are freed as usual. TC_ERROR_INVALID_STATE
 * while a thread uses it; TC_ERROR_INVALID_HANDLE when destroyed already. */
TCUDA_API tc_status tc_mempool_destroy(tc_mempool *pool);

TCUDA_EXTERN_C_END

#endif
