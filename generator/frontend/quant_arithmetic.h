// The compile-time side of quantized (int8/uint8) layers' integer arithmetic (docs/int8.md):
// TFLite's fixed-point multipliers, ONNX Runtime's float scales, activation ranges, and the
// parameters either peer refuses. Plain C++: the spec check (frontend/resolve) refuses what a
// kernel could not compute with these rules before anything is compiled, and the kernels
// (algorithm/requantize.h) build their constants from the same functions.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "frontend/layer.h"

namespace padfold {

// Quantization parameters a peer refuses (TFLite fails the model, ONNX Runtime the session), or a
// layer that is not quantized as its op needs; the message names the layer.
struct QuantRefused : std::invalid_argument {
  QuantRefused(const std::string& layer, const std::string& why)
      : std::invalid_argument(layer.empty() ? why : "layer '" + layer + "': " + why), reason(why) {}
  std::string reason;  // without the layer
};

// real ~= multiplier * 2^(shift - 31), multiplier in [2^30, 2^31) (0 for real == 0).
struct FixedPointMultiplier {
  int32_t multiplier = 0;
  int shift = 0;
};
// TFLite's QuantizeMultiplier: frexp, round(q * 2^31) half away from zero, 2^31 -> 2^30 with
// shift + 1, shift < -31 flushed to (0, 0).
FixedPointMultiplier quantize_multiplier(double real);
// QuantizeMultiplierSmallerThanOneExp: the same for 0 < real < 1; throws QuantRefused otherwise
// (TFLite fails the model).
FixedPointMultiplier quantize_multiplier_smaller_than_one(double real);

// [-128, 127] or [0, 255]; throws QuantRefused for a float dtype.
std::pair<int32_t, int32_t> dtype_range(DType dtype);
// The integer of the dtype standing for v: round(v / q.scale) (float division) + q.zero_point,
// saturated. Tflite rounds half away from zero (TfLiteRound), Onnx half to even (MLAS
// QuantizeLinear).
int32_t quantize_value(float v, const QuantParams& q, DType dtype, Requantize mode);
// The clamp of L's quantized output: none [qmin, qmax]; relu [max(qmin, zy), qmax]; relu6 also
// min(qmax, quantize_value(6)). TFLite: CalculateActivationRangeQuantized. ONNX Runtime has no
// fused activation: a QDQ Relu/Clip(0, 6) on the output's own scale and zero point computes
// exactly this clamp (with its QuantizeLinear's half-to-even rounding of 6 / sy). Throws
// QuantRefused for another activation.
std::pair<int32_t, int32_t> activation_range(const Layer& L);

// One entry per output channel (a per-tensor weight scale is broadcast). Tflite fills `fixed`
// from double(sx) * double(sw[o]) / double(sy) (PopulateConvolutionQuantizationParams); Onnx fills
// `scale` with sx * sw[o] / sy in float, left to right (QLinearConv's output scales).
struct ConvRequantization {
  std::vector<FixedPointMultiplier> fixed;
  std::vector<float> scale;
};
ConvRequantization conv_requantization(const Layer& L);

// ORT routes a pool whose kernel is the whole input with no pads to MlasQLinearGlobalAveragePool:
// an integer sum, requantized by requantize_float with sx / (sy * float(taps)) (every input
// position is a tap: average_pool_quantized ignores `count` there).
bool average_pool_onnx_global(const Layer& L);

// TFLite's add (kernels/add.cc, 8-bit inputs): left shift 20, multipliers s_a / (2 max s),
// s_b / (2 max s) and 2 max s / (2^20 s_y), each smaller than one (else TFLite refuses).
inline constexpr int kTfliteAddLeftShift = 20;
struct TfliteAddMultipliers {
  FixedPointMultiplier a, b, out;
};
TfliteAddMultipliers tflite_add_multipliers(const Layer& L);

// The one float scale ONNX Runtime's global average pool requantizes with, s_x / (s_y * taps);
// it refuses 2^24 taps or more and a scale outside [2^-32, 256).
float onnx_global_pool_scale(const Layer& L);

// MLAS's logistic as ONNX Runtime runs it on x86-64 CPUs with FMA (MlasComputeLogistic's FMA3
// kernel): x clamped to [-18, 18], Eigen's odd/even rational approximation p(x) / q(x) + 0.5 with
// its multiply-adds fused, clamped to [0, 1].
float mlas_logistic(float x);

// ONNX Runtime's QLinearMul (MLAS's SSE2 kernel, what it runs on x86-64): the product
// (a - za) * (b - zb) in int32, then float(product) * ratio + float(zc) in float32, rounded half
// to even, a value past int32 giving qmin (cvtps2dq), saturated; ratio = sa * sb / sc in float,
// left to right. onnx_mul_ratio: L's ratio (a mul layer); onnx_mul_value: one product.
float onnx_mul_ratio(const Layer& L);
int32_t onnx_mul_value(int32_t a, int32_t b, const QuantParams& qa, const QuantParams& qb,
                       const QuantParams& out, DType dtype);

// An activation layer's table over the dtype's 256 integers, entry q - qmin its output for q.
// sigmoid: ONNX Runtime's QLinearSigmoid (which its QDQ optimizer makes of DequantizeLinear ->
// Sigmoid -> QuantizeLinear), quantize_value(mlas_logistic(sx * float(q - zx))) with the output's
// parameters, half to even; silu: that sigmoid quantized with quant.gate, then onnx_mul_value of
// q and it into the output's (ONNX Runtime's QDQ SiLU, Sigmoid then Mul by the input).
std::vector<int32_t> onnx_activation_table(const Layer& L);

// Every rule above that applies to L's op (conv, add, mul, avg_pool, activations); throws
// QuantRefused. Mul and the activation layer compute ONNX Runtime's arithmetic only.
void check_quantized_arithmetic(const Layer& L);

}  // namespace padfold
