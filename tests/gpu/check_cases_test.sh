#!/usr/bin/env bash
# bench/gpu/check_cases.py, the GPU machine's check, here on PoCL: the wide-window set exported
# for OpenCL passes; with one reference element changed it fails and names the layer.
# usage: check_cases_test.sh GPU_CASES_EXPORT REPO_DIR
set -euo pipefail
export_bin="$1" repo="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$export_bin" "$tmp" host-opencl wide
/usr/bin/python3 "$repo/bench/gpu/check_cases.py" "$tmp" --out "$tmp/ok.md"
grep -q "wide: 64 of 64 layers match the reference" "$tmp/ok.md"
/usr/bin/python3 - "$tmp/wide/cases/w20.ref.f32" <<'PY'
import sys, numpy as np
a = np.fromfile(sys.argv[1], np.float32)
a[a.size // 2] += 1 + abs(a).max()
a.tofile(sys.argv[1])
PY
if /usr/bin/python3 "$repo/bench/gpu/check_cases.py" "$tmp" > "$tmp/bad.txt" 2>&1; then
  echo "a changed reference was not caught" >&2; exit 1
fi
grep -q "^w20: 1 of " "$tmp/bad.txt" || { cat "$tmp/bad.txt" >&2; exit 1; }
echo "check_cases.py: passes on the exported set, names the one changed element"
