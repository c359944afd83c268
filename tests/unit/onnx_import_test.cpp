// The ONNX importer (generator/frontend/onnx) on small models built here with the protobuf
// classes: each op mapping, SAME_UPPER/SAME_LOWER strided and even kernels, Pad folding (reflect,
// edge, constant, with the reader's own pads, before a max pool), activation fusion, Add/Concat,
// nodes left to the caller, names, dynamic dims and --input, bad models, and --emit-onnx's
// auto_pad rewrite.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "frontend/onnx/constant_fold.h"
#include "frontend/onnx/import.h"
#include "frontend/onnx/normalize.h"
#include "frontend/spec.h"
#include "model_compare.h"
#include "onnx_build.h"

namespace padfold::onnx_test {
namespace {

using json = nlohmann::json;
using onnx_import::ImportResult;
using onnx_import::InputSize;
using onnx_import::kGeneratedOps;
using onnx_import::not_generated_reason;

// The tests of the graph passes import as the model file lays it out: the layers channels first
// (--layout nchw) where the model is, channels last behind tf2onnx's edge Transposes. The default
// (channels last, transposes at channels-first inputs and outputs) has tests of its own
// (OnnxImportLayout.*).
onnx_import::ImportOptions file_layout() {
  onnx_import::ImportOptions o;
  o.layout = onnx_import::ImportLayout::ChannelsFirst;
  return o;
}

// Every import's spec text must parse back to the model the importer built (the importer resolves
// its layers itself and never runs the parser).
// The warning of channels-first convs (an NCHW import with a conv has it under --layout nchw) is
// checked by ChannelsFirstConvsWarnOfTheirCost and left out of the others' warnings.
ImportResult import(const ModelBuilder& b, const std::vector<InputSize>& sizes = {},
                    const onnx_import::ImportOptions& options = file_layout()) {
  ImportResult r = onnx_import::prepare_and_import(b.model_copy(), sizes, "m.onnx", options).result;
  const Model back = parse_spec(r.spec.dump(), r.model.file);
  EXPECT_EQ(testing::model_difference(r.model, back), "") << r.spec.dump(2);
  r.warnings.erase(std::remove_if(r.warnings.begin(), r.warnings.end(),
                                  [](const std::string& w) {
                                    return w.find("computed channels first") != std::string::npos;
                                  }),
                   r.warnings.end());
  return r;
}

// The message of the ImportError importing `b` throws ("" if none).
std::string import_error(const ModelBuilder& b, const std::vector<InputSize>& sizes = {}) {
  try {
    onnx_import::prepare_and_import(onnx_import::parse_model(b.bytes(), "m.onnx"), sizes, "m.onnx",
                                    file_layout());
  } catch (const onnx_import::ImportError& e) {
    return e.what();
  }
  return "";
}

json spec(const ImportResult& r) {
  return json::parse(r.spec.dump());
}

// The reason node `name` is left to the caller with, or "not left".
std::string left_reason(const ImportResult& r, const std::string& name) {
  for (const auto& n : r.left_to_caller)
    if (n.name == name) return n.reason;
  return "not left";
}

json rep(const ImportResult& r) {
  return json::parse(r.report.dump());
}

json layer(const ImportResult& r, size_t i) {
  return spec(r)["layers"].at(i);
}

// The report's absorbed nodes: name -> role.
std::map<std::string, std::string> absorbed_roles(const ImportResult& r) {
  std::map<std::string, std::string> roles;
  const json report = rep(r);
  for (const auto& n : report["absorbed"]) roles[n["name"]] = n["role"];
  return roles;
}

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// x [1, c, h, w] -> Conv(name) with weights w_<name> [m, c/group, k, k] (and bias b_<name>).
NodeRef add_conv(ModelBuilder& b, const std::string& name, const std::string& in,
                 const std::string& out, int64_t c, int64_t m, int64_t k, bool bias = true,
                 int64_t group = 1) {
  b.initializer("w_" + name, {m, c / group, k, k});
  std::vector<std::string> inputs = {in, "w_" + name};
  if (bias) {
    b.initializer("b_" + name, {m});
    inputs.push_back("b_" + name);
  }
  NodeRef n = b.node("Conv", inputs, {out}, name);
  if (group != 1) n.i("group", group);
  return n;
}

// Forced to compute channels first (--layout nchw), an NCHW model's convs cost whole models on
// CPUs: the import warns, naming the count and the layout; by default (channels last) it does not.
TEST(OnnxImport, ChannelsFirstConvsWarnOfTheirCost) {
  ModelBuilder b;
  b.input("x", {1, 3, 7, 7}).output("y");
  add_conv(b, "stem", "x", "y", 3, 8, 4).ints("strides", {2, 2}).str("auto_pad", "SAME_UPPER");
  const auto prepared = onnx_import::prepare_model(b.model_copy(), {}, "m.onnx");
  const ImportResult first = onnx_import::import_model(prepared, file_layout());
  ASSERT_EQ(first.warnings.size(), 1u);
  EXPECT_TRUE(has(first.warnings[0], "1 of the 1 convolutions are computed channels first (NCHW);"))
      << first.warnings[0];
  for (const std::string& w : onnx_import::import_model(prepared, {}).warnings)
    EXPECT_FALSE(has(w, "computed channels first")) << w;
}

TEST(OnnxImport, ConvSameUpperStrided) {
  ModelBuilder b;
  b.input("x", {1, 3, 7, 7}).output("y");
  add_conv(b, "stem", "x", "y", 3, 8, 4).ints("strides", {2, 2}).str("auto_pad", "SAME_UPPER");
  const ImportResult r = import(b);
  const json s = spec(r);
  EXPECT_EQ(s["model"], "m");
  EXPECT_EQ(s["inputs"], json::parse(R"j([{"name": "x", "shape": [1, 3, 7, 7], "layout": "NCHW",
      "dtype": "float32", "description": "ONNX graph input 'x'"}])j"));
  // The layer computing graph output 'y' is named after it: what the user asks `run` for.
  EXPECT_EQ(s["outputs"], json::parse(R"j(["y"])j"));
  json l = layer(r, 0);
  EXPECT_TRUE(has(l["description"], "Conv 'stem'")) << l;
  l.erase("description");
  EXPECT_EQ(l, json::parse(R"j({"name": "y", "op": "conv2d", "input": "x",
      "input_shape": [1, 3, 7, 7], "layout": "NCHW", "weight_layout": "OIHW", "out_channels": 8,
      "kernel": [4, 4], "stride": [2, 2], "dilation": [1, 1], "groups": 1,
      "padding": "same_upper", "bias": true,
      "weight_files": {"weights": "weights/y_weights.npy", "bias": "weights/y_bias.npy"}})j"));
  ASSERT_EQ(r.weights.size(), 2u);
  EXPECT_EQ(r.weights[0].path, "weights/y_weights.npy");
  EXPECT_EQ(r.weights[0].shape, (std::vector<int64_t>{8, 3, 4, 4}));
  EXPECT_EQ(r.weights[0].data, test_values(8 * 3 * 4 * 4));
  EXPECT_EQ(r.weights[1].shape, (std::vector<int64_t>{8}));
  EXPECT_EQ(r.weights[1].data, test_values(8));
  EXPECT_EQ(rep(r)["layers"][0]["output_shape"], json::parse("[1, 8, 4, 4]"));
  EXPECT_TRUE(r.left_to_caller.empty());
  EXPECT_TRUE(r.warnings.empty()) << r.warnings[0];
}

TEST(OnnxImport, ShapeInferenceReachesGraphOutputs) {
  ModelBuilder b;
  b.input("x", {1, 3, 7, 7}).output("y");
  add_conv(b, "stem", "x", "y", 3, 8, 4).ints("strides", {2, 2});
  const auto prepared = onnx_import::prepare_model(b.model_copy(), {}, "m.onnx");
  const onnx_import::GraphIndex g(prepared.inferred, "m.onnx");
  ASSERT_TRUE(g.type("y"));
  EXPECT_EQ(g.type("y")->shape, (std::vector<int64_t>{1, 8, 2, 2}));
}

TEST(OnnxImport, SameLowerAndEvenKernelsOnConvAndPools) {
  ModelBuilder b;
  b.input("x", {1, 2, 8, 8}).input("p", {1, 2, 7, 7}).input("q", {1, 2, 9, 9});
  add_conv(b, "c", "x", "y", 2, 4, 3, false).ints("strides", {3, 3}).str("auto_pad", "SAME_LOWER");
  b.node("MaxPool", {"p"}, {"mp"}, "mp")
      .ints("kernel_shape", {2, 2})
      .ints("strides", {3, 3})
      .str("auto_pad", "SAME_UPPER");
  b.node("AveragePool", {"q"}, {"ap"}, "ap")
      .ints("kernel_shape", {4, 4})
      .ints("strides", {2, 2})
      .str("auto_pad", "SAME_LOWER");
  b.output("y").output("mp").output("ap");
  const ImportResult r = import(b);
  EXPECT_EQ(layer(r, 0)["padding"], "same_lower");
  EXPECT_FALSE(layer(r, 0)["bias"]);
  EXPECT_EQ(layer(r, 0)["weight_files"], json::parse(R"j({"weights": "weights/y_weights.npy"})j"));
  EXPECT_EQ(layer(r, 1)["op"], "max_pool2d");
  EXPECT_EQ(layer(r, 1)["padding"], "same_upper");
  EXPECT_EQ(layer(r, 2)["op"], "avg_pool2d");
  EXPECT_EQ(layer(r, 2)["padding"], "same_lower");
  EXPECT_EQ(layer(r, 2)["count_include_pad"], false);
  // The shapes libonnx's shape inference gives (wave2 anchors C1), computed by padfold.
  EXPECT_EQ(rep(r)["layers"][0]["output_shape"], json::parse("[1, 4, 3, 3]"));
  EXPECT_EQ(rep(r)["layers"][1]["output_shape"], json::parse("[1, 2, 3, 3]"));
  EXPECT_EQ(rep(r)["layers"][2]["output_shape"], json::parse("[1, 2, 5, 5]"));
  EXPECT_TRUE(r.warnings.empty()) << r.warnings[0];
}

TEST(OnnxImport, Conv1dAnd3dGroupsDilationsPads) {
  ModelBuilder b;
  b.input("x", {1, 4, 10}).input("v", {1, 2, 5, 6, 7});
  b.initializer("w1", {6, 2, 3});
  b.node("Conv", {"x", "w1"}, {"y1"}, "c1")
      .i("group", 2)
      .ints("dilations", {2})
      .ints("pads", {1, 2});
  b.initializer("w3", {3, 2, 2, 3, 3});
  b.node("Conv", {"v", "w3"}, {"y3"}, "c3").ints("strides", {1, 2, 2}).str("auto_pad", "VALID");
  b.output("y1").output("y3");
  const ImportResult r = import(b);
  const json l1 = layer(r, 0), l3 = layer(r, 1);
  EXPECT_EQ(l1["op"], "conv1d");
  EXPECT_EQ(l1["layout"], "NCW");
  EXPECT_EQ(l1["weight_layout"], "OIW");
  EXPECT_EQ(l1["groups"], 2);
  EXPECT_EQ(l1["out_channels"], 6);
  EXPECT_EQ(l1["dilation"], json::parse("[2]"));
  EXPECT_EQ(l1["padding"], json::parse(R"j({"pads": [1, 2]})j"));
  EXPECT_EQ(rep(r)["layers"][0]["output_shape"], json::parse("[1, 6, 9]"));
  EXPECT_EQ(l3["op"], "conv3d");
  EXPECT_EQ(l3["layout"], "NCDHW");
  EXPECT_EQ(l3["weight_layout"], "OIDHW");
  EXPECT_EQ(l3["padding"], "valid");
  EXPECT_EQ(rep(r)["layers"][1]["output_shape"], json::parse("[1, 3, 4, 2, 3]"));
}

TEST(OnnxImport, ConvTransposeOutputPaddingSameAndOutputShape) {
  ModelBuilder b;
  b.input("x", {1, 2, 3, 3});
  b.initializer("w", {2, 3, 3, 3});
  b.node("ConvTranspose", {"x", "w"}, {"y1"}, "up1")
      .ints("strides", {2, 2})
      .ints("output_padding", {1, 1})
      .ints("pads", {0, 0, 1, 1});
  b.node("ConvTranspose", {"x", "w"}, {"y2"}, "up2")
      .ints("strides", {2, 2})
      .str("auto_pad", "SAME_UPPER");
  b.node("ConvTranspose", {"x", "w"}, {"y3"}, "up3")
      .ints("strides", {3, 2})
      .ints("output_shape", {10, 8});
  b.output("y1").output("y2").output("y3");
  const ImportResult r = import(b);
  const json l1 = layer(r, 0);
  EXPECT_EQ(l1["op"], "conv_transpose2d");
  EXPECT_EQ(l1["weight_layout"], "IOHW");
  EXPECT_EQ(l1["out_channels"], 3);
  EXPECT_EQ(l1["output_padding"], json::parse("[1, 1]"));
  EXPECT_EQ(l1["padding"], json::parse(R"j({"pads": [0, 0, 1, 1]})j"));
  EXPECT_EQ(rep(r)["layers"][0]["output_shape"], json::parse("[1, 3, 7, 7]"));
  EXPECT_EQ(layer(r, 1)["padding"], "same_upper");
  EXPECT_EQ(rep(r)["layers"][1]["output_shape"], json::parse("[1, 3, 6, 6]"));
  EXPECT_EQ(layer(r, 2)["output_shape"], json::parse("[10, 8]"));
  EXPECT_EQ(rep(r)["layers"][2]["output_shape"], json::parse("[1, 3, 10, 8]"));
  EXPECT_TRUE(r.warnings.empty()) << r.warnings[0];
}

TEST(OnnxImport, PoolAttributes) {
  ModelBuilder b;
  b.input("x", {1, 2, 9, 9});
  b.node("MaxPool", {"x"}, {"m"}, "mp")
      .ints("kernel_shape", {3, 3})
      .ints("strides", {2, 2})
      .ints("dilations", {2, 1})
      .ints("pads", {1, 1, 1, 1})
      .i("ceil_mode", 1);
  b.node("AveragePool", {"x"}, {"a"}, "ap")
      .ints("kernel_shape", {2, 2})
      .ints("strides", {2, 2})
      .ints("pads", {1, 0, 1, 0})
      .i("count_include_pad", 1)
      .i("ceil_mode", 1);
  b.output("m").output("a");
  const ImportResult r = import(b);
  const json m = layer(r, 0), a = layer(r, 1);
  EXPECT_EQ(m["dilation"], json::parse("[2, 1]"));
  EXPECT_EQ(m["ceil_mode"], true);
  EXPECT_EQ(m["padding"], json::parse(R"j({"pads": [1, 1, 1, 1]})j"));
  EXPECT_FALSE(m.contains("count_include_pad"));
  EXPECT_EQ(a["count_include_pad"], true);
  EXPECT_EQ(a["ceil_mode"], true);
}

// x -> Pad(mode, pads) -> reader; returns the builder with the Pad named "pad".
ModelBuilder pad_model(const std::string& mode, const std::vector<int64_t>& pads, float value,
                       const std::function<void(ModelBuilder&)>& reader) {
  ModelBuilder b;
  b.input("x", {1, 2, 6, 6}).output("y");
  b.int_initializer("pads", pads);
  std::vector<std::string> inputs = {"x", "pads"};
  if (value != 0.f) {
    b.initializer("value", {}, {value});
    inputs.push_back("value");
  }
  b.node("Pad", inputs, {"xp"}, "pad").str("mode", mode);
  reader(b);
  return b;
}

TEST(OnnxImport, PadReflectAndEdgeFoldIntoConv) {
  for (const auto& [mode, border] :
       {std::pair<std::string, std::string>{"reflect", "reflect"}, {"edge", "replicate"}}) {
    const ModelBuilder b = pad_model(mode, {0, 0, 1, 2, 0, 0, 1, 2}, 0.f, [](ModelBuilder& m) {
      add_conv(m, "conv", "xp", "y", 2, 4, 3);
    });
    const ImportResult r = import(b);
    ASSERT_EQ(spec(r)["layers"].size(), 1u);
    const json l = layer(r, 0);
    EXPECT_EQ(l["input"], "x") << mode;
    EXPECT_EQ(l["input_shape"], json::parse("[1, 2, 6, 6]"));
    EXPECT_EQ(l["padding"], json::parse(R"j({"pads": [1, 2, 1, 2]})j")) << mode;
    EXPECT_EQ(l["border"], border);
    EXPECT_TRUE(has(l["description"], "Pad 'pad' (" + mode + ", folded) + Conv 'conv'")) << l;
    EXPECT_TRUE(r.left_to_caller.empty()) << r.left_to_caller[0].reason;
    EXPECT_EQ(rep(r)["layers"][0]["output_shape"], json::parse("[1, 4, 6, 8]"));
    EXPECT_EQ(rep(r)["layers"][0]["onnx_nodes"][0]["role"], "pad");
  }
}

TEST(OnnxImport, ZeroPadAddsToTheConvsOwnPads) {
  const ModelBuilder b = pad_model("constant", {0, 0, 1, 1, 0, 0, 1, 1}, 0.f, [](ModelBuilder& m) {
    add_conv(m, "conv", "xp", "y", 2, 4, 3).ints("pads", {1, 0, 1, 0});
  });
  const ImportResult r = import(b);
  const json l = layer(r, 0);
  EXPECT_EQ(l["padding"], json::parse(R"j({"pads": [2, 1, 2, 1]})j"));
  EXPECT_FALSE(l.contains("border"));
  EXPECT_EQ(rep(r)["layers"][0]["output_shape"], json::parse("[1, 4, 8, 6]"));
}

TEST(OnnxImport, ZeroPadBeforeASameConvAddsTheResolvedPads) {
  // Padded 8x8, k3 s2 SAME_UPPER on it: (0, 1); with the Pad's 1 on each side: (1, 2).
  const ModelBuilder b = pad_model("constant", {0, 0, 1, 1, 0, 0, 1, 1}, 0.f, [](ModelBuilder& m) {
    add_conv(m, "conv", "xp", "y", 2, 4, 3).ints("strides", {2, 2}).str("auto_pad", "SAME_UPPER");
  });
  const ImportResult r = import(b);
  EXPECT_EQ(layer(r, 0)["padding"], json::parse(R"j({"pads": [1, 1, 2, 2]})j"));
  EXPECT_EQ(rep(r)["layers"][0]["output_shape"], json::parse("[1, 4, 4, 4]"));
}

TEST(OnnxImport, ConstantPadValueIsTheBorder) {
  const ModelBuilder b = pad_model("constant", {0, 0, 1, 1, 0, 0, 1, 1}, 0.5f, [](ModelBuilder& m) {
    add_conv(m, "conv", "xp", "y", 2, 4, 3);
  });
  EXPECT_EQ(layer(import(b), 0)["border"], json::parse(R"j({"mode": "constant", "value": 0.5})j"));
}

TEST(OnnxImport, ZeroPadBeforeMaxPoolIsAConstantBorderNotZeros) {
  // A max pool ignores zero padding (padded taps never win) but the Pad's zeros take part.
  const ModelBuilder b = pad_model("constant", {0, 0, 1, 1, 0, 0, 1, 1}, 0.f, [](ModelBuilder& m) {
    m.node("MaxPool", {"xp"}, {"y"}, "mp").ints("kernel_shape", {3, 3});
  });
  const ImportResult r = import(b);
  EXPECT_EQ(layer(r, 0)["border"], json::parse(R"j({"mode": "constant", "value": 0.0})j"));
  EXPECT_EQ(layer(r, 0)["padding"], json::parse(R"j({"pads": [1, 1, 1, 1]})j"));
}

TEST(OnnxImport, PadBeforeMaxPoolWithItsOwnPadsIsLeft) {
  const ModelBuilder b = pad_model("constant", {0, 0, 1, 1, 0, 0, 1, 1}, 0.f, [](ModelBuilder& m) {
    m.node("MaxPool", {"xp"}, {"y"}, "mp").ints("kernel_shape", {3, 3}).ints("pads", {1, 1, 1, 1});
  });
  const ImportResult r = import(b);
  ASSERT_EQ(r.left_to_caller.size(), 1u);
  EXPECT_EQ(r.left_to_caller[0].name, "pad");
  EXPECT_TRUE(has(r.left_to_caller[0].reason, "never win the max")) << r.left_to_caller[0].reason;
  EXPECT_EQ(layer(r, 0)["input"], "xp");
  EXPECT_EQ(spec(r)["inputs"][0]["produced_by"], "ONNX node 'pad' (Pad)");
  EXPECT_EQ(spec(r)["inputs"][0]["shape"], json::parse("[1, 2, 8, 8]"));
}

TEST(OnnxImport, ZeroPadBeforeAvgPoolCountsThePaddedTaps) {
  const ModelBuilder b = pad_model("constant", {0, 0, 1, 1, 0, 0, 1, 1}, 0.f, [](ModelBuilder& m) {
    m.node("AveragePool", {"xp"}, {"y"}, "ap").ints("kernel_shape", {3, 3});
  });
  const json l = layer(import(b), 0);
  EXPECT_EQ(l["count_include_pad"], true);
  EXPECT_EQ(l["padding"], json::parse(R"j({"pads": [1, 1, 1, 1]})j"));
  EXPECT_FALSE(l.contains("border"));
}

TEST(OnnxImport, PadsThatCannotFoldAreLeftWithTheReason) {
  struct Case {
    std::string mode;
    std::vector<int64_t> pads;
    std::vector<int64_t> conv_pads;
    std::string reason;
  };
  const Case cases[] = {
      {"reflect", {0, 0, 1, 1, 0, 0, 1, 1}, {1, 1, 1, 1}, "no single border"},
      {"constant", {0, 1, 1, 1, 0, 0, 1, 1}, {0, 0, 0, 0}, "batch or channel axis"},
      {"constant", {0, 0, -1, 0, 0, 0, 0, 0}, {1, 0, 0, 0}, "where the crop cuts"},
      {"reflect", {0, 0, 6, 0, 0, 0, 0, 0}, {0, 0, 0, 0}, "padfold refuses it"},
  };
  for (const Case& k : cases) {
    const ModelBuilder b = pad_model(k.mode, k.pads, 0.f, [&](ModelBuilder& m) {
      const int64_t c = k.pads[1] ? 3 : 2;
      add_conv(m, "conv", "xp", "y", c, 4, 1).ints("pads", k.conv_pads);
    });
    const ImportResult r = import(b);
    ASSERT_EQ(r.left_to_caller.size(), 1u) << k.reason;
    EXPECT_EQ(r.left_to_caller[0].op_type, "Pad");
    EXPECT_TRUE(has(r.left_to_caller[0].reason, k.reason)) << r.left_to_caller[0].reason;
    EXPECT_EQ(layer(r, 0)["input"], "xp");
  }
}

// A Pad read by two convs (NASNet pads once for two separable convs) folds into both; one read
// also by an op that cannot take it folds into none and is left.
TEST(OnnxImport, PadReadByTwoConvsFoldsIntoBoth) {
  const ModelBuilder b = pad_model("constant", {0, 0, 1, 2, 0, 0, 1, 2}, 0.f, [](ModelBuilder& m) {
    add_conv(m, "c3", "xp", "a", 2, 4, 3).ints("strides", {2, 2});
    add_conv(m, "c5", "xp", "y", 2, 4, 5).ints("pads", {1, 0, 1, 0});
    m.output("a");
  });
  const ImportResult r = import(b);
  ASSERT_TRUE(r.left_to_caller.empty()) << r.left_to_caller[0].reason;
  ASSERT_EQ(spec(r)["layers"].size(), 2u);
  EXPECT_EQ(layer(r, 0)["input"], "x");
  EXPECT_EQ(layer(r, 0)["padding"], json::parse(R"j({"pads": [1, 2, 1, 2]})j"));
  EXPECT_EQ(layer(r, 1)["input"], "x");
  EXPECT_EQ(layer(r, 1)["padding"], json::parse(R"j({"pads": [2, 2, 2, 2]})j"));
  for (int k : {0, 1}) EXPECT_EQ(rep(r)["layers"][k]["onnx_nodes"][0]["role"], "pad") << k;

  const ModelBuilder mixed =
      pad_model("constant", {0, 0, 1, 1, 0, 0, 1, 1}, 0.f, [](ModelBuilder& m) {
        add_conv(m, "conv", "xp", "c", 2, 2, 3);
        m.node("Relu", {"xp"}, {"y"}, "other");
        m.output("c");
      });
  const ImportResult left = import(mixed);
  ASSERT_FALSE(left.left_to_caller.empty());
  EXPECT_EQ(left.left_to_caller[0].name, "pad");
  EXPECT_TRUE(has(left.left_to_caller[0].reason, "not folded: its reader 'other' (Relu)"))
      << left.left_to_caller[0].reason;
  EXPECT_EQ(layer(left, 0)["input"], "xp");
}

// A Slice cropping the spatial axes folds into the convs and pools reading it as negative pads,
// and a Pad before it then folds too: Keras NASNet's ZeroPadding2D(((0, 1), (0, 1))) and
// Cropping2D(((1, 0), (1, 0))) before a 1x1 stride-2 AveragePool are one pool reading x shifted
// by a pixel, the Pad's zeros counted.
TEST(OnnxImport, CropsFoldAsNegativePads) {
  const ModelBuilder b = pad_model("constant", {0, 0, 0, 0, 0, 0, 1, 1}, 0.f, [](ModelBuilder& m) {
    m.int_initializer("starts", {0, 1, 1, 0})
        .int_initializer("ends", {1 << 30, 1 << 30, 1 << 30, 1 << 30});
    m.int_initializer("axes", {0, 2, 3, 1});
    m.node("Slice", {"xp", "starts", "ends", "axes"}, {"xc"}, "crop");
    m.node("AveragePool", {"xc"}, {"y"}, "pool")
        .ints("kernel_shape", {1, 1})
        .ints("strides", {2, 2});
  });
  const ImportResult r = import(b);
  ASSERT_TRUE(r.left_to_caller.empty()) << r.left_to_caller[0].reason;
  ASSERT_EQ(spec(r)["layers"].size(), 1u);
  EXPECT_EQ(layer(r, 0)["input"], "x");
  EXPECT_EQ(layer(r, 0)["padding"], json::parse(R"j({"pads": [-1, -1, 1, 1]})j"));
  EXPECT_EQ(layer(r, 0)["count_include_pad"], true);
  EXPECT_EQ(rep(r)["layers"][0]["output_shape"], json::parse("[1, 2, 3, 3]"));
  std::set<std::string> roles;
  const json report = rep(r);
  for (const auto& n : report["layers"][0]["onnx_nodes"])
    roles.insert(n["role"].get<std::string>());
  EXPECT_EQ(roles, (std::set<std::string>{"pad", "crop", "layer"}));

  // A crop alone before a conv with pads of its own on other sides; a crop of the start under the
  // conv's own padding there is left, as is a strided Slice.
  for (const auto& [starts, steps, folds] :
       {std::tuple<std::vector<int64_t>, std::vector<int64_t>, bool>{{1, 0}, {1, 1}, true},
        {{0, 2}, {1, 1}, false},
        {{1, 0}, {2, 1}, false}}) {
    ModelBuilder c;
    c.input("x", {1, 2, 7, 7}).output("y");
    c.int_initializer("starts", starts).int_initializer("ends", {6, 7});
    c.int_initializer("axes", {2, 3}).int_initializer("steps", steps);
    c.node("Slice", {"x", "starts", "ends", "axes", "steps"}, {"xc"}, "crop");
    add_conv(c, "conv", "xc", "y", 2, 3, 3).ints("pads", {0, 1, 0, 1});
    const ImportResult rc = import(c);
    if (folds) {
      ASSERT_TRUE(rc.left_to_caller.empty()) << rc.left_to_caller[0].reason;
      EXPECT_EQ(layer(rc, 0)["input"], "x");
      EXPECT_EQ(layer(rc, 0)["padding"], json::parse(R"j({"pads": [-1, 1, -1, 1]})j"));
      EXPECT_EQ(rep(rc)["layers"][0]["output_shape"], json::parse("[1, 3, 3, 7]"));
    } else {
      const std::string why = left_reason(rc, "crop");
      EXPECT_TRUE(has(why, steps[0] == 2 ? "a strided or reversed run" : "where the crop cuts"))
          << why;
      EXPECT_EQ(layer(rc, 0)["input"], "xc");
    }
  }
}

// A Slice left to the caller keeps the reason that fits it: one of channels only is a gather's,
// not a crop's (the crop check named "the channels and a spatial axis" for it).
TEST(OnnxImport, ALeftSliceSaysWhatItSlices) {
  for (const auto& [axes, starts, expected] :
       {std::tuple<std::vector<int64_t>, std::vector<int64_t>, std::string>{
            {1}, {2}, "it takes no channels"},
        {{1, 2}, {1, 1}, "it slices axis 1 (the channels) and a spatial axis"}}) {
    ModelBuilder m;
    m.input("x", {1, 2, 7, 7}).output("y");
    m.int_initializer("starts", starts)
        .int_initializer("ends", std::vector<int64_t>(axes.size(), 1 << 30));
    m.int_initializer("axes", axes);
    m.node("Slice", {"x", "starts", "ends", "axes"}, {"y"}, "slice");
    // Its only node left, the import fails giving the reason.
    const std::string why = import_error(m);
    EXPECT_TRUE(has(why, "'slice' (Slice): " + expected)) << why;
  }
}

// A channel Split is a layer with no window: a Pad or crop it reads stays (folded into its
// gather it changed the gather's spatial size; diff_onnx_ort seed 291 found it with a crop).
TEST(OnnxImport, APadReadByAChannelSplitIsNotFolded) {
  const ModelBuilder b = pad_model("constant", {0, 0, 0, 0, 0, 0, 0, -1}, 0.f, [](ModelBuilder& m) {
    add_conv(m, "conv", "xp", "y", 2, 3, 3);
    m.int_initializer("sizes", {1, 1});
    m.node("Split", {"xp", "sizes"}, {"a", "b"}, "halves").i("axis", 1);
    m.output("a");
  });
  const ImportResult r = import(b);
  // The Split is read as two channel Slices before import.
  EXPECT_TRUE(has(left_reason(r, "pad"), "(Slice) is not a padfold conv or pool"))
      << left_reason(r, "pad");
  EXPECT_EQ(layer(r, 0)["input"], "xp");
}

TEST(OnnxImport, ActivationsFuseIntoTheConv) {
  ModelBuilder b;
  b.input("x", {1, 2, 5, 5});
  add_conv(b, "c1", "x", "t1", 2, 2, 3).ints("pads", {1, 1, 1, 1});
  b.node("Relu", {"t1"}, {"r1"}, "relu1");
  add_conv(b, "c2", "r1", "t2", 2, 2, 1);
  b.initializer("zero", {}, {0.f}).initializer("six", {}, {6.f});
  b.node("Clip", {"t2", "zero", "six"}, {"r2"}, "clip");
  add_conv(b, "c3", "r2", "t3", 2, 2, 1);
  b.node("LeakyRelu", {"t3"}, {"r3"}, "leaky").f("alpha", 0.25f);
  b.output("r3");
  const ImportResult r = import(b);
  ASSERT_EQ(spec(r)["layers"].size(), 3u);
  EXPECT_EQ(layer(r, 0)["activation"], "relu");
  EXPECT_EQ(layer(r, 1)["activation"], "relu6");
  EXPECT_EQ(layer(r, 1)["input"], "c1");
  EXPECT_EQ(layer(r, 2)["activation"], json::parse(R"j({"type": "leaky_relu", "alpha": 0.25})j"));
  EXPECT_EQ(layer(r, 2)["input"], "c2");
  EXPECT_TRUE(has(layer(r, 0)["description"], "Conv 'c1' + Relu 'relu1'; output tensor 'r1'"));
  EXPECT_EQ(spec(r)["outputs"], json::parse(R"j(["r3"])j"));
  EXPECT_TRUE(r.left_to_caller.empty());
  EXPECT_EQ(rep(r)["absorbed"].size(), 0u);
}

// An activation that fuses into no layer (its input is also a graph output, or a pool's) is a
// layer of its own: an activation layer, no weights. A Clip that is no activation padfold has is
// left.
TEST(OnnxImport, ActivationsThatCannotFuseAreLayersOfTheirOwn) {
  ModelBuilder b(10);  // Clip with min/max attributes
  b.input("x", {1, 2, 5, 5});
  add_conv(b, "c1", "x", "t1", 2, 2, 1);
  b.node("Relu", {"t1"}, {"r1"}, "relu1");  // t1 is also a graph output
  add_conv(b, "c2", "x", "t2", 2, 2, 1);
  b.node("Clip", {"t2"}, {"r2"}, "clip").f("min", -1.f).f("max", 1.f);
  b.node("MaxPool", {"x"}, {"p"}, "mp").ints("kernel_shape", {1, 1});
  b.node("Relu", {"p"}, {"r3"}, "relu3");
  b.output("t1").output("r1").output("r2").output("r3");
  const ImportResult r = import(b);
  ASSERT_EQ(r.left_to_caller.size(), 1u);
  EXPECT_EQ(r.left_to_caller[0].name, "clip");
  EXPECT_TRUE(has(r.left_to_caller[0].reason, "neither relu")) << r.left_to_caller[0].reason;
  EXPECT_EQ(spec(r)["outputs"], json::parse(R"j(["t1", "r1", "c2", "r3"])j"));
  const json layers = spec(r)["layers"];
  for (const auto& [name, input] : {std::pair{"r1", "t1"}, std::pair{"r3", "mp"}}) {
    json l;
    for (const json& x : layers)
      if (x["name"] == name) l = x;
    ASSERT_FALSE(l.is_null()) << name;
    EXPECT_EQ(l["op"], "activation");
    EXPECT_EQ(l["input"], input);
    EXPECT_EQ(l["activation"], "relu");
    EXPECT_FALSE(l.contains("weights")) << l.dump();
  }
  for (const auto& w : r.weights) EXPECT_NE(w.path.find("weights/r"), 0u) << w.path;
}

TEST(OnnxImport, ResidualAddAndConcat) {
  ModelBuilder b;
  b.input("x", {1, 4, 6, 6});
  add_conv(b, "c1", "x", "t1", 4, 4, 3).ints("pads", {1, 1, 1, 1});
  b.node("Add", {"t1", "x"}, {"s"}, "add");
  b.node("Relu", {"s"}, {"sr"}, "relu");
  add_conv(b, "c2", "sr", "t2", 4, 2, 1);
  add_conv(b, "c3", "sr", "t3", 4, 3, 1);
  b.node("Concat", {"t2", "t3"}, {"cat"}, "cat").i("axis", 1);
  b.initializer("k", {1, 5, 6, 6});
  b.node("Add", {"cat", "k"}, {"y"}, "add_const");
  b.output("y");
  const ImportResult r = import(b);
  ASSERT_EQ(spec(r)["layers"].size(), 5u);
  EXPECT_EQ(layer(r, 1)["op"], "add");
  EXPECT_EQ(layer(r, 1)["input"], json::parse(R"j(["c1", "x"])j"));
  EXPECT_EQ(layer(r, 1)["activation"], "relu");
  EXPECT_EQ(layer(r, 1)["layout"], "NCHW");
  EXPECT_FALSE(layer(r, 1).contains("input_shape"));
  EXPECT_EQ(layer(r, 4)["op"], "concat");
  EXPECT_EQ(layer(r, 4)["input"], json::parse(R"j(["c2", "c3"])j"));
  EXPECT_EQ(rep(r)["layers"][4]["output_shape"], json::parse("[1, 5, 6, 6]"));
  ASSERT_EQ(r.left_to_caller.size(), 1u);
  EXPECT_EQ(r.left_to_caller[0].name, "add_const");
  EXPECT_TRUE(has(r.left_to_caller[0].reason, "constant")) << r.left_to_caller[0].reason;
  EXPECT_EQ(spec(r)["outputs"], json::parse(R"j(["cat"])j"));
}

TEST(OnnxImport, LeftoverInTheMiddle) {
  ModelBuilder b;
  b.input("x", {1, 3, 8, 8});
  add_conv(b, "c1", "x", "t1", 3, 4, 3).ints("strides", {2, 2}).str("auto_pad", "SAME_UPPER");
  b.node("Erf", {"t1"}, {"hs_out"}, "hs");
  add_conv(b, "c2", "hs_out", "y", 4, 4, 1);
  b.output("y");
  const ImportResult r = import(b);
  const json s = spec(r);
  ASSERT_EQ(s["layers"].size(), 2u);
  EXPECT_EQ(s["inputs"][1], json::parse(R"j({"name": "hs_out", "shape": [1, 4, 4, 4],
      "layout": "NCHW", "dtype": "float32", "produced_by": "ONNX node 'hs' (Erf)",
      "description": "ONNX tensor 'hs_out'"})j"));
  EXPECT_EQ(s["outputs"], json::parse(R"j(["c1", "y"])j"));
  EXPECT_EQ(layer(r, 1)["input"], "hs_out");
  ASSERT_EQ(r.left_to_caller.size(), 1u);
  EXPECT_EQ(r.left_to_caller[0].name, "hs");
  EXPECT_EQ(r.left_to_caller[0].op_type, "Erf");
  EXPECT_EQ(r.left_to_caller[0].reason, not_generated_reason("Erf"));
  const std::string text = onnx_import::summary_text(r);
  EXPECT_TRUE(has(text,
                  "nodes left to the caller (node name, op type, why):\n  'hs' (Erf): "
                  "padfold does not generate Erf"))
      << text;
  EXPECT_TRUE(has(text, "1 node(s) left to the caller")) << text;
  EXPECT_EQ(rep(r)["left_to_caller"][0]["index"], 1);
}

// And a Concat of one input, as torchvision's DenseNet writes for its first dense layer.
TEST(OnnxImport, IdentityAndDropoutAreBypassed) {
  ModelBuilder b;
  b.input("x", {1, 2, 4, 4});
  add_conv(b, "c1", "x", "t1", 2, 2, 1);
  b.node("Identity", {"t1"}, {"i1"}, "id");
  b.node("Dropout", {"i1"}, {"d0"}, "drop");
  b.node("Concat", {"d0"}, {"d1"}, "cat1").i("axis", 1);
  add_conv(b, "c2", "d1", "y", 2, 2, 1);
  b.node("Identity", {"y"}, {"out"}, "id_out");
  b.output("out");
  const ImportResult r = import(b);
  EXPECT_EQ(layer(r, 1)["input"], "c1");
  EXPECT_EQ(spec(r)["outputs"], json::parse(R"j(["out"])j"));  // the graph output's name
  EXPECT_TRUE(r.left_to_caller.empty());
  EXPECT_EQ(rep(r)["absorbed"].size(), 4u);
  EXPECT_EQ(rep(r)["outputs"][0]["onnx_tensor"], "out");  // the graph output the user reads
  EXPECT_EQ(rep(r)["outputs"][0]["graph_output"], true);
}

// tf2onnx's Keras edges: NHWC input -> Transpose -> ... -> Transpose -> NHWC output. The layers
// compute channels last, the spec's input and output are the user's NHWC tensors, and a pair of
// Transposes undoing each other in the middle is bypassed.
TEST(OnnxImport, LayoutTransposesAtTheEdgesBecomeTheLayout) {
  ModelBuilder b;
  b.input("x", {1, 9, 7, 3});
  b.node("Transpose", {"x"}, {"xt"}, "in_t").ints("perm", {0, 3, 1, 2});
  add_conv(b, "c1", "xt", "t1", 3, 4, 3).str("auto_pad", "SAME_UPPER").ints("strides", {2, 2});
  b.node("Transpose", {"t1"}, {"t1_nhwc"}, "mid_a").ints("perm", {0, 2, 3, 1});
  b.node("Transpose", {"t1_nhwc"}, {"t2"}, "mid_b").ints("perm", {0, 3, 1, 2});
  b.node("MaxPool", {"t2"}, {"m"}, "pool").ints("kernel_shape", {2, 2});
  b.node("Transpose", {"m"}, {"y"}, "out_t").ints("perm", {0, 2, 3, 1});
  b.output("y");
  const ImportResult r = import(b, {}, {});
  EXPECT_TRUE(r.left_to_caller.empty());
  EXPECT_EQ(spec(r)["inputs"][0]["name"], "x");
  EXPECT_EQ(spec(r)["inputs"][0]["layout"], "NHWC");
  EXPECT_EQ(spec(r)["inputs"][0]["shape"], json::parse("[1, 9, 7, 3]"));
  EXPECT_EQ(layer(r, 0)["layout"], "NHWC");
  EXPECT_EQ(layer(r, 1)["input"], "c1");  // through the cancelled pair
  EXPECT_EQ(r.model.layers.at(1).output_shape_full(), (std::vector<int64_t>{1, 4, 3, 4}));
  EXPECT_EQ(spec(r)["outputs"], json::parse(R"j(["y"])j"));
  const std::map<std::string, std::string> roles = absorbed_roles(r);
  EXPECT_EQ(
      roles,
      (std::map<std::string, std::string>{
          {"in_t", "layout"}, {"out_t", "layout"}, {"mid_a", "bypassed"}, {"mid_b", "bypassed"}}));
  EXPECT_EQ(rep(r)["outputs"][0]["graph_output"], true);
}

// A Keras Conv1D as tf2onnx writes it: the causal Pad and the Unsqueeze on the NWC input before its
// layout Transpose, a Conv with a 1 x k kernel, Squeeze and Unsqueeze around the next one, a
// MaxPool read with the unit axis, a rank-3 Transpose at the output. It imports as conv1d and
// max_pool1d layers computing NWC, with the Pad folded and the weights without the unit axis.
TEST(OnnxImport, Conv1dBetweenUnsqueezeAndSqueezeIsAConv1d) {
  ModelBuilder b;
  b.input("x", {1, 23, 3});
  b.int_initializer("pads", {0, 4, 0, 0, 0, 0});
  b.int_initializer("ax1", {1});
  b.int_initializer("ax2", {2});
  b.node("Pad", {"x", "pads"}, {"p"}, "causal");
  b.node("Unsqueeze", {"p", "ax1"}, {"u"}, "expand");
  b.node("Transpose", {"u"}, {"ut"}, "in_t").ints("perm", {0, 3, 1, 2});
  b.initializer("w1", {8, 3, 1, 3});
  b.node("Conv", {"ut", "w1"}, {"c1"}, "c1").ints("dilations", {1, 2});
  b.node("Squeeze", {"c1", "ax2"}, {"s1"}, "squeeze1");
  b.node("Relu", {"s1"}, {"r1"}, "relu");
  b.node("Unsqueeze", {"r1", "ax2"}, {"u2"}, "expand2");
  b.initializer("w2", {5, 8, 1, 4});
  b.node("Conv", {"u2", "w2"}, {"c2"}, "c2").ints("strides", {1, 2}).ints("pads", {0, 1, 0, 2});
  b.node("MaxPool", {"c2"}, {"m"}, "pool").ints("kernel_shape", {1, 2}).ints("strides", {1, 2});
  b.node("Squeeze", {"m", "ax2"}, {"s2"}, "squeeze2");
  b.node("Transpose", {"s2"}, {"y"}, "out_t").ints("perm", {0, 2, 1});
  b.output("y");
  const ImportResult r = import(b, {}, {});
  ASSERT_TRUE(r.left_to_caller.empty()) << rep(r).dump(2);
  EXPECT_EQ(spec(r)["inputs"][0]["layout"], "NWC");
  EXPECT_EQ(spec(r)["inputs"][0]["shape"], json::parse("[1, 23, 3]"));
  ASSERT_EQ(r.model.layers.size(), 3u);
  const Layer& c1 = r.model.layers[0];
  EXPECT_EQ(c1.op_name, "conv1d");
  EXPECT_EQ(c1.layout.name(), "NWC");
  EXPECT_EQ(c1.kernel, (std::vector<int64_t>{3}));
  EXPECT_EQ(c1.dilation, (std::vector<int64_t>{2}));
  EXPECT_EQ(c1.pads.axes.at(0).before, 4);  // the folded causal Pad
  EXPECT_EQ(c1.pads.axes.at(0).after, 0);
  EXPECT_EQ(c1.activation, Activation::Relu);
  const Layer& c2 = r.model.layers[1];
  EXPECT_EQ(c2.op_name, "conv1d");
  EXPECT_EQ(c2.stride, (std::vector<int64_t>{2}));
  EXPECT_EQ(c2.pads.axes.at(0).before, 1);
  EXPECT_EQ(c2.pads.axes.at(0).after, 2);
  EXPECT_EQ(r.model.layers[2].op_name, "max_pool1d");
  EXPECT_EQ(r.model.layers[2].output_shape_full(), (std::vector<int64_t>{1, 6, 5}));  // N, W, C
  ASSERT_GE(r.weights.size(), 1u);
  EXPECT_EQ(r.weights[0].shape, (std::vector<int64_t>{3, 3, 8}));  // W, I, O
  const std::map<std::string, std::string> roles = absorbed_roles(r);
  EXPECT_EQ(roles, (std::map<std::string, std::string>{{"in_t", "layout"},
                                                       {"out_t", "layout"},
                                                       {"expand", "bypassed"},
                                                       {"squeeze1", "bypassed"},
                                                       {"expand2", "bypassed"},
                                                       {"squeeze2", "bypassed"}}))
      << rep(r).dump(2);
  EXPECT_TRUE(r.warnings.empty()) << r.warnings.at(0);
}

// The same from a TFLite file (tf2onnx --tflite): Reshapes add and drop the unit axis, and the
// output's layout Transpose comes before its Reshape. Both Transposes move to the edges.
TEST(OnnxImport, Conv1dFromTfliteReshapesIsAConv1d) {
  ModelBuilder b;
  b.input("x", {1, 9, 2});
  b.int_initializer("to4", {1, 1, 9, 2});
  b.int_initializer("to3", {1, 9, 4});
  b.node("Reshape", {"x", "to4"}, {"u"}, "expand");
  b.node("Transpose", {"u"}, {"ut"}, "in_t").ints("perm", {0, 3, 1, 2});
  b.initializer("w", {4, 2, 1, 3});
  b.node("Conv", {"ut", "w"}, {"c"}, "conv").ints("pads", {0, 1, 0, 1});
  b.node("Transpose", {"c"}, {"ct"}, "out_t").ints("perm", {0, 2, 3, 1});
  b.node("Reshape", {"ct", "to3"}, {"y"}, "squeeze");
  b.output("y");
  const ImportResult r = import(b, {}, {});
  ASSERT_TRUE(r.left_to_caller.empty()) << rep(r).dump(2);
  ASSERT_EQ(r.model.layers.size(), 1u);
  EXPECT_EQ(r.model.layers[0].op_name, "conv1d");
  EXPECT_EQ(r.model.layers[0].layout.name(), "NWC");
  EXPECT_EQ(r.model.layers[0].output_shape_full(), (std::vector<int64_t>{1, 9, 4}));
  EXPECT_EQ(spec(r)["inputs"][0]["layout"], "NWC");
  const std::map<std::string, std::string> roles = absorbed_roles(r);
  EXPECT_EQ(roles, (std::map<std::string, std::string>{{"in_t", "layout"},
                                                       {"out_t", "layout"},
                                                       {"expand", "bypassed"},
                                                       {"squeeze", "bypassed"}}))
      << rep(r).dump(2);
}

// ConstantOfShape's value: an int64 0.
void fill_with_zero(onnx::NodeProto& n) {
  onnx::AttributeProto* value = n.add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  value->mutable_t()->set_data_type(onnx::TensorProto::INT64);
  value->mutable_t()->add_dims(1);
  value->mutable_t()->add_int64_data(0);
}

// torch 1.13's nn.ZeroPad2d((0, 1, 0, 1)): a Pad whose pads a subgraph of constants computes
// (torch pad order reversed into ONNX's by Slice with step -1). Folded at import, the Pad folds
// into the conv, and every node of the subgraph is a constant in the report.
TEST(OnnxImport, TorchPadSubgraphFoldsToConstantPads) {
  ModelBuilder b;
  b.input("x", {1, 2, 9, 8});
  b.int_initializer("torch_pads", {0, 1, 0, 1});
  b.int_initializer("four", {4});
  b.int_initializer("rows", {-1, 2});
  b.int_initializer("starts", {-1});
  b.int_initializer("ends", {std::numeric_limits<int64_t>::min() + 1});
  b.int_initializer("axes", {0});
  b.int_initializer("steps", {-1});
  b.int_initializer("flat", {-1});
  fill_with_zero(b.node("ConstantOfShape", {"four"}, {"z"}, "zeros").proto());
  b.node("Concat", {"torch_pads", "z"}, {"cat"}, "cat").i("axis", 0);
  b.node("Reshape", {"cat", "rows"}, {"pairs"}, "pairs");
  b.node("Slice", {"pairs", "starts", "ends", "axes", "steps"}, {"rev"}, "reverse");
  b.node("Transpose", {"rev"}, {"tr"}, "swap").ints("perm", {1, 0});
  b.node("Reshape", {"tr", "flat"}, {"p64"}, "flatten");
  b.node("Cast", {"p64"}, {"pads"}, "cast").i("to", onnx::TensorProto::INT64);
  b.node("Pad", {"x", "pads"}, {"padded"}, "pad");
  add_conv(b, "conv", "padded", "y", 2, 4, 3).ints("strides", {2, 2});
  b.output("y");
  const ImportResult r = import(b);
  ASSERT_TRUE(r.left_to_caller.empty()) << rep(r).dump(2);
  ASSERT_EQ(r.model.layers.size(), 1u);
  const Layer& conv = r.model.layers[0];
  for (size_t k = 0; k < 2; ++k) {  // H and W: nothing before, one after
    EXPECT_EQ(conv.pads.axes.at(k).before, 0) << k;
    EXPECT_EQ(conv.pads.axes.at(k).after, 1) << k;
  }
  EXPECT_EQ(conv.output_shape_full(),
            (std::vector<int64_t>{1, 4, 4, 4}));  // (9 + 1 - 3) / 2 + 1, (8 + 1 - 3) / 2 + 1
  const std::map<std::string, std::string> roles = absorbed_roles(r);
  for (const char* name : {"zeros", "cat", "pairs", "reverse", "swap", "flatten", "cast"})
    EXPECT_EQ(roles.count(name) ? roles.at(name) : "", "constant") << name;
}

// What the folding evaluates, op by op, and what it leaves alone.
TEST(OnnxConstantFold, EvaluatesShapeArithmeticAndRefusesTheRest) {
  std::map<std::string, onnx::TensorProto> k;
  auto ints = [&](const std::string& name, std::vector<int64_t> dims, std::vector<int64_t> v) {
    onnx::TensorProto t;
    t.set_name(name);
    t.set_data_type(onnx::TensorProto::INT64);
    for (int64_t d : dims) t.add_dims(d);
    for (int64_t x : v) t.add_int64_data(x);
    k[name] = t;
  };
  const auto lookup = [&](const std::string& n) -> const onnx::TensorProto* {
    const auto it = k.find(n);
    return it == k.end() ? nullptr : &it->second;
  };
  auto node = [](const std::string& op, std::vector<std::string> in) {
    onnx::NodeProto n;
    n.set_op_type(op);
    for (const auto& i : in) n.add_input(i);
    n.add_output("out");
    return n;
  };
  auto values = [](const std::optional<onnx::TensorProto>& t) {
    return t ? std::vector<int64_t>(t->int64_data().begin(), t->int64_data().end())
             : std::vector<int64_t>{-999};
  };
  auto dims = [](const std::optional<onnx::TensorProto>& t) {
    return t ? std::vector<int64_t>(t->dims().begin(), t->dims().end()) : std::vector<int64_t>{};
  };
  ints("m", {2, 3}, {1, 2, 3, 4, 5, 6});
  ints("s0", {1}, {0});
  ints("s1", {1}, {1});
  ints("e", {1}, {3});
  ints("neg", {1}, {-1});
  ints("two", {1}, {2});
  ints("shape", {3}, {0, -1, 1});
  using onnx_import::fold_constant_node;
  // Slice of axis 1 from the end backwards, every second value: columns 2 and 0.
  ints("big", {1}, {-100});
  const auto rev = fold_constant_node(node("Slice", {"m", "neg", "big", "s1", "neg"}), lookup);
  EXPECT_EQ(values(rev), (std::vector<int64_t>{3, 2, 1, 6, 5, 4}));
  const auto sl = fold_constant_node(node("Slice", {"m", "s0", "e", "s1", "two"}), lookup);
  EXPECT_EQ(values(sl), (std::vector<int64_t>{1, 3, 4, 6}));
  EXPECT_EQ(dims(sl), (std::vector<int64_t>{2, 2}));
  // Reshape: 0 keeps the dim, -1 takes the rest.
  const auto rs = fold_constant_node(node("Reshape", {"m", "shape"}), lookup);
  EXPECT_EQ(dims(rs), (std::vector<int64_t>{2, 3, 1}));
  onnx::NodeProto tr = node("Transpose", {"m"});
  const auto tt = fold_constant_node(tr, lookup);  // no perm: reversed axes
  EXPECT_EQ(values(tt), (std::vector<int64_t>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(dims(tt), (std::vector<int64_t>{3, 2}));
  const auto un = fold_constant_node(node("Unsqueeze", {"m", "s1"}), lookup);
  EXPECT_EQ(dims(un), (std::vector<int64_t>{2, 1, 3}));
  EXPECT_EQ(values(fold_constant_node(node("Sub", {"m", "s1"}), lookup)),
            (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(values(fold_constant_node(node("Neg", {"e"}), lookup)), (std::vector<int64_t>{-3}));
  // Div truncates toward zero, as ONNX Runtime divides integers (ShuffleNetV2's chunk bounds).
  ints("signed", {3}, {7, -7, 8});
  EXPECT_EQ(values(fold_constant_node(node("Div", {"signed", "two"}), lookup)),
            (std::vector<int64_t>{3, -3, 4}));
  EXPECT_FALSE(fold_constant_node(node("Div", {"signed", "s0"}), lookup));  // by zero
  // Not folded: a run-time input, a squeeze of a non-unit axis, a float, an unknown op.
  EXPECT_FALSE(fold_constant_node(node("Add", {"m", "x"}), lookup));
  EXPECT_FALSE(fold_constant_node(node("Squeeze", {"m", "s0"}), lookup));
  onnx::TensorProto f;
  f.set_name("f");
  f.set_data_type(onnx::TensorProto::FLOAT);
  f.add_float_data(1.f);
  k["f"] = f;
  EXPECT_FALSE(fold_constant_node(node("Neg", {"f"}), lookup));
  EXPECT_FALSE(fold_constant_node(node("Gather", {"m", "s0"}), lookup));  // a 2-D table
  // Gather of a 1-D tensor's values; Shape of a tensor whose shape is static (start/end count
  // from the back when negative), and not of one whose shape is unknown.
  ints("dims", {4}, {2, 3, 17, 19});
  EXPECT_EQ(values(fold_constant_node(node("Gather", {"dims", "neg"}), lookup)),
            (std::vector<int64_t>{19}));
  const onnx_import::StaticShapeOf shapes =
      [](const std::string& t) -> std::optional<std::vector<int64_t>> {
    if (t == "x") return std::vector<int64_t>{1, 8, 30, 40};
    return std::nullopt;
  };
  EXPECT_EQ(values(fold_constant_node(node("Shape", {"x"}), lookup, shapes)),
            (std::vector<int64_t>{1, 8, 30, 40}));
  onnx::NodeProto tail = node("Shape", {"x"});
  onnx::AttributeProto* start = tail.add_attribute();
  start->set_name("start");
  start->set_type(onnx::AttributeProto::INT);
  start->set_i(-2);
  EXPECT_EQ(values(fold_constant_node(tail, lookup, shapes)), (std::vector<int64_t>{30, 40}));
  EXPECT_FALSE(fold_constant_node(node("Shape", {"y"}), lookup, shapes));
  EXPECT_FALSE(fold_constant_node(node("Shape", {"x"}), lookup));
  // A value count past kMaxFoldedValues.
  ints("huge", {1}, {onnx_import::kMaxFoldedValues + 1});
  onnx::NodeProto fill = node("ConstantOfShape", {"huge"});
  fill_with_zero(fill);
  EXPECT_FALSE(fold_constant_node(fill, lookup));
}

// torch's F.interpolate(size=...) writes a Resize whose sizes come from Shape -> Gather ->
// Unsqueeze -> Concat: with the input size fixed they fold, and the Resize is a layer with those
// sizes; a Resize of the channels, or a cubic one, is left to the caller saying why (here: the
// import refuses the model, its one layer left, naming the reason).
TEST(OnnxImport, ResizeSizesFromShapeArithmeticFold) {
  for (const std::string variant : {"sizes", "channels", "cubic"}) {
    ModelBuilder b;
    b.input("x", {1, 3, 10, 12});
    b.int_initializer("idx", {3});
    b.int_initializer("twice_h", {variant == "channels" ? 4 : 3, 25});
    b.node("Shape", {"x"}, {"shape"}, "shape");
    b.node("Gather", {"shape", "idx"}, {"w"}, "w").i("axis", 0);
    b.node("Concat", {"one_n", "twice_h", "w"}, {"sizes"}, "sizes").i("axis", 0);
    b.int_initializer("one_n", {1});
    b.node("Resize", {"x", "", "", "sizes"}, {"y"}, "up")
        .str("mode", variant == "cubic" ? "cubic" : "linear");
    b.output("y");
    if (variant == "sizes") {
      const ImportResult r = import(b);
      ASSERT_TRUE(r.left_to_caller.empty()) << r.left_to_caller[0].reason;
      const Layer* up = r.model.find_layer("y");
      ASSERT_NE(up, nullptr);
      EXPECT_EQ(up->op, Op::Resize);
      EXPECT_EQ(up->out_spatial, (std::vector<int64_t>{25, 12}));
      EXPECT_EQ(up->resize.scales, (std::vector<float>{2.5f, 1.f}));
    } else {  // the model's one layer left: nothing to import
      const std::string why = import_error(b);
      EXPECT_TRUE(
          has(why, variant == "cubic" ? "'cubic' is not generated" : "axis 1 (the channels)"))
          << why;
    }
  }
}

// A unit axis the conv does not leave alone (a kernel of 2 over it, padded) keeps the conv at its
// rank, which the Unsqueeze'd input does not have: both are left to the caller, saying why.
TEST(OnnxImport, AUnitAxisWithAKernelIsNotDropped) {
  ModelBuilder b;
  b.input("x", {1, 3, 9});
  b.int_initializer("ax", {2});
  b.node("Unsqueeze", {"x", "ax"}, {"u"}, "expand");
  b.initializer("w", {4, 3, 2, 3});
  b.node("Conv", {"u", "w"}, {"c"}, "conv").ints("pads", {1, 0, 0, 0});
  b.node("Relu", {"c"}, {"y"}, "relu");
  b.output("y");
  EXPECT_TRUE(has(import_error(b),
                  "'conv' (Conv): its unit axis 2 (from an Unsqueeze) has a "
                  "kernel, stride or padding that is not 1 x 1 x 0"))
      << import_error(b);
}

// Only every edge at once: an output read channels first as ONNX wrote it keeps the model in
// NCHW, and the input's Transpose is left with the reason. Other permutations are left too.
TEST(OnnxImport, LayoutTransposesAreFoldedOnlyAtEveryEdge) {
  ModelBuilder b;
  b.input("x", {1, 6, 6, 2});
  b.node("Transpose", {"x"}, {"xt"}, "in_t").ints("perm", {0, 3, 1, 2});
  add_conv(b, "c1", "xt", "y", 2, 2, 1);
  b.output("y");
  const ImportResult r = import(b, {}, {});
  ASSERT_EQ(r.left_to_caller.size(), 1u);
  EXPECT_EQ(r.left_to_caller[0].name, "in_t");
  EXPECT_TRUE(has(r.left_to_caller[0].reason, "folds them when every model input"))
      << r.left_to_caller[0].reason;
  // The layers compute channels last all the same: the conv reads the caller's NCHW tensor as it
  // is, the change of layout folded into its kernel (its output is transposed back for the user).
  ASSERT_EQ(spec(r)["layers"].size(), 2u);
  EXPECT_EQ(layer(r, 0)["input_layout"], "NCHW");
  EXPECT_EQ(layer(r, 0)["layout"], "NHWC");
  EXPECT_EQ(layer(r, 1)["op"], "transpose");

  ModelBuilder hw;  // swaps H and W: no layout
  hw.input("x", {1, 2, 6, 5});
  hw.node("Transpose", {"x"}, {"xt"}, "swap").ints("perm", {0, 1, 3, 2});
  add_conv(hw, "c1", "xt", "y", 2, 2, 1);
  hw.output("y");
  const ImportResult s = import(hw, {}, {});
  ASSERT_EQ(s.left_to_caller.size(), 1u);
  EXPECT_TRUE(has(s.left_to_caller[0].reason, "does not generate Transpose"))
      << s.left_to_caller[0].reason;
}

// A shift before a zero-padded conv is not its bias: the padded zeros were never shifted, so
// the border pixels would differ. It is left; a scale alone, or a VALID conv, folds.
TEST(OnnxImport, AShiftBeforeAZeroPaddedConvIsNotFoldedButAKernelOfItsOwn) {
  auto build = [](const char* op, const std::string& auto_pad) {
    ModelBuilder b;
    b.input("x", {1, 2, 6, 6});
    b.initializer("k", {1, 2, 1, 1}, {0.5f, -2.f});
    b.node(op, {"x", "k"}, {"a"}, "affine");
    add_conv(b, "c1", "a", "y", 2, 3, 3).str("auto_pad", auto_pad);
    b.output("y");
    return b;
  };
  // The shift stays its own kernel, the depthwise 1x1 conv of its values, which the conv reads
  // through its zero border: not the conv's bias.
  const ImportResult shifted = import(build("Add", "SAME_UPPER"));
  EXPECT_TRUE(shifted.left_to_caller.empty());
  ASSERT_EQ(spec(shifted)["layers"].size(), 2u);
  const json shift = layer(shifted, 0);
  EXPECT_EQ(shift["input"], "x");
  EXPECT_EQ(shift["groups"], 2);
  EXPECT_EQ(shift["kernel"], json::parse("[1, 1]"));
  EXPECT_EQ(layer(shifted, 1)["input"], shift["name"]);
  ASSERT_EQ(shifted.weights.size(), 4u);
  EXPECT_EQ(shifted.weights[0].data, (std::vector<float>{1.f, 1.f}));
  EXPECT_EQ(shifted.weights[1].data, (std::vector<float>{0.5f, -2.f}));
  EXPECT_EQ(shifted.weights[3].data, test_values(3)) << "the conv's own bias, no shift in it";
  for (const auto& [op, pad] :
       {std::pair{"Mul", "SAME_UPPER"}, std::pair{"Add", "VALID"}, std::pair{"Sub", "VALID"}}) {
    SCOPED_TRACE(std::string(op) + " " + pad);
    const ImportResult r = import(build(op, pad));
    EXPECT_TRUE(r.left_to_caller.empty());
    EXPECT_EQ(layer(r, 0)["input"], "x");
    const json report = rep(r);
    EXPECT_EQ(report["layers"][0]["onnx_nodes"][0]["role"], "affine");
  }
}

// A layer takes one activation: a second is a layer of its own (it used to replace the first),
// and a third fuses into nothing it is not.
TEST(OnnxImport, ASecondActivationIsALayerOfItsOwn) {
  ModelBuilder b;
  b.input("x", {1, 2, 5, 5});
  add_conv(b, "c1", "x", "t", 2, 2, 3);
  b.node("Relu", {"t"}, {"r"}, "relu");
  b.node("LeakyRelu", {"r"}, {"l"}, "leaky").f("alpha", 0.5f);
  b.node("Sigmoid", {"l"}, {"y"}, "sig");
  b.output("y");
  const ImportResult r = import(b);
  EXPECT_TRUE(r.left_to_caller.empty());
  ASSERT_EQ(spec(r)["layers"].size(), 3u);
  EXPECT_EQ(layer(r, 0)["activation"], "relu");
  EXPECT_EQ(layer(r, 1)["name"], "leaky");
  EXPECT_EQ(layer(r, 1)["activation"], json::parse(R"j({"type": "leaky_relu", "alpha": 0.5})j"));
  EXPECT_EQ(layer(r, 2)["name"], "y");
  EXPECT_EQ(layer(r, 2)["input"], "leaky");
  EXPECT_EQ(layer(r, 2)["activation"], "sigmoid");
}

// x * Sigmoid(x) after a conv is its silu; a Sigmoid whose input has another reader is not.
TEST(OnnxImport, SwishFusesAsSilu) {
  ModelBuilder b;
  b.input("x", {1, 2, 5, 5});
  add_conv(b, "c1", "x", "t", 2, 2, 3);
  b.node("Sigmoid", {"t"}, {"s"}, "sig");
  b.node("Mul", {"t", "s"}, {"y"}, "mul");
  b.output("y");
  const ImportResult r = import(b);
  EXPECT_TRUE(r.left_to_caller.empty());
  EXPECT_EQ(layer(r, 0)["activation"], "silu");
  EXPECT_EQ(rep(r)["layers"][0]["onnx_nodes"].size(), 3u);
}

// AlexNet's and VGG's classifier: Flatten of a 3x3 map -> Gemm is the valid 3x3 conv whose weights
// are B as [K, C, 3, 3] (ONNX flattens C, H, W in OIHW's I, H, W order), the Flatten bypassed;
// a Flatten read by another node too stays the caller's, and the Gemm with it.
TEST(OnnxImport, GemmOfAFlattenedMapIsAConvOverTheWholeMap) {
  for (const bool shared : {false, true}) {
    ModelBuilder b;
    b.input("x", {2, 3, 5, 5}).output("y");
    add_conv(b, "c", "x", "c_out", 3, 4, 3);
    b.node("Flatten", {"c_out"}, {"flat"}, "flatten");
    b.initializer("fc_w", {6, 36});
    b.node("Gemm", {"flat", "fc_w"}, {"y"}, "fc").i("transB", 1).f("alpha", 2.f);
    if (shared) {
      b.output("z");
      b.node("Relu", {"flat"}, {"z"}, "other");
    }
    const ImportResult r = import(b);
    if (shared) {
      ASSERT_EQ(spec(r)["layers"].size(), 1u) << spec(r).dump();
      ASSERT_EQ(r.left_to_caller.size(), 3u);
      EXPECT_EQ(r.left_to_caller[0].name, "flatten");
      EXPECT_TRUE(has(r.left_to_caller[1].reason, "spatial dims are all 1"))
          << r.left_to_caller[1].reason;
      continue;
    }
    EXPECT_TRUE(r.left_to_caller.empty());
    ASSERT_EQ(spec(r)["layers"].size(), 2u);
    const json fc = layer(r, 1);
    EXPECT_EQ(fc["input"], "c");
    EXPECT_EQ(fc["kernel"], json::parse("[3, 3]"));
    EXPECT_EQ(fc["padding"], "valid");
    EXPECT_EQ(spec(r)["output_shapes"], json::parse(R"j({"y": [2, 6]})j"));
    EXPECT_EQ(rep(r)["absorbed"][0]["op_type"], "Flatten");
    const std::vector<float> w = test_values(216);
    ASSERT_EQ(r.weights.size(), 3u);  // the conv's weights and bias, the Gemm's weights
    EXPECT_EQ(r.weights[2].shape, (std::vector<int64_t>{6, 4, 3, 3}));
    for (size_t i = 0; i < w.size(); ++i) EXPECT_FLOAT_EQ(r.weights[2].data[i], 2.f * w[i]) << i;
  }
}

// Before opset 11, Clip takes its bounds as attributes: relu6(x + 3) / 6 is the same HardSigmoid.
TEST(OnnxImport, KerasHardSigmoidChainWithClipAttributes) {
  ModelBuilder b(10);
  b.input("x", {1, 2, 5, 5});
  add_conv(b, "c1", "x", "t", 2, 2, 3);
  b.initializer("three", {}, {3.f}).initializer("sixth", {}, {1.f / 6.f});
  b.node("Add", {"t", "three"}, {"a"}, "add");
  b.node("Clip", {"a"}, {"r"}, "relu6").f("min", 0.f).f("max", 6.f);
  b.node("Mul", {"r", "sixth"}, {"s"}, "truediv");
  b.node("Mul", {"s", "t"}, {"y"}, "mul");
  b.output("y");
  const ImportResult r = import(b);
  EXPECT_TRUE(r.left_to_caller.empty());
  EXPECT_EQ(rep(r)["nodes"], 3);
  EXPECT_EQ(layer(r, 0)["activation"], "hard_swish");
}

// A chain on a constant is not rewritten: the report names the file's own nodes (the import does
// not compute float constants; a HardSigmoid would stand for nodes the file does not have).
TEST(OnnxImport, HardSigmoidChainOnAConstantIsNotRewritten) {
  ModelBuilder b;
  b.input("x", {1, 2, 5, 5});
  add_conv(b, "c1", "x", "t", 2, 2, 3);
  b.initializer("k", {1, 2, 1, 1}, {-4.f, 1.5f});
  b.initializer("three", {}, {3.f}).initializer("zero", {}, {0.f}).initializer("six", {}, {6.f});
  b.initializer("sixth", {}, {1.f / 6.f});
  b.node("Add", {"k", "three"}, {"a"}, "add");
  b.node("Clip", {"a", "zero", "six"}, {"r"}, "relu6");
  b.node("Mul", {"r", "sixth"}, {"s"}, "truediv");
  b.node("Mul", {"t", "s"}, {"y"}, "scale");
  b.output("y");
  const ImportResult r = import(b);
  EXPECT_EQ(rep(r)["nodes"], 5);
  ASSERT_FALSE(r.left_to_caller.empty());
  EXPECT_EQ(r.left_to_caller[0].name, "add");
}

// A rank-3 model input shifted, then flattened through Transpose [0, 2, 1] (which is also the
// layout Transpose of an NWC input) into a MatMul: the shift folds into the dense layer like any
// affine op before it, the input read as it is (fuzz seed 1, graph 72: an internal error, the
// shift held for the layout edge that the dense layer had taken).
TEST(OnnxImport, ShiftBeforeARank3FlattenFoldsIntoTheDenseLayer) {
  ModelBuilder b;
  b.input("x", {1, 4, 6}).output("y").output("z");
  b.initializer("shift", {}, {0.5f});
  b.node("Add", {"x", "shift"}, {"shifted"}, "add");
  b.node("Transpose", {"shifted"}, {"last"}, "to_last").ints("perm", {0, 2, 1});
  b.int_initializer("flat_shape", {1, -1});
  b.node("Reshape", {"last", "flat_shape"}, {"flat"}, "flatten");
  b.initializer("fc_w", {24, 5});
  b.node("MatMul", {"flat", "fc_w"}, {"y"}, "fc");
  b.initializer("w", {4, 1, 3});
  b.node("Conv", {"x", "w"}, {"z"}, "dw").i("group", 4);
  const ImportResult r = import(b);
  ASSERT_TRUE(r.left_to_caller.empty()) << r.left_to_caller[0].reason;
  const json fc = layer(r, 0);
  EXPECT_EQ(fc["input"], "x");
  EXPECT_TRUE(has(rep(r)["layers"][0].dump(), "\"add\"")) << rep(r)["layers"][0].dump();
}

// Keras's Flatten as tf2onnx writes it: the map's channels-last Transpose, then Reshape to
// [N, H*W*C], then MatMul (Dense): the valid conv over the whole map, B's rows (features in H, W, C
// order) moved to OIHW's (C, H, W), the Transpose and the Reshape bypassed.
TEST(OnnxImport, MatMulOfAChannelsLastFlattenIsAConvOverTheWholeMap) {
  ModelBuilder b;
  b.input("x", {2, 3, 5, 4}).output("y");
  add_conv(b, "c", "x", "c_out", 3, 4, 3);  // [2, 4, 3, 2] (valid 3x3)
  b.node("Transpose", {"c_out"}, {"nhwc"}, "to_nhwc").ints("perm", {0, 2, 3, 1});
  b.int_initializer("flat_shape", {2, -1});
  b.node("Reshape", {"nhwc", "flat_shape"}, {"flat"}, "flatten");
  b.initializer("fc_w", {24, 5});
  b.node("MatMul", {"flat", "fc_w"}, {"y"}, "fc");
  const ImportResult r = import(b);
  EXPECT_TRUE(r.left_to_caller.empty());
  ASSERT_EQ(spec(r)["layers"].size(), 2u) << spec(r).dump();
  const json fc = layer(r, 1);
  EXPECT_EQ(fc["input"], "c");
  EXPECT_EQ(fc["kernel"], json::parse("[3, 2]"));
  EXPECT_EQ(fc["padding"], "valid");
  ASSERT_EQ(r.weights.size(), 3u);  // the conv's weights and bias, the MatMul's weights
  EXPECT_EQ(r.weights[2].shape, (std::vector<int64_t>{5, 4, 3, 2}));
  const std::vector<float> w = test_values(24 * 5);  // B [24, 5]: row (h * 2 + w) * 4 + c
  for (int o = 0; o < 5; ++o)
    for (int c = 0; c < 4; ++c)
      for (int h = 0; h < 3; ++h)
        for (int x = 0; x < 2; ++x)
          EXPECT_FLOAT_EQ(r.weights[2].data[((o * 4 + c) * 3 + h) * 2 + x],
                          w[((h * 2 + x) * 4 + c) * 5 + o])
              << o << " " << c << " " << h << " " << x;
  std::vector<std::string> bypassed;
  const json report = rep(r);
  for (const json& a : report["absorbed"]) bypassed.push_back(a["op_type"]);
  EXPECT_EQ(bypassed, (std::vector<std::string>{"Transpose", "Reshape"}));
}

// x * HardSigmoid(x) with alpha 1/6 and beta 1/2 (torch.onnx's hardswish below opset 14) after a
// conv is its hard_swish; with ONNX's default alpha (0.2) it is no hard swish: the HardSigmoid,
// whose input has two readers, is a layer of its own and the Mul of two tensors is left.
TEST(OnnxImport, XTimesHardSigmoidFusesAsHardSwish) {
  for (const float alpha : {1.f / 6.f, 0.2f}) {
    ModelBuilder b;
    b.input("x", {1, 2, 5, 5});
    add_conv(b, "c1", "x", "t", 2, 2, 3);
    b.node("HardSigmoid", {"t"}, {"s"}, "hsig").f("alpha", alpha).f("beta", 0.5f);
    b.node("Mul", {"s", "t"}, {"y"}, "mul");
    b.output("y");
    const ImportResult r = import(b);
    if (alpha == 0.2f) {  // a HardSigmoid layer of its own, and a Mul padfold has not
      EXPECT_EQ(layer(r, 0)["activation"], nullptr) << spec(r).dump();
      ASSERT_EQ(r.left_to_caller.size(), 1u);
      EXPECT_EQ(r.left_to_caller[0].name, "mul");
      continue;
    }
    EXPECT_TRUE(r.left_to_caller.empty());
    EXPECT_EQ(layer(r, 0)["activation"], "hard_swish");
    EXPECT_EQ(rep(r)["layers"][0]["onnx_nodes"].size(), 3u);
  }
}

// Keras's hard_sigmoid as tf2onnx writes it, relu6(x + 3) / 6 in three nodes (Add of 3, Clip 0..6,
// Mul by 1/6 or Div by 6), is ONNX HardSigmoid(1/6, 1/2) (decomposed_activations.h): MobileNetV3's
// gate x * relu6(x + 3) / 6 fuses as the conv's hard_swish, a squeeze-and-excite gate alone as its
// hard_sigmoid. A chain off by a constant, or whose inner tensor has another reader, is not one.
TEST(OnnxImport, KerasHardSigmoidChainIsHardSigmoid) {
  enum Case { Gate, Alone, OtherOffset, SharedClip };
  for (const Case c : {Gate, Alone, OtherOffset, SharedClip}) {
    SCOPED_TRACE(static_cast<int>(c));
    ModelBuilder b;
    b.input("x", {1, 2, 5, 5});
    add_conv(b, "c1", "x", "t", 2, 2, 3);
    b.initializer("three", {}, {c == OtherOffset ? 2.f : 3.f});
    b.initializer("zero", {}, {0.f}).initializer("six", {}, {6.f});
    b.initializer("sixth", {1}, {1.f / 6.f});
    b.node("Add", {"three", "t"}, {"a"}, "add");
    b.node("Clip", {"a", "zero", "six"}, {"r"}, "relu6");
    if (c == Alone)
      b.node("Div", {"r", "six"}, {"y"}, "div");
    else
      b.node("Mul", {"r", "sixth"}, {"s"}, "truediv");
    if (c != Alone) b.node("Mul", {"t", "s"}, {"y"}, "mul");
    b.output("y");
    if (c == SharedClip) b.output("r");
    const ImportResult r = import(b);
    const json first = layer(r, 0);
    if (c == Gate) {
      EXPECT_TRUE(r.left_to_caller.empty());
      ASSERT_EQ(spec(r)["layers"].size(), 1u) << spec(r).dump();
      EXPECT_EQ(first["activation"], "hard_swish");
    } else if (c == Alone) {
      EXPECT_TRUE(r.left_to_caller.empty());
      ASSERT_EQ(spec(r)["layers"].size(), 1u) << spec(r).dump();
      EXPECT_EQ(first["activation"]["type"], "hard_sigmoid");
      EXPECT_FLOAT_EQ(first["activation"]["alpha"].get<float>(), 1.f / 6.f);
      EXPECT_FLOAT_EQ(first["activation"]["beta"].get<float>(), 0.5f);
    } else {  // the nodes as they are: no layer computes a hard sigmoid
      const json layers = spec(r)["layers"];
      for (const json& L : layers) EXPECT_FALSE(has(L.dump(), "hard_")) << L.dump();
      EXPECT_EQ(rep(r)["nodes"], 5) << "the chain was rewritten";
      continue;
    }
    EXPECT_EQ(rep(r)["nodes"], c == Gate ? 3 : 2);  // Add, Clip and Mul/Div are one node
  }
}

// GlobalAveragePool -> Flatten -> Gemm: a 1x1 conv on [N, C, 1, 1] whose weights are B as
// [K, C, 1, 1] times alpha and whose bias is beta * C; the model output is read as ONNX's [N, K].
TEST(OnnxImport, ClassifierGemmIsA1x1ConvWithTheOnnxOutputShape) {
  ModelBuilder b;
  b.input("x", {2, 3, 5, 5}).output("y");
  add_conv(b, "c", "x", "c_out", 3, 4, 3);
  b.node("GlobalAveragePool", {"c_out"}, {"gap"}, "gap");
  b.node("Flatten", {"gap"}, {"flat"}, "flatten");
  b.initializer("fc_w", {4, 6});  // [C, K]: transB 0
  b.initializer("fc_c", {1, 6});
  b.node("Gemm", {"flat", "fc_w", "fc_c"}, {"y"}, "fc").f("alpha", 2.f).f("beta", 0.5f);
  const ImportResult r = import(b);
  EXPECT_TRUE(r.left_to_caller.empty());
  ASSERT_EQ(spec(r)["layers"].size(), 3u);
  const json fc = layer(r, 2);
  EXPECT_EQ(fc["op"], "conv2d");
  EXPECT_EQ(fc["input"], "gap");
  EXPECT_EQ(fc["kernel"], json::parse("[1, 1]"));
  EXPECT_EQ(fc["out_channels"], 6);
  EXPECT_EQ(spec(r)["output_shapes"], json::parse(R"j({"y": [2, 6]})j"));
  EXPECT_EQ(rep(r)["absorbed"][0]["op_type"], "Flatten");
  const std::vector<float> w = test_values(24), c = test_values(6);
  const auto& files = r.weights;
  ASSERT_EQ(files.size(), 4u);
  EXPECT_EQ(files[2].shape, (std::vector<int64_t>{6, 4, 1, 1}));
  EXPECT_EQ(files[3].shape, (std::vector<int64_t>{6}));
  for (size_t o = 0; o < 6; ++o) {
    for (size_t i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(files[2].data[o * 4 + i], 2.f * w[i * 6 + o]);
    EXPECT_FLOAT_EQ(files[3].data[o], 0.5f * c[o]);
  }
}

// MatMul + Add after ReduceMean (keepdims 0): the Add of [K] broadcasts along ONNX's [N, K] axis 1,
// so it folds as the bias, though padfold holds the tensor as [N, K, 1, 1].
TEST(OnnxImport, MatMulAfterReduceMeanTakesItsAddAsBias) {
  ModelBuilder b;
  b.input("x", {1, 3, 4, 4}).output("y");
  add_conv(b, "c", "x", "c_out", 3, 4, 3);
  b.node("ReduceMean", {"c_out"}, {"gap"}, "gap").ints("axes", {3, 2}).i("keepdims", 0);
  b.initializer("fc_w", {4, 5});
  b.initializer("fc_b", {5});
  b.node("MatMul", {"gap", "fc_w"}, {"fc"}, "dense");
  b.node("Add", {"fc", "fc_b"}, {"y"}, "dense_bias");
  const ImportResult r = import(b);
  EXPECT_TRUE(r.left_to_caller.empty());
  EXPECT_EQ(layer(r, 1)["op"], "avg_pool2d");
  EXPECT_EQ(layer(r, 2)["bias"], true);
  EXPECT_EQ(spec(r)["output_shapes"], json::parse(R"j({"y": [1, 5]})j"));
  EXPECT_TRUE(r.warnings.empty()) << r.warnings[0];  // [1, 4] vs [1, 4, 1, 1] is no difference
}

TEST(OnnxImport, DenseAndReduceThatPadfoldCannotComputeAreLeft) {
  auto left = [](const ModelBuilder& b, const std::string& node) {
    const ImportResult r = import(b);
    for (const auto& n : r.left_to_caller)
      if (n.name == node) return n.reason;
    return std::string("not left");
  };
  {  // A Gemm on a rank-2 graph input: no padfold layer holds it.
    ModelBuilder b;
    b.input("x", {1, 2, 4, 4}).input("v", {1, 4}).output("y").output("z");
    add_conv(b, "c", "x", "y", 2, 2, 1);
    b.initializer("w", {4, 3});
    b.node("Gemm", {"v", "w"}, {"z"}, "fc");
    EXPECT_TRUE(has(left(b, "fc"),
                    "input A 'v' has the shape [1, 4]; padfold computes Gemm as a "
                    "1x1 convolution"))
        << left(b, "fc");
  }
  {  // A spatial tensor, not flattened; transA; a B computed at run time.
    ModelBuilder b;
    b.input("x", {1, 2, 4, 4}).input("v", {1, 2, 3}).output("y").output("z").output("u");
    add_conv(b, "c", "x", "c_out", 2, 2, 1);
    b.node("GlobalAveragePool", {"c_out"}, {"gap"}, "gap");
    b.node("Flatten", {"gap"}, {"flat"}, "flatten");
    b.initializer("w", {2, 3});
    b.node("Gemm", {"flat", "w"}, {"z"}, "fc_t").i("transA", 1);
    b.node("MatMul", {"flat", "v"}, {"u"}, "mm_runtime");
    b.node("Relu", {"c_out"}, {"y"}, "relu");
    EXPECT_TRUE(has(left(b, "fc_t"), "transA is set")) << left(b, "fc_t");
    EXPECT_TRUE(has(left(b, "mm_runtime"), "B 'v' are computed at run time"))
        << left(b, "mm_runtime");
  }
  {  // A ReduceMean over channels is no global pool; a Flatten of a spatial tensor is no view.
    ModelBuilder b;
    b.input("x", {1, 2, 4, 4}).output("m").output("f");
    add_conv(b, "c", "x", "c_out", 2, 2, 1);
    b.node("ReduceMean", {"c_out"}, {"m"}, "mean_c").ints("axes", {1});
    b.node("Flatten", {"c_out"}, {"f"}, "flatten");
    EXPECT_TRUE(has(left(b, "mean_c"), "its axes [1] are not the spatial axes [2, 3]"))
        << left(b, "mean_c");
    EXPECT_TRUE(has(left(b, "flatten"), "padfold does not generate Flatten")) << left(b, "flatten");
  }
}

// Squeeze-and-excite: x * Sigmoid(conv(GlobalAveragePool(x))), the scale first or second, is a mul
// layer whose second input is the [N, C, 1, 1] scale; x * Sigmoid(x) stays SiLU.
TEST(OnnxImport, SqueezeExciteMulIsAChannelScale) {
  for (bool scale_first : {false, true}) {
    ModelBuilder b;
    b.input("x", {1, 4, 5, 5}).output("y");
    add_conv(b, "c", "x", "c_pre", 4, 4, 3);
    b.node("Sigmoid", {"c_pre"}, {"sig"}, "sig");
    b.node("Mul", {"c_pre", "sig"}, {"c_out"}, "silu");
    b.node("GlobalAveragePool", {"c_out"}, {"gap"}, "gap");
    add_conv(b, "se", "gap", "se_pre", 4, 4, 1);
    b.node("Sigmoid", {"se_pre"}, {"scale"}, "se_sig");
    b.node("Mul",
           scale_first ? std::vector<std::string>{"scale", "c_out"}
                       : std::vector<std::string>{"c_out", "scale"},
           {"y"}, "excite");
    const ImportResult r = import(b);
    EXPECT_TRUE(r.left_to_caller.empty());
    ASSERT_EQ(spec(r)["layers"].size(), 4u);
    EXPECT_EQ(layer(r, 0)["activation"], "silu");
    EXPECT_EQ(layer(r, 2)["activation"], "sigmoid");
    EXPECT_EQ(layer(r, 3)["op"], "mul");
    EXPECT_EQ(layer(r, 3)["input"], json::parse(R"j(["c", "se"])j"));
    EXPECT_TRUE(r.model.layers[3].channel_broadcast);
  }
  ModelBuilder same;  // two tensors of one shape: no padfold mul
  same.input("x", {1, 2, 4, 4}).input("z", {1, 2, 4, 4}).output("y");
  same.node("Mul", {"x", "z"}, {"y"}, "product");
  EXPECT_TRUE(has(import_error(same),
                  "'product' (Mul): its inputs have the shapes [1, 2, 4, 4] and [1, 2, 4, 4]; "
                  "padfold's mul scales a tensor by one value per channel [1, 2, 1, 1]"))
      << import_error(same);
}

// Softmax over the channels: a classifier's [N, K] (axis -1 from opset 13, 1 before) or a
// spatial tensor's axis 1; over another axis it is left.
TEST(OnnxImport, SoftmaxOverChannelsIsALayer) {
  for (int64_t opset : {11, 13}) {
    ModelBuilder b(opset);
    b.input("x", {1, 3, 4, 4}).output("y").output("z");
    b.node("GlobalAveragePool", {"x"}, {"gap"}, "gap");
    b.node("Flatten", {"gap"}, {"flat"}, "flatten");
    b.initializer("w", {3, 5});
    b.node("MatMul", {"flat", "w"}, {"fc"}, "dense");
    b.node("Softmax", {"fc"}, {"y"}, "predictions");
    b.node("Softmax", {"x"}, {"z"}, "over_w");  // opset 13: axis -1 is W; 11: C*H*W
    const ImportResult r = import(b);
    SCOPED_TRACE(opset);
    ASSERT_EQ(spec(r)["layers"].size(), 3u);
    EXPECT_EQ(layer(r, 2)["op"], "softmax");
    EXPECT_EQ(layer(r, 2)["input"], "dense");
    EXPECT_EQ(spec(r)["output_shapes"], json::parse(R"j({"y": [1, 5]})j"));
    ASSERT_EQ(r.left_to_caller.size(), 1u);
    EXPECT_EQ(r.left_to_caller[0].name, "over_w");
    EXPECT_TRUE(
        has(r.left_to_caller[0].reason, "padfold's softmax normalizes over the channels (axis 1"))
        << r.left_to_caller[0].reason;
  }
}

// tf2onnx's Keras input: Mul and Add per channel along the last axis on the NHWC input, then the
// layout Transpose: one depthwise 1x1 conv after the folded edge. With --layout nchw the edge and
// the affine ops are left, saying why.
TEST(OnnxImport, AffineOpsOnAnNhwcInputBecomeALayerAfterTheEdge) {
  ModelBuilder b;
  b.input("x", {1, 5, 6, 3}).output("y");
  b.initializer("m", {3}, {2.f, 4.f, 8.f});
  b.initializer("a", {1, 1, 1, 3}, {1.f, -1.f, 0.5f});
  b.node("Mul", {"x", "m"}, {"xm"}, "scale");
  b.node("Add", {"xm", "a"}, {"xa"}, "shift");
  b.node("Transpose", {"xa"}, {"xt"}, "in_t").ints("perm", {0, 3, 1, 2});
  add_conv(b, "c", "xt", "c_out", 3, 4, 3).str("auto_pad", "SAME_UPPER");
  b.node("Transpose", {"c_out"}, {"y"}, "out_t").ints("perm", {0, 2, 3, 1});
  const ImportResult r = import(b, {}, {});
  EXPECT_TRUE(r.left_to_caller.empty());
  EXPECT_EQ(spec(r)["inputs"][0]["shape"], json::parse("[1, 5, 6, 3]"));
  EXPECT_EQ(spec(r)["inputs"][0]["layout"], "NHWC");
  ASSERT_EQ(spec(r)["layers"].size(), 2u);
  EXPECT_EQ(layer(r, 0)["groups"], 3);
  EXPECT_EQ(layer(r, 1)["input"], layer(r, 0)["name"]);
  ASSERT_GE(r.weights.size(), 2u);
  EXPECT_EQ(r.weights[0].data, (std::vector<float>{2.f, 4.f, 8.f}));
  EXPECT_EQ(r.weights[1].data, (std::vector<float>{1.f, -1.f, 0.5f}));
  std::vector<std::string> roles;
  const json report = rep(r);
  for (const auto& n : report["layers"][0]["onnx_nodes"]) roles.push_back(n["role"]);
  EXPECT_EQ(roles, (std::vector<std::string>{"affine", "affine", "layout"}));

  onnx_import::ImportOptions nchw;
  nchw.layout = onnx_import::ImportLayout::ChannelsFirst;
  const ImportResult left =
      onnx_import::import_model(onnx_import::prepare_model(b.model_copy(), {}, "m.onnx"), nchw);
  std::vector<std::string> names;
  for (const auto& n : left.left_to_caller) names.push_back(n.name);
  EXPECT_EQ(names, (std::vector<std::string>{"scale", "shift", "in_t", "out_t"}));
  EXPECT_TRUE(has(left.left_to_caller[0].reason, "--layout nchw")) << left.left_to_caller[0].reason;
}

// A layout Transpose at a model output whose output a layer also reads (here a Gemm over its
// flattened [1, H, W, C] tensor) is not an edge, even where a channels-last stretch before it makes
// the layers compute channels last: it stays, and the Gemm reads the tensor the file computes.
TEST(OnnxImport, AnOutputTransposeALayerAlsoReadsIsNotAnEdge) {
  ModelBuilder b;
  b.input("x", {1, 3, 4, 5});
  b.node("Transpose", {"x"}, {"xl"}, "to_last").ints("perm", {0, 2, 3, 1});
  b.node("Relu", {"xl"}, {"r"}, "relu");
  b.node("Transpose", {"r"}, {"rf"}, "to_first").ints("perm", {0, 3, 1, 2});
  b.node("MaxPool", {"rf"}, {"p"}, "pool").ints("kernel_shape", {2, 1}).ints("strides", {2, 1});
  b.node("Transpose", {"p"}, {"t"}, "out_t").ints("perm", {0, 2, 3, 1});
  b.int_initializer("flat_shape", {1, 30});
  b.node("Reshape", {"t", "flat_shape"}, {"flat"}, "flatten");
  b.initializer("w", {6, 30});
  b.node("Gemm", {"flat", "w"}, {"y"}, "fc").i("transB", 1);
  b.output("y").output("t");
  const ImportResult r = import(b);
  EXPECT_NE(left_reason(r, "out_t"), "not left");
  const json report = rep(r);
  bool fc_reads_t = false;
  for (const auto& in : report["inputs"])
    if (in["onnx_tensor"] == "t") fc_reads_t = in["produced_by"].is_object();
  EXPECT_TRUE(fc_reads_t) << report["inputs"].dump();
}

TEST(OnnxImport, GemmWithAWrongBShapeNamesTheNode) {
  ModelBuilder b;
  b.input("x", {1, 3, 4, 4}).output("y");
  b.node("GlobalAveragePool", {"x"}, {"gap"}, "gap");
  b.node("Flatten", {"gap"}, {"flat"}, "flatten");
  b.initializer("w", {5, 4});
  b.node("Gemm", {"flat", "w"}, {"y"}, "fc").i("transB", 1);
  EXPECT_TRUE(has(import_error(b),
                  "node 'fc' (Gemm, #2): input B 'w' has the shape [5, 4]; "
                  "expected [K, 3] (transB 1) for A [1, 3, 1, 1]"))
      << import_error(b);
}

TEST(OnnxImport, NamesAreUniqueIdentifiers) {
  ModelBuilder b;
  b.input("0:input/x", {1, 2, 4, 4});
  add_conv(b, "/features/0/Conv", "0:input/x", "t1", 2, 2, 1);
  add_conv(b, "/features/0/Conv.", "t1", "t2", 2, 2, 1);
  b.initializer("w3", {2, 2, 1, 1});
  b.node("Conv", {"t2", "w3"}, {"t3"});
  b.initializer("w4", {2, 2, 1, 1});
  b.node("Conv", {"t3", "w4"}, {"features_0_Conv_argv"}, "features_0_Conv_argv");
  b.output("features_0_Conv_argv");
  const json s = spec(import(b));
  EXPECT_EQ(s["inputs"][0]["name"], "n0_input_x");
  EXPECT_EQ(s["inputs"][0]["description"], "ONNX graph input '0:input/x'");
  // The graph output's layer is named first; no other layer is then named so that its
  // generated "<layer>_argv" would clash with it.
  EXPECT_EQ(s["layers"][0]["name"], "features_0_Conv_2");
  EXPECT_EQ(s["layers"][1]["name"], "features_0_Conv_3");
  EXPECT_EQ(s["layers"][2]["name"], "conv_2");
  EXPECT_EQ(s["layers"][3]["name"], "features_0_Conv_argv");
  EXPECT_EQ(s["layers"][0]["input"], "n0_input_x");
}

// --name takes every model name the spec parser takes: a C identifier of at most kMaxNameLength
// characters, a leading '_' included.
TEST(OnnxImport, ModelNameTakesWhatTheSpecTakes) {
  ModelBuilder b;
  b.input("x", {1, 3, 4, 4}).output("y");
  add_conv(b, "c", "x", "y", 3, 2, 3);
  const auto prepared = onnx_import::prepare_model(b.model_copy(), {}, "m.onnx");
  const auto named = [&](const std::string& name) {
    onnx_import::ImportOptions o;
    o.model_name = name;
    return onnx_import::import_model(prepared, o);
  };
  for (const std::string& name :
       std::vector<std::string>{"_x", "__", "_1", std::string(kMaxNameLength, 'a')}) {
    const ImportResult r = named(name);
    EXPECT_EQ(r.model_name, name);
    EXPECT_EQ(parse_spec(r.spec.dump(), r.model.file).name, name);
  }
  const auto error = [&](const std::string& name) {
    try {
      named(name);
    } catch (const onnx_import::ImportError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error("1x"),
            "--name '1x': expected a C identifier ([A-Za-z_][A-Za-z0-9_]*), e.g. 'n1x'");
  EXPECT_EQ(error("my-net"),
            "--name 'my-net': expected a C identifier ([A-Za-z_][A-Za-z0-9_]*), e.g. 'my_net'");
  const std::string too_long(kMaxNameLength + 1, 'a');
  EXPECT_TRUE(has(error(too_long),
                  "': 65 characters; expected at most 64 (the name becomes part "
                  "of C symbols and file names)"))
      << error(too_long);
}

TEST(OnnxImport, DynamicDimsNeedInput) {
  ModelBuilder b;
  b.input("x", {-1, 3, -1, -1}).input("z", {1, 3, 4, 4}).output("y");
  add_conv(b, "c", "x", "y", 3, 2, 3).ints("strides", {2, 2}).str("auto_pad", "SAME_LOWER");
  const std::string e = import_error(b);
  EXPECT_TRUE(has(e,
                  "m.onnx: graph input 'x' [?, 3, ?, ?] (dims 0, 2, 3 are dynamic: 'd0', 'd2', "
                  "'d3'): give its size with --input x=..."))
      << e;
  EXPECT_FALSE(has(e, "'z'")) << e;
  const ImportResult r = import(b, {onnx_import::parse_input_size("x=2x3x9x9")});
  EXPECT_EQ(spec(r)["inputs"][0]["shape"], json::parse("[2, 3, 9, 9]"));
  EXPECT_EQ(rep(r)["layers"][0]["output_shape"], json::parse("[2, 2, 5, 5]"));

  // A dim with a value below 1 is said to be that value, not dynamic.
  ModelBuilder neg;
  neg.input("x", {1, 3, 4, -1}).output("y");
  add_conv(neg, "c", "x", "y", 3, 2, 3);
  auto* dims = neg.model()
                   .mutable_graph()
                   ->mutable_input(0)
                   ->mutable_type()
                   ->mutable_tensor_type()
                   ->mutable_shape();
  dims->mutable_dim(2)->set_dim_value(-3);
  const std::string en = import_error(neg);
  EXPECT_TRUE(has(en,
                  "m.onnx: graph input 'x' [1, 3, -3, ?] (dim 3 is dynamic: 'd3'; dim 2 is -3, "
                  "not a positive size): give its size with --input x=..."))
      << en;
  dims->mutable_dim(0)->set_dim_value(0);
  dims->mutable_dim(3)->set_dim_value(-1);
  const std::string en2 = import_error(neg);
  EXPECT_TRUE(has(en2,
                  "graph input 'x' [0, 3, -3, -1] (dims 0, 2, 3 are 0, -3, -1, not positive "
                  "sizes)"))
      << en2;

  const std::string e2 = import_error(
      b, {onnx_import::parse_input_size("y=1x3x4x4"), onnx_import::parse_input_size("q=1")});
  EXPECT_TRUE(has(e2, "--input 'y' names no graph input (the graph inputs are 'x', 'z')")) << e2;
  EXPECT_TRUE(has(e2, "--input 'q' names no graph input")) << e2;
  EXPECT_TRUE(has(e2, "graph input 'x' [?, 3, ?, ?]")) << e2;
  const std::string e3 = import_error(b, {onnx_import::parse_input_size("x=1x4x9x9")});
  EXPECT_TRUE(has(e3, "--input 'x': dim 1 is 4 but the model fixes it to 3")) << e3;
  for (const char* bad : {"x", "x=", "=1x2", "x=1xax3", "x=1x0", "x=1x2x"}) {
    try {
      onnx_import::parse_input_size(bad);
      ADD_FAILURE() << bad;
    } catch (const onnx_import::ImportError& err) {
      EXPECT_TRUE(has(err.what(), std::string("--input '") + bad + "'")) << err.what();
    }
  }
}

TEST(OnnxImport, BadModelsNameTheNodeAndField) {
  ModelBuilder ok;
  ok.input("x", {1, 2, 5, 5}).output("y");
  add_conv(ok, "conv1", "x", "y", 2, 2, 3);
  const std::string bytes = ok.bytes();
  try {
    onnx_import::parse_model(bytes.substr(0, bytes.size() / 2), "m.onnx");
    ADD_FAILURE() << "truncated model parsed";
  } catch (const onnx_import::ImportError& e) {
    EXPECT_TRUE(has(e.what(), "m.onnx: not a valid ONNX model: the protobuf does not parse"))
        << e.what();
  }

  ModelBuilder missing;
  missing.input("x", {1, 2, 5, 5}).output("y");
  missing.node("Conv", {"x", "w_missing"}, {"y"}, "conv1");
  EXPECT_EQ(import_error(missing),
            "m.onnx: node 'conv1' (Conv, #0): input 1 'w_missing' is not a graph input, an "
            "initializer or the output of any node; expected every input to be one of these (a "
            "missing initializer?)");

  ModelBuilder both;
  both.input("x", {1, 2, 5, 5}).output("y");
  add_conv(both, "conv2", "x", "y", 2, 2, 3)
      .ints("pads", {1, 1, 1, 1})
      .str("auto_pad", "SAME_UPPER");
  EXPECT_TRUE(has(import_error(both),
                  "m.onnx: node 'conv2' (Conv, #0): attribute 'pads': [1, 1, 1, 1] together with "
                  "auto_pad 'SAME_UPPER'; expected pads only with auto_pad NOTSET"))
      << import_error(both);

  ModelBuilder new_opset(18);
  new_opset.input("x", {1, 2, 5, 5}).output("y");
  add_conv(new_opset, "conv1", "x", "y", 2, 2, 3);
  EXPECT_TRUE(has(import_error(new_opset),
                  "m.onnx: field 'opset_import': opset 18 of the default domain; expected at most "
                  "17"))
      << import_error(new_opset);

  ModelBuilder half = ok;
  half.model().mutable_graph()->mutable_initializer(0)->set_data_type(onnx::TensorProto::FLOAT16);
  EXPECT_TRUE(has(import_error(half),
                  "node 'conv1' (Conv, #0): weights 'w_conv1' are float16; expected float32"))
      << import_error(half);

  ModelBuilder external = ok;
  external.model().mutable_graph()->mutable_initializer(0)->set_data_location(
      onnx::TensorProto::EXTERNAL);
  EXPECT_TRUE(has(import_error(external),
                  "m.onnx: initializer 'w_conv1': its data is stored "
                  "outside the model file (external data)"))
      << import_error(external);

  ModelBuilder wrong_w;
  wrong_w.input("x", {1, 2, 5, 5}).output("y");
  add_conv(wrong_w, "conv1", "x", "y", 4, 2, 3);  // weights for 4 input channels
  EXPECT_TRUE(has(import_error(wrong_w),
                  "input 1 (weights) 'w_conv1' has shape [2, 4, 3, 3]; "
                  "expected [2, 2, 3, 3]"))
      << import_error(wrong_w);

  ModelBuilder pool;
  pool.input("x", {1, 2, 5, 5}).output("y");
  pool.node("MaxPool", {"x"}, {"y"}, "mp");
  EXPECT_TRUE(
      has(import_error(pool), "node 'mp' (MaxPool, #0): attribute 'kernel_shape' is missing"))
      << import_error(pool);

  ModelBuilder type;
  type.input("x", {1, 2, 5, 5}).output("y");
  add_conv(type, "conv1", "x", "y", 2, 2, 3).f("group", 1.f);
  EXPECT_TRUE(
      has(import_error(type), "node 'conv1' (Conv, #0): attribute 'group' is FLOAT; expected INT"))
      << import_error(type);

  ModelBuilder u8;
  u8.input("x", {1, 1, 5, 5}, onnx::TensorProto::UINT8).output("y", onnx::TensorProto::UINT8);
  u8.node("MaxPool", {"x"}, {"y"}, "mp").ints("kernel_shape", {2, 2});
  EXPECT_TRUE(
      has(import_error(u8), "node 'mp' (MaxPool, #0): input 'x' is uint8; expected float32"))
      << import_error(u8);
}

// Found by tests/fuzz/fuzz_onnx_graph: a ConvTranspose read only by a Constant that had an input,
// and graph outputs no node produced, imported to a spec with no outputs that did not parse.
TEST(OnnxImport, GraphOutputsAndConstantsMustBeWellFormed) {
  ModelBuilder unproduced;
  unproduced.input("x", {1, 2, 5, 5}).output("y").output("z");
  add_conv(unproduced, "conv1", "x", "y", 2, 2, 3);
  EXPECT_EQ(import_error(unproduced),
            "m.onnx: graph output 1 'z' is not a graph input, an initializer or the output of "
            "any node; expected every graph output to be one of these");

  ModelBuilder constant_reads;
  constant_reads.input("x", {1, 2, 5, 5}).output("y");
  add_conv(constant_reads, "conv1", "x", "u", 2, 2, 3);
  constant_reads.node("Constant", {"u"}, {"y"}, "k");
  EXPECT_EQ(import_error(constant_reads),
            "m.onnx: node 'k' (Constant, #1): has 1 input(s); expected a Constant to have none");
}

TEST(OnnxImport, NothingSupportedIsAnError) {
  ModelBuilder b;
  b.input("x", {1, 2, 5, 5}).output("y");
  b.node("Erf", {"x"}, {"y"}, "hs");
  EXPECT_TRUE(
      has(import_error(b), std::string("no node of m.onnx is supported: padfold generates ") +
                               kGeneratedOps + "; 'hs' (Erf): padfold does not generate Erf"))
      << import_error(b);
}

TEST(OnnxImport, OnlyBypassedNodesSayWhy) {
  ModelBuilder b;
  b.input("x", {1, 2, 5, 5}).output("y");
  b.node("Identity", {"x"}, {"y"}, "id");
  EXPECT_TRUE(has(import_error(b), "; 'id' (Identity): bypassed (its output stands for its input)"))
      << import_error(b);
}

// Found by tests/fuzz/fuzz_onnx. Strings that are not UTF-8 would make the JSON written throw
// nlohmann's type_error 316: refused when the model is read, naming where.
TEST(OnnxImportFuzz, StringsThatAreNotUtf8AreRefused) {
  ModelBuilder ok;
  ok.input("x", {1, 2, 5, 5}).output("y");
  add_conv(ok, "conv1", "x", "y", 2, 2, 3);
  ModelBuilder producer = ok;
  producer.model().set_producer_name("ba\xa6kend");
  EXPECT_EQ(import_error(producer),
            "m.onnx: field 'producer_name' is not valid UTF-8; expected UTF-8 text (ONNX strings "
            "are UTF-8)");
  ModelBuilder node = ok;
  node.model().mutable_graph()->mutable_node(0)->set_name("c\xc0\x80");  // overlong NUL
  EXPECT_TRUE(has(import_error(node), "m.onnx: node #0: its name is not valid UTF-8"))
      << import_error(node);
  ModelBuilder tensor = ok;
  tensor.model().mutable_graph()->mutable_node(0)->set_output(0, "y\xed\xa0\x80");  // surrogate
  EXPECT_TRUE(has(import_error(tensor), "m.onnx: node #0: output 0 is not valid UTF-8"))
      << import_error(tensor);
  ModelBuilder cut = ok;
  cut.model().mutable_graph()->mutable_input(0)->set_name("x\xe2\x82");  // a cut sequence
  EXPECT_TRUE(has(import_error(cut), "m.onnx: graph input #0: its name is not valid UTF-8"))
      << import_error(cut);
  ModelBuilder fine = ok;
  fine.model().mutable_graph()->mutable_node(0)->set_name(
      "conv_\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
  EXPECT_EQ(import_error(fine), "");
}

// A shape whose element count wraps around 2^64 was taken for an empty tensor.
TEST(OnnxImportFuzz, ElementCountsDoNotWrapAround) {
  onnx::TensorProto t;
  t.set_data_type(onnx::TensorProto::FLOAT);
  t.add_dims(int64_t{1} << 31);
  t.add_dims(int64_t{1} << 33);
  try {
    onnx_import::to_float_tensor(t, "initializer 'w'");
    ADD_FAILURE() << "a tensor of 2^64 elements converted";
  } catch (const onnx_import::ImportError& e) {
    EXPECT_TRUE(has(e.what(),
                    "initializer 'w': shape [2147483648, 8589934592] has more than 2^31 "
                    "elements"))
        << e.what();
  }
  t.add_dims(0);  // empty, however large the other dims
  EXPECT_TRUE(onnx_import::to_float_tensor(t, "w").data.empty());
}

// INT32 pads in raw_data went through float, rounding values above 2^24.
TEST(OnnxImportFuzz, Int32RawPadsStayExact) {
  onnx::TensorProto t;
  t.set_data_type(onnx::TensorProto::INT32);
  t.add_dims(2);
  const int32_t v[2] = {16777217, -3};
  t.set_raw_data(std::string(reinterpret_cast<const char*>(v), sizeof v));
  EXPECT_EQ(onnx_import::to_int64s(t, "pads"), (std::vector<int64_t>{16777217, -3}));
  t.set_raw_data(std::string(reinterpret_cast<const char*>(v), 5));
  EXPECT_THROW(onnx_import::to_int64s(t, "pads"), onnx_import::ImportError);
}

// An empty INT64 tensor in raw_data (a Pad's pads of shape [0]) handed memcpy the empty vector's
// null data (UBSan, fuzz_onnx_graph; tests/fuzz/seeds/onnx/regress_empty_int64_raw_data.onnx).
TEST(OnnxImportFuzz, EmptyInt64RawDataIsNoValues) {
  onnx::TensorProto t;
  t.set_data_type(onnx::TensorProto::INT64);
  t.add_dims(0);
  t.set_raw_data("");
  EXPECT_TRUE(onnx_import::to_int64s(t, "pads").empty());
}

// An Identity reading its own output made the alias walk loop forever; nodes out of order are
// refused where they are read, whatever reads them.
TEST(OnnxImportFuzz, CyclesAndNodesOutOfOrderAreRefused) {
  ModelBuilder loop;
  loop.input("x", {1, 2, 5, 5}).output("y");
  add_conv(loop, "conv1", "x", "y", 2, 2, 3);
  loop.node("Identity", {"t"}, {"t"}, "self");
  EXPECT_EQ(import_error(loop),
            "m.onnx: node 'self' (Identity, #1): input 0 't' is the output of this node; expected "
            "the nodes in topological order (every input produced by an earlier node)");
  ModelBuilder order;
  order.input("x", {1, 2, 5, 5}).output("y");
  order.node("Relu", {"r"}, {"y"}, "late");
  add_conv(order, "conv1", "x", "r", 2, 2, 3);
  EXPECT_EQ(import_error(order),
            "m.onnx: node 'late' (Relu, #0): input 0 'r' is the output of node 'conv1' (Conv, #1), "
            "later in the graph; expected the nodes in topological order (every input produced by "
            "an earlier node)");
}

// Add and Concat went unchecked by the spec parser: a concat of 64 inputs, an add of three, and
// joins of buffers of 2^31 bytes or more made specs `padfold check` refuses.
TEST(OnnxImportFuzz, JoinsTheParserRefusesAreLeft) {
  ModelBuilder cat;
  std::vector<std::string> ins;
  for (int k = 0; k < 64; ++k) {
    ins.push_back("x" + std::to_string(k));
    cat.input(ins.back(), {1, 1, 4, 4});
  }
  cat.output("y").output("p");
  cat.node("Concat", ins, {"y"}, "cat").i("axis", 1);
  cat.node("MaxPool", {"x0"}, {"p"}, "mp").ints("kernel_shape", {2, 2});
  const ImportResult r = import(cat);
  ASSERT_EQ(r.left_to_caller.size(), 1u);
  EXPECT_EQ(r.left_to_caller[0].reason, "it has 64 inputs; padfold's concat takes at most 63");

  ModelBuilder add3;
  add3.input("a", {1, 1, 4, 4}).input("b", {1, 1, 4, 4}).output("y").output("p");
  add3.node("Add", {"a", "b", "a"}, {"y"}, "add");
  add3.node("MaxPool", {"a"}, {"p"}, "mp").ints("kernel_shape", {2, 2});
  const ImportResult r3 = import(add3);
  ASSERT_EQ(r3.left_to_caller.size(), 1u);
  EXPECT_EQ(r3.left_to_caller[0].reason, "it has 3 inputs");

  ModelBuilder big;
  big.input("a", {1, 1, 32768, 16384}).input("b", {1, 1, 32768, 16384}).input("s", {1, 1, 4, 4});
  big.output("y").output("p");
  big.node("Add", {"a", "b"}, {"y"}, "add");  // 2 GiB each
  big.node("MaxPool", {"s"}, {"p"}, "mp").ints("kernel_shape", {2, 2});
  const ImportResult rb = import(big);
  ASSERT_EQ(rb.left_to_caller.size(), 1u);
  EXPECT_TRUE(has(rb.left_to_caller[0].reason, "padfold refuses the layer"))
      << rb.left_to_caller[0].reason;
}

// A Concat, Conv or pool node with no output read output 0 all the same (UBSan, fuzz_onnx). Shape
// inference refuses most such nodes; the importer must not rely on it.
TEST(OnnxImportFuzz, NodesWithoutAnOutputAreLeft) {
  for (const char* op : {"Concat", "Conv", "MaxPool"}) {
    ModelBuilder b;
    b.input("x", {1, 2, 4, 4}).output("p").initializer("w", {2, 2, 1, 1});
    auto n = b.node(op,
                    std::string(op) == "Conv" ? std::vector<std::string>{"x", "w"}
                                              : std::vector<std::string>{"x", "x"},
                    {"dead"}, "dead");
    if (std::string(op) == "Concat") n.i("axis", 1);
    if (std::string(op) == "MaxPool") n.ints("kernel_shape", {2, 2});
    b.node("MaxPool", {"x"}, {"p"}, "mp").ints("kernel_shape", {2, 2});
    auto prepared = onnx_import::prepare_model(b.model_copy(), {}, "m.onnx");
    prepared.model.mutable_graph()->mutable_node(0)->clear_output();
    prepared.inferred.mutable_graph()->mutable_node(0)->clear_output();
    const ImportResult r = onnx_import::import_model(prepared, {});
    ASSERT_EQ(r.left_to_caller.size(), 1u) << op;
    EXPECT_EQ(r.left_to_caller[0].reason, "it has no output") << op;
  }
}

// A LeakyRelu's alpha or a constant Pad's value of inf or NaN made a spec whose JSON holds null
// there, which padfold's parser refuses (fuzz_onnx_graph): such nodes are left to the caller.
TEST(OnnxImportFuzz, NonFiniteAlphasAndPadValuesAreLeft) {
  for (const float v :
       {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
        std::numeric_limits<float>::quiet_NaN()}) {
    ModelBuilder leaky;
    leaky.input("x", {1, 2, 5, 5}).output("r");
    add_conv(leaky, "c", "x", "t", 2, 2, 3);
    leaky.node("LeakyRelu", {"t"}, {"r"}, "leaky").f("alpha", v);
    const ImportResult r = import(leaky);
    ASSERT_EQ(r.left_to_caller.size(), 1u) << v;
    EXPECT_EQ(r.left_to_caller[0].name, "leaky");
    EXPECT_EQ(r.left_to_caller[0].reason, "not fused: its alpha is not a finite number");
    EXPECT_FALSE(layer(r, 0).contains("activation"));

    const ModelBuilder pad =
        pad_model("constant", {0, 0, 1, 1, 0, 0, 1, 1}, v,
                  [](ModelBuilder& m) { add_conv(m, "c", "xp", "y", 2, 4, 3); });
    const ImportResult rp = import(pad);
    ASSERT_EQ(rp.left_to_caller.size(), 1u) << v;
    EXPECT_EQ(rp.left_to_caller[0].name, "pad");
    EXPECT_EQ(rp.left_to_caller[0].reason, "not folded: its constant value is not a finite number");
    EXPECT_EQ(layer(rp, 0)["input"], "xp");
  }
}

// Signed overflow (UBSan): a ConvTranspose's output channels, a Pad's pads added to the conv's.
TEST(OnnxImportFuzz, HugeChannelsAndPadsDoNotOverflow) {
  ModelBuilder ct;
  ct.input("x", {1, 2, 4, 4}).output("y");
  ct.initializer("w", {2, 1, 1, 1});
  ct.model().mutable_graph()->mutable_initializer(0)->set_dims(1, int64_t{1} << 62);
  ct.node("ConvTranspose", {"x", "w"}, {"y"}, "up").i("group", 2);
  EXPECT_TRUE(has(import_error(ct),
                  "node 'up' (ConvTranspose, #0): input 1 (weights) 'w' has "
                  "shape [2, 4611686018427387904, 1, 1] and group 2: the output "
                  "channels overflow"))
      << import_error(ct);

  ModelBuilder pad;
  pad.input("x", {1, 2, 5, 5}).output("y");
  pad.int_initializer("pads", {0, 0, int64_t{1} << 62, 0, 0, 0, 0, 0});
  pad.node("Pad", {"x", "pads"}, {"xp"}, "pad");
  add_conv(pad, "conv1", "xp", "y", 2, 2, 3).ints("pads", {1, 1, 1, 1});
  EXPECT_TRUE(has(import_error(pad),
                  "'pad' (Pad): not folded: its pads [0, 0, 4611686018427387904, "
                  "0, 0, 0, 0, 0] exceed 2147483647"))
      << import_error(pad);
}

// libonnx 1.12's shape inference of a strided SAME conv/pool counted a huge dim down by the
// stride (hours for a Pad of 2^45); such an input is refused first and the node left.
TEST(OnnxImportFuzz, HugeInputToASameConvDoesNotHangShapeInference) {
  ModelBuilder b;
  b.input("x", {1, 2, 5, 5}).output("y").output("p");
  b.int_initializer("pads", {0, 0, int64_t{1} << 45, 0, 0, 0, 0, 0});
  b.node("Pad", {"x", "pads"}, {"xp"}, "pad");
  add_conv(b, "conv1", "xp", "y", 2, 2, 3).ints("strides", {2, 2}).str("auto_pad", "SAME_UPPER");
  b.node("MaxPool", {"x"}, {"p"}, "mp").ints("kernel_shape", {2, 2});
  const ImportResult r = import(b);
  ASSERT_EQ(r.left_to_caller.size(), 2u);
  EXPECT_EQ(r.left_to_caller[1].name, "conv1");
  EXPECT_TRUE(has(r.left_to_caller[1].reason, "padfold refuses the layer"))
      << r.left_to_caller[1].reason;
}

// libonnx 1.12's ConvTranspose (and Conv) inference read dims a scalar weight does not have: a
// segfault. The rank is checked first; the importer names the weights.
TEST(OnnxImportFuzz, WeightsOfTheWrongRankDoNotCrashShapeInference) {
  for (const char* op : {"ConvTranspose", "Conv"}) {
    ModelBuilder b;
    b.input("x", {1, 2, 4, 4}).output("y");
    b.initializer("w", {});
    b.node(op, {"x", "w"}, {"y"}, "c").ints("strides", {2, 2}).str("auto_pad", "SAME_LOWER");
    EXPECT_EQ(import_error(b), std::string("m.onnx: node 'c' (") + op +
                                   ", #0): input 1 (weights) 'w' has shape []; expected rank 4 "
                                   "like input 'x' [1, 2, 4, 4]");
  }
}

// libonnx 1.12's conv/pool inference divided by a stride of 0 (SIGFPE); the importer names the
// attribute.
TEST(OnnxImportFuzz, ZeroStridesDoNotCrashShapeInference) {
  for (const char* attr : {"strides", "dilations"}) {
    ModelBuilder b;
    b.input("x", {1, 2, 8, 8}).output("y");
    add_conv(b, "c", "x", "y", 2, 2, 3).ints(attr, {0, 2}).str("auto_pad", "SAME_UPPER");
    EXPECT_EQ(import_error(b), std::string("m.onnx: node 'c' (Conv, #0): attribute '") + attr +
                                   "': [0, 2]; expected values >= 1");
  }
  ModelBuilder p;
  p.input("x", {1, 2, 8, 8}).output("y");
  p.node("MaxPool", {"x"}, {"y"}, "mp").ints("kernel_shape", {2, 0}).ints("strides", {2, 2});
  EXPECT_EQ(import_error(p),
            "m.onnx: node 'mp' (MaxPool, #0): attribute 'kernel_shape': [2, 0]; expected values "
            ">= 1");
}

// Negative attribute values are printed as they are (they were once '?').
TEST(OnnxImport, NegativeAttributeValuesAreShown) {
  ModelBuilder b;
  b.input("x", {1, 2, 8, 8}).output("y");
  add_conv(b, "c", "x", "y", 2, 2, 3).ints("pads", {-1, 0, 0, -1});
  EXPECT_EQ(import_error(b),
            "m.onnx: node 'c' (Conv, #0): attribute 'pads': [-1, 0, 0, -1] has a negative value; "
            "expected pads >= 0");
  ModelBuilder d;
  d.input("x", {1, 2, 8, 8}).output("y");
  add_conv(d, "c", "x", "y", 2, 2, 3).ints("dilations", {-1, 1});
  EXPECT_EQ(import_error(d),
            "m.onnx: node 'c' (Conv, #0): attribute 'dilations': [-1, 1]; expected values >= 1");
}

// libonnx 1.12's shape inference copied a Constant's or initializer's raw_data into a vector sized
// by rounding its length down to whole elements (a heap overflow, found by fuzz_onnx). The model
// is refused when it is read, naming the tensor, before shape inference sees it.
TEST(OnnxImportFuzz, RawDataOfTheWrongLengthIsRefusedBeforeShapeInference) {
  const auto model = [](bool in_constant, size_t bytes) {
    ModelBuilder b;
    b.input("x", {1, 2, 4, 4}).output("y");
    onnx::TensorProto t;
    t.set_data_type(onnx::TensorProto::INT64);
    t.add_dims(8);
    t.set_raw_data(std::string(bytes, '\0'));
    if (in_constant) {
      onnx::AttributeProto* a = b.node("Constant", {}, {"p"}, "k").proto().add_attribute();
      a->set_name("value");
      a->set_type(onnx::AttributeProto::TENSOR);
      *a->mutable_t() = t;
    } else {
      t.set_name("p");
      *b.model().mutable_graph()->add_initializer() = t;
    }
    b.node("Pad", {"x", "p"}, {"y"}, "pad");
    return b;
  };
  EXPECT_EQ(import_error(model(true, 63)),
            "m.onnx: node 'k' (Constant, #0): attribute 'value': raw_data has 63 bytes; expected "
            "64 for shape [8] of int64");
  EXPECT_EQ(import_error(model(false, 65)),
            "m.onnx: initializer 'p': raw_data has 65 bytes; expected 64 for shape [8] of int64");
  for (bool in_constant : {true, false})  // the right length reads on to the importer's own check
    EXPECT_FALSE(has(import_error(model(in_constant, 64)), "raw_data")) << in_constant;
}

// A ceil_mode pool whose last window would start past the input: ONNX shape inference counts it,
// padfold does not. The conv reading the pool took ONNX's shape as its input_shape, and the spec
// contradicted itself (the whole-spec check refused it). Layers now read padfold's shapes.
TEST(OnnxImportFuzz, LayersReadPadfoldsShapeOfTheLayerBefore) {
  ModelBuilder b;
  b.input("x", {1, 2, 10, 10}).output("y");
  b.node("MaxPool", {"x"}, {"p"}, "pool")
      .ints("kernel_shape", {2, 2})
      .ints("strides", {5, 5})
      .i("ceil_mode", 1);
  add_conv(b, "conv", "p", "y", 2, 2, 1);
  // A tensor a node left to the caller computes after the pool has the size ONNX Runtime gives
  // it too: libonnx's inference is rerun with that pool's ceil_mode cleared (the same size).
  b.node("Erf", {"p"}, {"e"}, "erf");
  add_conv(b, "conv2", "e", "z", 2, 2, 1);
  b.output("z");
  const ImportResult r = import(b);
  EXPECT_EQ(rep(r)["layers"][0]["output_shape"], json::parse("[1, 2, 2, 2]"));
  EXPECT_EQ(layer(r, 1)["input_shape"], json::parse("[1, 2, 2, 2]"));
  EXPECT_EQ(layer(r, 2)["input_shape"], json::parse("[1, 2, 2, 2]"));
  EXPECT_TRUE(r.warnings.empty()) << r.warnings[0];
}

// --emit-onnx: auto_pad rewritten to pads, ConvTranspose per the ONNX spec.
TEST(OnnxNormalize, AutoPadBecomesPads) {
  ModelBuilder b;
  b.input("x", {1, 1, 7, 7}).input("t", {1, 1, 3, 3});
  b.initializer("w", {1, 1, 4, 4});
  b.node("Conv", {"x", "w"}, {"y"}, "conv").ints("strides", {2, 2}).str("auto_pad", "SAME_UPPER");
  b.node("MaxPool", {"x"}, {"m"}, "mp")
      .ints("kernel_shape", {2, 2})
      .ints("strides", {3, 3})
      .str("auto_pad", "SAME_LOWER");
  b.node("AveragePool", {"x"}, {"a"}, "ap").ints("kernel_shape", {3, 3}).str("auto_pad", "VALID");
  b.initializer("wt", {1, 1, 3, 3});
  b.node("ConvTranspose", {"t", "wt"}, {"u"}, "up_upper")
      .ints("strides", {2, 2})
      .str("auto_pad", "SAME_UPPER");
  b.node("ConvTranspose", {"t", "wt"}, {"l"}, "up_lower")
      .ints("strides", {2, 2})
      .str("auto_pad", "SAME_LOWER");
  b.initializer("w1", {1, 1, 1, 1});
  b.node("ConvTranspose", {"t", "w1"}, {"e"}, "up_extend")
      .ints("strides", {3, 3})
      .str("auto_pad", "SAME_UPPER");
  for (const char* o : {"y", "m", "a", "u", "l", "e"}) b.output(o);
  const auto prepared = onnx_import::prepare_model(b.model_copy(), {}, "m.onnx");
  const onnx_import::NormalizeResult r = onnx_import::normalize_auto_pad(prepared);
  auto attrs = [&](int i) { return onnx_import::NodeAttributes(r.model.graph().node(i)); };
  for (int i = 0; i < 6; ++i) EXPECT_FALSE(attrs(i).has("auto_pad")) << i;
  EXPECT_EQ(attrs(0).get_ints("pads"), (std::vector<int64_t>{1, 1, 2, 2}));  // 7, k4 s2
  EXPECT_EQ(attrs(1).get_ints("pads"), (std::vector<int64_t>{1, 1, 0, 0}));  // 7, k2 s3
  EXPECT_EQ(attrs(2).get_ints("pads"), (std::vector<int64_t>{0, 0, 0, 0}));
  // ConvTranspose 3, k3 s2: full 7, output 6, one pixel cropped: at the end for SAME_UPPER.
  EXPECT_EQ(attrs(3).get_ints("pads"), (std::vector<int64_t>{0, 0, 1, 1}));
  EXPECT_EQ(attrs(4).get_ints("pads"), (std::vector<int64_t>{1, 1, 0, 0}));
  // 3, k1 s3: full 7, output 9: two more at the end, as output_padding.
  EXPECT_EQ(attrs(5).get_ints("pads"), (std::vector<int64_t>{0, 0, 0, 0}));
  EXPECT_EQ(attrs(5).get_ints("output_padding"), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(r.changes.size(), 6u);
  ASSERT_EQ(r.warnings.size(), 4u);
  EXPECT_TRUE(has(r.warnings[0], "ONNX Runtime before 1.13 swapped SAME_UPPER and SAME_LOWER"))
      << r.warnings[0];
  EXPECT_TRUE(has(r.warnings[2], "'up_extend'") && has(r.warnings[2], "spans less than the stride"))
      << r.warnings[2];

  // The normalized model imports to the same output shapes, with explicit pads. up_extend's
  // SAME, where ONNX Runtime and the ONNX spec disagree, is left to the caller before.
  ModelBuilder n;
  n.model() = r.model;
  const ImportResult before = import(b), after = import(n);
  ASSERT_EQ(rep(before)["layers"].size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(rep(before)["layers"][i]["output_shape"], rep(after)["layers"][i]["output_shape"])
        << i;
    EXPECT_TRUE(layer(after, i)["padding"].is_object()) << layer(after, i);
  }
  EXPECT_EQ(rep(after)["layers"][5]["output_shape"], json::parse("[1, 1, 9, 9]"));
  EXPECT_TRUE(has(left_reason(before, "up_extend"), "ONNX Runtime (input - 1) x stride + 1"))
      << left_reason(before, "up_extend");
}

// --- quantized graphs (quant_graph.h) --------------------------------------------------------

// An int8/uint8/int32 initializer (values in int32_data, as ONNX stores them).
void typed_initializer(ModelBuilder& b, const std::string& name, int type,
                       const std::vector<int64_t>& shape, const std::vector<int32_t>& values) {
  onnx::TensorProto* t = b.model().mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(type);
  for (int64_t d : shape) t->add_dims(d);
  for (int32_t v : values) t->add_int32_data(v);
}

constexpr int kI8 = onnx::TensorProto::INT8, kI32 = onnx::TensorProto::INT32;

// x -> QuantizeLinear (scale 0.02, zero point 3) -> xq, and its DequantizeLinear xd.
ModelBuilder quantized_input() {
  ModelBuilder b;
  b.input("x", {1, 2, 5, 5});
  b.initializer("xs", {}, {0.02f});
  typed_initializer(b, "xz", kI8, {}, {3});
  b.node("QuantizeLinear", {"x", "xs", "xz"}, {"xq"}, "qx");
  b.node("DequantizeLinear", {"xq", "xs", "xz"}, {"xd"}, "dqx");
  return b;
}

std::vector<int32_t> int8_weights() {
  std::vector<int32_t> w(3 * 2 * 3 * 3);
  for (size_t k = 0; k < w.size(); ++k) w[k] = static_cast<int32_t>(k % 7) * 20 - 60;
  return w;
}

TEST(OnnxImportQuant, QdqConvPerChannelWeightsReluAndEdges) {
  ModelBuilder b = quantized_input();
  typed_initializer(b, "w", kI8, {3, 2, 3, 3}, int8_weights());
  const std::vector<float> ws = {0.01f, 0.02f, 0.03f};
  b.initializer("ws", {3}, ws);
  typed_initializer(b, "wz", kI8, {3}, {0, 0, 0});
  b.node("DequantizeLinear", {"w", "ws", "wz"}, {"wd"}, "dqw").i("axis", 0);
  typed_initializer(b, "bias", kI32, {3}, {100, -200, 300});
  b.initializer("bs", {3}, {0.02f * ws[0], 0.02f * ws[1], 0.02f * ws[2]});
  typed_initializer(b, "bz", kI32, {3}, {0, 0, 0});
  b.node("DequantizeLinear", {"bias", "bs", "bz"}, {"bd"}, "dqb").i("axis", 0);
  b.node("Conv", {"xd", "wd", "bd"}, {"c"}, "conv").ints("pads", {1, 1, 1, 1});
  b.node("Relu", {"c"}, {"r"}, "relu");
  b.initializer("ys", {}, {0.05f});
  typed_initializer(b, "yz", kI8, {}, {-128});
  b.node("QuantizeLinear", {"r", "ys", "yz"}, {"yq"}, "qy");
  b.node("DequantizeLinear", {"yq", "ys", "yz"}, {"y"}, "dqy");
  b.output("y");
  const ImportResult r = import(b);
  const json layers = spec(r)["layers"];
  ASSERT_EQ(layers.size(), 3u) << layers.dump(2);
  EXPECT_EQ(layers[0]["op"], "quantize");
  EXPECT_EQ(layers[0]["input"], "x");
  EXPECT_EQ(layers[0]["quant"]["output"]["zero_point"], 3);
  const json conv = layers[1];
  EXPECT_EQ(conv["op"], "conv2d");
  EXPECT_EQ(conv["dtype"], "int8");
  EXPECT_EQ(conv["activation"], "relu");
  EXPECT_EQ(conv["quant"]["requantize"], "onnx");
  EXPECT_EQ(conv["quant"]["input"]["scale"].get<float>(), 0.02f);
  EXPECT_EQ(conv["quant"]["input"]["zero_point"], 3);
  EXPECT_EQ(conv["quant"]["output"]["zero_point"], -128);
  ASSERT_EQ(conv["quant"]["weight_scale"].size(), 3u);
  for (size_t o = 0; o < 3; ++o) EXPECT_EQ(conv["quant"]["weight_scale"][o].get<float>(), ws[o]);
  EXPECT_EQ(layers[2]["op"], "dequantize");
  EXPECT_EQ(layers[2]["input"], conv["name"]);
  EXPECT_EQ(spec(r)["outputs"], json::array({layers[2]["name"]}));
  ASSERT_EQ(r.weights.size(), 2u);
  EXPECT_EQ(r.weights[0].dtype, NpyDType::I8);
  EXPECT_EQ(r.weights[0].shape, (std::vector<int64_t>{3, 2, 3, 3}));
  EXPECT_EQ(r.weights[0].ints, int8_weights());
  EXPECT_EQ(r.weights[1].dtype, NpyDType::I32);
  EXPECT_EQ(r.weights[1].ints, (std::vector<int32_t>{100, -200, 300}));
  EXPECT_TRUE(r.left_to_caller.empty());
  EXPECT_EQ(absorbed_roles(r)["dqx"], "quantization");
}

// A Reshape of a quantized [1, 2, 5] tensor to [1, 2, 1, 5] before the QDQ conv, and of its
// output back to [1, 3, 5] (TFLite's Conv1D through tf2onnx), stand for their inputs: the conv is
// a conv1d on the tensor as it is. A Reshape that moves values between axes is refused, naming
// it.
TEST(OnnxImportQuant, ReshapeOfUnitAxesStandsForItsInput) {
  for (const bool unit : {true, false}) {
    ModelBuilder b;
    b.input("x", {1, 2, 5});
    b.initializer("xs", {}, {0.02f});
    typed_initializer(b, "xz", kI8, {}, {3});
    b.node("QuantizeLinear", {"x", "xs", "xz"}, {"xq"}, "qx");
    b.int_initializer("shape",
                      unit ? std::vector<int64_t>{1, 2, 1, 5} : std::vector<int64_t>{1, 5, 1, 2});
    b.node("Reshape", {"xq", "shape"}, {"xr"}, "unsqueeze");
    b.node("DequantizeLinear", {"xr", "xs", "xz"}, {"xd"}, "dqx");
    typed_initializer(b, "w", kI8, {3, unit ? 2 : 5, 1, 3},
                      std::vector<int32_t>(unit ? 18 : 45, 7));
    b.initializer("ws", {}, {0.01f});
    typed_initializer(b, "wz", kI8, {}, {0});
    b.node("DequantizeLinear", {"w", "ws", "wz"}, {"wd"}, "dqw");
    b.node("Conv", {"xd", "wd"}, {"c"}, "conv").ints("pads", {0, 1, 0, 1});
    b.initializer("ys", {}, {0.05f});
    typed_initializer(b, "yz", kI8, {}, {-1});
    b.node("QuantizeLinear", {"c", "ys", "yz"}, {"cq"}, "qy");
    b.int_initializer("shape_out", {1, 3, 5});
    b.node("Reshape", {"cq", "shape_out"}, {"cr"}, "squeeze");
    b.node("DequantizeLinear", {"cr", "ys", "yz"}, {"y"}, "dqy");
    b.output("y");
    if (!unit) {
      const std::string error = import_error(b);
      EXPECT_TRUE(has(error, "'unsqueeze'")) << error;
      continue;
    }
    const ImportResult r = import(b);
    ASSERT_TRUE(r.left_to_caller.empty());
    EXPECT_EQ(layer(r, 1)["op"], "conv1d") << layer(r, 1).dump();
    EXPECT_EQ(layer(r, 1)["input"], layer(r, 0)["name"]);
    EXPECT_EQ(absorbed_roles(r)["unsqueeze"], "bypassed");
    EXPECT_EQ(absorbed_roles(r)["squeeze"], "bypassed");
    EXPECT_EQ(layer(r, 2)["op"], "dequantize");
    EXPECT_EQ(layer(r, 2)["input"], layer(r, 1)["name"]);
  }
}

// x -> Q -> Pad(constant `value`, an int8 initializer) -> QLinearConv -> DequantizeLinear.
ModelBuilder padded_qlinear_conv(int32_t value) {
  ModelBuilder b = quantized_input();
  b.int_initializer("pads", {0, 0, 1, 2, 0, 0, 1, 2});
  typed_initializer(b, "pv", kI8, {}, {value});
  b.node("Pad", {"xq", "pads", "pv"}, {"xp"}, "pad");
  typed_initializer(b, "w", kI8, {3, 2, 3, 3}, int8_weights());
  b.initializer("ws", {}, {0.01f});
  typed_initializer(b, "wz", kI8, {}, {0});
  b.initializer("ys", {}, {0.05f});
  typed_initializer(b, "yz", kI8, {}, {-1});
  b.node("QLinearConv", {"xp", "xs", "xz", "w", "ws", "wz", "ys", "yz"}, {"cq"}, "qconv");
  b.node("DequantizeLinear", {"cq", "ys", "yz"}, {"y"}, "dqy");
  b.output("y");
  return b;
}

TEST(OnnxImportQuant, PadOfTheZeroPointFoldsAsZeros) {
  const ImportResult r = import(padded_qlinear_conv(3));  // 3: the zero point, the real 0
  const json conv = layer(r, 1);
  EXPECT_EQ(conv["op"], "conv2d");
  EXPECT_EQ(conv["input"], layer(r, 0)["name"]);  // the unpadded tensor
  EXPECT_EQ(conv["padding"]["pads"], json::array({1, 2, 1, 2}));
  EXPECT_FALSE(conv.contains("border")) << conv.dump();  // zeros: the zero point
  EXPECT_EQ(conv["quant"]["weight_scale"].get<float>(), 0.01f);
  EXPECT_EQ(absorbed_roles(r).count("pad"), 0u);  // folded, listed with the layer
  EXPECT_TRUE(r.left_to_caller.empty());
  ASSERT_EQ(rep(r)["layers"][1]["onnx_nodes"][0]["name"], "pad");
}

TEST(OnnxImportQuant, PadOfAnotherValueFoldsAsItsRealValue) {
  const json conv = layer(import(padded_qlinear_conv(5)), 1);
  EXPECT_EQ(conv["padding"]["pads"], json::array({1, 2, 1, 2}));
  ASSERT_TRUE(conv.contains("border"));
  EXPECT_EQ(conv["border"]["mode"], "constant");
  EXPECT_NEAR(conv["border"]["value"].get<double>(), (5 - 3) * 0.02, 1e-7);
}

// x -> Q -> DQ -> GlobalAveragePool -> Q -> DQ -> Flatten -> Gemm(DQ(int8 B), DQ(int32 C),
// transB `trans_b`) -> Q -> DQ: a classifier's end as ONNX Runtime's quantize_static writes it.
ModelBuilder qdq_classifier(int64_t trans_b) {
  ModelBuilder b = quantized_input();
  b.node("GlobalAveragePool", {"xd"}, {"g"}, "gap");
  b.initializer("gs", {}, {0.01f});
  typed_initializer(b, "gz", kI8, {}, {0});
  b.node("QuantizeLinear", {"g", "gs", "gz"}, {"gq"}, "qg");
  b.node("DequantizeLinear", {"gq", "gs", "gz"}, {"gd"}, "dqg");
  b.node("Flatten", {"gd"}, {"f"}, "flatten").i("axis", 1);
  b.node("QuantizeLinear", {"f", "gs", "gz"}, {"fq"}, "qf");
  b.node("DequantizeLinear", {"fq", "gs", "gz"}, {"fd"}, "dqf");
  typed_initializer(b, "w", kI8, trans_b ? std::vector<int64_t>{3, 2} : std::vector<int64_t>{2, 3},
                    {10, -20, 30, -40, 50, -60});
  b.initializer("ws", {3}, {0.01f, 0.02f, 0.03f});
  typed_initializer(b, "wz", kI8, {3}, {0, 0, 0});
  b.node("DequantizeLinear", {"w", "ws", "wz"}, {"wd"}, "dqw").i("axis", trans_b ? 0 : 1);
  typed_initializer(b, "bias", kI32, {3}, {1, 2, 3});
  b.initializer("bs", {3}, {0.0001f, 0.0002f, 0.0003f});
  b.node("DequantizeLinear", {"bias", "bs"}, {"bd"}, "dqb").i("axis", 0);
  b.node("Gemm", {"fd", "wd", "bd"}, {"c"}, "fc").i("transB", trans_b);
  b.initializer("ys", {}, {0.05f});
  typed_initializer(b, "yz", kI8, {}, {-1});
  b.node("QuantizeLinear", {"c", "ys", "yz"}, {"cq"}, "qy");
  b.node("DequantizeLinear", {"cq", "ys", "yz"}, {"y"}, "dqy");
  b.output("y");
  return b;
}

TEST(OnnxImportQuant, QdqGemmAfterAFlattenedGlobalPoolIsAPointwiseConv) {
  const ImportResult r = import(qdq_classifier(1));
  const json fc = layer(r, 2);
  EXPECT_EQ(fc["op"], "conv2d");
  EXPECT_EQ(fc["input"], layer(r, 1)["name"]);  // the global pool's output: the Flatten bypassed
  EXPECT_EQ(fc["out_channels"], 3);
  EXPECT_EQ(fc["quant"]["weight_scale"], json::array({0.01f, 0.02f, 0.03f}));
  ASSERT_GE(r.weights.size(), 2u);
  const auto w = std::find_if(r.weights.begin(), r.weights.end(),
                              [&](const auto& f) { return f.shape.size() == 4; });
  ASSERT_NE(w, r.weights.end());
  EXPECT_EQ(w->dtype, NpyDType::I8);
  EXPECT_EQ(w->shape, (std::vector<int64_t>{3, 2, 1, 1}));  // OIHW: B's [K, C] as it is
  EXPECT_EQ(w->ints, (std::vector<int32_t>{10, -20, 30, -40, 50, -60}));
  EXPECT_TRUE(r.left_to_caller.empty());
}

// ORT's QDQ around a Pad: DQ -> Pad -> Q -> DQ -> Conv (stride 2, as a TF-style stem): the
// DequantizeLinear after the Pad stands for the padded tensor (7x7: 3x3 outputs; the unpadded 5x5
// would give 2x2).
TEST(OnnxImportQuant, QdqPadRequantizedBeforeAStridedConvFolds) {
  ModelBuilder b = quantized_input();
  b.int_initializer("pads", {0, 0, 1, 1, 0, 0, 1, 1});
  b.node("Pad", {"xd", "pads"}, {"xp"}, "pad");
  b.node("QuantizeLinear", {"xp", "xs", "xz"}, {"xpq"}, "qp");
  b.node("DequantizeLinear", {"xpq", "xs", "xz"}, {"xpd"}, "dqp");
  typed_initializer(b, "w", kI8, {3, 2, 3, 3}, int8_weights());
  b.initializer("ws", {}, {0.01f});
  typed_initializer(b, "wz", kI8, {}, {0});
  b.node("DequantizeLinear", {"w", "ws", "wz"}, {"wd"}, "dqw");
  b.node("Conv", {"xpd", "wd"}, {"c"}, "conv").ints("strides", {2, 2});
  b.initializer("ys", {}, {0.05f});
  typed_initializer(b, "yz", kI8, {}, {0});
  b.node("QuantizeLinear", {"c", "ys", "yz"}, {"yq"}, "qy");
  b.node("DequantizeLinear", {"yq", "ys", "yz"}, {"y"}, "dqy");
  b.output("y");
  const ImportResult r = import(b);
  const json conv = layer(r, 1);
  EXPECT_EQ(conv["input"], layer(r, 0)["name"]);  // the unpadded tensor
  EXPECT_EQ(conv["padding"]["pads"], json::array({1, 1, 1, 1}));
  EXPECT_EQ(conv["stride"], json::array({2, 2}));
  EXPECT_TRUE(r.left_to_caller.empty());
}

TEST(OnnxImportQuant, QdqGemmWithBNotTransposedIsRefusedNamingIt) {
  const std::string e = import_error(qdq_classifier(0));
  EXPECT_TRUE(has(e, "node 'fc' (Gemm")) << e;
  EXPECT_TRUE(has(e, "a quantized Gemm is imported with transB 1")) << e;
}

TEST(OnnxImportQuant, UnsupportedNodeInAQuantizedGraphIsAnErrorNamingIt) {
  ModelBuilder b = quantized_input();
  b.node("Tanh", {"xd"}, {"s"}, "tanh");
  b.node("QuantizeLinear", {"s", "xs", "xz"}, {"sq"}, "qs");
  b.node("DequantizeLinear", {"sq", "xs", "xz"}, {"y"}, "dqy");
  b.output("y");
  const std::string e = import_error(b);
  EXPECT_TRUE(has(e, "node 'tanh' (Tanh, #2)")) << e;
  EXPECT_TRUE(has(e, "in a quantized graph; padfold imports")) << e;
}

// SiLU and squeeze-and-excite as quantize_static writes them: x -> Q -> DQ -> Sigmoid -> Q -> DQ
// -> Mul(x, .) -> Q -> DQ (one silu table), and the sigmoid of a global pool's [1, 2, 1, 1]
// gating the SiLU's output (read first): a sigmoid and a mul.
TEST(OnnxImportQuant, QdqSigmoidAndMulAreQuantizedLayers) {
  ModelBuilder b = quantized_input();
  b.node("Sigmoid", {"xd"}, {"s"}, "sig");
  b.initializer("ss", {}, {1.f / 256});
  typed_initializer(b, "sz", kI8, {}, {-128});
  b.node("QuantizeLinear", {"s", "ss", "sz"}, {"sq"}, "qs");
  b.node("DequantizeLinear", {"sq", "ss", "sz"}, {"sd"}, "dqs");
  b.node("Mul", {"xd", "sd"}, {"m"}, "silu");
  b.initializer("ms", {}, {0.01f});
  typed_initializer(b, "mz", kI8, {}, {-7});
  b.node("QuantizeLinear", {"m", "ms", "mz"}, {"mq"}, "qm");
  b.node("DequantizeLinear", {"mq", "ms", "mz"}, {"md"}, "dqm");
  b.node("GlobalAveragePool", {"md"}, {"p"}, "pool");
  b.node("QuantizeLinear", {"p", "ms", "mz"}, {"pq"}, "qp");
  b.node("DequantizeLinear", {"pq", "ms", "mz"}, {"pd"}, "dqp");
  b.node("Sigmoid", {"pd"}, {"g"}, "gate");
  b.node("QuantizeLinear", {"g", "ss", "sz"}, {"gq"}, "qg");
  b.node("DequantizeLinear", {"gq", "ss", "sz"}, {"gd"}, "dqg");
  b.node("Mul", {"gd", "md"}, {"e"}, "excite");
  b.node("QuantizeLinear", {"e", "ms", "mz"}, {"eq"}, "qe");
  b.node("DequantizeLinear", {"eq", "ms", "mz"}, {"y"}, "dqy");
  b.output("y");
  const ImportResult r = import(b);
  const json layers = spec(r)["layers"];
  ASSERT_EQ(layers.size(), 6u) << layers.dump(2);
  const json& silu = layers[1];
  EXPECT_EQ(silu["op"], "activation");
  EXPECT_EQ(silu["activation"], "silu");
  EXPECT_EQ(silu["dtype"], "int8");
  EXPECT_EQ(silu["input"], layers[0]["name"]);
  EXPECT_EQ(silu["quant"]["input"]["zero_point"], 3);
  EXPECT_EQ(silu["quant"]["gate"]["scale"].get<float>(), 1.f / 256);
  EXPECT_EQ(silu["quant"]["gate"]["zero_point"], -128);
  EXPECT_EQ(silu["quant"]["output"]["zero_point"], -7);
  const json& gate = layers[3];
  EXPECT_EQ(gate["op"], "activation");
  EXPECT_EQ(gate["activation"], "sigmoid");
  EXPECT_EQ(gate["input"], layers[2]["name"]);
  EXPECT_FALSE(gate["quant"].contains("gate"));
  const json& excite = layers[4];
  EXPECT_EQ(excite["op"], "mul");  // the per-channel scale read second
  EXPECT_EQ(excite["input"], json::array({silu["name"], gate["name"]}));
  EXPECT_EQ(excite["quant"]["inputs"][1]["scale"].get<float>(), 1.f / 256);
  EXPECT_TRUE(r.left_to_caller.empty());
  // The SiLU's layer covers its Sigmoid and Mul.
  const json nodes = rep(r)["layers"][1]["onnx_nodes"];
  EXPECT_TRUE(has(nodes.dump(), "\"sig\"") && has(nodes.dump(), "\"silu\"")) << nodes.dump();
}

// A Mul broadcasting along another axis than the channels is refused, naming it.
TEST(OnnxImportQuant, QdqMulBroadcastingOverRowsIsRefusedNamingIt) {
  ModelBuilder b = quantized_input();
  b.node("AveragePool", {"xd"}, {"p"}, "rows").ints("kernel_shape", {5, 1});
  b.node("QuantizeLinear", {"p", "xs", "xz"}, {"pq"}, "qp");
  b.node("DequantizeLinear", {"pq", "xs", "xz"}, {"pd"}, "dqp");
  b.node("Mul", {"xd", "pd"}, {"m"}, "row_mul");
  b.node("QuantizeLinear", {"m", "xs", "xz"}, {"mq"}, "qm");
  b.node("DequantizeLinear", {"mq", "xs", "xz"}, {"y"}, "dqy");
  b.output("y");
  const std::string e = import_error(b);
  EXPECT_TRUE(has(e, "node 'row_mul' (Mul, #")) << e;
  EXPECT_TRUE(has(e, "[1, 2, 5, 5] and [1, 2, 1, 5]")) << e;
  EXPECT_TRUE(has(e, "one value per channel")) << e;
}

// x -> Q -> DQ -> Conv (int8 weights, scale 0.01; int32 bias of scales `bias_scales`, shape
// `shape`) -> Q -> DQ.
ModelBuilder qdq_conv_with_bias_scales(const std::vector<int64_t>& shape,
                                       const std::vector<float>& bias_scales) {
  ModelBuilder b = quantized_input();
  typed_initializer(b, "w", kI8, {3, 2, 3, 3}, int8_weights());
  b.initializer("ws", {}, {0.01f});
  typed_initializer(b, "wz", kI8, {}, {0});
  b.node("DequantizeLinear", {"w", "ws", "wz"}, {"wd"}, "dqw");
  typed_initializer(b, "bias", kI32, {3}, {1, 2, 3});
  b.initializer("bs", shape, bias_scales);
  b.node("DequantizeLinear", {"bias", "bs"}, {"bd"}, "dqb").i("axis", 0);
  b.node("Conv", {"xd", "wd", "bd"}, {"c"}, "conv");
  b.initializer("ys", {}, {0.05f});
  typed_initializer(b, "yz", kI8, {}, {0});
  b.node("QuantizeLinear", {"c", "ys", "yz"}, {"yq"}, "qy");
  b.node("DequantizeLinear", {"yq", "ys", "yz"}, {"y"}, "dqy");
  b.output("y");
  return b;
}

TEST(OnnxImportQuant, BiasScaleOtherThanInputTimesWeightScaleIsRefused) {
  const std::string e = import_error(qdq_conv_with_bias_scales({}, {0.001f}));  // not 0.02 * 0.01
  EXPECT_TRUE(has(e, "node 'dqb' (DequantizeLinear")) << e;
  EXPECT_TRUE(has(e, "expected the input scale times the weight scale")) << e;
}

// --- the third round of hostile inputs (issue 37) ---------------------------------------------

// D1: ONNX aligns a rank-2 [N, C] operand to the right against [N, C, H, W]: it scales along W,
// not per channel, whatever padfold holds the [N, C] as. Three ways to make one (Flatten,
// ReduceMean keepdims 0, a Gemm), W == C so that the graph is valid: each Mul is left, saying the
// shapes; the same scale reshaped to [N, C, 1, 1] (tf2onnx's squeeze-and-excite) stays a layer.
TEST(OnnxImportProbes3, MulBroadcastIsDecidedOnOnnxShapes) {
  for (const std::string scale : {"flat", "mean", "dense", "reshaped", "gap"}) {
    ModelBuilder b;
    b.input("x", {1, 4, 3, 4}).output("y");
    add_conv(b, "c", "x", "c_out", 4, 4, 1);
    b.node("GlobalAveragePool", {"c_out"}, {"gap"}, "gap_node");
    b.node("Flatten", {"gap"}, {"flat"}, "flatten");
    b.node("ReduceMean", {"c_out"}, {"mean"}, "mean_node").ints("axes", {2, 3}).i("keepdims", 0);
    b.initializer("fc_w", {4, 4});
    b.node("Gemm", {"flat", "fc_w"}, {"dense"}, "fc");
    b.int_initializer("shape", {1, 4, 1, 1});
    b.node("Reshape", {"flat", "shape"}, {"reshaped"}, "reshape");
    b.node("Mul", {"c_out", scale}, {"y"}, "se_mul");
    for (const std::string other : {"flat", "mean", "dense", "reshaped", "gap"})
      if (other != scale && other != "flat" && other != "gap") b.output(other);
    const ImportResult r = import(b);
    const std::string why = left_reason(r, "se_mul");
    if (scale == "reshaped" || scale == "gap") {
      EXPECT_EQ(why, "not left") << scale;
      continue;
    }
    EXPECT_TRUE(has(why,
                    "its inputs have the shapes [1, 4, 3, 4] and [1, 4]; padfold's mul "
                    "scales a tensor by one value per channel"))
        << scale << ": " << why;
  }
}

// D2: Add of [1, C, 1, 1] and its Flatten [1, C] broadcasts to [1, C, 1, C] in ONNX: left to the
// caller (no layer of a [1, C, 1, 1] output, no warning-only import).
TEST(OnnxImportProbes3, AddOfABroadcastShapeIsLeft) {
  ModelBuilder b;
  b.input("x", {1, 4, 3, 4}).output("y");
  add_conv(b, "c", "x", "c_out", 4, 4, 1);
  b.node("GlobalAveragePool", {"c_out"}, {"g"}, "gap");
  b.node("Flatten", {"g"}, {"fl"}, "flatten");
  b.node("Add", {"g", "fl"}, {"y"}, "add");
  const ImportResult r = import(b);
  EXPECT_TRUE(has(left_reason(r, "add"),
                  "its inputs have the shapes [1, 4, 1, 1] and [1, 4]; "
                  "padfold's add takes tensors of one shape"))
      << left_reason(r, "add");
  EXPECT_TRUE(r.warnings.empty()) << r.warnings[0];
}

// A node whose output ONNX shapes otherwise than padfold (here a MatMul of a rank-4 [1, 1, 1, 1]
// giving [1, 1, 1, 3], which padfold would hold as [1, 3, 1, 1]) is no layer.
TEST(OnnxImportProbes3, NodeOfAnotherOutputShapeIsNoLayer) {
  ModelBuilder b;
  b.input("x", {1, 1, 4, 4}).output("y");
  add_conv(b, "c", "x", "c_out", 1, 1, 1);
  b.node("GlobalAveragePool", {"c_out"}, {"g"}, "gap");
  b.initializer("w", {1, 3});
  b.node("MatMul", {"g", "w"}, {"y"}, "mm");
  const ImportResult r = import(b);
  EXPECT_TRUE(has(left_reason(r, "mm"),
                  "ONNX shape inference gives [1, 1, 1, 3] for 'y', "
                  "padfold computes [1, 3, 1, 1]"))
      << left_reason(r, "mm");
}

// D9: Dropout's training_mode is bool (opset 12+): false is bypassed, true left with the reason.
TEST(OnnxImportProbes3, DropoutWithABoolTrainingModeIsRead) {
  for (bool training : {false, true}) {
    ModelBuilder b;
    b.input("x", {1, 3, 5, 5}).output("y");
    add_conv(b, "c", "x", "c_out", 3, 2, 3);
    b.initializer("ratio", {}, {0.5f});
    onnx::TensorProto* t = b.model().mutable_graph()->add_initializer();
    t->set_name("tm");
    t->set_data_type(onnx::TensorProto::BOOL);
    t->add_int32_data(training ? 1 : 0);
    b.node("Dropout", {"c_out", "ratio", "tm"}, {"y"}, "drop");
    const ImportResult r = import(b);
    if (training)
      EXPECT_TRUE(has(left_reason(r, "drop"), "training_mode is true")) << left_reason(r, "drop");
    else
      EXPECT_EQ(absorbed_roles(r)["drop"], "bypassed");
  }
}

// D13: a graph output that is the graph input itself is named in the report and warned of.
TEST(OnnxImportProbes3, GraphOutputThatIsTheInputIsReported) {
  ModelBuilder b;
  b.input("x", {1, 3, 5, 5}).output("y").output("x");
  add_conv(b, "c", "x", "y", 3, 2, 3);
  b.node("Identity", {"x"}, {"x_again"}, "id");
  b.output("x_again");
  const ImportResult r = import(b);
  EXPECT_EQ(rep(r)["outputs_that_are_inputs"],
            json::parse(R"j([{"onnx_tensor": "x", "model_input": "x"},
                             {"onnx_tensor": "x_again", "model_input": "x"}])j"));
  ASSERT_EQ(r.warnings.size(), 2u);
  EXPECT_TRUE(has(r.warnings[0], "graph output 'x' is the model input 'x' itself"))
      << r.warnings[0];
}

// D14: with the layout edges folded (channels last), a second output with unit spatial dims that
// has no edge Transpose is ONNX's [1, C, 1, 1], not the layers' [1, 1, 1, C].
TEST(OnnxImportProbes3, UnitSpatialOutputKeepsOnnxShape) {
  ModelBuilder b;
  b.input("x", {1, 5, 6, 3}).output("y").output("g");
  b.node("Transpose", {"x"}, {"t"}, "to_nchw").ints("perm", {0, 3, 1, 2});
  add_conv(b, "c", "t", "c_out", 3, 2, 3).ints("pads", {1, 1, 1, 1});
  b.node("Transpose", {"c_out"}, {"y"}, "to_nhwc").ints("perm", {0, 2, 3, 1});
  b.node("GlobalAveragePool", {"c_out"}, {"g"}, "gap");
  const ImportResult r = import(b, {}, {});
  EXPECT_EQ(layer(r, 0)["layout"], "NHWC");
  EXPECT_EQ(spec(r)["output_shapes"], json::parse(R"j({"g": [1, 2, 1, 1]})j"));
}

// An input with unit spatial dims read by channels-last layers is read in its own layout too:
// declared NCHW and read as NHWC, the spec did not compile (diff_onnx_ort finding, a caller's Pad
// output). A conv reads it as declared; another layer (a softmax) through a transpose.
TEST(OnnxImportProbes3, UnitSpatialInputIsReadInItsLayoutByChannelsLastLayers) {
  ModelBuilder b;
  b.input("x", {1, 3, 1, 1}).output("y");
  add_conv(b, "c", "x", "y", 3, 2, 1);
  const ImportResult r = import(b, {}, {});
  ASSERT_EQ(spec(r)["layers"].size(), 1u) << spec(r).dump();
  EXPECT_EQ(layer(r, 0)["input"], "x");
  EXPECT_EQ(layer(r, 0)["input_layout"], "NCHW");
  EXPECT_EQ(layer(r, 0)["layout"], "NHWC");
  EXPECT_NO_THROW(parse_spec(spec(r).dump(), "m.json"));

  ModelBuilder s;
  s.input("x", {1, 3, 1, 1}).output("y");
  s.node("Softmax", {"x"}, {"y"}, "sm").i("axis", 1);
  const ImportResult t = import(s, {}, {});
  ASSERT_EQ(spec(t)["layers"].size(), 2u) << spec(t).dump();
  EXPECT_EQ(layer(t, 0)["op"], "transpose");
  EXPECT_EQ(layer(t, 0)["input"], "x");
  EXPECT_EQ(layer(t, 1)["input"], layer(t, 0)["name"]);
  EXPECT_NO_THROW(parse_spec(spec(t).dump(), "m.json"));
}

// Which convs read an NCHW input themselves (input_layout) and which behind a transpose layer: an
// image stem (at most 4 channels) reads it at no cost; convs of more channels and pools read
// channel vectors and get the transpose (bench/edge_layouts.json).
TEST(OnnxImport, ConvsReadAnInputInItsLayoutWhereThatCostsNothing) {
  struct Case {
    int64_t channels, k, group;
    bool pool, folded;
  };
  for (const Case& c :
       {Case{3, 7, 1, false, true}, Case{4, 3, 1, false, true}, Case{16, 1, 1, false, false},
        Case{16, 3, 1, false, false}, Case{16, 3, 16, false, false}, Case{16, 1, 4, false, false},
        Case{3, 3, 1, true, false}}) {
    SCOPED_TRACE(::testing::Message() << c.channels << " channels, kernel " << c.k << ", group "
                                      << c.group << (c.pool ? ", pool" : ""));
    ModelBuilder b;
    b.input("x", {1, c.channels, 9, 9}).output("y");
    if (c.pool)
      b.node("MaxPool", {"x"}, {"y"}, "pool").ints("kernel_shape", {c.k, c.k});
    else
      add_conv(b, "c", "x", "y", c.channels, 16, c.k, true, c.group);
    const ImportResult r = import(b, {}, {});
    const json& first = layer(r, 0);
    if (c.folded) {
      EXPECT_EQ(first["input"], "x");
      EXPECT_EQ(first["input_layout"], "NCHW");
      EXPECT_EQ(first["layout"], "NHWC");
    } else {
      EXPECT_EQ(first["op"], "transpose");
      EXPECT_EQ(layer(r, 1)["input"], first["name"]);
      EXPECT_FALSE(layer(r, 1).contains("input_layout"));
    }
    EXPECT_NO_THROW(parse_spec(spec(r).dump(), "m.json"));
  }
}

// x -> Q -> DQ -> Pad(constant "pv", which `write_value` writes) -> Conv -> Q -> DQ (QDQ).
ModelBuilder qdq_padded_conv(const std::function<void(ModelBuilder&)>& write_value) {
  ModelBuilder b = quantized_input();
  b.int_initializer("pads", {0, 0, 1, 1, 0, 0, 1, 1});
  write_value(b);
  b.node("Pad", {"xd", "pads", "pv"}, {"xp"}, "pad");
  typed_initializer(b, "w", kI8, {3, 2, 3, 3}, int8_weights());
  b.initializer("ws", {}, {0.01f});
  typed_initializer(b, "wz", kI8, {}, {0});
  b.node("DequantizeLinear", {"w", "ws", "wz"}, {"wd"}, "dqw");
  b.node("Conv", {"xp", "wd"}, {"c"}, "conv");
  b.initializer("ys", {}, {0.05f});
  typed_initializer(b, "yz", kI8, {}, {0});
  b.node("QuantizeLinear", {"c", "ys", "yz"}, {"yq"}, "qy");
  b.node("DequantizeLinear", {"yq", "ys", "yz"}, {"y"}, "dqy");
  b.output("y");
  return b;
}

// The same with the float constant `value` as the Pad's constant.
ModelBuilder qdq_padded_conv(float value) {
  return qdq_padded_conv([&](ModelBuilder& b) { b.initializer("pv", {}, {value}); });
}

// D3: a QDQ Pad's float constant folds into the int8 border only where an int8 value
// dequantizes to it exactly ((q - 3) * 0.02 in float32); elsewhere the import fails naming it.
TEST(OnnxImportProbes3, QdqPadConstantFoldsOnlyOnTheGrid) {
  const float on_grid = static_cast<float>(37) * 0.02f;  // q = 40
  const json conv = layer(import(qdq_padded_conv(on_grid)), 1);
  EXPECT_EQ(conv["border"]["value"].get<float>(), on_grid);
  for (float off : {0.5f * 0.02f, 0.37f, 3.f, -0.905f, 1000.f * 0.02f}) {
    const std::string e = import_error(qdq_padded_conv(off));
    EXPECT_TRUE(has(e, "node 'pad' (Pad, #2): its constant value")) << off << ": " << e;
    EXPECT_TRUE(has(e,
                    "is not on the quantization grid of its input (scale 0.02, zero point 3, "
                    "int8)"))
        << e;
  }
}

// ONNX Runtime's quantizer quantizes a Pad's constant too: DequantizeLinear of an int8 constant,
// or QuantizeLinear -> DequantizeLinear of a float Constant (scalars). Both fold as constants, into
// the value they compute (on the input's grid here: (40 - 3) * 0.02), which the border takes;
// off the grid the import still fails naming the Pad.
TEST(OnnxImport, QuantizedPadConstantsFoldIntoTheBorder) {
  const auto dequantized = [](int q, float scale) {
    return [=](ModelBuilder& b) {
      typed_initializer(b, "pvq", kI8, {}, {q});
      b.initializer("pvs", {}, {scale});
      typed_initializer(b, "pvz", kI8, {}, {-5});
      b.node("DequantizeLinear", {"pvq", "pvs", "pvz"}, {"pv"}, "dqpv");
    };
  };
  const auto requantized = [](float v) {
    return [=](ModelBuilder& b) {
      b.initializer("pvf", {}, {v});
      b.initializer("pvs", {}, {0.02f});
      typed_initializer(b, "pvz", kI8, {}, {3});
      b.node("QuantizeLinear", {"pvf", "pvs", "pvz"}, {"pvq"}, "qpv");
      b.node("DequantizeLinear", {"pvq", "pvs", "pvz"}, {"pv"}, "dqpv");
    };
  };
  const float on_grid = static_cast<float>(37) * 0.02f;
  for (const auto& write : std::vector<std::function<void(ModelBuilder&)>>{
           dequantized(32, 0.02f), requantized(on_grid), requantized(on_grid + 0.004f)}) {
    const ImportResult r = import(qdq_padded_conv(write));
    EXPECT_EQ(layer(r, 1)["border"]["value"].get<float>(), on_grid);
    EXPECT_EQ(rep(r)["left_to_caller"].size(), 0u);
  }
  const std::string e = import_error(qdq_padded_conv(dequantized(32, 0.013f)));
  EXPECT_TRUE(has(e, "node 'pad' (Pad, #")) << e;
  EXPECT_TRUE(has(e, "is not on the quantization grid of its input")) << e;
}

// D4, D10: a bias scale vector, or a QLinearConv weight zero point vector, of a length other than
// 1 or the output channels is refused naming both (it crashed or was read past its end).
TEST(OnnxImportProbes3, ScaleAndZeroPointLengthsAreChecked) {
  for (size_t n : {0u, 2u}) {
    const std::string e = import_error(
        qdq_conv_with_bias_scales({static_cast<int64_t>(n)}, std::vector<float>(n, 0.02f * 0.01f)));
    EXPECT_TRUE(has(e, "node 'dqb' (DequantizeLinear")) << e;
    EXPECT_TRUE(has(e, std::to_string(n) + " bias scales for 3 output channels; expected 1 or 3"))
        << e;
  }
  ModelBuilder b = padded_qlinear_conv(3);
  onnx::GraphProto* g = b.model().mutable_graph();
  for (onnx::TensorProto& t : *g->mutable_initializer())
    if (t.name() == "wz") {
      t.add_dims(2);
      t.add_int32_data(0);
    }
  const std::string e = import_error(b);
  EXPECT_TRUE(has(e, "node 'qconv' (QLinearConv")) << e;
  EXPECT_TRUE(has(e, "2 weight zero points for 3 output channels; expected 1 or 3")) << e;
}

// --- channel slices and shuffles (issue 41) ----------------------------------------------------

// A Slice that crops a spatial axis is left to the caller, saying so; one of the channels is a
// gather_channels layer. A shuffle whose grouped tensor is read elsewhere too is no permutation
// of one tensor: its nodes are left (padfold does not compute the rank-5 tensor).
TEST(OnnxImport, ChannelSlicesAndShufflesOnly) {
  ModelBuilder b;
  b.input("x", {1, 6, 5, 7});
  b.int_initializer("zero", {0});
  b.int_initializer("two", {2});
  b.int_initializer("axis_h", {2});
  b.int_initializer("axis_c", {1});
  b.node("Slice", {"x", "zero", "two", "axis_h"}, {"crop"}, "crop");
  b.node("Slice", {"x", "zero", "two", "axis_c"}, {"head"}, "head");
  b.int_initializer("grouped", {1, 2, 3, 5, 7});
  b.int_initializer("merged", {1, 6, 5, 7});
  b.node("Reshape", {"x", "grouped"}, {"g"}, "group");
  b.node("Transpose", {"g"}, {"t"}, "swap").ints("perm", {0, 2, 1, 3, 4});
  b.node("Reshape", {"t", "merged"}, {"shuffled"}, "merge");
  b.node("Relu", {"g"}, {"g_relu"}, "also_reads_group");
  b.output("crop");
  b.output("head");
  b.output("shuffled");
  b.output("g_relu");
  const ImportResult r = import(b);
  EXPECT_TRUE(has(left_reason(r, "crop"),
                  "crops the spatial axes, and is not folded: its output "
                  "'crop' is a graph output"))
      << left_reason(r, "crop");
  const Layer* head = r.model.find_layer("head");
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(head->op, Op::GatherChannels);
  EXPECT_EQ(head->channels, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(r.model.find_layer("merge"), nullptr);
  EXPECT_NE(left_reason(r, "merge"), "not left");
}

// A gather of a gather reads the first one's input through both; the first stays where a node
// other than a gather reads it too (a Shape of it, folded, does not count: torch computes the
// chunk's bounds from one).
TEST(OnnxImport, GathersComposeAndKeepWhatOthersRead) {
  for (const bool other_reader : {false, true}) {
    ModelBuilder b;
    b.input("x", {1, 8, 4, 4});
    b.int_initializer("grouped", {1, 4, 2, 4, 4});
    b.int_initializer("merged", {1, 8, 4, 4});
    b.node("Reshape", {"x", "grouped"}, {"g"}, "group");
    b.node("Transpose", {"g"}, {"t"}, "swap").ints("perm", {0, 2, 1, 3, 4});
    b.node("Reshape", {"t", "merged"}, {"s"}, "shuffle");
    b.int_initializer("start", {1});
    b.int_initializer("dim1", {1});
    b.node("Shape", {"s"}, {"s_shape"}, "shape_of_s");
    b.node("Gather", {"s_shape", "dim1"}, {"end"}, "channels_of_s").i("axis", 0);
    b.int_initializer("axis", {1});
    b.int_initializer("step", {3});
    b.node("Slice", {"s", "start", "end", "axis", "step"}, {"y"}, "thirds");
    b.output("y");
    if (other_reader) {
      b.initializer("w", {2, 8, 1, 1});
      b.node("Conv", {"s", "w"}, {"z"}, "conv");
      b.output("z");
    }
    const ImportResult r = import(b);
    ASSERT_TRUE(r.left_to_caller.empty()) << r.left_to_caller[0].reason;
    const Layer* thirds = r.model.find_layer("y");
    ASSERT_NE(thirds, nullptr);
    // The shuffle of 4 groups of 2: output j is input (j % 4) * 2 + j / 4; channels 1, 4, 7 of it.
    EXPECT_EQ(thirds->channels, (std::vector<int64_t>{2, 1, 7}));
    EXPECT_EQ(thirds->inputs, (std::vector<std::string>{"x"}));
    EXPECT_EQ(r.model.find_layer("shuffle") != nullptr, other_reader);
    // Each node in one layer's onnx_nodes: the shuffle's in the gather's only where it is gone.
    std::map<std::string, int> listed;
    const json report = rep(r);
    for (const auto& l : report["layers"])
      for (const auto& n : l["onnx_nodes"]) ++listed[n["name"].get<std::string>()];
    for (const char* n : {"group", "swap", "shuffle"}) EXPECT_EQ(listed[n], 1) << n;
  }
}

// ConvNeXt's block as torch.onnx writes it: a depthwise conv, then channels last (Transpose), the
// decomposed LayerNorm over the last axis, its scale and shift, Linear (MatMul + Add), GELU as Erf,
// Linear, back to channels first (Transpose), the layer scale ([C, 1, 1]) and the residual add.
// `other` makes the first Linear's bias add read a computed tensor instead, `tanh` writes ONNX
// Gelu with approximate "tanh" instead of the Erf chain.
struct BlockOptions {
  bool other = false, tanh = false;
};
ModelBuilder convnext_block(const BlockOptions& o = {}) {
  ModelBuilder b(o.tanh ? 20 : 13);
  b.input("x", {1, 8, 5, 6});
  b.initializer("dw", {8, 1, 3, 3});
  b.node("Conv", {"x", "dw"}, {"d"}, "dwconv").i("group", 8).ints("pads", {1, 1, 1, 1});
  b.node("Transpose", {"d"}, {"t"}, "to_last").ints("perm", {0, 2, 3, 1});
  b.node("ReduceMean", {"t"}, {"mean"}, "mean").ints("axes", {-1});
  b.node("Sub", {"t", "mean"}, {"dev"}, "sub");
  b.initializer("two", {}, {2.f});
  b.node("Pow", {"dev", "two"}, {"sq"}, "pow");
  b.node("ReduceMean", {"sq"}, {"var"}, "var").ints("axes", {3});
  b.initializer("eps", {}, {1e-6f});
  b.node("Add", {"var", "eps"}, {"var_eps"}, "add_eps");
  b.node("Sqrt", {"var_eps"}, {"std"}, "sqrt");
  b.node("Div", {"dev", "std"}, {"normed"}, "ln");
  b.initializer("gamma", {8});
  b.node("Mul", {"normed", "gamma"}, {"scaled"}, "ln_scale");
  b.initializer("beta", {8});
  b.node("Add", {"scaled", "beta"}, {"ln_out"}, "ln_shift");
  b.initializer("w1", {8, 16});
  b.node("MatMul", {"ln_out", "w1"}, {"h"}, "linear1");
  if (o.other) {
    b.initializer("w_side", {16, 8, 1, 1});
    b.node("Conv", {"x", "w_side"}, {"side"}, "side");
    b.node("Transpose", {"side"}, {"side_last"}, "side_to_last").ints("perm", {0, 2, 3, 1});
    b.node("Add", {"h", "side_last"}, {"hb"}, "linear1_bias");
  } else {
    b.initializer("b1", {16});
    b.node("Add", {"b1", "h"}, {"hb"}, "linear1_bias");
  }
  if (o.tanh) {
    b.node("Gelu", {"hb"}, {"g"}, "gelu").str("approximate", "tanh");
  } else {
    b.initializer("sqrt2", {}, {1.4142135f});
    b.node("Div", {"hb", "sqrt2"}, {"g0"}, "gelu_scale");
    b.node("Erf", {"g0"}, {"g1"}, "gelu_erf");
    b.initializer("one", {}, {1.f});
    b.node("Add", {"g1", "one"}, {"g2"}, "gelu_one");
    b.node("Mul", {"hb", "g2"}, {"g3"}, "gelu_x");
    b.initializer("half", {}, {0.5f});
    b.node("Mul", {"g3", "half"}, {"g"}, "gelu");
  }
  b.initializer("w2", {16, 8});
  b.node("MatMul", {"g", "w2"}, {"o"}, "linear2");
  b.initializer("b2", {8});
  b.node("Add", {"o", "b2"}, {"ob"}, "linear2_bias");
  b.node("Transpose", {"ob"}, {"back"}, "to_first").ints("perm", {0, 3, 1, 2});
  b.initializer("layer_scale", {8, 1, 1});
  b.node("Mul", {"back", "layer_scale"}, {"ls"}, "layer_scale");
  b.node("Add", {"ls", "x"}, {"y"}, "residual");
  b.output("y");
  return b;
}

// The stretch between the Transposes is computed channels first: a layer_norm layer, the Linears
// as 1x1 convs (GELU fused into the first), the LayerNorm's scale and shift and the layer scale
// folded into them; no transpose layer, nothing left.
TEST(OnnxImport, ConvNeXtBlockRunsChannelsFirstWithoutTransposes) {
  const ImportResult r = import(convnext_block());
  ASSERT_TRUE(r.left_to_caller.empty())
      << r.left_to_caller[0].name << ": " << r.left_to_caller[0].reason;
  std::vector<std::string> ops;
  for (const Layer& l : r.model.layers) ops.push_back(l.op_name);
  EXPECT_EQ(ops, (std::vector<std::string>{"conv2d", "layer_norm", "conv2d", "conv2d", "add"}));
  const Layer& ln = r.model.layers[1];
  EXPECT_FLOAT_EQ(ln.epsilon, 1e-6f);
  EXPECT_EQ(ln.in_channels, 8);
  const Layer& linear1 = r.model.layers[2];
  EXPECT_EQ(linear1.kernel, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(linear1.out_channels, 16);
  EXPECT_EQ(linear1.activation, Activation::Gelu);
  EXPECT_TRUE(linear1.bias);
  const Layer& linear2 = r.model.layers[3];
  EXPECT_EQ(linear2.out_channels, 8);
  EXPECT_EQ(linear2.activation, Activation::None);
  // The report says which layers' ONNX tensors the file holds channels last.
  const json report = rep(r);
  std::vector<std::string> moved;
  for (const auto& l : report["layers"])
    if (l.value("output_tensor_layout", "") == "channels_last") moved.push_back(l["output_tensor"]);
  EXPECT_EQ(moved, (std::vector<std::string>{"normed", "g"}));  // linear2 ends after the stretch
}

// A stretch with an op padfold leaves to the caller (an Erf outside a GELU chain, a Clip that is
// neither relu nor relu6) stays as the file has it: the caller computes those nodes on the file's
// channels-last tensors, so the import is done again without relaying it, and a warning says so.
TEST(OnnxImport, StretchWithAnOpLeftToTheCallerStays) {
  for (const char* op : {"Erf", "Clip"}) {
    ModelBuilder b;
    b.input("x", {1, 4, 3, 3});
    b.initializer("w", {4, 4, 1, 1});
    b.node("Conv", {"x", "w"}, {"c"}, "conv");
    b.node("Transpose", {"c"}, {"t"}, "to_last").ints("perm", {0, 2, 3, 1});
    b.initializer("m", {4, 4});
    b.node("MatMul", {"t", "m"}, {"h"}, "linear");
    b.initializer("lo", {}, {0.f});
    b.initializer("hi", {}, {4.f});
    if (std::string(op) == "Erf")
      b.node("Erf", {"h"}, {"e"}, "op");
    else
      b.node("Clip", {"h", "lo", "hi"}, {"e"}, "op");
    b.node("Transpose", {"e"}, {"y"}, "to_first").ints("perm", {0, 3, 1, 2});
    b.output("y");
    const ImportResult r = import(b);
    EXPECT_TRUE(has(left_reason(r, "to_last"), "Transpose")) << op << left_reason(r, "to_last");
    EXPECT_NE(left_reason(r, "op"), "not left") << op;
    ASSERT_EQ(r.warnings.size(), 1u) << op;
    EXPECT_TRUE(has(r.warnings[0], "a channels-last stretch is left as the file has it")) << op;
    EXPECT_TRUE(has(r.warnings[0], "node 'op'")) << r.warnings[0];
  }
}

// Stretches joined by a node reading both (here an Add of the Linear's output and another conv's
// output moved channels last, as a squeeze-and-excite's Mul reads its scale) are one stretch,
// computed channels first as a whole: no Transpose left.
TEST(OnnxImport, ChannelsLastStretchesJoinedByANodeAreRelaidTogether) {
  BlockOptions o;
  o.other = true;
  const ImportResult r = import(convnext_block(o));
  ASSERT_TRUE(r.left_to_caller.empty())
      << r.left_to_caller[0].name << ": " << r.left_to_caller[0].reason;
  std::vector<std::string> ops;
  for (const Layer& l : r.model.layers) ops.push_back(l.op_name);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "transpose"), 0) << fmt::format("{}", ops);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "layer_norm"), 1) << fmt::format("{}", ops);
}

// ONNX Gelu's tanh approximation fuses as gelu_tanh; an approximate ONNX does not define is an
// error naming the node.
TEST(OnnxImport, GeluTanhFuses) {
  BlockOptions o;
  o.tanh = true;
  const ImportResult r = import(convnext_block(o));
  ASSERT_TRUE(r.left_to_caller.empty())
      << r.left_to_caller[0].name << ": " << r.left_to_caller[0].reason;
  ASSERT_EQ(r.model.layers.size(), 5u);
  EXPECT_EQ(r.model.layers[2].activation, Activation::GeluTanh);
  ModelBuilder b;  // Gelu at any opset: the schema the import reads it with (onnx_graph.cpp)
  b.input("x", {1, 2, 5, 5}).output("y");
  add_conv(b, "c1", "x", "t", 2, 2, 3);
  b.node("Gelu", {"t"}, {"y"}, "gelu").str("approximate", "fast");
  const std::string error = import_error(b);
  EXPECT_TRUE(has(error, "'gelu'")) << error;
  EXPECT_TRUE(has(error, "approximate is 'fast'; expected none or tanh")) << error;
}

// GELU's tanh form as torch.onnx writes it (x^3 as Mul(x, Mul(x, x)), halved last) and as tf2onnx
// writes TensorFlow's (Pow(x, 3), x halved first) fuses into the conv before it as gelu_tanh. A
// chain with another coefficient, or whose inner tensor has a second reader, stays as it is.
TEST(OnnxImport, GeluTanhChainsFuse) {
  enum class Form { Torch, TensorFlow, OtherCoefficient, InnerRead };
  for (const Form form : {Form::Torch, Form::TensorFlow, Form::OtherCoefficient, Form::InnerRead}) {
    ModelBuilder b;
    b.input("x", {1, 2, 5, 5}).output("y");
    add_conv(b, "c1", "x", "t", 2, 2, 3);
    b.initializer("coeff", {}, {form == Form::OtherCoefficient ? 0.0447f : 0.044715f});
    b.initializer("scale", {}, {0.7978846f}).initializer("one", {}, {1.f});
    b.initializer("half", {}, {0.5f}).initializer("three", {}, {3.f});
    if (form == Form::TensorFlow) {
      b.node("Mul", {"half", "t"}, {"hx"}, "half_x");
      b.node("Pow", {"t", "three"}, {"cube"}, "pow");
    } else {
      b.node("Mul", {"t", "t"}, {"sq"}, "square");
      b.node("Mul", {"t", "sq"}, {"cube"}, "cube");
    }
    b.node("Mul", {"coeff", "cube"}, {"v"}, "coeff");
    b.node("Add", {"t", "v"}, {"u"}, "sum");
    b.node("Mul", {"scale", "u"}, {"s"}, "scale");
    b.node("Tanh", {"s"}, {"th"}, "tanh");
    b.node("Add", {"one", "th"}, {"p"}, "plus1");
    if (form == Form::TensorFlow) {
      b.node("Mul", {"hx", "p"}, {"y"}, "gelu");
    } else {
      b.node("Mul", {"t", "p"}, {"g"}, "times_x");
      b.node("Mul", {"half", "g"}, {"y"}, "gelu");
    }
    if (form == Form::InnerRead) b.output("u");
    const ImportResult r = import(b);
    if (form == Form::Torch || form == Form::TensorFlow) {
      ASSERT_TRUE(r.left_to_caller.empty())
          << r.left_to_caller[0].name << ": " << r.left_to_caller[0].reason;
      ASSERT_EQ(r.model.layers.size(), 1u);
      EXPECT_EQ(layer(r, 0)["activation"], "gelu_tanh");
    } else {
      EXPECT_FALSE(r.left_to_caller.empty());
      EXPECT_EQ(layer(r, 0)["activation"], nullptr) << layer(r, 0).dump();
    }
  }
}

// GELU as Keras 3 writes it through tf2onnx, x/2 * (1 - Erf(-x / sqrt 2)), fuses into the conv
// before it as gelu (the scale a Mul by 1/sqrt 2 or a Div by sqrt 2). With 1 + Erf (not GELU:
// the sign), another scale, or the halved x read elsewhere, it stays as it is.
TEST(OnnxImport, GeluErfcChainsFuse) {
  enum class Form { Mul, Div, PlusErf, OtherScale, HalfRead };
  for (const Form form : {Form::Mul, Form::Div, Form::PlusErf, Form::OtherScale, Form::HalfRead}) {
    ModelBuilder b;
    b.input("x", {1, 2, 5, 5}).output("y");
    add_conv(b, "c1", "x", "t", 2, 2, 3);
    b.initializer("inv_sqrt2", {}, {form == Form::OtherScale ? 0.5f : 0.70710677f});
    b.initializer("sqrt2", {}, {1.4142135f}).initializer("one", {}, {1.f});
    b.initializer("half", {}, {0.5f});
    b.node("Mul", {"t", "half"}, {"hx"}, "half_x");
    b.node("Neg", {"t"}, {"n"}, "neg");
    if (form == Form::Div)
      b.node("Div", {"n", "sqrt2"}, {"s"}, "scale");
    else
      b.node("Mul", {"inv_sqrt2", "n"}, {"s"}, "scale");
    b.node("Erf", {"s"}, {"e"}, "erf");
    if (form == Form::PlusErf)
      b.node("Add", {"one", "e"}, {"ec"}, "erfc");
    else
      b.node("Sub", {"one", "e"}, {"ec"}, "erfc");
    b.node("Mul", {"hx", "ec"}, {"y"}, "gelu");
    if (form == Form::HalfRead) b.output("hx");
    const ImportResult r = import(b);
    if (form == Form::Mul || form == Form::Div) {
      ASSERT_TRUE(r.left_to_caller.empty())
          << r.left_to_caller[0].name << ": " << r.left_to_caller[0].reason;
      ASSERT_EQ(r.model.layers.size(), 1u);
      EXPECT_EQ(layer(r, 0)["activation"], "gelu");
    } else {
      EXPECT_FALSE(r.left_to_caller.empty()) << static_cast<int>(form);
      EXPECT_EQ(layer(r, 0)["activation"], nullptr) << layer(r, 0).dump();
    }
  }
}

// Keras's LayerNormalization as tf2onnx writes it (tf.nn.moments over the channels, the mean
// through a Reshape to its own shape, x * s + (-mean) * s + beta) is a layer_norm, and Dense layers
// on the channels-last map as tf.tensordot (Reshape to [H*W, C], MatMul, Reshape back) between the
// layout Transposes are 1x1 convs: the model imports whole, with no transpose; the layer_norm's
// output, (x - mean) / sd, is a tensor of its own (not the Reciprocal's, which the file has). With
// the mean also a graph output, the variance over another axis, both over a spatial axis, or the
// tensordot reshaped to another shape, they stay as the file has them.
TEST(OnnxImport, KerasLayerNormAndTensordotFold) {
  enum class Form { Keras, MeanRead, OtherAxis, SpatialAxis, OtherShape };
  for (const Form form :
       {Form::Keras, Form::MeanRead, Form::OtherAxis, Form::SpatialAxis, Form::OtherShape}) {
    ModelBuilder b;
    b.input("x", {1, 3, 5, 4}).output("y");
    add_conv(b, "c1", "x", "t", 3, 6, 3).ints("pads", {1, 1, 1, 1});
    b.initializer("eps", {1, 1, 1, 1}, {1e-3f}).initializer("gamma", {1, 6, 1, 1});
    b.initializer("beta", {1, 6, 1, 1}).int_initializer("mean_shape", {1, 1, 5, 4});
    b.initializer("w", {6, 7}).initializer("bias", {7});
    if (form == Form::SpatialAxis) b.int_initializer("mean_shape_h", {1, 6, 1, 4});
    b.int_initializer("flat", {-1, 6});
    b.int_initializer("back", form == Form::OtherShape ? std::vector<int64_t>{1, 20, 7}
                                                       : std::vector<int64_t>{1, 5, 4, 7});
    const int64_t axis = form == Form::SpatialAxis ? 2 : 1;
    b.node("ReduceMean", {"t"}, {"mean"}, "mean").ints("axes", {axis});
    b.node("Neg", {"mean"}, {"neg"}, "neg");
    b.node("Reshape", {"mean", form == Form::SpatialAxis ? "mean_shape_h" : "mean_shape"},
           {"mean_r"}, "mean_r");
    b.node("Sub", {"t", "mean_r"}, {"dev"}, "dev");
    b.node("Mul", {"dev", "dev"}, {"sq"}, "sq");
    b.node("ReduceMean", {"sq"}, {"var"}, "var").ints("axes", {form == Form::OtherAxis ? 2 : axis});
    b.node("Add", {"var", "eps"}, {"ve"}, "add_eps");
    b.node("Sqrt", {"ve"}, {"sd"}, "sqrt");
    b.node("Reciprocal", {"sd"}, {"r"}, "rsqrt");
    b.node("Mul", {"r", "gamma"}, {"s"}, "times_gamma");
    b.node("Mul", {"t", "s"}, {"xs"}, "xs");
    b.node("Mul", {"neg", "s"}, {"ms"}, "ms");
    b.node("Add", {"ms", "beta"}, {"shift"}, "shift");
    b.node("Add", {"xs", "shift"}, {"ln"}, "ln");
    b.node("Transpose", {"ln"}, {"ln_last"}, "to_last").ints("perm", {0, 2, 3, 1});
    b.node("Reshape", {"ln_last", "flat"}, {"rows"}, "flatten");
    b.node("MatMul", {"rows", "w"}, {"mm"}, "matmul");
    b.node("Reshape", {"mm", "back"}, {"td"}, "unflatten");
    b.node("Add", {"td", "bias"}, {"d"}, "bias");
    if (form == Form::OtherShape) {
      b.node("Relu", {"d"}, {"y"}, "relu");
    } else {
      b.node("Transpose", {"d"}, {"y"}, "to_first").ints("perm", {0, 3, 1, 2});
    }
    if (form == Form::MeanRead) b.output("mean");
    const ImportResult r = import(b);
    std::vector<std::string> ops;
    for (const Layer& l : r.model.layers) ops.push_back(l.op_name);
    const auto count = [&](const char* op) { return std::count(ops.begin(), ops.end(), op); };
    if (form == Form::Keras) {
      ASSERT_TRUE(r.left_to_caller.empty())
          << r.left_to_caller[0].name << ": " << r.left_to_caller[0].reason;
      EXPECT_EQ(ops, (std::vector<std::string>{"conv2d", "layer_norm", "conv2d"}))
          << fmt::format("{}", ops);
      const std::string normalized = rep(r)["layers"][1]["output_tensor"];
      EXPECT_NE(normalized, "r");
      EXPECT_NE(normalized, "s");
      EXPECT_TRUE(has(normalized, "normalized")) << normalized;
    } else if (form == Form::OtherShape) {
      EXPECT_EQ(count("layer_norm"), 1) << fmt::format("{}", ops);
      EXPECT_NE(left_reason(r, "matmul"), "not left");
    } else {
      EXPECT_EQ(count("layer_norm"), 0) << fmt::format("{}", ops);
      const auto rsqrt = std::find_if(r.left_to_caller.begin(), r.left_to_caller.end(),
                                      [](const auto& n) { return n.name == "rsqrt"; });
      ASSERT_NE(rsqrt, r.left_to_caller.end()) << static_cast<int>(form);
      EXPECT_EQ(rsqrt->op_type, "Reciprocal");  // the file's node, as the file has it
    }
  }
}

// A Split's parts are imported as Slices named "<split>_<k>"; the report says which output of
// which Split of the user's file each one is.
TEST(OnnxImport, SplitPartsAreReportedAsTheSplitsOutputs) {
  ModelBuilder b;
  b.input("x", {1, 6, 4, 4});
  b.int_initializer("sizes", {2, 4});
  b.node("Split", {"x", "sizes"}, {"a", "b"}, "halves").i("axis", 1);
  b.initializer("w", {3, 4, 1, 1});
  b.node("Conv", {"b", "w"}, {"y"}, "conv");
  b.output("a");
  b.output("y");
  const ImportResult r = import(b);
  ASSERT_TRUE(r.left_to_caller.empty()) << r.left_to_caller[0].reason;
  std::map<std::string, std::string> written_as;
  const json report = rep(r);
  for (const auto& l : report["layers"])
    for (const auto& n : l["onnx_nodes"])
      if (n.contains("written_as")) written_as[n["name"]] = n["written_as"];
  EXPECT_EQ(written_as,
            (std::map<std::string, std::string>{{"halves_0", "output 0 of Split 'halves'"},
                                                {"halves_1", "output 1 of Split 'halves'"}}));
}

}  // namespace
}  // namespace padfold::onnx_test
