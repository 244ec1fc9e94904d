"""PyTorch's side of bench_comm comm: torch.cuda.comm.broadcast (GPU 0 to GPUs
0..n-1) and torch.cuda.comm.reduce_add (GPUs 0..n-1 to GPU 0) for n = 2 and
4, at coll_plan.py's sizes (64 KiB to 1 GiB of float32 zeros), timed as
bench_comm.c times tcuda's: K calls queued back to back (their results
dropped at once), then every device synchronized, time / K, the median of
coll_plan.BATCHES batches. ROW lines named as bench_comm's (variant torch,
GB/s = bytes of one buffer / time)."""
import sys
import time

import coll_plan as plan
from torch_timing import torch_or_exit

torch = torch_or_exit()
import torch.cuda.comm  # noqa: E402


def sync_all(n):
    for d in range(n):
        torch.cuda.synchronize(d)


def batch(fn, n, calls):
    """Nanoseconds per call of `calls` calls of fn queued back to back."""
    sync_all(n)
    t0 = time.perf_counter_ns()
    for _ in range(calls):
        fn()
    sync_all(n)
    return (time.perf_counter_ns() - t0) / calls


def cell(name, fn, n, nbytes):
    for _ in range(plan.WARMUP):
        fn()
    k = plan.batch_calls(batch(fn, n, plan.PROBE))
    ns = plan.median([batch(fn, n, k) for _ in range(plan.BATCHES)])
    plan.row(name, n, nbytes, "torch", ns, nbytes / ns)


def main():
    gpus = torch.cuda.device_count()
    if gpus < 2:
        print(f"# skipped: needs 2 or more GPUs, this machine has {gpus}")
        return 0
    print(f"# torch {torch.__version__}, {gpus} GPUs, {torch.cuda.get_device_name(0)}")
    for n in (2, 4):
        if n > gpus:
            break
        devs = list(range(n))
        for nbytes in plan.SIZES:
            src = torch.zeros(nbytes // 4, device="cuda:0")
            inputs = [torch.zeros(nbytes // 4, device=f"cuda:{d}") for d in devs]
            cell("comm_broadcast", lambda: torch.cuda.comm.broadcast(src, devs), n, nbytes)
            cell("comm_reduce_add", lambda: torch.cuda.comm.reduce_add(inputs, destination=0), n,
                 nbytes)
            del src, inputs
            sync_all(n)
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
