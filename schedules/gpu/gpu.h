// The GPU schedule family (CUDA and OpenCL): output tiles over GPU blocks x threads, a register
// tile of outputs per thread, the bordered input tile + halo staged per block in shared memory.
#pragma once

#include <cstdint>
#include <vector>

#include "schedules/schedule.h"

namespace padfold::gpu {

// The border as explicit clamps and selects (BoundaryConditions' likely() tags make Halide
// partition the staging loops); no fused blocks (no producer placement); not tuned (padfold tune
// measures on the CPU).
inline constexpr Capabilities kCapabilities{true, false, false};

// Every op class's one implementation: the direct loops.
extern const Implementation kDirect;

// The rows of the GPU target family (table.cpp).
std::vector<StrategyRow> strategy_rows();

// Bytes of the bordered input one block of `resolved` stages (input tile + halo, every channel
// the block reads); 0 for layers with nothing to stage (add, concat).
int64_t staged_bytes(const Layer& layer, const ScheduleParams& resolved);

}  // namespace padfold::gpu
