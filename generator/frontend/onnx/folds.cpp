#include "frontend/onnx/importer.h"

namespace padfold::onnx_import::detail {

void Importer::fold_pad(int i) {
  auto info = detail::pad_info(c_, i);
  if (auto* left = std::get_if<Left>(&info)) {
    reason_[i] = "not folded: " + left->reason;
    return;
  }
  const PadInfo& p = std::get<PadInfo>(info);
  const std::string why = try_fold(i, p);
  if (why.empty())
    role_[i] = Role::FoldedPad;
  else
    reason_[i] = "not folded: " + why;
}

void Importer::fold_crop(int i) {
  if (g_.folded(i) || role_[i] != Role::Left) return;  // a constant; a channel Slice's layer
  auto info = detail::crop_info(c_, i);
  if (const auto* left = std::get_if<Left>(&info)) {
    if (!left->reason.empty()) reason_[i] = left->reason;
    return;
  }
  const std::string why = try_fold(i, std::get<PadInfo>(info));
  if (why.empty()) {
    role_[i] = Role::FoldedPad;
    reason_[i].clear();
  } else {
    reason_[i] = "it crops the spatial axes, and is not folded: " + why;
  }
}

std::string Importer::try_fold(int i, const PadInfo& p) {
  const std::string out = g_.node(i).output(0);
  if (c_.reaches_graph_output(out)) return "its output '" + out + "' is a graph output";
  // A crop folded already (a Pad's Slice) passes the fold on to its readers.
  std::vector<int> readers;
  for (std::vector<int> next = c_.readers(out); !next.empty();) {
    const int r = next.back();
    next.pop_back();
    if (role_[static_cast<size_t>(r)] == Role::FoldedPad && g_.node(r).op_type() == "Slice") {
      for (int rr : c_.readers(g_.node(r).output(0))) next.push_back(rr);
    } else {
      readers.push_back(r);
    }
  }
  // Into every reader or none (NASNet pads once for two separable convs): each fold is tried on
  // a copy of the reader's draft, and the copies replace the drafts once all have folded.
  std::vector<Draft> folded;
  for (int r : readers) {
    const auto it = drafts_.find(r);
    const onnx::NodeProto& rn = g_.node(r);
    if (it == drafts_.end() || !it->second.layer.has_window())
      return "its reader " + quoted_node(rn) + " is not a padfold conv or pool";
    Draft d = it->second;
    if (d.layer.op != Op::ConvTranspose && d.layer.inputs[0] != c_.canon(out))
      return "it does not feed input 0 of " + quoted_node(rn);
    if (std::string why = detail::fold_pad_into(c_, d, i, p); !why.empty()) return why;
    folded.push_back(std::move(d));
  }
  if (folded.empty()) return "its output '" + out + "' is read by no node";
  for (Draft& d : folded) {
    if (p.mode != "crop") pad_mode_[d.node] = pad_mode_text(p);
    drafts_.at(d.node) = std::move(d);
  }
  // An affine op before the Pad folds through it into its one reader alone.
  if (readers.size() == 1) folded_into_[i] = readers[0];
  return "";
}

bool Importer::affine_candidate(int i) const {
  return role_[i] == Role::Left && !g_.folded(i) && default_domain(g_.node(i)) &&
         one_of(g_.node(i).op_type(), kAffineOps);
}

void Importer::fold_affine_after(int i) {
  auto info = detail::affine_node(c_, i);
  if (auto* left = std::get_if<Left>(&info)) {
    if (reason_[i].empty()) reason_[i] = "not folded: " + left->reason;  // else a join's
    return;
  }
  reason_[i].clear();  // an Add of a constant is no join, but it may fold
  const detail::AffineNode& a = std::get<detail::AffineNode>(info);
  Draft* d = draft_producing(a.input);
  if (!d || !d->layer.has_weights()) return;  // maybe before a conv
  int r = -1;
  if (std::string why = single_reader(a.input, r); !why.empty()) {
    reason_[i] = "not folded: the input's producer " + quoted_node(g_.node(d->node)) + ": " + why;
    return;
  }
  const auto it = after_.find(d->node);
  after_[d->node] = it == after_.end() ? a.affine : it->second.then(a.affine);
  draft_by_output_.erase(d->output);
  d->output = g_.node(i).output(0);
  draft_by_output_[d->output] = d->node;
  affine_nodes_[d->node].push_back(i);
  role_[i] = Role::FoldedAffine;
}

void Importer::fold_affine_before(int i) {
  auto info = detail::affine_node(c_, i);
  if (std::holds_alternative<Left>(info) || !reason_[i].empty()) return;  // said already
  const detail::AffineNode& a = std::get<detail::AffineNode>(info);
  const std::string out = g_.node(i).output(0);
  int r = -1;
  if (std::string why = single_reader(out, r); !why.empty()) {
    reason_[i] = "not folded: " + why;
    return;
  }
  // A Pad or affine already folded into the conv stands between them.
  for (auto f = folded_into_.find(r); f != folded_into_.end(); f = folded_into_.find(r))
    r = f->second;
  const auto it = drafts_.find(r);
  if (it == drafts_.end() || !it->second.layer.has_weights() ||
      it->second.layer.inputs[0] != c_.canon(out)) {
    reason_[i] = "not folded: neither its input nor its output is a padfold conv's";
    return;
  }
  Draft& d = it->second;
  const auto b = before_.find(r);
  const detail::Affine combined = b == before_.end() ? a.affine : a.affine.then(b->second);
  if (std::string why = detail::folds_before_exactly(d.layer, combined); !why.empty()) {
    reason_[i] = "not folded into " + quoted_node(g_.node(r)) + ": " + why;
    return;
  }
  before_[r] = combined;
  folded_into_[i] = r;
  d.layer.inputs[0] = a.input;
  affine_nodes_[r].insert(affine_nodes_[r].begin(), i);
  role_[i] = Role::FoldedAffine;
}

void Importer::affine_as_layer(int i) {
  auto info = detail::affine_node(c_, i);
  if (std::holds_alternative<Left>(info)) return;
  const detail::AffineNode& a = std::get<detail::AffineNode>(info);
  if (const Draft* d = draft_producing(a.input); d && d->affine_layer) {
    fold_affine_after(i);
    if (role_[i] == Role::FoldedAffine) return;
  }
  Draft d = affine_draft(i, a.input, g_.node(i).output(0));
  if (!detail::resolve_draft(c_, d).empty()) return;  // keeps the folds' reason
  reason_[i].clear();
  role_[i] = Role::Layer;
  set_shape_onwards(d.output, d.layer.output_shape_full());
  after_[i] = a.affine;
  draft_by_output_[d.output] = i;
  drafts_.emplace(i, std::move(d));
}

void Importer::activation_as_layer(int i, const ActInfo& a, const std::string& why_not_fused) {
  reason_[i] = why_not_fused;
  const auto ty = c_.type(a.input);
  if (!ty || !ty->is_static() || ty->shape.size() < 3 || ty->elem_type != onnx::TensorProto::FLOAT)
    return;
  Draft d = affine_draft(i, a.input, g_.node(i).output(0));
  d.layer.padding.written = "valid (" + g_.node(i).op_type() + " alone)";
  d.layer.bias = false;
  d.layer.activation = a.activation;
  d.layer.activation_alpha = a.alpha;
  d.layer.activation_beta = a.beta;
  if (!detail::resolve_draft(c_, d).empty()) return;
  reason_[i].clear();
  role_[i] = Role::Layer;
  set_shape_onwards(d.output, d.layer.output_shape_full());
  draft_by_output_[d.output] = i;
  drafts_.emplace(i, std::move(d));
}

Draft Importer::affine_draft(int i, const std::string& input, const std::string& output) const {
  const auto ty = c_.type(input);
  Draft d;
  d.node = i;
  d.output = output;
  d.affine_layer = true;
  Layer& l = d.layer;
  l.op = Op::Conv;
  l.spatial_dims = static_cast<int>(ty->shape.size()) - 2;
  l.op_name = "conv" + std::to_string(l.spatial_dims) + "d";
  l.layout = {false, l.spatial_dims};
  l.weight_layout.order = "OI" + spatial_letters(l.spatial_dims);
  l.inputs = {input};
  l.out_channels = l.groups = ty->shape[1];
  l.kernel = l.stride = l.dilation = std::vector<int64_t>(static_cast<size_t>(l.spatial_dims), 1);
  l.padding.mode = PadMode::Valid;
  l.padding.written = "valid (" + g_.node(i).op_type() + " per channel)";
  l.bias = true;
  return d;
}

int Importer::gating_mul(int s, const std::string& x) const {
  const std::vector<int> readers = c_.readers(x);
  if (readers.size() != 2 || c_.reaches_graph_output(x)) return -1;
  const int m = readers[0] == s ? readers[1] : readers[0];
  const onnx::NodeProto& mul = g_.node(m);
  const std::string gate = g_.node(s).output(0);
  if (!default_domain(mul) || mul.op_type() != "Mul" || mul.input_size() != 2 ||
      mul.output_size() < 1 || mul.output(0).empty() || role_[m] != Role::Left ||
      c_.readers(gate) != std::vector<int>{m} || c_.reaches_graph_output(gate))
    return -1;
  const std::string a = c_.canon(mul.input(0)), b = c_.canon(mul.input(1));
  return (a == x && b == gate) || (a == gate && b == x) ? m : -1;
}

std::optional<Activation> Importer::gated(const ActInfo& a) {
  if (a.activation == Activation::Sigmoid) return Activation::Silu;
  if (a.activation == Activation::HardSigmoid && a.alpha == 1.f / 6.f && a.beta == 0.5f)
    return Activation::HardSwish;
  return std::nullopt;
}

void Importer::fuse_activation(int i) {
  auto info = detail::act_info(c_, i);
  if (auto* left = std::get_if<Left>(&info)) {
    reason_[i] = "not fused: " + left->reason;
    return;
  }
  const ActInfo& a = std::get<ActInfo>(info);
  Draft* d = draft_producing(a.input);
  if (!d) {
    reason_[i] = "not fused: its input '" + a.input + "' is not the output of a padfold layer";
    return;
  }
  if (d->layer.op != Op::Conv && d->layer.op != Op::ConvTranspose && d->layer.op != Op::Add &&
      d->layer.op != Op::Mul) {
    activation_as_layer(i, a,
                        "not fused: its input comes from " + quoted_node(g_.node(d->node)) +
                            "; padfold fuses activations into convolutions, add and mul only");
    return;
  }
  if (d->act_node >= 0 || d->layer.activation != Activation::None) {
    activation_as_layer(
        i, a,
        "not fused: " + quoted_node(g_.node(d->node)) + " has " +
            (d->act_node >= 0 ? quoted_node(g_.node(d->act_node)) : std::string("its activation")) +
            " fused already (padfold fuses one)");
    return;
  }
  if (const std::optional<Activation> g = gated(a))
    if (const int m = gating_mul(i, a.input); m >= 0) {
      d->layer.activation = *g;
      draft_by_output_.erase(d->output);
      d->output = g_.node(m).output(0);
      draft_by_output_[d->output] = d->node;
      d->act_node = i;
      gating_mul_[d->node] = m;
      role_[i] = role_[m] = Role::FusedActivation;
      reason_[m].clear();
      return;
    }
  int r = -1;
  if (std::string why = single_reader(a.input, r); !why.empty()) {
    activation_as_layer(
        i, a, "not fused: the input's producer " + quoted_node(g_.node(d->node)) + ": " + why);
    return;
  }
  d->layer.activation = a.activation;
  d->layer.activation_alpha = a.alpha;
  d->layer.activation_beta = a.beta;
  draft_by_output_.erase(d->output);
  d->output = g_.node(i).output(0);
  draft_by_output_[d->output] = d->node;
  d->act_node = i;
  role_[i] = Role::FusedActivation;
}

}  // namespace padfold::onnx_import::detail
