// Whether two models say the same thing, field by field: the spec writer's round trip and the
// importer's spec against the Model it built.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>

#include "frontend/layer.h"

namespace padfold::testing {

// "" when every field of every input, output and layer agrees, else the first difference.
inline std::string model_difference(const Model& a, const Model& b) {
  auto differ = [](const std::string& where, const auto& x, const auto& y) {
    return x == y ? std::string() : fmt::format("{}: {} vs {}", where, x, y);
  };
  std::string d;
  auto check = [&](const std::string& where, const auto& x, const auto& y) {
    if (d.empty()) d = differ(where, x, y);
  };
  check("model", a.name, b.name);
  check("outputs", a.outputs, b.outputs);
  check("output_shapes", a.output_shapes, b.output_shapes);
  check("inputs", a.inputs.size(), b.inputs.size());
  for (size_t i = 0; d.empty() && i < a.inputs.size(); ++i) {
    const ModelInput &x = a.inputs[i], &y = b.inputs[i];
    const std::string w = fmt::format("input #{}", i);
    check(w + " name", x.name, y.name);
    check(w + " shape", x.shape, y.shape);
    check(w + " layout", x.layout.name(), y.layout.name());
    check(w + " produced_by", x.produced_by, y.produced_by);
    check(w + " description", x.description, y.description);
  }
  check("layers", a.layers.size(), b.layers.size());
  for (size_t i = 0; d.empty() && i < a.layers.size(); ++i) {
    const Layer &x = a.layers[i], &y = b.layers[i];
    const std::string w = fmt::format("layer '{}'", x.name);
    check(w + " name", x.name, y.name);
    check(w + " description", x.description, y.description);
    check(w + " read_by", x.read_by, y.read_by);
    check(w + " op", x.op_name, y.op_name);
    check(w + " spatial_dims", x.spatial_dims, y.spatial_dims);
    check(w + " layout", x.layout.name(), y.layout.name());
    check(w + " weight_layout", x.weight_layout.order, y.weight_layout.order);
    check(w + " inputs", x.inputs, y.inputs);
    check(w + " input_channels", x.input_channels, y.input_channels);
    check(w + " input shape", x.input_shape(), y.input_shape());
    check(w + " output shape", x.output_shape_full(), y.output_shape_full());
    check(w + " groups", x.groups, y.groups);
    check(w + " kernel", x.kernel, y.kernel);
    check(w + " stride", x.stride, y.stride);
    check(w + " dilation", x.dilation, y.dilation);
    check(w + " output_padding", x.output_padding, y.output_padding);
    check(w + " output_shape", x.output_shape.value_or(std::vector<int64_t>{}),
          y.output_shape.value_or(std::vector<int64_t>{}));
    for (size_t k = 0; k < x.pads.axes.size() && k < y.pads.axes.size(); ++k) {
      check(w + " pads before", x.pads.axes[k].before, y.pads.axes[k].before);
      check(w + " pads after", x.pads.axes[k].after, y.pads.axes[k].after);
    }
    check(w + " pad axes", x.pads.axes.size(), y.pads.axes.size());
    check(w + " ceil_mode", x.ceil_mode, y.ceil_mode);
    check(w + " count_include_pad", x.count_include_pad, y.count_include_pad);
    check(w + " border", to_string(x.border), to_string(y.border));
    check(w + " border value", x.border_value, y.border_value);
    check(w + " bias", x.bias, y.bias);
    check(w + " activation", to_string(x.activation), to_string(y.activation));
    check(w + " alpha", x.activation_alpha, y.activation_alpha);
    check(w + " beta", x.activation_beta, y.activation_beta);
    check(w + " weights_file", x.weights_file, y.weights_file);
    check(w + " bias_file", x.bias_file, y.bias_file);
  }
  return d;
}

}  // namespace padfold::testing
