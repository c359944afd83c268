// padfold check: validates a spec file and shows every layer's resolved padding and shapes.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "compile/fusion.h"
#include "emit/weights.h"
#include "frontend/spec.h"

namespace {

using json = nlohmann::ordered_json;  // keeps fields in the documented order

struct CheckOptions {
  std::string spec;
  bool json = false;
};

std::string padding_text(const padfold::Layer& l) {
  if (l.is_join()) return "-";
  const std::string mode = padfold::to_string(l.padding.mode);
  return l.padding.written == mode ? mode : l.padding.written + " -> " + mode;
}

std::string border_text(const padfold::Layer& l) {
  if (l.is_join()) return "-";
  if (l.border == padfold::Border::Constant) return fmt::format("constant({})", l.border_value);
  return padfold::to_string(l.border);
}

bool implicit_input(const padfold::Layer& l) {
  return l.inputs.size() == 1 && l.inputs[0] == padfold::implicit_input_name(l.name);
}

json layer_json(const padfold::Layer& l) {
  std::vector<int64_t> before, after;
  for (const auto& a : l.pads.axes) {
    before.push_back(a.before);
    after.push_back(a.after);
  }
  json j = {{"name", l.name},
            {"op", l.op_name},
            {"input", implicit_input(l) ? json() : json(l.inputs.front())},
            {"inputs", l.inputs},
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
  if (l.op == padfold::Op::Transpose || l.relayout_input) j["input_layout"] = l.input_layout.name();
  if (l.op == padfold::Op::Transpose) j["perm"] = l.perm;
  if (l.border == padfold::Border::Constant) j["border_value"] = l.border_value;
  const int params = padfold::activation_def(l.activation).params;
  if (params >= 1) j["activation_alpha"] = l.activation_alpha;
  if (params >= 2) j["activation_beta"] = l.activation_beta;
  if (!l.weights_file.empty()) j["weight_files"] = {{"weights", l.weights_file}};
  if (!l.bias_file.empty()) j["weight_files"]["bias"] = l.bias_file;
  return j;
}

json input_json(const padfold::ModelInput& in) {
  return {{"name", in.name},
          {"layout", in.layout.name()},
          {"dtype", padfold::to_string(in.dtype)},
          {"shape", in.shape},
          {"produced_by", in.produced_by.empty() ? json() : json(in.produced_by)}};
}

// "yes", or why `pf_model_run` cannot run the model whole.
std::string whole_model_run(const padfold::Model& m) {
  for (const auto& in : m.inputs)
    if (!in.produced_by.empty())
      return fmt::format("no: input '{}' comes from {}", in.name, in.produced_by);
  for (const auto& l : m.layers)
    if (l.has_weights() && l.weights_file.empty())
      return fmt::format("no: layer '{}' names no weight_files", l.name);
  for (const auto& l : m.layers)
    if (!l.read_by.empty())
      return fmt::format("only in part (--partial): output '{}' is read by {}", l.name, l.read_by);
  return "yes";
}

void run_check(const CheckOptions& o) {
  const padfold::Model m = padfold::load_spec(o.spec);
  padfold::check_weight_files(m);
  const padfold::FusionPlan plan = padfold::plan_fusion(m, padfold::FuseOptions{});
  if (o.json) {
    json j = {{"model", m.name},         {"file", m.file},
              {"inputs", json::array()}, {"layers", json::array()},
              {"outputs", m.outputs},    {"whole_model_run", whole_model_run(m)}};
    for (const auto& in : m.inputs) j["inputs"].push_back(input_json(in));
    for (const auto& l : m.layers) j["layers"].push_back(layer_json(l));
    json blocks = json::array();
    for (const padfold::Block& b : plan.blocks)
      if (b.fused()) {
        std::vector<std::string> names;
        for (const padfold::Layer* L : b.layers) names.push_back(L->name);
        blocks.push_back({{"layers", names}, {"kind", b.kind()}, {"reason", b.reason}});
      }
    j["fusion"] = {{"blocks", blocks}, {"not_fused", plan.notes}};
    fmt::print("{}\n", j.dump(2));
    return;
  }
  std::vector<std::vector<std::string>> rows = {{"layer", "op", "reads", "input",
                                                 "pads (before,after)", "output", "asym", "border",
                                                 "padding"}};
  double flops = 0;
  for (const auto& l : m.layers) {
    std::vector<std::string> pads;
    for (size_t i = 0; i < l.pads.axes.size(); ++i)
      pads.push_back(fmt::format("{}({},{})",
                                 padfold::spatial_letters(static_cast<int>(l.pads.axes.size()))[i],
                                 l.pads.axes[i].before, l.pads.axes[i].after));
    // Where the layout changes (a transpose, or a conv or pool that reads its input in another
    // layout): the input's layout, and the output's.
    const bool transpose = l.op == padfold::Op::Transpose || l.relayout_input;
    const bool window = l.has_window();
    rows.push_back(
        {l.name, l.op_name, fmt::format("{}", fmt::join(l.inputs, ",")),
         fmt::format("{} {}", l.read_layout().name(), fmt::join(l.input_shape(), "x")),
         window ? fmt::format("{}", fmt::join(pads, " ")) : "-",
         transpose ? fmt::format("{} {}", l.layout.name(), fmt::join(l.output_shape_full(), "x"))
                   : fmt::format("{}", fmt::join(l.output_shape_full(), "x")),
         l.pads.asymmetric ? "yes" : "no", window ? border_text(l) : "-",
         window ? padding_text(l) : "-"});
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
  fmt::print("\n");
  for (const auto& in : m.inputs)
    fmt::print("input {}: {} {}{}\n", in.name, in.layout.name(), fmt::join(in.shape, "x"),
               in.produced_by.empty() ? "" : " (from " + in.produced_by + ")");
  fmt::print("outputs: {}\nwhole-model run: {}\n", fmt::join(m.outputs, ", "), whole_model_run(m));
  size_t kernels = 0;
  for (const padfold::Block& b : plan.blocks) {
    ++kernels;
    if (b.fused()) fmt::print("fused (--fuse auto): {}: {}\n", b.names(), b.reason);
  }
  for (const std::string& note : plan.notes) fmt::print("{}\n", note);
  if (kernels != m.layers.size())
    fmt::print("{} kernels for {} layers with --fuse auto\n", kernels, m.layers.size());
  fmt::print("{}: model '{}', {} layer(s), {:.3f} MFLOP, OK\n", m.file, m.name, m.layers.size(),
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
