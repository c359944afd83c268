#include "frontend/quant_fields.h"

#include <fmt/format.h>

#include <cmath>

#include "base/enum_names.h"
#include "frontend/json_text.h"
#include "frontend/names.h"
#include "frontend/op_table.h"

namespace padfold {

namespace {

using json = nlohmann::json;

std::pair<int32_t, int32_t> range_of(DType dtype) {
  return dtype == DType::U8 ? std::pair{0, 255} : std::pair{-128, 127};
}

float positive_scale(const json& j, const Ctx& c, const std::string& field) {
  const float s = c.get_number(j, field);
  if (!(s > 0) || !std::isnormal(s))
    c.fail(field, fmt::format("{}", s), "a positive, normal float32 scale");
  return s;
}

QuantParams parse_params(const json& j, const Ctx& c, const std::string& field, DType dtype) {
  const char* expected = "{\"scale\": s, \"zero_point\": z}";
  if (!j.is_object()) c.fail(field, describe(j), expected);
  c.check_keys(j, {"scale", "zero_point"}, field + ".");
  for (const char* key : {"scale", "zero_point"})
    if (!j.contains(key)) c.fail(field + "." + key, "missing", expected);
  QuantParams p;
  p.scale = positive_scale(j["scale"], c, field + ".scale");
  const auto [lo, hi] = range_of(dtype);
  const std::string range = fmt::format("an integer in [{}, {}] ({})", lo, hi, to_string(dtype));
  const int64_t z = c.get_int(j["zero_point"], field + ".zero_point", range);
  if (z < lo || z > hi) c.fail(field + ".zero_point", std::to_string(z), range);
  p.zero_point = static_cast<int32_t>(z);
  return p;
}

bool same(const QuantParams& a, const QuantParams& b) {
  return a.scale == b.scale && a.zero_point == b.zero_point;
}

void parse_weight_scales(const json& j, const Ctx& c, Layer& l) {
  const std::string per_channel =
      fmt::format("a positive scale, or a list of {} (one per output channel)", l.out_channels);
  if (j.is_number()) {
    l.quant->weight_scales = {positive_scale(j, c, "quant.weight_scale")};
    return;
  }
  if (!j.is_array() || j.size() != static_cast<size_t>(l.out_channels))
    c.fail("quant.weight_scale", j.is_array() ? fmt::format("a list of {}", j.size()) : describe(j),
           per_channel);
  for (size_t i = 0; i < j.size(); ++i)
    l.quant->weight_scales.push_back(
        positive_scale(j[i], c, fmt::format("quant.weight_scale[{}]", i)));
}

// quantize: quant.output (its input is float32); dequantize: quant.input (its output is).
void parse_edge_quant(const json& q, const Ctx& c, Layer& l) {
  LayerQuant& lq = *l.quant;
  const bool quantize = l.op == Op::Quantize;
  const std::string side = quantize ? "output" : "input";
  const std::string other = quantize ? "input" : "output";
  for (const char* key : {"inputs", "weight_scale"})
    if (q.contains(key))
      c.fail(std::string("quant.") + key, "given on a " + l.op_name, "quant." + side);
  if (q.contains(other))
    c.fail("quant." + other, "given on a " + l.op_name,
           fmt::format("quant.{} only (its {} is float32)", side, other));
  if (!q.contains(side)) c.fail("quant." + side, "missing", "{\"scale\": s, \"zero_point\": z}");
  const QuantParams p = parse_params(q[side], c, "quant." + side, l.dtype);
  lq.output = p;
  if (!quantize) lq.inputs = {p};
}

}  // namespace

void parse_quant(const json& q, const Ctx& c, Layer& l) {
  if (!l.quantized()) {
    if (l.op == Op::Quantize || l.op == Op::Dequantize)
      c.fail("dtype", fmt::format("'{}' on a {} layer", to_string(l.dtype), l.op_name),
             "int8 or uint8: the quantized side of the conversion");
    if (!q.is_null())
      c.fail("quant", "given on a layer of dtype " + to_string(l.dtype),
             "quant only with dtype int8 or uint8");
    return;
  }
  const std::string dtype = to_string(l.dtype);
  if (!op_def(l.op).has(kInt8) || l.spatial_dims < 1)
    c.fail("dtype", fmt::format("'{}' on a {} layer", dtype, l.op_name),
           fmt::format("{} only on {} layers", dtype, op_names_with(kInt8)));
  if (l.op == Op::Activation && l.activation != Activation::Sigmoid &&
      l.activation != Activation::Silu)
    c.fail("activation",
           fmt::format("'{}' on a {} activation layer", to_string(l.activation), dtype),
           "sigmoid or silu (ONNX Runtime's QLinearSigmoid, then QLinearMul by the input)");
  if (l.op != Op::Activation && l.activation != Activation::None &&
      l.activation != Activation::Relu && l.activation != Activation::Relu6)
    c.fail("activation", fmt::format("'{}' on a {} layer", to_string(l.activation), dtype),
           "none, relu or relu6 (a clamp of the quantized output)");
  if (q.is_null())
    c.fail("quant", fmt::format("missing for a layer of dtype {}", dtype),
           "{\"input\": {\"scale\": s, \"zero_point\": z}, \"output\": {...}, ...} (docs/int8.md)");
  if (!q.is_object()) c.fail("quant", describe(q), "an object (docs/int8.md)");
  c.check_keys(q, {"requantize", "input", "inputs", "output", "weight_scale", "gate"}, "quant.");
  LayerQuant& lq = l.quant.emplace();
  if (q.contains("requantize")) {
    const std::string mode = c.get_string(q["requantize"], "quant.requantize", "tflite or onnx");
    const auto m = value_of(kRequantizeNames, mode);
    if (!m) c.fail("quant.requantize", "'" + mode + "'", "tflite or onnx");
    lq.requantize = *m;
  }
  if (l.op == Op::Quantize || l.op == Op::Dequantize) {
    parse_edge_quant(q, c, l);
    return;
  }
  if (l.is_join()) {  // add, mul
    if (q.contains("input"))
      c.fail("quant.input", "given on a quantized " + l.op_name, "quant.inputs (one each)");
    if (l.inputs.size() != 2)
      c.fail("input", fmt::format("{} inputs to a quantized {}", l.inputs.size(), l.op_name),
             "two");
    if (!q.contains("inputs") || !q["inputs"].is_array() || q["inputs"].size() != 2)
      c.fail("quant.inputs", q.contains("inputs") ? describe(q["inputs"]) : "missing",
             "a list of two {\"scale\": s, \"zero_point\": z}, one per input");
    for (size_t i = 0; i < 2; ++i)
      lq.inputs.push_back(
          parse_params(q["inputs"][i], c, fmt::format("quant.inputs[{}]", i), l.dtype));
  } else {
    if (q.contains("inputs")) c.fail("quant.inputs", "given on a " + l.op_name, "quant.input");
    if (!q.contains("input")) c.fail("quant.input", "missing", "{\"scale\": s, \"zero_point\": z}");
    lq.inputs.push_back(parse_params(q["input"], c, "quant.input", l.dtype));
  }
  const bool pool = l.op == Op::MaxPool || l.op == Op::AvgPool || l.op == Op::Transpose;
  if (q.contains("output"))
    lq.output = parse_params(q["output"], c, "quant.output", l.dtype);
  else if (pool)
    lq.output = lq.inputs[0];  // a pool keeps its input's quantization unless told otherwise
  else
    c.fail("quant.output", "missing", "{\"scale\": s, \"zero_point\": z}");
  // TFLite's pools, every max pool and a transpose (which moves integers) keep the input's
  // quantization.
  const bool keeps = l.op == Op::MaxPool || l.op == Op::Transpose ||
                     (l.op == Op::AvgPool && lq.requantize == Requantize::Tflite);
  if (keeps && !same(lq.output, lq.inputs[0]))
    c.fail(
        "quant.output",
        fmt::format("scale {} and zero point {} differ from the input's ({}, {})", lq.output.scale,
                    lq.output.zero_point, lq.inputs[0].scale, lq.inputs[0].zero_point),
        fmt::format("the input's quantization on a {} layer{}", l.op_name,
                    l.op == Op::AvgPool ? " with requantize tflite" : ""));
  if (l.op == Op::Conv) {
    if (!q.contains("weight_scale"))
      c.fail("quant.weight_scale", "missing", "the int8 weights' scale (one, or per channel)");
    parse_weight_scales(q["weight_scale"], c, l);
  } else if (q.contains("weight_scale")) {
    c.fail("quant.weight_scale", "given on a " + l.op_name, "weight_scale only on conv layers");
  }
  const bool silu = l.op == Op::Activation && l.activation == Activation::Silu;
  if (silu && !q.contains("gate"))
    c.fail("quant.gate", "missing on a silu activation layer",
           "the sigmoid's {\"scale\": s, \"zero_point\": z} before the product by the input");
  if (!silu && q.contains("gate"))
    c.fail("quant.gate", "given on a " + l.op_name, "gate only on silu activation layers");
  if (silu) lq.gate = parse_params(q["gate"], c, "quant.gate", l.dtype);
}

}  // namespace padfold
