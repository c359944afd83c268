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

}  // namespace padfold::cpu
