// The one writer of spec JSON: a Model as the spec file that parses back to it (parse_spec of the
// text gives the same layers, inputs and outputs). The importer writes its specs with it.
#pragma once

#include <nlohmann/json.hpp>

#include "frontend/layer.h"

namespace padfold {

// Weight file paths are written relative to the folder of model.file (as the parser resolves
// them); model inputs a chain layer reads implicitly ("<layer>.input") are written as that
// layer's input_shape.
nlohmann::ordered_json to_spec_json(const Model& model);

}  // namespace padfold
