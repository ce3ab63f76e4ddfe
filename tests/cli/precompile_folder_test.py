"""mxfp6c precompile --shapes FILE -o DIR end to end: a shape set's candidates written as code
objects with their .json launch metadata, named as cmake/Mxfp6Kernels.cmake's
mxfp6_code_objects() names them (<kernel>.<target>.<config, "," -> "_", "=" dropped>.code); a
second run that rewrites nothing (a build's timestamps stay); a shape file naming an unknown op
rejected, naming the entry, with nothing written.

usage: precompile_folder_test.py MXFP6C"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, finish, run  # noqa: E402

MXFP6C = sys.argv[1]


def snapshot(folder):
    return {name: os.stat(os.path.join(folder, name)).st_mtime_ns for name in sorted(os.listdir(folder))}


with tempfile.TemporaryDirectory() as tmp:
    shapes = os.path.join(tmp, "shapes.json")
    with open(shapes, "w") as f:
        json.dump({"entries": [
            {"site": "LN fwd", "op": "ln_modulate_fwd", "variant": {"layout": "bsd"}, "size": 3072,
             "tokens_per_sample": 256, "tokens": [4096]},
            {"site": "row packer", "op": "mxfp6_pack_rows", "variant": {"FMT": "E3M2", "MODE": "RCEIL"},
             "size": 9216, "tokens": [4096]}]}, f)
    out = os.path.join(tmp, "objects")
    first = run(MXFP6C, "precompile", "--shapes", shapes, "--targets", "sm_90", "-o", out, "--jobs", "2")
    check(first.returncode == 0, f"first precompile failed: {first.stderr}")
    files = snapshot(out) if os.path.isdir(out) else {}
    codes = [n for n in files if n.endswith(".code")]
    check(len(codes) > 0 and all(n + ".json" in files for n in codes), f"objects without metadata: {sorted(files)}")
    check(all(n.endswith(".code") or n.endswith(".code.json") for n in files), f"other files: {sorted(files)}")
    check(f"{len(codes)} objects in" in first.stdout, f"summary: {first.stdout}")
    kernels = {n.split(".")[0] for n in codes}
    check(kernels == {"ln_modulate_fwd", "ln_modulate_fwd_samples", "mxfp6_pack_rows"}, f"kernels: {kernels}")
    # The op's default plan (ops/op_table.cpp's first config), at the key's size and variant.
    check("ln_modulate_fwd.sm_90.ANCHOR1_D3072_ROWS1_THREADS128_VEC8.code" in files, f"files: {sorted(files)}")
    check("mxfp6_pack_rows.sm_90.C9216_FMTE3M2_MODERCEIL_ROWS1_THREADS192_VEC16.code" in files, f"files: {sorted(files)}")
    for name in codes:
        with open(os.path.join(out, name + ".json")) as f:
            meta = json.load(f)
        kernel, target, tag, _ = name.split(".")
        check(meta["kernel"] == kernel and meta["target"] == target, f"{name}: metadata names {meta['kernel']}")
        config = meta["config"]
        size = ("C", 9216) if kernel == "mxfp6_pack_rows" else ("D", 3072)
        check(config.get(size[0]) == size[1], f"{name}: config {config}")
        for part in tag.split("_"):
            key = next((k for k in sorted(config, key=len, reverse=True) if part.startswith(k)), None)
            check(key is not None, f"{name}: tag part {part} not in the config {config}")
        check(os.path.getsize(os.path.join(out, name)) > 0, f"{name} is empty")

    second = run(MXFP6C, "precompile", "--shapes", shapes, "--targets", "sm_90", "-o", out, "--jobs", "2")
    check(second.returncode == 0 and "0 files written" in second.stdout, f"second run: {second.stdout} {second.stderr}")
    check(snapshot(out) == files, "second run touched files")

    # An unknown op: an error naming the entry, before anything is compiled or written.
    bad = os.path.join(tmp, "bad.json")
    with open(bad, "w") as f:
        json.dump({"entries": [
            {"site": "LN fwd", "op": "ln_modulate_fwd", "variant": {"layout": "bsd"}, "size": 3072,
             "tokens_per_sample": 256, "tokens": [4096]},
            {"site": "typo", "op": "ln_modulate_fwdd", "tokens": [4096]}]}, f)
    nothing = os.path.join(tmp, "nothing")
    r = run(MXFP6C, "precompile", "--shapes", bad, "--targets", "sm_90", "-o", nothing)
    check(r.returncode == 1 and "entries[1] (typo): unknown op 'ln_modulate_fwdd'" in r.stderr, f"bad op: {r.stderr}")
    check(not os.path.exists(nothing), "a rejected shape file created the folder")

    # --db and -o together, or -o with --force, are usage errors.
    r = run(MXFP6C, "precompile", "--shapes", shapes, "--db", os.path.join(tmp, "k.db"), "-o", out)
    check(r.returncode == 2, f"--db with -o: {r.returncode} {r.stderr}")
    r = run(MXFP6C, "precompile", "--shapes", shapes, "-o", out, "--force")
    check(r.returncode == 2, f"-o with --force: {r.returncode} {r.stderr}")

finish()
