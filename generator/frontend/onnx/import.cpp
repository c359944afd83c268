#include "frontend/onnx/import.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "base/identifiers.h"
#include "base/text.h"
#include "frontend/json_text.h"
#include "frontend/layout_cost.h"
#include "frontend/onnx/affine.h"
#include "frontend/onnx/hoist_transposes.h"
#include "frontend/onnx/import_ops.h"
#include "frontend/onnx/names.h"
#include "frontend/onnx/quant_graph.h"
#include "frontend/onnx/split_channels.h"
#include "frontend/spec_writer.h"

namespace padfold::onnx_import {
namespace {

using detail::ActInfo;
using detail::Context;
using detail::Draft;
using detail::Left;
using ojson = nlohmann::ordered_json;
using detail::PadInfo;

enum class Role {
  Left,
  Layer,
  FoldedPad,
  FoldedAffine,
  FusedActivation,
  Bypassed,
  Constant,
  LayoutEdge,
  Quantization  // a QuantizeLinear or DequantizeLinear absorbed into quantized layers
};

const char* const kLayerOps[] = {
    "Conv",          "ConvTranspose", "MaxPool",   "AveragePool", "GlobalAveragePool",
    "GlobalMaxPool", "ReduceMean",    "ReduceMax", "Gemm",        "MatMul",
    "Add",           "Mul",           "Concat",    "Softmax",     "Resize",
    "Upsample",      "Slice"};
// Reshapes that are no op on a tensor with unit spatial dims (classify_unit_reshape).
const char* const kReshapeOps[] = {"Flatten", "Reshape", "Squeeze", "Unsqueeze"};
const char* const kActivationOps[] = {"Relu", "Clip",        "LeakyRelu", "Sigmoid",
                                      "Tanh", "HardSigmoid", "HardSwish", "Gelu"};
const char* const kAffineOps[] = {"BatchNormalization", "Mul", "Add", "Sub", "Div"};

template <size_t N>
bool one_of(const std::string& s, const char* const (&list)[N]) {
  return std::find(std::begin(list), std::end(list), s) != std::end(list);
}

std::string quoted_node(const onnx::NodeProto& n) {
  return "'" + n.name() + "' (" + n.op_type() + ")";
}

std::string pad_mode_text(const PadInfo& p) {
  return p.mode == "constant" ? fmt::format("constant {}", p.pad.value) : p.mode;
}

class Importer {
 public:
  Importer(const PreparedModel& p, const ImportOptions& o)
      : p_(p), o_(o), g_(p.inferred, p.label), c_(g_) {}

  ImportResult run() {
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
      if (default_domain(g_.node(i)) && one_of(g_.node(i).op_type(), kActivationOps))
        fuse_activation(i);
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

 private:
  // A quantized graph: every node becomes part of an int8/uint8 layer (quant_graph.h) or the
  // import fails naming the node; none is left to the caller.
  ImportResult run_quantized() {
    // A Flatten of a global pool's output before a classifier's Gemm stands for its input.
    for (int i = 0; i < g_.num_nodes(); ++i) classify_unit_reshape(i);
    if (o_.layout != ImportLayout::ChannelsFirst) fold_quantized_layout_edges();
    detail::QuantGraph q = detail::recognize_quantized(c_);
    for (const auto& [i, role] : q.absorbed)
      role_[static_cast<size_t>(i)] =
          std::string(role) == "pad" ? Role::FoldedPad : Role::Quantization;
    for (detail::QuantLayer& l : q.layers) {
      const int i = l.draft.node;
      role_[static_cast<size_t>(i)] = Role::Layer;
      if (l.draft.act_node >= 0)
        role_[static_cast<size_t>(l.draft.act_node)] = Role::FusedActivation;
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

  // tf2onnx's layout Transposes at a quantized model's edges (a TFLite model's NHWC integers):
  // an integer graph input's Transpose to channels first read only by DequantizeLinears, and the
  // Transpose to channels last of a graph output, folded as in float graphs (fold_layout_edges):
  // the caller passes and gets the model's own NHWC tensors, and no transpose runs for them.
  void fold_quantized_layout_edges() {
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
        const int p = g_.producer(x);
        if (p < 0 || !default_domain(g_.node(p)) ||
            (g_.node(p).op_type() != "QuantizeLinear" &&
             g_.node(p).op_type() != "DequantizeLinear"))
          continue;
        edge_outputs_.insert(x);
      } else {
        continue;
      }
      role_[i] = Role::LayoutEdge;
      c_.set_bypassed(i);
    }
  }

  // Identity, Dropout and a Concat of one input (torchvision's DenseNet writes one): the output
  // stands for the input.
  void classify_bypass(int i) {
    const onnx::NodeProto& node = g_.node(i);
    const bool single_concat = node.op_type() == "Concat" && node.input_size() == 1;
    if (!default_domain(node) ||
        (node.op_type() != "Identity" && node.op_type() != "Dropout" && !single_concat))
      return;
    if (const auto left = detail::bypass_check(c_, i)) {
      reason_[i] = left->reason;
      return;
    }
    role_[i] = Role::Bypassed;
    c_.add_alias(node.output(0), node.input(0));
    c_.set_bypassed(i);
  }

  // Flatten, Reshape, Squeeze or Unsqueeze whose output is the same memory as its input as padfold
  // holds it, so that its output stands for its input: a tensor with unit spatial dims into [N, C]
  // (before a classifier's Gemm); any tensor into the shape padfold computes for it (tf2onnx's
  // squeeze-and-excite: Squeeze, then Reshape to [N, C, 1, 1] for the 1x1 conv; the Squeeze after
  // a conv1d that tf2onnx writes as a Conv with a unit axis); unit spatial axes added for window
  // ops alone (the Unsqueeze before that Conv: the op is drafted without them, import_ops.cpp's
  // lower_rank).
  void classify_unit_reshape(int i) {
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
    role_[i] = Role::Bypassed;
    c_.add_alias(node.output(0), node.input(0));
    c_.set_bypassed(i);
  }

  // Whether every reader of `t` is a conv or pool reading it as its data input.
  bool read_by_window_ops_only(const std::string& t) const {
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

  // A Transpose's perm when it is a layout change (channels first <-> last) of a rank 3-5 tensor.
  std::optional<std::vector<int64_t>> layout_perm(int i) const {
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

  // A Transpose that undoes the one before it (NHWC -> NCHW -> NHWC, as tf2onnx writes around
  // ops it keeps channels-last): its output stands for the first one's input. The first is
  // bypassed too when the pair is all that reads it.
  void cancel_transpose_pair(int i) {
    const auto perm = layout_perm(i);
    if (!perm || role_[i] != Role::Left) return;
    const int first = g_.producer(c_.canon(g_.node(i).input(0)));
    if (first < 0) return;
    const auto before = layout_perm(first);
    if (!before || before->size() != perm->size() || *before == *perm) return;
    role_[i] = Role::Bypassed;
    c_.add_alias(g_.node(i).output(0), g_.node(first).input(0));
    c_.set_bypassed(i);
    const std::string mid = g_.node(first).output(0);
    if (g_.is_graph_output(mid)) return;
    for (int r : g_.consumers(mid))
      if (role_[static_cast<size_t>(r)] != Role::Bypassed) return;
    role_[first] = Role::Bypassed;
    c_.set_bypassed(first);
  }

  // Layout Transposes at the model's edges (tf2onnx: NHWC -> NCHW after each input, NCHW -> NHWC
  // before each output) become the layout the layers compute in: the spec's inputs and outputs
  // keep the user's NHWC and no transpose runs. Only when every input the layers read and every
  // output has one: padfold computes a model in one layout, without transpose kernels.
  void fold_layout_edges() {
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
               draft_producing(x))
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
        if (std::find(edge_readers.begin(), edge_readers.end(), r) == edge_readers.end())
          all = false;
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
  static constexpr const char* kEdgeNotFolded =
      "a layout Transpose at the model's edge, not folded: padfold folds them when every model "
      "input the layers read and every output has one (it computes in one layout and runs no "
      "transpose kernel)";

  // padfold's shape for a layer's output, and for what elementwise ops make of it (activations,
  // affine ops, Identity: fused, folded or left, their output has the input's shape), so that
  // layers reading through them are drafted with it even where ONNX's shape inference differs.
  void set_shape_onwards(const std::string& t, const std::vector<int64_t>& shape) {
    c_.set_layer_shape(t, shape);
    const auto onnx_shape = g_.type(t);
    for (int r : g_.consumers(t)) {
      const onnx::NodeProto& n = g_.node(r);
      if (!default_domain(n) || n.output_size() < 1 || n.output(0).empty()) continue;
      const bool unary = one_of(n.op_type(), kActivationOps) || n.op_type() == "Identity" ||
                         n.op_type() == "Dropout" || n.op_type() == "BatchNormalization";
      // A binary op keeps the shape where ONNX says it does (no broadcasting past it).
      const auto out = g_.type(n.output(0));
      const bool same = one_of(n.op_type(), kAffineOps) && onnx_shape && out &&
                        onnx_shape->has_shape && out->has_shape && onnx_shape->shape == out->shape;
      if (unary || same) set_shape_onwards(n.output(0), shape);
    }
  }

  void classify_layer(int i) {
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
      role_[f] = Role::Bypassed;
      reason_[f].clear();
      c_.add_alias(g_.node(f).output(0), g_.node(f).input(0));
      c_.set_bypassed(f);
    }
    draft_by_output_[d.output] = i;
  }

  // Reshape -> Transpose -> Reshape permuting the channels (a channel shuffle): a gather_channels
  // layer, drafted at the last Reshape.
  void classify_channel_permutation(int i) {
    const onnx::NodeProto& node = g_.node(i);
    if (g_.folded(i) || !default_domain(node) || node.op_type() != "Reshape" ||
        role_[i] != Role::Left)
      return;
    if (std::optional<Draft> d = detail::draft_channel_permutation(c_, i)) take_draft(i, *d);
  }

  // The decomposed LayerNorm over channels: a layer_norm layer, drafted at its Div.
  void classify_layer_norm(int i) {
    if (g_.folded(i) || role_[i] != Role::Left) return;
    if (std::optional<Draft> d = detail::draft_layer_norm(c_, i)) take_draft(i, *d);
  }

  // A draft of several nodes, at node i: its part nodes are part of the layer.
  void take_draft(int i, Draft& d) {
    for (int p : d.part_nodes) {
      role_[p] = Role::Layer;
      reason_[p].clear();
    }
    role_[i] = Role::Layer;
    set_shape_onwards(g_.node(i).output(0), d.layer.output_shape_full());
    draft_by_output_[d.output] = i;
    drafts_.emplace(i, std::move(d));
  }

  // A gather_channels layer reading another's output reads that one's input, its channels taken
  // through the other's; the other goes where every reader took it (ShuffleNetV2: the shuffle of
  // a concat, then its two halves, become two gathers of the concat).
  void compose_channel_gathers() {
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
        const auto it =
            reader == draft_of_node.end() ? drafts_.end() : drafts_.find(reader->second);
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

  // The draft a tensor comes out of, or null.
  Draft* draft_producing(const std::string& tensor) {
    const auto it = draft_by_output_.find(tensor);
    return it == draft_by_output_.end() ? nullptr : &drafts_.at(it->second);
  }

  // Why a fold or fusion cannot happen, or "".
  std::string single_reader(const std::string& tensor, int& reader) const {
    if (c_.reaches_graph_output(tensor)) return "its output '" + tensor + "' is a graph output";
    const std::vector<int> readers = c_.readers(tensor);
    if (readers.size() != 1)
      return "its output '" + tensor + "' is read by " + std::to_string(readers.size()) +
             " nodes; padfold joins it only to a single reader";
    reader = readers[0];
    return "";
  }

  void fold_pad(int i) {
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

  std::string try_fold(int i, const PadInfo& p) {
    const std::string out = g_.node(i).output(0);
    int r = -1;
    if (std::string why = single_reader(out, r); !why.empty()) return why;
    const auto it = drafts_.find(r);
    const onnx::NodeProto& rn = g_.node(r);
    if (it == drafts_.end() || it->second.layer.is_join())
      return "its reader " + quoted_node(rn) + " is not a padfold conv or pool";
    Draft& d = it->second;
    if (d.layer.op != Op::ConvTranspose && d.layer.inputs[0] != c_.canon(out))
      return "it does not feed input 0 of " + quoted_node(rn);
    if (std::string why = detail::fold_pad_into(c_, d, i, p); !why.empty()) return why;
    folded_into_[i] = r;
    pad_mode_[r] = pad_mode_text(p);
    return "";
  }

  bool affine_candidate(int i) const {
    return role_[i] == Role::Left && !g_.folded(i) && default_domain(g_.node(i)) &&
           one_of(g_.node(i).op_type(), kAffineOps);
  }

  // A BatchNormalization or per-channel Mul/Add/Sub/Div on a conv's output: its output channels'
  // scale and shift, in the weights and bias.
  void fold_affine_after(int i) {
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

  // The same on a conv's input: its input channels' scale in the weights, the shift in the bias
  // where that is exact (detail::folds_before_exactly).
  void fold_affine_before(int i) {
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

  // A per-channel affine op left by the folds (a shift before a zero-padded conv, an input's
  // normalization before a Pad): the depthwise 1x1 conv with its scale as weights and its shift as
  // bias, exact on every pixel. The affine ops after it fold into it as into any conv.
  void affine_as_layer(int i) {
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

  // An activation that fuses into no layer (a pool's output, or a tensor with other readers:
  // Xception's ReLU of a residual sum the next sum reads too) as a layer of its own: the depthwise
  // 1x1 conv of weights one and no bias with the activation fused, which computes act(x) exactly.
  // `why_not_fused` is the node's reason where it cannot be one either.
  void activation_as_layer(int i, const ActInfo& a, const std::string& why_not_fused) {
    reason_[i] = why_not_fused;
    const auto ty = c_.type(a.input);
    if (!ty || !ty->is_static() || ty->shape.size() < 3 ||
        ty->elem_type != onnx::TensorProto::FLOAT)
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

  // The depthwise 1x1 conv (weights ones, the affine folded in as after_) of node `i`, reading
  // `input` (channels first) and producing `output`.
  Draft affine_draft(int i, const std::string& input, const std::string& output) const {
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

  // Affine ops per channel along the last axis between a graph input and its layout Transpose
  // `t` (a Keras model's Rescaling and Normalization, which tf2onnx leaves on the NHWC input):
  // held for fold_layout_edges, which makes them the depthwise 1x1 conv after the edge.
  void mark_edge_affine_chain(int t) {
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

  // The affine chains of edge Transposes that do not fold: left to the caller, saying why.
  void release_edge_chains(const std::string& why) {
    for (const auto& [t, chain] : edge_chain_)
      for (int p : chain) {
        role_[p] = Role::Left;
        reason_[p] = "not folded: it is on a model input channels last, and " + why;
      }
    edge_chain_.clear();
  }

  // The graph input an edge Transpose reads, through its affine chain.
  std::string edge_source(int t) const {
    const auto chain = edge_chain_.find(t);
    if (chain == edge_chain_.end()) return c_.canon(g_.node(t).input(0));
    return std::get<detail::AffineNode>(detail::affine_node(c_, chain->second.front(), true)).input;
  }

  // Edge Transpose `t` with its affine chain: the chain as one depthwise 1x1 conv reading the
  // model input (channels first as the layers see it) and producing the Transpose's output.
  void fold_edge_affine_chain(int t, const std::vector<int>& chain) {
    const std::string out = g_.node(t).output(0), raw = out + ":model_input";
    c_.set_layer_shape(raw, g_.type(out)->shape);
    std::optional<detail::Affine> combined;
    for (int p : chain) {
      const detail::Affine a =
          std::get<detail::AffineNode>(detail::affine_node(c_, p, true)).affine;
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

  // The Mul of x by its own gate: x * sigmoid(x) is SiLU (swish), x * hard_sigmoid(x) with ONNX
  // HardSwish's 1/6 and 1/2 is hard swish (torch.onnx's hardswish below opset 14). The gate `s`
  // on tensor `x`: x and the gate are read by nothing else and the Mul multiplies the two. -1
  // when there is none.
  int gating_mul(int s, const std::string& x) const {
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

  static std::optional<Activation> gated(const ActInfo& a) {
    if (a.activation == Activation::Sigmoid) return Activation::Silu;
    if (a.activation == Activation::HardSigmoid && a.alpha == 1.f / 6.f && a.beta == 0.5f)
      return Activation::HardSwish;
    return std::nullopt;
  }

  void fuse_activation(int i) {
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
      activation_as_layer(i, a,
                          "not fused: " + quoted_node(g_.node(d->node)) + " has " +
                              (d->act_node >= 0 ? quoted_node(g_.node(d->act_node))
                                                : std::string("its activation")) +
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

  void classify_rest(int i) {
    const onnx::NodeProto& node = g_.node(i);
    if (role_[i] != Role::Left || !reason_[i].empty()) return;
    if (computes_constant(i)) return;  // classify_constant
    reason_[i] = default_domain(node) ? not_generated_reason(node.op_type())
                                      : "op " + node.op_type() + " of domain '" + node.domain() +
                                            "': padfold generates ONNX default-domain ops only";
  }

  bool computes_constant(int i) const {
    return default_domain(g_.node(i)) && (g_.node(i).op_type() == "Constant" || g_.folded(i));
  }

  // A Constant, or a node computing one from constants (folded at import), is absorbed where only
  // padfold's layers and other absorbed constants read it. Called last to first, so that a
  // constant's readers are classified before it.
  void classify_constant(int i) {
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

  // A bypassed node or constant whose output a node left to the caller reads is the caller's too.
  void settle_bypassed() {
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

  std::string model_name() const {
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

  std::string node_text(int i) const {
    const onnx::NodeProto& n = g_.node(i);
    return n.op_type() + " '" + n.name() + "'";
  }

  ojson node_ref(int i, const char* role) const {
    ojson j = {{"name", g_.node(i).name()},
               {"op_type", g_.node(i).op_type()},
               {"index", i},
               {"role", role}};
    if (std::string from = split_part_origin(g_.node(i)); !from.empty()) j["written_as"] = from;
    return j;
  }

  std::string layer_description(const Draft& d) const {
    std::string s = "ONNX ";
    if (d.pad_node >= 0) s += node_text(d.pad_node) + " (" + pad_mode_.at(d.node) + ", folded) + ";
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

  ImportResult assemble() {
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
    std::map<int, std::string> layer_name;
    for (const auto& [i, d] : drafts_) {
      layer_name[i] = names.allocate(g_.node(i).name(),
                                     ascii_lower(g_.node(i).op_type()) + "_" + std::to_string(i));
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
        in.produced_by =
            "ONNX node '" + g_.node(prod).name() + "' (" + g_.node(prod).op_type() + ")";
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
          caller_readers.push_back("ONNX node '" + g_.node(r).name() + "' (" +
                                   g_.node(r).op_type() + ")");
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
    for (int i = 0; i < g_.num_nodes(); ++i) {
      const onnx::NodeProto& node = g_.node(i);
      if (role_[i] == Role::Left) {
        for (const auto* list : {&node.input(), &node.output()})
          for (const std::string& t : *list)
            if (p_.relaid.count(t))  // last_axis_regions.h takes only stretches padfold computes
              c_.fail(i, "left to the caller (" + reason_[i] + "), but tensor '" + t +
                             "' is one padfold computes channels first from a channels-last "
                             "stretch of the file; the caller would compute it otherwise");
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

    const std::string file = std::filesystem::path(p_.label).filename().string();
    std::string producer = p_.model.producer_name();
    if (!p_.model.producer_version().empty()) producer += " " + p_.model.producer_version();
    m.description = "Imported by padfold import from " + file + " (ONNX opset " +
                    std::to_string(g_.opset()) +
                    (producer.empty() ? "" : ", producer " + producer) + ")";
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

  // The shape ONNX gives the output that draft d's output is (output_name; where shape inference
  // gives none, the shape the drafter knows ONNX gives it), where it differs from
  // padfold's `shape` (in the layers' layout) by unit dims only: [N, K] after a Flatten, from a
  // Gemm or a ReduceMean's keepdims 0, and (unless --io-layout nhwc asked for channels-last
  // outputs) [N, C, 1, 1] for a channels-last [N, 1, 1, C]. Otherwise the output keeps the layers'
  // layout.
  std::optional<std::vector<int64_t>> output_view(const Draft& d, const std::vector<int64_t>& shape,
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

  // The ONNX tensor a user reads as layer output `t`: `t` if it is a graph output, else the graph
  // output it reaches through bypassed nodes (a Flatten, a folded layout Transpose), else `t`
  // (read by a node left to the caller, or by nothing).
  std::string output_name(const std::string& t) const {
    std::vector<std::string> todo = {t};
    for (size_t k = 0; k < todo.size(); ++k) {  // breadth first: the nearest graph output
      if (g_.is_graph_output(todo[k])) return todo[k];
      for (int r : g_.consumers(todo[k]))
        if (c_.bypassed(r) && g_.node(r).output_size() > 0) todo.push_back(g_.node(r).output(0));
    }
    return t;
  }

  // Graph outputs that are a graph input itself (through bypassed nodes at most): no layer
  // computes them, and the caller has them already. Said in the report and as a warning.
  ojson outputs_that_are_inputs(std::vector<std::string>& warnings) const {
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

  // An ONNX (channels-first) shape in channels-last order.
  static std::vector<int64_t> channels_last_order(std::vector<int64_t> shape) {
    if (shape.size() < 3) return shape;
    std::rotate(shape.begin() + 1, shape.begin() + 2, shape.end());
    return shape;
  }

  // Whether the user's tensor (a spec input's ONNX tensor, or a draft's output) is read or written
  // channels last: as the model file has it (a folded tf2onnx layout Transpose: channels last;
  // any other ONNX tensor channels first) unless --io-layout says otherwise.
  bool io_channels_last(const std::string& input) const {
    if (o_.io_layout != ImportLayout::Auto) return o_.io_layout == ImportLayout::ChannelsLast;
    return edge_input_.count(input) != 0;
  }
  bool io_channels_last(const Draft& d) const {
    if (o_.io_layout != ImportLayout::Auto) return o_.io_layout == ImportLayout::ChannelsLast;
    return edge_outputs_.count(d.output) != 0;
  }

  // Whether every layer that reads tensor `t` reads the other layout at no cost (layout_cost.h).
  bool only_cheap_relayout_readers(const std::string& t) const {
    bool read = false;
    for (const auto& [i, d] : drafts_)
      for (const std::string& in : d.layer.inputs) {
        if (in != t) continue;
        if (!relayout_is_free(d.layer)) return false;
        read = true;
      }
    return read;
  }

  // Whether a tensor of ONNX shape `shape` (channels first) goes through a transpose between the
  // user's layout and the layers': rank 3 to 5, other layouts, and not the same memory in both
  // (spatial dims all 1: an output_shapes view instead).
  bool relayout(const std::vector<int64_t>& shape, bool io_last) const {
    return shape.size() >= 3 && io_last != channels_last_ && !detail::unit_spatial(shape);
  }
  std::string compute_layout(const Draft& d) const {
    return TensorLayout{channels_last_, d.layer.spatial_dims}.name();
  }
  std::string compute_name(const TensorType& ty) const {
    return TensorLayout{channels_last_, static_cast<int>(ty.shape.size()) - 2}.name();
  }

  // A spec output: a graph output, read by a node left to the caller, or read by nobody.
  bool is_spec_output(const Draft& d) const {
    if (c_.reaches_graph_output(d.output)) return true;
    const std::vector<int> readers = c_.readers(d.output);
    if (readers.empty()) return true;
    for (int r : readers)
      if (role_[static_cast<size_t>(r)] == Role::Left) return true;
    return false;
  }

  // An int8/uint8 model input's quantization, as the quantized layers reading it take it (a
  // DequantizeLinear of it made them agree), or none for a float input.
  std::optional<LayerQuant> input_quant(const std::string& t) const {
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

  // The transpose of tensor `in` (a model input, or a layer's output, quantized with `quant`) into
  // channels last or first.
  static Layer transpose_layer(const std::string& name, const ModelInput& in, bool to_last,
                               const std::optional<LayerQuant>& quant = std::nullopt) {
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

  // The layer's weight files, with the affine ops folded into it; a folded shift needs a bias.
  void add_weight_files(const Draft& d, const std::string& name, Layer& l,
                        std::vector<WeightFile>& out) const {
    l.weights_file = "weights/" + name + "_weights.npy";
    if (l.quantized()) {  // int8 weights, int32 bias, as the initializers hold them
      WeightFile w = int_weight_file(l.weights_file, *d.weights, d.node, NpyDType::I8);
      if (!d.dropped_axes.empty()) w.shape = detail::weight_dims(d);
      if (d.dense) w.shape = l.weight_shape();  // B as [K, C] (transB 1): OIHW's order
      if (channels_last_) to_spatial_in_out(w, l);
      out.push_back(std::move(w));
      if (l.bias) {
        l.bias_file = "weights/" + name + "_bias.npy";
        out.push_back(int_weight_file(l.bias_file, *d.bias, d.node, NpyDType::I32));
      }
      return;
    }
    WeightFile w = d.affine_layer ? WeightFile{l.weights_file,
                                               l.weight_shape(),
                                               std::vector<float>(l.out_channels, 1.f),
                                               {},
                                               {}}
                                  : weight_file(l.weights_file, *d.weights, d.node, 1);
    if (!d.dropped_axes.empty()) w.shape = detail::weight_dims(d);  // unit axes: the same data
    WeightFile b{"weights/" + name + "_bias.npy", {l.out_channels}, {}, {}, {}};
    if (d.bias) b = weight_file(b.path, *d.bias, d.node, 2);
    if (d.dense) {
      detail::dense_as_conv(*d.dense, d.flatten.transpose >= 0, d.layer, w.shape, w.data, b.data);
      b.shape = {l.out_channels};
    }
    const auto before = before_.find(d.node), after = after_.find(d.node);
    if (before != before_.end() || after != after_.end()) {
      detail::fold_into_conv(
          d.layer, before == before_.end() ? std::nullopt : std::optional(before->second),
          after == after_.end() ? std::nullopt : std::optional(after->second), w.data, b.data);
      l.bias = true;
    }
    if (channels_last_ && l.op != Op::ConvTranspose) to_spatial_in_out(w, l);
    out.push_back(std::move(w));
    if (l.bias) {
      l.bias_file = b.path;
      out.push_back(std::move(b));
    }
  }

  // ONNX's O, I, spatial... weights as spatial..., I, O (HWIO-style): the layout padfold's
  // channels-last schedules read fastest (2-6x on 3x3 and 1x1 convs than OIHW-style, measured
  // with padfold bench on an AVX-512 host).
  static void to_spatial_in_out(WeightFile& w, Layer& l) {
    const size_t o = static_cast<size_t>(w.shape[0]), i = static_cast<size_t>(w.shape[1]);
    size_t taps = 1;
    for (size_t k = 2; k < w.shape.size(); ++k) taps *= static_cast<size_t>(w.shape[k]);
    const auto permuted = [&](const auto& values) {
      std::remove_const_t<std::remove_reference_t<decltype(values)>> data(values.size());
      for (size_t a = 0; a < o; ++a)
        for (size_t b = 0; b < i; ++b)
          for (size_t t = 0; t < taps; ++t)
            data[(t * i + b) * o + a] = values[(a * i + b) * taps + t];
      return data;
    };
    if (!w.data.empty()) w.data = permuted(w.data);
    if (!w.ints.empty()) w.ints = permuted(w.ints);
    std::vector<int64_t> shape(w.shape.begin() + 2, w.shape.end());
    shape.push_back(w.shape[1]);
    shape.push_back(w.shape[0]);
    w.shape = std::move(shape);
    l.weight_layout.order = spatial_letters(l.spatial_dims) + "IO";
  }

  WeightFile int_weight_file(const std::string& path, const onnx::TensorProto& t, int node,
                             NpyDType dtype) const {
    const std::vector<int64_t> v =
        c_.at_node(node, [&] { return to_int64s(t, "'" + t.name() + "'"); });
    WeightFile w{path, {t.dims().begin(), t.dims().end()}, {}, dtype, {}};
    w.ints.assign(v.begin(), v.end());
    return w;
  }

  WeightFile weight_file(const std::string& path, const onnx::TensorProto& t, int node,
                         int input) const {
    const FloatTensor f = c_.at_node(node, [&] {
      return to_float_tensor(
          t, "input " + std::to_string(input) + " '" + g_.node(node).input(input) + "'");
    });
    return {path, f.shape, f.data, NpyDType::F32, {}};
  }

  // padfold's output shape against ONNX shape inference's, at the tensor the layer writes once
  // fused (draft_layer refused the node's own output shape already): a difference ONNX's
  // inference is wrong about is a warning, any other a bug.
  void check_inferred_shape(const Draft& d, const std::string& name,
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

  const PreparedModel& p_;
  const ImportOptions& o_;
  GraphIndex g_;
  Context c_;
  std::vector<Role> role_;
  std::vector<std::string> reason_;
  std::map<int, Draft> drafts_;
  std::map<std::string, int> draft_by_output_;  // a draft's output tensor -> its node
  std::map<int, std::string> pad_mode_;  // layer node -> the folded Pad's mode, for descriptions
  std::map<int, detail::Affine> before_, after_;  // conv node -> the affine folded in
  std::map<int, std::vector<int>> affine_nodes_;  // conv node -> the affine nodes, in order
  std::map<int, int> gating_mul_;   // layer node -> the Mul of its x * sigmoid(x) or hard sigmoid
  std::map<int, int> folded_into_;  // a Pad or affine folded into a conv's input -> the conv
  std::map<std::string, std::string> edge_input_;  // layout Transpose's output -> graph input
  std::map<int, std::vector<int>> edge_chain_;     // edge Transpose -> the affine nodes before it
  bool channels_last_ = false;                     // the layers compute channels last
  std::set<std::string> edge_outputs_;  // drafts' outputs a folded layout Transpose makes NHWC
};

}  // namespace

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
  return Importer(prepared, options).run();
}

ImportOutput import_onnx(onnx::ModelProto model, const std::vector<std::string>& inputs,
                         const std::string& label, const ImportOptions& options, bool emit_onnx) {
  std::vector<InputSize> sizes;
  for (const std::string& s : inputs) sizes.push_back(parse_input_size(s));
  const PreparedModel prepared = prepare_model(std::move(model), sizes, label);
  ImportOutput out;
  out.result = import_model(prepared, options);
  out.spec_text = out.result.spec.dump(2) + "\n";
  out.report_text = out.result.report.dump(2) + "\n";
  if (emit_onnx) {
    out.normalized = normalize_auto_pad(prepared);
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
