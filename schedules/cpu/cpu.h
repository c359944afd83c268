// The CPU schedule family: register tiles, vectorized and unrolled, rows over threads.
#pragma once

#include <cstdint>
#include <vector>

#include "schedules/schedule.h"

namespace padfold::cpu {

// Halide's BoundaryConditions for the border (loop partitioning peels the border tiles off), fused
// blocks, and knobs padfold tune searches on this machine.
inline constexpr Capabilities kCapabilities{false, true, true};

extern const ScheduleStrategy kStrategy;
// add and concat: no reduction, the output vectorized and its rows over threads (elementwise.cpp).
extern const ScheduleStrategy kElementwiseStrategy;

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

// Splits `v` of `f` by `factor` (<= extent) choosing a tail strategy that never reads outside the
// fixed buffers: exact splits round up, others shift the last tile inwards.
void split_tile(Halide::Func f, const Halide::Var& v, const Halide::Var& outer,
                const Halide::Var& inner, int factor, int64_t extent);

// Whether the knobs compute the layer as Winograd F(m, 3) (winograd.cpp): a 3x3 stride-1 2D dense
// conv, the `winograd` knob set, and at least winograd_min_tiles output tiles of the knob's size
// or, with F(4,3) asked for, of F(2,3)'s.
bool winograd_holds(const Layer& layer, const ScheduleParams& requested);
// Its knobs in effect (winograd_min_tiles cleared: it has done its work), and its stages
// scheduled.
ScheduleParams resolve_winograd(const Layer& layer, const Halide::Target& target,
                                const ScheduleParams& requested);
ScheduleResult apply_winograd(Algorithm& algorithm, const ScheduleParams& resolved,
                              const Halide::Target& target);

}  // namespace padfold::cpu
