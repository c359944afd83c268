// A spec layer run through the naive reference: random inputs in the layer's own layouts and the
// reference output. The tests' oracle, and the tuner's check that a candidate computes the layer.
#pragma once

#include "frontend/spec.h"
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

}  // namespace padfold::ref
