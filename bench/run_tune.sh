#!/usr/bin/env bash
# The tuner benchmark (bench/results-tune.md) in one command, on an existing build directory
# (BUILD, default build/, configured with PADFOLD_BUILD_BENCH=ON):
#   1. padfold tune on the 12 benchmark layers (1 thread, at most BUDGET candidates per layer and
#      TIME for the whole run's search, Halide's autoschedulers timed in the same run), timed;
#   2. padfold compile of the bench spec with the default knobs and with --db, and bench_conv on
#      each bundle against oneDNN (1 thread);
#   3. the search against random search at an equal budget (CMP_BUDGET candidates and 4 minutes
#      per strategy) on CMP_LAYERS;
#   4. padfold bench measures one core's FMA peak (on the default bundle), and
#      bench/tune_report.py writes bench/results-tune.md.
# Work files (databases, bundles, JSON) go to $BUILD/bench/tune; nothing there is committed.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD:-$root/build}"
work="$build/bench/tune"
budget="${BUDGET:-80}"
time_limit="${TIME:-24m}"
cmp_budget="${CMP_BUDGET:-20}"
layers="effnet_stem,effnet_dw_s1,effnet_pw,effnet_dw3_s2,effnet_dw5_s2,effnet_dw5_s2_b,effnet_head_pw,resnet_stem,resnet_3x3,resnet_3x3_s2_same,resnet_1x1,seed_even_k4_s2"
cmp_layers="${CMP_LAYERS:-effnet_stem,effnet_pw,seed_even_k4_s2,effnet_head_pw}"
layer_set="$root/bench/layers.json"
pf="$build/bin/padfold"
"$root/.venv/bin/cmake" --build "$build" --target padfold bench_conv
mkdir -p "$work"
rm -rf "$work"/*
python3 "$root/bench/make_bench_spec.py" "$layer_set" "$work/bench_spec.json"

start=$(date +%s)
"$pf" tune "$work/bench_spec.json" --layers "$layers" --budget "$budget" --time "$time_limit" \
  --db "$work/tune.sqlite" \
  --report "$work/tune.json" | tee "$work/tune.txt"
echo "$(( $(date +%s) - start ))" > "$work/tune_seconds"

"$pf" compile "$work/bench_spec.json" -o "$work/default" --target host
"$pf" compile "$work/bench_spec.json" -o "$work/tuned" --target host --db "$work/tune.sqlite"
# One retry per disturbed layer: on a shared machine five retries of 10 s each take too long.
for b in default tuned; do
  "$build/bin/bench_conv" --bundle "$work/$b" --layers "$layer_set" --threads 1 \
    --retries 1 --retry-wait 2 --markdown "$work/bench_$b.md"
done

for s in neighbourhood random; do
  "$pf" tune "$work/bench_spec.json" --layers "$cmp_layers" --budget "$cmp_budget" \
    --time 4m --strategy "$s" --no-baselines --db "$work/cmp_$s.sqlite" \
    --report "$work/cmp_$s.json"
done

"$pf" bench "$work/default" --layer effnet_stem --min-time 0.01 --retries 0 --json |
  python3 -c "import json, sys; print(json.load(sys.stdin)['fma_peak']['gflops_per_core'])" \
  > "$work/fma_peak.txt"
python3 "$root/bench/tune_report.py" --work "$work" --budget "$budget" --cmp-budget "$cmp_budget" \
  --fma-peak "$work/fma_peak.txt" \
  --command "bench/run_tune.sh (BUDGET=$budget TIME=$time_limit CMP_BUDGET=$cmp_budget)" \
  > "$root/bench/results-tune.md"
echo "wrote bench/results-tune.md"
