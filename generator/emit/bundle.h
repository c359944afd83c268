// `padfold compile`: turns a resolved model into a bundle directory of ahead-of-time kernels,
// one Halide runtime per target, a manifest, a static registry and a CMake file for consumers.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "compile/halide_memory.h"
#include "emit/bundle_plan.h"
#include "frontend/spec.h"

namespace padfold {

struct KernelReport {
  std::string target, layer, schedule;
  double compile_seconds = 0;
  int64_t object_bytes = 0;
  std::string fallback_from;    // the tuned schedule that failed, when `schedule` is the fallback
  std::string fallback_reason;  // why it failed
  std::string fused;            // "a+b" when the kernel is a fused block (layer is its last)
  std::string source = "default";  // where the knobs came from: default, overrides, tuned (db)
  HalideMemory memory;             // the kernel's own Halide scratch (stack, heap)
};

// Writes the planned bundle (plan_bundle) and returns one report per (target, kernel), in that
// order. Each kernel compiles in a worker process; a kernel whose tuned schedule crashes or times
// out is retried once with the target's conservative schedule. The bundle is built in a temporary
// directory beside the plan's out_dir and moved into place only when complete, so a failed or
// interrupted compile leaves any existing bundle there as it was. Throws std::runtime_error
// naming the target, layer and schedule on failure. `progress` is called as each kernel compiles.
std::vector<KernelReport> compile_bundle(
    const BundlePlan& plan, const std::function<void(const KernelReport&)>& progress = nullptr);

// plan_bundle, then compile_bundle.
std::vector<KernelReport> compile_bundle(
    const Model& model, const CompileOptions& options,
    const std::function<void(const KernelReport&)>& progress = nullptr);

}  // namespace padfold
