// Fused blocks: the consumer's knobs for a whole chain, the row strips its windows allow, and how
// the chain's producers are placed in the consumer's loops.
#pragma once

#include <Halide.h>

#include <vector>

#include "algorithm/algorithm.h"
#include "schedules/schedule.h"

namespace padfold {

// A fused block (producers first, the consumer last): the consumer's knobs with channel blocks
// kept inside pixel tiles (so each producer tile serves every channel block once), fused_strips
// at most max_block_strips.
ScheduleParams resolve_block_schedule(const std::vector<const Layer*>& chain,
                                      const Halide::Target& target,
                                      const ScheduleParams& requested);
// The most row strips (fused_strips) a block's rows split into such that every strip is at least
// kStripOverlaps times as long as the rows a producer read through a window recomputes at its
// top (k - stride producer rows); a large number where no producer is read through a window.
inline constexpr double kStripOverlaps = 4;
int max_block_strips(const std::vector<const Layer*>& chain);

// Schedules the consumer with the resolved block knobs and every producer with its own layer's
// knobs: a producer read through a window per row tile of the consumer, sliding along the rows of
// its strip, when the consumer is computed in strips (fused_strips); the others per pixel tile of
// the consumer. Returns the consumer's result (the block's knobs in effect). `in_registers`:
// ProducerPlace::in_registers of every producer.
ScheduleResult apply_block_schedule(std::vector<Algorithm>& chain, const ScheduleParams& requested,
                                    const Halide::Target& target, bool in_registers = true);

}  // namespace padfold
