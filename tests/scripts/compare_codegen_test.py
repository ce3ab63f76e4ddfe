#!/usr/bin/env python3
"""scripts/compare_codegen.py against known answers: an mxfp6c compared with itself is the same
everywhere (exit 0); a wrapper that adds a byte to one target's output of one kernel, or fails
one compile, is reported for exactly those configurations (exit 1).

    compare_codegen_test.py PATH/TO/mxfp6c
"""
import os
import pathlib
import stat
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[2]
COMPARE = [sys.executable, str(REPO / "scripts" / "compare_codegen.py")]


def wrapper(folder, mxfp6c, name, body):
    """A stand-in for mxfp6c: `body` (bash) runs first with the arguments in "$*"."""
    path = pathlib.Path(folder) / name
    path.write_text(f'#!/usr/bin/env bash\n{body}\nexec "{mxfp6c}" "$@"\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def run(a, b):
    r = subprocess.run(COMPARE + [a, b, "--only", "rmsnorm", "--jobs", "2"], capture_output=True, text=True)
    return r.returncode, r.stdout


def main():
    mxfp6c = os.path.abspath(sys.argv[1])
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        rc, out = run(mxfp6c, mxfp6c)
        if rc != 0 or "DIFFERS" in out or " same" not in out:
            failures.append(f"itself: exit {rc}\n{out}")
        extra = wrapper(tmp, mxfp6c, "extra-byte", 'if [[ "$*" == *"--kernel rmsnorm --target gfx942"* ]]; then '
                        f'"{mxfp6c}" "$@"; printf x; exit 0; fi')
        rc, out = run(mxfp6c, extra)
        differs = [l for l in out.splitlines() if l.startswith("DIFFERS")]
        if rc != 1 or not differs or any("rmsnorm gfx942" not in l for l in differs):
            failures.append(f"extra byte: exit {rc}\n{out}")
        broken = wrapper(tmp, mxfp6c, "broken", 'if [[ "$*" == *"--kernel rmsnorm --target gfx950"* ]]; then '
                         'echo "error: refused" >&2; exit 1; fi')
        rc, out = run(mxfp6c, broken)
        differs = [l for l in out.splitlines() if l.startswith("DIFFERS")]
        if rc != 1 or len(differs) != 1 or "rmsnorm gfx950 (defaults): one compiles, the other does not" not in differs[0]:
            failures.append(f"failed compile: exit {rc}\n{out}")
    for f in failures:
        print("FAIL", f)
    print("ok" if not failures else f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
