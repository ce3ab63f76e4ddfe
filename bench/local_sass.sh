#!/usr/bin/env bash
# The sm_90 SASS of one kernel at one configuration, on the build machine (no GPU): mxfp6c's PTX,
# assembled by ptxas, disassembled by nvdisasm. Where ptxas schedules a kernel's loads, shuffles
# and barriers can be read here before any device time is spent (ANCHOR was found this way).
#
#   bench/local_sass.sh kernels_dsl/norm_rope.mxk norm_rope_fwd ROWS=8,THREADS=8,VEC=8,ANCHOR=1
#
# nvdisasm: $NVDISASM, or on PATH. The CUDA 13 compiler package here ships none; Debian
# bookworm's nvidia-cuda-toolkit 11.8 has one (the non-free component in the apt sources),
# unpacked without installing its dependencies:
#   apt-get download nvidia-cuda-toolkit && dpkg -x nvidia-cuda-toolkit_*.deb /opt/cu118
#   export NVDISASM=/opt/cu118/usr/bin/nvdisasm
# That one reads only the CUDA 12 ELF header: ptxas 13's cubin is given it (OS/ABI 0x33, ABI
# version 7, e_flags 0x005a055a for sm_90); the sections are unchanged.
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 FILE.mxk KERNEL CONFIG" >&2; exit 2; }
root="$(cd "$(dirname "$0")/.." && pwd)"
mxfp6c="${MXFP6C:-$root/build/bin/mxfp6c}"
ptxas="${MXFP6_PTXAS:-/usr/local/cuda/bin/ptxas}"
nvdisasm="${NVDISASM:-$(command -v nvdisasm || true)}"
[ -x "$nvdisasm" ] || { echo "$0: no nvdisasm (set NVDISASM; see the header of this script)" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$mxfp6c" compile "$1" --kernel "$2" --target sm_90 --config "$3" --emit ptx -o "$work/k.ptx"
"$ptxas" -arch=sm_90 -v "$work/k.ptx" -o "$work/k.cubin" 2>&1 | grep -E "registers|spill" >&2 || true
printf '\x33\x07' | dd of="$work/k.cubin" bs=1 seek=7 conv=notrunc status=none
printf '\x5a\x05\x5a\x00' | dd of="$work/k.cubin" bs=1 seek=48 conv=notrunc status=none
"$nvdisasm" -c "$work/k.cubin" | grep -vE '^\s*/\*[0-9a-f]+\*/\s+NOP ;'
