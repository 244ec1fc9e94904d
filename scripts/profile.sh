#!/usr/bin/env bash
# Where the GPU time goes, by Nsight Compute (ncu), beside PyTorch's
# torch.profiler where there is a PyTorch side. Diagnosis, not benchmarks.
#   BUILD=build scripts/profile.sh NAME [ARG]
#   attention    the fused attention kernels (attention.cu) at GPT-2 small's
#                prefill shape: throughput, occupancy and warp-stall sections for
#                one launch of the bfloat16 (tensor core) kernel and one of the
#                float32 kernel, from bench/bench_attention
#   attention_backward  the fused attention backward's kernels at GPT-2 small's
#                training shape (8 x 12 heads x 1024 x 64, causal): throughput,
#                occupancy, warp stalls and L2 reductions of the second launch of
#                float32's kernel, Hopper's 16-bit dK/dV kernel and dq's
#                rounding in bench/bench_nn_backward; then every kernel of three
#                bfloat16 calls at boost clocks, beside PyTorch's (torch.profiler);
#                `attention_backward list`: that list alone; `attention_backward
#                sass`: the bfloat16 dK/dV kernel's instructions and stall samples
#   gpt [dtype]  examples/gpt's kernels of one prefill (batch 8 x 512) and of
#                one eager decode step (NVTX ranges "prefill", "decode_step"),
#                grouped by name, beside PyTorch's prefill on the same weights
#                (bench/torch/gpt_torch.py); dtype bfloat16 (default) or float32
#   train [batch]  examples/train_gpt2's kernels of one bfloat16 step of GPT-2
#                small (seq 1024, batch 8; NVTX range "step 3"), grouped by name,
#                beside PyTorch's eager and torch.compile steps (bench/torch/
#                train_gpt2_bench.py's model) under torch.profiler (not with
#                PROFILE_TORCH=0); then train_gpt2 once at batch 64, its
#                message kept (train.txt)
#   mlp          each kernel of one eager training step of examples/graph_mlp
#                (NVTX range "mlp_step") in order, beside PyTorch's same step
#                (bench/torch/mlp_torch.py); a graph replays these kernels back
#                to back, so their sum is close to the replayed step's time
# BUILD is a CUDA build (default build); logs go to $OUT/profile_NAME (OUT
# default /tmp). scripts/gpu.sh runs it for the names in PROFILES.
set -u
NAME=${1:-}
shift
BUILD=${BUILD:-build}
[ -d "$BUILD" ] && BUILD=$(cd "$BUILD" && pwd)
cd "$(dirname "$0")/.." || exit 2
case $NAME in
  attention | attention_backward | gpt | mlp | train) ;;
  *) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2; exit 2 ;;
esac
LOG=${OUT:-/tmp}/profile_$NAME
mkdir -p "$LOG"

# Nsight Compute's CSV of gpu__time_duration per kernel ($1), as a list of
# kernels in order (how=list) or their sums by name, the largest first
# (how=sum); the title says what was profiled.
ncu_kernels() { # csv how title
  python3 - "$@" << 'PY'
import csv, io, sys
path, how, title = sys.argv[1:4]
text = open(path).read()
rows = [r for r in csv.reader(io.StringIO(text[text.find('"ID"'):]))]
if not rows:
    print(f"{title}: no kernels profiled"); sys.exit(0)
head = rows[0]; k = head.index("Kernel Name"); v = head.index("Metric Value")
ks = [(r[k], float(r[v].replace(",", ""))) for r in rows[1:]
      if len(r) > v and r[v] not in ("", "Metric Value")]
if how == "list":
    print(f"== tcuda {title}: {len(ks)} kernels, {sum(t for _, t in ks) / 1e3:.1f} us")
    for name, t in ks:
        print(f"{t / 1e3:8.2f} us  {name[:100]}")
    sys.exit(0)
agg = {}
for name, t in ks:
    c, s = agg.get(name[:90], (0, 0.0))
    agg[name[:90]] = (c + 1, s + t)
print(f"== tcuda {title}: {len(ks)} kernels, {sum(s for _, s in agg.values()) / 1e3:.1f} us")
for name, (c, s) in sorted(agg.items(), key=lambda x: -x[1][1])[:30]:
    print(f"{s / 1e3:9.1f} us {c:4d}x  {name}")
PY
}

profile_attention() {
  for k in attention_mma attention_f32; do
    timeout 120 ncu --kernel-name "regex:$k" --launch-skip 3 --launch-count 1 \
      --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
      --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
      "$BUILD/bench/bench_attention" 5 > "$LOG/$k.txt" 2>&1
    echo "== $k"
    grep -E "Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Compute \(SM\) Throughput|Memory Throughput|Warp Cycles Per Issued|Issue Slots Busy|Executed Ipc A|L1/TEX Hit|L2 Hit|Mem Busy|Max Bandwidth|Dynamic Shared|Static Shared" "$LOG/$k.txt" | sed 's/  */ /g' | head -24
    grep -E "^ +(OPT|WRN|INF) " -A2 "$LOG/$k.txt" | grep -iE "stall|bank|latency|occupancy|uncoalesced" | sed 's/  */ /g' | head -8
  done
}

# The stall reasons profile_attention_backward asks for: warps stalled per
# issued instruction, by reason.
STALLS=smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_membar_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio,smsp__average_warps_issue_stalled_misc_per_issue_active.ratio,smsp__average_warps_issue_stalled_sleeping_per_issue_active.ratio,smsp__average_warps_issue_stalled_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio,smsp__average_warps_issue_stalled_branch_resolving_per_issue_active.ratio

profile_attention_backward() {
  local k ks="attention_bwd_f32 attention_bwd_dkv_sm90 attention_bwd_dq_round"
  [ "${1:-}" = list ] && ks=
  if [ "${1:-}" = sass ]; then # Hopper's bfloat16 dK/dV kernel, instruction by instruction
    timeout 200 ncu --kernel-name-base demangled --kernel-name "regex:attention_bwd_dkv_sm90.*bfloat16" \
      --launch-skip 1 --launch-count 1 --section SourceCounters --section WarpStateStats \
      --section InstructionStats -f -o "$LOG/dkv" "$BUILD/bench/bench_nn_backward" 3 > "$LOG/sass.err" 2>&1
    ncu -i "$LOG/dkv.ncu-rep" --page source --csv --print-source sass > "$LOG/sass.csv" 2>> "$LOG/sass.err"
    python3 - "$LOG/sass.csv" << 'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
i = next((n for n, r in enumerate(rows) if "Source" in r), None)
if i is None:
    print("no source page:", rows[:3]); sys.exit(0)
head = rows[i]; print("columns:", head)
src = head.index("Source")
def col(name):
    return next((n for n, h in enumerate(head) if h.startswith(name)), None)
ex, samp = col("Instructions Executed"), col("Warp Stall Sampling (All")
def num(r, c):
    try: return float(r[c].replace(",", "")) if c is not None else 0.0
    except ValueError: return 0.0
body = [r for r in rows[i + 1:] if len(r) > src]
ops = {}
for r in body:
    op = r[src].split()[0] if r[src].split() else "?"
    if op.startswith("@"): op = r[src].split()[1]
    op = op.split(".")[0]
    e, s = ops.get(op, (0, 0))
    ops[op] = (e + num(r, ex), s + num(r, samp))
te, ts = sum(v[0] for v in ops.values()), sum(v[1] for v in ops.values())
print(f"== by opcode: {te:.0f} warp instructions, {ts:.0f} stall samples")
for op, (e, s) in sorted(ops.items(), key=lambda x: -x[1][1])[:30]:
    print(f"{op:12s} inst {e / te * 100:5.1f}%  samples {s / ts * 100:5.1f}%")
print("== the 40 instructions with the most samples")
for r in sorted(body, key=lambda r: -num(r, samp))[:40]:
    print(f"{num(r, samp) / ts * 100:5.1f}% {num(r, ex):10.0f}  {r[0]}  {r[src][:70]}")
PY
    return
  fi
  for k in $ks; do
    timeout 150 ncu --kernel-name "regex:$k" --launch-skip 1 --launch-count 1 \
      --section SpeedOfLight --section Occupancy --section WarpStateStats \
      --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
      --metrics "$STALLS,lts__t_sectors_op_red.sum" \
      "$BUILD/bench/bench_nn_backward" 3 > "$LOG/$k.txt" 2>&1
    echo "== $k: rc=$?"
    grep -E "attention_bwd|Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Compute \(SM\) Throughput|Memory Throughput|Warp Cycles Per Issued|Issue Slots Busy|L2 Hit|stalled|lts__t_sectors_op|Bank" \
      "$LOG/$k.txt" | sed -e 's/  */ /g' -e 's/smsp__average_warps_issue_stalled_//' -e 's/_per_issue_active.ratio//' \
      | awk '$2 != "inst" || $NF + 0 >= 0.1' | cut -c1-110
  done
  # every kernel of bfloat16's backward calls at boost clocks, beside PyTorch's
  timeout 150 ncu --kernel-name-base demangled --kernel-name "regex:attention_bwd.*bfloat16" \
    --launch-skip 6 --launch-count 9 --clock-control none --metrics gpu__time_duration.sum \
    --print-units base --csv "$BUILD/bench/bench_nn_backward" 3 > "$LOG/bf16.csv" 2> "$LOG/bf16.err"
  ncu_kernels "$LOG/bf16.csv" list "bfloat16 backward (three calls)"
  python3 - << 'PY' 2>&1 | tee "$LOG/torch.txt"
import torch, torch.nn.functional as F
from torch.profiler import profile, ProfilerActivity
B, T, C, H, HD = 8, 1024, 768, 12, 64
p = torch.randn(B, T, 3 * C, device="cuda", dtype=torch.bfloat16).requires_grad_()
q, k, v = (s.view(B, T, H, HD).transpose(1, 2) for s in p.split(C, 2))
go = torch.randn(B, T, H, HD, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
for _ in range(5):
    torch.autograd.grad(out, (q, k, v), go, retain_graph=True)
torch.cuda.synchronize()
with profile(activities=[ProfilerActivity.CUDA]) as pr:
    for _ in range(3):
        torch.autograd.grad(out, (q, k, v), go, retain_graph=True)
    torch.cuda.synchronize()
ev = [e for e in pr.events() if e.device_type == torch.autograd.DeviceType.CUDA]
print(f"== torch bfloat16 backward (three calls): {len(ev)} kernels, {sum(e.device_time for e in ev):.1f} us")
for e in ev:
    print(f"{e.device_time:8.2f} us  {e.name[:100]}")
PY
}

profile_gpt() {
  local dt=${1:-bfloat16} model
  model=$(mktemp -d /tmp/gpt-model.XXXX)
  python3 bench/torch/gpt_torch.py write "$model" --new 4 > "$LOG/write.txt" || { rm -rf "$model"; return 1; }
  prof() { # name nvtx-range launch-count gpt-args...
    local name=$1 range=$2 count=$3
    shift 3
    timeout 240 ncu --nvtx --nvtx-include "$range/" --launch-count "$count" --clock-control none \
      --metrics gpu__time_duration.sum --print-units base --csv "$BUILD/examples/gpt" \
      "$model/model.safetensors" --device cuda --dtype "$dt" "$@" > "$LOG/$name.csv" 2> "$LOG/$name.err"
    ncu_kernels "$LOG/$name.csv" sum "$name"
  }
  prof prefill prefill 400 --bench
  prof decode decode_step 400 --new 3
  python3 - "$model" "$dt" << 'PY' 2>&1 | tee "$LOG/torch.txt"
import sys, torch
sys.path.insert(0, "bench/torch")
from gpt_torch import GPT, load_safetensors
dt = {"float32": torch.float32, "bfloat16": torch.bfloat16}[sys.argv[2]]
w, meta = load_safetensors(sys.argv[1] + "/model.safetensors", "cuda")
m = GPT({k: v.to(dt) for k, v in w.items()}, int(meta["n_head"]))
V = w["wte.weight"].shape[0]
x = torch.randint(0, V, (8, 512), device="cuda")
pos = torch.arange(512, device="cuda")
from torch.profiler import profile, ProfilerActivity
with torch.no_grad():
    m.forward(x, pos)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        m.forward(x, pos)
        torch.cuda.synchronize()
ev = [e for e in p.key_averages() if e.device_time_total > 0]
tot = sum(e.self_device_time_total for e in ev)
print(f"== torch prefill: {tot:.1f} us")
for e in sorted(ev, key=lambda e: -e.self_device_time_total)[:14]:
    if e.self_device_time_total > 0:
        print(f"{e.self_device_time_total:9.1f} us {e.count:4d}x  {e.key[:90]}")
PY
  rm -rf "$model"
}

profile_mlp() {
  timeout 200 ncu --nvtx --nvtx-include "mlp_step/" --launch-skip 40 --launch-count 40 \
    --clock-control none --cache-control none --metrics gpu__time_duration.sum --print-units base \
    --csv "$BUILD/examples/graph_mlp" > "$LOG/tcuda.csv" 2> "$LOG/tcuda.err"
  ncu_kernels "$LOG/tcuda.csv" list "step (about two steps)"
  PYTHONPATH=bench/torch python3 - << 'PY' 2>&1 | tee "$LOG/torch.txt"
import torch
from torch.profiler import profile, ProfilerActivity
from mlp_torch import Mlp
torch.backends.cuda.matmul.allow_tf32 = False
step = Mlp().step  # bench_graph_torch.py's step
for _ in range(5):
    step()
torch.cuda.synchronize()
with profile(activities=[ProfilerActivity.CUDA]) as p:
    step()
    torch.cuda.synchronize()
ev = [e for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA]
print(f"== torch: {len(ev)} kernels, {sum(e.device_time for e in ev):.1f} us")
for e in ev:
    print(f"{e.device_time:8.2f} us  {e.name[:100]}")
PY
}

profile_train() {
  local b=${1:-8} tok=$LOG/tokens.bin
  python3 -c "import sys; sys.path.insert(0, 'bench/torch'); import train_gpt2_bench as t, shutil
shutil.copy(t.tokens(sys.argv[1]), sys.argv[2])" "$LOG" "$tok" || return 1
  timeout 240 ncu --nvtx --nvtx-include "step 3/" --clock-control none --metrics gpu__time_duration.sum \
    --print-units base --csv "$BUILD/examples/train_gpt2" --train "$tok" --device cuda --dtype bfloat16 \
    --batch "$b" --seq 1024 --steps 3 > "$LOG/tcuda.csv" 2> "$LOG/tcuda.err"
  ncu_kernels "$LOG/tcuda.csv" sum "step, batch $b"
  [ "${PROFILE_TORCH:-1}" = 0 ] || python3 - "$b" << 'PY' 2>&1 | grep -v Warning | tee "$LOG/torch.txt"
import sys, torch
from torch.profiler import profile, ProfilerActivity
sys.path.insert(0, "bench/torch")
import train_gpt2_bench as tb
B, T, V = int(sys.argv[1]), 1024, tb.VOCAB
x = torch.randint(0, V, (B, T), device="cuda")
y = torch.randint(0, V, (B, T), device="cuda")
for variant in ("eager", "compile"):
    model = tb.torch_model(torch)
    params = list(model.parameters())
    opt = tb.torch_optimizer(torch, params, 6e-4)
    fwd = torch.compile(model) if variant == "compile" else model
    def step():
        return tb.torch_step(torch, fwd, params, opt, x, y).item()
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        step()
        torch.cuda.synchronize()
    ev = [e for e in p.key_averages() if e.self_device_time_total > 0]
    tot = sum(e.self_device_time_total for e in ev)
    print(f"== torch {variant} step, batch {B}: {sum(e.count for e in ev)} kernels, {tot:.1f} us")
    for e in sorted(ev, key=lambda e: -e.self_device_time_total)[:24]:
        print(f"{e.self_device_time_total:9.1f} us {e.count:4d}x  {e.key[:90]}")
    del model, opt, fwd
    torch.cuda.empty_cache()
PY
  timeout 60 "$BUILD/examples/train_gpt2" --train "$tok" --device cuda --dtype bfloat16 --batch 64 \
    --seq 1024 --steps 1 > "$LOG/train.txt" 2>&1
  echo "== train_gpt2 --batch 64: rc=$?"
  tail -3 "$LOG/train.txt"
}

"profile_$NAME" "$@"
