#include "frontend/onnx/decomposed_activations.h"

#include <cmath>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "frontend/activation.h"
#include "frontend/onnx/onnx_graph.h"
#include "frontend/onnx/onnx_model.h"

namespace padfold::onnx_import {
namespace {

// The chain's nodes, the last one replaced by `op` reading x, the others removed.
struct Chain {
  std::vector<int> removed;
  int last;
  std::string x;
  const char* op;
  const char* approximate = nullptr;  // Gelu's attribute, when not "none"
};

class ChainFinder {
 public:
  explicit ChainFinder(const GraphIndex& g) : g_(g) {}

  std::optional<Chain> from(int add) const {
    if (!is(add, "Add") || g_.node(add).input_size() != 2) return std::nullopt;
    const onnx::NodeProto& a = g_.node(add);
    std::string x;
    if (scalar(a.input(1)) == 3.f)
      x = a.input(0);
    else if (scalar(a.input(0)) == 3.f)
      x = a.input(1);
    if (x.empty() || g_.constant(x)) return std::nullopt;  // a constant: as it is
    const int clip = only_reader(add);
    if (clip < 0 || !is(clip, "Clip") || g_.node(clip).input(0) != a.output(0) || !relu6(clip))
      return std::nullopt;
    const int last = only_reader(clip);
    if (last < 0 || !sixth(last, g_.node(clip).output(0))) return std::nullopt;
    return Chain{{add, clip}, last, x, "HardSigmoid"};
  }

  // GELU's erf form: Div(x, sqrt 2) or Mul(x, 1/sqrt 2) -> Erf -> Add(1) -> Mul(x) -> Mul(1/2).
  std::optional<Chain> gelu_from(int scale) const {
    const onnx::NodeProto& s = g_.node(scale);
    if (s.input_size() != 2 || s.output_size() != 1) return std::nullopt;
    std::string x;
    if (is(scale, "Div") && near(scalar(s.input(1)), std::sqrt(2.0)))
      x = s.input(0);
    else if (is(scale, "Mul"))
      x = other_input(scale, [&](const std::string& t) { return near(scalar(t), std::sqrt(0.5)); });
    if (x.empty() || g_.constant(x)) return std::nullopt;
    const int erf = only_reader(scale);
    if (erf < 0 || !is(erf, "Erf")) return std::nullopt;
    const int one = only_reader(erf);
    if (one < 0 || !is(one, "Add") || !near(scalar(operand_beside(one, erf)), 1.0))
      return std::nullopt;
    const int times_x = only_reader(one);
    if (times_x < 0 || !is(times_x, "Mul") || operand_beside(times_x, one) != x)
      return std::nullopt;
    const int half = only_reader(times_x);
    if (half < 0 || !is(half, "Mul") || !near(scalar(operand_beside(half, times_x)), 0.5))
      return std::nullopt;
    return Chain{{scale, erf, one, times_x}, half, x, "Gelu"};
  }

  // GELU as Keras 3 writes it and tf2onnx converts erfc: Mul(Neg(x), 1/sqrt 2) (or Div by sqrt 2)
  // -> Erf -> Sub(1, .) -> Mul(Mul(x, 1/2), .). 1 - erf(-x/sqrt 2) is 1 + erf(x/sqrt 2).
  std::optional<Chain> gelu_erfc_from(int neg) const {
    if (!is(neg, "Neg") || g_.node(neg).input_size() != 1) return std::nullopt;
    const std::string x = g_.node(neg).input(0);
    const int scale = only_reader(neg);
    if (x.empty() || g_.constant(x) || scale < 0) return std::nullopt;
    const onnx::NodeProto& s = g_.node(scale);
    const bool scaled =
        s.input_size() == 2 && s.output_size() == 1 &&
        ((is(scale, "Div") && near(scalar(s.input(1)), std::sqrt(2.0))) ||
         (is(scale, "Mul") && near(scalar(operand_beside(scale, neg)), std::sqrt(0.5))));
    const int erf = scaled ? only_reader(scale) : -1;
    if (erf < 0 || !is(erf, "Erf")) return std::nullopt;
    const int sub = only_reader(erf);
    if (sub < 0 || !is(sub, "Sub") || g_.node(sub).input_size() != 2 ||
        g_.node(sub).input(1) != g_.node(erf).output(0) ||
        !near(scalar(g_.node(sub).input(0)), 1.0))
      return std::nullopt;
    const int last = only_reader(sub);
    if (last < 0 || !is(last, "Mul")) return std::nullopt;
    const int half_x = inner(operand_beside(last, sub), "Mul");
    if (half_x < 0 || other_input(half_x, scalar_near(0.5)) != x) return std::nullopt;
    return Chain{{neg, scale, erf, sub, half_x}, last, x, "Gelu"};
  }

  // GELU's tanh form from its Tanh: Mul(sqrt(2 / pi), Add(x, Mul(0.044715, x^3))) -> Tanh ->
  // Add(1), then times x and 1/2 in either order (torch.onnx: Mul(x) -> Mul(1/2); TensorFlow:
  // Mul(Mul(x, 1/2), .)); x^3 as Pow(x, 3) or Mul(x, Mul(x, x)).
  std::optional<Chain> gelu_tanh_from(int tanh) const {
    const onnx::NodeProto& t = g_.node(tanh);
    if (!is(tanh, "Tanh") || t.input_size() != 1) return std::nullopt;
    const int scale = inner(t.input(0), "Mul");
    if (scale < 0) return std::nullopt;
    const int sum = inner(other_input(scale, scalar_near(gelu_tanh::kScale)), "Add");
    if (sum < 0) return std::nullopt;
    // Add(x, v): v is the Mul by 0.044715 of x cubed; x is the other operand.
    for (int side = 0; side < 2; ++side) {
      const std::string x = g_.node(sum).input(side);
      const int coeff = inner(g_.node(sum).input(1 - side), "Mul");
      if (coeff < 0 || g_.constant(x)) continue;
      const int cube = inner(other_input(coeff, scalar_near(gelu_tanh::kCubic)), "");
      if (cube < 0) continue;
      std::vector<int> inside = {cube, coeff, sum, scale, tanh};
      if (!cubes(cube, x, inside)) continue;
      const int one = only_reader(tanh);
      if (one < 0 || !is(one, "Add") || !near(scalar(operand_beside(one, tanh)), 1.0))
        return std::nullopt;
      inside.push_back(one);
      const int next = only_reader(one);
      if (next < 0 || !is(next, "Mul")) return std::nullopt;
      const std::string other = operand_beside(next, one);
      if (other == x) {  // Mul(x) -> Mul(1/2)
        const int half = only_reader(next);
        if (half < 0 || !is(half, "Mul") || !near(scalar(operand_beside(half, next)), 0.5))
          return std::nullopt;
        inside.push_back(next);
        return Chain{inside, half, x, "Gelu", "tanh"};
      }
      if (near(scalar(other), 0.5)) {  // Mul(1/2) -> Mul(x)
        const int last = only_reader(next);
        if (last < 0 || !is(last, "Mul") || operand_beside(last, next) != x) return std::nullopt;
        inside.push_back(next);
        return Chain{inside, last, x, "Gelu", "tanh"};
      }
      const int half_x = inner(other, "Mul");  // Mul(Mul(x, 1/2), .)
      if (half_x < 0 || other_input(half_x, scalar_near(0.5)) != x) return std::nullopt;
      inside.push_back(half_x);
      return Chain{inside, next, x, "Gelu", "tanh"};
    }
    return std::nullopt;
  }

 private:
  bool is(int i, const char* op) const {
    return default_domain(g_.node(i)) && g_.node(i).op_type() == op;
  }
  // The node of type `op` ("": any) producing `t`, whose output only one node reads, once.
  int inner(const std::string& t, const char* op) const {
    if (t.empty()) return -1;
    const int p = g_.producer(t);
    if (p < 0 || (*op && !is(p, op)) || g_.node(p).output_size() != 1 || only_reader(p) < 0)
      return -1;
    return p;
  }
  // Whether node `cube` computes x^3: Pow(x, 3), or Mul(x, Mul(x, x)) (the inner Mul added to
  // `inside`).
  bool cubes(int cube, const std::string& x, std::vector<int>& inside) const {
    const onnx::NodeProto& n = g_.node(cube);
    if (n.input_size() != 2) return false;
    if (is(cube, "Pow")) return n.input(0) == x && scalar(n.input(1)) == 3.f;
    if (!is(cube, "Mul")) return false;
    const std::string square = other_input(cube, [&](const std::string& in) { return in == x; });
    const int sq = inner(square, "Mul");
    if (sq < 0 || g_.node(sq).input(0) != x || g_.node(sq).input(1) != x) return false;
    inside.push_back(sq);
    return true;
  }
  std::function<bool(const std::string&)> scalar_near(double want) const {
    return [this, want](const std::string& t) { return near(scalar(t), want); };
  }
  // The value of a one-element constant.
  std::optional<float> scalar(const std::string& name) const {
    const onnx::TensorProto* t = g_.constant(name);
    if (!t) return std::nullopt;
    try {
      const FloatTensor f = to_float_tensor(*t, name);
      if (f.data.size() == 1) return f.data[0];
    } catch (const std::exception&) {  // not a number: no scalar of this pattern
    }
    return std::nullopt;
  }
  // Of a binary node whose input `which` picks: the other input ("" if neither or both are).
  template <typename F>
  std::string other_input(int i, F which) const {
    const onnx::NodeProto& n = g_.node(i);
    if (n.input_size() != 2) return "";
    const bool first = which(n.input(0)), second = which(n.input(1));
    if (first == second) return "";
    return first ? n.input(1) : n.input(0);
  }
  // Binary node i's input other than node `from`'s output.
  std::string operand_beside(int i, int from) const {
    const std::string& t = g_.node(from).output(0);
    return other_input(i, [&](const std::string& in) { return in == t; });
  }
  // A float32 constant as an exporter writes `want` (1/sqrt 2 rounded, 0.5...).
  static bool near(const std::optional<float>& v, double want) {
    return v && std::abs(*v - want) <= 1e-6 * std::abs(want);
  }
  // The one node reading node i's only output once, which is no graph output; -1 if none.
  int only_reader(int i) const {
    const onnx::NodeProto& n = g_.node(i);
    if (n.output_size() != 1 || g_.is_graph_output(n.output(0))) return -1;
    const std::vector<int>& readers = g_.consumers(n.output(0));
    if (readers.size() != 1) return -1;
    int uses = 0;  // a node reading the tensor twice (x * x) is no link of the chain
    for (const std::string& in : g_.node(readers[0]).input()) uses += in == n.output(0);
    return uses == 1 ? readers[0] : -1;
  }
  // Clip(0, 6): bounds as inputs (opset 11 on) or attributes (before).
  bool relu6(int i) const {
    const onnx::NodeProto& n = g_.node(i);
    if (n.input_size() == 3) return scalar(n.input(1)) == 0.f && scalar(n.input(2)) == 6.f;
    if (n.input_size() != 1) return false;
    try {
      const NodeAttributes a(n);
      return a.get_float("min", -1.f) == 0.f && a.get_float("max", -1.f) == 6.f;
    } catch (const std::exception&) {  // malformed attributes: the importer names them later
      return false;
    }
  }
  // Mul by 1/6 (as float32 rounds it) or Div by 6, reading `in`.
  bool sixth(int i, const std::string& in) const {
    const onnx::NodeProto& n = g_.node(i);
    if (n.input_size() != 2 || n.output_size() != 1) return false;
    if (is(i, "Div")) return n.input(0) == in && scalar(n.input(1)) == 6.f;
    if (!is(i, "Mul")) return false;
    const std::optional<float> v = scalar(n.input(0) == in ? n.input(1) : n.input(0));
    return v && std::abs(*v - 1.f / 6.f) <= 1e-7f;
  }

  const GraphIndex& g_;
};

onnx::NodeProto activation(const Chain& c, const std::string& name, const std::string& y) {
  onnx::NodeProto hs;
  hs.set_name(name);
  hs.set_op_type(c.op);
  hs.add_input(c.x);
  hs.add_output(y);
  if (c.approximate) {
    onnx::AttributeProto* a = hs.add_attribute();
    a->set_name("approximate");
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(c.approximate);
  }
  if (std::string(c.op) != "HardSigmoid") return hs;
  for (const auto& [attr, value] : {std::pair{"alpha", 1.f / 6.f}, std::pair{"beta", 0.5f}}) {
    onnx::AttributeProto* a = hs.add_attribute();
    a->set_name(attr);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(value);
  }
  return hs;
}

}  // namespace

int fold_decomposed_activations(onnx::ModelProto& model, const std::string& label) {
  std::vector<Chain> chains;
  {
    const GraphIndex g(model, label);  // checks the graph as the import does
    const ChainFinder find(g);
    for (int i = 0; i < g.num_nodes(); ++i) {
      if (const std::optional<Chain> c = find.from(i)) chains.push_back(*c);
      if (const std::optional<Chain> c = find.gelu_from(i)) chains.push_back(*c);
      if (const std::optional<Chain> c = find.gelu_tanh_from(i)) chains.push_back(*c);
      if (const std::optional<Chain> c = find.gelu_erfc_from(i)) chains.push_back(*c);
    }
  }
  if (chains.empty()) return 0;
  onnx::GraphProto& graph = *model.mutable_graph();
  std::set<int> removed;
  for (const Chain& c : chains) {
    onnx::NodeProto& last = *graph.mutable_node(c.last);
    last = activation(c, last.name(), last.output(0));
    removed.insert(c.removed.begin(), c.removed.end());
  }
  onnx::GraphProto kept;
  for (int i = 0; i < graph.node_size(); ++i)
    if (!removed.count(i)) *kept.add_node() = graph.node(i);
  graph.mutable_node()->Swap(kept.mutable_node());

  return static_cast<int>(chains.size());
}

int expand_gelu_below_opset20(onnx::ModelProto& model) {
  if (default_opset(model) >= 20) return 0;
  onnx::GraphProto& graph = *model.mutable_graph();
  GraphNames names(graph);
  auto fresh = [&](const std::string& base) { return names.fresh(base); };
  auto scalar = [&](const std::string& base, float v) {
    onnx::TensorProto* t = graph.add_initializer();
    *t = float_tensor(fresh(base), {}, {v});
    return t->name();
  };
  onnx::GraphProto expanded;
  int count = 0;
  for (const onnx::NodeProto& n : graph.node()) {
    if (!default_domain(n) || n.op_type() != "Gelu" || n.input_size() != 1) {
      *expanded.add_node() = n;
      continue;
    }
    ++count;
    const std::string& x = n.input(0);
    const std::string base = n.name().empty() ? n.output(0) : n.name();
    auto add = [&](const char* op, const std::vector<std::string>& in, const std::string& out) {
      onnx::NodeProto* m = expanded.add_node();
      m->set_name(fresh(base + "_" + op));
      m->set_op_type(op);
      for (const std::string& i : in) m->add_input(i);
      m->add_output(out);
      return out;
    };
    bool tanh = false;
    for (const onnx::AttributeProto& a : n.attribute())
      tanh = tanh || (a.name() == "approximate" && a.s() == "tanh");
    std::string inner;
    if (tanh) {  // x^3 -> Mul(0.044715) -> Add(x) -> Mul(sqrt(2 / pi)) -> Tanh
      const std::string square = add("Mul", {x, x}, fresh(base + "_square"));
      const std::string cube = add("Mul", {square, x}, fresh(base + "_cube"));
      const std::string coeff = add("Mul", {cube, scalar(base + "_coeff", gelu_tanh::kCubic)},
                                    fresh(base + "_cube_coeff"));
      const std::string sum = add("Add", {x, coeff}, fresh(base + "_sum"));
      const std::string scaled =
          add("Mul", {sum, scalar(base + "_scale", gelu_tanh::kScale)}, fresh(base + "_scaled"));
      inner = add("Tanh", {scaled}, fresh(base + "_tanh"));
    } else {
      const std::string scaled =
          add("Div", {x, scalar(base + "_sqrt2", std::sqrt(2.f))}, fresh(base + "_scaled"));
      inner = add("Erf", {scaled}, fresh(base + "_erf"));
    }
    const std::string one = add("Add", {inner, scalar(base + "_one", 1.f)}, fresh(base + "_plus1"));
    const std::string times = add("Mul", {x, one}, fresh(base + "_times_x"));
    add("Mul", {times, scalar(base + "_half", 0.5f)}, n.output(0));
  }
  if (count) graph.mutable_node()->Swap(expanded.mutable_node());
  return count;
}

}  // namespace padfold::onnx_import
