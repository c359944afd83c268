// padfold bench: a bundle's whole-model latency and per-kernel medians, GFLOP/s and share of the
// measured FMA peak, on this machine (measure/bundle_bench).
#include <fmt/format.h>

#include <memory>

#include "commands.h"
#include "measure/bundle_bench.h"

namespace {

struct BenchArgs {
  std::string bundle, layer, threads = "1";
  bool model = false, json = false;
  padfold::measure::BenchOptions options;
};

std::vector<int> thread_list(const std::string& text) {
  std::vector<int> v;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, end - start);
    size_t used = 0;
    int n = 0;
    try {
      n = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || n < 1 || n > 1024)
      throw std::runtime_error("--threads '" + text +
                               "': expected thread counts from 1 to 1024 separated by commas, "
                               "e.g. 1,2");
    v.push_back(n);
    start = end + 1;
  }
  return v;
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Time a compiled bundle on this machine: the whole model and each kernel (medians after "
      "warm-up, GFLOP/s, share of the measured FMA peak).\nExample: padfold bench out/model "
      "--threads 1,2");
  cmd->add_option("bundle", a->bundle, "bundle directory (padfold compile)")->required();
  auto* layer = cmd->add_option("--layer", a->layer, "time only this kernel (a layer or block)");
  auto* model = cmd->add_flag("--model", a->model, "the whole model and every kernel (the default)")
                    ->excludes(layer);
  cmd->add_flag("--model-only", a->options.model_only,
                "the whole model alone, no kernel on its own (quicker, for comparing bundles)")
      ->excludes(layer)
      ->excludes(model);
  cmd->add_option("--threads", a->threads, "thread counts, e.g. 1,2")->capture_default_str();
  cmd->add_option("--pool", a->options.pool,
                  "the thread pool of the kernels' parallel loops: padfold's (workers spin "
                  "through a model run, park after it), Halide's (workers sleep between kernels), "
                  "or both (the model timed on each, side by side)")
      ->check(CLI::IsMember({"padfold", "halide", "both"}))
      ->capture_default_str();
  cmd->add_option("--spin-us", a->options.spin_us,
                  "padfold's pool: microseconds an idle worker spins before it sleeps (0: never "
                  "spins; default 1000)")
      ->check(CLI::Range(0, 1000000));
  cmd->add_option("--min-time", a->options.min_time_s,
                  "seconds timed per kernel and thread count, at most 60")
      ->check(min_time_seconds())
      ->capture_default_str();
  cmd->add_option("--retries", a->options.limits.retries,
                  "times to time again, 10 s apart, while other processes load the machine")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_flag("--json", a->json, "print JSON instead of the table");
  cmd->callback([a] {
    a->options.layer = a->layer;
    if (a->options.pool == "halide" && a->options.spin_us >= 0)
      throw std::runtime_error("--spin-us sets padfold's pool, not Halide's (--pool halide)");
    a->options.threads = thread_list(a->threads);
    const padfold::measure::BenchResult r = padfold::measure::bench_bundle(a->bundle, a->options);
    if (a->json)
      fmt::print("{}\n", padfold::measure::to_json(r).dump(2));
    else
      fmt::print("{}", padfold::measure::to_text(r));
  });
}
