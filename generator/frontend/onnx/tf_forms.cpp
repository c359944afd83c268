#include "frontend/onnx/tf_forms.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "frontend/onnx/onnx_graph.h"
#include "frontend/onnx/onnx_model.h"

namespace padfold::onnx_import {
namespace {

// One chain's rewrite: nodes given a new form, nodes removed.
struct Rewrite {
  std::map<int, onnx::NodeProto> replaced;
  std::set<int> removed;
};

class FormFinder {
 public:
  FormFinder(const GraphIndex& g, const std::string& two, GraphNames& names)
      : g_(g), two_(two), names_(names) {}

  // Keras's LayerNormalization over the channels, found from its Reciprocal.
  std::optional<Rewrite> layer_norm(int recip) const {
    if (!is(recip, "Reciprocal", 1)) return std::nullopt;
    const int sqrt = inner(g_.node(recip).input(0), "Sqrt", 1);
    const int add = sqrt < 0 ? -1 : inner(g_.node(sqrt).input(0), "Add", 2);
    if (add < 0) return std::nullopt;
    const std::string variance = operand_where(add, [&](const std::string& t) {
      const std::optional<float> eps = scalar(t);
      return !(eps && *eps > 0 && *eps <= 1);
    });
    const int var = inner(variance, "ReduceMean", -1);
    const int square = var < 0 ? -1 : inner(g_.node(var).input(0), "Mul", 2);
    if (square < 0 || g_.node(square).input(0) != g_.node(square).input(1)) return std::nullopt;
    const int sub = inner(g_.node(square).input(0), "Sub", 2);
    if (sub < 0) return std::nullopt;
    const std::string x = g_.node(sub).input(0);
    int reshape = g_.producer(g_.node(sub).input(1));
    int mean = reshape;
    if (reshape >= 0 && is(reshape, "Reshape", 2)) {
      if (!only_reader_is(g_.node(reshape).output(0), sub) ||
          !same_static_shape(g_.node(reshape).input(0), g_.node(reshape).output(0)))
        return std::nullopt;
      mean = g_.producer(g_.node(reshape).input(0));
    } else {
      reshape = -1;
    }
    if (mean < 0 || !is(mean, "ReduceMean", -1) || g_.node(mean).input(0) != x || x.empty() ||
        g_.constant(x) || !same_axes(mean, var) || !over_channels(mean, x))
      return std::nullopt;
    // The mean's readers: the Sub (or the Reshape) and a Neg.
    const std::string& m = g_.node(mean).output(0);
    const std::vector<int>& mean_readers = g_.consumers(m);
    if (mean_readers.size() != 2 || g_.is_graph_output(m)) return std::nullopt;
    const int neg =
        mean_readers[0] == (reshape >= 0 ? reshape : sub) ? mean_readers[1] : mean_readers[0];
    if (!is(neg, "Neg", 1) || g_.node(neg).input(0) != m ||
        std::find(mean_readers.begin(), mean_readers.end(), reshape >= 0 ? reshape : sub) ==
            mean_readers.end())
      return std::nullopt;
    // s: the Reciprocal times gamma, or the Reciprocal alone.
    int gamma = -1;
    const std::string& r = g_.node(recip).output(0);
    if (g_.consumers(r).size() == 1 && !g_.is_graph_output(r)) {
      gamma = g_.consumers(r)[0];
      if (!is(gamma, "Mul", 2) ||
          !g_.constant(operand_where(gamma, [&](const std::string& t) { return t != r; })))
        return std::nullopt;
    }
    const std::string& s = gamma >= 0 ? g_.node(gamma).output(0) : r;
    const std::vector<int>& s_readers = g_.consumers(s);
    if (s_readers.size() != 2 || g_.is_graph_output(s)) return std::nullopt;
    int times_x = -1, times_neg = -1;
    for (int reader : s_readers) {
      if (!is(reader, "Mul", 2)) return std::nullopt;
      const std::string other = operand_where(reader, [&](const std::string& t) { return t != s; });
      if (other == x)
        times_x = reader;
      else if (other == g_.node(neg).output(0))
        times_neg = reader;
    }
    if (times_x < 0 || times_neg < 0 || !only_reader_is(g_.node(neg).output(0), times_neg))
      return std::nullopt;
    // Then Add(beta) of the -mean * s, and the Add of both.
    int beta = -1;
    int last = only_reader(times_neg);
    if (last >= 0 && is(last, "Add", 2) &&
        g_.constant(operand_where(
            last, [&](const std::string& t) { return t != g_.node(times_neg).output(0); }))) {
      beta = last;
      last = only_reader(beta);
    }
    const std::string shift = g_.node(beta >= 0 ? beta : times_neg).output(0);
    if (last < 0 || !is(last, "Add", 2) || only_reader(times_x) != last ||
        operand_where(last, [&](const std::string& t) { return t != shift; }) !=
            g_.node(times_x).output(0))
      return std::nullopt;

    Rewrite w;
    w.removed = {neg, times_x, times_neg};
    if (reshape >= 0) {
      w.removed.insert(reshape);
      onnx::NodeProto d = g_.node(sub);
      d.set_input(1, m);
      w.replaced[sub] = d;
    }
    onnx::NodeProto pow = g_.node(square);
    pow.set_op_type("Pow");
    pow.set_input(1, two_);
    w.replaced[square] = pow;
    // (x - mean) / sd, and its product with gamma, are tensors the file does not have: new names.
    onnx::NodeProto div = g_.node(recip);
    div.set_op_type("Div");
    div.clear_input();
    div.add_input(g_.node(sub).output(0));
    div.add_input(g_.node(sqrt).output(0));
    div.set_output(0, names_.fresh(r + "_normalized"));
    w.replaced[recip] = div;
    std::string tail_out = div.output(0);
    if (gamma >= 0) {
      onnx::NodeProto scaled = g_.node(gamma);
      const int at = scaled.input(0) == r ? 0 : 1;
      scaled.set_input(at, tail_out);
      scaled.set_output(0, names_.fresh(s + "_scaled"));
      tail_out = scaled.output(0);
      w.replaced[gamma] = scaled;
    }
    const int tail = gamma >= 0 ? gamma : recip;
    if (beta >= 0) {  // the last Add adds beta to (x - mean) / sd * gamma
      onnx::NodeProto plus = g_.node(last);
      plus.clear_input();
      plus.add_input(tail_out);
      plus.add_input(operand_where(
          beta, [&](const std::string& t) { return t != g_.node(times_neg).output(0); }));
      w.replaced[last] = plus;
      w.removed.insert(beta);
    } else {  // the tail writes the last Add's output
      onnx::NodeProto t = w.replaced.at(tail);
      t.set_output(0, g_.node(last).output(0));
      w.replaced[tail] = t;
      w.removed.insert(last);
    }
    return w;
  }

  // tf.tensordot, found from its MatMul: Reshape [..., C] -> [M, C], MatMul by a constant [C, K],
  // Reshape to [..., K].
  std::optional<Rewrite> tensordot(int matmul) const {
    if (!is(matmul, "MatMul", 2)) return std::nullopt;
    const onnx::NodeProto& n = g_.node(matmul);
    const onnx::TensorProto* w = g_.constant(n.input(1));
    const int before = inner(n.input(0), "Reshape", 2);
    const int after = only_reader(matmul);
    if (!w || w->dims_size() != 2 || before < 0 || after < 0 || !is(after, "Reshape", 2) ||
        g_.node(after).input(0) != n.output(0))
      return std::nullopt;
    const std::string& a = g_.node(before).input(0);
    const auto at = g_.type(a), flat = g_.type(n.input(0)), out = g_.type(g_.node(after).output(0));
    if (a.empty() || g_.constant(a) || !at || !at->is_static() || at->shape.size() < 3 || !flat ||
        !flat->is_static() || !out || !out->is_static())
      return std::nullopt;
    std::vector<int64_t> lead(at->shape.begin(), at->shape.end() - 1);
    int64_t rows = 1;
    for (int64_t d : lead) rows *= d;
    std::vector<int64_t> want_out = lead;
    want_out.push_back(w->dims(1));
    if (flat->shape != std::vector<int64_t>{rows, at->shape.back()} ||
        at->shape.back() != w->dims(0) || out->shape != want_out)
      return std::nullopt;
    Rewrite r;
    onnx::NodeProto m = n;
    m.set_input(0, a);
    m.set_output(0, g_.node(after).output(0));
    r.replaced[matmul] = m;
    r.removed = {before, after};
    return r;
  }

 private:
  // Node i is `op` of the default domain with `inputs` inputs (-1: any) and one output.
  bool is(int i, const char* op, int inputs) const {
    const onnx::NodeProto& n = g_.node(i);
    return default_domain(n) && n.op_type() == op && n.output_size() == 1 &&
           (inputs < 0 || n.input_size() == inputs);
  }
  // The node of type `op` producing `t`, read by one node alone and no graph output; or -1.
  int inner(const std::string& t, const char* op, int inputs) const {
    const int p = t.empty() ? -1 : g_.producer(t);
    return p >= 0 && is(p, op, inputs) && only_reader(p) >= 0 ? p : -1;
  }
  // The one node reading node i's output (once or more), which is no graph output; or -1.
  int only_reader(int i) const {
    const std::string& t = g_.node(i).output(0);
    const std::vector<int>& readers = g_.consumers(t);
    return readers.size() == 1 && !g_.is_graph_output(t) ? readers[0] : -1;
  }
  bool only_reader_is(const std::string& t, int reader) const {
    return g_.consumers(t) == std::vector<int>{reader} && !g_.is_graph_output(t);
  }
  // Of binary node i: the one input `pick` accepts ("" if none or both).
  template <typename F>
  std::string operand_where(int i, F pick) const {
    const onnx::NodeProto& n = g_.node(i);
    if (n.input_size() != 2) return "";
    const bool first = pick(n.input(0)), second = pick(n.input(1));
    return first == second ? "" : first ? n.input(0) : n.input(1);
  }
  std::optional<float> scalar(const std::string& name) const {
    const onnx::TensorProto* t = name.empty() ? nullptr : g_.constant(name);
    if (!t) return std::nullopt;
    try {
      const FloatTensor f = to_float_tensor(*t, name);
      if (f.data.size() == 1) return f.data[0];
    } catch (const std::exception&) {  // not a number: not this pattern
    }
    return std::nullopt;
  }
  bool same_static_shape(const std::string& a, const std::string& b) const {
    const auto at = g_.type(a), bt = g_.type(b);
    return at && bt && at->is_static() && bt->is_static() && at->shape == bt->shape;
  }
  // ReduceMean `mean` averages the channels of `x` alone (axis 1 of a rank 2-5 tensor): where
  // the importer drafts the rewritten chain as a layer_norm, not leaving its new nodes to the
  // caller.
  bool over_channels(int mean, const std::string& x) const {
    const auto t = g_.type(x);
    const std::optional<std::vector<int64_t>> a = axes(mean);
    if (!t || !t->has_shape || t->shape.size() < 2 || t->shape.size() > 5 || !a || a->size() != 1)
      return false;
    const int64_t rank = static_cast<int64_t>(t->shape.size());
    return (*a)[0] == 1 || (*a)[0] == 1 - rank;
  }
  // ReduceMeans `a` and `b` average the same axes, keeping them.
  bool same_axes(int a, int b) const {
    const std::optional<std::vector<int64_t>> x = axes(a), y = axes(b);
    return x && y && *x == *y;
  }
  std::optional<std::vector<int64_t>> axes(int i) const {
    const onnx::NodeProto& n = g_.node(i);
    try {
      const NodeAttributes a(n);
      if (a.get_int("keepdims", 1) != 1) return std::nullopt;
      if (a.has("axes")) return a.get_ints("axes");
      if (n.input_size() >= 2)
        if (const onnx::TensorProto* t = g_.constant(n.input(1))) return to_int64s(*t, "axes");
    } catch (const std::exception&) {  // malformed: the importer names it later
    }
    return std::nullopt;
  }

  const GraphIndex& g_;
  const std::string two_;  // the name of a float32 2 for Pow
  GraphNames& names_;      // for the tensors the file does not have
};

}  // namespace

int fold_tf_forms(onnx::ModelProto& model, const onnx::ModelProto& inferred,
                  const std::string& label) {
  const GraphIndex g(inferred, label);
  GraphNames names(model.graph());
  const std::string two = names.fresh("padfold_two");
  const FormFinder find(g, two, names);
  Rewrite all;
  int count = 0;
  bool squares = false;
  for (int i = 0; i < g.num_nodes(); ++i) {
    std::optional<Rewrite> r = find.layer_norm(i);
    const bool norm = r.has_value();
    if (!r) r = find.tensordot(i);
    if (!r) continue;
    bool clash = false;  // chains never share nodes; a malformed graph could make them
    for (const auto& [k, n] : r->replaced)
      clash = clash || all.replaced.count(k) || all.removed.count(k);
    for (int k : r->removed) clash = clash || all.replaced.count(k) || all.removed.count(k);
    if (clash) continue;
    all.replaced.insert(r->replaced.begin(), r->replaced.end());
    all.removed.insert(r->removed.begin(), r->removed.end());
    squares = squares || norm;
    ++count;
  }
  if (!count) return 0;
  onnx::GraphProto& graph = *model.mutable_graph();
  std::set<std::string> dropped;  // constants only the removed nodes read
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  for (int i = 0; i < graph.node_size(); ++i) {
    if (all.removed.count(i)) {
      for (const std::string& in : graph.node(i).input()) dropped.insert(in);
      continue;
    }
    const auto it = all.replaced.find(i);
    *nodes.Add() = it != all.replaced.end() ? it->second : graph.node(i);
  }
  graph.mutable_node()->Swap(&nodes);
  for (const onnx::NodeProto& n : graph.node())
    for (const std::string& in : n.input()) dropped.erase(in);
  auto* inits = graph.mutable_initializer();
  for (int k = inits->size() - 1; k >= 0; --k)
    if (dropped.count(inits->Get(k).name()) && !g.is_graph_input(inits->Get(k).name()))
      inits->DeleteSubrange(k, 1);
  if (squares) *graph.add_initializer() = float_tensor(two, {}, {2.f});
  return count;
}

}  // namespace padfold::onnx_import
