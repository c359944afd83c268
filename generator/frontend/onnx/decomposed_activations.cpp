#include "frontend/onnx/decomposed_activations.h"

#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "frontend/onnx/onnx_graph.h"
#include "frontend/onnx/onnx_model.h"

namespace padfold::onnx_import {
namespace {

// The graph's one-element constants by tensor name: initializers and Constant nodes' values.
std::map<std::string, float> scalar_constants(const onnx::GraphProto& g) {
  std::map<std::string, float> out;
  const auto add = [&](const std::string& name, const onnx::TensorProto& t) {
    try {
      const FloatTensor f = to_float_tensor(t, name);
      if (f.data.size() == 1) out[name] = f.data[0];
    } catch (const std::exception&) {  // not a number: not a scalar this pass reads
    }
  };
  for (const auto& t : g.initializer()) add(t.name(), t);
  for (const auto& n : g.node()) {
    if (!default_domain(n) || n.op_type() != "Constant" || n.output_size() != 1) continue;
    for (const auto& a : n.attribute()) {
      if (a.name() == "value" && a.has_t()) add(n.output(0), a.t());
      if (a.name() == "value_float") out[n.output(0)] = a.f();
    }
  }
  return out;
}

float attribute_float(const onnx::NodeProto& n, const std::string& name, float fallback) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return a.f();
  return fallback;
}

class Folder {
 public:
  explicit Folder(onnx::GraphProto& g) : g_(g), constants_(scalar_constants(g)) {
    for (const auto& o : g.output()) outputs_.insert(o.name());
    for (const auto& t : g.initializer()) constant_names_.insert(t.name());
    for (const auto& n : g.node())
      if (default_domain(n) && n.op_type() == "Constant")
        constant_names_.insert(n.output().begin(), n.output().end());
    for (int i = 0; i < g.node_size(); ++i)
      for (const std::string& in : g.node(i).input()) readers_[in].push_back(i);
  }

  int run() {
    std::set<int> removed;
    int folded = 0;
    for (int i = 0; i < g_.node_size(); ++i) {
      const std::optional<Chain> c = chain_from(i);
      if (!c) continue;
      onnx::NodeProto& last = *g_.mutable_node(c->last);
      onnx::NodeProto hs;
      hs.set_name(last.name());
      hs.set_op_type("HardSigmoid");
      hs.add_input(c->x);
      hs.add_output(last.output(0));
      onnx::AttributeProto* alpha = hs.add_attribute();
      alpha->set_name("alpha");
      alpha->set_type(onnx::AttributeProto::FLOAT);
      alpha->set_f(1.f / 6.f);
      onnx::AttributeProto* beta = hs.add_attribute();
      beta->set_name("beta");
      beta->set_type(onnx::AttributeProto::FLOAT);
      beta->set_f(0.5f);
      last = hs;
      removed.insert(c->add);
      removed.insert(c->clip);
      ++folded;
    }
    if (folded == 0) return 0;
    onnx::GraphProto kept;
    for (int i = 0; i < g_.node_size(); ++i)
      if (!removed.count(i)) *kept.add_node() = g_.node(i);
    g_.mutable_node()->Swap(kept.mutable_node());
    return folded;
  }

 private:
  struct Chain {
    int add, clip, last;
    std::string x;
  };

  bool is(int i, const char* op) const {
    return default_domain(g_.node(i)) && g_.node(i).op_type() == op;
  }
  std::optional<float> scalar(const std::string& name) const {
    const auto it = constants_.find(name);
    if (it == constants_.end()) return std::nullopt;
    return it->second;
  }
  // The one node reading node i's only output, which is no graph output; -1 if none.
  int only_reader(int i) const {
    const onnx::NodeProto& n = g_.node(i);
    if (n.output_size() != 1 || outputs_.count(n.output(0))) return -1;
    const auto it = readers_.find(n.output(0));
    if (it == readers_.end() || it->second.size() != 1) return -1;
    const int r = it->second[0];
    // Read once: a node reading the tensor twice (x * x) is no link of the chain.
    int uses = 0;
    for (const std::string& in : g_.node(r).input()) uses += in == n.output(0);
    return uses == 1 ? r : -1;
  }
  // Clip(0, 6): bounds as inputs (opset 11 on) or attributes (before).
  bool relu6(int i) const {
    const onnx::NodeProto& n = g_.node(i);
    if (n.input_size() == 3) return scalar(n.input(1)) == 0.f && scalar(n.input(2)) == 6.f;
    if (n.input_size() == 1)
      return attribute_float(n, "min", -1.f) == 0.f && attribute_float(n, "max", -1.f) == 6.f;
    return false;
  }
  // Mul by 1/6 (as float32 rounds it) or Div by 6, reading `in`.
  bool sixth(int i, const std::string& in) const {
    const onnx::NodeProto& n = g_.node(i);
    if (n.input_size() != 2 || n.output_size() != 1) return false;
    if (is(i, "Div")) return n.input(0) == in && scalar(n.input(1)) == 6.f;
    if (!is(i, "Mul")) return false;
    const std::string& other = n.input(0) == in ? n.input(1) : n.input(0);
    const std::optional<float> v = scalar(other);
    return v && std::abs(*v - 1.f / 6.f) <= 1e-7f;
  }

  std::optional<Chain> chain_from(int add) const {
    if (!is(add, "Add") || g_.node(add).input_size() != 2) return std::nullopt;
    const onnx::NodeProto& a = g_.node(add);
    std::string x;
    if (scalar(a.input(1)) == 3.f)
      x = a.input(0);
    else if (scalar(a.input(0)) == 3.f)
      x = a.input(1);
    if (x.empty() || constant_names_.count(x)) return std::nullopt;  // a constant: as it is
    const int clip = only_reader(add);
    if (clip < 0 || !is(clip, "Clip") || g_.node(clip).input(0) != a.output(0) || !relu6(clip))
      return std::nullopt;
    const int last = only_reader(clip);
    if (last < 0 || !sixth(last, g_.node(clip).output(0))) return std::nullopt;
    return Chain{add, clip, last, x};
  }

  onnx::GraphProto& g_;
  std::map<std::string, float> constants_;
  std::set<std::string> outputs_;
  std::set<std::string> constant_names_;  // initializers and Constant nodes' outputs
  std::map<std::string, std::vector<int>> readers_;
};

}  // namespace

int fold_decomposed_activations(onnx::ModelProto& model) {
  return Folder(*model.mutable_graph()).run();
}

}  // namespace padfold::onnx_import
