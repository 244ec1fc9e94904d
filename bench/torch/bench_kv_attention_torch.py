"""PyTorch's side of bench_kv_attention, on the shapes and dtypes of
tcuda's CSV: decode's attention as gpt-fast writes it for a static cache
(the new key and value put into the caches with index_copy_ at the
position, a device tensor, then F.scaled_dot_product_attention of the one
query over the whole cache with a boolean mask of positions <= n; PyTorch
picks the kernel), and the same with the length known on the host (the
caches narrowed to n + 1 positions, no mask: what the flash and
efficient kernels take, but a graph cannot replay it as n grows). 20 calls
captured in a CUDA graph and replayed per timed sample; eager_ms queues
them one by one. GB/s counts what tcuda's row counts.
Prints CSV: dtype,b,h,e,s,n,ms,GBps,eager_ms,slice_ms.
Usage: python3 bench_kv_attention_torch.py TCUDA_CSV [samples]"""
import sys

from torch_timing import graph_median_ms, median_ms, tcuda_rows, torch_or_exit

CALLS = 20
rows = tcuda_rows(sys.argv[1], "dtype") or []
samples = int(sys.argv[2]) if len(sys.argv) > 2 else 21
torch = torch_or_exit()
import torch.nn.functional as F  # noqa: E402


print(f"# torch {torch.__version__}")
print("dtype,b,h,e,s,n,ms,GBps,eager_ms,slice_ms")
for r in rows:
    b, h, e, s, n = (int(r[c]) for c in ("b", "h", "e", "s", "n"))
    dt = getattr(torch, r["dtype"])
    q, kn, vn = (torch.randn(b, h, 1, e, device="cuda", dtype=dt) for _ in range(3))
    kc, vc = (torch.randn(b, h, s, e, device="cuda", dtype=dt) for _ in range(2))
    pos = torch.tensor([n], device="cuda")
    positions = torch.arange(s, device="cuda")

    def masked():
        for _ in range(CALLS):
            kc.index_copy_(2, pos, kn)
            vc.index_copy_(2, pos, vn)
            mask = positions[None, :] <= pos[:, None]  # [1, S], as gpt_torch.py's
            F.scaled_dot_product_attention(q, kc, vc, attn_mask=mask)

    def sliced():
        for _ in range(CALLS):
            kc.index_copy_(2, pos, kn)
            vc.index_copy_(2, pos, vn)
            F.scaled_dot_product_attention(q, kc[:, :, :n + 1], vc[:, :, :n + 1])

    try:
        eager_ms = median_ms(masked, samples) / CALLS
        ms = graph_median_ms(masked, samples) / CALLS
        slice_ms = graph_median_ms(sliced, samples) / CALLS
    except RuntimeError as e:  # a row PyTorch cannot run leaves its cells empty
        print(f"# {r['dtype']} b {b} n {n}: {str(e).splitlines()[0]}")
        continue
    nbytes = q.element_size() * (2 * b * h * (n + 1) * e + 4 * b * h * e)
    print(f"{r['dtype']},{b},{h},{e},{s},{n},{ms:.5f},{nbytes / ms / 1e6:.1f},{eager_ms:.5f},"
          f"{slice_ms:.5f}")
    del q, kn, vn, kc, vc
