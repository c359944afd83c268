// Integer reference of the quantized (int8/uint8) layers: the oracle of the quantized kernels'
// tests.
//
// Written from the peers' semantics with plain loops, independent of Halide and of
// generator/algorithm/. QMode::Tflite follows TFLite's reference integer kernels (gemmlowp fixed
// point, "double rounding", the default build without TFLITE_SINGLE_ROUNDING); QMode::Onnx follows
// ONNX Runtime's CPU kernels (MLAS float requantization). docs/int8.md is the contract.
//
// A quantized tensor holds its integers as int32 whatever the dtype, in the logical layout of
// reference.h (N, C, spatial...). The dtype enters as its range (qmin, qmax): int8 [-128, 127],
// uint8 [0, 255]. Weights are int8 with zero point 0; bias is int32 with scale in.scale * w_scale.
// Border values: Zeros reads the input zero point; Constant reads p.border_value, which here is
// already the integer to read (quantize the real value first, see qround_quantize); the other
// kinds copy input values (ref::border_index).
//
// Where a peer's int32 arithmetic overflows, the result wraps as the peer's compiled code does.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "reference/reference.h"

namespace padfold::ref {

struct QTensor {
  std::vector<int64_t> shape;
  std::vector<int32_t> data;

  QTensor() = default;
  explicit QTensor(std::vector<int64_t> shape_, int32_t fill = 0);
  QTensor(std::vector<int64_t> shape_, std::vector<int32_t> data_);

  int64_t numel() const;
  int rank() const { return static_cast<int>(shape.size()); }
  int spatial_dims() const { return rank() - 2; }
};

enum class QMode { Tflite, Onnx };

// real = scale * (q - zero_point)
struct QParams {
  float scale = 1.f;
  int32_t zero_point = 0;
};

// ---- TFLite's fixed-point primitives (gemmlowp fixedpoint.h, tflite common.h/.cc and
// quantization_util.cc), exposed for their tests.

// round(a * b / 2^31), ties toward +infinity (ARM VQRDMULH); INT32_MIN * INT32_MIN -> INT32_MAX.
int32_t saturating_rounding_doubling_high_mul(int32_t a, int32_t b);
// x / 2^exponent rounded to nearest, ties away from zero; 0 <= exponent <= 31.
int32_t rounding_divide_by_pot(int32_t x, int exponent);

// real ~= multiplier / 2^31 * 2^shift, multiplier in [2^30, 2^31) (or 0).
struct QuantizedMultiplier {
  int32_t multiplier = 0;
  int shift = 0;
};
// TFLite's QuantizeMultiplier: frexp, round(q * 2^31) half away from zero, 2^31 -> 2^30 with
// shift + 1, shift < -31 -> (0, 0).
QuantizedMultiplier quantize_multiplier(double real);
// QuantizeMultiplierSmallerThanOneExp: the same for 0 < real < 1 (throws otherwise).
QuantizedMultiplier quantize_multiplier_smaller_than_one(double real);
// MultiplyByQuantizedMultiplier (double rounding): RoundingDivideByPOT(
// SaturatingRoundingDoublingHighMul(x * 2^max(shift, 0), multiplier), max(-shift, 0)).
// MultiplyByQuantizedMultiplierSmallerThanOneExp is the same function for shift <= 0.
int32_t multiply_by_quantized_multiplier(int32_t x, QuantizedMultiplier m);

// ---- ONNX Runtime's float primitives.

// Round to nearest, ties to even, independent of the floating-point environment.
float round_half_even(float v);
// MLAS MlasRequantizeOutput on one accumulator: float(acc) * scale clamped to
// [qmin - zero_point, qmax - zero_point], rounded half to even, plus zero_point.
int32_t mlas_requantize_output(int32_t acc, float scale, int32_t zero_point, int32_t qmin,
                               int32_t qmax);

// ---- Quantization of values and activation ranges.

// The integer nearest v / q.scale (float division) plus the zero point, saturated to
// [qmin, qmax]; ties away from zero (Tflite: TfLiteRound) or to even (Onnx: MlasQuantizeLinear).
int32_t qround_quantize(float v, QParams q, int32_t qmin, int32_t qmax, QMode mode);
// Clamp range of a fused activation, 0 none / 1 relu / 2 relu6: none [qmin, qmax]; relu
// [max(qmin, zy), qmax]; relu6 [max(qmin, zy), min(qmax, zy + round(6.f / sy))], rounded as the
// mode rounds (TFLite's CalculateActivationRangeQuantized). Throws on other values.
std::pair<int32_t, int32_t> qactivation_range(int activation, QParams out, int32_t qmin,
                                              int32_t qmax, QMode mode);

QTensor quantize(const Tensor& real, QParams q, int32_t qmin, int32_t qmax, QMode mode);
Tensor dequantize(const QTensor& q, QParams p);  // scale * (q - zero_point), in double
// Pads the spatial dims with `value` (pad_before/pad_after: one per spatial dim, empty: 0).
QTensor qpad(const QTensor& x, const std::vector<int64_t>& pad_before,
             const std::vector<int64_t>& pad_after, int32_t value);

// ---- Layers. Geometry as in reference.h (ConvParams / PoolParams, out_spatial); outputs are
// clamped to [act_min, act_max] (see qactivation_range), which lies within [qmin, qmax].

// x: (N, C, s...) in [qmin, qmax]; w: (O, C/groups, k...) int8; bias: O values or empty;
// w_scales: 1 or O values. acc = bias[o] + sum over taps of (x - in.zero_point) * w, then
// Tflite: per channel M = double(in.scale) * w_scale / out.scale, quantize_multiplier,
//   multiply_by_quantized_multiplier(acc) + out.zero_point (TFLite ConvPerChannel /
//   DepthwiseConvPerChannel);
// Onnx: per channel scale = in.scale * w_scale / out.scale in float,
//   mlas_requantize_output(acc) (ORT QLinearConv).
QTensor qconv(const QTensor& x, const QTensor& w, const std::vector<int32_t>& bias,
              const ConvParams& p, QParams in, const std::vector<float>& w_scales, QParams out,
              int32_t act_min, int32_t act_max, int32_t qmin, int32_t qmax, QMode mode,
              std::vector<int64_t> out_spatial = {});

// Max of the taps that take part (as ref::max_pool: a Zeros border never wins), then the clamp.
// Both peers; the output has the input's quantization. A window with no tap gives act_min.
QTensor qmax_pool(const QTensor& x, const PoolParams& p, int32_t act_min, int32_t act_max,
                  std::vector<int64_t> out_spatial = {});

// Average of the taps that count (as ref::avg_pool), then the clamp.
// Tflite (reference_integer_ops AveragePool; needs out == in): sum of the integers over n taps,
//   sum > 0 ? (sum + n/2) / n : (sum - n/2) / n in C integer division.
// Onnx (QLinearAveragePool): in float, the taps dequantized (in.scale * float(q - zx)) and summed
//   in row-major window order, divided by float(n), nearbyint(avg / out.scale + zy), saturated.
//   When the kernel covers the whole input with no pads ORT takes its global-pool path instead:
//   acc = sum(q) - zx * n, mlas_requantize_output(acc, in.scale / (out.scale * float(n))).
QTensor qavg_pool(const QTensor& x, const PoolParams& p, QParams in, QParams out, int32_t act_min,
                  int32_t act_max, int32_t qmin, int32_t qmax, QMode mode,
                  std::vector<int64_t> out_spatial = {});

// Elementwise a + b (same shapes).
// Tflite (kernels/add.cc + reference_integer_ops Add): left shift 20, twice_max = 2 * max(sa, sb),
//   multipliers sa / twice_max, sb / twice_max, twice_max / (2^20 * sy) by
//   quantize_multiplier_smaller_than_one; y = M_y(M_a((a - za) << 20) + M_b((b - zb) << 20)) + zy.
// Onnx (MLAS QLinearAdd, x86-64 AVX2 kernel): ra = sa / sc, rb = sb / sc in float,
//   fixed = float(zc) - fma(ra, za, rb * zb), y = round_half_even(fma(a, ra, fma(b, rb, fixed))),
//   saturated.
QTensor qadd(const QTensor& a, const QTensor& b, QParams a_q, QParams b_q, QParams out,
             int32_t act_min, int32_t act_max, int32_t qmin, int32_t qmax, QMode mode);

// Elementwise a * b, b of a's shape or one value per channel ([N, C, 1...]), ONNX Runtime's
// QLinearMul (MLAS's SSE2 kernel): p = (a - za) * (b - zb) in int32, ratio = sa * sb / sc in float,
// y = cvtps2dq(float(p) * ratio + float(zc)) (half to even; past int32 INT32_MIN), saturated.
QTensor qmul(const QTensor& a, const QTensor& b, QParams a_q, QParams b_q, QParams out,
             int32_t act_min, int32_t act_max, int32_t qmin, int32_t qmax);

// ONNX Runtime's QLinearSigmoid element by element: x dequantized in float (sx * float(x - zx)),
// MLAS's logistic (padfold::mlas_logistic, checked against ONNX Runtime by the import tests),
// quantized with `out` half to even and saturated.
QTensor qsigmoid(const QTensor& x, QParams in, QParams out, int32_t qmin, int32_t qmax);

}  // namespace padfold::ref
