/* The caching allocator's algorithm, with no CUDA inside (internal).
 *
 * An allocator takes large regions ("segments") from a segment provider and
 * hands out blocks carved from them. Streams are opaque uintptr_t ids and
 * events come through the provider's callbacks, so CPU tests drive every rule
 * with fake streams and fake events. One allocator per device (or per pinned
 * host cache); every entry point takes the allocator's mutex briefly. */
#ifndef TCUDA_ALLOC_H
#define TCUDA_ALLOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tcuda/memory.h"
#include "tcuda/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TC__MIN_BLOCK ((size_t)512)
#define TC__SMALL_SIZE ((size_t)1 << 20)       /* requests up to this: small pool */
#define TC__SMALL_BUFFER ((size_t)2 << 20)     /* small pool segment */
#define TC__LARGE_BUFFER ((size_t)20 << 20)    /* shared large segment */
#define TC__MIN_LARGE_ALLOC ((size_t)10 << 20) /* from here: own segment */
#define TC__ROUND_LARGE ((size_t)2 << 20)

/* Where segments come from. alloc returns TC_ERROR_OUT_OF_MEMORY (message not
 * needed) when the device refuses. free may wait for all queued GPU work
 * (cudaFree does: say so in free_waits); the allocator calls it only on
 * empty_cache, an out-of-memory retry, the garbage-collection threshold,
 * release_pool and destroy. The expandable hooks may be NULL; with them a
 * segment is a reserved address range backed in whole granules (a power of
 * two; tc__alloc_create refuses anything else): map backs one range (whole
 * granules, any number of them) with memory, and unmap is only ever called
 * with exactly a range that one map call backed, and only once the last use
 * of that memory is known to be complete (an event recorded after it was
 * freed has been seen done), so unmap must not wait for the GPU. Event hooks
 * may be NULL when streams never run asynchronously (plain host): then
 * every use counts as complete. event_query never waits; event_sync does
 * (each call is counted in num_device_synchronize). */
typedef struct tc__seg_provider {
    const char *name;
    void *ctx;
    tc_status (*alloc)(void *ctx, size_t size, uintptr_t stream, void **out);
    void (*free)(void *ctx, void *ptr, size_t size);
    void (*mem_info)(void *ctx, size_t *free_bytes, size_t *total_bytes);
    size_t granularity;
    tc_status (*reserve)(void *ctx, size_t size, void **out);
    tc_status (*map)(void *ctx, void *addr, size_t size); /* OOM when refused */
    void (*unmap)(void *ctx, void *addr, size_t size);
    void (*unreserve)(void *ctx, void *addr, size_t size);
    void *(*event_record)(void *ctx, uintptr_t stream); /* NULL: could not */
    int (*event_query)(void *ctx, void *event);         /* 1 done, 0 not yet */
    void (*event_sync)(void *ctx, void *event);
    void (*event_destroy)(void *ctx, void *event);
    bool free_waits; /* free waits for the GPU: counted in num_device_synchronize */
} tc__seg_provider;

/* TCUDA_ALLOC_CONF (or its PyTorch twin), parsed. */
#define TC__ROUNDUP_INTERVALS 16 /* PyTorch's kRoundUpPowerOfTwoIntervals: 1 MiB to 64 GiB */

typedef struct tc__alloc_config {
    int backend;           /* 0 native, 1 cudaMallocAsync */
    size_t max_split_size; /* SIZE_MAX: no limit */
    /* Divisions per power-of-two size interval, as PyTorch's: entry i
     * applies to sizes in [2^i, 2^(i+1)) MiB, entry 0 also to smaller ones
     * and entry 15 to larger; 0 or 1: plain 512-byte rounding. */
    unsigned char roundup_power2_divisions[TC__ROUNDUP_INTERVALS];
    double gc_threshold; /* 0: off; else in (0, 1) */
    bool expandable_segments;
    bool no_caching; /* TCUDA_NO_CACHING (or PYTORCH_NO_CUDA_MEMORY_CACHING): each
                      * segment one block, given back when free */
} tc__alloc_config;

/* The defaults (native, no limits, nothing on). */
void tc__alloc_config_default(tc__alloc_config *cfg);
/* Parses "key:value,key:value". roundup_power2_divisions takes one value or
 * a list "[256:1,512:2,>:8]", read as PyTorch reads it: sizes below 512 MiB
 * get 1, [512 MiB, 1 GiB) 2, larger 8 (the first entry also covers every
 * smaller interval; an interval between two entries keeps 0). An unknown key or bad value fails with
 * TC_ERROR_INVALID_ARGUMENT and a message naming it; *cfg is then unchanged. */
tc_status tc__alloc_config_parse(const char *text, tc__alloc_config *cfg);
/* The same, its messages naming the variable `var` the text came from. */
tc_status tc__alloc_config_parse_named(const char *var, const char *text, tc__alloc_config *cfg);
/* TC_OK when `text` parses, else the parser's error. */
tc_status tc__alloc_config_check(const char *text);
/* Parse and check the settings of the environment: TCUDA_ALLOC_CONF, or
 * PyTorch's PYTORCH_ALLOC_CONF / PYTORCH_CUDA_ALLOC_CONF when it is unset
 * (tc__alloc_conf_env); errors name the variable read. tc_init checks them
 * before any allocation. */
tc_status tc__alloc_config_parse_env(tc__alloc_config *cfg);
tc_status tc__alloc_config_check_env(void);

typedef struct tc__allocator tc__allocator;

tc_status tc__alloc_create(const tc__seg_provider *provider, const tc__alloc_config *cfg,
                           int device, tc__allocator **out);
/* Returns every segment to the provider (blocks still in use included). */
void tc__alloc_destroy(tc__allocator *a);

tc_status tc__alloc_malloc(tc__allocator *a, size_t size, uintptr_t stream, void **out);
/* TC_ERROR_INVALID_ARGUMENT when ptr is not a live block of this allocator. */
tc_status tc__alloc_free(tc__allocator *a, void *ptr);
/* Frees ptr if this allocator owns it; *owned says whether it did (no message). */
void tc__alloc_free_if_owned(tc__allocator *a, void *ptr, bool *owned);
bool tc__alloc_owns(tc__allocator *a, const void *ptr);
/* Marks a live block as used on `stream`: its reuse waits for that stream. */
tc_status tc__alloc_record_stream(tc__allocator *a, void *ptr, uintptr_t stream);
/* `stream` is about to go away (destroyed, or an external stream's wrapper
 * released); call it while the stream is still valid. Every use of memory on
 * it becomes an event recorded there now (or, without events, counts as
 * complete), so that no later call names the stream to the provider: blocks
 * recorded on it wait for that event, and the memory cached for it serves
 * other streams once that event is seen complete. Never waits for the GPU.
 * A stream later created with the same handle value starts afresh. */
void tc__alloc_stream_gone(tc__allocator *a, uintptr_t stream);
/* tc__alloc_stream_gone on every allocator that exists. */
void tc__alloc_stream_gone_all(uintptr_t stream);
/* Waits for pending events and for the last use of cached memory, then
 * releases every wholly free segment and every free expandable chunk. */
void tc__alloc_empty_cache(tc__allocator *a);
void tc__alloc_stats(tc__allocator *a, tc_memory_stats_info *out);
void tc__alloc_reset_peak(tc__allocator *a);
void tc__alloc_reset_accumulated(tc__allocator *a);
/* Caps reserved memory at fraction * total (provider's total). */
tc_status tc__alloc_set_fraction(tc__allocator *a, double fraction);

/* Private pools: between begin and end, allocations on `stream` come from
 * pool `id` (> 0). Its memory is not used for others until released; release
 * gives back the pool's wholly free segments, and the others go back once
 * free, on the next empty_cache, out-of-memory retry or garbage collection
 * (not when they become free: that would make a free wait for the GPU). */
tc_status tc__alloc_begin_pool(tc__allocator *a, uint64_t id, uintptr_t stream);
tc_status tc__alloc_end_pool(tc__allocator *a, uintptr_t stream);
tc_status tc__alloc_release_pool(tc__allocator *a, uint64_t id);

/* Appends this allocator's segments to a snapshot (tc_memory_snapshot). */
tc_status tc__alloc_snapshot(tc__allocator *a, tc_memory_snapshot_info *snap);

/* Walks every segment and recounts: blocks tile segments, free lists and the
 * pointer map agree, stats equal the recount. 0 if sound, else writes why. */
int tc__alloc_check(tc__allocator *a, char *why, size_t why_len);

/* Formats n bytes as "1.50 GiB" into buf. */
const char *tc__fmt_bytes(char *buf, size_t n, uint64_t bytes);

/* Stat keys: "allocated_bytes.all.current" ... Returns false if unknown. */
bool tc__stats_get(const tc_memory_stats_info *s, const char *key, int64_t *out);
/* Readable table of the stats (caller frees). */
char *tc__stats_summary(const tc_memory_stats_info *s, int device, bool abbreviated);
/* Frees a snapshot's arrays. */
void tc__snapshot_free(tc_memory_snapshot_info *snap);

/* The plain host provider (malloc); `capacity` bytes total (0: unlimited),
 * so tests can make it refuse. Event hooks are fakes the tests can drive.
 * The ranges list is freed when the last range is unmapped. */
typedef struct tc__host_provider_ctx {
    size_t capacity;
    size_t in_use;
    size_t granularity; /* for expandable tests; 0 disables */
    int64_t allocs, frees;
    /* Expandable: the ranges mapped now, so that an unmap of anything else
     * (which the driver would refuse) is counted in bad_unmaps. */
    struct tc__host_range {
        uintptr_t addr;
        size_t size;
    } * ranges;
    size_t nranges, cap_ranges;
    int64_t bad_unmaps;
    /* Streams that went away (tc__host_stream_set_gone): a provider call
     * naming one, which CUDA would refuse or crash on, is counted in
     * dead_stream_uses (alloc here; event records in tests' fake events,
     * through tc__host_stream_touch). */
    uintptr_t gone[16];
    size_t ngone;
    int64_t dead_stream_uses;
} tc__host_provider_ctx;
void tc__host_provider_init(tc__seg_provider *p, tc__host_provider_ctx *ctx);
/* Marks `stream` as gone (or, with gone false, as a new stream that took its
 * handle value). At most 16 gone at once; more are ignored. */
void tc__host_stream_set_gone(tc__host_provider_ctx *ctx, uintptr_t stream, bool gone);
/* A provider call names `stream`: counted in dead_stream_uses when it is
 * gone. Returns whether it is alive. */
bool tc__host_stream_touch(tc__host_provider_ctx *ctx, uintptr_t stream);

#ifdef __cplusplus
}
#endif

#endif
