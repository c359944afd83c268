#!/usr/bin/env bash
# The main job on the shipped example: set up, build, then resolve, check and compile
# examples/tiny.json into a bundle of AOT kernels (out/tiny) for this CPU with an AVX2 fallback.
set -euo pipefail
cd "$(dirname "$0")/.."
# Only the padfold tool: the build directory's options (tests on) stay as scripts/test.sh left them.
BUILD_TARGETS=padfold bash scripts/build.sh
pf=build/bin/padfold
set -x
$pf pads --input 7x7 --kernel 4x4 --stride 2 --padding same --compare
$pf check examples/tiny.json
$pf compile examples/tiny.json -o out/tiny --target host,x86-64-linux-avx2-fma
