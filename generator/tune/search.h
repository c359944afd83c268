// The tuner's search over the knob table: a neighbourhood search from the default row (every
// cpu-scope knob one search value up or down from the incumbent; at a local optimum, random
// multi-knob mutations of it), or random search for comparison. Deterministic for a seed and a
// sequence of outcomes, so a rerun replays the same proposals from the database.
#pragma once

#include <Halide.h>

#include <random>
#include <set>
#include <string>
#include <vector>

#include "frontend/spec.h"
#include "schedules/knobs.h"

namespace padfold {

enum class SearchStrategy { Neighbourhood, Random };
SearchStrategy parse_search_strategy(const std::string& name);  // "neighbourhood" or "random"

class Search {
 public:
  Search(SearchStrategy strategy, const Layer& layer, const Halide::Target& target,
         const ScheduleParams& resolved_default, uint64_t seed);

  // At most n resolved candidates never proposed before (the default counts as proposed);
  // fewer, or none, when the space near the incumbent is exhausted.
  std::vector<ScheduleParams> next_batch(size_t n);
  // The incumbent moved to `c` (it beat the old one by more than the noise).
  void accept(const ScheduleParams& c);
  // Candidates proposed before anything else, in order (what won on the nearest tuned
  // signatures): returns them as they will be proposed, resolved for this layer (one already
  // proposed is then skipped).
  std::vector<ScheduleParams> propose_first(const std::vector<ScheduleParams>& candidates);

 private:
  std::vector<int64_t> values(const Knob& k) const;
  ScheduleParams resolve(ScheduleParams p) const;
  bool propose(const ScheduleParams& p, std::vector<ScheduleParams>& out);
  void fill_neighbours();
  ScheduleParams mutate(int knobs_to_change);

  SearchStrategy strategy_;
  const Layer& layer_;
  Halide::Target target_;
  std::vector<const Knob*> knobs_;
  ScheduleParams incumbent_;
  bool serial_;  // the default has no parallel loop (too little work for two tasks)
  std::vector<ScheduleParams> first_;  // propose_first's, not yet proposed
  std::vector<ScheduleParams> queue_;  // neighbours of the incumbent not yet proposed
  std::set<std::string> proposed_;     // knobs_text of every proposal
  std::mt19937_64 rng_;
};

}  // namespace padfold
