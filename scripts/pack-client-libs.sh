#!/bin/bash
# Packs the runtime and client libraries (build/lib) with the client's shared dependencies into
# DEST, for a GPU machine without Debian's gRPC or LLVM: the benchmark (bench/ours.py) and the
# Python package load them from there. The C runtime and libstdc++ stay the machine's own; ours is
# kept aside in DEST/stdcxx for a machine whose libstdc++ is older. DEST/env.sh, sourced on that
# machine, points LD_LIBRARY_PATH and MXFP6_LIB_DIR at DEST (and at DEST/stdcxx only where the
# libraries do not load without it).
set -euo pipefail
dest=${1:?usage: scripts/pack-client-libs.sh DEST}
mkdir -p "$dest/stdcxx"
cp build/lib/libmxfp6rt.so build/lib/libmxfp6_client.so "$dest/"
ldd build/lib/libmxfp6_client.so | awk '$3 ~ /^\// {print $3}' |
  grep -v -E '/(libc|libm|libgcc_s|libstdc\+\+|ld-linux[^/]*)\.so' | xargs -I{} cp -L {} "$dest/"
cp -L "$(ldd build/lib/libmxfp6_client.so | awk '/libstdc\+\+/ {print $3}')" "$dest/stdcxx/"
cat > "$dest/env.sh" <<'ENV'
# Sourced on the GPU machine: the packed libraries first (scripts/pack-client-libs.sh).
_libs=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export LD_LIBRARY_PATH=$_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} MXFP6_LIB_DIR=$_libs
python3 -c "import torch, ctypes; ctypes.CDLL('$_libs/libmxfp6rt.so', mode=ctypes.RTLD_GLOBAL); ctypes.CDLL('$_libs/libmxfp6_client.so')" 2> /dev/null ||
  export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$_libs/stdcxx
ENV
