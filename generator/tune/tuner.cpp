#include "tune/tuner.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>

#include "base/fault_injection.h"
#include "base/identifiers.h"
#include "base/process.h"
#include "compile/target.h"
#include "schedules/schedule.h"
#include "tune/build.h"
#include "tune/db.h"
#include "tune/progress.h"
#include "tune/signature.h"
#include "tune/workdir.h"

namespace padfold {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// The knobs of `c` that differ from `base`, as "a=1 b=true".
std::string knob_changes(const ScheduleParams& base, const ScheduleParams& c) {
  std::string out;
  for (const Knob& k : knobs())
    if (k.get(base) != k.get(c))
      out += fmt::format(
          "{}{}={}", out.empty() ? "" : " ", k.name,
          k.type == KnobType::Bool ? (k.get(c) ? "true" : "false") : std::to_string(k.get(c)));
  return out.empty() ? "(default)" : out;
}

ScheduleParams knobs_from_text(const std::string& text) {
  ScheduleParams p;
  update_from_json(p, json::parse(text));
  return p;
}

class LayerTuner {
 public:
  LayerTuner(const Layer& L, const Halide::Target& target, const TuneOptions& opt, TuneDb& db,
             const TuneScope& scope, const fs::path& work, const std::string& runtime_archive,
             bool by_candidate, TuneProgress& progress)
      : L_(L),
        target_(target),
        opt_(opt),
        db_(db),
        scope_(scope),
        // One folder per signature: two layers' candidates may have the same knobs (and key).
        work_(work / fmt::format("{:016x}", stable_hash(scope.signature))),
        runtime_(runtime_archive),
        by_candidate_(by_candidate),
        progress_(progress) {
    fs::create_directories(work_);
    for (const Measurement& m : db.records(scope)) known_[m.candidate] = m;
    faults_ = injected_faults();
  }

  LayerOutcome run(size_t budget, Clock::time_point deadline) {
    const Clock::time_point started = Clock::now();
    LayerOutcome out;
    out.layer = L_.name;
    out.signature = scope_.signature;
    const ScheduleParams def = resolve_schedule(L_, target_, default_schedule(L_, target_));
    default_key_ = candidate_key(def);
    data_ = make_tune_data(L_);
    // The default: measured against itself; every shard measures it (the reference point).
    const Measurement* d = evaluate({def}, def, true).front();
    if (!d || d->status != "ok") {
      out.status = "the default schedule failed: " + (d ? d->reason : "not measured");
      return out;
    }
    out.default_s = d->median_s;
    ScheduleParams incumbent = def;
    double best = 1;
    Search search(opt_.strategy, L_, target_, def, stable_hash(scope_.signature));
    size_t proposed = 1;
    const size_t batch = static_cast<size_t>(std::max(4, 2 * jobs()));
    while (proposed < budget && Clock::now() < deadline) {
      const std::vector<ScheduleParams> cands =
          search.next_batch(std::min(batch, budget - proposed));
      if (cands.empty()) break;
      proposed += cands.size();
      std::vector<ScheduleParams> mine;
      for (const ScheduleParams& c : cands)
        if (in_my_share(candidate_key(c))) mine.push_back(c);
      const std::vector<const Measurement*> results = evaluate(mine, incumbent, false);
      for (size_t i = 0; i < mine.size(); ++i) {
        const Measurement* m = results[i];
        if (m && m->accepted) {
          incumbent = mine[i];
          best = m->vs_default;
          search.accept(incumbent);
        }
        progress_.show(L_.name, proposed - cands.size() + i + 1, budget, best);
      }
    }
    progress_.done += budget > proposed ? budget - proposed : 0;  // what the search left unused
    // The choice is the database's best; an accepted candidate is re-timed beside the default
    // first (the acceptance timing is biased upwards: the best of many noisy draws), and one that
    // comes out slower than the default drops out.
    ScheduleParams chosen = def;
    for (int round = 0; round < 8; ++round) {
      const std::optional<Measurement> b =
          db_.best(scope_.signature, scope_.target, scope_.toolchain, scope_.machine, false);
      if (!b) break;
      chosen = knobs_from_text(b->knobs);
      const std::string key = candidate_key(chosen);
      if (key == default_key_) break;
      if (const auto c = known_.find("confirm:" + key); c != known_.end()) {
        out.tuned_vs_default = c->second.vs_default;
        break;
      }
      Measurement m = record("confirm:" + key, "confirm", b->knobs);
      const MeasureResult r = built(chosen) ? measure(lib(key), lib(key), true) : MeasureResult{};
      m.status = r.status;
      m.reason = r.reason;
      m.median_s = r.median_s;
      m.vs_default = r.status == "ok" ? r.vs_default : 0;
      m.noise = r.noise;
      m.samples = json(r.samples).dump();
      store(m);
      chosen = def;
    }
    out.tuned_knobs = knob_changes(def, chosen);
    if (candidate_key(chosen) == default_key_) out.tuned_vs_default = 1;
    chosen_ = chosen;
    out.search_s = std::chrono::duration<double>(Clock::now() - started).count();
    out.measured = measured_;
    out.failed = failed_;
    out.reused = reused_;
    return out;
  }

  // Halide's autoschedulers on the layer, each timed beside the chosen kernel and the default.
  // Ratios go through the default (tuned/default over auto/default, both interleaved), so that a
  // baseline stored by an earlier run still compares with a kernel tuned further since.
  void baselines(LayerOutcome& out) {
    const Clock::time_point started = Clock::now();
    for (const std::string& name : autoscheduler_names()) {
      const Measurement* m = baseline(name, chosen_);
      if (m && m->status == "ok" && m->vs_default > 0)
        out.baselines.emplace_back(name, out.tuned_vs_default / m->vs_default);
      else
        out.baselines.emplace_back(name, 0);
    }
    out.baselines_s = std::chrono::duration<double>(Clock::now() - started).count();
  }

 private:
  int jobs() const { return opt_.jobs > 0 ? opt_.jobs : default_parallel_jobs(); }

  bool in_my_share(const std::string& key) const {
    return opt_.shard.count == 1 || !by_candidate_ || key == default_key_ ||
           stable_hash(key) % static_cast<uint64_t>(opt_.shard.count) ==
               static_cast<uint64_t>(opt_.shard.index);
  }

  std::string function_name() const { return "pf_tune_" + c_identifier(L_.name); }
  std::string lib(const std::string& key) const { return (work_ / (key + ".so")).string(); }
  bool built(const ScheduleParams& c) {
    return fs::exists(lib(candidate_key(c))) || compile({c}, {""}).front().ok;
  }

  // Compiles the candidates (knobs, or an autoscheduler's name) in parallel workers.
  std::vector<WorkerResult> compile(const std::vector<ScheduleParams>& cands,
                                    const std::vector<std::string>& autoschedulers) {
    std::vector<WorkerJob> jobs;
    for (size_t i = 0; i < cands.size(); ++i) {
      const std::string key =
          autoschedulers[i].empty() ? candidate_key(cands[i]) : "auto_" + autoschedulers[i];
      const bool is_default = key == default_key_;
      jobs.push_back({"layer '" + L_.name + "', candidate " + key,
                      [this, i, key, is_default, &cands, &autoschedulers] {
                        const auto fault = faults_.find(L_.name);
                        if (fault != faults_.end() && (!is_default || fault->second.every))
                          raise_fault(fault->second);
                        build_candidate_library(L_, target_, cands[i], autoschedulers[i],
                                                function_name(), runtime_, lib(key));
                      }});
    }
    WorkerOptions w;
    w.parallel = jobs.size() > 1 ? this->jobs() : 1;
    const bool baseline = !autoschedulers.empty() && !autoschedulers.front().empty();
    w.timeout_s = baseline ? opt_.baseline_timeout_s : opt_.compile_timeout_s;
    return run_workers(jobs, w);
  }

  // Times `key`'s library in the measuring child against the incumbent and the default.
  // `longer`: timed three times as long (confirmations and baselines, measured once per layer).
  MeasureResult measure(const std::string& so, const std::string& incumbent_so,
                        bool longer = false) {
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

  Measurement record(const std::string& key, const std::string& kind, const std::string& knobs) {
    Measurement m;
    m.scope = scope_;
    m.candidate = key;
    m.kind = kind;
    m.knobs = knobs;
    m.layer = L_.name;
    m.samples = "[]";
    return m;
  }

  const Measurement* store(const Measurement& m) {
    db_.insert(m);
    known_[m.candidate] = m;
    return &known_[m.candidate];
  }

  // Measures (or finds in the database) each candidate in order; null for one not measured.
  std::vector<const Measurement*> evaluate(const std::vector<ScheduleParams>& cands,
                                           ScheduleParams incumbent, bool is_default) {
    std::vector<ScheduleParams> to_build;
    std::vector<size_t> built_index(cands.size(), SIZE_MAX);
    for (size_t i = 0; i < cands.size(); ++i)
      if (!known_.count(candidate_key(cands[i]))) {
        built_index[i] = to_build.size();
        to_build.push_back(cands[i]);
      }
    // The incumbent and the default are timed beside each candidate: their libraries too.
    if (!to_build.empty() && !is_default) {
      for (const ScheduleParams& p : {incumbent, knobs_from_text(known_[default_key_].knobs)})
        if (!fs::exists(lib(candidate_key(p))) &&
            std::none_of(to_build.begin(), to_build.end(), [&](const ScheduleParams& q) {
              return candidate_key(q) == candidate_key(p);
            }))
          to_build.push_back(p);
    }
    const std::vector<WorkerResult> compiled =
        to_build.empty() ? std::vector<WorkerResult>{}
                         : compile(to_build, std::vector<std::string>(to_build.size()));
    std::vector<const Measurement*> out;
    for (size_t i = 0; i < cands.size(); ++i) {
      const std::string key = candidate_key(cands[i]);
      ++progress_.done;
      if (built_index[i] == SIZE_MAX) {
        ++reused_;
        out.push_back(&known_[key]);
        if (known_[key].accepted) incumbent = cands[i];
        continue;
      }
      Measurement m = record(key, "knobs", knobs_text(cands[i]));
      const WorkerResult& c = compiled[built_index[i]];
      if (!c.ok) {
        m.status = "failed";
        m.reason = "compile: " + c.error;
        ++failed_;
        out.push_back(store(m));
        continue;
      }
      const std::string inc_key = candidate_key(incumbent);
      if (!is_default && !built(incumbent)) {
        out.push_back(nullptr);  // the incumbent did not rebuild: nothing to compare with
        continue;
      }
      const MeasureResult r = measure(lib(key), is_default ? lib(key) : lib(inc_key));
      m.status = r.status;
      m.reason = r.reason;
      m.median_s = r.median_s;
      m.vs_default = is_default ? 1.0 : r.vs_default;
      m.vs_incumbent = is_default ? 1.0 : r.vs_incumbent;
      m.noise = r.noise;
      m.samples = json(r.samples).dump();
      // Accepted: faster than the incumbent by more than the noise (and 1%).
      m.accepted = r.status == "ok" && (is_default || r.vs_incumbent > 1 + std::max(r.noise, 0.01));
      if (r.status == "ok")
        ++measured_;
      else
        ++failed_;
      if (m.accepted) incumbent = cands[i];
      out.push_back(store(m));
    }
    return out;
  }

  const Measurement* baseline(const std::string& name, const ScheduleParams& incumbent) {
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
    const MeasureResult r =
        measure(lib("auto_" + name), fs::exists(inc) ? inc : lib(default_key_), true);
    m.status = r.status;
    m.reason = r.reason;
    m.median_s = r.median_s;
    m.vs_default = r.vs_default;
    m.vs_incumbent = r.vs_incumbent;
    m.noise = r.noise;
    m.samples = json(r.samples).dump();
    return store(m);
  }

  const Layer& L_;
  Halide::Target target_;
  const TuneOptions& opt_;
  TuneDb& db_;
  TuneScope scope_;
  fs::path work_;
  std::string runtime_;
  bool by_candidate_;  // shards split this signature's candidates (fewer signatures than shards)
  TuneProgress& progress_;
  InjectedFaults faults_;
  TuneData data_;
  std::string default_key_;
  ScheduleParams chosen_;  // the search's choice
  std::map<std::string, Measurement> known_;
  size_t measured_ = 0, failed_ = 0, reused_ = 0;
};

}  // namespace

std::vector<LayerOutcome> run_tune(const TuneOptions& opt) {
  const Model model = load_spec(opt.spec);
  const Halide::Target target = resolve_target(opt.target);
  // The one place that refuses GPU targets (the search space and the measuring child are the
  // CPU's); to become a question to the schedule strategy (a `tunable` capability).
  if (target.has_gpu_feature())
    throw std::runtime_error("--target " + opt.target +
                             ": a GPU target; padfold tune searches the CPU schedule knobs and "
                             "measures on this machine's CPU (expected a CPU target, e.g. host)");
  if (!can_run_here(target))
    throw std::runtime_error("--target " + opt.target +
                             ": this machine cannot run its code, so "
                             "it cannot be tuned here");
  // Every named layer must exist and be tunable before anything runs.
  std::vector<const Layer*> layers;
  for (const std::string& name : opt.layers) {
    const Layer* L = model.find_layer(name);
    if (!L) {
      std::string names;
      for (const Layer& M : model.layers) names += (names.empty() ? "" : ", ") + M.name;
      throw std::invalid_argument("--layers: no layer '" + name + "' in " + opt.spec +
                                  " (its layers: " + names + ")");
    }
    if (L->is_join())
      throw std::invalid_argument("--layers: layer '" + name + "' (" + L->op_name +
                                  ") has no knobs to tune");
    layers.push_back(L);
  }
  if (opt.layers.empty())
    for (const Layer& L : model.layers)
      if (!L.is_join()) layers.push_back(&L);
  // One tuning per signature: layers computing the same thing share it.
  std::map<std::string, const Layer*> by_signature;
  for (const Layer* L : layers) by_signature.emplace(layer_signature(*L), L);
  std::vector<std::pair<std::string, const Layer*>> sigs(by_signature.begin(), by_signature.end());
  const bool by_candidate = static_cast<int>(sigs.size()) < opt.shard.count;
  std::vector<std::pair<std::string, const Layer*>> mine;
  for (size_t i = 0; i < sigs.size(); ++i)
    if (by_candidate ||
        static_cast<int>(i % static_cast<size_t>(opt.shard.count)) == opt.shard.index)
      mine.push_back(sigs[i]);

  TuneDb db(opt.db);
  const std::string tkey = target_key(target), toolchain = toolchain_key(), machine = machine_id();
  const size_t budget = static_cast<size_t>(opt.budget > 0   ? opt.budget
                                            : opt.time_s > 0 ? 100000
                                                             : 60);
  WorkDir work;
  const std::string runtime = (work.path() / "halide_runtime.a").string();
  {
    WorkerOptions w;
    w.timeout_s = 600;
    const auto r = run_workers(
        {{"the Halide runtime for " + tkey, [&] { build_tune_runtime(target, runtime); }}}, w);
    if (!r[0].ok) throw std::runtime_error("building the Halide runtime: " + r[0].error);
  }
  TuneProgress progress;
  progress.total = budget * mine.size();
  if (opt.time_s > 0)
    progress.end = progress.start + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(opt.time_s));
  fmt::print(stderr, "tune: {} layer signature(s) of {} (shard {}/{}{}), target {}, db {}\n",
             mine.size(), sigs.size(), opt.shard.index, opt.shard.count,
             by_candidate && opt.shard.count > 1 ? ", by candidate" : "", tkey, opt.db);
  const Clock::time_point start = Clock::now();
  std::vector<LayerOutcome> outcomes;
  // Every search first (--time shares the time among them), then the baselines.
  std::vector<std::unique_ptr<LayerTuner>> tuners;
  for (size_t i = 0; i < mine.size(); ++i) {
    const auto& [sig, L] = mine[i];
    // With --time, each remaining layer gets an equal share of the time left.
    Clock::time_point deadline = Clock::time_point::max();
    if (opt.time_s > 0) {
      const auto end = start + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(opt.time_s));
      deadline = Clock::now() + (end - Clock::now()) / static_cast<int>(mine.size() - i);
    }
    tuners.push_back(std::make_unique<LayerTuner>(
        *L, target, opt, db, TuneScope{sig, tkey, toolchain, machine}, work.path(), runtime,
        by_candidate && opt.shard.count > 1, progress));
    outcomes.push_back(tuners.back()->run(budget, deadline));
    progress.end_line();
  }
  if (opt.baselines) {
    fmt::print(stderr, "tune: timing Halide's autoschedulers on {} layer(s)\n", tuners.size());
    for (size_t i = 0; i < tuners.size(); ++i)
      if (outcomes[i].status == "ok") tuners[i]->baselines(outcomes[i]);
  }
  return outcomes;
}

}  // namespace padfold
