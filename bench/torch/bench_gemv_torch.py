"""PyTorch's side of bench_gemv: F.linear (with the bias, none for the
50257-wide logits) on the shapes and dtypes of tcuda's CSV, 20 calls
captured in a CUDA graph and replayed per timed sample (and, for eager_ms,
queued one by one), GB/s counting the weight, input, bias and output once.
Prints CSV: dtype,m,n,k,ms,GBps,eager_ms.
Usage: python3 bench_gemv_torch.py TCUDA_CSV [samples]"""
import sys

from torch_timing import graph_median_ms, median_ms, tcuda_rows, torch_or_exit

CALLS = 20
rows = tcuda_rows(sys.argv[1], "dtype") or []
samples = int(sys.argv[2]) if len(sys.argv) > 2 else 21
torch = torch_or_exit()
import torch.nn.functional as F  # noqa: E402

print(f"# torch {torch.__version__}")
print("dtype,m,n,k,ms,GBps,eager_ms")
for r in rows:
    m, n, k = int(r["m"]), int(r["n"]), int(r["k"])
    dt = getattr(torch, r["dtype"])
    w = torch.randn(n, k, device="cuda", dtype=dt)
    b = torch.randn(n, device="cuda", dtype=dt) if n != 50257 else None
    x = torch.randn(m, k, device="cuda", dtype=dt)

    def calls():
        for _ in range(CALLS):
            F.linear(x, w, b)

    eager_ms = median_ms(calls, samples) / CALLS
    ms = graph_median_ms(calls, samples) / CALLS
    nbytes = w.element_size() * (n * k + m * k + m * n + (n if b is not None else 0))
    print(f"{r['dtype']},{m},{n},{k},{ms:.5f},{nbytes / ms / 1e6:.1f},{eager_ms:.5f}")
    del w, b, x
