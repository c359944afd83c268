#!/usr/bin/env bash
# The benchmark in one command: configures build-bench (PADFOLD_BUILD_BENCH=ON), builds padfold
# and bench_conv (-j2 by default: JOBS=n to change), writes the bench spec from
# bench/layers.json, compiles it with `padfold compile --target host --emit-stmt --prepare-entry`
# (bench_conv prepares each layer's weights once, outside timing, as oneDNN reorders its own),
# checks the kernels' steady-state loops for boundary tests (padfold stmt-check), runs bench_conv at 1 and 2 threads
# and writes bench/results.md. Extra arguments go to cmake (e.g. -DPADFOLD_BENCH_MIN_TIME=0.5).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD:-$root/build-bench}"
bash "$root/scripts/setup-debian.sh"
"$root/.venv/bin/cmake" -S "$root" -B "$build" -G Ninja -DPADFOLD_BUILD_BENCH=ON "$@" >/dev/null
ninja -C "$build" -j"${JOBS:-2}" bench
