#include "frontend/op_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "frontend/json_text.h"

namespace padfold {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

double product(const std::vector<int64_t>& v) {
  double p = 1;
  for (int64_t x : v) p *= static_cast<double>(x);
  return p;
}

// Outputs of the layer, N x C x spatial.
double outputs(const Layer& l) {
  return static_cast<double>(l.batch) * static_cast<double>(l.out_channels) *
         product(l.out_spatial);
}

double no_work(const Layer&) {
  return 0;
}

// One operation per output, as a multiply-add: quantize's divide and round, dequantize's multiply,
// an activation's (its table lookup in int8).
double one_per_output(const Layer& l) {
  return outputs(l);
}

// Softmax: a max, an exp, a sum and a divide per output; LayerNorm: a sum, a squared difference
// and a scaling (counted as four, like softmax's).
double four_per_output(const Layer& l) {
  return 4 * outputs(l);
}

// Add and mul: one operation per output for each input after the first.
double per_extra_input(const Layer& l) {
  return outputs(l) * static_cast<double>(l.inputs.size() - 1);
}

double conv_flops(const Layer& l) {
  return 2 * outputs(l) * static_cast<double>(l.in_channels / l.groups) * product(l.kernel);
}

double conv_transpose_flops(const Layer& l) {
  return 2 * static_cast<double>(l.batch) * product(l.in_spatial) *
         static_cast<double>(l.in_channels) * static_cast<double>(l.out_channels / l.groups) *
         product(l.kernel);
}

double pool_flops(const Layer& l) {
  return static_cast<double>(l.batch) * static_cast<double>(l.in_channels) *
         product(l.out_spatial) * product(l.kernel);
}

// Linear: a multiply-add per neighbour (2^dims) per output; nearest copies.
double resize_flops(const Layer& l) {
  return l.resize.mode == ResizeMode::Linear ? 2 * outputs(l) * std::pow(2.0, l.spatial_dims) : 0;
}

void read_pool(const json& j, const Ctx& c, Layer& l) {
  if (j.contains("ceil_mode")) l.ceil_mode = c.get_bool(j["ceil_mode"], "ceil_mode");
  if (j.contains("count_include_pad"))
    l.count_include_pad = c.get_bool(j["count_include_pad"], "count_include_pad");
}

void write_max_pool(const Layer& l, ojson& j) {
  j["ceil_mode"] = l.ceil_mode;
}

void write_avg_pool(const Layer& l, ojson& j) {
  j["ceil_mode"] = l.ceil_mode;
  j["count_include_pad"] = l.count_include_pad;
}

// perm is read with the transpose's layouts (spec.cpp's parse_transpose), before its input shapes.
void write_transpose(const Layer& l, ojson& j) {
  j["perm"] = l.perm;
}

// The interpolation and either sizes or scales, one per spatial axis (resolution checks them).
void read_resize(const json& j, const Ctx& c, Layer& l) {
  ResizeSpec& r = l.resize;
  auto named = [&](const char* field, auto parse) {
    const std::string text = c.get_string(j[field], field, "a name");
    try {
      return parse(text);
    } catch (const std::invalid_argument& e) {
      c.fail(field, e.what());
    }
  };
  if (j.contains("mode")) r.mode = named("mode", parse_resize_mode);
  if (j.contains("coordinate_transformation_mode"))
    r.coordinates = named("coordinate_transformation_mode", parse_resize_coordinates);
  if (j.contains("nearest_mode")) r.rounding = named("nearest_mode", parse_nearest_rounding);
  const std::string per_axis =
      fmt::format("a list of {} values, one per spatial axis (outermost first)", l.spatial_dims);
  if (j.contains("output_size")) {
    const json& s = j["output_size"];
    if (!s.is_array()) c.fail("output_size", describe(s), per_axis);
    for (const auto& e : s) r.output.push_back(c.get_positive(e, "output_size"));
  }
  if (j.contains("scales")) {
    const json& s = j["scales"];
    if (!s.is_array()) c.fail("scales", describe(s), per_axis);
    for (const auto& e : s) {
      if (!e.is_number()) c.fail("scales", describe(e), "positive numbers");
      r.scales.push_back(e.get<float>());
    }
  }
  if (r.output.empty() && r.scales.empty())
    c.fail("output_size", "missing", "output_size or scales (" + per_axis + ")");
  if (j.contains("roi")) {
    const json& s = j["roi"];
    const std::string pairs = fmt::format(
        "a list of {} [start, end] pairs, one per spatial axis (outermost first)", l.spatial_dims);
    if (!s.is_array()) c.fail("roi", describe(s), pairs);
    for (const auto& e : s) {
      if (!e.is_array() || e.size() != 2) c.fail("roi", describe(e), pairs);
      r.roi.emplace_back(c.get_number(e[0], "roi"), c.get_number(e[1], "roi"));
    }
  }
  if (j.contains("extrapolation_value"))
    r.extrapolation_value = c.get_number(j["extrapolation_value"], "extrapolation_value");
}

void write_resize(const Layer& l, ojson& j) {
  j["mode"] = to_string(l.resize.mode);
  j["coordinate_transformation_mode"] = to_string(l.resize.coordinates);
  if (l.resize.mode == ResizeMode::Nearest) j["nearest_mode"] = to_string(l.resize.rounding);
  j["output_size"] = l.resize.output;
  j["scales"] = l.resize.scales;
  if (l.resize.coordinates != ResizeCoordinates::TfCropAndResize) return;
  ojson roi = ojson::array();
  for (const auto& [start, end] : l.resize.roi) roi.push_back({start, end});
  j["roi"] = roi;
  j["extrapolation_value"] = l.resize.extrapolation_value;
}

void read_gather_channels(const json& j, const Ctx& c, Layer& l) {
  const char* expected =
      "a list of input channels, one per output channel (e.g. [2, 3] for the last two of 4)";
  if (!j.contains("channels")) c.fail("channels", "missing", expected);
  if (!j["channels"].is_array() || j["channels"].empty())
    c.fail("channels", describe(j["channels"]), expected);
  for (const auto& e : j["channels"]) l.channels.push_back(c.get_int(e, "channels", expected));
}

void write_gather_channels(const Layer& l, ojson& j) {
  j["channels"] = l.channels;
}

void read_layer_norm(const json& j, const Ctx& c, Layer& l) {
  if (!j.contains("epsilon")) return;
  const double e = c.get_number(j["epsilon"], "epsilon");
  if (!(e > 0) || e > 1) c.fail("epsilon", describe(j["epsilon"]), "a number above 0, at most 1");
  l.epsilon = static_cast<float>(e);
}

void write_layer_norm(const Layer& l, ojson& j) {
  j["epsilon"] = l.epsilon;
}

const std::vector<OpDef> kOps = {
    {Op::Conv,
     "conv",
     kWindow | kWeights | kActivation | kDimsInName | kInt8,
     {"depth_multiplier"},
     conv_flops},
    {Op::ConvTranspose,
     "conv_transpose",
     kWindow | kWeights | kActivation,
     {"output_padding", "output_shape"},
     conv_transpose_flops},
    {Op::MaxPool,
     "max_pool",
     kWindow | kInt8,
     {"ceil_mode"},
     pool_flops,
     read_pool,
     write_max_pool},
    {Op::AvgPool,
     "avg_pool",
     kWindow | kInt8,
     {"ceil_mode", "count_include_pad"},
     pool_flops,
     read_pool,
     write_avg_pool},
    {Op::Add, "add", kJoin | kActivation | kInt8, {}, per_extra_input},
    {Op::Mul, "mul", kJoin | kActivation | kInt8, {}, per_extra_input},
    {Op::Concat, "concat", kJoin, {}, no_work},
    {Op::Softmax, "softmax", 0, {}, four_per_output},
    {Op::Quantize, "quantize", kInt8, {}, one_per_output},
    {Op::Dequantize, "dequantize", kInt8, {}, one_per_output},
    {Op::Transpose, "transpose", kInt8, {"perm"}, no_work, nullptr, write_transpose},
    {Op::Resize,
     "resize",
     0,
     {"mode", "coordinate_transformation_mode", "nearest_mode", "scales", "output_size", "roi",
      "extrapolation_value"},
     resize_flops,
     read_resize,
     write_resize},
    {Op::GatherChannels,
     "gather_channels",
     0,
     {"channels"},
     no_work,
     read_gather_channels,
     write_gather_channels},
    {Op::LayerNorm,
     "layer_norm",
     0,
     {"epsilon"},
     four_per_output,
     read_layer_norm,
     write_layer_norm},
    {Op::Activation, "activation", kActivation | kInt8, {}, one_per_output},
};

// The fields the traits bring: a window's, a convolution's weights', a fused activation's.
const std::vector<std::string> kWindowFields = {"input_shape", "input_layout", "kernel",
                                                "stride",      "dilation",     "padding",
                                                "convention",  "border"};
const std::vector<std::string> kWeightFields = {"out_channels", "groups", "weight_layout", "bias",
                                                "weight_files"};

bool takes(const OpDef& d, const std::string& field) {
  auto in = [&](const std::vector<std::string>& v) {
    return std::find(v.begin(), v.end(), field) != v.end();
  };
  return in(d.fields) || (d.has(kWindow) && in(kWindowFields)) ||
         (d.has(kWeights) && in(kWeightFields)) || (d.has(kActivation) && field == "activation");
}

// "a, b and c": the names of the ops `pick` takes, in table order.
template <typename Pick>
std::string names_where(Pick pick) {
  std::vector<std::string> names;
  for (const OpDef& d : kOps)
    if (pick(d)) names.push_back(d.name);
  std::string text;
  for (size_t i = 0; i < names.size(); ++i)
    text += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return text;
}

}  // namespace

const std::vector<OpDef>& op_table() {
  return kOps;
}

const OpDef& op_def(Op op) {
  const size_t i = static_cast<size_t>(op);
  if (kOps.size() != kOpCount || i >= kOps.size() || kOps[i].op != op)
    throw std::logic_error("op_table: no row for op " + std::to_string(i));
  return kOps[i];
}

const OpDef* find_op(const std::string& base) {
  for (const OpDef& d : kOps)
    if (base == d.name) return &d;
  return nullptr;
}

const std::vector<std::string>& op_fields() {
  static const std::vector<std::string> all = [] {
    std::vector<std::string> v = kWindowFields;
    v.insert(v.end(), kWeightFields.begin(), kWeightFields.end());
    v.push_back("activation");
    for (const OpDef& d : kOps)
      for (const std::string& f : d.fields)
        if (std::find(v.begin(), v.end(), f) == v.end()) v.push_back(f);
    return v;
  }();
  return all;
}

bool op_takes(Op op, const std::string& field) {
  return takes(op_def(op), field);
}

std::string layers_taking(const std::string& field) {
  return names_where([&](const OpDef& d) { return takes(d, field); }) + " layers";
}

std::string op_names_with(OpTrait trait) {
  return names_where([&](const OpDef& d) { return d.has(trait); });
}

bool has_window(Op op) {
  return op_def(op).has(kWindow);
}

}  // namespace padfold
