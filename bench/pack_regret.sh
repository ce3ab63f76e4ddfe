#!/bin/bash
# Packs what the tuner's regret run (bench/regret_run.sh) needs on a GPU machine without LLVM into
# BUNDLE (default .gpu44, gitignored): the tuner and mxfp6-db, the runtime and client libraries with
# their dependencies (scripts/pack-client-libs.sh), the kernels' DSL (the tuner's gate runs the
# interpreter on it) and a kernel database with every candidate of the benchmark's T = 16384 Flux
# keys (shapes/regret-t16384.json) precompiled for sm_90. Run from the repository root after a
# build; the carry is [BUNDLE, "build/gpu_kernels"] (the harness times the candidates folder).
set -euo pipefail
bundle=${1:-.gpu44}
mkdir -p "$bundle/bin"
scripts/pack-client-libs.sh "$bundle/lib"
cp build/bin/mxfp6-tune build/bin/mxfp6-db "$bundle/bin/"
rm -rf "$bundle/kernels_dsl"
cp -r kernels_dsl "$bundle/kernels_dsl"
build/bin/mxfp6c precompile --shapes shapes/regret-t16384.json --targets sm_90 --db "$bundle/kernels.db"
du -sh "$bundle"
