#!/usr/bin/env bash
# Fresh machine to green tests: install packages, build, run every test (GPU tests skip where
# no GPU driver loads). `.ci/run` calls this.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
ctest --test-dir build --output-on-failure -j 2 --timeout 900
