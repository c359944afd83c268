// Evaluating one layer signature's candidates: each compiled into a library in parallel workers,
// timed in a measuring child beside the incumbent and the default, and stored in the tuning
// database as it happens (records already there, from an earlier or killed run, are reused).
#pragma once

#include <Halide.h>

#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/process.h"
#include "frontend/spec.h"
#include "schedules/knobs.h"
#include "tune/db.h"
#include "tune/measure.h"
#include "tune/tuner.h"

namespace padfold {

class CandidateEvaluator {
 public:
  // The candidates' libraries go to a folder of `run_dir` that is the signature's own, linked
  // with the Halide runtime `runtime_archive`.
  CandidateEvaluator(const Layer& layer, const Halide::Target& target, const TuneOptions& options,
                     TuneDb& db, const TuneScope& scope, const ScheduleParams& resolved_default,
                     const std::filesystem::path& run_dir, const std::string& runtime_archive);

  // Measures (or finds in the database) each candidate in order; null for one not measured. Each
  // is timed beside `incumbent` (which moves to a candidate accepted on the way) and the default.
  // `is_default`: `cands` is the default alone, timed against itself.
  std::vector<const Measurement*> evaluate(const std::vector<ScheduleParams>& cands,
                                           ScheduleParams incumbent, bool is_default);
  // The accepted candidate `chosen` (`knobs`: its record's) re-timed beside the default, longer:
  // stored as "confirm:<key>".
  const Measurement* confirm(const ScheduleParams& chosen, const std::string& knobs);
  // Halide's autoscheduler `name` on the layer, timed beside `incumbent` and the default: stored
  // as "auto:<name>", or found in the database.
  const Measurement* baseline(const std::string& name, const ScheduleParams& incumbent);
  // The record of `candidate` (a candidate key, "confirm:<key>" or "auto:<name>"), this run's or
  // the database's; null if there is none.
  const Measurement* known(const std::string& candidate) const;

  const std::string& default_key() const { return default_key_; }
  size_t measured() const { return measured_; }  // candidates measured by this run
  size_t failed() const { return failed_; }      // ... that failed to compile or to measure
  size_t reused() const { return reused_; }      // found in the database

 private:
  std::string function_name() const;
  std::string lib(const std::string& key) const;
  bool built(const ScheduleParams& c);
  std::vector<WorkerResult> compile(const std::vector<ScheduleParams>& cands,
                                    const std::vector<std::string>& autoschedulers,
                                    int parallel = 0,
                                    std::function<void(size_t, const WorkerResult&)> on_done = {});
  // Whether candidates are measured while the next ones compile (options.overlap, > 1 core).
  bool overlaps() const;
  // One candidate of evaluate(): reused from the records (`compiled` null), failed, or measured
  // beside `incumbent`, which moves to it when it is accepted.
  const Measurement* settle(const ScheduleParams& cand, const WorkerResult* compiled,
                            ScheduleParams& incumbent, bool is_default);
  MeasureResult measure(const std::string& so, const std::string& incumbent_so,
                        bool longer = false);
  Measurement record(const std::string& key, const std::string& kind, const std::string& knobs);
  const Measurement* store(const Measurement& m);

  const Layer& L_;
  Halide::Target target_;
  const TuneOptions& opt_;
  TuneDb& db_;
  TuneScope scope_;
  std::filesystem::path work_;
  std::string runtime_;
  std::string default_key_;
  TuneData data_;
  std::map<std::string, Measurement> known_;
  size_t measured_ = 0, failed_ = 0, reused_ = 0;
};

}  // namespace padfold
