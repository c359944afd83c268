// plan_memory: greedy by size, first fit among the tensors whose lifetimes overlap.
#include "emit/memory_plan.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>

namespace padfold {

int64_t arena_aligned(int64_t bytes) {
  return (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

namespace {

bool lives_overlap(const Lifetime& a, const Lifetime& b) {
  return a.first <= b.last && b.first <= a.last;
}

int64_t lower_bound_of(const std::vector<Lifetime>& tensors) {
  size_t steps = 0;
  for (const Lifetime& t : tensors) steps = std::max(steps, t.last + 1);
  std::vector<int64_t> live(steps + 1, 0);  // differences: += at first, -= after last
  for (const Lifetime& t : tensors) {
    live[t.first] += arena_aligned(t.bytes);
    live[t.last + 1] -= arena_aligned(t.bytes);
  }
  int64_t now = 0, most = 0;
  for (size_t s = 0; s < steps; ++s) most = std::max(most, now += live[s]);
  return most;
}

}  // namespace

MemoryPlan plan_memory(const std::vector<Lifetime>& tensors) {
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].bytes < 0 || tensors[i].last < tensors[i].first)
      throw std::invalid_argument("memory plan: tensor " + std::to_string(i) +
                                  " has a negative size or ends before it starts");
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  // Largest first; equal sizes in step order, so that the plan does not depend on the sort.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return tensors[a].bytes != tensors[b].bytes ? tensors[a].bytes > tensors[b].bytes
                                                : tensors[a].first < tensors[b].first;
  });
  MemoryPlan plan;
  plan.offsets.assign(tensors.size(), 0);
  std::vector<size_t> placed;
  std::vector<std::pair<int64_t, int64_t>> busy;  // [begin, end) of the overlapping placed ones
  for (size_t i : order) {
    const int64_t size = arena_aligned(tensors[i].bytes);
    plan.total_bytes += size;
    if (size > 0) {
      busy.clear();
      for (size_t p : placed)
        if (lives_overlap(tensors[p], tensors[i]))
          busy.emplace_back(plan.offsets[p], plan.offsets[p] + arena_aligned(tensors[p].bytes));
      std::sort(busy.begin(), busy.end());
      int64_t at = 0;  // the lowest offset past every busy range that begins before at + size
      for (const auto& [begin, end] : busy) {
        if (begin >= at + size) break;
        at = std::max(at, end);
      }
      plan.offsets[i] = at;
      plan.arena_bytes = std::max(plan.arena_bytes, at + size);
      placed.push_back(i);
    }
  }
  plan.lower_bound = lower_bound_of(tensors);
  return plan;
}

}  // namespace padfold
