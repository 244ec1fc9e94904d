"""PyTorch's side of bench_random: the same fills (uniform_ / normal_ in
place) on 2^n elements, the median of event-timed calls. Prints CSV rows
named as bench_random's: op,ms,GB/s written,Gsamples/s.
Usage: python3 bench_random_torch.py [log2 n] [repeats]"""
import sys

from torch_timing import median_ms, torch_or_exit

torch = torch_or_exit()
lg = int(sys.argv[1]) if len(sys.argv) > 1 else 28
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 21
n = 1 << lg
print(f"# torch {torch.__version__} on {torch.cuda.get_device_name()}")
print("op,ms,GB/s written,Gsamples/s")
for name, dt, f in [("uniform f32", torch.float32, "uniform_"), ("normal f32", torch.float32, "normal_"),
                    ("uniform f16", torch.float16, "uniform_"), ("normal bf16", torch.bfloat16, "normal_"),
                    ("uniform f64", torch.float64, "uniform_"), ("normal f64", torch.float64, "normal_")]:
    x = torch.empty(n, device="cuda", dtype=dt)
    ms = median_ms(lambda: getattr(x, f)(), reps)
    print(f"{name},{ms:.4f},{n * x.element_size() / ms / 1e6:.1f},{n / ms / 1e6:.1f}")
    del x
    torch.cuda.empty_cache()
