// The spec's "quant" field of an int8/uint8 layer (docs/int8.md). Internal to the spec parser.
#pragma once

#include <nlohmann/json.hpp>

#include "frontend/json_fields.h"
#include "frontend/layer.h"

namespace padfold {

// Fills l.quant from `q` (null when the layer has no "quant" field) and checks it against the rest
// of the layer, whose op, dtype, channels, inputs and activation are parsed: quant is required
// exactly for int8/uint8 layers, of the ops that have quantized kernels.
void parse_quant(const nlohmann::json& q, const Ctx& c, Layer& l);

}  // namespace padfold
