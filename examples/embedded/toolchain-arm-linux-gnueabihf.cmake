# Cross toolchain for 32-bit ARM Linux, hard float (Debian armhf: g++-arm-linux-gnueabihf).
# Halide target: arm-32-linux (ARMv7-A with NEON, hard-float ABI; Halide enables NEON unless the
# target has no_neon). The Debian armhf compiler defaults to VFPv3-D16 without NEON; that is fine
# for the C code here, the kernels carry their own NEON code.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR armv7l)
set(_pf_triple arm-linux-gnueabihf)
set(CMAKE_C_COMPILER ${_pf_triple}-gcc)
set(CMAKE_CXX_COMPILER ${_pf_triple}-g++)
set(CMAKE_FIND_ROOT_PATH /usr/${_pf_triple})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-arm -L /usr/${_pf_triple})
