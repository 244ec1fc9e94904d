/* GPU, two or more: what torch.cuda does across GPUs (the CUDA semantics
 * notes), each checked against values computed here independently.
 *
 * - Memory per device: a tensor made on "the current device" after
 *   tc_set_device(1) is on cuda:1 and counted there only; peaks, frees and
 *   empty_cache stay per device; back on cuda:0, tensors go to cuda:0.
 * - Peer access: tc_can_device_access_peer agrees with CUDA for every pair,
 *   is true where NVML sees NVLink on both GPUs, false for a device with
 *   itself (torch.cuda.can_device_access_peer(0, 0) is False), an error for
 *   an index out of range; the first copy between two GPUs enables peer
 *   access both ways (a kernel then reads the other GPU's memory), and
 *   copies around every GPU, strided and converting, are exact.
 * - device_of (tc_device_guard_enter_of): enters a tensor's GPU and
 *   restores the device before; a no-op for a CPU tensor or NULL.
 * - Operations on tensors of a GPU that is not the current one (add,
 *   matmul, reductions, a random fill from that GPU's generator, copies,
 *   in place): right values, results on that GPU, the current device
 *   unchanged; tensors of two devices in one call are refused with
 *   TC_ERROR_DEVICE_MISMATCH and allocate nothing.
 * - Streams and events per device: each device's current stream is its
 *   own; work on cuda:1's tensors goes on cuda:1's current stream; the
 *   default stream of one GPU is synchronized, queried, recorded on and
 *   made to wait while the other GPU is current; an event recorded on
 *   cuda:1 orders a cuda:0 stream; a block of cuda:1 freed while cuda:0 is
 *   current is not reused before cuda:1's default stream is done with it;
 *   nor is a pinned host block that a non_blocking copy to cuda:1 still
 *   reads.
 * - The current device (and current stream) is per thread.
 *
 * Ordering checks keep a stream busy with a kernel that spins 0.2 s before
 * it writes, so that work not ordered after it reads the old contents.
 * Exits 77 with fewer than two GPUs, saying how many it sees. */
#include <dlfcn.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>

#include "tc_test.h"

#include <cuda_runtime_api.h>

#include "test_kernels.h"

enum { N = 1 << 16 };                             /* ints in the ordering checks */
static const uint64_t SPIN_NS = 200ull * 1000000; /* how long a busy stream stays busy */
static const tc_device CPU = {TC_CPU, -1};
static int ndev;

static tc_device cuda(int index) { return (tc_device){TC_CUDA, index}; }

/* ---- checks that say what was expected ------------------------------------ */

static void expect_at(const char *file, int line, bool ok, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void expect_at(const char *file, int line, bool ok, const char *fmt, ...)
{
    if (ok) {
        tc_test_passed++;
        return;
    }
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tc_test_fail_at(file, line, msg);
}
#define EXPECT(cond, ...) expect_at(__FILE__, __LINE__, (cond), __VA_ARGS__)

/* The calling thread's current device must be `want` after `what`. */
#define EXPECT_CURRENT(want, what)                                                                 \
    do {                                                                                           \
        int cur_ = tc_test_current_device();                                                       \
        EXPECT(cur_ == (want), "after %s: expected cuda:%d current, found cuda:%d", what, (want),  \
               cur_);                                                                              \
    } while (0)

/* t must be a tensor on cuda:dev. */
#define EXPECT_ON(t, dev, what)                                                                    \
    do {                                                                                           \
        tc_device d_ = tc_tensor_device(t);                                                        \
        char s_[32];                                                                               \
        tc_device_format(d_, s_, sizeof s_);                                                       \
        EXPECT(d_.type == TC_CUDA && d_.index == (dev), "%s: expected on cuda:%d, found on %s",    \
               what, (dev), s_);                                                                   \
    } while (0)

/* t's n values against ref within tol (0: exact); names the first that
 * differs and how many do. */
static void values_at(const char *file, int line, const char *what, const tc_tensor *t,
                      const double *ref, const double *tol, int64_t n)
{
    if (tc_tensor_numel(t) != n) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s: expected %lld elements, found %lld", what, (long long)n,
                 (long long)tc_tensor_numel(t));
        tc_test_fail_at(file, line, msg);
        return;
    }
    double *v = tc_test_values(t);
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < n; i++) {
        double allowed = tol ? tol[i] : 0;
        if (!(fabs(v[i] - ref[i]) <= allowed)) {
            bad++;
            if (first < 0)
                first = i;
        }
    }
    if (bad == 0) {
        tc_test_passed++;
    } else {
        char msg[512];
        snprintf(msg, sizeof msg,
                 "%s: element %lld is %.9g, expected %.9g (within %.3g); %lld of %lld differ", what,
                 (long long)first, v[first], ref[first], tol ? tol[first] : 0.0, (long long)bad,
                 (long long)n);
        tc_test_fail_at(file, line, msg);
    }
    free(v);
}
#define EXPECT_VALUES(what, t, ref, tol, n) values_at(__FILE__, __LINE__, what, t, ref, tol, n)

/* n ints at device pointer p of device dev (read after the work that wrote
 * them was waited for) must be base + i. */
static void ints_at(const char *file, int line, const char *what, int dev, const int *p, int n,
                    int base)
{
    int *h = malloc(sizeof(int) * (size_t)n);
    tc_device_guard g = tc_device_guard_enter(dev);
    cudaError_t err = cudaMemcpy(h, p, sizeof(int) * (size_t)n, cudaMemcpyDeviceToHost);
    tc_device_guard_exit(&g);
    char msg[512];
    if (g.status != TC_OK || err != cudaSuccess) {
        snprintf(msg, sizeof msg, "%s: reading cuda:%d failed: %s / %s", what, dev,
                 tc_status_string(g.status), cudaGetErrorString(err));
        tc_test_fail_at(file, line, msg);
        free(h);
        return;
    }
    int bad = 0, first = -1;
    for (int i = 0; i < n; i++)
        if (h[i] != base + i && bad++ == 0)
            first = i;
    if (bad == 0) {
        tc_test_passed++;
    } else {
        snprintf(msg, sizeof msg,
                 "%s: element %d is %d, expected %d (what the kernel wrote); %d of %d differ", what,
                 first, h[first], base + first, bad, n);
        tc_test_fail_at(file, line, msg);
    }
    free(h);
}
#define EXPECT_INTS(what, dev, p, n, base) ints_at(__FILE__, __LINE__, what, dev, p, n, base)

/* ---- inputs ------------------------------------------------------------------ */

/* n random floats in [-1, 1) on the host (caller frees). */
static float *host_floats(int64_t n)
{
    float *v = malloc(sizeof(float) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)(2 * tc_test_rand_uniform() - 1);
    return v;
}

static tc_tensor *floats_on(int dev, const float *v, int ndim, const int64_t *sizes)
{
    tc_tensor *t = NULL;
    CHECK_OK(tc_tensor_from_data(v, ndim, sizes, TC_FLOAT32, cuda(dev), &t));
    return t;
}

/* A value the spinning kernels start from (value + i for i < N fits an
 * int), never the one before: a buffer written again then shows which
 * write a reader saw. */
static int some_base(void)
{
    static int last;
    int b;
    do
        b = (int)(tc_test_rand() % 1000000) + 1;
    while (b == last);
    return last = b;
}

/* Queues on `stream` (a CUDA handle of device dev; NULL: its default
 * stream) a kernel that spins SPIN_NS and then writes base + i to p[i]. */
static void spin_fill(int dev, void *stream, int *p, int base)
{
    tc_device_guard g = tc_device_guard_enter(dev); /* a launch goes to the current device */
    CHECK_OK(g.status);
    CHECK_OK(tc_test_spin_then_fill(stream, SPIN_NS, p, N, base));
    tc_device_guard_exit(&g);
}

/* Queues on `stream` of cuda:0 (NULL: its default stream) a copy of N ints
 * from b1 on cuda:1 to b0 on cuda:0. */
static void copy_to_0(void *stream, int *b0, const int *b1)
{
    tc_device_guard g = tc_device_guard_enter(0); /* handle 0 names the current device's */
    CHECK(cudaMemcpyPeerAsync(b0, 0, b1, 1, sizeof(int) * N, stream) == cudaSuccess);
    tc_device_guard_exit(&g);
}

static size_t allocated(int dev) { return tc_test_bytes(tc_memory_allocated, dev); }
static size_t reserved(int dev) { return tc_test_bytes(tc_memory_reserved, dev); }

/* ---- memory per device ------------------------------------------------------- */

/* First, while the statistics hold only what this test made. */
static void test_memory_per_device(void)
{
    CHECK_OK(tc_empty_cache());
    size_t a0 = allocated(0), a1 = allocated(1), r1 = reserved(1);
    int64_t n0 = tc_test_stat(0, "allocation.all.current");
    int64_t n1 = tc_test_stat(1, "allocation.all.current");

    CHECK_OK(tc_set_device(1));
    EXPECT_CURRENT(1, "tc_set_device(1)");
    int64_t s1[1] = {1000}; /* 4000 bytes: a block of 4096 (512-byte rounding) */
    tc_tensor *t1 = NULL;
    CHECK_OK(tc_tensor_zeros(1, s1, TC_FLOAT32, cuda(TC_CURRENT_DEVICE), &t1));
    EXPECT_ON(t1, 1, "zeros on the current device after tc_set_device(1)");
    EXPECT(allocated(1) == a1 + 4096,
           "memory_allocated(1): expected %zu (4000 bytes rounded up to 4096) more, found %zu more",
           (size_t)4096, allocated(1) - a1);
    EXPECT(tc_test_bytes(tc_memory_allocated, TC_CURRENT_DEVICE) == allocated(1),
           "memory_allocated(current device) should be cuda:1's %zu bytes", allocated(1));
    EXPECT(allocated(0) == a0, "memory_allocated(0): expected %zu (unchanged), found %zu", a0,
           allocated(0));
    EXPECT(tc_test_stat(1, "allocation.all.current") == n1 + 1,
           "cuda:1 should count one more live allocation");
    EXPECT(tc_test_stat(0, "allocation.all.current") == n0,
           "cuda:0 should count no more live allocations");
    tc_memory_stats_info info;
    CHECK_OK(tc_memory_stats(1, &info));
    EXPECT(info.allocated_bytes[TC_STAT_POOL_ALL].current == (int64_t)allocated(1),
           "memory_stats(1).allocated_bytes.all.current: expected %zu, found %lld", allocated(1),
           (long long)info.allocated_bytes[TC_STAT_POOL_ALL].current);
    EXPECT(reserved(1) >= allocated(1),
           "memory_reserved(1) %zu should hold memory_allocated(1) %zu", reserved(1), allocated(1));
    double zeros[1000] = {0};
    EXPECT_VALUES("zeros made on cuda:1", t1, zeros, NULL, 1000);

    CHECK_OK(tc_set_device(0));
    int64_t s0[1] = {3000}; /* 3000 bytes of int8: a block of 3072 */
    tc_tensor *t0 = NULL;
    CHECK_OK(tc_tensor_full(1, s0, 5, TC_INT8, cuda(TC_CURRENT_DEVICE), &t0));
    EXPECT_ON(t0, 0, "full on the current device after tc_set_device(0)");
    EXPECT(allocated(0) == a0 + 3072, "memory_allocated(0): expected 3072 more, found %zu more",
           allocated(0) - a0);
    EXPECT(allocated(1) == a1 + 4096, "memory_allocated(1): expected 4096 more, found %zu more",
           allocated(1) - a1);

    /* peaks: a reset of cuda:1 leaves cuda:0's */
    size_t peak0 = tc_test_bytes(tc_max_memory_allocated, 0);
    CHECK_OK(tc_reset_peak_memory_stats(1));
    EXPECT(tc_test_bytes(tc_max_memory_allocated, 0) == peak0,
           "max_memory_allocated(0) should stay %zu after reset_peak_memory_stats(1)", peak0);
    EXPECT(tc_test_bytes(tc_max_memory_allocated, 1) == allocated(1),
           "max_memory_allocated(1) should be its current %zu after its reset", allocated(1));

    /* a cuda:1 tensor freed while cuda:0 is current goes back to cuda:1 */
    size_t r1_held = reserved(1);
    CHECK_OK(tc_tensor_release(t1));
    EXPECT(allocated(1) == a1, "memory_allocated(1): expected %zu after the release, found %zu", a1,
           allocated(1));
    EXPECT(allocated(0) == a0 + 3072, "memory_allocated(0) should not change by a cuda:1 release");
    EXPECT(reserved(1) == r1_held,
           "memory_reserved(1): the freed block stays cached (%zu), found %zu", r1_held,
           reserved(1));

    /* empty_cache gives back cuda:1's free segment; cuda:0's live one stays */
    CHECK_OK(tc_empty_cache());
    EXPECT(reserved(1) == r1, "memory_reserved(1) after empty_cache: expected %zu, found %zu", r1,
           reserved(1));
    EXPECT(reserved(0) >= allocated(0) && allocated(0) == a0 + 3072,
           "cuda:0 keeps its live tensor through empty_cache: reserved %zu, allocated %zu",
           reserved(0), allocated(0));
    double fives[3000];
    for (int i = 0; i < 3000; i++)
        fives[i] = 5;
    EXPECT_VALUES("a cuda:0 tensor after empty_cache", t0, fives, NULL, 3000);
    CHECK_OK(tc_tensor_release(t0));
    EXPECT(allocated(0) == a0, "memory_allocated(0): expected %zu after the release, found %zu", a0,
           allocated(0));
    EXPECT_CURRENT(0, "the memory checks");
}

/* ---- peer access ------------------------------------------------------------- */

/* Active NVLinks of CUDA device `dev` as NVML reports them (matched by PCI
 * bus id, which CUDA_VISIBLE_DEVICES does not renumber); -1 when NVML
 * cannot say (no libnvidia-ml, or no NVLink on the device). */
static int nvlinks_active(int dev)
{
    static void *lib;
    typedef int (*init_fn)(void);
    typedef int (*by_pci_fn)(const char *, void **);
    typedef int (*link_state_fn)(void *, unsigned, int *);
    init_fn init = NULL;
    by_pci_fn by_pci = NULL;
    link_state_fn link_state = NULL;
    if (!lib)
        lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return -1;
    *(void **)&init = dlsym(lib, "nvmlInit_v2");
    *(void **)&by_pci = dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
    *(void **)&link_state = dlsym(lib, "nvmlDeviceGetNvLinkState");
    char bus[64];
    void *nd = NULL;
    if (!init || !by_pci || !link_state || init() != 0 ||
        cudaDeviceGetPCIBusId(bus, sizeof bus, dev) != cudaSuccess || by_pci(bus, &nd) != 0) {
        (void)cudaGetLastError();
        return -1;
    }
    int active = 0, answered = 0;
    for (unsigned link = 0; link < 18; link++) { /* NVML_NVLINK_MAX_LINKS */
        int on = 0;                              /* nvmlEnableState_t */
        if (link_state(nd, link, &on) == 0) {
            answered++;
            active += on == 1;
        }
    }
    return answered ? active : -1;
}

static void test_peer_answers(void)
{
    for (int i = 0; i < ndev; i++)
        for (int j = 0; j < ndev; j++) {
            bool can = i == j; /* the opposite of what is expected, so a write shows */
            int ref = 0;
            if (i != j)
                EXPECT(cudaDeviceCanAccessPeer(&ref, i, j) == cudaSuccess,
                       "cudaDeviceCanAccessPeer(%d, %d) failed", i, j);
            CHECK_OK(tc_can_device_access_peer(i, j, &can));
            EXPECT(can == (i != j && ref),
                   "tc_can_device_access_peer(%d, %d): expected %s (%s), found %s", i, j,
                   i != j && ref ? "true" : "false",
                   i == j ? "a device with itself, as torch.cuda" : "CUDA's answer",
                   can ? "true" : "false");
        }
    bool can01 = false, can10 = false;
    CHECK_OK(tc_can_device_access_peer(0, 1, &can01));
    CHECK_OK(tc_can_device_access_peer(1, 0, &can10));
    int links0 = nvlinks_active(0), links1 = nvlinks_active(1);
    printf("peer access: cuda:0 -> cuda:1 %s, cuda:1 -> cuda:0 %s; active NVLinks (NVML): %d and "
           "%d (-1: NVML cannot say)\n",
           can01 ? "yes" : "no", can10 ? "yes" : "no", links0, links1);
    if (links0 > 0 && links1 > 0)
        EXPECT(can01 && can10,
               "cuda:0 and cuda:1 both have active NVLinks (%d and %d): expected peer access "
               "both ways, found %s and %s",
               links0, links1, can01 ? "true" : "false", can10 ? "true" : "false");

    /* TC_CURRENT_DEVICE is the current device, on either side */
    CHECK_OK(tc_set_device(1));
    bool cur = !can10;
    CHECK_OK(tc_can_device_access_peer(TC_CURRENT_DEVICE, 0, &cur));
    EXPECT(cur == can10, "tc_can_device_access_peer(current = 1, 0): expected %d as (1, 0)", can10);
    cur = true;
    CHECK_OK(tc_can_device_access_peer(TC_CURRENT_DEVICE, TC_CURRENT_DEVICE, &cur));
    EXPECT(!cur, "tc_can_device_access_peer(current, current): expected false (itself)");
    CHECK_OK(tc_set_device(0));

    /* out of range: an error naming the device, nothing written */
    const int bad[][2] = {{0, ndev}, {ndev, 0}, {1, 1000}, {1000, 1}, {0, INT_MAX}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
        for (int before = 0; before < 2; before++) {
            bool v = before;
            CHECK_STATUS(tc_can_device_access_peer(bad[k][0], bad[k][1], &v),
                         TC_ERROR_INVALID_DEVICE);
            char want[64];
            snprintf(want, sizeof want, "device %d does not exist",
                     bad[k][0] >= ndev ? bad[k][0] : bad[k][1]);
            EXPECT(strstr(tc_last_error(), want) != NULL,
                   "tc_can_device_access_peer(%d, %d): expected a message with \"%s\", got \"%s\"",
                   bad[k][0], bad[k][1], want, tc_last_error());
            EXPECT(v == (bool)before, "a refused tc_can_device_access_peer wrote its out");
        }
    CHECK_STATUS(tc_can_device_access_peer(0, 1, NULL), TC_ERROR_INVALID_ARGUMENT);
    EXPECT_CURRENT(0, "tc_can_device_access_peer");
}

/* Peer access from `dev` to `peer` must be enabled already (by tcuda):
 * enabling it again must say so. */
static void expect_peer_enabled(int dev, int peer)
{
    tc_device_guard g = tc_device_guard_enter(dev);
    cudaError_t err = cudaDeviceEnablePeerAccess(peer, 0);
    (void)cudaGetLastError(); /* not sticky */
    tc_device_guard_exit(&g);
    EXPECT(err == cudaErrorPeerAccessAlreadyEnabled,
           "after a copy between cuda:%d and cuda:%d, expected tcuda to have enabled peer access "
           "from cuda:%d to cuda:%d (cudaDeviceEnablePeerAccess: already enabled), found %s",
           dev, peer, dev, peer, cudaGetErrorName(err));
}

/* A kernel on `dev` reads `peer`'s memory directly (what peer access is). */
static void check_peer_kernel(int dev, int peer)
{
    int *src = NULL, *dst = NULL, base = some_base(), add = 17;
    CHECK_OK(tc_caching_allocator_alloc(sizeof(int) * N, peer, NULL, (void **)&src));
    CHECK_OK(tc_caching_allocator_alloc(sizeof(int) * N, dev, NULL, (void **)&dst));
    tc_device_guard g = tc_device_guard_enter(peer);
    CHECK_OK(tc_test_spin_then_fill(NULL, 0, src, N, base));
    tc_device_guard_exit(&g);
    CHECK_OK(tc_synchronize(peer));
    g = tc_device_guard_enter(dev);
    CHECK_OK(tc_test_copy_add(NULL, src, dst, N, add)); /* on dev, reading peer's memory */
    tc_device_guard_exit(&g);
    CHECK_OK(tc_synchronize(dev));
    char what[96];
    snprintf(what, sizeof what, "a kernel on cuda:%d reading cuda:%d's memory", dev, peer);
    EXPECT_INTS(what, dev, dst, N, base + add);
    CHECK_OK(tc_caching_allocator_delete(src));
    CHECK_OK(tc_caching_allocator_delete(dst));
}

static void test_peer_copies(void)
{
    bool can01 = false, can10 = false;
    CHECK_OK(tc_can_device_access_peer(0, 1, &can01));
    CHECK_OK(tc_can_device_access_peer(1, 0, &can10));

    /* the first copy between the two enables peer access both ways */
    int64_t sz[2] = {64, 48}, szT[2] = {48, 64}, n = 64 * 48;
    float *h = host_floats(n);
    double *ref = malloc(sizeof(double) * (size_t)n), *refT = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        ref[i] = h[i];
        refT[(i % 48) * 64 + i / 48] = h[i]; /* element (r, c) of a goes to (c, r) */
    }
    tc_tensor *a0 = floats_on(0, h, 2, sz), *b1 = NULL;
    CHECK_OK(tc_tensor_empty(2, sz, TC_FLOAT32, cuda(1), &b1));
    CHECK_OK(tc_tensor_copy_(b1, a0, false));
    EXPECT_CURRENT(0, "a copy from cuda:0 to cuda:1");
    EXPECT_VALUES("copy cuda:0 -> cuda:1", b1, ref, NULL, n);
    if (can01)
        expect_peer_enabled(0, 1);
    if (can10)
        expect_peer_enabled(1, 0);
    if (can01)
        check_peer_kernel(0, 1);
    if (can10)
        check_peer_kernel(1, 0);

    /* around every GPU and back to cuda:0, with cuda:0 current all along:
     * plain, converting (float64 and back) and transposing copies */
    tc_tensor *cur = NULL;
    CHECK_OK(tc_tensor_to(a0, cuda(0), TC_FLOAT32, false, &cur));
    for (int d = 1; d <= ndev; d++) {
        int to = d % ndev;
        char what[96];
        tc_tensor *next = NULL, *wide = NULL;
        CHECK_OK(tc_tensor_to(cur, cuda(to), TC_FLOAT64, d % 2 == 0, &wide));
        CHECK_OK(tc_tensor_to(wide, cuda(to), TC_FLOAT32, false, &next));
        snprintf(what, sizeof what, "the float32 -> float64 copy to cuda:%d", to);
        EXPECT_ON(wide, to, what);
        EXPECT(tc_tensor_dtype(wide) == TC_FLOAT64, "%s: expected float64", what);
        EXPECT_VALUES(what, wide, ref, NULL, n);
        tc_tensor_release(wide);
        tc_tensor_release(cur);
        cur = next;
        snprintf(what, sizeof what, "copies around the GPUs, at cuda:%d", to);
        EXPECT_ON(cur, to, what);
        EXPECT_VALUES(what, cur, ref, NULL, n);
        EXPECT_CURRENT(0, what);
    }
    for (int d = 1; d < ndev; d++) {
        tc_tensor *t = NULL, *dst = NULL;
        CHECK_OK(tc_tensor_transpose(a0, 0, 1, &t)); /* a strided view of cuda:0 */
        CHECK_OK(tc_tensor_empty(2, szT, TC_FLOAT32, cuda(d), &dst));
        CHECK_OK(tc_tensor_copy_(dst, t, true)); /* non_blocking between GPUs */
        char what[96];
        snprintf(what, sizeof what, "a transposed view of cuda:0 copied to cuda:%d", d);
        EXPECT_VALUES(what, dst, refT, NULL, n);
        EXPECT_CURRENT(0, what);
        tc_tensor *back = NULL; /* and a strided view of cuda:d copied to cuda:0 */
        CHECK_OK(tc_tensor_transpose(dst, 0, 1, &back));
        tc_tensor *home = NULL;
        CHECK_OK(tc_tensor_empty(2, sz, TC_FLOAT32, cuda(0), &home));
        CHECK_OK(tc_tensor_copy_(home, back, false));
        snprintf(what, sizeof what, "a transposed view of cuda:%d copied to cuda:0", d);
        EXPECT_VALUES(what, home, ref, NULL, n);
        tc_tensor_release(t);
        tc_tensor_release(dst);
        tc_tensor_release(back);
        tc_tensor_release(home);
    }
    tc_tensor_release(cur);
    tc_tensor_release(a0);
    tc_tensor_release(b1);
    free(h);
    free(ref);
    free(refT);
}

/* ---- device_of ---------------------------------------------------------------- */

static void test_device_of(void)
{
    int64_t sz[1] = {4};
    tc_tensor *t0 = NULL, *t1 = NULL, *cpu = NULL, *view = NULL, *inner = NULL;
    CHECK_OK(tc_tensor_zeros(1, sz, TC_FLOAT32, cuda(0), &t0));
    CHECK_OK(tc_tensor_zeros(1, sz, TC_FLOAT32, cuda(1), &t1));
    CHECK_OK(tc_tensor_zeros(1, sz, TC_FLOAT32, CPU, &cpu));

    tc_device_guard g = tc_device_guard_enter_of(t1);
    CHECK_OK(g.status);
    EXPECT_CURRENT(1, "entering device_of(a tensor on cuda:1)");
    EXPECT(g.prev_device == 0, "device_of should remember cuda:0 to restore, found %d",
           g.prev_device);
    CHECK_OK(tc_tensor_zeros(1, sz, TC_FLOAT32, cuda(TC_CURRENT_DEVICE), &inner));
    EXPECT_ON(inner, 1, "a tensor on the current device inside device_of(cuda:1)");
    tc_device_guard gc = tc_device_guard_enter_of(cpu); /* a CPU tensor: nothing changes */
    CHECK_OK(gc.status);
    EXPECT_CURRENT(1, "device_of(a CPU tensor) inside device_of(cuda:1)");
    tc_device_guard_exit(&gc);
    EXPECT_CURRENT(1, "leaving device_of(a CPU tensor)");
    tc_device_guard g0 = tc_device_guard_enter_of(t0); /* nested: to cuda:0 and back */
    CHECK_OK(g0.status);
    EXPECT_CURRENT(0, "device_of(cuda:0) inside device_of(cuda:1)");
    tc_device_guard_exit(&g0);
    EXPECT_CURRENT(1, "leaving the nested device_of(cuda:0)");
    tc_device_guard_exit(&g);
    EXPECT_CURRENT(0, "leaving device_of(a tensor on cuda:1)");
    tc_device_guard_exit(&g); /* a second exit does nothing */
    EXPECT_CURRENT(0, "a second exit of device_of");

    /* a CPU tensor and NULL are no-ops, on either current device */
    for (int dev = 0; dev < 2; dev++) {
        CHECK_OK(tc_set_device(dev));
        const tc_tensor *none[2] = {cpu, NULL};
        for (int k = 0; k < 2; k++) {
            tc_device_guard gn = tc_device_guard_enter_of(none[k]);
            CHECK_OK(gn.status);
            EXPECT(gn.prev_device == -1, "device_of(%s) should have nothing to restore",
                   k ? "NULL" : "a CPU tensor");
            EXPECT_CURRENT(dev, k ? "device_of(NULL)" : "device_of(a CPU tensor)");
            tc_device_guard_exit(&gn);
            EXPECT_CURRENT(dev, "leaving a no-op device_of");
        }
    }
    CHECK_OK(tc_set_device(0));

    /* a view is on its storage's device */
    CHECK_OK(tc_tensor_narrow(t1, 0, 1, 2, &view));
    g = tc_device_guard_enter_of(view);
    CHECK_OK(g.status);
    EXPECT_CURRENT(1, "device_of(a view of a cuda:1 tensor)");
    tc_device_guard_exit(&g);
    EXPECT_CURRENT(0, "leaving device_of(a view)");

    /* a released tensor: refused, nothing entered */
    tc_tensor *dead = NULL;
    CHECK_OK(tc_tensor_zeros(1, sz, TC_FLOAT32, cuda(1), &dead));
    CHECK_OK(tc_tensor_release(dead));
    g = tc_device_guard_enter_of(dead);
    EXPECT(g.status == TC_ERROR_INVALID_HANDLE && tc_last_error()[0] != '\0',
           "device_of(a released tensor): expected TC_ERROR_INVALID_HANDLE with a message, found "
           "%s: %s",
           tc_status_string(g.status), tc_last_error());
    EXPECT_CURRENT(0, "a refused device_of");
    tc_device_guard_exit(&g);
    EXPECT_CURRENT(0, "leaving a refused device_of");

    tc_tensor_release(t0);
    tc_tensor_release(t1);
    tc_tensor_release(cpu);
    tc_tensor_release(view);
    tc_tensor_release(inner);
}

/* ---- operations on another GPU's tensors ----------------------------------------- */

/* |error| allowed for a float32 sum of n terms of magnitude sum_abs. */
static double sum_tol(int64_t n, double sum_abs) { return 2.0 * (double)n * 0x1p-24 * sum_abs; }

static void test_ops_elsewhere(int d)
{
    char what[128];
    EXPECT_CURRENT(0, "the start of the operations on another GPU");
    const int64_t M = 33, K = 70, P = 21; /* matmul sizes, multiples of nothing */
    int64_t sa[2] = {M, K}, sb[2] = {K, P}, sat[2] = {K, M};
    float *ha = host_floats(M * K), *hb = host_floats(K * P), *hc = host_floats(M * K);
    tc_tensor *a = floats_on(d, ha, 2, sa), *b = floats_on(d, hb, 2, sb),
              *c = floats_on(d, hc, 2, sa);
    double *ref = malloc(sizeof(double) * (size_t)(M * K)),
           *tol = malloc(sizeof(double) * (size_t)(M * K));

    /* add: exact (one float rounding, as here) */
    tc_tensor *r = NULL;
    CHECK_OK(tc_tensor_add(a, c, &r));
    for (int64_t i = 0; i < M * K; i++) {
        float s = ha[i] + hc[i];
        ref[i] = s;
    }
    snprintf(what, sizeof what, "add of cuda:%d tensors with cuda:0 current", d);
    EXPECT_ON(r, d, what);
    EXPECT_VALUES(what, r, ref, NULL, M * K);
    EXPECT_CURRENT(0, what);
    tc_tensor_release(r);

    /* matmul, against a double product */
    CHECK_OK(tc_tensor_matmul(a, b, &r));
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < P; j++) {
            double s = 0, sa_ = 0;
            for (int64_t k = 0; k < K; k++) {
                s += (double)ha[i * K + k] * hb[k * P + j];
                sa_ += fabs((double)ha[i * K + k] * hb[k * P + j]);
            }
            ref[i * P + j] = s;
            tol[i * P + j] = sum_tol(K, sa_);
        }
    snprintf(what, sizeof what, "matmul of cuda:%d tensors with cuda:0 current", d);
    EXPECT_ON(r, d, what);
    EXPECT(tc_tensor_ndim(r) == 2 && tc_tensor_size(r, 0) == M && tc_tensor_size(r, 1) == P,
           "%s: expected %lldx%lld", what, (long long)M, (long long)P);
    EXPECT_VALUES(what, r, ref, tol, M * P);
    EXPECT_CURRENT(0, what);
    tc_tensor_release(r);

    /* reductions: rows, everything, the maximum */
    CHECK_OK(tc_tensor_sum(a, 1, false, &r));
    double all = 0, all_abs = 0, mx = -INFINITY;
    for (int64_t i = 0; i < M; i++) {
        double s = 0, s_abs = 0;
        for (int64_t k = 0; k < K; k++) {
            s += ha[i * K + k];
            s_abs += fabs(ha[i * K + k]);
            mx = fmax(mx, ha[i * K + k]);
        }
        ref[i] = s;
        tol[i] = sum_tol(K, s_abs);
        all += s;
        all_abs += s_abs;
    }
    snprintf(what, sizeof what, "sum over dim 1 of a cuda:%d tensor with cuda:0 current", d);
    EXPECT_ON(r, d, what);
    EXPECT_VALUES(what, r, ref, tol, M);
    tc_tensor_release(r);
    CHECK_OK(tc_tensor_sum(a, TC_ALL_DIMS, false, &r));
    snprintf(what, sizeof what, "sum of all of a cuda:%d tensor with cuda:0 current", d);
    EXPECT_ON(r, d, what);
    double one_tol = sum_tol(M * K, all_abs);
    EXPECT_VALUES(what, r, &all, &one_tol, 1);
    tc_tensor_release(r);
    CHECK_OK(tc_tensor_max(a, TC_ALL_DIMS, false, &r));
    snprintf(what, sizeof what, "max of a cuda:%d tensor with cuda:0 current", d);
    EXPECT_ON(r, d, what);
    EXPECT_VALUES(what, r, &mx, NULL, 1);
    EXPECT_CURRENT(0, what);
    tc_tensor_release(r);

    /* copies on cuda:d: a transposed view into a new tensor, and in place */
    CHECK_OK(tc_tensor_transpose(a, 0, 1, &r));
    tc_tensor *at = NULL;
    CHECK_OK(tc_tensor_empty(2, sat, TC_FLOAT32, cuda(d), &at));
    CHECK_OK(tc_tensor_copy_(at, r, false));
    for (int64_t i = 0; i < M * K; i++)
        ref[(i % K) * M + i / K] = ha[i];
    snprintf(what, sizeof what, "a transposed copy within cuda:%d with cuda:0 current", d);
    EXPECT_VALUES(what, at, ref, NULL, M * K);
    tc_tensor_release(r);
    tc_tensor_release(at);
    CHECK_OK(tc_tensor_add_(c, a));
    for (int64_t i = 0; i < M * K; i++) {
        float s = hc[i] + ha[i];
        ref[i] = s;
    }
    snprintf(what, sizeof what, "add_ on a cuda:%d tensor with cuda:0 current", d);
    EXPECT_VALUES(what, c, ref, NULL, M * K);
    EXPECT_CURRENT(0, what);

    /* a random fill draws from cuda:d's default generator, not cuda:0's: the
     * same numbers as a CPU generator given cuda:d's state (random.h) */
    tc_generator *g0 = NULL, *gd = NULL, *cpu = NULL;
    CHECK_OK(tc_default_generator(cuda(0), &g0));
    CHECK_OK(tc_default_generator(cuda(d), &gd));
    uint64_t off0 = tc_test_gen_offset(g0);
    tc_rng_state st;
    CHECK_OK(tc_get_rng_state(d, &st));
    int64_t nu[1] = {1001};
    tc_tensor *u = NULL;
    CHECK_OK(tc_tensor_empty(1, nu, TC_FLOAT32, cuda(d), &u));
    CHECK_OK(tc_tensor_uniform_(u, -2, 3, NULL));
    float got[1001], want[1001];
    CHECK_OK(tc_tensor_to_host(u, TC_FLOAT32, got));
    CHECK_OK(tc_generator_create(CPU, 0, &cpu));
    CHECK_OK(tc_generator_set_state(cpu, &st));
    CHECK_OK(tc_generator_uniform(cpu, want, 1001, TC_FLOAT32, -2, 3));
    snprintf(what, sizeof what, "uniform_ on cuda:%d with cuda:0 current", d);
    EXPECT(memcmp(got, want, sizeof got) == 0,
           "%s: expected the numbers of cuda:%d's generator state (bitwise, as a CPU generator "
           "with that state draws them)",
           what, d);
    EXPECT(tc_test_gen_offset(gd) == tc_test_gen_offset(cpu),
           "%s: cuda:%d's generator should have advanced to offset %llu, found %llu", what, d,
           (unsigned long long)tc_test_gen_offset(cpu), (unsigned long long)tc_test_gen_offset(gd));
    EXPECT(tc_test_gen_offset(g0) == off0, "%s: cuda:0's generator should stay at offset %llu",
           what, (unsigned long long)off0);
    EXPECT_ON(u, d, what);
    EXPECT_CURRENT(0, what);
    CHECK_OK(tc_generator_destroy(cpu));
    tc_tensor_release(u);

    /* manual_seed seeds the current GPU's generator only */
    uint64_t seed0 = tc_test_gen_seed(g0), seed = tc_test_rand() >> 1;
    CHECK_OK(tc_set_device(d));
    CHECK_OK(tc_manual_seed(seed));
    CHECK_OK(tc_set_device(0));
    EXPECT(tc_test_gen_seed(gd) == seed && tc_test_gen_offset(gd) == 0,
           "manual_seed with cuda:%d current should seed cuda:%d's generator", d, d);
    EXPECT(tc_test_gen_seed(g0) == seed0, "manual_seed with cuda:%d current should leave cuda:0's",
           d);

    tc_tensor_release(a);
    tc_tensor_release(b);
    tc_tensor_release(c);
    free(ha);
    free(hb);
    free(hc);
    free(ref);
    free(tol);
}

/* Tensors of two devices in one call are refused, allocate nothing and
 * change nothing (as PyTorch refuses them). */
static void test_mismatch(void)
{
    int64_t sz[2] = {4, 4};
    tc_tensor *a0 = NULL, *a1 = NULL, *cpu = NULL, *out = NULL;
    CHECK_OK(tc_tensor_ones(2, sz, TC_FLOAT32, cuda(0), &a0));
    CHECK_OK(tc_tensor_ones(2, sz, TC_FLOAT32, cuda(1), &a1));
    CHECK_OK(tc_tensor_ones(2, sz, TC_FLOAT32, CPU, &cpu));
    CHECK_OK(tc_synchronize(0));
    CHECK_OK(tc_synchronize(1));
    size_t m0 = allocated(0), m1 = allocated(1);

    CHECK_STATUS(tc_tensor_add(a0, a1, &out), TC_ERROR_DEVICE_MISMATCH);
    EXPECT(strstr(tc_last_error(), "cuda:0") && strstr(tc_last_error(), "cuda:1"),
           "the refusal should name cuda:0 and cuda:1: \"%s\"", tc_last_error());
    CHECK_STATUS(tc_tensor_matmul(a1, a0, &out), TC_ERROR_DEVICE_MISMATCH);
    CHECK_STATUS(tc_tensor_mul(a1, cpu, &out), TC_ERROR_DEVICE_MISMATCH);
    EXPECT(strstr(tc_last_error(), "cpu") && strstr(tc_last_error(), "cuda:1"),
           "the refusal should name cpu and cuda:1: \"%s\"", tc_last_error());
    CHECK_STATUS(tc_tensor_add_(a1, a0), TC_ERROR_DEVICE_MISMATCH);
    EXPECT(out == NULL, "a refused operation wrote its out");

    tc_generator *g0 = NULL;
    CHECK_OK(tc_default_generator(cuda(0), &g0));
    uint64_t off0 = tc_test_gen_offset(g0);
    CHECK_STATUS(tc_tensor_uniform_(a1, 0, 1, g0), TC_ERROR_DEVICE_MISMATCH);
    EXPECT(tc_test_gen_offset(g0) == off0, "a refused fill advanced cuda:0's generator");
    tc_stream *s0 = tc_test_current_stream(0);
    CHECK_STATUS(tc_tensor_record_stream(a1, s0), TC_ERROR_DEVICE_MISMATCH);

    EXPECT(allocated(0) == m0 && allocated(1) == m1,
           "refused calls should allocate nothing: cuda:0 %zu -> %zu, cuda:1 %zu -> %zu bytes", m0,
           allocated(0), m1, allocated(1));
    double ones[16];
    for (int i = 0; i < 16; i++)
        ones[i] = 1;
    EXPECT_VALUES("a cuda:1 tensor after a refused add_ and fill", a1, ones, NULL, 16);
    EXPECT_CURRENT(0, "refused calls");
    tc_tensor_release(a0);
    tc_tensor_release(a1);
    tc_tensor_release(cpu);
}

/* ---- streams and events per device ---------------------------------------------- */

static void test_current_streams(void)
{
    tc_stream *def0 = NULL, *def1 = NULL, *s1 = NULL;
    CHECK_OK(tc_default_stream(0, &def0));
    CHECK_OK(tc_default_stream(1, &def1));
    EXPECT(tc_stream_device(def0) == 0 && tc_stream_device(def1) == 1,
           "the default streams should be of cuda:0 and cuda:1, found %d and %d",
           tc_stream_device(def0), tc_stream_device(def1));
    EXPECT(def0 != def1, "each device should have its own default stream");
    EXPECT(tc_test_current_stream(1) == def1 && tc_stream_device(tc_test_current_stream(1)) == 1,
           "the current stream of cuda:1 should be cuda:1's default stream");
    EXPECT(tc_test_current_stream(TC_CURRENT_DEVICE) == def0,
           "the current stream of the current device (cuda:0) should be cuda:0's default");

    /* a stream of cuda:1 made and set while cuda:0 is current */
    CHECK_OK(tc_stream_create(1, 0, &s1));
    EXPECT(tc_stream_device(s1) == 1,
           "tc_stream_create(1) with cuda:0 current: expected a "
           "stream of cuda:1, found one of %d",
           tc_stream_device(s1));
    EXPECT_CURRENT(0, "tc_stream_create(1)");
    CHECK_OK(tc_set_stream(s1));
    EXPECT_CURRENT(0, "tc_set_stream(a stream of cuda:1)");
    EXPECT(tc_test_current_stream(1) == s1, "tc_set_stream(s1) should make s1 cuda:1's current");
    EXPECT(tc_test_current_stream(0) == def0 && tc_test_current_stream(-1) == def0,
           "tc_set_stream(a stream of cuda:1) should leave cuda:0's current stream");

    /* work on cuda:1's tensors goes on cuda:1's current stream, s1: an add
     * queued after a slow write on s1 reads what it wrote */
    int64_t sz[1] = {N};
    tc_tensor *x = NULL, *y = NULL;
    CHECK_OK(tc_tensor_empty(1, sz, TC_INT32, cuda(1), &x)); /* on s1, uninitialized */
    int base = some_base();
    spin_fill(1, tc_stream_cuda_handle(s1), tc_tensor_data_ptr(x), base);
    CHECK_OK(tc_tensor_add(x, x, &y));
    EXPECT_CURRENT(0, "an add on cuda:1 tensors");
    double *ref = malloc(sizeof(double) * N);
    for (int i = 0; i < N; i++)
        ref[i] = 2.0 * (base + i);
    EXPECT_VALUES("an add on cuda:1 after a slow write on cuda:1's current stream", y, ref, NULL,
                  N);
    CHECK_OK(tc_stream_synchronize(s1));
    tc_tensor_release(x);
    tc_tensor_release(y);
    free(ref);

    /* the stream guard enters the stream's device and restores both */
    tc_stream_guard sg = tc_stream_guard_enter(def1);
    CHECK_OK(sg.status);
    EXPECT_CURRENT(1, "tc_stream_guard_enter(cuda:1's default stream)");
    EXPECT(tc_test_current_stream(1) == def1, "inside the guard cuda:1's current stream is def1");
    tc_stream_guard_exit(&sg);
    EXPECT_CURRENT(0, "leaving the stream guard");
    EXPECT(tc_test_current_stream(1) == s1, "leaving the guard should restore s1 on cuda:1");

    CHECK_OK(tc_set_stream(def1));
    EXPECT(tc_test_current_stream(1) == def1, "tc_set_stream(def1) should restore the default");
    CHECK_OK(tc_stream_destroy(s1));
}

/* The default stream of cuda:1 synchronized and queried while cuda:0 is
 * current, and cuda:0's made to wait for cuda:1's while cuda:1 is. */
static void test_default_streams_across(void)
{
    tc_stream *def0 = NULL, *def1 = NULL;
    CHECK_OK(tc_default_stream(0, &def0));
    CHECK_OK(tc_default_stream(1, &def1));
    int *b0 = NULL, *b1 = NULL;
    CHECK_OK(tc_caching_allocator_alloc(sizeof(int) * N, 0, def0, (void **)&b0));
    CHECK_OK(tc_caching_allocator_alloc(sizeof(int) * N, 1, def1, (void **)&b1));

    int base = some_base();
    spin_fill(1, NULL, b1, base);
    EXPECT(tc_stream_query(def1) == TC_ERROR_NOT_READY,
           "tc_stream_query(cuda:1's default stream) with cuda:0 current, while a kernel spins "
           "there: expected TC_ERROR_NOT_READY");
    CHECK_OK(tc_stream_synchronize(def1));
    EXPECT_CURRENT(0, "tc_stream_synchronize(cuda:1's default stream)");
    tc_device_guard g = tc_device_guard_enter(1);
    cudaError_t err = cudaStreamQuery(0);
    tc_device_guard_exit(&g);
    EXPECT(err == cudaSuccess,
           "after tc_stream_synchronize(cuda:1's default stream) with cuda:0 current, expected "
           "cuda:1's default stream idle; cudaStreamQuery says %s",
           cudaGetErrorName(err));
    CHECK_OK(tc_stream_query(def1));
    EXPECT_INTS("cuda:1 after tc_stream_synchronize of its default stream", 1, b1, N, base);

    /* tc_synchronize(1) from cuda:0 */
    base = some_base();
    spin_fill(1, NULL, b1, base);
    CHECK_OK(tc_synchronize(1));
    EXPECT_CURRENT(0, "tc_synchronize(1)");
    g = tc_device_guard_enter(1);
    err = cudaStreamQuery(0);
    tc_device_guard_exit(&g);
    EXPECT(err == cudaSuccess,
           "after tc_synchronize(1), cuda:1's default stream should be idle; "
           "cudaStreamQuery says %s",
           cudaGetErrorName(err));
    EXPECT_INTS("cuda:1 after tc_synchronize(1)", 1, b1, N, base);

    /* with cuda:1 current, cuda:0's default stream waits for cuda:1's, then
     * copies from it: it sees what the slow kernel wrote */
    CHECK_OK(tc_set_device(1));
    base = some_base();
    spin_fill(1, NULL, b1, base);
    CHECK_OK(tc_stream_wait_stream(def0, def1));
    copy_to_0(NULL, b0, b1);
    CHECK_OK(tc_stream_synchronize(def0));
    EXPECT_CURRENT(1, "tc_stream_wait_stream(def0, def1) and tc_stream_synchronize(def0)");
    EXPECT_INTS("cuda:0's default stream after waiting for cuda:1's (cuda:1 current)", 0, b0, N,
                base);
    CHECK_OK(tc_synchronize(1));
    CHECK_OK(tc_set_device(0));

    CHECK_OK(tc_caching_allocator_delete(b0));
    CHECK_OK(tc_caching_allocator_delete(b1));
}

/* An event recorded on cuda:1 orders a stream of cuda:0, default streams
 * included, whichever device is current. */
static void test_events_across(void)
{
    tc_stream *def0 = NULL, *def1 = NULL, *s0 = NULL, *s1 = NULL;
    CHECK_OK(tc_default_stream(0, &def0));
    CHECK_OK(tc_default_stream(1, &def1));
    CHECK_OK(tc_stream_create(0, 0, &s0));
    CHECK_OK(tc_stream_create(1, 0, &s1));
    int *b0 = NULL, *b1 = NULL;
    CHECK_OK(tc_caching_allocator_alloc(sizeof(int) * N, 0, s0, (void **)&b0));
    CHECK_OK(tc_caching_allocator_alloc(sizeof(int) * N, 1, def1, (void **)&b1));

    /* recorded on cuda:1's default stream with cuda:0 current, waited for
     * on a stream of cuda:0 */
    tc_event *ev = NULL;
    CHECK_OK(tc_event_create(TC_EVENT_FLAG_DEFAULT, &ev));
    int base = some_base();
    spin_fill(1, NULL, b1, base);
    CHECK_OK(tc_event_record(ev, def1));
    EXPECT(tc_event_device(ev) == 1,
           "an event recorded on cuda:1's default stream should be "
           "cuda:1's, found %d",
           tc_event_device(ev));
    CHECK_OK(tc_event_wait(ev, s0));
    copy_to_0(tc_stream_cuda_handle(s0), b0, b1);
    CHECK_OK(tc_stream_synchronize(s0));
    EXPECT_CURRENT(0, "recording on cuda:1 and waiting on cuda:0");
    EXPECT_INTS("a cuda:0 stream after waiting for an event of cuda:1's default stream", 0, b0, N,
                base);
    CHECK_OK(tc_event_query(ev));
    CHECK_OK(tc_event_synchronize(ev));
    CHECK_OK(tc_event_destroy(ev));

    /* recorded on a stream of cuda:1 with cuda:1 current, waited for on
     * cuda:0's default stream */
    CHECK_OK(tc_set_device(1));
    base = some_base();
    spin_fill(1, tc_stream_cuda_handle(s1), b1, base);
    CHECK_OK(tc_stream_record_event(s1, &ev));
    CHECK_OK(tc_event_wait(ev, def0));
    copy_to_0(NULL, b0, b1);
    CHECK_OK(tc_stream_synchronize(def0));
    EXPECT_CURRENT(1, "waiting on cuda:0's default stream with cuda:1 current");
    EXPECT_INTS("cuda:0's default stream after waiting for an event of a cuda:1 stream", 0, b0, N,
                base);
    CHECK_OK(tc_event_destroy(ev));
    CHECK_OK(tc_set_device(0));

    /* Stream.record_event on cuda:1's default stream from cuda:0, and an
     * event of cuda:1 refused on a stream of cuda:0 */
    CHECK_OK(tc_stream_record_event(def1, &ev));
    EXPECT(tc_event_device(ev) == 1,
           "record_event on cuda:1's default stream: expected an event "
           "of cuda:1, found %d",
           tc_event_device(ev));
    CHECK_STATUS(tc_event_record(ev, s0), TC_ERROR_DEVICE_MISMATCH);
    CHECK_OK(tc_event_synchronize(ev));
    CHECK_OK(tc_event_destroy(ev));

    CHECK_OK(tc_synchronize(0));
    CHECK_OK(tc_synchronize(1));
    CHECK_OK(tc_caching_allocator_delete(b0));
    CHECK_OK(tc_caching_allocator_delete(b1));
    CHECK_OK(tc_stream_destroy(s0));
    CHECK_OK(tc_stream_destroy(s1));
}

/* A block of cuda:1 freed while cuda:0 is current and still read by
 * cuda:1's default stream (record_stream) is not handed out before that
 * stream is done with it. */
static void test_free_across(void)
{
    tc_stream *def1 = NULL, *s1 = NULL;
    CHECK_OK(tc_default_stream(1, &def1));
    CHECK_OK(tc_stream_create(1, 0, &s1));
    int *x = NULL, *y = NULL, *out = NULL;
    CHECK_OK(tc_caching_allocator_alloc(sizeof(int) * N, 1, s1, (void **)&x));
    CHECK_OK(tc_caching_allocator_alloc(sizeof(int) * N, 1, def1, (void **)&out));
    int base = some_base();
    tc_device_guard g = tc_device_guard_enter(1);
    CHECK_OK(tc_test_spin_then_fill(tc_stream_cuda_handle(s1), 0, x, N, base));
    tc_device_guard_exit(&g);
    CHECK_OK(tc_stream_synchronize(s1));
    g = tc_device_guard_enter(1);
    CHECK_OK(tc_test_spin(NULL, SPIN_NS)); /* cuda:1's default stream: busy, then reads x */
    CHECK_OK(tc_test_copy_add(NULL, x, out, N, 0));
    tc_device_guard_exit(&g);
    CHECK_OK(tc_caching_allocator_record_stream(x, def1));
    CHECK_OK(tc_caching_allocator_delete(x)); /* cuda:0 current */
    CHECK_OK(tc_caching_allocator_alloc(sizeof(int) * N, 1, s1, (void **)&y));
    EXPECT(y != x,
           "a block of cuda:1 freed with cuda:0 current was handed out again at once, though "
           "cuda:1's default stream still reads it (expected it kept until that work is done)");
    g = tc_device_guard_enter(1);
    CHECK_OK(tc_test_spin_then_fill(tc_stream_cuda_handle(s1), 0, y, N, base + 1000));
    tc_device_guard_exit(&g);
    CHECK_OK(tc_synchronize(1));
    EXPECT_INTS("what cuda:1's default stream read from the freed block", 1, out, N, base);
    EXPECT_CURRENT(0, "freeing a block of cuda:1");
    CHECK_OK(tc_caching_allocator_delete(y));
    CHECK_OK(tc_caching_allocator_delete(out));
    CHECK_OK(tc_stream_destroy(s1));
}

/* A pinned host block read by a non_blocking copy on cuda:1's default
 * stream and released while cuda:0 is current is not handed out again
 * before that copy is done: the pinned cache must tell cuda:1's default
 * stream (handle 0) from cuda:0's. */
static void test_pinned_across(void)
{
    int64_t n = N;
    int *v = malloc(sizeof(int) * N), base = some_base();
    for (int i = 0; i < N; i++)
        v[i] = base + i;
    tc_tensor *src = NULL, *host = NULL, *dst = NULL, *junk = NULL, *again = NULL;
    CHECK_OK(tc_tensor_from_data(v, 1, &n, TC_INT32, CPU, &src));
    CHECK_OK(tc_tensor_pin_memory(src, &host));
    void *block = host ? tc_tensor_data_ptr(host) : NULL;
    tc_device_guard g = tc_device_guard_enter(1);
    CHECK_OK(tc_test_spin(NULL, SPIN_NS)); /* cuda:1's default stream: busy, then copies */
    tc_device_guard_exit(&g);
    CHECK_OK(tc_tensor_to(host, cuda(1), TC_INT32, true, &dst));
    tc_tensor_release(host); /* cuda:0 current; the copy has not run yet */
    for (int i = 0; i < N; i++)
        v[i] = -1;
    CHECK_OK(tc_tensor_from_data(v, 1, &n, TC_INT32, CPU, &junk));
    CHECK_OK(tc_tensor_pin_memory(junk, &again)); /* writes -1s into a pinned block */
    EXPECT(!again || tc_tensor_data_ptr(again) != block,
           "a pinned block released with cuda:0 current was handed out again at once, though "
           "a copy on cuda:1's default stream still reads it");
    CHECK_OK(tc_synchronize(1));
    if (dst)
        EXPECT_INTS("what the non_blocking copy to cuda:1 read from the released pinned block", 1,
                    tc_tensor_data_ptr(dst), N, base);
    EXPECT_CURRENT(0, "a non_blocking copy to cuda:1");
    tc_tensor *all[] = {src, dst, junk, again};
    for (int i = 0; i < 4; i++)
        tc_tensor_release(all[i]);
    free(v);
}

/* ---- the current device is per thread -------------------------------------------- */

typedef struct thread_seen {
    int start;           /* when the thread starts (main is on cuda:0) */
    int after_main_set;  /* after main switched to cuda:1 */
    tc_device made_a;    /* a tensor on the current device then */
    tc_status set;       /* tc_set_device(1) on the thread */
    int after_set;       /* after it */
    tc_device made_b;    /* a tensor on the current device then */
    tc_stream *current1; /* cuda:1's current stream after tc_set_stream(s1) */
    int end;             /* after main made a tensor on its own cuda:0 */
} thread_seen;

static pthread_barrier_t barrier;
static tc_stream *thread_s1;

static tc_device made_here(void)
{
    int64_t sz[1] = {8};
    tc_tensor *t = NULL;
    tc_device d = {TC_CPU, -2};
    if (tc_tensor_zeros(1, sz, TC_FLOAT32, cuda(TC_CURRENT_DEVICE), &t) == TC_OK)
        d = tc_tensor_device(t);
    tc_tensor_release(t);
    return d;
}

static void *thread_body(void *arg)
{
    thread_seen *s = arg; /* no CHECK on this thread: main checks what it wrote */
    (void)tc_current_device(&s->start);
    pthread_barrier_wait(&barrier); /* A: main switches to cuda:1 */
    pthread_barrier_wait(&barrier); /* B */
    (void)tc_current_device(&s->after_main_set);
    s->made_a = made_here();
    pthread_barrier_wait(&barrier); /* C: main is back on cuda:0 */
    s->set = tc_set_device(1);
    (void)tc_current_device(&s->after_set);
    s->made_b = made_here();
    (void)tc_set_stream(thread_s1);
    (void)tc_current_stream(1, &s->current1);
    pthread_barrier_wait(&barrier); /* D: main looks at its own state */
    pthread_barrier_wait(&barrier); /* E */
    (void)tc_current_device(&s->end);
    return NULL;
}

static void test_threads(void)
{
    tc_stream *def1 = NULL;
    CHECK_OK(tc_default_stream(1, &def1));
    CHECK_OK(tc_stream_create(1, 0, &thread_s1));
    thread_seen seen = {-9, -9, {TC_CPU, -9}, TC_ERROR_INTERNAL, -9, {TC_CPU, -9}, NULL, -9};
    pthread_barrier_init(&barrier, NULL, 2);
    pthread_t t;
    int rc = pthread_create(&t, NULL, thread_body, &seen);
    EXPECT(rc == 0, "pthread_create failed: %s", strerror(rc));
    if (rc != 0) { /* no thread to meet at the barriers */
        pthread_barrier_destroy(&barrier);
        CHECK_OK(tc_stream_destroy(thread_s1));
        return;
    }
    pthread_barrier_wait(&barrier); /* A */
    CHECK_OK(tc_set_device(1));
    pthread_barrier_wait(&barrier); /* B: the thread looks while main is on cuda:1 */
    pthread_barrier_wait(&barrier); /* C */
    CHECK_OK(tc_set_device(0));
    pthread_barrier_wait(&barrier); /* D: the thread switched to cuda:1 */
    EXPECT_CURRENT(0, "another thread's tc_set_device(1)");
    EXPECT(tc_test_current_stream(1) == def1,
           "another thread's tc_set_stream(a cuda:1 stream) should leave this thread's current "
           "stream of cuda:1");
    tc_device mine = made_here();
    EXPECT(mine.type == TC_CUDA && mine.index == 0,
           "a tensor on this thread's current device, while another thread is on cuda:1: "
           "expected cuda:0, found %d",
           mine.index);
    pthread_barrier_wait(&barrier); /* E */
    pthread_join(t, NULL);
    pthread_barrier_destroy(&barrier);

    EXPECT(seen.start == 0, "a new thread should start on cuda:0, found cuda:%d", seen.start);
    EXPECT(seen.after_main_set == 0,
           "main's tc_set_device(1) should leave the other thread on cuda:0, found cuda:%d",
           seen.after_main_set);
    EXPECT(seen.made_a.type == TC_CUDA && seen.made_a.index == 0,
           "the other thread's tensor (main on cuda:1) should be on cuda:0, found %d",
           seen.made_a.index);
    EXPECT(seen.set == TC_OK && seen.after_set == 1,
           "the thread's tc_set_device(1): expected TC_OK and cuda:1, found %s and cuda:%d",
           tc_status_string(seen.set), seen.after_set);
    EXPECT(seen.made_b.type == TC_CUDA && seen.made_b.index == 1,
           "the thread's tensor after its tc_set_device(1) should be on cuda:1, found %d",
           seen.made_b.index);
    EXPECT(seen.current1 == thread_s1, "the thread's current stream of cuda:1 should be its own");
    EXPECT(seen.end == 1, "the thread should still be on cuda:1 at its end, found cuda:%d",
           seen.end);
    EXPECT_CURRENT(0, "the threads");
    CHECK_OK(tc_stream_destroy(thread_s1));
}

int main(void)
{
    tc_test_init();
    TC_TEST_REQUIRE_GPU();
    ndev = tc_device_count();
    if (ndev < 2) {
        printf("skipped: this test needs 2 or more GPUs and this process sees %d "
               "(CUDA_VISIBLE_DEVICES may hide some)\n",
               ndev);
        return 77;
    }
    printf("%d GPUs\n", ndev);
    EXPECT_CURRENT(0, "the start");

    test_memory_per_device(); /* first: the statistics hold only what it makes */
    test_peer_answers();
    test_peer_copies();
    test_device_of();
    test_ops_elsewhere(1);
    if (ndev > 2)
        test_ops_elsewhere(ndev - 1);
    test_mismatch();
    test_current_streams();
    test_default_streams_across();
    test_events_across();
    test_free_across();
    test_pinned_across();
    test_threads();

    CHECK_OK(tc_synchronize(0));
    CHECK_OK(tc_synchronize(1));
    EXPECT_CURRENT(0, "everything");
    return TC_TEST_DONE();
}
