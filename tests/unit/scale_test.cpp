// Large models stay linear: a 100k-layer spec through parse_spec and plan_fusion, and a 75k-node
// ONNX chain through the importer. Each takes a second or two; a lookup that scans every layer
// per layer again (W8: minutes) fails by the TIMEOUT tests/unit/CMakeLists.txt gives these tests.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "compile/fusion.h"
#include "frontend/onnx/import.h"
#include "frontend/spec.h"
#include "onnx_build.h"

namespace padfold {
namespace {

using json = nlohmann::json;

// Depthwise 3x3 and pointwise convs in turn, each reading the one before: dw->pw blocks that pay.
std::string dw_pw_chain_spec(int layers) {
  json l = json::array();
  for (int i = 0; i < layers; ++i) {
    json layer = {{"name", "l" + std::to_string(i)}, {"op", "conv2d"}, {"out_channels", 8}};
    if (i % 2 == 0) {
      layer["kernel"] = 3;
      layer["groups"] = 8;
      layer["padding"] = "same";
    } else {
      layer["kernel"] = 1;
    }
    if (i == 0) layer["input_shape"] = {1, 128, 128, 8};
    l.push_back(layer);
  }
  return json{{"model", "big"}, {"defaults", {{"layout", "NHWC"}}}, {"layers", l}}.dump();
}

TEST(Scale, HundredThousandLayerSpecParsesAndPlans) {
  const int n = 100000;
  const Model m = parse_spec(dw_pw_chain_spec(n), "big.json");
  ASSERT_EQ(m.layers.size(), static_cast<size_t>(n));
  EXPECT_EQ(m.outputs, std::vector<std::string>{"l" + std::to_string(n - 1)});
  const FusionPlan plan = plan_fusion(m, FuseOptions{});
  size_t covered = 0, fused = 0;
  for (const Block& b : plan.blocks) {
    covered += b.layers.size();
    if (b.fused()) ++fused;
  }
  EXPECT_EQ(covered, static_cast<size_t>(n));  // every layer in exactly one block
  EXPECT_GT(fused, static_cast<size_t>(n / 10));
}

// Every node named alike (ONNX does not require unique names: the layers become pool, pool_2,
// pool_3...), and an Identity after every other pool (bypassed).
TEST(Scale, FiftyThousandNodeOnnxChainImports) {
  const int n = 50000;
  onnx_test::ModelBuilder b;
  b.input("x", {1, 2, 4, 4});
  std::string prev = "x";
  for (int i = 0; i < n; ++i) {
    const std::string out = "t" + std::to_string(i);
    b.node("MaxPool", {prev}, {out}, "pool").ints("kernel_shape", {1, 1});
    prev = out;
    if (i % 2) {
      b.node("Identity", {prev}, {prev + "_id"}, "id");
      prev += "_id";
    }
  }
  b.output(prev);
  const auto prepared = onnx_import::prepare_model(b.model_copy(), {}, "chain.onnx");
  const onnx_import::ImportResult r = onnx_import::import_model(prepared, {});
  // The pools, computed channels last between the transposes of the NCHW input and output.
  ASSERT_EQ(r.model.layers.size(), static_cast<size_t>(n) + 2);
  const std::string last = prev;  // named after the graph output
  EXPECT_EQ(r.model.layers.back().name, last);
  EXPECT_EQ(r.model.layers.back().op, Op::Transpose);
  EXPECT_EQ(r.model.layers[r.model.layers.size() - 2].name, last + "_nhwc");
  EXPECT_EQ(r.model.layers[r.model.layers.size() - 2].inputs,
            std::vector<std::string>{"pool_" + std::to_string(n - 1)});
  EXPECT_EQ(r.model.outputs, std::vector<std::string>{last});
  EXPECT_TRUE(r.left_to_caller.empty());
}

}  // namespace
}  // namespace padfold
