#!/usr/bin/env bash
# Installs what padfold needs (Debian 12 packages, Halide and CMake in .venv) and builds it into
# ./build. Extra arguments go to cmake; BUILD_TARGETS (space-separated) builds only those targets.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-debian.sh
.venv/bin/cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
# shellcheck disable=SC2086  # BUILD_TARGETS is a list
.venv/bin/cmake --build build -j "$(nproc)" ${BUILD_TARGETS:+--target $BUILD_TARGETS}
