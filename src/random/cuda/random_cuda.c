/* The CUDA side of random draws: the launch of a fill on
 * the current stream of the generator's device, and the hook that lets CUDA
 * graphs replay random kernels with fresh numbers.
 *
 * Graph hook (for the graphs issue; PyTorch's PhiloxCudaState idea):
 *   capture:  tc__generator_capture_begin(gen, buf)   buf: 2 uint64 of device memory
 *             ... captured draws read {seed, offset} from buf and add the blocks
 *                 used earlier in the capture (gen->capture_offset) ...
 *             tc__generator_capture_end(gen, &blocks)  blocks one replay uses
 *   replay:   tc__generator_replay_prologue(gen, buf, blocks, stream), then
 *             cudaGraphLaunch on the same stream: the prologue queues a write
 *             of the generator's current {seed, offset} into buf and advances
 *             the generator by `blocks`, so each replay draws new numbers and
 *             eager draws after it never reuse the replay's counters.
 * A draw on a capturing stream with a generator not in capture mode is
 * refused (TC_ERROR_INVALID_STATE): its offset would be frozen into the graph.
 * A replay that would take the offset past 2^64-1 is refused like an eager
 * draw (random/random.c): the counters would wrap. */
#include "runtime/cuda/cuda_internal.h"
#include "base/handle_pool.h"
#include "random/random_internal.h"
#include "random_kernels.h"
#include "random_cuda.h"
#include "access/access.h"

static tc_status fill_on_device(tc_generator *gen, const tc__rng_params *p, void *data, size_t n)
{
    int d = gen->device.index;
    cudaStream_t stream = tc__current_cuda_stream(d);
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    TC_CUDA_CHECK(cudaStreamIsCapturing(stream, &cs));
    if (cs == cudaStreamCaptureStatusActive && !gen->capturing)
        return tc__fail(TC_ERROR_INVALID_STATE,
                        "random draw on a stream that is being captured into a CUDA graph, with "
                        "a generator not registered with the capture: each replay would repeat "
                        "the same numbers");
    int sms = tc__sm_count(d);
    if (!sms)
        return tc__fail(TC_ERROR_CUDA, "could not read the multiprocessor count of cuda:%d", d);
    tc__philox_args a = {gen->seed, gen->offset, NULL, 0};
    if (gen->capturing) {
        a.ptr = gen->capture_buf;
        a.intragraph = gen->capture_offset;
    }
    const char *kernel = "random";
    tc__random_launch(p, a, data, n, sms, stream, &kernel);
    return tc__launch_check(stream, kernel);
}

tc_status tc__rng_cuda_fill(tc_generator *gen, const tc__rng_params *p, void *data, size_t n)
{
    if (tc__access_on()) { /* the draw writes its buffer on the current stream */
        int d = gen->device.index;
        tc__span sp;
        tc__span_dense(data, n * tc_dtype_size((tc_dtype)p->dtype), (tc_dtype)p->dtype, 1,
                       (const int64_t[]){(int64_t)n}, true, &sp);
        tc__access_op op = {.dev = d,
                            .stream = (void *)tc__current_cuda_stream(d),
                            .spans = &sp,
                            .n = 1,
                            .what = "random fill"};
        TC_TRY(tc__access_op_publish(&op));
    }
    tc_device_guard g = tc_device_guard_enter(gen->device.index);
    if (g.status != TC_OK)
        return g.status;
    tc_status st = fill_on_device(gen, p, data, n);
    tc_device_guard_exit(&g);
    return st;
}

/* ---- the graph hook --------------------------------------------------------- */

static tc_status check_cuda_gen(tc_generator *gen)
{
    TC_TRY(tc__handle_check(gen, TC_GENERATOR_MAGIC, "tc_generator"));
    TC_CHECK_ARG(gen->device.type == TC_CUDA, "a CPU generator cannot take part in a CUDA graph");
    return TC_OK;
}

tc_status tc__generator_capture_begin(tc_generator *gen, uint64_t *buf)
{
    TC_TRY(check_cuda_gen(gen));
    TC_CHECK_ARG(buf, "buf is NULL");
    pthread_mutex_lock(&gen->lock);
    bool busy = gen->capturing;
    if (!busy) {
        gen->capturing = true;
        gen->capture_buf = buf;
        gen->capture_offset = 0;
    }
    pthread_mutex_unlock(&gen->lock);
    if (busy)
        return tc__fail(TC_ERROR_INVALID_STATE, "the generator is already in a graph capture");
    return TC_OK;
}

tc_status tc__generator_capture_end(tc_generator *gen, uint64_t *blocks_per_replay)
{
    TC_TRY(check_cuda_gen(gen));
    TC_CHECK_ARG(blocks_per_replay, "blocks_per_replay is NULL");
    pthread_mutex_lock(&gen->lock);
    bool was = gen->capturing;
    uint64_t used = gen->capture_offset;
    gen->capturing = false;
    gen->capture_buf = NULL;
    gen->capture_offset = 0;
    pthread_mutex_unlock(&gen->lock);
    if (!was)
        return tc__fail(TC_ERROR_INVALID_STATE, "the generator is not in a graph capture");
    *blocks_per_replay = used;
    return TC_OK;
}

tc_status tc__generator_replay_prologue(tc_generator *gen, uint64_t *buf, uint64_t blocks,
                                        cudaStream_t stream)
{
    TC_TRY(check_cuda_gen(gen));
    TC_CHECK_ARG(buf, "buf is NULL");
    tc_device_guard g = tc_device_guard_enter(gen->device.index);
    if (g.status != TC_OK)
        return g.status;
    pthread_mutex_lock(&gen->lock);
    tc_status st = TC_OK;
    if (blocks > UINT64_MAX - gen->offset) {
        st = tc__fail(TC_ERROR_INVALID_STATE,
                      "a replay needs %llu Philox blocks but the generator's offset is %llu: "
                      "past 2^64-1 the counters would wrap; reseed the generator",
                      (unsigned long long)blocks, (unsigned long long)gen->offset);
    } else {
        tc__random_launch_set_state(buf, gen->seed, gen->offset, stream);
        st = tc__launch_check(stream, "random_set_state");
    }
    if (st == TC_OK)
        gen->offset += blocks;
    pthread_mutex_unlock(&gen->lock);
    tc_device_guard_exit(&g);
    return st;
}
