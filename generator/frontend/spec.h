// The layer spec: a user's JSON file, parsed, validated and resolved (frontend/resolve.h) into a
// Model (frontend/layer.h).
#pragma once

#include <string>
#include <vector>

#include "frontend/layer.h"

namespace padfold {

// The limits of base/limits.h, all checked here: a spec file is a regular file of at most
// kMaxSpecFileBytes, with arrays and objects nested at most kMaxJsonDepth deep, no key twice in an
// object and no number beyond a double; every integer is within +-kMaxSize and every float (border
// value, leaky_relu alpha) within the float32 range; model and layer names have at most
// kMaxNameLength characters and no layer is named like another plus "_argv" or "_metadata" (the
// symbols Halide defines beside a kernel); the padding module's limits hold on every axis, and
// every buffer of a layer (input, weights, bias, output) is under kMaxBufferBytes.
Model load_spec(const std::string& path);
Model parse_spec(const std::string& json_text, const std::string& file_label);

// The keys the parser accepts in each object of a spec; spec.schema.json lists the same (tested).
struct SpecKeys {
  std::vector<std::string> top, input, defaults, layer;
};
const SpecKeys& spec_keys();

}  // namespace padfold
