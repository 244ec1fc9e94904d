"""PyTorch's side of bench_tensor: the same rows, measured the same way
(GPU rows: events around 10 to 20 back-to-back calls; host cost: 100
batches of 200 tiny adds, only the calls timed). Prints "name value unit"
rows named as bench_tensor's."""
import time

from torch_timing import mean_s, row, torch_or_exit

torch = torch_or_exit()
torch.backends.cuda.matmul.allow_tf32 = False

n = 1 << 28
nbytes = n * 4
x = torch.full((n,), 1.5, device="cuda")
y = torch.full((n,), 2.5, device="cuda")
z = torch.empty_like(x)
row("add fp32 2^28", 3 * nbytes / mean_s(lambda: x + y, 3, 20) / 1e9, "GB/s")
row("sum fp32 2^28", nbytes / mean_s(lambda: x.sum(), 3, 20) / 1e9, "GB/s")
cols = torch.full((8192, 768), 0.5, device="cuda", dtype=torch.float16)
row("sum dim 0 fp16 8192x768", 8192 * 768 * 2 / mean_s(lambda: cols.sum(0), 3, 20) / 1e9, "GB/s")
del cols
row("gt fp32 2^28", 2.25 * nbytes / mean_s(lambda: x > y, 3, 20) / 1e9, "GB/s")
m = x < y
zero = torch.zeros((), device="cuda")
row("where fp32 2^28", 3.25 * nbytes / mean_s(lambda: torch.where(m, x, y), 3, 20) / 1e9, "GB/s")
row("where(m, x, 0-d) fp32 2^28",
    2.25 * nbytes / mean_s(lambda: torch.where(m, x, zero), 3, 20) / 1e9, "GB/s")
del m
row("copy d2d fp32 2^28", 2 * nbytes / mean_s(lambda: z.copy_(x), 3, 20) / 1e9, "GB/s")
h = torch.full((n,), 3.5).pin_memory()
row("h2d pinned fp32 2^28", nbytes / mean_s(lambda: z.copy_(h, non_blocking=True), 2, 10) / 1e9,
    "GB/s")
del x, y, z, h
for dt, name, tf32 in ((torch.bfloat16, "matmul 8192^3 bf16", False),
                       (torch.float32, "matmul 8192^3 fp32", False),
                       (torch.float32, "matmul 8192^3 fp32 tf32", True)):
    torch.backends.cuda.matmul.allow_tf32 = tf32
    a = torch.full((8192, 8192), 0.01, device="cuda", dtype=dt)
    b = torch.full((8192, 8192), 0.02, device="cuda", dtype=dt)
    row(name, 2 * 8192 ** 3 / mean_s(lambda: a @ b, 3, 10) / 1e12, "TFLOP/s")
    del a, b
torch.backends.cuda.matmul.allow_tf32 = False
a = torch.ones(16, device="cuda")
b = torch.ones(16, device="cuda")
for _ in range(1000):
    a + b
torch.cuda.synchronize()
# as bench_tensor: only the calls timed, 100 batches of 200 with a sync between
total = 0.0
for _ in range(100):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(200):
        a + b
    total += time.perf_counter() - t0
torch.cuda.synchronize()
row("host us: add of 16 elements", total / 20000 * 1e6, "us (from Python)")
