// `padfold import --emit-onnx`: the model with every auto_pad of Conv, ConvTranspose, MaxPool and
// AveragePool rewritten to explicit pads (padfold's padding module computes them), for tools that
// do not take auto_pad or disagree about it. The model is the one padfold imported
// (PreparedModel), which other tools read alike: its Gelu nodes are expanded below opset 20.
#pragma once

#include <string>
#include <vector>

#include "frontend/onnx/onnx_graph.h"

namespace padfold::onnx_import {

struct NormalizeResult {
  onnx::ModelProto model;            // with the --input sizes written into the graph inputs
  std::vector<std::string> changes;  // one line per rewritten node
  std::vector<std::string> warnings;
};

// Every such node with auto_pad VALID, SAME_UPPER or SAME_LOWER gets `pads` instead (and no
// auto_pad). ConvTranspose follows the ONNX spec: SAME_UPPER puts the odd crop at the end; where
// the output extends the full transposed output, the extension becomes output_padding; an
// output_shape is replaced by the pads it implies. Each rewrite is checked to give the same output
// size. Throws ImportError naming the node when a rewrite is impossible.
NormalizeResult normalize_auto_pad(const PreparedModel& prepared);

}  // namespace padfold::onnx_import
