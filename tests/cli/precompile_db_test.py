"""mxfp6c precompile --shapes --db and pin/unpin end to end on real SQLite files: a shape set
precompiled into a database, a second run that compiles nothing, a pin and its removal seen
through `mxfp6-db why`, a bad
shape file rejected with nothing written, and a precompile killed with SIGKILL leaving a database
that opens and passes `mxfp6-db check`.

And mxfp6-tune where it can run without a GPU: no driver is a clear error, and on the fake CUDA
driver (which runs no kernel) every candidate fails its correctness gate, so nothing is recorded.

usage: precompile_db_test.py MXFP6C MXFP6_DB MXFP6_TUNE FAKE_CUDA_DRIVER"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, finish, run  # noqa: E402

MXFP6C, MXFP6_DB, MXFP6_TUNE, FAKE_DRIVER = sys.argv[1:5]


with tempfile.TemporaryDirectory() as tmp:
    shapes = os.path.join(tmp, "shapes.json")
    with open(shapes, "w") as f:
        json.dump({"entries": [
            {"site": "LN bwd", "op": "ln_modulate_bwd", "variant": {"layout": "bsd"}, "size": 3072,
             "tokens_per_sample": 256, "tokens": [4096, 8192]},
            {"site": "row packer", "op": "mxfp6_pack_rows", "variant": {"FMT": "E3M2", "MODE": "RCEIL"},
             "size": 9216, "tokens": [4096]}]}, f)
    db = os.path.join(tmp, "kernels.db")
    first = run(MXFP6C, "precompile", "--shapes", shapes, "--db", db, "--targets", "sm_90,gfx950")
    check(first.returncode == 0, f"first precompile failed: {first.stderr}")
    check("4 precompiled now" in first.stdout, f"first run: {first.stdout}")
    second = run(MXFP6C, "precompile", "--shapes", shapes, "--db", db, "--targets", "sm_90,gfx950")
    check(second.returncode == 0 and "0 compiles" in second.stdout and "4 already" in second.stdout,
          f"second run compiled again: {second.stdout}")
    checked = run(MXFP6_DB, "check", "--db", db)
    check(checked.returncode == 0, f"mxfp6-db check: {checked.stdout} {checked.stderr}")

    # Pins: one key pinned by config, shown by `why` with its provenance, refused without a
    # reason or when ambiguous, and gone after unpin (back to the default plan).
    key = "ln_modulate_bwd/S=256,layout=bsd/sm_90/D=3072/4096"
    r = run(MXFP6C, "pin", key, "--db", db, "--config", "THREADS=384")
    check(r.returncode == 2 and "--why" in r.stderr, f"pin without --why: {r.stderr}")
    r = run(MXFP6C, "pin", key, "--db", db, "--config", "THREADS=384", "--why", "x")
    check(r.returncode == 1 and "candidates have THREADS=384" in r.stderr, f"ambiguous pin: {r.stderr}")
    r = run(MXFP6C, "pin", key, "--db", db, "--config", "THREADS=128,P=4,W=384", "--why", "A/B vs default",
            "--who", "ci", "--expires", "2099-01-01T00:00:00Z")
    check(r.returncode == 0 and "P=4" in r.stdout, f"pin: {r.stdout} {r.stderr}")
    why = run(MXFP6_DB, "why", key, "--db", db)
    check(why.returncode == 0 and "pinned" in why.stdout and "A/B vs default" in why.stdout and "ci" in why.stdout,
          f"why after pin: {why.stdout} {why.stderr}")
    r = run(MXFP6C, "unpin", key, "--db", db)
    check(r.returncode == 0, f"unpin: {r.stderr}")
    why = run(MXFP6_DB, "why", key, "--db", db)
    check("default" in why.stdout and "pinned" not in why.stdout, f"why after unpin: {why.stdout}")
    r = run(MXFP6C, "unpin", key, "--db", db)
    check(r.returncode == 1 and "no pin" in r.stderr, f"second unpin: {r.stderr}")

    # The tuner: no GPU driver, then the fake driver, whose launches compute nothing.
    tune_env = dict(os.environ, MXFP6_GPU_DRIVER=os.path.join(tmp, "no-such-driver.so"))
    r = subprocess.run([MXFP6_TUNE, "--db", db, "--shapes", shapes, "--op", "mxfp6_pack_rows"],
                       capture_output=True, text=True, env=tune_env)
    check(r.returncode == 1 and "no-such-driver.so" in r.stderr, f"tune without a driver: {r.stderr}")
    tune_env["MXFP6_GPU_DRIVER"] = FAKE_DRIVER
    r = subprocess.run([MXFP6_TUNE, "--db", db, "--shapes", shapes, "--op", "mxfp6_pack_rows", "--rounds", "3"],
                       capture_output=True, text=True, env=tune_env)
    check(r.returncode == 1 and "no candidate passed its correctness gate" in r.stdout,
          f"tune on the fake driver: {r.stdout} {r.stderr}")
    listed = run(MXFP6_DB, "list", "--db", db, "--json")
    check(listed.returncode == 0 and json.loads(listed.stdout or "[]") == [],
          f"a failed tune recorded something: {listed.stdout}")
    # Two visible GPUs and no --device: one tuner per GPU, each on its own slice of the shard.
    two_gpus = dict(tune_env, FAKE_CUDA_DEVICES="2")
    r = subprocess.run([MXFP6_TUNE, "--db", db, "--shapes", shapes, "--rounds", "3", "--shard", "1/2"],
                       capture_output=True, text=True, env=two_gpus)
    check(r.returncode == 1 and "spreading over 2 GPUs" in r.stdout and "tuning 1 keys" in r.stdout
          and "shard 1/4" in r.stdout and "tuning 0 keys" in r.stdout and "shard 3/4" in r.stdout
          and "2 GPUs done" in r.stdout, f"tune on two GPUs: {r.stdout} {r.stderr}")
    r = subprocess.run([MXFP6_TUNE, "--db", db, "--shapes", shapes, "--shard", "2/2"], capture_output=True, text=True)
    check(r.returncode == 2 and "--shard" in r.stderr, f"bad shard: {r.stderr}")

    # Unknown op, target and impossible shape: an error naming the entry, and no file written.
    for entry, expect in [({"op": "ln_modulate_sideways", "tokens": [1]}, "unknown op"),
                          ({"op": "mxfp6_pack_rows", "size": 4096, "tokens": [64]}, "C must be one of"),
                          ({"op": "ln_modulate_fwd", "size": 3072, "tokens_per_sample": 256, "tokens": [1000]},
                           "multiple of tokens_per_sample")]:
        bad = os.path.join(tmp, "bad.json")
        with open(bad, "w") as f:
            json.dump({"entries": [entry]}, f)
        target_db = os.path.join(tmp, "never.db")
        r = run(MXFP6C, "precompile", "--shapes", bad, "--db", target_db)
        check(r.returncode == 1 and "entries[0]" in r.stderr and expect in r.stderr, f"bad entry {entry}: {r.stderr}")
        check(not os.path.exists(target_db), f"bad entry {entry} wrote a database")
    r = run(MXFP6C, "precompile", "--shapes", shapes, "--db", os.path.join(tmp, "never.db"), "--targets", "sm_91")
    check(r.returncode == 1 and "unknown target 'sm_91'" in r.stderr, f"unknown target: {r.stderr}")

    # SIGKILL in the middle of a larger precompile: the file opens and checks; a rerun finishes.
    big = os.path.join(tmp, "big.json")
    with open(big, "w") as f:
        json.dump({"entries": [{"op": op, "variant": {"FMT": "E3M2"}, "size": c, "tokens": [4096]}
                               for op in ("mxfp6_pack_rows", "mxfp6_pack_cols", "mxfp6_pack_dual")
                               for c in (3072, 9216, 12288, 15360, 21504)]}, f)
    killed_db = os.path.join(tmp, "killed.db")
    p = subprocess.Popen([MXFP6C, "precompile", "--shapes", big, "--db", killed_db, "--targets", "sm_90"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(3)
    p.send_signal(signal.SIGKILL)
    p.wait()
    if os.path.exists(killed_db):
        checked = run(MXFP6_DB, "check", "--db", killed_db)
        check(checked.returncode == 0, f"check after SIGKILL: {checked.stdout} {checked.stderr}")
    rerun = run(MXFP6C, "precompile", "--shapes", big, "--db", killed_db, "--targets", "sm_90")
    check(rerun.returncode == 0, f"rerun after SIGKILL: {rerun.stderr}")
    again = run(MXFP6C, "precompile", "--shapes", big, "--db", killed_db, "--targets", "sm_90")
    check("0 compiles" in again.stdout, f"third run compiled again: {again.stdout}")

finish()
