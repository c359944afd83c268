// The CPU schedule family: register tiles, vectorized and unrolled, rows over threads.
#pragma once

#include <cstdint>
#include <vector>

#include "schedules/schedule.h"

namespace padfold::cpu {

// Halide's BoundaryConditions for the border (loop partitioning peels the border tiles off), fused
// blocks, and knobs padfold tune searches on this machine.
inline constexpr Capabilities kCapabilities{false, true, true};

// The direct loops (schedule.cpp): every layer of a row, and fused blocks.
extern const Implementation kDirect;
// Winograd F(m, 3) (winograd.cpp): 3x3 stride-1 2D dense convs whose knobs ask for it
// (winograd, winograd_min_tiles).
extern const Implementation kWinograd;
// A pointwise conv as a GEMM over its output plane's pixels (gemm.cpp): float32 1x1 convs without
// padding whose knobs ask for it (gemm_pixels).
extern const Implementation kGemm;
// add and concat: no reduction, the output vectorized and its rows over threads (elementwise.cpp).
extern const Implementation kElementwise;

// The rows of every CPU target family (table.cpp).
std::vector<StrategyRow> strategy_rows();

// Row tiles per parallel task for `row_tiles` tiles doing `flops` in all (min_task_kflop).
int grouped_rows_per_task(const ScheduleParams& p, int64_t row_tiles, double flops);

// The vector width `requested` asks for: vector_lanes, or the target's natural width when 0.
int requested_lanes(const ScheduleParams& requested, const Halide::Target& target);

// A kernel doing less `work` (flops; elementwise kernels: elements read and written) than two
// tasks of min_task_kflop runs on one thread: its tasks are too short to pay for handing them out
// (EfficientNet-B0's squeeze-and-excite global pools, Zen 5: 0.002 ms at 1 thread, 0.02 ms at 2).
bool too_little_for_threads(const ScheduleParams& p, double work);

// Whether the kernel of knobs `p` runs its channel blocks outermost: its weights exceed
// channels_outer_kb, so that each block's weights stay in cache over every pixel.
bool channels_outermost(const ScheduleParams& p, const Layer& layer);

// Splits `v` of `f` by `factor` (<= extent) choosing a tail strategy that never reads outside the
// fixed buffers: exact splits round up, others shift the last tile inwards.
void split_tile(Halide::Func f, const Halide::Var& v, const Halide::Var& outer,
                const Halide::Var& inner, int factor, int64_t extent);

// Knobs simple enough to compile where the tuned ones made Halide crash or hang: scalar, one
// output per tile, nothing unrolled (ScheduleStrategy::conservative).
ScheduleParams conservative_knobs();

}  // namespace padfold::cpu
