#!/bin/bash
# Packs what the Python ops' GPU run needs on a machine without LLVM or Debian's gRPC into one
# folder (default .gpu46, gitignored): the runtime and client libraries with the client's shared
# dependencies, launch_bench, and a kernel database with every family the run resolves
# (tests/gpu/python/families.json), precompiled for sm_90. Run from the repository root after a
# build; then, on the GPU machine, tests/gpu/python/run.sh BUNDLE OUTDIR.
set -euo pipefail
bundle=${1:-.gpu46}
mkdir -p "$bundle/lib" "$bundle/lib/stdcxx" "$bundle/bin"
cp build/lib/libmxfp6rt.so build/lib/libmxfp6_client.so "$bundle/lib/"
# The client's dependencies, except the C runtime and libstdc++ (the GPU machine's own is used,
# ours kept aside in lib/stdcxx for a machine whose libstdc++ is older).
ldd build/lib/libmxfp6_client.so | awk '$3 ~ /^\// {print $3}' |
  grep -v -E '/(libc|libm|libgcc_s|libstdc\+\+|ld-linux[^/]*)\.so' | xargs -I{} cp -L {} "$bundle/lib/"
cp -L "$(ldd build/lib/libmxfp6_client.so | awk '/libstdc\+\+/ {print $3}')" "$bundle/lib/stdcxx/"
cp build/bin/launch_bench "$bundle/bin/"
build/bin/mxfp6c precompile --shapes tests/gpu/python/families.json --targets sm_90 --db "$bundle/ops.db"
du -sh "$bundle"
