"""PyTorch's side of bench_history: the same trace (bench_history gen FILE)
replayed through torch.cuda.caching_allocator_alloc/delete with memory
history off, and on with context "all" and stacks "python", then "all"
(C++ frames too). A Python loop: its own cost is in every row, so the
history's cost per op is a row minus the "off" row (bench/run.sh history prints
both). Warm replays, best of REPEATS. Prints CSV rows: torch,mode,ns_per_op.
Usage: python3 bench_history_torch.py TRACE [REPEATS]"""
import struct
import sys
import time

import torch


def load(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack_from("<Q", data, 0)
    ops = list(struct.iter_unpack("<IIQ", data[8:8 + 16 * n]))
    return ops


def replay(ops, slots):
    alloc = torch.cuda.caching_allocator_alloc
    delete = torch.cuda.caching_allocator_delete
    t0 = time.perf_counter_ns()
    for ident, is_alloc, size in ops:
        if is_alloc:
            slots[ident] = alloc(size, 0)
        else:
            delete(slots.pop(ident))
    ns = (time.perf_counter_ns() - t0) / len(ops)
    for p in slots.values():
        delete(p)
    slots.clear()
    return ns


def best(ops, repeats):
    slots = {}
    replay(ops, slots)
    return min(replay(ops, slots) for _ in range(repeats))


def main():
    ops = load(sys.argv[1])
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    torch.cuda.init()
    rec = torch.cuda.memory._record_memory_history
    print("torch,off,%.1f" % best(ops, repeats), flush=True)
    for stacks in ("python", "all"):
        rec(enabled="all", context="all", stacks=stacks, max_entries=1000000)
        print("torch,on_context_all_stacks_%s,%.1f" % (stacks, best(ops, repeats)), flush=True)
        rec(enabled=None)
    print("torch,off_again,%.1f" % best(ops, repeats), flush=True)


if __name__ == "__main__":
    main()
