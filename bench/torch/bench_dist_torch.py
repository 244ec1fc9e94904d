"""PyTorch's side of bench_comm dist: torch.distributed on NCCL, eager, one
process per GPU under torchrun (bench/run.sh comm starts it):

    torchrun --nproc_per_node N bench/torch/bench_dist_torch.py

all_reduce, broadcast (root 0), all_gather_into_tensor and
reduce_scatter_tensor at coll_plan.py's sizes, float32 zeros, timed as
bench_comm.c times tcuda's (coll_plan.py): torch_stream (K calls queued back
to back, one torch.cuda.synchronize) and torch_wait (each call followed by
torch.cuda.synchronize), every batch after a dist.barrier. Rank 0 prints the
ROW lines."""
import inspect
import os
import sys
import time

import coll_plan as plan

try:
    import torch
    import torch.distributed as dist
except Exception as e:  # noqa: BLE001
    print("# PyTorch not available:", e)
    sys.exit(1)


def issue(op, big, small):
    if op == "all_reduce":
        dist.all_reduce(big)
    elif op == "broadcast":
        dist.broadcast(big, 0)
    elif op == "all_gather":
        dist.all_gather_into_tensor(big, small)
    else:
        dist.reduce_scatter_tensor(small, big)


def barrier():
    dist.barrier()
    torch.cuda.synchronize()


def stream_batch(op, big, small, calls):
    """Nanoseconds per call of `calls` calls queued back to back."""
    barrier()
    t0 = time.perf_counter_ns()
    for _ in range(calls):
        issue(op, big, small)
    torch.cuda.synchronize()
    return (time.perf_counter_ns() - t0) / calls


def agree_max(v, device):
    """The largest of the ranks' values, so that all use the same counts."""
    t = torch.tensor([v], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def cell(op, big, small, nbytes, world, device, rank):
    for _ in range(plan.WARMUP):
        issue(op, big, small)
    est = agree_max(stream_batch(op, big, small, plan.PROBE), device)
    k, m = plan.batch_calls(est), plan.wait_calls(est)
    ns = plan.median([stream_batch(op, big, small, k) for _ in range(plan.BATCHES)])
    factor = plan.bus_factor(op, world)
    if rank == 0:
        plan.row(op, world, nbytes, "torch_stream", ns, nbytes / ns * factor)
    barrier()
    times = []
    for _ in range(m):
        t0 = time.perf_counter_ns()
        issue(op, big, small)
        torch.cuda.synchronize()
        times.append(time.perf_counter_ns() - t0)
    ns = plan.median(times)
    if rank == 0:
        plan.row(op, world, nbytes, "torch_wait", ns, nbytes / ns * factor)


def nccl_version():
    """The NCCL torch uses, as "2.21.5" (older torch gives one number)."""
    v = torch.cuda.nccl.version()
    if isinstance(v, int):
        v = (v // 1000, v // 100 % 10, v % 100) if v < 10000 else (v // 10000, v // 100 % 100, v % 100)
    return ".".join(map(str, v))


def main():
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # run.sh sets it; never unset
    local = int(os.environ["LOCAL_RANK"])
    device = torch.device("cuda", local)
    torch.cuda.set_device(device)
    kwargs = {}
    if "device_id" in inspect.signature(dist.init_process_group).parameters:
        kwargs["device_id"] = device  # NCCL's communicator made now, not at the first call
    dist.init_process_group("nccl", **kwargs)
    rank, world = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        print(f"# torch {torch.__version__}, NCCL {nccl_version()}, {world} ranks, "
              f"{torch.cuda.get_device_name(device)}", flush=True)
    for nbytes in plan.SIZES:
        big = torch.zeros(nbytes // 4, dtype=torch.float32, device=device)
        small = torch.zeros(nbytes // 4 // world, dtype=torch.float32, device=device)
        for op in plan.OPS:
            cell(op, big, small, nbytes, world, device, rank)
        del big, small
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
