// Before import: activations that exporters write as several elementwise ops, rewritten to the one
// ONNX op they compute, so that the importer fuses them as it fuses that op.
//
// Keras's hard_sigmoid, and the gate of MobileNetV3's hard swish x * hard_sigmoid(x), is
// relu6(x + 3) / 6: tf2onnx writes Add(x, 3) -> Clip(0, 6) -> Mul(1/6) (or Div(6)). That is
// ONNX HardSigmoid with alpha 1/6 and beta 1/2, the form torch.onnx writes.
//
// GELU, x * Phi(x), is x/2 * (1 + erf(x / sqrt 2)): torch.onnx (before opset 20) writes Div(x,
// sqrt 2) -> Erf -> Add(1) -> Mul(x) -> Mul(1/2). That is ONNX Gelu (opset 20), which the importer
// and its shape inference (onnx_graph.cpp) read at any opset. Its tanh approximation, x/2 * (1 +
// tanh(sqrt(2 / pi) (x + 0.044715 x^3))), torch.onnx writes with x^3 as Mul(x, Mul(x, x)) and the
// halving last, TensorFlow (through tf2onnx) with Pow(x, 3) and x halved first: ONNX Gelu with
// approximate "tanh".
#pragma once

#include <onnx/onnx_pb.h>

#include <string>

namespace padfold::onnx_import {

// In `model`, replaces every Add(x, 3) -> Clip(0, 6) -> Mul(1/6) or Div(6) chain whose inner
// tensors have no other reader and are no graph output by one HardSigmoid node (alpha 1/6, beta
// 1/2) reading x and writing the last node's output, named after it, and every GELU chain (the
// scaling by Div(sqrt 2) or Mul(1/sqrt 2), constants as float32 rounds them) by one Gelu node,
// every chain of its tanh form by one Gelu with approximate "tanh".
// The constants are scalars (any shape of one element, from initializers or Constant nodes).
// Returns how many chains it replaced (then shape inference is stale). A malformed graph is an
// ImportError naming `label`.
int fold_decomposed_activations(onnx::ModelProto& model, const std::string& label);

// The reverse for a model written out (--emit-onnx): below opset 20, where ONNX has no Gelu, every
// Gelu node becomes Div(sqrt 2) -> Erf -> Add(1) -> Mul(x) -> Mul(1/2) again (the tanh form: x^3
// -> Mul(0.044715) -> Add(x) -> Mul(sqrt(2 / pi)) -> Tanh -> Add(1) -> Mul(x) -> Mul(1/2)), its
// constants new initializers. Returns how many it expanded.
int expand_gelu_below_opset20(onnx::ModelProto& model);

}  // namespace padfold::onnx_import
