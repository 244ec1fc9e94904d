/* tcuda: CUDA graphs (torch.cuda.CUDAGraph, graph, graph_pool_handle,
 * is_current_stream_capturing, make_graphed_callables).
 *
 * A graph records the GPU work that tcuda calls queue on one stream between
 * tc_graph_capture_begin and tc_graph_capture_end, and tc_graph_replay runs
 * that work again with one launch. Capture happens on a stream the caller
 * created (never the default stream, which is CUDA's legacy stream); the
 * guard form tc_graph_capture_guard_enter/exit does what
 * `with torch.cuda.graph(g):` does: it synchronizes the device, makes a side
 * stream current, captures, and restores the previous stream.
 *
 * What a capture records, and what replay assumes:
 * - Kernels read and write the same addresses on every replay. Inputs and
 *   outputs are "static" tensors: copy new inputs into the tensors the
 *   captured work read (tc_tensor_copy_) before a replay, read results from
 *   the tensors it wrote. Keep those tensors alive as long as the graph.
 * - Memory allocated during capture (tensor storage, reduction scratch,
 *   tc_caching_allocator_alloc on the capturing stream) comes from the
 *   graph's private memory pool. Freed during capture, it is reused by later
 *   allocations of the same capture; its blocks are never handed out outside
 *   the pool until every graph using the pool is reset or destroyed. Memory
 *   stats count it; snapshots show its segments with segment_pool_id equal
 *   to the pool id. Work forked onto other streams inside a capture (joined
 *   by events) is captured too, but its allocations come from the default
 *   pool: allocate on the capturing stream.
 * - Random fills with the device's default generator draw new numbers on
 *   every replay: replay k draws exactly what the same fills would have drawn
 *   eagerly at the generator's offset when the replay is queued, and each
 *   replay advances that offset by the amount the captured fills use. Fills
 *   with other CUDA generators are refused during capture.
 * - On compute capability 9.0 and later, the edges into tcuda's own kernels
 *   are made programmatic (Programmatic Dependent Launch): such a kernel is
 *   launched while the work it depends on still runs and waits for it on
 *   the device, which hides its launch latency. Edges into other kernels
 *   (cuBLAS's, the caller's, jiterator kernels) stay as captured.
 * - Run the work once before capturing it (graphed callables do): first uses
 *   set things up with calls a capture cannot record (cuBLAS makes its
 *   handle and workspace on the first matmul of a thread, the allocator
 *   caches memory).
 * - Synchronizing calls (tc_synchronize, tc_stream_synchronize and
 *   tc_stream_query, tc_event_synchronize and tc_event_query, tc_tensor_item
 *   and other copies to host memory, copies from pageable host memory,
 *   tc_empty_cache) cannot run during capture. Which ones a capture refuses
 *   depends on its mode: TC_CAPTURE_MODE_GLOBAL refuses them on every thread,
 *   THREAD_LOCAL on the capturing thread, RELAXED only those that wait for
 *   the capturing stream; waits for a whole device are always refused. A
 *   refused call fails with TC_ERROR_INVALID_STATE and a message naming the
 *   call, does nothing, and invalidates the capture: tc_graph_capture_end
 *   then fails with that message and leaves the graph empty and reusable.
 *
 * Handles (tc_graph, tc_graphed_callable) are checked: a destroyed one, or a
 * pointer that is not one, gives TC_ERROR_INVALID_HANDLE (a second destroy
 * too). Without CUDA, or without a GPU, every call that needs one answers
 * TC_ERROR_NO_DEVICE. Out-parameters come last and are written only on
 * success. Not thread-safe per graph: one thread at a time uses a graph. */
#ifndef TCUDA_GRAPH_H
#define TCUDA_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "stream.h"

TCUDA_EXTERN_C_BEGIN

typedef struct tc_graph tc_graph;
typedef struct tc_graphed_callable tc_graphed_callable;

/* A graph memory pool's id (PyTorch's graph_pool_handle()). {0} means "a new
 * private pool for this graph". */
typedef struct tc_graph_pool_id {
    uint64_t id;
} tc_graph_pool_id;

/* cudaStreamCaptureMode: which synchronizing or unsafe calls a capture
 * refuses (see the top of this file). */
typedef enum tc_capture_mode {
    TC_CAPTURE_MODE_GLOBAL = 0,       /* every thread (PyTorch's default) */
    TC_CAPTURE_MODE_THREAD_LOCAL = 1, /* the capturing thread only */
    TC_CAPTURE_MODE_RELAXED = 2       /* only calls that wait for the capturing stream */
} tc_capture_mode;

/* How a capture links the work it records (beyond PyTorch).
 * STREAM: each node after the one queued before it, as CUDA's stream capture
 * and PyTorch record a graph. DATA: each tcuda operation after only the
 * earlier work whose memory it touches (reads what it wrote, writes what it
 * read or wrote), so that independent operations run side by side at
 * replay; work tcuda does not see into (random fills, the caller's own
 * kernels, copies between GPUs, event waits) stays after everything before
 * it, and everything after waits for it. Replays give the same results in
 * either order. */
typedef enum tc_graph_order {
    TC_GRAPH_ORDER_STREAM = 0, /* the default */
    TC_GRAPH_ORDER_DATA = 1
} tc_graph_order;

/* Work run between capture and replay, for graphed callables and updates:
 * queues GPU work on the current stream; returns TC_OK or an error (its
 * message in tc_last_error()). */
typedef tc_status (*tc_graph_fn)(void *ctx);

/* ---- graphs ------------------------------------------------------------ */

/* Creates an empty graph (initializes CUDA). The caller destroys it with
 * tc_graph_destroy. TC_ERROR_NO_DEVICE without a GPU. */
TCUDA_API tc_status tc_graph_create(tc_graph **out);

/* Destroys a graph: its executable, its recorded graph, and its share of the
 * memory pool (as tc_graph_reset). A capture still underway is ended and
 * discarded first (from the capturing thread). Replays already queued still
 * run. A second destroy gives TC_ERROR_INVALID_HANDLE. */
TCUDA_API tc_status tc_graph_destroy(tc_graph *graph);

/* Starts capturing the work queued on `stream` (NULL: the current stream of
 * the current device) into an empty graph. `pool` is {0} for a new private
 * pool, or an id from tc_graph_pool_handle or tc_graph_pool to share a pool
 * with graphs captured before (captured in order, replayed in that order,
 * never at the same time). Does not make `stream` current: queue the work on
 * it (tc_stream_guard_enter, or use tc_graph_capture_guard_enter).
 * TC_ERROR_INVALID_ARGUMENT for the default stream (capture needs a stream
 * made by tc_stream_create), a stream already capturing, a bad mode or pool
 * id; TC_ERROR_INVALID_STATE when the graph is not empty (capturing, or
 * captured: tc_graph_reset first). */
TCUDA_API tc_status tc_graph_capture_begin(tc_graph *graph, tc_graph_pool_id pool,
                                           tc_stream *stream, tc_capture_mode mode);

/* Sets how the graph's next captures link their work (tc_graph_order; a new
 * graph has TC_GRAPH_ORDER_STREAM). Kept across tc_graph_reset and used by
 * tc_graph_update. TC_ERROR_INVALID_ARGUMENT for an unknown order,
 * TC_ERROR_INVALID_STATE during a capture. */
TCUDA_API tc_status tc_graph_set_order(tc_graph *graph, tc_graph_order order);

/* Ends the capture and instantiates the graph. Call it from the thread that
 * began the capture (any thread in relaxed mode). On failure (the capture was
 * invalidated by a refused call, or CUDA refused the work) the message says
 * why, the capture is discarded and the graph is empty again.
 * TC_ERROR_INVALID_STATE when no capture is underway. */
TCUDA_API tc_status tc_graph_capture_end(tc_graph *graph);

/* Queues the captured work on the current stream of the graph's device.
 * TC_ERROR_INVALID_STATE before a capture ended. */
TCUDA_API tc_status tc_graph_replay(tc_graph *graph);

/* Drops the captured work and the graph's share of its pool, making the graph
 * empty (it may capture again). Memory of the pool that tensors still hold
 * is given back when they are released. A no-op on an empty graph;
 * TC_ERROR_INVALID_STATE during a capture. */
TCUDA_API tc_status tc_graph_reset(tc_graph *graph);

/* The id of the graph's memory pool (from its capture on), to pass to
 * another graph's capture. TC_ERROR_INVALID_STATE before a capture began. */
TCUDA_API tc_status tc_graph_pool(const tc_graph *graph, tc_graph_pool_id *out);

/* Writes the captured graph to `path` as a Graphviz DOT file
 * (cudaGraphDebugDotPrint, verbose). TC_ERROR_INVALID_STATE before a
 * capture ended; TC_ERROR_IO when the file cannot be written. */
TCUDA_API tc_status tc_graph_debug_dump(const tc_graph *graph, const char *path);

/* A new pool id for graphs that will share one pool
 * (torch.cuda.graph_pool_handle). */
TCUDA_API tc_status tc_graph_pool_handle(tc_graph_pool_id *out);

/* True when a graph capture is underway on the current stream of the
 * current device (torch.cuda.is_current_stream_capturing). False without a
 * GPU, and before CUDA was initialized. Never fails. */
TCUDA_API bool tc_is_current_stream_capturing(void);

/* ---- updating a captured graph (beyond PyTorch) ------------------------- */

/* How tc_graph_update applied the new capture. */
typedef enum tc_graph_update_result {
    /* cudaGraphExecUpdate: same topology, new parameters */
    TC_GRAPH_UPDATE_RESULT_IN_PLACE = 0,
    /* topology changed: the graph was instantiated again */
    TC_GRAPH_UPDATE_RESULT_REINSTANTIATED = 1
} tc_graph_update_result;

/* Captures `fn(ctx)` again in the graph's pool and mode, on a stream tcuda
 * keeps per device for updates (made current while fn runs; the stream of
 * the first capture is not used and may have been destroyed), and replaces
 * the captured work with it: in place through cudaGraphExecUpdate when the
 * topology matches (kernel parameters, addresses and sizes may change), else
 * by instantiating the new graph; *how says which. If fn or the capture
 * fails, the graph keeps its previous work and the error is returned.
 * Updates of graphs of one device run one at a time (fn must not update a
 * graph of the same device). TC_ERROR_INVALID_STATE unless the graph was
 * captured. */
TCUDA_API tc_status tc_graph_update(tc_graph *graph, tc_graph_fn fn, void *ctx,
                                    tc_graph_update_result *how);

/* ---- the guard form: `with torch.cuda.graph(g, pool, stream, mode):` ---- */

typedef struct tc_graph_capture_guard {
    tc_graph *graph;              /* NULL when enter failed */
    tc_stream_guard stream_guard; /* restores the previous stream */
    tc_status status;             /* TC_OK, or why enter failed */
} tc_graph_capture_guard;

/* Synchronizes the device, makes `stream` (NULL: a side stream tcuda keeps
 * per device for captures) current, and begins capturing on it. Check
 * .status: on failure nothing is captured and the stream is unchanged. */
TCUDA_API tc_graph_capture_guard tc_graph_capture_guard_enter(tc_graph *graph,
                                                              tc_graph_pool_id pool,
                                                              tc_stream *stream,
                                                              tc_capture_mode mode);

/* Ends the capture (tc_graph_capture_end) and restores the previous stream;
 * returns the capture's status: unlike the device and stream guards' exits,
 * this one can fail, because ending a capture can. A guard whose enter
 * failed returns that status and does nothing else. */
TCUDA_API tc_status tc_graph_capture_guard_exit(tc_graph_capture_guard *guard);

/* ---- graphed callables (torch.cuda.make_graphed_callables) -------------- */

/* Runs `fn(ctx)` `warmup_iters` times (>= 0; PyTorch uses 3) on a side
 * stream, synchronizes, captures one more call into a graph with its own
 * pool, and returns a callable that replays it in *out (torch's name for a
 * create: the caller destroys it with tc_graphed_callable_destroy). Static
 * inputs and outputs are the tensors fn uses: fn must reach the same tensors
 * on every call (through ctx), the caller copies new inputs into them before
 * tc_graphed_callable_call and reads outputs from them after it. Tensors fn
 * creates while captured come from the graph's pool. Errors of fn are
 * returned as they are. */
TCUDA_API tc_status tc_make_graphed_callable(tc_graph_fn fn, void *ctx, int warmup_iters,
                                             tc_graphed_callable **out);

/* The same for n callables sharing one memory pool: warms up each, then
 * captures them in order (out[i] for fns[i], ctxs[i]). Call them in the same
 * order; destroy each with tc_graphed_callable_destroy. On failure none is
 * returned. */
TCUDA_API tc_status tc_make_graphed_callables(const tc_graph_fn *fns, void *const *ctxs, int n,
                                              int warmup_iters, tc_graphed_callable **out);

/* tc_make_graphed_callables with the graphs' order (tc_graph_order):
 * TC_GRAPH_ORDER_DATA lets the independent operations of each call run side
 * by side. */
TCUDA_API tc_status tc_make_graphed_callables_ordered(const tc_graph_fn *fns, void *const *ctxs,
                                                      int n, int warmup_iters, tc_graph_order order,
                                                      tc_graphed_callable **out);

/* Replays the captured call on the current stream. */
TCUDA_API tc_status tc_graphed_callable_call(tc_graphed_callable *callable);

/* The graph inside (for tc_graph_pool, tc_graph_debug_dump), owned by the
 * callable. Cannot fail: NULL for a handle that is not a live callable,
 * leaving tc_last_error() as it was. */
TCUDA_API tc_graph *tc_graphed_callable_graph(const tc_graphed_callable *callable);

/* Destroys a callable made by tc_make_graphed_callable(s), and its graph. */
TCUDA_API tc_status tc_graphed_callable_destroy(tc_graphed_callable *callable);

TCUDA_EXTERN_C_END

#endif
