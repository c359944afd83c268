#include "frontend/onnx/affine.h"

#include <cmath>
#include <tuple>

#include "base/text.h"

namespace padfold::onnx_import::detail {
namespace {

// A constant operand as one value per channel: a scalar, or a shape that broadcasts against the
// data (rank `rank`, `channels` on `axis`) along that axis only. Empty when it is neither.
std::vector<double> per_channel(const FloatTensor& t, size_t rank, size_t axis, int64_t channels) {
  if (t.shape.size() > rank) return {};
  const size_t lead = rank - t.shape.size();
  bool along_channels = false;
  for (size_t k = 0; k < t.shape.size(); ++k) {
    const int64_t d = t.shape[k];
    if (d == 1) continue;
    if (lead + k != axis || d != channels) return {};
    along_channels = true;
  }
  if (t.data.empty()) return {};
  std::vector<double> v(static_cast<size_t>(channels));
  for (size_t ch = 0; ch < v.size(); ++ch) v[ch] = t.data[along_channels ? ch : 0];
  return v;
}

Affine identity(int64_t channels) {
  const auto n = static_cast<size_t>(channels);
  return {std::vector<double>(n, 1.0), std::vector<double>(n, 0.0)};
}

}  // namespace

bool Affine::shifts() const {
  for (double t : shift)
    if (t != 0) return true;
  return false;
}

Affine Affine::then(const Affine& next) const {
  Affine r = next;
  for (size_t ch = 0; ch < scale.size(); ++ch) {
    r.scale[ch] = scale[ch] * next.scale[ch];
    r.shift[ch] = shift[ch] * next.scale[ch] + next.shift[ch];
  }
  return r;
}

std::variant<AffineNode, Left> affine_node(const Context& c, int i, bool channels_last) {
  const onnx::NodeProto& n = c.graph().node(i);
  const std::string& op = n.op_type();
  if (n.output_size() < 1 || n.output(0).empty()) return Left{"it has no output"};
  const bool bn = op == "BatchNormalization";
  if (bn && channels_last) return Left{"BatchNormalization normalizes axis 1"};
  // The data input: BatchNormalization's X; else the operand that is not a constant.
  int data = 0;
  if (!bn) {
    if (n.input_size() != 2) return Left{"expected two inputs"};
    const bool c0 = c.constant(n.input(0)) != nullptr, c1 = c.constant(n.input(1)) != nullptr;
    if (c0 == c1) return Left{c0 ? "both inputs are constants" : "neither input is a constant"};
    data = c0 ? 1 : 0;
    if (data == 1 && op == "Div") return Left{"it divides a constant by the tensor"};
  }
  AffineNode r;
  r.input = c.canon(input_of(n, data));
  TensorType ty;
  if (std::string why = check_data_input(c, r.input, ty); !why.empty()) return Left{why};
  if (ty.elem_type != onnx::TensorProto::FLOAT) return Left{"its input is not float32"};
  // A constant broadcasts against the operand as ONNX shapes it: [N, K] for a Gemm's output, which
  // padfold holds as [N, K, 1, 1].
  const auto onnx_ty = c.graph().type(input_of(n, data));
  const size_t rank = onnx_ty && onnx_ty->has_shape ? onnx_ty->shape.size() : ty.shape.size();
  const size_t axis = channels_last ? rank - 1 : 1;
  const int64_t channels = ty.shape[channels_last ? ty.shape.size() - 1 : 1];
  // BatchNormalization's operands are [C]; Mul's and the others' broadcast against the data.
  auto operand = [&](int k, const char* role, std::vector<double>& v) -> std::string {
    const onnx::TensorProto* t = c.constant(input_of(n, k));
    if (!t) return std::string(role) + " is computed at run time";
    if (t->data_type() != onnx::TensorProto::FLOAT) return std::string(role) + " is not float32";
    const FloatTensor f =
        c.at_node(i, [&] { return to_float_tensor(*t, "input " + std::to_string(k)); });
    v = bn ? (f.shape == std::vector<int64_t>{channels}
                  ? std::vector<double>(f.data.begin(), f.data.end())
                  : std::vector<double>{})
           : per_channel(f, rank, axis, channels);
    if (v.empty())
      return std::string(role) + " has the shape " + shape_text(f.shape) +
             (bn ? "; expected [" + std::to_string(channels) + "], one value per channel"
                 : "; padfold folds a scalar or one value per channel (axis " +
                       std::to_string(axis) + ")");
    for (double x : v)
      if (!std::isfinite(x)) return std::string(role) + " is not finite";
    return "";
  };
  Affine a = identity(channels);
  if (bn) {
    const NodeAttributes attrs = c.at_node(i, [&] { return NodeAttributes(n); });
    if (c.at_node(i, [&] { return attrs.get_int("training_mode", 0); }) != 0)
      return Left{"training_mode is set (padfold runs inference)"};
    for (int k = 1; k < n.output_size(); ++k)
      if (!n.output(k).empty() &&
          (!c.readers(n.output(k)).empty() || c.reaches_graph_output(n.output(k))))
        return Left{"its running statistics outputs are used"};
    const double eps = c.at_node(i, [&] { return attrs.get_float("epsilon", 1e-5f); });
    std::vector<double> gamma, beta, mean, var;
    for (auto [k, role, v] : {std::tuple{1, "scale", &gamma}, std::tuple{2, "B", &beta},
                              std::tuple{3, "mean", &mean}, std::tuple{4, "var", &var}})
      if (std::string why = operand(k, role, *v); !why.empty()) return Left{why};
    for (size_t ch = 0; ch < a.scale.size(); ++ch) {
      if (var[ch] + eps <= 0) return Left{"var + epsilon is not positive"};
      a.scale[ch] = gamma[ch] / std::sqrt(var[ch] + eps);
      a.shift[ch] = beta[ch] - mean[ch] * a.scale[ch];
    }
  } else {
    std::vector<double> v;
    if (std::string why = operand(1 - data, "its constant", v); !why.empty()) return Left{why};
    for (size_t ch = 0; ch < v.size(); ++ch) {
      if (op == "Mul") {
        a.scale[ch] = v[ch];
      } else if (op == "Add") {
        a.shift[ch] = v[ch];
      } else if (op == "Sub") {
        a.scale[ch] = data == 0 ? 1.0 : -1.0;
        a.shift[ch] = data == 0 ? -v[ch] : v[ch];
      } else {  // Div
        if (v[ch] == 0) return Left{"it divides by zero"};
        a.scale[ch] = 1.0 / v[ch];
      }
    }
  }
  r.affine = a;
  return r;
}

std::string folds_before_exactly(const Layer& conv, const Affine& before) {
  if (conv.op != Op::Conv)
    return "a ConvTranspose's edge outputs sum fewer taps, so a shift before it is no bias";
  if (!before.shifts()) {
    if (conv.border == Border::Constant && conv.border_value != 0)
      return "its scale would not scale the constant border";
    return "";
  }
  bool padded = false;
  for (const AxisPads& p : conv.pads.axes) padded = padded || p.before != 0 || p.after != 0;
  if (!padded || border_copies_input(conv.border)) return "";
  return "it shifts the input of a conv padded with " +
         std::string(conv.border == Border::Zeros ? "zeros" : "a constant") +
         ", whose border the shift never reaches: not the conv's bias on the border pixels";
}

void fold_into_conv(const Layer& l, const std::optional<Affine>& before,
                    const std::optional<Affine>& after, std::vector<float>& weights,
                    std::vector<float>& bias) {
  const bool transposed = l.op == Op::ConvTranspose;
  const size_t out = static_cast<size_t>(l.out_channels);
  size_t taps = 1;
  for (int64_t k : l.kernel) taps *= static_cast<size_t>(k);
  const size_t groups = static_cast<size_t>(l.groups);
  const size_t in_per_group = static_cast<size_t>(l.in_channels) / groups;
  const size_t out_per_group = out / groups;
  std::vector<double> w(weights.begin(), weights.end());
  std::vector<double> b(out, 0.0);
  for (size_t o = 0; o < out && !bias.empty(); ++o) b[o] = bias[o];
  // The weights, [O][I/g][taps] (conv) or [I][O/g][taps] (conv_transpose), as ONNX orders them.
  auto for_each_weight = [&](auto&& f) {
    const size_t rows = transposed ? static_cast<size_t>(l.in_channels) : out;
    const size_t cols = transposed ? out_per_group : in_per_group;
    for (size_t r = 0; r < rows; ++r)
      for (size_t k = 0; k < cols; ++k) {
        const size_t o = transposed ? (r / in_per_group) * out_per_group + k : r;
        const size_t i = transposed ? r : (r / out_per_group) * in_per_group + k;
        for (size_t t = 0; t < taps; ++t) f(w[(r * cols + k) * taps + t], o, i);
      }
  };
  if (before) {  // conv(W, s*x + t) = conv(W*s, x) + sum W*t (conv only: folds_before_exactly)
    for_each_weight([&](double& v, size_t o, size_t i) {
      b[o] += v * before->shift[i];
      v *= before->scale[i];
    });
  }
  if (after) {
    for_each_weight([&](double& v, size_t o, size_t) { v *= after->scale[o]; });
    for (size_t o = 0; o < out; ++o) b[o] = b[o] * after->scale[o] + after->shift[o];
  }
  for (size_t k = 0; k < w.size(); ++k) weights[k] = static_cast<float>(w[k]);
  bias.assign(b.begin(), b.end());
}

}  // namespace padfold::onnx_import::detail
