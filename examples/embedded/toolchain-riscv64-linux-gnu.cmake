# Cross toolchain for 64-bit RISC-V Linux, RV64GC with the lp64d ABI (Debian: g++-riscv64-linux-gnu).
# Halide target: riscv-64-linux-rvv-vector_bits_128 (Halide 21 generates RISC-V code only with the
# vector extension; the runtime does not check for rvv).
#   cmake -S examples/embedded -B build-rv64 \
#     -DCMAKE_TOOLCHAIN_FILE=examples/embedded/toolchain-riscv64-linux-gnu.cmake -DPADFOLD_BUNDLE=...
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR riscv64)
set(_pf_triple riscv64-linux-gnu)
set(CMAKE_C_COMPILER ${_pf_triple}-gcc)
set(CMAKE_CXX_COMPILER ${_pf_triple}-g++)
set(CMAKE_FIND_ROOT_PATH /usr/${_pf_triple})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# How to run the target's programs on this machine (try_run, add_test): qemu-user.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-riscv64 -cpu rv64,v=true,vlen=128,vext_spec=v1.0 -L /usr/${_pf_triple})
