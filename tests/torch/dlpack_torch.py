#!/usr/bin/env python3
"""DLPack between tcuda and PyTorch, both ways, on a GPU.

Runs on the GPU machine against a CUDA build's libtcuda.so (ctypes; no
compiled glue):

    python3 tests/torch/dlpack_torch.py [path/to/libtcuda.so]   # or TCUDA_LIB=...

(scripts/gpu.sh full runs it.)

1. tcuda -> torch: a CUDA tensor made by tcuda is handed to torch.from_dlpack
   through an object with __dlpack__ / __dlpack_device__ (so torch passes its
   stream and max_version, and tcuda does the stream handshake), and as bare
   capsules ("dltensor", and "dltensor_versioned" where this torch takes it).
   The torch tensor must have tcuda's data pointer and values, and a write in
   torch must be seen by tcuda (shared memory). Once both sides let go,
   tcuda's allocated bytes must be back where they started (the deleter ran).
2. torch -> tcuda: a strided torch view's __dlpack__(stream=...) capsule goes
   to tc_tensor_from_dlpack; the capsule is renamed "used_..." as the
   protocol asks. Same pointer, strides and values; a write by tcuda is seen
   by torch; releasing the tcuda tensor calls torch's deleter.

Prints one line, "PASS dlpack_torch" or "FAIL dlpack_torch: ...", and exits
0 / 1 (77 with "SKIP" when torch or a GPU is missing)."""
import ctypes
import gc
import os
import sys

try:
    import torch
except ImportError:
    print("SKIP dlpack_torch: no torch")
    sys.exit(77)

# ---- the tcuda ABI (include/tcuda/dlpack.h, tensor.h, stream.h) -----------------------
TC_CPU, TC_CUDA = 0, 1
TC_FLOAT32 = 8
TC_DL_CUDA = 2


class Device(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("index", ctypes.c_int)]


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensor(ctypes.Structure):
    pass


DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))),
]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


DLManagedTensorVersioned._fields_ = [
    ("version", DLPackVersion),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))),
    ("flags", ctypes.c_uint64),
    ("dl_tensor", DLTensor),
]

assert ctypes.sizeof(DLTensor) == 48 and ctypes.sizeof(DLManagedTensor) == 64
assert ctypes.sizeof(DLManagedTensorVersioned) == 80


def load_tcuda():
    path = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("TCUDA_LIB", "build/libtcuda.so")
    lib = ctypes.CDLL(path)
    vp, i32, i64p = ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_int64)
    sigs = {
        "tc_last_error": (ctypes.c_char_p, []),
        "tc_is_available": (ctypes.c_bool, []),
        "tc_synchronize": (i32, [i32]),
        "tc_memory_allocated": (i32, [i32, ctypes.POINTER(ctypes.c_size_t)]),
        "tc_empty_cache": (i32, []),
        "tc_tensor_from_data": (i32, [vp, i32, i64p, i32, Device, ctypes.POINTER(vp)]),
        "tc_tensor_ones": (i32, [i32, i64p, i32, Device, ctypes.POINTER(vp)]),
        "tc_tensor_copy_": (i32, [vp, vp, ctypes.c_bool]),
        "tc_tensor_release": (i32, [vp]),
        "tc_tensor_data_ptr": (vp, [vp]),
        "tc_tensor_ndim": (i32, [vp]),
        "tc_tensor_size": (ctypes.c_int64, [vp, i32]),
        "tc_tensor_stride": (ctypes.c_int64, [vp, i32]),
        "tc_tensor_to_host": (i32, [vp, i32, vp]),
        "tc_stream_create_external": (i32, [vp, i32, ctypes.POINTER(vp)]),
        "tc_stream_destroy": (i32, [vp]),
        "tc_default_stream": (i32, [i32, ctypes.POINTER(vp)]),
        "tc_current_stream": (i32, [i32, ctypes.POINTER(vp)]),
        "tc_stream_cuda_handle": (vp, [vp]),
        "tc_tensor_to_dlpack": (i32, [vp, vp, ctypes.POINTER(ctypes.POINTER(DLManagedTensorVersioned))]),
        "tc_tensor_to_dlpack_unversioned": (i32, [vp, vp, ctypes.POINTER(ctypes.POINTER(DLManagedTensor))]),
        "tc_tensor_from_dlpack": (i32, [vp, ctypes.POINTER(vp)]),
        "tc_tensor_from_dlpack_unversioned": (i32, [vp, ctypes.POINTER(vp)]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    return lib


tc = None
failures = []


def ok(status, what):
    if status != 0:
        raise RuntimeError(f"{what}: status {status}: {tc.tc_last_error().decode()}")


def allocated(dev):
    """tc_memory_allocated's bytes of device dev."""
    n = ctypes.c_size_t()
    ok(tc.tc_memory_allocated(dev, ctypes.byref(n)), "tc_memory_allocated")
    return n.value


def stream_of(getter, dev):
    """The stream tc_default_stream or tc_current_stream gives for dev."""
    s = ctypes.c_void_p()
    ok(getter(dev, ctypes.byref(s)), getter.__name__)
    return s


def check(cond, what):
    if not cond:
        failures.append(what)


# ---- PyCapsules over tcuda's managed tensors ----------------------------------------------
# A capsule keeps the char* of its name, not a copy: the names live here, at module level.
NAME_V = b"dltensor_versioned"
NAME_U = b"dltensor"
USED_V = b"used_dltensor_versioned"
USED_U = b"used_dltensor"

Destructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_api = ctypes.pythonapi
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, Destructor)(
    ("PyCapsule_New", _api))
_is_valid_raw = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", _api))
_get_pointer_raw = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api))
_get_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(("PyCapsule_GetName", _api))
_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api))
_set_name = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_SetName", _api))


# A capsule nobody consumed still has its first name: its destructor calls the deleter.
# A consumer renames it "used_..." and takes over the deleter.
@Destructor
def _destroy_versioned(capsule):
    if _is_valid_raw(capsule, NAME_V):
        m = ctypes.cast(_get_pointer_raw(capsule, NAME_V), ctypes.POINTER(DLManagedTensorVersioned))
        if m.contents.deleter:
            m.contents.deleter(m)


@Destructor
def _destroy_unversioned(capsule):
    if _is_valid_raw(capsule, NAME_U):
        m = ctypes.cast(_get_pointer_raw(capsule, NAME_U), ctypes.POINTER(DLManagedTensor))
        if m.contents.deleter:
            m.contents.deleter(m)


def tc_stream_for(stream, device):
    """DLPack's stream argument as a tc_stream the export makes wait; (stream,
    owned). None and 1 are the legacy default stream, 2 the per-thread one,
    -1 asks for no synchronization (NULL: tcuda's current stream)."""
    if stream == -1:
        return None, False
    if stream is None or stream == 1:
        return stream_of(tc.tc_default_stream, device), False
    s = ctypes.c_void_p()
    ok(tc.tc_stream_create_external(ctypes.c_void_p(stream), device, ctypes.byref(s)),
       "tc_stream_create_external")
    return s, True


def export_capsule(t, device, stream=-1, versioned=True):
    s, owned = tc_stream_for(stream, device)
    try:
        if versioned:
            m = ctypes.POINTER(DLManagedTensorVersioned)()
            ok(tc.tc_tensor_to_dlpack(t, s, ctypes.byref(m)), "tc_tensor_to_dlpack")
            return _capsule_new(ctypes.cast(m, ctypes.c_void_p), NAME_V, _destroy_versioned)
        m = ctypes.POINTER(DLManagedTensor)()
        ok(tc.tc_tensor_to_dlpack_unversioned(t, s, ctypes.byref(m)),
           "tc_tensor_to_dlpack_unversioned")
        return _capsule_new(ctypes.cast(m, ctypes.c_void_p), NAME_U, _destroy_unversioned)
    finally:
        if owned:
            tc.tc_stream_destroy(s)


class TcudaArray:
    """A tcuda tensor as the DLPack Python protocol sees it."""

    def __init__(self, t, device):
        self.t, self.device = t, device

    def __dlpack_device__(self):
        return (TC_DL_CUDA, self.device)

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        if copy:
            raise BufferError("tcuda exports without copies")
        versioned = max_version is not None and max_version[0] >= 1
        return export_capsule(self.t, self.device, stream, versioned)


# ---- the checks ------------------------------------------------------------------------------
def tc_values(t, n):
    buf = (ctypes.c_float * n)()
    ok(tc.tc_tensor_to_host(t, TC_FLOAT32, buf), "tc_tensor_to_host")
    return list(buf)


def tcuda_tensor(values, shape, device):
    data = (ctypes.c_float * len(values))(*values)
    sizes = (ctypes.c_int64 * len(shape))(*shape)
    t = ctypes.c_void_p()
    ok(tc.tc_tensor_from_data(data, len(shape), sizes, TC_FLOAT32, Device(TC_CUDA, device),
                              ctypes.byref(t)), "tc_tensor_from_data")
    return t


def tcuda_to_torch(dev):
    base = allocated(dev)
    vals = [0.5 * i for i in range(12)]
    want = torch.arange(12, dtype=torch.float32, device=f"cuda:{dev}").reshape(3, 4) * 0.5
    t = tcuda_tensor(vals, (3, 4), dev)
    ptr = tc.tc_tensor_data_ptr(t)

    # Through the protocol: torch passes its stream and max_version.
    x = torch.from_dlpack(TcudaArray(t, dev))
    check(x.device == torch.device(f"cuda:{dev}"), f"protocol: device {x.device}")
    check(x.data_ptr() == ptr, "protocol: torch's data_ptr is not tcuda's")
    check(x.shape == (3, 4) and x.stride() == (4, 1), f"protocol: shape {x.shape} {x.stride()}")
    check(torch.equal(x, want), "protocol: values differ")
    x.add_(1)  # on torch's current stream
    torch.cuda.synchronize(dev)
    check(tc_values(t, 12) == [v + 1 for v in vals], "protocol: torch's write not seen by tcuda")

    # Bare capsules, consumed by torch.from_dlpack (torch renames them "used_...").
    y = torch.from_dlpack(export_capsule(t, dev, versioned=False))
    check(y.data_ptr() == ptr and torch.equal(y, want + 1), "capsule 'dltensor': pointer or values")
    try:
        z = torch.from_dlpack(export_capsule(t, dev, versioned=True))
        check(z.data_ptr() == ptr and torch.equal(z, want + 1),
              "capsule 'dltensor_versioned': pointer or values")
        del z
    except Exception as e:  # older torch takes only "dltensor" capsules
        print(f"note: this torch ({torch.__version__}) refuses a bare versioned capsule: {e}")

    # An export nobody consumes: its capsule's destructor calls the deleter.
    unused = export_capsule(t, dev, versioned=True)
    del unused

    tc.tc_tensor_release(t)
    check(torch.equal(x, want + 1), "torch's tensor changed when tcuda released its own")
    del x, y
    gc.collect()
    torch.cuda.synchronize(dev)
    ok(tc.tc_empty_cache(), "tc_empty_cache")  # blocks freed with stream uses settle here
    check(allocated(dev) == base,
          f"tcuda still holds {allocated(dev) - base} bytes: a deleter did not run")


def torch_to_tcuda(dev):
    full = torch.arange(20, dtype=torch.float32, device=f"cuda:{dev}").reshape(4, 5)
    y = full[:, 1:4]  # strided: strides (5, 1), offset 1
    handle = tc.tc_stream_cuda_handle(stream_of(tc.tc_current_stream, dev))
    stream = handle if handle else 1  # tcuda's current stream; the legacy one is 1
    try:
        cap = y.__dlpack__(stream=stream, max_version=(1, 1))
    except TypeError:  # a torch without DLPack 1.x
        cap = y.__dlpack__(stream=stream)
    name = _get_name(cap)
    ptr = _get_pointer(cap, name)
    t = ctypes.c_void_p()
    if name == NAME_V:
        ok(tc.tc_tensor_from_dlpack(ctypes.c_void_p(ptr), ctypes.byref(t)), "tc_tensor_from_dlpack")
        _set_name(cap, USED_V)
    elif name == NAME_U:
        ok(tc.tc_tensor_from_dlpack_unversioned(ctypes.c_void_p(ptr), ctypes.byref(t)),
           "tc_tensor_from_dlpack_unversioned")
        _set_name(cap, USED_U)
    else:
        raise RuntimeError(f"unknown capsule name {name}")
    del cap  # renamed: its destructor leaves the deleter to tcuda
    print(f"torch -> tcuda through a '{name.decode()}' capsule")
    check(tc.tc_tensor_data_ptr(t) == y.data_ptr(), "torch->tcuda: data pointer differs")
    check(tc.tc_tensor_ndim(t) == 2 and tc.tc_tensor_size(t, 0) == 4 and tc.tc_tensor_size(t, 1) == 3,
          "torch->tcuda: shape")
    check(tc.tc_tensor_stride(t, 0) == 5 and tc.tc_tensor_stride(t, 1) == 1, "torch->tcuda: strides")
    check(tc_values(t, 12) == y.cpu().flatten().tolist(), "torch->tcuda: values differ")
    ones = ctypes.c_void_p()
    sizes = (ctypes.c_int64 * 2)(4, 3)
    ok(tc.tc_tensor_ones(2, sizes, TC_FLOAT32, Device(TC_CUDA, dev), ctypes.byref(ones)),
       "tc_tensor_ones")
    ok(tc.tc_tensor_copy_(t, ones, False), "tc_tensor_copy_")
    ok(tc.tc_synchronize(dev), "tc_synchronize")
    check(torch.equal(y, torch.ones(4, 3, device=f"cuda:{dev}")), "torch->tcuda: tcuda's write not seen")
    check(torch.equal(full[:, 0], torch.arange(0, 20, 5, dtype=torch.float32, device=f"cuda:{dev}")),
          "torch->tcuda: tcuda wrote outside the view")
    tc.tc_tensor_release(ones)
    tc.tc_tensor_release(t)  # calls torch's deleter
    check(torch.equal(y, torch.ones(4, 3, device=f"cuda:{dev}")), "torch's tensor changed on release")


def main():
    global tc
    if not torch.cuda.is_available():
        print("SKIP dlpack_torch: torch sees no GPU")
        return 77
    tc = load_tcuda()
    if not tc.tc_is_available():
        print(f"SKIP dlpack_torch: tcuda sees no GPU: {tc.tc_last_error().decode()}")
        return 77
    try:
        tcuda_to_torch(0)
        torch_to_tcuda(0)
    except Exception as e:
        failures.append(f"{type(e).__name__}: {e}")
    if failures:
        print("FAIL dlpack_torch: " + "; ".join(failures))
        return 1
    print(f"PASS dlpack_torch (torch {torch.__version__})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
