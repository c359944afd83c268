// Before import: activations that exporters write as several elementwise ops, rewritten to the one
// ONNX op they compute, so that the importer fuses them as it fuses that op.
//
// Keras's hard_sigmoid, and the gate of MobileNetV3's hard swish x * hard_sigmoid(x), is
// relu6(x + 3) / 6: tf2onnx writes Add(x, 3) -> Clip(0, 6) -> Mul(1/6) (or Div(6)). That is
// ONNX HardSigmoid with alpha 1/6 and beta 1/2, the form torch.onnx writes.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>

namespace padfold::onnx_import {

// In `model`, replaces every Add(x, 3) -> Clip(0, 6) -> Mul(1/6) or Div(6) chain whose inner
// tensors have no other reader and are no graph output by one HardSigmoid node (alpha 1/6, beta
// 1/2) reading x and writing the last node's output, named after it. The constants are scalars
// (any shape of one element, from initializers or Constant nodes). Returns how many chains it
// replaced (then shape inference is stale). A malformed graph is an ImportError naming `label`.
int fold_decomposed_activations(onnx::ModelProto& model, const std::string& label);

}  // namespace padfold::onnx_import
