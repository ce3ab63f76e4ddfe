#!/usr/bin/env python3
"""The kernel service under a job's startup, on this machine over loopback (issue: the service).

Precompiles the startup set into a fresh database (or takes --db), starts mxfp6-server over it,
warms it with one fetch, then measures with
build/bin/startup_bench (the client library in forked processes, no LLVM):
  - one process at a time, its own empty node cache: the startup set's latency, p50 of --repeats;
  - --processes at once, each with its own empty node cache (a job's first start);
  - --processes at once sharing one warm node cache (a restart: no code-object bytes on the wire),
    once asking the server (fresh_for 0) and once with fresh_for 300 (the ranks of a starting job
    find answers another rank of the node fetched seconds earlier, and make no call);
and, in the same run, the alternative a user has without the service: every process compiling
the same code objects from source with `mxfp6c compile`, timed for one process and for one per
core, from which the time for --processes processes on this machine's cores follows.

Writes RESULT.md and RESULT.json.gz. Usage:
  python3 bench/service_bench.py --out bench/results/DATE-cpu-service
"""
import argparse
import datetime
import gzip
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "build", "bin")


def start_server(db, log):
    p = subprocess.Popen([os.path.join(BIN, "mxfp6-server"), "--db", db, "--listen", "127.0.0.1:0"],
                         stdout=subprocess.PIPE, stderr=log, text=True)
    line = p.stdout.readline()
    m = re.search(r"listening on (\S+)", line)
    if not m:
        p.kill()
        sys.exit("the server did not come up: " + line)
    return p, m.group(1)


def bench(args, server, cache_root, processes, shared=False, fresh_for=0):
    cmd = [os.path.join(BIN, "startup_bench"), "--server", server, "--shapes", args.shapes, "--target", args.target,
           "--processes", str(processes), "--cache-root", cache_root, "--fresh-for", str(fresh_for)]
    if shared:
        cmd.append("--shared-cache")
    r = subprocess.run(cmd, capture_output=True, text=True)
    if not r.stdout.strip():
        sys.exit("startup_bench failed: " + r.stderr)
    return json.loads(r.stdout)


def compile_set(objects, out_dir):
    """Compiles every object of the set from source, as one process would; seconds."""
    t0 = time.monotonic()
    for i, o in enumerate(objects):
        r = subprocess.run([os.path.join(BIN, "mxfp6c"), "compile", os.path.join(ROOT, "kernels_dsl", o["file"]),
                            "--kernel", o["kernel"], "--target", o["target"], "--config", o["config"],
                            "--quiet", "-o", os.path.join(out_dir, f"{i}.bin")], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"mxfp6c compile {o}: {r.stderr}")
    return time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", help="a database the server's compiler precompiled (default: a fresh one)")
    ap.add_argument("--shapes", default=os.path.join(ROOT, "shapes", "flux12b-startup-b16.json"))
    ap.add_argument("--target", default="sm_90")
    ap.add_argument("--processes", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--out", required=True, help="result path without extension")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="mxfp6-service-bench-")
    precompile_s = None
    if not args.db:
        args.db = os.path.join(work, "kernels.db")
        t0 = time.monotonic()
        subprocess.run([os.path.join(BIN, "mxfp6c"), "precompile", "--shapes", args.shapes, "--targets", args.target,
                        "--db", args.db], check=True, capture_output=True)
        precompile_s = time.monotonic() - t0
    log = open(os.path.join(work, "server.log"), "w")
    server, address = start_server(args.db, log)
    results = {"date": datetime.date.today().isoformat(), "machine": f"{platform.machine()}, {os.cpu_count()} cores",
               "command": " ".join(["python3", "bench/service_bench.py"] + sys.argv[1:]),
               "commit": subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                                        text=True).stdout.strip(),
               "shapes": os.path.relpath(args.shapes, ROOT), "target": args.target, "precompile_s": precompile_s}
    try:
        bench(args, address, os.path.join(work, "warmup"), 1)  # the server reads its objects once
        singles = [bench(args, address, os.path.join(work, f"single{i}"), 1)["latency_ms"]["p50"]
                   for i in range(args.repeats)]
        results["one_process_cold_cache_ms"] = {"p50": statistics.median(singles), "max": max(singles),
                                                "runs": args.repeats}
        results["concurrent_cold_caches"] = bench(args, address, os.path.join(work, "cold"), args.processes)
        bench(args, address, os.path.join(work, "warm"), 1, shared=True)  # fill the node cache
        results["concurrent_warm_cache"] = bench(args, address, os.path.join(work, "warm"), args.processes,
                                                 shared=True)
        singles = [bench(args, address, os.path.join(work, "warm"), 1, shared=True, fresh_for=300)["latency_ms"]["p50"]
                   for i in range(args.repeats)]
        results["one_process_fresh_cache_ms"] = {"p50": statistics.median(singles), "max": max(singles),
                                                 "runs": args.repeats}
        results["concurrent_fresh_cache"] = bench(args, address, os.path.join(work, "warm"), args.processes,
                                                  shared=True, fresh_for=300)
        stats = subprocess.run([os.path.join(BIN, "mxfp6-db"), "check", "--db", args.db], capture_output=True,
                               text=True).stdout.strip()
        results["db_check"] = stats
    finally:
        server.terminate()
        server.wait()
        log.close()

    listed = subprocess.run([os.path.join(BIN, "startup_bench"), "--db", args.db, "--shapes", args.shapes,
                             "--target", args.target, "--list-objects"], capture_output=True, text=True)
    objects = json.loads(listed.stdout)
    one = compile_set(objects, tempfile.mkdtemp(dir=work))
    cores = os.cpu_count() or 1
    procs = []
    t0 = time.monotonic()
    for c in range(cores):
        d = tempfile.mkdtemp(dir=work)
        procs.append(subprocess.Popen([sys.executable, "-c",
                                       "import json,sys; sys.path.insert(0, %r); import service_bench as b; "
                                       "b.compile_set(json.loads(sys.argv[1]), sys.argv[2])" % os.path.dirname(
                                           os.path.abspath(__file__)), json.dumps(objects), d]))
    for p in procs:
        p.wait()
    per_core = time.monotonic() - t0
    results["compile_from_source"] = {
        "objects": len(objects), "one_process_s": one, "one_per_core_s": per_core, "cores": cores,
        "estimated_all_processes_s": per_core * args.processes / cores}
    shutil.rmtree(work, ignore_errors=True)

    with gzip.open(args.out + ".json.gz", "wt") as f:
        json.dump(results, f, indent=1)
    cold, warm, comp = results["concurrent_cold_caches"], results["concurrent_warm_cache"], results["compile_from_source"]
    fresh = results["concurrent_fresh_cache"]
    n = args.processes
    lines = [
        f"# The kernel service at a job's startup: {n} processes, one 2-core machine, loopback",
        "",
        f"Date {results['date']}, commit {results['commit']}, {results['machine']}. Each process resolves "
        f"`{results['shapes']}` ({cold['keys_per_process']} keys, every op the 57 blocks of one training "
        f"process call) for {args.target} through the client library, in one BatchResolve, from a warm "
        "mxfp6-server on the same machine.",
        "",
        "Command (repository root, after `scripts/build.sh`; it precompiles the set into a fresh "
        "database first" + (f", {precompile_s:.0f} s" if precompile_s else "") + "):",
        "",
        "```",
        results["command"],
        "```",
        "",
        "| measurement | result | target |",
        "|---|---|---|",
        f"| one process, empty node cache (p50 of {args.repeats}) | {results['one_process_cold_cache_ms']['p50']:.1f} ms | ≤ 100 ms |",
        f"| {n} processes at once, each its own empty cache: all done | {cold['wall_ms']:.0f} ms | ≤ 3 s |",
        f"| ... per process p50 / p99 | {cold['latency_ms']['p50']:.0f} / {cold['latency_ms']['p99']:.0f} ms | |",
        f"| ... code objects / bytes over the wire | {cold['objects_from_server']} / {cold['bytes_from_server']} | |",
        f"| {n} processes at once, one warm node cache: all done | {warm['wall_ms']:.0f} ms | |",
        f"| ... per process p50 / p99 | {warm['latency_ms']['p50']:.1f} / {warm['latency_ms']['p99']:.1f} ms | |",
        f"| ... code-object bytes over the wire | {warm['bytes_from_server']} | 0 |",
        f"| one process, warm node cache, answers fresh (`fresh_for` 300 s: no call) (p50 of {args.repeats}) | {results['one_process_fresh_cache_ms']['p50']:.1f} ms | ≤ 5 ms |",
        f"| {n} processes at once, warm node cache, answers fresh: all done | {fresh['wall_ms']:.0f} ms | |",
        f"| ... per process p50 / p99 | {fresh['latency_ms']['p50']:.1f} / {fresh['latency_ms']['p99']:.1f} ms | ≤ 5 ms |",
        f"| ... answered by | {', '.join(f'{k}: {v}' for k, v in fresh['answered_by'].items())} | |",
        f"| every key resolved, cold / warm / fresh | {cold['all_keys_resolved']} / {warm['all_keys_resolved']} / {fresh['all_keys_resolved']} of {n} | all |",
        f"| compile from source instead ({comp['objects']} objects, `mxfp6c compile`): one process | {comp['one_process_s']:.1f} s | |",
        f"| ... one process per core ({comp['cores']}) at once | {comp['one_per_core_s']:.1f} s | |",
        f"| ... {n} processes on these {comp['cores']} cores (from the line above) | {comp['estimated_all_processes_s']:.0f} s | |",
        "",
        "Per-process latency is from the process's first client call (connect, health check) to its "
        "last object in hand, with the node cache written. The compile baseline runs in the same "
        "invocation after the server stops; its last line is the per-core time scaled to all "
        "processes, since they would share the same cores.",
    ]
    with open(args.out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
