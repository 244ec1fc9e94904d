#!/bin/sh
# jiterator: tcuda (bench_jit) beside PyTorch's torch.cuda.jiterator, one
# table. Run from the repository root after a CUDA build; builds nothing.
#   bash bench/run_jit.sh [build] [log2 n] [repeats]
# Logs go under $OUT/bench_jit if set, else /tmp/bench_jit. Under 60 s.
set -eu
B=${1:-build}
LG=${2:-28}
REPS=${3:-21}
LOG=${OUT:-/tmp}/bench_jit
mkdir -p "$LOG"
"$B/bench/bench_jit" "$LG" "$REPS" > "$LOG/tcuda.csv"
python3 bench/torch/bench_jit_torch.py "$LG" "$REPS" > "$LOG/torch.csv" 2> "$LOG/torch.err" ||
    echo "torch_unavailable,see $LOG/torch.err" > "$LOG/torch.csv"
python3 - "$LOG/tcuda.csv" "$LOG/torch.csv" <<'PY' | tee "$LOG/table.txt"
import sys
def read(path):
    d = {}
    for line in open(path):
        if "," in line:
            k, v = line.strip().split(",", 1)
            d[k] = v
    return d
t, p = read(sys.argv[1]), read(sys.argv[2])
if "first_call_cold_ms" not in t:
    print(open(sys.argv[1]).read().strip()); sys.exit(0)
print("jiterator, x + alpha*y; device %s; torch %s" % (t.get("device", "?"),
      p.get("torch_version", p.get("torch_unavailable", "?"))))
rows = [("first call, cold (load NVRTC, compile)", "first_call_cold_ms", "ms", "min"),
        ("first call, compile only", "first_call_compile_ms", "ms", "min"),
        ("second process, first call (disk cache)", "second_process_first_call_ms", "ms", "min"),
        ("warm call, host time", "warm_call_host_us", "us", "min"),
        ("kernel, 2^%s float32" % t.get("n_log2", "?"), "jit_axpy_gbs", "GB/s", "max")]
hdr = "%-42s %10s %10s %8s" % ("", "tcuda", "torch", "ratio")
print(hdr); print("-" * len(hdr))
for name, key, unit, better in rows:
    a = float(t[key]); b = p.get("torch_" + key)
    if b is None:
        print("%-42s %8.2f %s" % (name, a, unit)); continue
    b = float(b)
    ratio = a / b if better == "max" else b / a
    print("%-42s %8.2f %-4s %8.2f %-4s %8.2f" % (name, a, unit, b, unit, ratio))
add = float(t["builtin_add_gbs"])
print("%-42s %8.2f GB/s (jit kernel at %.3f of it)" % ("tcuda built-in add, same bytes", add,
      float(t["jit_axpy_gbs"]) / add))
if "torch_add_gbs" in p:
    print("%-42s %8.2f GB/s" % ("torch.add, same bytes", float(p["torch_add_gbs"])))
print("targets: first compile <= torch's; disk-cache first call <= 5 ms; kernel >= 0.97 of torch's "
      "jiterator and of the built-in add (ratio: above 1 is tcuda better)")
PY
