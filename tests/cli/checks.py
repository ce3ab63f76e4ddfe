"""What the CLI tests share: each check() that fails is printed and counted, and finish() exits
with the verdict, so one run reports every failure instead of the first."""
import os
import subprocess
import sys

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(*args, env=None):
    """Runs a command with `env` added to this process's environment; text output, never raises."""
    return subprocess.run(args, capture_output=True, text=True, errors="replace",
                          env=dict(os.environ, **(env or {})))


def finish():
    print("ok" if not failures else f"{len(failures)} failure(s)")
    sys.exit(1 if failures else 0)


def fixture(name):
    """A file of tests/fixtures (the DSL kernels the tests run)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", name)
