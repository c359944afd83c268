#!/usr/bin/env bash
# Long fuzzing runs (opt-in): every libFuzzer target of tests/fuzz for SECONDS each (default one
# hour), one after another, from the corpus grown so far in build-san/tests/fuzz/corpus.
# Each run draws a new libFuzzer seed (FUZZ_SEED=N to replay the suite's sequence: it uses 1).
# Findings are written as crash-*/leak-*/timeout-* files in the current directory.
#   bash scripts/fuzz.sh [SECONDS] [target ...]
#   targets: spec manifest pads npy onnx onnx_graph db
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-3600}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(spec manifest pads npy onnx onnx_graph db)
SAN_BUILD_ONLY=1 FUZZ_SECONDS="$seconds" FUZZ_SEED="${FUZZ_SEED:-0}" bash scripts/sanitize.sh
cd build-san
for t in "${targets[@]}"; do
  ../.venv/bin/ctest -R "^fuzz_${t}\$" --output-on-failure --timeout $((seconds + 600)) |
    grep -E "stat::|Done|ERROR|Passed|Failed" || true
done
