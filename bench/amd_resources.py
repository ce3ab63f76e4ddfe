"""Resource use of every benchmarked code object on AMD beside sm_90 (issue: the AMD code objects
get the same lowering; we cannot run them, so their VGPRs, SGPRs, LDS and estimated occupancy are
reported next to the sm_90 registers and occupancy of the code objects the benchmark times).

Runs on the build machine (it needs mxfp6c, i.e. LLVM; no GPU): for each sm_90 code object under
--kernels (the benchmark's folder, subfolders included) it compiles the same kernel at the same
configuration for gfx942 and gfx950 and reads the resources from the launch metadata mxfp6c
writes (registers/VGPRs, SGPRs, shared memory (static and dynamic)/LDS, stack, and the occupancy estimate of
compiler/codegen/occupancy.cpp: resident programs per SM/CU and the bound).

    python3 bench/amd_resources.py --out bench/results/<date>-resources.md
"""
import argparse
import json
import pathlib
import re
import subprocess
import sys
import tempfile

import mxfp6rt
import report

REPO = pathlib.Path(__file__).resolve().parent.parent
TARGETS = report.AMD_TARGETS
# Tunables mxfp6c may refuse for AMD at values other than 0, and its message's advice when it
# does: asynchronous copies and predicated stores are NVIDIA's; MINPROGS = n is refused where n
# programs' shared memory exceeds a CU's LDS (64 KB on gfx942, 160 KB on gfx950); the row then
# reports the schedule with the largest count the CU holds (most_resident), or without MINPROGS
# where the kernel does not declare that count.
DROPPABLE = {"ASYNC": "use ASYNC = 0 there", "PREDICATE": "use PREDICATE = 0 there",
             "MINPROGS": "lower MINPROGS or the shared memory"}


def kernel_sources():
    """kernel name -> the .mxk file that declares it (kernels_dsl/ and the test fixtures)."""
    sources = {}
    for folder in (REPO / "kernels_dsl", REPO / "tests" / "fixtures"):
        for path in sorted(folder.glob("*.mxk")):
            for name in re.findall(r"^kernel\s+(\w+)\s*\(", path.read_text(), flags=re.M):
                sources[name] = path
    return sources


def config_text(config):
    return ",".join(f"{k}={v}" for k, v in sorted(config.items()))


def shown_config(config):
    """The table's config column: config_text without the tunables at their idle values (MINPROGS=0,
    ANCHOR=0, ...), which the benchmark's labels leave out too (mxfp6rt.TAG_IDLE)."""
    return config_text({k: v for k, v in config.items() if mxfp6rt.TAG_IDLE.get(k) != v})


def reason(message):
    """The line of mxfp6c's message that says why (the last one naming an error)."""
    lines = [line for line in message.splitlines() if "error:" in line]
    return lines[-1].split("error:", 1)[1].strip() if lines else message.splitlines()[0]


def most_resident(message):
    """The most programs a refused MINPROGS = n leaves resident, as mxfp6c's message names it
    ("... its 65536 bytes hold 2", "... threads cannot be resident ...: at most 4"); 0 if none."""
    found = re.search(r"MINPROGS = \d+ programs of .*?(?:bytes hold|: at most) (\d+)", message)
    return int(found.group(1)) if found else 0


def compile_for(mxfp6c, source, kernel, config, target, folder):
    out = pathlib.Path(folder) / f"{kernel}.{target}.hsaco"
    cmd = [str(mxfp6c), "compile", str(source), "--kernel", kernel, "--target", target,
           "--config", config_text(config), "--emit", "hsaco", "-o", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        message = done.stderr.strip() or f"mxfp6c exited {done.returncode}"
        # MINPROGS = n past what the CU holds: the largest count it does, when the kernel declares
        # that count (a count it does not declare is an error, and the fallback below drops it).
        fit = most_resident(message)
        if 0 < fit < config.get("MINPROGS", 0):
            resources = compile_for(mxfp6c, source, kernel, {**config, "MINPROGS": fit}, target, folder)
            if "error" not in resources and "refused" not in resources:
                return {**resources, "lowered": {"MINPROGS": fit, **resources.get("lowered", {})}}
        # The same schedule without what was refused (rows carried in registers, stores in a
        # branch, residency left to the compiler) is what AMD would run: report that, naming
        # what was left out.
        for key, advice in DROPPABLE.items():
            if config.get(key, 0) > 0 and advice in message:
                resources = compile_for(mxfp6c, source, kernel, {**config, key: 0}, target, folder)
                return {**resources, "dropped": [key] + resources.get("dropped", [])}
        # Shared memory past what the target grants one program (gfx942: 64 KB of LDS) has no
        # schedule to fall back to: the row says the target refuses it, and why.
        if "a program may use on" in message:
            return {"refused": reason(message)}
        return {"error": message, "reason": reason(message)}
    return json.loads(pathlib.Path(str(out) + ".json").read_text())["resources"]


def collect(kernels_dir, mxfp6c):
    sources = kernel_sources()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for meta_path in sorted(pathlib.Path(kernels_dir).rglob("*.json")):
            meta = json.loads(meta_path.read_text())
            if meta.get("target") != "sm_90" or meta["kernel"] not in sources:
                continue
            row = {"kernel": meta["kernel"], "config": meta["config"], "block": meta["block"][0],
                   "code_object": meta_path.name[:-len(".json")], "sm_90": meta.get("resources", {})}
            for target in TARGETS:
                row[target] = compile_for(mxfp6c, sources[meta["kernel"]], meta["kernel"], meta["config"], target, tmp)
            rows.append(row)
    return rows


def markdown(rows, command):
    lines = [
        "# Resource use on sm_90, gfx942 and gfx950 of the benchmarked code objects", "",
        f"Command: `{command}` (on the build machine: the AMD code objects are compiled, not run).", "",
        "Registers per thread (sm_90) / VGPRs (AMD), SGPRs, shared memory (static and dynamic) / LDS in bytes, and the",
        "estimated occupancy: resident warps (waves) over the maximum, with resident programs per SM/CU",
        "and the bound (compiler/codegen/occupancy.cpp, from the published per-SM/CU limits). AMD has no",
        "asynchronous copies or predicated stores: mxfp6c refuses ASYNC > 0 and PREDICATE = 1 there; it",
        "refuses MINPROGS = n where n programs' shared memory exceeds a CU's LDS. Those rows report the",
        "same schedule without them, marked (ASYNC=0) or (PREDICATE=0), or with the largest MINPROGS the",
        "CU holds, marked (MINPROGS=m) (MINPROGS=0 where the kernel does not declare that count). A",
        "program needing more shared memory than the target grants one is refused there, and the row",
        "says so.", "",
        "| kernel | config | block | sm_90 regs | sm_90 shared | sm_90 occupancy | gfx942 VGPRs | gfx942 SGPRs "
        "| gfx942 LDS | gfx942 occupancy | gfx950 VGPRs | gfx950 SGPRs | gfx950 LDS | gfx950 occupancy |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        sm90 = report.resource_cells(r["sm_90"])
        cells = [r["kernel"], shown_config(r["config"]), str(r["block"]), sm90[0], sm90[2], sm90[3]]
        for target in TARGETS:
            cells += report.resource_cells(r[target])
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", default=str(REPO / "build" / "gpu_kernels"))
    parser.add_argument("--mxfp6c", default=str(REPO / "build" / "bin" / "mxfp6c"))
    parser.add_argument("--out", required=True, help="Markdown file; a .json with the same stem is written too")
    args = parser.parse_args(argv)
    rows = collect(args.kernels, args.mxfp6c)
    if not rows:
        print(f"no sm_90 code objects of known kernels under {args.kernels}", file=sys.stderr)
        return 1
    out = pathlib.Path(args.out)
    command = "python3 bench/amd_resources.py --out " + str(out)
    out.write_text(markdown(rows, command))
    out.with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n")
    errors = sum("error" in r[t] for r in rows for t in TARGETS)
    refused = sum("refused" in r[t] for r in rows for t in TARGETS)
    without = sum(bool(r[t].get("dropped")) for r in rows for t in TARGETS)
    lowered = sum(bool(r[t].get("lowered")) for r in rows for t in TARGETS)
    print(f"{len(rows)} code objects, {errors} AMD compile errors, {refused} refused for their shared memory, "
          f"{without} AMD compiles without ASYNC, PREDICATE or MINPROGS, {lowered} with a lower MINPROGS -> {out}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
