// From a layer's fields to a resolved layer: its input shapes taken from the tensors it reads, its
// channels checked, its pads and output size resolved by the padding module, its border and
// buffers checked. The spec parser and the ONNX importer both resolve layers here.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "frontend/layer.h"

namespace padfold {

// A tensor a layer reads: an earlier layer's output or a model input.
struct TensorSource {
  std::string name;
  std::string what;  // for messages: "input layer 'a'", "model input 'x'"
  TensorLayout layout;
  std::vector<int64_t> shape;  // in layout order
  DType dtype = DType::F32;
  std::optional<QuantParams> quant;  // a quantized layer's output
};

// A layer that cannot be resolved. `field` is the spec field at fault (groups, padding, border,
// input, input_shape, kernel...); what() says what was found and what was expected.
struct LayerError : std::runtime_error {
  LayerError(std::string field_name, const std::string& message)
      : std::runtime_error(message), field(std::move(field_name)) {}
  std::string field;
};

// Fills batch, in_channels, in_spatial (and for add/concat input_channels, out_channels and unit
// kernels) from the sources: one for a conv or pool, two or more for add and concat, each in the
// layer's layout. Needs op, spatial_dims and layout.
void take_input_shapes(Layer& layer, const std::vector<TensorSource>& inputs);

// The rest, once every field is set: pools' out_channels, groups against the channels, pads and
// output sizes (padding module), the border, pools' windows, and every buffer's size.
void resolve_shapes(Layer& layer);

// take_input_shapes, then resolve_shapes.
void resolve_layer(Layer& layer, const std::vector<TensorSource>& inputs);

}  // namespace padfold
