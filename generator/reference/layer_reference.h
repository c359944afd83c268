// A spec layer run through the naive reference: random inputs in the layer's own layouts and the
// reference output. The tests' oracle, and the tuner's check that a candidate computes the layer.
#pragma once

#include "frontend/spec.h"
#include "reference/quant_reference.h"
#include "reference/reference.h"

namespace padfold::ref {

struct LayerData {
  Tensor input, weights, bias;  // in the layer's own layouts (as the kernel takes them)
};

LayerData random_data(const Layer& layer, unsigned seed);

// The reference output in the layer's output layout.
Tensor reference_output(const Layer& layer, const LayerData& data);

// An add of two tensors of the same shape (any one layout), through the add's activation.
Tensor add_output(const Layer& add, const Tensor& a, const Tensor& b);

// A quantized layer's buffers (docs/int8.md), in the layer's own layouts: activations across
// the dtype's whole range, int8 weights, int32 bias; `inputs` has add's two.
struct QLayerData {
  std::vector<QTensor> inputs;
  QTensor weights;
  std::vector<int32_t> bias;
};

QLayerData random_quant_data(const Layer& layer, unsigned seed);

// The integer reference (quant_reference.h) of a quantized conv, pool or add, in the layer's
// output layout.
QTensor quant_reference_output(const Layer& layer, const QLayerData& data);

// A quantize layer (float32 in, the layer's dtype out) and a dequantize layer (the reverse),
// element by element, layout-independent.
QTensor quantize_reference(const Layer& layer, const Tensor& x);
Tensor dequantize_reference(const Layer& layer, const QTensor& q);

// The dtype's range: int8 [-128, 127], uint8 [0, 255].
std::pair<int32_t, int32_t> quant_range(DType dtype);

}  // namespace padfold::ref
