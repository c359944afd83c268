#include "frontend/layout_cost.h"

#include <fmt/format.h>

#include "base/text.h"

namespace padfold {

std::optional<std::string> channels_first_cost_warning(const Model& model) {
  int first = 0, depthwise = 0, convs = 0;
  TensorLayout layout;
  for (const Layer& l : model.layers) {
    if (l.op != Op::Conv) continue;
    ++convs;
    if (l.layout.channels_last) continue;
    ++first;
    layout = l.layout;
    depthwise += l.in_channels >= 2 && l.groups == l.in_channels;
  }
  if (first == 0) return std::nullopt;
  const TensorLayout last{true, layout.spatial_dims};
  // Measured by bench/models/run.sh (1 thread, 2026-12-03): NCHW 2.87x, 1.83x and 2.93x the NHWC
  // time of MobileNetV2, EfficientNet-B0 and ResNet-50 on Zen 3 (AVX2), 5.18x, 2.01x and 1.96x on
  // Zen 5 (AVX-512); a single ResNet-50 3x3 conv on 56x56x64 4x.
  return fmt::format(
      "{} of the {} convolutions are computed channels first ({}){}; on CPU targets padfold's "
      "channels-first kernels are slower than channels last (whole MobileNetV2, EfficientNet-B0 "
      "and ResNet-50 took 1.7-5.2x the channels-last time, bench/results-models.md). For channels "
      "last, write the layers in {} (a transpose layer, perm {}, keeps an input or output {}), or "
      "import the ONNX model without --layout nchw",
      first, convs, layout.name(),
      depthwise ? fmt::format(", {} of them depthwise", depthwise) : std::string(), last.name(),
      shape_text(channels_last_perm(static_cast<size_t>(layout.spatial_dims) + 2)), layout.name());
}

bool relayout_is_free(const Layer& l) {
  return l.op == Op::Conv && l.in_channels <= 4;
}

}  // namespace padfold
