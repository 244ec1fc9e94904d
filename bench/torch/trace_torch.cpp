// The recorded trace replayed through PyTorch's CUDA caching allocator (its
// C++ API, linked from the torch package), with the same loop and GPU work as
// bench_trace (bench/trace_replay.h). Built and run by bench/run.sh trace.
//   trace_torch TRACE       (PYTORCH_CUDA_ALLOC_CONF applies as usual)
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>

#include <cstdlib>
#include <cstring>

#include "trace_replay.h"

namespace A = c10::cuda::CUDACachingAllocator;

static int t_a(void *, size_t n, void **p)
{
    *p = A::raw_alloc_with_stream(n, nullptr);
    return *p ? 0 : -1;
}
static void t_f(void *, void *p) { A::raw_delete(p); }
static double t_reserved(void *) { return (double)A::getDeviceStats(0).reserved_bytes[0].peak; }
static void t_waits(char *buf, size_t n)
{
    auto st = A::getDeviceStats(0);
    std::snprintf(buf, n, "%lld syncs of all streams, %lld segments freed",
                  (long long)st.num_sync_all_streams, (long long)st.num_device_free);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        std::fprintf(stderr, "usage: trace_torch TRACE\n");
        return 2;
    }
    tr_trace t;
    if (tr_load(argv[1], &t) != 0)
        return 1;
    A::init(c10::cuda::device_count());
    if (tr_spin_init() != 0)
        return 1;
    const char *conf = std::getenv("PYTORCH_CUDA_ALLOC_CONF");
    bool exp = conf && std::strstr(conf, "expandable_segments:True");
    return tr_bench(exp ? "pytorch, expandable" : "pytorch caching allocator", &t, t_a, t_f,
                    nullptr, t_reserved, t_waits)
               ? 1
               : 0;
}
