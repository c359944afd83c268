#include "api/compile_spec.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "compile/fusion.h"
#include "compile/target.h"
#include "emit/bundle_dir.h"
#include "emit/weights.h"
#include "frontend/layout_cost.h"
#include "frontend/spec.h"
#include "tune/db_schedules.h"

namespace padfold {
namespace {

nlohmann::json read_schedules(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot read schedule file " + path);
  try {
    return nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(path + ": not valid JSON: " + e.what());
  }
}

}  // namespace

// One value, split here rather than by CLI11, which took the next argument (`--target ,, -j1`:
// target '-j1') when the value split into nothing.
std::vector<std::string> target_list(const std::string& text) {
  std::vector<std::string> targets;
  for (size_t start = 0;;) {
    const size_t end = text.find(',', start);
    targets.push_back(text.substr(start, end == std::string::npos ? end : end - start));
    if (targets.back().empty())
      throw std::runtime_error("--target '" + text +
                               "': an empty target name; expected target names separated by "
                               "single commas, e.g. host-cuda,host");
    if (end == std::string::npos) return targets;
    start = end + 1;
  }
}

CompiledBundle compile_spec(const CompileRequest& a, const KernelProgress& on_kernel) {
  if (a.out.empty()) throw std::runtime_error("no output directory given");
  CompiledBundle result;
  result.model = std::make_unique<Model>(a.spec_path.empty() ? parse_spec(a.spec_text, a.spec_label)
                                                             : load_spec(a.spec_path));
  const Model& model = *result.model;
  // The old bundle is removed after the inputs are read: none of them may live inside it.
  std::vector<std::pair<std::string, std::string>> inputs{
      {"spec", a.spec_path}, {"--schedules", a.schedules}, {"--db", a.db}};
  for (const WeightFile& w : weight_files(model))
    inputs.push_back({"weight file of layer '" + w.layer->name + "' (" + w.buffer + ")", w.path});
  refuse_inputs_inside(a.out, inputs);
  CompileOptions opt;
  opt.out_dir = a.out;
  opt.targets = a.targets;
  opt.emit_stmt = a.emit_stmt;
  opt.emit_device_code = a.emit_device_code;
  opt.embed_weights = a.embed_weights;
  opt.prepare_entry = a.prepare_entry;
  opt.jobs = a.jobs;
  opt.kernel_timeout_s = a.kernel_timeout_s;
  opt.fuse = parse_fuse_option(a.fuse);
  if (!a.db.empty()) opt.tuned = tuned_schedules_from(a.db, a.db_any_machine);
  if (!a.schedules.empty()) opt.schedule_overrides = read_schedules(a.schedules);
  const auto no_bundle = [&](const std::exception& e) {
    return std::runtime_error(std::string(e.what()) + "\nno bundle written; " + a.out +
                              " is as it was");
  };
  try {
    result.plan = plan_bundle(model, opt);
  } catch (const ScheduleOverrideError& e) {
    throw std::runtime_error(a.schedules + ": " + e.what() + " (see padfold knobs)");
  } catch (const FuseListError&) {
    throw;
  } catch (const std::exception& e) {
    throw no_bundle(e);
  }
  const bool cpu = std::any_of(a.targets.begin(), a.targets.end(), [](const std::string& t) {
    return device_api_name(resolve_target(t)).empty();
  });
  if (auto w = channels_first_cost_warning(model); w && cpu) result.warnings.push_back(*w);
  try {
    result.reports = compile_bundle(result.plan, [&](const KernelReport& r) {
      if (on_kernel) on_kernel(result.plan, r);
    });
  } catch (const std::exception& e) {
    throw no_bundle(e);
  }
  return result;
}

}  // namespace padfold
