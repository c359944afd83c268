#include "frontend/onnx/import.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "frontend/onnx/importer.h"
#include "frontend/onnx/quant_graph.h"

namespace padfold::onnx_import {
namespace detail {

ImportResult Importer::run() {
  const int n = g_.num_nodes();
  role_.assign(static_cast<size_t>(n), Role::Left);
  reason_.assign(static_cast<size_t>(n), "");
  for (int i = 0; i < n; ++i) classify_bypass(i);
  if (detail::is_quantized_graph(g_)) return run_quantized();
  for (int i = 0; i < n; ++i) cancel_transpose_pair(i);
  for (int i = 0; i < n; ++i) mark_edge_affine_chain(i);
  for (int i = 0; i < n; ++i) {  // in topological order: a layer reads through the reshapes
    classify_unit_reshape(i);
    classify_layer(i);
    classify_channel_permutation(i);
    classify_layer_norm(i);
  }
  compose_channel_gathers();
  for (int i = n - 1; i >= 0; --i)  // a crop reading another folds after it
    if (default_domain(g_.node(i)) && g_.node(i).op_type() == "Slice") fold_crop(i);
  for (int i = 0; i < n; ++i)
    if (default_domain(g_.node(i)) && g_.node(i).op_type() == "Pad") fold_pad(i);
  // Affine ops after a conv fold forwards; before one, backwards (a chain folds from the conv).
  for (int i = 0; i < n; ++i)
    if (affine_candidate(i)) fold_affine_after(i);
  for (int i = n - 1; i >= 0; --i)
    if (affine_candidate(i)) fold_affine_before(i);
  for (int i = 0; i < n; ++i)
    if (affine_candidate(i)) affine_as_layer(i);
  for (int i = 0; i < n; ++i)
    if (default_domain(g_.node(i)) && is_activation_op(g_.node(i).op_type())) fuse_activation(i);
  if (o_.layout != ImportLayout::ChannelsFirst)
    fold_layout_edges();
  else
    release_edge_chains("--layout nchw leaves the layout Transpose after it to the caller");
  if (o_.layout != ImportLayout::ChannelsFirst) channels_last_ = true;
  for (int i = 0; i < n; ++i) classify_rest(i);
  for (int i = n - 1; i >= 0; --i) classify_constant(i);
  if (drafts_.empty()) {
    std::string why;
    int shown = 0;
    for (int i = 0; i < n && shown < 5; ++i) {
      if (computes_constant(i)) continue;
      const std::string reason =
          role_[i] == Role::Bypassed ? "bypassed (its output stands for its input)" : reason_[i];
      why += std::string(shown++ ? "; " : "") + quoted_node(g_.node(i)) + ": " + reason;
    }
    throw ImportError("no node of " + p_.label + " is supported: padfold generates " +
                      kGeneratedOps + "; " + why +
                      (n > shown ? fmt::format(" ({} node(s) in all)", n) : ""));
  }
  return assemble();
}

ImportResult Importer::run_quantized() {
  // A Flatten of a global pool's output before a classifier's Gemm stands for its input.
  for (int i = 0; i < g_.num_nodes(); ++i) classify_unit_reshape(i);
  if (o_.layout != ImportLayout::ChannelsFirst) fold_quantized_layout_edges();
  detail::QuantGraph q = detail::recognize_quantized(c_);
  for (const auto& [i, role] : q.absorbed)
    role_[static_cast<size_t>(i)] = std::string(role) == "pad"        ? Role::FoldedPad
                                    : std::string(role) == "bypassed" ? Role::Bypassed
                                                                      : Role::Quantization;
  for (detail::QuantLayer& l : q.layers) {
    const int i = l.draft.node;
    role_[static_cast<size_t>(i)] = Role::Layer;
    for (const int p : l.draft.part_nodes) role_[static_cast<size_t>(p)] = Role::Layer;
    if (l.draft.act_node >= 0) role_[static_cast<size_t>(l.draft.act_node)] = Role::FusedActivation;
    if (l.draft.pad_node >= 0) pad_mode_[i] = l.pad_mode;
    c_.set_layer_shape(l.draft.output, l.draft.layer.output_shape_full());
    draft_by_output_[l.draft.output] = i;
    drafts_.emplace(i, std::move(l.draft));
  }
  if (o_.layout != ImportLayout::ChannelsFirst) channels_last_ = true;
  for (int i = g_.num_nodes() - 1; i >= 0; --i) classify_constant(i);
  for (int i = 0; i < g_.num_nodes(); ++i) classify_rest(i);
  return assemble();
}

void Importer::bypass(int i, const std::string& stands_for) {
  role_[static_cast<size_t>(i)] = Role::Bypassed;
  c_.add_alias(g_.node(i).output(0), stands_for);
  c_.set_bypassed(i);
}

void Importer::classify_bypass(int i) {
  const onnx::NodeProto& node = g_.node(i);
  const bool single_concat = node.op_type() == "Concat" && node.input_size() == 1;
  if (!default_domain(node) ||
      (node.op_type() != "Identity" && node.op_type() != "Dropout" && !single_concat))
    return;
  if (const auto left = detail::bypass_check(c_, i)) {
    reason_[i] = left->reason;
    return;
  }
  bypass(i, node.input(0));
}

void Importer::classify_unit_reshape(int i) {
  const onnx::NodeProto& node = g_.node(i);
  if (g_.folded(i) || !default_domain(node) || !one_of(node.op_type(), kReshapeOps) ||
      node.input_size() < 1 || node.output_size() != 1 || node.input(0).empty() ||
      node.output(0).empty())
    return;
  const auto in = c_.type(c_.canon(node.input(0)));
  const auto out = g_.type(node.output(0));
  if (!in || !in->is_static() || in->shape.size() < 2 || !out || !out->is_static())
    return;  // left to the caller, with classify_rest's reason
  const bool flattened = detail::unit_spatial(in->shape) &&
                         out->shape == std::vector<int64_t>{in->shape[0], in->shape[1]};
  if (!flattened && out->shape != in->shape &&
      !(in->shape.size() >= 3 && !inserted_unit_axes(out->shape, in->shape).empty() &&
        read_by_window_ops_only(node.output(0))))
    return;
  bypass(i, node.input(0));
}

void Importer::classify_layer(int i) {
  const onnx::NodeProto& node = g_.node(i);
  if (g_.folded(i) || !default_domain(node) || !one_of(node.op_type(), kLayerOps)) return;
  auto r = detail::draft_layer(c_, i);
  if (auto* left = std::get_if<Left>(&r)) {
    reason_[i] = left->reason;
    return;
  }
  role_[i] = Role::Layer;
  // Layers reading this one get the shape padfold computes, which can differ from ONNX shape
  // inference's (check_inferred_shape warns).
  set_shape_onwards(node.output(0), std::get<Draft>(r).layer.output_shape_full());
  Draft& d = drafts_.emplace(i, std::move(std::get<Draft>(r))).first->second;
  for (const int f : {d.flatten.transpose, d.flatten.node}) {  // the dense layer reads the map
    if (f < 0) continue;
    unmark_edge_chain(f);
    role_[f] = Role::Bypassed;
    reason_[f].clear();
    c_.add_alias(g_.node(f).output(0), g_.node(f).input(0));
    c_.set_bypassed(f);
  }
  draft_by_output_[d.output] = i;
}

void Importer::classify_channel_permutation(int i) {
  const onnx::NodeProto& node = g_.node(i);
  if (g_.folded(i) || !default_domain(node) || node.op_type() != "Reshape" ||
      role_[i] != Role::Left)
    return;
  if (std::optional<Draft> d = detail::draft_channel_permutation(c_, i)) take_draft(i, *d);
}

void Importer::classify_layer_norm(int i) {
  if (g_.folded(i) || role_[i] != Role::Left) return;
  if (std::optional<Draft> d = detail::draft_layer_norm(c_, i)) take_draft(i, *d);
}

void Importer::take_draft(int i, Draft& d) {
  for (int p : d.part_nodes) {
    role_[p] = Role::Layer;
    reason_[p].clear();
  }
  role_[i] = Role::Layer;
  set_shape_onwards(g_.node(i).output(0), d.layer.output_shape_full());
  draft_by_output_[d.output] = i;
  drafts_.emplace(i, std::move(d));
}

void Importer::compose_channel_gathers() {
  std::map<int, int> draft_of_node;  // a draft's node and part nodes -> the draft's node
  for (const auto& [i, d] : drafts_) {
    draft_of_node[i] = i;
    for (int p : d.part_nodes) draft_of_node[p] = i;
  }
  std::set<int> composed;  // drafts read by gathers that now read their input
  for (auto& [i, d] : drafts_) {
    if (d.layer.op != Op::GatherChannels) continue;
    const Draft* p = draft_producing(d.layer.inputs[0]);
    if (!p || p->layer.op != Op::GatherChannels || p->layer.quantized() != d.layer.quantized())
      continue;
    Draft next = d;
    for (int64_t& k : next.layer.channels) k = p->layer.channels[static_cast<size_t>(k)];
    next.layer.inputs = p->layer.inputs;
    std::vector<int> parts = p->part_nodes;
    parts.push_back(p->node);
    next.part_nodes.insert(next.part_nodes.begin(), parts.begin(), parts.end());
    if (!detail::resolve_draft(c_, next).empty()) continue;
    d = std::move(next);
    composed.insert(p->node);
  }
  for (int p : composed) {
    const Draft& gone = drafts_.at(p);
    if (c_.reaches_graph_output(gone.output)) continue;
    bool all_took_it = true;
    for (int r : c_.readers(gone.output)) {
      if (g_.folded(r)) continue;  // a Shape of it: a constant once the sizes are fixed
      const auto reader = draft_of_node.find(r);
      const auto it = reader == draft_of_node.end() ? drafts_.end() : drafts_.find(reader->second);
      all_took_it = all_took_it && it != drafts_.end() &&
                    it->second.layer.op == Op::GatherChannels &&
                    it->second.layer.inputs[0] != gone.output;
    }
    if (!all_took_it) {  // kept: its nodes are its own, not also part of the gathers after it
      std::set<int> own(gone.part_nodes.begin(), gone.part_nodes.end());
      own.insert(p);
      for (auto& [i, d] : drafts_)
        if (i != p)
          d.part_nodes.erase(std::remove_if(d.part_nodes.begin(), d.part_nodes.end(),
                                            [&](int n) { return own.count(n) != 0; }),
                             d.part_nodes.end());
      continue;
    }
    draft_by_output_.erase(gone.output);
    drafts_.erase(p);
  }
}

Draft* Importer::draft_producing(const std::string& tensor) {
  const auto it = draft_by_output_.find(tensor);
  return it == draft_by_output_.end() ? nullptr : &drafts_.at(it->second);
}

std::string Importer::single_reader(const std::string& tensor, int& reader) const {
  if (c_.reaches_graph_output(tensor)) return "its output '" + tensor + "' is a graph output";
  const std::vector<int> readers = c_.readers(tensor);
  if (readers.size() != 1)
    return "its output '" + tensor + "' is read by " + std::to_string(readers.size()) +
           " nodes; padfold joins it only to a single reader";
  reader = readers[0];
  return "";
}

void Importer::classify_rest(int i) {
  const onnx::NodeProto& node = g_.node(i);
  if (role_[i] != Role::Left || !reason_[i].empty()) return;
  if (computes_constant(i)) return;  // classify_constant
  reason_[i] = default_domain(node) ? not_generated_reason(node.op_type())
                                    : "op " + node.op_type() + " of domain '" + node.domain() +
                                          "': padfold generates ONNX default-domain ops only";
}

bool Importer::computes_constant(int i) const {
  return default_domain(g_.node(i)) && (g_.node(i).op_type() == "Constant" || g_.folded(i));
}

void Importer::classify_constant(int i) {
  if (role_[i] != Role::Left || !reason_[i].empty() || !computes_constant(i)) return;
  const onnx::NodeProto& node = g_.node(i);
  bool absorbed = true;
  for (int r : c_.readers(node.output(0)))
    if (role_[static_cast<size_t>(r)] == Role::Left && r != i) absorbed = false;
  if (absorbed && !c_.reaches_graph_output(node.output(0))) {
    role_[i] = Role::Constant;
    return;
  }
  reason_[i] = "a constant read by nodes left to the caller";
}

void Importer::settle_bypassed() {
  for (int i = 0; i < g_.num_nodes(); ++i) {
    if (role_[i] != Role::Bypassed) continue;
    for (int r : g_.consumers(g_.node(i).output(0)))
      if (role_[static_cast<size_t>(r)] == Role::Left) {
        role_[i] = Role::Left;
        reason_[i] =
            "its output is read by " + quoted_node(g_.node(r)) + ", which is left to the caller";
        break;
      }
  }
}

}  // namespace detail

using detail::ojson;

ImportLayout parse_import_layout(const std::string& text, const std::string& option) {
  std::string t = text;
  for (char& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (t == "auto") return ImportLayout::Auto;
  if (t == "nchw" || t == "channels_first") return ImportLayout::ChannelsFirst;
  if (t == "nhwc" || t == "channels_last") return ImportLayout::ChannelsLast;
  throw std::runtime_error(option + " '" + text +
                           "': expected auto, nchw (channels_first) or nhwc (channels_last)");
}

std::string not_generated_reason(const std::string& op_type) {
  return "padfold does not generate " + op_type + " (it generates " + kGeneratedOps +
         ", folds Pad, BatchNormalization and per-channel affine ops and fuses Relu, Clip, "
         "LeakyRelu, Sigmoid, Tanh, HardSigmoid, HardSwish, Gelu (or its Erf chain), x * "
         "Sigmoid(x) "
         "and x * HardSigmoid(x) into them)";
}

ImportResult import_model(const PreparedModel& prepared, const ImportOptions& options) {
  return detail::Importer(prepared, options).run();
}

Imported prepare_and_import(const onnx::ModelProto& model, const std::vector<InputSize>& sizes,
                            const std::string& label, const ImportOptions& options) {
  std::set<std::string> kept;
  std::vector<std::string> kept_why;
  for (;;) {
    PreparedModel prepared = prepare_model(model, sizes, label, kept);
    try {
      ImportResult result = import_model(prepared, options);
      for (const std::string& why : kept_why) {
        const std::string w = "a channels-last stretch is left as the file has it: " + why;
        result.warnings.push_back(w);
        result.report["warnings"].push_back(w);
      }
      return {std::move(prepared), std::move(result)};
    } catch (const StretchLeftToCaller& e) {
      const size_t before = kept.size();
      kept.insert(e.stretches.begin(), e.stretches.end());
      if (kept.size() == before) throw;  // cannot happen: each round keeps new stretches
      kept_why.push_back(e.what());
    }
  }
}

ImportOutput import_onnx(onnx::ModelProto model, const std::vector<std::string>& inputs,
                         const std::string& label, const ImportOptions& options, bool emit_onnx) {
  std::vector<InputSize> sizes;
  for (const std::string& s : inputs) sizes.push_back(parse_input_size(s));
  ImportOutput out;
  Imported imported = prepare_and_import(model, sizes, label, options);
  out.result = std::move(imported.result);
  out.spec_text = out.result.spec.dump(2) + "\n";
  out.report_text = out.result.report.dump(2) + "\n";
  if (emit_onnx) {
    out.normalized = normalize_auto_pad(imported.prepared);
    if (!out.normalized->model.SerializeToString(&out.onnx_bytes))
      throw ImportError(label + ": cannot serialize the normalized model");
  }
  return out;
}

std::string summary_text(const ImportResult& r) {
  std::string s;
  const ojson& rep = r.report;
  s += fmt::format(
      "{}: ONNX opset {}, {} node(s) -> model '{}': {} layer(s), {} node(s) left to "
      "the caller\n",
      rep["source"].get<std::string>(), rep["opset"].get<int64_t>(), rep["nodes"].get<int64_t>(),
      r.model_name, rep["layers"].size(), r.left_to_caller.size());
  size_t w = 5;
  for (const auto& l : rep["layers"]) w = std::max(w, l["name"].get<std::string>().size());
  for (const auto& l : rep["layers"]) {
    std::string nodes;
    for (const auto& n : l["onnx_nodes"])
      nodes += (nodes.empty() ? "" : " + ") + n["op_type"].get<std::string>() + " '" +
               n["name"].get<std::string>() + "'";
    const std::string in =
        l["input"].is_array() ? l["input"].dump() : l["input"].get<std::string>();
    s += fmt::format("  layer {:<{}}  {:<18} <- {:<20} {}\n", l["name"].get<std::string>(), w,
                     l["op"].get<std::string>(), in, nodes);
  }
  if (!r.left_to_caller.empty()) {
    s += "nodes left to the caller (node name, op type, why):\n";
    for (const LeftNode& n : r.left_to_caller)
      s += fmt::format("  '{}' ({}): {}\n", n.name, n.op_type, n.reason);
  }
  for (const auto& in : rep["inputs"])
    if (!in["produced_by"].is_null())
      s += fmt::format("spec input '{}' is computed by the caller: tensor '{}' of node '{}' ({})\n",
                       in["name"].get<std::string>(), in["onnx_tensor"].get<std::string>(),
                       in["produced_by"]["name"].get<std::string>(),
                       in["produced_by"]["op_type"].get<std::string>());
  for (const auto& w2 : r.warnings) s += "warning: " + w2 + "\n";
  return s;
}

}  // namespace padfold::onnx_import
