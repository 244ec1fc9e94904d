"""PyTorch side of bench_graph: the same rows, measured the same way.

A chain of 100 adds on 16 float32 elements (x = x + y), wall-clock time per
op eagerly and as a replayed torch.cuda.CUDAGraph; and the MLP training step
of examples/graph_mlp.c (same sizes, same hand-written backward and SGD),
eagerly and as a replayed graph, in microseconds per step. Prints
"name value unit" rows that bench/run.sh graph puts beside tcuda's."""
import time

try:
    import torch
except Exception as e:  # noqa: BLE001
    print("PyTorch not available:", e)
    raise SystemExit(0)
if not torch.cuda.is_available():
    print("PyTorch sees no GPU")
    raise SystemExit(0)
torch.backends.cuda.matmul.allow_tf32 = False

from mlp_torch import Mlp  # noqa: E402  (after the torch check)

OPS, EAGER_CHAINS, GRAPH_CHAINS = 100, 300, 2000


def row(name, v, unit):
    print(f"{name:<28} {v:12.3f}  {unit}")


def per_op_us(fn, chains, ops):
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(chains):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e6 / (chains * ops)


def captured(fn):
    """fn warmed up 3 times on a side stream, then captured (as the docs do)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g


state = {"x": torch.ones(16, device="cuda")}
y = torch.full((16,), 0.5, device="cuda")


def chain():
    x = state["x"]
    for _ in range(OPS):
        x = x + y
    state["x"] = x


eager_us = per_op_us(chain, EAGER_CHAINS, OPS)
g = captured(chain)
graph_us = per_op_us(g.replay, GRAPH_CHAINS, OPS)
row("add chain eager, us/op", eager_us, "us per op (wall clock)")
row("add chain graph, us/op", graph_us, "us per op (replay)")

# The MLP step of examples/graph_mlp.c (mlp_torch.py).
STEPS = 500
mlp = Mlp()


def run(fn, losses):
    mlp.reset()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(STEPS):
        fn()
        losses[i:i + 1].copy_(mlp.loss.view(1))
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e6 / STEPS


mlp.step()
eager_losses = torch.zeros(STEPS, device="cuda")
eager_step = run(mlp.step, eager_losses)
g = captured(mlp.step)
graph_losses = torch.zeros(STEPS, device="cuda")
graph_step = run(g.replay, graph_losses)
row("mlp step eager, us", eager_step, "us per step")
row("mlp step graph, us", graph_step, "us per step")
row("mlp graph speedup", eager_step / graph_step, "x")
diff = ((graph_losses - eager_losses).abs() / eager_losses.abs()).max().item()
print(f"torch losses: {eager_losses[0].item():.6f} -> {eager_losses[-1].item():.6f}, "
      f"graph vs eager largest relative difference {diff:.2g}")
