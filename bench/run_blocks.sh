#!/usr/bin/env bash
# The fused-block benchmark in one command: builds padfold and bench_blocks in build-bench
# (PADFOLD_BUILD_BENCH=ON; BUILD=dir, JOBS=n), compiles examples/inverted_residual_blocks.json
# (SPEC=file) three times (--fuse listing every chain, --fuse none, --fuse auto), times PyTorch
# layer by layer (bench/bench_blocks_torch.py under /usr/bin/python3, Debian's python3-torch),
# then runs bench_blocks at 1 and 2 threads and writes bench/results-blocks.md (RESULTS=file).
# MIN_TIME=s sets the seconds timed per method, chain and thread count (0.3).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD:-$root/build-bench}"
spec="${SPEC:-$root/examples/inverted_residual_blocks.json}"
results="${RESULTS:-$root/bench/results-blocks.md}"
min_time="${MIN_TIME:-0.3}"
threads="${THREADS:-1,2}"
# The command as typed, with the settings given in the environment, for the report.
command="bench/run_blocks.sh"
for v in BUILD SPEC RESULTS MIN_TIME THREADS JOBS; do
  [ -n "${!v:-}" ] && command="$v=${!v} $command"
done
bash "$root/scripts/setup-debian.sh"
"$root/.venv/bin/cmake" -S "$root" -B "$build" -G Ninja -DPADFOLD_BUILD_BENCH=ON >/dev/null
ninja -C "$build" -j"${JOBS:-2}" padfold bench_blocks
out="$build/bench/blocks"
rm -rf "$out" && mkdir -p "$out"
fuse="$(python3 "$root/bench/bench_blocks_torch.py" "$spec" --fuse-list)"
"$build/bin/padfold" compile "$spec" -o "$out/fused" --fuse "$fuse" --emit-stmt
"$build/bin/padfold" compile "$spec" -o "$out/unfused" --fuse none
"$build/bin/padfold" compile "$spec" -o "$out/auto" --fuse auto
/usr/bin/python3 "$root/bench/bench_blocks_torch.py" "$spec" --manifest "$out/unfused/manifest.json" \
  --threads "$threads" --min-time "$min_time" --json "$out/torch.json"
"$build/bin/bench_blocks" --fused "$out/fused" --unfused "$out/unfused" --auto "$out/auto" \
  --spec "$spec" --torch "$out/torch.json" --threads "$threads" --min-time "$min_time" \
  --markdown "$results" --command "$command"
