#!/usr/bin/env python3
"""Benchmark of mxfp6c's kernels on one GPU (docs/architecture.md section 8), in one process: device copy
bandwidth, our code objects through libmxfp6rt, PyTorch eager, torch.compile and a Triton
baseline, every implementation checked before it is timed (against fp64 with the GPU tests'
bounds; the MXFP6 packers bit for bit against the spec's encoder).

    python3 bench/run.py --out bench/results

writes <date>-<gpu>.json, .md and .png into --out (after every kernel/shape, so a run cut short
keeps what it finished) and prints the Markdown table. A run that stops at its time budget lists
the kernel/shapes it skipped; `--resume <that>.json` in another process runs them and completes
the same files. bench/README.md says what each column means.
"""
import argparse
import datetime
import os
import pathlib
import re
import shlex
import sys
import time
import traceback

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import mxfp6rt  # noqa: E402
import ours  # noqa: E402
import precompile  # noqa: E402
import report  # noqa: E402
import tuned  # noqa: E402

DEVICE = "cuda"


def newest_resources_table(folder=HERE / "results"):
    """The newest amd_resources.py table: by date, then by its number (<date>-resources-N.json,
    the first of a day unnumbered)."""
    def order(path):
        m = re.fullmatch(r"(\d{4}-\d{2}-\d{2})-resources(?:-(\d+))?\.json", path.name)
        return (m.group(1), int(m.group(2) or 1)) if m else None
    tables = [p for p in folder.glob("*-resources*.json") if order(p)]
    return max(tables, key=order) if tables else None


def amd_resources_table(choice):
    """(path, rows) of the table the report joins; (None, None) for --resources none or no table."""
    path = None if choice == "none" else pathlib.Path(choice) if choice else newest_resources_table()
    return (path, report.read_doc(path)) if path else (None, None)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(HERE / "results"), help="folder for the JSON, Markdown and PNG")
    ap.add_argument("--kernels", default=os.environ.get("MXFP6_GPU_KERNELS", str(mxfp6rt.REPO / "build" / "gpu_kernels")),
                    help="folder of code objects and their .json metadata, subfolders included "
                         "(default: build/gpu_kernels)")
    ap.add_argument("--lib", default=None, help="libmxfp6rt.so (default: $MXFP6RT or build/lib/libmxfp6rt.so)")
    ap.add_argument("--compile-mode", default="auto",
                    help="torch.compile mode for every kernel; auto (default): max-autotune-no-cudagraphs for "
                         "the forward kernels, default for the backward kernels and the packers (max-autotune's "
                         "search over their graphs would not fit the time budget). No CUDA graphs in any mode, so "
                         "its time is kernel time like the others'")
    ap.add_argument("--warmup-ms", type=float, default=25.0, help="warmup per implementation (measure.device_time)")
    ap.add_argument("--rep-ms", type=float, default=100.0,
                    help="repetition time per implementation (100 ms: hundreds of reps at the largest "
                         "shapes, each after the L2 clear)")
    ap.add_argument("--screen-ms", type=float, default=10.0,
                    help="where a kernel/shape has more plans of ours than --finalists, each is first timed over "
                         "this many ms of reps (0: every plan timed in full)")
    ap.add_argument("--finalists", type=int, default=3,
                    help="the plans of ours, fastest in the brief timing, then timed in full (default 3)")
    ap.add_argument("--copy-gib", type=float, default=2.0, help="size of each buffer of the copy measurement")
    ap.add_argument("--only", action="append", default=[],
                    help="run only kernels/shapes whose name contains this (repeatable), e.g. ln_modulate_fwd")
    ap.add_argument("--skip", action="append", default=[], choices=["eager", "torch_compile", "triton"],
                    help="leave out a baseline (repeatable)")
    ap.add_argument("--time-budget", type=float, default=540.0,
                    help="seconds since start; a kernel/shape that would likely end past it is skipped and listed "
                         "(default 540: the whole run, final copy and report included, inside one device call "
                         "of 10 minutes)")
    ap.add_argument("--precompile-workers", type=int, default=None,
                    help="worker processes compiling the baselines before anything is timed (precompile.py; "
                         "default: the cores but two, at most 12; 0: compile in the measuring process)")
    ap.add_argument("--resume", default=None, metavar="JSON",
                    help="a run's JSON that stopped at its time budget: run the kernel/shapes it skipped (and match "
                         "--only, if given) and add them to it, writing its files again into --out under its name; "
                         "each kernel/shape keeps the copy bandwidth of the call that measured it")
    ap.add_argument("--rerun", action="append", default=[], metavar="NAME",
                    help="with --resume: also measure again the kernel/shapes whose name contains NAME "
                         "(repeatable), each new record taking the old one's place (the old one is kept in the "
                         "JSON under \"replaced\"); for code objects built after the run")
    ap.add_argument("--resources", default=None, metavar="JSON",
                    help="an amd_resources.py table whose gfx942 and gfx950 figures the report shows beside our "
                         "best plans' (.json or .json.gz; default: the newest results/*-resources*.json; 'none' leaves them out)")
    ap.add_argument("--seed", type=int, default=20261201,
                    help="the inputs' random seed: each kernel/shape takes it plus its index in this call's list")
    ap.add_argument("--tag", default=None, help="file name suffix (default: from the GPU name, e.g. h200)")
    ap.add_argument("--db", default=None, metavar="DB",
                    help="a kernel database the tuner filled (mxfp6-tune): each kernel/shape also times the plan "
                         "its key's selection chose, in full, and reports its regret against the fastest plan "
                         "(bench/tuned.py matches plans by their code objects' sha256)")
    args = ap.parse_args()
    if args.rerun and not args.resume:
        ap.error("--rerun replaces records of an earlier run: it needs --resume <that run>.json")
    if args.finalists < 1:
        ap.error("--finalists must be at least 1 (to time every plan in full, pass --screen-ms 0)")
    return args


def log(t0, msg):
    print(f"[{time.perf_counter() - t0:7.1f}s] {msg}", flush=True)


def error_text(e):
    return f"{type(e).__name__}: {e}".strip()[:2000]


class Context:
    """What every kernel/shape shares: the device, the code objects at hand, settings."""

    def __init__(self, args, torch, device, catalog, target):
        self.args, self.torch, self.device, self.catalog, self.target = args, torch, device, catalog, target
        self.warm = {}  # problem name -> what precompile.py's worker did for its baselines
        self.tuned = tuned.load(args.db) if args.db else None  # the --db selections (bench/tuned.py)


def _bits(torch, t):
    """t's bits as integers of its element size (a view, whatever its strides)."""
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def poison(torch, outs, byte=0xFF):
    """Fills every byte: 0xFF is NaN in bf16 and f32, so an element the kernel never wrote fails
    the check; the second launch goes into 0xA5 bytes, so an unwritten element (of any type,
    packed bytes included) also differs between the two launches."""
    for o in outs:
        # The integer view is signed except for bytes (uint8): the value must fit it.
        value = int.from_bytes(bytes([byte]) * o.element_size(), "little", signed=o.element_size() > 1)
        _bits(torch, o).fill_(value)


def run_twin(ctx, p, twin):
    """Runs a plan whose outputs another plan's check compares with (ours.Plan.twin: ours at the
    same plan with more outputs), once, untimed, into poisoned outputs and scratch; its outputs."""
    outs = p.alloc_outputs(twin=True)
    prepared = twin.prepare(p, outs, ctx.device, ctx.torch)
    poison(ctx.torch, tuple(outs) + tuple(prepared.scratch))
    prepared.launch()
    ctx.torch.cuda.synchronize()
    return outs


def run_ours(ctx, p):
    """Every plan of ours the code objects at hand make for the problem's key (bench/ours.py: one
    launch, or a sequence such as a backward and its partials' reduction, composed by the ops
    layer and timed together as one measurement): checked (poisoned outputs and
    scratch, the problem's check -- against the outputs of the plan's twin where it has one --, a
    second launch bit-identical), then timed. With more plans than --finalists, each is first
    timed briefly (--screen-ms), and the fastest that passed are timed in full; the others keep
    their brief timing, marked. The best is the fastest fully timed plan that passed."""
    import measure
    torch = ctx.torch
    args = ctx.args
    plans, key = ours.plans(p, ctx.catalog, ctx.target)
    if not plans:
        return {"error": f"the code objects in {args.kernels} make no plan of {key} (objects of: "
                         f"{', '.join(ctx.catalog.kernels()) or 'none'})", "ok": False}
    screen = args.screen_ms > 0 and len(plans) > args.finalists
    winner, winner_error = None, None
    if ctx.tuned is not None:
        try:
            winner = tuned.winner_for(ctx.tuned, p)
        except ValueError as ex:  # the problem fits several keys: reported, the run goes on
            winner_error = str(ex)
    outs = p.alloc_outputs()
    entries, plan_of = [], {}  # plan_of: id(entry) -> its plan, to time it again
    for plan in plans:
        first_meta = plan.metas[0]
        e = {"config": plan.config, "code_object": " + ".join(path.name for path in plan.code_paths),
             "resources": first_meta.get("resources", {}), "block": first_meta.get("block"),
             "rows_per_program": first_meta.get("rows_per_program"), "ok": False}
        if plan.twin is not None:
            e["checked_against"] = " + ".join(path.name for path in plan.twin.code_paths)
        # The winner's plan: the same code objects, or the same plan id (the same kernels at the same
        # configs, compiled into the folder by another command than into the database).
        if winner is not None and (winner.plan_id == plan.config or winner.launched_by(
                [tuned.file_sha256(path) for path in plan.code_paths], plan.plan.get("partials", 0))):
            e["tuned"] = winner.key
        prepared = None
        try:
            prepared = plan.prepare(p, outs, ctx.device, torch)
            launch = prepared.launch
            e["grid"] = list(prepared.infos[0][1])
            if len(prepared.infos) > 1:
                e["stages"] = [{"kernel": plan.plan["launches"][i]["kernel"], "config": mxfp6rt.config_tag(plan.metas[i]),
                                "role": plan.plan["launches"][i]["role"], "grid": list(grid),
                                "block": plan.metas[i].get("block"),
                                "registers": (plan.metas[i].get("resources") or {}).get("registers")}
                               for i, grid in prepared.infos]
            plan_of[id(e)] = plan

            poison(torch, tuple(outs) + tuple(prepared.scratch))
            launch()
            torch.cuda.synchronize()
            if plan.twin is None:
                check = plan.check(outs)
            else:
                twin_outs = run_twin(ctx, p, plan.twin)
                check = plan.check(outs, twin_outs)
                del twin_outs
            first = [o.clone() for o in outs]
            poison(torch, tuple(outs) + tuple(prepared.scratch), 0xA5)
            launch()
            torch.cuda.synchronize()
            e["deterministic"] = all(torch.equal(_bits(torch, a), _bits(torch, b)) for a, b in zip(first, outs))
            del first
            e["check"] = check.summary()
            e["ok"] = check.ok() and e["deterministic"]
            if screen:
                e.update(measure.device_time(launch, args.screen_ms / 2, args.screen_ms), timing="screen")
            else:
                e.update(measure.device_time(launch, args.warmup_ms, args.rep_ms), timing="full")
        except Exception as ex:  # one bad code object must not end the run
            e["error"] = error_text(ex)
        finally:
            del prepared
        entries.append(e)
    if screen:
        screened = sorted((e for e in entries if e.get("median_ms") is not None and e["ok"]),
                          key=lambda e: e["median_ms"])
        # The tuner's plan is always timed in full, a finalist or not, so its regret is measured.
        finalists = screened[:args.finalists] + [e for e in screened[args.finalists:] if e.get("tuned")]
        for e in finalists:
            try:
                prepared = plan_of[id(e)].prepare(p, outs, ctx.device, torch)
                screen_ms = e["median_ms"]
                e.update(measure.device_time(prepared.launch, args.warmup_ms, args.rep_ms), timing="full",
                         screen_median_ms=screen_ms)
                del prepared
            except Exception as ex:
                e.update(error=error_text(ex), ok=False)
    timed = [e for e in entries if e.get("median_ms") is not None and e.get("timing") == "full"]
    passed = [e for e in timed if e["ok"]]
    best = min(passed or timed, key=lambda e: e["median_ms"]) if timed else {"error": "no code object ran", "ok": False}
    if len(best.get("stages", ())) > 1 and id(best) in plan_of:
        time_each_launch(ctx, p, best, plan_of[id(best)], outs)
    result = {**{k: v for k, v in best.items() if k != "all"}, "all": entries}
    if ctx.tuned is not None:
        result["tuned"] = {"error": winner_error} if winner_error else tuned_result(winner, entries, best)
    return result


def tuned_result(winner, entries, best):
    """The --db selection of this kernel/shape's key beside the fastest plan: its regret, or why
    there is none."""
    if winner is None:
        return {"error": "no selection for this key in the database"}
    out = {"key": winner.key, "plan": winner.plan_id, "rule": winner.rule}
    mine = [e for e in entries if e.get("tuned")]
    if not mine:
        return {**out, "error": "the selection's code objects are not among this run's plans"}
    e = mine[0]
    if not e.get("ok") or e.get("timing") != "full" or best.get("median_ms") is None:
        return {**out, "config": e["config"], "error": e.get("error") or "the selection's plan failed its check"}
    return {**out, "config": e["config"], "median_ms": e["median_ms"], "regret": tuned.regret(best, e)}


def time_each_launch(ctx, p, best, plan, outs):
    """Times each launch of the best multi-launch plan on its own (median, L2 cleared before every
    rep like the plan's measurement), so the results show what the reduction of the partials and
    the launch boundary cost: the plan's time minus the sum of its launches alone is the gap
    between them (negative where a launch alone reads from DRAM what, in the plan, the launch
    before it left in L2)."""
    import measure
    prepared = plan.prepare(p, outs, ctx.device, ctx.torch)
    for i, st in enumerate(best["stages"]):
        t = measure.device_time(lambda i=i: prepared.launch_one(i), ctx.args.warmup_ms, ctx.args.rep_ms)
        st["alone_median_ms"] = t["median_ms"]


def run_baseline(ctx, p, fn, out_fn=None, cold_s=None):
    """fn() runs the baseline; its first call is timed on the host (compile, autotune: from the
    caches where a worker compiled it first, whose cold time is cold_s). The check
    runs on a later call: into poisoned outputs through out_fn where the baseline takes `out=`.
    What the call returns is checked: the outputs, then any intermediates the check uses (the
    unfused prologue's d(mixed_qkv))."""
    import measure
    torch = ctx.torch
    e = {"ok": False}
    try:
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        e["first_call_s"] = time.perf_counter() - t
        if cold_s is not None:
            e["precompiled_s"] = cold_s
        if out_fn is not None:
            outs = p.alloc_outputs()
            poison(torch, outs)
            ret = tuple(out_fn(outs))
            assert len(ret) >= len(outs) and all(r is o for r, o in zip(ret, outs)), \
                "a baseline called with out= must return the given outputs first"
            outs = ret
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


def compile_mode(ctx, p):
    return p.compile_mode_auto if ctx.args.compile_mode == "auto" else ctx.args.compile_mode


def run_problem(ctx, p, seed, warm=None):
    import measure
    import triton_baselines
    torch = ctx.torch
    rec = {"name": p.name, "kernel": p.kernel, "family": p.family, "label": p.label, "shape": p.shape,
           "tokens": p.tokens, "rows": p.rows, "min_bytes": p.min_bytes(), "bytes_formula": p.BYTES,
           "copy_target": p.copy_target, "compile_mode": compile_mode(ctx, p), "impls": {}}
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
                compiled = torch.compile(p.compile_fn or p.torch_fn, mode=rec["compile_mode"], dynamic=False,
                                         fullgraph=True)
            except Exception as ex:
                rec["impls"]["torch_compile"] = {"ok": False, "error": error_text(ex)}
            else:
                rec["impls"]["torch_compile"] = run_baseline(ctx, p, lambda: compiled(*p.args),
                                                             cold_s=(warm or {}).get("torch_compile_s"))
        if "triton" not in ctx.args.skip and p.kernel in triton_baselines.IMPLEMENTATIONS:
            tfn = triton_baselines.IMPLEMENTATIONS[p.kernel][0]
            tri = rec["impls"]["triton"] = run_baseline(ctx, p, lambda: tfn(*p.args),
                                                        out_fn=lambda outs: tfn(*p.args, out=outs),
                                                        cold_s=(warm or {}).get("triton_s"))
            if "error" not in tri:
                tri["config"] = triton_baselines.best_config(p.kernel)
    finally:
        p.free()
        torch.cuda.empty_cache()
    return rec


def host_launch(ctx):
    """Host µs per launch of a one-token LN-modulate forward: ours through the ops layer's C ABI
    (the launches composed and checked once, then enqueued: mxc_launches_enqueue; and composed and
    checked from the tensors on every call: mxc_op_prepare + enqueue), and a direct Triton launch
    of the same problem."""
    import measure
    import problems
    import triton_baselines
    torch = ctx.torch
    p = problems.LnModulate(tokens=1, tokens_per_sample=1)
    p.make(DEVICE, 1)
    found, key = ours.plans(p, ctx.catalog, ctx.target)
    if not found:
        return {"error": f"no plan of {key} among the code objects"}
    plan = found[0]  # the op's default plan, where its objects are at hand
    outs = p.alloc_outputs()
    prepared = plan.prepare(p, outs, ctx.device, torch)
    res = {"kernel": "ln_modulate_fwd", "config": plan.config, "tokens": 1}
    res["mxfp6c_prepared_us"] = measure.host_us_per_call(prepared.launch)
    res["mxfp6c_pack_each_call_us"] = measure.host_us_per_call(
        lambda: plan.prepare(p, outs, ctx.device, torch).launch())
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
           "runtime_platform": device.platform, "python": sys.version.split()[0],
           # Our launches after the first of a plan overlap the previous one's tail where the code
           # object waits for it (metadata "waits_for_previous_grid") and the device can.
           "overlapping_launches": device.overlaps_launches}
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
    found = mxfp6rt.find_code_objects(args.kernels, target=env["target"], recursive=True)
    objects = {}
    for code_path, meta in found:
        objects.setdefault(meta["kernel"], []).append((code_path, meta))
    catalog = ours.Catalog(found)
    ours.client(pathlib.Path(args.lib or mxfp6rt.default_library_path()).resolve().parent)
    log(t0, f"{env['gpu']}: code objects in {args.kernels}: " +
        (", ".join(f"{k} x{len(v)}" for k, v in sorted(objects.items())) or "none"))

    command = " ".join(["python3"] + [shlex.quote(a) for a in [os.path.relpath(sys.argv[0])] + sys.argv[1:]])
    items = [p for p in problems.plan(objects) if not args.only or any(s in p.name for s in args.only)]
    if args.resume:
        doc = report.read_doc(args.resume)
        stem = report.doc_stem(args.resume)
        left = {s["name"] for s in doc.get("skipped", [])}
        measured = {r["name"] for r in doc["results"]}
        rerun = [p.name for p in items if p.name in measured and any(s in p.name for s in args.rerun)]
        items = [p for p in items if p.name in left or p.name in rerun]
        doc["skipped"] = [s for s in doc["skipped"] if s["name"] not in {p.name for p in items}]
        # This call's own copy measurements: its kernel/shapes' ratios use them (report.copy_ceiling_of).
        doc.setdefault("resumed", []).append({"command": command, "date": datetime.date.today().isoformat(),
                                              "environment": env, "copy": {}, "rerun": rerun})
        call, copies = len(doc["resumed"]), doc["resumed"][-1]["copy"]
    else:
        tag = args.tag or gpu_tag(env["gpu"])
        stem = f"{datetime.date.today().isoformat()}-{tag}"
        for n in range(2, 100):  # never overwrite an earlier run of the same day
            if not (pathlib.Path(args.out) / f"{stem}.json").exists():
                break
            stem = f"{datetime.date.today().isoformat()}-{tag}-{n}"
        doc = new_document(args, env, command, items, precompile_workers(args))
        call, copies = 0, doc["copy"]
    log(t0, f"{len(items)} kernel/shapes, time budget {args.time_budget:g} s: " + ", ".join(p.name for p in items))

    source, resource_rows = amd_resources_table(args.resources)
    log(t0, f"AMD resources of our code objects from {source}" if source else
        "AMD resources of our code objects: none (--resources none, or no results/*-resources*.json)")

    def save(final=False):
        # The chart is drawn once, at the end: drawn after every kernel/shape it took 2-3 s each,
        # a third of a call's device time. A call cut short keeps its .json and .md;
        # `python3 bench/report.py <stem>.json` draws the chart from them.
        report.attach_amd_resources(doc, resource_rows, source)
        return report.write(doc, args.out, stem, with_chart=final)

    workers = precompile_workers(args)
    warm = {}
    if workers > 0:
        tasks = [(p, args.seed + i, p.compile_mode_auto if args.compile_mode == "auto" else args.compile_mode,
                  "torch_compile" not in args.skip, "triton" not in args.skip) for i, p in enumerate(items)]
        warm = precompile.precompile([t for t in tasks if t[3] or t[4]], workers, lambda m: log(t0, m))

    try:
        copies["start"] = measure.copy_bandwidth(args.copy_gib * 2**30, args.warmup_ms, args.rep_ms, DEVICE)
        log(t0, f"device copy: {copies['start']['tbps']:.3f} TB/s")
        ctx = Context(args, torch, device, catalog, env["target"])
        ctx.warm = warm
        if call == 0:
            try:
                doc["host_launch"] = host_launch(ctx)
            except Exception as ex:
                doc["host_launch"] = {"error": error_text(ex)}
            log(t0, f"host launch: {doc['host_launch']}")
        run_items(ctx, doc, items, call, t0, save)
        copies["end"] = measure.copy_bandwidth(args.copy_gib * 2**30, args.warmup_ms, args.rep_ms, DEVICE)
        log(t0, f"device copy at the end: {copies['end']['tbps']:.3f} TB/s")
    finally:
        md = save(final=True)
        print(md, flush=True)
        log(t0, f"wrote {pathlib.Path(args.out) / stem}.json, .md, .png")


def gpu_tag(name):
    """The card's model, for file names: "NVIDIA H100 80GB HBM3" -> "h100", "NVIDIA H200" -> "h200"
    (the first word of letters then digits, so not a memory size; else the last word)."""
    words = name.split()
    model = next((w for w in words if re.fullmatch(r"[A-Za-z]+\d+[A-Za-z]*", w)), None)
    return (model or words[-1]).lower()


def precompile_workers(args):
    return precompile.default_workers() if args.precompile_workers is None else args.precompile_workers


def new_document(args, env, command, items, workers):
    """A run's document before its measurements: what it runs on and how it measures (workers: the
    precompiling processes)."""
    smallest = min((p.min_bytes() for p in items), default=0)
    return {
        "schema": 1, "date": datetime.date.today().isoformat(), "command": command, "environment": env,
        "method": {
            "timing": f"measure.device_time: median of the reps (warmup {args.warmup_ms:g} ms, rep "
                      f"{args.rep_ms:g} ms), CUDA events, L2 cleared (256 MB buffer zeroed) before every rep, "
                      "then a spin of twice the host's time per call, so each rep times the device's work "
                      "alone (the Triton baselines' autotuners time their configs the same way)"
                      + (f"; where ours has more than {args.finalists} plans, each is first timed over "
                         f"{args.screen_ms:g} ms of reps and the {args.finalists} fastest that passed are timed in full"
                         if args.screen_ms > 0 else ""),
            "torch_compile": (f"mode={args.compile_mode}" if args.compile_mode != "auto" else
                              "mode=max-autotune-no-cudagraphs for the forward kernels, default for the backward "
                              "kernels and the packers (--compile-mode auto)")
                             + "; dynamic=False, fullgraph=True, recompiled per shape; the packers compile the "
                               "unchunked PyTorch packer, eager runs it over chunks of rows",
            "precompile": (f"the baselines compiled first by {workers} worker processes (bench/precompile.py), their "
                           "first calls here then from the on-disk caches; the cold first calls are the workers'"
                           if workers > 0 else "none: each baseline compiles on its first call here"),
            "inputs": f"random (like the GPU tests), fresh per shape, not rotated: the smallest working set is "
                      f"{smallest / 1e6:.0f} MB against {env.get('l2_mb', '?')} MB of L2, and every rep starts "
                      "after the L2 clear",
            "checks": "every implementation against fp64 on the same inputs, with the GPU tests' bounds (fp32 "
                      "sums: the tests' two-stage bound, rows/P + P additions deep, for ours; for a baseline, any "
                      "order of the S additions of LN-modulate's dscale/dshift, and norm+RoPE's dw at the test's "
                      "bound with P = 8192, since the worst case of any order of its additions would be vacuous); "
                      "the MXFP6 packers bit for bit against a PyTorch encoder of docs/mxfp6-format.md, itself checked on "
                      "the spec's worked examples and on 256 sampled blocks of each input against a pure-Python "
                      "transcription of the spec (column blobs: the row blobs of X^T; the packer prologue: the blobs "
                      "of the implementation's own bf16 d(mixed_qkv), checked within the backward's bounds -- for "
                      "ours without the bf16 output, that of its _bf16 twin at the same schedule, whose blobs it "
                      "must equal); ours into NaN-poisoned outputs and scratch, launched twice "
                      "(bit-identical, the second time into other poison)",
            "bytes": "minimal: each input read once, each output written once (formula per kernel in JSON); "
                     "our multi-launch kernels' partials are overhead, not counted",
        },
        "copy": {}, "results": [], "skipped": [],
    }


def run_items(ctx, doc, items, call, t0, save):
    """Runs the kernel/shapes in order into doc["results"] (each marked with `call`, the index of the
    call that measured it: 0 for the first, n for the n-th --resume), saving after each; those
    that would end past the time budget are listed in doc["skipped"] instead."""
    args = ctx.args
    durations = {}  # kernel -> seconds of each of its shapes so far
    for i, p in enumerate(items):
        elapsed = time.perf_counter() - t0
        # The same kernel's longest shape after its first (which pays the one-time compiles), else
        # its first; for a kernel not run yet, the longest shape of any, at least 30 s.
        seen = durations.get(p.kernel)
        if seen:
            expected = max(seen[1:] or seen)
        else:
            expected = max([30.0] + [d for ds in durations.values() for d in ds])
        if elapsed + expected > args.time_budget:
            if call and p.name in doc["resumed"][-1]["rerun"]:
                # A --rerun target keeps its earlier record: not measured again, not missing.
                doc["resumed"][-1]["rerun"].remove(p.name)
                doc["resumed"][-1].setdefault("rerun_skipped", []).append(p.name)
            else:
                doc["skipped"].append({"name": p.name, "why": f"time budget {args.time_budget:g} s; run it with "
                                                              f"--only {p.name}, or all of them with --resume"})
            log(t0, f"skip {p.name} (time budget)")
            continue
        start = time.perf_counter()
        try:
            rec = run_problem(ctx, p, args.seed + i, ctx.warm.get(p.name))
        except Exception as ex:
            traceback.print_exc()
            rec = {"name": p.name, "kernel": p.kernel, "family": p.family, "label": p.label, "shape": p.shape,
                   "tokens": p.tokens, "min_bytes": p.min_bytes(), "copy_target": p.copy_target, "impls": {},
                   "error": error_text(ex)}
        rec["seconds"] = time.perf_counter() - start
        rec["call"] = call
        durations.setdefault(p.kernel, []).append(rec["seconds"])
        # A kernel/shape measured again (--rerun) takes its old record's place; the old one is kept.
        at = next((j for j, r in enumerate(doc["results"]) if r["name"] == rec["name"]), None)
        if at is None:
            doc["results"].append(rec)
        else:
            doc.setdefault("replaced", []).append(doc["results"][at])
            doc["results"][at] = rec
        report.finalize(doc)
        ours = rec["impls"].get("mxfp6c", {})
        log(t0, f"{p.name}: ours {ours.get('tbps') or 0:.3f} TB/s ({ours.get('config')}, ok={ours.get('ok')}); "
                + ", ".join(f"{b} {(rec['impls'].get(b) or {}).get('tbps') or 0:.3f}" for b in report.BASELINES)
                + f" [{rec['seconds']:.0f} s]")
        save()


if __name__ == "__main__":
    main()
