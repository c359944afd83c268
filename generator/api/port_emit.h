// The code padfold port --emit writes (api/port.h): a PyTorch module (port_torch.cpp) or a Keras
// model (port_keras.cpp) computing exactly what a resolved float32 model computes, with a loader
// for the weights padfold import wrote.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "frontend/layer.h"

namespace padfold {

struct PortModuleOptions {
  std::string source_label;          // the model file, for the docstring
  std::string weights_root;          // the folder the spec's weight paths are relative to
  std::string default_weights_expr;  // Python expression: the default weights folder
  std::string default_weights_doc;   // and how the docstring names it
};

// Throws std::runtime_error naming the layer (or input) that cannot be ported: int8 layers, ops
// left to the caller, a dilated average pool, a conv without weight files.
std::string torch_module_source(const Model& model, const PortModuleOptions& options);
// The same for Keras (its functional API); also refuses what Keras has no layer for (strides with
// dilation, grouped transposed convs, dilated pools).
std::string keras_model_source(const Model& model, const PortModuleOptions& options);

// The PyTorch expression of `x` filled out by the layer's border over the pads (F.pad, or the
// module's _pad_symmetric helper for a symmetric border).
std::string torch_bordered(const Layer& L, const std::string& x, const std::vector<int64_t>& before,
                           const std::vector<int64_t>& after);

// `file` relative to `root` ('/'-separated), as the module joins it to its weights folder.
std::string relative_weight_path(const std::string& file, const std::string& root);

}  // namespace padfold
