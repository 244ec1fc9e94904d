#!/bin/sh
# Random fills: tcuda beside the raw write floor and PyTorch, in one run.
# Run from the repository root after a CUDA build in ./build (or pass the
# build folder). Prints one table; logs go under $OUT/bench_random if set.
# "speedup" is torch's median time over tcuda's (above 1: tcuda is faster).
#   bench/run_random.sh [build] [log2 n] [repeats]
set -eu
B=${1:-build}
LG=${2:-28}
REPS=${3:-21}
LOG=${OUT:-/tmp}/bench_random
mkdir -p "$LOG"
"$B/bench/bench_random" --csv "$LG" "$REPS" > "$LOG/tcuda.csv"
PYTHONPATH="$(dirname "$0")/torch" python3 - "$LOG/tcuda.csv" "$LG" "$REPS" <<'PY' | tee "$LOG/table.txt"
import sys
from torch_timing import median_ms, tcuda_rows
rows = tcuda_rows(sys.argv[1], "op")
if rows is None:
    sys.exit(0)
lg, reps = int(sys.argv[2]), int(sys.argv[3])
n = 1 << lg
torch_rows = {}
try:
    import torch
    med = lambda fn: median_ms(fn, reps)  # noqa: E731
    for name, dt, f in [("uniform f32", torch.float32, "uniform_"), ("normal f32", torch.float32, "normal_"),
                        ("uniform f16", torch.float16, "uniform_"), ("normal bf16", torch.bfloat16, "normal_"),
                        ("uniform f64", torch.float64, "uniform_"), ("normal f64", torch.float64, "normal_")]:
        x = torch.empty(n, device="cuda", dtype=dt)
        ms = med(lambda: getattr(x, f)())
        es = x.element_size()
        torch_rows[name] = (ms, n * es / ms / 1e6, n / ms / 1e6)
        del x
        torch.cuda.empty_cache()
    dev = torch.cuda.get_device_name()
    ver = torch.__version__
except Exception as e:  # no torch or no GPU: tcuda alone
    dev, ver = "?", "unavailable (%s)" % e
print("random fills, n = 2^%d, median of %d; device %s; torch %s" % (lg, reps, dev, ver))
hdr = "%-26s %9s %9s %9s | %9s %9s %9s | %7s" % ("op", "ms", "GB/s", "Gsamp/s", "torch ms", "GB/s", "Gsamp/s", "speedup")
print(hdr); print("-" * len(hdr))
for r in rows:
    name = r["op"]
    if r["ms"] == "error":
        print("%-26s error" % name); continue
    ms, gbs, gs = float(r["ms"]), float(r["GB/s written"]), float(r["Gsamples/s"])
    t = torch_rows.get(name)
    if t:
        print("%-26s %9.3f %9.1f %9.1f | %9.3f %9.1f %9.1f | %7.2f" % (name, ms, gbs, gs, t[0], t[1], t[2], t[0] / ms))
    else:
        print("%-26s %9.3f %9.1f %9.1f |" % (name, ms, gbs, gs))
PY
