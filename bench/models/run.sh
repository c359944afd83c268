#!/bin/sh
# Whole real CNN classifiers (make_models.py: MobileNetV2, EfficientNet-B0, ResNet-50 v1.5; 224x224,
# batch 1, random weights) through padfold import -> compile -> bench, against ONNX Runtime on
# the same models, 1 and 2 threads, in one run; writes bench/results-models.md. Opt-in, never part
# of the test suite. Each model is checked first: padfold's output against ONNX Runtime's.
#   BUILD=dir (default build: its bin/padfold), MIN_TIME=s (per kernel and method, default 0.3),
#   MODELS="mobilenet_v2 ..." (default all three), LAYOUTS="nchw nhwc",
#   TARGETS="host x86-64-linux-avx2-fma" (the families measured; default host, plus the AVX2
#   target where host is AVX-512), RETRIES=n (padfold bench --retries, default 5),
#   RESULTS=file (default bench/results-models.md),
#   TUNE=duration (e.g. 15m): also `padfold tune` each model's NHWC spec for `host` within that
#   time (--no-baselines), compile it with the database and time the tuned bundle beside the
#   others (TUNE_MODELS, default every model).
set -eu
repo=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$repo/build}
MIN_TIME=${MIN_TIME:-0.3}
MODELS=${MODELS:-"mobilenet_v2 efficientnet_b0 resnet50"}
LAYOUTS=${LAYOUTS:-"nchw nhwc"}
if [ -z "${TARGETS:-}" ]; then
  TARGETS=host
  grep -q -w avx512f /proc/cpuinfo && TARGETS="host x86-64-linux-avx2-fma"
fi
RESULTS=${RESULTS:-$repo/bench/results-models.md}
padfold=$BUILD/bin/padfold
py=$repo/.venv/bin/python   # onnx, onnxruntime (scripts/requirements.txt)
work=$BUILD/bench/models
mkdir -p "$work"

for m in $MODELS; do
  if [ ! -f "$work/$m.onnx" ]; then
    [ -f "$work/raw/$m.onnx" ] || /usr/bin/python3 "$repo/bench/models/make_models.py" \
      "$work/raw" >/dev/null 2>&1
    cp "$work/raw/$m.onnx" "$work/$m.onnx"
  fi
done

for m in $MODELS; do
  for layout in $LAYOUTS; do
    d=$work/$m-$layout
    "$padfold" import "$work/$m.onnx" -o "$d/imported" --layout "$layout" >/dev/null 2>&1
    for t in $TARGETS; do
      b=$d/bundle-$t
      [ -f "$b/manifest.json" ] || "$padfold" compile "$d/imported/$m.json" -o "$b" --target "$t" \
        >"$d/compile-$t.txt" 2>&1
    done
  done
  # padfold's output against ONNX Runtime's on one input (checked before anything is timed).
  "$py" - "$work" "$m" "$padfold" "$LAYOUTS" "$TARGETS" <<'PY'
import json, subprocess, sys, pathlib
import numpy as np
work, m, padfold, layouts, targets = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4].split(), sys.argv[5].split()
x = np.random.default_rng(1).uniform(0, 1, (1, 3, 224, 224)).astype(np.float32)
np.save(work / "x.npy", x)
import onnxruntime as ort
want = ort.InferenceSession(str(work / f"{m}.onnx"), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
np.save(work / f"{m}-ort-out.npy", want)
errors = {}
for layout in layouts:
    d = work / f"{m}-{layout}"
    spec = json.loads((d / "imported" / f"{m}.json").read_text())
    xin = np.ascontiguousarray(x.transpose(0, 2, 3, 1)) if layout == "nhwc" else x
    np.save(d / "x.npy", xin)
    for t in targets:
        out = d / f"y-{t}.npy"
        subprocess.run([padfold, "run", str(d / f"bundle-{t}"), "--model", "--input",
                        f"{spec['inputs'][0]['name']}={d / 'x.npy'}", "--output", str(out)],
                       check=True, capture_output=True)
        got = np.load(out)
        if layout == "nhwc" and got.ndim == 4:
            got = got.transpose(0, 3, 1, 2)
        errors[f"{layout}/{t}"] = float(np.abs(got - want).max() / np.abs(want).max())
        if errors[f"{layout}/{t}"] > 1e-4:
            sys.exit(f"{m} {layout} {t}: padfold differs from ONNX Runtime: {errors}")
(work / f"{m}-check.json").write_text(json.dumps(errors))
PY
done

# Tuning (TUNE): one database per model, resumed by a rerun; the tuned bundle beside the defaults.
if [ -n "${TUNE:-}" ]; then
  for m in ${TUNE_MODELS:-$MODELS}; do
    d=$work/$m-nhwc
    start=$(date +%s)
    "$padfold" tune "$d/imported/$m.json" --target host --time "$TUNE" --no-baselines \
      --db "$work/$m-tune.sqlite" --report "$work/$m-tune.json" >"$work/$m-tune.txt" 2>&1
    echo "$(( $(date +%s) - start ))" >"$work/$m-tune-seconds"
    rm -rf "$d/bundle-host-tuned"
    "$padfold" compile "$d/imported/$m.json" -o "$d/bundle-host-tuned" --target host \
      --db "$work/$m-tune.sqlite" >"$d/compile-host-tuned.txt" 2>&1
    # The tuned bundle against ONNX Runtime's output too, before it is timed.
    "$padfold" run "$d/bundle-host-tuned" --model --input "x=$d/x.npy" --output "$d/y-tuned.npy" \
      >/dev/null
    "$py" - "$work" "$m" <<'PY'
import json, pathlib, sys
import numpy as np
work, m = pathlib.Path(sys.argv[1]), sys.argv[2]
want = np.load(work / f"{m}-ort-out.npy")
got = np.load(work / f"{m}-nhwc" / "y-tuned.npy")
err = float(np.abs(got - want).max() / np.abs(want).max())
if err > 1e-4:
    sys.exit(f"{m}: the tuned bundle differs from ONNX Runtime: {err}")
(work / f"{m}-tuned-check.json").write_text(json.dumps({"nhwc/host-tuned": err}))
PY
  done
fi

# Timing: per model and thread count, ONNX Runtime, then padfold (each layout and target), then
# ONNX Runtime again (the two ORT medians show the drift over the padfold runs).
for m in $MODELS; do
  for n in 1 2; do
    "$py" "$repo/bench/models/ort_time.py" "$work/$m.onnx" "$n" 3 >"$work/$m-ort-$n-a.json"
    for layout in $LAYOUTS; do
      for t in $TARGETS; do
        "$padfold" bench "$work/$m-$layout/bundle-$t" --threads "$n" --min-time "$MIN_TIME" \
          --retries "${RETRIES:-5}" \
          --json >"$work/$m-$layout-$t-$n.json"
      done
    done
    if [ -n "${TUNE:-}" ] && [ -f "$work/$m-nhwc/bundle-host-tuned/manifest.json" ]; then
      "$padfold" bench "$work/$m-nhwc/bundle-host-tuned" --threads "$n" --min-time "$MIN_TIME" \
        --retries "${RETRIES:-5}" --json >"$work/$m-nhwc-host-tuned-$n.json"
    fi
    "$py" "$repo/bench/models/ort_time.py" "$work/$m.onnx" "$n" 3 >"$work/$m-ort-$n-b.json"
  done
done

# The section "## Earlier runs" of the results file (other CPUs, older models) is kept.
TUNE="${TUNE:-}" "$py" "$repo/bench/models/report.py" "$work" "$MODELS" "$LAYOUTS" "$TARGETS" \
  "$MIN_TIME" "$RESULTS" >"$RESULTS.new"
mv "$RESULTS.new" "$RESULTS"
echo "wrote $RESULTS"
