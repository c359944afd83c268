#include "frontend/onnx/hoist_transposes.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "frontend/layer.h"
#include "frontend/onnx/onnx_graph.h"
#include "frontend/onnx/onnx_model.h"

namespace padfold::onnx_import {
namespace {

using Shape = std::vector<int64_t>;

const onnx::AttributeProto* attribute(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

// out[j] = in[perm[j]], as Transpose moves axes.
Shape permuted(const Shape& in, const Shape& perm) {
  Shape out;
  for (int64_t p : perm) out.push_back(in[static_cast<size_t>(p)]);
  return out;
}

// The channels-last positions (1 .. rank-2 of `with`) of unit axes whose removal from `with`
// leaves `without`, or nullopt: inserted_unit_axes on both shapes as channels first.
std::optional<Shape> spatial_unit_axes(const Shape& with, const Shape& without) {
  if (with.size() <= without.size() || without.size() < 3) return std::nullopt;
  const std::vector<size_t> first =
      inserted_unit_axes(permuted(with, channels_first_perm(with.size())),
                         permuted(without, channels_first_perm(without.size())));
  if (first.empty()) return std::nullopt;
  Shape axes;
  for (size_t a : first) axes.push_back(static_cast<int64_t>(a) - 1);  // C moved back last
  return axes;
}

class Hoister {
 public:
  Hoister(onnx::ModelProto& m, const onnx::ModelProto& inferred) : g_(*m.mutable_graph()) {
    for (const auto& t : g_.initializer()) names_.insert(t.name());
    for (const auto& n : g_.node())
      for (const auto& o : n.output()) names_.insert(o);
    for (const auto& v : g_.input()) names_.insert(v.name());
    const onnx::GraphProto& ig = inferred.graph();
    for (const auto* list : {&ig.input(), &ig.value_info(), &ig.output()})
      for (const onnx::ValueInfoProto& v : *list) record_shape(v);
  }

  // One move, or false when none is left.
  bool step() {
    for (int ti = 0; ti < g_.node_size(); ++ti) {
      const onnx::NodeProto& t = g_.node(ti);
      const auto perm = layout_perm(t);
      if (!perm) continue;
      if (*perm == channels_first_perm(perm->size()) ? hoist_above(ti) : sink_below(ti))
        return true;
    }
    return false;
  }

 private:
  void record_shape(const onnx::ValueInfoProto& v) {
    if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape()) return;
    Shape s;
    for (const auto& d : v.type().tensor_type().shape().dim()) {
      if (!d.has_dim_value() || d.dim_value() <= 0) return;
      s.push_back(d.dim_value());
    }
    shapes_[v.name()] = s;
  }

  std::optional<Shape> shape(const std::string& t) const {
    const auto it = shapes_.find(t);
    if (it == shapes_.end()) return std::nullopt;
    return it->second;
  }

  std::optional<Shape> layout_perm(const onnx::NodeProto& n) const {
    if (!default_domain(n) || n.op_type() != "Transpose" || n.input_size() != 1 ||
        n.output_size() != 1 || n.input(0).empty() || n.output(0).empty())
      return std::nullopt;
    const onnx::AttributeProto* a = attribute(n, "perm");
    if (!a || a->type() != onnx::AttributeProto::INTS) return std::nullopt;
    Shape perm(a->ints().begin(), a->ints().end());
    if (perm.size() < 3 || perm.size() > 5 ||
        (perm != channels_first_perm(perm.size()) && perm != channels_last_perm(perm.size())))
      return std::nullopt;
    return perm;
  }

  int producer(const std::string& t) const {
    for (int i = 0; i < g_.node_size(); ++i)
      for (const auto& o : g_.node(i).output())
        if (o == t) return i;
    return -1;
  }

  // The one node reading `t`, or -1 (none, several, or a graph output).
  int only_reader(const std::string& t) const {
    for (const auto& o : g_.output())
      if (o.name() == t) return -1;
    int reader = -1;
    for (int i = 0; i < g_.node_size(); ++i)
      for (const auto& in : g_.node(i).input())
        if (in == t) {
          if (reader >= 0) return -1;
          reader = i;
        }
    return reader;
  }

  // A single-output default-domain node reading a data input: one that may move.
  static bool movable(const onnx::NodeProto& n) {
    return default_domain(n) && n.input_size() >= 1 && n.output_size() == 1 &&
           !n.input(0).empty() && !n.output(0).empty();
  }

  // An integer constant: an initializer or a Constant's value.
  std::optional<Shape> ints(const std::string& name) const {
    if (const onnx::TensorProto* t = constant(name)) return to_int64s(*t, "'" + name + "'");
    return std::nullopt;
  }

  // An initializer or a Constant's value.
  const onnx::TensorProto* constant(const std::string& name) const {
    for (const auto& t : g_.initializer())
      if (t.name() == name) return &t;
    for (const auto& n : g_.node())
      if (n.op_type() == "Constant" && n.output_size() == 1 && n.output(0) == name)
        if (const onnx::AttributeProto* a = attribute(n, "value"); a && a->has_t()) return &a->t();
    return nullptr;
  }

  // The integers of attribute `attr` (older opsets) or else of constant input `input`.
  std::optional<Shape> ints_of(const onnx::NodeProto& n, const char* attr, int input) const {
    if (const onnx::AttributeProto* a = attribute(n, attr)) {
      if (a->type() != onnx::AttributeProto::INTS) return std::nullopt;
      return Shape(a->ints().begin(), a->ints().end());
    }
    if (n.input_size() <= input || n.input(input).empty()) return std::nullopt;
    try {
      return ints(n.input(input));
    } catch (const ImportError&) {
      return std::nullopt;  // not integers: the importer reports the node as it is
    }
  }

  // Replaces the integers `n` reads as attribute `attr` or input `input` by `values`.
  void set_ints(onnx::NodeProto& n, const char* attr, int input, const Shape& values) {
    for (auto& a : *n.mutable_attribute())
      if (a.name() == attr) {
        a.clear_ints();
        for (int64_t v : values) a.add_ints(v);
        return;
      }
    std::string name = (n.name().empty() ? n.output(0) : n.name()) + "_" + attr + "_relaid";
    for (int k = 1; names_.count(name); ++k) name += "_" + std::to_string(k);
    names_.insert(name);
    onnx::TensorProto* t = g_.add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) t->add_int64_data(v);
    n.set_input(input, name);
  }

  static void set_perm(onnx::NodeProto& n, const Shape& perm) {
    for (auto& a : *n.mutable_attribute())
      if (a.name() == "perm") {
        a.clear_ints();
        for (int64_t v : perm) a.add_ints(v);
      }
  }

  // A QuantizeLinear or DequantizeLinear with one scale and zero point for the whole tensor: an
  // elementwise op, the same on either layout.
  bool per_tensor_quantization(const onnx::NodeProto& u) const {
    if (u.op_type() != "QuantizeLinear" && u.op_type() != "DequantizeLinear") return false;
    if (u.input_size() < 2 || u.input_size() > 3) return false;
    for (int k = 1; k < u.input_size(); ++k) {
      if (u.input(k).empty()) continue;
      const onnx::TensorProto* c = constant(u.input(k));
      if (!c) return false;
      int64_t elements = 1;
      for (int64_t d : c->dims()) elements *= d;
      if (elements != 1) return false;
    }
    return true;
  }

  // The channels-last positions of the unit axes that Unsqueeze or Reshape `u` adds to `in` (or,
  // `adds` false, Squeeze or Reshape drops from it) to make `out`, all spatial; or nullopt.
  // `rank`: that of the channels-last side, `out` when adding and `in` when dropping.
  std::optional<Shape> unit_axes(const onnx::NodeProto& u, const std::optional<Shape>& in,
                                 const std::optional<Shape>& out, bool adds, size_t rank) const {
    const std::optional<Shape>& last = adds ? out : in;
    if (last && last->size() != rank) return std::nullopt;  // a Transpose of the wrong rank
    if (u.op_type() == "Reshape") {
      if (!in || !out) return std::nullopt;
      return adds ? spatial_unit_axes(*out, *in) : spatial_unit_axes(*in, *out);
    }
    if (u.op_type() != (adds ? "Unsqueeze" : "Squeeze")) return std::nullopt;
    auto axes = ints_of(u, "axes", 1);
    if (!axes || axes->empty()) return std::nullopt;
    const std::optional<Shape>& other = adds ? in : out;
    if (other && other->size() + axes->size() != rank) return std::nullopt;
    const auto r = static_cast<int64_t>(rank);
    std::set<int64_t> seen;
    for (int64_t& a : *axes) {
      if (a < 0) a += r;
      if (a < 1 || a > r - 2 || !seen.insert(a).second) return std::nullopt;
    }
    std::sort(axes->begin(), axes->end());
    return axes;
  }

  // A reshape `u` of the channels-first tensor as it becomes once the Transpose moves past it:
  // Unsqueeze and Squeeze get the channels-first axes, Reshape the channels-first target shape.
  std::optional<onnx::NodeProto> relaid_reshape(const onnx::NodeProto& u, const Shape& axes,
                                                const std::optional<Shape>& out_first) {
    onnx::NodeProto moved = u;
    if (u.op_type() == "Reshape") {
      if (!out_first) return std::nullopt;
      set_ints(moved, "shape", 1, *out_first);
      return moved;
    }
    Shape first_axes = axes;
    for (int64_t& a : first_axes) a += 1;  // after N and C
    set_ints(moved, "axes", 1, first_axes);
    return moved;
  }

  // Transpose `ti` (to channels first) above the Pad, Unsqueeze, Reshape or per-tensor
  // QuantizeLinear or DequantizeLinear producing its input.
  bool hoist_above(int ti) {
    const onnx::NodeProto& t = g_.node(ti);
    const std::string mid = t.input(0);
    const int ui = producer(mid);
    if (ui < 0 || only_reader(mid) != ti || !movable(g_.node(ui))) return false;
    const onnx::NodeProto& u = g_.node(ui);
    const Shape perm = *layout_perm(t);
    const std::optional<Shape> in = shape(u.input(0)), out = shape(mid);
    std::optional<onnx::NodeProto> moved;
    Shape new_perm = perm;
    if (out && out->size() != perm.size()) return false;  // a Transpose of the wrong rank
    if (u.op_type() == "Pad") {
      if (in && in->size() != perm.size()) return false;
      moved = pad_relaid(u, perm);
    } else if (per_tensor_quantization(u)) {
      moved = u;
    } else if (const auto axes = unit_axes(u, in, out, true, perm.size())) {
      new_perm = channels_first_perm(perm.size() - axes->size());
      moved = relaid_reshape(u, *axes, out ? std::optional(permuted(*out, perm)) : std::nullopt);
    }
    if (!moved || new_perm.size() < 3) return false;
    onnx::NodeProto transpose = t;
    transpose.set_input(0, u.input(0));
    transpose.set_output(0, mid);
    set_perm(transpose, new_perm);
    moved->set_input(0, mid);
    moved->set_output(0, t.output(0));
    *g_.mutable_node(ui) = std::move(transpose);
    *g_.mutable_node(ti) = std::move(*moved);
    reshaped(mid, in ? std::optional(permuted(*in, new_perm)) : std::nullopt);
    return true;
  }

  // Transpose `ti` (to channels last) below the Squeeze, Reshape or per-tensor QuantizeLinear or
  // DequantizeLinear reading its output.
  bool sink_below(int ti) {
    const onnx::NodeProto& t = g_.node(ti);
    const std::string mid = t.output(0);
    const int ui = only_reader(mid);
    if (ui < 0 || !movable(g_.node(ui)) || g_.node(ui).input(0) != mid) return false;
    const onnx::NodeProto& u = g_.node(ui);
    const std::optional<Shape> in = shape(mid), out = shape(u.output(0));
    const size_t last_rank = layout_perm(t)->size();
    if (per_tensor_quantization(u)) {  // the same node on the channels-first tensor
      const std::optional<Shape> first = shape(t.input(0));
      onnx::NodeProto moved = u;
      onnx::NodeProto transpose = t;
      transpose.set_input(0, mid);
      transpose.set_output(0, u.output(0));
      moved.set_input(0, t.input(0));
      moved.set_output(0, mid);
      *g_.mutable_node(ti) = std::move(moved);
      *g_.mutable_node(ui) = std::move(transpose);
      reshaped(mid, first);
      return true;
    }
    const auto axes = unit_axes(u, in, out, false, last_rank);
    if (!axes) return false;
    const size_t rank = last_rank - axes->size();
    if (rank < 3) return false;
    const std::optional<Shape> out_first =
        out ? std::optional(permuted(*out, channels_first_perm(rank))) : std::nullopt;
    std::optional<onnx::NodeProto> moved = relaid_reshape(u, *axes, out_first);
    if (!moved) return false;
    onnx::NodeProto transpose = t;
    set_perm(transpose, channels_last_perm(rank));
    transpose.set_input(0, mid);
    transpose.set_output(0, u.output(0));
    moved->set_input(0, t.input(0));
    moved->set_output(0, mid);
    *g_.mutable_node(ti) = std::move(*moved);
    *g_.mutable_node(ui) = std::move(transpose);
    reshaped(mid, out_first);
    return true;
  }

  // Pad `p` of a channels-last tensor as the Pad of the same tensor transposed by `perm`.
  std::optional<onnx::NodeProto> pad_relaid(const onnx::NodeProto& p, const Shape& perm) {
    const auto pads = ints_of(p, "pads", 1);
    const size_t r = perm.size();
    if (!pads || pads->size() != 2 * r) return std::nullopt;
    Shape moved_pads(2 * r);
    for (size_t j = 0; j < r; ++j) {
      moved_pads[j] = (*pads)[static_cast<size_t>(perm[j])];
      moved_pads[r + j] = (*pads)[r + static_cast<size_t>(perm[j])];
    }
    onnx::NodeProto moved = p;
    set_ints(moved, "pads", 1, moved_pads);
    return moved;
  }

  // Tensor `t` now has `s` (or an unknown shape): its value_info is dropped.
  void reshaped(const std::string& t, const std::optional<Shape>& s) {
    if (s)
      shapes_[t] = *s;
    else
      shapes_.erase(t);
    auto* vi = g_.mutable_value_info();
    for (int k = vi->size() - 1; k >= 0; --k)
      if (vi->Get(k).name() == t) vi->DeleteSubrange(k, 1);
  }

  onnx::GraphProto& g_;
  std::set<std::string> names_;
  std::map<std::string, Shape> shapes_;
};

}  // namespace

int hoist_layout_transposes(onnx::ModelProto& model, const onnx::ModelProto& inferred) {
  Hoister h(model, inferred);
  int moves = 0;
  // Each move brings a Transpose one node closer to an edge: at most nodes^2 moves.
  const int64_t n = model.graph().node_size();
  while (moves < n * n && h.step()) ++moves;
  return moves;
}

}  // namespace padfold::onnx_import
