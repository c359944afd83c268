// Schedules: how a layer's algorithm (generator/algorithm.h) is computed on a target. Parameters
// are plain data, keyed by target family and op class, so a tuner can search them and so GPU
// schedules can slot in beside the CPU ones.
#pragma once

#include <Halide.h>

#include <nlohmann/json.hpp>
#include <string>

#include "algorithm.h"

namespace padfold {

enum class TargetFamily { X86Avx512, X86Avx2, ArmNeon, RiscV, Generic };
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
  // The defaults below keep the shape above; the rows of cpu_table.cpp turn them on.
  int unroll_taps_outer = 0;  // unroll the outer kernel axes (H, D) up to this many taps
  int unroll_taps_rows = 0;   // unroll every kernel axis when the output has at most this many
                              // rows (small outputs, where the border rows are a large share)
  int unroll_channels = 0;    // unroll the input-channel reduction by this factor (a divisor of
                              // the channel count; all of it when the count is at most this)
  bool taps_inner = false;    // reduction order: kernel taps inside input channels (default:
                              // input channels innermost, weights read as a stream)
  bool fit_tiles = false;     // reshape tile_x/tile_y within the accumulator budget to divide the
                              // output, instead of recomputing an overlap (see cpu_schedules.cpp)
  int channels_outer_kb = 0;  // when the weights exceed this many KiB (0 = never), channel blocks
                              // are the outermost tile loop, so each block's weights stay in
                              // cache across all pixels
  bool parallel_channels = false;  // with channel blocks outermost, threads over them (one task
                                   // per block) instead of over rows
  int min_task_kflop = 0;  // threads over rows: group row tiles into tasks of at least this many
                           // kFLOP (0 = one task per rows_per_task tiles; see cpu_schedules.cpp)
};

TargetFamily target_family(const Halide::Target& target);
OpClass classify(const Layer& layer);
std::string to_string(TargetFamily family);
std::string to_string(OpClass op_class);

// The tuned defaults for a layer on a target (schedules/cpu_table.cpp).
ScheduleParams default_schedule(const Layer& layer, const Halide::Target& target);

// A schedule simple enough to compile where a tuned one made Halide crash or hang: scalar, one
// output per tile, nothing unrolled ("<family>.conservative").
ScheduleParams conservative_schedule(const Layer& layer, const Halide::Target& target);

// Applies the schedule to the algorithm's Funcs (schedules/cpu_schedules.cpp).
void apply_schedule(Algorithm& algorithm, const ScheduleParams& params,
                    const Halide::Target& target);

nlohmann::json to_json(const ScheduleParams& params);
// Overrides fields of `params` from a JSON object; unknown keys are an error.
void update_from_json(ScheduleParams& params, const nlohmann::json& j);

}  // namespace padfold
