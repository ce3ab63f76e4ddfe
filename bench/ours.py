"""Our plans of a benchmark problem, run through the ops layer (client/mxfp6_client.h), the one
layer that composes an op's launches -- views of the tensors, scratch buffers, the reduction tree,
grids -- for the tuner, the server's clients and the Python package alike.

A problem names its op (`kernel`), variant and call: the op's tensors and scalars by the op's
argument names (docs/architecture.md, "Ops"). Here: which plans the code objects at hand make for
the call's key (mxc_key_plans: every family whose launch roles all have objects, crossed with the
P choices), an op of each (mxc_op_from_plan), composed and checked once per set of outputs
(mxc_op_prepare) and replayed by the timing loop (mxc_launches_enqueue).
"""

import ctypes
import json
import os
import pathlib
import sys

import mxfp6_spec

REPO = pathlib.Path(__file__).resolve().parent.parent
ENUM_NAMES = {"FMT": {v: k for k, v in mxfp6_spec.FMT_INDEX.items()},
              "MODE": {v: k for k, v in mxfp6_spec.MODE_INDEX.items()}}
_client = None


def client(lib_dir=None):
    """The Python package's bindings of the client's C ABI (python/mxfp6/_lib.py, _launch.py),
    loaded from lib_dir (the folder of --lib) on first use."""
    global _client
    if _client is None:
        if lib_dir:
            os.environ["MXFP6_LIB_DIR"] = str(lib_dir)
        sys.path.insert(0, str(REPO / "python"))
        from mxfp6 import _launch, _lib
        _client = (_lib, _launch)
    return _client


def config_text(path, meta):
    """An object's config as the op layer spells it ("K=V,..." by name): the tunables its file
    name gives (mxfp6_code_objects() and `mxfp6c precompile -o` name a file
    <kernel>.<target>.<config, "," -> "_", "=" dropped>.code, the config it was compiled with),
    and every variant and size of its metadata (FMT and MODE by name). A tunable the metadata
    fills with its default is not part of the text, as in the op table."""
    config, tunables = meta.get("config", {}), set(meta.get("tunables", ()))
    tag = path.name.split(".")[2] if path.name.count(".") >= 3 else ""
    given = {}
    for token in filter(None, tag.split("_")):
        names = [k for k in config if token.startswith(k) and len(token) > len(k)]
        if names:
            name = max(names, key=len)
            given[name] = token[len(name):]
    out = {k: v for k, v in given.items() if k in tunables}
    for k, v in config.items():
        if k not in tunables:
            out[k] = ENUM_NAMES.get(k, {}).get(v, str(v))
    return ",".join(f"{k}={out[k]}" for k in sorted(out))


class Catalog:
    """The code objects at hand (a folder's, subfolders included) by kernel and config text. The
    same kernel and config found twice (built for the GPU tests and as a candidate) is one."""

    def __init__(self, found):
        self.objects, by_kernel = {}, {}
        for path, meta in found:
            key = (meta["kernel"], config_text(path, meta))
            if key not in self.objects:
                self.objects[key] = (path, meta)
                by_kernel.setdefault(key[0], []).append(key[1])
        self.configs_json = json.dumps(by_kernel).encode()

    def kernels(self):
        return sorted({k for k, _ in self.objects})


class Plan:
    """One plan of ours for a problem: its JSON (ops/plan.h), the code object of each launch, the
    op made of them, the problem's check at the plan's accumulation depth, and the twin whose
    outputs the check compares with (Problem.twin_op)."""

    def __init__(self, plan, objects, handle, check, twin=None):
        self.plan, self.objects, self.handle, self.check, self.twin = plan, objects, handle, check, twin
        lib = client()[0]
        self.config = lib.text(lib.client.mxc_op_plan(handle))  # ops/plan.h Plan::id
        self.code_paths = [p for p, _ in objects]
        self.metas = [m for _, m in objects]
        self.loaded = False

    def __del__(self):
        if _client is not None and self.handle:
            _client[0].client.mxc_op_free(self.handle)

    def load(self, device):
        """Loads the plan's code objects on the benchmark's device (mxfp6rt.Device), once."""
        if not self.loaded:
            lib = client()[0]
            err = lib.error_buffer()
            if lib.client.mxc_op_load(self.handle, device.handle, err, len(err)) != lib.SUCCESS:
                raise RuntimeError(f"{self.config}: {lib.text(err.value)}")
            self.loaded = True

    def prepare(self, problem, outs, device, torch):
        """The plan's launches for the problem's call into `outs`: composed and checked once, their
        scratch allocated here (Prepared.scratch, poisoned like the outputs)."""
        self.load(device)
        return Prepared(self, call_of(problem, outs, self.plan["op"]), torch, outs[0].device,
                        torch.cuda.current_stream().cuda_stream)


class Prepared:
    """A plan's launches ready to enqueue on `stream`, any number of times: launch() all of them,
    launch_one(i) one; infos: (plan launch index, grid) per launch. Holds the call's arrays and the
    scratch (torch tensors on `device`)."""

    def __init__(self, plan, call, torch, device, stream):
        lib, _ = client()
        self.scratch = []

        def allocate(_user, size, ptr):
            """`size` bytes at a 256-byte boundary (as the C ABI asks) of a tensor kept (and poisoned) here."""
            try:
                t = torch.empty(size + 255, dtype=torch.uint8, device=device)
                self.scratch.append(t)
                ptr[0] = (t.data_ptr() + 255) // 256 * 256
                return 0
            except Exception:  # noqa: BLE001 (an allocation failure must not unwind through C)
                return 1

        self._callback = lib.SCRATCH_FN(allocate)
        self._arrays = ts, ss = call.arrays()
        err = lib.error_buffer()
        self.handle = lib.client.mxc_op_prepare(plan.handle, ts, len(ts), ss, len(ss), self._callback, None, err,
                                                len(err))
        if not self.handle:
            raise ValueError(f"{plan.config}: {lib.text(err.value)}")
        self.infos = []
        for i in range(lib.client.mxc_launches_count(self.handle)):
            index, grid = ctypes.c_size_t(), (ctypes.c_uint32 * 3)()
            lib.client.mxc_launches_info(self.handle, i, ctypes.byref(index), grid)
            self.infos.append((index.value, tuple(grid)))
        self._err = lib.error_buffer()
        self._enqueue = lib.client.mxc_launches_enqueue
        self._lib = lib
        self.stream = stream

    def __del__(self):
        if getattr(self, "handle", None):
            self._lib.client.mxc_launches_free(self.handle)

    def _run(self, first, count):
        if self._enqueue(self.handle, self.stream, first, count, self._err, len(self._err)) != 0:
            raise RuntimeError(self._lib.text(self._err.value))

    def launch(self):
        self._run(0, len(self.infos))

    def launch_one(self, i):
        self._run(i, 1)


def call_of(problem, outs, op):
    """The problem's call (Problem.call: [(name, tensor)], {name: value}) as a C ABI call of `op`."""
    _, launch = client()
    tensors, scalars = problem.call(outs)
    call = launch.Call(op, "bench", problem.variant)
    for name, t in tensors:
        call.tensor(name, t)
    for name, value in scalars.items():
        call.scalar(name, value)
    return call


def _plans_json(lib, key, catalog):
    return json.loads(lib.out_text(lib.client.mxc_key_plans, key.encode(), catalog.configs_json))


def _op(lib, key, plan, objects):
    """mxc_op_from_plan of a plan with its objects: (handle, None) or (None, the refusal)."""
    n = len(objects)
    blobs = [p.read_bytes() for p, _ in objects]
    bufs = (ctypes.c_void_p * n)(*[ctypes.cast(ctypes.c_char_p(b), ctypes.c_void_p) for b in blobs])
    sizes = (ctypes.c_size_t * n)(*[len(b) for b in blobs])
    metas = (ctypes.c_char_p * n)(*[pathlib.Path(f"{p}.json").read_bytes() for p, _ in objects])
    err = lib.error_buffer()
    handle = lib.client.mxc_op_from_plan(key.encode(), json.dumps(plan).encode(), n, bufs, sizes, metas, err,
                                         len(err))
    return (handle, None) if handle else (None, lib.text(err.value))


def plans(problem, catalog, target):
    """Every plan of ours the catalog's objects make for the problem's key (problem made: its
    call's shapes give the key), with its check and twin; and the key. A plan the ops layer
    refuses raises: the catalog and the op table disagree."""
    lib, _ = client()
    outs = problem.alloc_outputs()
    key = call_of(problem, outs, problem.kernel).key(target)
    twin_key = call_of(problem, problem.alloc_outputs(twin=True), problem.twin_op).key(target) \
        if problem.twin_op else None
    twin_plans = {}
    if twin_key:
        for tp in _plans_json(lib, twin_key, catalog):
            twin_plans[json.dumps([(l["role"], l["config"]) for l in tp["launches"]])] = tp
    del outs
    found = []
    for plan in _plans_json(lib, key, catalog):
        objects = [catalog.objects[(l["kernel"], l["config"])] for l in plan["launches"]]
        handle, why = _op(lib, key, plan, objects)
        if handle is None:
            raise ValueError(f"{problem.name}: the ops layer refuses its own plan {json.dumps(plan)}: {why}")
        twin = None
        if problem.twin_op:
            tp = twin_plans.get(json.dumps([(l["role"], l["config"]) for l in plan["launches"]]))
            if tp is not None:
                t_objects = [catalog.objects[(l["kernel"], l["config"])] for l in tp["launches"]]
                t_handle, why = _op(lib, twin_key, tp, t_objects)
                if t_handle is None:
                    raise ValueError(f"{problem.name}: the ops layer refuses its own plan {json.dumps(tp)}: {why}")
                twin = Plan(tp, t_objects, t_handle, None)
        found.append(Plan(plan, objects, handle, problem.check_of(plan, twin is not None), twin))
    return found, key


def check_call(plan, problem, outs):
    """Every check a launch of the plan makes (mxc_op_check: names, shapes, dtypes, strides,
    alignment, overlap), on no device: the message, or None."""
    lib, _ = client()
    ts, ss = call_of(problem, outs, plan.plan["op"]).arrays()
    err = lib.error_buffer()
    if lib.client.mxc_op_check(plan.handle, ts, len(ts), ss, len(ss), err, len(err)) != lib.SUCCESS:
        return lib.text(err.value)
    return None
