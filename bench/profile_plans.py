#!/usr/bin/env python3
"""Runs plans of ours for a profiler: the benchmark's inputs and launches, without its checks and
timing, so Nsight Compute (or any tool) sees exactly the kernels the table measures.

    ncu --profile-from-start off --clock-control none -k regex:'^(mxfp6_|norm_rope|ln_modulate)' \\
        python3 bench/profile_plans.py --only mxfp6_pack_cols:E3M2:T=16384:C=3072 \\
        --config HB=4,ROWS=1,THREADS=128,VEC=32,W=64 --reps 1

--only picks problems as run.py's does (a substring of the name); --config keeps the plans whose
id (ops/plan.h, the table's "ours config" column) contains it. The plans are run.py's: every plan
the code objects make for the problem's key, composed by the ops layer (bench/ours.py). Each chosen
plan runs --reps times, its launches in order; --list prints the plans instead. Launch counts: a plan of k launches run r
times launches k*(r+1) kernels of ours, in that order, problem by problem: one warm-up rep, then r.

--triton also runs each problem's Triton baseline (triton_baselines.py) --reps times after ours;
its first call (compile and autotune) stays outside the profiled range, and --triton-ptx DIR
writes the PTX of what it chose, with its register count. The profiled range (cudaProfilerStart
to Stop; `ncu --profile-from-start off` sees only it) holds every launch but each plan's first
rep, so --launch-skip is not needed there. --triton-config ROWS=8,num_warps=2 runs that one config
instead of autotuning (for an @triton.autotune'd baseline).

--copy also runs, per problem, a streaming kernel that reads half the problem's minimal bytes and
writes the other half (PyTorch's elementwise bitwise_not on int32 words: 16-byte accesses, one
read and one write per word; a plain copy_ would be a memcpy the profiler does not see), so the
profiler's counters of a kernel at DRAM bandwidth sit beside ours for the same bytes.

--l2 MODE (repeatable) also times every plan and baseline as the benchmark does (measure.py's
device_times: CUDA events, a head start, 100 ms of reps; the median) with the L2 prepared before
each rep: `dirty` zeroes a 256 MB buffer as the benchmark's timing does (the L2 left full of
lines to write back), `clean` reads one (the L2 full of clean lines), `none` leaves it as the
previous rep left it. It tells a kernel slowed by write-backs from one slow anyway.
"""
import argparse
import pathlib
import statistics
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import mxfp6rt  # noqa: E402
import ours  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernels", default=str(HERE.parent / "build" / "gpu_kernels"))
    ap.add_argument("--lib", default=None)
    ap.add_argument("--only", action="append", required=True)
    ap.add_argument("--config", action="append", default=[])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--triton", action="store_true", help="also run each problem's Triton baseline")
    ap.add_argument("--triton-ptx", default=None, help="folder for the chosen Triton kernels' PTX")
    ap.add_argument("--triton-config", default=None, help="KEY=V,...,num_warps=W: no autotuning")
    ap.add_argument("--l2", action="append", default=[], choices=["dirty", "clean", "none"])
    ap.add_argument("--copy", action="store_true", help="also run a streaming kernel of the problem's bytes")
    args = ap.parse_args()

    import torch
    import problems

    device = mxfp6rt.Runtime(args.lib).open_device("cuda")
    target = f"sm_{''.join(map(str, torch.cuda.get_device_capability()))}"
    found = mxfp6rt.find_code_objects(args.kernels, target=target, recursive=True)
    objects = {}
    for code_path, meta in found:
        objects.setdefault(meta["kernel"], []).append((code_path, meta))
    catalog = ours.Catalog(found)
    ours.client(pathlib.Path(args.lib or mxfp6rt.default_library_path()).resolve().parent)
    for p in problems.plan(objects):
        if not any(s in p.name for s in args.only):
            continue
        p.make("cuda", args.seed)  # the call's shapes give the key
        plans = [pl for pl in ours.plans(p, catalog, target)[0] if not args.config or any(c in pl.config for c in args.config)]
        if args.list:
            print(p.name, *("  " + pl.config for pl in plans), sep="\n")
            p.free()
            continue
        for plan in plans:
            outs = p.alloc_outputs()
            prepared = plan.prepare(p, outs, device, torch)
            profiled(torch, prepared.launch, args.reps)
            print(f"{p.name}: {plan.config}: {len(prepared.infos)} launches x {args.reps}", flush=True)
            report_l2_times(prepared.launch, args.l2, f"{p.name}: {plan.config}")
            del outs, prepared
        if args.triton:
            run_triton(torch, p, args)
        if args.copy:
            run_copy(torch, p.min_bytes(), args)
        p.free()


def profiled(torch, rep, reps):
    """One warm-up rep, then `reps` inside the profiler's range."""
    rep()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for _ in range(reps):
        rep()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


def report_l2_times(rep, modes, label):
    """The median device time of rep with the L2 in each state, timed as the benchmark times."""
    import measure
    times = [f"{mode} {statistics.median(measure.device_times(rep, 25, 100, l2=mode)) * 1e3:.1f}" for mode in modes]
    if times:
        print(f"{label}: median us, L2 {', '.join(times)}", flush=True)


def run_triton(torch, p, args):
    import triton_baselines
    if p.kernel not in triton_baselines.IMPLEMENTATIONS:
        print(f"{p.name}: no Triton baseline", flush=True)
        return
    fn, tuner = triton_baselines.IMPLEMENTATIONS[p.kernel]
    if args.triton_config:
        import triton
        values = dict(kv.split("=") for kv in args.triton_config.split(","))
        warps = int(values.pop("num_warps", 4))
        tuner.configs = [triton.Config({k: int(v) for k, v in values.items()}, num_warps=warps, num_stages=1)]
    profiled(torch, lambda: fn(*p.args), args.reps)  # the warm-up call autotunes
    config = triton_baselines.best_config(p.kernel)
    print(f"{p.name}: triton {config} x {args.reps}", flush=True)
    report_l2_times(lambda: fn(*p.args), args.l2, f"{p.name}: triton {config}")
    if args.triton_ptx:
        for name, kernel in compiled_triton_kernels(tuner):
            out = pathlib.Path(args.triton_ptx) / f"{p.name.replace(':', '_')}.{name}.ptx"
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(kernel.asm["ptx"])
            print(f"  {out.name}: {kernel.n_regs} registers, {kernel.metadata.num_warps} warps", flush=True)


def run_copy(torch, min_bytes, args):
    words = min_bytes // 8
    src = torch.randint(-2**31, 2**31 - 1, (words,), dtype=torch.int32, device="cuda")
    dst = torch.empty_like(src)
    copy = lambda: torch.bitwise_not(src, out=dst)  # noqa: E731
    profiled(torch, copy, args.reps)
    print(f"copy of {2 * 4 * words} bytes (read + written) x {args.reps}", flush=True)
    report_l2_times(copy, args.l2, f"copy of {2 * 4 * words} bytes")


def compiled_triton_kernels(tuner):
    """(name, CompiledKernel) of every specialization a @triton.autotune'd kernel compiled (the
    tuned configs included); _Tuner baselines (several launches) are not walked."""
    fn = getattr(tuner, "fn", None)
    caches = getattr(fn, "device_caches", {}) if fn is not None else {}
    for entry in caches.values():
        cache = entry[0] if isinstance(entry, tuple) else entry
        for i, kernel in enumerate(cache.values()):
            if hasattr(kernel, "asm") and "ptx" in kernel.asm:
                yield f"{fn.__name__}.{i}", kernel


if __name__ == "__main__":
    main()
