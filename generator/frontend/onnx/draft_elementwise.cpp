// Drafts of the elementwise ops and those over channels: Add, Mul, Concat, Softmax, LayerNorm, and
// the activations that fuse into their producer.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/limits.h"
#include "base/text.h"
#include "frontend/onnx/import_ops.h"

namespace padfold::onnx_import::detail {

// Softmax over the channel axis (axis 1, or -1 of a classifier's [N, K]); before opset 13 it
// flattens from its axis, which is the channels alone only when the spatial dims are 1.
std::variant<Draft, Left> draft_softmax(const Context& c, int i) {
  const onnx::NodeProto& n = c.graph().node(i);
  if (input_of(n, 0).empty()) c.fail(i, "expected input 'input'");
  Draft d;
  d.node = i;
  const std::string x = c.canon(n.input(0));
  TensorType xt;
  if (std::string why = check_float_input(c, i, x, xt); !why.empty()) return Left{why};
  const auto onnx_type = c.graph().type(n.input(0));
  const int64_t rank = onnx_type && onnx_type->has_shape
                           ? static_cast<int64_t>(onnx_type->shape.size())
                           : static_cast<int64_t>(xt.shape.size());
  const bool opset13 = c.graph().opset() >= 13;
  const NodeAttributes a = c.at_node(i, [&] { return NodeAttributes(n); });
  int64_t axis = c.at_node(i, [&] { return a.get_int("axis", opset13 ? -1 : 1); });
  if (axis < 0) axis += rank;
  if (axis != 1 || (!opset13 && !unit_spatial(xt.shape)))
    return Left{
        "axis " + std::to_string(axis) + " of a rank-" + std::to_string(rank) +
        " tensor; padfold's softmax normalizes over the channels (axis 1" +
        (opset13 ? std::string(")") : std::string(", with unit spatial dims before opset 13)"))};
  Layer& l = d.layer;
  l.op = Op::Softmax;
  l.op_name = "softmax";
  l.spatial_dims = static_cast<int>(xt.shape.size()) - 2;
  l.layout = layout_for(l.spatial_dims);
  l.inputs = {x};
  d.output = n.output(0);
  return d;
}

Draft draft_activation(const Context& c, int i, const std::string& input, size_t rank,
                       Activation act) {
  Draft d;
  d.node = i;
  d.output = c.graph().node(i).output(0);
  Layer& l = d.layer;
  l.op = Op::Activation;
  l.op_name = "activation";
  l.activation = act;
  l.spatial_dims = static_cast<int>(rank) - 2;
  l.layout = {false, l.spatial_dims};
  l.inputs = {input};
  return d;
}

bool broadcasts_per_channel(const std::vector<int64_t>& x, const std::vector<int64_t>& s) {
  if (x.size() < 3 || s.size() > x.size()) return false;
  const size_t lead = x.size() - s.size();
  for (size_t k = 0; k < s.size(); ++k) {
    const size_t axis = lead + k;
    if (axis == 1 ? s[k] != x[1] : axis == 0 ? (s[k] != 1 && s[k] != x[0]) : s[k] != 1)
      return false;
  }
  return true;
}

// Add and Concat read two or more computed float32 tensors of rank 3 to 5; Mul two, the second
// (or, swapped, the first) of one value per channel: squeeze-and-excite's scale. How the inputs
// broadcast is ONNX's rule on ONNX's shapes (rank and dims), checked before padfold's shapes are:
// a [N, C] tensor that padfold holds as [N, C, 1, 1] broadcasts along ONNX's last axis.
std::variant<Draft, Left> draft_join(const Context& c, int i) {
  const onnx::NodeProto& n = c.graph().node(i);
  const bool add = n.op_type() == "Add", mul = n.op_type() == "Mul";
  Draft d;
  d.node = i;
  Layer& l = d.layer;
  l.op = add ? Op::Add : mul ? Op::Mul : Op::Concat;
  l.op_name = add ? "add" : mul ? "mul" : "concat";
  d.output = n.output(0);
  std::vector<TensorType> types;
  std::vector<std::vector<int64_t>> onnx_shapes;
  for (int k = 0; k < n.input_size(); ++k) {
    const std::string t = c.canon(n.input(k));
    TensorType ty;
    if (std::string why = check_data_input(c, t, ty); !why.empty()) return Left{why};
    if (ty.elem_type != kFloat)
      return Left{"input '" + t + "' is " + elem_type_name(ty.elem_type) + "; padfold's " +
                  l.op_name + " is float32"};
    const auto shape = onnx_shape(c, n.input(k));
    if (!shape)
      return Left{"the shape of input '" + n.input(k) +
                  "' is not static after ONNX shape inference; padfold decides broadcasting "
                  "from it"};
    l.inputs.push_back(t);
    types.push_back(ty);
    onnx_shapes.push_back(*shape);
  }
  if (types.size() < 2) return Left{"it has a single input"};
  if (add && types.size() > 2) return Left{"it has " + std::to_string(types.size()) + " inputs"};
  if (mul) {
    if (broadcasts_per_channel(onnx_shapes[1], onnx_shapes[0]) &&
        !broadcasts_per_channel(onnx_shapes[0], onnx_shapes[1])) {
      std::swap(l.inputs[0], l.inputs[1]);
      std::swap(types[0], types[1]);
      std::swap(onnx_shapes[0], onnx_shapes[1]);
    }
    const std::vector<int64_t>& x = types[0].shape;
    std::vector<int64_t> per_channel(x.size(), 1);
    per_channel[0] = x[0];
    per_channel[1] = x[1];
    if (!broadcasts_per_channel(onnx_shapes[0], onnx_shapes[1]) || types[1].shape != per_channel ||
        x == per_channel)
      return Left{"its inputs have the shapes " + shape_text(onnx_shapes[0], true) + " and " +
                  shape_text(onnx_shapes[1], true) +
                  "; padfold's mul scales a tensor by one value per channel " +
                  shape_text(per_channel) + " (squeeze-and-excite)"};
  }
  if (add && onnx_shapes[0] != onnx_shapes[1])
    return Left{"its inputs have the shapes " + shape_text(onnx_shapes[0], true) + " and " +
                shape_text(onnx_shapes[1], true) +
                "; padfold's add takes tensors of one shape (no broadcasting)"};
  const std::vector<int64_t>& s0 = types[0].shape;
  l.spatial_dims = static_cast<int>(s0.size()) - 2;
  l.layout = layout_for(l.spatial_dims);
  if (mul) return d;
  if (add) {
    if (types[1].shape != s0)
      return Left{"its inputs have the shapes " + shape_text(s0, true) + " and " +
                  shape_text(types[1].shape, true) +
                  "; padfold's add takes tensors of one shape (no broadcasting)"};
    return d;
  }
  if (l.inputs.size() > kMaxJoinInputs)
    return Left{"it has " + std::to_string(l.inputs.size()) +
                " inputs; padfold's concat takes at most " + std::to_string(kMaxJoinInputs)};
  const NodeAttributes a = c.at_node(i, [&] { return NodeAttributes(n); });
  int64_t axis = c.at_node(i, [&] { return a.get_int("axis", 1); });
  if (axis < 0) axis += static_cast<int64_t>(onnx_shapes[0].size());
  if (axis != 1)
    return Left{"axis " + std::to_string(axis) + "; padfold's concat joins channels (axis 1)"};
  int64_t channels = 0;
  for (size_t k = 0; k < types.size(); ++k) {
    // Equal but for the channels, in ONNX's shapes and in padfold's.
    for (const auto& [a0, b0] :
         {std::pair{onnx_shapes[k], onnx_shapes[0]}, std::pair{types[k].shape, s0}}) {
      std::vector<int64_t> x = a0, y = b0;
      if (x.size() == y.size() && x.size() >= 2) x[1] = y[1] = 0;
      if (x != y)
        return Left{"its inputs have the shapes " + shape_text(b0, true) + " and " +
                    shape_text(a0, true) +
                    "; padfold's concat takes equal batch and spatial sizes"};
    }
    const auto sum = checked_add(channels, types[k].shape[1]);
    if (!sum) return Left{"its inputs' channels overflow"};
    channels = *sum;
  }
  return d;
}

std::optional<Draft> draft_layer_norm(const Context& c, int i) {
  const GraphIndex& g = c.graph();
  // The node producing `t`, of type `op`, read only by `readers` nodes and no graph output.
  auto node_of = [&](const std::string& t, const char* op, size_t readers) {
    const int p = g.producer(c.canon(t));
    const bool ok = p >= 0 && default_domain(g.node(p)) && g.node(p).op_type() == op &&
                    g.node(p).input_size() >= 1 && g.node(p).output_size() == 1 &&
                    c.readers(g.node(p).output(0)).size() == readers &&
                    !c.reaches_graph_output(g.node(p).output(0));
    return ok ? p : -1;
  };
  auto scalar = [&](const std::string& t) -> std::optional<double> {
    const onnx::TensorProto* k = c.constant(t);
    if (!k) return std::nullopt;
    try {
      const FloatTensor f = to_float_tensor(*k, t);
      if (f.data.size() == 1) return f.data[0];
    } catch (const ImportError&) {  // not a number: no layer norm
    }
    return std::nullopt;
  };
  auto channel_mean_of = [&](int r, size_t rank) {
    const NodeAttributes a = c.at_node(r, [&] { return NodeAttributes(g.node(r)); });
    std::optional<std::vector<int64_t>> axes = a.find_ints("axes");
    if (!axes && !input_of(g.node(r), 1).empty())
      if (const onnx::TensorProto* t = c.constant(input_of(g.node(r), 1)))
        axes = c.at_node(
            r, [&] { return to_int64s(*t, "input 1 (axes) '" + input_of(g.node(r), 1) + "'"); });
    return axes && axes->size() == 1 &&
           ((*axes)[0] == 1 || (*axes)[0] == 1 - static_cast<int64_t>(rank)) &&
           a.get_int("keepdims", 1) == 1;
  };
  const onnx::NodeProto& div = g.node(i);
  if (!default_domain(div) || div.op_type() != "Div" || div.input_size() != 2) return {};
  const int sub = node_of(div.input(0), "Sub", 2);
  const int sqrt = node_of(div.input(1), "Sqrt", 1);
  const int add = sqrt < 0 ? -1 : node_of(g.node(sqrt).input(0), "Add", 1);
  if (sub < 0 || add < 0 || g.node(sub).input_size() != 2 || g.node(add).input_size() != 2)
    return {};
  const std::string x = c.canon(g.node(sub).input(0));
  const int mean = node_of(g.node(sub).input(1), "ReduceMean", 1);
  const int var = node_of(g.node(add).input(0), "ReduceMean", 1);
  const int pow = var < 0 ? -1 : node_of(g.node(var).input(0), "Pow", 1);
  const std::optional<double> eps = scalar(g.node(add).input(1));
  TensorType xt;
  if (mean < 0 || pow < 0 || !eps || !(*eps > 0) || *eps > 1 || g.node(pow).input_size() != 2 ||
      c.canon(g.node(mean).input(0)) != x ||
      c.canon(g.node(pow).input(0)) != c.canon(div.input(0)) ||
      scalar(g.node(pow).input(1)) != 2.0 || !check_data_input(c, x, xt).empty() ||
      xt.elem_type != kFloat)
    return {};
  const size_t rank = xt.shape.size();
  if (!channel_mean_of(mean, rank) || !channel_mean_of(var, rank)) return {};
  Draft d;
  d.node = i;
  d.part_nodes = {mean, sub, pow, var, add, sqrt};
  Layer& l = d.layer;
  l.op = Op::LayerNorm;
  l.op_name = "layer_norm";
  l.epsilon = static_cast<float>(*eps);
  l.spatial_dims = static_cast<int>(rank) - 2;
  l.layout = layout_for(l.spatial_dims);
  l.inputs = {x};
  d.output = div.output(0);
  if (!resolve_draft(c, d).empty()) return {};
  return d;
}

std::variant<ActInfo, Left> act_info(const Context& c, int i) {
  const onnx::NodeProto& n = c.graph().node(i);
  if (input_of(n, 0).empty()) c.fail(i, "expected an input");
  ActInfo r;
  r.input = c.canon(n.input(0));
  const NodeAttributes a = c.at_node(i, [&] { return NodeAttributes(n); });
  if (const ActivationDef* def = activation_of_onnx_op(n.op_type())) {
    r.activation = def->value;
    if (def->params >= 1) r.alpha = c.at_node(i, [&] { return a.get_float("alpha", def->alpha); });
    if (def->params >= 2) r.beta = c.at_node(i, [&] { return a.get_float("beta", def->beta); });
    // A spec's alpha is a JSON number, which inf and NaN are not.
    if (!std::isfinite(r.alpha) || !std::isfinite(r.beta))
      return Left{def->params == 1 ? "its alpha is not a finite number"
                                   : "its alpha or beta is not a finite number"};
    if (def->value == Activation::Gelu) {
      const std::string approximate =
          c.at_node(i, [&] { return a.get_string("approximate", "none"); });
      if (approximate != "none" && approximate != "tanh")
        c.fail(i, "approximate is '" + approximate + "'; expected none or tanh");
      if (approximate == "tanh") r.activation = Activation::GeluTanh;
    }
  } else {  // Clip
    constexpr float kMax = std::numeric_limits<float>::max();
    float lo = std::numeric_limits<float>::lowest(), hi = kMax;
    if (c.graph().opset() < 11) {
      lo = c.at_node(i, [&] { return a.get_float("min", lo); });
      hi = c.at_node(i, [&] { return a.get_float("max", hi); });
    } else {
      bool ok = true;
      const auto mn = c.at_node(i, [&] { return scalar_input(c, i, 1, ok); });
      const auto mx = c.at_node(i, [&] { return scalar_input(c, i, 2, ok); });
      if (!ok) return Left{"its min or max is computed at run time"};
      lo = mn.value_or(lo);
      hi = mx.value_or(hi);
    }
    if (lo == 0.f && hi == 6.f)
      r.activation = Activation::Relu6;
    else if (lo == 0.f && hi >= kMax)
      r.activation = Activation::Relu;
    else
      return Left{"Clip(" + std::to_string(lo) + ", " + std::to_string(hi) +
                  ") is neither relu (min 0) nor relu6 (min 0, max 6)"};
  }
  return r;
}

}  // namespace padfold::onnx_import::detail
