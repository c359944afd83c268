#include <algorithm>

#include "frontend/onnx/importer.h"

namespace padfold::onnx_import::detail {

void Importer::fold_quantized_layout_edges() {
  for (int i = 0; i < g_.num_nodes(); ++i) {
    const auto perm = layout_perm(i);
    if (!perm) continue;
    const onnx::NodeProto& node = g_.node(i);
    const std::string x = c_.canon(node.input(0)), y = node.output(0);
    if (c_.readers(x).size() != 1) continue;
    if (*perm == channels_first_perm(perm->size()) && g_.is_graph_input(x) && !c_.constant(x)) {
      const std::vector<int> readers = c_.readers(y);
      const bool dequantized =
          !readers.empty() && std::all_of(readers.begin(), readers.end(), [&](int r) {
            return default_domain(g_.node(r)) && g_.node(r).op_type() == "DequantizeLinear";
          });
      if (!dequantized || g_.is_graph_output(y)) continue;
      edge_input_[y] = x;
    } else if (*perm == channels_last_perm(perm->size()) && g_.is_graph_output(y) &&
               c_.readers(y).empty()) {
      int p = g_.producer(x);
      // Through a reshape of unit axes (TFLite's Conv1D output: [N, C, 1, W] to [N, C, W]),
      // which the quantized graph's recognizer takes as standing for its input or refuses.
      if (p >= 0 && default_domain(g_.node(p)) && one_of(g_.node(p).op_type(), kReshapeOps) &&
          g_.node(p).input_size() >= 1 && c_.readers(g_.node(p).input(0)).size() == 1)
        p = g_.producer(c_.canon(g_.node(p).input(0)));
      if (p < 0 || !default_domain(g_.node(p)) ||
          (g_.node(p).op_type() != "QuantizeLinear" && g_.node(p).op_type() != "DequantizeLinear"))
        continue;
      edge_outputs_.insert(x);
    } else {
      continue;
    }
    role_[i] = Role::LayoutEdge;
    c_.set_bypassed(i);
  }
}

bool Importer::read_by_window_ops_only(const std::string& t) const {
  static const char* const kWindowOps[] = {"Conv",        "ConvTranspose",     "MaxPool",
                                           "AveragePool", "GlobalAveragePool", "GlobalMaxPool"};
  if (g_.is_graph_output(t) || g_.consumers(t).empty()) return false;
  for (int r : g_.consumers(t)) {
    const onnx::NodeProto& n = g_.node(r);
    if (!default_domain(n) || !one_of(n.op_type(), kWindowOps) || n.input(0) != t) return false;
    for (int k = 1; k < n.input_size(); ++k)
      if (n.input(k) == t) return false;
  }
  return true;
}

std::optional<std::vector<int64_t>> Importer::layout_perm(int i) const {
  const onnx::NodeProto& node = g_.node(i);
  if (g_.folded(i) || !default_domain(node) || node.op_type() != "Transpose" ||
      node.input_size() != 1 || node.output_size() != 1 || node.input(0).empty() ||
      node.output(0).empty())
    return std::nullopt;
  const auto perm = c_.at_node(i, [&] { return NodeAttributes(node).find_ints("perm"); });
  if (!perm || perm->size() < 3 || perm->size() > 5) return std::nullopt;
  if (*perm != channels_last_perm(perm->size()) && *perm != channels_first_perm(perm->size()))
    return std::nullopt;
  return perm;
}

void Importer::cancel_transpose_pair(int i) {
  const auto perm = layout_perm(i);
  if (!perm || role_[i] != Role::Left) return;
  const int first = g_.producer(c_.canon(g_.node(i).input(0)));
  if (first < 0) return;
  const auto before = layout_perm(first);
  if (!before || before->size() != perm->size() || *before == *perm) return;
  bypass(i, g_.node(first).input(0));
  const std::string mid = g_.node(first).output(0);
  if (g_.is_graph_output(mid)) return;
  for (int r : g_.consumers(mid))
    if (role_[static_cast<size_t>(r)] != Role::Bypassed) return;
  role_[first] = Role::Bypassed;
  c_.set_bypassed(first);
}

void Importer::fold_layout_edges() {
  std::vector<int> ins, outs;
  bool all = true;
  for (int i = 0; i < g_.num_nodes(); ++i) {
    const auto perm = layout_perm(i);
    if (!perm || role_[i] != Role::Left) continue;
    const onnx::NodeProto& node = g_.node(i);
    const std::string x = c_.canon(node.input(0));
    if (*perm == channels_first_perm(perm->size()) &&
        ((g_.is_graph_input(x) && !c_.constant(x)) || edge_chain_.count(i)))
      ins.push_back(i);
    else if (*perm == channels_last_perm(perm->size()) && g_.is_graph_output(node.output(0)) &&
             c_.readers(node.output(0)).empty() && draft_producing(x))
      outs.push_back(i);
  }
  std::set<std::string> edge_inputs;
  std::vector<int> edge_readers = ins;  // an affine chain's first node reads the input
  for (int i : ins) {
    edge_inputs.insert(edge_source(i));
    if (const auto chain = edge_chain_.find(i); chain != edge_chain_.end())
      edge_readers.push_back(chain->second.front());
  }
  for (const auto& [i, d] : drafts_)
    for (const std::string& t : d.layer.inputs)
      if (g_.is_graph_input(t)) all = false;  // read as it is, channels first
  for (const std::string& x : edge_inputs)
    for (int r : c_.readers(x))
      if (std::find(edge_readers.begin(), edge_readers.end(), r) == edge_readers.end()) all = false;
  // An output with unit spatial dims (a classifier's scores) is the same in either layout.
  std::set<std::string> edge_outputs;
  for (int i : outs) edge_outputs.insert(g_.node(i).output(0));
  for (const auto& [i, d] : drafts_)
    if (c_.reaches_graph_output(d.output)) {
      if (detail::unit_spatial(d.layer.output_shape_full()))
        edge_outputs.insert(d.output);
      else
        all = false;
    }
  for (int k = 0; k < g_.graph().output_size(); ++k)
    if (!edge_outputs.count(c_.canon(g_.graph().output(k).name()))) all = false;
  if (ins.empty() && outs.empty()) return;
  if (!all) {
    for (int i : ins) reason_[i] = kEdgeNotFolded;
    for (int i : outs) reason_[i] = kEdgeNotFolded;
    release_edge_chains("the layout Transpose after it is not folded");
    return;
  }
  for (int i : ins) {
    if (const auto chain = edge_chain_.find(i); chain != edge_chain_.end()) {
      fold_edge_affine_chain(i, chain->second);
      continue;
    }
    role_[i] = Role::LayoutEdge;
    edge_input_[g_.node(i).output(0)] = c_.canon(g_.node(i).input(0));
  }
  for (int i : outs) {
    role_[i] = Role::LayoutEdge;
    c_.set_bypassed(i);  // its input reaches the graph output: a model output
    edge_outputs_.insert(c_.canon(g_.node(i).input(0)));
  }
  channels_last_ = true;
}

void Importer::set_shape_onwards(const std::string& t, const std::vector<int64_t>& shape) {
  c_.set_layer_shape(t, shape);
  const auto onnx_shape = g_.type(t);
  for (int r : g_.consumers(t)) {
    const onnx::NodeProto& n = g_.node(r);
    if (!default_domain(n) || n.output_size() < 1 || n.output(0).empty()) continue;
    const bool unary = is_activation_op(n.op_type()) || n.op_type() == "Identity" ||
                       n.op_type() == "Dropout" || n.op_type() == "BatchNormalization";
    // A binary op keeps the shape where ONNX says it does (no broadcasting past it).
    const auto out = g_.type(n.output(0));
    const bool same = one_of(n.op_type(), kAffineOps) && onnx_shape && out &&
                      onnx_shape->has_shape && out->has_shape && onnx_shape->shape == out->shape;
    if (unary || same) set_shape_onwards(n.output(0), shape);
  }
}

void Importer::mark_edge_affine_chain(int t) {
  const auto perm = layout_perm(t);
  if (!perm || *perm != channels_first_perm(perm->size()) || role_[t] != Role::Left) return;
  std::vector<int> chain;
  int next = t;
  std::string x = c_.canon(g_.node(t).input(0));
  while (!g_.is_graph_input(x)) {
    const int p = g_.producer(x);
    if (p < 0 || role_[p] != Role::Left || !default_domain(g_.node(p)) ||
        !one_of(g_.node(p).op_type(), kAffineOps) || c_.reaches_graph_output(x) ||
        c_.readers(x) != std::vector<int>{next})
      return;
    const auto info = detail::affine_node(c_, p, true);
    if (std::holds_alternative<Left>(info)) return;
    chain.insert(chain.begin(), p);
    next = p;
    x = std::get<detail::AffineNode>(info).input;
  }
  const auto out = g_.type(g_.node(t).output(0));
  if (chain.empty() || c_.constant(x) || !out || !out->is_static()) return;
  for (int p : chain) role_[p] = Role::FoldedAffine;
  edge_chain_[t] = chain;
}

void Importer::release_edge_chains(const std::string& why) {
  for (const auto& [t, chain] : edge_chain_)
    for (int p : chain) {
      role_[p] = Role::Left;
      reason_[p] = "not folded: it is on a model input channels last, and " + why;
    }
  edge_chain_.clear();
}

void Importer::unmark_edge_chain(int t) {
  const auto chain = edge_chain_.find(t);
  if (chain == edge_chain_.end()) return;
  for (int p : chain->second) role_[p] = Role::Left;
  edge_chain_.erase(chain);
}

std::string Importer::edge_source(int t) const {
  const auto chain = edge_chain_.find(t);
  if (chain == edge_chain_.end()) return c_.canon(g_.node(t).input(0));
  return std::get<detail::AffineNode>(detail::affine_node(c_, chain->second.front(), true)).input;
}

void Importer::fold_edge_affine_chain(int t, const std::vector<int>& chain) {
  const std::string out = g_.node(t).output(0), raw = out + ":model_input";
  c_.set_layer_shape(raw, g_.type(out)->shape);
  std::optional<detail::Affine> combined;
  for (int p : chain) {
    const detail::Affine a = std::get<detail::AffineNode>(detail::affine_node(c_, p, true)).affine;
    combined = combined ? combined->then(a) : a;
  }
  Draft d = affine_draft(t, raw, out);
  if (const std::string why = detail::resolve_draft(c_, d); !why.empty())
    throw ImportError(p_.label + ": " + kInternalError + ": the affine ops before " +
                      quoted_node(g_.node(t)) + ": " + why);
  role_[t] = Role::Layer;
  after_[t] = *combined;
  affine_nodes_[t] = chain;
  edge_input_[raw] = edge_source(t);
  draft_by_output_[out] = t;
  drafts_.emplace(t, std::move(d));
}

}  // namespace padfold::onnx_import::detail
