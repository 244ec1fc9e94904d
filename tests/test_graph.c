/* CUDA graphs (include/tcuda/graph.h).
 *
 * Everywhere: the allocator's rules while a private pool is active, on the
 * plain-host provider. Without a GPU (or without CUDA in the build): every graph call answers
 * TC_ERROR_NO_DEVICE, or for handles TC_ERROR_INVALID_ARGUMENT (NULL) and
 * TC_ERROR_INVALID_HANDLE (garbage), with a message naming the call; then
 * the test exits 77. On a GPU: bad inputs (destroyed handles, double destroy,
 * capture twice, replay before capture, end without begin, the default
 * stream); replay equals an independent double-precision reference for
 * element-wise ops, a reduction and a matmul, on new inputs each replay;
 * allocations in capture come from the graph's pool (snapshot, reuse inside
 * the pool, never handed out outside it until reset); two graphs sharing a
 * pool; random fills differ per replay and equal the CPU generator's draws at
 * the same offsets, and the offset advances by the captured amount; every
 * synchronizing call in capture fails with a message naming it and leaves an
 * empty, reusable graph; the three capture modes across threads;
 * tc_graph_update in place and by instantiation; the guard form; graphed
 * callables sharing a pool; debug dumps. Run it under compute-sanitizer
 * memcheck and racecheck too. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "memory/alloc.h"
#include "graph_check.h"
#include "tc_test.h"

/* Returns a failing status from the test's own fn callbacks. */
#define TRY(call)                                                                                  \
    do {                                                                                           \
        tc_status try_st_ = (call);                                                                \
        if (try_st_ != TC_OK)                                                                      \
            return try_st_;                                                                        \
    } while (0)

/* What a build without CUDA, or a machine without a GPU, answers. */
static void check_without_gpu(void)
{
    tc_graph *g = (tc_graph *)0x1;
    CHECK_STATUS(tc_graph_create(NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_graph_create(&g), TC_ERROR_NO_DEVICE);
    CHECK(says("tc_graph_create", "") && g == (tc_graph *)0x1);
    tc_graph_pool_id id = {42};
    CHECK_STATUS(tc_graph_pool_handle(&id), TC_ERROR_NO_DEVICE);
    CHECK(says("tc_graph_pool_handle", "") && id.id == 42);
    CHECK_STATUS(tc_graph_pool_handle(NULL), TC_ERROR_INVALID_ARGUMENT);
    tc_graphed_callable *c = (tc_graphed_callable *)0x1;
    CHECK_STATUS(tc_make_graphed_callable(nothing, NULL, 3, &c), TC_ERROR_NO_DEVICE);
    CHECK(says("tc_make_graphed_callable", "") && c == (tc_graphed_callable *)0x1);
    CHECK_STATUS(tc_make_graphed_callable(NULL, NULL, 3, &c), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_make_graphed_callable(nothing, NULL, -1, &c), TC_ERROR_INVALID_ARGUMENT);
    tc_graph_fn fns[2] = {nothing, nothing};
    CHECK_STATUS(tc_make_graphed_callables(fns, NULL, 2, 1, &c), TC_ERROR_NO_DEVICE);
    CHECK_STATUS(tc_make_graphed_callables(fns, NULL, 0, 1, &c), TC_ERROR_INVALID_ARGUMENT);
    CHECK(!tc_is_current_stream_capturing());

    tc_graph *junk = tc_test_garbage(256);
    tc_graph_pool_id none = {0};
    tc_graph *hs[2] = {NULL, junk};
    for (int i = 0; i < 2; i++) {
        tc_status want = i == 0 ? TC_ERROR_INVALID_ARGUMENT : TC_ERROR_INVALID_HANDLE;
        const char *what = i == 0 ? "tc_graph is NULL" : "not a live tc_graph";
        tc_graph *h = hs[i];
        CHECK_STATUS(tc_graph_destroy(h), want);
        CHECK(says("tc_graph_destroy", what));
        CHECK_STATUS(tc_graph_capture_begin(h, none, NULL, TC_CAPTURE_MODE_GLOBAL), want);
        CHECK(says("tc_graph_capture_begin", what));
        CHECK_STATUS(tc_graph_capture_end(h), want);
        CHECK_STATUS(tc_graph_replay(h), want);
        CHECK(says("tc_graph_replay", what));
        CHECK_STATUS(tc_graph_reset(h), want);
        CHECK_STATUS(tc_graph_pool(h, &id), want);
        CHECK_STATUS(tc_graph_debug_dump(h, "/tmp/x.dot"), want);
        tc_graph_update_result how;
        CHECK_STATUS(tc_graph_update(h, nothing, NULL, &how), want);
        tc_graph_capture_guard gd = tc_graph_capture_guard_enter(h, none, NULL,
                                                                 TC_CAPTURE_MODE_GLOBAL);
        CHECK(gd.status == want && gd.graph == NULL);
        CHECK(says("tc_graph_capture_guard_enter", what));
        CHECK(tc_graph_capture_guard_exit(&gd) == want);
    }
    tc_graphed_callable *cj = tc_test_garbage(256);
    CHECK_STATUS(tc_graphed_callable_call(NULL), TC_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(tc_graphed_callable_call(cj), TC_ERROR_INVALID_HANDLE);
    CHECK(says("tc_graphed_callable_call", "not a live tc_graphed_callable"));
    CHECK_STATUS(tc_graphed_callable_destroy(cj), TC_ERROR_INVALID_HANDLE);
    CHECK(tc_graphed_callable_graph(cj) == NULL && tc_graphed_callable_graph(NULL) == NULL);
    free(cj);
    free(junk);
}

/* The allocator's rules while a graph's private pool is active, on the
 * plain-host provider (no GPU): nothing is given back (that would
 * synchronize and break the capture), an allocation that does not fit fails
 * without emptying the cache, the pool's blocks are not handed to the
 * default pool, and the pool's memory goes once it is released. */
static void check_pool_rules_on_host(void)
{
    tc__host_provider_ctx hctx;
    memset(&hctx, 0, sizeof hctx);
    hctx.capacity = (size_t)6 << 20;
    tc__seg_provider prov;
    tc__host_provider_init(&prov, &hctx);
    tc__alloc_config cfg;
    tc__alloc_config_default(&cfg);
    tc__allocator *a = NULL;
    CHECK_OK(tc__alloc_create(&prov, &cfg, 0, &a));
    if (!a)
        return;
    const size_t MiB = (size_t)1 << 20;
    void *d, *p, *big = NULL, *q;
    CHECK_OK(tc__alloc_malloc(a, MiB, 2, &d));  /* a 2 MiB segment, default pool */
    CHECK_OK(tc__alloc_free(a, d));             /* wholly free, cached */
    CHECK_OK(tc__alloc_begin_pool(a, 9, 1));    /* "capture" on stream 1 */
    CHECK_OK(tc__alloc_malloc(a, MiB, 1, &p));  /* a new segment for the pool */
    CHECK(hctx.frees == 0 && hctx.allocs == 2); /* the cached one was kept */
    CHECK_STATUS(tc__alloc_malloc(a, 3 * MiB, 1, &big), TC_ERROR_OUT_OF_MEMORY);
    CHECK(big == NULL && hctx.frees == 0); /* no emptying of the cache in capture */
    CHECK_OK(tc__alloc_end_pool(a, 1));
    CHECK_OK(tc__alloc_free(a, p));
    CHECK_OK(tc__alloc_malloc(a, MiB, 1, &q)); /* default pool again: not p */
    CHECK(q != p);
    CHECK_OK(tc__alloc_free(a, q));
    int64_t frees = hctx.frees;
    CHECK_OK(tc__alloc_release_pool(a, 9)); /* the pool's segment goes */
    CHECK(hctx.frees == frees + 1);
    char why[256];
    CHECK(tc__alloc_check(a, why, sizeof why) == 0);
    tc__alloc_destroy(a);
}

#if defined(TCUDA_HAVE_CUDA)

#define CUDA0 ((tc_device){TC_CUDA, 0})
#define CPU ((tc_device){TC_CPU, -1})

/* A float32 tensor on `dev` with random values, which *host receives
 * (caller frees). */
static tc_tensor *random_tensor(int ndim, const int64_t *sizes, tc_device dev, float **host)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= sizes[i];
    float *v = malloc(sizeof(float) * (size_t)n);
    fill_random(v, n);
    tc_tensor *t = NULL;
    CHECK_OK(tc_tensor_from_data(v, ndim, sizes, TC_FLOAT32, dev, &t));
    if (host)
        *host = v;
    else
        free(v);
    return t;
}

/* ---- element-wise ops, a reduction and a matmul -------------------------- */

enum { N = 1000, M = 32, K = 48, P = 16 };

typedef struct work {
    tc_tensor *x, *a, *b; /* static inputs */
    tc_tensor *y, *s, *m; /* outputs, made by each call */
} work;

/* y = sigmoid(relu(x*x - x)), s = sum(y), m = a @ b */
static tc_status run_work(void *ctx)
{
    work *w = ctx;
    tc_tensor *t1 = NULL, *t2 = NULL, *t3 = NULL, *y = NULL, *s = NULL, *m = NULL;
    tc_status st = tc_tensor_mul(w->x, w->x, &t1);
    if (st == TC_OK)
        st = tc_tensor_sub(t1, w->x, &t2);
    if (st == TC_OK)
        st = tc_tensor_relu(t2, &t3);
    if (st == TC_OK)
        st = tc_tensor_sigmoid(t3, &y);
    if (st == TC_OK)
        st = tc_tensor_sum(y, 0, false, &s);
    if (st == TC_OK)
        st = tc_tensor_matmul(w->a, w->b, &m);
    tc_tensor_release(t1);
    tc_tensor_release(t2);
    tc_tensor_release(t3);
    if (st != TC_OK) {
        tc_tensor_release(y);
        tc_tensor_release(s);
        tc_tensor_release(m);
        return st;
    }
    set_out(&w->y, y);
    set_out(&w->s, s);
    set_out(&w->m, m);
    return TC_OK;
}

/* Checks w's outputs against a double reference from the host inputs. */
static void check_work(const work *w, const float *x, const float *a, const float *b)
{
    double *y = tc_test_values(w->y), *s = tc_test_values(w->s), *m = tc_test_values(w->m);
    double sum = 0, worst = 0;
    for (int i = 0; i < N; i++) {
        double v = (double)x[i] * x[i] - x[i];
        v = 1.0 / (1.0 + exp(-(v > 0 ? v : 0)));
        sum += v;
        worst = fmax(worst, fabs(y[i] - v));
    }
    CHECK(worst < 1e-5);
    CHECK(fabs(s[0] - sum) < 1e-3 + 1e-5 * sum);
    worst = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < P; j++) {
            double v = 0;
            for (int k = 0; k < K; k++)
                v += (double)a[i * K + k] * b[k * P + j];
            worst = fmax(worst, fabs(m[i * P + j] - v));
        }
    CHECK(worst < 1e-3); /* TF32 is off: float32 accumulation */
    free(y);
    free(s);
    free(m);
}

static void release_work(work *w)
{
    tc_tensor *all[] = {w->x, w->a, w->b, w->y, w->s, w->m};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i])
            tc_tensor_release(all[i]);
    memset(w, 0, sizeof *w);
}

static void test_replay_matches_eager(void)
{
    float *x, *a, *b;
    work w = {0};
    w.x = random_tensor(1, (int64_t[]){N}, CUDA0, &x);
    w.a = random_tensor(2, (int64_t[]){M, K}, CUDA0, &a);
    w.b = random_tensor(2, (int64_t[]){K, P}, CUDA0, &b);
    CHECK_OK(run_work(&w)); /* warm up: cuBLAS makes its handle and workspace */
    check_work(&w, x, a, b);
    CHECK_OK(tc_synchronize(-1));

    tc_graph *g;
    CHECK_OK(tc_graph_create(&g));
    tc_stream *def = tc_test_current_stream(-1);
    tc_graph_pool_id none = {0};
    tc_graph_capture_guard gd = tc_graph_capture_guard_enter(g, none, NULL, TC_CAPTURE_MODE_GLOBAL);
    CHECK_OK(gd.status);
    CHECK(tc_test_current_stream(-1) != def && tc_is_current_stream_capturing());
    CHECK_OK(run_work(&w));
    CHECK_OK(tc_graph_capture_guard_exit(&gd));
    CHECK(tc_test_current_stream(-1) == def && !tc_is_current_stream_capturing());
    for (int rep = 0; rep < 3; rep++) {
        refill(w.x, x);
        refill(w.a, a);
        refill(w.b, b);
        CHECK_OK(tc_graph_replay(g));
        check_work(&w, x, a, b);
    }
    /* the DOT dump */
    const char *path = "/tmp/tcuda_test_graph.dot";
    CHECK_OK(tc_graph_debug_dump(g, path));
    FILE *f = fopen(path, "r");
    char head[16] = "";
    CHECK(f && fgets(head, sizeof head, f) && strncmp(head, "digraph", 7) == 0);
    if (f)
        fclose(f);
    remove(path);
    CHECK_STATUS(tc_graph_debug_dump(g, "/nonexistent-dir/x.dot"), TC_ERROR_IO);
    CHECK(says("tc_graph_debug_dump", "/nonexistent-dir/x.dot"));

    /* reset, capture again into the same graph object */
    CHECK_OK(tc_graph_reset(g));
    CHECK_STATUS(tc_graph_replay(g), TC_ERROR_INVALID_STATE);
    gd = tc_graph_capture_guard_enter(g, none, NULL, TC_CAPTURE_MODE_GLOBAL);
    CHECK_OK(gd.status);
    CHECK_OK(run_work(&w));
    CHECK_OK(tc_graph_capture_guard_exit(&gd));
    refill(w.x, x);
    CHECK_OK(tc_graph_replay(g));
    check_work(&w, x, a, b);
    CHECK_OK(tc_graph_destroy(g));
    release_work(&w);
    free(x);
    free(a);
    free(b);
}

/* ---- bad inputs on a GPU -------------------------------------------------- */

static void test_bad_inputs(void)
{
    tc_graph *g;
    tc_graph_pool_id none = {0}, id = {7};
    CHECK_OK(tc_graph_create(&g));
    CHECK_STATUS(tc_graph_replay(g), TC_ERROR_INVALID_STATE);
    CHECK(says("tc_graph_replay", "nothing was captured"));
    CHECK_STATUS(tc_graph_capture_end(g), TC_ERROR_INVALID_STATE);
    CHECK(says("tc_graph_capture_end", "no capture"));
    CHECK_STATUS(tc_graph_pool(g, &id), TC_ERROR_INVALID_STATE);
    CHECK(id.id == 7);
    CHECK_STATUS(tc_graph_debug_dump(g, "/tmp/x.dot"), TC_ERROR_INVALID_STATE);
    CHECK_OK(tc_graph_reset(g)); /* empty: a no-op */
    /* the default stream is CUDA's legacy stream: refused */
    CHECK_STATUS(tc_graph_capture_begin(g, none, NULL, TC_CAPTURE_MODE_GLOBAL),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("tc_graph_capture_begin", "default stream"));
    tc_stream *s;
    CHECK_OK(tc_stream_create(-1, 0, &s));
    CHECK_STATUS(tc_graph_capture_begin(g, none, s, (tc_capture_mode)7), TC_ERROR_INVALID_ARGUMENT);
    tc_graph_pool_id future = {UINT64_MAX};
    CHECK_STATUS(tc_graph_capture_begin(g, future, s, TC_CAPTURE_MODE_GLOBAL),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK(!tc_is_current_stream_capturing());
    CHECK_OK(tc_graph_capture_begin(g, none, s, TC_CAPTURE_MODE_GLOBAL));
    tc_stream_guard sg = tc_stream_guard_enter(s);
    CHECK(tc_is_current_stream_capturing());
    tc_stream_guard_exit(&sg);
    CHECK(!tc_is_current_stream_capturing()); /* the default stream is not capturing */
    /* capture twice: the same graph, and another graph on the same stream */
    CHECK_STATUS(tc_graph_capture_begin(g, none, s, TC_CAPTURE_MODE_GLOBAL),
                 TC_ERROR_INVALID_STATE);
    CHECK(says("tc_graph_capture_begin", "underway"));
    tc_graph *g2;
    CHECK_OK(tc_graph_create(&g2));
    CHECK_STATUS(tc_graph_capture_begin(g2, none, s, TC_CAPTURE_MODE_GLOBAL),
                 TC_ERROR_INVALID_ARGUMENT);
    CHECK(says("tc_graph_capture_begin", "already capturing"));
    CHECK_STATUS(tc_graph_replay(g), TC_ERROR_INVALID_STATE);
    CHECK(says("tc_graph_replay", "still underway"));
    CHECK_STATUS(tc_graph_reset(g), TC_ERROR_INVALID_STATE);
    tc_graph_pool_id pool = {0};
    CHECK_OK(tc_graph_pool(g, &pool));
    CHECK(pool.id != 0);
    CHECK_OK(tc_graph_capture_end(g)); /* an empty capture is fine */
    CHECK_OK(tc_graph_replay(g));
    CHECK_STATUS(tc_graph_capture_begin(g, none, s, TC_CAPTURE_MODE_GLOBAL),
                 TC_ERROR_INVALID_STATE);
    CHECK(says("tc_graph_capture_begin", "tc_graph_reset"));
    CHECK_OK(tc_synchronize(-1));
    /* destroyed handles, double destroy */
    CHECK_OK(tc_graph_destroy(g));
    CHECK_STATUS(tc_graph_destroy(g), TC_ERROR_INVALID_HANDLE);
    CHECK(says("tc_graph_destroy", "already destroyed"));
    CHECK_STATUS(tc_graph_replay(g), TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_graph_capture_begin(g, none, s, TC_CAPTURE_MODE_GLOBAL),
                 TC_ERROR_INVALID_HANDLE);
    CHECK_STATUS(tc_graph_pool(g, &pool), TC_ERROR_INVALID_HANDLE);
    /* destroying a graph in capture ends and discards the capture */
    CHECK_OK(tc_graph_capture_begin(g2, none, s, TC_CAPTURE_MODE_GLOBAL));
    CHECK_OK(tc_graph_destroy(g2));
    sg = tc_stream_guard_enter(s);
    CHECK(!tc_is_current_stream_capturing());
    tc_stream_guard_exit(&sg);
    CHECK_OK(tc_stream_synchronize(s)); /* nothing is capturing any more */
    CHECK_OK(tc_stream_destroy(s));
}

/* ---- memory ------------------------------------------------------------- */

/* The snapshot's pool id of the segment holding p (0: default pool, -1: none). */
static int64_t pool_of(const void *p)
{
    tc_memory_snapshot_info *snap;
    int64_t id = -1;
    CHECK_OK(tc_memory_snapshot(&snap));
    for (size_t i = 0; i < snap->num_segments; i++) {
        const tc_memory_segment_info *s = &snap->segments[i];
        if ((uintptr_t)p >= s->address && (uintptr_t)p < s->address + s->total_size)
            id = (int64_t)s->segment_pool_id;
    }
    CHECK_OK(tc_memory_snapshot_destroy(snap));
    return id;
}

static void test_memory(void)
{
    tc_stream *s;
    CHECK_OK(tc_stream_create(-1, 0, &s));
    tc_graph *g;
    CHECK_OK(tc_graph_create(&g));
    tc_graph_pool_id none = {0}, pool;
    size_t before = tc_test_bytes(tc_memory_allocated, -1);
    CHECK_OK(tc_graph_capture_begin(g, none, s, TC_CAPTURE_MODE_GLOBAL));
    CHECK_OK(tc_graph_pool(g, &pool));
    void *p1 = NULL, *p2 = NULL, *keep = NULL;
    CHECK_OK(tc_caching_allocator_alloc(4096, -1, s, &p1));
    CHECK_OK(tc_caching_allocator_delete(p1)); /* freed in capture: reused in the pool */
    CHECK_OK(tc_caching_allocator_alloc(4096, -1, s, &p2));
    CHECK(p2 == p1);
    CHECK_OK(tc_caching_allocator_alloc(1 << 20, -1, s, &keep));
    tc_stream_guard sg = tc_stream_guard_enter(s);
    tc_tensor *t = NULL; /* tensor storage made during capture */
    CHECK_OK(tc_tensor_zeros(1, (int64_t[]){1000}, TC_FLOAT32, CUDA0, &t));
    tc_stream_guard_exit(&sg);
    CHECK_OK(tc_graph_capture_end(g));
    CHECK(tc_test_bytes(tc_memory_allocated, -1) >= before + 4096 + (1 << 20) + 4000);
    CHECK(pool_of(p2) == (int64_t)pool.id && pool_of(keep) == (int64_t)pool.id);
    CHECK(pool_of(tc_tensor_data_ptr(t)) == (int64_t)pool.id);
    /* freed after capture, pool memory is not handed out outside the pool */
    CHECK_OK(tc_caching_allocator_delete(p2));
    tc_tensor_release(t);
    void *q[4];
    for (int i = 0; i < 4; i++) {
        CHECK_OK(tc_caching_allocator_alloc(4096, -1, i % 2 ? s : NULL, &q[i]));
        CHECK(q[i] != p2 && pool_of(q[i]) == 0);
    }
    for (int i = 0; i < 4; i++)
        CHECK_OK(tc_caching_allocator_delete(q[i]));
    CHECK_OK(tc_graph_replay(g));
    CHECK_OK(tc_synchronize(-1));
    /* reset: the pool is released; once `keep` is freed its segment is
     * cached until empty_cache gives it back (as PyTorch's freeable graph
     * pools: freeing it at once would make the host wait for the GPU) */
    CHECK_OK(tc_graph_reset(g));
    CHECK(pool_of(keep) == (int64_t)pool.id);
    CHECK_OK(tc_caching_allocator_delete(keep));
    CHECK_OK(tc_empty_cache());
    CHECK(pool_of(keep) == -1);
    CHECK_OK(tc_graph_destroy(g));
    CHECK_OK(tc_stream_destroy(s));
}

/* Two graphs in one pool, captured and replayed in order: out2 = (x+1)*x. */
typedef struct chain {
    tc_tensor *x, *one, *out1, *out2;
} chain;

static tc_status chain1(void *ctx)
{
    chain *c = ctx;
    tc_tensor *t;
    tc_status st = tc_tensor_add(c->x, c->one, &t);
    if (st == TC_OK)
        set_out(&c->out1, t);
    return st;
}

static tc_status chain2(void *ctx)
{
    chain *c = ctx;
    tc_tensor *t, *u;
    tc_status st = tc_tensor_mul(c->out1, c->x, &t); /* a temporary, freed in capture */
    if (st != TC_OK)
        return st;
    st = tc_tensor_neg(t, &u);
    tc_tensor_release(t);
    if (st == TC_OK) {
        tc_tensor *v;
        st = tc_tensor_neg(u, &v);
        tc_tensor_release(u);
        if (st == TC_OK)
            set_out(&c->out2, v);
    }
    return st;
}

static void check_chain(const chain *c, const float *x)
{
    double *o = tc_test_values(c->out2);
    double worst = 0;
    for (int i = 0; i < N; i++)
        worst = fmax(worst, fabs(o[i] - ((double)x[i] + 1) * x[i]));
    CHECK(worst < 1e-5);
    free(o);
}

static void test_shared_pool(void)
{
    float *x;
    chain c = {0};
    c.x = random_tensor(1, (int64_t[]){N}, CUDA0, &x);
    CHECK_OK(tc_tensor_ones(0, NULL, TC_FLOAT32, CUDA0, &c.one));
    tc_graph_pool_id pool = {0}, p1, p2;
    CHECK_OK(tc_graph_pool_handle(&pool));
    tc_graph *g1, *g2;
    CHECK_OK(tc_graph_create(&g1));
    CHECK_OK(tc_graph_create(&g2));
    tc_graph_capture_guard gd = tc_graph_capture_guard_enter(g1, pool, NULL,
                                                             TC_CAPTURE_MODE_GLOBAL);
    CHECK_OK(gd.status);
    CHECK_OK(chain1(&c));
    CHECK_OK(tc_graph_capture_guard_exit(&gd));
    gd = tc_graph_capture_guard_enter(g2, pool, NULL, TC_CAPTURE_MODE_GLOBAL);
    CHECK_OK(gd.status);
    CHECK_OK(chain2(&c));
    CHECK_OK(tc_graph_capture_guard_exit(&gd));
    CHECK_OK(tc_graph_pool(g1, &p1));
    CHECK_OK(tc_graph_pool(g2, &p2));
    CHECK(p1.id == pool.id && p2.id == pool.id);
    CHECK(pool_of(tc_tensor_data_ptr(c.out1)) == (int64_t)pool.id);
    CHECK(pool_of(tc_tensor_data_ptr(c.out2)) == (int64_t)pool.id);
    for (int rep = 0; rep < 3; rep++) {
        refill(c.x, x);
        CHECK_OK(tc_graph_replay(g1));
        CHECK_OK(tc_graph_replay(g2));
        check_chain(&c, x);
    }
    /* resetting one keeps the pool for the other */
    CHECK_OK(tc_graph_reset(g1));
    refill(c.x, x);
    CHECK_OK(tc_graph_replay(g2)); /* out1 still holds the last g1 result */
    CHECK_OK(tc_synchronize(-1));
    CHECK_OK(tc_graph_destroy(g1));
    CHECK_OK(tc_graph_destroy(g2));
    /* the handle works again after every graph using it is gone */
    CHECK_OK(tc_graph_create(&g1));
    gd = tc_graph_capture_guard_enter(g1, pool, NULL, TC_CAPTURE_MODE_GLOBAL);
    CHECK_OK(gd.status);
    CHECK_OK(chain1(&c));
    CHECK_OK(tc_graph_capture_guard_exit(&gd));
    CHECK_OK(tc_graph_replay(g1));
    CHECK_OK(tc_graph_destroy(g1));
    tc_tensor *all[] = {c.x, c.one, c.out1, c.out2};
    for (int i = 0; i < 4; i++)
        tc_tensor_release(all[i]);
    free(x);
}

/* ---- random numbers ------------------------------------------------------ */

enum { R = 4099 }; /* not a multiple of 4: the blocks round up */

typedef struct rnd {
    tc_tensor *u, *n;
} rnd;

static tc_status draw(void *ctx)
{
    rnd *r = ctx;
    tc_status st = tc_tensor_uniform_(r->u, -1, 3, NULL);
    return st == TC_OK ? tc_tensor_normal_(r->n, 0.5, 2, NULL) : st;
}

static void test_random(void)
{
    rnd r = {0};
    CHECK_OK(tc_tensor_empty(1, (int64_t[]){R}, TC_FLOAT32, CUDA0, &r.u));
    CHECK_OK(tc_tensor_empty(1, (int64_t[]){R}, TC_FLOAT32, CUDA0, &r.n));
    CHECK_OK(tc_manual_seed(tc_test_rand()));
    tc_generator *gpu;
    CHECK_OK(tc_default_generator(CUDA0, &gpu));
    CHECK_OK(draw(&r)); /* eager, before capture */
    tc_graph *g;
    CHECK_OK(tc_graph_create(&g));
    tc_graph_pool_id none = {0};
    uint64_t off0 = tc_test_gen_offset(gpu);
    tc_graph_capture_guard gd = tc_graph_capture_guard_enter(g, none, NULL, TC_CAPTURE_MODE_GLOBAL);
    CHECK_OK(gd.status);
    CHECK_OK(draw(&r));
    /* another CUDA generator is not registered with the capture: refused */
    tc_generator *other;
    CHECK_OK(tc_generator_create(CUDA0, 5, &other));
    CHECK_STATUS(tc_tensor_uniform_(r.u, 0, 1, other), TC_ERROR_INVALID_STATE);
    CHECK_OK(tc_graph_capture_guard_exit(&gd));
    CHECK(tc_test_gen_offset(gpu) == off0); /* capture draws nothing */
    uint64_t blocks = 2 * ((R + 3) / 4);
    tc_tensor *cu, *cn;
    CHECK_OK(tc_tensor_empty(1, (int64_t[]){R}, TC_FLOAT32, CPU, &cu));
    CHECK_OK(tc_tensor_empty(1, (int64_t[]){R}, TC_FLOAT32, CPU, &cn));
    tc_generator *cpu;
    CHECK_OK(tc_generator_create(CPU, 1, &cpu));
    double *prev = NULL;
    for (int k = 0; k < 4; k++) {
        if (k == 2) { /* an eager draw between replays moves the offset too */
            tc_tensor *e;
            CHECK_OK(tc_tensor_rand(1, (int64_t[]){100}, TC_FLOAT32, CUDA0, NULL, &e));
            tc_tensor_release(e);
        }
        tc_rng_state st;
        CHECK_OK(tc_generator_get_state(gpu, &st));
        uint64_t before = tc_test_gen_offset(gpu);
        CHECK_OK(tc_graph_replay(g));
        CHECK(tc_test_gen_offset(gpu) == before + blocks);
        /* what the same fills draw eagerly from that state (on the CPU) */
        CHECK_OK(tc_generator_set_state(cpu, &st));
        CHECK_OK(tc_tensor_uniform_(cu, -1, 3, cpu));
        CHECK_OK(tc_tensor_normal_(cn, 0.5, 2, cpu));
        double *gu = tc_test_values(r.u), *gn = tc_test_values(r.n);
        double *hu = tc_test_values(cu), *hn = tc_test_values(cn);
        int bad_u = 0, bad_n = 0, same_as_prev = 0;
        for (int i = 0; i < R; i++) {
            bad_u += gu[i] != hu[i];
            bad_n += fabs(gn[i] - hn[i]) > 1e-5 * (1 + fabs(hn[i]));
            same_as_prev += prev && prev[i] == gu[i];
        }
        CHECK(bad_u == 0 && bad_n == 0);
        CHECK(same_as_prev < 4); /* new numbers on every replay */
        free(prev);
        prev = gu;
        free(gn);
        free(hu);
        free(hn);
    }
    free(prev);
    CHECK_OK(tc_graph_destroy(g));
    CHECK_OK(tc_generator_destroy(other));
    CHECK_OK(tc_generator_destroy(cpu));
    tc_tensor *all[] = {r.u, r.n, cu, cn};
    for (int i = 0; i < 4; i++)
        tc_tensor_release(all[i]);
}

/* ---- synchronizing calls in capture -------------------------------------- */

typedef struct sync_env {
    tc_stream *other;
    tc_event *ev;
    tc_tensor *dev1, *host;
} sync_env;

/* Runs the kind-th synchronizing call; returns its status; *name: the call. */
static tc_status sync_call(sync_env *e, int kind, const char **name)
{
    double v;
    tc_tensor *t = NULL;
    tc_status st;
    switch (kind) {
    case 0: *name = "tc_synchronize"; return tc_synchronize(-1);
    case 1:
        *name = "tc_stream_synchronize";
        return tc_stream_synchronize(NULL); /* the capture stream itself */
    case 2: *name = "tc_stream_synchronize"; return tc_stream_synchronize(e->other);
    case 3: *name = "tc_tensor_item"; return tc_tensor_item(e->dev1, &v);
    case 4:
        *name = "tc_tensor_copy_"; /* from pageable host memory */
        return tc_tensor_copy_(e->dev1, e->host, false);
    case 5:
        *name = "tc_tensor_cpu";
        st = tc_tensor_cpu(e->dev1, &t);
        if (t)
            tc_tensor_release(t);
        return st;
    case 6: *name = "tc_event_query"; return tc_event_query(e->ev);
    case 7: *name = "tc_event_synchronize"; return tc_event_synchronize(e->ev);
    case 8: *name = "tc_stream_query"; return tc_stream_query(NULL);
    default: *name = "tc_empty_cache"; return tc_empty_cache();
    }
}

static void test_sync_calls(void)
{
    sync_env e;
    CHECK_OK(tc_stream_create(-1, 0, &e.other));
    CHECK_OK(tc_stream_record_event(e.other, &e.ev));
    CHECK_OK(tc_tensor_full(0, NULL, 2.5, TC_FLOAT32, CUDA0, &e.dev1));
    CHECK_OK(tc_tensor_full(0, NULL, 4.5, TC_FLOAT32, CPU, &e.host));
    tc_graph_pool_id none = {0};
    for (int kind = 0; kind < 10; kind++) {
        tc_graph *g;
        CHECK_OK(tc_graph_create(&g));
        tc_graph_capture_guard gd = tc_graph_capture_guard_enter(g, none, NULL,
                                                                 TC_CAPTURE_MODE_GLOBAL);
        CHECK_OK(gd.status);
        tc_tensor *t;
        CHECK_OK(tc_tensor_add(e.dev1, e.dev1, &t));
        const char *name = "";
        CHECK_STATUS(sync_call(&e, kind, &name), TC_ERROR_INVALID_STATE);
        if (!says(name, "cannot run during CUDA graph capture"))
            printf("kind %d: %s\n", kind, tc_last_error());
        CHECK(says(name, "cannot run during CUDA graph capture"));
        CHECK(tc_is_current_stream_capturing()); /* still capturing until the end */
        tc_tensor_release(t);
        CHECK_STATUS(tc_graph_capture_guard_exit(&gd), TC_ERROR_INVALID_STATE);
        CHECK(says("tc_graph_capture_guard_exit", "invalidated by") &&
              strstr(tc_last_error(), name));
        CHECK(!tc_is_current_stream_capturing());
        CHECK_STATUS(tc_graph_replay(g), TC_ERROR_INVALID_STATE); /* empty again */
        /* the graph and the library are usable: capture again, replay */
        gd = tc_graph_capture_guard_enter(g, none, NULL, TC_CAPTURE_MODE_GLOBAL);
        CHECK_OK(gd.status);
        tc_tensor *u;
        CHECK_OK(tc_tensor_add(e.dev1, e.dev1, &u));
        CHECK_OK(tc_graph_capture_guard_exit(&gd));
        CHECK_OK(tc_graph_replay(g));
        double v = 0;
        CHECK_OK(tc_tensor_item(u, &v));
        CHECK(v == 5.0);
        tc_tensor_release(u);
        CHECK_OK(tc_graph_destroy(g));
    }
    CHECK_OK(tc_event_destroy(e.ev));
    CHECK_OK(tc_stream_destroy(e.other));
    tc_tensor_release(e.dev1);
    tc_tensor_release(e.host);
}

/* ---- capture modes ------------------------------------------------------- */

static tc_stream *thread_stream;
static tc_status thread_result;

static void *sync_from_thread(void *arg)
{
    (void)arg;
    thread_result = tc_stream_synchronize(thread_stream);
    return NULL;
}

/* Captures on `mode`; while capturing, another thread synchronizes its own
 * stream and this thread synchronizes a stream that is not capturing. */
static void check_mode(tc_capture_mode mode, bool other_ok, bool own_ok)
{
    tc_stream *cap, *idle;
    CHECK_OK(tc_stream_create(-1, 0, &cap));
    CHECK_OK(tc_stream_create(-1, 0, &idle));
    CHECK_OK(tc_stream_create(-1, 0, &thread_stream));
    tc_tensor *x;
    CHECK_OK(tc_tensor_ones(1, (int64_t[]){64}, TC_FLOAT32, CUDA0, &x));
    tc_graph *g;
    CHECK_OK(tc_graph_create(&g));
    tc_graph_pool_id none = {0};
    tc_graph_capture_guard gd = tc_graph_capture_guard_enter(g, none, cap, mode);
    CHECK_OK(gd.status);
    tc_tensor *y;
    CHECK_OK(tc_tensor_add(x, x, &y));
    pthread_t t;
    pthread_create(&t, NULL, sync_from_thread, NULL);
    pthread_join(t, NULL);
    CHECK(other_ok ? thread_result == TC_OK : thread_result == TC_ERROR_INVALID_STATE);
    tc_status own = tc_stream_synchronize(idle);
    CHECK(own_ok ? own == TC_OK : own == TC_ERROR_INVALID_STATE);
    /* waiting for the capturing stream is refused in every mode */
    CHECK_STATUS(tc_stream_synchronize(cap), TC_ERROR_INVALID_STATE);
    CHECK_STATUS(tc_graph_capture_guard_exit(&gd), TC_ERROR_INVALID_STATE);
    /* without the refused calls, the capture succeeds */
    gd = tc_graph_capture_guard_enter(g, none, cap, mode);
    CHECK_OK(gd.status);
    tc_tensor_release(y);
    CHECK_OK(tc_tensor_add(x, x, &y));
    if (other_ok) {
        pthread_create(&t, NULL, sync_from_thread, NULL);
        pthread_join(t, NULL);
        CHECK_OK(thread_result);
    }
    if (own_ok)
        CHECK_OK(tc_stream_synchronize(idle));
    CHECK_OK(tc_graph_capture_guard_exit(&gd));
    CHECK_OK(tc_graph_replay(g));
    double *v = tc_test_values(y);
    CHECK(v[0] == 2.0 && v[63] == 2.0);
    free(v);
    tc_tensor_release(y);
    tc_tensor_release(x);
    CHECK_OK(tc_graph_destroy(g));
    CHECK_OK(tc_stream_destroy(cap));
    CHECK_OK(tc_stream_destroy(idle));
    CHECK_OK(tc_stream_destroy(thread_stream));
}

static void test_modes(void)
{
    check_mode(TC_CAPTURE_MODE_GLOBAL, false, false);
    check_mode(TC_CAPTURE_MODE_THREAD_LOCAL, true, false);
    check_mode(TC_CAPTURE_MODE_RELAXED, true, true);
}

/* ---- updates ------------------------------------------------------------- */

typedef struct scaled {
    tc_tensor *x, *k, *out;
    bool twice; /* out = x*k + x instead of x*k */
} scaled;

static tc_status run_scaled(void *ctx)
{
    scaled *s = ctx;
    tc_tensor *t, *u;
    TRY(tc_tensor_mul(s->x, s->k, &t));
    if (!s->twice) {
        set_out(&s->out, t);
        return TC_OK;
    }
    tc_status st = tc_tensor_add(t, s->x, &u);
    tc_tensor_release(t);
    if (st == TC_OK)
        set_out(&s->out, u);
    return st;
}

static void check_scaled(const scaled *s, const float *x, double k)
{
    double *o = tc_test_values(s->out);
    double worst = 0;
    for (int i = 0; i < N; i++)
        worst = fmax(worst, fabs(o[i] - ((double)x[i] * k + (s->twice ? x[i] : 0))));
    CHECK(worst < 1e-5);
    free(o);
}

static void test_update(void)
{
    float *x;
    scaled s = {0};
    s.x = random_tensor(1, (int64_t[]){N}, CUDA0, &x);
    tc_tensor *k1, *k2;
    CHECK_OK(tc_tensor_full(0, NULL, 3.0, TC_FLOAT32, CUDA0, &k1));
    CHECK_OK(tc_tensor_full(0, NULL, -0.5, TC_FLOAT32, CUDA0, &k2));
    s.k = k1;
    tc_graph *g;
    CHECK_OK(tc_graph_create(&g));
    tc_graph_update_result how = (tc_graph_update_result)9;
    CHECK_STATUS(tc_graph_update(g, run_scaled, &s, &how), TC_ERROR_INVALID_STATE);
    tc_graph_pool_id none = {0};
    tc_graph_capture_guard gd = tc_graph_capture_guard_enter(g, none, NULL, TC_CAPTURE_MODE_GLOBAL);
    CHECK_OK(gd.status);
    CHECK_OK(run_scaled(&s));
    CHECK_OK(tc_graph_capture_guard_exit(&gd));
    CHECK_OK(tc_graph_replay(g));
    check_scaled(&s, x, 3.0);
    /* same topology, another tensor: updated in place */
    s.k = k2;
    CHECK_OK(tc_graph_update(g, run_scaled, &s, &how));
    CHECK(how == TC_GRAPH_UPDATE_RESULT_IN_PLACE);
    refill(s.x, x);
    CHECK_OK(tc_graph_replay(g));
    check_scaled(&s, x, -0.5);
    /* one more kernel: instantiated again */
    s.twice = true;
    CHECK_OK(tc_graph_update(g, run_scaled, &s, &how));
    CHECK(how == TC_GRAPH_UPDATE_RESULT_REINSTANTIATED);
    refill(s.x, x);
    CHECK_OK(tc_graph_replay(g));
    check_scaled(&s, x, -0.5);
    /* a failing fn leaves the graph as it was */
    tc_tensor *bad;
    CHECK_OK(tc_tensor_ones(1, (int64_t[]){3}, TC_FLOAT32, CUDA0, &bad));
    s.k = bad; /* 3 does not broadcast to 1000 */
    how = (tc_graph_update_result)9;
    CHECK_STATUS(tc_graph_update(g, run_scaled, &s, &how), TC_ERROR_SHAPE);
    CHECK(how == (tc_graph_update_result)9 && strncmp(tc_last_error(), "tc_graph_update", 15) == 0);
    refill(s.x, x);
    CHECK_OK(tc_graph_replay(g));
    check_scaled(&s, x, -0.5);
    CHECK_OK(tc_graph_destroy(g));

    /* captured on a user stream that is destroyed afterwards (and another
     * stream made, which may take its handle): the update captures on a
     * stream of tcuda's and never touches the first one */
    tc_stream *user, *other;
    CHECK_OK(tc_stream_create(-1, 0, &user));
    CHECK_OK(tc_graph_create(&g));
    s.k = k1;
    s.twice = false;
    CHECK_OK(tc_synchronize(-1));
    tc_stream_guard sg = tc_stream_guard_enter(user);
    CHECK_OK(tc_graph_capture_begin(g, none, user, TC_CAPTURE_MODE_GLOBAL));
    CHECK_OK(run_scaled(&s));
    CHECK_OK(tc_graph_capture_end(g));
    tc_stream_guard_exit(&sg);
    CHECK_OK(tc_stream_destroy(user));
    CHECK_OK(tc_stream_create(-1, 0, &other));
    s.k = k2;
    CHECK_OK(tc_graph_update(g, run_scaled, &s, &how));
    CHECK(how == TC_GRAPH_UPDATE_RESULT_IN_PLACE);
    CHECK(!tc_is_current_stream_capturing());
    refill(s.x, x);
    CHECK_OK(tc_graph_replay(g));
    check_scaled(&s, x, -0.5);
    CHECK_OK(tc_graph_destroy(g));
    CHECK_OK(tc_stream_destroy(other));
    tc_tensor *all[] = {s.x, s.out, k1, k2, bad};
    for (int i = 0; i < 5; i++)
        tc_tensor_release(all[i]);
    free(x);
}

/* ---- graphed callables ---------------------------------------------------- */

typedef struct layer {
    tc_tensor *in, *w, *out; /* out = relu(in @ w) */
    int calls;
} layer;

static tc_status run_layer(void *ctx)
{
    layer *l = ctx;
    l->calls++;
    tc_tensor *t, *u;
    TRY(tc_tensor_matmul(l->in, l->w, &t));
    tc_status st = tc_tensor_relu(t, &u);
    tc_tensor_release(t);
    if (st == TC_OK)
        set_out(&l->out, u);
    return st;
}

static tc_status run_second(void *ctx)
{
    layer *l = ctx; /* its input is the first layer's output */
    layer *first = (layer *)l->in;
    tc_tensor *in = l->in;
    l->in = first->out;
    tc_status st = run_layer(l);
    l->in = in;
    return st;
}

static void test_callables(void)
{
    enum { B = 8, D = 24, H = 12 };
    float *xin, *w1, *w2;
    layer l1 = {0}, l2 = {0};
    l1.in = random_tensor(2, (int64_t[]){B, D}, CUDA0, &xin);
    l1.w = random_tensor(2, (int64_t[]){D, H}, CUDA0, &w1);
    l2.w = random_tensor(2, (int64_t[]){H, H}, CUDA0, &w2);
    l2.in = (tc_tensor *)&l1; /* run_second reads l1.out */
    tc_graph_fn fns[2] = {run_layer, run_second};
    void *ctxs[2] = {&l1, &l2};
    tc_graphed_callable *c[2] = {NULL, NULL};
    CHECK_OK(tc_make_graphed_callables(fns, ctxs, 2, 3, c));
    CHECK(l1.calls == 4 && l2.calls == 4); /* 3 warm-up calls and the captured one */
    tc_graph_pool_id p1, p2;
    CHECK_OK(tc_graph_pool(tc_graphed_callable_graph(c[0]), &p1));
    CHECK_OK(tc_graph_pool(tc_graphed_callable_graph(c[1]), &p2));
    CHECK(p1.id == p2.id);
    for (int rep = 0; rep < 3; rep++) {
        refill(l1.in, xin);
        CHECK_OK(tc_graphed_callable_call(c[0]));
        CHECK_OK(tc_graphed_callable_call(c[1]));
        double *o = tc_test_values(l2.out);
        double worst = 0;
        for (int b = 0; b < B; b++) {
            double h[H];
            for (int j = 0; j < H; j++) {
                double v = 0;
                for (int k = 0; k < D; k++)
                    v += (double)xin[b * D + k] * w1[k * H + j];
                h[j] = v > 0 ? v : 0;
            }
            for (int j = 0; j < H; j++) {
                double v = 0;
                for (int k = 0; k < H; k++)
                    v += h[k] * w2[k * H + j];
                worst = fmax(worst, fabs(o[b * H + j] - (v > 0 ? v : 0)));
            }
        }
        CHECK(worst < 1e-3);
        free(o);
    }
    CHECK(l1.calls == 4); /* replays do not call fn */
    CHECK_OK(tc_synchronize(-1));
    for (int i = 0; i < 2; i++) {
        CHECK_OK(tc_graphed_callable_destroy(c[i]));
        CHECK_STATUS(tc_graphed_callable_destroy(c[i]), TC_ERROR_INVALID_HANDLE);
        CHECK_STATUS(tc_graphed_callable_call(c[i]), TC_ERROR_INVALID_HANDLE);
    }
    /* one callable; an error of fn comes back as it is and nothing is made */
    tc_graphed_callable *one = NULL;
    CHECK_OK(tc_make_graphed_callable(run_layer, &l1, 1, &one));
    refill(l1.in, xin);
    CHECK_OK(tc_graphed_callable_call(one));
    CHECK_OK(tc_synchronize(-1));
    CHECK_OK(tc_graphed_callable_destroy(one));
    tc_tensor *w = l1.w;
    l1.w = l2.w; /* H x H: does not fit B x D */
    one = (tc_graphed_callable *)0x1;
    CHECK_STATUS(tc_make_graphed_callable(run_layer, &l1, 2, &one), TC_ERROR_SHAPE);
    CHECK(strncmp(tc_last_error(), "tc_make_graphed_callable", 24) == 0);
    CHECK(one == (tc_graphed_callable *)0x1 && !tc_is_current_stream_capturing());
    l1.w = w;
    tc_tensor *all[] = {l1.in, l1.w, l1.out, l2.w, l2.out};
    for (int i = 0; i < 5; i++)
        tc_tensor_release(all[i]);
    free(xin);
    free(w1);
    free(w2);
}

static void run_gpu_tests(void)
{
    test_bad_inputs();
    test_replay_matches_eager();
    test_memory();
    test_shared_pool();
    test_random();
    test_sync_calls();
    test_modes();
    test_update();
    test_callables();
    CHECK_OK(tc_synchronize(-1));
}
#endif

int main(void)
{
    tc_test_init();
    check_pool_rules_on_host();
    TC_TEST_REQUIRE_GPU_AFTER(check_without_gpu);
#if defined(TCUDA_HAVE_CUDA)
    run_gpu_tests();
#endif
    return TC_TEST_DONE();
}
