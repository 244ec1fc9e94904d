#!/usr/bin/env bash
# Tensor benchmark: tcuda (bench_tensor, from a CUDA build in ./build) beside
# PyTorch on the same GPU in the same run. Run from the repository root:
#     bash bench/run_tensor.sh
# Logs go to "$OUT" when set (else to a temporary folder).
set -u
LOG="${OUT:-$(mktemp -d)}"
mkdir -p "$LOG"
BIN=./build/bench/bench_tensor
if [ ! -x "$BIN" ]; then
    echo "build first: make all BUILD=build (with CUDA)" >&2
    exit 1
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$LOG/gpu.txt" 2>&1 || true

echo "== tcuda =="
"$BIN" | tee "$LOG/tcuda.txt"

echo "== PyTorch =="
python3 - <<'PY' 2>&1 | tee "$LOG/torch.txt"
import time
try:
    import torch
except Exception as e:
    print("PyTorch not available:", e)
    raise SystemExit(0)
if not torch.cuda.is_available():
    print("PyTorch sees no GPU")
    raise SystemExit(0)
torch.backends.cuda.matmul.allow_tf32 = False

def gpu_time(fn, warm, iters):
    for _ in range(warm):
        fn()
    a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(iters):
        fn()
    b.record(); b.synchronize()
    return a.elapsed_time(b) * 1e-3 / iters

def row(name, v, unit):
    print(f"{name:<28} {v:12.1f}  {unit}")

n = 1 << 28
nbytes = n * 4
x = torch.full((n,), 1.5, device="cuda"); y = torch.full((n,), 2.5, device="cuda")
z = torch.empty_like(x)
row("add fp32 2^28", 3 * nbytes / gpu_time(lambda: x + y, 3, 20) / 1e9, "GB/s")
row("sum fp32 2^28", nbytes / gpu_time(lambda: x.sum(), 3, 20) / 1e9, "GB/s")
row("gt fp32 2^28", 2.25 * nbytes / gpu_time(lambda: x > y, 3, 20) / 1e9, "GB/s")
m = x < y
zero = torch.zeros((), device="cuda")
row("where fp32 2^28", 3.25 * nbytes / gpu_time(lambda: torch.where(m, x, y), 3, 20) / 1e9, "GB/s")
row("where(m, x, 0-d) fp32 2^28",
    2.25 * nbytes / gpu_time(lambda: torch.where(m, x, zero), 3, 20) / 1e9, "GB/s")
del m
row("copy d2d fp32 2^28", 2 * nbytes / gpu_time(lambda: z.copy_(x), 3, 20) / 1e9, "GB/s")
h = torch.full((n,), 3.5).pin_memory()
row("h2d pinned fp32 2^28", nbytes / gpu_time(lambda: z.copy_(h, non_blocking=True), 2, 10) / 1e9, "GB/s")
del x, y, z, h
for dt, name in ((torch.bfloat16, "matmul 8192^3 bf16"), (torch.float32, "matmul 8192^3 fp32")):
    a = torch.full((8192, 8192), 0.01, device="cuda", dtype=dt)
    b = torch.full((8192, 8192), 0.02, device="cuda", dtype=dt)
    row(name, 2 * 8192 ** 3 / gpu_time(lambda: a @ b, 3, 10) / 1e12, "TFLOP/s")
    del a, b
a = torch.ones(16, device="cuda"); b = torch.ones(16, device="cuda")
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
t = total / 20000
row("host us: add of 16 elements", t * 1e6, "us (from Python)")
PY

echo "== side by side (tcuda / torch) =="
python3 - "$LOG/tcuda.txt" "$LOG/torch.txt" <<'PY' | tee "$LOG/summary.txt"
import re, sys
def parse(path):
    rows = {}
    for line in open(path):
        m = re.match(r"(.{28})\s+([0-9.]+)", line)
        if m:
            rows[m.group(1).strip()] = float(m.group(2))
    return rows
t, p = parse(sys.argv[1]), parse(sys.argv[2])
print(f"{'row':<28} {'tcuda':>10} {'torch':>10} {'tcuda/torch':>12}")
for k, v in t.items():
    if k in p and p[k] > 0:
        print(f"{k:<28} {v:10.1f} {p[k]:10.1f} {v / p[k]:11.1%}")
PY
echo "logs in $LOG"
