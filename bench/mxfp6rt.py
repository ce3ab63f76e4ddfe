"""ctypes binding of libmxfp6rt's C API (runtime/mxfp6rt.h), for the benchmark.

Needs no torch: raw launches take anything with a data_ptr() method (or plain device addresses as
ints); launches from tensors (Kernel.launch_tensors, Kernel.prepare_tensors) take anything that
also has dtype, shape and stride() like a torch tensor, and the runtime checks them against the
kernel's declaration. The runtime uses the device's primary CUDA context, the one PyTorch uses, so
a torch tensor's data_ptr() and torch.cuda.current_stream().cuda_stream are valid here.
"""
import ctypes
import json
import os
import pathlib

REPO = pathlib.Path(__file__).resolve().parent.parent

SUCCESS = 0
STATUS_NAMES = {0: "SUCCESS", 1: "INVALID_ARGUMENT", 2: "UNAVAILABLE", 3: "DRIVER", 4: "INTERNAL"}
# The metadata's "abi" kinds and their mxrt_arg_kind codes.
ARG_KINDS = {"ptr": 0, "i32": 1, "i64": 2, "f32": 3}


class _ArgValue(ctypes.Union):
    _fields_ = [("ptr", ctypes.c_void_p), ("i32", ctypes.c_int32), ("i64", ctypes.c_int64),
                ("f32", ctypes.c_float)]


class MxrtArg(ctypes.Structure):
    """struct mxrt_arg: int32_t kind, then the 8-byte union (at offset 8 on LP64)."""
    _fields_ = [("kind", ctypes.c_int32), ("value", _ArgValue)]


# mxrt_dtype codes, by the metadata's spelling, and the torch dtypes (by str(), so torch is not
# imported here) that match them.
DTYPES = {"bf16": 0, "f16": 1, "f32": 2, "i32": 3, "i64": 4, "u8": 5}
TORCH_DTYPES = {"torch.bfloat16": "bf16", "torch.float16": "f16", "torch.float32": "f32",
                "torch.int32": "i32", "torch.int64": "i64", "torch.uint8": "u8"}
# mxrt_param_kind codes: a tensor, or a scalar of the parameter's dtype.
PARAM_KINDS = {"tensor": 0, "i32": 1, "i64": 2, "f32": 3}
MAX_DIMS = 8


class MxrtTensor(ctypes.Structure):
    """struct mxrt_tensor: sizes and strides in elements."""
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int32), ("ndim", ctypes.c_int32),
                ("sizes", ctypes.c_int64 * MAX_DIMS), ("strides", ctypes.c_int64 * MAX_DIMS)]


class _ParamValue(ctypes.Union):
    _fields_ = [("tensor", MxrtTensor), ("i32", ctypes.c_int32), ("i64", ctypes.c_int64),
                ("f32", ctypes.c_float)]


class MxrtParam(ctypes.Structure):
    """struct mxrt_param: int32_t kind, then the union (at offset 8 on LP64)."""
    _fields_ = [("kind", ctypes.c_int32), ("value", _ParamValue)]


Grid = ctypes.c_uint32 * 3
_P = ctypes.POINTER
# Every function of mxfp6rt.h: name -> (restype, argtypes). Opaque handles are c_void_p. The smoke
# test compares this table with the header's prototypes, so a changed signature fails in CI.
SIGNATURES = {
    "mxrt_last_error": (ctypes.c_char_p, []),
    "mxrt_device_open": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int, _P(ctypes.c_void_p)]),
    "mxrt_device_close": (ctypes.c_int, [ctypes.c_void_p]),
    "mxrt_device_name": (ctypes.c_char_p, [ctypes.c_void_p]),
    "mxrt_device_platform": (ctypes.c_char_p, [ctypes.c_void_p]),
    "mxrt_device_overlaps_launches": (ctypes.c_int, [ctypes.c_void_p]),
    "mxrt_malloc": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, _P(ctypes.c_void_p)]),
    "mxrt_free": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p]),
    "mxrt_memcpy_htod": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]),
    "mxrt_memcpy_dtoh": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]),
    "mxrt_memset": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint8, ctypes.c_size_t]),
    "mxrt_synchronize": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p]),
    "mxrt_kernel_load": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p,
                                        _P(ctypes.c_void_p)]),
    "mxrt_kernel_unload": (ctypes.c_int, [ctypes.c_void_p]),
    "mxrt_kernel_launch": (ctypes.c_int, [ctypes.c_void_p, _P(ctypes.c_uint32), ctypes.c_void_p, _P(MxrtArg),
                                          ctypes.c_size_t]),
    "mxrt_kernel_grid_for_rows": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int64, _P(ctypes.c_uint32)]),
    "mxrt_kernel_launch_tensors": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, _P(MxrtParam), ctypes.c_size_t]),
    "mxrt_kernel_prepare_tensors": (ctypes.c_int, [ctypes.c_void_p, _P(MxrtParam), ctypes.c_size_t, _P(MxrtArg),
                                                   ctypes.c_size_t, _P(ctypes.c_size_t), _P(ctypes.c_uint32)]),
}


class MxrtError(RuntimeError):
    def __init__(self, status, message):
        super().__init__(f"{message} [{STATUS_NAMES.get(status, status)}]")
        self.status = status


def default_library_path():
    return os.environ.get("MXFP6RT") or str(REPO / "build" / "lib" / "libmxfp6rt.so")


def _address(value):
    """A device address from a tensor (data_ptr()) or an int."""
    return value.data_ptr() if hasattr(value, "data_ptr") else int(value)


class Runtime:
    """The loaded library with every prototype declared, so ctypes converts and checks arguments."""

    def __init__(self, path=None):
        self.path = path or default_library_path()
        self.lib = ctypes.CDLL(self.path)
        for name, (restype, argtypes) in SIGNATURES.items():
            fn = getattr(self.lib, name)
            fn.restype, fn.argtypes = restype, argtypes

    def last_error(self):
        return (self.lib.mxrt_last_error() or b"").decode(errors="replace")

    def check(self, status, what):
        if status != SUCCESS:
            raise MxrtError(status, f"{what}: {self.last_error()}")

    def open_device(self, platform=None, ordinal=0, driver_path=None):
        return Device(self, platform, ordinal, driver_path)


class Device:
    def __init__(self, runtime, platform=None, ordinal=0, driver_path=None):
        self.rt = runtime
        handle = ctypes.c_void_p()
        runtime.check(runtime.lib.mxrt_device_open(platform.encode() if platform else None,
                                                   driver_path.encode() if driver_path else None,
                                                   ordinal, ctypes.byref(handle)), "mxrt_device_open")
        self.handle = handle

    @property
    def name(self):
        return self.rt.lib.mxrt_device_name(self.handle).decode()

    @property
    def platform(self):
        return self.rt.lib.mxrt_device_platform(self.handle).decode()

    @property
    def overlaps_launches(self):
        """Whether kernels that wait for the previous grid launch overlapping it (mxfp6rt.h)."""
        return bool(self.rt.lib.mxrt_device_overlaps_launches(self.handle))

    def synchronize(self, stream=None):
        self.rt.check(self.rt.lib.mxrt_synchronize(self.handle, stream), "mxrt_synchronize")

    def load(self, code_path, metadata_path=None):
        return Kernel(self, code_path, metadata_path)

    def close(self):
        if self.handle:
            self.rt.check(self.rt.lib.mxrt_device_close(self.handle), "mxrt_device_close")
            self.handle = ctypes.c_void_p()


def read_metadata(metadata_path):
    """The launch metadata the compiler writes next to a code object (`<code>.json`)."""
    text = pathlib.Path(metadata_path).read_text()
    return text, json.loads(text)


def passed_abi(metadata):
    """The ABI arguments a launch passes: all but the "derived" ones (a runtime divisor's
    multiplier and shift), which the runtime computes and appends."""
    return [a for a in metadata["abi"] if "derived" not in a]


def pack_args(metadata, values):
    """An mxrt_arg array in the metadata's ABI order, each taken by name from `values`.

    Names missing from `values` raise (a silent default would launch garbage); extra names are
    ignored, so callers can pass every dimension they know whether or not this build's ABI has it.
    """
    abi = passed_abi(metadata)
    missing = [a["name"] for a in abi if a["name"] not in values]
    if missing:
        raise KeyError(f"kernel {metadata['kernel']}: no value for ABI argument(s) {', '.join(missing)}")
    args = (MxrtArg * len(abi))()
    for slot, a in zip(args, abi):
        kind, value = a["kind"], values[a["name"]]
        if kind not in ARG_KINDS:
            raise ValueError(f"kernel {metadata['kernel']}: unknown ABI kind {kind!r} of {a['name']}")
        slot.kind = ARG_KINDS[kind]
        if kind == "ptr":
            slot.value.ptr = _address(value)
        elif kind == "i32":
            slot.value.i32 = int(value)
        elif kind == "i64":
            slot.value.i64 = int(value)
        else:
            slot.value.f32 = float(value)
    return args


_INT_RANGES = {"i32": (-2 ** 31, 2 ** 31 - 1), "i64": (-2 ** 63, 2 ** 63 - 1)}


def _fill_tensor(slot, name, t):
    """A torch-like tensor into an mxrt_tensor; the runtime checks dtype, shape and strides."""
    if not all(hasattr(t, a) for a in ("data_ptr", "dtype", "shape", "stride")):
        raise TypeError(f"argument {name!r} is a tensor parameter, got {type(t).__name__}")
    dtype = TORCH_DTYPES.get(str(t.dtype), str(t.dtype))
    if dtype not in DTYPES:
        raise TypeError(f"argument {name!r} has dtype {t.dtype}, which no kernel parameter takes")
    sizes, strides = tuple(t.shape), tuple(t.stride())
    if len(sizes) > MAX_DIMS:
        raise ValueError(f"argument {name!r} has {len(sizes)} dims, at most {MAX_DIMS}")
    slot.kind = PARAM_KINDS["tensor"]
    slot.value.tensor.data = t.data_ptr()
    slot.value.tensor.dtype = DTYPES[dtype]
    slot.value.tensor.ndim = len(sizes)
    for d, (n, st) in enumerate(zip(sizes, strides)):
        slot.value.tensor.sizes[d] = int(n)
        slot.value.tensor.strides[d] = int(st)


def _fill_scalar(slot, name, dtype, value):
    """A Python number into an mxrt_param of the declared scalar type (ctypes would wrap an
    out-of-range integer silently, so the range is checked here)."""
    if hasattr(value, "data_ptr"):
        raise TypeError(f"argument {name!r} is an {dtype} scalar, got a tensor")
    slot.kind = PARAM_KINDS[dtype]
    if dtype == "f32":
        slot.value.f32 = float(value)
        return
    if int(value) != value:
        raise TypeError(f"argument {name!r} is an {dtype} scalar, got {value!r}")
    lo, hi = _INT_RANGES[dtype]
    if not lo <= int(value) <= hi:
        raise OverflowError(f"argument {name!r} is an {dtype} scalar, {value} is out of range")
    setattr(slot.value, dtype, int(value))


def pack_params(metadata, args=(), values=None):
    """An mxrt_param array for a launch from tensors: one entry per declared parameter (the
    metadata's "params"), taken from `args` in declaration order, then by name from `values`;
    an omitted scalar with a declared default takes it. Extra names in `values` are ignored, so a
    dict holding ABI sizes as well (pack_args' input) serves too."""
    params = metadata.get("params")
    if params is None:
        raise ValueError(f"kernel {metadata['kernel']}: its metadata has no 'params' (compiled before "
                         "launches from tensors); recompile it, or use pack_args")
    if len(args) > len(params):
        raise TypeError(f"kernel {metadata['kernel']} takes {len(params)} arguments, got {len(args)}")
    values = dict(values or {})
    for p, a in zip(params, args):
        if p["name"] in values:
            raise TypeError(f"kernel {metadata['kernel']}: argument {p['name']!r} given twice")
        values[p["name"]] = a
    packed = (MxrtParam * len(params))()
    missing = []
    for slot, p in zip(packed, params):
        name = p["name"]
        if name not in values and p["kind"] == "scalar" and "default" in p:
            values[name] = p["default"]
        if name not in values:
            missing.append(name)
        elif p["kind"] == "tensor":
            _fill_tensor(slot, name, values[name])
        else:
            _fill_scalar(slot, name, p["dtype"], values[name])
    if missing:
        raise TypeError(f"kernel {metadata['kernel']}: no value for argument(s) {', '.join(missing)}")
    return packed


class Kernel:
    """A loaded code object. launch() takes a packed argument array so a timing loop pays only
    for the ctypes call; launch_rows() packs from names each time, as an unprepared caller would."""

    def __init__(self, device, code_path, metadata_path=None):
        self.rt = device.rt
        self.code_path = str(code_path)
        self.metadata_path = str(metadata_path or f"{code_path}.json")
        text, self.metadata = read_metadata(self.metadata_path)
        code = pathlib.Path(self.code_path).read_bytes()
        handle = ctypes.c_void_p()
        self.rt.check(self.rt.lib.mxrt_kernel_load(device.handle, code, len(code), text.encode(),
                                                   ctypes.byref(handle)), f"mxrt_kernel_load({self.code_path})")
        self.handle = handle

    @property
    def name(self):
        return self.metadata["kernel"]

    @property
    def config(self):
        return dict(self.metadata.get("config", {}))

    def pack(self, values):
        return pack_args(self.metadata, values)

    def grid(self, rows):
        grid = Grid()
        self.rt.check(self.rt.lib.mxrt_kernel_grid_for_rows(self.handle, int(rows), grid),
                      f"mxrt_kernel_grid_for_rows({self.name}, {rows})")
        return grid

    def launch(self, args, grid, stream=None):
        self.rt.check(self.rt.lib.mxrt_kernel_launch(self.handle, grid, stream, args, len(args)),
                      f"mxrt_kernel_launch({self.name})")

    def launch_rows(self, values, rows, stream=None):
        self.launch(self.pack(values), self.grid(rows), stream)

    @property
    def takes_tensors(self):
        """Whether the metadata declares the parameters (what launches from tensors check)."""
        return "params" in self.metadata

    def launch_tensors(self, *args, stream=None, **values):
        """Launches from tensors and scalars (pack_params: positional in declaration order, or
        by name): the runtime checks every dtype, shape and stride against the kernel's
        declaration, derives the runtime sizes and the grid, and launches; an empty row space
        launches nothing."""
        params = pack_params(self.metadata, args, values)
        self.rt.check(self.rt.lib.mxrt_kernel_launch_tensors(self.handle, stream, params, len(params)),
                      f"mxrt_kernel_launch_tensors({self.name})")

    def prepare_tensors(self, *args, **values):
        """The same checks once, giving (args, grid) for launch(), so a timing loop pays only for
        the raw launch. grid[0] == 0 (an empty row space) means there is nothing to launch."""
        params = pack_params(self.metadata, args, values)
        raw = (MxrtArg * len(passed_abi(self.metadata)))()
        count, grid = ctypes.c_size_t(), Grid()
        self.rt.check(self.rt.lib.mxrt_kernel_prepare_tensors(self.handle, params, len(params), raw, len(raw),
                                                              ctypes.byref(count), grid),
                      f"mxrt_kernel_prepare_tensors({self.name})")
        return raw, grid

    def prepare(self, values, rows):
        """(args, grid) for launch() from `values` by name (pack_args' dict). Where the metadata
        declares the parameters, the runtime checks the tensors against them and derives the
        grid, which must then be the one for `rows` (else the caller's row count and its shapes
        disagree); older metadata is packed by ABI name, unchecked."""
        if not self.takes_tensors:
            return self.pack(values), self.grid(rows)
        args, grid = self.prepare_tensors(**values)
        if list(grid) != list(self.grid(rows)):
            raise ValueError(f"{self.name}: the tensors give grid {list(grid)}, {rows} rows give "
                             f"{list(self.grid(rows))}")
        return args, grid

    def unload(self):
        if self.handle:
            self.rt.check(self.rt.lib.mxrt_kernel_unload(self.handle), "mxrt_kernel_unload")
            self.handle = ctypes.c_void_p()


def find_code_objects(folder, kernel=None, target=None, recursive=False):
    """(code_path, metadata) of every code object in `folder` (and its subfolders if recursive)
    with a `<file>.json` beside it, sorted by path; optionally only one kernel and one target
    (e.g. "sm_90")."""
    found = []
    for meta_path in sorted(pathlib.Path(folder).glob("**/*.json" if recursive else "*.json")):
        code_path = meta_path.with_suffix("")
        if not code_path.is_file():
            continue
        _, meta = read_metadata(meta_path)
        if kernel is not None and meta.get("kernel") != kernel:
            continue
        if target is not None and meta.get("target") != target:
            continue
        found.append((code_path, meta))
    return found


TAG_ORDER = ("W", "HB", "GB", "P", "ROWS", "THREADS", "VEC", "PREFETCH", "STAGE", "SERIAL", "ASYNC", "MINPROGS",
             "INTERLEAVE", "PREDICATE", "ANCHOR", "INVARIANTS", "SCALARS", "OVERLAP")
TAG_IDLE = {"MINPROGS": 0, "INTERLEAVE": 1, "ANCHOR": 0, "INVARIANTS": 0, "SCALARS": 0, "OVERLAP": 1}  # shown only where they ask for something


def config_tag(metadata):
    """"ROWS=8,THREADS=16,VEC=8": the tunables (specializations such as D left out; W: a packer tile width;
    GB: blocks of rows per program of the scales' transpose; P: programs per sample of a sample-walking kernel; MINPROGS,
    INTERLEAVE, ANCHOR, INVARIANTS, SCALARS and OVERLAP only where they ask for something). The tunables are those the metadata lists (mxfp6c writes
    them), the usual ones in TAG_ORDER, any other after them in declaration order -- so a probe's own tunable
    tells its objects apart from the kept ones; metadata without the list: TAG_ORDER's names alone."""
    config = metadata.get("config", {})
    declared = metadata.get("tunables")
    names = [k for k in TAG_ORDER if declared is None or k in declared]
    names += [k for k in declared or () if k not in TAG_ORDER]
    keys = [k for k in names if k in config and config[k] != TAG_IDLE.get(k)] or sorted(config)
    return ",".join(f"{k}={config[k]}" for k in keys)
