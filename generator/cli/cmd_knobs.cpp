#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "schedules/knobs.h"

namespace {

struct KnobsArgs {
  bool markdown = false;
};

void run_knobs(const KnobsArgs& a) {
  if (a.markdown) {
    fmt::print("{}", padfold::knobs_markdown());
    return;
  }
  nlohmann::json out = nlohmann::json::array();
  for (const padfold::Knob& k : padfold::knobs()) {
    const bool b = k.type == padfold::KnobType::Bool;
    nlohmann::json j = {{"name", k.name},
                        {"type", b ? "bool" : "int"},
                        {"scope", k.scope},
                        {"doc", k.doc},
                        {"search_values", k.search_values()}};
    if (b) {
      j["default"] = k.default_value != 0;
    } else {
      j["default"] = k.default_value;
      j["min"] = k.min;
      j["max"] = k.max;
      j["scale"] = k.scale == padfold::KnobScale::Pow2 ? "pow2" : "linear";
    }
    out.push_back(j);
  }
  fmt::print("{}\n", out.dump(2));
}

}  // namespace

void add_knobs_command(CLI::App& app) {
  auto args = std::make_shared<KnobsArgs>();
  CLI::App* cmd = app.add_subcommand(
      "knobs",
      "List every schedule knob (name, type, range, default, doc) as JSON, or as the Markdown "
      "table of docs/schedule-knobs.md.\nExample: padfold knobs --markdown");
  cmd->add_flag("--markdown", args->markdown, "print the Markdown table instead of JSON");
  cmd->callback([args] { run_knobs(*args); });
}
