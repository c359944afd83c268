// Before import: channels-last stretches inside a channels-first graph, computed channels first.
//
// torch code that works on the last axis permutes to channels last and back: ConvNeXt's block is
// dwconv -> permute(0, 2, 3, 1) -> LayerNorm -> Linear -> GELU -> Linear -> permute(0, 3, 1, 2),
// and torch.onnx writes Transpose -> ReduceMean(axes -1)/Sub/Pow/Sqrt/Div -> MatMul -> Add -> ...
// -> Transpose. Every op between the two Transposes is elementwise, reduces the last axis or
// multiplies it by a matrix, so the same values come out of the ops rewritten for the channel axis:
// a reduction of axis 1, constants of one value per channel reshaped to [1, C, 1, ...], a MatMul
// by a constant [C, K] matrix as the 1x1 Conv it is. The Transposes then become Identity.
#pragma once

#include <onnx/onnx_pb.h>

#include <map>
#include <set>
#include <string>

namespace padfold::onnx_import {

// In `model`, rewrites every region that starts at channels-last Transposes (perm 0, 2, ..., r-1,
// 1; rank 3 to 5) and ends at channels-first Transposes (perm 0, r-1, 1, ..., r-2), where every
// node in between reads only the region's tensors and constants and is elementwise (Add, Sub,
// Mul, Div, Pow of two region tensors, or with scalars or last-axis vectors; activations, Clip,
// Erf, Sqrt, Identity, Dropout), a ReduceMean or ReduceMax with keepdims (its axes permuted), a
// MatMul by a constant matrix, or a LayerNormalization of the last axis (opset 17; written out as
// the ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add of torch.onnx's earlier
// LayerNorm, which the importer drafts as a layer_norm layer), and no tensor of it is a graph
// output. A region may also end at a Reshape or Flatten to [N, K] of a tensor whose spatial axes
// are 1, or a ReduceMean/ReduceMax of every spatial axis without keepdims ([N, C] in either
// layout). Regions named in `kept` (by the output of their first start Transpose) stay as they
// are. Shapes come from `inferred` (the same graph after shape inference). Returns how many
// regions it rewrote (then `inferred` is stale), and maps their tensors (channels last in the
// file, channels first after) to their region's name in `relaid_tensors`.
int fold_last_axis_regions(onnx::ModelProto& model, const onnx::ModelProto& inferred,
                           const std::string& label, const std::set<std::string>& kept,
                           std::map<std::string, std::string>& relaid_tensors);

}  // namespace padfold::onnx_import
