// padfold port: a whole model's padding explained for another framework, and the PyTorch module
// computing exactly what it computes (api/port).
#include <fmt/format.h>

#include <memory>

#include "api/port.h"
#include "commands.h"

void add_port_command(CLI::App& app) {
  auto r = std::make_shared<padfold::PortRequest>();
  CLI::App* cmd = app.add_subcommand(
      "port",
      "Explain every conv and pool's padding of a model for another framework, and write the "
      "PyTorch module that computes what the model computes.\n"
      "Example: padfold port model.onnx --to pytorch --emit out/model.py");
  cmd->add_option("model", r->model, "an ONNX file or a padfold spec (.json)")->required();
  cmd->add_option("--to", r->to, "the target framework: pytorch, keras or onnx")
      ->capture_default_str();
  add_input_sizes_option(cmd, r->inputs);
  cmd->add_flag("--json", r->json, "Print the report as JSON (see docs/port.md)");
  cmd->add_option(
      "--emit", r->emit,
      "write the PyTorch nn.Module (--to keras: the Keras model's builder) to this .py "
      "file (from an ONNX model, the imported weights go beside it in <stem>_padfold/)");
  cmd->callback([r] {
    const padfold::PortOutput out = padfold::port_model(*r);
    fmt::print("{}", out.report);
    for (const std::string& path : out.wrote) fmt::print(stderr, "wrote {}\n", path);
  });
}
