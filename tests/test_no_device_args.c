/* Every public call that needs CUDA, given bad arguments, answers the same in
 * a build with CUDA and in one without: the arguments are checked first (a
 * NULL out-parameter or required pointer is TC_ERROR_INVALID_ARGUMENT, a
 * pointer that is not a live handle TC_ERROR_INVALID_HANDLE, a value out of
 * its range TC_ERROR_INVALID_ARGUMENT), and only then is a missing GPU
 * TC_ERROR_NO_DEVICE, always in one wording ("CUDA is not available: ...")
 * after the call's name. One table of expected answers, run by both builds
 * in CI: when both pass, they agree. GPUs are hidden
 * (CUDA_VISIBLE_DEVICES=""), so a machine with a GPU gives the same
 * answers. Accessors that cannot fail answer their neutral value. */
#include <math.h>
#include <stdlib.h>

#include "tc_test.h"
#include "tcuda/tcuda.h"

static void *garbage;

/* The status, and for TC_ERROR_NO_DEVICE the one wording after the name. */
#define EXPECT(call, want)                                                                         \
    do {                                                                                           \
        tc_status got_ = (call);                                                                   \
        if (got_ != (want)) {                                                                      \
            printf("%s: %s, want %s (%s)\n", #call, tc_status_string(got_),                        \
                   tc_status_string(want), tc_last_error());                                       \
            CHECK(got_ == (want));                                                                 \
        } else if (got_ == TC_ERROR_NO_DEVICE) {                                                   \
            CHECK(strstr(tc_last_error(), ": CUDA is not available: ") != NULL);                   \
        }                                                                                          \
    } while (0)
#define BAD(call) EXPECT(call, TC_ERROR_INVALID_ARGUMENT)
#define FOREIGN(call) EXPECT(call, TC_ERROR_INVALID_HANDLE)
#define NODEV(call) EXPECT(call, TC_ERROR_NO_DEVICE)

static tc_status graph_fn(void *ctx)
{
    (void)ctx;
    return TC_OK;
}
static void *alloc_fn(size_t size, int device, void *stream)
{
    (void)size, (void)device, (void)stream;
    return NULL;
}
static void free_fn(void *ptr, size_t size, int device, void *stream)
{
    (void)ptr, (void)size, (void)device, (void)stream;
}

static void runtime_calls(void)
{
    int i = 0;
    int64_t i64 = 0;
    size_t z = 0;
    bool b = false;
    const char *s = NULL;
    char *str = NULL;
    tc_device_properties props;
    tc_sync_debug_mode mode;
    BAD(tc_current_device(NULL));
    BAD(tc_get_device_name(0, NULL));
    BAD(tc_get_device_capability(0, NULL, &i));
    BAD(tc_get_device_capability(0, &i, NULL));
    BAD(tc_get_device_properties(0, NULL));
    BAD(tc_can_device_access_peer(0, 1, NULL));
    BAD(tc_mem_get_info(0, NULL, &z));
    BAD(tc_mem_get_info(0, &z, NULL));
    BAD(tc_utilization(0, NULL));
    BAD(tc_memory_usage(0, NULL));
    BAD(tc_temperature(0, NULL));
    BAD(tc_power_draw(0, NULL));
    BAD(tc_clock_rate(0, NULL));
    BAD(tc_list_gpu_processes(0, NULL));
    BAD(tc_get_sync_debug_mode(NULL));
    BAD(tc_set_sync_debug_mode((tc_sync_debug_mode)7));
    EXPECT(tc_set_device(-1), TC_OK); /* a negative device: nothing to do */
    NODEV(tc_init());
    NODEV(tc_current_device(&i));
    NODEV(tc_set_device(0));
    NODEV(tc_get_device_name(0, &s));
    NODEV(tc_get_device_capability(0, &i, &i));
    NODEV(tc_get_device_properties(0, &props));
    NODEV(tc_can_device_access_peer(0, 1, &b));
    NODEV(tc_synchronize(-1));
    NODEV(tc_mem_get_info(0, &z, &z));
    NODEV(tc_utilization(0, &i));
    NODEV(tc_clock_rate(0, &i64));
    NODEV(tc_list_gpu_processes(0, &str));
    EXPECT(tc_get_sync_debug_mode(&mode), TC_OK);
    CHECK(!tc_is_available() && !tc_is_initialized() && tc_device_count() == 0);
    tc_device_guard g = tc_device_guard_enter(-1);
    CHECK(g.status == TC_OK);
    tc_device_guard_exit(&g);
    g = tc_device_guard_enter(0);
    CHECK(g.status == TC_ERROR_NO_DEVICE);
    tc_device_guard_exit(&g);
}

static void stream_calls(void)
{
    tc_stream *gs = garbage, *s = NULL;
    tc_event *ge = garbage, *e = NULL;
    int i = 0;
    float ms = 0;
    BAD(tc_stream_priority_range(NULL, &i));
    BAD(tc_stream_priority_range(&i, NULL));
    BAD(tc_stream_create(-1, 0, NULL));
    BAD(tc_stream_create_external(NULL, -1, NULL));
    BAD(tc_stream_destroy(NULL));
    FOREIGN(tc_stream_destroy(gs));
    FOREIGN(tc_stream_query(gs));
    FOREIGN(tc_stream_synchronize(gs));
    BAD(tc_stream_wait_event(gs, NULL)); /* the event first */
    FOREIGN(tc_stream_wait_event(NULL, ge));
    FOREIGN(tc_stream_wait_stream(gs, NULL));
    FOREIGN(tc_stream_wait_stream(NULL, gs));
    BAD(tc_stream_record_event(NULL, NULL));
    FOREIGN(tc_stream_record_event(gs, &e));
    BAD(tc_current_stream(-1, NULL));
    BAD(tc_default_stream(-1, NULL));
    FOREIGN(tc_set_stream(gs));
    EXPECT(tc_set_stream(NULL), TC_OK);
    CHECK(tc_stream_guard_enter(gs).status == TC_ERROR_INVALID_HANDLE);
    CHECK(tc_stream_guard_enter(NULL).status == TC_OK);
    CHECK(tc_stream_device(gs) == -1 && tc_stream_priority(gs) == 0 &&
          tc_stream_cuda_handle(gs) == NULL);
    BAD(tc_event_create(0, NULL));
    BAD(tc_event_create(1u << 8, &e));
    BAD(tc_event_destroy(NULL));
    FOREIGN(tc_event_destroy(ge));
    FOREIGN(tc_event_record(ge, NULL));
    FOREIGN(tc_event_query(ge));
    FOREIGN(tc_event_synchronize(ge));
    FOREIGN(tc_event_wait(ge, NULL));
    FOREIGN(tc_event_elapsed_time(ge, ge, &ms));
    BAD(tc_event_elapsed_time(NULL, NULL, &ms));
    CHECK(tc_event_device(ge) == -1);
    NODEV(tc_stream_priority_range(&i, &i));
    NODEV(tc_stream_create(-1, 0, &s));
    NODEV(tc_stream_create_external(NULL, -1, &s));
    NODEV(tc_stream_query(NULL));
    NODEV(tc_stream_synchronize(NULL));
    NODEV(tc_stream_wait_stream(NULL, NULL));
    NODEV(tc_stream_record_event(NULL, &e));
    NODEV(tc_current_stream(-1, &s));
    NODEV(tc_default_stream(-1, &s));
    NODEV(tc_event_create(0, &e));
}

static void memory_calls(void)
{
    void *p = NULL, *gp = garbage;
    tc_stream *gs = garbage;
    size_t z = 0;
    int64_t v = 0;
    char *str = NULL;
    const char *s = NULL;
    tc_memory_stats_info st;
    tc_memory_snapshot_info *snap = NULL;
    tc_allocator *a = NULL, *ga = garbage;
    tc_mempool *mp = NULL;
    BAD(tc_caching_allocator_alloc(16, -1, NULL, NULL));
    FOREIGN(tc_caching_allocator_alloc(16, -1, gs, &p));
    EXPECT(tc_caching_allocator_delete(NULL), TC_OK);
    BAD(tc_caching_allocator_record_stream(NULL, NULL));
    FOREIGN(tc_caching_allocator_record_stream(gp, gs));
    BAD(tc_memory_allocated(-1, NULL));
    BAD(tc_max_memory_allocated(-1, NULL));
    BAD(tc_memory_reserved(-1, NULL));
    BAD(tc_max_memory_reserved(-1, NULL));
    BAD(tc_memory_cached(-1, NULL));
    BAD(tc_max_memory_cached(-1, NULL));
    BAD(tc_memory_stats(-1, NULL));
    BAD(tc_memory_stats_get(-1, NULL, &v));
    BAD(tc_memory_stats_get(-1, "num_ooms", NULL));
    BAD(tc_memory_summary(-1, false, NULL));
    BAD(tc_memory_snapshot(NULL));
    BAD(tc_memory_snapshot_write_json(NULL, "x.json"));
    BAD(tc_memory_snapshot_destroy(NULL));
    BAD(tc_set_per_process_memory_fraction(-1, 2.0));
    BAD(tc_set_per_process_memory_fraction(-1, NAN));
    BAD(tc_get_allocator_backend(NULL));
    BAD(tc_allocator_create(NULL, free_fn, &a));
    BAD(tc_allocator_create(alloc_fn, NULL, &a));
    BAD(tc_allocator_create(alloc_fn, free_fn, NULL));
    BAD(tc_allocator_create_from_library(NULL, "a", "f", &a));
    BAD(tc_allocator_create_from_library("", "a", "f", &a));
    BAD(tc_allocator_create_from_library("x.so", NULL, "f", &a));
    BAD(tc_allocator_create_from_library("x.so", "a", "f", NULL));
    BAD(tc_change_current_allocator(NULL));
    FOREIGN(tc_change_current_allocator(ga));
    BAD(tc_allocator_destroy(NULL));
    FOREIGN(tc_allocator_destroy(ga));
    BAD(tc_host_alloc(16, NULL));
    EXPECT(tc_host_free(NULL), TC_OK);
    BAD(tc_host_record_stream(NULL, NULL));
    FOREIGN(tc_host_record_stream(gp, gs));
    BAD(tc_mempool_create(-1, NULL, NULL));
    FOREIGN(tc_mempool_create(-1, ga, &mp));
    NODEV(tc_caching_allocator_alloc(16, -1, NULL, &p));
    NODEV(tc_memory_allocated(-1, &z));
    NODEV(tc_memory_stats(-1, &st));
    NODEV(tc_memory_stats_get(-1, "num_ooms", &v));
    NODEV(tc_memory_summary(-1, false, &str));
    NODEV(tc_reset_peak_memory_stats(-1));
    NODEV(tc_set_per_process_memory_fraction(-1, 0.5));
    NODEV(tc_empty_cache());
    NODEV(tc_memory_snapshot(&snap));
    NODEV(tc_host_alloc(16, &p));
    NODEV(tc_mempool_create(-1, NULL, &mp));
    EXPECT(tc_get_allocator_backend(&s), TC_OK);
}

static void graph_calls(void)
{
    tc_graph *gg = garbage, *g = NULL;
    tc_graphed_callable *gc = garbage, *c[2] = {NULL, NULL};
    tc_graph_pool_id id = {0};
    tc_graph_update_result how;
    tc_graph_fn fns[2] = {graph_fn, graph_fn};
    void *ctxs[2] = {NULL, NULL};
    BAD(tc_graph_create(NULL));
    BAD(tc_graph_destroy(NULL));
    FOREIGN(tc_graph_destroy(gg));
    BAD(tc_graph_capture_begin(NULL, id, NULL, TC_CAPTURE_MODE_GLOBAL));
    FOREIGN(tc_graph_capture_begin(gg, id, NULL, TC_CAPTURE_MODE_GLOBAL));
    FOREIGN(tc_graph_set_order(gg, TC_GRAPH_ORDER_DATA));
    FOREIGN(tc_graph_capture_end(gg));
    FOREIGN(tc_graph_replay(gg));
    FOREIGN(tc_graph_reset(gg));
    FOREIGN(tc_graph_pool(gg, &id));
    FOREIGN(tc_graph_debug_dump(gg, "x.dot"));
    BAD(tc_graph_pool_handle(NULL));
    FOREIGN(tc_graph_update(gg, graph_fn, NULL, &how));
    CHECK(tc_graph_capture_guard_enter(NULL, id, NULL, TC_CAPTURE_MODE_GLOBAL).status ==
          TC_ERROR_INVALID_ARGUMENT);
    CHECK(tc_graph_capture_guard_enter(gg, id, NULL, TC_CAPTURE_MODE_GLOBAL).status ==
          TC_ERROR_INVALID_HANDLE);
    BAD(tc_graph_capture_guard_exit(NULL));
    BAD(tc_make_graphed_callable(NULL, NULL, 3, c));
    BAD(tc_make_graphed_callable(graph_fn, NULL, -1, c));
    BAD(tc_make_graphed_callable(graph_fn, NULL, 3, NULL));
    BAD(tc_make_graphed_callables(NULL, ctxs, 2, 3, c));
    BAD(tc_make_graphed_callables(fns, ctxs, 0, 3, c));
    BAD(tc_make_graphed_callables(fns, ctxs, 2, 3, NULL));
    BAD(tc_make_graphed_callables_ordered(fns, ctxs, 2, 3, (tc_graph_order)9, c));
    FOREIGN(tc_graphed_callable_call(gc));
    CHECK(tc_graphed_callable_graph(gc) == NULL);
    BAD(tc_graphed_callable_destroy(NULL));
    FOREIGN(tc_graphed_callable_destroy(gc));
    CHECK(!tc_is_current_stream_capturing());
    NODEV(tc_graph_create(&g));
    NODEV(tc_graph_pool_handle(&id));
    NODEV(tc_make_graphed_callable(graph_fn, NULL, 3, c));
    NODEV(tc_make_graphed_callables(fns, ctxs, 2, 3, c));
}

static void dist_calls(void)
{
    tc_process_group *gpg = garbage, *pg = NULL;
    tc_work *gw = garbage, *w = NULL;
    tc_tensor *t = NULL;
    CHECK_OK(tc_tensor_zeros(1, (const int64_t[]){4}, TC_FLOAT32, (tc_device){TC_CPU, -1}, &t));
    tc_dist_options o = {.rank = 0, .world_size = 1, .local_rank = -1, .master_port = 29500};
    snprintf(o.master_addr, sizeof o.master_addr, "127.0.0.1");
    tc_dist_options bad = o;
    bad.rank = 3;
    BAD(tc_process_group_create(NULL, &pg));
    BAD(tc_process_group_create(&bad, &pg));
    BAD(tc_process_group_create(&o, NULL));
    BAD(tc_process_group_create_from_env(NULL));
    BAD(tc_process_group_destroy(NULL));
    FOREIGN(tc_process_group_destroy(gpg));
    CHECK(tc_process_group_rank(gpg) == -1 && tc_process_group_size(gpg) == -1 &&
          tc_process_group_device(gpg) == -1);
    BAD(tc_dist_all_reduce(NULL, t, TC_REDUCE_OP_SUM, &w));
    FOREIGN(tc_dist_all_reduce(gpg, t, TC_REDUCE_OP_SUM, &w));
    FOREIGN(tc_dist_broadcast(gpg, t, 0, &w));
    FOREIGN(tc_dist_reduce(gpg, t, 0, TC_REDUCE_OP_SUM, &w));
    FOREIGN(tc_dist_all_gather(gpg, t, t, &w));
    FOREIGN(tc_dist_reduce_scatter(gpg, t, t, TC_REDUCE_OP_SUM, &w));
    FOREIGN(tc_dist_all_to_all(gpg, t, t, &w));
    FOREIGN(tc_dist_send(gpg, t, 1, &w));
    FOREIGN(tc_dist_recv(gpg, t, 1, &w));
    FOREIGN(tc_dist_barrier(gpg));
    BAD(tc_dist_barrier(NULL));
    FOREIGN(tc_work_wait(gw));
    FOREIGN(tc_work_query(gw));
    FOREIGN(tc_work_wait_stream(gw, NULL));
    BAD(tc_work_destroy(NULL));
    FOREIGN(tc_work_destroy(gw));
    NODEV(tc_process_group_create(&o, &pg));
    tc_tensor_release(t);
}

/* NCCL needs no GPU: a build with CUDA answers from the library (or says
 * why none loads), one without CUDA has none; bad input is the same in both. */
static void nccl_calls(void)
{
    int v = 0, a = 0, b = 0, c = 0;
    const char *path = NULL;
    BAD(tc_nccl_version(NULL));
    BAD(tc_nccl_get_library_path(NULL));
    BAD(tc_nccl_version_split(22703, NULL, &b, &c));
    BAD(tc_nccl_version_split(999, &a, &b, &c));
    EXPECT(tc_nccl_version_split(22703, &a, &b, &c), TC_OK);
    if (!tc_get_arch_list()[0]) { /* built without CUDA */
        NODEV(tc_nccl_version(&v));
        NODEV(tc_nccl_get_library_path(&path));
    } else {
        tc_status st = tc_nccl_version(&v);
        CHECK(st == TC_OK || st == TC_ERROR_NOT_SUPPORTED);
        CHECK(tc_nccl_get_library_path(&path) == st);
    }
}

static void ipc_and_tensor_calls(void)
{
    tc_tensor *cpu = NULL, *t = NULL;
    CHECK_OK(tc_tensor_zeros(1, (const int64_t[]){4}, TC_FLOAT32, (tc_device){TC_CPU, -1}, &cpu));
    tc_ipc_mem_handle h;
    tc_ipc_event_handle eh;
    tc_event *ge = garbage, *e = NULL;
    memcpy(&h, garbage, sizeof h);
    memcpy(&eh, garbage, sizeof eh);
    BAD(tc_tensor_ipc_handle(NULL, &h));
    BAD(tc_tensor_ipc_handle(cpu, NULL));
    BAD(tc_tensor_ipc_handle(cpu, &h)); /* a CPU tensor */
    BAD(tc_tensor_from_ipc_handle(NULL, &t));
    BAD(tc_tensor_from_ipc_handle(&h, NULL));
    FOREIGN(tc_tensor_from_ipc_handle(&h, &t)); /* garbage bytes */
    BAD(tc_event_ipc_handle(NULL, &eh));
    FOREIGN(tc_event_ipc_handle(ge, &eh));
    BAD(tc_event_from_ipc_handle(-1, NULL, &e));
    BAD(tc_event_from_ipc_handle(-1, &eh, NULL));
    NODEV(tc_ipc_collect());
    void *blas = NULL;
    BAD(tc_current_blas_handle(NULL));
    NODEV(tc_current_blas_handle(&blas));
    BAD(tc_tensor_record_stream(cpu, NULL)); /* a CPU tensor */
    NODEV(tc_tensor_pin_memory(cpu, &t));
    NODEV(tc_tensor_cuda(cpu, -1, false, &t));
    NODEV(tc_tensor_empty(1, (const int64_t[]){4}, TC_FLOAT32, (tc_device){TC_CUDA, -1}, &t));
    tc_generator *gen = NULL;
    tc_rng_state rs;
    BAD(tc_generator_create((tc_device){TC_CUDA, -1}, 0, NULL));
    NODEV(tc_generator_create((tc_device){TC_CUDA, -1}, 0, &gen));
    BAD(tc_get_rng_state(-1, NULL));
    BAD(tc_set_rng_state(-1, NULL));
    BAD(tc_get_rng_state_all(NULL, 1));
    NODEV(tc_get_rng_state(-1, &rs));
    int depth = 0;
    BAD(tc_nvtx_range_push(NULL, &depth));
    EXPECT(tc_nvtx_range_pop(&depth), TC_ERROR_INVALID_STATE);
    EXPECT(tc_nvtx_range_push("r", &depth), TC_OK);
    EXPECT(tc_nvtx_range_pop(&depth), TC_OK);
    CHECK(depth == 0);
    tc_tensor_release(cpu);
}

int main(void)
{
    setenv("CUDA_VISIBLE_DEVICES", "", 1); /* the same answers with or without a GPU */
    tc_test_init();
    garbage = tc_test_garbage(4096);
    runtime_calls();
    stream_calls();
    memory_calls();
    graph_calls();
    dist_calls();
    nccl_calls();
    ipc_and_tensor_calls();
    free(garbage);
    return TC_TEST_DONE();
}
