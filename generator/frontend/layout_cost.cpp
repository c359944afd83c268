#include "frontend/layout_cost.h"

#include <fmt/format.h>

namespace padfold {

std::optional<std::string> channels_first_cost_warning(const Model& model) {
  int depthwise = 0, convs = 0;
  TensorLayout layout;
  for (const Layer& l : model.layers) {
    if (l.op != Op::Conv) continue;
    ++convs;
    if (l.layout.channels_last || l.in_channels < 2 || l.groups != l.in_channels) continue;
    ++depthwise;
    layout = l.layout;
  }
  if (depthwise == 0) return std::nullopt;
  const TensorLayout last{true, layout.spatial_dims};
  // Measured by bench/models/run.sh (1 thread): NCHW 2.22x and 1.57x the NHWC time on Zen 3,
  // 2.05x and 1.63x on Zen 5; ResNet-50, without depthwise convs, 1.19x and 0.86x.
  return fmt::format(
      "{} of the {} convolutions are depthwise and computed channels first ({}); on CPU targets "
      "padfold's channels-first kernels make such models slower than channels last (MobileNetV2 "
      "and EfficientNet-B0 took 1.6-2.2x the channels-last time, bench/results-models.md). For "
      "channels last, write the spec in {} or import the ONNX model with --layout nhwc (its "
      "inputs and outputs become channels last too)",
      depthwise, convs, layout.name(), last.name());
}

}  // namespace padfold
