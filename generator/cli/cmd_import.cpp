// padfold import: an ONNX model -> a padfold spec, its weights and the list of nodes left to the
// caller (api/import_model, generator/frontend/onnx); --emit-onnx also writes the model with every
// auto_pad rewritten to explicit pads.
#include <fmt/format.h>

#include <memory>

#include "api/import_model.h"
#include "commands.h"

namespace {

namespace oi = padfold::onnx_import;

void run_import(const padfold::ImportRequest& a) {
  const oi::ImportOutput out = padfold::import_model(a);
  const oi::ImportResult& result = out.result;
  fmt::print("{}", oi::summary_text(result));
  for (const std::string& w : result.warnings) fmt::print(stderr, "warning: {}\n", w);
  fmt::print("wrote {}: {}.json, import-report.json, {} weight file(s) in weights/\n", a.out,
             result.model_name, result.weights.size());
  if (out.normalized) {
    for (const std::string& c : out.normalized->changes) fmt::print("normalized {}\n", c);
    for (const std::string& w : out.normalized->warnings) fmt::print(stderr, "warning: {}\n", w);
    fmt::print("wrote {} ({} auto_pad rewrite(s))\n", a.emit_onnx, out.normalized->changes.size());
  }
}

}  // namespace

void add_import_command(CLI::App& app) {
  auto args = std::make_shared<padfold::ImportRequest>();
  CLI::App* cmd = app.add_subcommand(
      "import",
      "Turn an ONNX model into a padfold spec, its weights and the list of nodes left to the "
      "caller.\nExample: padfold import model.onnx -o out/model --input x=1x3x224x224");
  cmd->add_option("model", args->model, "the .onnx file")->required();
  cmd->add_option("-o,--out", args->out,
                  "directory to write: <model>.json, weights/, import-report.json")
      ->required();
  add_input_sizes_option(cmd, args->inputs);
  cmd->add_option("--emit-onnx", args->emit_onnx,
                  "also write the model with every auto_pad rewritten to explicit pads");
  cmd->add_option("--name", args->name, "the spec's model name (default: from the file name)");
  cmd->add_option("--layout", args->layout,
                  "the layout the layers compute in: auto (channels last, where padfold's CPU "
                  "kernels are fastest), nchw or nhwc")
      ->capture_default_str();
  cmd->add_option("--io-layout", args->io_layout,
                  "the layout of the model's inputs and outputs: auto (the model file's: "
                  "channels first for a torch export, channels last behind tf2onnx's layout "
                  "Transposes), nchw or nhwc; where it differs from --layout a transpose layer "
                  "converts (the arrays you pass and get keep this layout)")
      ->capture_default_str();
  cmd->callback([args] { run_import(*args); });
}
