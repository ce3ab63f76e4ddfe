#!/usr/bin/env python3
"""Compares what two mxfp6c executables emit for the same kernels, byte for byte.

    scripts/compare_codegen.py BUILD_A/bin/mxfp6c BUILD_B/bin/mxfp6c [--emit llvm] [--jobs N] [--only K]

The configurations: every code object in --kernels (its kernel and full config, from its
.json: what the GPU tests and the benchmark run), for sm_90 and gfx942, and every kernel of
kernels_dsl/ and tests/fixtures/ at its defaults for sm_90, gfx942 and gfx950. A configuration
that one executable compiles and the other rejects is a difference too; one both reject (an
NVIDIA-only schedule on gfx942) is skipped. --only keeps the kernels whose name contains K
(repeatable). Exits 1 on any difference, naming each, and when nothing compiled.

Why: the code objects are content-addressed and keyed on (kernel, shape, arch, toolchain), so two
builds of mxfp6c from the same sources must emit the same bytes, whichever host compiler built
them (compiler/codegen/kernel_emitter.h states the rule that keeps it so).
"""
import argparse
import concurrent.futures
import json
import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent


def kernels_of(mxfp6c, dsl):
    """Kernel names of a DSL file, from `mxfp6c list`."""
    out = subprocess.run([mxfp6c, "list", str(dsl)], check=True, capture_output=True, text=True).stdout
    return [line.split()[1] for line in out.splitlines() if line.startswith("kernel ")]


def jobs(mxfp6c, kernels_dir):
    """(dsl file, kernel, target, config text) for every configuration compared."""
    files = sorted((REPO / "kernels_dsl").glob("*.mxk")) + sorted((REPO / "tests" / "fixtures").glob("*.mxk"))
    file_of = {}
    for dsl in files:
        for kernel in kernels_of(mxfp6c, dsl):
            file_of.setdefault(kernel, dsl)
    out = [(dsl, kernel, target, "") for kernel, dsl in file_of.items() for target in ("sm_90", "gfx942", "gfx950")]
    seen = set()
    for meta_path in sorted(pathlib.Path(kernels_dir).rglob("*.json")):
        meta = json.loads(meta_path.read_text())
        kernel, config = meta.get("kernel"), meta.get("config", {})
        if kernel not in file_of:
            continue
        text = ",".join(f"{k}={v}" for k, v in sorted(config.items()))
        for target in ("sm_90", "gfx942"):
            if (kernel, target, text) not in seen:
                seen.add((kernel, target, text))
                out.append((file_of[kernel], kernel, target, text))
    return out


def emit(mxfp6c, dsl, kernel, target, config, emit_kind):
    cmd = [mxfp6c, "compile", str(dsl), "--kernel", kernel, "--target", target, "--emit", emit_kind, "-o", "-"]
    if config:
        cmd += ["--config", config]
    r = subprocess.run(cmd, capture_output=True)
    return r.returncode, r.stdout, r.stderr.decode(errors="replace").strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--emit", default="llvm", help="what to compare (mxfp6c compile --emit)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", action="append", default=[], help="kernels whose name contains this")
    ap.add_argument("--kernels", default=str(REPO / "build" / "gpu_kernels"),
                    help="code objects whose configurations to compare (default: build/gpu_kernels)")
    args = ap.parse_args()

    todo = [j for j in jobs(args.a, args.kernels) if not args.only or any(o in j[1] for o in args.only)]

    def compare(job):
        dsl, kernel, target, config = job
        ra, oa, ea = emit(args.a, dsl, kernel, target, config, args.emit)
        rb, ob, eb = emit(args.b, dsl, kernel, target, config, args.emit)
        name = f"{kernel} {target} {config or '(defaults)'}"
        if ra != 0 and rb != 0:
            return "skipped", name, ""
        if ra != rb:
            return "differs", name, f"one compiles, the other does not: {ea or eb}"
        if oa != ob:
            return "differs", name, f"{len(oa)} against {len(ob)} bytes"
        return "same", name, ""

    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(compare, todo))
    counts = {}
    for verdict, name, why in results:
        counts[verdict] = counts.get(verdict, 0) + 1
        if verdict == "differs":
            print(f"DIFFERS: {name}: {why}")
    print(f"{len(results)} configurations ({args.emit}): " + ", ".join(f"{n} {v}" for v, n in sorted(counts.items())))
    if counts.get("same", 0) == 0:
        print("nothing compared")
        return 1
    return 1 if counts.get("differs") else 0


if __name__ == "__main__":
    sys.exit(main())
