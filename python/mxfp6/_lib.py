"""libmxfp6rt.so and libmxfp6_client.so through ctypes: where they are found, and their C ABI's
signatures (runtime/mxfp6rt.h, client/mxfp6_client.h).

Looked for, in order: $MXFP6_LIB_DIR; the build tree (build/lib) of the checkout the package was
installed from (or lives in); the package's own folder. The runtime is loaded first and globally,
so the client library's NEEDED libmxfp6rt.so is that one wherever the two were found. A failed
load lists every place tried and why.
"""

import ctypes
import os

from . import _checkout_root

RUNTIME = "libmxfp6rt.so"
CLIENT = "libmxfp6_client.so"
MAX_DIMS = 8


class LibraryNotFound(ImportError):
    pass


def search_dirs():
    """(folder, why it is searched), in order."""
    dirs = []
    env = os.environ.get("MXFP6_LIB_DIR")
    if env:
        dirs.append((env, "MXFP6_LIB_DIR"))
    root = _checkout_root()
    if root:
        dirs.append((os.path.join(root, "build", "lib"), "the checkout's build tree"))
    dirs.append((os.path.dirname(os.path.abspath(__file__)), "next to the package"))
    return dirs


def _load():
    tried = []
    for folder, why in search_dirs():
        runtime, client = os.path.join(folder, RUNTIME), os.path.join(folder, CLIENT)
        missing = [p for p in (runtime, client) if not os.path.exists(p)]
        if missing:
            tried.append(f"{folder} ({why}): no {', '.join(os.path.basename(p) for p in missing)}")
            continue
        try:
            rt = ctypes.CDLL(runtime, mode=ctypes.RTLD_GLOBAL)
            cl = ctypes.CDLL(client)
            return rt, cl, folder
        except OSError as e:
            tried.append(f"{folder} ({why}): {e}")
    raise LibraryNotFound(
        "mxfp6: cannot load the client libraries (build them with `ninja -C build mxfp6_client_c`, "
        "or set MXFP6_LIB_DIR); tried " + "; ".join(tried))


class Tensor(ctypes.Structure):  # mxrt_tensor
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int32), ("ndim", ctypes.c_int32),
                ("sizes", ctypes.c_int64 * MAX_DIMS), ("strides", ctypes.c_int64 * MAX_DIMS)]


class NamedTensor(ctypes.Structure):  # mxc_named_tensor
    _fields_ = [("name", ctypes.c_char_p), ("tensor", Tensor)]


class NamedScalar(ctypes.Structure):  # mxc_named_scalar
    _fields_ = [("name", ctypes.c_char_p), ("value", ctypes.c_double)]


SCRATCH_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p))

# mxrt_dtype codes
DTYPES = {"bf16": 0, "f16": 1, "f32": 2, "i32": 3, "i64": 4, "u8": 5}
# mxrt_status codes
SUCCESS, INVALID_ARGUMENT, UNAVAILABLE, DRIVER, INTERNAL = 0, 1, 2, 3, 4


def _declare(rt, cl):
    P, S, I, I64, D = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int64, ctypes.c_double
    SZ = ctypes.c_size_t
    sigs = {
        (rt, "mxrt_last_error"): (S, []),
        (rt, "mxrt_device_open"): (I, [S, S, I, ctypes.POINTER(P)]),
        (rt, "mxrt_device_close"): (I, [P]),
        (rt, "mxrt_device_name"): (S, [P]),
        (cl, "mxc_connect"): (P, [S, S, I64, S, SZ]),
        (cl, "mxc_close"): (None, [P]),
        (cl, "mxc_describe"): (S, [P]),
        (cl, "mxc_resolve"): (P, [P, ctypes.POINTER(S), SZ, S, SZ]),
        (cl, "mxc_resolution_free"): (None, [P]),
        (cl, "mxc_status"): (S, [P]),
        (cl, "mxc_source"): (I, [P]),
        (cl, "mxc_seconds"): (D, [P]),
        (cl, "mxc_objects_from_server"): (I64, [P]),
        (cl, "mxc_bytes_from_server"): (I64, [P]),
        (cl, "mxc_objects_from_cache"): (I64, [P]),
        (cl, "mxc_op_count"): (SZ, [P]),
        (cl, "mxc_op_key"): (S, [P, SZ]),
        (cl, "mxc_op_error"): (S, [P, SZ]),
        (cl, "mxc_op_rule"): (S, [P, SZ]),
        (cl, "mxc_op_why"): (S, [P, SZ]),
        (cl, "mxc_op_plan_id"): (S, [P, SZ]),
        (cl, "mxc_op_create"): (P, [P, SZ, S, SZ]),
        (cl, "mxc_op_free"): (None, [P]),
        (cl, "mxc_op_plan"): (S, [P]),
        (cl, "mxc_op_load"): (I, [P, P, S, SZ]),
        (cl, "mxc_op_check"): (I, [P, ctypes.POINTER(NamedTensor), SZ, ctypes.POINTER(NamedScalar), SZ, S, SZ]),
        (cl, "mxc_op_launch"): (I, [P, P, ctypes.POINTER(NamedTensor), SZ, ctypes.POINTER(NamedScalar), SZ,
                                    SCRATCH_FN, P, S, SZ]),
        (cl, "mxc_op_prepare"): (P, [P, ctypes.POINTER(NamedTensor), SZ, ctypes.POINTER(NamedScalar), SZ, SCRATCH_FN,
                                     P, S, SZ]),
        (cl, "mxc_launches_free"): (None, [P]),
        (cl, "mxc_launches_count"): (SZ, [P]),
        (cl, "mxc_launches_info"): (I, [P, SZ, ctypes.POINTER(SZ), ctypes.POINTER(ctypes.c_uint32)]),
        (cl, "mxc_launches_enqueue"): (I, [P, P, SZ, SZ, S, SZ]),
        (cl, "mxc_key_plans"): (SZ, [S, S, S, SZ, S, SZ]),
        (cl, "mxc_op_from_plan"): (P, [S, S, SZ, ctypes.POINTER(P), ctypes.POINTER(SZ), ctypes.POINTER(S), S, SZ]),
        (cl, "mxc_shape_set_keys"): (SZ, [S, S, S, SZ, S, SZ]),
        (cl, "mxc_call_key"): (SZ, [S, S, S, ctypes.POINTER(NamedTensor), SZ, ctypes.POINTER(NamedScalar), SZ,
                                    S, SZ, S, SZ]),
    }
    for (lib, name), (res, args) in sigs.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args


runtime, client, found_in = _load()
_declare(runtime, client)


def error_buffer(size=2048):
    return ctypes.create_string_buffer(size)


def text(value):
    return value.decode() if isinstance(value, bytes) else (value or "")


def out_text(call, *args):
    """Calls a two-call C function (size query, then fill) whose last arguments are out, out_size,
    error, error_size; the text, or raises ValueError with the C message."""
    err = error_buffer()
    need = call(*args, None, 0, err, len(err))
    if need == 0:
        raise ValueError(text(err.value))
    out = ctypes.create_string_buffer(need)
    call(*args, out, need, err, len(err))
    return text(out.value)
