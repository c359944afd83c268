// The tuner's search: per layer signature, the default measured first, a search from it in
// batches, the choice confirmed beside the default, then the autoschedulers timed as baselines.
#include "tune/tuner.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>

#include "base/process.h"
#include "compile/fusion.h"
#include "compile/target.h"
#include "schedules/schedule.h"
#include "tune/build.h"
#include "tune/db.h"
#include "tune/evaluate.h"
#include "tune/progress.h"
#include "tune/signature.h"
#include "tune/transfer.h"
#include "tune/workdir.h"

namespace padfold {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

int TuneOptions::compile_jobs() const {
  return jobs > 0 ? jobs : default_parallel_jobs();
}

namespace {

// Winners of other signatures tried first in each search.
constexpr size_t kTransferred = 3;

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

// "a, b, c, ..." (at most `most` names).
std::string names_of(const std::vector<std::string>& names, size_t most) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < most; ++i) out += (i ? ", " : "") + names[i];
  return names.size() > most ? out + ", ..." : out;
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
        by_candidate_(by_candidate),
        progress_(progress),
        default_(resolve_schedule(L, target, default_schedule(L, target))),
        eval_(L, target, opt, db, scope, default_, work, runtime_archive) {}

  // The default, measured against itself (every shard measures it: the reference point). False
  // when it failed (out.status says why).
  bool measure_default(LayerOutcome& out) {
    const Clock::time_point started = Clock::now();
    out.layer = L_.name;
    out.signature = scope_.signature;
    const Measurement* d = eval_.evaluate({default_}, default_, true).front();
    ++progress_.done;
    if (!d || d->status != "ok") {
      out.status = "the default schedule failed: " + (d ? d->reason : "not measured");
      return false;
    }
    out.default_s = d->median_s;
    out.search_s += std::chrono::duration<double>(Clock::now() - started).count();
    return true;
  }

  // The search from the default (and the nearest tuned signatures' winners) until `budget`
  // candidates or `deadline`, then the choice confirmed beside the default.
  void search(LayerOutcome& out, size_t budget, Clock::time_point deadline) {
    const Clock::time_point started = Clock::now();
    const ScheduleParams& def = default_;
    ScheduleParams incumbent = def;
    double best = 1;
    Search search(opt_.strategy, L_, target_, def, stable_hash(scope_.signature));
    // What won nearby, keyed by the candidate it resolves to here.
    std::map<std::string, std::string> transferred;
    if (opt_.transfer && opt_.strategy == SearchStrategy::Neighbourhood) {
      const std::vector<TransferCandidate> near = transfer_candidates(db_, scope_, kTransferred);
      std::vector<ScheduleParams> first;
      for (const TransferCandidate& t : near) first.push_back(t.knobs);
      const std::vector<ScheduleParams> resolved = search.propose_first(first);
      for (size_t i = 0; i < near.size(); ++i)
        transferred.emplace(candidate_key(resolved[i]), near[i].layer);
      out.transferred = transferred.size();
    }
    size_t proposed = 1;
    const size_t batch = static_cast<size_t>(std::max(4, 2 * opt_.compile_jobs()));
    while (proposed < budget && Clock::now() < deadline) {
      const std::vector<ScheduleParams> cands =
          search.next_batch(std::min(batch, budget - proposed));
      if (cands.empty()) break;
      proposed += cands.size();
      std::vector<ScheduleParams> mine;
      for (const ScheduleParams& c : cands)
        if (in_my_share(candidate_key(c))) mine.push_back(c);
      const std::vector<const Measurement*> results = eval_.evaluate(mine, incumbent, false);
      progress_.done += mine.size();
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
      if (key == eval_.default_key()) break;
      if (const Measurement* c = eval_.known("confirm:" + key)) {
        out.tuned_vs_default = c->vs_default;
        break;
      }
      eval_.confirm(chosen, b->knobs);
      chosen = def;
    }
    out.tuned_knobs = knob_changes(def, chosen);
    if (candidate_key(chosen) == eval_.default_key()) out.tuned_vs_default = 1;
    if (const auto t = transferred.find(candidate_key(chosen)); t != transferred.end())
      out.transferred_from = t->second;
    chosen_ = chosen;
    out.search_s += std::chrono::duration<double>(Clock::now() - started).count();
    out.measured = eval_.measured();
    out.failed = eval_.failed();
    out.reused = eval_.reused();
  }

  // Halide's autoschedulers on the layer, each timed beside the chosen kernel and the default.
  // Ratios go through the default (tuned/default over auto/default, both interleaved), so that a
  // baseline stored by an earlier run still compares with a kernel tuned further since.
  void baselines(LayerOutcome& out) {
    const Clock::time_point started = Clock::now();
    for (const std::string& name : autoscheduler_names()) {
      const Measurement* m = eval_.baseline(name, chosen_);
      if (m && m->status == "ok" && m->vs_default > 0)
        out.baselines.emplace_back(name, out.tuned_vs_default / m->vs_default);
      else
        out.baselines.emplace_back(name, 0);
    }
    out.baselines_s = std::chrono::duration<double>(Clock::now() - started).count();
  }

 private:
  bool in_my_share(const std::string& key) const {
    return opt_.shard.count == 1 || !by_candidate_ || key == eval_.default_key() ||
           stable_hash(key) % static_cast<uint64_t>(opt_.shard.count) ==
               static_cast<uint64_t>(opt_.shard.index);
  }

  const Layer& L_;
  Halide::Target target_;
  const TuneOptions& opt_;
  TuneDb& db_;
  TuneScope scope_;
  bool by_candidate_;  // shards split this signature's candidates (fewer signatures than shards)
  TuneProgress& progress_;
  ScheduleParams default_;  // the default row's knobs, resolved
  CandidateEvaluator eval_;
  ScheduleParams chosen_;  // the search's choice
};

}  // namespace

std::vector<LayerOutcome> run_tune(const TuneOptions& opt) {
  const Model model = load_spec(opt.spec);
  const Halide::Target target = resolve_target(opt.target);
  // The search space and the measuring child are the CPU family's: the GPU family is not tunable.
  if (!capabilities(target).tunable)
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
    if (!L->has_window())
      throw std::invalid_argument("--layers: layer '" + name + "' (" + L->op_name +
                                  ") has no knobs to tune");
    if (L->quantized())
      throw std::invalid_argument("--layers: layer '" + name + "' is " + to_string(L->dtype) +
                                  ": the tuner measures float32 layers only (quantized layers "
                                  "compile with their default schedule)");
    layers.push_back(L);
  }
  // Without --layers: every layer that compiles as a kernel of its own (a fused block's knobs
  // are not searched), with the `--fuse` of padfold compile.
  if (opt.layers.empty()) {
    std::vector<std::string> fused, quantized;
    for (const Block& block : plan_fusion(model, parse_fuse_option(opt.fuse)).blocks) {
      const std::vector<const Layer*> chain = block.chain();
      if (chain.size() == 1 && chain.front()->quantized())
        quantized.push_back(chain.front()->name);
      else if (chain.size() == 1 && chain.front()->has_window())
        layers.push_back(chain.front());
      else if (chain.size() > 1)
        for (const Layer* L : chain) fused.push_back(L->name);
    }
    if (!fused.empty())
      fmt::print(stderr,
                 "tune: {} layer(s) run inside fused blocks (--fuse {}) and are not tuned: {} "
                 "(--fuse none tunes them; compile with the same --fuse)\n",
                 fused.size(), opt.fuse, names_of(fused, 6));
    if (!quantized.empty())
      fmt::print(stderr,
                 "tune: {} quantized layer(s) keep their default schedule (the tuner measures "
                 "float32 layers only): {}\n",
                 quantized.size(), names_of(quantized, 6));
  }
  // One tuning per signature: layers computing the same thing share it.
  std::map<std::string, const Layer*> by_signature;
  std::map<std::string, size_t> sharing;
  for (const Layer* L : layers) {
    const std::string sig = layer_signature(*L);
    by_signature.emplace(sig, L);
    ++sharing[sig];
  }
  std::vector<std::pair<std::string, const Layer*>> sigs(by_signature.begin(), by_signature.end());
  const bool by_candidate = static_cast<int>(sigs.size()) < opt.shard.count;
  std::vector<std::pair<std::string, const Layer*>> mine;
  for (size_t i = 0; i < sigs.size(); ++i)
    if (by_candidate ||
        static_cast<int>(i % static_cast<size_t>(opt.shard.count)) == opt.shard.index)
      mine.push_back(sigs[i]);

  TuneDb db(opt.db);
  const std::string tkey = target_key(target), machine = machine_id();
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
  // A --time beyond ~3 years (or inf) is no limit: as a deadline it would overflow the clock.
  const double time_s = std::min(opt.time_s, 1e8);
  TuneProgress progress;
  progress.total = budget * mine.size();
  if (time_s > 0)
    progress.end = progress.start + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(time_s));
  fmt::print(stderr, "tune: {} layer signature(s) of {} (shard {}/{}{}), target {}, db {}\n",
             mine.size(), sigs.size(), opt.shard.index, opt.shard.count,
             by_candidate && opt.shard.count > 1 ? ", by candidate" : "", tkey, opt.db);
  const Clock::time_point start = Clock::now();
  const auto end =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(time_s));
  std::vector<LayerOutcome> outcomes(mine.size());
  std::vector<std::unique_ptr<LayerTuner>> tuners;
  // Every default first: each signature's share of the model's time is its default's time
  // times the layers sharing it.
  std::vector<double> weight(mine.size(), 0);
  double total = 0;
  for (size_t i = 0; i < mine.size(); ++i) {
    const auto& [sig, L] = mine[i];
    tuners.push_back(std::make_unique<LayerTuner>(
        *L, target, opt, db, TuneScope{sig, tkey, toolchain_key(*L, target), machine}, work.path(),
        runtime, by_candidate && opt.shard.count > 1, progress));
    outcomes[i].layers = sharing[sig];
    if (tuners[i]->measure_default(outcomes[i]))
      weight[i] = outcomes[i].default_s * static_cast<double>(outcomes[i].layers);
    total += weight[i];
  }
  // Then the searches, the largest share first (its winners transfer to the smaller ones); with
  // --time, each gets the time left times its share of the weight left.
  std::vector<size_t> order(mine.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return weight[x] > weight[y]; });
  double left = total;
  for (size_t i : order) {
    if (total > 0) outcomes[i].share = weight[i] / total;
    if (outcomes[i].status != "ok") continue;
    Clock::time_point deadline = Clock::time_point::max();
    if (time_s > 0) {
      const double part = left > 0 ? weight[i] / left : 1;
      const auto allotted = std::chrono::duration_cast<Clock::duration>(
          std::max(end - Clock::now(), Clock::duration::zero()) * part);
      deadline = Clock::now() + allotted;
      outcomes[i].allotted_s = std::chrono::duration<double>(allotted).count();
    }
    left -= weight[i];
    tuners[i]->search(outcomes[i], budget, deadline);
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
