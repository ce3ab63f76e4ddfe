#!/usr/bin/env bash
# Fresh machine to the main job: install packages, build, then compile every kernel in
# kernels_dsl/ for sm_90, gfx942 and gfx950 at its default configuration into build/kernels/,
# printing code-object size and resource use per kernel and target.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
build/bin/mxfp6c precompile kernels_dsl -o build/kernels --targets sm_90,gfx942,gfx950
