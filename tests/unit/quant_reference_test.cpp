// Checks of the integer reference (generator/reference/quant_reference): TFLite's fixed-point
// primitives and both peers' rounding against values worked out by hand from their definitions,
// the zero-point border, and every layer against the float reference on dequantized inputs.
#include "reference/quant_reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <ostream>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace padfold::ref {
namespace {

using I = std::vector<int32_t>;

constexpr int32_t kMin32 = std::numeric_limits<int32_t>::min();
constexpr int32_t kMax32 = std::numeric_limits<int32_t>::max();
constexpr int32_t kTwo30 = int32_t{1} << 30;

struct Dtype {
  const char* name;
  int32_t qmin, qmax;
};
constexpr Dtype kInt8{"int8", -128, 127};
constexpr Dtype kUint8{"uint8", 0, 255};

const char* mode_name(QMode mode) {
  return mode == QMode::Tflite ? "tflite" : "onnx";
}

QTensor q1d(const I& v) {
  return QTensor({1, 1, static_cast<int64_t>(v.size())}, v);
}

// ---- TFLite's primitives, from gemmlowp's and TFLite's definitions.

TEST(QuantPrimitives, SaturatingRoundingDoublingHighMulRoundsTiesUp) {
  EXPECT_EQ(saturating_rounding_doubling_high_mul(kMin32, kMin32), kMax32);  // the one overflow
  EXPECT_EQ(saturating_rounding_doubling_high_mul(kMin32, kMax32), -kMax32);
  EXPECT_EQ(saturating_rounding_doubling_high_mul(kTwo30, kTwo30), 1 << 29);  // 0.5 * 0.5
  EXPECT_EQ(saturating_rounding_doubling_high_mul(100, kTwo30), 50);
  EXPECT_EQ(saturating_rounding_doubling_high_mul(7, 0), 0);
  // a * b / 2^31 exactly halfway: ties go toward +infinity (VQRDMULH), not away from zero.
  EXPECT_EQ(saturating_rounding_doubling_high_mul(1, kTwo30), 1);        // +0.5
  EXPECT_EQ(saturating_rounding_doubling_high_mul(3, kTwo30), 2);        // +1.5
  EXPECT_EQ(saturating_rounding_doubling_high_mul(-1, kTwo30), 0);       // -0.5
  EXPECT_EQ(saturating_rounding_doubling_high_mul(-3, kTwo30), -1);      // -1.5
  EXPECT_EQ(saturating_rounding_doubling_high_mul(-1, kTwo30 + 1), -1);  // just below -0.5
  EXPECT_EQ(saturating_rounding_doubling_high_mul(1, kTwo30 - 1), 0);    // just below +0.5
}

TEST(QuantPrimitives, RoundingDivideByPotRoundsTiesAwayFromZero) {
  EXPECT_EQ(rounding_divide_by_pot(5, 1), 3);    // 2.5
  EXPECT_EQ(rounding_divide_by_pot(-5, 1), -3);  // -2.5
  EXPECT_EQ(rounding_divide_by_pot(3, 1), 2);    // 1.5
  EXPECT_EQ(rounding_divide_by_pot(-3, 1), -2);  // -1.5
  EXPECT_EQ(rounding_divide_by_pot(7, 2), 2);    // 1.75
  EXPECT_EQ(rounding_divide_by_pot(-6, 2), -2);  // -1.5
  EXPECT_EQ(rounding_divide_by_pot(-5, 2), -1);  // -1.25
  // Shift 0 is the identity, shift 31 the widest.
  EXPECT_EQ(rounding_divide_by_pot(kMin32, 0), kMin32);
  EXPECT_EQ(rounding_divide_by_pot(-7, 0), -7);
  EXPECT_EQ(rounding_divide_by_pot(kMax32, 31), 1);      // 0.9999...
  EXPECT_EQ(rounding_divide_by_pot(kMin32, 31), -1);     // exactly -1
  EXPECT_EQ(rounding_divide_by_pot(kTwo30, 31), 1);      // +0.5
  EXPECT_EQ(rounding_divide_by_pot(-kTwo30, 31), -1);    // -0.5
  EXPECT_EQ(rounding_divide_by_pot(kTwo30 - 1, 31), 0);  // just below +0.5
  EXPECT_EQ(rounding_divide_by_pot(1 - kTwo30, 31), 0);  // just above -0.5
  EXPECT_THROW(rounding_divide_by_pot(1, 32), std::invalid_argument);
  EXPECT_THROW(rounding_divide_by_pot(1, -1), std::invalid_argument);
}

void expect_multiplier(double real, int32_t multiplier, int shift) {
  const QuantizedMultiplier m = quantize_multiplier(real);
  EXPECT_EQ(m.multiplier, multiplier) << "real " << real;
  EXPECT_EQ(m.shift, shift) << "real " << real;
}

TEST(QuantPrimitives, QuantizeMultiplier) {
  expect_multiplier(0.5, kTwo30, 0);
  expect_multiplier(1.0, kTwo30, 1);
  expect_multiplier(0.25, kTwo30, -1);
  expect_multiplier(0.75, 1610612736, 0);  // 0.75 * 2^31
  expect_multiplier(1.5, 1610612736, 1);
  expect_multiplier(0.0, 0, 0);
  // round(q * 2^31) half away from zero: 2^30 + 0.5 -> 2^30 + 1.
  expect_multiplier(0.5 + std::ldexp(1.0, -32), kTwo30 + 1, 0);
  // q * 2^31 rounding up to 2^31 becomes 2^30 with the exponent + 1; just below it does not.
  expect_multiplier(std::ldexp(1.0 - std::ldexp(1.0, -33), -3), kTwo30, -2);
  expect_multiplier(std::ldexp(1.0 - std::ldexp(1.0, -32), -3), kTwo30, -2);  // tie, rounds up
  expect_multiplier(std::ldexp(1.0 - std::ldexp(1.0, -31), -3), kMax32, -3);
  // Shifts below -31 flush to zero.
  expect_multiplier(std::ldexp(1.0, -32), kTwo30, -31);
  expect_multiplier(std::ldexp(1.0, -33), 0, 0);
  expect_multiplier(std::ldexp(1.0, -40), 0, 0);

  EXPECT_EQ(quantize_multiplier_smaller_than_one(0.375).multiplier, 1610612736);
  EXPECT_EQ(quantize_multiplier_smaller_than_one(0.375).shift, -1);
  EXPECT_THROW(quantize_multiplier_smaller_than_one(1.0), std::invalid_argument);
  EXPECT_THROW(quantize_multiplier_smaller_than_one(0.0), std::invalid_argument);
}

TEST(QuantPrimitives, MultiplyByQuantizedMultiplierRoundsTwice) {
  const QuantizedMultiplier half{kTwo30, 0}, quarter{kTwo30, -1}, three_halves{1610612736, 1};
  EXPECT_EQ(multiply_by_quantized_multiplier(100, half), 50);
  EXPECT_EQ(multiply_by_quantized_multiplier(3, half), 2);    // 1.5 -> 2
  EXPECT_EQ(multiply_by_quantized_multiplier(-3, half), -1);  // -1.5 -> -1 (ties up)
  // 1.25: the high mul gives 2.5 -> 3, the shift 1.5 -> 2; one rounding would give 1.
  EXPECT_EQ(multiply_by_quantized_multiplier(5, quarter), 2);
  EXPECT_EQ(multiply_by_quantized_multiplier(-5, quarter), -1);  // -2.5 -> -2, -1 -> -1
  EXPECT_EQ(multiply_by_quantized_multiplier(-3, quarter), -1);  // -1.5 -> -1, -0.5 -> -1
  // Left shift: 3 * 2 = 6, 6 * 0.75 = 4.5 -> 5.
  EXPECT_EQ(multiply_by_quantized_multiplier(3, three_halves), 5);
  // Shift -31: (2^31 - 1) * 2^-32 = 0.49999... yet 2^30 - 0.5 -> 2^30, then 0.5 -> 1.
  EXPECT_EQ(multiply_by_quantized_multiplier(kMax32, QuantizedMultiplier{kTwo30, -31}), 1);
  EXPECT_EQ(multiply_by_quantized_multiplier(kMax32, QuantizedMultiplier{0, 0}), 0);
  EXPECT_THROW(multiply_by_quantized_multiplier(1, QuantizedMultiplier{kTwo30, 31}),
               std::invalid_argument);
}

// ---- Rounding of values and activation ranges.

TEST(QuantRounding, RoundHalfEvenAndMlasRequantize) {
  EXPECT_EQ(round_half_even(0.5f), 0.f);
  EXPECT_EQ(round_half_even(1.5f), 2.f);
  EXPECT_EQ(round_half_even(2.5f), 2.f);
  EXPECT_EQ(round_half_even(-0.5f), 0.f);
  EXPECT_EQ(round_half_even(-1.5f), -2.f);
  EXPECT_EQ(round_half_even(-2.5f), -2.f);
  EXPECT_EQ(round_half_even(std::nextafter(2.5f, 0.f)), 2.f);
  EXPECT_EQ(round_half_even(std::nextafter(0.5f, 1.f)), 1.f);
  EXPECT_EQ(round_half_even(-1e-10f), 0.f);
  // float(acc) * scale, clamped to the range less the zero point, ties to even, + zero point.
  EXPECT_EQ(mlas_requantize_output(5, 0.5f, 0, -128, 127), 2);
  EXPECT_EQ(mlas_requantize_output(7, 0.5f, 0, -128, 127), 4);
  EXPECT_EQ(mlas_requantize_output(-5, 0.5f, 3, -128, 127), 1);
  EXPECT_EQ(mlas_requantize_output(1000, 1.f, 100, -128, 127), 127);
  EXPECT_EQ(mlas_requantize_output(-1000, 1.f, 100, -128, 127), -128);
  EXPECT_EQ(mlas_requantize_output(-1000, 1.f, 100, 0, 255), 0);
  // int32 -> float rounds first: 2^24 + 1 becomes 2^24, so * 2^-24 is exactly 1.
  EXPECT_EQ(mlas_requantize_output((1 << 24) + 1, std::ldexp(1.f, -24), 0, -128, 127), 1);
}

TEST(QuantRounding, QuantizeRoundsTiesAsTheModeDoes) {
  const QParams q{0.5f, 0}, shifted{0.5f, 10};
  EXPECT_EQ(qround_quantize(1.25f, q, -128, 127, QMode::Tflite), 3);  // 2.5
  EXPECT_EQ(qround_quantize(1.25f, q, -128, 127, QMode::Onnx), 2);
  EXPECT_EQ(qround_quantize(-1.25f, q, -128, 127, QMode::Tflite), -3);
  EXPECT_EQ(qround_quantize(-1.25f, q, -128, 127, QMode::Onnx), -2);
  EXPECT_EQ(qround_quantize(1.75f, q, -128, 127, QMode::Tflite), 4);  // 3.5
  EXPECT_EQ(qround_quantize(1.75f, q, -128, 127, QMode::Onnx), 4);
  EXPECT_EQ(qround_quantize(1.25f, shifted, -128, 127, QMode::Tflite), 13);
  EXPECT_EQ(qround_quantize(1.25f, shifted, -128, 127, QMode::Onnx), 12);
  for (QMode mode : {QMode::Tflite, QMode::Onnx}) {
    EXPECT_EQ(qround_quantize(1000.f, shifted, -128, 127, mode), 127);
    EXPECT_EQ(qround_quantize(-1000.f, shifted, -128, 127, mode), -128);
    EXPECT_EQ(qround_quantize(-1.f, q, 0, 255, mode), 0);
    EXPECT_EQ(qround_quantize(1e30f, q, 0, 255, mode), 255);
  }
}

TEST(QuantRounding, QuantizeUndoesDequantize) {
  for (const Dtype& dt : {kInt8, kUint8})
    for (QMode mode : {QMode::Tflite, QMode::Onnx}) {
      const QParams p{0.0173f, dt.qmin + 77};
      QTensor all({1, 1, dt.qmax - dt.qmin + 1});
      for (int32_t v = dt.qmin; v <= dt.qmax; ++v) all.data[static_cast<size_t>(v - dt.qmin)] = v;
      EXPECT_EQ(quantize(dequantize(all, p), p, dt.qmin, dt.qmax, mode).data, all.data)
          << dt.name << " " << mode_name(mode);
    }
}

TEST(QuantActivation, RangesFromTheOutputQuantization) {
  using R = std::pair<int32_t, int32_t>;
  for (QMode mode : {QMode::Tflite, QMode::Onnx}) {
    EXPECT_EQ(qactivation_range(0, {0.1f, 7}, -128, 127, mode), R(-128, 127));
    EXPECT_EQ(qactivation_range(1, {0.1f, -5}, -128, 127, mode), R(-5, 127));
    EXPECT_EQ(qactivation_range(1, {0.1f, 10}, 0, 255, mode), R(10, 255));
    // 6 / 0.0471 = 127.39 -> 127 steps above -128.
    EXPECT_EQ(qactivation_range(2, {0.0471f, -128}, -128, 127, mode), R(-128, -1));
    EXPECT_EQ(qactivation_range(2, {0.01f, 0}, -128, 127, mode), R(0, 127));  // 600 saturates
    EXPECT_EQ(qactivation_range(2, {4.f, 3}, -128, 127, mode), R(3, 5));      // 1.5 -> 2
    EXPECT_THROW(qactivation_range(3, {1.f, 0}, -128, 127, mode), std::invalid_argument);
  }
  // 6 / 12 = 0.5 exactly: away from zero in TFLite, to even in ONNX Runtime.
  EXPECT_EQ(qactivation_range(2, {12.f, 0}, -128, 127, QMode::Tflite), R(0, 1));
  EXPECT_EQ(qactivation_range(2, {12.f, 0}, -128, 127, QMode::Onnx), R(0, 0));
}

TEST(QuantPad, PadsSpatialDimsWithTheValue) {
  EXPECT_EQ(qpad(q1d({1, 2}), {1}, {2}, 7).data, (I{7, 1, 2, 7, 7}));
  const QTensor x({1, 2, 1, 2}, I{1, 2, 3, 4});
  const QTensor y = qpad(x, {1, 0}, {0, 1}, -9);
  EXPECT_EQ(y.shape, (std::vector<int64_t>{1, 2, 2, 3}));
  EXPECT_EQ(y.data, (I{-9, -9, -9, 1, 2, -9, -9, -9, -9, 3, 4, -9}));
}

// ---- Conv: rounding and borders by hand.

QTensor conv1d(const I& x, const I& w, QParams in, QParams out, QMode mode, int32_t act_min = -128,
               int32_t act_max = 127) {
  const QTensor weights({1, 1, static_cast<int64_t>(w.size())}, w);
  return qconv(q1d(x), weights, {}, ConvParams{}, in, {1.f}, out, act_min, act_max, -128, 127,
               mode);
}

TEST(QuantConv, TiesRoundUpInTfliteAndToEvenInOnnx) {
  const QParams unit{1.f, 0}, halve{2.f, 0}, quarter{4.f, 0};
  // acc = 3, 5; M = 0.5: 1.5 and 2.5.
  EXPECT_EQ(conv1d({1, 2, 3}, {1, 1}, unit, halve, QMode::Tflite).data, (I{2, 3}));
  EXPECT_EQ(conv1d({1, 2, 3}, {1, 1}, unit, halve, QMode::Onnx).data, (I{2, 2}));
  // -1.5 and -2.5: TFLite's high multiply rounds ties toward +infinity.
  EXPECT_EQ(conv1d({-1, -2, -3}, {1, 1}, unit, halve, QMode::Tflite).data, (I{-1, -2}));
  EXPECT_EQ(conv1d({-1, -2, -3}, {1, 1}, unit, halve, QMode::Onnx).data, (I{-2, -2}));
  // M = 0.25, acc = 5: 1.25 rounds to 2 through TFLite's double rounding.
  EXPECT_EQ(conv1d({2, 3}, {1, 1}, unit, quarter, QMode::Tflite).data, (I{2}));
  EXPECT_EQ(conv1d({2, 3}, {1, 1}, unit, quarter, QMode::Onnx).data, (I{1}));
  for (QMode mode : {QMode::Tflite, QMode::Onnx}) {
    // Input and output zero points: (x - 5) . w, + 10.
    EXPECT_EQ(conv1d({6, 7, 9}, {1, 2}, {1.f, 5}, {1.f, 10}, mode).data, (I{15, 20}));
    // The activation clamp and saturation.
    EXPECT_EQ(conv1d({-9, 20, -1}, {1, 1}, unit, unit, mode, 0, 15).data, (I{11, 15}));
    EXPECT_EQ(conv1d({127, 127}, {127, 127}, unit, unit, mode).data, (I{127}));
  }
}

TEST(QuantConv, BiasAndPerChannelScales) {
  const QTensor x({1, 1, 2}, I{3, 4});
  const QTensor w({2, 1, 2}, I{1, 1, 2, -1});  // acc 7 and 2
  for (QMode mode : {QMode::Tflite, QMode::Onnx}) {
    // Channel 0: (7 + 1) * 0.5 = 4; channel 1: (2 - 10) * 0.25 = -2.
    const QTensor y = qconv(x, w, {1, -10}, ConvParams{}, {1.f, 0}, {0.5f, 0.25f}, {1.f, 0}, -128,
                            127, -128, 127, mode);
    EXPECT_EQ(y.data, (I{4, -2})) << mode_name(mode);
  }
}

// Where the rounding of the requantization scale itself decides the result (checked in numpy
// and exact integer arithmetic): TFLite takes sx * sw / sy in double (from the float product it
// would give 73 and 43); ORT in float, left to right (from the double it would give 47 and 24).
TEST(QuantConv, RequantizationScaleIsComputedAsEachPeerDoes) {
  const auto bias_only = [](int32_t acc, float sx, float sw, float sy, QMode mode) {
    return qconv(q1d({0}), q1d({1}), {acc}, ConvParams{}, {sx, 0}, {sw}, {sy, 0}, -128, 127, -128,
                 127, mode)
        .data;
  };
  EXPECT_EQ(bias_only(7533, 0.132979646f, 0.0121008074f, 0.164940119f, QMode::Tflite), (I{74}));
  EXPECT_EQ(bias_only(2422, 0.0326244272f, 0.00900749397f, 0.0167529695f, QMode::Tflite), (I{42}));
  EXPECT_EQ(bias_only(5583, 0.185919106f, 0.00611667568f, 0.133663714f, QMode::Onnx), (I{48}));
  EXPECT_EQ(bias_only(4051, 0.107172333f, 0.0094446633f, 0.174487188f, QMode::Onnx), (I{23}));
}

// A 2-D conv with asymmetric pads, its input random in the dtype's range.
struct PaddedConv {
  QTensor x, w;
  ConvParams p;
};

PaddedConv padded_conv_case(const Dtype& dt, BorderKind border, float border_value) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> xv(dt.qmin, dt.qmax), wv(-127, 127);
  PaddedConv c{QTensor({1, 2, 5, 6}), QTensor({3, 2, 3, 3}), ConvParams{}};
  for (int32_t& v : c.x.data) v = xv(rng);
  for (int32_t& v : c.w.data) v = wv(rng);
  c.p.pad_before = {1, 2};
  c.p.pad_after = {2, 1};
  c.p.border = border;
  c.p.border_value = border_value;
  return c;
}

QTensor conv_unpadded(const PaddedConv& c, const QTensor& padded_x, QParams in, QMode mode,
                      const Dtype& dt) {
  return qconv(padded_x, c.w, {}, ConvParams{}, in, {0.01f}, {0.1f, 3}, dt.qmin, dt.qmax, dt.qmin,
               dt.qmax, mode);
}

// "Zero padding" of a quantized tensor is padding with its zero point: folding the pads into the
// conv gives what padding explicitly with the zero point gives, and not what integer 0 gives.
TEST(QuantConv, ZerosBorderReadsTheInputZeroPoint) {
  for (const Dtype& dt : {kInt8, kUint8})
    for (QMode mode : {QMode::Tflite, QMode::Onnx}) {
      SCOPED_TRACE(std::string(dt.name) + " " + mode_name(mode));
      const QParams in{0.05f, dt.qmin + 178};  // 50 (int8) or 178 (uint8)
      const PaddedConv c = padded_conv_case(dt, BorderKind::Zeros, 0.f);
      const QTensor folded = qconv(c.x, c.w, {}, c.p, in, {0.01f}, {0.1f, 3}, dt.qmin, dt.qmax,
                                   dt.qmin, dt.qmax, mode);
      const auto explicitly = [&](int32_t v) {
        return conv_unpadded(c, qpad(c.x, c.p.pad_before, c.p.pad_after, v), in, mode, dt);
      };
      EXPECT_EQ(folded.data, explicitly(in.zero_point).data);
      EXPECT_NE(folded.data, explicitly(0).data);
    }
}

TEST(QuantConv, ConstantBorderReadsTheGivenInteger) {
  for (QMode mode : {QMode::Tflite, QMode::Onnx}) {
    SCOPED_TRACE(mode_name(mode));
    const QParams in{0.05f, 20};
    const PaddedConv c = padded_conv_case(kInt8, BorderKind::Constant, -77.f);
    const QTensor folded =
        qconv(c.x, c.w, {}, c.p, in, {0.01f}, {0.1f, 3}, -128, 127, -128, 127, mode);
    EXPECT_EQ(
        folded.data,
        conv_unpadded(c, qpad(c.x, c.p.pad_before, c.p.pad_after, -77), in, mode, kInt8).data);
    ConvParams fractional = c.p;
    fractional.border_value = 0.5f;
    EXPECT_THROW(
        qconv(c.x, c.w, {}, fractional, in, {0.01f}, {0.1f, 3}, -128, 127, -128, 127, mode),
        std::invalid_argument);
  }
}

// ---- Every layer against the float reference on dequantized inputs.

// How closely integers track their ideal values (the float result quantized in double).
struct Agreement {
  int32_t max_diff = 0;
  double exact = 0, unclamped = 0;  // fractions of all elements
};

Agreement agreement(const QTensor& got, const std::vector<int32_t>& ideal, int32_t act_min,
                    int32_t act_max) {
  EXPECT_EQ(got.data.size(), ideal.size());
  Agreement a;
  for (size_t i = 0; i < ideal.size() && i < got.data.size(); ++i) {
    a.max_diff = std::max(a.max_diff, std::abs(got.data[i] - ideal[i]));
    a.exact += got.data[i] == ideal[i];
    a.unclamped += got.data[i] > act_min && got.data[i] < act_max;
  }
  a.exact /= static_cast<double>(ideal.size());
  a.unclamped /= static_cast<double>(ideal.size());
  return a;
}

std::vector<int32_t> ideal_quantized(const Tensor& real, QParams q, int32_t act_min,
                                     int32_t act_max) {
  std::vector<int32_t> out;
  for (float v : real.data) {
    const double rounded = std::round(static_cast<double>(v) / q.scale) + q.zero_point;
    out.push_back(static_cast<int32_t>(
        std::clamp(rounded, static_cast<double>(act_min), static_cast<double>(act_max))));
  }
  return out;
}

void expect_tracks(const QTensor& got, const Tensor& real, QParams out, int32_t act_min,
                   int32_t act_max, double min_exact) {
  const Agreement a =
      agreement(got, ideal_quantized(real, out, act_min, act_max), act_min, act_max);
  EXPECT_LE(a.max_diff, 1);
  EXPECT_GE(a.exact, min_exact);
  EXPECT_GE(a.unclamped, 0.1) << "the case saturates too much to test anything";
  ::testing::Test::RecordProperty("exact_fraction", std::to_string(a.exact));
}

QTensor random_qtensor(const std::vector<int64_t>& shape, int32_t lo, int32_t hi,
                       std::mt19937& rng) {
  QTensor t(shape);
  std::uniform_int_distribution<int32_t> dist(lo, hi);
  for (int32_t& v : t.data) v = dist(rng);
  return t;
}

// Zero points of input and output; each extreme of the range appears on both sides.
struct ZeroPoints {
  const char* name;
  Dtype dtype;
  int32_t in, out;
};
void PrintTo(const ZeroPoints& c, std::ostream* os) {
  *os << c.name;
}
const ZeroPoints kZeroPoints[] = {
    {"i8_m128_0", kInt8, -128, 0},     {"i8_0_127", kInt8, 0, 127},
    {"i8_127_m128", kInt8, 127, -128}, {"u8_0_128", kUint8, 0, 128},
    {"u8_128_255", kUint8, 128, 255},  {"u8_255_0", kUint8, 255, 0},
};

struct ConvCase {
  const char* name;
  std::vector<int64_t> in_spatial;
  int64_t C, O, groups;
  std::vector<int64_t> kernel, stride, dilation, pad_before, pad_after;
  BorderKind border;
  int activation;  // 0 none, 1 relu, 2 relu6
};
void PrintTo(const ConvCase& c, std::ostream* os) {
  *os << c.name;
}

const ConvCase kConvCases[] = {
    {"conv1d_stride2_asym", {23}, 3, 4, 1, {3}, {2}, {}, {2}, {1}, BorderKind::Zeros, 0},
    {"conv1d_dilated_reflect", {17}, 2, 3, 1, {3}, {}, {2}, {2}, {2}, BorderKind::Reflect, 1},
    {"conv2d_same_relu6", {9, 11}, 3, 5, 1, {3, 3}, {}, {}, {1, 1}, {1, 1}, BorderKind::Zeros, 2},
    {"conv2d_strided_dilated",
     {12, 10},
     4,
     6,
     1,
     {3, 2},
     {2, 3},
     {2, 1},
     {2, 0},
     {1, 3},
     BorderKind::Zeros,
     0},
    {"depthwise_replicate",
     {10, 10},
     6,
     6,
     6,
     {3, 3},
     {2, 2},
     {},
     {1, 1},
     {1, 1},
     BorderKind::Replicate,
     2},
    {"depthwise_multiplier2",
     {11, 9},
     3,
     6,
     3,
     {5, 5},
     {},
     {},
     {2, 2},
     {2, 2},
     BorderKind::Zeros,
     0},
    {"grouped_circular", {8, 8}, 6, 4, 2, {3, 3}, {}, {}, {0, 1}, {2, 0}, BorderKind::Circular, 0},
    {"conv2d_constant", {7, 7}, 2, 3, 1, {3, 3}, {}, {}, {2, 1}, {1, 2}, BorderKind::Constant, 1},
    {"pointwise", {6, 6}, 8, 5, 1, {1, 1}, {}, {}, {}, {}, BorderKind::Zeros, 0},
    {"conv3d",
     {5, 6, 7},
     2,
     3,
     1,
     {3, 3, 3},
     {1, 2, 1},
     {},
     {1, 1, 1},
     {1, 0, 1},
     BorderKind::Zeros,
     1},
    {"conv3d_grouped_dilated_symmetric",
     {6, 5, 8},
     4,
     4,
     2,
     {2, 3, 2},
     {1, 1, 2},
     {2, 1, 3},
     {1, 1, 2},
     {0, 1, 1},
     BorderKind::Symmetric,
     0},
};

Activation float_activation(int activation) {
  return activation == 0   ? Activation::None
         : activation == 1 ? Activation::Relu
                           : Activation::Relu6;
}

// A relu with the output zero point at the top of the range clamps everything.
int effective_activation(int activation, const ZeroPoints& zp) {
  return zp.out == zp.dtype.qmax ? 0 : activation;
}

std::vector<float> log_uniform(size_t n, double lo, double hi, std::mt19937& rng) {
  std::uniform_real_distribution<double> e(std::log(lo), std::log(hi));
  std::vector<float> v(n);
  for (float& s : v) s = static_cast<float>(std::exp(e(rng)));
  return v;
}

// Conv weights in float: w_scale[o] * w.
Tensor dequantized_weights(const QTensor& w, const std::vector<float>& w_scales) {
  Tensor f(w.shape);
  const size_t per_channel = f.data.size() / w_scales.size();
  for (size_t i = 0; i < f.data.size(); ++i)
    f.data[i] = static_cast<float>(double{w_scales[i / per_channel]} * w.data[i]);
  return f;
}

// int32 bias worth up to +-40 output steps in every channel, whatever its weight scale.
std::vector<int32_t> random_bias(float sx, const std::vector<float>& w_scales, float sy,
                                 std::mt19937& rng) {
  std::uniform_real_distribution<double> steps(-40, 40);
  std::vector<int32_t> bias;
  for (float sw : w_scales) {
    const double v = std::round(steps(rng) * sy / (double{sx} * sw));
    bias.push_back(static_cast<int32_t>(std::clamp(v, -1e9, 1e9)));
  }
  return bias;
}

ConvParams conv_params(const ConvCase& cc, float border_value) {
  ConvParams p;
  p.stride = cc.stride;
  p.dilation = cc.dilation;
  p.pad_before = cc.pad_before;
  p.pad_after = cc.pad_after;
  p.groups = cc.groups;
  p.border = cc.border;
  p.border_value = border_value;
  return p;
}

using ConvTrackParam = std::tuple<ConvCase, ZeroPoints, QMode>;
class QuantConvTracksFloat : public ::testing::TestWithParam<ConvTrackParam> {};

TEST_P(QuantConvTracksFloat, WithinOneStep) {
  const auto& [cc, zp, mode] = GetParam();
  const Dtype& dt = zp.dtype;
  std::mt19937 rng(static_cast<uint32_t>(std::hash<std::string>{}(cc.name)) + zp.in);
  std::vector<int64_t> xshape = {2, cc.C}, wshape = {cc.O, cc.C / cc.groups};
  xshape.insert(xshape.end(), cc.in_spatial.begin(), cc.in_spatial.end());
  wshape.insert(wshape.end(), cc.kernel.begin(), cc.kernel.end());
  const QTensor x = random_qtensor(xshape, dt.qmin, dt.qmax, rng);
  const QTensor w = random_qtensor(wshape, -127, 127, rng);
  const std::vector<float> w_scales = log_uniform(static_cast<size_t>(cc.O), 1e-4, 1, rng);
  const int32_t border_int = std::clamp(zp.in + 37, dt.qmin, dt.qmax);
  const ConvParams qp = conv_params(cc, static_cast<float>(border_int));
  const auto float_params = [&](float sx) {
    return conv_params(cc, sx * static_cast<float>(border_int - zp.in));
  };
  const Tensor wf = dequantized_weights(w, w_scales);

  // The float result without bias is linear in the input scale: scale it to peak at 9 (so relu6
  // matters), then give the output 0.1 per step.
  const double peak_per_unit_scale =
      max_abs(conv(dequantize(x, {1.f, zp.in}), wf, nullptr, float_params(1.f)));
  const QParams in{static_cast<float>(9 / peak_per_unit_scale), zp.in}, out{0.1f, zp.out};
  const std::vector<int32_t> bias = random_bias(in.scale, w_scales, out.scale, rng);
  Tensor bf({cc.O});
  for (size_t o = 0; o < bias.size(); ++o)
    bf.data[o] = static_cast<float>(double{in.scale} * w_scales[o] * bias[o]);
  const int act = effective_activation(cc.activation, zp);
  const Tensor real =
      activation(conv(dequantize(x, in), wf, &bf, float_params(in.scale)), float_activation(act));

  const auto [act_min, act_max] = qactivation_range(act, out, dt.qmin, dt.qmax, mode);
  const QTensor got =
      qconv(x, w, bias, qp, in, w_scales, out, act_min, act_max, dt.qmin, dt.qmax, mode);
  expect_tracks(got, real, out, act_min, act_max, 0.97);
}

std::string conv_track_name(const ::testing::TestParamInfo<ConvTrackParam>& info) {
  const auto& [cc, zp, mode] = info.param;
  return std::string(cc.name) + "_" + zp.name + "_" + mode_name(mode);
}

INSTANTIATE_TEST_SUITE_P(Cases, QuantConvTracksFloat,
                         ::testing::Combine(::testing::ValuesIn(kConvCases),
                                            ::testing::ValuesIn(kZeroPoints),
                                            ::testing::Values(QMode::Tflite, QMode::Onnx)),
                         conv_track_name);

// ---- Pools.

struct PoolCase {
  const char* name;
  std::vector<int64_t> in_spatial, kernel, stride, dilation, pad_before, pad_after;
  bool count_include_pad;
  BorderKind border;
};
void PrintTo(const PoolCase& c, std::ostream* os) {
  *os << c.name;
}

const PoolCase kAvgPoolCases[] = {
    {"avg1d", {20}, {3}, {2}, {}, {1}, {1}, false, BorderKind::Zeros},
    {"avg2d_include_pad", {9, 8}, {3, 3}, {2, 2}, {}, {1, 1}, {1, 1}, true, BorderKind::Zeros},
    {"avg2d_asym", {10, 7}, {2, 4}, {1, 2}, {}, {1, 2}, {0, 1}, false, BorderKind::Zeros},
    {"avg2d_replicate", {6, 9}, {3, 3}, {1, 1}, {}, {1, 1}, {1, 1}, true, BorderKind::Replicate},
    {"avg3d", {5, 6, 4}, {2, 3, 2}, {2, 1, 2}, {}, {1, 1, 0}, {0, 1, 1}, false, BorderKind::Zeros},
    {"avg_global", {5, 7}, {5, 7}, {}, {}, {}, {}, false, BorderKind::Zeros},
};

const PoolCase kMaxPoolCases[] = {
    {"max1d", {20}, {3}, {2}, {}, {1}, {1}, false, BorderKind::Zeros},
    {"max2d_dilated", {11, 9}, {3, 2}, {2, 1}, {2, 3}, {1, 2}, {2, 1}, false, BorderKind::Zeros},
    {"max2d_constant", {7, 8}, {3, 3}, {2, 2}, {}, {1, 1}, {1, 1}, false, BorderKind::Constant},
    {"max2d_reflect", {7, 8}, {3, 3}, {1, 1}, {}, {2, 1}, {1, 2}, false, BorderKind::Reflect},
    {"max3d", {5, 6, 4}, {2, 3, 2}, {2, 1, 2}, {}, {1, 1, 0}, {0, 1, 1}, false, BorderKind::Zeros},
};

PoolParams pool_params(const PoolCase& pc) {
  PoolParams p;
  p.kernel = pc.kernel;
  p.stride = pc.stride;
  p.dilation = pc.dilation;
  p.pad_before = pc.pad_before;
  p.pad_after = pc.pad_after;
  p.count_include_pad = pc.count_include_pad;
  p.border = pc.border;
  return p;
}

QTensor random_pool_input(const PoolCase& pc, const Dtype& dt, std::mt19937& rng) {
  std::vector<int64_t> shape = {2, 3};
  shape.insert(shape.end(), pc.in_spatial.begin(), pc.in_spatial.end());
  return random_qtensor(shape, dt.qmin, dt.qmax, rng);
}

using PoolTrackParam = std::tuple<PoolCase, ZeroPoints, QMode>;
class QuantAvgPoolTracksFloat : public ::testing::TestWithParam<PoolTrackParam> {};

// TFLite needs the output quantized as the input; ONNX Runtime rescales.
TEST_P(QuantAvgPoolTracksFloat, WithinOneStep) {
  const auto& [pc, zp, mode] = GetParam();
  const Dtype& dt = zp.dtype;
  std::mt19937 rng(static_cast<uint32_t>(std::hash<std::string>{}(pc.name)) + zp.in);
  const QTensor x = random_pool_input(pc, dt, rng);
  const QParams in{0.021f, zp.in};
  // ONNX Runtime rescales: a zero point 10 steps toward the middle keeps the averages in range.
  const int32_t toward_middle = zp.in > (dt.qmin + dt.qmax) / 2 ? -10 : 10;
  const QParams out = mode == QMode::Tflite ? in : QParams{0.0291f, zp.in + toward_middle};
  const PoolParams p = pool_params(pc);
  const Tensor real = avg_pool(dequantize(x, in), p);
  const QTensor got = qavg_pool(x, p, in, out, dt.qmin, dt.qmax, dt.qmin, dt.qmax, mode);
  // Ties are common (the average of 2, 4, 6 taps); TFLite rounds them on the raw integers.
  expect_tracks(got, real, out, dt.qmin, dt.qmax, mode == QMode::Tflite ? 0.8 : 0.97);
}

std::string pool_track_name(const ::testing::TestParamInfo<PoolTrackParam>& info) {
  const auto& [pc, zp, mode] = info.param;
  return std::string(pc.name) + "_" + zp.name + "_" + mode_name(mode);
}

INSTANTIATE_TEST_SUITE_P(Cases, QuantAvgPoolTracksFloat,
                         ::testing::Combine(::testing::ValuesIn(kAvgPoolCases),
                                            ::testing::ValuesIn(kZeroPoints),
                                            ::testing::Values(QMode::Tflite, QMode::Onnx)),
                         pool_track_name);

using MaxPoolParam = std::tuple<PoolCase, ZeroPoints>;
class QuantMaxPoolMatchesFloat : public ::testing::TestWithParam<MaxPoolParam> {};

// Dequantization is monotonic, so the max pool is exact.
TEST_P(QuantMaxPoolMatchesFloat, Exactly) {
  const auto& [pc, zp] = GetParam();
  const Dtype& dt = zp.dtype;
  std::mt19937 rng(static_cast<uint32_t>(std::hash<std::string>{}(pc.name)) + zp.in);
  const QTensor x = random_pool_input(pc, dt, rng);
  const QParams q{0.021f, zp.in};
  const int32_t border_int = std::clamp(zp.in + 19, dt.qmin, dt.qmax);
  PoolParams fp = pool_params(pc), qp = fp;
  fp.border_value = q.scale * static_cast<float>(border_int - q.zero_point);
  qp.border_value = static_cast<float>(border_int);
  const int32_t act_min = std::max(dt.qmin, q.zero_point - 50);
  const int32_t act_max = std::min(dt.qmax, act_min + 150);
  const std::vector<int32_t> ideal =
      ideal_quantized(max_pool(dequantize(x, q), fp), q, act_min, act_max);
  EXPECT_EQ(qmax_pool(x, qp, act_min, act_max).data, ideal);
}

std::string max_pool_name(const ::testing::TestParamInfo<MaxPoolParam>& info) {
  const auto& [pc, zp] = info.param;
  return std::string(pc.name) + "_" + zp.name;
}

INSTANTIATE_TEST_SUITE_P(Cases, QuantMaxPoolMatchesFloat,
                         ::testing::Combine(::testing::ValuesIn(kMaxPoolCases),
                                            ::testing::ValuesIn(kZeroPoints)),
                         max_pool_name);

PoolParams window(int64_t k, int64_t pad_before = 0, int64_t pad_after = 0,
                  bool count_include_pad = false) {
  PoolParams p;
  p.kernel = {k};
  p.pad_before = {pad_before};
  p.pad_after = {pad_after};
  p.count_include_pad = count_include_pad;
  return p;
}

QTensor avg1d(const I& x, const PoolParams& p, QParams in, QParams out, QMode mode) {
  return qavg_pool(q1d(x), p, in, out, -128, 127, -128, 127, mode);
}

TEST(QuantAvgPool, TfliteRoundsTheIntegerSumHalfAwayFromZero) {
  const QParams q{0.5f, 0}, low{0.5f, -128};
  const auto tflite = [](const I& x, const PoolParams& p, QParams qp) {
    return avg1d(x, p, qp, qp, QMode::Tflite).data;
  };
  EXPECT_EQ(tflite({1, 2}, window(2), q), (I{2}));     // 1.5
  EXPECT_EQ(tflite({-1, -2}, window(2), q), (I{-2}));  // -1.5
  EXPECT_EQ(tflite({1, 1, 2}, window(3), q), (I{1}));  // 1.33
  EXPECT_EQ(tflite({1, 2, 2}, window(3), q), (I{2}));  // 1.67
  // Rounded on the raw integers, not about the zero point: -2.5 -> -3 although the real value
  // (125.5 steps above the zero point) would round up to -2.
  EXPECT_EQ(tflite({-3, -2}, window(2), low), (I{-3}));
  // A padded tap counts only with count_include_pad, and reads the zero point.
  const QParams zp2{0.5f, 2};
  EXPECT_EQ(tflite({4, 6}, window(3, 1, 0, true), zp2), (I{4}));   // (2 + 4 + 6) / 3
  EXPECT_EQ(tflite({4, 6}, window(3, 1, 0, false), zp2), (I{5}));  // (4 + 6) / 2
  EXPECT_THROW(avg1d({1, 2}, window(2), q, {0.25f, 0}, QMode::Tflite), std::invalid_argument);
}

TEST(QuantAvgPool, OnnxRequantizesTheFloatAverageTiesToEven) {
  const QParams q{0.5f, 0};
  // Windows [1, 4] and [4, 0]: 2.5 -> 2, 2 -> 2 (TFLite: 3, 2).
  EXPECT_EQ(avg1d({1, 4, 0}, window(2), q, q, QMode::Onnx).data, (I{2, 2}));
  EXPECT_EQ(avg1d({1, 4, 0}, window(2), q, q, QMode::Tflite).data, (I{3, 2}));
  // Other output quantization: 1.25 / 0.25 = 5, + 10.
  EXPECT_EQ(avg1d({1, 4, 0}, window(2), q, {0.25f, 10}, QMode::Onnx).data, (I{15, 14}));
  // Zero points; the padded tap (count_include_pad) is the real 0: (0 + 1.5 + 2.5) / 3 / 0.5 - 4
  // = -1.33 -> -1; without it (1.5 + 2.5) / 2 / 0.5 - 4 = 0.
  const QParams in{0.5f, 10}, out{0.5f, -4};
  EXPECT_EQ(avg1d({13, 15}, window(3, 1, 0, true), in, out, QMode::Onnx).data, (I{-1}));
  EXPECT_EQ(avg1d({13, 15}, window(3, 1, 0, false), in, out, QMode::Onnx).data, (I{0}));
}

// ORT sends a pool whose kernel is the whole input, with no pads, down its global-average path:
// acc = sum(q) - zx * n = 350, float(acc) * float(sx / (sy * 5)) = 122.5 -> 122, + zy = 30. The
// same window through the float path: sum of sx * (q - zx), / 5, / sy = 122.50001, + zy -> 31.
// (Both worked out independently in numpy float32.)
TEST(QuantAvgPool, OnnxGlobalPoolTakesTheIntegerPath) {
  const I x = {-17, 109, 44, -126, 5};
  const QParams in{0.159265414f, -67}, out{0.0910088047f, -92};
  EXPECT_EQ(avg1d(x, window(5), in, out, QMode::Onnx).data, (I{30}));
  EXPECT_EQ(avg1d(x, window(5, 0, 1), in, out, QMode::Onnx).data.front(), 31);
}

TEST(QuantMaxPool, ZerosBorderNeverWinsAndTheClampApplies) {
  PoolParams p = window(3, 1, 1);
  EXPECT_EQ(qmax_pool(q1d({-5, -3, -9}), p, -128, 127).data, (I{-3, -3, -3}));
  p.border = BorderKind::Constant;
  p.border_value = 0.f;
  EXPECT_EQ(qmax_pool(q1d({-5, -3, -9}), p, -128, 127).data, (I{0, -3, 0}));
  EXPECT_EQ(qmax_pool(q1d({-5, -3, -9}), p, -4, -1).data, (I{-1, -3, -1}));
}

// ---- Add.

QTensor add1d(const I& a, const I& b, QParams a_q, QParams b_q, QParams out, QMode mode,
              const Dtype& dt = kInt8) {
  return qadd(q1d(a), q1d(b), a_q, b_q, out, dt.qmin, dt.qmax, dt.qmin, dt.qmax, mode);
}

// sa = 0.5, sb = 0.25, sy = 0.5: in TFLite twice_max = 1, multipliers 0.5 = (2^30, 0),
// 0.25 = (2^30, -1), 1 / (2^20 * 0.5) = (2^30, -18). b = 1: 2^20 -> 2^19 -> 2^18 (high mul, then
// shift); output 2^18 -> 2^17 -> 2^17 / 2^18 = 0.5 -> 1. ONNX: rb = 0.5, fma(1, 0.5, 0) = 0.5 -> 0.
TEST(QuantAdd, TiesByMode) {
  const QParams half{0.5f, 0}, quarter{0.25f, 0};
  const I zeros = {0, 0, 0, 0, 1};
  EXPECT_EQ(add1d(zeros, {1, -1, 3, 5, 2}, half, quarter, half, QMode::Tflite).data,
            (I{1, -1, 2, 3, 2}));  // 0.5, -0.5, 1.5, 2.5, 2
  EXPECT_EQ(add1d(zeros, {1, -1, 3, 5, 2}, half, quarter, half, QMode::Onnx).data,
            (I{0, 0, 2, 2, 2}));
}

TEST(QuantAdd, ZeroPointsSaturationAndClamp) {
  for (QMode mode : {QMode::Tflite, QMode::Onnx}) {
    SCOPED_TRACE(mode_name(mode));
    // 0.5 * (12 - 10) + 0.5 * (-4 + 5) = 1.5 -> 3 steps, + 3.
    EXPECT_EQ(add1d({12}, {-4}, {0.5f, 10}, {0.5f, -5}, {0.5f, 3}, mode).data, (I{6}));
    EXPECT_EQ(add1d({127}, {127}, {0.5f, 0}, {0.5f, 0}, {0.5f, 0}, mode).data, (I{127}));
    EXPECT_EQ(add1d({0}, {0}, {0.5f, 200}, {0.5f, 0}, {0.5f, 0}, mode, kUint8).data, (I{0}));
    const QTensor clamped =
        qadd(q1d({1}), q1d({-9}), {1.f, 0}, {1.f, 0}, {1.f, 3}, 3, 127, -128, 127, mode);
    EXPECT_EQ(clamped.data, (I{3}));  // relu: -8 + 3 clamps at the zero point
  }
  // TFLite's output multiplier must stay below 1.
  EXPECT_THROW(add1d({1}, {1}, {1.f, 0}, {1.f, 0}, {std::ldexp(1.f, -20), 0}, QMode::Tflite),
               std::invalid_argument);
}

// Two cases where the rounding of ORT's float steps decides the result (checked with exact
// rational arithmetic): the AVX2 kernel's fmas give -45 where its SSE2 kernel's order gives -46;
// the fixed part contracted to an fma gives 48 where float(zc) - (ra*za + rb*zb) unfused gives 47.
TEST(QuantAdd, OnnxFollowsMlasAvx2Kernel) {
  EXPECT_EQ(
      add1d({117}, {34}, {0.145068958f, 13}, {0.0954565331f, 30}, {0.197057277f, -124}, QMode::Onnx)
          .data,
      (I{-45}));
  EXPECT_EQ(add1d({-114}, {-16}, {0.117632471f, -62}, {0.0655396432f, -72}, {0.0802185982f, 78},
                  QMode::Onnx)
                .data,
            (I{48}));
}

// The 2^20 pre-shift decides this one (checked in exact integer arithmetic): 56.50008 exactly,
// 57 with TFLite's left shift 20, 56 with 16.
TEST(QuantAdd, TfliteShiftsTheInputsLeftBy20) {
  EXPECT_EQ(add1d({36}, {47}, {0.170113847f, 33}, {0.0510169566f, 100}, {0.0417821035f, 109},
                  QMode::Tflite)
                .data,
            (I{57}));
}

struct AddCase {
  const char* name;
  Dtype dtype;
  QParams a, b, out;
};
void PrintTo(const AddCase& c, std::ostream* os) {
  *os << c.name;
}

const AddCase kAddCases[] = {
    {"i8_mixed", kInt8, {0.037f, -3}, {0.021f, 17}, {0.05f, 5}},
    {"i8_extreme_zero_points", kInt8, {0.0313f, -128}, {0.0291f, 127}, {0.0402f, 0}},
    {"i8_equal_scales", kInt8, {0.0117f, 0}, {0.0117f, 0}, {0.0233f, -20}},
    {"i8_lopsided", kInt8, {0.5f, 3}, {0.0011f, -7}, {0.61f, 1}},
    {"u8_mixed", kUint8, {0.1f, 128}, {0.013f, 0}, {0.09f, 100}},
    {"u8_extreme_zero_points", kUint8, {0.047f, 255}, {0.033f, 0}, {0.061f, 128}},
};

using AddParam = std::tuple<AddCase, QMode>;
class QuantAddTracksFloat : public ::testing::TestWithParam<AddParam> {};

TEST_P(QuantAddTracksFloat, WithinOneStep) {
  const auto& [ac, mode] = GetParam();
  const Dtype& dt = ac.dtype;
  std::mt19937 rng(static_cast<uint32_t>(std::hash<std::string>{}(ac.name)));
  const QTensor a = random_qtensor({2, 3, 17, 5}, dt.qmin, dt.qmax, rng);
  const QTensor b = random_qtensor({2, 3, 17, 5}, dt.qmin, dt.qmax, rng);
  const Tensor fa = dequantize(a, ac.a), fb = dequantize(b, ac.b);
  Tensor real(fa.shape);
  for (size_t i = 0; i < real.data.size(); ++i)
    real.data[i] = static_cast<float>(double{fa.data[i]} + fb.data[i]);
  const QTensor got = qadd(a, b, ac.a, ac.b, ac.out, dt.qmin, dt.qmax, dt.qmin, dt.qmax, mode);
  expect_tracks(got, real, ac.out, dt.qmin, dt.qmax, 0.97);
}

std::string add_name(const ::testing::TestParamInfo<AddParam>& info) {
  const auto& [ac, mode] = info.param;
  return std::string(ac.name) + "_" + mode_name(mode);
}

INSTANTIATE_TEST_SUITE_P(Cases, QuantAddTracksFloat,
                         ::testing::Combine(::testing::ValuesIn(kAddCases),
                                            ::testing::Values(QMode::Tflite, QMode::Onnx)),
                         add_name);

}  // namespace
}  // namespace padfold::ref
