#!/usr/bin/env bash
# Fresh machine to the main job: install packages, build, then precompile every candidate plan of
# the Flux.1 12B shape set (shapes/flux12b.json: training micro-batches 16, 32, 64 and an
# evaluation width) for sm_90, gfx942 and gfx950 into the embedded kernel database
# var/kernels.db (a second run compiles nothing), check the database, and show how one key of
# the set resolves.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
mkdir -p var
build/bin/mxfp6c precompile --shapes shapes/flux12b.json --targets sm_90,gfx942,gfx950 --db var/kernels.db
build/bin/mxfp6-db check --db var/kernels.db
build/bin/mxfp6-db why --db var/kernels.db "ln_modulate_fwd/S=256,layout=bsd/sm_90/D=3072/8192"
