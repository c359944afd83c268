// The tuning database as the source of a bundle's tuned schedules.
#include "tune/db_schedules.h"

#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "compile/lower.h"
#include "tune/db.h"
#include "tune/signature.h"

namespace padfold {

std::function<std::optional<TunedSchedule>(const Layer&, const Halide::Target&)>
tuned_schedules_from(const std::string& db_path, bool any_machine) {
  const auto db = std::make_shared<TuneDb>(db_path, true);
  const std::string machine = machine_id();
  return [db, machine, any_machine](const Layer& L,
                                    const Halide::Target& t) -> std::optional<TunedSchedule> {
    const std::string toolchain = toolchain_key(L, t);
    const auto best = db->best(layer_signature(L), target_key(t), toolchain, machine, any_machine);
    if (!best) return std::nullopt;
    // A damaged record is named with its database, candidate and layer, checked here as the
    // overrides it becomes.
    nlohmann::json knobs;
    try {
      knobs = nlohmann::json::parse(best->knobs);
      requested_schedule(L, t, knobs);
    } catch (const std::exception& e) {
      throw std::runtime_error(db->path() + ": the best record for layer '" + L.name +
                               "' (candidate " + best->candidate +
                               ") has knobs that cannot be used: " + e.what());
    }
    return TunedSchedule{
        knobs,
        {{"db", db->path()},
         {"candidate", best->candidate},
         {"speedup_vs_default", best->vs_default},
         {"machine", best->scope.machine},
         {"toolchain", best->scope.toolchain},
         {"this_machine", best->scope.machine == machine && best->scope.toolchain == toolchain}}};
  };
}

}  // namespace padfold
