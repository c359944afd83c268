// The spec parser: one test per class of bad input (each message must name the file, the layer and
// the field), then shape inference, weight shapes and FLOPs on valid specs.
#include "frontend/spec.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/identifiers.h"
#include "frontend/spec_writer.h"

namespace padfold {
namespace {

using json = nlohmann::json;

json conv_layer() {
  return {{"name", "c"},
          {"op", "conv2d"},
          {"input_shape", {1, 3, 8, 8}},
          {"out_channels", 4},
          {"kernel", 3}};
}

// A one-layer spec: the conv layer above with `patch` merged in (null removes a field).
std::string one_layer(const json& patch) {
  json layer = conv_layer();
  layer.merge_patch(patch);
  return json{{"model", "m"}, {"layers", json::array({layer})}}.dump();
}

std::string layers(const json& list) {
  return json{{"model", "m"}, {"layers", list}}.dump();
}

std::string error_of(const std::string& text) {
  try {
    parse_spec(text, "t.json");
  } catch (const SpecError& e) {
    return e.what();
  }
  return "(no error)";
}

// The message must contain every part; a layer error starts with the file and the layer.
void expect_error(const std::string& text, const std::vector<std::string>& parts) {
  const std::string msg = error_of(text);
  for (const auto& p : parts)
    EXPECT_TRUE(msg.find(p) != std::string::npos) << "'" << p << "' not in: " << msg;
}

void expect_layer_error(const std::string& patch_json, const std::string& field,
                        const std::vector<std::string>& parts = {}) {
  std::vector<std::string> all = {"t.json: layer 'c' (#0): field '" + field + "': "};
  all.insert(all.end(), parts.begin(), parts.end());
  expect_error(one_layer(json::parse(patch_json)), all);
}

Model parse(const std::string& text) {
  return parse_spec(text, "t.json");
}

TEST(SpecErrors, BadJsonSyntaxGivesLineAndColumn) {
  expect_error("{\n  \"model\": \"m\",\n  \"layers\": [,]\n}", {"t.json:3:14: invalid JSON: "});
  expect_error("", {"t.json:1:1: invalid JSON"});
}

TEST(SpecErrors, TopLevel) {
  expect_error(R"({"layers": []})", {"t.json: field 'model': missing"});
  expect_error(R"({"model": "my-model", "layers": []})",
               {"t.json: field 'model': 'my-model'", "C identifier"});
  expect_error(R"({"model": "m", "layers": []})", {"t.json: field 'layers': ", "non-empty"});
  expect_error(R"({"model": "m", "layer": []})",
               {"t.json: field 'layer': unknown field; did you mean 'layers'?"});
  expect_error(R"({"model": "m", "defaults": {"layuot": "NCHW"}, "layers": [1]})",
               {"field 'defaults.layuot': unknown field; did you mean 'layout'?"});
  expect_error("[1, 2]", {"t.json: field '(top level)': array [1,2]; expected a JSON object"});
}

TEST(SpecErrors, MissingRequiredField) {
  expect_layer_error(R"({"kernel": null})", "kernel", {"missing; expected an integer"});
  expect_layer_error(R"({"op": null})", "op", {"missing"});
  expect_layer_error(R"({"out_channels": null})", "out_channels", {"missing"});
  expect_error(layers(json::array({json{{"op", "conv2d"}}})),
               {"t.json: layer '?' (#0): field 'name': missing"});
  expect_layer_error(R"({"input_shape": null})", "input_shape", {"missing on the first layer"});
}

TEST(SpecErrors, WrongType) {
  expect_layer_error(R"({"kernel": "3"})", "kernel",
                     {"string \"3\"; expected an integer or a list of 2 integers"});
  expect_layer_error(R"({"kernel": [3, 3, 3]})", "kernel", {"array [3,3,3]", "list of 2"});
  expect_layer_error(R"({"bias": 1})", "bias", {"number 1; expected true or false"});
  expect_layer_error(R"({"out_channels": 2.5})", "out_channels", {"2.5", "positive integer"});
  expect_layer_error(R"({"input_shape": [1, 3, 8]})", "input_shape",
                     {"[1,3,8]", "a list of 4 integers in NCHW order"});
}

TEST(SpecErrors, UnknownFieldWithSuggestion) {
  expect_layer_error(R"({"strides": 2})", "strides", {"unknown field; did you mean 'stride'?"});
  expect_layer_error(R"({"zzz": 2})", "zzz", {"unknown field; expected one of name"});
  expect_layer_error(R"({"padding": {"pads": [0, 0, 0, 0], "mode": 1}})", "padding.mode",
                     {"unknown field"});
}

TEST(SpecErrors, BadOp) {
  expect_layer_error(R"({"op": "conv4d"})", "op", {"'conv4d'", "expected one of conv1d"});
  expect_layer_error(R"({"op": "conv"})", "op", {"'conv'"});
}

TEST(SpecErrors, BadLayout) {
  expect_layer_error(R"({"layout": "NCHWC"})", "layout", {"'NCHWC'", "NCHW, NHWC"});
  expect_layer_error(R"({"layout": "nchw"})", "layout", {"'nchw'"});
}

TEST(SpecErrors, LayoutDimsMismatch) {
  expect_layer_error(R"({"op": "conv1d", "layout": "NCHW", "input_shape": [1, 3, 8]})", "layout",
                     {"NCHW has 2 spatial dim(s) but this conv1d layer has 1",
                      "expected NCW, NWC, channels_first or channels_last"});
  expect_error(one_layer({{"op", "conv3d"}}).insert(1, R"("defaults": {"layout": "NHWC"}, )"),
               {"field 'defaults.layout': NHWC has 2 spatial dim(s) but this conv3d layer has 3"});
}

TEST(SpecErrors, NonPositiveSizes) {
  expect_layer_error(R"({"kernel": 0})", "kernel",
                     {"kernel size must be a positive integer, got 0"});
  expect_layer_error(R"({"stride": [1, 0]})", "stride", {"spatial axis 1", "got 0"});
  expect_layer_error(R"({"dilation": -1})", "dilation", {"got -1"});
  expect_layer_error(R"({"input_shape": [1, 3, 0, 8]})", "input_shape", {"input size", "got 0"});
  expect_layer_error(R"({"input_shape": [0, 3, 8, 8]})", "input_shape", {"[0, 3, 8, 8]"});
  expect_layer_error(R"({"groups": 0})", "groups", {"positive integer"});
}

TEST(SpecErrors, KernelLargerThanPaddedInput) {
  expect_layer_error(
      R"({"kernel": [9, 3]})", "kernel",
      {"spatial axis 0", "effective kernel (9) is larger than the padded input (8 + 0 + 0 = 8)"});
  expect_layer_error(R"({"kernel": 3, "dilation": 4})", "kernel", {"effective kernel (9)"});
}

TEST(SpecErrors, BadPadding) {
  expect_layer_error(R"({"padding": "sam"})", "padding", {"unknown padding 'sam'"});
  expect_layer_error(R"({"padding": "same", "convention": "caffe"})", "convention",
                     {"unknown convention 'caffe'"});
  expect_layer_error(R"({"padding": "valid", "convention": "pytorch"})", "convention",
                     {"only applies to padding 'same'"});
  expect_layer_error(R"({"padding": [1, 1], "convention": "pytorch"})", "convention",
                     {"explicit pads"});
  expect_layer_error(R"({"padding": true})", "padding", {"boolean true; expected a padding name"});
}

TEST(SpecErrors, TorchSameNeedsStride1) {
  expect_layer_error(R"({"padding": "same", "convention": "pytorch", "stride": 2})", "padding",
                     {"only defined for stride 1", "same_upper"});
  expect_layer_error(R"({"padding": "scipy_same", "stride": [1, 2]})", "padding",
                     {"spatial axis 1", "stride 1"});
}

TEST(SpecErrors, WrongPadsCount) {
  expect_layer_error(R"({"padding": [1, 2, 3]})", "padding", {"3 values", "takes 1, 2"});
  expect_layer_error(R"({"padding": {"pads": [1, 1]}})", "padding.pads",
                     {"array [1,1]", "4 integers (ONNX order"});
  expect_layer_error(R"({"padding": [[1, 1]]})", "padding", {"2 [before, after] pairs"});
  expect_layer_error(R"({"padding": [[1, 1], [1]]})", "padding", {"array [1]"});
}

// Negative pads crop the input: a conv reads it from the crop on; a crop must leave part of the
// input, takes a zeros or constant border, and is no transposed convolution's.
TEST(SpecErrors, NegativePad) {
  expect_layer_error(R"({"padding": -40})", "padding", {"must leave part of the input"});
  expect_layer_error(R"({"padding": [[0, 1], [-2, 0]], "border": "reflect"})", "border",
                     {"a negative pad takes a zeros or constant border"});
  expect_layer_error(
      R"({"op": "conv_transpose2d", "padding": [[0, 1], [-2, 0]], "weight_layout": "IOHW"})",
      "padding", {"must be >= 0"});
}

TEST(SpecErrors, BorderCannotProducePads) {
  expect_layer_error(
      R"({"input_shape": [1, 3, 4, 8], "kernel": 9, "padding": 4, "border": "reflect"})", "border",
      {"spatial axis 0: reflect padding of 4", "the input is 4"});
  expect_layer_error(
      R"({"input_shape": [1, 3, 8, 2], "kernel": 7, "padding": 3, "border": "wrap"})", "border",
      {"spatial axis 1: circular padding of 3 exceeds the input size 2"});
  expect_layer_error(R"({"border": "mirrored"})", "border", {"unknown border mode 'mirrored'"});
}

TEST(SpecErrors, PoolWindowInPadding) {
  expect_layer_error(R"({"op": "max_pool", "out_channels": null, "kernel": 2, "padding": 2})",
                     "padding", {"spatial axis 0", "no input to pool"});
  // Counting the pads gives such a window a value.
  EXPECT_NO_THROW(parse(one_layer({{"op", "avg_pool"},
                                   {"out_channels", nullptr},
                                   {"kernel", 2},
                                   {"padding", 2},
                                   {"count_include_pad", true}})));
}

TEST(SpecErrors, BorderValueNeedsConstantMode) {
  expect_layer_error(R"({"border": {"mode": "reflect", "value": 1}})", "border.value",
                     {"given with mode 'reflect'", "only with mode 'constant'"});
  expect_layer_error(R"({"border": {"value": 1}})", "border.mode", {"missing"});
}

TEST(SpecErrors, BorderOnConvTranspose) {
  expect_layer_error(R"({"op": "conv_transpose2d", "border": "replicate"})", "border",
                     {"'replicate' on a conv_transpose2d layer; expected zeros", "crop"});
}

TEST(SpecErrors, GroupsMustDivideChannels) {
  expect_layer_error(R"({"groups": 2})", "groups", {"2 groups do not divide the 3 input channels"});
  expect_layer_error(R"({"input_shape": [1, 4, 8, 8], "groups": 2, "out_channels": 3})", "groups",
                     {"3 output channels"});
  expect_layer_error(R"({"depth_multiplier": 2, "out_channels": 6})", "depth_multiplier",
                     {"either depth_multiplier"});
}

TEST(SpecErrors, ChainedShapeMismatch) {
  json second = conv_layer();
  second["name"] = "d";
  second["input"] = "c";
  second["input_shape"] = {1, 3, 6, 6};
  expect_error(layers({conv_layer(), second}),
               {"t.json: layer 'd' (#1): field 'input_shape': [1, 3, 6, 6] but input layer 'c' "
                "produces [1, 4, 6, 6]"});
}

TEST(SpecErrors, ChainedLayoutMismatch) {
  json second = {{"name", "d"}, {"op", "max_pool"}, {"kernel", 2}, {"layout", "NHWC"}};
  expect_error(layers({conv_layer(), second}),
               {"layer 'd' (#1): field 'layout': NHWC, but input layer 'c' produces NCHW"});
  json third = {{"name", "e"}, {"op", "max_pool1d"}, {"kernel", 2}};
  expect_error(
      layers({conv_layer(), third}),
      {"layer 'e' (#1): field 'layout': NCHW (from input layer 'c') has 2 spatial dim(s)"});
}

// A conv or pool may read its input in the other layout (input_layout): the buffer has the
// input's layout and shape, the output the layer's; the spec writer keeps the field.
TEST(SpecRelayout, AConvReadsItsInputInAnotherLayout) {
  json pool = {{"name", "p"}, {"op", "max_pool"}, {"input", "c"},
               {"kernel", 2}, {"layout", "NHWC"}, {"input_layout", "NCHW"}};
  const Model m = parse(layers({conv_layer(), pool}));
  const Layer& p = m.layers.at(1);
  EXPECT_TRUE(p.relayout_input);
  EXPECT_EQ(p.read_layout().name(), "NCHW");
  EXPECT_EQ(p.layout.name(), "NHWC");
  EXPECT_EQ(p.input_shape(), (std::vector<int64_t>{1, 4, 6, 6}));
  EXPECT_EQ(p.output_shape_full(), (std::vector<int64_t>{1, 5, 5, 4}));
  const Model again = parse(to_spec_json(m).dump());
  EXPECT_TRUE(again.layers.at(1).relayout_input);
  EXPECT_EQ(again.layers.at(1).input_shape(), p.input_shape());
  // The same layout as the layer's: no relayout.
  const Model same = parse(one_layer(json::parse(R"({"input_layout": "NCHW"})")));
  EXPECT_FALSE(same.layers.at(0).relayout_input);
  // input_shape is in the input's layout.
  const Model cl = parse(one_layer(
      json::parse(R"({"input_shape": [1, 8, 8, 3], "input_layout": "NHWC", "layout": "NCHW"})")));
  EXPECT_EQ(cl.layers.at(0).input_shape(), (std::vector<int64_t>{1, 8, 8, 3}));
  EXPECT_EQ(cl.layers.at(0).output_shape_full(), (std::vector<int64_t>{1, 4, 6, 6}));
}

TEST(SpecErrors, InputLayout) {
  json pool = {{"name", "p"}, {"op", "max_pool"}, {"input", "c"},
               {"kernel", 2}, {"layout", "NHWC"}, {"input_layout", "NHWC"}};
  expect_error(
      layers({conv_layer(), pool}),
      {"layer 'p' (#1): field 'layout': NHWC, but input layer 'c' produces NCHW", "input_layout"});
  pool["input_layout"] = "NCW";
  expect_error(layers({conv_layer(), pool}), {"field 'input_layout': 'NCW'"});
  json add = {{"name", "a"}, {"op", "add"}, {"input", {"c", "c"}}, {"input_layout", "NCHW"}};
  expect_error(layers({conv_layer(), add}),
               {"layer 'a' (#1): field 'input_layout'",
                "it only on conv, conv_transpose, max_pool and avg_pool layers"});
}

TEST(SpecErrors, UnknownInputLayer) {
  json second = {{"name", "d"}, {"op", "max_pool"}, {"kernel", 2}, {"input", "nope"}};
  expect_error(layers({conv_layer(), second}),
               {"layer 'd' (#1): field 'input': 'nope' is not a layer"});
  second["input"] = "e";
  json third = {{"name", "e"}, {"op", "max_pool"}, {"kernel", 2}};
  expect_error(layers({conv_layer(), second, third}), {"'e' is defined later in the file"});
}

TEST(SpecErrors, LayerReadingItself) {
  json second = {{"name", "d"}, {"op", "max_pool"}, {"kernel", 2}, {"input", "d"}};
  expect_error(layers({conv_layer(), second}),
               {"layer 'd' (#1): field 'input': 'd' is this layer itself (a layer cannot read its "
                "own output); expected the name of an earlier layer or of a model input"});
  json first = {{"name", "a"}, {"op", "max_pool2d"}, {"kernel", 1}, {"input", "a"}};
  expect_error(layers(json::array({first})),
               {"layer 'a' (#0): field 'input': 'a' is this layer itself"});
}

TEST(SpecErrors, DuplicateName) {
  json second = conv_layer();
  expect_error(layers({conv_layer(), second}),
               {"t.json: layer 'c' (#1): field 'name': 'c' is already used by layer #0"});
}

TEST(SpecErrors, NameNotIdentifier) {
  expect_error(one_layer({{"name", "1st-layer"}}),
               {"t.json: layer '1st-layer' (#0): field 'name': '1st-layer'", "C identifier"});
  expect_error(one_layer({{"name", ""}}), {"t.json: layer '' (#0): field 'name': ''"});
}

// A quantized conv (docs/int8.md): every quant field parsed, and each mistake named by its field.
TEST(SpecQuant, ConvFieldsAreParsedAndCheckedAgainstTheLayer) {
  const json q = {{"dtype", "uint8"},
                  {"activation", "relu6"},
                  {"quant",
                   {{"requantize", "onnx"},
                    {"input", {{"scale", 0.5}, {"zero_point", 128}}},
                    {"output", {{"scale", 0.25}, {"zero_point", 3}}},
                    {"weight_scale", {0.1, 0.2, 0.3, 0.4}}}}};
  const Layer L = parse(one_layer(q)).layers[0];
  ASSERT_TRUE(L.quant);
  EXPECT_EQ(L.dtype, DType::U8);
  EXPECT_EQ(L.quant->requantize, Requantize::Onnx);
  EXPECT_EQ(L.quant->inputs.size(), 1u);
  EXPECT_EQ(L.quant->inputs[0].zero_point, 128);
  EXPECT_FLOAT_EQ(L.quant->output.scale, 0.25f);
  EXPECT_EQ(L.quant->weight_scales, (std::vector<float>{0.1f, 0.2f, 0.3f, 0.4f}));
  auto with = [&](const json& patch) {
    json j = q;
    j.merge_patch(patch);
    return j.dump();
  };
  expect_layer_error(with({{"quant", {{"weight_scale", {0.1, 0.2}}}}}), "quant.weight_scale",
                     {"a list of 2; expected a positive scale, or a list of 4"});
  expect_layer_error(with({{"quant", {{"input", {{"zero_point", 256}}}}}}),
                     "quant.input.zero_point", {"256; expected an integer in [0, 255] (uint8)"});
  expect_layer_error(with({{"quant", {{"output", {{"scale", 0}}}}}}), "quant.output.scale",
                     {"a positive, normal float32 scale"});
  expect_layer_error(with({{"quant", {{"requantize", "tvm"}}}}), "quant.requantize",
                     {"'tvm'; expected tflite or onnx"});
  expect_layer_error(with({{"quant", {{"output", nullptr}}}}), "quant.output", {"missing"});
  expect_layer_error(with({{"quant", {{"scale", 1}}}}), "quant.scale", {"unknown field"});
  expect_layer_error(with({{"activation", "sigmoid"}}), "activation",
                     {"'sigmoid' on a uint8 layer; expected none, relu or relu6"});
  expect_layer_error(R"({"quant": {}})", "quant", {"given on a layer of dtype float32"});
}

TEST(SpecQuant, PoolsKeepTheirInputsQuantizationAndOtherOpsAreRefused) {
  const json pool = {{"op", "max_pool"},
                     {"out_channels", nullptr},
                     {"dtype", "int8"},
                     {"quant", {{"input", {{"scale", 0.5}, {"zero_point", -3}}}}}};
  const Layer L = parse(one_layer(pool)).layers[0];
  EXPECT_EQ(L.quant->output.zero_point, -3);  // the output defaults to the input's
  json differs = pool;
  differs["quant"]["output"] = {{"scale", 0.5}, {"zero_point", 4}};
  expect_layer_error(differs.dump(), "quant.output", {"differ from the input's"});
  differs["op"] = "avg_pool";
  differs["quant"]["requantize"] = "onnx";  // ONNX Runtime's average pool requantizes
  EXPECT_EQ(parse(one_layer(differs)).layers[0].quant->output.zero_point, 4);
  expect_layer_error(R"({"op": "conv_transpose2d", "dtype": "int8"})", "dtype",
                     {"'int8' on a conv_transpose2d layer; expected int8 only on conv, max_pool, "
                      "avg_pool, add, mul, quantize, dequantize, transpose and activation layers"});
}

// quantize: float32 in, its dtype out with quant.output; dequantize: the reverse with quant.input.
TEST(SpecQuant, QuantizeAndDequantizeConvertAtTheEdges) {
  const json q = {{"scale", 0.25}, {"zero_point", 3}};
  const auto model = [&](const json& first, const json& second) {
    return json{{"model", "m"},
                {"inputs", {{{"name", "x"}, {"shape", {1, 2, 4, 4}}}}},
                {"layers", {first, second}}}
        .dump();
  };
  const json quant = {{"name", "q"},
                      {"op", "quantize"},
                      {"input", "x"},
                      {"dtype", "uint8"},
                      {"quant", {{"requantize", "onnx"}, {"output", q}}}};
  const json deq = {{"name", "d"},
                    {"op", "dequantize"},
                    {"input", "q"},
                    {"dtype", "uint8"},
                    {"quant", {{"input", q}}}};
  const Model m = parse(model(quant, deq));
  EXPECT_EQ(m.layers[0].input_dtype(), DType::F32);
  EXPECT_EQ(m.layers[0].output_dtype(), DType::U8);
  EXPECT_EQ(m.layers[0].quant->output.zero_point, 3);
  EXPECT_EQ(m.layers[1].input_dtype(), DType::U8);
  EXPECT_EQ(m.layers[1].output_dtype(), DType::F32);
  EXPECT_EQ(m.layers[1].output_shape_full(), (std::vector<int64_t>{1, 2, 4, 4}));
  json wrong = deq;
  wrong["quant"] = {{"input", {{"scale", 0.5}, {"zero_point", 3}}}};
  expect_error(model(quant, wrong),
               {"field 'quant.input'", "the quantization its input is written in"});
  wrong = quant;
  wrong["quant"] = {{"input", q}};
  expect_error(model(wrong, deq), {"field 'quant.input': given on a quantize"});
  wrong = quant;
  wrong["dtype"] = "float32";
  wrong.erase("quant");
  expect_error(model(wrong, deq), {"field 'dtype': 'float32' on a quantize layer"});
  json twice = quant;
  twice["input"] = "x";
  json again = quant;
  again["name"] = "q2";
  again["input"] = "q";
  expect_error(model(twice, again), {"field 'dtype'", "a float32 input"});
}

// A quantized layer reads its input as the producer wrote it: dtype, scale and zero point.
TEST(SpecQuant, InputsMustHaveTheLayersDtypeAndQuantization) {
  const json first = {{"name", "a"},
                      {"op", "conv2d"},
                      {"input_shape", {1, 3, 8, 8}},
                      {"out_channels", 4},
                      {"kernel", 3},
                      {"dtype", "int8"},
                      {"quant",
                       {{"input", {{"scale", 0.5}, {"zero_point", 0}}},
                        {"output", {{"scale", 0.25}, {"zero_point", 3}}},
                        {"weight_scale", 0.1}}}};
  json second = {{"name", "b"},
                 {"op", "max_pool"},
                 {"kernel", 2},
                 {"dtype", "int8"},
                 {"quant", {{"input", {{"scale", 0.25}, {"zero_point", 3}}}}}};
  EXPECT_NO_THROW(parse(layers({first, second})));
  second["quant"]["input"]["zero_point"] = 4;
  expect_error(layers({first, second}),
               {"layer 'b' (#1): field 'quant.input': scale 0.25 and zero point 4, but input "
                "layer 'a' writes scale 0.25 and zero point 3"});
  second.erase("quant");
  second["dtype"] = "float32";
  expect_error(layers({first, second}),
               {"field 'dtype': 'float32' reading input layer 'a', which is int8"});
  // Model inputs take defaults.dtype.
  const Model m = parse(R"({"model": "m", "defaults": {"dtype": "int8"},
      "inputs": [{"name": "x", "shape": [1, 3, 8, 8]}],
      "layers": [{"name": "p", "op": "max_pool", "input": "x", "kernel": 2,
                  "quant": {"input": {"scale": 1, "zero_point": 0}}}]})");
  EXPECT_EQ(m.inputs.at(0).dtype, DType::I8);
}

TEST(SpecErrors, Dtype) {
  expect_layer_error(R"({"dtype": "float16"})", "dtype",
                     {"'float16' is not supported yet; expected float32, int8 or uint8"});
  expect_layer_error(R"({"dtype": "float64"})", "dtype", {"'float64'; expected float32"});
  expect_layer_error(R"({"dtype": "int8"})", "quant", {"missing for a layer of dtype int8"});
}

TEST(SpecErrors, OpOnlyFields) {
  expect_layer_error(R"({"ceil_mode": true})", "ceil_mode",
                     {"given on a conv2d layer; expected it only on max_pool and avg_pool layers"});
  expect_layer_error(R"({"output_padding": 1})", "output_padding", {"conv_transpose"});
  const std::string pool = R"({"op": "max_pool", "out_channels": null, "bias": true})";
  expect_layer_error(pool, "bias", {"given on a max_pool layer"});
  expect_layer_error(R"({"op": "max_pool", "out_channels": null, "activation": "relu"})",
                     "activation", {"max_pool"});
  expect_layer_error(R"({"op": "max_pool", "out_channels": null, "count_include_pad": true})",
                     "count_include_pad", {"avg_pool layers"});
}

TEST(SpecErrors, Activation) {
  expect_layer_error(R"({"activation": "mish"})", "activation", {"'mish'", "relu6", "gelu"});
  expect_layer_error(R"({"activation": {"type": "relu", "alpha": 0.2}})", "activation.alpha",
                     {"only with leaky_relu"});
}

TEST(SpecErrors, WeightLayout) {
  expect_layer_error(R"({"weight_layout": "OIWH"})", "weight_layout",
                     {"'OIWH' for a conv2d layer", "OIHW, HWIO"});
  expect_layer_error(R"({"weight_layout": "OIW"})", "weight_layout", {"'OIW'"});
}

TEST(SpecErrors, TransposedPads) {
  expect_layer_error(R"({"op": "conv_transpose2d", "stride": 2, "output_padding": 2})",
                     "output_padding", {"smaller than the stride"});
  expect_layer_error(R"({"op": "conv_transpose2d", "padding": "causal"})", "padding",
                     {"transposed convolution takes"});
}

TEST(SpecErrors, LoadSpecNamesThePath) {
  try {
    load_spec("/nonexistent/dir/spec.json");
    FAIL() << "no error";
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/spec.json: cannot open"),
              std::string::npos)
        << e.what();
  }
}

// ---------------------------------------------------------------------------------------------
// Limits (base/limits.h, docs/spec-and-cli.md "Limits").

TEST(SpecLimits, IntegersBeyondInt32AreOutOfRange) {
  // 2^64-1 is stored unsigned by nlohmann; it once read as -1 ("got -1").
  expect_layer_error(R"({"kernel": 18446744073709551615})", "kernel",
                     {"number 18446744073709551615 is out of range (sizes are at most "
                      "2147483647, the int32 limit); expected an integer or a list of 2 integers"});
  expect_layer_error(R"({"stride": [1, 2147483648]})", "stride",
                     {"number 2147483648 is out of range"});
  expect_layer_error(R"({"dilation": 4611686018427387904})", "dilation",
                     {"number 4611686018427387904 is out of range"});
  expect_layer_error(R"({"dilation": 9223372036854775807})", "dilation", {"out of range"});
  expect_layer_error(R"({"out_channels": 2147483648})", "out_channels", {"out of range"});
  expect_layer_error(R"({"groups": 9223372036854775808})", "groups",
                     {"number 9223372036854775808 is out of range"});
  expect_layer_error(R"({"input_shape": [2147483648, 3, 8, 8]})", "input_shape", {"out of range"});
  expect_layer_error(R"({"input_shape": [1, 3, -2147483648, 8]})", "input_shape",
                     {"number -2147483648 is out of range"});
  expect_layer_error(R"({"padding": 2147483648})", "padding", {"out of range"});
  expect_layer_error(R"({"padding": {"pads": [0, 0, 0, 18446744073709551615]}})", "padding.pads",
                     {"out of range"});
  expect_layer_error(R"({"op": "conv_transpose2d", "output_padding": 4294967296})",
                     "output_padding", {"out of range"});
  expect_layer_error(R"({"op": "conv_transpose2d", "output_shape": [8, 2147483648]})",
                     "output_shape", {"out of range"});
  expect_layer_error(R"({"depth_multiplier": 65536, "input_shape": [1, 65536, 1, 1],
                         "out_channels": null, "kernel": 1})",
                     "depth_multiplier",
                     {"65536 input channels x 65536 gives 4294967296 output channels; expected "
                      "at most 2147483647"});
  // The limit itself is an ordinary size.
  EXPECT_NO_THROW(parse(one_layer({{"kernel", 1}, {"stride", 2147483647}})));
}

TEST(SpecLimits, DerivedSizesBeyondInt32NameTheField) {
  // An effective kernel of 2*(2^31-1)+1, and pads that make the padded input too wide.
  expect_layer_error(R"({"dilation": 2147483647, "padding": "full"})", "dilation",
                     {"spatial axis 0: the effective kernel (3-1)*2147483647+1 = 4294967295 "
                      "exceeds 2147483647"});
  expect_layer_error(R"({"padding": [[0, 2147483647], [0, 0]]})", "padding",
                     {"the padded input (8 + 0 + 2147483647) is 2147483655, beyond 2147483647"});
}

TEST(SpecLimits, EveryBufferUnder2GiB) {
  expect_layer_error(R"({"input_shape": [1, 3, 65536, 65536]})", "input_shape",
                     {"the input buffer [1, 3, 65536, 65536] is 51539607552 bytes of float32; "
                      "expected every buffer under 2147483648 bytes"});
  expect_layer_error(R"({"input_shape": [2147483647, 2147483647, 2147483647, 2147483647]})",
                     "input_shape", {"is more than 2^63 bytes"});
  expect_layer_error(R"({"out_channels": 2000000000})", "out_channels",
                     {"the weights buffer [2000000000, 3, 3, 3] is 216000000000 bytes"});
  expect_layer_error(R"({"input_shape": [1, 1, 8, 8], "kernel": [1, 65536],
                         "padding": [[0, 0], [0, 65536]], "out_channels": 65536})",
                     "kernel", {"the weights buffer [65536, 1, 1, 65536]"});
  // Exactly 2^31 bytes of output is one byte too many.
  expect_layer_error(R"({"input_shape": [1, 1, 16384, 16384], "kernel": 1, "out_channels": 2})",
                     "out_channels",
                     {"the output buffer [1, 2, 16384, 16384] is 2147483648 bytes of float32"});
  expect_layer_error(R"({"input_shape": [1, 1, 1, 268435456], "kernel": 1, "out_channels": 1,
                         "padding": [[0, 0], [0, 268435456]]})",
                     "padding", {"the output buffer [1, 1, 1, 536870912]"});
  expect_layer_error(R"({"op": "conv_transpose2d", "input_shape": [1, 1, 1, 134217728],
                         "kernel": 1, "out_channels": 1, "stride": [1, 16]})",
                     "stride", {"the output buffer [1, 1, 1, 2147483633]"});
  EXPECT_NO_THROW(parse(
      one_layer({{"input_shape", {1, 1, 16384, 16383}}, {"kernel", 1}, {"out_channels", 2}})));
  EXPECT_EQ(buffer_bytes({1, 3, 8, 8}, DType::F32), 768);
  EXPECT_EQ(buffer_bytes({int64_t{1} << 62, 2}, DType::F32), std::nullopt);
}

TEST(SpecLimits, FloatsBeyondFloat32) {
  expect_layer_error(R"({"padding": 1, "border": {"mode": "constant", "value": 1e39}})",
                     "border.value",
                     {"number 1e+39 is beyond the float32 range; expected a number from "
                      "-3.4028235e+38 to 3.4028235e+38"});
  expect_layer_error(R"({"activation": {"type": "leaky_relu", "alpha": -1e39}})",
                     "activation.alpha", {"number -1e+39 is beyond the float32 range"});
  const Layer l = parse(one_layer({{"padding", 1},
                                   {"border", {{"mode", "constant"}, {"value", 3.4e38}}},
                                   {"activation", {{"type", "leaky_relu"}, {"alpha", -3.4e38}}}}))
                      .layers[0];
  EXPECT_FLOAT_EQ(l.border_value, 3.4e38f);
  EXPECT_FLOAT_EQ(l.activation_alpha, -3.4e38f);
}

TEST(SpecLimits, NamesAtMost64Characters) {
  const std::string name64(64, 'a'), name65(65, 'b');
  EXPECT_EQ(parse(one_layer({{"name", name64}})).layers[0].name, name64);
  const std::string shown = std::string(61, 'b') + "...";
  expect_error(one_layer({{"name", name65}}),
               {"t.json: layer '" + shown + "' (#0): field 'name': '" + shown +
                "' has 65 characters; expected at most 64 characters"});
  // A 300-character name once failed inside Halide, on a file name.
  expect_error(one_layer({{"name", std::string(300, 'c')}}), {"has 300 characters"});
  json spec = json::parse(one_layer(json::object()));
  spec["model"] = name64;
  EXPECT_NO_THROW(parse(spec.dump()));
  spec["model"] = name65;
  expect_error(spec.dump(),
               {"t.json: field 'model': '" + shown + "' has 65 characters; expected at most 64"});
}

// Halide defines <fn>_argv and <fn>_metadata beside kernel <fn> = pf_<n>_<model>_<layer>.
TEST(SpecErrors, NameClashesWithHalideSymbols) {
  auto pool = [](const std::string& name) {
    return json{{"name", name}, {"op", "max_pool"}, {"kernel", 1}};
  };
  expect_error(layers({conv_layer(), pool("c_argv")}),
               {"t.json: layer 'c_argv' (#1): field 'name': 'c_argv' clashes with layer 'c' "
                "(#0): the kernel pf_1_m_c comes with the symbol pf_1_m_c_argv, which is also the "
                "kernel of layer 'c_argv'; expected a name other than another layer's name + "
                "_argv or _metadata"});
  json first = conv_layer();
  first["name"] = "c_metadata";
  expect_error(layers({first, pool("c")}),
               {"t.json: layer 'c' (#1): field 'name': 'c' clashes with layer 'c_metadata' (#0)",
                "pf_1_m_c_metadata"});
  EXPECT_NO_THROW(parse(layers({conv_layer(), pool("c_arg"), pool("c_argv_x")})));
}

// read_by marks an output that ops outside padfold read: the layer must be an output.
TEST(SpecErrors, ReadByOnALayerThatIsNoOutput) {
  json spec = json::parse(layers(json::array({conv_layer()})));
  spec["layers"][0]["read_by"] = "ONNX node 'sig' (Sigmoid)";
  EXPECT_EQ(parse(spec.dump()).layers[0].read_by, "ONNX node 'sig' (Sigmoid)");
  spec["layers"].push_back({{"name", "p"}, {"op", "max_pool"}, {"kernel", 1}});
  expect_error(spec.dump(),
               {"t.json: layer 'c' (#0): field 'read_by': given, but the layer is not among the "
                "model's outputs; expected the layer in 'outputs' (ops outside padfold read its "
                "output)"});
  spec["layers"][0]["read_by"] = 5;
  expect_error(spec.dump(), {"field 'read_by'"});
}

// The model part of a kernel symbol ends where its length says: model a_b's layer c and model a's
// layer b_c once both had the kernel pf_a_b_c, and two such bundles linked into one program ran one
// kernel for both (tests/e2e/two_models links them).
TEST(KernelSymbol, CarriesTheModelNameLength) {
  EXPECT_EQ(kernel_symbol("tiny", "stem"), "pf_4_tiny_stem");
  EXPECT_EQ(kernel_symbol("a_b", "c"), "pf_3_a_b_c");
  EXPECT_EQ(kernel_symbol("a", "b_c"), "pf_1_a_b_c");
}

// ---------------------------------------------------------------------------------------------
// JSON the parser must not take as it is: too deep, too large numbers, repeated keys.

TEST(SpecJson, NestingDeeperThan64LevelsIsAnError) {
  // 100k nested arrays once overflowed the stack.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_EQ(error_of(deep), "t.json:1:65: arrays and objects nested deeper than 64 levels");
  json kernel = json::array({3});
  for (int i = 0; i < 70; ++i) kernel = json::array({kernel});
  const std::string text = one_layer({{"kernel", kernel}});
  expect_error(text, {"t.json:1:", ": arrays and objects nested deeper than 64 levels"});
  // 64 levels are fine: the top object, "layers", a layer and 61 levels in "description".
  json description = "x";
  for (int i = 0; i < 61; ++i) description = json::array({description});
  json spec = json::parse(one_layer(json::object()));
  spec["layers"][0]["description"] = description;
  EXPECT_NO_THROW(parse(spec.dump()));
  spec["layers"][0]["description"] = json::array({description});
  expect_error(spec.dump(), {"nested deeper than 64 levels"});
  // Brackets inside strings do not count.
  spec["layers"][0]["description"] = std::string(1000, '[');
  EXPECT_NO_THROW(parse(spec.dump()));
}

TEST(SpecJson, NumbersBeyondDoubleGiveAPosition) {
  // nlohmann once threw its own out_of_range error, with neither file nor position.
  expect_error("{\n  \"model\": \"m\",\n  \"layers\": [1e400]\n}",
               {"t.json:3:14: number 1e400 is out of range"});
  expect_error(R"({"model": "m", "layers": [-1e400]})", {"t.json:1:27: number -1e400"});
  const std::string digits(400, '9');
  expect_error(R"({"model": "m", "layers": [)" + digits + "]}", {"t.json:1:27: number 999"});
  expect_layer_error(R"({"kernel": 1e300})", "kernel", {"number 1e+300; expected an integer"});
}

TEST(SpecJson, RepeatedKeysAreAnError) {
  // nlohmann once kept the last value silently.
  expect_error(
      "{\"model\": \"m\",\n \"layers\": [{\"name\": \"c\", \"op\": \"conv2d\", \"kernel\": 3, "
      "\"kernel\": 5}]}",
      {"t.json:2:56: key 'kernel' appears twice in one object; expected each key once"});
  expect_error(R"({"model": "m", "model": "n", "layers": []})", {"t.json:1:16: key 'model'"});
  expect_error(R"({"model": "m", "layers": [{"border": {"mode": "x", "mode": "y"}}]})",
               {"key 'mode' appears twice"});
  // The same key once escaped: still the same key.
  expect_error(R"({"model": "m", "mod\u0065l": "n", "layers": []})", {"key 'model' appears twice"});
  // The same key in different objects, and as a value, is fine.
  EXPECT_NO_THROW(
      parse(layers({conv_layer(), {{"name", "name"}, {"op", "max_pool"}, {"kernel", 1}}})));
}

TEST(SpecJson, NulBytesAreAnError) {
  // nlohmann stops at a NUL byte: what follows it was once ignored.
  const std::string text = one_layer(json::object()) + std::string(1, '\0') + "garbage";
  EXPECT_EQ(error_of(text).rfind("t.json:1:", 0), 0u) << error_of(text);
  EXPECT_NE(error_of(text).find(": invalid JSON: a NUL byte"), std::string::npos);
}

TEST(SpecJson, MessagesShowAtMost40CharactersOfAValue) {
  // The value is never dumped whole (a large one once took its time and memory, a deep one the
  // stack): the same 37 characters and "..." as before.
  std::vector<int> many(100000, 7);
  expect_layer_error(json{{"kernel", many}}.dump(), "kernel",
                     {"array [7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,...; expected"});
  const std::string msg = error_of(one_layer({{"kernel", std::string(1 << 20, 'k')}}));
  EXPECT_NE(msg.find("field 'kernel': string \"kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk...; expected"),
            std::string::npos)
      << msg.substr(0, 200);
  EXPECT_LT(msg.size(), 300u);
  json nested = 1;
  for (int i = 0; i < 55; ++i) nested = json::array({nested});
  expect_layer_error(json{{"kernel", nested}}.dump(), "kernel",
                     {"array [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[...; expected"});
  expect_layer_error(R"({"padding": [1, 1], "convention": "pytorch"})", "convention",
                     {"given with explicit pads [1,1]; expected"});
  // Unknown keys and unknown input layers are shortened too.
  expect_layer_error(json{{std::string(1000, 'z'), 1}}.dump(), std::string(61, 'z') + "...",
                     {"unknown field"});
}

TEST(SpecLoad, RefusesDirectoriesDevicesAndLargeFiles) {
  auto load_error = [](const std::string& path) {
    try {
      load_spec(path);
    } catch (const SpecError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  const std::string dir = testing::TempDir();
  // A directory once read as "invalid JSON"; /dev/zero was read without end.
  EXPECT_EQ(load_error(dir), dir + ": is a directory, not a spec file (expected a JSON file)");
  EXPECT_EQ(load_error("/dev/zero"),
            "/dev/zero: not a regular file (a character device); expected a JSON spec file");
  // A FIFO is refused without waiting for a writer.
  const std::string fifo = dir + std::to_string(getpid()) + "_padfold_spec.fifo";
  std::filesystem::remove(fifo);
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(load_error(fifo), fifo + ": not a regular file (a FIFO); expected a JSON spec file");
  std::filesystem::remove(fifo);
  // A file over 64 MiB (sparse, so it costs no disk).
  const std::string big = dir + std::to_string(getpid()) + "_padfold_big_spec.json";
  std::ofstream(big) << "{}";
  std::filesystem::resize_file(big, (uint64_t{64} << 20) + 1);
  EXPECT_EQ(load_error(big), big + ": file larger than 64 MiB, the limit of a spec file");
  std::filesystem::resize_file(big, uint64_t{64} << 20);
  // Read, then parsed: the NUL bytes after "{}" are not JSON (nlohmann would stop at the first).
  EXPECT_EQ(load_error(big), big + ":1:3: invalid JSON: a NUL byte (a spec is UTF-8 text)");
  std::filesystem::remove(big);
}

// Names are looked up in a map: 100k layers once took minutes (every layer scanned the others).
TEST(SpecScale, TwentyThousandLayers) {
  json list = json::array();
  list.push_back(
      {{"name", "l0"}, {"op", "max_pool2d"}, {"input_shape", {1, 2, 4, 4}}, {"kernel", 1}});
  for (int i = 1; i < 20000; ++i) {
    json l = {{"name", "l" + std::to_string(i)}, {"op", "max_pool2d"}, {"kernel", 1}};
    if (i % 2) l["input"] = "l" + std::to_string(i / 2);
    list.push_back(l);
  }
  const Model m = parse(layers(list));
  ASSERT_EQ(m.layers.size(), 20000u);
  EXPECT_EQ(m.layers[19999].name, "l19999");
  EXPECT_EQ(m.layers[19999].inputs, (std::vector<std::string>{"l9999"}));
  EXPECT_EQ(m.layers[19998].inputs, (std::vector<std::string>{"l19997"}));
  list.push_back({{"name", "l5"}, {"op", "max_pool2d"}, {"kernel", 1}});
  expect_error(layers(list),
               {"layer 'l5' (#20000): field 'name': 'l5' is already used by layer #5"});
}

TEST(Spec, ChainShapeInference) {
  const json list = {{{"name", "a"},
                      {"op", "conv2d"},
                      {"input_shape", {1, 3, 16, 16}},
                      {"out_channels", 8},
                      {"kernel", 3},
                      {"stride", 2},
                      {"padding", "same"}},
                     {{"name", "p"}, {"op", "max_pool"}, {"kernel", 2}, {"stride", 2}},
                     {{"name", "b"},
                      {"op", "conv2d"},
                      {"input", "p"},
                      {"out_channels", 16},
                      {"kernel", 3},
                      {"padding", 1}},
                     {{"name", "q"},
                      {"op", "avg_pool2d"},
                      {"input", "a"},
                      {"input_shape", {1, 8, 8, 8}},
                      {"kernel", 3},
                      {"padding", "same"}}};
  const Model m = parse(layers(list));
  ASSERT_EQ(m.layers.size(), 4u);
  EXPECT_EQ(m.layers[0].output_shape_full(), (std::vector<int64_t>{1, 8, 8, 8}));
  EXPECT_EQ(m.layers[1].inputs, (std::vector<std::string>{"a"}));
  EXPECT_EQ(m.layers[1].output_shape_full(), (std::vector<int64_t>{1, 8, 4, 4}));
  EXPECT_EQ(m.layers[2].input_shape(), (std::vector<int64_t>{1, 8, 4, 4}));
  EXPECT_EQ(m.layers[2].output_shape_full(), (std::vector<int64_t>{1, 16, 4, 4}));
  EXPECT_EQ(m.layers[3].inputs, (std::vector<std::string>{"a"}));
  EXPECT_EQ(m.layers[3].output_shape_full(), (std::vector<int64_t>{1, 8, 8, 8}));
  EXPECT_EQ(m.layers[1].spatial_dims, 2);
  EXPECT_EQ(m.layers[0].inputs, (std::vector<std::string>{"a.input"}));
  EXPECT_EQ(m.inputs.size(), 1u);
}

TEST(Spec, ChannelsLastShapes) {
  const Model m = parse(one_layer({{"layout", "NHWC"},
                                   {"input_shape", {2, 7, 9, 3}},
                                   {"kernel", {4, 2}},
                                   {"stride", 2},
                                   {"padding", "same"}}));
  const Layer& l = m.layers[0];
  EXPECT_EQ(l.batch, 2);
  EXPECT_EQ(l.in_channels, 3);
  EXPECT_EQ(l.in_spatial, (std::vector<int64_t>{7, 9}));
  EXPECT_EQ(l.output_shape_full(), (std::vector<int64_t>{2, 4, 5, 4}));
  EXPECT_EQ(l.pads.axes[0].before, 1);
  EXPECT_EQ(l.pads.axes[0].after, 2);
  EXPECT_TRUE(l.pads.asymmetric);
  EXPECT_EQ(l.weight_layout.order, "HWIO");
  EXPECT_EQ(l.layout.name(), "NHWC");
}

TEST(Spec, PaddingFormsAgree) {
  const json forms[] = {json::array({0, 1, 2, 1}),
                        json::array({json::array({0, 2}), json::array({1, 1})}),
                        json{{"pads", {0, 1, 2, 1}}}};
  for (const auto& f : forms) {
    const Layer l = parse(one_layer({{"padding", f}})).layers[0];
    EXPECT_EQ(l.padding.mode, PadMode::Explicit);
    EXPECT_EQ(l.padding.before, (std::vector<int64_t>{0, 1}));
    EXPECT_EQ(l.padding.after, (std::vector<int64_t>{2, 1}));
  }
  EXPECT_EQ(parse(one_layer({{"padding", {1, 2}}})).layers[0].padding.after,
            (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(parse(one_layer(json::object())).layers[0].padding.mode, PadMode::Valid);
  EXPECT_EQ(
      parse(one_layer({{"padding", "same"}, {"convention", "onnx_lower"}})).layers[0].padding.mode,
      PadMode::SameLower);
}

Layer weights_of(const json& patch) {
  return parse(one_layer(patch)).layers[0];
}

TEST(Spec, WeightShapeForEveryLayout) {
  const json conv = {
      {"input_shape", {1, 8, 9, 9}}, {"out_channels", 16}, {"groups", 2}, {"kernel", {3, 5}}};
  auto shape = [&](const char* op, const char* wl, json extra = json::object()) {
    json p = conv;
    p["op"] = op;
    p["weight_layout"] = wl;
    p.merge_patch(extra);
    return weights_of(p).weight_shape();
  };
  using V = std::vector<int64_t>;
  EXPECT_EQ(shape("conv2d", "OIHW"), (V{16, 4, 3, 5}));
  EXPECT_EQ(shape("conv2d", "HWIO"), (V{3, 5, 4, 16}));
  EXPECT_EQ(shape("conv2d", "IOHW"), (V{4, 16, 3, 5}));
  EXPECT_EQ(shape("conv2d", "HWOI"), (V{3, 5, 16, 4}));
  EXPECT_EQ(shape("conv2d", "OHWI"), (V{16, 3, 5, 4}));
  // ONNX ConvTranspose weight: (C_in, C_out/groups, k...).
  EXPECT_EQ(shape("conv_transpose2d", "IOHW"), (V{8, 8, 3, 5}));
  EXPECT_EQ(shape("conv_transpose2d", "HWOI", {{"out_channels", 6}}), (V{3, 5, 3, 8}));
  const json one_d = {{"op", "conv1d"},
                      {"input_shape", {1, 4, 10}},
                      {"out_channels", 6},
                      {"kernel", 3},
                      {"layout", "NCW"}};
  json p = one_d;
  p["weight_layout"] = "OIW";
  EXPECT_EQ(weights_of(p).weight_shape(), (V{6, 4, 3}));
  p["weight_layout"] = "WIO";
  EXPECT_EQ(weights_of(p).weight_shape(), (V{3, 4, 6}));
  const json three_d = {{"op", "conv3d"},    {"input_shape", {1, 2, 5, 6, 7}},
                        {"out_channels", 4}, {"kernel", {1, 2, 3}},
                        {"layout", "NCDHW"}, {"weight_layout", "DHWIO"}};
  EXPECT_EQ(weights_of(three_d).weight_shape(), (V{1, 2, 3, 2, 4}));
  EXPECT_EQ(weights_of(three_d).weight_layout.axis_of('S' + 2), 2);
  EXPECT_EQ(weights_of(three_d).weight_layout.axis_of('I'), 3);
  EXPECT_EQ(weights_of({{"op", "max_pool"}, {"out_channels", nullptr}}).weight_shape(), V{});
}

TEST(Spec, DefaultWeightLayouts) {
  EXPECT_EQ(weights_of(json::object()).weight_layout.order, "OIHW");
  EXPECT_EQ(weights_of({{"op", "conv_transpose2d"}}).weight_layout.order, "IOHW");
  const json nhwc = {{"layout", "NHWC"}, {"input_shape", {1, 8, 8, 3}}};
  json t = nhwc;
  EXPECT_EQ(weights_of(t).weight_layout.order, "HWIO");
  t["op"] = "conv_transpose";
  t["kernel"] = {3, 3};
  EXPECT_EQ(weights_of(t).weight_layout.order, "HWOI");
  EXPECT_EQ(weights_of(t).spatial_dims, 2);
  WeightLayout w{"HWOI"};
  EXPECT_EQ(w.axis_of('O'), 2);
  EXPECT_EQ(w.axis_of('S'), 0);
  EXPECT_EQ(w.axis_of('W'), 1);
  EXPECT_EQ(w.axis_of('D'), -1);
}

TEST(Spec, Flops) {
  // effnet_stem from the benchmark set: 21.676 MFLOP.
  const Layer stem = weights_of({{"layout", "NHWC"},
                                 {"input_shape", {1, 224, 224, 3}},
                                 {"out_channels", 32},
                                 {"stride", 2},
                                 {"padding", "same_upper"}});
  EXPECT_NEAR(stem.flops(), 21.676e6, 1e3);
  const Layer dw = weights_of({{"input_shape", {1, 8, 5, 5}},
                               {"depth_multiplier", 2},
                               {"out_channels", nullptr},
                               {"padding", "same"}});
  EXPECT_EQ(dw.groups, 8);
  EXPECT_EQ(dw.out_channels, 16);
  EXPECT_DOUBLE_EQ(dw.flops(), 2.0 * 25 * 16 * 1 * 9);
  const Layer t = weights_of({{"op", "conv_transpose2d"},
                              {"input_shape", {1, 4, 3, 3}},
                              {"out_channels", 2},
                              {"stride", 2},
                              {"padding", "same"}});
  EXPECT_EQ(t.out_spatial, (std::vector<int64_t>{6, 6}));
  EXPECT_DOUBLE_EQ(t.flops(), 2.0 * 9 * 4 * 2 * 9);
  const Layer pool = weights_of({{"op", "avg_pool"},
                                 {"out_channels", nullptr},
                                 {"stride", 2},
                                 {"ceil_mode", true},
                                 {"count_include_pad", true}});
  EXPECT_EQ(pool.out_spatial, (std::vector<int64_t>{4, 4}));
  EXPECT_TRUE(pool.count_include_pad);
  EXPECT_DOUBLE_EQ(pool.flops(), 3.0 * 16 * 9);
}

TEST(Spec, OptionsAndDefaults) {
  const std::string text = one_layer({{"bias", true},
                                      {"activation", "leaky_relu"},
                                      {"padding", 1},
                                      {"border", {{"mode", "constant"}, {"value", 0.5}}}})
                               .insert(1, R"("defaults": {"dtype": "f32", "border": "edge"}, )");
  const Layer l = parse(text).layers[0];
  EXPECT_TRUE(l.bias);
  EXPECT_EQ(l.activation, Activation::LeakyRelu);
  EXPECT_FLOAT_EQ(l.activation_alpha, 0.01f);
  EXPECT_EQ(l.border, Border::Constant);
  EXPECT_FLOAT_EQ(l.border_value, 0.5f);
  const Layer d =
      parse(one_layer({{"padding", 1}}).insert(1, R"("defaults": {"border": "edge"}, )")).layers[0];
  EXPECT_EQ(d.border, Border::Replicate);
  EXPECT_EQ(to_string(Op::ConvTranspose), "conv_transpose");
  EXPECT_EQ(to_string(Activation::Relu6), "relu6");
  EXPECT_EQ(parse(one_layer({{"layout", "channels_last"}, {"input_shape", {1, 8, 8, 3}}}))
                .layers[0]
                .layout.name(),
            "NHWC");
}

TEST(Spec, TransposedOutputShape) {
  const Layer l = weights_of({{"op", "conv_transpose2d"},
                              {"input_shape", {1, 4, 3, 3}},
                              {"out_channels", 2},
                              {"kernel", 1},
                              {"stride", 3},
                              {"output_shape", {9, 9}}});
  EXPECT_EQ(l.out_spatial, (std::vector<int64_t>{9, 9}));
  EXPECT_EQ(l.pads.axes[0].after, -2);
}

TEST(Spec, ExamplesLoad) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(PADFOLD_EXAMPLES_DIR)) {
    if (entry.path().extension() != ".json") continue;
    SCOPED_TRACE(entry.path().string());
    EXPECT_NO_THROW(load_spec(entry.path().string()));
    ++count;
  }
  EXPECT_GE(count, 3);
  const Model tiny = load_spec(std::string(PADFOLD_EXAMPLES_DIR) + "/tiny.json");
  EXPECT_EQ(tiny.name, "tiny");
  EXPECT_EQ(tiny.layers[0].output_shape_full(), (std::vector<int64_t>{1, 4, 4, 8}));
  EXPECT_TRUE(tiny.layers[0].pads.asymmetric);
}

// Names come from one table per enum: every canonical name parses back, and the messages that
// list the names list all of them.
TEST(Spec, NameTables) {
  for (Op op : {Op::Conv, Op::ConvTranspose, Op::MaxPool, Op::AvgPool}) {
    const std::string name = to_string(op) + "2d";
    json patch = {{"op", name}};
    if (op == Op::MaxPool || op == Op::AvgPool) patch["out_channels"] = nullptr;
    EXPECT_EQ(parse(one_layer(patch)).layers[0].op, op) << name;
  }
  EXPECT_EQ(parse(one_layer({{"op", "max_pool"}, {"out_channels", nullptr}})).layers[0].op,
            Op::MaxPool);
  EXPECT_EQ(
      error_of(one_layer({{"op", "conv_2d"}})),
      "t.json: layer 'c' (#0): field 'op': 'conv_2d'; expected one of conv1d, conv2d, "
      "conv3d, conv_transpose[1d|2d|3d], max_pool[1d|2d|3d], avg_pool[1d|2d|3d], add, mul, "
      "concat, softmax, quantize, dequantize, transpose, resize, gather_channels, layer_norm, "
      "activation");
  for (Activation a :
       {Activation::None, Activation::Relu, Activation::Relu6, Activation::LeakyRelu})
    EXPECT_EQ(parse(one_layer({{"activation", to_string(a)}})).layers[0].activation, a);
  EXPECT_EQ(parse(one_layer({{"activation", "gelu"}})).layers[0].activation, Activation::Gelu);
  EXPECT_EQ(parse(one_layer({{"activation", "gelu_tanh"}})).layers[0].activation,
            Activation::GeluTanh);
  EXPECT_EQ(error_of(one_layer({{"activation", "mish"}})),
            "t.json: layer 'c' (#0): field 'activation': 'mish'; expected none, relu, relu6, "
            "leaky_relu, sigmoid, tanh, hard_sigmoid, hard_swish, silu, gelu or gelu_tanh");
  EXPECT_EQ(to_string(DType::F32), "float32");
  EXPECT_EQ(to_string(DType::F16), "float16");
  EXPECT_EQ(to_string(DType::I8), "int8");
  EXPECT_EQ(parse(one_layer({{"dtype", "float32"}})).layers[0].dtype, DType::F32);
  EXPECT_EQ(to_string(DType::U8), "uint8");
  EXPECT_EQ(error_of(one_layer({{"dtype", "float64"}})),
            "t.json: layer 'c' (#0): field 'dtype': 'float64'; expected float32, int8 or uint8 "
            "(or f32, i8, u8)");
  expect_layer_error(R"({"dtype": "f16"})", "dtype", {"'f16' is not supported yet"});
  expect_layer_error(R"({"padding": true})", "padding",
                     {"boolean true; expected a padding name (valid, same, same_upper, "
                      "same_lower, torch_same, scipy_same, causal, full), an integer"});
  expect_layer_error(R"({"stride": [1, null]})", "stride",
                     {"': null; expected an integer or a list of 2 integers"});
}

// Layer::ignores_padding is padding.h's pool_ignores_padding for the layer's pool kind.
TEST(Spec, IgnoresPadding) {
  auto layer = [](const json& patch) {
    json p = patch;
    p["out_channels"] = nullptr;
    p["kernel"] = 2;
    p["padding"] = 1;
    return parse(one_layer(p)).layers[0];
  };
  EXPECT_TRUE(layer({{"op", "max_pool"}}).ignores_padding());
  EXPECT_FALSE(layer({{"op", "max_pool"}, {"border", "replicate"}}).ignores_padding());
  EXPECT_TRUE(layer({{"op", "avg_pool"}, {"border", "replicate"}}).ignores_padding());
  EXPECT_FALSE(layer({{"op", "avg_pool"}, {"count_include_pad", true}}).ignores_padding());
  EXPECT_FALSE(parse(one_layer({{"padding", 1}})).layers[0].ignores_padding());
}

}  // namespace
}  // namespace padfold

namespace padfold {
namespace {

// A graph: a model input feeding two branches joined by add, then a concat of three tensors.
json graph_spec() {
  return {{"model", "g"},
          {"defaults", {{"layout", "NHWC"}}},
          {"inputs", {{{"name", "x"}, {"shape", {1, 6, 6, 4}}}}},
          {"layers",
           {{{"name", "a"},
             {"op", "conv2d"},
             {"input", "x"},
             {"out_channels", 4},
             {"kernel", 3},
             {"padding", "same"}},
            {{"name", "b"}, {"op", "max_pool2d"}, {"input", "x"}, {"kernel", 1}},
            {{"name", "s"}, {"op", "add"}, {"input", {"a", "b"}}, {"activation", "relu"}},
            {{"name", "cat"}, {"op", "concat"}, {"input", {"s", "x", "a"}}}}}};
}

std::string graph_error(const json& patch) {
  json spec = graph_spec();
  spec.merge_patch(patch);
  return error_of(spec.dump());
}

TEST(SpecGraph, BranchesJoinAndOutputs) {
  const Model m = parse(graph_spec().dump());
  ASSERT_EQ(m.inputs.size(), 1u);
  EXPECT_EQ(m.inputs[0].name, "x");
  EXPECT_EQ(m.inputs[0].layout.name(), "NHWC");
  const Layer& s = m.layers[2];
  EXPECT_EQ(s.inputs, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(s.output_shape_full(), (std::vector<int64_t>{1, 6, 6, 4}));
  EXPECT_EQ(s.activation, Activation::Relu);
  const Layer& cat = m.layers[3];
  EXPECT_EQ(cat.inputs, (std::vector<std::string>{"s", "x", "a"}));
  EXPECT_EQ(cat.input_channels, (std::vector<int64_t>{4, 4, 4}));
  EXPECT_EQ(cat.output_shape_full(), (std::vector<int64_t>{1, 6, 6, 12}));
  EXPECT_EQ(cat.input_shape(1), (std::vector<int64_t>{1, 6, 6, 4}));
  // Only cat is read by no layer.
  EXPECT_EQ(m.outputs, (std::vector<std::string>{"cat"}));
  json spec = graph_spec();
  spec["outputs"] = {"s", "cat"};
  EXPECT_EQ(parse(spec.dump()).outputs, (std::vector<std::string>{"s", "cat"}));
}

// output_shapes: an output read in another shape, the same values (unit dims dropped or added).
TEST(SpecGraph, OutputShapes) {
  const json head = {
      {"model", "head"},
      {"inputs", {{{"name", "x"}, {"shape", {2, 4, 3, 3}}}}},
      {"layers",
       {{{"name", "gap"}, {"op", "avg_pool2d"}, {"input", "x"}, {"kernel", 3}},
        {{"name", "fc"}, {"op", "conv2d"}, {"input", "gap"}, {"out_channels", 5}, {"kernel", 1}}}},
      {"outputs", {"fc"}}};
  json ok = head;
  ok["output_shapes"] = {{"fc", {2, 5}}};
  const Model m = parse(ok.dump());
  EXPECT_EQ(m.output_shapes.at("fc"), (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(parse(head.dump()).output_shapes.size(), 0u);
  json other = head;
  other["output_shapes"] = {{"fc", {2, 6}}};
  EXPECT_NE(error_of(other.dump())
                .find("field 'output_shapes.fc': [2, 6] for the layer's output [2, 5, 1, 1]; "
                      "expected the same sizes with unit dims dropped or added"),
            std::string::npos)
      << error_of(other.dump());
  json swapped = head;
  swapped["output_shapes"] = {{"fc", {5, 2}}};  // the same count, not the same values
  EXPECT_NE(error_of(swapped.dump()).find("field 'output_shapes.fc': [5, 2]"), std::string::npos);
  json not_output = head;
  not_output["output_shapes"] = {{"gap", {2, 4}}};
  EXPECT_NE(
      error_of(not_output.dump()).find("field 'output_shapes.gap': 'gap' is not a model output"),
      std::string::npos)
      << error_of(not_output.dump());
  json not_object = head;
  not_object["output_shapes"] = json::array({2, 5});
  EXPECT_NE(error_of(not_object.dump()).find("field 'output_shapes'"), std::string::npos);
}

// mul: a tensor times one of its shape, or times one value per channel (broadcast).
TEST(SpecGraph, MulScalesByATensorOrOneValuePerChannel) {
  const json base = {{"model", "se"},
                     {"defaults", {{"layout", "NHWC"}}},
                     {"inputs",
                      {{{"name", "x"}, {"shape", {2, 5, 6, 3}}},
                       {{"name", "s"}, {"shape", {2, 1, 1, 3}}},
                       {{"name", "t"}, {"shape", {2, 5, 6, 3}}}}},
                     {"layers", {{{"name", "m"}, {"op", "mul"}, {"input", {"x", "s"}}}}}};
  Model m = parse(base.dump());
  EXPECT_TRUE(m.layers[0].channel_broadcast);
  EXPECT_EQ(m.layers[0].input_shape(1), (std::vector<int64_t>{2, 1, 1, 3}));
  EXPECT_EQ(m.layers[0].output_shape_full(), (std::vector<int64_t>{2, 5, 6, 3}));
  json same = base;
  same["layers"][0]["input"] = {"x", "t"};
  same["layers"][0]["activation"] = "sigmoid";
  m = parse(same.dump());
  EXPECT_FALSE(m.layers[0].channel_broadcast);
  EXPECT_EQ(m.layers[0].activation, Activation::Sigmoid);
  json first = base;  // the scale must come second
  first["layers"][0]["input"] = {"s", "x"};
  EXPECT_NE(error_of(first.dump())
                .find("expected inputs of one shape, or a second input of one value per channel"),
            std::string::npos)
      << error_of(first.dump());
  json three = base;
  three["layers"][0]["input"] = {"x", "s", "t"};
  EXPECT_NE(
      error_of(three.dump())
          .find("field 'input': 3 inputs; expected two: a tensor and what it is multiplied by"),
      std::string::npos)
      << error_of(three.dump());
}

TEST(SpecGraph, SoftmaxReadsOneTensorAndTakesNoWindow) {
  json spec = graph_spec();
  spec["layers"].push_back({{"name", "p"}, {"op", "softmax"}, {"input", "cat"}});
  const Model m = parse(spec.dump());
  const Layer& p = m.layers.back();
  EXPECT_EQ(p.op, Op::Softmax);
  EXPECT_EQ(p.output_shape_full(), (std::vector<int64_t>{1, 6, 6, 12}));
  EXPECT_EQ(m.outputs, (std::vector<std::string>{"p"}));
  json kernel = spec;
  kernel["layers"][4]["kernel"] = 3;
  EXPECT_NE(error_of(kernel.dump()).find("field 'kernel': given on a softmax layer"),
            std::string::npos)
      << error_of(kernel.dump());
  json act = spec;
  act["layers"][4]["activation"] = "relu";
  EXPECT_NE(error_of(act.dump()).find("field 'activation': given on a softmax layer"),
            std::string::npos);
  json two = spec;
  two["layers"][4]["input"] = {"cat", "s"};
  EXPECT_NE(error_of(two.dump())
                .find("layer 'p' (#4): field 'input': array [\"cat\",\"s\"]; expected the name of "
                      "an earlier layer"),
            std::string::npos)
      << error_of(two.dump());
}

TEST(SpecGraph, ChannelsFirstConcatAndProducedBy) {
  json spec = graph_spec();
  spec["defaults"]["layout"] = "NCHW";
  spec["inputs"][0]["shape"] = {2, 4, 5, 7};
  spec["inputs"][0]["produced_by"] = "ONNX node 'r' (Resize)";
  const Model m = parse(spec.dump());
  EXPECT_EQ(m.inputs[0].produced_by, "ONNX node 'r' (Resize)");
  EXPECT_EQ(m.layers[3].output_shape_full(), (std::vector<int64_t>{2, 12, 5, 7}));
}

TEST(SpecGraph, Errors) {
  EXPECT_NE(graph_error({{"layers", {{{"name", "a"}, {"op", "add"}, {"input", {"x"}}}}}})
                .find("field 'input': array [\"x\"]; expected a list of two or more"),
            std::string::npos);
  json bad_shape = graph_spec();
  bad_shape["layers"][1]["stride"] = 2;
  EXPECT_NE(error_of(bad_shape.dump())
                .find("layer 's' (#2): field 'input': input layer 'b' produces [1, 3, 3, 4] but "
                      "input layer 'a' produces [1, 6, 6, 4]; expected inputs of one shape"),
            std::string::npos)
      << error_of(bad_shape.dump());
  json bad_concat = graph_spec();
  bad_concat["layers"][3]["input"] = {"s", "b", "cat0"};
  EXPECT_NE(error_of(bad_concat.dump()).find("'cat0' is not a layer or model input"),
            std::string::npos);
  bad_concat["layers"][3]["input"] = {"s", "cat"};
  EXPECT_NE(error_of(bad_concat.dump()).find("field 'input': 'cat' is this layer itself"),
            std::string::npos)
      << error_of(bad_concat.dump());
  json later = graph_spec();
  later["layers"][0]["input"] = "s";
  EXPECT_NE(error_of(later.dump()).find("'s' is defined later in the file"), std::string::npos);
  json clash = graph_spec();
  clash["inputs"][0]["name"] = "a";
  EXPECT_NE(error_of(clash.dump())
                .find("t.json: field 'inputs[0].name': 'a' is already the name of an input or a "
                      "layer"),
            std::string::npos);
  json kernel = graph_spec();
  kernel["layers"][2]["kernel"] = 3;
  EXPECT_NE(error_of(kernel.dump())
                .find("field 'kernel': given on a add layer; expected it only on conv, "
                      "conv_transpose, max_pool and avg_pool layers"),
            std::string::npos);
  json act = graph_spec();
  act["layers"][3]["activation"] = "relu";
  EXPECT_NE(error_of(act.dump()).find("field 'activation': given on a concat layer"),
            std::string::npos);
  json outputs = graph_spec();
  outputs["outputs"] = {"nope"};
  EXPECT_NE(error_of(outputs.dump()).find("field 'outputs': 'nope' is not a layer"),
            std::string::npos);
  json rank = graph_spec();
  rank["inputs"][0]["layout"] = "NCDHW";
  EXPECT_NE(error_of(rank.dump()).find("field 'inputs[0].layout': 'NCDHW' for a shape of rank 4"),
            std::string::npos);
  json layout = graph_spec();
  layout["layers"][1]["layout"] = "NCHW";
  layout["layers"][1].erase("input");
  layout["layers"][1]["input_shape"] = {1, 4, 6, 6};
  EXPECT_NE(error_of(layout.dump())
                .find("field 'input': input layer 'b' produces NCHW, but input layer 'a' "
                      "produces NHWC; expected inputs of one layout"),
            std::string::npos)
      << error_of(layout.dump());
  json input_shape = graph_spec();
  input_shape["layers"][0]["input_shape"] = {1, 6, 6, 5};
  EXPECT_NE(
      error_of(input_shape.dump()).find("[1, 6, 6, 5] but model input 'x' produces [1, 6, 6, 4]"),
      std::string::npos);
}

TEST(SpecGraph, WeightFiles) {
  json spec = graph_spec();
  spec["layers"][0]["weight_files"] = {{"weights", "w/a.npy"}};
  const Model m = parse_spec(spec.dump(), "dir/sub/g.json");
  EXPECT_EQ(m.layers[0].weights_file, "dir/sub/w/a.npy");
  EXPECT_EQ(m.layers[0].bias_file, "");
  spec["layers"][0]["weight_files"] = {{"weights", "/abs/a.npy"}};
  EXPECT_EQ(parse(spec.dump()).layers[0].weights_file, "/abs/a.npy");
  spec["layers"][0]["weight_files"] = {{"weights", "a.npy"}, {"bias", "b.npy"}};
  EXPECT_NE(error_of(spec.dump()).find("field 'weight_files.bias': given for a layer without bias"),
            std::string::npos);
  spec["layers"][0]["bias"] = true;
  EXPECT_EQ(parse(spec.dump()).layers[0].bias_file, "b.npy");
  spec["layers"][0]["weight_files"] = {{"weights", "a.npy"}};
  EXPECT_NE(error_of(spec.dump()).find("field 'weight_files.bias': missing for a layer with bias"),
            std::string::npos);
  spec["layers"][0]["weight_files"] = {{"bias", "b.npy"}};
  EXPECT_NE(error_of(spec.dump()).find("field 'weight_files.weights': missing"), std::string::npos);
  spec["layers"][0]["weight_files"] = {{"weights", ""}, {"bias", "b.npy"}};
  EXPECT_NE(error_of(spec.dump()).find("field 'weight_files.weights': string \"\""),
            std::string::npos);
  spec["layers"][0]["weight_files"] = {{"weigths", "a.npy"}};
  EXPECT_NE(error_of(spec.dump()).find("did you mean 'weights'?"), std::string::npos);
  json pool = graph_spec();
  pool["layers"][1]["weight_files"] = {{"weights", "a.npy"}};
  EXPECT_NE(error_of(pool.dump()).find("field 'weight_files': given on a max_pool2d layer"),
            std::string::npos);
}

}  // namespace
}  // namespace padfold
