/* The allocator's words: byte formatting, stat keys, the summary table,
 * PyTorch's names of block states and segment types, and snapshots freed
 * (their JSON is written by alloc_history_dump.c). */
#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "base/strbuf.h"
#include "alloc.h"

const char *tc__fmt_bytes(char *buf, size_t n, uint64_t bytes)
{
    static const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int i = 0;
    while (v >= 1024.0 && i < 4) {
        v /= 1024.0;
        i++;
    }
    if (i == 0)
        snprintf(buf, n, "%" PRIu64 " B", bytes);
    else
        snprintf(buf, n, "%.2f %s", v, u[i]);
    return buf;
}

static const struct {
    const char *name;
    size_t off;
} arrays[] = {
#define A(x)                                                                                       \
    {                                                                                              \
#x, offsetof(tc_memory_stats_info, x)                                                      \
    }
    A(allocation),      A(segment),        A(active),       A(inactive_split),
    A(allocated_bytes), A(reserved_bytes), A(active_bytes), A(inactive_split_bytes),
    A(requested_bytes),
#undef A
};
static const char *pool_names[3] = {"all", "small_pool", "large_pool"};

const char *tc_memory_block_state_string(tc_memory_block_state state)
{
    switch (state) {
    case TC_MEMORY_BLOCK_STATE_ACTIVE_ALLOCATED: return "active_allocated";
    case TC_MEMORY_BLOCK_STATE_ACTIVE_PENDING_FREE: return "active_pending_free";
    case TC_MEMORY_BLOCK_STATE_INACTIVE: return "inactive";
    }
    return "unknown";
}

const char *tc_memory_segment_type_string(tc_memory_segment_type type)
{
    switch (type) {
    case TC_MEMORY_SEGMENT_TYPE_SMALL: return "small";
    case TC_MEMORY_SEGMENT_TYPE_LARGE: return "large";
    }
    return "unknown";
}

static bool field(const tc_memory_stat *m, const char *f, int64_t *out)
{
    if (!strcmp(f, "current"))
        *out = m->current;
    else if (!strcmp(f, "peak"))
        *out = m->peak;
    else if (!strcmp(f, "allocated"))
        *out = m->allocated;
    else if (!strcmp(f, "freed"))
        *out = m->freed;
    else
        return false;
    return true;
}

bool tc__stats_get(const tc_memory_stats_info *s, const char *key, int64_t *out)
{
    static const struct {
        const char *n;
        size_t off;
    } scalars[] = {
#define S(x) {#x, offsetof(tc_memory_stats_info, x)}
        S(num_alloc_retries), S(num_ooms),       S(num_sync_all_streams),   S(num_device_alloc),
        S(num_device_free),   S(max_split_size), S(num_device_synchronize),
#undef S
    };
    for (size_t i = 0; i < sizeof scalars / sizeof *scalars; i++)
        if (!strcmp(key, scalars[i].n)) {
            *out = *(const int64_t *)((const char *)s + scalars[i].off);
            return true;
        }
    const char *dot = strchr(key, '.');
    if (!dot)
        return false;
    size_t nl = (size_t)(dot - key);
    if (nl == 9 && !strncmp(key, "allocated", nl)) /* the older name of "allocation" */
        key = "allocation", nl = 10;
    if (nl == 20 && !strncmp(key, "oversize_allocations", nl))
        return field(&s->oversize_allocations, dot + 1, out);
    if (nl == 17 && !strncmp(key, "oversize_segments", nl))
        return field(&s->oversize_segments, dot + 1, out);
    for (size_t i = 0; i < sizeof arrays / sizeof *arrays; i++) {
        if (strlen(arrays[i].name) != nl || strncmp(key, arrays[i].name, nl))
            continue;
        const tc_memory_stat *arr = (const tc_memory_stat *)((const char *)s + arrays[i].off);
        const char *p = dot + 1, *dot2 = strchr(p, '.');
        if (!dot2)
            return false;
        for (int k = 0; k < 3; k++)
            if (strlen(pool_names[k]) == (size_t)(dot2 - p) &&
                !strncmp(p, pool_names[k], (size_t)(dot2 - p)))
                return field(&arr[k], dot2 + 1, out);
        return false;
    }
    return false;
}

char *tc__stats_summary(const tc_memory_stats_info *s, int device, bool abbreviated)
{
    tc__strbuf b = {0};
    const char *line =
        "|==========================================================================="
        "|\n";
    tc__strbuf_printf(&b, "%s| %-73s |\n%s", line, "tcuda memory summary", line);
    tc__strbuf_printf(&b, "| device %-3d  %-61s |\n", device,
                      "(all: both pools; small: <= 1 MiB requests; large: the rest)");
    tc__strbuf_printf(&b, "%s| %-24s | %11s | %11s | %11s | %11s |\n", line, "Metric", "Cur Usage",
                      "Peak Usage", "Tot Alloc", "Tot Freed");
    static const char *titles[] = {
        "Allocations",           "Segments (GPU reserved)", "Active allocs",
        "Non-releasable allocs", "Allocated memory",        "GPU reserved memory",
        "Active memory",         "Non-releasable memory",   "Requested memory"};
    for (size_t i = 0; i < sizeof arrays / sizeof *arrays; i++) {
        const tc_memory_stat *arr = (const tc_memory_stat *)((const char *)s + arrays[i].off);
        bool bytes = strstr(arrays[i].name, "bytes") != NULL;
        tc__strbuf_printf(&b, "%s", line);
        for (int k = 0; k < 3; k++) {
            if (abbreviated && k > 0)
                break;
            char c[4][32];
            const int64_t v[4] = {arr[k].current, arr[k].peak, arr[k].allocated, arr[k].freed};
            for (int j = 0; j < 4; j++) {
                if (bytes)
                    tc__fmt_bytes(c[j], sizeof c[j], (uint64_t)(v[j] < 0 ? 0 : v[j]));
                else
                    snprintf(c[j], sizeof c[j], "%" PRId64, v[j]);
            }
            char name[64];
            if (k == 0)
                snprintf(name, sizeof name, "%s", titles[i]);
            else
                snprintf(name, sizeof name, "      from %s", k == 1 ? "small pool" : "large pool");
            tc__strbuf_printf(&b, "| %-24s | %11s | %11s | %11s | %11s |\n", name, c[0], c[1], c[2],
                              c[3]);
        }
    }
    tc__strbuf_printf(&b, "%s", line);
    tc__strbuf_printf(&b, "| %-28s %-44" PRId64 " |\n",
                      "Oversize allocations:", s->oversize_allocations.current);
    tc__strbuf_printf(&b, "| %-28s %-44" PRId64 " |\n",
                      "Oversize GPU segments:", s->oversize_segments.current);
    tc__strbuf_printf(&b, "| %-28s %-44" PRId64 " |\n",
                      "cudaMalloc retries:", s->num_alloc_retries);
    tc__strbuf_printf(&b, "| %-28s %-44" PRId64 " |\n", "Out-of-memory errors:", s->num_ooms);
    char af[48];
    snprintf(af, sizeof af, "%" PRId64 " / %" PRId64, s->num_device_alloc, s->num_device_free);
    tc__strbuf_printf(&b, "| %-28s %-44s |\n", "Device allocs / frees:", af);
    tc__strbuf_printf(&b, "%s", line);
    if (b.failed) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

void tc__snapshot_free(tc_memory_snapshot_info *snap)
{
    if (!snap)
        return;
    for (size_t i = 0; i < snap->num_segments; i++)
        free(snap->segments[i].blocks);
    free(snap->segments);
    snap->segments = NULL;
    snap->num_segments = 0;
}

/* Plain data: destroying a snapshot needs no GPU (either build). */
tc_status tc_memory_snapshot_destroy(tc_memory_snapshot_info *snap)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(snap, "snap is NULL");
    tc__snapshot_free(snap);
    free(snap);
    return TC_OK;
}
