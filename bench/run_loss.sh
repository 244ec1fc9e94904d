#!/bin/sh
# cross_entropy behind queued GPU work: tcuda (bench_loss) beside PyTorch's
# F.cross_entropy measured the same way, in one run. From the repository
# root after a CUDA build (pass the build folder). Logs under $OUT/bench_loss
# if set.
#   bench/run_loss.sh [build]
set -eu
B=${1:-build}
LOG=${OUT:-/tmp}/bench_loss
mkdir -p "$LOG"
"$B/bench/bench_loss" | tee "$LOG/tcuda.txt"
python3 - <<'PY' 2>&1 | tee "$LOG/torch.txt"
import statistics, time
try:
    import torch
    import torch.nn.functional as F
except Exception as e:  # noqa: BLE001
    print("PyTorch not available:", e)
    raise SystemExit(0)
torch.backends.cuda.matmul.allow_tf32 = False
ROWS, CLASSES, REPS, BIG = 2048, 50257, 15, 4096
x = torch.randn(ROWS, CLASSES, device="cuda")
t = (torch.rand(ROWS, device="cuda") * (CLASSES - 1)).long()
a = torch.randn(BIG, BIG, device="cuda"); b = torch.randn(BIG, BIG, device="cuda")
F.cross_entropy(x, t); a @ b; torch.cuda.synchronize()
def behind(fn):
    ts = []
    for _ in range(REPS):
        torch.cuda.synchronize()
        a @ b
        t0 = time.perf_counter(); fn(); ts.append((time.perf_counter() - t0) * 1e6)
        torch.cuda.synchronize()
    return statistics.median(ts)
call = behind(lambda: F.cross_entropy(x, t))
wait = behind(torch.cuda.synchronize)
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
gs = []
for _ in range(REPS):
    s.record(); F.cross_entropy(x, t); e.record(); e.synchronize(); gs.append(s.elapsed_time(e) * 1e3)
print(f"torch {torch.__version__}")
print(f"{'cross_entropy host, work queued':<34} {call:12.3f}  us (the call)")
print(f"{'synchronize host, work queued':<34} {wait:12.3f}  us (a wait, for scale)")
print(f"{'cross_entropy GPU':<34} {statistics.median(gs):12.3f}  us (events, idle GPU)")
x2 = torch.randn(1 << 20, 10, device="cuda")
t2 = (torch.rand(1 << 20, device="cuda") * 9).long()
F.cross_entropy(x2, t2)
gs = []
for _ in range(REPS):
    s.record(); F.cross_entropy(x2, t2); e.record(); e.synchronize(); gs.append(s.elapsed_time(e) * 1e3)
print(f"{'cross_entropy GPU, 2^20 x 10':<34} {statistics.median(gs):12.3f}  us (events, idle GPU)")
PY
