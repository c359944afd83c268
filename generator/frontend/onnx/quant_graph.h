// Quantized ONNX graphs -> int8/uint8 layers (docs/int8.md, requantize onnx).
//
// QOperator (QuantizeLinear, QLinearConv, MaxPool on int8/uint8, com.microsoft QLinearAdd,
// QLinearAveragePool, QLinearGlobalAveragePool, DequantizeLinear) and QDQ (DequantizeLinear ->
// Conv/MaxPool/AveragePool/GlobalAveragePool/Add [-> Relu/Clip] -> QuantizeLinear, weights and
// bias DequantizeLinear'd initializers), as ONNX Runtime's quantizer and tf2onnx write them. A
// Pad of a quantized tensor (or of its DequantizeLinear) folds into the conv or pool reading it;
// the model's float input becomes a quantize layer and each float output a dequantize layer.
// Anything else in such a graph is an ImportError naming the node and what was expected.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "frontend/onnx/import_ops.h"

namespace padfold::onnx_import::detail {

// Whether the graph holds a QuantizeLinear, DequantizeLinear or QLinear* node: then it is
// imported by recognize_quantized alone.
bool is_quantized_graph(const GraphIndex& g);

struct QuantLayer {
  Draft draft;           // layer dtype int8/uint8 with quant; inputs and output are ONNX tensors
  std::string pad_mode;  // a folded Pad's mode, for the description
};

struct QuantGraph {
  std::vector<QuantLayer> layers;  // in graph order
  // The nodes the layers absorb besides their own (the DequantizeLinears of activations, the
  // QuantizeLinears inside layers, the weights' DequantizeLinears) and the folded Pads.
  std::map<int, const char*> absorbed;  // node -> role: "quantization", "pad" or "bypassed"
};

// Every node of a quantized graph but bypassed ones and constants must be covered; throws
// ImportError "<file>: node '<name>' (<op>, #i): <what was found>; expected <what padfold takes>".
// Sets the shapes of the layers' outputs in `c` (Context::set_layer_shape).
QuantGraph recognize_quantized(Context& c);

}  // namespace padfold::onnx_import::detail
