#include <cmath>
#include <limits>

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
  Draft d = detail::draft_activation(c_, i, a.input, ty->shape.size(), a.activation);
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

std::string fold_pad_into(const Context& c, Draft& d, int pad_node, const PadInfo& p) {
  const onnx::NodeProto& rn = c.graph().node(d.node);
  const std::string reader = "'" + rn.name() + "' (" + rn.op_type() + ")";
  const Layer& l = d.layer;
  if (l.op == Op::ConvTranspose)
    return "its reader " + reader +
           " is a ConvTranspose, whose pads crop its output: a Pad before it is no border";
  const WindowOp op = l.op == Op::Conv      ? WindowOp::Conv
                      : l.op == Op::MaxPool ? WindowOp::MaxPool
                                            : WindowOp::AvgPool;
  const auto folded =
      fold_explicit_pad(p.pad, {op, &l.pads, l.border, l.count_include_pad, l.border_value});
  if (const auto* why = std::get_if<std::string>(&folded))
    return "its reader " + reader + " " + *why;
  const FoldedPad& f = std::get<FoldedPad>(folded);
  Draft nd = d;
  nd.layer.inputs[0] = p.input;
  std::vector<int64_t> pads = f.before;
  pads.insert(pads.end(), f.after.begin(), f.after.end());
  nd.layer.border = f.border;
  nd.layer.border_value = f.border_value;
  nd.layer.count_include_pad = f.count_include_pad;
  std::string why;
  try {
    nd.layer.padding = explicit_padding(pads, l.spatial_dims);
    why = resolve_draft(c, nd);
  } catch (const PaddingError& e) {
    why = e.what();
  }
  if (!why.empty()) return "folded into " + reader + ", padfold refuses it: " + why;
  const std::vector<int64_t> shape = nd.layer.output_shape_full();
  if (shape != l.output_shape_full())
    return "folding it into " + reader + " gives the output " + shape_text(shape) + " instead of " +
           shape_text(l.output_shape_full()) +
           " (ceil_mode counts from the input, not the padded tensor)";
  (p.mode == "crop" ? nd.crop_node : nd.pad_node) = pad_node;
  d = std::move(nd);
  return "";
}

std::variant<PadInfo, Left> pad_info(const Context& c, int i) {
  const onnx::NodeProto& n = c.graph().node(i);
  if (input_of(n, 0).empty()) c.fail(i, "expected input data");
  PadInfo p;
  p.input = c.canon(n.input(0));
  TensorType xt;
  if (std::string why = check_data_input(c, p.input, xt); !why.empty()) return Left{why};
  const NodeAttributes a = c.at_node(i, [&] { return NodeAttributes(n); });
  p.mode = c.at_node(i, [&] { return a.get_string("mode", "constant"); });
  if (p.mode != "constant" && p.mode != "reflect" && p.mode != "edge")
    c.fail(i, "attribute 'mode': '" + p.mode + "'; expected constant, reflect or edge");
  p.pad.fill = p.mode == "reflect" ? PadFill::Reflect
               : p.mode == "edge"  ? PadFill::Edge
                                   : PadFill::Constant;
  std::vector<int64_t> pads;
  if (c.graph().opset() < 11) {
    pads = c.at_node(i, [&] { return a.get_ints("pads"); });
    p.pad.value = c.at_node(i, [&] { return a.get_float("value", 0.f); });
  } else {
    const std::string t = input_of(n, 1);
    if (t.empty()) c.fail(i, "input 1 (pads) is missing; expected the pads");
    const onnx::TensorProto* v = c.constant(t);
    if (!v) return Left{"its pads '" + t + "' are computed at run time"};
    pads = c.at_node(i, [&] { return to_int64s(*v, "input 1 (pads) '" + t + "'"); });
    bool ok = true;
    const auto value = c.at_node(i, [&] { return scalar_input(c, i, 2, ok); });
    if (!ok) return Left{"its constant_value '" + input_of(n, 2) + "' is computed at run time"};
    p.pad.value = value.value_or(0.f);
  }
  const size_t rank = xt.shape.size();
  if (pads.size() != 2 * rank)
    c.fail(i, "pads " + shape_text(pads) + " have " + std::to_string(pads.size()) +
                  " values; expected " + std::to_string(2 * rank) + " for the rank-" +
                  std::to_string(rank) + " input '" + p.input + "'");
  if (pads[0] || pads[1] || pads[rank] || pads[rank + 1])
    return Left{"its pads " + shape_text(pads) +
                " pad the batch or channel axis; padfold folds spatial pads only"};
  for (size_t k = 2; k < rank; ++k) {
    if (std::abs(pads[k]) > kMaxSize || std::abs(pads[rank + k]) > kMaxSize)
      return Left{"its pads " + shape_text(pads) + " exceed " + std::to_string(kMaxSize)};
    p.pad.before.push_back(pads[k]);
    p.pad.after.push_back(pads[rank + k]);
  }
  if (p.pad.fill == PadFill::Constant && !std::isfinite(p.pad.value))
    return Left{"its constant value is not a finite number"};  // a spec's border value is one
  return p;
}

}  // namespace padfold::onnx_import::detail
