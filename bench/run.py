#!/usr/bin/env python3
"""Benchmark of mxfp6c's kernels on one GPU (DESIGN.md section 10), in one process: device copy
bandwidth, our code objects through libmxfp6rt, PyTorch eager, torch.compile and a Triton
baseline, every implementation checked against fp64 before it is timed.

    python3 bench/run.py --out bench/results

writes <date>-<gpu>.json, .md and .png into --out (after every kernel/shape, so a run cut short
keeps what it finished) and prints the Markdown table. bench/README.md says what each column means.
"""
import argparse
import datetime
import os
import pathlib
import shlex
import sys
import time
import traceback

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import mxfp6rt  # noqa: E402
import report  # noqa: E402

DEVICE = "cuda"


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(HERE / "results"), help="folder for the JSON, Markdown and PNG")
    ap.add_argument("--kernels", default=os.environ.get("MXFP6_GPU_KERNELS", str(mxfp6rt.REPO / "build" / "gpu_kernels")),
                    help="folder of code objects and their .json metadata (default: build/gpu_kernels)")
    ap.add_argument("--lib", default=None, help="libmxfp6rt.so (default: $MXFP6RT or build/lib/libmxfp6rt.so)")
    ap.add_argument("--compile-mode", default="max-autotune-no-cudagraphs",
                    help="torch.compile mode (no CUDA graphs, so its time is kernel time like the others')")
    ap.add_argument("--warmup-ms", type=float, default=50.0, help="do_bench warmup per implementation")
    ap.add_argument("--rep-ms", type=float, default=200.0, help="do_bench repetition time per implementation")
    ap.add_argument("--copy-gib", type=float, default=2.0, help="size of each buffer of the copy measurement")
    ap.add_argument("--only", action="append", default=[],
                    help="run only kernels/shapes whose name contains this (repeatable), e.g. ln_modulate_fwd")
    ap.add_argument("--skip", action="append", default=[], choices=["eager", "torch_compile", "triton"],
                    help="leave out a baseline (repeatable)")
    ap.add_argument("--time-budget", type=float, default=540.0,
                    help="seconds; a kernel/shape that would likely end past it is skipped and listed")
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--tag", default=None, help="file name suffix (default: from the GPU name, e.g. h200)")
    return ap.parse_args()


def log(t0, msg):
    print(f"[{time.perf_counter() - t0:7.1f}s] {msg}", flush=True)


def error_text(e):
    return f"{type(e).__name__}: {e}".strip()[:2000]


class Context:
    """What every kernel/shape shares: the device, loaded code objects, settings."""

    def __init__(self, args, torch, device, objects):
        self.args, self.torch, self.device, self.objects = args, torch, device, objects
        self._loaded = {}

    def kernel(self, code_path):
        key = str(code_path)
        if key not in self._loaded:
            self._loaded[key] = self.device.load(code_path)
        return self._loaded[key]


def poison(torch, outs):
    """0xFF bytes: NaN in bf16 and f32, so an element the kernel never wrote fails the check."""
    for o in outs:
        o.view(torch.uint8).fill_(0xFF)


def run_ours(ctx, p):
    """Every code object of p.kernel: checked (poisoned outputs, fp64 bounds, a second launch
    bit-identical), then timed. The best is the fastest that passed."""
    import measure
    torch = ctx.torch
    objects = ctx.objects.get(p.kernel, [])
    if not objects:
        return {"error": f"no {p.kernel} code objects for this GPU in {ctx.args.kernels}", "ok": False}
    outs = p.alloc_outputs()
    values = p.abi_values(outs)
    stream = torch.cuda.current_stream().cuda_stream
    entries = []
    for code_path, meta in objects:
        e = {"config": mxfp6rt.config_tag(meta), "code_object": code_path.name, "resources": meta.get("resources", {}),
             "block": meta.get("block"), "rows_per_program": meta.get("rows_per_program"), "ok": False}
        try:
            k = ctx.kernel(code_path)
            args, grid = k.pack(values), k.grid(p.rows)
            e["grid"] = list(grid)
            launch = lambda k=k, args=args, grid=grid: k.launch(args, grid, stream)
            poison(torch, outs)
            launch()
            torch.cuda.synchronize()
            check = p.check(outs)
            first = [o.clone() for o in outs]
            poison(torch, outs)
            launch()
            torch.cuda.synchronize()
            e["deterministic"] = all(torch.equal(a.view(torch.uint8), b.view(torch.uint8)) for a, b in zip(first, outs))
            del first
            e["check"] = check.summary()
            e["ok"] = check.ok() and e["deterministic"]
            e.update(measure.device_time(launch, ctx.args.warmup_ms, ctx.args.rep_ms))
        except Exception as ex:  # one bad code object must not end the run
            e["error"] = error_text(ex)
        entries.append(e)
    timed = [e for e in entries if e.get("median_ms") is not None]
    passed = [e for e in timed if e["ok"]]
    best = min(passed or timed, key=lambda e: e["median_ms"]) if timed else {"error": "no code object ran", "ok": False}
    return {**{k: v for k, v in best.items() if k != "all"}, "all": entries}


def run_baseline(ctx, p, fn, out_fn=None):
    """fn() runs the baseline; its first call is timed on the host (compile, autotune). The check
    runs on a later call: into poisoned outputs through out_fn where the baseline takes `out=`."""
    import measure
    torch = ctx.torch
    e = {"ok": False}
    try:
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        e["first_call_s"] = time.perf_counter() - t
        if out_fn is not None:
            outs = p.alloc_outputs()
            poison(torch, outs)
            out_fn(outs)
        else:
            outs = fn()
        torch.cuda.synchronize()
        check = p.check(outs)
        del outs
        e["check"] = check.summary()
        e["ok"] = check.ok()
        e.update(measure.device_time(fn, ctx.args.warmup_ms, ctx.args.rep_ms))
    except Exception as ex:
        e["error"] = error_text(ex)
    return e


def run_problem(ctx, p, seed):
    import measure
    import triton_baselines
    torch = ctx.torch
    rec = {"name": p.name, "kernel": p.kernel, "family": p.family, "label": p.label, "shape": p.shape,
           "tokens": p.tokens, "rows": p.rows, "min_bytes": p.min_bytes(), "bytes_formula": p.BYTES, "impls": {}}
    p.make(DEVICE, seed)
    try:
        # The same bytes moved by a plain copy: what this size allows, next to the big copy's ceiling.
        rec["copy_same_size"] = measure.copy_bandwidth(rec["min_bytes"] // 2, ctx.args.warmup_ms, ctx.args.rep_ms, DEVICE)
        rec["impls"]["mxfp6c"] = run_ours(ctx, p)
        if "eager" not in ctx.args.skip:
            rec["impls"]["eager"] = run_baseline(ctx, p, lambda: p.torch_fn(*p.args))
        if "torch_compile" not in ctx.args.skip:
            try:
                torch._dynamo.reset()  # a fresh cache per shape: no recompile limit, no silent fallback
                compiled = torch.compile(p.torch_fn, mode=ctx.args.compile_mode, dynamic=False, fullgraph=True)
            except Exception as ex:
                rec["impls"]["torch_compile"] = {"ok": False, "error": error_text(ex)}
            else:
                rec["impls"]["torch_compile"] = run_baseline(ctx, p, lambda: compiled(*p.args))
        if "triton" not in ctx.args.skip:
            tfn = triton_baselines.IMPLEMENTATIONS[p.kernel][0]
            tri = rec["impls"]["triton"] = run_baseline(ctx, p, lambda: tfn(*p.args),
                                                        out_fn=lambda outs: tfn(*p.args, out=outs))
            if "error" not in tri:
                tri["config"] = triton_baselines.best_config(p.kernel)
    finally:
        p.free()
        torch.cuda.empty_cache()
    return rec


def host_launch(ctx):
    """Host µs per launch of a one-program grid: ours through ctypes (arguments packed once, and
    packed from tensors on every call) and a direct Triton launch of the same problem."""
    import measure
    import problems
    import triton_baselines
    torch = ctx.torch
    objects = ctx.objects.get("ln_modulate_fwd", [])
    if not objects:
        return {"error": "no ln_modulate_fwd code object"}
    code_path, meta = objects[0]
    p = problems.LnModulate(tokens=1, tokens_per_sample=1)
    p.make(DEVICE, 1)
    outs = p.alloc_outputs()
    values = p.abi_values(outs)
    k = ctx.kernel(code_path)
    args, grid = k.pack(values), k.grid(1)
    stream = torch.cuda.current_stream().cuda_stream
    res = {"kernel": "ln_modulate_fwd", "config": mxfp6rt.config_tag(meta), "tokens": 1}
    res["mxfp6c_prepared_us"] = measure.host_us_per_call(lambda: k.launch(args, grid, stream))
    res["mxfp6c_pack_each_call_us"] = measure.host_us_per_call(
        lambda: k.launch_rows(p.abi_values(outs), 1, torch.cuda.current_stream().cuda_stream))
    x, scale, shift, sample_div, eps = p.args
    res["triton_direct_us"] = measure.host_us_per_call(
        triton_baselines.ln_modulate_fwd_launcher(x, scale, shift, *outs, sample_div, eps))
    return res


def environment(torch, triton, device):
    props = torch.cuda.get_device_properties(0)
    major, minor = torch.cuda.get_device_capability(0)
    env = {"gpu": props.name, "target": f"sm_{major}{minor}", "sms": props.multi_processor_count,
           "memory_gb": round(props.total_memory / 1e9, 1), "torch": torch.__version__,
           "triton": triton.__version__, "cuda": torch.version.cuda, "runtime_device": device.name,
           "runtime_platform": device.platform, "python": sys.version.split()[0]}
    l2 = getattr(props, "L2_cache_size", None)
    if l2:
        env["l2_mb"] = round(l2 / 1e6, 1)
    return env


def main():
    args = parse_args()
    t0 = time.perf_counter()
    import torch
    import triton
    import measure
    import problems

    torch.cuda.init()
    device = mxfp6rt.Runtime(args.lib).open_device("cuda")
    env = environment(torch, triton, device)
    objects = {}
    for code_path, meta in mxfp6rt.find_code_objects(args.kernels, target=env["target"]):
        objects.setdefault(meta["kernel"], []).append((code_path, meta))
    log(t0, f"{env['gpu']}: code objects in {args.kernels}: " +
        (", ".join(f"{k} x{len(v)}" for k, v in sorted(objects.items())) or "none"))

    tag = args.tag or env["gpu"].split()[-1].lower()
    stem = f"{datetime.date.today().isoformat()}-{tag}"
    for n in range(2, 100):  # never overwrite an earlier run of the same day
        if not (pathlib.Path(args.out) / f"{stem}.json").exists():
            break
        stem = f"{datetime.date.today().isoformat()}-{tag}-{n}"
    items = [p for p in problems.plan() if not args.only or any(s in p.name for s in args.only)]
    log(t0, f"{len(items)} kernel/shapes, time budget {args.time_budget:g} s: " + ", ".join(p.name for p in items))
    smallest = min((p.min_bytes() for p in items), default=0)
    doc = {
        "schema": 1, "date": datetime.date.today().isoformat(),
        "command": " ".join(["python3"] + [shlex.quote(a) for a in [os.path.relpath(sys.argv[0])] + sys.argv[1:]]),
        "environment": env,
        "method": {
            "timing": f"triton.testing.do_bench, median of the reps (warmup {args.warmup_ms:g} ms, rep "
                      f"{args.rep_ms:g} ms), CUDA events, L2 cleared (256 MB buffer zeroed) before every rep",
            "torch_compile": f"mode={args.compile_mode}, dynamic=False, fullgraph=True, recompiled per shape",
            "inputs": f"random (like the GPU tests), fresh per shape, not rotated: the smallest working set is "
                      f"{smallest / 1e6:.0f} MB against {env.get('l2_mb', '?')} MB of L2, and every rep starts "
                      "after the L2 clear",
            "checks": "every implementation against fp64 on the same inputs, with the GPU tests' bounds; ours "
                      "into NaN-poisoned outputs and launched twice (bit-identical)",
            "bytes": "minimal: each input read once, each output written once (formula per kernel in JSON)",
        },
        "copy": {}, "results": [], "skipped": [],
    }

    def save():
        return report.write(doc, args.out, stem)

    try:
        doc["copy"]["start"] = measure.copy_bandwidth(args.copy_gib * 2**30, args.warmup_ms, args.rep_ms, DEVICE)
        log(t0, f"device copy: {doc['copy']['start']['tbps']:.3f} TB/s")
        ctx = Context(args, torch, device, objects)
        try:
            doc["host_launch"] = host_launch(ctx)
        except Exception as ex:
            doc["host_launch"] = {"error": error_text(ex)}
        log(t0, f"host launch: {doc['host_launch']}")
        durations = []
        for i, p in enumerate(items):
            elapsed = time.perf_counter() - t0
            expected = max(durations) if durations else 30.0
            if elapsed + expected > args.time_budget:
                doc["skipped"].append({"name": p.name, "why": f"time budget {args.time_budget:g} s; run it with "
                                                              f"--only {p.name}"})
                log(t0, f"skip {p.name} (time budget)")
                continue
            start = time.perf_counter()
            try:
                rec = run_problem(ctx, p, args.seed + i)
            except Exception as ex:
                traceback.print_exc()
                rec = {"name": p.name, "kernel": p.kernel, "family": p.family, "label": p.label, "shape": p.shape,
                       "tokens": p.tokens, "min_bytes": p.min_bytes(), "impls": {}, "error": error_text(ex)}
            rec["seconds"] = time.perf_counter() - start
            durations.append(rec["seconds"])
            doc["results"].append(rec)
            report.finalize(doc)
            ours = rec["impls"].get("mxfp6c", {})
            log(t0, f"{p.name}: ours {ours.get('tbps') or 0:.3f} TB/s ({ours.get('config')}, ok={ours.get('ok')}); "
                    + ", ".join(f"{b} {(rec['impls'].get(b) or {}).get('tbps') or 0:.3f}" for b in report.BASELINES)
                    + f" [{rec['seconds']:.0f} s]")
            save()
        doc["copy"]["end"] = measure.copy_bandwidth(args.copy_gib * 2**30, args.warmup_ms, args.rep_ms, DEVICE)
        log(t0, f"device copy at the end: {doc['copy']['end']['tbps']:.3f} TB/s")
    finally:
        md = save()
        print(md, flush=True)
        log(t0, f"wrote {pathlib.Path(args.out) / stem}.json, .md, .png")


if __name__ == "__main__":
    main()
