#include "frontend/onnx/quant_graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

namespace padfold::onnx_import::detail {
namespace {

using TP = onnx::TensorProto;

const char* const kQOps[] = {"QuantizeLinear", "DequantizeLinear",   "QLinearConv",
                             "QLinearAdd",     "QLinearAveragePool", "QLinearGlobalAveragePool",
                             "QLinearMul",     "QLinearSigmoid"};
// Float ops between DequantizeLinear and QuantizeLinear (QDQ).
const char* const kQdqOps[] = {"Conv", "MaxPool", "AveragePool", "GlobalAveragePool",
                               "Add",  "Gemm",    "Mul",         "Sigmoid"};
constexpr const char* kImported =
    "padfold imports QuantizeLinear of the model's float input, DequantizeLinear of an int8 or "
    "uint8 model input or of an output, "
    "QLinearConv, MaxPool, com.microsoft QLinearAdd, QLinearMul, QLinearSigmoid, "
    "QLinearAveragePool and QLinearGlobalAveragePool (QOperator), DequantizeLinear -> Conv, "
    "MaxPool, AveragePool, GlobalAveragePool, Gemm (a classifier's, after a global pool and "
    "Flatten), Mul, Sigmoid or Add [-> Relu or Clip(0, 6)] -> QuantizeLinear (QDQ), and a Pad "
    "before a quantized conv or pool";

// A quantized tensor: its dtype and parameters; `pad` >= 0 when it is a Pad's output not yet
// folded (then `padded` is the tensor the Pad reads and `pad_info` the Pad, value in real terms).
struct QTensor {
  DType dtype = DType::I8;
  QuantParams q;
  std::string tensor;  // the tensor a layer reads: itself, or the padded tensor
  int pad = -1;
  PadInfo pad_info;
  std::string pad_mode;
};

bool same(const QuantParams& a, const QuantParams& b) {
  return a.scale == b.scale && a.zero_point == b.zero_point;
}

class Recognizer {
 public:
  explicit Recognizer(Context& c) : c_(c), g_(c.graph()) {}

  QuantGraph run() {
    for (int i = 0; i < g_.num_nodes(); ++i) {
      if (covered_.count(i) || c_.bypassed(i)) continue;
      const onnx::NodeProto& n = g_.node(i);
      if (default_domain(n) && (n.op_type() == "Constant" || g_.folded(i))) continue;
      visit(i);
    }
    for (const auto& [i, role] : out_.absorbed) covered_.insert(i);
    for (const QuantLayer& l : out_.layers) covered_.insert(l.draft.node);
    // Pads that no layer folded.
    for (const auto& [t, q] : quant_)
      if (q.pad >= 0 && !covered_.count(q.pad))
        c_.fail(q.pad, "its output '" + t +
                           "' is not read by a quantized conv or pool; padfold folds a Pad of a "
                           "quantized tensor into the conv or pool reading it");
    for (const auto& [t, q] : deq_)
      if (q.pad >= 0 && !covered_.count(q.pad))
        c_.fail(q.pad, "its output '" + t +
                           "' is not read by a quantized conv or pool; padfold folds a Pad of a "
                           "quantized tensor into the conv or pool reading it");
    for (int k = 0; k < g_.graph().output_size(); ++k) {
      std::string t = c_.canon(g_.graph().output(k).name());
      if (folded_edge(t)) t = c_.canon(g_.node(g_.producer(t)).input(0));
      if (!produced_.count(t))
        throw ImportError(g_.label() + ": graph output '" + t +
                          "' is not computed by a quantized layer or a DequantizeLinear of one; " +
                          kImported);
    }
    return std::move(out_);
  }

 private:
  void visit(int i) {
    const onnx::NodeProto& n = g_.node(i);
    const std::string& op = n.op_type();
    if (default_domain(n) && op == "QuantizeLinear") return quantize(i);
    if (default_domain(n) && op == "DequantizeLinear") return dequantize(i);
    if (default_domain(n) && op == "Pad") return pad(i);
    if (default_domain(n) && op == "QLinearConv") return qlinear_conv(i);
    if (n.domain() == "com.microsoft" && (op == "QLinearAdd" || op == "QLinearMul"))
      return qlinear_binary(i);
    if (n.domain() == "com.microsoft" && op == "QLinearSigmoid") return qlinear_sigmoid(i);
    if (n.domain() == "com.microsoft" &&
        (op == "QLinearAveragePool" || op == "QLinearGlobalAveragePool"))
      return qlinear_pool(i);
    if (default_domain(n) && op == "MaxPool" && g_.type(n.input(0)) &&
        g_.type(n.input(0))->elem_type != TP::FLOAT)
      return qop_max_pool(i);
    if (default_domain(n) && one_of(op, kQdqOps)) return qdq_op(i);
    if (default_domain(n) && (op == "Reshape" || op == "Squeeze" || op == "Unsqueeze") &&
        unit_reshape(i))
      return;
    c_.fail(i, (default_domain(n) ? op : op + " of domain '" + n.domain() + "'") +
                   " in a quantized graph; " + kImported);
  }

  // A Reshape, Squeeze or Unsqueeze of a quantized tensor that only drops or adds unit spatial
  // axes (TFLite's Conv1D output through tf2onnx: [N, C, 1, W] to [N, C, W]) stands for it.
  bool unit_reshape(int i) {
    const onnx::NodeProto& n = g_.node(i);
    if (n.input_size() < 1 || n.output_size() != 1 || n.input(0).empty()) return false;
    const std::string t = c_.canon(n.input(0));
    const auto q = quant_.find(t);
    const auto held = c_.type(t), out = g_.type(n.output(0));
    if (q == quant_.end() || !held || !held->is_static() || !out || !out->is_static())
      return false;  // (a pending Pad's tensor: `held` is the padded one, as a reader sees it)
    std::vector<size_t> axes = inserted_unit_axes(held->shape, out->shape);
    if (axes.empty()) axes = inserted_unit_axes(out->shape, held->shape);
    if (held->shape != out->shape && axes.empty()) return false;  // (axes are spatial: >= 2)
    c_.add_alias(n.output(0), t);
    c_.set_bypassed(i);
    out_.absorbed[i] = "bypassed";
    return true;
  }

  // --- quantization parameters -------------------------------------------------------------

  const TP& constant_input(int i, int k, const std::string& role) const {
    const std::string t = input_of(g_.node(i), k);
    if (t.empty()) c_.fail(i, "input " + std::to_string(k) + " (" + role + ") is missing");
    const TP* v = c_.constant(t);
    if (!v)
      c_.fail(i, "input " + std::to_string(k) + " (" + role + ") '" + t +
                     "' is computed at run time; expected an initializer");
    return *v;
  }

  std::vector<float> scales(int i, int k) const {
    const TP& t = constant_input(i, k, "scale");
    if (t.data_type() != TP::FLOAT)
      c_.fail(i, "input " + std::to_string(k) + " (scale) '" + g_.node(i).input(k) + "' is " +
                     elem_type_name(t.data_type()) + "; expected float32");
    const FloatTensor f = c_.at_node(i, [&] { return to_float_tensor(t, "scale"); });
    for (float s : f.data)
      if (!(s > 0) || !std::isnormal(s))
        c_.fail(i, fmt::format("scale {} in '{}'; expected positive, normal float32 scales", s,
                               g_.node(i).input(k)));
    return f.data;
  }

  // The zero points at input k (absent: uint8 0, as ONNX says) and their dtype.
  std::vector<int64_t> zero_points(int i, int k, DType& dtype) const {
    const std::string t = input_of(g_.node(i), k);
    if (t.empty()) {
      dtype = DType::U8;
      return {0};
    }
    const TP& v = constant_input(i, k, "zero point");
    if (v.data_type() == TP::INT8)
      dtype = DType::I8;
    else if (v.data_type() == TP::UINT8)
      dtype = DType::U8;
    else
      c_.fail(i, "zero point '" + t + "' is " + elem_type_name(v.data_type()) +
                     "; expected int8 or uint8 (padfold's quantized layers)");
    return c_.at_node(i, [&] { return to_int64s(v, "zero point '" + t + "'"); });
  }

  // One scale and zero point (per tensor) at inputs ks, kz.
  QTensor params(int i, int ks, int kz) const {
    const std::vector<float> s = scales(i, ks);
    QTensor q;
    const std::vector<int64_t> z = zero_points(i, kz, q.dtype);
    if (s.size() != 1 || z.size() != 1)
      c_.fail(i, fmt::format("{} scales and {} zero points for an activation; expected one each "
                             "(padfold quantizes activations per tensor)",
                             s.size(), z.size()));
    q.q = {s[0], static_cast<int32_t>(z[0])};
    return q;
  }

  // --- tensors ---------------------------------------------------------------------------------

  // Whether `t` is the output of a layout Transpose the importer folded into the model's edge.
  bool folded_edge(const std::string& t) const {
    const int p = g_.producer(t);
    return p >= 0 && c_.bypassed(p) && g_.node(p).op_type() == "Transpose";
  }

  // The quantized tensor `t` (QOperator: int8/uint8 in the graph), or an error at node i.
  QTensor quantized(int i, const std::string& name) const {
    const std::string t = c_.canon(name);
    const auto it = quant_.find(t);
    if (it == quant_.end())
      c_.fail(i, "input '" + t +
                     "' is not a quantized tensor padfold computes (a QuantizeLinear of the "
                     "model's input, an int8/uint8 model input read by DequantizeLinear, or a "
                     "quantized layer's output)");
    return it->second;
  }

  // The quantized tensor a float tensor dequantizes (QDQ), or an error at node i.
  QTensor dequantized(int i, const std::string& name) const {
    const std::string t = c_.canon(name);
    const auto it = deq_.find(t);
    if (it == deq_.end())
      c_.fail(i, "input '" + t +
                     "' is not the DequantizeLinear of a quantized tensor; expected the QDQ "
                     "form DequantizeLinear -> op -> QuantizeLinear");
    return it->second;
  }

  static void no_pad(const Context& c, int i, const QTensor& q) {
    if (q.pad >= 0)
      c.fail(i, "it reads the output of Pad '" + c.graph().node(q.pad).name() +
                    "'; padfold folds a Pad of a quantized tensor only into a conv or pool");
  }

  void add_layer(Draft d, const QTensor& out, const std::string& pad_mode = "") {
    Layer& l = d.layer;
    l.dtype = out.dtype;
    l.quant->requantize = Requantize::Onnx;
    if (std::string why = resolve_draft(c_, d); !why.empty())
      c_.fail(d.node, "padfold refuses the quantized layer: " + why);
    // What the layers reading it get (ONNX shape inference knows no com.microsoft op).
    c_.set_layer_shape(d.output, l.output_shape_full());
    QTensor o = out;
    o.tensor = d.output;
    quant_[d.output] = o;
    produced_.insert(d.output);
    out_.layers.push_back({std::move(d), pad_mode});
  }

  // A conv or pool draft of node i reading `in` (which may be a pending Pad: folded here).
  Draft window_draft(int i, const DraftOptions& o, const QTensor& in, std::string& pad_mode) {
    auto r = draft_layer(c_, i, o);
    if (const auto* left = std::get_if<Left>(&r)) c_.fail(i, left->reason);
    Draft d = std::get<Draft>(std::move(r));
    d.layer.inputs[0] = in.tensor;
    if (in.pad >= 0) {
      PadInfo p = in.pad_info;
      p.input = in.tensor;
      if (std::string why = fold_pad_into(c_, d, in.pad, p); !why.empty())
        c_.fail(in.pad, "not folded: " + why);
      out_.absorbed[in.pad] = "pad";
      pad_mode = in.pad_mode;
    }
    return d;
  }

  // --- nodes -----------------------------------------------------------------------------------

  void quantize(int i) {
    const onnx::NodeProto& n = g_.node(i);
    if (input_of(n, 0).empty() || n.output_size() < 1) c_.fail(i, "expected input x and output y");
    const QTensor q = params(i, 1, 2);
    const std::string x = c_.canon(n.input(0));
    if (const auto it = deq_.find(x); it != deq_.end()) {  // DequantizeLinear -> QuantizeLinear
      if (!same(it->second.q, q.q) || it->second.dtype != q.dtype)
        c_.fail(i, fmt::format("it requantizes '{}' (scale {}, zero point {}) to scale {}, zero "
                               "point {}; padfold takes a QuantizeLinear after a "
                               "DequantizeLinear only with the same parameters",
                               x, it->second.q.scale, it->second.q.zero_point, q.q.scale,
                               q.q.zero_point));
      quant_[n.output(0)] = it->second;
      produced_.insert(n.output(0));
      out_.absorbed[i] = "quantization";
      return;
    }
    TensorType xt;
    if (std::string why = check_data_input(c_, x, xt); !why.empty()) c_.fail(i, why);
    if (!g_.is_graph_input(x) || xt.elem_type != TP::FLOAT)
      c_.fail(i, "it quantizes '" + x +
                     "', which is neither the model's float32 input nor the float output of an "
                     "op between DequantizeLinear and QuantizeLinear (QDQ)");
    Draft d;
    d.node = i;
    d.output = n.output(0);
    Layer& l = d.layer;
    l.op = Op::Quantize;
    l.op_name = "quantize";
    l.spatial_dims = static_cast<int>(xt.shape.size()) - 2;
    l.layout = {false, l.spatial_dims};
    l.inputs = {x};
    l.quant.emplace().output = q.q;
    add_layer(std::move(d), q);
  }

  void dequantize(int i) {
    const onnx::NodeProto& n = g_.node(i);
    if (input_of(n, 0).empty() || n.output_size() < 1) c_.fail(i, "expected input x and output y");
    const std::string x = c_.canon(n.input(0));
    if (c_.constant(x)) {  // weights or bias: read by the layers drafting their conv
      out_.absorbed[i] = "quantization";
      return;
    }
    const QTensor q = params(i, 1, 2);
    // An int8/uint8 model input (TFLite's converter writes them), or its folded layout Transpose
    // (tf2onnx's): the caller passes the integers, quantized as this DequantizeLinear says.
    if (const auto ty = c_.type(x); (g_.is_graph_input(x) || folded_edge(x)) && ty &&
                                    !quant_.count(x) &&
                                    (ty->elem_type == TP::INT8 || ty->elem_type == TP::UINT8)) {
      QTensor in = q;
      in.tensor = x;
      quant_[x] = in;
    }
    const QTensor in = quantized(i, x);
    if (!same(in.q, q.q) || in.dtype != q.dtype)
      c_.fail(i, fmt::format("it dequantizes '{}' with scale {}, zero point {}; that tensor is "
                             "written with scale {}, zero point {} ({})",
                             x, q.q.scale, q.q.zero_point, in.q.scale, in.q.zero_point,
                             to_string(in.dtype)));
    deq_[n.output(0)] = in;
    // The float view has the quantized tensor's shape as padfold holds it ([N, C, 1, 1] for a
    // global pool's output that a Flatten in between made [N, C]; [N, C, W] for TFLite's Conv1D
    // input, a Reshape to [N, C, 1, W] in between); a pending Pad's is the padded one, `x`.
    if (const auto ty = c_.type(in.pad < 0 ? in.tensor : x); ty && ty->is_static())
      c_.set_layer_shape(n.output(0), ty->shape);
    out_.absorbed[i] = "quantization";
    if (!c_.reaches_graph_output(n.output(0))) return;
    no_pad(c_, i, in);
    Draft d;  // the model's float output
    d.node = i;
    d.output = n.output(0);
    Layer& l = d.layer;
    l.op = Op::Dequantize;
    l.op_name = "dequantize";
    TensorType ty;
    if (std::string why = check_data_input(c_, in.tensor, ty); !why.empty()) c_.fail(i, why);
    l.spatial_dims = static_cast<int>(ty.shape.size()) - 2;
    l.layout = {false, l.spatial_dims};
    l.inputs = {in.tensor};
    LayerQuant& lq = l.quant.emplace();
    lq.inputs = {in.q};
    lq.output = in.q;
    out_.absorbed.erase(i);
    add_layer(std::move(d), in);
    quant_.erase(n.output(0));  // float
  }

  void pad(int i) {
    const onnx::NodeProto& n = g_.node(i);
    auto info = pad_info(c_, i);
    if (const auto* left = std::get_if<Left>(&info)) c_.fail(i, "not folded: " + left->reason);
    PadInfo p = std::get<PadInfo>(info);
    for (const auto* side : {&p.pad.before, &p.pad.after})
      for (int64_t v : *side)
        if (v < 0)
          c_.fail(i,
                  "not folded: its pads are negative (a crop); padfold folds a quantized "
                  "graph's pads >= 0");
    const std::string x = c_.canon(n.input(0));
    const bool on_float = deq_.count(x) != 0;
    QTensor q = on_float ? deq_.at(x) : quantized(i, x);
    no_pad(c_, i, q);
    if (on_float && p.pad.fill == PadFill::Constant) check_on_grid(i, p.pad.value, q);
    if (!on_float && p.pad.fill == PadFill::Constant)  // the integer value in real terms
      p.pad.value = (p.pad.value - static_cast<float>(q.q.zero_point)) * q.q.scale;
    q.pad = i;
    q.pad_info = p;
    q.pad_mode = p.mode == "constant" ? fmt::format("constant {}", p.pad.value) : p.mode;
    (on_float ? deq_ : quant_)[n.output(0)] = q;
    if (!on_float) produced_.insert(n.output(0));
  }

  // A QDQ Pad's constant `v` (real terms) folds into a quantized layer's border only where an
  // integer of the tensor's dtype dequantizes to it exactly, as ONNX Runtime's DequantizeLinear
  // computes ((q - zero point) * scale in float32): ONNX Runtime pads the float tensor with v
  // itself, and the border of an integer kernel can only hold such a q.
  void check_on_grid(int i, float v, const QTensor& q) const {
    const double steps = std::nearbyint(static_cast<double>(v) / q.q.scale);
    const double level = steps + q.q.zero_point;
    const bool in_range =
        q.dtype == DType::I8 ? level >= -128 && level <= 127 : level >= 0 && level <= 255;
    if (in_range && static_cast<float>(steps) * q.q.scale == v) return;
    c_.fail(i,
            fmt::format("its constant value {} is not on the quantization grid of its input "
                        "(scale {}, zero point {}, {}): no {} value dequantizes to it, and "
                        "padfold folds a Pad into a quantized layer's border only as such a "
                        "value (ONNX Runtime pads the float tensor with {} itself)",
                        v, q.q.scale, q.q.zero_point, to_string(q.dtype), to_string(q.dtype), v));
  }

  // The QuantizeLinear reading op node i's output, through a Relu or Clip(0, 6) (QDQ).
  QTensor output_quantize(int i, Draft& d) {
    std::string t = g_.node(i).output(0);
    for (int step = 0;; ++step) {
      const std::vector<int> readers = c_.readers(t);
      if (c_.reaches_graph_output(t) || readers.size() != 1)
        c_.fail(i, "its output '" + t + "' is read by " + std::to_string(readers.size()) +
                       " node(s)" + (c_.reaches_graph_output(t) ? " and is a graph output" : "") +
                       "; expected one QuantizeLinear (QDQ), through a Relu or Clip");
      const int r = readers[0];
      const onnx::NodeProto& rn = g_.node(r);
      if (default_domain(rn) && rn.op_type() == "QuantizeLinear") {
        covered_.insert(r);
        out_.absorbed[r] = "quantization";
        d.quant_nodes.push_back(r);
        d.output = rn.output(0);
        return params(r, 1, 2);
      }
      if (step == 0 && default_domain(rn) && (rn.op_type() == "Relu" || rn.op_type() == "Clip") &&
          (d.layer.op == Op::Conv || d.layer.op == Op::Add)) {
        auto a = act_info(c_, r);
        if (const auto* left = std::get_if<Left>(&a)) c_.fail(r, left->reason);
        d.layer.activation = std::get<ActInfo>(a).activation;
        d.act_node = r;
        covered_.insert(r);
        t = rn.output(0);
        continue;
      }
      c_.fail(r, "it reads the float output of '" + g_.node(i).name() +
                     "'; expected a QuantizeLinear (QDQ: DequantizeLinear -> op [-> Relu or "
                     "Clip(0, 6) of a conv or add] -> QuantizeLinear)");
    }
  }

  // The weight scales of a conv (per tensor or per output channel), its int8 symmetric weights
  // checked, and its int32 bias's scale checked against input scale x weight scale.
  std::vector<float> weight_scales(int i, const Draft& d, const QTensor& in, int w_node, int ws,
                                   int wz, int b_node) {
    const int64_t channels = d.layer.out_channels;
    const std::vector<float> s = scales(w_node, ws);
    DType wtype = DType::I8;
    const std::vector<int64_t> z = zero_points(w_node, wz, wtype);
    if (d.weights->data_type() != TP::INT8 || wtype != DType::I8)
      c_.fail(i, "its weights are " + elem_type_name(d.weights->data_type()) +
                     "; expected int8 (padfold's quantized convs take int8 weights)");
    if (s.size() != 1 && s.size() != static_cast<size_t>(channels))
      c_.fail(i, fmt::format("{} weight scales for {} output channels; expected 1 or {}", s.size(),
                             channels, channels));
    if (z.size() != 1 && z.size() != static_cast<size_t>(channels))
      c_.fail(i, fmt::format("{} weight zero points for {} output channels; expected 1 or {}",
                             z.size(), channels, channels));
    if (std::any_of(z.begin(), z.end(), [](int64_t v) { return v != 0; }))
      c_.fail(i, "its weights have a nonzero zero point; expected 0 (symmetric weights)");
    if (s.size() > 1 && w_node != i) {
      const NodeAttributes a = c_.at_node(w_node, [&] { return NodeAttributes(g_.node(w_node)); });
      const int64_t axis = c_.at_node(w_node, [&] { return a.get_int("axis", 1); });
      if (axis != 0)
        c_.fail(w_node, "axis " + std::to_string(axis) +
                            "; expected 0 (per output channel of the conv's weights)");
    }
    if (d.bias) {
      if (d.bias->data_type() != TP::INT32)
        c_.fail(i, "its bias is " + elem_type_name(d.bias->data_type()) + "; expected int32");
      if (b_node >= 0) {  // QDQ: the bias's own scale must be input scale x weight scale
        const std::vector<float> bs = scales(b_node, 1);
        if (bs.size() != 1 && bs.size() != static_cast<size_t>(channels))
          c_.fail(b_node, fmt::format("{} bias scales for {} output channels; expected 1 or {}",
                                      bs.size(), channels, channels));
        const std::string bz = input_of(g_.node(b_node), 2);
        if (!bz.empty()) {
          const TP& zt = constant_input(b_node, 2, "zero point");
          const auto zs = c_.at_node(b_node, [&] { return to_int64s(zt, "zero point"); });
          if (std::any_of(zs.begin(), zs.end(), [](int64_t v) { return v != 0; }))
            c_.fail(b_node, "the bias has a nonzero zero point; expected 0");
        }
        for (int64_t o = 0; o < channels; ++o) {
          const float want = in.q.scale * s[s.size() == 1 ? 0 : static_cast<size_t>(o)];
          const float got = bs[bs.size() == 1 ? 0 : static_cast<size_t>(o)];
          if (std::fabs(got - want) > 1e-6f * want)
            c_.fail(b_node, fmt::format("bias scale {} for output channel {}; expected the input "
                                        "scale times the weight scale, {}",
                                        got, o, want));
        }
      }
    }
    return s;
  }

  int dq_producer(const std::string& t) const {
    const int p = g_.producer(c_.canon(t));
    return p >= 0 && g_.node(p).op_type() == "DequantizeLinear" ? p : -1;
  }

  void qdq_op(int i) {
    const onnx::NodeProto& n = g_.node(i);
    if (n.op_type() == "Add" || n.op_type() == "Mul") return qdq_binary(i);
    if (n.op_type() == "Sigmoid") return qdq_sigmoid(i);
    if (input_of(n, 0).empty()) c_.fail(i, "expected input X");
    const QTensor in = dequantized(i, n.input(0));
    std::string pad_mode;
    Draft d = window_draft(i, {true, 0, 1, 2, ""}, in, pad_mode);
    LayerQuant& lq = d.layer.quant.emplace();
    lq.inputs = {in.q};
    if (d.layer.op == Op::Conv) {
      const int w_node = dq_producer(n.input(1));
      const int b_node = input_of(n, 2).empty() ? -1 : dq_producer(n.input(2));
      if (w_node < 0)
        c_.fail(i, "its weights '" + n.input(1) + "' are not a DequantizeLinear of int8 weights");
      if (!input_of(n, 2).empty() && b_node < 0)
        c_.fail(i, "its bias '" + n.input(2) + "' is not a DequantizeLinear of an int32 bias");
      lq.weight_scales = weight_scales(i, d, in, w_node, 1, 2, b_node);
      d.quant_nodes.push_back(w_node);
      if (b_node >= 0) d.quant_nodes.push_back(b_node);
    } else if (d.layer.op != Op::MaxPool && d.layer.op != Op::AvgPool) {
      c_.fail(i, "it is a " + d.layer.op_name + "; expected a conv or pool");
    }
    const QTensor out = output_quantize(i, d);
    lq.output = out.q;
    check_pool_output(i, d, in, out);
    add_layer(std::move(d), out, pad_mode);
  }

  void check_pool_output(int i, const Draft& d, const QTensor& in, const QTensor& out) const {
    if (out.dtype != in.dtype)
      c_.fail(i, "its input is " + to_string(in.dtype) + " and its output " + to_string(out.dtype) +
                     "; expected one dtype");
    if (d.layer.op == Op::MaxPool && !same(in.q, out.q))
      c_.fail(i, fmt::format("its output is quantized with scale {}, zero point {}, its input "
                             "with {}, {}; expected the input's (padfold's quantized max_pool "
                             "keeps its input's quantization)",
                             out.q.scale, out.q.zero_point, in.q.scale, in.q.zero_point));
  }

  // Add (tensors of one shape) or mul (also one of one value per channel, [N, C, 1..], which the
  // layer reads second: the product is symmetric in its inputs, ONNX Runtime's too).
  Draft binary_draft(int i, std::vector<QTensor> ins) {
    const onnx::NodeProto& n = g_.node(i);
    const bool mul = n.op_type() == "Mul" || n.op_type() == "QLinearMul";
    Draft d;
    d.node = i;
    d.output = n.output(0);
    Layer& l = d.layer;
    l.op = mul ? Op::Mul : Op::Add;
    l.op_name = mul ? "mul" : "add";
    std::vector<std::vector<int64_t>> shapes;
    for (const QTensor& q : ins) {
      no_pad(c_, i, q);
      TensorType ty;
      if (std::string why = check_data_input(c_, q.tensor, ty); !why.empty()) c_.fail(i, why);
      shapes.push_back(ty.shape);
      if (q.dtype != ins[0].dtype) c_.fail(i, "its inputs have different dtypes");
    }
    const auto per_channel = [](const std::vector<int64_t>& x, const std::vector<int64_t>& s) {
      return s.size() == x.size() && s != x && broadcasts_per_channel(x, s);
    };
    if (mul && per_channel(shapes[1], shapes[0])) {
      std::swap(ins[0], ins[1]);
      std::swap(shapes[0], shapes[1]);
    }
    if (shapes[0] != shapes[1] && !(mul && per_channel(shapes[0], shapes[1])))
      c_.fail(i, "its inputs have the shapes " + shape_text(shapes[0], true) + " and " +
                     shape_text(shapes[1], true) + "; padfold's quantized " + l.op_name +
                     (mul ? " takes tensors of one shape, or one and a tensor of one value per "
                            "channel of it"
                          : " takes tensors of one shape (no broadcasting)"));
    for (const QTensor& q : ins) l.inputs.push_back(q.tensor);
    l.spatial_dims = static_cast<int>(shapes[0].size()) - 2;
    l.layout = {false, l.spatial_dims};
    LayerQuant& lq = l.quant.emplace();
    for (const QTensor& q : ins) lq.inputs.push_back(q.q);
    return d;
  }

  void qdq_binary(int i) {
    const onnx::NodeProto& n = g_.node(i);
    if (n.input_size() != 2) c_.fail(i, "expected two inputs");
    Draft d = binary_draft(i, {dequantized(i, n.input(0)), dequantized(i, n.input(1))});
    const QTensor out = output_quantize(i, d);
    if (out.dtype != quant_.at(d.layer.inputs[0]).dtype)
      c_.fail(i, "its output dtype differs from its inputs'");
    d.layer.quant->output = out.q;
    add_layer(std::move(d), out);
  }

  Draft sigmoid_draft(int i, const QTensor& in) {
    no_pad(c_, i, in);
    TensorType ty;
    if (std::string why = check_data_input(c_, in.tensor, ty); !why.empty()) c_.fail(i, why);
    Draft d = draft_activation(c_, i, in.tensor, ty.shape.size(), Activation::Sigmoid);
    d.layer.quant.emplace().inputs = {in.q};
    return d;
  }

  void qdq_sigmoid(int i) {
    const QTensor in = dequantized(i, g_.node(i).input(0));
    Draft d = sigmoid_draft(i, in);
    QTensor out = output_quantize(i, d);
    if (out.dtype != in.dtype) c_.fail(i, "its output dtype differs from its input's");
    if (const int mul = silu_mul(d.output, out, in); mul >= 0) {
      make_silu(d, mul, out);
      out = output_quantize(mul, d);
      if (out.dtype != in.dtype) c_.fail(mul, "its output dtype differs from its inputs'");
    }
    d.layer.quant->output = out.q;
    add_layer(std::move(d), out);
  }

  // Node `mul` multiplies the sigmoid draft d's input by d's output quantized as `gate`: d becomes
  // one silu table of both nodes (its output then the mul's).
  static void make_silu(Draft& d, int mul, const QTensor& gate) {
    d.layer.activation = Activation::Silu;
    d.layer.quant->gate = gate.q;
    d.part_nodes = {d.node};
    d.node = mul;
  }

  static bool read_as_written(const QTensor& read, const QTensor& written) {
    return same(read.q, written.q) && read.dtype == written.dtype;
  }

  // The Mul of a SiLU (x times its quantized sigmoid `gate`, QDQ) where `gate` is read by one
  // DequantizeLinear, read by that Mul alone, whose other input dequantizes x itself: that Mul
  // (its DequantizeLinear absorbed), or -1.
  int silu_mul(const std::string& gate, const QTensor& gate_q, const QTensor& x) {
    const std::vector<int> dqs = c_.readers(gate);
    if (dqs.size() != 1 || c_.reaches_graph_output(gate)) return -1;
    const onnx::NodeProto& dq = g_.node(dqs[0]);
    if (!default_domain(dq) || dq.op_type() != "DequantizeLinear" || dq.output_size() < 1 ||
        c_.reaches_graph_output(dq.output(0)))
      return -1;
    const std::vector<int> muls = c_.readers(dq.output(0));
    if (muls.size() != 1) return -1;
    const onnx::NodeProto& m = g_.node(muls[0]);
    if (!default_domain(m) || m.op_type() != "Mul" || m.input_size() != 2) return -1;
    const std::string other = m.input(0) == dq.output(0) ? m.input(1) : m.input(0);
    const int other_dq = g_.producer(c_.canon(other));
    if (other_dq < 0 || g_.node(other_dq).op_type() != "DequantizeLinear" ||
        g_.node(other_dq).input_size() < 1 || c_.canon(g_.node(other_dq).input(0)) != x.tensor)
      return -1;
    // Both DequantizeLinears read with the parameters their tensors are written in.
    if (!read_as_written(params(dqs[0], 1, 2), gate_q) ||
        !read_as_written(params(other_dq, 1, 2), x))
      return -1;
    covered_.insert(dqs[0]);
    out_.absorbed[dqs[0]] = "quantization";
    covered_.insert(muls[0]);
    return muls[0];
  }

  void qlinear_conv(int i) {
    const onnx::NodeProto& n = g_.node(i);
    if (n.input_size() < 8) c_.fail(i, "expected 8 or 9 inputs (x, x_scale, x_zero_point, w, ...)");
    QTensor in = quantized(i, n.input(0));
    const QTensor declared = params(i, 1, 2);
    check_declared(i, in, declared);
    std::string pad_mode;
    Draft d = window_draft(i, {true, 0, 3, 8, "Conv"}, in, pad_mode);
    LayerQuant& lq = d.layer.quant.emplace();
    lq.inputs = {in.q};
    lq.weight_scales = weight_scales(i, d, in, i, 4, 5, -1);
    const QTensor out = params(i, 6, 7);
    if (out.dtype != in.dtype)
      c_.fail(i, "its input is " + to_string(in.dtype) + " and its output " + to_string(out.dtype) +
                     "; expected one dtype");
    lq.output = out.q;
    add_layer(std::move(d), out, pad_mode);
  }

  void check_declared(int i, const QTensor& in, const QTensor& declared) const {
    if (!same(in.q, declared.q) || in.dtype != declared.dtype)
      c_.fail(i, fmt::format("it reads its input with scale {}, zero point {} ({}); the tensor is "
                             "written with scale {}, zero point {} ({})",
                             declared.q.scale, declared.q.zero_point, to_string(declared.dtype),
                             in.q.scale, in.q.zero_point, to_string(in.dtype)));
  }

  void qop_max_pool(int i) {
    const onnx::NodeProto& n = g_.node(i);
    const QTensor in = quantized(i, n.input(0));
    std::string pad_mode;
    Draft d = window_draft(i, {true, 0, 1, 2, ""}, in, pad_mode);
    LayerQuant& lq = d.layer.quant.emplace();
    lq.inputs = {in.q};
    lq.output = in.q;
    QTensor out = in;
    out.pad = -1;
    add_layer(std::move(d), out, pad_mode);
  }

  void qlinear_pool(int i) {
    const onnx::NodeProto& n = g_.node(i);
    const bool global = n.op_type() == "QLinearGlobalAveragePool";
    const NodeAttributes a = c_.at_node(i, [&] { return NodeAttributes(n); });
    if (c_.at_node(i, [&] { return a.get_int("channels_last", 0); }) != 0)
      c_.fail(i, "channels_last 1; expected 0 (the ONNX layout, channels first)");
    if (n.input_size() < 5) c_.fail(i, "expected inputs X, x_scale, x_zero_point, y_scale, ...");
    const QTensor in = quantized(i, n.input(0));
    check_declared(i, in, params(i, 1, 2));
    std::string pad_mode;
    Draft d = window_draft(i, {true, 0, 1, 2, global ? "GlobalAveragePool" : "AveragePool"}, in,
                           pad_mode);
    LayerQuant& lq = d.layer.quant.emplace();
    lq.inputs = {in.q};
    const QTensor out = params(i, 3, 4);
    check_pool_output(i, d, in, out);
    lq.output = out.q;
    add_layer(std::move(d), out, pad_mode);
  }

  // com.microsoft QLinearAdd and QLinearMul: A, A_scale, A_zero_point, B, B_scale, B_zero_point,
  // C_scale, C_zero_point.
  void qlinear_binary(int i) {
    const onnx::NodeProto& n = g_.node(i);
    if (n.input_size() < 7 || n.output_size() < 1)
      c_.fail(i, "expected inputs A, A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale");
    const QTensor a = quantized(i, n.input(0)), b = quantized(i, n.input(3));
    check_declared(i, a, params(i, 1, 2));
    check_declared(i, b, params(i, 4, 5));
    Draft d = binary_draft(i, {a, b});
    const QTensor out = params(i, 6, 7);
    if (out.dtype != a.dtype) c_.fail(i, "its output dtype differs from its inputs'");
    d.layer.quant->output = out.q;
    add_layer(std::move(d), out);
  }

  // com.microsoft QLinearSigmoid: X, X_scale, X_zero_point, Y_scale, Y_zero_point.
  void qlinear_sigmoid(int i) {
    const onnx::NodeProto& n = g_.node(i);
    if (n.input_size() < 4 || n.output_size() < 1)
      c_.fail(i, "expected inputs X, X_scale, X_zero_point, Y_scale, Y_zero_point");
    const QTensor in = quantized(i, n.input(0));
    check_declared(i, in, params(i, 1, 2));
    Draft d = sigmoid_draft(i, in);
    QTensor out = params(i, 3, 4);
    if (out.dtype != in.dtype) c_.fail(i, "its output dtype differs from its input's");
    if (const int mul = qlinear_silu_mul(n.output(0), out, in); mul >= 0) {
      make_silu(d, mul, out);
      d.output = g_.node(mul).output(0);
      out = params(mul, 6, 7);
      if (out.dtype != in.dtype) c_.fail(mul, "its output dtype differs from its inputs'");
    }
    d.layer.quant->output = out.q;
    add_layer(std::move(d), out);
  }

  // QOperator's SiLU: the com.microsoft QLinearMul of x and its QLinearSigmoid `gate` (read by
  // nothing else), each read with the parameters it is written in: that node, or -1.
  int qlinear_silu_mul(const std::string& gate, const QTensor& gate_q, const QTensor& x) {
    const std::vector<int> readers = c_.readers(gate);
    if (readers.size() != 1 || c_.reaches_graph_output(gate)) return -1;
    const onnx::NodeProto& m = g_.node(readers[0]);
    if (m.domain() != "com.microsoft" || m.op_type() != "QLinearMul" || m.input_size() < 7 ||
        m.output_size() < 1)
      return -1;
    const int k_gate = m.input(0) == gate ? 0 : 3, k_x = 3 - k_gate;
    if (m.input(k_gate) != gate || c_.canon(m.input(k_x)) != x.tensor) return -1;
    if (!read_as_written(params(readers[0], k_gate + 1, k_gate + 2), gate_q) ||
        !read_as_written(params(readers[0], k_x + 1, k_x + 2), x))
      return -1;
    covered_.insert(readers[0]);
    return readers[0];
  }

  Context& c_;
  const GraphIndex& g_;
  QuantGraph out_;
  std::set<int> covered_;
  std::map<std::string, QTensor> quant_;  // quantized tensors (QOperator's, Q outputs)
  std::map<std::string, QTensor> deq_;    // float tensors that DequantizeLinear a quantized one
  std::set<std::string> produced_;        // tensors the layers compute
};

}  // namespace

bool is_quantized_graph(const GraphIndex& g) {
  for (int i = 0; i < g.num_nodes(); ++i)
    if (one_of(g.node(i).op_type(), kQOps)) return true;
  return false;
}

QuantGraph recognize_quantized(Context& c) {
  return Recognizer(c).run();
}

}  // namespace padfold::onnx_import::detail
