#include "tune/search.h"

#include <algorithm>
#include <cstring>

#include "schedules/schedule.h"
#include "tune/signature.h"

namespace padfold {

SearchStrategy parse_search_strategy(const std::string& name) {
  if (name == "neighbourhood") return SearchStrategy::Neighbourhood;
  if (name == "random") return SearchStrategy::Random;
  throw std::invalid_argument("--strategy: '" + name +
                              "' is not a strategy; expected "
                              "neighbourhood or random");
}

Search::Search(SearchStrategy strategy, const Layer& layer, const Halide::Target& target,
               const ScheduleParams& resolved_default, uint64_t seed)
    : strategy_(strategy),
      layer_(layer),
      target_(target),
      incumbent_(resolved_default),
      serial_(resolved_default.rows_per_task == 0),
      rng_(seed) {
  // A single layer's space: the knobs of its target's scope, less fused_strips (fused blocks
  // only).
  const char* scope = knob_scope(target);
  for (const Knob& k : knobs())
    if (std::strcmp(k.scope, scope) == 0 && std::strcmp(k.name, "fused_strips") != 0)
      knobs_.push_back(&k);
  proposed_.insert(knobs_text(resolved_default));
  fill_neighbours();
}

// The values searched for a knob. The tuner measures one thread, so whether the kernel has a
// parallel loop stays the default's: a kernel with threads keeps them (rows_per_task never 0, and
// no min_task_kflop that leaves less work than two tasks), and one too small for threads stays on
// one.
std::vector<int64_t> Search::values(const Knob& k) const {
  std::vector<int64_t> v = k.search_values();
  const auto drop = [&](auto unwanted) {
    v.erase(std::remove_if(v.begin(), v.end(), unwanted), v.end());
  };
  if (std::strcmp(k.name, "rows_per_task") == 0) {
    if (serial_) return {0};
    drop([](int64_t x) { return x == 0; });
  } else if (std::strcmp(k.name, "min_task_kflop") == 0) {
    const double flops = layer_.flops();
    drop([&](int64_t x) { return x > 0 && 2e3 * static_cast<double>(x) > flops; });
  }
  return v;
}

// Resolved for this layer, with the default's choice of threads (a transferred candidate may
// come from a layer that had none).
ScheduleParams Search::resolve(ScheduleParams p) const {
  if (serial_)
    p.rows_per_task = 0;
  else if (p.rows_per_task == 0)
    p.rows_per_task = 1;
  return resolve_schedule(layer_, target_, p);
}

bool Search::propose(const ScheduleParams& p, std::vector<ScheduleParams>& out) {
  const ScheduleParams r = resolve(p);
  if (!proposed_.insert(knobs_text(r)).second) return false;
  out.push_back(r);
  return true;
}

// Every knob one search value away from the incumbent, in a seeded order.
void Search::fill_neighbours() {
  queue_.clear();
  for (const Knob* k : knobs_) {
    const std::vector<int64_t> values = this->values(*k);
    const int64_t now = k->get(incumbent_);
    // The nearest search values below and above the current value.
    const auto above = std::upper_bound(values.begin(), values.end(), now);
    const auto below = std::lower_bound(values.begin(), values.end(), now);
    for (auto it : {below == values.begin() ? values.end() : below - 1, above}) {
      if (it == values.end()) continue;
      ScheduleParams p = incumbent_;
      k->set(p, *it);
      queue_.push_back(p);
    }
  }
  std::shuffle(queue_.begin(), queue_.end(), rng_);
}

// The incumbent with `n` knobs moved to random search values.
ScheduleParams Search::mutate(int n) {
  ScheduleParams p = incumbent_;
  for (int i = 0; i < n; ++i) {
    const Knob* k = knobs_[rng_() % knobs_.size()];
    const std::vector<int64_t> values = this->values(*k);
    k->set(p, values[rng_() % values.size()]);
  }
  return p;
}

std::vector<ScheduleParams> Search::next_batch(size_t n) {
  std::vector<ScheduleParams> out;
  // Random draws (and mutations) may keep resolving to knobs already seen: give up after a while.
  while (out.size() < n && !first_.empty()) {
    propose(first_.front(), out);
    first_.erase(first_.begin());
  }
  for (int attempts = 0; out.size() < n && attempts < 2000; ++attempts) {
    if (strategy_ == SearchStrategy::Random) {
      ScheduleParams p = incumbent_;
      for (const Knob* k : knobs_) {
        const std::vector<int64_t> values = this->values(*k);
        k->set(p, values[rng_() % values.size()]);
      }
      propose(p, out);
    } else if (!queue_.empty()) {
      const ScheduleParams p = queue_.front();
      queue_.erase(queue_.begin());
      propose(p, out);
    } else {
      propose(mutate(2 + static_cast<int>(rng_() % 2)), out);
    }
  }
  return out;
}

std::vector<ScheduleParams> Search::propose_first(const std::vector<ScheduleParams>& candidates) {
  std::vector<ScheduleParams> resolved;
  for (const ScheduleParams& c : candidates) resolved.push_back(resolve(c));
  first_.insert(first_.begin(), resolved.begin(), resolved.end());
  return resolved;
}

void Search::accept(const ScheduleParams& c) {
  incumbent_ = c;
  if (strategy_ == SearchStrategy::Neighbourhood) fill_neighbours();
}

}  // namespace padfold
