#include "frontend/onnx/last_axis_regions.h"

#include <cmath>
#include <limits>
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

// Ops that compute the same values on the channels-first tensor (their constants, axes and
// matrices rewritten). Whether the importer then takes each is its business: where it leaves one
// that touches a region's tensor to the caller, the import is redone with that region as the file
// has it (import.cpp).
const char* const kUnary[] = {"Erf",       "Sqrt",     "Relu",        "Sigmoid",
                              "Tanh",      "Gelu",     "HardSigmoid", "HardSwish",
                              "LeakyRelu", "Identity", "Clip",        "Dropout"};
const char* const kBinary[] = {"Add", "Sub", "Mul", "Div", "Pow"};
const char* const kReduce[] = {"ReduceMean", "ReduceMax"};
// Reshapes to [N, K]: the same data in both layouts where the spatial axes are all 1.
const char* const kFlatten[] = {"Reshape", "Flatten"};

bool relaid_op(const std::string& op) {
  return one_of(op, kUnary) || one_of(op, kBinary) || one_of(op, kReduce) || op == "MatMul" ||
         op == "LayerNormalization";
}

const onnx::AttributeProto* attribute(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

// What one node of a region becomes.
struct Edit {
  int node = -1;
  enum Kind { ToIdentity, ReduceAxes, MatMulToConv, ExpandLayerNorm, Keep } kind = Keep;
  // Constant inputs replaced: input position -> the new initializer (a last-axis vector reshaped,
  // a MatMul's matrix as conv weights).
  std::map<int, onnx::TensorProto> constants;
  float epsilon = 0.f;  // ExpandLayerNorm
  Shape axes = {};      // ReduceAxes: the channels-first axes
};

class RegionFinder {
 public:
  RegionFinder(const GraphIndex& g, const GraphIndex& inferred) : g_(g), inferred_(inferred) {}

  // The edits of the region starting at Transpose `t`, or nullopt where it is not one. A region
  // is every tensor reachable from its starts (channels-last Transposes) through its body nodes;
  // a body node reading the output of another channels-last Transpose (a squeeze-and-excite's
  // scale, computed from the same region through a channels-first conv) adds it as a start.
  std::optional<std::vector<Edit>> from(int t) {
    const std::optional<Shape> perm = transpose_perm(g_.node(t));
    if (!perm || *perm != channels_last_perm(perm->size())) return std::nullopt;
    rank_ = perm->size();
    std::set<std::string> tensors;
    std::vector<std::string> work;
    std::set<int> starts, body, exits;
    auto start = [&](int s) {
      const onnx::NodeProto& n = g_.node(s);
      if (transpose_perm(n) != channels_last_perm(rank_)) return false;
      const auto in = inferred_.type(n.input(0));
      if (!in || !in->is_static() || in->shape.size() != rank_) return false;
      starts.insert(s);
      if (tensors.insert(n.output(0)).second) work.push_back(n.output(0));
      return true;
    };
    if (!start(t)) return std::nullopt;
    while (!work.empty()) {
      while (!work.empty()) {
        const std::string tensor = work.back();
        work.pop_back();
        if (g_.is_graph_output(tensor)) return std::nullopt;
        for (int r : g_.consumers(tensor)) {
          if (body.count(r) || exits.count(r)) continue;
          const onnx::NodeProto& reader = g_.node(r);
          if (transpose_perm(reader) == channels_first_perm(rank_) || flattens(reader, tensor) ||
              reduces_to_channels(reader)) {
            exits.insert(r);
            continue;
          }
          if (!default_domain(reader) || reader.output_size() != 1 || reader.output(0).empty())
            return std::nullopt;
          body.insert(r);
          if (tensors.insert(reader.output(0)).second) work.push_back(reader.output(0));
        }
      }
      // Inputs of the body from outside: constants, or computed from further starts by ops a
      // region may hold (a squeeze-and-excite's gate); the walk goes on from those starts.
      std::vector<std::string> back;
      for (int b : body)
        for (const std::string& in : g_.node(b).input())
          if (!in.empty() && !tensors.count(in) && !constant(in)) back.push_back(in);
      std::set<std::string> seen;
      while (!back.empty()) {
        const std::string in = back.back();
        back.pop_back();
        if (tensors.count(in) || constant(in) || !seen.insert(in).second) continue;
        const int p = g_.producer(in);
        if (p < 0) return std::nullopt;
        if (start(p)) continue;
        const onnx::NodeProto& n = g_.node(p);
        if (!default_domain(n) || !relaid_op(n.op_type())) return std::nullopt;
        for (const std::string& i : n.input())
          if (!i.empty()) back.push_back(i);
      }
    }
    if (exits.empty() || *starts.begin() != t) return std::nullopt;
    relaid_ = tensors;
    std::vector<Edit> edits;
    for (int e : starts) edits.push_back({e, Edit::ToIdentity, {}});
    for (int e : exits) {  // a flatten stays as it is
      if (transpose_perm(g_.node(e)) == channels_first_perm(rank_)) {
        edits.push_back({e, Edit::ToIdentity, {}});
      } else if (reduces_to_channels(g_.node(e))) {
        std::optional<Edit> x = edit(e, tensors);
        if (!x) return std::nullopt;
        edits.push_back(std::move(*x));
      }
    }
    for (int b : body) {
      std::optional<Edit> e = edit(b, tensors);
      if (!e) return std::nullopt;
      edits.push_back(std::move(*e));
    }
    return edits;
  }

  // The region's tensors (the file holds them channels last), after a `from` that found one.
  const std::set<std::string>& relaid() const { return relaid_; }

 private:
  static std::optional<Shape> transpose_perm(const onnx::NodeProto& n) {
    if (!default_domain(n) || n.op_type() != "Transpose" || n.input_size() != 1 ||
        n.output_size() != 1)
      return std::nullopt;
    const onnx::AttributeProto* a = attribute(n, "perm");
    if (!a || a->type() != onnx::AttributeProto::INTS || a->ints_size() < 3 || a->ints_size() > 5)
      return std::nullopt;
    return Shape(a->ints().begin(), a->ints().end());
  }

  // Node `i` of a region whose tensors are `tensors`, as it computes channels first.
  std::optional<Edit> edit(int i, const std::set<std::string>& tensors) const {
    const onnx::NodeProto& n = g_.node(i);
    const std::string& op = n.op_type();
    Edit e{i, Edit::Keep, {}};
    const auto in_region = [&](int k) { return k < n.input_size() && tensors.count(n.input(k)); };
    if (one_of(op, kUnary)) {
      if (!in_region(0)) return std::nullopt;
      for (int k = 1; k < n.input_size(); ++k)  // Clip's bounds, Dropout's ratio
        if (!n.input(k).empty() && !scalar(n.input(k))) return std::nullopt;
      if (op == "Dropout" && n.output_size() != 1) return std::nullopt;
      return e;
    }
    if (one_of(op, kBinary)) {
      if (n.input_size() != 2 || (!in_region(0) && !in_region(1))) return std::nullopt;
      for (int k = 0; k < 2; ++k) {
        if (in_region(k) || scalar(n.input(k))) continue;
        std::optional<onnx::TensorProto> v = channel_vector(n.input(k));
        if (!v) return std::nullopt;
        e.constants[k] = std::move(*v);
      }
      return e;
    }
    if (one_of(op, kReduce)) {
      const std::optional<Shape> axes = reduced_axes(n);
      if (!in_region(0) || !axes) return std::nullopt;
      if (NodeAttributes(n).get_int("keepdims", 1) != 1 && !reduces_to_channels(n))
        return std::nullopt;
      e.kind = Edit::ReduceAxes;
      for (int64_t x : *axes)  // channels last -> first: 0 stays, the last is 1, k is k + 1
        e.axes.push_back(x == 0 ? 0 : x == static_cast<int64_t>(rank_) - 1 ? 1 : x + 1);
      std::sort(e.axes.begin(), e.axes.end());
      return e;
    }
    if (op == "LayerNormalization") {  // opset 17, over the last axis alone
      const NodeAttributes a(n);
      const int64_t axis = a.get_int("axis", -1);
      if (!in_region(0) || n.input_size() < 2 ||
          (axis != -1 && axis != static_cast<int64_t>(rank_) - 1))
        return std::nullopt;
      for (int k = 1; k < n.input_size(); ++k) {  // Scale and B: one value per channel
        if (n.input(k).empty()) continue;
        std::optional<onnx::TensorProto> v = channel_vector(n.input(k));
        if (!v) return std::nullopt;
        e.constants[k] = std::move(*v);
      }
      e.kind = Edit::ExpandLayerNorm;
      e.epsilon = a.get_float("epsilon", 1e-5f);
      return e;
    }
    if (op == "MatMul") {
      if (n.input_size() != 2 || !in_region(0) || tensors.count(n.input(1))) return std::nullopt;
      std::optional<onnx::TensorProto> w = conv_weights(n.input(1));
      if (!w) return std::nullopt;
      e.kind = Edit::MatMulToConv;
      e.constants[1] = std::move(*w);
      return e;
    }
    return std::nullopt;
  }

  // A constant, also through Identity nodes (torch.onnx writes one per shared weight).
  const onnx::TensorProto* constant(const std::string& name) const {
    std::string t = name;
    for (int hops = 0; hops < g_.num_nodes(); ++hops) {
      if (const onnx::TensorProto* c = g_.constant(t)) return c;
      const int p = g_.producer(t);
      if (p < 0 || !default_domain(g_.node(p)) || g_.node(p).op_type() != "Identity" ||
          g_.node(p).input_size() != 1)
        return nullptr;
      t = g_.node(p).input(0);
    }
    return nullptr;
  }

  std::optional<FloatTensor> float_constant(const std::string& name) const {
    const onnx::TensorProto* t = constant(name);
    if (!t || t->data_type() != onnx::TensorProto::FLOAT) return std::nullopt;
    try {
      return to_float_tensor(*t, name);
    } catch (const ImportError&) {
      return std::nullopt;  // malformed: the importer reports the node as it is
    }
  }

  // One value, of a rank that broadcasts no new axis in.
  bool scalar(const std::string& name) const {
    const onnx::TensorProto* t = constant(name);
    if (!t || static_cast<size_t>(t->dims_size()) > rank_) return false;
    for (int64_t d : t->dims())
      if (d != 1) return false;
    return true;
  }

  // A float constant with one value per last-axis index ([C], [1, .., C]) as [1, C, 1, ...].
  std::optional<onnx::TensorProto> channel_vector(const std::string& name) const {
    const std::optional<FloatTensor> f = float_constant(name);
    if (!f || f->shape.empty() || f->shape.size() > rank_) return std::nullopt;
    for (size_t k = 0; k + 1 < f->shape.size(); ++k)
      if (f->shape[k] != 1) return std::nullopt;
    Shape dims(rank_, 1);
    dims[1] = f->shape.back();
    return float_tensor(name + "_channels_first", dims, f->data);
  }

  // MatMul's constant [C, K] matrix as Conv weights [K, C, 1, ...].
  std::optional<onnx::TensorProto> conv_weights(const std::string& name) const {
    const std::optional<FloatTensor> f = float_constant(name);
    if (!f || f->shape.size() != 2) return std::nullopt;
    const int64_t c = f->shape[0], k = f->shape[1];
    std::vector<float> w(f->data.size());
    for (int64_t i = 0; i < c; ++i)
      for (int64_t j = 0; j < k; ++j)
        w[static_cast<size_t>(j * c + i)] = f->data[static_cast<size_t>(i * k + j)];
    Shape dims(rank_, 1);
    dims[0] = k;
    dims[1] = c;
    return float_tensor(name + "_as_conv", dims, w);
  }

  // A reduction's axes in 0 .. rank-1, as the attribute (before opset 18) or a constant input;
  // nullopt where they are not constants, or none are given (every axis).
  std::optional<Shape> reduced_axes(const onnx::NodeProto& n) const {
    Shape axes;
    if (const onnx::AttributeProto* a = attribute(n, "axes")) {
      axes.assign(a->ints().begin(), a->ints().end());
    } else if (n.input_size() > 1 && !n.input(1).empty()) {
      const onnx::TensorProto* t = constant(n.input(1));
      if (!t) return std::nullopt;
      try {
        axes = to_int64s(*t, n.input(1));
      } catch (const ImportError&) {
        return std::nullopt;
      }
    }
    const auto r = static_cast<int64_t>(rank_);
    std::set<int64_t> seen;
    for (int64_t& x : axes) {
      if (x < -r || x >= r) return std::nullopt;
      if (x < 0) x += r;
      if (!seen.insert(x).second) return std::nullopt;
    }
    if (axes.empty()) return std::nullopt;
    return axes;
  }

  // A ReduceMean or ReduceMax of every spatial axis without keepdims: [N, C] in both layouts.
  bool reduces_to_channels(const onnx::NodeProto& n) const {
    if (!default_domain(n) || !one_of(n.op_type(), kReduce) ||
        NodeAttributes(n).get_int("keepdims", 1) != 0)
      return false;
    std::optional<Shape> axes = reduced_axes(n);
    if (!axes) return false;
    std::sort(axes->begin(), axes->end());
    Shape spatial;
    for (size_t k = 1; k + 1 < rank_; ++k) spatial.push_back(static_cast<int64_t>(k));
    return *axes == spatial;
  }

  // A Reshape or Flatten of region tensor `t` (all its spatial axes 1) to rank 2: it reads the
  // same data in either layout, so it stays as it is.
  bool flattens(const onnx::NodeProto& n, const std::string& t) const {
    if (!default_domain(n) || !one_of(n.op_type(), kFlatten) || n.input_size() < 1 ||
        n.input(0) != t || n.output_size() != 1)
      return false;
    if (n.op_type() == "Flatten" && NodeAttributes(n).get_int("axis", 1) != 1) return false;
    const auto in = inferred_.type(t), out = inferred_.type(n.output(0));
    if (!in || !in->is_static() || !out || !out->is_static() || out->shape.size() != 2)
      return false;
    for (size_t k = 1; k + 1 < in->shape.size(); ++k)
      if (in->shape[k] != 1) return false;
    return true;
  }

  const GraphIndex& g_;
  const GraphIndex& inferred_;
  size_t rank_ = 4;
  std::set<std::string> relaid_;
};

class Rewriter {
 public:
  explicit Rewriter(onnx::GraphProto& g) : g_(g), names_(g) {}

  void apply(const Edit& e) {
    onnx::NodeProto& n = *g_.mutable_node(e.node);
    for (const auto& [k, t] : e.constants) n.set_input(k, add(t));
    switch (e.kind) {
      case Edit::ToIdentity:
        n.set_op_type("Identity");
        n.clear_attribute();
        break;
      case Edit::ReduceAxes:
        for (auto& a : *n.mutable_attribute())
          if (a.name() == "axes") {
            a.clear_ints();
            for (int64_t x : e.axes) a.add_ints(x);
          }
        if (n.input_size() > 1 && !n.input(1).empty())
          n.set_input(1, add(int64_tensor(n.input(1) + "_channels_first", e.axes)));
        break;
      case Edit::MatMulToConv:
        n.set_op_type("Conv");
        n.clear_attribute();
        break;
      case Edit::ExpandLayerNorm:
        expansions_[e.node] = layer_norm_nodes(n, e.epsilon);
        break;
      case Edit::Keep:
        break;
    }
  }

  // The tensors of the expansions.
  const std::set<std::string>& created() const { return created_; }

  // The nodes with every expansion in place of its node (the order stays topological).
  void finish() {
    if (expansions_.empty()) return;
    onnx::GraphProto out;
    for (int i = 0; i < g_.node_size(); ++i) {
      const auto it = expansions_.find(i);
      if (it == expansions_.end()) {
        *out.add_node() = g_.node(i);
        continue;
      }
      for (const onnx::NodeProto& m : it->second) *out.add_node() = m;
    }
    g_.mutable_node()->Swap(out.mutable_node());
  }

 private:
  std::string fresh(const std::string& base) { return names_.fresh(base); }

  // Adds `t` as an initializer under a fresh name (its own where free); returns the name.
  std::string add(onnx::TensorProto t) {
    t.set_name(fresh(t.name()));
    *g_.add_initializer() = t;
    return t.name();
  }

  // LayerNormalization `n` (its Scale and B already [1, C, 1..]) over the channels as torch.onnx
  // writes LayerNorm before opset 17, which the importer drafts as a layer_norm layer.
  std::vector<onnx::NodeProto> layer_norm_nodes(const onnx::NodeProto& n, float epsilon) {
    const std::string base = n.name().empty() ? n.output(0) : n.name();
    std::vector<onnx::NodeProto> nodes;
    auto node = [&](const char* op, const std::vector<std::string>& in, std::string out = "") {
      onnx::NodeProto m;
      m.set_name(fresh(base + "_" + op));
      m.set_op_type(op);
      for (const std::string& i : in) m.add_input(i);
      m.add_output(out.empty() ? fresh(m.name() + "_out") : out);
      if (std::string(op) == "ReduceMean") {
        onnx::AttributeProto* a = m.add_attribute();
        a->set_name("axes");
        a->set_type(onnx::AttributeProto::INTS);
        a->add_ints(1);
      }
      nodes.push_back(m);
      created_.insert(m.output(0));
      return m.output(0);
    };
    const bool scaled = n.input_size() > 1 && !n.input(1).empty();
    const bool shifted = n.input_size() > 2 && !n.input(2).empty();
    const std::string& x = n.input(0);
    const std::string d = node("Sub", {x, node("ReduceMean", {x})});
    const std::string sq = node("Pow", {d, add(float_tensor(base + "_two", {}, {2.f}))});
    const std::string var = node("ReduceMean", {sq});
    const std::string dev =
        node("Sqrt", {node("Add", {var, add(float_tensor(base + "_eps", {}, {epsilon}))})});
    std::string y = node("Div", {d, dev}, scaled || shifted ? "" : n.output(0));
    if (scaled) y = node("Mul", {y, n.input(1)}, shifted ? "" : n.output(0));
    if (shifted) node("Add", {y, n.input(2)}, n.output(0));
    return nodes;
  }

  onnx::GraphProto& g_;
  GraphNames names_;
  std::map<int, std::vector<onnx::NodeProto>> expansions_;
  std::set<std::string> created_;
};

}  // namespace

int fold_last_axis_regions(onnx::ModelProto& model, const onnx::ModelProto& inferred,
                           const std::string& label, const std::set<std::string>& kept,
                           std::map<std::string, std::string>& relaid_tensors) {
  std::vector<std::vector<Edit>> regions;
  {
    const GraphIndex g(model, label), gi(inferred, label);
    RegionFinder find(g, gi);
    std::set<int> taken;
    for (int i = 0; i < g.num_nodes(); ++i) {
      std::optional<std::vector<Edit>> r = find.from(i);
      if (!r) continue;
      bool overlaps = false;
      for (const Edit& e : *r) overlaps = overlaps || taken.count(e.node);
      const std::string key = g.node(i).output(0);
      if (overlaps || kept.count(key)) continue;
      for (const Edit& e : *r) taken.insert(e.node);
      regions.push_back(std::move(*r));
      for (const std::string& t : find.relaid()) relaid_tensors[t] = key;
    }
  }
  if (regions.empty()) return 0;
  onnx::GraphProto& g = *model.mutable_graph();
  std::set<std::string> relaid;
  Rewriter rewrite(g);
  for (const auto& r : regions) {
    const std::string key = g.node(r.front().node).output(0);
    for (const Edit& e : r) {
      rewrite.apply(e);
      for (const auto& o : g.node(e.node).output()) relaid.insert(o);
    }
    for (const std::string& t : rewrite.created()) relaid_tensors.emplace(t, key);
  }
  rewrite.finish();
  auto* vi = g.mutable_value_info();  // the region's tensors change shape
  for (int k = vi->size() - 1; k >= 0; --k)
    if (relaid.count(vi->Get(k).name())) vi->DeleteSubrange(k, 1);
  return static_cast<int>(regions.size());
}

}  // namespace padfold::onnx_import
