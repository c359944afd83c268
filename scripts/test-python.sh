#!/usr/bin/env bash
# The Python package's tests (tests/python): builds the wheel as a user's `pip install .` does (an
# isolated build from pyproject.toml's pinned requirements), installs it into a fresh venv that
# also sees Debian's NumPy and PyTorch 1.13, and runs pytest there, so the tests import the wheel.
# PADFOLD_WHEEL_REUSE_VENV=1 builds with .venv's pinned backend instead (no isolation; an
# incremental build in build/wheel, for development).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-debian.sh
venv=build/python-test-venv
wheels=build/wheelhouse
rm -rf "$venv" "$wheels"
/usr/bin/python3 -m venv --system-site-packages "$venv"
pip=("$venv/bin/pip" --disable-pip-version-check -q)
# Debian's torch 1.13 is built against NumPy 1.x; the halide wheel needs NumPy >= 1.26.
constraints=build/python-test-constraints.txt
echo "numpy>=1.26,<2" > "$constraints"
"${pip[@]}" install -c "$constraints" numpy pytest==8.3.4
if [ "${PADFOLD_WHEEL_REUSE_VENV:-0}" = 1 ]; then
  .venv/bin/pip wheel --disable-pip-version-check -q --no-build-isolation --no-deps -w "$wheels" .
else
  rm -rf build/wheel-isolated
  "${pip[@]}" wheel --no-deps -w "$wheels" --config-settings build-dir=build/wheel-isolated .
fi
"${pip[@]}" install -c "$constraints" "$wheels"/padfold-*.whl
cd tests/python
"../../$venv/bin/python" -m pytest -q -p no:cacheprovider .
