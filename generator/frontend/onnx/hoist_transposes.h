// Before import: layout Transposes moved to the model edges they convert.
//
// tf2onnx converts a Keras Conv1D on an NWC input as Pad (causal) -> Unsqueeze (NWC -> N1WC) ->
// Transpose (N1WC -> NC1W) -> Conv; from a TFLite file the Unsqueeze is a Reshape, and the output
// is Transpose (NC1W -> N1WC) -> Reshape (-> NWC). The layout Transposes sit next to ops that the
// importer understands only channels first. Moving them past those ops, with pads, axes and shapes
// rewritten for the new order, computes the same values and leaves the Transposes on the model's
// inputs and outputs, where the importer folds them (import.cpp's fold_layout_edges).
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <vector>

namespace padfold::onnx_import {

// In `model`, moves every channels-first layout Transpose (perm 0, r-1, 1, ..., r-2; rank 3 to 5)
// above the Pad, Unsqueeze, Reshape or per-tensor QuantizeLinear/DequantizeLinear producing its
// input, and every channels-last one (perm 0, 2, ..., r-1, 1) below the Squeeze, Reshape or
// per-tensor QuantizeLinear/DequantizeLinear reading its output, where the tensor between them
// has no other reader and the reshape only adds or drops spatial unit axes. Shapes come from
// `inferred` (the same graph after shape inference). Node names stay; rewritten pads, axes and
// shapes are new initializers; value_info of the tensors whose shape changes is dropped. Returns
// how many moves it made (then `inferred` is stale).
int hoist_layout_transposes(onnx::ModelProto& model, const onnx::ModelProto& inferred);

}  // namespace padfold::onnx_import
