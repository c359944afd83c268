#!/usr/bin/env bash
# Sets up, builds and runs the whole default test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh -DPADFOLD_BUILD_TESTS=ON
cd build
../.venv/bin/ctest -j "$(nproc)" --output-on-failure --timeout 900
cd ..
# The Python package: its wheel built as `pip install .` builds it, and tests/python against it.
bash scripts/test-python.sh
# The parsers, the runtime and the CLI again under ASan + UBSan, and each libFuzzer target.
bash scripts/sanitize.sh
