"""PyTorch's host cost for the calls bench_device measures, from Python."""
import time

from torch_timing import torch_or_exit

torch = torch_or_exit()

N = 200000
s = torch.cuda.Stream()
e = torch.cuda.Event()


def ns(fn):
    fn()
    best = []
    for _ in range(5):
        t0 = time.perf_counter_ns()
        for _ in range(N):
            fn()
        best.append((time.perf_counter_ns() - t0) / N)
    best.sort()
    return best[2]


def guard():
    with torch.cuda.device(0):
        pass


print("| call (PyTorch, from Python) | ns |\n|---|---|")
print(f"| with torch.cuda.device(0) | {ns(guard):.0f} |")
print(f"| torch.cuda.current_stream() | {ns(torch.cuda.current_stream):.0f} |")
print(f"| Event.record(s) | {ns(lambda: e.record(s)):.0f} |")
print(f"| Stream.query() | {ns(s.query):.0f} |")
