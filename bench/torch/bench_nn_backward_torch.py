"""PyTorch's side of bench_nn_backward: the same backward ops at GPT-2
small's training shapes, in the same dtypes, through PyTorch's own backward
kernels, eager: the ATen backward op alone where it is one op
(aten.gelu_backward, _softmax_backward_data, _log_softmax_backward_data,
native_layer_norm_backward, embedding_dense_backward,
native_dropout_backward; mm and sum for linear's gradients, as autograd's
AddmmBackward), else torch.autograd.grad of a graph built once outside the
timing (cross_entropy's backward; scaled_dot_product_attention's, with
PyTorch's own choice of kernel and then its math path), and
F.cross_entropy's forward with its backward for the fused row. Each row: the
median of event-timed calls, and the call's host time with a 4096^3 float32
matmul queued ahead (the median of 15), as bench_nn_backward.c measures
tcuda's; the rate counts the same bytes or flops. With COMPILE 1, also the
time of the memory-bound ops through torch.compile (Inductor's kernels; the
cross_entropy rows compile the forward, AOTAutograd its backward).
Prints CSV: op,dtype,shape,us,rate,unit,host_us,compile_us,what.
Usage: python3 bench_nn_backward_torch.py [repeats] [COMPILE: 0 or 1]"""
import sys

from torch_timing import host_us_behind, median_ms, torch_or_exit

reps = int(sys.argv[1]) if len(sys.argv) > 1 else 51
compile_on = len(sys.argv) > 2 and sys.argv[2] == "1"
torch = torch_or_exit()
import torch.nn.functional as F  # noqa: E402

aten = torch.ops.aten
torch.backends.cuda.matmul.allow_tf32 = False
B, T, C, V, H, HD = 8, 1024, 768, 50257, 12, 64
ROWS, C4, P_DROP = B * T, 4 * C, 0.1
HOST_REPS, QUEUE = 15, 4096
qa = torch.randn(QUEUE, QUEUE, device="cuda")
qb = torch.randn(QUEUE, QUEUE, device="cuda")


def queue():
    qa @ qb


def randn(*size, dt):
    return torch.randn(*size, device="cuda", dtype=dt)


def warm(fn, what):
    """fn after one call (where torch.compile compiles), or None when that
    call failed (a "#" line says why)."""
    try:
        fn()
        return fn
    except Exception as e:  # noqa: BLE001
        first = (str(e).splitlines() or [""])[0][:160]
        print(f"# torch.compile of {what} failed: {type(e).__name__}: {first}")
        return None


def compiled(fn, what):
    """fn through torch.compile, compiled, or None when COMPILE is off or
    compiling failed."""
    return warm(torch.compile(fn), what) if compile_on else None


def row(op, dt, shape, fn, what, nbytes=0, flops=0, comp=None):
    """One CSV row: fn's GPU time and rate, its host time behind the queue,
    and comp's GPU time when there is one."""
    ms = median_ms(fn, reps)
    host = host_us_behind(fn, queue, HOST_REPS)
    rate, unit = (nbytes / ms / 1e6, "GB/s") if nbytes else (flops / ms / 1e9, "TFLOP/s")
    cus = f"{median_ms(comp, reps) * 1e3:.2f}" if comp is not None else ""
    name = str(dt).replace("torch.", "")
    print(f"{op},{name},{shape},{ms * 1e3:.2f},{rate:.1f},{unit},{host:.1f},{cus},{what}",
          flush=True)


def gelu(dt):
    g, x = randn(ROWS, C4, dt=dt), randn(ROWS, C4, dt=dt)
    nbytes = 3 * ROWS * C4 * g.element_size()
    for approx in ("tanh", "none"):
        def fn(a=approx):
            return aten.gelu_backward(g, x, approximate=a)
        row(f"gelu_backward {approx}", dt, f"{ROWS}x{C4}", fn, "aten.gelu_backward", nbytes,
            comp=compiled(fn, "gelu_backward"))


def softmax(dt):
    s = (B * H * T, T)
    g, y = randn(*s, dt=dt), torch.softmax(randn(*s, dt=dt), -1)

    def fn():
        return aten._softmax_backward_data(g, y, -1, dt)
    row("softmax_backward", dt, f"{s[0]}x{s[1]}", fn, "aten._softmax_backward_data",
        3 * s[0] * s[1] * g.element_size(), comp=compiled(fn, "softmax_backward"))
    del g, y
    g, y = randn(ROWS, V, dt=dt), torch.log_softmax(randn(ROWS, V, dt=dt), -1)

    def fn2():
        return aten._log_softmax_backward_data(g, y, -1, dt)
    row("log_softmax_backward", dt, f"{ROWS}x{V}", fn2, "aten._log_softmax_backward_data",
        3 * ROWS * V * g.element_size(), comp=compiled(fn2, "log_softmax_backward"))


def layer_norm(dt):
    g, x = randn(ROWS, C, dt=dt), randn(ROWS, C, dt=dt)
    w, b = randn(C, dt=dt), randn(C, dt=dt)
    _, mean, rstd = aten.native_layer_norm(x, [C], w, b, 1e-5)

    def fn():
        return aten.native_layer_norm_backward(g, x, [C], mean, rstd, w, b, [True, True, True])
    es = g.element_size()
    row("layer_norm_backward", dt, f"{ROWS}x{C}", fn, "aten.native_layer_norm_backward",
        3 * ROWS * C * es + 2 * ROWS * 4 + 3 * C * es, comp=compiled(fn, "layer_norm_backward"))


def cross_entropy(dt):
    x = randn(ROWS, V, dt=dt).requires_grad_()
    t = torch.randint(0, V, (ROWS,), device="cuda")
    nbytes = 2 * ROWS * V * x.element_size() + 8 * ROWS

    def loss(logits):
        return F.cross_entropy(logits, t)
    closs = torch.compile(loss) if compile_on else None

    def fused():
        return torch.autograd.grad(loss(x), x)
    comp = warm(lambda: torch.autograd.grad(closs(x), x), "cross_entropy") if closs else None
    row("cross_entropy_fused", dt, f"{ROWS}x{V}", fused,
        "F.cross_entropy + autograd.grad", nbytes, comp=comp)
    saved = loss(x)

    def backward():
        return torch.autograd.grad(saved, x, retain_graph=True)
    comp = None
    if closs and warm(lambda: closs(x), "cross_entropy"):
        csaved = closs(x)
        comp = warm(lambda: torch.autograd.grad(csaved, x, retain_graph=True), "cross_entropy")
    row("cross_entropy_backward", dt, f"{ROWS}x{V}", backward,
        "autograd.grad of F.cross_entropy (nll_loss and log_softmax backward)", nbytes, comp=comp)
    if dt != torch.float32:  # logits in rows padded to whole 16-byte vectors
        vp = (V + 7) // 8 * 8
        xp = randn(ROWS, vp, dt=dt).requires_grad_()[:, :V]
        row("cross_entropy_fused", dt, f"{ROWS}x{V} rows {vp}",
            lambda: torch.autograd.grad(loss(xp), xp), "F.cross_entropy + autograd.grad", nbytes)


def embedding(dt):
    g = randn(B, T, C, dt=dt)
    idx = torch.randint(0, V, (B, T), device="cuda")
    es = g.element_size()
    read = ROWS * C * es + 8 * ROWS

    def fn():
        return aten.embedding_dense_backward(g, idx, V, -1, False)
    row("embedding_backward", dt, f"{B}x{T}x{C}->{V}", fn, "aten.embedding_dense_backward",
        read + V * C * es)
    gw = torch.zeros(V, C, device="cuda", dtype=dt)
    row("embedding_backward_ into", dt, f"{B}x{T}x{C}->{V}", lambda: gw.add_(fn()),
        "aten.embedding_dense_backward + add_ (AccumulateGrad)", read + 2 * ROWS * C * es)


LINEARS = ((C, 3 * C, True), (C, C, True), (C, C4, True), (C4, C, True), (C, V, False))


def linear(dt):
    for i, o, bias in LINEARS:
        g, x, w = randn(ROWS, o, dt=dt), randn(ROWS, i, dt=dt), randn(o, i, dt=dt)
        shape, flops = f"{ROWS}x{i}->{o}", 2 * ROWS * i * o
        row("linear_backward dx", dt, shape, lambda: torch.mm(g, w), "mm", flops=flops)
        if bias:
            row("linear_backward dw+db", dt, shape, lambda: (torch.mm(g.t(), x), g.sum(0)),
                "mm + sum", flops=flops)
        else:
            row("linear_backward dw", dt, shape, lambda: torch.mm(g.t(), x), "mm", flops=flops)
        if dt == torch.float32:
            gw, gb = torch.zeros(o, i, device="cuda"), torch.zeros(o, device="cuda")
            if bias:
                row("linear_backward_into dw+db", dt, shape,
                    lambda: (gw.addmm_(g.t(), x), gb.add_(g.sum(0))), "addmm_ + sum + add_",
                    flops=flops)
            else:
                row("linear_backward_into dw", dt, shape, lambda: gw.addmm_(g.t(), x), "addmm_",
                    flops=flops)
        if dt != torch.float32 and o % 8:
            # the gradient in rows padded to whole 16-byte vectors, as
            # torch.compile pads it and tcuda's cross entropy returns it
            op = (o + 7) // 8 * 8
            gp = randn(ROWS, op, dt=dt)[:, :o]
            shape = f"{ROWS}x{i}->{o} rows {op}"
            row("linear_backward dx", dt, shape, lambda: torch.mm(gp, w), "mm", flops=flops)
            row("linear_backward dw", dt, shape, lambda: torch.mm(gp.t(), x), "mm", flops=flops)
            del gp
        del g, x, w


def dropout(dt):
    g, x = randn(ROWS, C, dt=dt), randn(ROWS, C, dt=dt)
    _, mask = aten.native_dropout(x, P_DROP, True)

    def fn():
        return aten.native_dropout_backward(g, mask, 1.0 / (1.0 - P_DROP))
    row("dropout_backward", dt, f"{ROWS}x{C}", fn, "aten.native_dropout_backward",
        ROWS * C * (2 * g.element_size() + 1), comp=compiled(fn, "dropout_backward"))


def attention(dt):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    p = randn(B, T, 3 * C, dt=dt).requires_grad_()
    q, k, v = (s.view(B, T, H, HD).transpose(1, 2) for s in p.split(C, 2))
    go = randn(B, T, H, HD, dt=dt).transpose(1, 2)
    flops = 5.0 * 2.0 * B * H * T * T * HD / 2
    shape = f"{B}x{H}x{T}x{HD} causal"
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    row("sdpa_backward_lse", dt, shape,
        lambda: torch.autograd.grad(out, (q, k, v), go, retain_graph=True),
        "autograd.grad of F.scaled_dot_product_attention (its choice of kernel)", flops=flops)
    del out
    with sdpa_kernel(SDPBackend.MATH):
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    row("sdpa_backward_lse math", dt, shape,
        lambda: torch.autograd.grad(out, (q, k, v), go, retain_graph=True),
        "autograd.grad of the math path (SDPBackend.MATH)", flops=flops)


queue()  # warm-up: cuBLAS's handle and workspace
torch.cuda.synchronize()
print(f"# torch {torch.__version__}")
print("op,dtype,shape,us,rate,unit,host_us,compile_us,what")
print(f"synchronize,-,-,,,,{host_us_behind(torch.cuda.synchronize, queue, HOST_REPS):.1f},,")
for dt in (torch.float32, torch.bfloat16):
    for f in (gelu, softmax, layer_norm, cross_entropy, embedding, dropout):
        f(dt)
        torch.cuda.empty_cache()
for dt in (torch.float32, torch.float16, torch.bfloat16):
    linear(dt)
    attention(dt)
    torch.cuda.empty_cache()
