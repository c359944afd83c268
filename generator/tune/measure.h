// Measuring candidates: a candidate library dlopened and timed against the incumbent and the
// default, interleaved round by round on one core and one Halide thread (CPU time of the thread),
// after an element-wise check against the naive reference.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "frontend/spec.h"
#include "reference/layer_reference.h"

namespace padfold {

// The layer's random inputs and the reference output, computed once per layer.
struct TuneData {
  padfold::ref::LayerData data;
  ref::Tensor expected;
};
TuneData make_tune_data(const Layer& layer);

struct MeasureOptions {
  double min_time_s = 0.2;  // timed per variant (after warm-up)
  int min_rounds = 7;
  int core = -1;  // the core to pin to; -1: the last online core
};

struct MeasureResult {
  std::string status = "failed";  // ok, wrong, failed
  std::string reason;
  double median_s = 0;      // the candidate's per-call median
  double vs_default = 1;    // speedup over the default (median of per-round ratios)
  double vs_incumbent = 1;  // speedup over the incumbent
  double noise = 0;         // relative half-width of the ratio's median (notch: 1.58 IQR/sqrt(n))
  std::vector<double> samples;
};

// A variant to time: a candidate library and its function.
struct Variant {
  std::string so_path, function;
};

// Checks `candidate` against the reference, then times it interleaved with `incumbent` and
// `default_variant` (either may be the candidate itself). Runs in the measuring child process;
// throws on a failure to load.
MeasureResult measure_candidate(const Layer& layer, const TuneData& data, const Variant& candidate,
                                const Variant& incumbent, const Variant& default_variant,
                                const MeasureOptions& options);

nlohmann::json to_json(const MeasureResult& r);
MeasureResult measure_result_from_json(const nlohmann::json& j);

}  // namespace padfold
