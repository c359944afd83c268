// Compiling, measuring and recording one layer signature's candidates.
#include "tune/evaluate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/identifiers.h"
#include "compile/jobs.h"
#include "tune/build.h"
#include "tune/signature.h"

namespace padfold {

namespace fs = std::filesystem;
using json = nlohmann::json;

CandidateEvaluator::CandidateEvaluator(const Layer& L, const Halide::Target& target,
                                       const TuneOptions& opt, TuneDb& db, const TuneScope& scope,
                                       const ScheduleParams& resolved_default,
                                       const fs::path& run_dir, const std::string& runtime_archive)
    : L_(L),
      target_(target),
      opt_(opt),
      db_(db),
      scope_(scope),
      // One folder per signature: two layers' candidates may have the same knobs (and key).
      work_(run_dir / fmt::format("{:016x}", stable_hash(scope.signature))),
      runtime_(runtime_archive),
      default_key_(candidate_key(resolved_default)) {
  fs::create_directories(work_);
  for (const Measurement& m : db.records(scope)) known_[m.candidate] = m;
  data_ = make_tune_data(L_);
}

std::string CandidateEvaluator::function_name() const {
  return "pf_tune_" + c_identifier(L_.name);
}

std::string CandidateEvaluator::lib(const std::string& key) const {
  return (work_ / (key + ".so")).string();
}

bool CandidateEvaluator::built(const ScheduleParams& c) {
  return fs::exists(lib(candidate_key(c))) || compile({c}, {""}).front().ok;
}

// Compiles the candidates (knobs, or an autoscheduler's name) in `parallel` workers (0: one per
// core); `on_done` is called as each ends.
std::vector<WorkerResult> CandidateEvaluator::compile(
    const std::vector<ScheduleParams>& cands, const std::vector<std::string>& autoschedulers,
    int parallel, std::function<void(size_t, const WorkerResult&)> on_done) {
  std::vector<CompileJob> jobs;
  for (size_t i = 0; i < cands.size(); ++i) {
    const std::string key =
        autoschedulers[i].empty() ? candidate_key(cands[i]) : "auto_" + autoschedulers[i];
    // The default must build: only faults marked ":every" hit it.
    jobs.push_back({"layer '" + L_.name + "', candidate " + key, L_.name, key == default_key_,
                    [this, i, key, &cands, &autoschedulers] {
                      build_candidate_library(L_, target_, cands[i], autoschedulers[i],
                                              function_name(), runtime_, lib(key));
                    }});
  }
  CompileJobOptions o;
  o.parallel = jobs.size() > 1 ? (parallel > 0 ? parallel : opt_.compile_jobs()) : 1;
  const bool baseline = !autoschedulers.empty() && !autoschedulers.front().empty();
  o.timeout_s = baseline ? opt_.baseline_timeout_s : opt_.compile_timeout_s;
  o.on_done = std::move(on_done);
  return run_compile_jobs(std::move(jobs), o);
}

// Times `so` in the measuring child against the incumbent and the default.
// `longer`: timed three times as long (confirmations and baselines, measured once per layer).
MeasureResult CandidateEvaluator::measure(const std::string& so, const std::string& incumbent_so,
                                          bool longer) {
  MeasureOptions mo = opt_.measure;
  if (longer) mo.min_time_s *= 3;
  const fs::path result = work_ / "measure.json";
  fs::remove(result);
  const Variant cand{so, function_name()}, inc{incumbent_so, function_name()},
      def{lib(default_key_), function_name()};
  WorkerOptions w;
  w.timeout_s = opt_.measure_timeout_s;
  const std::vector<WorkerResult> r =
      run_workers({{"measuring " + so,
                    [&] {
                      setenv("HL_NUM_THREADS", "1", 1);
                      const MeasureResult m = measure_candidate(L_, data_, cand, inc, def, mo);
                      std::ofstream(result) << to_json(m).dump();
                    }}},
                  w);
  MeasureResult m;
  if (!r[0].ok) {
    m.reason = "measuring: " + r[0].error;
    return m;
  }
  std::ifstream f(result);
  return measure_result_from_json(json::parse(f));
}

Measurement CandidateEvaluator::record(const std::string& key, const std::string& kind,
                                       const std::string& knobs) {
  Measurement m;
  m.scope = scope_;
  m.candidate = key;
  m.kind = kind;
  m.knobs = knobs;
  m.layer = L_.name;
  m.samples = "[]";
  return m;
}

const Measurement* CandidateEvaluator::store(const Measurement& m) {
  db_.insert(m);
  known_[m.candidate] = m;
  return &known_[m.candidate];
}

const Measurement* CandidateEvaluator::known(const std::string& candidate) const {
  const auto k = known_.find(candidate);
  return k == known_.end() ? nullptr : &k->second;
}

bool CandidateEvaluator::overlaps() const {
  return opt_.overlap && opt_.compile_jobs() > 1;
}

std::vector<const Measurement*> CandidateEvaluator::evaluate(
    const std::vector<ScheduleParams>& cands, ScheduleParams incumbent, bool is_default) {
  // What to build: the incumbent's and the default's libraries first where they are missing
  // (every candidate is timed beside them), then the candidates not measured yet.
  std::vector<ScheduleParams> to_build;
  const bool any_new = std::any_of(cands.begin(), cands.end(), [&](const ScheduleParams& c) {
    return !known_.count(candidate_key(c));
  });
  if (any_new && !is_default)
    for (const ScheduleParams& p : {incumbent, knobs_from_text(known_[default_key_].knobs)})
      if (!fs::exists(lib(candidate_key(p))) &&
          std::none_of(to_build.begin(), to_build.end(), [&](const ScheduleParams& q) {
            return candidate_key(q) == candidate_key(p);
          }))
        to_build.push_back(p);
  const size_t prerequisites = to_build.size();
  std::vector<size_t> built_index(cands.size(), SIZE_MAX);
  for (size_t i = 0; i < cands.size(); ++i)
    if (!known_.count(candidate_key(cands[i]))) {
      built_index[i] = to_build.size();
      to_build.push_back(cands[i]);
    }

  // Candidates are settled in order, each as soon as its library (and the prerequisites) are
  // there: when overlapping, the next compiles run while this one is measured.
  std::vector<WorkerResult> compiled(to_build.size());
  std::vector<bool> done(to_build.size(), false);
  std::vector<const Measurement*> out(cands.size(), nullptr);
  size_t next = 0;
  const auto settle_ready = [&] {
    for (size_t p = 0; p < prerequisites; ++p)
      if (!done[p]) return;
    for (; next < cands.size(); ++next) {
      const size_t b = built_index[next];
      if (b != SIZE_MAX && !done[b]) return;
      out[next] =
          settle(cands[next], b == SIZE_MAX ? nullptr : &compiled[b], incumbent, is_default);
    }
  };
  if (!to_build.empty()) {
    const bool overlap = overlaps() && to_build.size() > 1;
    // One core measures while the others compile.
    compile(to_build, std::vector<std::string>(to_build.size()),
            overlap ? std::max(1, opt_.compile_jobs() - 1) : 0,
            [&](size_t job, const WorkerResult& r) {
              compiled[job] = r;
              done[job] = true;
              if (overlap) settle_ready();
            });
  }
  settle_ready();
  return out;
}

const Measurement* CandidateEvaluator::settle(const ScheduleParams& cand,
                                              const WorkerResult* compiled,
                                              ScheduleParams& incumbent, bool is_default) {
  const std::string key = candidate_key(cand);
  if (!compiled) {
    ++reused_;
    if (known_[key].accepted) incumbent = cand;
    return &known_[key];
  }
  Measurement m = record(key, "knobs", knobs_text(cand));
  if (!compiled->ok) {
    m.status = "failed";
    m.reason = "compile: " + compiled->error;
    ++failed_;
    return store(m);
  }
  const std::string inc_key = candidate_key(incumbent);
  if (!is_default && !built(incumbent))
    return nullptr;  // the incumbent did not rebuild: nothing to compare with
  const MeasureResult r = measure(lib(key), is_default ? lib(key) : lib(inc_key));
  m.take(r);
  if (is_default) m.vs_default = m.vs_incumbent = 1.0;
  // Accepted: faster than the incumbent by more than the noise (and 1%).
  m.accepted = r.status == "ok" && (is_default || r.vs_incumbent > 1 + std::max(r.noise, 0.01));
  if (r.status == "ok")
    ++measured_;
  else
    ++failed_;
  if (m.accepted) incumbent = cand;
  return store(m);
}

const Measurement* CandidateEvaluator::confirm(const ScheduleParams& chosen,
                                               const std::string& knobs) {
  const std::string key = candidate_key(chosen);
  Measurement m = record("confirm:" + key, "confirm", knobs);
  m.take(built(chosen) ? measure(lib(key), lib(key), true) : MeasureResult{});
  // Timed against itself: only the ratio to the default means something (none when it failed).
  if (m.status != "ok") m.vs_default = 0;
  m.vs_incumbent = 0;
  return store(m);
}

const Measurement* CandidateEvaluator::baseline(const std::string& name,
                                                const ScheduleParams& incumbent) {
  const std::string key = "auto:" + name;
  if (known_.count(key)) return &known_[key];
  Measurement m = record(key, "baseline", name);
  const WorkerResult c = compile({incumbent}, {name}).front();
  if (!c.ok) {
    m.status = "failed";
    m.reason = "compile: " + c.error;
    return store(m);
  }
  const std::string inc = lib(candidate_key(incumbent));
  m.take(measure(lib("auto_" + name), fs::exists(inc) ? inc : lib(default_key_), true));
  return store(m);
}

}  // namespace padfold
