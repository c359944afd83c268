// What a written bundle costs a firmware, per target: each kernel's code and data, the Halide
// runtime's, the weights, and the whole-model arena (padfold compile --report-size).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "emit/bundle_plan.h"
#include "emit/object_sizes.h"

namespace padfold {

struct KernelSize {
  std::string kernel;  // the layer, or a fused block's "a+b+c"
  SectionSizes sizes;
};

struct TargetSizes {
  std::string target;
  std::vector<KernelSize> kernels;  // in model order
  SectionSizes kernels_total, halide_runtime;
  // The padfold runtime core (runtime/CMakeLists.txt's padfold_runtime_core: status.c, core.c,
  // cpu.c, model.c of the bundle's runtime/ copy) compiled -O2 by the target's C compiler
  // (linker_for); none when not asked for or there is no such compiler here.
  std::optional<SectionSizes> runtime_core;
  std::string runtime_core_compiler;
};

struct SizeReport {
  std::vector<TargetSizes> targets;  // in plan order
  int64_t weights_bytes = 0;         // the values of every weights/bias buffer with a file
  size_t weight_buffers = 0;
  bool weights_embedded = false;  // in each target's registry.c (read-only data) or weights/
  MemoryPlan arena;
};

// Measures the bundle the plan was written to (`root`): the members of each target's kernel
// library and its Halide runtime (ELF objects), and with `runtime_core` the runtime core compiled
// in a temporary directory (the bundle is not touched). Throws std::runtime_error naming a library
// that cannot be read or a kernel missing from it.
SizeReport bundle_size_report(const BundlePlan& plan, const std::filesystem::path& root,
                              bool runtime_core);

}  // namespace padfold
