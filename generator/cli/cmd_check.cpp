// padfold check: validates a spec file and shows every layer's resolved padding and shapes.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "frontend/spec.h"

namespace {

using json = nlohmann::ordered_json;  // keeps fields in the documented order

struct CheckOptions {
  std::string spec;
  bool json = false;
};

std::string axis_name(size_t i, size_t dims) {
  return std::string(1, "DHW"[3 - dims + i]);
}

std::string padding_text(const padfold::Layer& l) {
  const std::string mode = padfold::to_string(l.padding.mode);
  return l.padding.written == mode ? mode : l.padding.written + " -> " + mode;
}

std::string border_text(const padfold::Layer& l) {
  if (l.border == padfold::Border::Constant) return fmt::format("constant({})", l.border_value);
  return padfold::to_string(l.border);
}

json layer_json(const padfold::Layer& l) {
  std::vector<int64_t> before, after;
  for (const auto& a : l.pads.axes) {
    before.push_back(a.before);
    after.push_back(a.after);
  }
  json j = {{"name", l.name},
            {"op", l.op_name},
            {"input", l.input_from.empty() ? json() : json(l.input_from)},
            {"layout", l.layout.name()},
            {"input_shape", l.input_shape()},
            {"output_shape", l.output_shape_full()},
            {"kernel", l.kernel},
            {"stride", l.stride},
            {"dilation", l.dilation},
            {"groups", l.groups},
            {"padding", l.padding.written},
            {"padding_mode", padfold::to_string(l.padding.mode)},
            {"pads_before", before},
            {"pads_after", after},
            {"asymmetric", l.pads.asymmetric},
            {"input_dependent", l.pads.input_dependent},
            {"border", padfold::to_string(l.border)},
            {"bias", l.bias},
            {"activation", padfold::to_string(l.activation)},
            {"weight_layout", l.has_weights() ? json(l.weight_layout.order) : json()},
            {"weight_shape", l.weight_shape()},
            {"flops", l.flops()}};
  if (l.border == padfold::Border::Constant) j["border_value"] = l.border_value;
  if (l.activation == padfold::Activation::LeakyRelu) j["activation_alpha"] = l.activation_alpha;
  return j;
}

void run_check(const CheckOptions& o) {
  const padfold::Model m = padfold::load_spec(o.spec);
  if (o.json) {
    json j = {{"model", m.name}, {"file", m.file}, {"layers", json::array()}};
    for (const auto& l : m.layers) j["layers"].push_back(layer_json(l));
    fmt::print("{}\n", j.dump(2));
    return;
  }
  std::vector<std::vector<std::string>> rows = {
      {"layer", "op", "input", "pads (before,after)", "output", "asym", "border", "padding"}};
  double flops = 0;
  for (const auto& l : m.layers) {
    std::vector<std::string> pads;
    for (size_t i = 0; i < l.pads.axes.size(); ++i)
      pads.push_back(fmt::format("{}({},{})", axis_name(i, l.pads.axes.size()),
                                 l.pads.axes[i].before, l.pads.axes[i].after));
    rows.push_back({l.name, l.op_name,
                    fmt::format("{} {}", l.layout.name(), fmt::join(l.input_shape(), "x")),
                    fmt::format("{}", fmt::join(pads, " ")),
                    fmt::format("{}", fmt::join(l.output_shape_full(), "x")),
                    l.pads.asymmetric ? "yes" : "no", border_text(l), padding_text(l)});
    flops += l.flops();
  }
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& row : rows)
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c)
      line += fmt::format("{:<{}}", row[c], c + 1 < row.size() ? width[c] + 2 : 0);
    fmt::print("{}\n", line);
  }
  fmt::print("\n{}: model '{}', {} layer(s), {:.3f} MFLOP, OK\n", m.file, m.name, m.layers.size(),
             flops / 1e6);
}

}  // namespace

void add_check_command(CLI::App& app) {
  auto o = std::make_shared<CheckOptions>();
  CLI::App* cmd = app.add_subcommand("check",
                                     "Validate a spec file and show each layer's pads and shapes.\n"
                                     "Example: padfold check examples/tiny.json");
  cmd->add_option("spec", o->spec, "The spec file (JSON, see docs/spec-and-cli.md)")->required();
  cmd->add_flag("--json", o->json, "Print machine-readable JSON (see docs/spec-and-cli.md)");
  cmd->callback([o] { run_check(*o); });
}
