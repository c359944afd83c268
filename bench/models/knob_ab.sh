#!/bin/sh
# A schedule change measured on whole models: each model imported with default options, compiled
# twice for TARGET, A with KNOBS (a JSON object of knobs) over every kernel's defaults, B with the
# defaults alone, then timed side by side (layout_ab.py: alternating rounds of
# `padfold bench --model-only`, the median of the per-round A/B ratios) at 1 and 2 threads.
# Models come from bench/models/run.sh's work directory (run it once first).
#   usage: bench/models/knob_ab.sh TARGET 'KNOBS' MODEL... (e.g. host '{"gemm_pixels": 0}' resnet50)
#   BUILD=dir (default build), ROUNDS=n (default 7), OUT=dir (default $BUILD/bench/knob_ab)
set -eu
repo=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$repo/build}
ROUNDS=${ROUNDS:-7}
OUT=${OUT:-$BUILD/bench/knob_ab}
padfold=$BUILD/bin/padfold
py=$repo/.venv/bin/python
target=$1
knobs=$2
shift 2
for m in "$@"; do
  onnx=$BUILD/bench/models/$m.onnx
  [ -f "$onnx" ] || { echo "$onnx: missing; run bench/models/run.sh with MODELS=$m first" >&2; exit 1; }
  d=$OUT/$m-$target
  rm -rf "$d"
  mkdir -p "$d"
  "$padfold" import "$onnx" -o "$d/imported" >/dev/null
  spec=$d/imported/$m.json
  "$padfold" compile "$spec" -o "$d/B" --target "$target" >/dev/null
  "$py" - "$d" "$knobs" <<'EOF'
import json, sys
d, knobs = sys.argv[1], json.loads(sys.argv[2])
kernels = json.load(open(f"{d}/B/manifest.json"))["targets"][0]["schedules"]
json.dump({k: knobs for k in kernels}, open(f"{d}/a_knobs.json", "w"))
EOF
  "$padfold" compile "$spec" -o "$d/A" --target "$target" --schedules "$d/a_knobs.json" >/dev/null
  for n in 1 2; do
    "$py" "$repo/bench/models/layout_ab.py" "$padfold" "$d/A" "$d/B" "$n" "$ROUNDS" 0.3 \
      >"$d/ab-$n.json"
    "$py" - "$d/ab-$n.json" "$m" "$target" "$n" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"{sys.argv[2]} {sys.argv[3]} {sys.argv[4]} thread(s): A {r['a_median_ms']:.2f} ms, "
      f"B {r['b_median_ms']:.2f} ms, A/B {r['ratio_median']:.3f} (per round "
      + ", ".join(f"{x:.2f}" for x in r["ratios"]) + ")")
EOF
  done
done
