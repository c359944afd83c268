#!/usr/bin/env bash
# Installs everything padfold needs to build, test and benchmark on Debian 12. Idempotent.
#   Debian packages: compilers, libraries, cross toolchains, oneDNN (benchmark peer).
#   .venv/ (project-local, from PyPI): the Halide C++ SDK (the kernel compiler) and a CMake
#   new enough for Halide's CMake package. Versions are pinned in scripts/requirements.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(
  build-essential ninja-build pkg-config clang-format
  clang libclang-rt-14-dev     # scripts/sanitize.sh: ASan + UBSan build, libFuzzer targets
  python3 python3-venv         # the project-local venv holding Halide and CMake
  python3-dev python3-numpy    # the Python package's extension module (headers) and its tests
  libcli11-dev nlohmann-json3-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libonnx-dev libonnx-testdata libprotobuf-dev   # ONNX node tests, read with protobuf
  libxtensor-dev               # .npy I/O (xtensor/xnpy.hpp)
  libkainjow-mustache-dev      # templates for emitted files (templates/)
  libcjson-dev                 # manifest parsing inside the C runtime
  pocl-opencl-icd ocl-icd-opencl-dev clinfo  # GPU tests: OpenCL kernels run on PoCL (CPU)
  libsqlite3-dev               # the tuning database (padfold tune)
  libdnnl-dev                  # oneDNN: the benchmark peer
  libxnnpack-dev libpthreadpool-dev  # XNNPACK: the int8 benchmark's second peer
  python3-torch                # PyTorch 1.13: bench/run_blocks.sh's peer, padfold.torch, port tests
  python3-torchvision          # torchvision 0.14: its models exported whole in the Python tests
  python3-jsonschema           # validates example specs against the JSON Schema in tests
  qemu-user g++-aarch64-linux-gnu g++-arm-linux-gnueabihf  # embedded (cross) builds
  g++-riscv64-linux-gnu        # embedded riscv-64-linux cross build (tests/embedded_*)
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi

# Debian's own Python (the wheel is built for CPython 3.11), not whatever python3 is first on PATH.
venv=.venv
if [ ! -x "$venv/bin/python" ]; then
  /usr/bin/python3 -m venv "$venv"
fi
if ! cmp -s scripts/requirements.txt "$venv/.installed-requirements"; then
  "$venv/bin/python" -m pip install --disable-pip-version-check -q -r scripts/requirements.txt
  cp scripts/requirements.txt "$venv/.installed-requirements"
fi

# A real model for the import tests: PaddleOCR's text detector, shipped inside a PyPI wheel
# (Apache-2.0). Only the .onnx file is kept, in .venv/models/.
model=$venv/models/ch_PP-OCRv4_det_infer.onnx
if [ ! -f "$model" ]; then
  "$venv/bin/python" -m pip download --disable-pip-version-check -q --no-deps \
    rapidocr-onnxruntime==1.4.4 -d "$venv/wheels"
  "$venv/bin/python" - "$venv/wheels/rapidocr_onnxruntime-1.4.4-py3-none-any.whl" "$model" <<'PY'
import pathlib, sys, zipfile
wheel, out = sys.argv[1], pathlib.Path(sys.argv[2])
out.parent.mkdir(parents=True, exist_ok=True)
data = zipfile.ZipFile(wheel).read("rapidocr_onnxruntime/models/" + out.name)
tmp = out.with_suffix(".partial")
tmp.write_bytes(data)
tmp.replace(out)
PY
fi
