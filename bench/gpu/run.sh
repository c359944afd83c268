#!/usr/bin/env bash
# The GPU benchmark, on the GPU machine (PyTorch with CUDA; no Halide needed): checks every
# benchmark layer's CUDA kernel element-wise against PyTorch, then times padfold and PyTorch
# (cuDNN; F.pad + conv for asymmetric pads and non-zero borders) at batch 1 and 32, FP32 with TF32
# off, and writes bench/gpu/results.md; then runs the GPU tests' case sets against their reference
# outputs (check_cases.py, bench/gpu/results-cases.md). The kernels come from bench/gpu/build.sh
# (run on the CPU machine, bundle and cases carried here): bench/gpu/run.sh [bundle_dir [cases_dir]].
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bundle="${1:-$here/bundle}"
cases="${2:-$here/cases}"
python="${PYTHON:-python3}"
[ -f "$bundle/manifest.json" ] || { echo "no bundle at $bundle: run bench/gpu/build.sh first" >&2; exit 1; }
"$python" -c "import torch; assert torch.cuda.is_available(), 'no CUDA device for PyTorch'"
rc=0
"$python" "$here/run_bench.py" "$bundle" --out "$here/results.md" \
  --command "bench/gpu/run.sh $*" || rc=1
"$python" "$here/check_cases.py" "$cases" --out "$here/results-cases.md" || rc=1
exit $rc
