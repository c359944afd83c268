#!/usr/bin/env bash
# A GPU knob sweep, compiled here (Halide) and timed on the GPU machine: the same random sets of
# GPU knobs on every named benchmark layer at batch 1 and 32, beside the defaults (v0), into
# bench/gpu/sweep_bundle (git-ignored; carry it). There: `python3 bench/gpu/run_bench.py
# bench/gpu/sweep_bundle --padfold-only --out sweep.md` (every variant still checked against
# PyTorch), then `bench/gpu/sweep_report.py sweep.md` here.
# usage: bench/gpu/sweep.sh N_VARIANTS layer[,layer...]   (BUILD=dir, TARGET as build.sh)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
padfold="${BUILD:-$root/build}/bin/padfold"
out="$root/bench/gpu/sweep_bundle"
target="${TARGET:-x86-64-linux-sse41-cuda-cuda_capability_86}"
[ $# -eq 2 ] || { echo "usage: $0 N_VARIANTS layer[,layer...]" >&2; exit 2; }
tmp="$(mktemp -d)"
/usr/bin/python3 "$root/bench/gpu/make_gpu_spec.py" "$root/bench/layers.json" "$tmp/bench_gpu_spec.json" \
  --sweep "$1" --layers "$2" --schedules "$tmp/knobs.json"
rm -rf "$out"  # this script's own output
"$padfold" compile "$tmp/bench_gpu_spec.json" --target "$target" --schedules "$tmp/knobs.json" -o "$out"
cp "$tmp/bench_gpu_spec.json" "$tmp/knobs.json" "$out/"
du -sh "$out"
