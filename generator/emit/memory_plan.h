// The static memory plan of a whole-model run: every intermediate tensor at an offset in one
// arena, tensors whose lifetimes overlap never overlapping in memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "padfold_registry.h"

namespace padfold {

// Every offset and every tensor's size in the arena is a multiple of this (PF_ARENA_ALIGNMENT).
inline constexpr int64_t kArenaAlignment = PF_ARENA_ALIGNMENT;

// `bytes` rounded up to kArenaAlignment.
int64_t arena_aligned(int64_t bytes);

// A tensor written at step `first` and last read at step `last` (>= first): it must stay intact
// from the start of step first to the end of step last.
struct Lifetime {
  int64_t bytes = 0;
  size_t first = 0, last = 0;
};

struct MemoryPlan {
  std::vector<int64_t> offsets;  // per tensor, in the order given
  int64_t arena_bytes = 0;       // the end of the highest tensor
  // The largest sum of (aligned) sizes live at one step: no plan of these tensors is smaller.
  int64_t lower_bound = 0;
  int64_t total_bytes = 0;  // the sum of all (aligned) sizes: the arena without any reuse
};

// Greedy by size: the largest tensor first, each placed at the lowest aligned offset where it
// overlaps no tensor already placed whose lifetime overlaps its own (first fit into the gaps).
// Tensors of size 0 take no room (offset 0). No tensor shares memory with a live one: nothing is
// done in place. Throws std::invalid_argument for a negative size or last < first.
MemoryPlan plan_memory(const std::vector<Lifetime>& tensors);

}  // namespace padfold
