// Before import: a Split of the channels becomes one Slice per output, which the importer drafts
// as a gather_channels layer like any Slice of the channels (composed with a channel shuffle
// before it, as ShuffleNetV2's chunk is). torch.onnx writes torch.chunk and torch.split as Split in
// newer releases, and tf2onnx writes tf.split as Split.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>

namespace padfold::onnx_import {

// In `model`, replaces every default-domain Split along axis 1 of a tensor whose channel count
// `inferred` (the same graph after shape inference) gives, with its part sizes from the `split`
// input (opset 13+) or attribute (before), else equal parts (or num_outputs parts of
// ceil(C / num_outputs), opset 18), by one Slice per output that is read (or a graph output),
// named "<split>_<k>" and writing output k. A Split whose sizes are computed or do not add up to
// the channels stays (the importer leaves it to the caller). Returns how many Splits it replaced
// (then shape inference is stale).
int split_channels_to_slices(onnx::ModelProto& model, const onnx::ModelProto& inferred,
                             const std::string& label);

// For a Slice this pass wrote, the node of the user's file it stands for ("output 1 of Split
// 'split'", kept in its doc_string), which reports name beside it; else "".
std::string split_part_origin(const onnx::NodeProto& node);

}  // namespace padfold::onnx_import
