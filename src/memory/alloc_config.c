/* TCUDA_ALLOC_CONF: parsing, and the size rounding it controls.
 *
 * The text comes from TCUDA_ALLOC_CONF or, when it is unset, from
 * PyTorch's PYTORCH_ALLOC_CONF or PYTORCH_CUDA_ALLOC_CONF
 * (tc__alloc_conf_env, src/base/env.c); messages name the variable read.
 *
 * The parser is strict: an unknown key or bad value is an error that names
 * it, and the output config is written only when the whole text parsed;
 * only keys of PyTorch's that tcuda lacks, in PyTorch's variables, are
 * skipped with a notice (pytorch_only below).
 * Items are separated by commas outside brackets, so a list value such as
 * roundup_power2_divisions:[256:1,512:2,>:8] is one item. */
#include <ctype.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/env.h"
#include "base/internal.h"
#include "alloc_internal.h"

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

static bool pow2(uint64_t u) { return u && (u & (u - 1)) == 0; }

static unsigned log2u(uint64_t u) { return 63u - (unsigned)__builtin_clzll(u); }

/* roundup_power2_divisions, as PyTorch's parser reads it: one power of two
 * for every interval, or a list "[SIZE_MB:DIV,...,>:DIV]" where SIZE_MB
 * names the interval [SIZE_MB, 2 * SIZE_MB) MiB (from 1 MiB; 32768 and up
 * name the last), the first entry also fills every interval below it,
 * intervals between two entries keep 0, and ">" fills every interval above
 * the last one given. Stricter than PyTorch: sizes must increase and ">"
 * comes last. */
static tc_status parse_divisions(const char *var, const char *v,
                                 unsigned char out[TC__ROUNDUP_INTERVALS])
{
    uint64_t u;
    if (*v != '[') {
        TC_CHECK_ARG(parse_u64(v, &u) && u <= 64 && pow2(u),
                     "%s: roundup_power2_divisions '%s' must be a power of two "
                     "from 1 to 64, or a list such as [256:1,512:2,>:8]",
                     var, v);
        memset(out, (int)u, TC__ROUNDUP_INTERVALS);
        return TC_OK;
    }
    size_t n = strlen(v);
    TC_CHECK_ARG(n >= 2 && v[n - 1] == ']',
                 "%s: roundup_power2_divisions list '%s' lacks its closing ']'", var, v);
    char buf[1024];
    memcpy(buf, v + 1, n - 2);
    buf[n - 2] = '\0';
    unsigned last = 0; /* the interval of the last entry */
    uint64_t prev = 0; /* its size in MiB; 0: no entry yet */
    bool rest = false, any = false;
    memset(out, 0, TC__ROUNDUP_INTERVALS);
    for (char *save = NULL, *it = strtok_r(buf, ",", &save); it; it = strtok_r(NULL, ",", &save)) {
        while (*it == ' ')
            it++;
        char *colon = strchr(it, ':');
        TC_CHECK_ARG(colon && !rest,
                     "%s: roundup_power2_divisions entry '%s' "
                     "must be SIZE_MB:DIVISIONS (or >:DIVISIONS, last)",
                     var, it);
        *colon = '\0';
        uint64_t d;
        TC_CHECK_ARG(parse_u64(colon + 1, &d) && d <= 64 && (d == 0 || pow2(d)),
                     "%s: roundup_power2_divisions for '%s' is '%s', not 0 or a power "
                     "of two up to 64",
                     var, it, colon + 1);
        any = true;
        if (!strcmp(it, ">")) {
            rest = true;
            for (unsigned i = last + 1; i < TC__ROUNDUP_INTERVALS; i++)
                out[i] = (unsigned char)d;
            continue;
        }
        TC_CHECK_ARG(parse_u64(it, &u) && pow2(u) && u < ((uint64_t)1 << 40),
                     "%s: roundup_power2_divisions size '%s' must be a power "
                     "of two (MiB)",
                     var, it);
        TC_CHECK_ARG(u > prev,
                     "%s: roundup_power2_divisions sizes must "
                     "increase ('%s' comes after a larger one)",
                     var, it);
        unsigned idx = log2u(u) < TC__ROUNDUP_INTERVALS ? log2u(u) : TC__ROUNDUP_INTERVALS - 1;
        if (!prev) /* the first entry covers every smaller interval too */
            memset(out, (int)d, idx);
        out[idx] = (unsigned char)d;
        last = idx;
        prev = u;
    }
    TC_CHECK_ARG(any, "%s: roundup_power2_divisions list '%s' is empty", var, v);
    return TC_OK;
}

/* Keys of PyTorch's allocator settings that tcuda has no setting for. In
 * a PYTORCH_* variable each is skipped, with one notice per process: a
 * program run with PyTorch's settings still starts. In TCUDA_ALLOC_CONF
 * they are unknown keys like any other. */
static const char *const pytorch_only[] = {
    "max_non_split_rounding_mb",      "release_lock_on_cudamalloc",
    "pinned_use_cuda_host_register",  "pinned_use_hip_host_register",
    "pinned_num_register_threads",    "pinned_use_background_threads",
    "pinned_reserve_segment_size_mb", "graph_capture_record_stream_reuse",
    "per_process_memory_fraction"};
enum { N_PYTORCH_ONLY = sizeof pytorch_only / sizeof *pytorch_only };

static bool skip_pytorch_only(const char *var, const char *k)
{
    static atomic_bool told[N_PYTORCH_ONLY];
    if (strncmp(var, "PYTORCH_", 8) != 0)
        return false;
    for (int i = 0; i < N_PYTORCH_ONLY; i++)
        if (!strcmp(k, pytorch_only[i])) {
            if (!atomic_exchange(&told[i], true))
                tc__warn("%s: '%s' is a setting of PyTorch's allocator that tcuda does not "
                         "have; it is ignored",
                         var, k);
            return true;
        }
    return false;
}

static tc_status parse_item(const char *var, char *item, tc__alloc_config *c)
{
    char *colon = strchr(item, ':');
    TC_CHECK_ARG(colon, "%s: '%s' is not key:value", var, item);
    *colon = '\0';
    const char *k = item, *v = colon + 1;
    uint64_t u;
    bool b;
    if (!strcmp(k, "backend")) {
        if (!strcmp(v, "native"))
            c->backend = 0;
        else if (!strcmp(v, "cudaMallocAsync"))
            c->backend = 1;
        else
            return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                            "%s: backend '%s' is "
                            "unknown (native or cudaMallocAsync)",
                            var, v);
    } else if (!strcmp(k, "max_split_size_mb")) {
        TC_CHECK_ARG(parse_u64(v, &u) && u > 1 && u < ((uint64_t)1 << 40),
                     "%s: max_split_size_mb '%s' must be an integer > 1 (MiB)", var, v);
        c->max_split_size = (size_t)u << 20;
    } else if (!strcmp(k, "roundup_power2_divisions")) {
        TC_TRY(parse_divisions(var, v, c->roundup_power2_divisions));
    } else if (!strcmp(k, "garbage_collection_threshold")) {
        char *end;
        errno = 0;
        double d = strtod(v, &end);
        TC_CHECK_ARG(*v && !*end && !errno && d > 0.0 && d < 1.0,
                     "%s: garbage_collection_threshold '%s' must be a number "
                     "in (0, 1)",
                     var, v);
        c->gc_threshold = d;
    } else if (!strcmp(k, "expandable_segments")) {
        TC_CHECK_ARG(parse_bool(v, &b),
                     "%s: expandable_segments '%s' must "
                     "be True or False",
                     var, v);
        c->expandable_segments = b;
    } else if (!skip_pytorch_only(var, k)) {
        return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                        "%s: unknown key '%s' (known: backend, "
                        "max_split_size_mb, roundup_power2_divisions, "
                        "garbage_collection_threshold, expandable_segments)",
                        var, k);
    }
    return TC_OK;
}

tc_status tc__alloc_config_parse(const char *text, tc__alloc_config *cfg)
{
    return tc__alloc_config_parse_named("TCUDA_ALLOC_CONF", text, cfg);
}

tc_status tc__alloc_config_parse_named(const char *var, const char *text, tc__alloc_config *cfg)
{
    tc__alloc_config c = *cfg;
    if (!text)
        return TC_OK;
    char buf[1024];
    TC_CHECK_ARG(strlen(text) < sizeof buf, "%s is longer than %zu characters", var,
                 sizeof buf - 1);
    strcpy(buf, text);
    for (char *item = buf; *item;) {
        char *end = item;
        int depth = 0;
        for (; *end && (depth > 0 || *end != ','); end++)
            depth += (*end == '[') - (*end == ']');
        bool last = !*end;
        *end = '\0';
        while (*item == ' ')
            item++;
        if (*item)
            TC_TRY(parse_item(var, item, &c));
        if (last)
            break;
        item = end + 1;
    }
    *cfg = c;
    return TC_OK;
}

size_t tc__round_size(const tc__alloc_config *cfg, size_t size)
{
    if (size < TC__MIN_BLOCK)
        return TC__MIN_BLOCK;
    /* PyTorch's lookup: the interval of the power of two at or below size */
    unsigned lg = 63u - (unsigned)__builtin_clzll((unsigned long long)size);
    unsigned idx = lg > 20 ? lg - 20 : 0;
    unsigned div =
        cfg->roundup_power2_divisions[idx < TC__ROUNDUP_INTERVALS ? idx
                                                                  : TC__ROUNDUP_INTERVALS - 1];
    if (div > 1 && size > TC__MIN_BLOCK * div) {
        size_t floor2 = (size_t)1 << lg;
        if (floor2 == size)
            return size;
        size_t step = floor2 / div;
        if (step < TC__MIN_BLOCK)
            step = TC__MIN_BLOCK;
        return (size + step - 1) / step * step;
    }
    return (size + TC__MIN_BLOCK - 1) / TC__MIN_BLOCK * TC__MIN_BLOCK;
}

tc_status tc__alloc_config_check(const char *text)
{
    tc__alloc_config cfg;
    tc__alloc_config_default(&cfg);
    return tc__alloc_config_parse(text, &cfg);
}

tc_status tc__alloc_config_parse_env(tc__alloc_config *cfg)
{
    const char *var = NULL;
    const char *text = tc__alloc_conf_env(&var);
    return tc__alloc_config_parse_named(var, text, cfg);
}

tc_status tc__alloc_config_check_env(void)
{
    tc__alloc_config cfg;
    tc__alloc_config_default(&cfg);
    return tc__alloc_config_parse_env(&cfg);
}
