// Elementwise ops and the fused activations: add, mul, activation, softmax, layer_norm, quantize
// and dequantize (builders.h).
#include <vector>

#include "algorithm/access.h"
#include "algorithm/builders.h"
#include "algorithm/requantize.h"

namespace padfold {

using namespace Halide;

Expr activate(Expr v, const Layer& L) {
  switch (L.activation) {
    case Activation::None:
      return v;
    case Activation::Relu:
      return max(v, 0.f);
    case Activation::Relu6:
      return clamp(v, 0.f, 6.f);
    case Activation::LeakyRelu:
      return select(v > 0.f, v, v * L.activation_alpha);
    case Activation::Sigmoid:
      return 1.f / (1.f + exp(-v));
    case Activation::Tanh:
      return tanh(v);
    case Activation::HardSigmoid:
      return clamp(v * L.activation_alpha + L.activation_beta, 0.f, 1.f);
    case Activation::HardSwish:
      return v * clamp(v * (1.f / 6.f) + 0.5f, 0.f, 1.f);
    case Activation::Silu:
      return v / (1.f + exp(-v));
    case Activation::Gelu:
      return 0.5f * v * (1.f + erf(v * 0.70710678f));
    case Activation::GeluTanh:
      return 0.5f * v * (1.f + tanh(gelu_tanh::kScale * (v + gelu_tanh::kCubic * v * v * v)));
  }
  return v;
}

void build_add(Algorithm& a) {
  const Layer& L = *a.layer;
  if (L.quantized()) {
    a.output(a.vars) =
        cast(element_type(L), add_quantized(L, cast<int32_t>(a.inputs[0](a.vars)),
                                            cast<int32_t>(a.inputs[1](a.vars)), a.native_fma));
    return;
  }
  Expr sum = a.inputs[0](a.vars);
  for (size_t i = 1; i < a.inputs.size(); ++i) sum = sum + a.inputs[i](a.vars);
  a.output(a.vars) = activate(sum, *a.layer);
}

// Input 1 may hold one value per channel: read at spatial index 0 (squeeze-and-excite's scale).
void build_mul(Algorithm& a) {
  const Layer& L = *a.layer;
  std::vector<Expr> scale_args(a.vars.begin(), a.vars.end());
  if (L.channel_broadcast)
    scale_args = tensor_args(L.layout, a.c, std::vector<Expr>(a.spatial.size(), 0), a.n);
  if (L.quantized()) {
    a.output(a.vars) = cast(element_type(L), mul_quantized(L, cast<int32_t>(a.inputs[0](a.vars)),
                                                           cast<int32_t>(a.inputs[1](scale_args))));
    return;
  }
  a.output(a.vars) = activate(a.inputs[0](a.vars) * a.inputs[1](scale_args), L);
}

// The activation alone. Quantized: ONNX Runtime's sigmoid or SiLU as a table of the 256 integers
// (onnx_activation_table), computed by the compile and embedded in the kernel, indexed by q - qmin.
void build_activation(Algorithm& a) {
  const Layer& L = *a.layer;
  if (!L.quantized()) {
    a.output(a.vars) = activate(a.input(a.vars), L);
    return;
  }
  const std::vector<int32_t> entries = onnx_activation_table(L);
  Buffer<int32_t> table(static_cast<int>(entries.size()), L.name + "_table");
  for (size_t i = 0; i < entries.size(); ++i) table(static_cast<int>(i)) = entries[i];
  const int32_t qmin = dtype_range(L.dtype).first;
  a.output(a.vars) = cast(element_type(L), table(cast<int32_t>(a.input(a.vars)) - qmin));
}

// exp(x - max) / sum exp(x - max) over channels; the max and the sum are per pixel, helpers a
// schedule computes at root.
void build_softmax(Algorithm& a) {
  const Layer& L = *a.layer;
  const size_t ch = L.layout.channels_last ? 0 : a.vars.size() - 2;  // Halide order
  std::vector<Var> pixel(a.vars.begin(), a.vars.end());
  pixel.erase(pixel.begin() + static_cast<std::ptrdiff_t>(ch));
  RDom k(0, static_cast<int>(L.in_channels), "k");
  auto at_channel = [&](Expr e) {
    std::vector<Expr> args(a.vars.begin(), a.vars.end());
    args[ch] = std::move(e);
    return args;
  };
  Func peak(L.name + "_max"), total(L.name + "_sum");
  peak(pixel) = maximum(a.input(at_channel(k)));
  const std::vector<Expr> pixel_args(pixel.begin(), pixel.end());
  total(pixel) = sum(exp(a.input(at_channel(k)) - peak(pixel_args)));
  a.helpers = {peak, total};
  // exp is evaluated again here rather than stored: a softmax runs over a classifier's few thousand
  // scores, and a stored exp would be a third buffer for every target's schedule to place.
  a.output(a.vars) = exp(a.input(a.vars) - peak(pixel_args)) / total(pixel_args);
}

// (x - mean) / sqrt(variance + epsilon) over the channels of each pixel; the mean and the
// reciprocal deviation are per pixel, helpers a schedule computes at root. The variance is the mean
// of squared differences (two passes, as torch and ONNX Runtime compute it).
void build_layer_norm(Algorithm& a) {
  const Layer& L = *a.layer;
  const size_t ch = L.layout.channels_last ? 0 : a.vars.size() - 2;  // Halide order
  std::vector<Var> pixel(a.vars.begin(), a.vars.end());
  pixel.erase(pixel.begin() + static_cast<std::ptrdiff_t>(ch));
  const std::vector<Expr> at_pixel(pixel.begin(), pixel.end());
  RDom k(0, static_cast<int>(L.in_channels), "k");
  std::vector<Expr> at_k(a.vars.begin(), a.vars.end());
  at_k[ch] = k;
  const float n = static_cast<float>(L.in_channels);
  Func mean(L.name + "_mean"), inv_dev(L.name + "_inv_dev");
  mean(pixel) = sum(a.input(at_k)) / n;
  const Expr d = a.input(at_k) - mean(at_pixel);
  inv_dev(pixel) = 1.f / sqrt(sum(d * d) / n + L.epsilon);
  a.helpers = {mean, inv_dev};
  a.output(a.vars) = (a.input(a.vars) - mean(at_pixel)) * inv_dev(at_pixel);
}

// The edges of a quantized model: float32 -> int8/uint8 and back, element by element.
void build_quantize(Algorithm& a) {
  a.output(a.vars) = quantize_element(*a.layer, a.input(a.vars));
}

void build_dequantize(Algorithm& a) {
  a.output(a.vars) = dequantize_element(*a.layer, a.input(a.vars));
}

}  // namespace padfold
