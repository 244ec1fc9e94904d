// Replays bench_alloc's trace file through PyTorch's CUDA caching allocator
// (its C++ API, linked from the torch package): cold once, warm three times.
// Built and run by bench/run.sh alloc on the GPU machine. Prints the same row
// as bench_alloc: ns/op cold, best warm, peak reserved / peak live.
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

struct Op {
    uint32_t id, alloc;
    uint64_t size;
};

int main(int argc, char **argv)
{
    if (argc < 2) {
        std::fprintf(stderr, "usage: alloc_torch TRACE\n");
        return 2;
    }
    FILE *f = std::fopen(argv[1], "rb");
    uint64_t n = 0;
    if (!f || std::fread(&n, 8, 1, f) != 1)
        return 1;
    std::vector<Op> t(n);
    if (std::fread(t.data(), sizeof(Op), n, f) != n)
        return 1;
    std::fclose(f);
    uint64_t cur = 0, peak = 0;
    std::vector<uint64_t> sz(n);
    for (auto &o : t) {
        if (o.alloc) {
            sz[o.id] = o.size;
            cur += o.size;
            peak = cur > peak ? cur : peak;
        } else {
            cur -= sz[o.id];
        }
    }
    namespace A = c10::cuda::CUDACachingAllocator;
    A::init(c10::cuda::device_count());
    cudaStream_t s = 0;
    std::vector<void *> slots(n);
    auto replay = [&]() {
        auto t0 = std::chrono::steady_clock::now();
        for (auto &o : t) {
            if (o.alloc)
                slots[o.id] = A::raw_alloc_with_stream(o.size, s);
            else
                A::raw_delete(slots[o.id]);
        }
        double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0)
                        .count() /
                    (double)n;
        std::vector<uint8_t> alive(n);
        for (auto &o : t)
            alive[o.id] = (uint8_t)o.alloc;
        for (uint64_t i = 0; i < n; i++)
            if (alive[i])
                A::raw_delete(slots[i]);
        cudaDeviceSynchronize();
        return ns;
    };
    double cold = replay(), warm = 1e30;
    for (int r = 0; r < 3; r++) {
        double w = replay();
        warm = w < warm ? w : warm;
    }
    auto st = A::getDeviceStats(0);
    double reserved = (double)st.reserved_bytes[0].peak;
    std::printf("| %-40s | %10.0f | %10.0f | %6.2fx |\n", "pytorch caching allocator", cold, warm,
                reserved / (double)peak);
    return 0;
}
