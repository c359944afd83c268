#include <fmt/format.h>

#include <filesystem>

#include "base/atomic_file.h"
#include "commands.h"
#include "tune/report.h"
#include "tune/tuner.h"

namespace {

struct TuneArgs {
  padfold::TuneOptions opt;
  std::string time, shard = "0/1", strategy = "neighbourhood", report;
  bool no_baselines = false, no_transfer = false, no_overlap = false;
};

// "90", "90s", "10m", "1.5h" -> seconds.
double parse_duration(const std::string& text) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const std::string unit = text.substr(used);
  const double scale = unit.empty() || unit == "s" ? 1 : unit == "m" ? 60 : unit == "h" ? 3600 : 0;
  if (used == 0 || scale == 0 || !(value > 0))
    throw std::invalid_argument("--time: '" + text +
                                "' is not a duration; expected a positive number with s, m or h "
                                "(e.g. 90s, 10m, 1h)");
  return value * scale;
}

// Found before the run rather than after it: the report's directory exists and the path is no
// directory.
void check_report_path(const std::string& report) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(report, ec))
    throw std::runtime_error("--report " + report + ": is a directory; expected a file to write");
  const fs::path dir = fs::path(report).parent_path();
  if (!dir.empty() && !fs::is_directory(dir, ec))
    throw std::runtime_error("--report " + report + ": the directory " + dir.string() +
                             " does not exist");
}

void run(TuneArgs& a) {
  if (!a.time.empty()) a.opt.time_s = parse_duration(a.time);
  a.opt.shard = padfold::parse_shard(a.shard);
  a.opt.strategy = padfold::parse_search_strategy(a.strategy);
  a.opt.baselines = !a.no_baselines;
  a.opt.transfer = !a.no_transfer;
  a.opt.overlap = !a.no_overlap;
  if (!a.report.empty()) check_report_path(a.report);
  const auto outcomes = padfold::run_tune(a.opt);
  fmt::print("{}", padfold::outcome_table(outcomes));
  if (!a.report.empty())
    padfold::write_file_replacing(a.report, padfold::to_json(outcomes).dump(2) + "\n");
  size_t bad = 0;
  for (const auto& o : outcomes) bad += o.status != "ok";
  if (bad) throw std::runtime_error(std::to_string(bad) + " layer(s) could not be tuned (above)");
}

}  // namespace

void add_tune_command(CLI::App& app) {
  auto args = std::make_shared<TuneArgs>();
  padfold::TuneOptions& o = args->opt;
  CLI::App* cmd = app.add_subcommand(
      "tune",
      "Autotune the schedule knobs of a spec's layers by measurement, into a SQLite database "
      "(resumable: rerun to continue; shardable: --shard i/n, then padfold db merge). A whole "
      "model's --time is split by each layer signature's share of the model's time.\n"
      "Example: padfold tune examples/tiny.json --budget 20 --db tune.sqlite");
  cmd->add_option("spec", o.spec, "layer spec (JSON)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--target", o.target, "the target to tune for (it must run here)")
      ->capture_default_str();
  cmd->add_option("--layers", o.layers, "only these layers: a,b (default: every layer)")
      ->delimiter(',');
  cmd->add_option("--budget", o.budget,
                  "candidates per layer signature, the default included (default: 60, or "
                  "unlimited with --time)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--time", args->time, "wall-time limit for the run: 90s, 10m, 1h (inf: none)");
  cmd->add_option("--db", o.db, "the tuning database (SQLite)")->capture_default_str();
  cmd->add_option("--shard", args->shard,
                  "this process's share i/n (0 <= i < n) of the work, or auto (Slurm array / "
                  "Kubernetes Indexed Job; see docs/tuning-at-scale.md)")
      ->capture_default_str();
  cmd->add_option("-j,--jobs", o.jobs, "candidates compiled at once (default: one per core)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--strategy", args->strategy, "neighbourhood (from the default row) or random")
      ->capture_default_str();
  cmd->add_option("--report", args->report, "also write the outcomes as JSON to this file");
  cmd->add_flag("--no-baselines", args->no_baselines, "do not time Halide's autoschedulers");
  cmd->add_flag("--no-transfer", args->no_transfer,
                "start every search from the default alone, not also from what won on the "
                "nearest signatures already tuned in the database");
  cmd->add_flag("--no-overlap", args->no_overlap,
                "compile a whole batch of candidates before measuring any (by default each is "
                "measured on one core as its compile ends, while the other cores compile the "
                "next)");
  cmd->add_option("--fuse", o.fuse,
                  "as padfold compile --fuse (auto, none, or blocks a+b,c+d): without --layers, "
                  "the layers it puts inside fused blocks are not tuned")
      ->capture_default_str();
  cmd->add_option("--min-time", o.measure.min_time_s,
                  "seconds timed per variant and candidate, at most 60 (timing also stops after "
                  "200 rounds of about 2 ms)")
      ->check(min_time_seconds())
      ->capture_default_str();
  cmd->add_option("--core", o.measure.core, "the core measurements run on (default: the last)");
  cmd->add_option("--compile-timeout", o.compile_timeout_s,
                  "seconds a candidate may take to compile before it is failed")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->callback([args] { run(*args); });
}
