// Schedules: how a layer's algorithm (generator/algorithm.h) is computed on a target. Parameters
// are plain data, keyed by target family and op class, so a tuner can search them and so GPU
// schedules can slot in beside the CPU ones.
#pragma once

#include <Halide.h>

#include <nlohmann/json.hpp>
#include <string>

#include "algorithm.h"

namespace padfold {

enum class TargetFamily { X86Avx512, X86Avx2, ArmNeon, Generic };
enum class OpClass { Dense, Stem, Pointwise, Depthwise, Pooling, Transposed };

struct ScheduleParams {
  std::string name;           // "<family>.<op class>", e.g. "avx512.dense"
  int vector_lanes = 8;       // floats per vector; 0 = the target's natural width
  int channel_vectors = 1;    // vectors of output channels in a register tile (channels-last)
  int tile_x = 4;             // output columns in a register tile
  int tile_y = 1;             // output rows in a register tile
  int rows_per_task = 1;      // output rows per parallel task (0 = no parallelism)
  int unroll_taps = 0;        // unroll the innermost kernel axis when it has at most this many taps
  bool inline_border = true;  // read the border through the bounded input inline (no staging)
};

TargetFamily target_family(const Halide::Target& target);
OpClass classify(const Layer& layer);
std::string to_string(TargetFamily family);
std::string to_string(OpClass op_class);

// The tuned defaults for a layer on a target (schedules/cpu_table.cpp).
ScheduleParams default_schedule(const Layer& layer, const Halide::Target& target);

// Applies the schedule to the algorithm's Funcs (schedules/cpu_schedules.cpp).
void apply_schedule(Algorithm& algorithm, const ScheduleParams& params,
                    const Halide::Target& target);

nlohmann::json to_json(const ScheduleParams& params);
// Overrides fields of `params` from a JSON object; unknown keys are an error.
void update_from_json(ScheduleParams& params, const nlohmann::json& j);

}  // namespace padfold
