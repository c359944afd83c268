#include "reference/layer_reference.h"

#include <random>
#include <stdexcept>

namespace padfold::ref {

namespace {

ref::Tensor random_tensor(std::vector<int64_t> shape, std::mt19937& rng) {
  ref::Tensor t(std::move(shape));
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (float& v : t.data) v = dist(rng);
  return t;
}

ref::BorderKind border_kind(Border b) {
  switch (b) {
    case Border::Zeros:
      return ref::BorderKind::Zeros;
    case Border::Constant:
      return ref::BorderKind::Constant;
    case Border::Reflect:
      return ref::BorderKind::Reflect;
    case Border::Symmetric:
      return ref::BorderKind::Symmetric;
    case Border::Replicate:
      return ref::BorderKind::Replicate;
    case Border::Circular:
      return ref::BorderKind::Circular;
  }
  return ref::BorderKind::Zeros;
}

}  // namespace

LayerData random_data(const Layer& L, unsigned seed) {
  std::mt19937 rng(seed);
  LayerData d;
  d.input = random_tensor(L.input_shape(), rng);
  if (L.has_weights()) d.weights = random_tensor(L.weight_shape(), rng);
  if (L.bias) d.bias = random_tensor({L.out_channels}, rng);
  return d;
}

ref::Tensor reference_output(const Layer& L, const LayerData& d) {
  if (L.op == Op::Transpose) return ref::transpose(d.input, L.perm);  // the buffers as they are
  const int dims = L.spatial_dims;
  const ref::Tensor x = L.read_layout().channels_last ? ref::from_channels_last(d.input) : d.input;
  const ref::Tensor* bias = L.bias ? &d.bias : nullptr;
  std::vector<int64_t> before, after;
  for (const AxisPads& p : L.pads.axes) {
    before.push_back(p.before);
    after.push_back(p.after);
  }
  ref::Tensor y;
  switch (L.op) {
    case Op::Conv: {
      const ref::Tensor w =
          ref::permute(d.weights, L.weight_layout.order, "OI" + spatial_letters(dims));
      ref::ConvParams p{L.stride,      L.dilation, before, after, L.groups, border_kind(L.border),
                        L.border_value};
      y = ref::conv(x, w, bias, p, L.out_spatial);
      break;
    }
    case Op::ConvTranspose: {
      const ref::Tensor w =
          ref::permute(d.weights, L.weight_layout.order, "IO" + spatial_letters(dims));
      y = ref::conv_transpose(x, w, bias, L.stride, L.dilation, before, after, L.groups,
                              L.out_spatial);
      break;
    }
    case Op::MaxPool:
    case Op::AvgPool: {
      ref::PoolParams p{
          L.kernel,       L.stride,           L.dilation, before, after, border_kind(L.border),
          L.border_value, L.count_include_pad};
      y = L.op == Op::MaxPool ? ref::max_pool(x, p, L.out_spatial)
                              : ref::avg_pool(x, p, L.out_spatial);
      break;
    }
    case Op::Softmax:
      y = ref::softmax_channels(x);
      break;
    case Op::Resize: {
      const ResizeSpec& r = L.resize;
      y = ref::resize(x, {r.mode == ResizeMode::Linear, to_string(r.coordinates),
                          to_string(r.rounding), r.output, r.scales, r.roi, r.extrapolation_value});
      break;
    }
    case Op::GatherChannels:
      y = ref::gather_channels(x, L.channels);
      break;
    case Op::LayerNorm:
      y = ref::layer_norm_channels(x, L.epsilon);
      break;
    case Op::Activation:  // applied below
      y = x;
      break;
    case Op::Add:
    case Op::Mul:
    case Op::Concat:  // several inputs: join_kernels_test has their reference
      throw std::invalid_argument("reference_output: layer '" + L.name + "' joins several inputs");
    case Op::Quantize:  // float <-> integers: quantize_reference, dequantize_reference
    case Op::Dequantize:
      throw std::invalid_argument("reference_output: layer '" + L.name + "' converts dtypes");
    case Op::Transpose:
      break;  // above
  }
  y = ref::activation(y, L.activation, L.activation_alpha, L.activation_beta);
  return L.layout.channels_last ? ref::to_channels_last(y) : y;
}

namespace {

// Layout changes go through float tensors: every value is an integer below 2^24, held exactly.
Tensor as_float(const QTensor& q) {
  return Tensor(q.shape, std::vector<float>(q.data.begin(), q.data.end()));
}
QTensor as_ints(const Tensor& t) {
  return QTensor(t.shape, std::vector<int32_t>(t.data.begin(), t.data.end()));
}
// An input of the layer (in its read layout) or its output (in its own) to channels first.
QTensor to_logical(const TensorLayout& layout, const QTensor& t) {
  return layout.channels_last ? as_ints(from_channels_last(as_float(t))) : t;
}
QTensor from_logical(const Layer& L, const QTensor& t) {
  return L.layout.channels_last ? as_ints(to_channels_last(as_float(t))) : t;
}

QTensor random_ints(std::vector<int64_t> shape, int32_t lo, int32_t hi, std::mt19937& rng) {
  QTensor t(std::move(shape));
  std::uniform_int_distribution<int32_t> dist(lo, hi);
  for (int32_t& v : t.data) v = dist(rng);
  return t;
}

QParams qparams(const QuantParams& q) {
  return {q.scale, q.zero_point};
}

}  // namespace

std::pair<int32_t, int32_t> quant_range(DType dtype) {
  return dtype == DType::U8 ? std::pair{0, 255} : std::pair{-128, 127};
}

QLayerData random_quant_data(const Layer& L, unsigned seed) {
  std::mt19937 rng(seed);
  const auto [lo, hi] = quant_range(L.dtype);
  QLayerData d;
  for (size_t i = 0; i < L.inputs.size(); ++i)
    d.inputs.push_back(random_ints(L.input_shape(i), lo, hi, rng));
  if (L.has_weights()) d.weights = random_ints(L.weight_shape(), -127, 127, rng);
  if (L.bias) d.bias = random_ints({L.out_channels}, -20000, 20000, rng).data;
  return d;
}

QTensor quant_reference_output(const Layer& L, const QLayerData& d) {
  if (!L.quant) throw std::invalid_argument("layer '" + L.name + "' is not quantized");
  const LayerQuant& q = *L.quant;
  const auto [lo, hi] = quant_range(L.dtype);
  const QMode mode = q.requantize == Requantize::Onnx ? QMode::Onnx : QMode::Tflite;
  if (L.op == Op::Activation) {  // sigmoid, or silu: the sigmoid to the gate, times the input
    const QTensor x = to_logical(L.read_layout(), d.inputs[0]);
    const QParams gate = qparams(q.gate.value_or(q.output));
    const QTensor s = qsigmoid(x, qparams(q.inputs[0]), gate, lo, hi);
    return from_logical(
        L, L.activation == Activation::Silu
               ? qmul(x, s, qparams(q.inputs[0]), gate, qparams(q.output), lo, hi, lo, hi)
               : s);
  }
  const int act = L.activation == Activation::Relu ? 1 : L.activation == Activation::Relu6 ? 2 : 0;
  const auto [act_min, act_max] = qactivation_range(act, qparams(q.output), lo, hi, mode);
  std::vector<int64_t> before, after;
  for (const AxisPads& p : L.pads.axes) {
    before.push_back(p.before);
    after.push_back(p.after);
  }
  // The constant border is the real value quantized with the input's parameters.
  const float border =
      L.border == Border::Constant
          ? static_cast<float>(qround_quantize(L.border_value, qparams(q.inputs[0]), lo, hi, mode))
          : 0.f;
  QTensor y;
  switch (L.op) {
    case Op::Conv: {
      const QTensor w = as_ints(permute(as_float(d.weights), L.weight_layout.order,
                                        "OI" + spatial_letters(L.spatial_dims)));
      const ConvParams p{L.stride, L.dilation, before, after, L.groups, border_kind(L.border),
                         border};
      y = qconv(to_logical(L.read_layout(), d.inputs[0]), w, d.bias, p, qparams(q.inputs[0]),
                q.weight_scales, qparams(q.output), act_min, act_max, lo, hi, mode, L.out_spatial);
      break;
    }
    case Op::MaxPool:
    case Op::AvgPool: {
      const PoolParams p{
          L.kernel, L.stride,           L.dilation, before, after, border_kind(L.border),
          border,   L.count_include_pad};
      y = L.op == Op::MaxPool
              ? qmax_pool(to_logical(L.read_layout(), d.inputs[0]), p, act_min, act_max,
                          L.out_spatial)
              : qavg_pool(to_logical(L.read_layout(), d.inputs[0]), p, qparams(q.inputs[0]),
                          qparams(q.output), act_min, act_max, lo, hi, mode, L.out_spatial);
      break;
    }
    case Op::Add:
      y = qadd(to_logical(L.read_layout(), d.inputs[0]), to_logical(L.layout, d.inputs[1]),
               qparams(q.inputs[0]), qparams(q.inputs[1]), qparams(q.output), act_min, act_max, lo,
               hi, mode);
      break;
    case Op::Mul:
      if (mode != QMode::Onnx)
        throw std::invalid_argument("layer '" + L.name + "': a quantized mul is ONNX Runtime's");
      y = qmul(to_logical(L.layout, d.inputs[0]), to_logical(L.layout, d.inputs[1]),
               qparams(q.inputs[0]), qparams(q.inputs[1]), qparams(q.output), act_min, act_max, lo,
               hi);
      break;
    default:
      throw std::invalid_argument("layer '" + L.name + "': no quantized reference for " +
                                  L.op_name);
  }
  return from_logical(L, y);
}

QTensor quantize_reference(const Layer& L, const Tensor& x) {
  if (L.op != Op::Quantize || !L.quant)
    throw std::invalid_argument("layer '" + L.name + "' is not a quantize layer");
  const auto [lo, hi] = quant_range(L.dtype);
  return quantize(x, qparams(L.quant->output), lo, hi,
                  L.quant->requantize == Requantize::Onnx ? QMode::Onnx : QMode::Tflite);
}

Tensor dequantize_reference(const Layer& L, const QTensor& q) {
  if (L.op != Op::Dequantize || !L.quant)
    throw std::invalid_argument("layer '" + L.name + "' is not a dequantize layer");
  return dequantize(q, qparams(L.quant->inputs.at(0)));
}

Tensor add_output(const Layer& add, const Tensor& a, const Tensor& b) {
  if (a.shape != b.shape) throw std::invalid_argument("add_output: shapes differ");
  Tensor sum = a;
  for (size_t i = 0; i < sum.data.size(); ++i) sum.data[i] += b.data[i];
  return ref::activation(sum, add.activation, add.activation_alpha, add.activation_beta);
}

}  // namespace padfold::ref
