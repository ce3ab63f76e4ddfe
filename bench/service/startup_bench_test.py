#!/usr/bin/env python3
"""CPU smoke test of the service benchmark's client side: a real mxfp6-server on loopback over an
empty database (it precompiles the startup set's families on the first request), then
startup_bench with a few processes, cold, warm and fresh. Checks what the benchmark's report
relies on: every key resolved by every process, object bytes only in the cold case, fresh answers
taken from the node cache.

Usage: startup_bench_test.py MXFP6_SERVER STARTUP_BENCH SHAPES"""
import json
import os
import re
import subprocess
import sys
import tempfile

server_bin, bench_bin, shapes = sys.argv[1:4]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def bench(address, root, processes, *extra):
    r = subprocess.run([bench_bin, "--server", address, "--shapes", shapes, "--processes", str(processes),
                        "--cache-root", root, *extra], capture_output=True, text=True, timeout=600)
    try:
        return json.loads(r.stdout)
    except json.JSONDecodeError:
        failures.append(f"startup_bench {extra}: {r.stdout} {r.stderr}")
        return {}


with tempfile.TemporaryDirectory() as tmp:
    log = open(os.path.join(tmp, "server.log"), "w")
    server = subprocess.Popen([server_bin, "--db", os.path.join(tmp, "k.db"), "--listen", "127.0.0.1:0"],
                              stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        m = re.search(r"listening on (\S+)", server.stdout.readline())
        check(m is not None, "the server did not come up")
        address = m.group(1)
        first = bench(address, os.path.join(tmp, "first"), 1)
        check(first.get("all_keys_resolved") == 1 and first.get("key_errors") == 0, f"first fetch: {first}")
        cold = bench(address, os.path.join(tmp, "cold"), 4)
        check(cold.get("all_keys_resolved") == 4 and cold.get("bytes_from_server", 0) > 0, f"cold: {cold}")
        check(cold.get("answered_by") == {"server": 4}, f"cold answered by: {cold.get('answered_by')}")
        warm_root = os.path.join(tmp, "warm")
        bench(address, warm_root, 1, "--shared-cache")
        warm = bench(address, warm_root, 4, "--shared-cache")
        check(warm.get("all_keys_resolved") == 4 and warm.get("bytes_from_server") == 0, f"warm: {warm}")
        fresh = bench(address, warm_root, 4, "--shared-cache", "--fresh-for", "300")
        check(fresh.get("all_keys_resolved") == 4 and fresh.get("answered_by") == {"node cache (fresh answers)": 4},
              f"fresh: {fresh}")
    finally:
        server.terminate()
        server.wait()
        log.close()

print("ok" if not failures else f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
