/* Memory snapshots with history, in PyTorch's format: the dict that
 * torch.cuda.memory._snapshot() returns, written as a pickle (protocol 2,
 * the few opcodes Python's pickle and the memory_viz page's reader both
 * take) or as JSON, from one walk over the content (an "emitter" with two
 * back ends). This is tcuda's one JSON writer of snapshots: the plain
 * snapshot's JSON (tc_memory_snapshot_write_json) is the same walk with no
 * history.
 *
 * The content: "segments" (every segment of every device's caching
 * allocator, its blocks, each block and segment with the frames of the stack
 * that allocated it when recorded), "device_traces" (one list per device of
 * the recorded events, oldest first: action, addr (an "oom"'s is
 * "device_free", the device's free bytes), size, requested_size, stream,
 * pool_id, compile_context (always TC__HIST_COMPILE_CONTEXT), user_metadata,
 * time_us, frames), "allocator_settings" (PyTorch's keys, those tcuda has no
 * switch for written as what tcuda does, then tcuda's no_caching and
 * backend) and "external_annotations" (the NVTX ranges' START and END while
 * recording: name, stage, device, time_us; in time order). Frames are
 * named here with dladdr, once per distinct address in a dump (a sorted
 * table of the addresses the copy holds): exported functions get their
 * names, others "??" with the module; the allocator's own frames at the top
 * of each stack are dropped. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_history.h"
#include "alloc_internal.h"
#include "base/env.h"

/* ---- the emitter ------------------------------------------------------------- */

/* A frame's name, looked up once per dump. */
typedef struct sym {
    void *addr;
    bool own; /* the allocator's (dropped from the top of a stack) */
    char name[64];
    const char *sname; /* dladdr's, or NULL: use name */
    const char *file;
} sym;

typedef struct em {
    FILE *f;
    bool json;
    const tc__hist_copy *c; /* NULL: no history (plain snapshot) */
    sym *syms;              /* sorted by addr */
    size_t nsyms;
    int depth;
    bool first[64];   /* JSON: nothing written yet at this depth */
    bool is_dict[64]; /* JSON: a key comes next rather than a value */
    bool after_key;
} em;

static void put_u32(FILE *f, uint32_t v)
{
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    fwrite(b, 1, 4, f);
}

/* JSON: the comma before a value or key at this depth. */
static void sep(em *e)
{
    if (e->after_key) {
        e->after_key = false;
        return;
    }
    if (e->depth > 0 && !e->first[e->depth])
        fputc(',', e->f);
    e->first[e->depth] = false;
}

static void open_(em *e, bool dict)
{
    if (e->json) {
        sep(e);
        fputc(dict ? '{' : '[', e->f);
    } else {
        fputc(dict ? '}' : ']', e->f); /* EMPTY_DICT, EMPTY_LIST */
        fputc('(', e->f);              /* MARK */
    }
    e->depth++;
    e->first[e->depth] = true;
    e->is_dict[e->depth] = dict;
}

static void close_(em *e)
{
    bool dict = e->is_dict[e->depth];
    e->depth--;
    if (e->json)
        fputc(dict ? '}' : ']', e->f);
    else
        fputc(dict ? 'u' : 'e', e->f); /* SETITEMS, APPENDS */
}

static void raw_str(em *e, const char *s)
{
    if (!e->json) {
        size_t len = strlen(s);
        fputc('X', e->f); /* BINUNICODE */
        put_u32(e->f, (uint32_t)len);
        fwrite(s, 1, len, e->f);
        return;
    }
    fputc('"', e->f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(e->f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(e->f, "\\u%04x", *p);
        else
            fputc(*p, e->f);
    }
    fputc('"', e->f);
}

static void str(em *e, const char *s)
{
    if (e->json)
        sep(e);
    raw_str(e, s);
}

static void key(em *e, const char *k)
{
    if (e->json) {
        sep(e);
        raw_str(e, k);
        fputs(": ", e->f);
        e->after_key = true;
    } else {
        raw_str(e, k);
    }
}

static void num(em *e, int64_t v)
{
    if (e->json) {
        sep(e);
        fprintf(e->f, "%" PRId64, v);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        fputc('J', e->f); /* BININT */
        put_u32(e->f, (uint32_t)(int32_t)v);
    } else {
        unsigned char b[8];
        for (int i = 0; i < 8; i++)
            b[i] = (unsigned char)((uint64_t)v >> (8 * i));
        fputc(0x8a, e->f); /* LONG1, 8 bytes two's complement */
        fputc(8, e->f);
        fwrite(b, 1, 8, e->f);
    }
}

/* Unsigned values (addresses, streams) that may pass 2^63 go through LONG1
 * with a ninth byte; JSON writes them as they are. */
static void unum(em *e, uint64_t v)
{
    if (v <= (uint64_t)INT64_MAX) {
        num(e, (int64_t)v);
    } else if (e->json) {
        sep(e);
        fprintf(e->f, "%" PRIu64, v);
    } else {
        fputc(0x8a, e->f);
        fputc(9, e->f);
        for (int i = 0; i < 8; i++)
            fputc((int)(unsigned char)(v >> (8 * i)), e->f);
        fputc(0, e->f);
    }
}

static void flt(em *e, double v)
{
    if (e->json) {
        sep(e);
        fprintf(e->f, "%.17g", v);
        return;
    }
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    fputc('G', e->f); /* BINFLOAT, big-endian */
    for (int i = 7; i >= 0; i--)
        fputc((int)(unsigned char)(bits >> (8 * i)), e->f);
}

static void boolean(em *e, bool v)
{
    if (e->json) {
        sep(e);
        fputs(v ? "true" : "false", e->f);
    } else {
        fputc(v ? 0x88 : 0x89, e->f); /* NEWTRUE, NEWFALSE */
    }
}

/* ---- stacks as frames ------------------------------------------------------------ */

static int sym_cmp(const void *x, const void *y)
{
    uintptr_t p = (uintptr_t)((const sym *)x)->addr, q = (uintptr_t)((const sym *)y)->addr;
    return p < q ? -1 : p > q;
}

/* Names every distinct address of the copy's stacks, once. */
static tc_status symbolize(em *e)
{
    const tc__hist_copy *c = e->c;
    size_t nf = c->nstacks ? c->stack_off[c->nstacks] : 0;
    e->syms = calloc(nf ? nf : 1, sizeof *e->syms);
    if (!e->syms)
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "out of host memory naming stack frames");
    for (size_t i = 0; i < nf; i++)
        e->syms[i].addr = c->frames[i];
    qsort(e->syms, nf, sizeof *e->syms, sym_cmp);
    size_t n = 0;
    for (size_t i = 0; i < nf; i++)
        if (n == 0 || e->syms[n - 1].addr != e->syms[i].addr)
            e->syms[n++] = e->syms[i];
    e->nsyms = n;
    Dl_info self;
    memset(&self, 0, sizeof self);
    (void)dladdr((void *)&tc__hist_record, &self);
    for (size_t i = 0; i < n; i++) {
        sym *y = &e->syms[i];
        Dl_info di;
        memset(&di, 0, sizeof di);
        bool found = dladdr(y->addr, &di) != 0;
        bool named = found && di.dli_sname;
        /* In the library: internal (hidden or tc__) frames are the allocator's. */
        y->own = found && self.dli_fbase && di.dli_fbase == self.dli_fbase &&
                 (!named || strncmp(di.dli_sname, "tc__", 4) == 0);
        y->sname = named ? di.dli_sname : NULL;
        if (!named)
            snprintf(y->name, sizeof y->name, "??+%#" PRIxPTR,
                     (uintptr_t)y->addr - (uintptr_t)(found ? di.dli_fbase : 0));
        y->file = found && di.dli_fname ? di.dli_fname : "??";
    }
    return TC_OK;
}

static const sym *sym_of(const em *e, void *addr)
{
    sym key = {.addr = addr};
    return bsearch(&key, e->syms, e->nsyms, sizeof key, sym_cmp);
}

static void frame(em *e, const char *name, const char *file)
{
    open_(e, true);
    key(e, "filename");
    str(e, file);
    key(e, "line");
    num(e, 0);
    key(e, "name");
    str(e, name);
    close_(e);
}

static void frames(em *e, uint32_t id)
{
    const tc__hist_copy *c = e->c;
    open_(e, false);
    if (c && id && id <= c->nstacks) {
        bool top = true;
        for (size_t i = c->stack_off[id - 1]; i < c->stack_off[id]; i++) {
            const sym *y = sym_of(e, c->frames[i]);
            if (!y || (top && y->own))
                continue;
            top = false;
            frame(e, y->sname ? y->sname : y->name, y->file);
        }
    }
    close_(e);
}

/* ---- the content -------------------------------------------------------------------- */

static void block(em *e, int device, const tc_memory_block_info *b)
{
    open_(e, true);
    key(e, "address");
    unum(e, b->address);
    key(e, "size");
    unum(e, b->size);
    key(e, "requested_size");
    unum(e, b->requested_size);
    key(e, "state");
    str(e, tc_memory_block_state_string(b->state));
    key(e, "frames");
    frames(e, b->state == TC_MEMORY_BLOCK_STATE_INACTIVE || !e->c
                  ? 0
                  : tc__hist_copy_live(e->c, device, 0, b->address));
    close_(e);
}

static void segment(em *e, const tc_memory_segment_info *s)
{
    open_(e, true);
    key(e, "device");
    num(e, s->device);
    key(e, "address");
    unum(e, s->address);
    key(e, "total_size");
    unum(e, s->total_size);
    key(e, "allocated_size");
    unum(e, s->allocated_size);
    key(e, "active_size");
    unum(e, s->active_size);
    key(e, "requested_size");
    unum(e, s->requested_size);
    key(e, "stream");
    unum(e, s->stream);
    key(e, "segment_type");
    str(e, tc_memory_segment_type_string(s->segment_type));
    key(e, "segment_pool_id");
    open_(e, false); /* PyTorch's is a (graph id, pool id) pair */
    num(e, 0);
    unum(e, s->segment_pool_id);
    close_(e);
    key(e, "is_expandable");
    boolean(e, s->is_expandable);
    key(e, "frames");
    frames(e, e->c ? tc__hist_copy_live(e->c, s->device, 1, s->address) : 0);
    key(e, "blocks");
    open_(e, false);
    for (size_t i = 0; i < s->num_blocks; i++)
        block(e, s->device, &s->blocks[i]);
    close_(e);
    close_(e);
}

static void event(em *e, const tc__hist_event *ev)
{
    open_(e, true);
    key(e, "action");
    str(e, tc__hist_action_name(ev->action));
    key(e, ev->action == TC__H_OOM ? "device_free" : "addr"); /* an OOM's addr: the free bytes */
    unum(e, ev->addr);
    key(e, "size");
    unum(e, ev->size);
    key(e, "requested_size");
    unum(e, ev->requested);
    key(e, "stream");
    unum(e, ev->stream);
    key(e, "pool_id");
    unum(e, ev->pool);
    key(e, "compile_context");
    str(e, TC__HIST_COMPILE_CONTEXT);
    key(e, "user_metadata");
    str(e, tc__hist_copy_meta(e->c, ev->meta));
    key(e, "time_us");
    unum(e, ev->time_us);
    key(e, "frames");
    frames(e, ev->stack);
    close_(e);
}

/* "roundup_power2_divisions" as PyTorch writes it: a dict of its 16
 * intervals keyed by their start in MiB ("1", "2", ... "32768"), each with
 * its number of divisions (0: unset). tcuda keeps the same 16 entries. */
static void divisions(em *e, const tc__alloc_config *cfg)
{
    char k[16];
    key(e, "roundup_power2_divisions");
    open_(e, true);
    for (int i = 0; i < TC__ROUNDUP_INTERVALS; i++) {
        snprintf(k, sizeof k, "%u", 1u << i);
        key(e, k);
        num(e, cfg->roundup_power2_divisions[i]);
    }
    close_(e);
}

/* PyTorch's annotation: its metadata (name, stage), then device and time. */
static void note(em *e, const tc__hist_note *n)
{
    open_(e, true);
    key(e, "name");
    str(e, n->name);
    key(e, "stage");
    str(e, n->start ? "START" : "END");
    key(e, "device");
    num(e, n->device);
    key(e, "time_us");
    unum(e, n->time_us);
    close_(e);
}

static void settings(em *e, const tc__alloc_config *cfg)
{
    const char *conf = tc__alloc_conf_env(NULL); /* or PyTorch's twin */
    open_(e, true);
    key(e, "PYTORCH_CUDA_ALLOC_CONF");
    str(e, conf ? conf : "");
    key(e, "max_split_size");
    num(e, cfg->max_split_size == SIZE_MAX ? -1 : (int64_t)cfg->max_split_size);
    key(e, "garbage_collection_threshold");
    flt(e, cfg->gc_threshold);
    key(e, "expandable_segments");
    boolean(e, cfg->expandable_segments);
    /* PyTorch's settings that tcuda accepts but has no switch for: what
     * tcuda does. Pinned memory is cudaHostAlloc'd by the calling thread
     * alone (memory/cuda/alloc_providers.c), never cudaHostRegister'd: one
     * thread, no host register (PyTorch's defaults). The caching allocator
     * keeps its mutex across cudaMalloc (tc__new_segment runs under a->mu):
     * the lock is not released. tcuda has no early reuse, inside a graph
     * capture, of blocks freed after record_stream: false, as PyTorch's
     * default. */
    key(e, "pinned_num_register_threads");
    num(e, 1);
    key(e, "release_lock_on_cudamalloc");
    boolean(e, false);
    key(e, "pinned_use_cuda_host_register");
    boolean(e, false);
    key(e, "graph_capture_record_stream_reuse");
    boolean(e, false);
    divisions(e, cfg);
    key(e, "no_caching");
    boolean(e, cfg->no_caching);
    key(e, "backend");
    str(e, cfg->backend ? "cudaMallocAsync" : "native");
    close_(e);
}

static void segments(em *e, const tc_memory_snapshot_info *snap)
{
    key(e, "segments");
    open_(e, false);
    for (size_t i = 0; i < snap->num_segments; i++)
        segment(e, &snap->segments[i]);
    close_(e);
}

static void content(em *e, const tc__hist_copy *c)
{
    open_(e, true);
    segments(e, &c->snap);
    key(e, "device_traces");
    open_(e, false);
    for (int d = 0; d < c->ndevices; d++) {
        open_(e, false);
        for (size_t i = 0; i < c->nev; i++)
            if (c->ev[i].device == d)
                event(e, &c->ev[i]);
        close_(e);
    }
    close_(e);
    key(e, "allocator_settings");
    settings(e, &c->cfg);
    key(e, "external_annotations");
    open_(e, false);
    for (size_t i = 0; i < c->nnotes; i++)
        note(e, &c->notes[i]);
    close_(e);
    close_(e);
}

/* Opens path, writes the header, the content (the history's when c, else
 * the plain snapshot's segments) and the trailer. */
static tc_status write_file(const char *path, bool json, const tc__hist_copy *c,
                            const tc_memory_snapshot_info *snap)
{
    em e = {.json = json, .c = c};
    if (c)
        TC_TRY(symbolize(&e));
    FILE *f = fopen(path, "wb");
    if (!f) {
        free(e.syms);
        return tc__fail(TC_ERROR_IO, "cannot open %s for writing: %s", path, strerror(errno));
    }
    e.f = f;
    if (!json)
        fwrite("\x80\x02", 1, 2, f); /* PROTO 2 */
    if (c) {
        content(&e, c);
    } else {
        open_(&e, true);
        segments(&e, snap);
        close_(&e);
    }
    fputs(json ? "\n" : ".", f); /* STOP */
    bool bad = ferror(f) != 0;
    free(e.syms);
    if (fclose(f) != 0 || bad)
        return tc__fail(TC_ERROR_IO, "writing %s failed: %s", path, strerror(errno));
    return TC_OK;
}

static tc_status dump(const char *path, bool json)
{
    TC_CHECK_ARG(path && *path, "the path is NULL or empty");
    tc__hist_copy c;
    TC_TRY(tc__hist_copy_take(&c));
    tc_status st = write_file(path, json, &c, NULL);
    tc__hist_copy_free(&c);
    return st;
}

tc_status tc_memory_dump_snapshot(const char *path)
{
    TC_API_BEGIN;
    return dump(path, false);
}

tc_status tc_memory_dump_snapshot_json(const char *path)
{
    TC_API_BEGIN;
    return dump(path, true);
}

/* A snapshot is plain data: writing one needs no GPU (either build). */
tc_status tc_memory_snapshot_write_json(const tc_memory_snapshot_info *snap, const char *path)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(snap && path && *path, "snapshot or path is NULL, or path is empty");
    return write_file(path, true, NULL, snap);
}
