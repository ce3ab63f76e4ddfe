#!/usr/bin/env python3
"""CPU smoke test of the benchmark harness, for CI (no GPU, no torch, no matplotlib needed):
every bench/*.py compiles; the ctypes table and structs match runtime/mxfp6rt.h; the library loads
and answers errors through mxrt_last_error; every code object's metadata packs into launch
arguments, raw and from tensors;
the MXFP6 encoder the packers are checked against reproduces the spec's worked examples (pure
Python: mxfp6_spec.self_test); the report derives figures and verdicts from a synthetic run.

    python3 bench/smoke_test.py [--lib build/lib/libmxfp6rt.so] [--kernels build/gpu_kernels]
"""
import argparse
import ctypes
import gzip
import json
import math
import pathlib
import py_compile
import re
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import mxfp6_spec  # noqa: E402
import partials  # noqa: E402
import mxfp6rt  # noqa: E402
import report  # noqa: E402

RESULTS = {"passed": 0, "failed": 0}


def case(name, fn):
    try:
        fn()
        RESULTS["passed"] += 1
        print(f"ok    {name}")
    except Exception as e:  # report every failure, not just the first
        RESULTS["failed"] += 1
        print(f"FAIL  {name}: {type(e).__name__}: {e}")


def compiles():
    for path in sorted(HERE.glob("*.py")):
        with tempfile.TemporaryDirectory() as d:
            py_compile.compile(str(path), cfile=str(pathlib.Path(d) / "x.pyc"), doraise=True)


# C spellings of the header -> the ctypes types the binding must declare for them.
C_TYPES = {
    "int": ctypes.c_int, "const char*": ctypes.c_char_p, "void*": ctypes.c_void_p, "const void*": ctypes.c_void_p,
    "void**": ctypes.POINTER(ctypes.c_void_p), "size_t": ctypes.c_size_t, "int64_t": ctypes.c_int64, "uint8_t": ctypes.c_uint8,
    "mxrt_device*": ctypes.c_void_p, "const mxrt_device*": ctypes.c_void_p, "mxrt_kernel*": ctypes.c_void_p,
    "const mxrt_kernel*": ctypes.c_void_p, "mxrt_device**": ctypes.POINTER(ctypes.c_void_p),
    "mxrt_kernel**": ctypes.POINTER(ctypes.c_void_p), "const mxrt_arg*": ctypes.POINTER(mxfp6rt.MxrtArg),
    "uint32_t[3]": ctypes.POINTER(ctypes.c_uint32), "const uint32_t[3]": ctypes.POINTER(ctypes.c_uint32),
    "const mxrt_param*": ctypes.POINTER(mxfp6rt.MxrtParam), "mxrt_arg*": ctypes.POINTER(mxfp6rt.MxrtArg),
    "size_t*": ctypes.POINTER(ctypes.c_size_t),
}


def header_prototypes(header):
    """{name: (return C type, [parameter C types])} of every MXRT_API function in the header."""
    text = re.sub(r"/\*.*?\*/", "", header.read_text(), flags=re.S)
    protos = {}
    for ret, name, params in re.findall(r"MXRT_API\s+([\w\s\*]+?)\s*\b(mxrt_\w+)\s*\(([^)]*)\)\s*;", text):
        types = []
        for p in params.split(","):
            p = " ".join(p.split())
            if p in ("void", ""):
                continue
            array = re.search(r"\[(\d+)\]$", p)
            p = re.sub(r"\[\d+\]$", "", p)
            ctype = re.sub(r"\s*\b\w+$", "", p)  # drop the parameter name
            ctype = re.sub(r"\s*\*", "*", ctype).strip() + (f"[{array.group(1)}]" if array else "")
            types.append(ctype)
        protos[name] = (re.sub(r"\s*\*", "*", " ".join(ret.split())), types)
    return protos


def signatures_match_header():
    protos = header_prototypes(mxfp6rt.REPO / "runtime" / "mxfp6rt.h")
    assert protos, "no prototypes parsed"
    assert set(protos) == set(mxfp6rt.SIGNATURES), (
        f"header only: {sorted(set(protos) - set(mxfp6rt.SIGNATURES))}, "
        f"binding only: {sorted(set(mxfp6rt.SIGNATURES) - set(protos))}")
    for name, (ret, params) in protos.items():
        restype, argtypes = mxfp6rt.SIGNATURES[name]
        assert C_TYPES[ret] == restype, f"{name}: returns {ret}, bound as {restype}"
        want = [C_TYPES[p] for p in params]
        assert want == argtypes, f"{name}: header ({', '.join(params)}), bound {argtypes}"


def arg_layout():
    # struct mxrt_arg { int32_t kind; union { void*, int32_t, int64_t, float } value; } on LP64.
    assert ctypes.sizeof(mxfp6rt.MxrtArg) == 16
    assert mxfp6rt.MxrtArg.value.offset == 8
    header = (mxfp6rt.REPO / "runtime" / "mxfp6rt.h").read_text()
    enum = re.findall(r"MXRT_ARG_(\w+)\s*=\s*(\d+)", header)
    assert {k.lower(): int(v) for k, v in enum} == mxfp6rt.ARG_KINDS


def param_layout():
    # struct mxrt_tensor { void*; int32_t dtype, ndim; int64_t sizes[8], strides[8]; } and
    # struct mxrt_param { int32_t kind; union { mxrt_tensor, int32_t, int64_t, float } value; }.
    header = (mxfp6rt.REPO / "runtime" / "mxfp6rt.h").read_text()
    assert int(re.search(r"#define MXRT_MAX_DIMS (\d+)", header).group(1)) == mxfp6rt.MAX_DIMS
    assert ctypes.sizeof(mxfp6rt.MxrtTensor) == 16 + 16 * mxfp6rt.MAX_DIMS
    assert mxfp6rt.MxrtParam.value.offset == 8
    assert ctypes.sizeof(mxfp6rt.MxrtParam) == 8 + ctypes.sizeof(mxfp6rt.MxrtTensor)
    dtypes = re.findall(r"MXRT_DTYPE_(\w+)\s*=\s*(\d+)", header)
    assert {k.lower(): int(v) for k, v in dtypes} == mxfp6rt.DTYPES
    kinds = re.findall(r"MXRT_PARAM_(\w+)\s*=\s*(\d+)", header)
    assert {k.lower(): int(v) for k, v in kinds} == mxfp6rt.PARAM_KINDS


class FakeTensor:
    """What pack_params reads of a torch tensor, at a made-up address: contiguous, or with the
    given element strides."""
    def __init__(self, dtype, shape, address=4096, strides=None):
        torch_names = {v: k for k, v in mxfp6rt.TORCH_DTYPES.items()}
        self.dtype, self.shape, self.address = torch_names[dtype], tuple(shape), address
        self.strides = tuple(strides) if strides is not None else None

    def data_ptr(self):
        return self.address

    def stride(self):
        if self.strides is not None:
            return self.strides
        strides, inner = [], 1
        for n in reversed(self.shape):
            strides.insert(0, inner)
            inner *= n
        return tuple(strides)


def params_pack(folder):
    """Every code object's "params" packs from tensors of its declared shapes (runtime sizes 4)."""
    objects = [(path, meta) for path, meta in mxfp6rt.find_code_objects(folder, recursive=True) if "params" in meta]
    assert objects, f"no code objects with 'params' in {folder}"
    for path, meta in objects:
        values = {}
        for p in meta["params"]:
            if p["kind"] == "tensor":
                values[p["name"]] = FakeTensor(p["dtype"], [d.get("const", 4) for d in p["dims"]])
            elif "default" not in p:
                values[p["name"]] = 8
        packed = mxfp6rt.pack_params(meta, values=values)
        kinds = [mxfp6rt.PARAM_KINDS["tensor" if p["kind"] == "tensor" else p["dtype"]] for p in meta["params"]]
        assert [s.kind for s in packed] == kinds, path
        for slot, p in zip(packed, meta["params"]):
            if p["kind"] == "tensor":
                assert slot.value.tensor.ndim == len(p["dims"]), path
                assert slot.value.tensor.dtype == mxfp6rt.DTYPES[p["dtype"]], path
        first = meta["params"][0]["name"]
        values.pop(first)
        try:
            mxfp6rt.pack_params(meta, values=values)
            raise AssertionError("a missing argument must raise")
        except TypeError as e:
            assert first in str(e), e


def library_errors(lib):
    rt = mxfp6rt.Runtime(lib)
    try:
        dev = rt.open_device()
        dev.close()  # a GPU machine: opening works
    except mxfp6rt.MxrtError as e:
        assert e.status == 2 and "mxrt_device_open" in str(e), e  # UNAVAILABLE, with the driver's reason
    grid = mxfp6rt.Grid()
    assert rt.lib.mxrt_kernel_grid_for_rows(None, 4, grid) == 1
    assert "kernel is NULL" in rt.last_error(), rt.last_error()
    assert rt.lib.mxrt_kernel_launch(None, grid, None, (mxfp6rt.MxrtArg * 1)(), 1) == 1
    assert rt.lib.mxrt_kernel_launch_tensors(None, None, (mxfp6rt.MxrtParam * 1)(), 1) == 1
    assert "mxrt_kernel_launch_tensors: kernel is NULL" in rt.last_error(), rt.last_error()


def metadata_packs(folder):
    objects = mxfp6rt.find_code_objects(folder, recursive=True)
    assert objects, f"no code objects in {folder}"
    for path, meta in objects:
        passed = mxfp6rt.passed_abi(meta)
        # The derived arguments (the runtime computes them) come last, each of an earlier one.
        assert meta["abi"][:len(passed)] == passed, path
        for a in meta["abi"][len(passed):]:
            assert a["kind"] == "i32" and a["of"] in {p["name"] for p in passed}, (path, a)
        values = {a["name"]: 256 if a["kind"] == "ptr" else 3 for a in passed}
        args = mxfp6rt.pack_args(meta, values)
        assert [a.kind for a in args] == [mxfp6rt.ARG_KINDS[a["kind"]] for a in passed], path
        assert meta["rows_per_program"] >= 1, path
        values.pop(passed[0]["name"])
        try:
            mxfp6rt.pack_args(meta, values)
            raise AssertionError("a missing ABI value must raise")
        except KeyError:
            pass


def config_tags(folder):
    """The label of every built schedule is the same read from the tunables mxfp6c lists as from
    the fixed names alone (the labels of earlier runs stay comparable), and a tunable only a probe
    declares shows in it."""
    objects = mxfp6rt.find_code_objects(folder, recursive=True)
    assert objects and all("tunables" in meta for _, meta in objects), "metadata without its tunables"
    for path, meta in objects:
        fixed = {k: v for k, v in meta.items() if k != "tunables"}
        assert mxfp6rt.config_tag(meta) == mxfp6rt.config_tag(fixed), path
    probe = {"config": {"C": 9216, "FMT": 1, "W": 128, "THREADS": 256, "MINPROGS": 0, "BASE": 1},
             "tunables": ["W", "THREADS", "MINPROGS", "BASE"]}
    assert mxfp6rt.config_tag(probe) == "W=128,THREADS=256,BASE=1", mxfp6rt.config_tag(probe)
    del probe["tunables"]
    assert mxfp6rt.config_tag(probe) == "W=128,THREADS=256", mxfp6rt.config_tag(probe)


class FakeLaunch(ctypes.Structure):
    """tests/runtime/fake_launch.h: what the fake driver's last cuLaunchKernel(Ex) received."""
    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("shared_bytes", ctypes.c_uint),
                ("stream", ctypes.c_void_p), ("max_dynamic_shared", ctypes.c_int), ("launches", ctypes.c_int),
                ("overlaps_previous", ctypes.c_bool), ("param_count", ctypes.c_int),
                ("params", ctypes.c_uint64 * 64)]


def fake_entry_ptx(meta):
    """A PTX entry with the metadata's ABI, which the fake driver records and does not run."""
    width = {"ptr": "u64", "i64": "u64", "i32": "u32", "f32": "f32"}
    params = ", ".join(f".param .{width[a['kind']]} p{i}" for i, a in enumerate(meta["abi"]))
    return f".version 8.0\n.target sm_90\n.address_size 64\n\n.visible .entry {meta['entry']}({params})\n{{\n    ret;\n}}\n"


def tensors_through_fake_driver(lib, fake_driver, folder):
    """ln_modulate_fwd's real metadata: launch_tensors reaches the driver as the compiled ABI with
    T and B from the shapes and the grid from T; a wrong shape is refused naming the argument;
    prepare_tensors gives the same raw launch."""
    found = mxfp6rt.find_code_objects(folder, kernel="ln_modulate_fwd", target="sm_90")
    assert found, f"no sm_90 ln_modulate_fwd in {folder}"
    meta = found[0][1]
    T, B, D = 5, 2, meta["config"]["D"]
    rt = mxfp6rt.Runtime(lib)
    dev = rt.open_device("cuda", driver_path=fake_driver)
    record = FakeLaunch.in_dll(ctypes.CDLL(fake_driver), "fake_cuda_last_launch")
    with tempfile.TemporaryDirectory() as d:
        code = pathlib.Path(d) / "k.ptx"
        code.write_text(fake_entry_ptx(meta))
        (pathlib.Path(d) / "k.ptx.json").write_text(json.dumps(meta))
        k = dev.load(code)
    mib = 1 << 20
    x, scale, shift, y = (FakeTensor("bf16", s, (i + 1) * mib) for i, s in enumerate([(T, D), (B, D), (B, D), (T, D)]))
    mean, rstd = FakeTensor("f32", (T,), 5 * mib), FakeTensor("f32", (T,), 6 * mib)
    k.launch_tensors(x, scale, shift, y, mean, rstd, sample_div=T)  # eps takes its default
    rows_per_program = meta["rows_per_program"]
    assert list(record.grid) == [(T + rows_per_program - 1) // rows_per_program, 1, 1], list(record.grid)
    # A forward does not wait for the previous grid (no OVERLAP): launched in stream order.
    assert not meta["waits_for_previous_grid"] and dev.overlaps_launches and not record.overlaps_previous
    params = list(record.params[:record.param_count])
    assert params[:6] == [mib * i for i in range(1, 7)], params
    assert params[6] == T and params[8:10] == [T, B], params
    # Then the runtime's multiplier and shift of each divisor (sample_div, B), which must divide
    # like the integer division they replace.
    derived = [a for a in meta["abi"] if "derived" in a]
    assert [(a["derived"], a["of"]) for a in derived] == [("divisor_multiplier", "sample_div"), ("divisor_shift", "sample_div"),
                                                          ("divisor_multiplier", "B"), ("divisor_shift", "B")], derived
    for d, (m, l) in zip([T, B], zip(params[10::2], params[11::2])):
        for n in [*range(0, 4 * d + 3), 2**31 - 1, 2**31 - 2, 1234567890]:
            assert (((m * n) >> 32) + n) >> l == n // d, (d, m, l, n)
    assert len(params) == 14, params
    assert abs(ctypes.c_float.from_buffer_copy(ctypes.c_uint32(params[7])).value - 1e-6) < 1e-12
    try:
        k.launch_tensors(x, FakeTensor("f32", (B, D), 2 * mib), shift, y, mean, rstd, sample_div=T)
        raise AssertionError("an f32 scale must be refused")
    except mxfp6rt.MxrtError as e:
        assert e.status == 1 and f"argument 'scale' (1): expected bf16[B, {D}], got f32[{B}, {D}]" in str(e), e
    launches = record.launches
    raw, grid = k.prepare_tensors(x, scale, shift, y, mean, rstd, sample_div=T, eps=1e-6)
    k.launch(raw, grid)
    assert record.launches == launches + 1 and list(record.params[:record.param_count]) == params
    # run.py's path: values by name (ABI sizes included), the grid checked against its row count.
    values = {"x": x, "scale": scale, "shift": shift, "y": y, "mean": mean, "rstd": rstd, "sample_div": T,
              "eps": 1e-6, "T": T, "B": B, "D": D}
    raw, grid = k.prepare(values, T)
    assert [a.value.i64 for a in raw[8:]] == [T, B] and list(grid) == list(record.grid)
    try:
        k.prepare(values, T + rows_per_program)
        raise AssertionError("a row count the shapes do not give must raise")
    except ValueError as e:
        assert "rows give" in str(e), e
    k.unload()
    dev.close()


def tree_chunks():
    """The checks' reduction depths (partials.tree_chunks, the ops layer's treeChunks in Python):
    the chunks multiply to P, every level but the last sums 4 to 32 partials."""
    for P in (72, 8192, 12288, 97, 1, 24 * 512):
        chunks = partials.tree_chunks(P)
        assert math.prod(chunks) == P and all(4 <= c <= 32 for c in chunks[:-1]), (P, chunks)


def spec_self_test():
    failures = mxfp6_spec.self_test(verbose=False)
    assert not failures, "; ".join(failures[:5])


def wide_packers(folder):
    """The packers at C != 3072 are in a subfolder (the benchmark's, or the op table's candidates):
    the GPU tests check the top folder's packers at C = 3072 and Flux's rows, the subfolders' at
    fewer rows."""
    for kernel in ("mxfp6_pack_rows", "mxfp6_pack_cols", "mxfp6_pack_dual"):
        for path, meta in mxfp6rt.find_code_objects(folder, kernel=kernel, recursive=True):
            if path.parent == pathlib.Path(folder):
                assert meta["config"].get("C") == 3072, f"{path}: C={meta['config'].get('C')} in the wrong folder"


def prologue_twins(folder):
    """Every code object of the prologue without bf16 output has its _bf16 twin (the same config)
    among the objects checked with it: the benchmark checks its blobs against the twin's, and so
    does the GPU test, which checks the top folder alone and the benchmark's subfolder together
    with the candidates (whose twins are the benchmark's)."""
    top = pathlib.Path(folder)

    def group(path):
        return "top" if path.parent == top else "bench and candidates"

    objects = mxfp6rt.find_code_objects(folder, recursive=True)
    twins = {(group(path), json.dumps(meta["config"], sort_keys=True))
             for path, meta in objects if meta["kernel"] == "norm_rope_qkv_bwd_pack_bf16"}
    plain = [(path, meta) for path, meta in objects if meta["kernel"] == "norm_rope_qkv_bwd_pack"]
    assert plain, f"no norm_rope_qkv_bwd_pack code objects in {folder}"
    for path, meta in plain:
        assert (group(path), json.dumps(meta["config"], sort_keys=True)) in twins, f"{path}: no _bf16 twin beside it"


def synthetic_doc():
    impl = lambda ms, ok=True: {"median_ms": ms, "p10_ms": ms, "p90_ms": ms, "ok": ok}
    rec = lambda tokens, ours, comp, tri, ok=True, kernel="ln_modulate_fwd", target=None: {
        "name": f"{kernel}:{tokens}", "kernel": kernel, "family": kernel, "label": f"T={tokens}", "tokens": tokens,
        "shape": {"T": tokens}, "min_bytes": int(4e8), **({"copy_target": target} if target else {}),
        "impls": {"mxfp6c": {**impl(ours, ok), "config": "ROWS=1", "all": [dict(impl(ours, ok), config="ROWS=1")]},
                  "eager": impl(1.0), "torch_compile": impl(comp), "triton": impl(tri, False)}}
    return {"date": "2000-01-01", "command": "python3 bench/run.py", "environment": {"gpu": "test"},
            "copy": {"start": {"tbps": 4.0, "bytes_moved": 1}, "end": {"tbps": 4.2, "bytes_moved": 1}},
            "host_launch": {"mxfp6c_prepared_us": 5.0}, "skipped": [{"name": "k:1", "why": "time budget"}],
            # 4e8 bytes in 0.1 ms = 4 TB/s = 95 % of 4.2; in 0.2 ms = 2 TB/s.
            # 0.11 ms: 3.64 TB/s = 87 % of 4.2: a pass against a backward's 85 %, a miss against 90 %.
            # 0.118 ms: 80.7 %, a pass against the dual packer's 80 %; 0.125 ms: 76.2 % and 0.13 ms:
            # 73.3 %, a pass and a miss against the prologue's 75 %.
            "results": [rec(16384, 0.1, 0.2, 0.3), rec(32768, 0.2, 0.1, 0.3), rec(4096, 0.2, 0.3, 0.3),
                        rec(65536, 0.1, 0.2, 0.3, ok=False), rec(16384, 0.11, 0.2, 0.3, kernel="ln_modulate_bwd",
                                                                 target=0.85),
                        rec(16384, 0.11, 0.2, 0.3, kernel="norm_rope_qkv_fwd", target=0.90),
                        rec(16384, 0.118, 0.2, 0.3, kernel="mxfp6_pack_dual",
                            target=report.TARGETS["column_dual_pack_copy_ratio"]),
                        rec(16384, 0.125, 0.2, 0.3, kernel="norm_rope_qkv_bwd_pack",
                            target=report.TARGETS["prologue_pack_copy_ratio"]),
                        rec(32768, 0.13, 0.2, 0.3, kernel="norm_rope_qkv_bwd_pack",
                            target=report.TARGETS["prologue_pack_copy_ratio"])]}


def report_verdicts():
    doc = report.finalize(synthetic_doc())
    assert doc["copy"]["ceiling_tbps"] == 4.2
    v = [r["verdict"] for r in doc["results"]]
    assert v[0] == {"copy": "pass", "torch_compile": "pass", "triton": "pass (baseline failed its check)"}, v[0]
    assert v[1]["copy"] == "miss" and v[1]["torch_compile"] == "miss", v[1]
    assert v[2]["copy"] == "n/a", v[2]
    assert v[3]["copy"] == "invalid" and v[3]["torch_compile"] == "invalid", v[3]
    assert v[4]["copy"] == "pass" and v[5]["copy"] == "miss", (v[4], v[5])
    assert [v[i]["copy"] for i in (6, 7, 8)] == ["pass", "pass", "miss"], v[6:]
    assert abs(doc["results"][0]["speedup"]["torch_compile"] - 2.0) < 1e-9
    # A baseline is judged by its p10: Triton at a 0.3 ms median but 0.09 ms p10 beats ours' 0.1 ms.
    fast_tenth = synthetic_doc()
    fast_tenth["results"][0]["impls"]["triton"].update(p10_ms=0.09, ok=True)
    fast_tenth = report.finalize(fast_tenth)["results"][0]
    assert fast_tenth["verdict"]["triton"] == "miss", fast_tenth["verdict"]
    assert abs(fast_tenth["speedup"]["triton"] - 0.9) < 1e-9, fast_tenth["speedup"]
    # Its TB/s comes from the same p10: 4e8 bytes in 0.09 ms.
    assert abs(fast_tenth["impls"]["triton"]["tbps"] - 4e8 / 0.09e-3 / 1e12) < 1e-9, fast_tenth["impls"]["triton"]
    assert doc["host_launch"]["verdict_python_op"] == "pass"
    # A kernel/shape measured by a --resume call is judged against that call's copy (4.0 TB/s here):
    # 4 TB/s is then 100 % of copy, not the 95 % of the first call's 4.2.
    resumed = synthetic_doc()
    resumed["resumed"] = [{"command": "python3 bench/run.py --resume x.json",
                           "copy": {"start": {"tbps": 3.9}, "end": {"tbps": 4.0}}}]
    resumed["results"][0]["call"] = 1
    resumed = report.finalize(resumed)
    assert abs(resumed["results"][0]["impls"]["mxfp6c"]["copy_ratio"] - 1.0) < 1e-9, resumed["results"][0]
    assert abs(resumed["results"][1]["impls"]["mxfp6c"]["copy_ratio"] - 2 / 4.2) < 1e-9, resumed["results"][1]
    assert "Resumed (call 1" in report.markdown(resumed)
    resumed["resumed"][0]["rerun"] = [resumed["results"][0]["name"]]
    assert f"measured again (earlier records under \"replaced\" in the JSON): {resumed['results'][0]['name']}" \
        in report.markdown(resumed)
    resumed["resumed"][0]["rerun_skipped"] = [resumed["results"][1]["name"]]
    assert f"their records those of earlier calls: {resumed['results'][1]['name']}" in report.markdown(resumed)
    with tempfile.TemporaryDirectory() as d:
        spread = synthetic_doc()
        spread["results"][0]["impls"]["triton"].update(p10_ms=0.25, p90_ms=0.4)
        # The backward at 110 µs: a pass of 96 µs and a reduction of 9 µs alone leave a 5 µs gap.
        spread["results"][4]["impls"]["mxfp6c"]["stages"] = [
            {"kernel": "ln_modulate_bwd", "config": "THREADS=384", "alone_median_ms": 0.096},
            {"kernel": "ln_modulate_bwd_reduce", "config": "W=768", "alone_median_ms": 0.009}]
        md = report.write(spread, d, "t", with_chart=False)
        assert (pathlib.Path(d) / "t.json").is_file() and (pathlib.Path(d) / "t.md").is_file()
        # A --resume reads the JSON as written or gzip-compressed, as bench/results keeps it.
        written = json.loads((pathlib.Path(d) / "t.json").read_text())
        (pathlib.Path(d) / "t.json.gz").write_bytes(gzip.compress((pathlib.Path(d) / "t.json").read_bytes()))
        for name in ("t.json", "t.json.gz"):
            assert report.read_doc(pathlib.Path(d) / name) == written, name
            assert report.doc_stem(pathlib.Path(d) / name) == "t", report.doc_stem(pathlib.Path(d) / name)
    # The baselines' spread beside ours: Triton 300 µs (p10 250, p90 400), ours 100 µs.
    assert "| 300.0 (250.0–400.0) | 100.0 (100.0–100.0) |" in md, md
    assert "| ln_modulate_fwd | T=16384 |" in md and "4.00" in md and "✗" in md and "not run (time budget)" in md, md
    assert "pass (≥85%)" in md and "miss (≥90%)" in md, md
    assert "pass (≥80%)" in md and "pass (≥75%)" in md and "miss (≥75%)" in md, md
    assert ("| ln_modulate_bwd | T=16384 | ln_modulate_bwd THREADS=384: 96.0; ln_modulate_bwd_reduce W=768: 9.0 "
            "| 105.0 | 110.0 | 5.0 |") in md, md
    # The standing: 7 kernel/shapes at T >= 16384 with a valid result, 4 pass (T=16384 ln_modulate_fwd,
    # ln_modulate_bwd at 87 % against 85, the dual packer, the prologue at 76.2 %), and T=65536
    # failed its check; torch.compile beats ours once (0.2 ms against 0.1); Triton failed every
    # check but is slower everywhere.
    assert ("Copy targets (at T ≥ 16384 tokens): 4 of 7 kernel/shapes pass; 1 more have no valid result of ours "
            "(each a miss): ln_modulate_fwd:65536.") in md, md
    assert "Faster than torch.compile: 7 of 8 kernel/shapes with" in md, md
    assert "Faster than Triton (baseline): 8 of 8 kernel/shapes with a valid result of ours and a timed baseline (8 of " \
           "them against a baseline that failed its check)." in md, md
    # Misses: T=32768 at 4e8 B / 0.2 ms = 2 TB/s, 47.6 % of 4.2, 42.4 short of 90; 4e8 B at
    # 0.9 * 4.2 TB/s takes 105.8 µs. The whole-QKV forward at 0.11 ms: 86.6 %, 3.4 short.
    assert "| ln_modulate_fwd | T=32768 | 90 | 47.6 | 42.4 | 200.0 | 105.8 |" in md, md
    assert "| norm_rope_qkv_fwd | T=16384 | 90 | 86.6 | 3.4 | 110.0 | 105.8 |" in md, md
    assert "| norm_rope_qkv_bwd_pack | T=32768 | 75 | 73.3 | 1.7 | 130.0 | 127.0 |" in md, md
    assert "| ln_modulate_fwd | T=32768 | torch.compile | 200.0 | 100.0 | 100.0 |" in md, md
    # A packer's format follows its label: E3M2 and E2M3 share "T=16384 C=3072".
    packer = synthetic_doc()
    packer["results"][6].update(label="T=16384 C=3072", shape={"T": 16384, "C": 3072, "format": "E2M3"})
    assert "| mxfp6_pack_dual | T=16384 C=3072 E2M3 | 400.0 |" in report.markdown(report.finalize(packer))


def report_redrawn_from_json():
    """A call writes its .json and .md after every kernel/shape, without the chart; report.py
    draws the same Markdown again from the .json (or the .json.gz results/ keeps)."""
    import subprocess
    with tempfile.TemporaryDirectory() as d:
        d = pathlib.Path(d)
        md = report.write(synthetic_doc(), d, "run", with_chart=False)
        assert not (d / "run.png").exists() and (d / "run.md").read_text() == md
        (d / "run.json.gz").write_bytes(gzip.compress((d / "run.json").read_bytes()))
        for src in ("run.json", "run.json.gz"):
            out = d / src.replace(".", "_")
            subprocess.run([sys.executable, str(HERE / "report.py"), str(d / src), "--out", str(out), "--no-chart"],
                           check=True, capture_output=True)
            assert (out / "run.md").read_text() == md, src
            assert not (out / "run.json").exists(), "drawing again leaves the JSON alone"


def report_amd_resources():
    """The best plans' code objects joined to an amd_resources table: per launch of a plan, a
    refusal and a dropped tunable shown, a row from other sources marked stale, a missing row
    named, and the newest table picked by date, then number."""
    doc = synthetic_doc()
    dual, prologue, fwd = doc["results"][6], doc["results"][7], doc["results"][0]
    dual["impls"]["mxfp6c"].update(code_object="dual.code", resources={"registers": 64})
    prologue["impls"]["mxfp6c"].update(code_object="pass.code + reduce.code", stages=[
        {"kernel": "norm_rope_qkv_bwd_pack", "config": "THREADS=256", "registers": 80},
        {"kernel": "norm_rope_dw_reduce", "config": "THREADS=32", "registers": 30}])
    fwd["impls"]["mxfp6c"].update(code_object="fwd.code", resources={"registers": 40})
    occ = lambda n, f, limit: {"occupancy": {"programs_per_unit": n, "fraction": f, "limit": limit}}
    rows = [{"code_object": "dual.code", "sm_90": {"registers": 64, "shared_bytes": 84064, **occ(2, 0.5, "registers")},
             "gfx942": {"refused": "needs 86112 bytes of shared memory"},
             "gfx950": {"registers": 92, "sgprs": 30, "shared_bytes": 86112, "dropped": ["MINPROGS"],
                        **occ(1, 0.25, "shared")}},
            {"code_object": "pass.code", "sm_90": {"registers": 80, "shared_bytes": 30848, **occ(3, 0.375, "registers")},
             "gfx942": {"registers": 144, "sgprs": 72, "shared_bytes": 30848, "lowered": {"MINPROGS": 2},
                        **occ(2, 0.25, "shared")},
             "gfx950": {"error": "mxfp6c: error: x\nf.mxk:1:8: error: why", "reason": "why"}},
            {"code_object": "reduce.code", "sm_90": {"registers": 28}, "gfx942": {}, "gfx950": {}}]
    md = report.markdown(report.finalize(report.attach_amd_resources(doc, rows, "r.json")))
    assert "## Our best plans' code objects on AMD" in md and "`r.json`" in md, md
    assert ("| mxfp6_pack_dual | T=16384 | mxfp6_pack_dual ROWS=1 | 64 | 84064 | 50% (2, registers) | "
            "refused: needs 86112 bytes of shared memory |  |  |  | 92 (MINPROGS=0) | 30 | 86112 | 25% (1, shared) |") in md, md
    assert ("| norm_rope_qkv_bwd_pack | T=16384 | norm_rope_qkv_bwd_pack THREADS=256 | 80 | 30848 | 38% (3, registers) "
            "| 144 (MINPROGS=2) | 72 | 30848 | 25% (2, shared) | error: why |") in md, md
    assert "| norm_rope_dw_reduce THREADS=32 | 28 (stale: 30 in this run) |" in md, md
    assert "| ln_modulate_fwd | T=16384 | ln_modulate_fwd ROWS=1 | not in the table: run bench/amd_resources.py |" in md, md
    # A plan naming more code objects than its recorded stages still lists each launch.
    fwd["impls"]["mxfp6c"]["code_object"] = "fwd.code + pass.code"
    md = report.markdown(report.finalize(report.attach_amd_resources(doc, rows, "r.json")))
    assert "| ln_modulate_fwd | T=16384 | pass.code | 80 (not checked: this run's registers unknown) |" in md, md
    # A table written before code objects were named joins nothing, and says so.
    md = report.markdown(report.finalize(report.attach_amd_resources(doc, [{"kernel": "k"}], "old.json")))
    assert "the table names no code objects (written before the join)" in md, md
    # No table: what an earlier call attached is gone.
    md = report.markdown(report.finalize(report.attach_amd_resources(doc, None, None)))
    assert "code objects on AMD" not in md and "amd_resources" not in doc and \
        all("amd_resources" not in r["impls"]["mxfp6c"] for r in doc["results"]), md
    # amd_resources.py's reading of mxfp6c's messages: the reason is the last line naming an error.
    import amd_resources
    message = ("mxfp6c: error: cannot generate code for kernel 'k':\n"
               "k.mxk:3:8: error: kernel 'k' needs 86112 bytes of shared memory, more than the 65536 a program may use on gfx942")
    assert amd_resources.reason(message) == ("kernel 'k' needs 86112 bytes of shared memory, more than the 65536 a "
                                             "program may use on gfx942"), amd_resources.reason(message)
    # ... and the most programs a refused MINPROGS leaves resident, for shared memory or threads.
    shared = ("k.mxk:57:8: error: MINPROGS = 3 programs of 30848 bytes of shared memory cannot be resident on one CU "
              "of gfx942: its 65536 bytes hold 2; lower MINPROGS or the shared memory")
    threads = "k.mxk:5:8: error: MINPROGS = 8 programs of 512 threads cannot be resident on one SM of sm_90: at most 4"
    assert [amd_resources.most_resident(m) for m in (shared, threads, message)] == [2, 4, 0]
    with tempfile.TemporaryDirectory() as d:
        for name in ("2026-12-02-resources.json", "2026-12-02-resources-6.json", "2026-12-01-resources-9.json",
                     "2026-12-02-h200.json"):
            (pathlib.Path(d) / name).write_text("[]")
        assert run_module().newest_resources_table(pathlib.Path(d)).name == "2026-12-02-resources-6.json"


def run_module():
    import importlib.util
    spec = importlib.util.spec_from_file_location("bench_run", HERE / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def file_tags_from_gpu_names():
    tag = run_module().gpu_tag
    for name, want in [("NVIDIA H200", "h200"), ("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA H100 PCIe", "h100"),
                       ("AMD Instinct MI300X", "mi300x"), ("NVIDIA GeForce RTX 4090", "4090")]:
        assert tag(name) == want, (name, tag(name), want)


def ncu_summary_table():
    """bench/ncu_summary.py on a raw page shaped as Nsight Compute prints it: two launches (one
    with a templated name), units on the time, the busiest L2 unit first."""
    import ncu_summary
    page = """[1] python3.12@127.0.0.1
  mxfp6_pack_dual (3072, 1, 1)x(256, 1, 1), Context 1, Stream 7, Device 0, CC 9.0
  Metric Name                          Metric Unit   Metric Value
  ------------------------------------ ----------- ------------
  device__attribute_architecture                            384
  dram__cycles_active.avg.pct_of_peak_sustained_elapsed   %   63.80
  gpu__time_duration.sum                                  us   52.32
  lts__ltcfabric2ltc_cycles_active.avg.pct_of_peak_sustained_elapsed  %  88.62
  lts__t_tag_requests.avg.pct_of_peak_sustained_elapsed   %   68.40
  lts__t_sectors_srcunit_tex_op_read.sum             sector   3,145,734
  lts__t_requests_srcunit_tex_op_read.sum                   1,421,188

  void at::vectorized_elementwise_kernel<4, at::bitwise_not_kernel_cuda(at::TensorIteratorBase &)> (1, 1, 1)x(128, 1, 1)
  Metric Name                          Metric Unit   Metric Value
  ------------------------------------ ----------- ------------
  gpu__time_duration.sum                                  ns   41,220
""".splitlines(True)
    rows = ncu_summary.launches(page)
    assert [name for name, _ in rows] == ["mxfp6_pack_dual", "vectorized_elementwise_kernel"], rows
    dual, copy = rows[0][1], rows[1][1]
    assert dual["gpu__time_duration.sum"] == 52.32 and abs(copy["gpu__time_duration.sum"] - 41.22) < 1e-9, rows
    assert [k for k, _ in ncu_summary.top(dual, "lts__", 2)][0].startswith("lts__ltcfabric2ltc"), dual
    assert ncu_summary.per_request(dual, "read") == "3.15 M / 2.21", ncu_summary.per_request(dual, "read")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default=mxfp6rt.default_library_path())
    ap.add_argument("--kernels", default=str(mxfp6rt.REPO / "build" / "gpu_kernels"))
    ap.add_argument("--fake-driver", help="tests/runtime's stand-in libcuda, to launch through on a CPU")
    args = ap.parse_args()
    case("every bench/*.py compiles", compiles)
    case("ctypes signatures match runtime/mxfp6rt.h", signatures_match_header)
    case("mxrt_arg layout and kind codes", arg_layout)
    case("mxrt_param/mxrt_tensor layout, dtype and param kind codes", param_layout)
    if pathlib.Path(args.lib).is_file():
        case("library loads; errors come back through mxrt_last_error", lambda: library_errors(args.lib))
    else:
        print(f"skip  library checks: no {args.lib}")
    if pathlib.Path(args.kernels).is_dir():
        case("every code object's metadata packs into launch arguments", lambda: metadata_packs(args.kernels))
        case("packers at C != 3072 only in subfolders", lambda: wide_packers(args.kernels))
        case("every prologue code object has its _bf16 twin beside it", lambda: prologue_twins(args.kernels))
        case("every code object's params pack from tensors", lambda: params_pack(args.kernels))
        case("schedule labels from the declared tunables", lambda: config_tags(args.kernels))
        if args.fake_driver and pathlib.Path(args.lib).is_file():
            case("launches from tensors reach the fake driver as the compiled ABI",
                 lambda: tensors_through_fake_driver(args.lib, args.fake_driver, args.kernels))
        else:
            print("skip  launches from tensors: no --fake-driver")
    else:
        print(f"skip  metadata checks: no {args.kernels}")
    case("MXFP6 spec encoder: worked examples, integer expressions == transcription", spec_self_test)
    case("reduction tree chunks", tree_chunks)
    case("report: bandwidth, ratios, speedups, pass/miss", report_verdicts)
    case("report: the Markdown drawn again from a run's JSON", report_redrawn_from_json)
    case("report: our best plans' code objects on AMD, from a resources table", report_amd_resources)
    case("run: result files named by the card's model", file_tags_from_gpu_names)
    case("ncu_summary: launches, units and the busiest L2 unit from a raw page", ncu_summary_table)
    print(f"{RESULTS['passed']} passed, {RESULTS['failed']} failed")
    return 1 if RESULTS["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
