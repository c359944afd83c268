#include "gpu_cases.h"

#include <cstdlib>
#include <iterator>
#include <map>
#include <random>

#include "kernel_cases.h"
#include "schedules/knobs.h"

namespace padfold::testing {

using json = nlohmann::json;

std::string CaseSet::describe(const Layer& L) const {
  for (const json& layer : json::parse(spec)["layers"])
    if (layer["name"] == L.name)
      return layer.dump() +
             (overrides.contains(L.name) ? "\nknobs " + overrides[L.name].dump() : "");
  return L.name;
}

namespace {
const char* const kBorderNames[] = {"zeros",     "constant",  "reflect",
                                    "symmetric", "replicate", "circular"};
}  // namespace

const CaseSet& matrix_cases() {
  static const CaseSet m = [] {
    const bool full = std::getenv("PADFOLD_GPU_FULL_MATRIX") != nullptr;
    std::map<std::string, int> key_index;
    json layers = json::array(), inputs = json::array();
    for (const KernelCase& c : make_kernel_cases(9, 1)) {
      std::string key;
      int border = -1;
      for (int b = 0; b < 6; ++b) {
        const size_t at = c.name.find(std::string("_") + kBorderNames[b] + "_c");
        if (at != std::string::npos) key = c.name.substr(0, at), border = b;
      }
      const int k = key_index.emplace(key, static_cast<int>(key_index.size())).first->second;
      if (!full && border != k % 6 && border != (k + 3) % 6) continue;
      json layer = json::parse(c.spec)["layers"][0];
      layer["name"] = "c" + std::to_string(layers.size());
      layers.push_back(layer);
    }
    // Outputs that the blocks' tiles do not divide (the last block shifts inwards), with
    // staged tiles of many channels.
    const char* const tails[] = {
        R"({"op": "conv2d", "input_shape": [2, 23, 19, 37], "layout": "NHWC", "groups": 37,
            "out_channels": 37, "kernel": 5, "stride": 2, "padding": "same", "border": "reflect"})",
        R"({"op": "conv2d", "input_shape": [1, 13, 29, 27], "layout": "NCHW", "out_channels": 45,
            "kernel": [3, 2], "padding": "same_lower", "border": "circular", "bias": true})",
        R"({"op": "conv2d", "input_shape": [1, 11, 17, 70], "layout": "NHWC", "out_channels": 75,
            "kernel": 3, "dilation": 2, "padding": "same", "border": "symmetric"})",
        R"({"op": "max_pool", "input_shape": [3, 21, 21, 45], "layout": "NHWC", "kernel": 3,
            "stride": 2, "padding": "same"})",
        R"({"op": "avg_pool", "input_shape": [1, 45, 21, 33], "layout": "NCHW", "kernel": 3,
            "stride": 2, "padding": "same", "border": "replicate"})",
        R"({"op": "conv_transpose2d", "input_shape": [1, 9, 11, 33], "layout": "NHWC",
            "out_channels": 35, "kernel": 3, "stride": 2, "padding": "same_upper"})",
        R"({"op": "conv1d", "input_shape": [2, 67, 41], "layout": "NWC", "out_channels": 33,
            "kernel": 4, "padding": "causal", "border": "constant"})",
        // A tile of 512 channels (110 KiB) is too large to stage: the border is read inline.
        R"({"op": "conv2d", "input_shape": [1, 9, 10, 512], "layout": "NHWC", "out_channels": 40,
            "kernel": 3, "padding": "same", "border": "reflect"})",
        // Inputs read in the other layout (input_layout), the change folded into the staging.
        R"({"op": "conv2d", "input_shape": [1, 3, 19, 23], "layout": "NHWC", "input_layout": "NCHW",
            "out_channels": 24, "kernel": 3, "stride": 2, "padding": "same", "border": "reflect"})",
        R"({"op": "avg_pool", "input_shape": [2, 9, 13, 35], "layout": "NCHW", "input_layout": "NHWC",
            "kernel": 3, "padding": "same_lower", "border": "replicate"})",
    };
    for (size_t i = 0; i < std::size(tails); ++i) {
      json layer = json::parse(tails[i]);
      layer["name"] = "tail" + std::to_string(i);
      layers.push_back(layer);
    }
    for (const bool cl : {true, false}) {
      const std::string tag = cl ? "cl" : "cf";
      const json a = cl ? json{2, 5, 7, 3} : json{2, 3, 5, 7};
      const json b = cl ? json{2, 5, 7, 6} : json{2, 6, 5, 7};
      inputs.push_back({{"name", "a_" + tag}, {"shape", a}, {"layout", cl ? "NHWC" : "NCHW"}});
      inputs.push_back({{"name", "b_" + tag}, {"shape", b}, {"layout", cl ? "NHWC" : "NCHW"}});
      inputs.push_back({{"name", "d_" + tag}, {"shape", a}, {"layout", cl ? "NHWC" : "NCHW"}});
      const json s = cl ? json{2, 1, 1, 3} : json{2, 3, 1, 1};
      inputs.push_back({{"name", "s_" + tag}, {"shape", s}, {"layout", cl ? "NHWC" : "NCHW"}});
      layers.push_back(
          {{"name", "mul_" + tag}, {"op", "mul"}, {"input", {"a_" + tag, "s_" + tag}}});
      layers.push_back({{"name", "softmax_" + tag}, {"op", "softmax"}, {"input", "b_" + tag}});
      layers.push_back(
          {{"name", "add_" + tag}, {"op", "add"}, {"input", {"a_" + tag, "d_" + tag}}});
      layers.push_back(
          {{"name", "concat_" + tag}, {"op", "concat"}, {"input", {"a_" + tag, "b_" + tag}}});
    }
    const int n = static_cast<int>(layers.size());
    // One tail case with the conservative family's knobs (what a failed compile falls back to).
    const json conservative = {{"tail1",
                                {{"gpu_threads_x", 8},
                                 {"gpu_threads_y", 8},
                                 {"gpu_tile_x", 1},
                                 {"gpu_tile_y", 1},
                                 {"gpu_unroll_channels", 1},
                                 {"gpu_stage_kb", 0}}}};
    return CaseSet{"matrix",
                   json{{"model", "gpu_matrix"}, {"inputs", inputs}, {"layers", layers}}.dump(),
                   conservative, n};
  }();
  return m;
}

CaseSet wide_window_cases(int count, unsigned seed) {
  std::mt19937 rng(seed);
  json layers = json::array();
  // The class PoCL got wrong with loops of staging (max pools of 3 rows, with a window deeper
  // than the input: 3 threads a block, most of the depth border).
  for (const int depth : {1, 2})
    for (const int width : {1, 2})
      for (const int kd : {3, 6})
        for (const int sd : {1, 2})
          layers.push_back({{"name", "w" + std::to_string(layers.size())},
                            {"op", "max_pool3d"},
                            {"input_shape", {1, 2, depth, 3, width}},
                            {"layout", "NCDHW"},
                            {"kernel", {kd, 4, 1}},
                            {"stride", {sd, 1, 2}},
                            {"padding", "same"},
                            {"convention", "tensorflow"}});
  count += static_cast<int>(layers.size());
  auto pick = [&](int lo, int hi) { return lo + static_cast<int>(rng() % (hi - lo + 1)); };
  const char* const ops[] = {"max_pool", "avg_pool", "conv", "depthwise"};
  const char* const paddings[] = {"same", "same_lower", "full", "causal"};
  while (static_cast<int>(layers.size()) < count) {
    const int dims = pick(1, 3);
    const bool cl = rng() % 2;
    const std::string op = ops[rng() % 4];
    const int channels = pick(1, 5);
    json spatial = json::array(), kernel = json::array(), stride = json::array(),
         dilation = json::array();
    const int wide = pick(0, dims - 1);
    for (int d = 0; d < dims; ++d) {
      const int in = pick(1, 4);
      const int dil = op == "conv" || op == "depthwise" ? pick(1, 2) : 1;
      const int k = d == wide ? (in + dil) / dil + pick(0, 3) : pick(1, 4);
      spatial.push_back(in);
      kernel.push_back(k);
      stride.push_back(pick(1, 3));
      dilation.push_back(dil);
    }
    json shape = {pick(1, 2)};
    if (!cl) shape.push_back(channels);
    for (const json& e : spatial) shape.push_back(e);
    if (cl) shape.push_back(channels);
    const char* const layouts[2][3] = {{"NCW", "NCHW", "NCDHW"}, {"NWC", "NHWC", "NDHWC"}};
    const bool pool = op == "max_pool" || op == "avg_pool";
    json layer = {{"name", "w" + std::to_string(layers.size())},
                  {"op", (pool ? op : std::string("conv")) + std::to_string(dims) + "d"},
                  {"input_shape", shape},
                  {"layout", layouts[cl][dims - 1]},
                  {"kernel", kernel},
                  {"stride", stride},
                  {"padding", paddings[rng() % 4]}};
    if (!pool) {
      layer["dilation"] = dilation;
      layer["out_channels"] = op == "depthwise" ? channels : pick(1, 5);
      if (op == "depthwise") layer["groups"] = channels;
      layer["bias"] = static_cast<bool>(rng() % 2);
    }
    if (layer["padding"] == "same") layer["convention"] = rng() % 2 ? "tensorflow" : "onnx";
    const json one = {{"model", "wide"}, {"layers", {layer}}};
    try {
      parse_spec(one.dump(), "wide.json");
    } catch (const std::exception&) {
      continue;  // a combination the spec refuses (causal on several axes, say)
    }
    layers.push_back(layer);
  }
  const int n = static_cast<int>(layers.size());
  return {"wide", json{{"model", "wide"}, {"layers", layers}}.dump(), json::object(), n};
}

CaseSet random_knob_cases(unsigned seed) {
  std::mt19937 rng(seed);
  json layers = json::array(), knobs = json::object();
  const std::vector<KernelCase> cases = make_kernel_cases(21, 1);
  for (size_t i = 0; i < cases.size(); i += 4) {
    json layer = json::parse(cases[i].spec)["layers"][0];
    layer["name"] = "k" + std::to_string(layers.size());
    json j = json::object();
    for (const Knob& k : padfold::knobs()) {
      if (std::string(k.scope) != "gpu" || std::string(k.name) == "gpu_max_registers") continue;
      const std::vector<int64_t> values = k.search_values();
      j[k.name] = values[rng() % values.size()];
    }
    knobs[layer["name"].get<std::string>()] = j;
    layers.push_back(layer);
  }
  const int n = static_cast<int>(layers.size());
  return {"knobs", json{{"model", "knobs"}, {"layers", layers}}.dump(), knobs, n};
}

}  // namespace padfold::testing
