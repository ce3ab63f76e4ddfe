#!/usr/bin/env python3
"""Runs plans of ours for a profiler: the benchmark's inputs and launches, without its checks and
timing, so Nsight Compute (or any tool) sees exactly the kernels the table measures.

    ncu --clock-control none -k regex:'^(mxfp6_|norm_rope|ln_modulate)' --launch-skip 4 \\
        python3 bench/profile_plans.py --only mxfp6_pack_cols:E3M2:T=16384:C=3072 \\
        --config W=128,ROWS=1,THREADS=128,VEC=16 --reps 3

--only picks problems as run.py's does (a substring of the name); --config keeps the plans whose
config (the table's "ours config" column) starts with it. Each chosen plan runs --reps times, its
launches in order; --list prints the plans instead. Launch counts: a plan of k launches run r
times launches k*r kernels of ours, in that order, problem by problem.
"""
import argparse
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import mxfp6rt  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernels", default=str(HERE.parent / "build" / "gpu_kernels"))
    ap.add_argument("--lib", default=None)
    ap.add_argument("--only", action="append", required=True)
    ap.add_argument("--config", action="append", default=[])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()

    import torch
    import problems

    device = mxfp6rt.Runtime(args.lib).open_device("cuda")
    target = f"sm_{''.join(map(str, torch.cuda.get_device_capability()))}"
    objects = {}
    for code_path, meta in mxfp6rt.find_code_objects(args.kernels, target=target, recursive=True):
        objects.setdefault(meta["kernel"], []).append((code_path, meta))
    loaded = {}
    stream = torch.cuda.current_stream().cuda_stream
    for p in problems.plan(objects):
        if not any(s in p.name for s in args.only):
            continue
        p.make("cuda", args.seed)  # some problems' plans bind their inputs
        plans = [pl for pl in p.plans(objects) if not args.config or any(pl.config.startswith(c) for c in args.config)]
        if args.list:
            print(p.name, *("  " + pl.config for pl in plans), sep="\n")
            p.free()
            continue
        for plan in plans:
            outs = plan.alloc() if plan.alloc else p.alloc_outputs()
            scratch = plan.scratch()
            launches = []
            for st in plan.stages:
                k = loaded.setdefault(str(st.code_path), None) or device.load(st.code_path)
                loaded[str(st.code_path)] = k
                launches.append((k, *k.prepare(st.values(outs, scratch), st.rows)))
            for _ in range(args.reps):
                for k, raw, grid in launches:
                    k.launch(raw, grid, stream)
            torch.cuda.synchronize()
            print(f"{p.name}: {plan.config}: {len(launches)} launches x {args.reps}", flush=True)
            del outs, scratch
        p.free()


if __name__ == "__main__":
    main()
