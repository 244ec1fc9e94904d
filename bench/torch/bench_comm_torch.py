"""PyTorch's side of bench_comm: torch.cuda.comm.broadcast / reduce_add over 2
and 4 GPUs and torch.distributed all_reduce (NCCL) in 2- and 4-process groups,
256 MiB of float32, the median of 10 runs after 3 warm-ups, rows named as
bench_comm.c names them (GB/s = bytes of one buffer / time)."""
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

NUMEL = (256 << 20) // 4
BYTES = NUMEL * 4
WARMUP, RUNS = 3, 10


def row(name, gbs):
    print(f"{name:<34} {gbs:10.2f}  GB/s", flush=True)


def sync_all(n):
    for d in range(n):
        torch.cuda.synchronize(d)


def time_gbs(fn, n):
    times = []
    for i in range(WARMUP + RUNS):
        sync_all(n)
        t0 = time.perf_counter_ns()
        fn()
        sync_all(n)
        if i >= WARMUP:
            times.append(time.perf_counter_ns() - t0)
    return BYTES / statistics.median(times)


def comm_rows(gpus):
    src = torch.ones(NUMEL, device="cuda:0")
    inputs = [torch.ones(NUMEL, device=f"cuda:{d}") for d in range(min(gpus, 8))]
    for k in (2, 4):
        if k > gpus:
            break
        devs = list(range(k))
        row(f"comm broadcast x{k}", time_gbs(lambda: torch.cuda.comm.broadcast(src, devs), k))
        row(f"comm reduce_add x{k}",
            time_gbs(lambda: torch.cuda.comm.reduce_add(inputs[:k], destination=0), k))


def rank_main(rank, world, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world)
    t = torch.ones(NUMEL, device=f"cuda:{rank}")
    times = []
    for i in range(WARMUP + RUNS):
        dist.barrier()
        torch.cuda.synchronize()
        t0 = time.perf_counter_ns()
        dist.all_reduce(t)
        torch.cuda.synchronize()
        if i >= WARMUP:
            times.append(time.perf_counter_ns() - t0)
    gbs = BYTES / statistics.median(times)
    if rank == 0:
        row(f"dist all_reduce x{world}", gbs)
        row(f"dist all_reduce bus x{world}", gbs * 2 * (world - 1) / world)
    dist.destroy_process_group()


def main():
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    gpus = torch.cuda.device_count()
    if gpus < 2:
        print(f"skipped: needs 2 or more GPUs, this machine has {gpus}")
        return 0
    comm_rows(gpus)
    for world in (2, 4):
        if world <= gpus:
            mp.spawn(rank_main, args=(world, 29600 + world), nprocs=world, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
