// A bundle target's libraries: the kernels' static library, the Halide runtime, and the shared
// library pf_bundle_open loads, where a C compiler links one for the target.
#pragma once

#include <Halide.h>

#include <filesystem>
#include <optional>
#include <string>

#include "emit/bundle_plan.h"

namespace padfold {

// Every target's kernel library and Halide runtime, from the kernels' objects (compiled in
// workers too: it is LLVM code generation like the kernels). Throws naming the target.
void build_target_libraries(const BundlePlan& plan, const std::filesystem::path& root);

// Links the target's shared library (registry.c, bundle_entry.c, the kernels, the Halide runtime)
// where a C compiler links for the target; returns its path in the bundle, or nullopt.
std::optional<std::string> link_bundle_library(const BundlePlan& plan, const TargetPlan& t,
                                               const std::filesystem::path& root);

// The C compiler that compiles and links for `t` on this machine (cc, aarch64-linux-gnu-gcc,
// arm-linux-gnueabihf-gcc, riscv64-linux-gnu-gcc), or "" if none is on $PATH.
std::string linker_for(const Halide::Target& t);

// The manifest's name of the target's architecture: x86-64, arm-64, riscv-64, ... or "other".
std::string arch_name(const Halide::Target& t);

}  // namespace padfold
