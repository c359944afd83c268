#!/usr/bin/env bash
# ASan + UBSan (clang) over padfold's own code, Halide itself uninstrumented: builds build-san
# with the libFuzzer targets, then runs the padding, spec, runtime, CLI and ONNX import tests under
# the sanitizers (any report fails the run) and each fuzz target for FUZZ_SECONDS (default 60) from
# its seeds, with libFuzzer seed FUZZ_SEED (default 1; 0 = random). scripts/test.sh runs this after
# the main suite; scripts/fuzz.sh fuzzes for longer.
# SAN_BUILD_ONLY=1: configure and build only.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-debian.sh
.venv/bin/cmake -S . -B build-san -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DPADFOLD_BUILD_TESTS=ON \
  -DPADFOLD_FUZZ=ON -DPADFOLD_FUZZ_SECONDS="${FUZZ_SECONDS:-60}" \
  -DPADFOLD_FUZZ_SEED="${FUZZ_SEED:-1}" >/dev/null
targets=(padding_test reference_test onnx_shapes_test spec_test spec_fuzz_test
         padfold_runtime_tests padfold_runtime_c_example padfold_fake_bundle padfold_fake_noentry
         padfold cli_test bundle_cli_test onnx_import_test import_cli_test
         fuzz_spec fuzz_manifest fuzz_pads fuzz_npy fuzz_onnx fuzz_onnx_graph fuzz_db)
.venv/bin/cmake --build build-san -j "$(nproc)" --target "${targets[@]}"
[ "${SAN_BUILD_ONLY:-0}" = 1 ] && exit 0
cd build-san
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# onnx: the importer's unit and CLI tests (seconds); not the ones compiling kernels or running
# ONNX Runtime. protobuf and libonnx are Debian's, uninstrumented.
../.venv/bin/ctest -j "$(nproc)" -L 'padding|spec|runtime|cli|fuzz|onnx' \
  -E '^(onnx_node_kernels|onnx_models_vs_onnxruntime|onnx_real_model)$' --output-on-failure \
  --timeout 900
