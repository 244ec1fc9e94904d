#!/bin/sh
# Memory history's cost per allocator operation: tcuda (off, on without
# stacks, with allocation stacks, with all stacks) beside PyTorch's
# _record_memory_history (context "all", stacks "python" and "all") on the
# same 50,000-operation trace (bench_alloc's, first 50,000). PyTorch's side
# is a Python loop, so its history cost is its row minus its "off" row;
# tcuda's is likewise its row minus "off". Builds nothing; run from the
# repository root after a CUDA build:  bash bench/run_history.sh [build]
# Logs under $OUT/bench_history if OUT is set (else /tmp). Under 60 s.
set -eu
B=${1:-build}
LOG=${OUT:-/tmp}/bench_history
mkdir -p "$LOG"
PIN=""
taskset -c 2 true 2>/dev/null && PIN="taskset -c 2"
"$B/bench/bench_history" gen "$LOG/trace.bin"
$PIN "$B/bench/bench_history" > "$LOG/tcuda.csv" 2> "$LOG/tcuda.err" || true
: > "$LOG/torch.csv"
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
    timeout 45 $PIN python3 bench/torch/bench_history_torch.py "$LOG/trace.bin" 2 \
        >> "$LOG/torch.csv" 2> "$LOG/torch.err" || echo "torch,error,0" >> "$LOG/torch.csv"
else
    echo "torch: not importable or no GPU: PyTorch rows skipped" > "$LOG/torch.err"
fi
python3 - "$LOG/tcuda.csv" "$LOG/torch.csv" <<'PY' | tee "$LOG/table.txt"
import sys
rows = [l.strip().split(",") for f in sys.argv[1:] for l in open(f) if l.count(",") == 2]
rows = [r for r in rows if r[0] != "where"]
base = {}
for w, m, ns in rows:
    if m == "off":
        base[w] = float(ns)
names = {"gpu": "tcuda (GPU, device 0)", "host": "tcuda algorithm (host provider)",
         "torch": "PyTorch (Python loop)"}
print("memory history: ns per allocator operation, warm, 50,000-op trace")
print("| %-32s | %-30s | %9s | %13s |" % ("allocator", "history", "ns/op", "cost over off"))
print("|%s|%s|%s|%s|" % ("-" * 34, "-" * 32, "-" * 11, "-" * 15))
for w, m, ns in rows:
    ns = float(ns)
    extra = "" if m.startswith("off") or w not in base else "%+.0f" % (ns - base[w])
    print("| %-32s | %-30s | %9.0f | %13s |" % (names.get(w, w), m, ns, extra))
PY
