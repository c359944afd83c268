#!/usr/bin/env bash
# Installs what padfold needs (Debian 12 packages, Halide and CMake in .venv) and builds it into
# ./build. Extra arguments go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-debian.sh
.venv/bin/cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
.venv/bin/cmake --build build -j "$(nproc)"
