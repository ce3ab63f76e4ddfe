#!/usr/bin/env bash
# Installs the Debian 12 packages mxfp6c builds and tests with. Idempotent: installs only what
# is missing, running `apt-get update` once when it has to install anything.
set -euo pipefail

packages=(
  cmake ninja-build clang-22 lld-22 libclang-rt-22-dev
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools
  rocm-device-libs libamdhip64-dev
  libsqlite3-dev nlohmann-json3-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev
  libgtest-dev libgmock-dev
  binutils file python3 python3-pip
  python3-numpy python3-torch
  g++-12
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
