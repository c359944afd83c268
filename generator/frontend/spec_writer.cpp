#include "frontend/spec_writer.h"

#include <filesystem>
#include <unordered_set>

#include "frontend/op_table.h"

namespace padfold {
namespace {

using ojson = nlohmann::ordered_json;
namespace fs = std::filesystem;

bool reads_implicit_input(const Layer& l) {
  return l.inputs.size() == 1 && l.inputs[0] == implicit_input_name(l.name);
}

ojson padding_json(const Layer& l) {
  if (l.padding.mode != PadMode::Explicit) return to_string(l.padding.mode);
  std::vector<int64_t> pads = l.padding.before;
  pads.insert(pads.end(), l.padding.after.begin(), l.padding.after.end());
  return {{"pads", pads}};
}

ojson border_json(const Layer& l) {
  if (l.border != Border::Constant) return to_string(l.border);
  return {{"mode", "constant"}, {"value", l.border_value}};
}

ojson activation_json(const Layer& l) {
  const ActivationDef& d = activation_def(l.activation);
  if (d.params == 0) return d.name;
  ojson j = {{"type", d.name}, {"alpha", l.activation_alpha}};
  if (d.params >= 2) j["beta"] = l.activation_beta;
  return j;
}

ojson params_json(const QuantParams& q) {
  return {{"scale", q.scale}, {"zero_point", q.zero_point}};
}

// docs/int8.md's quant object, read back by frontend/quant_fields.h as it was.
ojson quant_json(const Layer& l) {
  const LayerQuant& q = *l.quant;
  ojson j = {{"requantize", to_string(q.requantize)}};
  if (l.is_join()) {  // add, mul
    j["inputs"] = ojson::array();
    for (const QuantParams& p : q.inputs) j["inputs"].push_back(params_json(p));
  } else if (l.op != Op::Quantize) {
    j["input"] = params_json(q.inputs.at(0));
  }
  if (q.gate) j["gate"] = params_json(*q.gate);
  if (l.op != Op::Dequantize) j["output"] = params_json(q.output);
  if (l.op == Op::Conv)
    j["weight_scale"] =
        q.weight_scales.size() == 1 ? ojson(q.weight_scales[0]) : ojson(q.weight_scales);
  return j;
}

std::string relative_to(const std::string& path, const fs::path& folder) {
  if (folder.empty()) return path;
  const fs::path rel = fs::path(path).lexically_relative(folder);
  return rel.empty() || *rel.begin() == ".." ? path : rel.string();
}

ojson layer_json(const Model& m, const Layer& l) {
  ojson j;
  j["name"] = l.name;
  if (!l.description.empty()) j["description"] = l.description;
  if (!l.read_by.empty()) j["read_by"] = l.read_by;
  j["op"] = l.op_name;
  if (l.is_join())
    j["input"] = l.inputs;
  else if (!reads_implicit_input(l))
    j["input"] = l.inputs[0];
  if (l.has_window()) j["input_shape"] = l.input_shape();
  j["layout"] = l.layout.name();
  if (l.relayout_input) j["input_layout"] = l.input_layout.name();
  if (const OpDef& op = op_def(l.op); op.write) op.write(l, j);
  if (l.dtype != DType::F32) j["dtype"] = to_string(l.dtype);
  if (l.has_weights()) {
    j["weight_layout"] = l.weight_layout.order;
    j["out_channels"] = l.out_channels;
    j["groups"] = l.groups;
  }
  if (l.has_window()) {
    j["kernel"] = l.kernel;
    j["stride"] = l.stride;
    j["dilation"] = l.dilation;
  }
  if (!l.output_padding.empty()) j["output_padding"] = l.output_padding;
  if (l.output_shape) j["output_shape"] = *l.output_shape;
  if (l.has_window()) j["padding"] = padding_json(l);
  if (l.has_window() && l.border != Border::Zeros) j["border"] = border_json(l);
  if (l.has_weights()) j["bias"] = l.bias;
  if (l.activation != Activation::None) j["activation"] = activation_json(l);
  if (l.quant) j["quant"] = quant_json(l);
  if (!l.weights_file.empty()) {
    const fs::path folder = fs::path(m.file).parent_path();
    ojson files = {{"weights", relative_to(l.weights_file, folder)}};
    if (!l.bias_file.empty()) files["bias"] = relative_to(l.bias_file, folder);
    j["weight_files"] = files;
  }
  return j;
}

}  // namespace

ojson to_spec_json(const Model& m) {
  ojson spec;
  spec["model"] = m.name;
  if (!m.description.empty()) spec["description"] = m.description;
  std::unordered_set<std::string> implicit;
  for (const Layer& l : m.layers)
    if (reads_implicit_input(l)) implicit.insert(l.inputs[0]);
  ojson inputs = ojson::array();
  for (const ModelInput& in : m.inputs) {
    if (implicit.count(in.name)) continue;
    ojson j = {{"name", in.name}};
    if (!in.description.empty()) j["description"] = in.description;
    j["shape"] = in.shape;
    j["layout"] = in.layout.name();
    j["dtype"] = to_string(in.dtype);
    if (!in.produced_by.empty()) j["produced_by"] = in.produced_by;
    inputs.push_back(j);
  }
  if (!inputs.empty()) spec["inputs"] = inputs;
  spec["outputs"] = m.outputs;
  if (!m.output_shapes.empty()) {
    ojson shapes = ojson::object();
    for (const std::string& name : m.outputs)
      if (const auto it = m.output_shapes.find(name); it != m.output_shapes.end())
        shapes[name] = it->second;
    spec["output_shapes"] = shapes;
  }
  ojson layers = ojson::array();
  for (const Layer& l : m.layers) layers.push_back(layer_json(m, l));
  spec["layers"] = layers;
  return spec;
}

}  // namespace padfold
