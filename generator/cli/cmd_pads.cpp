// padfold pads: resolves one padding request and shows how other frameworks would pad the same
// layer (api/pads_report).
#include <fmt/format.h>

#include <memory>

#include "api/pads_report.h"
#include "commands.h"
#include "padding/padding.h"

void add_pads_command(CLI::App& app) {
  auto o = std::make_shared<padfold::PadsRequest>();
  CLI::App* cmd = app.add_subcommand(
      "pads",
      "Resolve a padding convention into per-side pads and output sizes.\n"
      "Example: padfold pads --input 7x7 --kernel 4x4 --stride 2 --padding same --compare");
  cmd->add_option("--input", o->input, "Spatial input size, e.g. 7x7 (sets the number of dims)")
      ->required();
  cmd->add_option("--kernel", o->kernel, "Kernel size: 4x4, 4,4 or 4 (repeated for every dim)")
      ->required();
  cmd->add_option("--stride", o->stride, "Stride (default 1)");
  cmd->add_option("--dilation", o->dilation, "Dilation (default 1)");
  cmd->add_option("--padding", o->padding,
                  padfold::padding_names() +
                      ", or explicit pads such as 1 or 1,1,2,2 (ONNX order) (default same)");
  cmd->add_option("--convention", o->convention,
                  "For --padding same: tensorflow (default), keras, onnx, onnx_lower, pytorch, "
                  "scipy");
  cmd->add_flag("--ceil-mode", o->ceil_mode, "Pooling ceil_mode (PyTorch/ONNX rule)");
  cmd->add_flag("--transposed", o->transposed, "Transposed convolution (pads crop the output)");
  cmd->add_option("--output-padding", o->output_padding, "Transposed only: extra output size");
  cmd->add_flag("--compare", o->compare,
                "Also show every convention side by side and code reproducing the chosen one");
  cmd->add_flag("--json", o->json, "Print machine-readable JSON (see docs/spec-and-cli.md)");
  cmd->callback([o] { fmt::print("{}", padfold::pads_report(*o)); });
}
