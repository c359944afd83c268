// `padfold tune`: per layer signature, a search over the knobs from the default row, candidates
// compiled in parallel worker processes and measured one at a time in a pinned measuring child
// process, every outcome stored in the tuning database as it happens (so a killed run resumes),
// then Halide's autoschedulers timed on the same layer as baselines.
// A whole model is tuned as its kernels will be compiled: layers that `--fuse` puts inside a
// fused block are left out, every signature's default is measured first, and --time is split by
// each signature's share of the model's time (its default's time times the layers sharing it).
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
  bool transfer = true;   // start each search from the winners of the nearest tuned signatures
  // Measure each candidate as its compile ends, on one core, while the others compile the next
  // (with more than one compile job); off: every compile of a batch ends before any is measured.
  bool overlap = true;
  std::string fuse = "auto";  // as padfold compile --fuse: which layers get kernels of their own
  // A candidate still compiling after compile_timeout_s is failed (heavy unrolling can make LLVM
  // take minutes); the autoschedulers' own searches get baseline_timeout_s.
  double compile_timeout_s = 60, baseline_timeout_s = 300, measure_timeout_s = 120;
  MeasureOptions measure;

  int compile_jobs() const;  // jobs, or one per core
};

struct LayerOutcome {
  std::string layer, signature;
  std::string status = "ok";     // ok, or why the layer could not be tuned
  size_t layers = 1;             // layers of the model with this signature (the named one included)
  double share = 0;              // of the model's time with default knobs (1 thread, tuned layers)
  double allotted_s = 0;         // the search's share of --time (0: no --time)
  size_t transferred = 0;        // candidates taken from the nearest tuned signatures
  std::string transferred_from;  // the layer whose winning knobs were accepted here, if any
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
