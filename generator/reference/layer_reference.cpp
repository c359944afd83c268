#include "reference/layer_reference.h"

#include <random>

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

ref::ActivationKind activation_kind(Activation a) {
  switch (a) {
    case Activation::None:
      return ref::ActivationKind::None;
    case Activation::Relu:
      return ref::ActivationKind::Relu;
    case Activation::Relu6:
      return ref::ActivationKind::Relu6;
    case Activation::LeakyRelu:
      return ref::ActivationKind::LeakyRelu;
    case Activation::Sigmoid:
      return ref::ActivationKind::Sigmoid;
    case Activation::Tanh:
      return ref::ActivationKind::Tanh;
    case Activation::HardSigmoid:
      return ref::ActivationKind::HardSigmoid;
    case Activation::HardSwish:
      return ref::ActivationKind::HardSwish;
    case Activation::Silu:
      return ref::ActivationKind::Silu;
  }
  return ref::ActivationKind::None;
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
  const int dims = L.spatial_dims;
  const ref::Tensor x = L.layout.channels_last ? ref::from_channels_last(d.input) : d.input;
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
    case Op::Add:
    case Op::Mul:
    case Op::Concat:  // several inputs: join_kernels_test has their reference
      throw std::invalid_argument("reference_output: layer '" + L.name + "' joins several inputs");
  }
  y = ref::activation(y, activation_kind(L.activation), L.activation_alpha, L.activation_beta);
  return L.layout.channels_last ? ref::to_channels_last(y) : y;
}

Tensor add_output(const Layer& add, const Tensor& a, const Tensor& b) {
  if (a.shape != b.shape) throw std::invalid_argument("add_output: shapes differ");
  Tensor sum = a;
  for (size_t i = 0; i < sum.data.size(); ++i) sum.data[i] += b.data[i];
  return ref::activation(sum, activation_kind(add.activation), add.activation_alpha,
                         add.activation_beta);
}

}  // namespace padfold::ref
