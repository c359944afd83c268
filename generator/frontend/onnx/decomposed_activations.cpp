#include "frontend/onnx/decomposed_activations.h"

#include <cmath>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "frontend/onnx/onnx_graph.h"
#include "frontend/onnx/onnx_model.h"

namespace padfold::onnx_import {
namespace {

struct Chain {
  int add, clip, last;
  std::string x;
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
    return Chain{add, clip, last, x};
  }

 private:
  bool is(int i, const char* op) const {
    return default_domain(g_.node(i)) && g_.node(i).op_type() == op;
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

onnx::NodeProto hard_sigmoid(const std::string& name, const std::string& x, const std::string& y) {
  onnx::NodeProto hs;
  hs.set_name(name);
  hs.set_op_type("HardSigmoid");
  hs.add_input(x);
  hs.add_output(y);
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
    for (int i = 0; i < g.num_nodes(); ++i)
      if (const std::optional<Chain> c = find.from(i)) chains.push_back(*c);
  }
  if (chains.empty()) return 0;
  onnx::GraphProto& graph = *model.mutable_graph();
  std::set<int> removed;
  for (const Chain& c : chains) {
    onnx::NodeProto& last = *graph.mutable_node(c.last);
    last = hard_sigmoid(last.name(), c.x, last.output(0));
    removed.insert({c.add, c.clip});
  }
  onnx::GraphProto kept;
  for (int i = 0; i < graph.node_size(); ++i)
    if (!removed.count(i)) *kept.add_node() = graph.node(i);
  graph.mutable_node()->Swap(kept.mutable_node());
  return static_cast<int>(chains.size());
}

}  // namespace padfold::onnx_import
