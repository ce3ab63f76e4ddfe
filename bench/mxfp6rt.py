"""ctypes binding of libmxfp6rt's C API (runtime/mxfp6rt.h), for the benchmark.

Needs no torch: arguments that are tensors only need a data_ptr() method (or are plain device
addresses as ints). The runtime uses the device's primary CUDA context, the one PyTorch uses, so a
torch tensor's data_ptr() and torch.cuda.current_stream().cuda_stream are valid here.
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


def pack_args(metadata, values):
    """An mxrt_arg array in the metadata's ABI order, each taken by name from `values`.

    Names missing from `values` raise (a silent default would launch garbage); extra names are
    ignored, so callers can pass every dimension they know whether or not this build's ABI has it.
    """
    abi = metadata["abi"]
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


def config_tag(metadata):
    """"ROWS=8,THREADS=16,VEC=8": the tunables (specializations such as D left out)."""
    config = metadata.get("config", {})
    keys = [k for k in ("ROWS", "THREADS", "VEC", "PREFETCH") if k in config] or sorted(config)
    return ",".join(f"{k}={config[k]}" for k in keys)
