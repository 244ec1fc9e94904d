#!/usr/bin/env bash
# Graph benchmark: tcuda (bench_graph and examples/graph_mlp from a CUDA
# build) beside PyTorch on the same GPU in the same run. From the repository
# root, with the build folder as argument (it builds nothing):
#     bash bench/run_graph.sh build
# Logs go to "$OUT" when set (else to a temporary folder). About 20 s.
set -u
BUILD="${1:-build}"
LOG="${OUT:-$(mktemp -d)}"
mkdir -p "$LOG"
BENCH="$BUILD/bench/bench_graph"
MLP="$BUILD/examples/graph_mlp"
for f in "$BENCH" "$MLP"; do
    if [ ! -x "$f" ]; then
        echo "missing $f: build first (cmake --build $BUILD, with CUDA)" >&2
        exit 1
    fi
done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$LOG/gpu.txt" 2>&1 || true
cat "$LOG/gpu.txt"

echo "== tcuda =="
rc=0
"$BENCH" | tee "$LOG/tcuda.txt" || rc=1
"$MLP" | tee "$LOG/mlp.txt" || rc=1
# the example's lines as rows
python3 - "$LOG/mlp.txt" <<'PY' | tee -a "$LOG/tcuda.txt"
import re, sys
text = open(sys.argv[1]).read()
eager = re.search(r"eager: .*?([0-9.]+) us per step", text)
graph = re.search(r"graph: .*?([0-9.]+) us per step", text)
data = re.search(r"graph, data order: .*?([0-9.]+) us per step", text)
if eager and graph:
    e, g = float(eager.group(1)), float(graph.group(1))
    rows = [("mlp step eager, us", e, "us per step"),
            ("mlp step graph, us", g, "us per step"),
            ("mlp graph speedup", e / g, "x")]
    if data:
        d = float(data.group(1))
        rows += [("mlp step data-order graph", d, "us per step (TC_GRAPH_ORDER_DATA)"),
                 ("mlp data-order speedup", e / d, "x")]
    for name, v, unit in rows:
        print(f"{name:<28} {v:12.3f}  {unit}")
PY

# where the step's time goes, op by op (diagnosis, not in the table below)
[ -x "$BUILD/bench/bench_graph_ops" ] && "$BUILD/bench/bench_graph_ops" > "$LOG/ops.txt" 2>&1 &&
  tail -n +2 "$LOG/ops.txt"

echo "== PyTorch =="
python3 "$(dirname "$0")/torch/bench_graph_torch.py" 2>&1 | tee "$LOG/torch.txt"

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
        print(f"{k:<28} {v:10.3f} {p[k]:10.3f} {v / p[k]:11.2f}")
    else:
        print(f"{k:<28} {v:10.3f} {'':>10}")
g, r = t.get("add chain graph, us/op"), t.get("add chain raw graph, us/op")
if g and r:
    print(f"target 1: graph / raw graph = {g / r:.3f} (<= 1.05)")
if g and p.get("add chain graph, us/op"):
    print(f"target 2: graph replay per op below PyTorch's: {g:.3f} vs {p['add chain graph, us/op']:.3f}")
for k, how in (("mlp graph speedup", "stream order"), ("mlp data-order speedup", "data order")):
    if t.get(k) and p.get("mlp graph speedup"):
        print(f"target 3 ({how}): MLP speedup {t[k]:.2f}x vs PyTorch's "
              f"{p['mlp graph speedup']:.2f}x (at least PyTorch's)")
PY
echo "logs in $LOG"
exit $rc
