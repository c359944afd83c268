// A tuning candidate as a small shared library the measuring process dlopens: compiled in a
// compile worker (lower, AOT object without runtime, linked with one Halide runtime archive).
#pragma once

#include <Halide.h>

#include <string>

#include "frontend/spec.h"
#include "schedules/knobs.h"

namespace padfold {

// The Halide autoschedulers the tuner times as baselines (CPU targets).
const std::vector<std::string>& autoscheduler_names();

// Compiles Halide's standalone runtime for `target` into `archive` (a static library).
void build_tune_runtime(const Halide::Target& target, const std::string& archive);

// Lowers the layer with `resolved` knobs (or, with a non-empty `autoscheduler`, its algorithm
// scheduled by that Halide autoscheduler with estimates from the fixed shapes and one thread),
// compiles it as function `function` and links `so_path` with `runtime_archive`. Runs in a
// compile worker: it may crash or hang, and throws on failure.
void build_candidate_library(const Layer& layer, const Halide::Target& target,
                             const ScheduleParams& resolved, const std::string& autoscheduler,
                             const std::string& function, const std::string& runtime_archive,
                             const std::string& so_path);

}  // namespace padfold
