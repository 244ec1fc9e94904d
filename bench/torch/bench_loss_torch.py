"""PyTorch's side of bench_loss: F.cross_entropy (mean) of [2048, 50257]
float32 logits measured as bench_loss measures tcuda's: the call's host time
with a 4096^3 float32 matmul queued ahead of it, a synchronize's for scale,
and the GPU time by events on an idle GPU, also over 2^20 rows of 10
classes. Prints "name value unit" rows named as bench_loss's."""
from torch_timing import host_us_behind, median_ms, row, torch_or_exit

torch = torch_or_exit()
import torch.nn.functional as F  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
ROWS, CLASSES, REPS, BIG = 2048, 50257, 15, 4096
x = torch.randn(ROWS, CLASSES, device="cuda")
t = (torch.rand(ROWS, device="cuda") * (CLASSES - 1)).long()
a = torch.randn(BIG, BIG, device="cuda")
b = torch.randn(BIG, BIG, device="cuda")
F.cross_entropy(x, t)
a @ b
torch.cuda.synchronize()
call = host_us_behind(lambda: F.cross_entropy(x, t), lambda: a @ b, REPS)
wait = host_us_behind(torch.cuda.synchronize, lambda: a @ b, REPS)
gpu = median_ms(lambda: F.cross_entropy(x, t), REPS, warmup=0) * 1e3
print(f"# torch {torch.__version__}")
row("cross_entropy host, work queued", call, "us (the call)", 34, 3)
row("synchronize host, work queued", wait, "us (a wait, for scale)", 34, 3)
row("cross_entropy GPU", gpu, "us (events, idle GPU)", 34, 3)
x2 = torch.randn(1 << 20, 10, device="cuda")
t2 = (torch.rand(1 << 20, device="cuda") * 9).long()
F.cross_entropy(x2, t2)
gpu2 = median_ms(lambda: F.cross_entropy(x2, t2), REPS, warmup=0) * 1e3
row("cross_entropy GPU, 2^20 x 10", gpu2, "us (events, idle GPU)", 34, 3)
