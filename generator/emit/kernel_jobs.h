// A bundle's kernels compiled in worker processes, with the conservative retry.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "base/process.h"
#include "compile/halide_memory.h"
#include "emit/bundle_plan.h"

namespace padfold {

// What compiling one kernel on one target gave.
struct KernelBuild {
  size_t kernel = 0, target = 0;  // indices into the plan's kernels and targets
  // The knobs it compiled with (the plan's requested knobs, or the target's conservative schedule
  // after a fallback) and the knobs in effect.
  ScheduleParams schedule, resolved;
  bool fallback = false;
  std::string fallback_from, fallback_reason;  // the schedule that failed, and why
  WorkerResult result;
  HalideMemory memory;  // the kernel's own Halide scratch, once compiled
};

// The kernels of target `target` whose own Halide scratch is on the heap, in plan order: a static
// run of the model would allocate.
std::vector<std::string> heap_scratch_kernels(const BundlePlan& plan,
                                              const std::vector<KernelBuild>& builds,
                                              size_t target);

// Compiles every kernel of the plan on every target, each in a worker, into the bundle directory
// `root`: objects in <target>/obj, headers (from the first target) in include/, and statements
// and device code where the options ask. A kernel whose schedule fails (a crash, a hang, an
// error) is compiled once more with the target's conservative schedule. Calls `on_compiled` in
// the parent as each kernel compiles. Returns the builds in (target, kernel) order; throws
// std::runtime_error naming each kernel that failed both ways.
std::vector<KernelBuild> compile_kernels(
    const BundlePlan& plan, const std::filesystem::path& root,
    const std::function<void(const KernelBuild&)>& on_compiled);

}  // namespace padfold
