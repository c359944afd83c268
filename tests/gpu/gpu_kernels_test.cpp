// GPU kernels over a subset of the op x convention x border x layout matrix where every op,
// convention, border mode and layout appears: OpenCL kernels run on PoCL through the C runtime
// and are compared element-wise with the naive reference; the CUDA kernels of the same matrix are
// compiled and their PTX assembled with ptxas for the default capability (sm_86) and for sm_90
// (an H200). PADFOLD_GPU_FULL_MATRIX=1 takes every case of the matrix (the gpu_full test).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "bundle_util.h"
#include "gpu_util.h"
#include "kernel_cases.h"
#include "schedules/knobs.h"

namespace padfold::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const char* const kBorderNames[] = {"zeros",     "constant",  "reflect",
                                    "symmetric", "replicate", "circular"};

// The matrix's cases as one spec: each case a layer of its own ("c<i>"), plus add, concat, mul
// (by one value per channel) and softmax of graph inputs in both layouts. By default two cases per
// (op, convention): borders k and k+3 (mod 6) of the k-th pair, which make_kernel_cases draws in
// opposite layouts.
struct Matrix {
  std::string spec;
  int cases = 0, tails = 0;
  int layers() const { return cases + tails + 8; }
};

const Matrix& matrix() {
  static const Matrix m = [] {
    const bool full = std::getenv("PADFOLD_GPU_FULL_MATRIX") != nullptr;
    std::map<std::string, int> key_index;
    json layers = json::array(), inputs = json::array();
    Matrix out;
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
      layer["name"] = "c" + std::to_string(out.cases++);
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
    };
    for (const char* t : tails) {
      json layer = json::parse(t);
      layer["name"] = "tail" + std::to_string(out.tails++);
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
    out.spec = json{{"model", "gpu_matrix"}, {"inputs", inputs}, {"layers", layers}}.dump();
    return out;
  }();
  return m;
}

// Every layer of `model` from the OpenCL bundle in `dir`, run on PoCL on random data and compared
// element-wise with the reference; `what` says which case a layer is. Returns how many ran.
int run_every_layer_on_pocl(const Model& model, const fs::path& dir,
                            const std::function<std::string(const Layer&)>& what) {
  char err[PF_ERRLEN] = "";
  pf_bundle* bundle = nullptr;
  EXPECT_EQ(pf_bundle_open(dir.c_str(), nullptr, &bundle, err, sizeof err), PF_OK) << err;
  if (!bundle) return 0;
  EXPECT_TRUE(contains(pf_bundle_target(bundle), "opencl")) << pf_bundle_target(bundle);
  unsigned seed = 1;
  int ran = 0;
  for (const Layer& L : model.layers) {
    const pf_kernel_desc* k = nullptr;
    EXPECT_EQ(pf_bundle_find(bundle, L.name.c_str(), &k, err, sizeof err), PF_OK) << err;
    if (!k) break;
    EXPECT_NE(k->device, nullptr) << L.name;
    const LayerCase c = make_layer_case(L, seed++);
    std::vector<float> out;
    std::string msg;
    EXPECT_EQ(run_case(k, c, out, msg), PF_OK) << L.name << ": " << msg;
    EXPECT_TRUE(matches_reference(c.reference, out.data(), out.size(), L.name)) << what(L);
    ++ran;
  }
  pf_bundle_close(bundle);
  return ran;
}

TEST(GpuMatrix, OpenClKernelsOnPoclMatchTheReference) {
  const Model model = parse_spec(matrix().spec, "gpu_matrix.json");
  // One tail case with the conservative family's knobs (what a failed compile falls back to).
  const json conservative = {{"tail1",
                              {{"gpu_threads_x", 8},
                               {"gpu_threads_y", 8},
                               {"gpu_tile_x", 1},
                               {"gpu_tile_y", 1},
                               {"gpu_unroll_channels", 1},
                               {"gpu_stage_kb", 0}}}};
  const fs::path dir =
      compile_test_bundle("opencl", matrix().spec, {"host-opencl"}, false, conservative);
  std::cout << matrix().cases << " matrix cases + " << matrix().tails
            << " tile-tail cases + 4 joins on host-opencl\n";
  const int ran = run_every_layer_on_pocl(model, dir, [](const Layer& L) {
    return L.op_name + ", " + to_string(L.border) + ", " + L.layout.name();
  });
  EXPECT_EQ(ran, matrix().layers());
}

// Layers whose window is wider than the input on at least one axis (kernels and dilations up to
// 5x the extent, inputs of 1-4 pixels, every spatial rank and layout), where a block's staged
// tile holds more border than input and most of its staging loops' iterations are border.
std::string wide_window_spec(int count, unsigned seed) {
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
  return json{{"model", "wide"}, {"layers", layers}}.dump();
}

TEST(GpuMatrix, WindowsWiderThanTheInputOnPoclMatchTheReference) {
  const std::string spec = wide_window_spec(48, 2026);
  const Model model = parse_spec(spec, "wide.json");
  const fs::path dir = compile_test_bundle("wide", spec, {"host-opencl"});
  const json layers = json::parse(spec)["layers"];
  EXPECT_EQ(
      run_every_layer_on_pocl(
          model, dir, [&](const Layer& L) { return layers[std::stoi(L.name.substr(1))].dump(); }),
      static_cast<int>(layers.size()));
}

// Every GPU knob at a random value of its range (search values: powers of two for the thread
// counts) on a quarter of a draw of the matrix: what a block cannot take as given is resolved.
TEST(GpuMatrix, RandomInRangeKnobsOnPoclMatchTheReference) {
  std::mt19937 rng(99);
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
  const std::string spec = json{{"model", "knobs"}, {"layers", layers}}.dump();
  const Model model = parse_spec(spec, "knobs.json");
  const fs::path dir = compile_test_bundle("knobs", spec, {"host-opencl"}, false, knobs);
  EXPECT_EQ(run_every_layer_on_pocl(model, dir,
                                    [&](const Layer& L) {
                                      return layers[std::stoi(L.name.substr(1))].dump() +
                                             "\nknobs " + knobs[L.name].dump();
                                    }),
            static_cast<int>(layers.size()));
}

#ifdef PADFOLD_PTXAS
TEST(GpuMatrix, CudaKernelsPtxAssemblesForSm86AndSm90) {
  const Model model = parse_spec(matrix().spec, "gpu_matrix.json");
  const fs::path dir = compile_test_bundle("cuda", matrix().spec, {"host-cuda"}, true);
  std::ifstream f(dir / "manifest.json");
  const json manifest = json::parse(f);
  const json& target = manifest["targets"][0];
  EXPECT_EQ(target["device_api"], "cuda");
  EXPECT_EQ(target["cuda_arch"], "sm_86");
  EXPECT_EQ(target["cuda_jit_max_registers"], 128);
  const fs::path tdir = dir / target["dir"].get<std::string>();
  int assembled = 0;
  for (const Layer& L : model.layers) {
    const fs::path ptx = tdir / (L.name + ".ptx");
    ASSERT_TRUE(fs::is_regular_file(ptx)) << ptx;
    for (const char* arch : {"sm_86", "sm_90"}) {
      const CommandResult r =
          run_command(std::string(PADFOLD_PTXAS) + " -arch=" + arch + " " + shell_quote(ptx) +
                      " -o " + shell_quote((tdir / (L.name + "." + arch + ".cubin")).string()));
      EXPECT_EQ(r.status, 0) << L.name << " " << arch << ":\n" << r.output;
      assembled += r.status == 0;
    }
  }
  EXPECT_EQ(assembled, 2 * matrix().layers());
  // The bordered input is staged in shared memory, except where the tile is too large.
  auto ptx_text = [&](const std::string& layer) {
    std::ifstream in(tdir / (layer + ".ptx"));
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_TRUE(contains(ptx_text("tail0"), ".shared")) << "tail0: nothing staged";
  EXPECT_TRUE(contains(ptx_text("c0"), ".shared")) << "c0: nothing staged";
  EXPECT_FALSE(contains(ptx_text("tail7"), ".shared")) << "tail7: a 110 KiB tile staged";
}
#endif

}  // namespace
}  // namespace padfold::testing
