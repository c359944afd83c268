// `padfold compile`: turns a resolved model into a bundle directory of ahead-of-time kernels,
// one Halide runtime per target, a manifest, a static registry and a CMake file for consumers.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/identifiers.h"
#include "compile/fusion.h"
#include "compile/target.h"
#include "frontend/spec.h"

namespace padfold {

constexpr int kBundleFormatVersion = 2;

// Knobs from a tuning database, with where they came from (the manifest records it).
struct TunedSchedule {
  nlohmann::json knobs;       // resolved knobs
  nlohmann::json provenance;  // database, candidate, machine, toolchain, speedup
};

struct CompileOptions {
  std::vector<std::string> targets{"host"};  // target names (resolve_target), best first
  std::string out_dir;
  bool emit_stmt = false;  // also write each kernel's lowered statement (<target>/<layer>.stmt)
  // GPU targets: also write each kernel's device code (<target>/<layer>.ptx, or .cl for OpenCL)
  bool emit_device_code = false;
  nlohmann::json schedule_overrides = nlohmann::json::object();  // layer name -> parameters
  int jobs = 0;                   // compile workers at once; 0 = one per core
  double kernel_timeout_s = 600;  // a kernel still compiling after this long has failed
  // Bake the spec's weight_files into every target's library (registry data pointers) instead of
  // copying them into the bundle's weights/ folder.
  bool embed_weights = false;
  FuseOptions fuse;  // which layers become one kernel (default: auto, the cost model decides)
  // Tuned knobs for a single-layer kernel on a target (padfold compile --db), or null: the
  // default. Explicit schedule_overrides of the layer win over it.
  std::function<std::optional<TunedSchedule>(const Layer&, const Halide::Target&)> tuned;
};

struct KernelReport {
  std::string target, layer, schedule;
  double compile_seconds = 0;
  int64_t object_bytes = 0;
  std::string fallback_from;    // the tuned schedule that failed, when `schedule` is the fallback
  std::string fallback_reason;  // why it failed
  std::string fused;            // "a+b" when the kernel is a fused block (layer is its last)
  std::string source = "default";  // where the knobs came from: default, overrides, tuned (db)
};

// Writes the bundle and returns one report per (target, layer). Each kernel compiles in a worker
// process; a kernel whose tuned schedule crashes or times out is retried once with the target's
// conservative schedule. The bundle is built in a temporary directory beside `out_dir` and moved
// into place only when complete, so a failed or interrupted compile leaves any existing bundle at
// `out_dir` as it was. Throws std::runtime_error naming the target, layer and schedule on failure.
std::vector<KernelReport> compile_bundle(
    const Model& model, const CompileOptions& options,
    const std::function<void(const KernelReport&)>& progress = nullptr);

// Checks overrides ({layer: {knob: value}}): every layer is in the model, every knob exists and
// is in range. Throws std::runtime_error naming the layer and the knob.
void validate_schedule_overrides(const Model& model, const nlohmann::json& overrides);

std::string kernel_function_name(const Model& model, const Layer& layer);

}  // namespace padfold
