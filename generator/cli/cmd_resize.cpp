// padfold resize: where each output pixel of a resize reads its input under one ONNX coordinate
// mode, and where the others (PyTorch's, TensorFlow's, Keras's) read otherwise
// (api/resize_report).
#include <fmt/format.h>

#include <memory>

#include "api/resize_report.h"
#include "commands.h"

void add_resize_command(CLI::App& app) {
  auto o = std::make_shared<padfold::ResizeRequest>();
  CLI::App* cmd = app.add_subcommand(
      "resize",
      "Resolve a resize's coordinate convention into the input pixels and weights each output "
      "pixel reads.\nExample: padfold resize --input 4x6 --output 8x12 --mode linear "
      "--coordinate-transformation-mode align_corners --compare");
  cmd->add_option("--input", o->input, "Spatial input size, e.g. 4x6 (sets the number of dims)")
      ->required();
  cmd->add_option("--output", o->output, "Output size: 8x12, 8,12 or 8 (every dim)");
  cmd->add_option("--scales", o->scales,
                  "Scales instead of --output: 2, 1.5x2 (output floor(input * scale))");
  cmd->add_option("--mode", o->mode, "nearest or linear (default linear)");
  cmd->add_option("--coordinate-transformation-mode", o->coordinates,
                  "half_pixel (default), pytorch_half_pixel, align_corners, asymmetric, "
                  "tf_half_pixel_for_nn, tf_crop_and_resize");
  cmd->add_option("--roi", o->roi,
                  "For tf_crop_and_resize: the region read, start:end per axis (0:1 every axis "
                  "by default; 1 is the last pixel), e.g. 0.2:0.8,0:1");
  cmd->add_option("--extrapolation-value", o->extrapolation_value,
                  "For tf_crop_and_resize: the output where the region leaves the input "
                  "(default 0)");
  cmd->add_option("--nearest-mode", o->rounding,
                  "For nearest: round_prefer_floor (default), round_prefer_ceil, floor, ceil");
  cmd->add_flag("--compare", o->compare,
                "Also show every other coordinate mode, who writes it, and where it reads "
                "otherwise");
  cmd->add_flag("--json", o->json, "Print machine-readable JSON (see docs/spec-and-cli.md)");
  cmd->callback([o] { fmt::print("{}", padfold::resize_report(*o)); });
}
