// padfold bench: a compiled bundle timed as a user's run would be: how long it takes to open, the
// whole model (pf_model_run,
// in the model's arena and, beside it, allocating its intermediates per run) and each kernel
// (pf_run) on random data, at each thread count, after warm-up, in interleaved blocks with medians,
// timed again while the machine was not quiet (measure/timing.h); each kernel's GFLOP/s (the
// manifest's flops) and its share of the measured FMA peak, its bytes moved per second and their
// share of the measured memory bandwidth, and which of the two bounds it (the roofline).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "measure/fma_peak.h"
#include "measure/memory_bandwidth.h"
#include "measure/timing.h"

namespace padfold::measure {

struct BenchOptions {
  std::string layer;  // one kernel (its layer or block name); empty: the model and every kernel
  bool model_only = false;      // the whole model alone, no kernel on its own
  std::vector<int> threads{1};  // timed in increasing order (Halide's pool does not shrink)
  // The kernels' parallel loops: on padfold's pool (pf_pool), Halide's, or both ("both": the
  // model is also timed on Halide's pool, in the same interleaved rounds).
  std::string pool = "padfold";
  int spin_us = -1;         // padfold's pool: the idle workers' spin window; < 0 the default
  double min_time_s = 0.3;  // timed per method and thread count
  QuietLimits limits;
};

struct KernelTiming {
  std::string layer, op;
  std::optional<double> flops;  // per call, from the manifest; none where it is not a count
  // Per call: every buffer read or written once (inputs, weights, bias, output), the least any
  // schedule moves between the kernel and memory.
  double bytes = 0;
  double median_s = 0;  // per call
};

struct ThreadRun {
  int threads = 1;
  std::optional<double> model_median_s;  // when the bundle's graph runs whole
  // The same with pf_model_options.per_run_allocation: what allocating per run costs.
  std::optional<double> model_per_run_median_s;
  std::optional<double> model_halide_pool_median_s;  // pool "both": the model on Halide's pool
  std::vector<KernelTiming> kernels;
  Quietness quiet;
  double bandwidth_gbps = 0;  // memory_bandwidth_gbps(threads), measured before the kernels
};

// Opening the bundle and its model: what a process pays before its first run.
struct OpenTiming {
  double bundle_s = 0, model_s = 0;  // this process's first pf_bundle_open and pf_model_open
  // pf_bundle_open + pf_model_open again (the library already loaded), median of a few.
  double reopen_median_s = 0;
};

struct BenchResult {
  std::string bundle, target, cpu, host;
  std::optional<OpenTiming> open;  // when the model runs whole
  std::string pool;                // BenchOptions::pool
  FmaPeak peak;
  std::string model_note;  // why the whole model was not timed, if it was not
  // The model's outputs that ops left to the caller still read (the manifest's graph.read_by):
  // "(model)" then times padfold's part of it, not the whole model.
  std::map<std::string, std::string> model_read_by;
  std::vector<ThreadRun> runs;
};

// Throws std::runtime_error naming the bundle, layer or buffer for what cannot be opened or run.
BenchResult bench_bundle(const std::string& dir, const BenchOptions& options);

nlohmann::ordered_json to_json(const BenchResult& r);
std::string to_text(const BenchResult& r);

}  // namespace padfold::measure
