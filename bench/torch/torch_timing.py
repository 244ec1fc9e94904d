"""Shared by the run_*.sh benchmarks' PyTorch side: tcuda's CSV rows and the
median of event-timed PyTorch calls (bench_util.h's bench_gpu_median_ms on
the C side)."""
import csv


def tcuda_rows(path, first):
    """The rows of tcuda's CSV at `path`, whose header starts with `first`;
    None after printing the file when it is not a table (the benchmark said
    why it skipped: no GPU)."""
    text = open(path).read()
    if not text.startswith(first + ","):
        print(text.strip())
        return None
    return list(csv.DictReader(text.splitlines()))


def median_ms(fn, reps, warmup=3):
    """Milliseconds of fn on the GPU, the median of `reps` calls timed by CUDA
    events on the current stream, after `warmup` calls."""
    import torch
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    ts.sort()
    return ts[len(ts) // 2]
