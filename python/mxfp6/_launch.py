"""One op call at the client's C ABI: its tensors and scalars by the op's names, the key it
resolves to, and its launch through mxc_op_launch (composition, the kernels' checks and the
launches live below it, client/mxfp6_client.h).

Python checks what the C ABI cannot see (that an argument is a tensor, its device); everything
else (dtype, shape, strides, alignment, overlap) is checked by mxc_op_check / mxc_op_launch
against the kernels' signatures before anything launches, and comes back as a ValueError naming
the argument by its Python name.
"""

import ctypes
import threading

from . import _client, _lib, _profile

_DTYPES = {"torch.bfloat16": "bf16", "torch.float16": "f16", "torch.float32": "f32", "torch.int32": "i32",
           "torch.int64": "i64", "torch.uint8": "u8"}


def fail(public, message):
    raise ValueError(f"mxfp6.{public}: {message}")


_dtype_names = {}  # dtype object -> _DTYPES name, filled as dtypes are first seen


def _dtype_name(dtype):
    name = _dtype_names.get(dtype)
    if name is None:
        name = _DTYPES.get(str(dtype))
        if name is not None:
            _dtype_names[dtype] = name
    return name


def tensor(public, name, t, device=None):
    """Checks that `t` is a tensor on a CUDA device (the device of the call's first tensor)."""
    try:
        t_device, dtype = t.device, t.dtype
        t.data_ptr, t.stride, t.shape  # noqa: B018 (a tensor's attributes, read to check them)
    except AttributeError:
        fail(public, f"argument '{name}' must be a tensor, got {type(t).__name__}")
    if t_device.type != "cuda":
        fail(public, f"argument '{name}' must be on a CUDA device, got {t_device}")
    if device is not None and t_device != device:
        fail(public, f"argument '{name}' is on {t_device}, the call's other tensors on {device}")
    if _dtype_name(dtype) is None:
        fail(public, f"argument '{name}' has dtype {dtype}, which no kernel takes")
    return t


class View:
    """A tensor seen with other sizes and strides over the same memory (mixed_qkv as [T, 3, H, 128])."""

    def __init__(self, t, shape, strides):
        self.base, self.shape, self._strides = t, tuple(shape), tuple(strides)
        self.dtype, self.device = t.dtype, t.device

    def data_ptr(self):
        return self.base.data_ptr()

    def stride(self):
        return self._strides


def _fill(nt, name, t):
    nt.name = name
    nt.tensor.data = t.data_ptr()
    nt.tensor.dtype = _lib.DTYPES[_dtype_name(t.dtype)]
    shape, strides = tuple(t.shape), tuple(t.stride())
    nt.tensor.ndim = len(shape)
    for d, (s, st) in enumerate(zip(shape, strides)):
        nt.tensor.sizes[d], nt.tensor.strides[d] = s, st


class Call:
    """One op call: tensors and scalars by the op's names, Python names for errors."""

    def __init__(self, op, public, variant=""):
        self.op, self.public, self.variant = op, public, variant
        self.tensors, self.scalars, self.python_names = [], [], {}

    def tensor(self, name, t, python_name=None):
        self.tensors.append((name, t))
        self.python_names[name] = python_name or name

    def scalar(self, name, value):
        self.scalars.append((name, float(value)))

    def arrays(self):
        ts = (_lib.NamedTensor * len(self.tensors))()
        for nt, (n, t) in zip(ts, self.tensors):
            _fill(nt, n.encode(), t)
        ss = (_lib.NamedScalar * len(self.scalars))(*[_lib.NamedScalar(n.encode(), v) for n, v in self.scalars])
        return ts, ss

    def error(self, message):
        named_error(self.public, self.python_names, message)

    def signature(self, target):
        """What the key depends on: the op, variant, target, every tensor's shape and the scalars."""
        return (self.op, self.variant, target, tuple(tuple(t.shape) for _, t in self.tensors), tuple(self.scalars))

    def key(self, target, arrays=None):
        ts, ss = arrays or self.arrays()
        try:
            return _lib.out_text(_lib.client.mxc_call_key, self.op.encode(), self.variant.encode(), target.encode(),
                                 ts, len(ts), ss, len(ss))
        except ValueError as e:
            self.error(str(e))

    def resolve(self, conn, target, arrays):
        """The call's resolved op; its key is spelled once per signature (shapes, scalars)."""
        sig = self.signature(target)
        key = conn._call_keys.get(sig)
        if key is None:
            key = conn._call_keys[sig] = self.key(target, arrays)
        return conn.op(key)

    def check(self, conn, target="sm_90"):
        """Every check of a launch, on no device (mxc_op_check): for validating where no GPU is."""
        arrays = self.arrays()
        op = self.resolve(conn, target, arrays)
        ts, ss = arrays
        err = _lib.error_buffer()
        if _lib.client.mxc_op_check(op.handle, ts, len(ts), ss, len(ss), err, len(err)) != _lib.SUCCESS:
            self.error(_lib.text(err.value))
        return op

    def launch(self, device):
        """Checks and enqueues the plan's launches on the current stream; returns the resolved op
        and the ctypes arrays (with each tensor's mxrt_tensor, where its address goes)."""
        conn = _client.connection()
        arrays = self.arrays()
        op = self.resolve(conn, _target(device), arrays)
        if device.index not in op.loaded:
            err = _lib.error_buffer()
            if _lib.client.mxc_op_load(op.handle, _device(device), err, len(err)) != _lib.SUCCESS:
                raise RuntimeError(f"mxfp6.{self.public}: {_lib.text(err.value)}")
            op.loaded.add(device.index)
        ts, ss = arrays
        enqueue(conn, op, ts, ss, device, self.public, self.error)
        return op, ts, ss


def named_error(public, python_names, message):
    """Raises the C ABI's message as a ValueError, its argument names the Python API's."""
    for c_name, py_name in python_names.items():
        if c_name != py_name:
            message = message.replace(f"'{c_name}'", f"'{py_name}'")
    fail(public, message)


def enqueue(conn, op, ts, ss, device, public, error):
    """mxc_op_launch on the device's current stream, scratch from PyTorch's allocator; a refused
    argument raises through `error` (ValueError), anything else RuntimeError."""
    span = None
    if _profile.enabled:
        stream = _torch().cuda.current_stream(device)
        span = _profile.begin(stream)
    _scratch.device, _scratch.keep = device, []
    err = _scratch.error
    status = _lib.client.mxc_op_launch(op.handle, _raw_stream(device.index), ts, len(ts), ss, len(ss), _SCRATCH, None,
                                       err, len(err))
    _scratch.keep = None  # scratch tensors: alive until the launches are enqueued (stream-ordered reuse)
    if status == _lib.INVALID_ARGUMENT:
        error(_lib.text(err.value))
    if status != _lib.SUCCESS:
        raise RuntimeError(f"mxfp6.{public}: {_lib.text(err.value)}")
    if span is not None:
        _profile.end(span, stream, public, op)
    conn._stats["launches"] += 1


class Recipe:
    """A call builder's work for one signature of its arguments (each tensor's shape, strides,
    dtype and device; every other argument's value), kept so that a repeated call (a training
    step's) skips the builder: it allocates the outputs the builder allocated (their shapes and
    strides), writes the
    addresses into the ctypes arrays and launches. The builder's checks read nothing else of the
    arguments, so they would pass again; the C ABI checks every call (its own signature covers
    alignment and overlap)."""

    def __init__(self, call, op, ts, ss, args, out):
        # Nothing of the call's tensors is kept (they would stay alive): their shapes, and where
        # each address comes from.
        self.op, self.ts, self.ss, self.public = op, ts, ss, call.public
        self.python_names = dict(call.python_names)
        self.lock = threading.Lock()  # the arrays are shared: one call writes its addresses at a time
        self.outputs = [(tuple(t.shape), tuple(t.stride()), t.dtype) for t in out]
        # Per slot of the tensor array: (True, i) for args[i], (False, j) for output j.
        self.sources = []
        for (name, t), nt in zip(call.tensors, ts):
            base = t.base if isinstance(t, View) else t
            source = next(((True, i) for i, a in enumerate(args) if a is base), None) or \
                next(((False, j) for j, o in enumerate(out) if o is base), None)
            if source is None:
                raise LookupError(f"{call.op}: argument '{name}' is neither an input nor an output")
            self.sources.append((nt.tensor, source[0], source[1]))

    def launch(self, conn, args, device):
        torch = _torch()
        out = [torch.empty_strided(shape, strides, dtype=dtype, device=device)
               for shape, strides, dtype in self.outputs]
        with self.lock:
            self.write_addresses(args, out)
            enqueue(conn, self.op, self.ts, self.ss, device, self.public, self.error)
        return tuple(out)

    def write_addresses(self, args, out):
        for slot, is_arg, i in self.sources:
            slot.data = (args[i] if is_arg else out[i]).data_ptr()

    def error(self, message):
        named_error(self.public, self.python_names, message)


def signature(args):
    """What a call builder reads of its arguments: per tensor its shape, strides, dtype and device,
    per other argument its value and type; None when an argument is neither (no recipe then).
    One tensor given at several positions (cos as K's table too) is part of the signature: a
    recipe finds each address by the position of the tensor the builder took."""
    tensor_type = _torch().Tensor
    sig, ids = [], []
    for a in args:
        if isinstance(a, tensor_type):
            sig.append((a.shape, a.stride(), a.dtype, a.device))
            ids.append(id(a))
        elif a is None or type(a) in (str, int, float, bool):
            sig.append((type(a), a))
        else:
            return None
    if len(set(ids)) != len(ids):
        sig.append(tuple(ids.index(i) for i in ids))
    return tuple(sig)


MAX_RECIPES = 4096  # per connection; past it the recipes start over (a sweep over many shapes)


def launched(build):
    """The launch of a call builder's call, returning its outputs as a tuple: through the recipe
    of the arguments' signature when one was made, else through the builder (whose checks name a
    bad argument), keeping a recipe of it."""
    def launch(*args):
        conn = _client.connection()
        sig = signature(args)
        key = (build, sig)
        recipe = conn._recipes.get(key) if sig is not None else None
        if recipe is not None:  # its builder took args[0] for a tensor
            return recipe.launch(conn, args, args[0].device)
        call, out = build(*args)
        op, ts, ss = call.launch(args[0].device)
        if sig is not None:
            if len(conn._recipes) >= MAX_RECIPES:
                conn._recipes.clear()
            conn._recipes[key] = Recipe(call, op, ts, ss, args, out)
        return tuple(out)
    return launch


_torch_module = None


def _torch():
    global _torch_module
    if _torch_module is None:
        import torch
        _torch_module = torch
    return _torch_module


_raw_streams = None


def _raw_stream(index):
    """The device's current stream as a CUstream / hipStream_t address: torch's raw accessor where
    it has one (no Stream object made per call), else the public API's."""
    global _raw_streams
    if _raw_streams is None:
        torch = _torch()
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        _raw_streams = raw if raw is not None else (lambda i: torch.cuda.current_stream(i).cuda_stream)
    return _raw_streams(index)


class _ScratchState(threading.local):
    """The launch in progress on this thread: its device, the scratch tensors it allocated, and an
    error buffer (one per thread, reused)."""

    def __init__(self):
        self.device, self.keep, self.error = None, None, _lib.error_buffer()


_scratch = _ScratchState()


def _allocate_scratch(_user, size, ptr):
    import torch
    try:
        t = torch.empty(size, dtype=torch.uint8, device=_scratch.device)
        _scratch.keep.append(t)
        ptr[0] = t.data_ptr()
        return 0
    except Exception:  # noqa: BLE001 (an allocation failure must not unwind through C)
        return 1


_SCRATCH = _lib.SCRATCH_FN(_allocate_scratch)  # one callback object for every launch


_devices = {}


def _device(device):
    """The runtime's device handle (mxrt_device) for a torch CUDA device, opened once."""
    handle = _devices.get(device.index)
    if handle is None:
        h = ctypes.c_void_p()
        if _lib.runtime.mxrt_device_open(b"auto", None, device.index or 0, ctypes.byref(h)) != _lib.SUCCESS:
            raise RuntimeError(f"mxfp6: {_lib.text(_lib.runtime.mxrt_last_error())}")
        handle = _devices[device.index] = h
    return handle


_targets = {}


def _target(device):
    target = _targets.get(device.index)
    if target is None:
        import torch
        props = torch.cuda.get_device_properties(device)
        # ROCm names the ISA ("gfx942:sramecc+:xnack-"); recent CUDA builds of torch have the
        # attribute too and fill it with the card's name, so only a gfx name is taken.
        arch = getattr(props, "gcnArchName", "") or ""
        target = _targets[device.index] = (arch.split(":")[0] if arch.startswith("gfx")
                                           else f"sm_{props.major}{props.minor}")
    return target
