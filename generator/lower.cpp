#include "lower.h"

namespace padfold {

ScheduleParams requested_schedule(const Layer& layer, const Halide::Target& target,
                                  const nlohmann::json& overrides) {
  ScheduleParams params = default_schedule(layer, target);
  update_from_json(params, overrides);
  return params;
}

Kernel lower(const Layer& layer, const Halide::Target& target, const ScheduleParams& schedule) {
  Kernel k{build_algorithm(layer), schedule, {}, {}};
  apply_schedule(k.algorithm, schedule, target);
  k.pipeline = Halide::Pipeline(k.algorithm.output);
  k.arguments = k.algorithm.arguments();
  return k;
}

}  // namespace padfold
