"""What the PyTorch twins in bench/torch share: the ways they time PyTorch
calls, each the counterpart of the tcuda benchmark's (bench/bench_util.h on
the C side), and the "name value unit" row that bench/compare.py reads."""


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


def graph_median_ms(fn, reps):
    """Milliseconds of one replay of a CUDA graph of fn(), the median of
    `reps` (median_ms), fn warmed up first on a side stream as PyTorch asks
    before a capture."""
    import torch
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return median_ms(g.replay, reps)


def mean_s(fn, warmup, iters):
    """Seconds per call of fn on the GPU: CUDA events around `iters` calls
    back to back, after `warmup` calls."""
    import torch
    for _ in range(warmup):
        fn()
    a = torch.cuda.Event(enable_timing=True)
    b = torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(iters):
        fn()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) * 1e-3 / iters


def host_us_behind(fn, queue, reps):
    """Host microseconds of fn with GPU work queued ahead of it (queue()),
    the median of `reps` calls, the GPU idle before each."""
    import statistics
    import time
    import torch
    ts = []
    for _ in range(reps):
        torch.cuda.synchronize()
        queue()
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e6)
        torch.cuda.synchronize()
    return statistics.median(ts)


def row(name, value, unit, width=28, digits=1):
    """One "name value unit" row, as the C benchmarks print theirs."""
    print(f"{name:<{width}} {value:12.{digits}f}  {unit}")


def tcuda_rows(path, first):
    """The rows of tcuda's CSV at `path`, whose header starts with `first`;
    None when it is not a table (the benchmark said why it skipped)."""
    import csv
    text = open(path).read()
    if not text.startswith(first + ","):
        return None
    return list(csv.DictReader(text.splitlines()))


def torch_or_exit():
    """The torch module with a GPU, or a line saying why not and exit 0: the
    PyTorch side is a comparison, its absence no failure."""
    try:
        import torch
    except Exception as e:  # noqa: BLE001
        print("# PyTorch not available:", e)
        raise SystemExit(0)
    if not torch.cuda.is_available():
        print("# PyTorch sees no GPU")
        raise SystemExit(0)
    return torch
