#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>

#include "base/identifiers.h"
#include "base/text.h"
#include "frontend/json_text.h"
#include "frontend/layout_cost.h"
#include "frontend/onnx/importer.h"
#include "frontend/onnx/names.h"
#include "frontend/onnx/split_channels.h"
#include "frontend/spec_writer.h"

namespace padfold::onnx_import::detail {

std::string Importer::model_name() const {
  // The spec's rule for a model name (frontend/spec.cpp), so that every name it takes is taken.
  const std::string& name = o_.model_name;
  if (!name.empty()) {
    if (name.size() > kMaxNameLength)
      throw ImportError(fmt::format(
          "--name '{}': {} characters; expected at most {} (the name becomes part of C symbols "
          "and file names)",
          shorten(name), name.size(), kMaxNameLength));
    if (!is_identifier(name)) {
      const std::string s = sanitize_identifier(name);
      throw ImportError("--name '" + name +
                        "': expected a C identifier ([A-Za-z_][A-Za-z0-9_]*), e.g. '" +
                        (s.empty() ? std::string("model") : s) + "'");
    }
    return name;
  }
  const std::string s = sanitize_identifier(std::filesystem::path(p_.label).stem().string());
  return s.empty() ? "model" : s;
}

std::string Importer::node_text(int i) const {
  const onnx::NodeProto& n = g_.node(i);
  return n.op_type() + " '" + n.name() + "'";
}

ojson Importer::node_ref(int i, const char* role) const {
  ojson j = {
      {"name", g_.node(i).name()}, {"op_type", g_.node(i).op_type()}, {"index", i}, {"role", role}};
  if (std::string from = split_part_origin(g_.node(i)); !from.empty()) j["written_as"] = from;
  return j;
}

std::string Importer::layer_description(const Draft& d) const {
  std::string s = "ONNX ";
  if (d.pad_node >= 0) s += node_text(d.pad_node) + " (" + pad_mode_.at(d.node) + ", folded) + ";
  if (d.crop_node >= 0) s += node_text(d.crop_node) + " (a crop, folded) + ";
  const auto affine = affine_nodes_.find(d.node);
  if (affine != affine_nodes_.end())
    for (int a : affine->second)
      if (a < d.node) s += node_text(a) + " (folded) + ";
  for (int p : d.part_nodes) s += node_text(p) + " + ";
  s += node_text(d.node);
  if (affine != affine_nodes_.end())
    for (int a : affine->second)
      if (a > d.node) s += " + " + node_text(a) + " (folded)";
  if (d.act_node >= 0) s += " + " + node_text(d.act_node);
  if (const auto m = gating_mul_.find(d.node); m != gating_mul_.end())
    s += " + " + node_text(m->second);
  for (int q : d.quant_nodes) s += " + " + node_text(q);
  return s + "; output tensor '" + d.output + "'";
}

ImportResult Importer::assemble() {
  settle_bypassed();
  ImportResult res;
  res.model_name = model_name();
  NameAllocator names;
  // Names: graph inputs the layers read first (the user's names), then the layers, then the
  // tensors computed by nodes left to the caller.
  std::map<std::string, std::string> tensor_name;  // ONNX tensor -> spec name
  std::vector<std::string> spec_inputs;            // ONNX tensors, in order of first use
  std::set<std::string> is_spec_input;
  for (const auto& [i, d] : drafts_)
    for (const std::string& t : d.layer.inputs)
      if (!draft_producing(t) && is_spec_input.insert(t).second) spec_inputs.push_back(t);
  for (const std::string& t : spec_inputs)
    if (g_.is_graph_input(t)) tensor_name[t] = names.allocate(t, "input");
  for (const std::string& t : spec_inputs)
    if (const auto e = edge_input_.find(t); e != edge_input_.end())
      tensor_name[t] = names.allocate(e->second, "input");
  // A layer computing a graph output is named after it (what the user asks `run` for), and
  // named first, so that no node's name takes it.
  std::map<int, std::string> layer_name;
  for (const bool graph_output : {true, false})
    for (const auto& [i, d] : drafts_) {
      if (c_.reaches_graph_output(d.output) != graph_output) continue;
      const std::string fallback = ascii_lower(g_.node(i).op_type()) + "_" + std::to_string(i);
      layer_name[i] =
          names.allocate(graph_output ? output_name(d.output) : g_.node(i).name(), fallback);
      tensor_name[d.output] = layer_name[i];
    }
  for (const std::string& t : spec_inputs)
    if (!tensor_name.count(t)) tensor_name[t] = names.allocate(t, "input");
  // Outputs read in another layout than the layers compute in: the layer is renamed, and a
  // transpose of its output takes its name (the output's name does not depend on the layout).
  std::map<int, std::string> relaid_output;  // layer node -> the transpose's (user's) name
  for (const auto& [i, d] : drafts_)
    if (is_spec_output(d) && relayout(d.layer.output_shape_full(), io_channels_last(d))) {
      relaid_output[i] = layer_name[i];
      layer_name[i] =
          names.allocate(layer_name[i] + "_" + ascii_lower(compute_layout(d)), layer_name[i]);
      tensor_name[d.output] = layer_name[i];
    }

  Model m;
  m.name = res.model_name;
  m.file = res.model_name + ".json";
  ojson report_inputs = ojson::array(), report_layers = ojson::array();
  std::map<std::string, std::string> relaid_input;   // ONNX tensor -> its transpose's name
  std::map<std::string, TensorLayout> folded_input;  // ONNX tensor -> the layout convs read
  for (const std::string& t : spec_inputs) {
    const TensorType ty = *c_.type(t);
    const bool io_last = io_channels_last(t);
    ModelInput in;
    in.name = tensor_name[t];
    in.layout = {io_last && ty.shape.size() >= 3, static_cast<int>(ty.shape.size()) - 2};
    in.shape = io_last ? channels_last_order(ty.shape) : ty.shape;
    if (ty.elem_type == onnx::TensorProto::INT8) in.dtype = DType::I8;
    if (ty.elem_type == onnx::TensorProto::UINT8) in.dtype = DType::U8;
    ojson rep = {{"name", tensor_name[t]}, {"onnx_tensor", t}, {"produced_by", nullptr}};
    if (g_.is_graph_input(t)) {
      in.description = "ONNX graph input '" + t + "'";
    } else if (const auto e = edge_input_.find(t); e != edge_input_.end()) {
      in.description = "ONNX graph input '" + e->second + "' (" + in.layout.name() +
                       "; its Transpose to channels first is this layout)";
      rep["onnx_tensor"] = e->second;
    } else {
      const int prod = g_.producer(t);
      if (prod < 0 || role_[static_cast<size_t>(prod)] != Role::Left)
        throw ImportError(p_.label + ": " + kInternalError + ": tensor '" + t +
                          "' read by a layer has no producer left to the caller");
      in.produced_by = "ONNX node '" + g_.node(prod).name() + "' (" + g_.node(prod).op_type() + ")";
      in.description = "ONNX tensor '" + t + "'";
      rep["produced_by"] = node_ref(prod, "left");
    }
    rep["layout"] = in.layout.name();
    // Unit spatial dims too: the layers reading an input take it in their own layout (an
    // output's [N, C, 1, 1] needs no transpose: the user reads it in ONNX's shape). Convs that
    // read it at no cost read it as it is, the change of layout folded into their kernels
    // (a torch export's stem); else a transpose layer converts it.
    const bool other_layout = ty.shape.size() >= 3 && io_last != channels_last_;
    if (other_layout && only_cheap_relayout_readers(t)) {
      folded_input[t] = in.layout;
    } else if (other_layout) {
      Layer tr = transpose_layer(
          names.allocate(in.name + "_" + ascii_lower(compute_name(ty)), in.name + "_relaid"), in,
          channels_last_, input_quant(t));
      tr.description = "input '" + in.name + "' (" + in.layout.name() +
                       ", as the model takes it) in " + tr.layout.name() +
                       ", the layout the layers compute in";
      relaid_input[t] = tr.name;
      report_layers.push_back({{"name", tr.name},
                               {"op", tr.op_name},
                               {"input", in.name},
                               {"output_shape", tr.output_shape_full()},
                               {"onnx_nodes", ojson::array()},
                               {"output_tensor", t}});
      m.layers.push_back(std::move(tr));
    }
    m.inputs.push_back(std::move(in));
    report_inputs.push_back(rep);
  }

  ojson report_outputs = ojson::array();
  std::set<std::string> placed;  // layer names already in m.layers
  for (const auto& [i, d] : drafts_) {
    const std::string& name = layer_name[i];
    Layer l = d.layer;
    l.name = name;
    l.layout.channels_last = channels_last_;
    l.inputs.clear();
    for (const std::string& t : d.layer.inputs) {
      const auto relaid = relaid_input.find(t);
      l.inputs.push_back(relaid != relaid_input.end() ? relaid->second : tensor_name.at(t));
      if (const auto folded = folded_input.find(t); folded != folded_input.end()) {
        l.relayout_input = true;
        l.input_layout = folded->second;
      }
      if (const Draft* src = draft_producing(t); src && !placed.count(tensor_name.at(t)))
        throw ImportError(p_.label + ": " + node_label(g_.node(i), i) + ": input '" + t +
                          "' comes from " + node_label(g_.node(src->node), src->node) +
                          ", which is later in the graph; expected the nodes in topological "
                          "order");
    }
    if (l.has_weights()) {  // named after the layer the user sees (a relaid output's name)
      const auto relaid = relaid_output.find(i);
      add_weight_files(d, relaid != relaid_output.end() ? relaid->second : name, l, res.weights);
    }
    l.description = layer_description(d);
    placed.insert(name);

    ojson nodes = ojson::array();
    if (d.pad_node >= 0) nodes.push_back(node_ref(d.pad_node, "pad"));
    if (d.crop_node >= 0) nodes.push_back(node_ref(d.crop_node, "crop"));
    const auto affine = affine_nodes_.find(i);
    if (affine != affine_nodes_.end())
      for (int a : affine->second)
        if (a < i) nodes.push_back(node_ref(a, "affine"));
    for (int p : d.part_nodes) nodes.push_back(node_ref(p, "layer"));
    nodes.push_back(node_ref(i, edge_chain_.count(i) ? "layout" : "layer"));
    if (affine != affine_nodes_.end())
      for (int a : affine->second)
        if (a > i) nodes.push_back(node_ref(a, "affine"));
    if (d.act_node >= 0) nodes.push_back(node_ref(d.act_node, "activation"));
    if (const auto m = gating_mul_.find(i); m != gating_mul_.end())
      nodes.push_back(node_ref(m->second, "activation"));
    for (int q : d.quant_nodes) nodes.push_back(node_ref(q, "quantization"));
    const ojson input = l.is_join() ? ojson(l.inputs) : ojson(l.inputs[0]);
    report_layers.push_back({{"name", name},
                             {"op", l.op_name},
                             {"input", input},
                             {"output_shape", l.output_shape_full()},
                             {"onnx_nodes", nodes},
                             {"output_tensor", d.output}});
    if (p_.relaid.count(d.output))  // a channels-last stretch's, computed channels first
      report_layers.back()["output_tensor_layout"] = "channels_last";
    check_inferred_shape(d, name, res.warnings);

    // An output: a graph output, read by a node left to the caller, or read by nobody.
    const std::vector<int> readers = c_.readers(d.output);
    const bool graph_out = c_.reaches_graph_output(d.output);
    std::vector<std::string> caller_readers;
    for (int r : readers)
      if (role_[static_cast<size_t>(r)] == Role::Left)
        caller_readers.push_back("ONNX node '" + g_.node(r).name() + "' (" + g_.node(r).op_type() +
                                 ")");
    const bool caller_reads = !caller_readers.empty();
    const std::string read_by = fmt::format("{}", fmt::join(caller_readers, ", "));
    if (!is_spec_output(d)) {
      m.layers.push_back(std::move(l));
      continue;
    }
    std::string out_name = name;
    if (const auto relaid = relaid_output.find(i); relaid != relaid_output.end()) {
      ModelInput computed{name, "", "", l.layout, l.output_dtype(), l.output_shape_full()};
      Layer tr = transpose_layer(relaid->second, computed, io_channels_last(d),
                                 l.op == Op::Dequantize ? std::nullopt : l.quant);
      tr.description = "layer '" + name + "''s output in " + tr.layout.name() +
                       ", the layout the model gives it";
      report_layers.push_back({{"name", tr.name},
                               {"op", tr.op_name},
                               {"input", name},
                               {"output_shape", tr.output_shape_full()},
                               {"onnx_nodes", ojson::array()},
                               {"output_tensor", d.output}});
      m.layers.push_back(std::move(l));
      out_name = tr.name;
      m.layers.push_back(std::move(tr));
    } else {
      m.layers.push_back(std::move(l));
    }
    Layer& out = m.layers.back();
    out.read_by = read_by;
    m.outputs.push_back(out_name);
    if (const auto view = output_view(d, out.output_shape_full(), io_channels_last(d)))
      m.output_shapes[out_name] = *view;
    report_outputs.push_back({{"name", out_name},
                              {"onnx_tensor", output_name(d.output)},
                              {"layout", out.layout.name()},
                              {"graph_output", graph_out},
                              {"read_by_caller", caller_reads}});
  }
  if (m.outputs.empty())
    throw ImportError(p_.label +
                      ": no layer's output is a graph output, read by a node left "
                      "to the caller or unread; expected at least one (the spec "
                      "would have no outputs)");

  ojson left = ojson::array(), absorbed = ojson::array();
  std::set<std::string> stretches_left;  // channels-last stretches a node left to the caller sees
  std::string first_left;
  for (int i = 0; i < g_.num_nodes(); ++i) {
    const onnx::NodeProto& node = g_.node(i);
    if (role_[i] == Role::Left) {
      for (const auto* list : {&node.input(), &node.output()})
        for (const std::string& t : *list)
          if (const auto r = p_.relaid.find(t); r != p_.relaid.end()) {
            if (first_left.empty())
              first_left = p_.label + ": " + node_label(node, i) + ": left to the caller (" +
                           reason_[i] + "), but tensor '" + t +
                           "' is one padfold computes channels first from a channels-last "
                           "stretch of the file; the caller would compute it otherwise";
            stretches_left.insert(r->second);
          }
      res.left_to_caller.push_back({i, node.name(), node.op_type(), reason_[i]});
      left.push_back({{"name", node.name()},
                      {"op_type", node.op_type()},
                      {"index", i},
                      {"reason", reason_[i]}});
      if (std::string from = split_part_origin(node); !from.empty())
        left.back()["written_as"] = from;
    } else if (role_[i] == Role::Bypassed || role_[i] == Role::Constant ||
               role_[i] == Role::LayoutEdge || role_[i] == Role::Quantization) {
      absorbed.push_back(node_ref(i, role_[i] == Role::Bypassed       ? "bypassed"
                                     : role_[i] == Role::Constant     ? "constant"
                                     : role_[i] == Role::Quantization ? "quantization"
                                                                      : "layout"));
    }
  }

  if (!stretches_left.empty()) throw StretchLeftToCaller(first_left, stretches_left);

  const std::string file = std::filesystem::path(p_.label).filename().string();
  std::string producer = p_.model.producer_name();
  if (!p_.model.producer_version().empty()) producer += " " + p_.model.producer_version();
  m.description = "Imported by padfold import from " + file + " (ONNX opset " +
                  std::to_string(g_.opset()) + (producer.empty() ? "" : ", producer " + producer) +
                  ")";
  const ojson same_as_inputs = outputs_that_are_inputs(res.warnings);
  res.spec = to_spec_json(m);
  if (auto w = channels_first_cost_warning(m); w && o_.layout == ImportLayout::ChannelsFirst)
    res.warnings.push_back(*w);
  res.model = std::move(m);
  res.report = {{"format", "padfold-import"},
                {"format_version", 1},
                {"source", file},
                {"opset", g_.opset()},
                {"ir_version", p_.model.ir_version()},
                {"producer", producer},
                {"model", res.model_name},
                {"spec", res.model_name + ".json"},
                {"nodes", g_.num_nodes()},
                {"layers", report_layers},
                {"inputs", report_inputs},
                {"outputs", report_outputs},
                {"outputs_that_are_inputs", same_as_inputs},
                {"absorbed", absorbed},
                {"left_to_caller", left},
                {"warnings", res.warnings}};
  return res;
}

std::optional<std::vector<int64_t>> Importer::output_view(const Draft& d,
                                                          const std::vector<int64_t>& shape,
                                                          bool io_last) const {
  auto ty = g_.type(output_name(d.output));
  // Without shape inference's (a com.microsoft op), the drafter's, else the draft's own: an ONNX
  // tensor channels first.
  if (!ty || !ty->is_static())
    ty = TensorType{0, true, d.onnx_shape ? *d.onnx_shape : d.layer.output_shape_full()};
  if (ty && ty->is_static() && ty->shape != shape &&
      (ty->shape.size() != shape.size() || !io_last) &&
      without_unit_dims(ty->shape) == without_unit_dims(shape))
    return ty->shape;
  return std::nullopt;
}

std::string Importer::output_name(const std::string& t) const {
  std::vector<std::string> todo = {t};
  for (size_t k = 0; k < todo.size(); ++k) {  // breadth first: the nearest graph output
    if (g_.is_graph_output(todo[k])) return todo[k];
    for (int r : g_.consumers(todo[k]))
      if (c_.bypassed(r) && g_.node(r).output_size() > 0) todo.push_back(g_.node(r).output(0));
  }
  return t;
}

ojson Importer::outputs_that_are_inputs(std::vector<std::string>& warnings) const {
  ojson out = ojson::array();
  for (int k = 0; k < g_.graph().output_size(); ++k) {
    const std::string& name = g_.graph().output(k).name();
    const std::string t = c_.canon(name);
    if (!g_.is_graph_input(t) || c_.constant(t)) continue;
    out.push_back({{"onnx_tensor", name}, {"model_input", t}});
    warnings.push_back("graph output '" + name + "' is the model input '" + t +
                       "' itself: no layer computes it (the caller has it)");
  }
  return out;
}

std::vector<int64_t> Importer::channels_last_order(std::vector<int64_t> shape) {
  if (shape.size() < 3) return shape;
  std::rotate(shape.begin() + 1, shape.begin() + 2, shape.end());
  return shape;
}

bool Importer::io_channels_last(const std::string& input) const {
  if (o_.io_layout != ImportLayout::Auto) return o_.io_layout == ImportLayout::ChannelsLast;
  return edge_input_.count(input) != 0;
}

bool Importer::io_channels_last(const Draft& d) const {
  if (o_.io_layout != ImportLayout::Auto) return o_.io_layout == ImportLayout::ChannelsLast;
  // Canonical now: a unit reshape between the layer and the Transpose stands for its input.
  return std::any_of(edge_outputs_.begin(), edge_outputs_.end(),
                     [&](const std::string& t) { return c_.canon(t) == c_.canon(d.output); });
}

bool Importer::only_cheap_relayout_readers(const std::string& t) const {
  bool read = false;
  for (const auto& [i, d] : drafts_)
    for (const std::string& in : d.layer.inputs) {
      if (in != t) continue;
      if (!relayout_is_free(d.layer)) return false;
      read = true;
    }
  return read;
}

bool Importer::relayout(const std::vector<int64_t>& shape, bool io_last) const {
  return shape.size() >= 3 && io_last != channels_last_ && !detail::unit_spatial(shape);
}

std::string Importer::compute_layout(const Draft& d) const {
  return TensorLayout{channels_last_, d.layer.spatial_dims}.name();
}

std::string Importer::compute_name(const TensorType& ty) const {
  return TensorLayout{channels_last_, static_cast<int>(ty.shape.size()) - 2}.name();
}

bool Importer::is_spec_output(const Draft& d) const {
  if (c_.reaches_graph_output(d.output)) return true;
  const std::vector<int> readers = c_.readers(d.output);
  if (readers.empty()) return true;
  for (int r : readers)
    if (role_[static_cast<size_t>(r)] == Role::Left) return true;
  return false;
}

std::optional<LayerQuant> Importer::input_quant(const std::string& t) const {
  for (const auto& [i, d] : drafts_) {
    const Layer& l = d.layer;
    if (!l.quant) continue;
    for (size_t k = 0; k < l.inputs.size() && k < l.quant->inputs.size(); ++k)
      if (l.inputs[k] == t) {
        LayerQuant q;
        q.requantize = l.quant->requantize;
        q.output = l.quant->inputs[k];
        return q;
      }
  }
  return std::nullopt;
}

Layer Importer::transpose_layer(const std::string& name, const ModelInput& in, bool to_last,
                                const std::optional<LayerQuant>& quant) {
  Layer l;
  l.name = name;
  l.op = Op::Transpose;
  l.op_name = "transpose";
  l.dtype = in.dtype;
  l.inputs = {in.name};
  const size_t rank = in.shape.size();
  l.perm = to_last ? channels_last_perm(rank) : channels_first_perm(rank);
  std::optional<QuantParams> q;
  if (quant) {
    q = quant->output;
    LayerQuant& lq = l.quant.emplace();
    lq.requantize = quant->requantize;
    lq.inputs = {quant->output};
    lq.output = quant->output;
  }
  resolve_layer(
      l, {TensorSource{in.name, "tensor '" + in.name + "'", in.layout, in.shape, in.dtype, q}});
  return l;
}

void Importer::check_inferred_shape(const Draft& d, const std::string& name,
                                    std::vector<std::string>& warnings) const {
  for (const std::string& t : {g_.node(d.node).output(0), d.output}) {
    const detail::OutputShape s = detail::check_output_shape(c_, d, t);
    if (!s.refuse.empty())
      throw ImportError(p_.label + ": " + kInternalError + ": layer '" + name + "' (" +
                        node_label(g_.node(d.node), d.node) + "): " + s.refuse);
    if (!s.note.empty()) {
      warnings.push_back("layer '" + name + "' (" + node_label(g_.node(d.node), d.node) +
                         "): " + s.note + "; padfold's is used");
      return;
    }
  }
}

}  // namespace padfold::onnx_import::detail
