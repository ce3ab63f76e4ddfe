#!/usr/bin/env bash
# Builds mxfp6c a second time with g++ 12 (into build-gcc/) and checks that it emits the same
# bytes as the clang build in build/ for every configuration of build/gpu_kernels and every
# kernel's defaults (scripts/compare_codegen.py). The emitted instruction order must not depend
# on the compiler that built mxfp6c: code objects are content-addressed under one toolchain key.
# Run after scripts/test.sh (which builds build/); `.ci/run` does.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
[ -x build/bin/mxfp6c ] || { echo "build/bin/mxfp6c is missing: run scripts/build.sh first" >&2; exit 1; }
CC=gcc-12 CXX=g++-12 cmake -G Ninja -S . -B build-gcc -DCMAKE_BUILD_TYPE=Release > /dev/null
ninja -C build-gcc -j "${MXFP6_BUILD_JOBS:-2}" mxfp6c
python3 scripts/compare_codegen.py build/bin/mxfp6c build-gcc/bin/mxfp6c --jobs 2
