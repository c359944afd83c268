#include "frontend/spec.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <unordered_set>

#include "base/enum_names.h"
#include "base/identifiers.h"
#include "base/text.h"
#include "frontend/json_fields.h"
#include "frontend/json_text.h"
#include "frontend/names.h"
#include "frontend/op_table.h"
#include "frontend/quant_fields.h"
#include "frontend/resolve.h"

namespace padfold {

const SpecKeys& spec_keys() {
  // clang-format off
  static const SpecKeys keys{
      {"$schema", "description", "model", "defaults", "inputs", "layers", "outputs",
       "output_shapes"},
      {"name", "description", "shape", "layout", "dtype", "produced_by"},
      {"layout", "weight_layout", "dtype", "border"},
      {"name", "description", "op", "input", "input_shape", "layout", "dtype", "weight_layout",
       "out_channels", "kernel", "stride", "dilation", "groups", "depth_multiplier", "padding",
       "convention", "output_padding", "output_shape", "ceil_mode", "count_include_pad", "border",
       "bias", "activation", "quant", "weight_files", "read_by", "perm", "input_layout", "mode",
       "coordinate_transformation_mode", "nearest_mode", "scales", "output_size", "roi", "extrapolation_value", "channels", "epsilon"}};
  // clang-format on
  return keys;
}

namespace {

using json = nlohmann::json;

const std::vector<std::string>& kTopKeys = spec_keys().top;
const std::vector<std::string>& kInputKeys = spec_keys().input;
const std::vector<std::string>& kDefaultKeys = spec_keys().defaults;
const std::vector<std::string>& kLayerKeys = spec_keys().layer;

struct OpInfo {
  Op op;
  int dims;  // 0: taken from the kernel or the input
};

// An op name: an op_table base name, then "1d", "2d" or "3d" (required for ops spelt with their
// dims, conv; refused for ops without a window, which take the dims of their inputs).
std::optional<OpInfo> parse_op(const std::string& name) {
  std::string base = name;
  int dims = 0;
  const size_t n = name.size();
  if (n >= 2 && name[n - 1] == 'd' && name[n - 2] >= '1' && name[n - 2] <= '3') {
    dims = name[n - 2] - '0';
    base = name.substr(0, n - 2);
  }
  const OpDef* op = find_op(base);
  if (!op || (dims == 0 && op->has(kDimsInName))) return std::nullopt;
  if (dims != 0 && !op->has(kWindow)) return std::nullopt;
  return OpInfo{op->op, dims};
}

// "conv1d, conv2d, conv3d, conv_transpose[1d|2d|3d], ...": every op name parse_op takes.
std::string op_names() {
  std::vector<std::string> names;
  for (const OpDef& d : op_table()) {
    if (d.has(kDimsInName))
      for (int dims = 1; dims <= 3; ++dims) names.push_back(fmt::format("{}{}d", d.name, dims));
    else if (!d.has(kWindow))
      names.push_back(d.name);
    else
      names.push_back(std::string(d.name) + "[1d|2d|3d]");
  }
  return fmt::format("{}", fmt::join(names, ", "));
}

struct LayoutName {
  bool channels_last = false;
  int dims = 0;  // 0: any (channels_first / channels_last)
};

std::optional<LayoutName> parse_layout(const std::string& s) {
  if (s == "channels_first") return LayoutName{false, 0};
  if (s == "channels_last") return LayoutName{true, 0};
  for (int d = 1; d <= 3; ++d) {
    if (s == "NC" + spatial_letters(d)) return LayoutName{false, d};
    if (s == "N" + spatial_letters(d) + "C") return LayoutName{true, d};
  }
  return std::nullopt;
}

// O, I and the spatial letters of `dims` dims, each once, spatial letters in D, H, W order.
bool valid_weight_layout(const std::string& order, int dims) {
  std::string sorted = order, want = "IO" + spatial_letters(dims);
  std::sort(sorted.begin(), sorted.end());
  std::sort(want.begin(), want.end());
  if (sorted != want) return false;
  std::string spatial;
  for (char c : order)
    if (c != 'O' && c != 'I') spatial += c;
  return spatial == spatial_letters(dims);
}

// The padding module names the quantity it rejects; map that back to the spec field.
struct Defaults {
  std::optional<std::string> layout, weight_layout;
  json dtype, border;  // null when not given
};

class Parser {
 public:
  explicit Parser(std::string file) : top_{std::move(file), std::nullopt, 0} {}

  Model parse(const json& root) {
    if (!root.is_object()) top_.fail("(top level)", describe(root), "a JSON object");
    top_.check_keys(root, kTopKeys);
    Model m;
    m.file = top_.file;
    if (!root.contains("model")) top_.fail("model", "missing", "the model name (a C identifier)");
    m.name = top_.get_string(root["model"], "model", "a C identifier");
    check_name_length(top_, "model", m.name);
    if (!is_identifier(m.name))
      top_.fail("model", "'" + m.name + "'", "a C identifier ([A-Za-z_][A-Za-z0-9_]*)");
    // Descriptions are free: any JSON value is accepted, a string is kept.
    if (root.contains("description") && root["description"].is_string())
      m.description = root["description"].get<std::string>();
    if (root.contains("defaults")) parse_defaults(root["defaults"]);
    if (!root.contains("layers")) top_.fail("layers", "missing", "a non-empty list of layers");
    const json& layers = root["layers"];
    if (!layers.is_array() || layers.empty())
      top_.fail("layers", describe(layers), "a non-empty list of layers");
    for (const auto& l : layers)
      if (l.is_object() && l.contains("name") && l["name"].is_string())
        all_names_.insert(l["name"].get<std::string>());
    if (root.contains("inputs")) parse_inputs(root["inputs"], m);
    for (size_t i = 0; i < layers.size(); ++i) {
      m.layers.push_back(parse_layer(layers[i], i, m));
      const Layer& l = m.layers.back();
      index_.emplace(l.name, i);
      if (l.inputs.size() == 1 && l.inputs[0] == implicit_input_name(l.name)) {
        input_index_.emplace(l.inputs[0], m.inputs.size());
        m.inputs.push_back({l.inputs[0], "", "", l.layout, l.dtype, l.input_shape()});
      }
    }
    parse_outputs(root, m);
    return m;
  }

 private:
  Ctx top_;
  Defaults defaults_;
  std::unordered_set<std::string> all_names_;            // every layer name in the file
  std::unordered_map<std::string, size_t> index_;        // the layers parsed so far, by name
  std::unordered_map<std::string, size_t> input_index_;  // model inputs, by name

  static void check_name_length(const Ctx& c, const std::string& field, const std::string& name) {
    if (name.size() > kMaxNameLength)
      c.fail(field, fmt::format("'{}' has {} characters", shorten(name), name.size()),
             fmt::format("at most {} characters (the name becomes part of C symbols and file "
                         "names)",
                         kMaxNameLength));
  }

  const Layer* find_layer(const Model& m, const std::string& name) const {
    const auto it = index_.find(name);
    return it == index_.end() ? nullptr : &m.layers[it->second];
  }

  // The model input a layer with input_shape and no input reads.

  void parse_inputs(const json& list, Model& m) {
    const char* expected = "a list of {\"name\", \"shape\", ...} objects";
    if (!list.is_array()) top_.fail("inputs", describe(list), expected);
    for (size_t i = 0; i < list.size(); ++i) {
      const json& j = list[i];
      const std::string at = fmt::format("inputs[{}]", i);
      if (!j.is_object()) top_.fail(at, describe(j), expected);
      top_.check_keys(j, kInputKeys, at + ".");
      ModelInput in;
      if (!j.contains("name")) top_.fail(at + ".name", "missing", "the tensor's name");
      in.name = top_.get_string(j["name"], at + ".name", "a C identifier");
      check_name_length(top_, at + ".name", in.name);
      if (!is_identifier(in.name))
        top_.fail(at + ".name", "'" + in.name + "'", "a C identifier ([A-Za-z_][A-Za-z0-9_]*)");
      if (input_index_.count(in.name) || all_names_.count(in.name))
        top_.fail(at + ".name", "'" + in.name + "' is already the name of an input or a layer",
                  "a name of its own (layers and inputs name the tensors layers read)");
      for (const char* text : {"description", "produced_by"})
        if (j.contains(text))
          (text[0] == 'd' ? in.description : in.produced_by) =
              top_.get_string(j[text], at + "." + text, "a string");
      if (!j.contains("shape")) top_.fail(at + ".shape", "missing", "the shape in layout order");
      const json& shape = j["shape"];
      const char* shape_expected = "a list of 3 to 5 positive sizes in layout order";
      if (!shape.is_array() || shape.size() < 3 || shape.size() > 5)
        top_.fail(at + ".shape", describe(shape), shape_expected);
      for (const auto& e : shape) in.shape.push_back(top_.get_positive(e, at + ".shape"));
      const int dims = static_cast<int>(in.shape.size()) - 2;
      std::string layout_field = at + ".layout", text;
      if (j.contains("layout")) {
        text = top_.get_string(j["layout"], layout_field, "a layout name");
      } else if (defaults_.layout) {
        text = *defaults_.layout;
        layout_field = "defaults.layout";
      } else {
        text = "channels_first";
      }
      const auto layout = parse_layout(text);
      if (!layout || (layout->dims && layout->dims != dims))
        top_.fail(layout_field, fmt::format("'{}' for a shape of rank {}", text, dims + 2),
                  layout_expected(dims));
      in.layout = {layout->channels_last, dims};
      Layer probe;
      if (j.contains("dtype"))
        parse_dtype(j["dtype"], at + ".dtype", top_, probe);
      else if (!defaults_.dtype.is_null())
        parse_dtype(defaults_.dtype, "defaults.dtype", top_, probe);
      in.dtype = probe.dtype;
      const std::optional<int64_t> bytes = buffer_bytes(in.shape, in.dtype);
      if (!bytes || *bytes >= kMaxBufferBytes)
        top_.fail(at + ".shape", shape_text(in.shape) + " is too large",
                  fmt::format("a tensor under {} bytes", kMaxBufferBytes));
      input_index_.emplace(in.name, m.inputs.size());
      m.inputs.push_back(std::move(in));
    }
  }

  // The spec's outputs (layer names), or every layer no layer reads.
  void parse_outputs(const json& root, Model& m) const {
    if (!root.contains("outputs")) {
      std::unordered_set<std::string> read;
      for (const Layer& l : m.layers) read.insert(l.inputs.begin(), l.inputs.end());
      for (const Layer& l : m.layers)
        if (!read.count(l.name)) m.outputs.push_back(l.name);
    } else {
      const json& list = root["outputs"];
      if (!list.is_array() || list.empty())
        top_.fail("outputs", describe(list), "a non-empty list of layer names");
      std::unordered_set<std::string> listed;
      for (const auto& e : list) {
        const std::string name = top_.get_string(e, "outputs", "a layer name");
        if (!index_.count(name))
          top_.fail("outputs", "'" + shorten(name) + "' is not a layer", "names of layers");
        if (!listed.insert(name).second)
          top_.fail("outputs", "'" + name + "' is listed twice", "each output once");
        m.outputs.push_back(name);
      }
    }
    const std::unordered_set<std::string> outputs(m.outputs.begin(), m.outputs.end());
    if (root.contains("output_shapes")) parse_output_shapes(root["output_shapes"], outputs, m);
    for (size_t i = 0; i < m.layers.size(); ++i)
      if (!m.layers[i].read_by.empty() && !outputs.count(m.layers[i].name))
        Ctx{top_.file, m.layers[i].name, i}.fail(
            "read_by", "given, but the layer is not among the model's outputs",
            "the layer in 'outputs' (ops outside padfold read its output)");
  }

  // output_shapes: {layer: shape}, each the layer's output shape with unit dims dropped or added.
  void parse_output_shapes(const json& j, const std::unordered_set<std::string>& outputs,
                           Model& m) const {
    if (!j.is_object()) top_.fail("output_shapes", describe(j), "an object {output: shape}");
    for (const auto& [name, shape_json] : j.items()) {
      const std::string at = "output_shapes." + shorten(name);
      if (!outputs.count(name))
        top_.fail(at, "'" + shorten(name) + "' is not a model output", "names of outputs");
      if (!shape_json.is_array() || shape_json.empty() || shape_json.size() > 5)
        top_.fail(at, describe(shape_json), "a list of 1 to 5 positive sizes");
      std::vector<int64_t> shape;
      for (const auto& e : shape_json) shape.push_back(top_.get_positive(e, at));
      const std::vector<int64_t> full = m.find_layer(name)->output_shape_full();
      if (without_unit_dims(shape) != without_unit_dims(full))
        top_.fail(at, shape_text(shape) + " for the layer's output " + shape_text(full),
                  "the same sizes with unit dims dropped or added (the same values in memory)");
      m.output_shapes[name] = shape;
    }
  }

  void parse_defaults(const json& d) {
    if (!d.is_object()) top_.fail("defaults", describe(d), "an object");
    top_.check_keys(d, kDefaultKeys, "defaults.");
    if (d.contains("layout")) {
      const auto s = top_.get_string(d["layout"], "defaults.layout", "a layout name");
      if (!parse_layout(s)) top_.fail("defaults.layout", "'" + s + "'", layout_expected(0));
      defaults_.layout = s;
    }
    if (d.contains("weight_layout"))
      defaults_.weight_layout =
          top_.get_string(d["weight_layout"], "defaults.weight_layout", "a weight layout");
    if (d.contains("dtype")) defaults_.dtype = d["dtype"];
    if (d.contains("border")) defaults_.border = d["border"];
  }

  static std::string layout_expected(int dims) {
    std::vector<std::string> names;
    for (int d = 1; d <= 3; ++d)
      if (dims == 0 || d == dims) {
        names.push_back("NC" + spatial_letters(d));
        names.push_back("N" + spatial_letters(d) + "C");
      }
    return fmt::format("{}, channels_first or channels_last", fmt::join(names, ", "));
  }

  Layer parse_layer(const json& j, size_t index, const Model& m) {
    Ctx c{top_.file, "?", index};
    if (!j.is_object()) c.fail("(layer)", describe(j), "an object");
    if (j.contains("name") && j["name"].is_string())
      c.layer = shorten(j["name"].get<std::string>());
    c.check_keys(j, kLayerKeys);
    Layer l;
    parse_identity(j, c, m, l);
    if (j.contains("description") && j["description"].is_string())
      l.description = j["description"].get<std::string>();
    if (j.contains("read_by"))
      l.read_by = c.get_string(j["read_by"], "read_by", "the ops outside padfold that read it");
    std::vector<TensorSource> sources = parse_sources(j, c, m, l);
    const std::vector<TensorSource> read = sources;
    const TensorSource* src = sources.empty() ? nullptr : &sources[0];
    if (l.op == Op::Transpose) return parse_transpose(j, c, sources, l);
    parse_layout_and_dims(j, c, src, l);
    if (l.has_window()) {
      sources = {parse_input_shape(j, c, src, l)};
      if (l.inputs.empty()) l.inputs = {implicit_input_name(l.name)};
    }
    resolving(j, c, [&] { take_input_shapes(l, sources); });
    if (const OpDef& op = op_def(l.op); op.read) op.read(j, c, l);
    if (l.has_window()) {
      parse_kernel(j, c, l);
      parse_channels(j, c, l);
      parse_padding(j, c, l);
    }
    parse_options(j, c, l);
    parse_quant(j.contains("quant") ? j["quant"] : json(), c, l);
    check_source_types(read, c, l);
    resolving(j, c, [&] { resolve_shapes(l); });
    return l;
  }

  // A transpose takes its dims and layouts from its input and perm: its layout is derived
  // (a "layout" field must agree; defaults.layout does not apply).
  Layer parse_transpose(const json& j, const Ctx& c, const std::vector<TensorSource>& sources,
                        Layer& l) {
    if (sources.empty()) c.fail("input", "missing", "the layer or model input to transpose");
    const char* expected = "a list of axes, e.g. [0, 2, 3, 1] for NCHW to NHWC";
    if (!j.contains("perm")) c.fail("perm", "missing", expected);
    if (!j["perm"].is_array() || j["perm"].empty() || j["perm"].size() > 5)
      c.fail("perm", describe(j["perm"]), expected);
    for (const auto& e : j["perm"]) l.perm.push_back(c.get_int(e, "perm", expected));
    parse_options(j, c, l);
    resolving(j, c, [&] { take_input_shapes(l, sources); });
    parse_quant(j.contains("quant") ? j["quant"] : json(), c, l);
    if (j.contains("layout")) {
      const std::string text = c.get_string(j["layout"], "layout", "a layout name");
      const auto layout = parse_layout(text);
      if (!layout || layout->channels_last != l.layout.channels_last ||
          (layout->dims && layout->dims != l.spatial_dims))
        c.fail("layout",
               fmt::format("'{}', but perm {} of {}'s {} gives {}", text, shape_text(l.perm),
                           sources[0].what, sources[0].layout.name(), l.layout.name()),
               l.layout.name() + " (a transpose's layout is its output's, which perm decides)");
    }
    check_source_types(sources, c, l);
    resolving(j, c, [&] { resolve_shapes(l); });
    return l;
  }

  // Runs a step of frontend/resolve.h, its LayerError as this layer's SpecError. The resolver
  // says out_channels where the spec may have written depth_multiplier.
  template <typename F>
  static void resolving(const json& j, const Ctx& c, F&& step) {
    try {
      step();
    } catch (const LayerError& e) {
      const bool multiplier = e.field == "out_channels" && j.contains("depth_multiplier");
      c.fail(multiplier ? "depth_multiplier" : e.field, e.what());
    }
  }

  void parse_identity(const json& j, const Ctx& c, const Model& m, Layer& l) {
    if (!j.contains("name")) c.fail("name", "missing", "a layer name (a C identifier)");
    l.name = c.get_string(j["name"], "name", "a layer name (a C identifier)");
    check_name_length(c, "name", l.name);
    if (!is_identifier(l.name))
      c.fail("name", "'" + l.name + "'",
             "a C identifier ([A-Za-z_][A-Za-z0-9_]*): the name becomes a C symbol");
    if (const auto it = index_.find(l.name); it != index_.end())
      c.fail("name", fmt::format("'{}' is already used by layer #{}", l.name, it->second),
             "a unique name per layer");
    if (input_index_.count(l.name))
      c.fail("name", fmt::format("'{}' is already the name of a model input", l.name),
             "a name of its own (layers and inputs name the tensors layers read)");
    check_symbol_clash(c, m, l.name);
    if (!j.contains("op")) c.fail("op", "missing", "an op such as conv2d or max_pool");
    l.op_name = c.get_string(j["op"], "op", "an op name");
    const auto op = parse_op(l.op_name);
    if (!op) c.fail("op", "'" + l.op_name + "'", "one of " + op_names());
    l.op = op->op;
    l.spatial_dims = op->dims;
    for (const std::string& field : op_fields())
      if (j.contains(field) && !op_takes(l.op, field))
        c.fail(field, fmt::format("given on a {} layer", l.op_name),
               "it only on " + layers_taking(field));
  }

  // Layer `name`'s kernel (base/identifiers.h's kernel_symbol) must not be another layer's kernel
  // plus one of the suffixes of the symbols Halide defines beside it. The model part of the
  // symbols is the same for all layers of a model, so this compares layer names.
  void check_symbol_clash(const Ctx& c, const Model& m, const std::string& name) const {
    auto clash = [&](const std::string& base, const std::string& suffix, size_t other) {
      c.fail("name",
             fmt::format("'{}' clashes with layer '{}' (#{}): the kernel {} comes with the "
                         "symbol {}{}, which is also the kernel of layer '{}'",
                         name, m.layers[other].name, other, kernel_symbol(m.name, base),
                         kernel_symbol(m.name, base), suffix, base + suffix),
             fmt::format("a name other than another layer's name + {}",
                         fmt::join(kHalideSymbolSuffixes, " or ")));
    };
    for (const char* suffix : kHalideSymbolSuffixes) {
      const std::string sfx = suffix;
      if (name.size() > sfx.size() &&
          name.compare(name.size() - sfx.size(), sfx.size(), sfx) == 0) {
        const std::string base = name.substr(0, name.size() - sfx.size());
        if (const auto it = index_.find(base); it != index_.end()) clash(base, sfx, it->second);
      }
      if (const auto it = index_.find(name + sfx); it != index_.end()) clash(name, sfx, it->second);
    }
  }

  static TensorSource layer_source(const Layer& prev) {
    const bool quantized_output = prev.quant && prev.op != Op::Dequantize;
    return {
        prev.name,           fmt::format("input layer '{}'", prev.name),
        prev.layout,         prev.output_shape_full(),
        prev.output_dtype(), quantized_output ? std::optional(prev.quant->output) : std::nullopt};
  }

  // Each input holds this layer's dtype, and a quantized layer's input the quantization it
  // expects: a mismatch would compute on integers meaning something else.
  static void check_source_types(const std::vector<TensorSource>& sources, const Ctx& c,
                                 const Layer& l) {
    for (size_t i = 0; i < sources.size(); ++i) {
      const TensorSource& s = sources[i];
      if (s.dtype != l.input_dtype())
        c.fail("dtype",
               fmt::format("'{}' reading {}, which is {}", to_string(l.dtype), s.what,
                           to_string(s.dtype)),
               l.op == Op::Quantize
                   ? std::string("a float32 input (quantize converts float32 to its dtype)")
                   : std::string("the dtype of its inputs (padfold converts between dtypes only "
                                 "in quantize and dequantize layers)"));
      if (!l.quant || !s.quant || l.quant->inputs.size() <= i) continue;
      const QuantParams& want = l.quant->inputs[i];
      if (s.quant->scale != want.scale || s.quant->zero_point != want.zero_point)
        c.fail(
            l.is_join() ? fmt::format("quant.inputs[{}]", i) : std::string("quant.input"),
            fmt::format("scale {} and zero point {}, but {} writes scale {} and zero point {}",
                        want.scale, want.zero_point, s.what, s.quant->scale, s.quant->zero_point),
            "the quantization its input is written in");
    }
  }

  TensorSource find_source(const json& name_j, const std::string& field, const Ctx& c,
                           const Model& m, const Layer& l) const {
    const auto name = c.get_string(name_j, field, "the name of an earlier layer or model input");
    if (name == l.name)
      c.fail(field,
             fmt::format("'{}' is this layer itself (a layer cannot read its own output)", name),
             "the name of an earlier layer or of a model input (spec field inputs)");
    if (const Layer* prev = find_layer(m, name)) return layer_source(*prev);
    if (const auto it = input_index_.find(name); it != input_index_.end()) {
      const ModelInput& in = m.inputs[it->second];
      return {name, fmt::format("model input '{}'", name), in.layout, in.shape, in.dtype, {}};
    }
    const bool later = all_names_.count(name) > 0;
    c.fail(field,
           fmt::format("'{}'{}", shorten(name),
                       later ? " is defined later in the file" : " is not a layer or model input"),
           "the name of an earlier layer or of a model input (spec field inputs)");
  }

  // The tensors feeding this layer (empty for a model input given by input_shape).
  std::vector<TensorSource> parse_sources(const json& j, const Ctx& c, const Model& m, Layer& l) {
    std::vector<TensorSource> sources;
    if (l.is_join()) {
      const char* expected = "a list of two or more earlier layers or model inputs";
      if (!j.contains("input")) c.fail("input", "missing", expected);
      const json& list = j["input"];
      if (!list.is_array() || list.size() < 2) c.fail("input", describe(list), expected);
      if (list.size() > kMaxJoinInputs)
        c.fail("input", fmt::format("{} inputs", list.size()),
               fmt::format("at most {} (the runtime's buffers per kernel, less the output)",
                           kMaxJoinInputs));
      for (const auto& e : list) sources.push_back(find_source(e, "input", c, m, l));
    } else if (j.contains("input")) {
      sources.push_back(find_source(j["input"], "input", c, m, l));
    } else if (!j.contains("input_shape")) {
      if (m.layers.empty())
        c.fail("input_shape", "missing on the first layer",
               "the full input tensor shape in layout order, e.g. [1, 224, 224, 3] for NHWC");
      sources.push_back(layer_source(m.layers.back()));
    }
    for (const TensorSource& s : sources) l.inputs.push_back(s.name);
    return sources;
  }

  void parse_layout_and_dims(const json& j, const Ctx& c, const TensorSource* src, Layer& l) {
    std::optional<LayoutName> layout;
    std::string layout_field = "layout", layout_text;
    if (j.contains("layout")) {
      layout_text = c.get_string(j["layout"], "layout", "a layout name");
      layout = parse_layout(layout_text);
      if (!layout) c.fail("layout", "'" + layout_text + "'", layout_expected(0));
    } else if (defaults_.layout) {
      layout_text = *defaults_.layout;
      layout = parse_layout(layout_text);
      layout_field = "defaults.layout";
    } else if (src) {
      layout = LayoutName{src->layout.channels_last, src->layout.spatial_dims};
      layout_text = fmt::format("{} (from {})", src->layout.name(), src->what);
    }
    // Ops named without dims (max_pool, conv_transpose) take them from the kernel or the input.
    int dims = l.spatial_dims;
    auto dims_from_list = [&](const char* field, int offset) {
      if (dims || !j.contains(field) || !j[field].is_array()) return;
      dims = static_cast<int>(j[field].size()) - offset;
      if (dims < 1 || dims > 3)
        c.fail(
            field, describe(j[field]),
            fmt::format("a list of {} to {} values (1 to 3 spatial dims)", 1 + offset, 3 + offset));
    };
    dims_from_list("kernel", 0);
    if (dims == 0 && layout && layout->dims) dims = layout->dims;
    dims_from_list("input_shape", 2);
    if (dims == 0 && src) dims = src->layout.spatial_dims;
    if (dims == 0)
      c.fail("op", fmt::format("'{}' with no way to tell its spatial dims", l.op_name),
             "a name with the dims (e.g. " + l.op_name +
                 "2d), a kernel list or a layout such as NCHW");
    l.spatial_dims = dims;
    if (layout && layout->dims && layout->dims != dims)
      c.fail(layout_field,
             fmt::format("{} has {} spatial dim(s) but this {} layer has {}", layout_text,
                         layout->dims, l.op_name, dims),
             layout_expected(dims));
    l.layout.channels_last = layout && layout->channels_last;
    l.layout.spatial_dims = dims;
    if (j.contains("input_layout")) {  // the kernel reads its input in this layout
      const std::string text = c.get_string(j["input_layout"], "input_layout", "a layout name");
      const auto in = parse_layout(text);
      if (!in || (in->dims && in->dims != dims))
        c.fail("input_layout", "'" + text + "'", layout_expected(dims));
      l.input_layout = {in->channels_last, dims};
      l.relayout_input = in->channels_last != l.layout.channels_last;
    }
    const TensorLayout& reads = l.read_layout();
    if (src &&
        (src->layout.channels_last != reads.channels_last || src->layout.spatial_dims != dims))
      c.fail(l.relayout_input ? "input_layout" : layout_field,
             fmt::format("{}, but {} produces {}", reads.name(), src->what, src->layout.name()),
             "the input's layout (a layer that computes in another one says input_layout: the "
             "input's, and reads it so)");
  }

  // The tensor a conv or pool reads: its source, or a model input of the shape input_shape gives
  // (both given: they must agree).
  TensorSource parse_input_shape(const json& j, const Ctx& c, const TensorSource* src,
                                 const Layer& l) const {
    if (!j.contains("input_shape")) return *src;
    const size_t rank = static_cast<size_t>(l.spatial_dims) + 2;
    const std::string expected =
        fmt::format("a list of {} integers in {} order", rank, l.read_layout().name());
    const json& s = j["input_shape"];
    if (!s.is_array() || s.size() != rank) c.fail("input_shape", describe(s), expected);
    std::vector<int64_t> shape;
    for (const auto& e : s) shape.push_back(c.get_int(e, "input_shape", expected));
    if (src && shape != src->shape)
      c.fail("input_shape",
             fmt::format("{} but {} produces {}", shape_text(shape), src->what,
                         shape_text(src->shape)),
             "them to agree (or give only one of input and input_shape)");
    if (src) return *src;
    return {implicit_input_name(l.name), "input_shape", l.read_layout(), shape, l.dtype, {}};
  }

  void parse_kernel(const json& j, const Ctx& c, Layer& l) {
    const int d = l.spatial_dims;
    if (!j.contains("kernel"))
      c.fail("kernel", "missing", fmt::format("an integer or a list of {} integers", d));
    l.kernel = c.get_per_dim(j["kernel"], "kernel", d);
    l.stride =
        j.contains("stride") ? c.get_per_dim(j["stride"], "stride", d) : std::vector<int64_t>(d, 1);
    l.dilation = j.contains("dilation") ? c.get_per_dim(j["dilation"], "dilation", d)
                                        : std::vector<int64_t>(d, 1);
    if (j.contains("output_padding"))
      l.output_padding = c.get_per_dim(j["output_padding"], "output_padding", d);
    if (j.contains("output_shape")) {
      const json& s = j["output_shape"];
      const std::string expected = fmt::format("a list of {} positive spatial sizes", d);
      if (!s.is_array() || s.size() != static_cast<size_t>(d))
        c.fail("output_shape", describe(s), expected);
      l.output_shape = c.get_per_dim(s, "output_shape", d);
    }
  }

  // out_channels and groups (frontend/resolve.cpp checks them against the input channels).
  void parse_channels(const json& j, const Ctx& c, Layer& l) {
    if (!l.has_weights()) return;
    if (j.contains("groups")) l.groups = c.get_positive(j["groups"], "groups");
    if (j.contains("depth_multiplier")) {
      if (j.contains("out_channels") || j.contains("groups"))
        c.fail("depth_multiplier", "given together with out_channels or groups",
               "either depth_multiplier (depthwise) or out_channels/groups");
      l.groups = l.in_channels;
      const int64_t multiplier = c.get_positive(j["depth_multiplier"], "depth_multiplier");
      const auto out = checked_mul(l.in_channels, multiplier);  // both are at most kMaxSize
      if (!out || *out > kMaxSize)
        c.fail("depth_multiplier",
               fmt::format("{} input channels x {} gives {} output channels", l.in_channels,
                           multiplier, out ? std::to_string(*out) : "too many"),
               fmt::format("at most {} output channels (the int32 limit)", kMaxSize));
      l.out_channels = *out;
    } else if (j.contains("out_channels")) {
      l.out_channels = c.get_positive(j["out_channels"], "out_channels");
    } else {
      c.fail("out_channels", "missing",
             "the number of output channels (or depth_multiplier for a depthwise conv)");
    }
  }

  void parse_padding(const json& j, const Ctx& c, Layer& l) {
    const int d = l.spatial_dims;
    const json p = j.value("padding", json("valid"));
    const bool has_conv = j.contains("convention");
    const std::string conv = has_conv ? c.get_string(j["convention"], "convention", "a name") : "";
    if (has_conv && !p.is_string())
      c.fail("convention", "given with explicit pads " + dump_short(p, 40),
             "it only with padding 'same'");
    const std::string padding_forms = fmt::format(
        "a padding name ({}), an integer, a list of {} or {} integers, a list of {} [before, "
        "after] pairs or {{\"pads\": [{} integers in ONNX order]}}",
        padding_names(), d, 2 * d, d, 2 * d);
    try {
      if (p.is_string()) {
        const auto name = p.get<std::string>();
        l.padding = parse_padding_name(name);
        // The name alone is fine, so a failure now is the convention's.
        try {
          if (has_conv) l.padding = parse_padding_name(name, conv);
        } catch (const PaddingError& e) {
          c.fail("convention", e.what());
        }
        return;
      }
      std::vector<int64_t> values;
      if (p.is_number_integer()) {
        values.push_back(c.get_int(p, "padding", padding_forms));
      } else if (p.is_object()) {
        c.check_keys(p, {"pads"}, "padding.");
        const json& pads = p.value("pads", json());
        if (!pads.is_array() || pads.size() != static_cast<size_t>(2 * d))
          c.fail("padding.pads", describe(pads),
                 fmt::format("a list of {} integers (ONNX order: all befores, then all afters)",
                             2 * d));
        for (const auto& v : pads) values.push_back(c.get_int(v, "padding.pads", "integers"));
      } else if (p.is_array() && !p.empty() && p[0].is_array()) {
        if (p.size() != static_cast<size_t>(d)) c.fail("padding", describe(p), padding_forms);
        std::vector<int64_t> after;
        for (const auto& pair : p) {
          if (!pair.is_array() || pair.size() != 2)
            c.fail("padding", describe(pair), padding_forms);
          values.push_back(c.get_int(pair[0], "padding", padding_forms));
          after.push_back(c.get_int(pair[1], "padding", padding_forms));
        }
        values.insert(values.end(), after.begin(), after.end());
      } else if (p.is_array()) {
        for (const auto& v : p) values.push_back(c.get_int(v, "padding", padding_forms));
      } else {
        c.fail("padding", describe(p), padding_forms);
      }
      l.padding = explicit_padding(values, d);
    } catch (const PaddingError& e) {
      c.fail("padding", e.what());
    }
  }

  void parse_border(const json& b, const std::string& field, const Ctx& c, Layer& l) {
    const char* expected = "a border name or {\"mode\": \"constant\", \"value\": x}";
    try {
      if (b.is_string()) {
        l.border = padfold::parse_border(b.get<std::string>());
        return;
      }
      if (!b.is_object()) c.fail(field, describe(b), expected);
      c.check_keys(b, {"mode", "value"}, field + ".");
      if (!b.contains("mode")) c.fail(field + ".mode", "missing", "a border name");
      l.border = padfold::parse_border(c.get_string(b["mode"], field + ".mode", "a border name"));
    } catch (const PaddingError& e) {
      c.fail(field, e.what());
    }
    if (b.contains("value")) {
      if (l.border != Border::Constant)
        c.fail(field + ".value", "given with mode '" + to_string(l.border) + "'",
               "a value only with mode 'constant'");
      l.border_value = c.get_number(b["value"], field + ".value");
    }
  }

  void parse_dtype(const json& t, const std::string& field, const Ctx& c, Layer& l) {
    const std::string names = "float32, int8 or uint8";
    const auto s = c.get_string(t, field, names.c_str());
    const auto dtype = value_of(kDTypeNames, s);
    if (!dtype) c.fail(field, "'" + s + "'", names + " (or f32, i8, u8)");
    l.dtype = *dtype;
    if (l.dtype == DType::F16) c.fail(field, fmt::format("'{}' is not supported yet", s), names);
  }

  void parse_options(const json& j, const Ctx& c, Layer& l) {
    if (j.contains("dtype"))
      parse_dtype(j["dtype"], "dtype", c, l);
    else if (!defaults_.dtype.is_null())
      parse_dtype(defaults_.dtype, "defaults.dtype", c, l);
    if (j.contains("bias")) l.bias = c.get_bool(j["bias"], "bias");
    if (j.contains("border"))
      parse_border(j["border"], "border", c, l);
    else if (!defaults_.border.is_null() && l.has_window())
      parse_border(defaults_.border, "defaults.border", c, l);
    if (j.contains("activation")) parse_activation(j["activation"], c, l);
    if (!l.has_weights()) return;
    if (j.contains("weight_files")) parse_weight_files(j["weight_files"], c, l);
    std::string order, field = "weight_layout";
    if (j.contains("weight_layout")) {
      order = c.get_string(j["weight_layout"], field, "a weight layout such as OIHW");
    } else if (defaults_.weight_layout) {
      order = *defaults_.weight_layout;
      field = "defaults.weight_layout";
    } else {
      const std::string s = spatial_letters(l.spatial_dims);
      const bool t = l.op == Op::ConvTranspose;
      order = l.layout.channels_last ? s + (t ? "OI" : "IO") : (t ? "IO" : "OI") + s;
    }
    if (!valid_weight_layout(order, l.spatial_dims)) {
      const std::string s = spatial_letters(l.spatial_dims);
      c.fail(field, fmt::format("'{}' for a {} layer", order, l.op_name),
             fmt::format("the letters O, I and {} (spatial letters in that order), e.g. OI{}, "
                         "{}IO, IO{} or {}OI",
                         s, s, s, s, s));
    }
    l.weight_layout.order = order;
  }

  // Paths relative to the spec file's folder; the files themselves are checked where they are read
  // (emit/weights.h), as the parser reads only the spec.
  void parse_weight_files(const json& w, const Ctx& c, Layer& l) const {
    const char* expected = "{\"weights\": \"file.npy\", \"bias\": \"file.npy\"}";
    if (!w.is_object()) c.fail("weight_files", describe(w), expected);
    c.check_keys(w, {"weights", "bias"}, "weight_files.");
    auto path = [&](const char* key) {
      const std::string field = std::string("weight_files.") + key;
      const std::string p = c.get_string(w[key], field, "a path to a .npy file");
      if (p.empty() || p.size() > kMaxPathLength || p.find('\0') != std::string::npos)
        c.fail(field, describe(w[key]),
               fmt::format("a path of 1 to {} characters without NUL", kMaxPathLength));
      const std::filesystem::path fp(p);
      return fp.is_absolute() ? fp.string()
                              : (std::filesystem::path(top_.file).parent_path() / fp).string();
    };
    if (!w.contains("weights")) c.fail("weight_files.weights", "missing", "the weights' .npy file");
    l.weights_file = path("weights");
    if (w.contains("bias") && !l.bias)
      c.fail("weight_files.bias", "given for a layer without bias", "bias: true, or no bias file");
    if (l.bias && !w.contains("bias"))
      c.fail("weight_files.bias", "missing for a layer with bias", "the bias' .npy file");
    if (l.bias) l.bias_file = path("bias");
  }

  void parse_activation(const json& a, const Ctx& c, Layer& l) {
    const std::string names = names_of(kActivationNames, Spelling::Name, ", ", " or ");
    std::string type;
    if (a.is_string()) {
      type = a.get<std::string>();
    } else if (a.is_object()) {
      c.check_keys(a, {"type", "alpha", "beta"}, "activation.");
      if (!a.contains("type")) c.fail("activation.type", "missing", names);
      type = c.get_string(a["type"], "activation.type", names.c_str());
    } else {
      c.fail("activation", describe(a), names + " or {\"type\": ..., \"alpha\": x}");
    }
    const auto activation = value_of(kActivationNames, type);
    if (!activation) c.fail("activation", "'" + type + "'", names);
    l.activation = *activation;
    const ActivationDef& def = activation_def(l.activation);
    l.activation_alpha = def.alpha;
    l.activation_beta = def.beta;
    // The activations taking at least `params` parameters, "a or b".
    auto taking = [](int params) {
      std::string text;
      for (const ActivationDef& d : kActivations)
        if (d.params >= params) text += (text.empty() ? "" : " or ") + std::string(d.name);
      return text;
    };
    if (a.is_object() && a.contains("alpha")) {
      if (def.params < 1)
        c.fail("activation.alpha", "given with activation '" + type + "'",
               "alpha only with " + taking(1));
      l.activation_alpha = c.get_number(a["alpha"], "activation.alpha");
    }
    if (a.is_object() && a.contains("beta")) {
      if (def.params < 2)
        c.fail("activation.beta", "given with activation '" + type + "'",
               "beta only with " + taking(2));
      l.activation_beta = c.get_number(a["beta"], "activation.beta");
    }
  }
};

}  // namespace

Model parse_spec(const std::string& json_text, const std::string& file_label) {
  return Parser(file_label).parse(parse_json_text(json_text, file_label));
}

Model load_spec(const std::string& path) {
  return parse_spec(read_spec_file(path), path);
}

}  // namespace padfold
