"""PyTorch's side of bench_nn: torch.softmax and F.layer_norm (eps 1e-5,
with weight and bias) on the shapes and dtypes of tcuda's CSV, GB/s counting
the tensor read once and written once, the median of event-timed calls.
Prints CSV: op,dtype,rows,cols,GBps.
Usage: python3 bench_nn_torch.py TCUDA_CSV [repeats]"""
import sys

from torch_timing import median_ms, tcuda_rows, torch_or_exit

rows = tcuda_rows(sys.argv[1], "op") or []
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 51
torch = torch_or_exit()
import torch.nn.functional as F  # noqa: E402

print(f"# torch {torch.__version__}")
print("op,dtype,rows,cols,GBps")
seen = set()
for r in rows:
    R, C = int(r["rows"]), int(r["cols"])
    key = (r["op"], r["dtype"], R, C)
    if key in seen:
        continue
    seen.add(key)
    dt = torch.float32 if r["dtype"] == "float32" else torch.bfloat16
    x = torch.randn(R, C, device="cuda", dtype=dt)
    w = torch.randn(C, device="cuda", dtype=dt)
    b = torch.randn(C, device="cuda", dtype=dt)
    if r["op"] == "softmax":
        ms = median_ms(lambda: torch.softmax(x, -1), reps)
    else:
        ms = median_ms(lambda: F.layer_norm(x, (C,), w, b, 1e-5), reps)
    print(f"{r['op']},{r['dtype']},{R},{C},{2 * R * C * x.element_size() / ms / 1e6:.1f}")
    del x, w, b
