// Lowering: the one way a layer becomes a scheduled Halide pipeline, used by `padfold compile`,
// the tests and the benchmark tools alike.
#pragma once

#include <Halide.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "algorithm.h"
#include "schedule.h"

namespace padfold {

struct Kernel {
  Algorithm algorithm;
  ScheduleParams schedule;  // the parameters it was scheduled with
  Halide::Pipeline pipeline;
  std::vector<Halide::Argument> arguments;  // in manifest buffer order
};

// The layer's default schedule for `target`, with `overrides` (ScheduleParams fields as JSON)
// applied; unknown fields are an error.
ScheduleParams requested_schedule(const Layer& layer, const Halide::Target& target,
                                  const nlohmann::json& overrides = nlohmann::json::object());

// Builds the layer's algorithm and applies `schedule` for `target`. `layer` must outlive the
// Kernel.
Kernel lower(const Layer& layer, const Halide::Target& target, const ScheduleParams& schedule);

}  // namespace padfold
