# Cross toolchain for 64-bit ARM Linux (Debian: g++-aarch64-linux-gnu). Halide target: arm-64-linux.
#   cmake -S examples/embedded -B build-arm64 \
#     -DCMAKE_TOOLCHAIN_FILE=examples/embedded/toolchain-aarch64-linux-gnu.cmake -DPADFOLD_BUNDLE=...
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(_pf_triple aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${_pf_triple}-gcc)
set(CMAKE_CXX_COMPILER ${_pf_triple}-g++)
set(CMAKE_FIND_ROOT_PATH /usr/${_pf_triple})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# How to run the target's programs on this machine (try_run, add_test): qemu-user.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/${_pf_triple})
