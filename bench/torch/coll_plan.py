"""The plan of bench/run.sh comm for the PyTorch twins (bench_dist_torch.py,
bench_comm_torch.py): bench/coll_plan.h in Python. The sizes, the bus
factors, the call counts and the ROW line must stay the same as there, so
that every program times the same cells the same way; change both together.
"""

SIZES = [65536 << (2 * i) for i in range(8)]  # 64 KiB .. 1 GiB, powers of 4
OPS = ["all_reduce", "broadcast", "all_gather", "reduce_scatter"]
WARMUP, PROBE, BATCHES, MIN_CALLS = 5, 10, 5, 20
MAX_BATCH, MAX_WAITS = 10000, 500
BATCH_NS, WAIT_NS = 20e6, 40e6


def bus_factor(op, world):
    """Bus bandwidth per algorithm bandwidth, as nccl-tests."""
    if op == "all_reduce":
        return 2.0 * (world - 1) / world
    if op == "broadcast":
        return 1.0
    return (world - 1) / world


def clamp(v, lo, hi):
    return lo if v < lo else hi if v > hi else int(v)


def batch_calls(est_ns):
    """Calls per stream batch, from the agreed estimate of one call."""
    return clamp(BATCH_NS / max(est_ns, 1.0), MIN_CALLS, MAX_BATCH)


def wait_calls(est_ns):
    """Calls of wait mode, from the agreed estimate of one call."""
    return clamp(WAIT_NS / max(est_ns, 1.0), MIN_CALLS, MAX_WAITS)


def median(v):
    """The median as the C side takes it: the element at n // 2 once sorted."""
    return sorted(v)[len(v) // 2]


def row(op, world, nbytes, variant, ns, gbs):
    """One ROW line, as COLL_ROW_FORMAT prints it."""
    print(f"ROW {op} x{world} {nbytes} {variant} {ns * 1e-3:.3f} {gbs:.3f}", flush=True)
