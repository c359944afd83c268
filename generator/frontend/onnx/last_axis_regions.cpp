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

// Ops the importer turns into layers once relaid (activations, affine ops, adds, the MatMuls as
// 1x1 convs). Erf, Sqrt, Pow, ReduceMean and a Sub, Mul or Div of two tensors only as part of a
// LayerNorm or GELU chain (chain_nodes): alone, the importer would leave them to the caller, who
// computes them on the file's channels-last tensors.
const char* const kUnary[] = {"Erf",  "Sqrt",        "Relu",      "Sigmoid",   "Tanh",
                              "Gelu", "HardSigmoid", "HardSwish", "LeakyRelu", "Identity"};
const char* const kBinary[] = {"Add", "Sub", "Mul", "Div", "Pow"};
const char* const kReduce[] = {"ReduceMean"};
const char* const kChainOnly[] = {"Erf", "Sqrt", "Pow", "ReduceMean"};

const onnx::AttributeProto* attribute(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

// What one node of a region becomes.
struct Edit {
  int node = -1;
  enum Kind { ToIdentity, ReduceChannels, MatMulToConv, ExpandLayerNorm, Keep } kind = Keep;
  // Constant inputs replaced: input position -> the new initializer (a last-axis vector reshaped,
  // a MatMul's matrix as conv weights).
  std::map<int, onnx::TensorProto> constants;
  float epsilon = 0.f;  // ExpandLayerNorm
};

class RegionFinder {
 public:
  RegionFinder(const GraphIndex& g, const GraphIndex& inferred) : g_(g), inferred_(inferred) {}

  // The edits of the region starting at Transpose `t`, or nullopt where it is not one.
  std::optional<std::vector<Edit>> from(int t) {
    const onnx::NodeProto& n = g_.node(t);
    const std::optional<Shape> perm = transpose_perm(n);
    if (!perm || *perm != channels_last_perm(perm->size())) return std::nullopt;
    rank_ = perm->size();
    const auto in = inferred_.type(n.input(0));
    if (!in || !in->is_static() || in->shape.size() != rank_) return std::nullopt;
    std::set<std::string> tensors{n.output(0)};
    std::vector<std::string> work{n.output(0)};
    std::set<int> body, exits;
    while (!work.empty()) {
      const std::string tensor = work.back();
      work.pop_back();
      if (g_.is_graph_output(tensor)) return std::nullopt;
      for (int r : g_.consumers(tensor)) {
        if (body.count(r) || exits.count(r)) continue;
        const onnx::NodeProto& reader = g_.node(r);
        if (transpose_perm(reader) == channels_first_perm(rank_)) {
          exits.insert(r);
          continue;
        }
        if (!default_domain(reader) || reader.output_size() != 1 || reader.output(0).empty())
          return std::nullopt;
        body.insert(r);
        if (tensors.insert(reader.output(0)).second) work.push_back(reader.output(0));
      }
    }
    if (exits.empty()) return std::nullopt;
    const std::set<int> chains = chain_nodes(body, tensors);
    for (int b : body) {
      const onnx::NodeProto& m = g_.node(b);
      const bool two_tensors = m.input_size() == 2 && tensors.count(m.input(0)) &&
                               tensors.count(m.input(1)) && m.op_type() != "Add";
      if ((one_of(m.op_type(), kChainOnly) || two_tensors) && !chains.count(b)) return std::nullopt;
    }
    relaid_ = tensors;
    std::vector<Edit> edits{{t, Edit::ToIdentity, {}}};
    for (int e : exits) edits.push_back({e, Edit::ToIdentity, {}});
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

  // The nodes of `body` in a LayerNorm chain as the importer drafts it once relaid (import_ops.h's
  // draft_layer_norm: Sub(x, ReduceMean(x)) -> Pow(2) -> ReduceMean -> Add(epsilon) -> Sqrt, and
  // the Div of the two) or in a GELU chain as decomposed_activations.h reads it.
  std::set<int> chain_nodes(const std::set<int>& body, const std::set<std::string>& tensors) const {
    // The producer of `t` in the body, of type `op`, read by `readers` nodes.
    auto made_by = [&](const std::string& t, const char* op, size_t readers) {
      const int p = g_.producer(t);
      return p >= 0 && body.count(p) && g_.node(p).op_type() == op &&
                     g_.consumers(t).size() == readers
                 ? p
                 : -1;
    };
    auto value = [&](const std::string& t) -> std::optional<float> {
      const std::optional<FloatTensor> f = scalar(t) ? float_constant(t) : std::nullopt;
      if (!f || f->data.size() != 1) return std::nullopt;
      return f->data[0];
    };
    auto near = [](std::optional<float> v, double want) {
      return v && std::abs(*v - want) <= 1e-6 * std::abs(want);
    };
    std::set<int> chains;
    for (int b : body) {
      const onnx::NodeProto& n = g_.node(b);
      if (n.op_type() == "Div" && n.input_size() == 2 && tensors.count(n.input(1))) {
        const int sub = made_by(n.input(0), "Sub", 2), sqrt = made_by(n.input(1), "Sqrt", 1);
        const int add = sqrt < 0 ? -1 : made_by(g_.node(sqrt).input(0), "Add", 1);
        if (sub < 0 || add < 0) continue;
        const int mean = made_by(g_.node(sub).input(1), "ReduceMean", 1);
        const int var = made_by(g_.node(add).input(0), "ReduceMean", 1);
        const int pow = var < 0 ? -1 : made_by(g_.node(var).input(0), "Pow", 1);
        if (mean < 0 || pow < 0 || g_.node(mean).input(0) != g_.node(sub).input(0) ||
            g_.node(pow).input(0) != n.input(0) || !near(value(g_.node(pow).input(1)), 2.0))
          continue;
        const std::optional<float> eps = value(g_.node(add).input(1));
        if (!eps || !(*eps > 0) || *eps > 1) continue;
        chains.insert({b, sub, sqrt, add, mean, var, pow});
      }
      if (n.op_type() == "Erf") {  // scale -> Erf -> Add(1) -> Mul(x) -> Mul(1/2)
        // The node reading node i's output alone, of type `op`, with `k` as its other operand.
        auto next = [&](int i, const char* op, auto k) {
          const std::string& t = g_.node(i).output(0);
          const std::vector<int>& readers = g_.consumers(t);
          if (readers.size() != 1 || !body.count(readers[0])) return -1;
          const onnx::NodeProto& r = g_.node(readers[0]);
          if (r.op_type() != op || r.input_size() != 2 || (r.input(0) == t) == (r.input(1) == t))
            return -1;
          return k(r.input(0) == t ? r.input(1) : r.input(0)) ? readers[0] : -1;
        };
        const int scale = g_.producer(n.input(0));
        if (scale < 0 || !body.count(scale) || g_.consumers(n.input(0)).size() != 1) continue;
        const onnx::NodeProto& s = g_.node(scale);
        std::string x;
        if (s.op_type() == "Div" && near(value(s.input(1)), std::sqrt(2.0)))
          x = s.input(0);
        else if (s.op_type() == "Mul" && near(value(s.input(1)), std::sqrt(0.5)))
          x = s.input(0);
        else if (s.op_type() == "Mul" && near(value(s.input(0)), std::sqrt(0.5)))
          x = s.input(1);
        const int one = x.empty() ? -1 : next(b, "Add", [&](auto& k) { return near(value(k), 1); });
        const int times = one < 0 ? -1 : next(one, "Mul", [&](auto& k) { return k == x; });
        const int half =
            times < 0 ? -1 : next(times, "Mul", [&](auto& k) { return near(value(k), 0.5); });
        if (half >= 0) chains.insert({scale, b, one, times, half});
      }
    }
    return chains;
  }

  // Node `i` of a region whose tensors are `tensors`, as it computes channels first.
  std::optional<Edit> edit(int i, const std::set<std::string>& tensors) const {
    const onnx::NodeProto& n = g_.node(i);
    const std::string& op = n.op_type();
    Edit e{i, Edit::Keep, {}};
    const auto in_region = [&](int k) { return k < n.input_size() && tensors.count(n.input(k)); };
    if (one_of(op, kUnary) || op == "Clip" || op == "Dropout") {
      if (!in_region(0) || !imported_alike(n)) return std::nullopt;
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
      const NodeAttributes a(n);
      if (!in_region(0) || a.get_int("keepdims", 1) != 1 || !reduces_last_axis(n))
        return std::nullopt;
      e.kind = Edit::ReduceChannels;
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

  // Whether the importer takes activation `n` (Gelu's erf form; Clip as relu or relu6) rather
  // than leaving it to the caller.
  bool imported_alike(const onnx::NodeProto& n) const {
    const NodeAttributes a(n);
    if (n.op_type() == "Gelu") return a.get_string("approximate", "none") == "none";
    if (n.op_type() != "Clip") return true;
    auto bound = [&](int k, const char* attr, float dflt) -> std::optional<float> {
      if (k < n.input_size() && !n.input(k).empty()) {
        const std::optional<FloatTensor> f = float_constant(n.input(k));
        if (!f || f->data.size() != 1) return std::nullopt;
        return f->data[0];
      }
      return a.get_float(attr, dflt);
    };
    const std::optional<float> lo = bound(1, "min", std::numeric_limits<float>::lowest()),
                               hi = bound(2, "max", std::numeric_limits<float>::max());
    return lo == 0.f && hi && (*hi == 6.f || *hi >= std::numeric_limits<float>::max());
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

  // Axes [-1] or [rank - 1], as the attribute (before opset 18) or a constant input.
  bool reduces_last_axis(const onnx::NodeProto& n) const {
    Shape axes;
    if (const onnx::AttributeProto* a = attribute(n, "axes")) {
      axes.assign(a->ints().begin(), a->ints().end());
    } else if (n.input_size() > 1 && !n.input(1).empty()) {
      const onnx::TensorProto* t = constant(n.input(1));
      if (!t) return false;
      try {
        axes = to_int64s(*t, n.input(1));
      } catch (const ImportError&) {
        return false;
      }
    }
    const auto r = static_cast<int64_t>(rank_);
    return axes.size() == 1 && (axes[0] == -1 || axes[0] == r - 1);
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
      case Edit::ReduceChannels:
        for (auto& a : *n.mutable_attribute())
          if (a.name() == "axes") {
            a.clear_ints();
            a.add_ints(1);
          }
        if (n.input_size() > 1 && !n.input(1).empty())
          n.set_input(1, add(int64_tensor(n.input(1) + "_channel_axis", {1})));
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
                           const std::string& label, std::set<std::string>& relaid_tensors) {
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
      if (overlaps) continue;
      for (const Edit& e : *r) taken.insert(e.node);
      regions.push_back(std::move(*r));
      relaid_tensors.insert(find.relaid().begin(), find.relaid().end());
    }
  }
  if (regions.empty()) return 0;
  onnx::GraphProto& g = *model.mutable_graph();
  std::set<std::string> relaid;
  Rewriter rewrite(g);
  for (const auto& r : regions)
    for (const Edit& e : r) {
      rewrite.apply(e);
      for (const auto& o : g.node(e.node).output()) relaid.insert(o);
    }
  rewrite.finish();
  relaid_tensors.insert(rewrite.created().begin(), rewrite.created().end());
  auto* vi = g.mutable_value_info();  // the region's tensors change shape
  for (int k = vi->size() - 1; k >= 0; --k)
    if (relaid.count(vi->Get(k).name())) vi->DeleteSubrange(k, 1);
  return static_cast<int>(regions.size());
}

}  // namespace padfold::onnx_import
