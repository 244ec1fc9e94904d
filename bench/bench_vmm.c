/* What CUDA's virtual-memory calls cost, to size expandable segments' physical
 * chunks: for each size, the time to back a reserved range with memory (one
 * cuMemCreate + cuMemMap + cuMemSetAccess for the whole range, or one handle
 * per 2 MiB granule as PyTorch does) and to give it back (a device sync and
 * cuMemUnmap per mapping; handles are released once mapped, so unmapping
 * frees the memory), with cudaMalloc/cudaFree of the same size beside them.
 * Prints microseconds per call, median of 15. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime_api.h>
#include "bench_util.h"

static CUresult (*reserve_)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
static CUresult (*create_)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                           unsigned long long);
static CUresult (*release_)(CUmemGenericAllocationHandle);
static CUresult (*map_)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                        unsigned long long);
static CUresult (*unmap_)(CUdeviceptr, size_t);
static CUresult (*access_)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);

static double now_us(void) { return bench_now_ns() / 1e3; }

static int load(void)
{
    const char *names[] = {"cuMemAddressReserve", "cuMemCreate",   "cuMemRelease", "cuMemMap",
                           "cuMemUnmap",          "cuMemSetAccess"};
    void **slots[] = {(void **)&reserve_, (void **)&create_, (void **)&release_,
                      (void **)&map_,     (void **)&unmap_,  (void **)&access_};
    for (int i = 0; i < 6; i++) {
        enum cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion(names[i], slots[i], 12000, cudaEnableDefault, &q) !=
                cudaSuccess ||
            q != cudaDriverEntryPointSuccess)
            return -1;
    }
    return 0;
}

static CUmemAllocationProp prop;
static CUmemAccessDesc acc;

/* Backs [va, va+size) with handles of `piece` bytes each; returns microseconds. */
static double map_range(CUdeviceptr va, size_t size, size_t piece)
{
    double t0 = now_us();
    for (size_t off = 0; off < size; off += piece) {
        CUmemGenericAllocationHandle h;
        if (create_(&h, piece, &prop, 0) != CUDA_SUCCESS || map_(va + off, piece, 0, h, 0))
            return -1;
        release_(h);
    }
    access_(va, size, &acc, 1);
    return now_us() - t0;
}

static double unmap_range(CUdeviceptr va, size_t size, size_t piece)
{
    double t0 = now_us();
    cudaDeviceSynchronize();
    for (size_t off = 0; off < size; off += piece)
        unmap_(va + off, piece);
    return now_us() - t0;
}

int main(void)
{
    if (cudaFree(0) != cudaSuccess || load() != 0) {
        puts("bench_vmm: no GPU or no virtual-memory API");
        return 0;
    }
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    memset(&acc, 0, sizeof acc);
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    const size_t G = (size_t)2 << 20;
    CUdeviceptr va;
    if (reserve_(&va, (size_t)1 << 36, 0, 0, 0) != CUDA_SUCCESS)
        return 1;
    enum { R = 15 };
    printf("| MiB | map 1 handle | unmap 1 | map per 2 MiB | unmap per 2 MiB | cudaMalloc | "
           "cudaFree | sync idle |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    size_t sizes[] = {2, 8, 32, 128, 512};
    for (int s = 0; s < 5; s++) {
        size_t n = sizes[s] << 20;
        double t[7][R];
        for (int r = 0; r < R; r++) {
            t[0][r] = map_range(va, n, n);
            t[1][r] = unmap_range(va, n, n);
            t[2][r] = map_range(va, n, G);
            t[3][r] = unmap_range(va, n, G);
            void *p;
            double t0 = now_us();
            cudaMalloc(&p, n);
            t[4][r] = now_us() - t0;
            t0 = now_us();
            cudaFree(p);
            t[5][r] = now_us() - t0;
            t0 = now_us();
            cudaDeviceSynchronize();
            t[6][r] = now_us() - t0;
        }
        printf("| %zu", sizes[s]);
        for (int k = 0; k < 7; k++) {
            printf(" | %.1f", bench_median(t[k], R));
        }
        printf(" |\n");
    }
    return 0;
}
