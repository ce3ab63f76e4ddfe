#!/bin/bash
# Packs what the Python ops' GPU run needs on a machine without LLVM or Debian's gRPC into one
# folder (default .gpu46, gitignored): the runtime and client libraries with the client's shared
# dependencies, launch_bench, and a kernel database with every family the run resolves
# (tests/gpu/python/families.json), precompiled for sm_90. Run from the repository root after a
# build; then, on the GPU machine, tests/gpu/python/run.sh BUNDLE OUTDIR.
set -euo pipefail
bundle=${1:-.gpu46}
mkdir -p "$bundle/bin"
scripts/pack-client-libs.sh "$bundle/lib"
cp build/bin/launch_bench "$bundle/bin/"
build/bin/mxfp6c precompile --shapes tests/gpu/python/families.json --targets sm_90 --db "$bundle/ops.db"
du -sh "$bundle"
