// What a layout costs on CPU targets, as bench/results-models.md measured it: said where a model
// computes channels first and holds the op class padfold's channels-first kernels are slow at.
#pragma once

#include <optional>
#include <string>

#include "frontend/layer.h"

namespace padfold {

// A warning for `model` on CPU targets, or nullopt: its convolutions computed channels first
// (NCHW-style) make whole models markedly slower than the same model channels last (MobileNetV2,
// EfficientNet-B0 and ResNet-50 in bench/results-models.md). It names how many (and how many of
// them are depthwise), the layout, the measured cost and how to get channels last.
std::optional<std::string> channels_first_cost_warning(const Model& model);

}  // namespace padfold
