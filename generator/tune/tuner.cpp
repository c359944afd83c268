#include "tune/tuner.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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
#include "tune/signature.h"

namespace padfold {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

Shard parse_shard(const std::string& text) {
  Shard s;
  std::string i_text, n_text;
  if (text == "auto") {
    const char* slurm_id = std::getenv("SLURM_ARRAY_TASK_ID");
    const char* slurm_n = std::getenv("SLURM_ARRAY_TASK_COUNT");
    const char* k8s_id = std::getenv("JOB_COMPLETION_INDEX");
    const char* k8s_n = std::getenv("PADFOLD_SHARD_COUNT");
    if (slurm_id && slurm_n) {
      // Arrays may start anywhere (--array=1-8): the index is counted from the lowest task id.
      const char* slurm_min = std::getenv("SLURM_ARRAY_TASK_MIN");
      i_text = slurm_id;
      n_text = slurm_n;
      if (slurm_min && std::strspn(slurm_id, "0123456789") == std::strlen(slurm_id) &&
          std::strspn(slurm_min, "0123456789") == std::strlen(slurm_min) && *slurm_id &&
          *slurm_min && std::strlen(slurm_id) < 7 && std::strlen(slurm_min) < 7)
        i_text = std::to_string(std::stoi(slurm_id) - std::stoi(slurm_min));
    } else if (k8s_id && k8s_n) {
      i_text = k8s_id;
      n_text = k8s_n;
    } else {
      throw std::invalid_argument(
          "--shard auto: expected SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT (a Slurm job "
          "array of consecutive task ids; SLURM_ARRAY_TASK_MIN is subtracted) or "
          "JOB_COMPLETION_INDEX and PADFOLD_SHARD_COUNT (a Kubernetes Indexed Job: set "
          "PADFOLD_SHARD_COUNT to its completions)");
    }
  } else {
    const size_t slash = text.find('/');
    if (slash == std::string::npos)
      throw std::invalid_argument("--shard: '" + text + "' is not i/n or auto");
    i_text = text.substr(0, slash);
    n_text = text.substr(slash + 1);
  }
  const auto number = [&](const std::string& t) {
    if (t.empty() || t.find_first_not_of("0123456789") != std::string::npos || t.size() > 6)
      throw std::invalid_argument("--shard: '" + text + "' (i/n = '" + i_text + "/" + n_text +
                                  "'): expected whole numbers i/n with 0 <= i < n");
    return std::stoi(t);
  };
  s.index = number(i_text);
  s.count = number(n_text);
  if (s.count < 1 || s.index >= s.count)
    throw std::invalid_argument("--shard: '" + text + "' (" + i_text + "/" + n_text +
                                "): expected 0 <= i < n");
  return s;
}

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

// A private working directory for candidate libraries, removed at the end. A run killed with
// SIGKILL cannot remove its own: the next run removes those whose process is gone.
// Whether the run owning work directory `dir` is over: it holds an flock on dir/.lock while it,
// or a worker it forked, runs (released however it ends, even while a killed run is a zombie not
// yet reaped). A directory without the lock file is judged by its pid instead.
bool work_dir_owner_gone(const fs::path& dir, const std::string& pid) {
  const int fd = open((dir / ".lock").c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return kill(static_cast<pid_t>(std::stol(pid)), 0) != 0 && errno == ESRCH;
  const bool gone = flock(fd, LOCK_EX | LOCK_NB) == 0;
  close(fd);
  return gone;
}

// This run's candidate libraries, under /tmp/padfold-tune-<pid>-*; directories of runs that are
// over (killed) are removed first.
struct WorkDir {
  fs::path path;
  int lock_fd = -1;
  WorkDir() {
    const std::string prefix = "padfold-tune-";
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(fs::temp_directory_path(), ec)) {
      const std::string name = e.path().filename().string();
      if (name.rfind(prefix, 0) != 0) continue;
      const std::string pid =
          name.substr(prefix.size(), name.find('-', prefix.size()) - prefix.size());
      if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos || pid.size() > 9)
        continue;
      if (work_dir_owner_gone(e.path(), pid)) fs::remove_all(e.path(), ec);
    }
    std::string t =
        (fs::temp_directory_path() / (prefix + std::to_string(getpid()) + "-XXXXXX")).string();
    if (!mkdtemp(t.data())) throw std::runtime_error("cannot create a directory under /tmp");
    path = t;
    // Locked before it has the name another run looks for.
    const fs::path unnamed = path / ".lock.new";
    lock_fd = open(unnamed.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
    if (lock_fd < 0 || flock(lock_fd, LOCK_EX) != 0 ||
        rename(unnamed.c_str(), (path / ".lock").c_str()) != 0)
      throw std::runtime_error("cannot lock " + (path / ".lock").string() + ": " +
                               std::strerror(errno));
  }
  ~WorkDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
    if (lock_fd >= 0) close(lock_fd);
  }
  WorkDir(const WorkDir&) = delete;
  WorkDir& operator=(const WorkDir&) = delete;
};

struct Progress {
  bool tty = isatty(fileno(stderr)) != 0;
  Clock::time_point start = Clock::now();
  size_t total = 0, done = 0;            // candidates, every layer
  std::optional<Clock::time_point> end;  // with --time

  void show(const std::string& layer, size_t layer_done, size_t layer_total, double best) {
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    double eta = done ? elapsed / static_cast<double>(done) *
                            static_cast<double>(total > done ? total - done : 0)
                      : 0;
    if (end) eta = std::min(eta, std::chrono::duration<double>(*end - Clock::now()).count());
    const std::string text =
        fmt::format("{} {}/{}  best {:.3f}x default  elapsed {:.0f}s  ETA {:.0f}s", layer,
                    layer_done, layer_total, best, elapsed, eta);
    if (tty) {
      const size_t width = 24;
      const size_t filled = total ? std::min(width, done * width / total) : 0;
      fmt::print(stderr, "\r[{}{}] {}\x1b[K", std::string(filled, '#'),
                 std::string(width - filled, '.'), text);
    } else {
      fmt::print(stderr, "tune: {}\n", text);
    }
  }
  void end_line() {
    if (tty) fmt::print(stderr, "\n");
  }
};

class LayerTuner {
 public:
  LayerTuner(const Layer& L, const Halide::Target& target, const TuneOptions& opt, TuneDb& db,
             const TuneScope& scope, const fs::path& work, const std::string& runtime_archive,
             bool by_candidate, Progress& progress)
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
  Progress& progress_;
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
  const std::string runtime = (work.path / "halide_runtime.a").string();
  {
    WorkerOptions w;
    w.timeout_s = 600;
    const auto r = run_workers(
        {{"the Halide runtime for " + tkey, [&] { build_tune_runtime(target, runtime); }}}, w);
    if (!r[0].ok) throw std::runtime_error("building the Halide runtime: " + r[0].error);
  }
  Progress progress;
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
        *L, target, opt, db, TuneScope{sig, tkey, toolchain, machine}, work.path, runtime,
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

std::string outcome_table(const std::vector<LayerOutcome>& outcomes) {
  std::string head = fmt::format("{:<24} {:>11} {:>9}", "layer", "default ms", "tuned");
  for (const std::string& a : autoscheduler_names()) head += fmt::format(" {:>14}", "vs " + a);
  std::string out = head + "   measured/failed/reused  tuned knobs\n";
  for (const LayerOutcome& o : outcomes) {
    if (o.status != "ok") {
      out += fmt::format("{:<24} {}\n", o.layer, o.status);
      continue;
    }
    out +=
        fmt::format("{:<24} {:>11.4f} {:>8.3f}x", o.layer, o.default_s * 1e3, o.tuned_vs_default);
    for (const std::string& a : autoscheduler_names()) {
      double v = -1;
      for (const auto& [name, ratio] : o.baselines)
        if (name == a) v = ratio;
      out +=
          v > 0 ? fmt::format(" {:>13.3f}x", v) : fmt::format(" {:>14}", v == 0 ? "failed" : "-");
    }
    out += fmt::format("   {}/{}/{}  {}\n", o.measured, o.failed, o.reused, o.tuned_knobs);
  }
  double search = 0, baselines = 0;
  for (const LayerOutcome& o : outcomes) {
    search += o.search_s;
    baselines += o.baselines_s;
  }
  return out + fmt::format(
                   "tuned: speedup over the default knobs; vs X: tuned speedup over autoscheduler "
                   "X (all measured interleaved, 1 thread)\nwall time: search {:.0f}s, "
                   "baselines {:.0f}s\n",
                   search, baselines);
}

json to_json(const std::vector<LayerOutcome>& outcomes) {
  json out = json::array();
  for (const LayerOutcome& o : outcomes) {
    json baselines = json::object();
    for (const auto& [name, ratio] : o.baselines) baselines[name] = ratio;
    out.push_back({{"layer", o.layer},
                   {"signature", o.signature},
                   {"status", o.status},
                   {"measured", o.measured},
                   {"failed", o.failed},
                   {"reused", o.reused},
                   {"default_s", o.default_s},
                   {"tuned_vs_default", o.tuned_vs_default},
                   {"tuned_knobs", o.tuned_knobs},
                   {"tuned_vs_autoschedulers", baselines},
                   {"search_s", o.search_s},
                   {"baselines_s", o.baselines_s}});
  }
  return out;
}

}  // namespace padfold
