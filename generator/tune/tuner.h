// `padfold tune`: per layer signature, a search over the knobs from the default row, candidates
// compiled in parallel worker processes and measured one at a time in a pinned measuring child
// process, every outcome stored in the tuning database as it happens (so a killed run resumes),
// then Halide's autoschedulers timed on the same layer as baselines.
#pragma once

#include <string>
#include <vector>

#include "tune/measure.h"
#include "tune/search.h"
#include "tune/shard.h"

namespace padfold {

struct TuneOptions {
  std::string spec, target = "host", db = "tune.sqlite";
  std::vector<std::string> layers;  // empty: every layer
  int budget = 0;                   // candidates per layer signature (the default included)
  double time_s = 0;                // 0: no limit
  Shard shard;                      // --shard i/n: this process's share of the work
  int jobs = 0;                     // compile workers; 0: one per core
  SearchStrategy strategy = SearchStrategy::Neighbourhood;
  bool baselines = true;  // time Halide's autoschedulers
  // A candidate still compiling after compile_timeout_s is failed (heavy unrolling can make LLVM
  // take minutes); the autoschedulers' own searches get baseline_timeout_s.
  double compile_timeout_s = 60, baseline_timeout_s = 300, measure_timeout_s = 120;
  MeasureOptions measure;

  int compile_jobs() const;  // jobs, or one per core
};

struct LayerOutcome {
  std::string layer, signature;
  std::string status = "ok";                    // ok, or why the layer could not be tuned
  size_t measured = 0, failed = 0, reused = 0;  // candidates measured now, failed, from the db
  double default_s = 0;                         // the default's median per call
  double tuned_vs_default = 1;                  // re-measured interleaved at the end
  std::string tuned_knobs;                      // the knobs that differ from the default
  std::vector<std::pair<std::string, double>> baselines;  // autoscheduler -> tuned / it
  double search_s = 0, baselines_s = 0;                   // wall time of the two phases
};

// Runs the tuner; progress on stderr (a bar on a terminal, lines otherwise). Throws for bad input
// (spec, layer names, target, database) before anything is measured.
std::vector<LayerOutcome> run_tune(const TuneOptions& options);

}  // namespace padfold
