#!/bin/sh
# Whole real CNN classifiers (make_models.py: MobileNetV2, EfficientNet-B0, ResNet-50 v1.5; 224x224,
# batch 1, random weights) through padfold import -> compile -> bench, against ONNX Runtime on
# the same models, 1 and 2 threads, in one run; writes bench/results-models.md. Opt-in, never part
# of the test suite. Each model is checked first: padfold's output against ONNX Runtime's.
#   BUILD=dir (default build: its bin/padfold), MIN_TIME=s (per kernel and method, default 0.3),
#   MODELS="mobilenet_v2 ..." (default the three torch models), LAYOUTS="auto nchw nhwc" (the
#   import options: auto = none, the default a user gets (the layers channels last, the arrays in
#   the model's layout); nchw = --layout nchw; nhwc = --layout nhwc --io-layout nhwc, the arrays
#   channels last too; default all three, auto and nhwc where MODELS names a keras_* model),
#   TARGETS="host x86-64-linux-avx2-fma" (the families measured; default host, plus the AVX2
#   target where host is AVX-512), RETRIES=n (padfold bench --retries, default 5),
#   RESULTS=file (default bench/results-models.md),
#   TUNE=duration (e.g. 15m): also `padfold tune` each model's NHWC spec for `host` within that
#   time (--no-baselines), compile it with the database and time the tuned bundle beside the
#   others (TUNE_MODELS, default every model).
# MODELS may also name keras_mobilenet_v2, keras_efficientnet_b0, keras_resnet50 and
# keras_mobilenet_v3_large: networks as keras.applications builds them and tf2onnx converts them
# (make_keras_models.py;
# NHWC input [1, 224, 224, 3], ResNet-50 v1, softmax heads), written with TF_PYTHON (default
# /tmp/tfv/bin/python, a venv with tensorflow-cpu and tf2onnx, see make_keras_models.py). NHWC
# only: their `--layout nchw` import leaves the input's layout Transpose to the caller, and a model
# input with a producer is refused by pf_model_open (padfold run --model, bench).
set -eu
repo=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$repo/build}
MIN_TIME=${MIN_TIME:-0.3}
MODELS=${MODELS:-"mobilenet_v2 efficientnet_b0 resnet50"}
case " $MODELS" in
  *" keras_"*)
    LAYOUTS=${LAYOUTS:-"auto nhwc"}
    case " $LAYOUTS " in *" nchw "*)
      echo "LAYOUTS=nchw with keras_* models: their NCHW import leaves the input Transpose to the" \
        "caller, and a model input with a producer cannot run whole; use LAYOUTS=nhwc" >&2
      exit 1 ;;
    esac ;;
esac
LAYOUTS=${LAYOUTS:-"auto nchw nhwc"}
if [ -z "${TARGETS:-}" ]; then
  TARGETS=host
  grep -q -w avx512f /proc/cpuinfo && TARGETS="host x86-64-linux-avx2-fma"
fi
RESULTS=${RESULTS:-$repo/bench/results-models.md}
padfold=$BUILD/bin/padfold
py=$repo/.venv/bin/python   # onnx, onnxruntime (scripts/requirements.txt)
work=$BUILD/bench/models
mkdir -p "$work"

tf_py=${TF_PYTHON:-/tmp/tfv/bin/python}   # tensorflow-cpu, tf2onnx: for the keras_* models
for m in $MODELS; do
  if [ ! -f "$work/$m.onnx" ]; then
    case $m in
      keras_*)
        if [ ! -f "$work/raw/$m.onnx" ]; then
          if [ ! -x "$tf_py" ]; then
            echo "$m is written by a Python with TensorFlow and tf2onnx: TF_PYTHON, default" \
              "/tmp/tfv/bin/python ($tf_py is missing). The default one:" >&2
            echo "  python3 -m venv /tmp/tfv && /tmp/tfv/bin/pip install tensorflow-cpu tf2onnx" >&2
            exit 1
          fi
          "$tf_py" "$repo/bench/models/make_keras_models.py" "$work/raw" "${m#keras_}" \
            >"$work/make-$m.txt" 2>&1 || { cat "$work/make-$m.txt" >&2; exit 1; }
        fi ;;
      *)
        [ -f "$work/raw/$m.onnx" ] || /usr/bin/python3 "$repo/bench/models/make_models.py" \
          "$work/raw" "$m" >/dev/null 2>&1 ;;
    esac
    cp "$work/raw/$m.onnx" "$work/$m.onnx"
  fi
done

for m in $MODELS; do
  for layout in $LAYOUTS; do
    d=$work/$m-$layout
    case $layout in
      auto) options="" ;;
      nchw) options="--layout nchw" ;;
      nhwc) options="--layout nhwc --io-layout nhwc" ;;
      *) echo "LAYOUTS: '$layout' is not auto, nchw or nhwc" >&2; exit 1 ;;
    esac
    # shellcheck disable=SC2086  # options is a list
    "$padfold" import "$work/$m.onnx" -o "$d/imported" $options >/dev/null 2>&1
    for t in $TARGETS; do
      b=$d/bundle-$t
      # Compiled afresh every run: a bundle left by an earlier padfold would be timed as this one.
      rm -rf "$b"
      "$padfold" compile "$d/imported/$m.json" -o "$b" --target "$t" >"$d/compile-$t.txt" 2>&1
    done
  done
  # padfold's output against ONNX Runtime's on one input (checked before anything is timed). The
  # torch models take NCHW [1, 3, 224, 224], the Keras models NHWC [1, 224, 224, 3]; the spec's
  # inputs and outputs are in its layout, mapped to ONNX tensors by the import report.
  "$py" - "$work" "$m" "$padfold" "$LAYOUTS" "$TARGETS" <<'PY'
import json, subprocess, sys, pathlib
import numpy as np
import onnxruntime as ort
work, m, padfold, layouts, targets = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4].split(), sys.argv[5].split()
path = str(work / f"{m}.onnx")
session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
(inp,) = session.get_inputs()
x = np.random.default_rng(1).uniform(0, 1, inp.shape).astype(np.float32)
np.save(work / f"{m}-x.npy", x)
want = {}  # ONNX output name -> its file, in ONNX Runtime's order
for k, (o, y) in enumerate(zip(session.get_outputs(), session.run(None, {inp.name: x}))):
    want[o.name] = str(work / f"{m}-ort-out-{k}.npy")
    np.save(want[o.name], y)


def in_shape(a, shape):
    """a as is, or its channels moved last or first, to the shape padfold's spec has."""
    for perm in ((0, 1, 2, 3), (0, 2, 3, 1), (0, 3, 1, 2)):
        if a.ndim == 4 and a.transpose(perm).shape == tuple(shape):
            return np.ascontiguousarray(a.transpose(perm))
    return a


errors = {}
for layout in layouts:
    d = work / f"{m}-{layout}"
    spec = json.loads((d / "imported" / f"{m}.json").read_text())
    report = json.loads((d / "imported" / "import-report.json").read_text())
    shapes = {i["name"]: i["shape"] for i in spec["inputs"]}
    run = {"inputs": {}, "outputs": {}}  # spec name -> file; read again for the tuned bundle
    for i in report["inputs"]:
        if i["produced_by"] is not None:
            sys.exit(f"{m} {layout}: spec input {i['name']} is computed by nodes left to the caller")
        run["inputs"][i["name"]] = str(d / f"in-{len(run['inputs'])}.npy")
        np.save(run["inputs"][i["name"]], in_shape(x, shapes[i["name"]]))
    for o in report["outputs"]:
        run["outputs"][o["name"]] = want.get(o["onnx_tensor"])
    if sorted(o for o in run["outputs"].values() if o) != sorted(want.values()):
        sys.exit(f"{m} {layout}: spec outputs {report['outputs']}, ONNX outputs {list(want)}")
    (d / "run.json").write_text(json.dumps(run))
    for t in targets:
        cmd = [padfold, "run", str(d / f"bundle-{t}"), "--model", "--input"]
        cmd += [f"{k}={v}" for k, v in run["inputs"].items()] + ["--output"]
        cmd += [f"{k}={d / f'y-{t}-{n}.npy'}" for n, k in enumerate(run["outputs"])]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            sys.exit(f"{m} {layout} {t}: {' '.join(cmd)} failed:\n{r.stdout}{r.stderr}")
        err = 0.0
        for n, (k, ref) in enumerate(run["outputs"].items()):
            if ref:
                w = np.load(ref)
                got = in_shape(np.load(d / f"y-{t}-{n}.npy"), w.shape)
                err = max(err, float(np.abs(got - w).max() / np.abs(w).max()))
        errors[f"{layout}/{t}"] = err
        if err > 1e-4:
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
    # The tuned bundle against ONNX Runtime's output too, before it is timed (the inputs and
    # ONNX Runtime's outputs the check above wrote, run.json).
    "$py" - "$work" "$m" "$padfold" <<'PY'
import json, pathlib, subprocess, sys
import numpy as np
work, m, padfold = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
d = work / f"{m}-nhwc"
run = json.loads((d / "run.json").read_text())
cmd = [padfold, "run", str(d / "bundle-host-tuned"), "--model", "--input"]
cmd += [f"{k}={v}" for k, v in run["inputs"].items()] + ["--output"]
cmd += [f"{k}={d / f'y-tuned-{n}.npy'}" for n, k in enumerate(run["outputs"])]
r = subprocess.run(cmd, capture_output=True, text=True)
if r.returncode:
    sys.exit(f"{m}: {' '.join(cmd)} failed:\n{r.stdout}{r.stderr}")
err = 0.0
for n, ref in enumerate(run["outputs"].values()):
    if ref:
        want, got = np.load(ref), np.load(d / f"y-tuned-{n}.npy")
        if got.shape != want.shape:  # NHWC against ONNX's NCHW
            got = got.transpose(0, 3, 1, 2)
        err = max(err, float(np.abs(got - want).max() / np.abs(want).max()))
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

# The default import against the fastest explicit one (NHWC throughout), side by side in
# alternating rounds (layout_ab.py): issue 38's goal is a ratio, and 2-thread medians drift. An
# earlier run's A/B files go first, so that the report states only this run's.
for m in $MODELS; do rm -f "$work/$m"-ab-*.json; done
case " $LAYOUTS " in *" auto "*) case " $LAYOUTS " in *" nhwc "*)
  for m in $MODELS; do
    for t in $TARGETS; do
      for n in 1 2; do
        "$py" "$repo/bench/models/layout_ab.py" "$padfold" "$work/$m-auto/bundle-$t" \
          "$work/$m-nhwc/bundle-$t" "$n" "${AB_ROUNDS:-7}" "$MIN_TIME" >"$work/$m-ab-$t-$n.json"
      done
    done
  done ;;
esac ;; esac

# The section "## Earlier runs" of the results file (other CPUs, older models) is kept.
TUNE="${TUNE:-}" "$py" "$repo/bench/models/report.py" "$work" "$MODELS" "$LAYOUTS" "$TARGETS" \
  "$MIN_TIME" "$RESULTS" >"$RESULTS.new"
mv "$RESULTS.new" "$RESULTS"
echo "wrote $RESULTS"
