#!/usr/bin/env python3
"""Keeps the repository readable as a product (ctest: repo_check_record).

Fails, naming each offender, when
  - bench/results/ holds more than 40 files or more than 5 MB: it keeps the current record
    (bench/README.md says what); older runs live in git history and bench/HISTORY.md;
  - a Markdown file of the repository has a line over 400 characters, Markdown table rows
    (lines that start with '|') aside.

Usage: check_record.py REPO_ROOT
"""
import os
import subprocess
import sys

MAX_RESULT_FILES = 40
MAX_RESULT_BYTES = 5 * 1000 * 1000
MAX_LINE = 400
SKIP_DIRS = {".git", "node_modules", "__pycache__"}


def markdown_files(root):
    """The repository's Markdown files: tracked and untracked-but-not-ignored ones where git is
    available, else every *.md outside build folders."""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others",
                              "--exclude-standard", "--", "*.md"],
                             capture_output=True, check=True).stdout
        return sorted({p for p in out.decode().split("\0") if p and os.path.isfile(os.path.join(root, p))})
    except (OSError, subprocess.CalledProcessError):
        found = []
        for d, dirs, files in os.walk(root):
            dirs[:] = [x for x in dirs if x not in SKIP_DIRS and not x.startswith("build")]
            found += [os.path.relpath(os.path.join(d, f), root) for f in files if f.endswith(".md")]
        return sorted(found)


def check_results(root):
    folder = os.path.join(root, "bench", "results")
    if not os.path.isdir(folder):
        return [f"{folder}: missing"]
    files = [os.path.join(d, f) for d, _, fs in os.walk(folder) for f in fs]
    size = sum(os.path.getsize(f) for f in files)
    errors = []
    if len(files) > MAX_RESULT_FILES:
        errors.append(f"bench/results: {len(files)} files, limit {MAX_RESULT_FILES} "
                      "(git rm what a newer run supersedes; bench/HISTORY.md keeps the line)")
    if size > MAX_RESULT_BYTES:
        errors.append(f"bench/results: {size} bytes, limit {MAX_RESULT_BYTES}")
    return errors


def check_markdown(root):
    errors = []
    for rel in markdown_files(root):
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            lines = f.readlines()
        for n, line in enumerate(lines, 1):
            line = line.rstrip("\n")
            if len(line) > MAX_LINE and not line.lstrip().startswith("|"):
                errors.append(f"{rel}:{n}: line of {len(line)} characters, limit {MAX_LINE} "
                              f"(starts: {line[:60]!r})")
    return errors


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    root = os.path.abspath(argv[1])
    errors = check_results(root) + check_markdown(root)
    for e in errors:
        print("error: " + e)
    if errors:
        return 1
    print(f"ok: bench/results within {MAX_RESULT_FILES} files and {MAX_RESULT_BYTES} bytes; "
          f"no Markdown line over {MAX_LINE} characters outside tables")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
