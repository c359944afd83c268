#!/usr/bin/env bash
# Installs every Debian 12 package padfold needs to build, test and benchmark. Idempotent.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config clang-format
  libhalide14-0-dev            # Halide 14 (LLVM inside): the kernel compiler
  libcli11-dev nlohmann-json3-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libonnx-dev libonnx-testdata libprotobuf-dev   # ONNX node tests, read with protobuf
  libxtensor-dev               # .npy I/O (xtensor/xnpy.hpp)
  libkainjow-mustache-dev      # templates for emitted files (templates/)
  libcjson-dev                 # manifest parsing inside the C runtime
  libdnnl-dev                  # oneDNN: the benchmark peer
  python3-jsonschema           # validates example specs against the JSON Schema in tests
  qemu-user g++-aarch64-linux-gnu g++-arm-linux-gnueabihf  # embedded (cross) builds
  g++-riscv64-linux-gnu        # embedded riscv-64-linux cross build (tests/embedded_*)
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi
