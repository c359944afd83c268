#!/usr/bin/env bash
# Compiles the GPU benchmark's kernels on the CPU machine (Halide is not on the GPU machine):
# writes the spec from bench/layers.json and `padfold compile`s it for CUDA into
# bench/gpu/bundle, checking every kernel's PTX with ptxas for sm_90 (H100, H200) when the CUDA
# toolkit is here; then the GPU tests' case sets with their reference outputs into
# bench/gpu/cases (gpu_cases_export). Both git-ignored: carry them to the GPU machine.
# BUILD=dir: padfold's build (default build/, targets padfold and gpu_cases_export); TARGET: the
# target (default: SSE4.1 host code, sm_86 PTX, JIT-compiled on newer GPUs).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
padfold="${BUILD:-$root/build}/bin/padfold"
exporter="${BUILD:-$root/build}/bin/gpu_cases_export"
out="$root/bench/gpu/bundle"
target="${TARGET:-x86-64-linux-sse41-cuda-cuda_capability_86}"
for exe in "$padfold" "$exporter"; do
  [ -x "$exe" ] || { echo "build padfold and gpu_cases_export first (expected $exe)" >&2; exit 1; }
done
spec="$(mktemp -d)/bench_gpu_spec.json"
/usr/bin/python3 "$root/bench/gpu/make_gpu_spec.py" "$root/bench/layers.json" "$spec"
rm -rf "$out"  # this script's own output (it adds the spec, which compile does not write)
"$padfold" compile "$spec" --target "$target" --emit-device-code -o "$out"
cp "$spec" "$out/bench_gpu_spec.json"
ptxas="$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)"
if [ -x "$ptxas" ]; then
  for ptx in "$out"/*/*.ptx; do
    "$ptxas" -arch=sm_90 "$ptx" -o /dev/null || { echo "ptxas failed on $ptx" >&2; exit 1; }
  done
  echo "every kernel's PTX assembles for sm_90"
fi
rm -rf "$root/bench/gpu/cases"
"$exporter" "$root/bench/gpu/cases" "$target"
du -sh "$out" "$root/bench/gpu/cases"
