#!/usr/bin/env bash
# Configures and builds mxfp6c into build/ with Ninja and clang 22 (clang: the DSL fuzzer needs
# libFuzzer). Extra arguments go to cmake, e.g. -DMXFP6_BUILD_COMPILER=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."
export CC=${CC:-clang-22} CXX=${CXX:-clang++-22}
cmake -G Ninja -S . -B build -DCMAKE_BUILD_TYPE=Release "$@"
# Code objects whose rule was removed would stay in build/gpu_kernels, and the GPU tests and the
# benchmark take every object there: remove outputs that no rule produces any more.
ninja -C build -t cleandead > /dev/null
# Two cores, and MLIR translation units need ~1 GiB each: two jobs at most.
ninja -C build -j "${MXFP6_BUILD_JOBS:-2}"
