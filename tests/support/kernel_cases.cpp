#include "kernel_cases.h"

#include <nlohmann/json.hpp>
#include <random>

#include "frontend/spec.h"

namespace padfold::testing {

namespace {

using json = nlohmann::json;

struct OpKind {
  const char* name;
  bool weights, transposed, pool;
};

const OpKind kOps[] = {
    {"conv", true, false, false},          {"depthwise", true, false, false},
    {"grouped", true, false, false},       {"conv_transpose", true, true, false},
    {"max_pool", false, false, true},      {"avg_pool", false, false, true},
    {"avg_pool_incl", false, false, true},
};
const char* kConventions[] = {"valid",      "same_upper", "same_lower", "torch_same",
                              "scipy_same", "causal",     "full",       "explicit"};
const char* kBorders[] = {"zeros", "constant", "reflect", "symmetric", "replicate", "circular"};

std::string layout_name(int dims, bool channels_last) {
  const std::string sp = spatial_letters(dims);
  return channels_last ? "N" + sp + "C" : "NC" + sp;
}

std::string weight_layout(int dims, bool channels_last, bool transposed) {
  const std::string sp = spatial_letters(dims);
  if (transposed) return channels_last ? sp + "OI" : "IO" + sp;
  return channels_last ? sp + "IO" : "OI" + sp;
}

json layer_for(const OpKind& op, const std::string& conv, const std::string& border, int dims,
               bool channels_last, std::mt19937& rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const bool unit_stride = conv == "torch_same" || conv == "scipy_same";
  json sp = json::array(), kernel = json::array(), stride = json::array(), dilation = json::array();
  for (int d = 0; d < dims; ++d) {
    sp.push_back(pick(1, dims == 3 ? 6 : 11));
    kernel.push_back(pick(1, dims == 3 ? 3 : 5));
    stride.push_back(unit_stride ? 1 : pick(1, 3));
    dilation.push_back(op.pool && std::string(op.name) != "max_pool" ? 1 : pick(1, 3));
  }
  int in_c = pick(1, 9), out_c = pick(1, 9), groups = 1;
  if (std::string(op.name) == "depthwise") {
    groups = in_c;
    out_c = in_c * pick(1, 2);
  } else if (std::string(op.name) == "grouped") {
    groups = pick(2, 3);
    in_c = groups * pick(1, 3);
    out_c = groups * pick(1, 3);
  }
  json shape = json::array({pick(1, 2)});
  if (!channels_last) shape.push_back(in_c);
  for (auto& s : sp) shape.push_back(s);
  if (channels_last) shape.push_back(in_c);

  json L = {
      {"name", "layer"},  {"input_shape", shape}, {"layout", layout_name(dims, channels_last)},
      {"kernel", kernel}, {"stride", stride},     {"dilation", dilation}};
  const std::string dims_s = std::to_string(dims) + "d";
  if (op.transposed) {
    L["op"] = "conv_transpose" + dims_s;
    L["out_channels"] = out_c;
    L["groups"] = groups;
    L["weight_layout"] = weight_layout(dims, channels_last, true);
  } else if (op.weights) {
    L["op"] = "conv" + dims_s;
    L["out_channels"] = out_c;
    L["groups"] = groups;
    L["weight_layout"] = weight_layout(dims, channels_last, false);
  } else {
    L["op"] = std::string(op.name) == "max_pool" ? "max_pool" : "avg_pool";
    L["ceil_mode"] = pick(0, 1) == 1;
    if (std::string(op.name) == "avg_pool_incl") L["count_include_pad"] = true;
    L.erase("dilation");
    if (std::string(op.name) == "max_pool") L["dilation"] = dilation;
  }
  if (op.weights) {
    L["bias"] = pick(0, 1) == 1;
    const char* acts[] = {"none",       "relu", "relu6", "sigmoid",  "tanh",
                          "hard_swish", "silu", "gelu",  "gelu_tanh"};
    const int a = pick(0, 10);
    if (a == 9)
      L["activation"] = {{"type", "leaky_relu"}, {"alpha", 0.125}};
    else if (a == 10)
      L["activation"] = {{"type", "hard_sigmoid"}, {"alpha", 0.3}, {"beta", 0.4}};
    else
      L["activation"] = acts[a];
  }
  if (conv == "explicit") {
    json pads = json::array();
    // Crops (negative pads) where the border takes them: a zeros or constant border.
    const bool crops =
        !op.transposed && (std::string(border) == "zeros" || std::string(border) == "constant");
    for (int i = 0; i < 2 * dims; ++i) pads.push_back(pick(crops ? -2 : 0, 3));
    L["padding"] = pads;
  } else {
    L["padding"] = conv;
  }
  if (!op.transposed) {
    if (border == "constant")
      L["border"] = {{"mode", "constant"}, {"value", 0.75}};
    else
      L["border"] = border;
  }
  return L;
}

}  // namespace

std::vector<KernelCase> make_kernel_cases(unsigned seed, int per_combination) {
  std::mt19937 rng(seed);
  std::vector<KernelCase> cases;
  for (const OpKind& op : kOps) {
    for (const char* conv : kConventions) {
      if (op.transposed && std::string(conv) != "same_upper" && std::string(conv) != "same_lower" &&
          std::string(conv) != "explicit" && std::string(conv) != "valid")
        continue;
      for (const char* border : kBorders) {
        // Transposed convolutions always pad with zeros; their border loop only draws more shapes.
        for (int n = 0; n < per_combination; ++n) {
          // Alternate layouts and spatial dims across the combinations.
          const size_t index = cases.size();
          const bool channels_last = index % 2 == 0;
          const int dims = std::string(conv) == "causal" ? 1 : 1 + static_cast<int>(index / 2 % 3);
          for (int attempt = 0; attempt < 50; ++attempt) {
            json spec = {
                {"model", "t"},
                {"layers", json::array({layer_for(op, conv, border, dims, channels_last, rng)})}};
            try {
              parse_spec(spec.dump(), "generated");
            } catch (const SpecError&) {
              continue;  // e.g. reflect pads larger than the input: draw another shape
            }
            cases.push_back({std::string(op.name) + "_" + conv + "_" + border + "_" +
                                 (channels_last ? "cl" : "cf") + std::to_string(dims) + "d_" +
                                 std::to_string(index),
                             spec.dump()});
            break;
          }
        }
      }
    }
  }
  return cases;
}

}  // namespace padfold::testing
