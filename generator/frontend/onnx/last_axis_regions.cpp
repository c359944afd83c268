#include "frontend/onnx/last_axis_regions.h"

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

const char* const kUnary[] = {"Erf",  "Sqrt",      "Relu",        "Sigmoid",   "Tanh",
                              "Gelu", "HardSwish", "HardSigmoid", "LeakyRelu", "Identity",
                              "Neg",  "Abs",       "Exp",         "Reciprocal"};
const char* const kBinary[] = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min"};
const char* const kReduce[] = {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"};

template <size_t N>
bool one_of(const std::string& s, const char* const (&list)[N]) {
  for (const char* x : list)
    if (s == x) return true;
  return false;
}

const onnx::AttributeProto* attribute(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

// What one node of a region becomes.
struct Edit {
  int node = -1;
  enum Kind { ToIdentity, ReduceChannels, MatMulToConv, Keep } kind = Keep;
  // Constant inputs replaced: input position -> the new initializer (a last-axis vector reshaped,
  // a MatMul's matrix as conv weights).
  std::map<int, onnx::TensorProto> constants;
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
    std::vector<Edit> edits{{t, Edit::ToIdentity, {}}};
    for (int e : exits) edits.push_back({e, Edit::ToIdentity, {}});
    for (int b : body) {
      std::optional<Edit> e = edit(b, tensors);
      if (!e) return std::nullopt;
      edits.push_back(std::move(*e));
    }
    return edits;
  }

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
    if (one_of(op, kUnary) || op == "Clip" || op == "Dropout") {
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
      const NodeAttributes a(n);
      if (!in_region(0) || a.get_int("keepdims", 1) != 1 || !reduces_last_axis(n))
        return std::nullopt;
      e.kind = Edit::ReduceChannels;
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

  bool scalar(const std::string& name) const {
    const onnx::TensorProto* t = constant(name);
    if (!t) return false;
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
    return tensor(name + "_channels_first", dims, f->data);
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
    return tensor(name + "_as_conv", dims, w);
  }

  static onnx::TensorProto tensor(const std::string& name, const Shape& dims,
                                  const std::vector<float>& data) {
    onnx::TensorProto t;
    t.set_name(name);
    t.set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t.add_dims(d);
    for (float v : data) t.add_float_data(v);
    return t;
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
};

void apply(onnx::GraphProto& g, const Edit& e, std::set<std::string>& names) {
  onnx::NodeProto& n = *g.mutable_node(e.node);
  for (const auto& [k, t] : e.constants) {
    std::string name = t.name();
    for (int s = 1; names.count(name); ++s) name = t.name() + "_" + std::to_string(s);
    names.insert(name);
    onnx::TensorProto* added = g.add_initializer();
    *added = t;
    added->set_name(name);
    n.set_input(k, name);
  }
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
      if (n.input_size() > 1 && !n.input(1).empty()) {
        onnx::TensorProto axes;
        std::string name = n.input(1) + "_channel_axis";
        for (int s = 1; names.count(name); ++s)
          name = n.input(1) + "_channel_axis_" + std::to_string(s);
        names.insert(name);
        axes.set_name(name);
        axes.set_data_type(onnx::TensorProto::INT64);
        axes.add_dims(1);
        axes.add_int64_data(1);
        *g.add_initializer() = axes;
        n.set_input(1, name);
      }
      break;
    case Edit::MatMulToConv:
      n.set_op_type("Conv");
      n.clear_attribute();
      break;
    case Edit::Keep:
      break;
  }
}

}  // namespace

int fold_last_axis_regions(onnx::ModelProto& model, const onnx::ModelProto& inferred,
                           const std::string& label) {
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
    }
  }
  if (regions.empty()) return 0;
  onnx::GraphProto& g = *model.mutable_graph();
  std::set<std::string> names, relaid;
  for (const auto& t : g.initializer()) names.insert(t.name());
  for (const auto& n : g.node())
    for (const auto& o : n.output()) names.insert(o);
  for (const auto& v : g.input()) names.insert(v.name());
  for (const auto& r : regions)
    for (const Edit& e : r) {
      apply(g, e, names);
      for (const auto& o : g.node(e.node).output()) relaid.insert(o);
    }
  auto* vi = g.mutable_value_info();  // the region's tensors change shape
  for (int k = vi->size() - 1; k >= 0; --k)
    if (relaid.count(vi->Get(k).name())) vi->DeleteSubrange(k, 1);
  return static_cast<int>(regions.size());
}

}  // namespace padfold::onnx_import
