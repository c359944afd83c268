// What a layout costs on CPU targets, as bench/results-models.md and bench/edge_layouts.json
// measured it: said where a model computes channels first and holds the op class padfold's
// channels-first kernels are slow at; and which layers read their input in the other layout at
// no cost.
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

// Whether `l` (resolved) reads its input in the other layout (input_layout) at no cost: an image
// stem, a conv of at most 4 input channels (bench/edge_layouts.json, padfold bench, 1 thread, Zen
// 4: a 224x224 3x3/2 stem 0.1934 vs 0.1935 ms on AVX-512, 0.374 vs 0.547 ms on the AVX2 target;
// 7x7/2 2.027 vs 2.021 and 2.212 vs 2.232 ms). Convs of more channels and pools read channel
// vectors across the planes, 1.3x-3.7x slower than on their own layout (a 64-channel 3x3: 0.787
// vs 0.595 ms, its input's transpose 0.100 ms).
bool relayout_is_free(const Layer& l);

}  // namespace padfold
