// Before import: what TensorFlow writes in other ops than torch.onnx (through tf2onnx), rewritten
// to torch.onnx's form, which the importer reads.
//
// Keras's LayerNormalization is tf.nn.moments then x * s + (-mean) * s (+ beta), s = gamma *
// rsqrt(var + eps): ReduceMean -> Neg, (a Reshape of the mean that changes no shape) -> Sub ->
// Mul(d, d) -> ReduceMean -> Add(eps) -> Sqrt -> Reciprocal -> Mul(gamma) -> Mul(x, s), Mul(-mean,
// s) -> Add(beta) -> Add. That is (x - mean) / sqrt(var + eps) * gamma + beta, torch.onnx's
// ReduceMean -> Sub -> Pow(2) -> ReduceMean -> Add -> Sqrt -> Div -> Mul -> Add, which the
// importer drafts as a layer_norm.
//
// A Keras Dense layer on a rank-3+ tensor is tf.tensordot: Reshape to [M, C] -> MatMul by the [C,
// K] kernel -> Reshape back to [..., K]. ONNX's MatMul broadcasts over the leading axes, so it is
// the MatMul of the unreshaped tensor, as torch.onnx writes a Linear layer.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>

namespace padfold::onnx_import {

// In `model`, replaces every such LayerNormalization chain (the same single axis in both
// ReduceMeans, eps a positive scalar, gamma and beta constants, each optional) and every such
// tensordot (a constant 2-D kernel) whose inner tensors have no other reader and are no graph
// output. Shapes come from `inferred` (the same graph after shape inference). Returns how many it
// replaced (then `inferred` is stale).
int fold_tf_forms(onnx::ModelProto& model, const onnx::ModelProto& inferred,
                  const std::string& label);

}  // namespace padfold::onnx_import
