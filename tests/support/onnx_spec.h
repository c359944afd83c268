// Turns an ONNX Conv / ConvTranspose / MaxPool / AveragePool node test into a padfold layer spec
// (channels-first, ONNX weight layouts), so the node can be compiled and run by padfold.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "onnx_util.h"

namespace padfold::onnx_test {

// The layer, named `name`. Throws OnnxTestError for nodes padfold does not generate (non-float).
nlohmann::json layer_spec(const NodeTest& t, const std::string& name);

}  // namespace padfold::onnx_test
