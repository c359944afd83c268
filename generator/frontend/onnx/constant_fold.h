// Small integer subgraphs of constants, evaluated at import: torch 1.13 exports a constant F.pad
// (ZeroPad2d) as a Pad whose pads come out of ConstantOfShape -> Concat -> Reshape -> Slice ->
// Transpose -> Reshape -> Cast on Constants. Folded, the Pad is a constant Pad, which the importer
// folds into the next conv or pool like any other.
#pragma once

#include <onnx/onnx_pb.h>

#include <functional>
#include <optional>
#include <string>

namespace padfold::onnx_import {

// At most this many values per folded tensor: shape and pad arithmetic, never weights.
inline constexpr int64_t kMaxFoldedValues = 4096;

// A tensor's static shape (every dim known), or nullopt.
using StaticShapeOf = std::function<std::optional<std::vector<int64_t>>(const std::string&)>;

// The value of default-domain node `n` (ConstantOfShape, Concat, Reshape, Slice, Transpose, Cast,
// Unsqueeze, Squeeze, Gather, Add, Sub, Mul, Neg on INT64/INT32 tensors; Shape of a tensor whose
// shape `static_shape` gives: with the input size fixed, the shape arithmetic exporters write
// (torch's F.interpolate(size=...)) folds to constants; QuantizeLinear and
// DequantizeLinear of a scalar, as a QDQ Pad's constant value), where `constant` gives every
// input it reads; nullopt for any other node, an input that is no constant, a value that is not
// an integer, more than kMaxFoldedValues values, or an input that breaks the op's ONNX rules (the
// node is then left as it is, and the importer says why).
std::optional<onnx::TensorProto> fold_constant_node(
    const onnx::NodeProto& n,
    const std::function<const onnx::TensorProto*(const std::string&)>& constant,
    const StaticShapeOf& static_shape = nullptr);

// `model` with every node fold_constant_node folds replaced by a Constant of its value
// (initializers and Constant `value`s feed it): what ONNX shape inference is given, so that shapes
// flow through a Pad whose pads such a subgraph computes, and a Shape of a tensor whose shape the
// graph's inputs or value_info give fully. Returns how many nodes it replaced.
int replace_folded_nodes(onnx::ModelProto& model);

}  // namespace padfold::onnx_import
