// The spec writer (frontend/spec_writer.h) and the resolver (frontend/resolve.h): every example
// spec written back parses to the same model, and the resolver's errors name the field at fault.
#include "frontend/spec_writer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "frontend/op_table.h"
#include "frontend/resolve.h"
#include "frontend/spec.h"
#include "model_compare.h"

namespace padfold {
namespace {

namespace fs = std::filesystem;

TEST(SpecWriter, EveryExampleWrittenBackParsesToTheSameModel) {
  int checked = 0;
  for (const char* dir : {PADFOLD_EXAMPLES_DIR, PADFOLD_EXAMPLES_DIR "/embedded"})
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().extension() != ".json") continue;
      const Model m = load_spec(e.path().string());
      // Parsed under the same file name, so weight paths resolve against the same folder.
      const Model back = parse_spec(to_spec_json(m).dump(2), m.file);
      EXPECT_EQ(testing::model_difference(m, back), "") << e.path();
      ++checked;
    }
  EXPECT_GE(checked, 7);
}

TEST(SpecWriter, EveryPaddingBorderAndActivationFormRoundTrips) {
  const std::string spec = R"s({"model": "m", "inputs": [{"name": "x", "shape": [1, 3, 9, 8]}],
    "layers": [
      {"name": "a", "op": "conv2d", "input": "x", "out_channels": 4, "kernel": [3, 2],
       "stride": 2, "padding": "same", "convention": "onnx_lower", "border": "reflect",
       "bias": true, "activation": {"type": "leaky_relu", "alpha": 0.25}},
      {"name": "b", "op": "max_pool", "input": "a", "kernel": 2, "ceil_mode": true,
       "padding": [[0, 1], [1, 0]], "border": {"mode": "constant", "value": -2.5}},
      {"name": "c", "op": "avg_pool2d", "input": "b", "kernel": 2, "padding": 1,
       "count_include_pad": true},
      {"name": "d", "op": "conv_transpose2d", "input": "c", "out_channels": 2, "kernel": 3,
       "stride": 2, "padding": "same_upper", "groups": 2, "output_padding": [1, 0]},
      {"name": "e", "op": "conv1d", "input_shape": [1, 2, 7], "out_channels": 2, "kernel": 3,
       "padding": "causal", "activation": "relu6"},
      {"name": "f", "op": "concat", "input": ["d", "d"]},
      {"name": "g", "op": "add", "input": ["f", "f"], "activation": "relu",
       "read_by": "ONNX node 'sig' (Sigmoid)"}]})s";
  const Model m = parse_spec(spec, "m.json");
  const Model back = parse_spec(to_spec_json(m).dump(), "m.json");
  EXPECT_EQ(testing::model_difference(m, back), "");
  EXPECT_EQ(to_spec_json(back), to_spec_json(m));
}

std::vector<std::string> keys_of(const nlohmann::json& properties) {
  std::vector<std::string> keys;
  for (const auto& item : properties.items()) keys.push_back(item.key());
  return keys;  // nlohmann::json keeps keys sorted
}

std::vector<std::string> sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

// The grammar is stated in the parser's key tables and in the JSON Schema: they must agree.
TEST(SpecGrammar, TheParsersKeysAreTheSchemasKeys) {
  std::ifstream f(PADFOLD_SPEC_SCHEMA);
  const nlohmann::json schema = nlohmann::json::parse(f);
  const SpecKeys& k = spec_keys();
  EXPECT_EQ(keys_of(schema["properties"]), sorted(k.top));
  EXPECT_EQ(keys_of(schema["properties"]["inputs"]["items"]["properties"]), sorted(k.input));
  EXPECT_EQ(keys_of(schema["properties"]["defaults"]["properties"]), sorted(k.defaults));
  EXPECT_EQ(keys_of(schema["$defs"]["layer"]["properties"]), sorted(k.layer));
}

// The op table has one row per Op, in order, and the schema spells each op as the parser does
// (with its dims where it has a window; only with them where the table says so) and lists every
// field an op takes.
TEST(SpecGrammar, TheSchemaSpellsTheOpTable) {
  std::ifstream f(PADFOLD_SPEC_SCHEMA);
  const nlohmann::json schema = nlohmann::json::parse(f);
  const nlohmann::json& layer = schema["$defs"]["layer"]["properties"];
  const std::regex op_pattern(layer["op"]["pattern"].get<std::string>());
  std::set<std::string> names;
  for (size_t k = 0; k < op_table().size(); ++k) {
    const OpDef& d = op_table()[k];
    EXPECT_EQ(static_cast<size_t>(d.op), k) << d.name;
    EXPECT_EQ(&op_def(d.op), &d) << d.name;
    EXPECT_EQ(to_string(d.op), d.name);
    EXPECT_TRUE(names.insert(d.name).second) << d.name;
    EXPECT_EQ(std::regex_match(std::string(d.name), op_pattern), !d.has(kDimsInName)) << d.name;
    for (const char* dims : {"1d", "2d", "3d"})
      EXPECT_EQ(std::regex_match(d.name + std::string(dims), op_pattern), d.has(kWindow))
          << d.name << dims;
  }
  EXPECT_EQ(op_table().size(), kOpCount);
  for (const std::string& field : op_fields()) EXPECT_TRUE(layer.contains(field)) << field;
}

// The schema's activation names are the activation table's spellings; each row's
// parameters round-trip through the writer and the parser, and a parameter it does not take is
// refused naming those that take it.
TEST(SpecGrammar, TheSchemaSpellsTheActivationTable) {
  std::ifstream f(PADFOLD_SPEC_SCHEMA);
  const nlohmann::json schema = nlohmann::json::parse(f);
  std::vector<std::string> names;
  for (const auto& n : kActivationNames) names.push_back(n.name);
  EXPECT_EQ(sorted(schema["$defs"]["activation_name"]["enum"].get<std::vector<std::string>>()),
            sorted(names));
  for (const ActivationDef& d : kActivations) {
    auto spec = [&](const nlohmann::json& activation) {
      nlohmann::json j = {{"model", "m"},
                          {"layers",
                           {{{"name", "c"},
                             {"op", "conv2d"},
                             {"input_shape", {1, 3, 6, 6}},
                             {"out_channels", 4},
                             {"kernel", 3},
                             {"activation", activation}}}}};
      return j.dump();
    };
    const Layer plain = parse_spec(spec(d.name), "m.json").layers.at(0);
    EXPECT_EQ(plain.activation, d.value) << d.name;
    EXPECT_EQ(plain.activation_alpha, d.alpha) << d.name;  // the defaults
    EXPECT_EQ(plain.activation_beta, d.beta) << d.name;
    nlohmann::json given = {{"type", d.name}, {"alpha", 0.375}, {"beta", -1.25}};
    if (d.params < 2) given.erase("beta");
    if (d.params < 1) given.erase("alpha");
    const Model m = parse_spec(spec(given), "m.json");
    const Layer back = parse_spec(to_spec_json(m).dump(), "m.json").layers.at(0);
    EXPECT_EQ(back.activation, d.value) << d.name;
    EXPECT_EQ(back.activation_alpha, d.params >= 1 ? 0.375f : d.alpha) << d.name;
    EXPECT_EQ(back.activation_beta, d.params >= 2 ? -1.25f : d.beta) << d.name;
    if (d.params == 2) continue;
    try {
      parse_spec(spec({{"type", d.name}, {"alpha", 1}, {"beta", 1}}), "m.json");
      ADD_FAILURE() << d.name << " took parameters it has not";
    } catch (const std::exception& e) {
      const std::string want = d.params == 0 ? "alpha only with leaky_relu or hard_sigmoid"
                                             : "beta only with hard_sigmoid";
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  }
}

// A 3x3 SAME conv2d with its fields set directly, as the importer builds one.
Layer conv(int64_t groups, int64_t out_channels) {
  Layer l;
  l.name = "c";
  l.op = Op::Conv;
  l.op_name = "conv2d";
  l.layout = {false, 2};
  l.kernel = {3, 3};
  l.stride = l.dilation = {1, 1};
  l.groups = groups;
  l.out_channels = out_channels;
  l.padding = parse_padding_name("same_upper");
  l.inputs = {"x"};
  return l;
}

std::string field_of(Layer l, const std::vector<TensorSource>& in) {
  try {
    resolve_layer(l, in);
  } catch (const LayerError& e) {
    return e.field;
  }
  return "";
}

TEST(ResolveLayer, ResolvesAndNamesTheFieldAtFault) {
  const TensorSource x{"x", "model input 'x'", {false, 2}, {1, 6, 9, 9}, DType::F32, {}};
  Layer ok = conv(3, 9);
  resolve_layer(ok, {x});
  EXPECT_EQ(ok.output_shape_full(), (std::vector<int64_t>{1, 9, 9, 9}));
  EXPECT_EQ(ok.pads.axes[0].before, 1);
  EXPECT_EQ(ok.pads.axes[0].after, 1);

  EXPECT_EQ(field_of(conv(4, 8), {x}), "groups");  // 4 does not divide 6
  EXPECT_EQ(field_of(conv(3, 8), {x}), "groups");  // nor 8
  Layer wide = conv(1, 2);
  wide.border = Border::Reflect;
  wide.padding = explicit_padding({9, 0, 0, 0}, 2);
  EXPECT_EQ(field_of(wide, {x}), "border");  // reflect needs a pad under the input
  const TensorSource nhwc{"y", "model input 'y'", {true, 2}, {1, 9, 9, 6}, DType::F32, {}};
  EXPECT_EQ(field_of(conv(1, 2), {nhwc}), "layout");

  Layer add;
  add.name = "a";
  add.op = Op::Add;
  add.op_name = "add";
  add.layout = {false, 2};
  add.inputs = {"x", "z"};
  const TensorSource z{"z", "model input 'z'", {false, 2}, {1, 6, 9, 8}, DType::F32, {}};
  EXPECT_EQ(field_of(add, {x, z}), "input");
  EXPECT_EQ(field_of(add, {x, x}), "");
}

}  // namespace
}  // namespace padfold
