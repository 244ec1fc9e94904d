/* The allocator's words: TCUDA_ALLOC_CONF parsing, stat keys, the summary
 * table, snapshot JSON, and the plain host segment provider used by CPU tests.
 * The parser is strict: an unknown key or bad value is an error that names it,
 * and the output config is written only when the whole text parsed. */
#include <ctype.h>
#include <stdarg.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../core/internal.h"
#include "alloc.h"

void tc__alloc_config_default(tc__alloc_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->max_split_size = SIZE_MAX;
}

static bool parse_bool(const char *v, bool *out)
{
    if (!strcmp(v, "True") || !strcmp(v, "true") || !strcmp(v, "1"))
        return *out = true, true;
    if (!strcmp(v, "False") || !strcmp(v, "false") || !strcmp(v, "0"))
        return *out = false, true;
    return false;
}

static bool parse_u64(const char *v, uint64_t *out)
{
    if (!*v || !isdigit((unsigned char)*v))
        return false;
    errno = 0;
    char *end;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || *end)
        return false;
    *out = x;
    return true;
}

tc_status tc__alloc_config_parse(const char *text, tc__alloc_config *cfg)
{
    tc__alloc_config c = *cfg;
    if (!text)
        return TC_OK;
    char buf[1024];
    TC_CHECK_ARG(strlen(text) < sizeof buf, "TCUDA_ALLOC_CONF is longer than %zu characters",
                 sizeof buf - 1);
    strcpy(buf, text);
    for (char *save = NULL, *item = strtok_r(buf, ",", &save); item;
         item = strtok_r(NULL, ",", &save)) {
        while (*item == ' ')
            item++;
        if (!*item)
            continue;
        char *colon = strchr(item, ':');
        TC_CHECK_ARG(colon, "TCUDA_ALLOC_CONF: '%s' is not key:value", item);
        *colon = '\0';
        const char *k = item, *v = colon + 1;
        uint64_t u;
        bool b;
        if (!strcmp(k, "backend")) {
            if (!strcmp(v, "native"))
                c.backend = 0;
            else if (!strcmp(v, "cudaMallocAsync"))
                c.backend = 1;
            else
                return tc__fail(TC_ERROR_INVALID_ARGUMENT, "TCUDA_ALLOC_CONF: backend '%s' is "
                                "unknown (native or cudaMallocAsync)", v);
        } else if (!strcmp(k, "max_split_size_mb")) {
            TC_CHECK_ARG(parse_u64(v, &u) && u > 1 && u < ((uint64_t)1 << 40),
                         "TCUDA_ALLOC_CONF: max_split_size_mb '%s' must be an integer > 1 (MiB)",
                         v);
            c.max_split_size = (size_t)u << 20;
        } else if (!strcmp(k, "roundup_power2_divisions")) {
            TC_CHECK_ARG(parse_u64(v, &u) && u >= 1 && u <= 64 && (u & (u - 1)) == 0,
                         "TCUDA_ALLOC_CONF: roundup_power2_divisions '%s' must be a power of "
                         "two from 1 to 64", v);
            c.roundup_power2_divisions = (unsigned)u;
        } else if (!strcmp(k, "garbage_collection_threshold")) {
            char *end;
            errno = 0;
            double d = strtod(v, &end);
            TC_CHECK_ARG(*v && !*end && !errno && d > 0.0 && d < 1.0,
                         "TCUDA_ALLOC_CONF: garbage_collection_threshold '%s' must be a number "
                         "in (0, 1)", v);
            c.gc_threshold = d;
        } else if (!strcmp(k, "expandable_segments")) {
            TC_CHECK_ARG(parse_bool(v, &b), "TCUDA_ALLOC_CONF: expandable_segments '%s' must "
                         "be True or False", v);
            c.expandable_segments = b;
        } else {
            return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                            "TCUDA_ALLOC_CONF: unknown key '%s' (known: backend, "
                            "max_split_size_mb, roundup_power2_divisions, "
                            "garbage_collection_threshold, expandable_segments)", k);
        }
    }
    *cfg = c;
    return TC_OK;
}

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
#define A(x) {#x, offsetof(struct tc_memory_stats, x)}
    A(allocation),     A(segment),      A(active),
    A(inactive_split), A(allocated_bytes), A(reserved_bytes),
    A(active_bytes),   A(inactive_split_bytes), A(requested_bytes),
#undef A
};
static const char *pool_names[3] = {"all", "small_pool", "large_pool"};

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

bool tc__stats_get(const struct tc_memory_stats *s, const char *key, int64_t *out)
{
    static const struct {
        const char *n;
        size_t off;
    } scalars[] = {
#define S(x) {#x, offsetof(struct tc_memory_stats, x)}
        S(num_alloc_retries), S(num_ooms), S(num_sync_all_streams),
        S(num_device_alloc), S(num_device_free), S(max_split_size),
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

typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) TC_PRINTF(2, 3);
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int w = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (w < 0 || b->oom)
            return;
        if (b->p && b->n + (size_t)w < b->cap) {
            b->n += (size_t)w;
            return;
        }
        size_t nc = (b->cap + (size_t)w + 1) * 2;
        char *np = realloc(b->p, nc);
        if (!np) {
            b->oom = true;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
}

char *tc__stats_summary(const struct tc_memory_stats *s, int device, bool abbreviated)
{
    sbuf b = {0};
    const char *line = "|==========================================================================="
                       "|\n";
    sb_printf(&b, "%s| %-73s |\n%s", line, "tcuda memory summary", line);
    sb_printf(&b, "| device %-3d  %-61s |\n", device,
              "(all: both pools; small: <= 1 MiB requests; large: the rest)");
    sb_printf(&b, "%s| %-24s | %11s | %11s | %11s | %11s |\n", line, "Metric", "Cur Usage",
              "Peak Usage", "Tot Alloc", "Tot Freed");
    static const char *titles[] = {"Allocations",       "Segments (GPU reserved)",
                                   "Active allocs",     "Non-releasable allocs",
                                   "Allocated memory",  "GPU reserved memory",
                                   "Active memory",     "Non-releasable memory",
                                   "Requested memory"};
    for (size_t i = 0; i < sizeof arrays / sizeof *arrays; i++) {
        const tc_memory_stat *arr = (const tc_memory_stat *)((const char *)s + arrays[i].off);
        bool bytes = strstr(arrays[i].name, "bytes") != NULL;
        sb_printf(&b, "%s", line);
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
            sb_printf(&b, "| %-24s | %11s | %11s | %11s | %11s |\n", name, c[0], c[1], c[2],
                      c[3]);
        }
    }
    sb_printf(&b, "%s", line);
    sb_printf(&b, "| %-28s %-44" PRId64 " |\n", "Oversize allocations:",
              s->oversize_allocations.current);
    sb_printf(&b, "| %-28s %-44" PRId64 " |\n", "Oversize GPU segments:",
              s->oversize_segments.current);
    sb_printf(&b, "| %-28s %-44" PRId64 " |\n", "cudaMalloc retries:", s->num_alloc_retries);
    sb_printf(&b, "| %-28s %-44" PRId64 " |\n", "Out-of-memory errors:", s->num_ooms);
    char af[48];
    snprintf(af, sizeof af, "%" PRId64 " / %" PRId64, s->num_device_alloc, s->num_device_free);
    sb_printf(&b, "| %-28s %-44s |\n", "Device allocs / frees:", af);
    sb_printf(&b, "%s", line);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

void tc__snapshot_free(struct tc_memory_snapshot *snap)
{
    if (!snap)
        return;
    for (size_t i = 0; i < snap->num_segments; i++)
        free(snap->segments[i].blocks);
    free(snap->segments);
    snap->segments = NULL;
    snap->num_segments = 0;
}

tc_status tc__snapshot_write_json(const struct tc_memory_snapshot *snap, const char *path)
{
    TC_CHECK_ARG(snap && path, "snapshot and path must not be NULL");
    FILE *f = fopen(path, "w");
    if (!f)
        return tc__fail(TC_ERROR_IO, "cannot write the snapshot to '%s': %s", path,
                        strerror(errno));
    fprintf(f, "{\"segments\": [");
    for (size_t i = 0; i < snap->num_segments; i++) {
        const tc_memory_segment_info *s = &snap->segments[i];
        fprintf(f,
                "%s\n {\"device\": %d, \"address\": %" PRIu64 ", \"total_size\": %zu, "
                "\"allocated_size\": %zu, \"active_size\": %zu, \"requested_size\": %zu, "
                "\"stream\": %" PRIu64 ", \"segment_type\": \"%s\", \"segment_pool_id\": %" PRIu64
                ", \"is_expandable\": %s, \"blocks\": [",
                i ? "," : "", s->device, s->address, s->total_size, s->allocated_size,
                s->active_size, s->requested_size, s->stream, s->segment_type,
                s->segment_pool_id, s->is_expandable ? "true" : "false");
        for (size_t j = 0; j < s->num_blocks; j++) {
            const tc_memory_block_info *b = &s->blocks[j];
            fprintf(f, "%s{\"address\": %" PRIu64 ", \"size\": %zu, \"requested_size\": %zu, "
                    "\"state\": \"%s\"}", j ? ", " : "", b->address, b->size, b->requested_size,
                    b->state);
        }
        fprintf(f, "]}");
    }
    fprintf(f, "\n]}\n");
    if (fclose(f) != 0)
        return tc__fail(TC_ERROR_IO, "writing the snapshot to '%s' failed", path);
    return TC_OK;
}

/* ---- plain host provider ---------------------------------------------------- */

static tc_status host_alloc(void *ctx, size_t size, uintptr_t stream, void **out)
{
    (void)stream;
    tc__host_provider_ctx *c = ctx;
    if (c->capacity && c->in_use + size > c->capacity)
        return TC_ERROR_OUT_OF_MEMORY;
    void *p = aligned_alloc(512, size);
    if (!p)
        return TC_ERROR_OUT_OF_MEMORY;
    c->in_use += size;
    c->allocs++;
    *out = p;
    return TC_OK;
}

static void host_free(void *ctx, void *ptr, size_t size)
{
    tc__host_provider_ctx *c = ctx;
    c->in_use -= size;
    c->frees++;
    free(ptr);
}

static void host_info(void *ctx, size_t *fr, size_t *tot)
{
    tc__host_provider_ctx *c = ctx;
    *tot = c->capacity;
    *fr = c->capacity - c->in_use;
}

/* Expandable: reserve a range with malloc; "mapping" only counts bytes. */
static tc_status host_reserve(void *ctx, size_t size, void **out)
{
    (void)ctx;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED)
        return TC_ERROR_OUT_OF_MEMORY;
    *out = p;
    return TC_OK;
}
static tc_status host_map(void *ctx, void *addr, size_t size)
{
    (void)addr;
    tc__host_provider_ctx *c = ctx;
    if (c->capacity && c->in_use + size > c->capacity)
        return TC_ERROR_OUT_OF_MEMORY;
    c->in_use += size;
    c->allocs++;
    return TC_OK;
}
static void host_unmap(void *ctx, void *addr, size_t size)
{
    (void)addr;
    tc__host_provider_ctx *c = ctx;
    c->in_use -= size;
    c->frees++;
}
static void host_unreserve(void *ctx, void *addr, size_t size)
{
    (void)ctx;
    munmap(addr, size);
}

void tc__host_provider_init(tc__seg_provider *p, tc__host_provider_ctx *ctx)
{
    memset(p, 0, sizeof *p);
    p->name = "host";
    p->ctx = ctx;
    p->alloc = host_alloc;
    p->free = host_free;
    p->mem_info = host_info;
    if (ctx->granularity) {
        p->granularity = ctx->granularity;
        p->reserve = host_reserve;
        p->map = host_map;
        p->unmap = host_unmap;
        p->unreserve = host_unreserve;
    }
}
