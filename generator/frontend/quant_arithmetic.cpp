#include "frontend/quant_arithmetic.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <string>

namespace padfold {
namespace {

const LayerQuant& quant_of(const Layer& L) {
  if (!L.quant) throw QuantRefused(L.name, "it has no quantization");
  return *L.quant;
}

[[noreturn]] void refuse(const Layer& L, const std::string& why) {
  throw QuantRefused(L.name, why);
}

}  // namespace

FixedPointMultiplier quantize_multiplier(double real) {
  if (!std::isfinite(real)) throw QuantRefused("", "quantize_multiplier of a non-finite value");
  if (real == 0.) return {};
  int shift = 0;
  const double q = std::frexp(real, &shift);
  auto fixed = static_cast<int64_t>(std::round(q * static_cast<double>(int64_t{1} << 31)));
  if (fixed == (int64_t{1} << 31)) {
    fixed /= 2;
    ++shift;
  }
  if (shift < -31) return {};
  return {static_cast<int32_t>(fixed), shift};
}

FixedPointMultiplier quantize_multiplier_smaller_than_one(double real) {
  if (!(real > 0. && real < 1.))
    throw QuantRefused(
        "", "a multiplier smaller than one must lie in (0, 1), got " + std::to_string(real));
  const FixedPointMultiplier m = quantize_multiplier(real);
  // Just below 1, q * 2^31 rounds up to 2^31 and the shift becomes 1: TFLite's check fails.
  if (m.shift > 0) throw QuantRefused("", "multiplier " + std::to_string(real) + " rounds up to 1");
  return m;
}

std::pair<int32_t, int32_t> dtype_range(DType dtype) {
  switch (dtype) {
    case DType::I8:
      return {-128, 127};
    case DType::U8:
      return {0, 255};
    case DType::F32:
    case DType::F16:
      break;
  }
  throw QuantRefused("", "dtype " + to_string(dtype) + " is not quantized");
}

int32_t quantize_value(float v, const QuantParams& q, DType dtype, Requantize mode) {
  const auto [qmin, qmax] = dtype_range(dtype);
  const float scaled = v / q.scale;
  if (std::isnan(scaled)) throw QuantRefused("", "cannot quantize " + std::to_string(v));
  // nearbyint rounds half to even in the default rounding mode, which the generator never changes.
  const float rounded = mode == Requantize::Tflite ? std::round(scaled) : std::nearbyint(scaled);
  const double value = static_cast<double>(rounded) + q.zero_point;
  return static_cast<int32_t>(
      std::clamp(value, static_cast<double>(qmin), static_cast<double>(qmax)));
}

std::pair<int32_t, int32_t> activation_range(const Layer& L) {
  const auto [qmin, qmax] = dtype_range(L.dtype);
  const QuantParams& out = quant_of(L).output;
  const Requantize mode = quant_of(L).requantize;
  switch (L.activation) {
    case Activation::None:
      return {qmin, qmax};
    case Activation::Relu:
      return {std::max(qmin, quantize_value(0.f, out, L.dtype, mode)), qmax};
    case Activation::Relu6:
      return {std::max(qmin, quantize_value(0.f, out, L.dtype, mode)),
              std::min(qmax, quantize_value(6.f, out, L.dtype, mode))};
    default:
      break;
  }
  refuse(L, "a quantized layer's activation must be none, relu or relu6, not " +
                to_string(L.activation));
}

ConvRequantization conv_requantization(const Layer& L) {
  const LayerQuant& q = quant_of(L);
  const size_t channels = static_cast<size_t>(L.out_channels);
  if (q.inputs.empty()) refuse(L, "no input quantization");
  if (q.weight_scales.size() != 1 && q.weight_scales.size() != channels)
    refuse(L, std::to_string(q.weight_scales.size()) + " weight scales for " +
                  std::to_string(channels) + " output channels");
  const float sx = q.inputs[0].scale, sy = q.output.scale;
  ConvRequantization r;
  for (size_t o = 0; o < channels; ++o) {
    const float sw = q.weight_scales[q.weight_scales.size() == 1 ? 0 : o];
    if (q.requantize == Requantize::Onnx) {
      r.scale.push_back(sx * sw / sy);
      continue;
    }
    const double real = static_cast<double>(sx) * static_cast<double>(sw) / static_cast<double>(sy);
    if (!std::isfinite(real))
      refuse(L, "requantization scale (input x weight / output) not finite");
    const FixedPointMultiplier m = quantize_multiplier(real);
    // TFLite computes x * (1 << shift): a larger shift is undefined there.
    if (m.shift > 30) refuse(L, "requantization scale above 2^30");
    r.fixed.push_back(m);
  }
  return r;
}

bool average_pool_onnx_global(const Layer& L) {
  if (L.op != Op::AvgPool || !L.quant || L.quant->requantize != Requantize::Onnx) return false;
  if (L.kernel != L.in_spatial) return false;
  return std::all_of(L.pads.axes.begin(), L.pads.axes.end(),
                     [](const AxisPads& p) { return p.before == 0 && p.after == 0; });
}

TfliteAddMultipliers tflite_add_multipliers(const Layer& L) {
  const LayerQuant& q = quant_of(L);
  if (q.inputs.size() != 2) refuse(L, "a quantized add needs the quantization of two inputs");
  const QuantParams &a = q.inputs[0], &b = q.inputs[1];
  const double twice_max = 2 * std::max(a.scale, b.scale);
  const double out_real = twice_max / ((1 << kTfliteAddLeftShift) * q.output.scale);
  if (out_real >= 1.) refuse(L, "TFLite's add needs 2 * max(input scales) < 2^20 * output scale");
  try {
    return {quantize_multiplier_smaller_than_one(a.scale / twice_max),
            quantize_multiplier_smaller_than_one(b.scale / twice_max),
            quantize_multiplier_smaller_than_one(out_real)};
  } catch (const QuantRefused& e) {
    refuse(L, "TFLite's add refuses its scales: " + e.reason);
  }
}

float onnx_global_pool_scale(const Layer& L) {
  const LayerQuant& q = quant_of(L);
  int64_t taps = 1;
  for (int64_t extent : L.in_spatial) taps *= extent;
  const float scale = q.inputs.at(0).scale / (q.output.scale * static_cast<float>(taps));
  if (taps >= (int64_t{1} << 24) || scale < std::ldexp(1.f, -32) || scale >= 256.f)
    refuse(L, "ONNX Runtime's global average pool refuses this input size or scale ratio");
  return scale;
}

float mlas_logistic(float x) {
  // Eigen's coefficients as MLAS rounds them to float.
  constexpr float kAlpha[] = {4.37031012579801e-11f, 1.15627324459942e-07f, 6.08574864600143e-05f,
                              8.51377133304701e-03f, 2.48287947061529e-01f};
  constexpr float kBeta[] = {6.10247389755681e-13f, 5.76102136993427e-09f, 6.29106785017040e-06f,
                             1.70198817374094e-03f, 1.16817656904453e-01f, 9.93151921023180e-01f};
  const float v = std::min(std::max(x, -18.f), 18.f);
  const float v2 = v * v;
  float p = kAlpha[0];
  for (size_t k = 1; k < std::size(kAlpha); ++k) p = std::fma(p, v2, kAlpha[k]);
  float q = kBeta[0];
  for (size_t k = 1; k < std::size(kBeta); ++k) q = std::fma(q, v2, kBeta[k]);
  return std::min(std::max(p * v / q + 0.5f, 0.f), 1.f);
}

std::vector<int32_t> onnx_activation_table(const Layer& L) {
  const LayerQuant& q = quant_of(L);
  const bool silu = L.activation == Activation::Silu;
  if (q.requantize != Requantize::Onnx || q.inputs.empty() ||
      !(L.activation == Activation::Sigmoid || (silu && q.gate)))
    refuse(L,
           "a quantized activation layer is ONNX Runtime's sigmoid, or silu with its gate's "
           "quantization (requantize onnx)");
  const auto [qmin, qmax] = dtype_range(L.dtype);
  const QuantParams& in = q.inputs[0];
  const QuantParams& sigmoid_out = silu ? *q.gate : q.output;
  std::vector<int32_t> table;
  for (int32_t v = qmin; v <= qmax; ++v) {
    const float real = in.scale * static_cast<float>(v - in.zero_point);
    const int32_t s = quantize_value(mlas_logistic(real), sigmoid_out, L.dtype, Requantize::Onnx);
    table.push_back(silu ? onnx_mul_value(v, s, in, *q.gate, q.output, L.dtype) : s);
  }
  return table;
}

namespace {

// QLinearMul's one float scale, sa * sb / sc left to right.
float mul_ratio(const QuantParams& a, const QuantParams& b, const QuantParams& out) {
  return a.scale * b.scale / out.scale;
}

}  // namespace

float onnx_mul_ratio(const Layer& L) {
  const LayerQuant& q = quant_of(L);
  if (q.requantize != Requantize::Onnx || q.inputs.size() != 2)
    refuse(L, "a quantized mul is ONNX Runtime's QLinearMul (requantize onnx, two inputs)");
  const float ratio = mul_ratio(q.inputs[0], q.inputs[1], q.output);
  if (!std::isfinite(ratio) || ratio == 0.f)
    refuse(L,
           "its scale ratio (input scales' product / output scale) is not a finite, nonzero "
           "float32");
  return ratio;
}

int32_t onnx_mul_value(int32_t a, int32_t b, const QuantParams& qa, const QuantParams& qb,
                       const QuantParams& out, DType dtype) {
  const auto [qmin, qmax] = dtype_range(dtype);
  const float ratio = mul_ratio(qa, qb, out);
  const float v = static_cast<float>((a - qa.zero_point) * (b - qb.zero_point)) * ratio +
                  static_cast<float>(out.zero_point);
  const float rounded = std::nearbyint(v);                                 // half to even
  if (!(rounded < 2147483648.f && rounded >= -2147483648.f)) return qmin;  // cvtps2dq: INT32_MIN
  return std::clamp(static_cast<int32_t>(rounded), qmin, qmax);
}

void check_quantized_arithmetic(const Layer& L) {
  if (!L.quantized()) return;
  const LayerQuant& q = quant_of(L);
  if (L.op == Op::Quantize || L.op == Op::Dequantize) return;
  if (q.inputs.empty()) refuse(L, "no input quantization");
  if (L.op == Op::Activation) {  // the table holds the activation; no clamp after it
    onnx_activation_table(L);
    return;
  }
  activation_range(L);
  if (L.op == Op::Mul) onnx_mul_ratio(L);
  if (L.op == Op::Conv) conv_requantization(L);
  if (L.op == Op::Add && q.requantize == Requantize::Tflite) tflite_add_multipliers(L);
  if (average_pool_onnx_global(L)) onnx_global_pool_scale(L);
}

}  // namespace padfold
