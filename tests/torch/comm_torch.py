#!/usr/bin/env python3
"""torch.cuda.comm's side of the comm oracle (tests/torch/comm_check.sh).

Runs a fixed list of cases through torch.cuda.comm and prints one line per
case, in the order and words of tests/torch/comm_cases.c (the same cases
through tc_comm_*):

    <name> ok <k> | <result> | <result> ...
    <name> error
    <name> skip                 (the case needs more GPUs than there are)

A result is `<device> <dtype> [<sizes>] <src|new> <sum> <wsum>`: `src` when
it shares memory with an input of the case (the input itself or a view of
it); `sum` is the sum of its values as float64 and `wsum` the sum of
(position + 1) * value in row-major order, both printed "%.17g". The values
of every input are small integers, value(i) = ((7 i + 13 seed) mod 23) - 11
at row-major position i, so every sum is exact on both sides. Lines starting
with "#" say more (an error's exception) and are not compared.

The cases use G = min(GPUs, 4) GPUs. Where None is PyTorch's word for the
current device, the C side passes TC_CURRENT_DEVICE (reduce_add) or
TC_COMM_CURRENT_DEVICE (gather). Exits 77 without torch or a GPU."""
import sys
import warnings

try:
    import torch
    import torch.cuda.comm as comm
except ImportError:
    print("SKIP comm_torch: no torch")
    sys.exit(77)

if not torch.cuda.is_available() or torch.cuda.device_count() < 1:
    print("SKIP comm_torch: no GPU")
    sys.exit(77)

warnings.simplefilter("ignore")  # gather's destination -1 is deprecated, still taken

G = min(torch.cuda.device_count(), 4)
ALL = list(range(G))
REV = ALL[::-1]
BUF = 10485760
F32, F16, I64 = torch.float32, torch.float16, torch.int64
NAMES = {F32: "float32", F16: "float16", I64: "int64"}


def T(shape, dtype=F32, dev=0, seed=1, nc=False):
    """A tensor of `shape` on `dev` (an int: cuda:dev; "cpu"), value(i) at
    row-major position i; nc: a transposed view of a 2-d tensor of the
    swapped shape (not contiguous), value(i) at the base's position i."""
    base = list(shape[::-1]) if nc else list(shape)
    n = 1
    for s in base:
        n *= s
    v = (torch.arange(n, dtype=torch.int64) * 7 + 13 * seed) % 23 - 11
    t = v.reshape(base).to(dtype).to("cpu" if dev == "cpu" else f"cuda:{dev}")
    return t.t() if nc else t


def zeros(shape, dtype=F32, dev=0):
    return torch.zeros(shape, dtype=dtype, device="cpu" if dev == "cpu" else f"cuda:{dev}")


def L(total=8):
    """Lengths that split `total` over G outputs."""
    return {1: [total], 2: [3, total - 3], 3: [1, 3, total - 4], 4: [1, 2, 2, total - 5]}[G]


def base_ptr(t):
    return t.untyped_storage().data_ptr()


def describe(t, sources):
    dev = "cpu" if t.device.type == "cpu" else f"cuda:{t.device.index}"
    p = base_ptr(t)
    alias = "src" if p != 0 and any(p == base_ptr(s) for s in sources) else "new"
    x = t.detach().to("cpu").to(torch.float64).reshape(-1)
    s = x.sum().item()
    w = (x * torch.arange(1, x.numel() + 1, dtype=torch.float64)).sum().item()
    sizes = ",".join(str(k) for k in t.shape)
    return f"{dev} {NAMES[t.dtype]} [{sizes}] {alias} {s:.17g} {w:.17g}"


CASES = []


def case(name, need=1):
    def add(fn):
        CASES.append((name, need, fn))
        return fn

    return add


def flat(results):
    out = []
    for r in results:
        if isinstance(r, (list, tuple)):
            out.extend(flat(r))
        else:
            out.append(r)
    return out


def run(name, need, fn):
    if G < need:
        print(f"{name} skip")
        return
    try:
        results, sources = fn()
        for d in range(G):
            torch.cuda.synchronize(d)
        results = flat(results if isinstance(results, (list, tuple)) else [results])
        line = f"{name} ok {len(results)}"
        for r in results:
            line += " | " + describe(r, flat(sources))
        print(line)
    except Exception as e:  # every refusal is one word here; the detail is a comment
        print(f"{name} error")
        print(f"# {name}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    finally:
        torch.cuda.set_device(0)


# ---- broadcast --------------------------------------------------------------------------

def bc(t, devices):
    return comm.broadcast(t, devices), [t]


case("broadcast.gpu_all")(lambda: bc(T([4, 6]), ALL))
case("broadcast.gpu_rev")(lambda: bc(T([4, 6]), REV))
case("broadcast.gpu_others", 2)(lambda: bc(T([4, 6]), ALL[1:]))
case("broadcast.gpu_twice")(lambda: bc(T([4, 6]), [0, 0]))
case("broadcast.gpu_other_twice", 2)(lambda: bc(T([4, 6]), [1, 1]))
case("broadcast.cpu_all")(lambda: bc(T([4, 6], dev="cpu"), ALL))
case("broadcast.cpu_twice")(lambda: bc(T([4, 6], dev="cpu"), [0, 0]))
case("broadcast.f16")(lambda: bc(T([4, 6], F16), ALL))
case("broadcast.i64")(lambda: bc(T([4, 6], I64), ALL))
case("broadcast.noncontig")(lambda: bc(T([5, 3], nc=True), ALL))
case("broadcast.noncontig_cpu")(lambda: bc(T([5, 3], dev="cpu", nc=True), ALL))
case("broadcast.from_1", 2)(lambda: bc(T([4, 6], dev=1), ALL))
case("broadcast.zero_size")(lambda: bc(T([0, 3]), ALL))
case("broadcast.empty_list")(lambda: bc(T([4, 6]), []))
case("broadcast.neg")(lambda: bc(T([4, 6]), [0, -1]))
case("broadcast.neg_cpu")(lambda: bc(T([4, 6], dev="cpu"), [-1]))
case("broadcast.missing")(lambda: bc(T([4, 6]), [0, 99]))


# ---- broadcast(out=) ----------------------------------------------------------------------

def bco(t, outs):
    return comm.broadcast(t, out=outs), [t]


case("broadcast_out.gpu")(lambda: bco(T([3, 4]), [zeros([3, 4], dev=d) for d in ALL]))
case("broadcast_out.cpu")(lambda: bco(T([3, 4], dev="cpu"), [zeros([3, 4], dev=d) for d in ALL]))
case("broadcast_out.twice", 2)(lambda: bco(T([3, 4]), [zeros([3, 4], dev=1), zeros([3, 4], dev=1)]))
case("broadcast_out.src_dev_twice")(
    lambda: bco(T([3, 4]), [zeros([3, 4], dev=0), zeros([3, 4], dev=0)]))
case("broadcast_out.f16")(lambda: bco(T([3, 4], F16), [zeros([3, 4], F16, d) for d in ALL]))
case("broadcast_out.noncontig_src")(lambda: bco(T([3, 4], nc=True), [zeros([3, 4], dev=d) for d in ALL]))
case("broadcast_out.noncontig_out", 2)(lambda: bco(T([3, 4]), [zeros([4, 3], dev=1).t()]))
case("broadcast_out.shape")(lambda: bco(T([3, 4]), [zeros([4, 3], dev=0)]))
case("broadcast_out.cpu_out")(lambda: bco(T([3, 4]), [zeros([3, 4], dev="cpu")]))
case("broadcast_out.dtype", 2)(lambda: bco(T([3, 4]), [zeros([3, 4], F16, 1)]))
case("broadcast_out.empty")(lambda: bco(T([3, 4]), []))


# ---- broadcast_coalesced ------------------------------------------------------------------

def S(dev):
    """Five tensors of three dtypes; the float32 ones not all adjacent."""
    return [T([3, 4], F32, dev, 1), T([5], F32, dev, 2), T([2, 3], I64, dev, 3),
            T([7], F16, dev, 4), T([2, 2], F32, dev, 5)]


def S2(dev):
    """Four tensors, those of one dtype adjacent."""
    return [T([3, 4], F32, dev, 1), T([5], F32, dev, 2), T([2, 3], I64, dev, 3),
            T([7], F16, dev, 4)]


def bcoal(ts, devices, buffer_size=BUF):
    return comm.broadcast_coalesced(ts, devices, buffer_size), ts


case("bcoal.gpu")(lambda: bcoal(S(0), ALL))
case("bcoal.small_buffer")(lambda: bcoal(S(0), ALL, 16))
case("bcoal.buffer0")(lambda: bcoal(S(0), ALL, 0))
case("bcoal.twice")(lambda: bcoal(S2(0), [0] + ALL))
case("bcoal.cpu")(lambda: bcoal(S("cpu"), ALL))
case("bcoal.not_first", 2)(lambda: bcoal(S(0), [1, 0]))
case("bcoal.neg")(lambda: bcoal(S(0), [0, -1]))
case("bcoal.noncontig")(lambda: bcoal([T([3, 4], nc=True), T([5], seed=2)], ALL))
case("bcoal.from_1", 2)(lambda: bcoal(S(1), [1, 0]))


# ---- reduce_add ---------------------------------------------------------------------------

def ra(ins, destination=None, current=0):
    torch.cuda.set_device(current)
    return comm.reduce_add(ins, destination), ins


def per_dev(shape, dtype=F32, devs=None, nc=False):
    return [T(shape, dtype, d, 10 + i, nc) for i, d in enumerate(ALL if devs is None else devs)]


case("reduce_add.all")(lambda: ra(per_dev([4, 5]), 0))
case("reduce_add.dest_last", 2)(lambda: ra(per_dev([4, 5]), G - 1))
case("reduce_add.current", 2)(lambda: ra(per_dev([4, 5]), None, 1))
case("reduce_add.one")(lambda: ra([T([4, 5])], 0))
case("reduce_add.twice")(lambda: ra(per_dev([4, 5], devs=[0] + ALL), 0))
case("reduce_add.f16")(lambda: ra(per_dev([4, 5], F16), 0))
case("reduce_add.i64")(lambda: ra(per_dev([4, 5], I64), 0))
case("reduce_add.noncontig")(lambda: ra(per_dev([4, 5], nc=True), 0))
case("reduce_add.shape", 2)(lambda: ra([T([4, 5], dev=0), T([5, 4], dev=1)], 0))
case("reduce_add.dtype", 2)(lambda: ra([T([4, 5], F32, 0), T([4, 5], F16, 1)], 0))
case("reduce_add.cpu")(lambda: ra([T([4, 5], dev="cpu")], 0))
case("reduce_add.neg")(lambda: ra(per_dev([4, 5]), -3))
case("reduce_add.missing")(lambda: ra(per_dev([4, 5]), 99))
case("reduce_add.dest_not_input", 3)(lambda: ra(per_dev([4, 5], devs=[0, 1]), 2))


# ---- reduce_add_coalesced -----------------------------------------------------------------

def R(dev, k):
    return [T([3, 4], F32, dev, k), T([5], F32, dev, k + 1), T([2, 3], I64, dev, k + 2),
            T([4], F16, dev, k + 3)]


def rcoal(rows, destination=None, buffer_size=BUF, current=0):
    torch.cuda.set_device(current)
    return comm.reduce_add_coalesced(rows, destination, buffer_size), rows


case("rcoal.all")(lambda: rcoal([R(d, 10 * d) for d in ALL], 0))
case("rcoal.dest_last", 2)(lambda: rcoal([R(d, 10 * d) for d in ALL], G - 1))
case("rcoal.small_buffer")(lambda: rcoal([R(d, 10 * d) for d in ALL], 0, 16))
case("rcoal.one_row")(lambda: rcoal([R(0, 1)], 0))
case("rcoal.current", 2)(lambda: rcoal([R(d, 10 * d) for d in ALL], None, BUF, 1))
case("rcoal.twice")(lambda: rcoal([R(0, 1), R(0, 5)], 0))
case("rcoal.neg")(lambda: rcoal([R(d, 10 * d) for d in ALL], -3))
case("rcoal.cpu")(lambda: rcoal([R("cpu", 1)], 0))
case("rcoal.dest_not_input", 3)(lambda: rcoal([R(0, 1), R(1, 5)], 2))


# ---- scatter ------------------------------------------------------------------------------

def sc(t, devices, chunk_sizes=None, dim=0, streams=None):
    return comm.scatter(t, devices, chunk_sizes, dim, streams), [t]


def stream(d):
    return torch.cuda.Stream(device=d)


def sizes10():
    return [i + 1 for i in range(G - 1)] + [10 - sum(range(1, G))]


case("scatter.gpu")(lambda: sc(T([8, 3]), ALL))
case("scatter.gpu_dim1")(lambda: sc(T([3, 8]), ALL, dim=1))
case("scatter.gpu_dimneg")(lambda: sc(T([3, 8]), ALL, dim=-1))
case("scatter.cpu")(lambda: sc(T([8, 3], dev="cpu"), ALL))
case("scatter.chunks")(lambda: sc(T([10, 3]), ALL, sizes10()))
case("scatter.zero_chunk")(lambda: sc(T([8, 3]), ALL + [0], [0] * G + [8]))
case("scatter.zero_chunk_cpu")(lambda: sc(T([8, 3], dev="cpu"), ALL + [0], [0] * G + [8]))
case("scatter.twice", 2)(lambda: sc(T([8, 3]), [1, 1]))
case("scatter.src_twice")(lambda: sc(T([8, 3]), [0, 0]))
case("scatter.small")(lambda: sc(T([3, 2]), ALL))
case("scatter.empty_dim")(lambda: sc(T([0, 3]), ALL))
case("scatter.f16")(lambda: sc(T([8, 3], F16), ALL))
case("scatter.i64")(lambda: sc(T([8, 3], I64, "cpu"), ALL))
case("scatter.noncontig")(lambda: sc(T([6, 4], nc=True), ALL))
case("scatter.noncontig_cpu")(lambda: sc(T([6, 4], dev="cpu", nc=True), ALL, dim=1))
case("scatter.neg")(lambda: sc(T([8, 3]), [0, -1]))
case("scatter.neg_cpu")(lambda: sc(T([8, 3], dev="cpu"), [0, -1]))
case("scatter.sum")(lambda: sc(T([8, 3]), [0, 0], [3, 4]))
case("scatter.neg_size")(lambda: sc(T([8, 3]), [0, 0], [-1, 9]))
case("scatter.scalar")(lambda: sc(T([]), [0]))
case("scatter.dim_oob")(lambda: sc(T([8, 3]), ALL, dim=2))
case("scatter.missing")(lambda: sc(T([8, 3]), [0, 99]))
case("scatter.unused_missing")(lambda: sc(T([1, 3]), [0, 99]))
case("scatter.streams", 2)(lambda: sc(T([8, 3]), ALL, streams=[stream(d) for d in ALL]))
case("scatter.stream_mismatch", 2)(lambda: sc(T([8, 3]), [0, 1], streams=[None, stream(0)]))
case("scatter.stream_local", 2)(lambda: sc(T([8, 3]), [0, 1], streams=[stream(1), None]))


# ---- scatter(out=) ------------------------------------------------------------------------

def sco(t, outs, dim=0, streams=None):
    return comm.scatter(t, dim=dim, streams=streams, out=outs), [t]


def outs_rows(lengths, devs, dtype=F32, cols=3, nc=False):
    if nc:
        return [zeros([cols, k], dtype, d).t() for k, d in zip(lengths, devs)]
    return [zeros([k, cols], dtype, d) for k, d in zip(lengths, devs)]


case("scatter_out.gpu")(lambda: sco(T([8, 3]), outs_rows(L(), ALL)))
case("scatter_out.cpu")(lambda: sco(T([8, 3], dev="cpu"), outs_rows(L(), ALL)))
case("scatter_out.dim1")(lambda: sco(T([3, 8]), [zeros([3, k], dev=d) for k, d in zip(L(), ALL)], 1))
case("scatter_out.dimneg")(
    lambda: sco(T([3, 8]), [zeros([3, k], dev=d) for k, d in zip(L(), ALL)], -1))
case("scatter_out.zero")(lambda: sco(T([8, 3]), outs_rows([0] + L(), [0] + ALL)))
case("scatter_out.twice", 2)(lambda: sco(T([8, 3]), outs_rows([3, 5], [1, 1])))
case("scatter_out.dtype")(lambda: sco(T([8, 3]), outs_rows(L(), ALL, F16)))
case("scatter_out.i64")(lambda: sco(T([8, 3], I64), outs_rows(L(), ALL, I64)))
case("scatter_out.noncontig_src")(lambda: sco(T([8, 3], nc=True), outs_rows(L(), ALL)))
case("scatter_out.noncontig_out")(lambda: sco(T([8, 3]), outs_rows(L(), ALL, nc=True)))
case("scatter_out.sum")(lambda: sco(T([8, 3]), outs_rows(L()[:-1] + [L()[-1] + 1], ALL)))
case("scatter_out.other_dim")(lambda: sco(T([8, 3]), outs_rows(L(), ALL, cols=4)))
case("scatter_out.ndim")(lambda: sco(T([8, 3]), [zeros([24], dev=0)]))
case("scatter_out.cpu_out")(lambda: sco(T([8, 3]), outs_rows([8], ["cpu"])))
case("scatter_out.empty")(lambda: sco(T([8, 3]), []))
case("scatter_out.streams", 2)(
    lambda: sco(T([8, 3]), outs_rows(L(), ALL), streams=[stream(d) for d in ALL]))
case("scatter_out.stream_mismatch", 2)(
    lambda: sco(T([8, 3]), outs_rows([3, 5], [0, 1]), streams=[stream(1), None]))


# ---- gather -------------------------------------------------------------------------------

def ga(ins, dim=0, destination=None, current=0):
    torch.cuda.set_device(current)
    return comm.gather(ins, dim, destination), ins


def pieces(dim=0, dtype=F32, devs=None, nc=False):
    devs = ALL if devs is None else devs
    return [T([i + 1, 3] if dim == 0 else [3, i + 1], dtype, d, 20 + i, nc)
            for i, d in enumerate(devs)]


case("gather.gpu")(lambda: ga(pieces(), 0, 0))
case("gather.dim1")(lambda: ga(pieces(1), 1, 0))
case("gather.dimneg")(lambda: ga(pieces(1), -1, 0))
case("gather.cpu")(lambda: ga(pieces(), 0, -1))
case("gather.current", 2)(lambda: ga(pieces(), 0, None, 1))
case("gather.dest_last", 2)(lambda: ga(pieces(), 0, G - 1))
case("gather.twice")(lambda: ga(pieces(devs=[0] + ALL), 0, 0))
case("gather.dtype")(lambda: ga([T([2, 3], F32, 0, 1), T([3, 3], I64, G - 1, 2)], 0, 0))
case("gather.f16")(lambda: ga(pieces(dtype=F16), 0, 0))
case("gather.i64")(lambda: ga(pieces(dtype=I64), 0, -1))
case("gather.noncontig")(lambda: ga(pieces(1, nc=True), 1, 0))
case("gather.zero")(lambda: ga([T([0, 3]), T([2, 3], dev=G - 1)], 0, 0))
case("gather.shape")(lambda: ga([T([2, 3]), T([2, 4])], 0, 0))
case("gather.ndim")(lambda: ga([T([2, 3]), T([6])], 0, 0))
case("gather.cpu_in")(lambda: ga([T([2, 3], dev="cpu")], 0, 0))
case("gather.neg")(lambda: ga(pieces(), 0, -3))
case("gather.missing")(lambda: ga(pieces(), 0, 99))
case("gather.empty")(lambda: ga([], 0, 0))


# ---- gather(out=) -------------------------------------------------------------------------

def gao(ins, out, dim=0):
    return comm.gather(ins, dim, out=out), ins


def total():
    return sum(range(1, G + 1))


case("gather_out.gpu")(lambda: gao(pieces(), zeros([total(), 3], dev=0)))
case("gather_out.cpu")(lambda: gao(pieces(), zeros([total(), 3], dev="cpu")))
case("gather_out.last", 2)(lambda: gao(pieces(), zeros([total(), 3], dev=G - 1)))
case("gather_out.dim1")(lambda: gao(pieces(1), zeros([3, total()], dev=0), 1))
case("gather_out.dtype")(lambda: gao(pieces(), zeros([total(), 3], F16, 0)))
case("gather_out.noncontig_out")(lambda: gao(pieces(), zeros([3, total()], dev=0).t()))
case("gather_out.shape")(lambda: gao(pieces(), zeros([total() + 1, 3], dev=0)))
case("gather_out.empty")(lambda: gao([], zeros([1, 3], dev=0)))


def main():
    print(f"# torch {torch.__version__}, {G} GPUs used of {torch.cuda.device_count()}")
    for name, need, fn in CASES:
        run(name, need, fn)


if __name__ == "__main__":
    main()
