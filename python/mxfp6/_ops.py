"""The ops: validation that names the argument, then one launch of the resolved plan through the
client's C ABI (mxc_op_launch: composition, the kernels' checks and the launches live below it).

Python checks what the C ABI cannot see (that an argument is a tensor, its device) and derives the
call's shapes; everything else (dtype, shape, strides, alignment, overlap) is checked by
mxc_op_check / mxc_op_launch against the kernels' signatures before anything launches, and comes
back as a ValueError naming the argument by its Python name.
"""

import ctypes

from . import _client, _lib

HEAD_DIM = 128
_DTYPES = {"torch.bfloat16": "bf16", "torch.float16": "f16", "torch.float32": "f32", "torch.int32": "i32",
           "torch.int64": "i64", "torch.uint8": "u8"}


def _fail(op, message):
    raise ValueError(f"mxfp6.{op}: {message}")


def _tensor(op, name, t, device=None):
    """Checks that `t` is a tensor on a CUDA device (the device of the call's first tensor)."""
    if not all(hasattr(t, a) for a in ("data_ptr", "shape", "stride", "dtype", "device")):
        _fail(op, f"argument '{name}' must be a tensor, got {type(t).__name__}")
    if t.device.type != "cuda":
        _fail(op, f"argument '{name}' must be on a CUDA device, got {t.device}")
    if device is not None and t.device != device:
        _fail(op, f"argument '{name}' is on {t.device}, the call's other tensors on {device}")
    if str(t.dtype) not in _DTYPES:
        _fail(op, f"argument '{name}' has dtype {t.dtype}, which no kernel takes")
    return t


def _named(name, t):
    nt = _lib.NamedTensor()
    nt.name = name.encode()
    nt.tensor.data = t.data_ptr()
    nt.tensor.dtype = _lib.DTYPES[_DTYPES[str(t.dtype)]]
    shape, strides = tuple(t.shape), tuple(t.stride())
    nt.tensor.ndim = len(shape)
    for d, (s, st) in enumerate(zip(shape, strides)):
        nt.tensor.sizes[d], nt.tensor.strides[d] = s, st
    return nt


class _View:
    """A tensor seen with other sizes and strides over the same memory (mixed_qkv as [T, 3, H, 128])."""

    def __init__(self, t, shape, strides):
        self.base, self.shape, self._strides = t, tuple(shape), tuple(strides)
        self.dtype, self.device = t.dtype, t.device

    def data_ptr(self):
        return self.base.data_ptr()

    def stride(self):
        return self._strides


class _Call:
    """One op call at the C ABI: tensors and scalars by the op's names, Python names for errors."""

    def __init__(self, op, public, variant=""):
        self.op, self.public, self.variant = op, public, variant
        self.tensors, self.scalars, self.python_names = [], [], {}

    def tensor(self, name, t, python_name=None):
        self.tensors.append((name, t))
        self.python_names[name] = python_name or name

    def scalar(self, name, value):
        self.scalars.append((name, float(value)))

    def arrays(self):
        ts = (_lib.NamedTensor * len(self.tensors))(*[_named(n, t) for n, t in self.tensors])
        ss = (_lib.NamedScalar * len(self.scalars))(*[_lib.NamedScalar(n.encode(), v) for n, v in self.scalars])
        return ts, ss

    def error(self, message):
        for c_name, py_name in self.python_names.items():
            if c_name != py_name:
                message = message.replace(f"'{c_name}'", f"'{py_name}'")
        _fail(self.public, message)

    def key(self, target):
        ts, ss = self.arrays()
        try:
            return _lib.out_text(_lib.client.mxc_call_key, self.op.encode(), self.variant.encode(), target.encode(),
                                 ts, len(ts), ss, len(ss))
        except ValueError as e:
            self.error(str(e))

    def check(self, conn, target="sm_90"):
        """Every check of a launch, on no device (mxc_op_check): for validating where no GPU is."""
        op = conn.op(self.key(target))
        ts, ss = self.arrays()
        err = _lib.error_buffer()
        if _lib.client.mxc_op_check(op.handle, ts, len(ts), ss, len(ss), err, len(err)) != _lib.SUCCESS:
            self.error(_lib.text(err.value))
        return op

    def launch(self, conn, device):
        import torch
        target = _target(device)
        op = conn.op(self.key(target))
        ts, ss = self.arrays()
        err = _lib.error_buffer()
        if device.index not in op.loaded:
            if _lib.client.mxc_op_load(op.handle, _device(device), err, len(err)) != _lib.SUCCESS:
                raise RuntimeError(f"mxfp6.{self.public}: {_lib.text(err.value)}")
            op.loaded.add(device.index)
        keep = []  # scratch tensors: alive until the launches are enqueued (stream-ordered reuse)

        def scratch(_user, size, ptr):
            try:
                t = torch.empty(size, dtype=torch.uint8, device=device)
                keep.append(t)
                ptr[0] = t.data_ptr()
                return 0
            except Exception:  # noqa: BLE001 (an allocation failure must not unwind through C)
                return 1

        stream = torch.cuda.current_stream(device).cuda_stream
        status = _lib.client.mxc_op_launch(op.handle, stream, ts, len(ts), ss, len(ss), _lib.SCRATCH_FN(scratch),
                                           None, err, len(err))
        if status == _lib.INVALID_ARGUMENT:
            self.error(_lib.text(err.value))
        if status != _lib.SUCCESS:
            raise RuntimeError(f"mxfp6.{self.public}: {_lib.text(err.value)}")
        conn._stats["launches"] += 1


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


def _target(device):
    import torch
    props = torch.cuda.get_device_properties(device)
    arch = getattr(props, "gcnArchName", "")
    if arch:
        return arch.split(":")[0]
    return f"sm_{props.major}{props.minor}"


# norm_rope ------------------------------------------------------------------------------------

def norm_rope_call(mixed_qkv, q_weight, k_weight, cos, sin, k_cos=None, k_sin=None, layout="megatron", pos_div=1,
                   eps=1e-6, out=None):
    """The whole-QKV forward's call: mixed_qkv [T, 3*H*128] bf16 (Megatron per-head [T, H, 3, 128]
    or blocked [T, 3, H, 128]), the norm weights [128], the rotary tables [positions, 64] f32 of Q
    (and of K when k_cos/k_sin are given; else K shares Q's). `out`: q, k, v, q_rstd, k_rstd, else
    allocated."""
    name = "norm_rope"
    _tensor(name, "mixed_qkv", mixed_qkv)
    device = mixed_qkv.device
    if len(mixed_qkv.shape) != 2 or mixed_qkv.shape[1] % (3 * HEAD_DIM) != 0:
        _fail(name, f"argument 'mixed_qkv' must be [T, 3*H*{HEAD_DIM}], got {list(mixed_qkv.shape)}")
    if layout not in ("megatron", "blocked"):
        _fail(name, f"argument 'layout' must be 'megatron' or 'blocked', got {layout!r}")
    if (k_cos is None) != (k_sin is None):
        _fail(name, "arguments 'k_cos' and 'k_sin' go together: give both (K's own table) or neither (Q's)")
    if int(pos_div) < 1:
        _fail(name, f"argument 'pos_div' must be >= 1, got {pos_div}")
    if not eps > 0:
        _fail(name, f"argument 'eps' must be > 0, got {eps}")
    T, H = mixed_qkv.shape[0], mixed_qkv.shape[1] // (3 * HEAD_DIM)
    t0 = mixed_qkv.stride()[0] if T > 1 else 3 * H * HEAD_DIM
    strides = (t0, HEAD_DIM, 3 * HEAD_DIM, 1) if layout == "megatron" else (t0, H * HEAD_DIM, HEAD_DIM, 1)
    if mixed_qkv.stride()[1] != 1:
        _fail(name, f"argument 'mixed_qkv' must have unit stride along its columns, got strides {list(mixed_qkv.stride())}")
    call = _Call("norm_rope_qkv_fwd", name, f"layout={layout}")
    call.tensor("qkv", _View(mixed_qkv, (T, 3, H, HEAD_DIM), strides), "mixed_qkv")
    tables = {"q_cos": cos, "q_sin": sin, "k_cos": cos if k_cos is None else k_cos,
              "k_sin": sin if k_sin is None else k_sin}
    python = {"q_cos": "cos", "q_sin": "sin", "k_cos": "cos" if k_cos is None else "k_cos",
              "k_sin": "sin" if k_sin is None else "k_sin"}
    for n, t in (("q_weight", q_weight), ("k_weight", k_weight)):
        call.tensor(n, _tensor(name, n, t, device))
    for n, t in tables.items():
        call.tensor(n, _tensor(name, python[n], t, device), python[n])
    if out is None:
        import torch
        out = [torch.empty((T, H, HEAD_DIM), dtype=torch.bfloat16, device=device) for _ in range(3)]
        out += [torch.empty((T, H), dtype=torch.float32, device=device) for _ in range(2)]
    for n, t in zip(("q", "k", "v", "q_rstd", "k_rstd"), out):
        call.tensor(n, _tensor(name, n, t, device))
    call.scalar("pos_div", int(pos_div))
    call.scalar("eps", eps)
    return call, out


def norm_rope(mixed_qkv, q_weight, k_weight, cos, sin, k_cos=None, k_sin=None, layout="megatron", pos_div=1,
              eps=1e-6):
    """QK RMSNorm + interleaved RoPE of a whole mixed_qkv (docs/architecture.md 4.1) -> q, k, v,
    each [T, H, 128] bf16."""
    from . import _torch_ops
    if _torch_ops.registered:
        q, k, v, _, _ = _torch_ops.norm_rope_fwd(mixed_qkv, q_weight, k_weight, cos, sin, k_cos, k_sin, layout,
                                                 int(pos_div), float(eps))
        return q, k, v
    call, out = norm_rope_call(mixed_qkv, q_weight, k_weight, cos, sin, k_cos, k_sin, layout, pos_div, eps)
    call.launch(_client.connection(), mixed_qkv.device)
    return tuple(out[:3])


# ln_modulate ----------------------------------------------------------------------------------

def ln_modulate_call(x, scale, shift, tokens_per_sample, layout="bsd", eps=1e-6, out=None):
    """LN-modulate forward's call with per-sample modulation: x [T, D] bf16 of B = T /
    tokens_per_sample samples ([B, S, D] tokens for layout "bsd", [S, B, D] for "sbd"), scale and
    shift [B, D] bf16. `out`: y, mean, rstd, else allocated."""
    name = "ln_modulate"
    _tensor(name, "x", x)
    device = x.device
    if layout not in ("bsd", "sbd"):
        _fail(name, f"argument 'layout' must be 'bsd' or 'sbd', got {layout!r}")
    S = int(tokens_per_sample)
    if len(x.shape) != 2:
        _fail(name, f"argument 'x' must be [T, D], got {list(x.shape)}")
    if S < 1 or x.shape[0] % S != 0:
        _fail(name, f"argument 'tokens_per_sample' ({tokens_per_sample}) must divide the {x.shape[0]} tokens of 'x'")
    if not eps > 0:
        _fail(name, f"argument 'eps' must be > 0, got {eps}")
    call = _Call("ln_modulate_fwd", name, f"layout={layout}")
    call.tensor("x", x)
    call.tensor("scale", _tensor(name, "scale", scale, device))
    call.tensor("shift", _tensor(name, "shift", shift, device))
    if out is None:
        import torch
        out = [torch.empty(tuple(x.shape), dtype=torch.bfloat16, device=device),
               torch.empty((x.shape[0],), dtype=torch.float32, device=device),
               torch.empty((x.shape[0],), dtype=torch.float32, device=device)]
    for n, t in zip(("y", "mean", "rstd"), out):
        call.tensor(n, _tensor(name, n, t, device))
    call.scalar("tokens_per_sample", S)
    call.scalar("eps", eps)
    return call, out


def ln_modulate(x, scale, shift, tokens_per_sample, layout="bsd", eps=1e-6):
    """y = LayerNorm(x) * (1 + scale[b]) + shift[b] (docs/architecture.md 4.2), D = 3072."""
    from . import _torch_ops
    if _torch_ops.registered:
        return _torch_ops.ln_modulate_fwd(x, scale, shift, int(tokens_per_sample), layout, float(eps))[0]
    call, out = ln_modulate_call(x, scale, shift, tokens_per_sample, layout, eps)
    call.launch(_client.connection(), x.device)
    return out[0]
