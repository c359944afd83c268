// Targets: what a user's target name means, what `host` stands for, and which of a target's
// features a CPU must have to run its code.
#pragma once

#include <Halide.h>

#include <string>
#include <vector>

namespace padfold {

// The environment variable naming the Halide target `host` stands for (default: this CPU). Lets a
// machine with AVX-512 generate and test the code an AVX2-only machine would get.
constexpr const char* kHostTargetVariable = "PADFOLD_HOST_TARGET";

// The target `host` stands for: $PADFOLD_HOST_TARGET if set (an error names the variable when it
// is not a valid target), else this CPU as Halide detects it.
Halide::Target host_target();

// The CUDA capability a CUDA target without one gets: the highest Halide 21 knows (sm_86; newer
// GPUs such as an H200, sm_90, JIT-compile its PTX).
constexpr Halide::Target::Feature kDefaultCudaCapability = Halide::Target::CUDACapability86;

// Resolves a user target name ("host", "x86-64-linux-avx2-fma", "host-cuda", "host-opencl",
// "host-cuda-cuda_capability_80", ...) into the target kernels are compiled for, or throws naming
// the valid forms. "host-<features>" is the host CPU with the GPU features added; CUDA and OpenCL
// only, a CUDA target without a capability gets kDefaultCudaCapability.
Halide::Target resolve_target(const std::string& name);

// "cuda", "opencl", or "" for a CPU target: the manifest's device_api.
std::string device_api_name(const Halide::Target& t);
// "sm_86" for a CUDA target (its capability), else "".
std::string cuda_arch_name(const Halide::Target& t);

// The target kernels are generated for: `t` with LLVM's loop optimizations on (Halide 14 ran them
// by default, Halide 16 turned them off; without them Halide 21's kernels spill registers, e.g.
// effnet_stem 0.122 -> 0.100 ms with them on Sapphire Rapids). Code generation only: the
// manifest and directory names keep `t`.
Halide::Target codegen_target(const Halide::Target& t);

// The features a CPU needs for `t`'s code, as Halide names them (no tune_<cpu>, vector_bits_<n>,
// no_runtime, or GPU features: the device is probed instead):
// what a bundle's manifest lists for the runtime's CPU check.
std::vector<std::string> cpu_feature_names(const Halide::Target& t);
// The processor `t` is tuned for ("znver3"), or "" when generic. Tuning changes instruction
// scheduling only, never which instructions are used.
std::string tuning_name(const Halide::Target& t);

// Whether this machine (the real CPU, whatever `host` stands for) can run code for `t`.
bool can_run_here(const Halide::Target& t);

}  // namespace padfold
