// The PyTorch module padfold port --emit writes (api/port.h): plain torch ops computing exactly
// what a resolved float32 model computes, and a loader for the weights padfold import wrote.
#pragma once

#include <filesystem>
#include <string>

#include "frontend/layer.h"

namespace padfold {

struct TorchModuleOptions {
  std::string source_label;          // the model file, for the docstring
  std::string weights_root;          // the folder the spec's weight paths are relative to
  std::string default_weights_expr;  // Python expression: the default weights folder
  std::string default_weights_doc;   // and how the docstring names it
};

// Throws std::runtime_error naming the layer (or input) that cannot be ported: int8 layers, ops
// left to the caller, a dilated average pool, a conv without weight files.
std::string torch_module_source(const Model& model, const TorchModuleOptions& options);

// `file` relative to `root` ('/'-separated), as the module joins it to its weights folder.
std::string relative_weight_path(const std::string& file, const std::string& root);

}  // namespace padfold
