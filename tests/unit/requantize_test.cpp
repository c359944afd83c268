// The requantization arithmetic of quantized layers (algorithm/requantize) against scalar versions
// written here from the peers' sources, as plain C++ with the originals' int64, double and C
// division: gemmlowp's fixedpoint.h and TFLite's quantization_util.cc / common.cc / reference
// integer kernels, and ONNX Runtime's MLAS and contrib kernels (file and function named at each).
// Every Halide expression is JIT-compiled for this CPU, vectorized and scalar, and for the x86-64
// baseline (SSE2), SSE4.1 and AVX2 where the CPU runs them, and must equal the scalar version on
// every element: edge cases, exact ties, and millions of random operands.
#include "algorithm/requantize.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "reference/quant_reference.h"

namespace padfold {
namespace {

using Halide::Buffer;
using Halide::Expr;
using Halide::Func;
using Halide::Target;
using Halide::Var;

constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
constexpr int32_t kMax = std::numeric_limits<int32_t>::max();

// ---- The peers' arithmetic, scalar, as their sources write it.
namespace peer {

// gemmlowp fixedpoint.h SaturatingRoundingDoublingHighMul<int32_t>.
int32_t srdhm(int32_t a, int32_t b) {
  const bool overflow = a == b && a == kMin;
  const int64_t ab = int64_t{a} * int64_t{b};
  const int32_t nudge = ab >= 0 ? (1 << 30) : (1 - (1 << 30));
  const auto high = static_cast<int32_t>((ab + nudge) / (1LL << 31));
  return overflow ? kMax : high;
}

// gemmlowp fixedpoint.h RoundingDivideByPOT on a scalar.
int32_t rdbpot(int32_t x, int exponent) {
  const auto mask = static_cast<int32_t>((1LL << exponent) - 1);
  const int32_t remainder = x & mask;
  const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
  return (x >> exponent) + (remainder > threshold ? 1 : 0);
}

// TFLite common.cc MultiplyByQuantizedMultiplier (double rounding). x * (1 << left) wraps in the
// compiled kernel; uint32 arithmetic says so without undefined behaviour.
int32_t mbqm(int32_t x, int32_t multiplier, int shift) {
  const int left = shift > 0 ? shift : 0;
  const int right = shift > 0 ? 0 : -shift;
  const auto shifted = static_cast<int32_t>(static_cast<uint32_t>(x) << left);
  return rdbpot(srdhm(shifted, multiplier), right);
}

// TFLite quantization_util.cc QuantizeMultiplier (TfLiteRound is std::round).
FixedPointMultiplier quantize_multiplier(double real) {
  if (real == 0.) return {0, 0};
  int shift = 0;
  const double q = std::frexp(real, &shift);
  auto q_fixed = static_cast<int64_t>(std::round(q * (1LL << 31)));
  if (q_fixed == (1LL << 31)) {
    q_fixed /= 2;
    ++shift;
  }
  if (shift < -31) {
    shift = 0;
    q_fixed = 0;
  }
  return {static_cast<int32_t>(q_fixed), shift};
}

// mlas/lib/quantize.cpp MlasRequantizeOutput on one element: mulps, maxps, minps, cvtps2dq (the
// default MXCSR rounds half to even, as nearbyint does), paddd.
int32_t mlas_requantize(int32_t acc, float scale, int32_t zero_point, int32_t qmin, int32_t qmax) {
  float v = static_cast<float>(acc) * scale;
  v = std::max(v, static_cast<float>(qmin - zero_point));
  v = std::min(v, static_cast<float>(qmax - zero_point));
  return static_cast<int32_t>(std::nearbyint(v)) + zero_point;
}

// A float that is rounded here: keeps a compiler from fusing it into a following add.
float rounded(float v) {
  volatile float r = v;
  return r;
}

// x86's cvtps2dq / cvttss2si of an integral float: INT32_MIN past int32.
int32_t x86_to_int32(float integral) {
  return integral >= 2147483648.f || integral < -2147483648.f ? kMin
                                                              : static_cast<int32_t>(integral);
}

// reference_integer_ops/pooling.h AveragePool's rounding.
int32_t tflite_average(int32_t acc, int32_t filter_count) {
  return acc > 0 ? (acc + filter_count / 2) / filter_count
                 : (acc - filter_count / 2) / filter_count;
}

// contrib_ops/cpu/quantization/qlinear_pool.cc: dequantize_value of each tap, AveragePool's
// Process (+=) and Finalize (/= count), then quantize_value.
int32_t ort_average(const std::vector<int32_t>& taps, int32_t count, QuantParams in,
                    QuantParams out, int32_t qmin, int32_t qmax) {
  float y = 0.f;
  for (int32_t x : taps) y += rounded(in.scale * static_cast<float>(x - in.zero_point));
  y /= static_cast<float>(count);
  const int32_t q = x86_to_int32(std::nearbyint(y / out.scale + out.zero_point));
  return std::max(qmin, std::min(q, qmax));
}

// mlas/lib/qlgavgpool.cpp MlasQLinearGlobalAveragePoolNchw.
int32_t ort_global_average(const std::vector<int32_t>& taps, QuantParams in, QuantParams out,
                           int32_t qmin, int32_t qmax) {
  const auto n = static_cast<int32_t>(taps.size());
  int32_t acc = -in.zero_point * n;
  for (int32_t x : taps) acc += x;
  const float scale = in.scale / (out.scale * static_cast<float>(n));
  return mlas_requantize(acc, scale, out.zero_point, qmin, qmax);
}

// kernels/add.cc Prepare (8-bit: left shift 20) and reference_integer_ops/add.h AddElementwise.
struct TfliteAdd {
  FixedPointMultiplier a, b, out;
  int32_t a_offset, b_offset, out_offset;
  int left_shift;
};
TfliteAdd tflite_add_params(QuantParams a, QuantParams b, QuantParams out, int left_shift = 20) {
  const double twice_max_input_scale = 2 * std::max(a.scale, b.scale);
  const double real_input1_multiplier = a.scale / twice_max_input_scale;
  const double real_input2_multiplier = b.scale / twice_max_input_scale;
  const double real_output_multiplier = twice_max_input_scale / ((1 << left_shift) * out.scale);
  return {quantize_multiplier(real_input1_multiplier),
          quantize_multiplier(real_input2_multiplier),
          quantize_multiplier(real_output_multiplier),
          -a.zero_point,
          -b.zero_point,
          out.zero_point,
          left_shift};
}
int32_t tflite_add(int32_t x1, int32_t x2, const TfliteAdd& p, int32_t act_min, int32_t act_max,
                   int32_t (*multiply)(int32_t, int32_t, int) = mbqm) {
  const int32_t input1_val = p.a_offset + x1;
  const int32_t input2_val = p.b_offset + x2;
  const int32_t shifted_input1_val = input1_val * (1 << p.left_shift);
  const int32_t shifted_input2_val = input2_val * (1 << p.left_shift);
  const int32_t scaled_input1_val = multiply(shifted_input1_val, p.a.multiplier, p.a.shift);
  const int32_t scaled_input2_val = multiply(shifted_input2_val, p.b.multiplier, p.b.shift);
  const int32_t raw_sum = scaled_input1_val + scaled_input2_val;
  const int32_t raw_output = multiply(raw_sum, p.out.multiplier, p.out.shift) + p.out_offset;
  return std::min(act_max, std::max(act_min, raw_output));
}

// mlas/lib/intrinsics/avx2/qladd_avx2.cpp MlasQLinearAddKernelAvx2Helper, neither input a scalar.
// The fixed part as GCC compiles it (the product ra * za contracted with the add).
int32_t ort_add(int32_t a, int32_t b, QuantParams qa, QuantParams qb, QuantParams qc, int32_t qmin,
                int32_t qmax) {
  const float ra = qa.scale / qc.scale, rb = qb.scale / qc.scale;
  const float fixed =
      static_cast<float>(qc.zero_point) - std::fma(ra, static_cast<float>(qa.zero_point),
                                                   rounded(rb * static_cast<float>(qb.zero_point)));
  const float v = std::fma(static_cast<float>(a), ra, std::fma(static_cast<float>(b), rb, fixed));
  // _mm256_packs_epi32, then packs_epi16 / packus_epi16: saturation.
  return std::max(qmin, std::min(x86_to_int32(std::nearbyint(v)), qmax));
}

}  // namespace peer

// Plausible misreadings of the peers, to choose cases that tell them from the peers.
namespace misread {

// TFLITE_SINGLE_ROUNDING's MultiplyByQuantizedMultiplier.
int32_t single_rounding(int32_t x, int32_t multiplier, int shift) {
  const int total_shift = 31 - shift;
  const int64_t round = int64_t{1} << (total_shift - 1);
  return static_cast<int32_t>((x * int64_t{multiplier} + round) >> total_shift);
}

// QLinearAdd with the fixed part unfused, or with the inputs' roles swapped.
int32_t ort_add(int32_t a, int32_t b, QuantParams qa, QuantParams qb, QuantParams qc, int32_t qmin,
                int32_t qmax, bool unfused) {
  const float ra = qa.scale / qc.scale, rb = qb.scale / qc.scale;
  const float za = static_cast<float>(qa.zero_point), zb = static_cast<float>(qb.zero_point);
  const float fixed = static_cast<float>(qc.zero_point) -
                      (unfused ? peer::rounded(peer::rounded(ra * za) + peer::rounded(rb * zb))
                               : std::fma(ra, za, peer::rounded(rb * zb)));
  const float v =
      unfused ? std::fma(static_cast<float>(a), ra, std::fma(static_cast<float>(b), rb, fixed))
              : std::fma(static_cast<float>(b), rb, std::fma(static_cast<float>(a), ra, fixed));
  return std::max(qmin, std::min(peer::x86_to_int32(std::nearbyint(v)), qmax));
}

}  // namespace misread

// ---- Running Halide expressions.

// This CPU as JIT compiles for it, and the x86-64 families it can also run.
std::vector<Target> targets() {
  const Target host = Halide::get_jit_target_from_environment();
  std::vector<Target> all = {host};
  if (host.arch != Target::X86 || host.bits != 64) return all;
  all.emplace_back(host.os, Target::X86, 64);
  if (host.has_feature(Target::SSE41))
    all.emplace_back(host.os, Target::X86, 64, std::vector<Target::Feature>{Target::SSE41});
  if (host.has_feature(Target::AVX2) && host.has_feature(Target::FMA))
    all.emplace_back(host.os, Target::X86, 64,
                     std::vector<Target::Feature>{Target::SSE41, Target::AVX, Target::AVX2,
                                                  Target::FMA, Target::F16C});
  return all;
}

template <typename T>
Buffer<T> buffer_of(const std::vector<T>& values) {
  Buffer<T> b(static_cast<int>(values.size()));
  for (size_t i = 0; i < values.size(); ++i) b(static_cast<int>(i)) = values[i];
  return b;
}

// Defines the value at x; Funcs it defines on the way go in `stages` (computed at root).
using Build = std::function<Expr(const Var& x, std::vector<Func>& stages)>;
using Describe = std::function<std::string(size_t)>;

template <typename T>
bool same(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) return std::memcmp(&a, &b, sizeof(T)) == 0;
  return a == b;
}

// Realizes build(x) over [0, expected.size()) on every target (with `fma_only`, those with a
// native_fma), vectorized (on the first target also scalar), and expects every element to equal
// `expected`; `describe(i)` names element i.
template <typename T>
void expect_everywhere(const Build& build, const std::vector<T>& expected, const Describe& describe,
                       bool fma_only = false) {
  const std::vector<Target> all = targets();
  for (size_t t = 0; t < all.size(); ++t)
    for (bool vectorized : {true, false}) {
      if ((!vectorized && t > 0) || (fma_only && !native_fma(all[t]))) continue;
      Var x("x");
      std::vector<Func> stages;
      Func f("f");
      f(x) = build(x, stages);
      const auto vectorize = [&](auto&& stage) {
        if (vectorized) stage.vectorize(x, 16, Halide::TailStrategy::GuardWithIf);
      };
      vectorize(f);
      for (Func& stage : stages) {
        stage.compute_root();
        vectorize(stage);
        for (int u = 0; u < stage.num_update_definitions(); ++u) vectorize(stage.update(u));
      }
      const Buffer<T> got = f.realize({static_cast<int>(expected.size())}, all[t]);
      size_t wrong = 0, first = 0;
      for (size_t i = 0; i < expected.size(); ++i)
        if (!same(got(static_cast<int>(i)), expected[i]) && wrong++ == 0) first = i;
      EXPECT_EQ(wrong, 0u) << all[t].to_string() << (vectorized ? " vectorized" : " scalar")
                           << ", first at " << describe(first) << ": got "
                           << got(static_cast<int>(first)) << ", expected " << expected[first];
    }
}

// The same for a value that needs no stage of its own.
template <typename T>
void expect_everywhere(const std::function<Expr(const Var& x)>& value,
                       const std::vector<T>& expected, const Describe& describe,
                       bool fma_only = false) {
  expect_everywhere<T>([&](const Var& x, std::vector<Func>&) { return value(x); }, expected,
                       describe, fma_only);
}

// A quantized layer with the given quantization (conv unless op says otherwise).
Layer quantized_layer(Requantize mode, DType dtype, std::vector<QuantParams> inputs,
                      QuantParams out, std::vector<float> weight_scales = {},
                      Activation act = Activation::None, Op op = Op::Conv) {
  Layer L;
  L.name = "q";
  L.op = op;
  L.dtype = dtype;
  L.activation = act;
  L.out_channels = weight_scales.empty() ? 1 : static_cast<int64_t>(weight_scales.size());
  L.quant = LayerQuant{std::move(inputs), out, std::move(weight_scales), mode, std::nullopt};
  return L;
}

std::pair<int32_t, int32_t> range_of(DType dtype) {
  return dtype == DType::I8 ? std::pair{-128, 127} : std::pair{0, 255};
}

// 10^u, u uniform in [lo, hi): scales over several decades.
float log_uniform(std::mt19937& rng, double lo, double hi) {
  return static_cast<float>(std::pow(10.0, std::uniform_real_distribution<double>(lo, hi)(rng)));
}

// Values every int32 check covers: the extremes, around zero and around the powers of two.
std::vector<int32_t> edge_values() {
  std::vector<int32_t> v = {kMin, kMin + 1, kMax - 1, kMax, 0};
  for (int e = 0; e <= 30; ++e)
    for (int64_t d : {-1, 0, 1})
      for (int64_t sign : {-1, 1}) {
        const int64_t value = sign * ((int64_t{1} << e) + d);
        if (value >= kMin && value <= kMax) v.push_back(static_cast<int32_t>(value));
      }
  return v;
}

// ---- Compile-time constants.

TEST(QuantizeMultiplier, HandKnownValues) {
  const auto expect = [](double real, int32_t multiplier, int shift) {
    const FixedPointMultiplier m = quantize_multiplier(real);
    EXPECT_EQ(m.multiplier, multiplier) << real;
    EXPECT_EQ(m.shift, shift) << real;
  };
  expect(0., 0, 0);
  expect(0.5, 1 << 30, 0);
  expect(1.0, 1 << 30, 1);
  expect(0.75, 3 << 29, 0);
  expect(1.5, 3 << 29, 1);
  expect(3.0, 3 << 29, 2);
  expect(std::ldexp(1., -31), 1 << 30, -30);
  expect(std::ldexp(1., -32), 1 << 30, -31);
  expect(std::ldexp(1., -33), 0, 0);  // shift -32: flushed to zero
  expect(std::ldexp(3., -33), 3 << 29, -31);
  expect(1. - std::ldexp(1., -31), kMax, 0);      // q * 2^31 = 2^31 - 1 exactly
  expect(1. - std::ldexp(1., -32), 1 << 30, 1);   // 2^31 - 0.5: half away from zero reaches 2^31
  expect(1. - std::ldexp(1., -33), 1 << 30, 1);   // 2^31 - 0.25
  expect(0.5 + std::ldexp(1., -33), 1 << 30, 0);  // 2^30 + 0.25 rounds down
  expect(0.5 + std::ldexp(3., -34), 1 << 30, 0);  // 2^30 + 0.375
  expect(0.5 + std::ldexp(1., -32), (1 << 30) + 1, 0);  // 2^30 + 0.5: away from zero
}

TEST(QuantizeMultiplier, MatchesTfliteOnRandomScales) {
  std::mt19937 rng(1);
  for (int i = 0; i < 200000; ++i) {
    const double real = std::pow(10.0, std::uniform_real_distribution<double>(-12, 9)(rng));
    const FixedPointMultiplier got = quantize_multiplier(real),
                               want = peer::quantize_multiplier(real);
    ASSERT_EQ(got.multiplier, want.multiplier) << real;
    ASSERT_EQ(got.shift, want.shift) << real;
    if (got.multiplier == 0) continue;
    ASSERT_GE(got.multiplier, 1 << 30);
    // Within half a unit of the last place of the multiplier.
    EXPECT_LE(std::abs(std::ldexp(got.multiplier, got.shift - 31) - real),
              std::ldexp(1., got.shift - 32))
        << real;
  }
}

TEST(QuantizeMultiplier, SmallerThanOneRefusesWhatTfliteRefuses) {
  EXPECT_EQ(quantize_multiplier_smaller_than_one(0.5).multiplier, 1 << 30);
  EXPECT_EQ(quantize_multiplier_smaller_than_one(0.5).shift, 0);
  EXPECT_EQ(quantize_multiplier_smaller_than_one(0.1).shift, -3);
  for (double bad : {0., 1., 1.5, -0.25, 1. - std::ldexp(1., -40)})
    EXPECT_THROW(quantize_multiplier_smaller_than_one(bad), std::invalid_argument) << bad;
}

TEST(QuantizeValue, TiesRoundPerMode) {
  const QuantParams unit{1.f, 0};
  const auto both = [](float v, QuantParams q, DType dtype, int32_t onnx, int32_t tflite) {
    EXPECT_EQ(quantize_value(v, q, dtype, Requantize::Onnx), onnx) << v;
    EXPECT_EQ(quantize_value(v, q, dtype, Requantize::Tflite), tflite) << v;
  };
  both(2.5f, unit, DType::I8, 2, 3);
  both(-2.5f, unit, DType::I8, -2, -3);
  both(3.5f, unit, DType::I8, 4, 4);
  both(0.5f, unit, DType::I8, 0, 1);
  both(-0.5f, unit, DType::I8, 0, -1);
  both(2.4f, unit, DType::I8, 2, 2);
  both(2.5f, QuantParams{1.f, 10}, DType::U8, 12, 13);
  both(1.25f, QuantParams{0.5f, -3}, DType::I8, -1, 0);  // 2.5 + zero point -3
  // Saturated to the dtype.
  both(1000.f, unit, DType::I8, 127, 127);
  both(-1000.f, unit, DType::I8, -128, -128);
  both(1000.f, unit, DType::U8, 255, 255);
  both(-1000.f, QuantParams{1.f, 100}, DType::U8, 0, 0);
  both(1e30f, QuantParams{1e-30f, 0}, DType::I8, 127, 127);
  EXPECT_THROW(quantize_value(1.f, unit, DType::F32, Requantize::Onnx), std::invalid_argument);
}

TEST(ActivationRange, NoneReluRelu6) {
  const auto range = [](Activation act, QuantParams out, DType dtype, Requantize mode) {
    return activation_range(quantized_layer(mode, dtype, {{1.f, 0}}, out, {1.f}, act));
  };
  for (Requantize mode : {Requantize::Tflite, Requantize::Onnx}) {
    // The usual relu6 output: [0, 6] over the whole int8 range.
    const QuantParams full{6.f / 255.f, -128};
    EXPECT_EQ(range(Activation::Relu6, full, DType::I8, mode), std::pair(-128, 127));
    EXPECT_EQ(range(Activation::None, {0.05f, 10}, DType::U8, mode), std::pair(0, 255));
    EXPECT_EQ(range(Activation::Relu, {0.05f, 10}, DType::U8, mode), std::pair(10, 255));
    EXPECT_EQ(range(Activation::Relu6, {0.05f, 10}, DType::U8, mode), std::pair(10, 130));
    EXPECT_EQ(range(Activation::Relu6, {0.05f, -100}, DType::I8, mode), std::pair(-100, 20));
    EXPECT_EQ(range(Activation::Relu6, {0.01f, 10}, DType::U8, mode), std::pair(10, 255));
    EXPECT_EQ(range(Activation::Relu, {0.05f, -128}, DType::I8, mode), std::pair(-128, 127));
  }
  // 6 / 2.4f is 2.5f exactly: TFLite rounds the tie away from zero, ORT's QuantizeLinear to even.
  ASSERT_EQ(6.f / 2.4f, 2.5f);
  EXPECT_EQ(range(Activation::Relu6, {2.4f, 3}, DType::I8, Requantize::Tflite), std::pair(3, 6));
  EXPECT_EQ(range(Activation::Relu6, {2.4f, 3}, DType::I8, Requantize::Onnx), std::pair(3, 5));
  EXPECT_THROW(range(Activation::Sigmoid, {1.f, 0}, DType::I8, Requantize::Tflite),
               std::invalid_argument);
}

TEST(ConvRequantization, PerChannelAndBroadcast) {
  const QuantParams in{0.0235f, -128}, out{0.0471f, 5};
  std::vector<float> sw = {0.003f, 0.004f, 1e-9f, 0.5f};
  std::mt19937 rng(10);
  for (int c = 0; c < 60; ++c) sw.push_back(log_uniform(rng, -4, 0));
  const ConvRequantization t =
      conv_requantization(quantized_layer(Requantize::Tflite, DType::I8, {in}, out, sw));
  const ConvRequantization o =
      conv_requantization(quantized_layer(Requantize::Onnx, DType::I8, {in}, out, sw));
  ASSERT_EQ(t.fixed.size(), sw.size());
  ASSERT_EQ(o.scale.size(), sw.size());
  EXPECT_TRUE(t.scale.empty());
  EXPECT_TRUE(o.fixed.empty());
  for (size_t c = 0; c < sw.size(); ++c) {
    const FixedPointMultiplier want =
        peer::quantize_multiplier(static_cast<double>(in.scale) * static_cast<double>(sw[c]) /
                                  static_cast<double>(out.scale));
    EXPECT_EQ(t.fixed[c].multiplier, want.multiplier) << c;
    EXPECT_EQ(t.fixed[c].shift, want.shift) << c;
    const float scale = in.scale * sw[c];
    EXPECT_EQ(o.scale[c], scale / out.scale) << c;  // float, left to right
  }
  Layer broadcast = quantized_layer(Requantize::Onnx, DType::I8, {in}, out, {0.003f});
  broadcast.out_channels = 3;
  EXPECT_EQ(conv_requantization(broadcast).scale,
            std::vector<float>(3, in.scale * 0.003f / out.scale));
  broadcast.quant->weight_scales = {1.f, 2.f};
  EXPECT_THROW(conv_requantization(broadcast), std::invalid_argument);
}

// ---- The fixed-point primitives.

TEST(FixedPoint, SaturatingRoundingDoublingHighMulEdgesAndTies) {
  std::vector<int32_t> a, b;
  const std::vector<int32_t> edges = edge_values();
  for (int32_t u : edges)
    for (int32_t v : edges) {
      a.push_back(u);
      b.push_back(v);
    }
  // a * b = (2k + 1) * 2^30 is exactly half way: ties go toward +infinity for both signs.
  for (int32_t k : {0, 1, 2, 3, 1000, 65535, (1 << 30) - 1})
    for (int32_t sign : {-1, 1}) {
      a.push_back(sign * (2 * k + 1));
      b.push_back(1 << 30);
      a.push_back(1 << 30);
      b.push_back(sign * (2 * k + 1));
    }
  std::vector<int32_t> want;
  for (size_t i = 0; i < a.size(); ++i) want.push_back(peer::srdhm(a[i], b[i]));
  EXPECT_EQ(peer::srdhm(kMin, kMin), kMax);
  EXPECT_EQ(peer::srdhm(3, 1 << 30), 2);    // 1.5 -> 2
  EXPECT_EQ(peer::srdhm(-3, 1 << 30), -1);  // -1.5 -> -1
  const Buffer<int32_t> ba = buffer_of(a), bb = buffer_of(b);
  expect_everywhere<int32_t>(
      [&](const Var& x) { return saturating_rounding_doubling_high_mul(ba(x), bb(x)); }, want,
      [&](size_t i) { return std::to_string(a[i]) + " * " + std::to_string(b[i]); });
}

TEST(FixedPoint, RoundingDivideByPotEveryExponent) {
  std::vector<int32_t> xs, es;
  for (int e = 0; e <= 31; ++e) {
    std::vector<int64_t> values = {0, 1, -1, kMin, kMax, kMin + 1, kMax - 1};
    // (2k + 1) * 2^(e-1) / 2^e is k + 0.5: ties (away from zero) and their neighbours.
    for (int64_t k : {0, 1, 2, 7, 1000})
      for (int64_t sign : {-1, 1})
        for (int64_t d : {-1, 0, 1})
          if (e >= 1) values.push_back(sign * (2 * k + 1) * (int64_t{1} << (e - 1)) + d);
    for (int64_t v : values)
      if (v >= kMin && v <= kMax) {
        xs.push_back(static_cast<int32_t>(v));
        es.push_back(e);
      }
  }
  std::vector<int32_t> want;
  for (size_t i = 0; i < xs.size(); ++i) want.push_back(peer::rdbpot(xs[i], es[i]));
  EXPECT_EQ(peer::rdbpot(5, 1), 3);
  EXPECT_EQ(peer::rdbpot(-5, 1), -3);
  EXPECT_EQ(peer::rdbpot(-6, 2), -2);  // -1.5 -> -2
  const Buffer<int32_t> bx = buffer_of(xs), be = buffer_of(es);
  expect_everywhere<int32_t>(
      [&](const Var& x) { return rounding_divide_by_pot(bx(x), be(x)); }, want,
      [&](size_t i) { return std::to_string(xs[i]) + " / 2^" + std::to_string(es[i]); });
}

struct Triples {
  std::vector<int32_t> x, multiplier, shift;
  void add(int32_t xv, int32_t m, int s) {
    x.push_back(xv);
    multiplier.push_back(m);
    shift.push_back(s);
  }
  std::string describe(size_t i) const {
    return "x " + std::to_string(x[i]) + ", multiplier " + std::to_string(multiplier[i]) +
           ", shift " + std::to_string(shift[i]);
  }
};

void expect_multiply_matches(const Triples& t) {
  std::vector<int32_t> want;
  for (size_t i = 0; i < t.x.size(); ++i)
    want.push_back(peer::mbqm(t.x[i], t.multiplier[i], t.shift[i]));
  const Buffer<int32_t> bx = buffer_of(t.x), bm = buffer_of(t.multiplier), bs = buffer_of(t.shift);
  expect_everywhere<int32_t>(
      [&](const Var& x) { return multiply_by_quantized_multiplier(bx(x), bm(x), bs(x)); }, want,
      [&](size_t i) { return t.describe(i); });
}

TEST(FixedPoint, MultiplyByQuantizedMultiplierEdges) {
  Triples t;
  for (int32_t x : edge_values())
    for (int32_t m : {0, 1, 1 << 30, (1 << 30) + 1, 1518500250, kMax - 1, kMax})
      for (int shift = -31; shift <= 30; ++shift) t.add(x, m, shift);
  expect_multiply_matches(t);
}

TEST(FixedPoint, MultiplyByQuantizedMultiplierRandom) {
  std::mt19937 rng(2);
  std::uniform_int_distribution<int32_t> any(kMin, kMax), small(-(1 << 20), 1 << 20);
  std::uniform_int_distribution<int32_t> multiplier(1 << 30, kMax), shift(-31, 30);
  Triples t;
  for (int i = 0; i < 3000000; ++i)
    t.add(i % 2 ? any(rng) : small(rng), i % 97 ? multiplier(rng) : 0, shift(rng));
  // Multipliers as quantize_multiplier makes them from scales over 1e-6 .. 1e3.
  for (int i = 0; i < 1000000; ++i) {
    const FixedPointMultiplier m = quantize_multiplier(log_uniform(rng, -6, 3));
    t.add(i % 2 ? any(rng) : small(rng), m.multiplier, m.shift);
  }
  expect_multiply_matches(t);
}

// The same with the multiplier and shift compile-time constants, as a per-tensor conv has them.
TEST(FixedPoint, MultiplyByConstantMultiplier) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<int32_t> any(kMin, kMax);
  std::vector<int32_t> xs = edge_values();
  for (int i = 0; i < 20000; ++i) xs.push_back(any(rng));
  const Buffer<int32_t> bx = buffer_of(xs);
  const std::vector<std::pair<int32_t, int>> constants = {
      {1 << 30, -31}, {1518500250, -9}, {kMax, -1}, {1 << 30, 0}, {1610612736, 1}, {1 << 30, 30}};
  for (const auto& constant : constants) {
    const int32_t m = constant.first;
    const int shift = constant.second;
    std::vector<int32_t> want;
    for (int32_t v : xs) want.push_back(peer::mbqm(v, m, shift));
    expect_everywhere<int32_t>(
        [&](const Var& x) { return multiply_by_quantized_multiplier(bx(x), m, shift); }, want,
        [&](size_t i) {
          return std::to_string(xs[i]) + " by (" + std::to_string(m) + ", " +
                 std::to_string(shift) + ")";
        });
  }
}

// ---- ONNX Runtime's float arithmetic.

TEST(FloatRequantize, MatchesMlasRequantizeOutput) {
  std::mt19937 rng(4);
  std::uniform_int_distribution<int32_t> any(kMin, kMax), small(-100000, 100000);
  std::vector<int32_t> accs;
  std::vector<float> scales;
  // scale 0.5 and 0.25: odd accumulators land exactly on .5 (ties to even, both signs).
  for (int32_t acc = -600; acc <= 600; ++acc)
    for (float scale : {0.5f, 0.25f, 1.f}) {
      accs.push_back(acc);
      scales.push_back(scale);
    }
  for (int32_t acc : edge_values())
    for (float scale : {0.5f, 1e-9f, 3e-3f, 7.f}) {
      accs.push_back(acc);
      scales.push_back(scale);
    }
  for (int i = 0; i < 2000000; ++i) {
    accs.push_back(i % 4 ? small(rng) : any(rng));
    scales.push_back(log_uniform(rng, -6, 2));
  }
  const Buffer<int32_t> ba = buffer_of(accs);
  const Buffer<float> bs = buffer_of(scales);
  for (DType dtype : {DType::I8, DType::U8})
    for (int32_t zp : {range_of(dtype).first, 3, range_of(dtype).second})
      for (bool activation : {false, true}) {
        const auto [qmin, qmax] = range_of(dtype);
        // An activation range narrows [lo, hi]: the same as MLAS followed by that clamp.
        const int32_t lo = activation ? std::max(qmin, zp) : qmin, hi = qmax;
        std::vector<int32_t> want;
        for (size_t i = 0; i < accs.size(); ++i)
          want.push_back(std::max(lo, peer::mlas_requantize(accs[i], scales[i], zp, qmin, qmax)));
        expect_everywhere<int32_t>(
            [&](const Var& x) { return requantize_float(ba(x), bs(x), zp, lo, hi); }, want,
            [&](size_t i) {
              return "acc " + std::to_string(accs[i]) + ", scale " + std::to_string(scales[i]) +
                     ", zero point " + std::to_string(zp) + ", range [" + std::to_string(lo) +
                     ", " + std::to_string(hi) + "]";
            });
      }
}

TEST(FloatRequantize, FusedMultiplyAddIsCorrectlyRounded) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> unit(-1.f, 1.f);
  std::uniform_int_distribution<int32_t> byte(-128, 255), exponent(-40, 40);
  std::vector<float> a, b, c, want;
  for (int i = 0; i < 1000000; ++i) {
    const float ai = i % 2 ? static_cast<float>(byte(rng)) : std::ldexp(unit(rng), exponent(rng));
    const float bi = std::ldexp(unit(rng), exponent(rng));
    // Cancellation against the rounded product, tiny addends and plain random ones: where an
    // unfused or doubly rounded result differs.
    float ci = std::ldexp(unit(rng), exponent(rng));
    if (i % 3 == 0) ci = -(ai * bi) + std::ldexp(unit(rng), exponent(rng) - 30);
    if (i % 3 == 1) ci = std::ldexp(unit(rng), exponent(rng) - 60);
    a.push_back(ai);
    b.push_back(bi);
    c.push_back(ci);
    want.push_back(std::fma(ai, bi, ci));
  }
  size_t unfused_differs = 0;
  for (size_t i = 0; i < a.size(); ++i)
    unfused_differs += peer::rounded(a[i] * b[i]) + c[i] != want[i];
  EXPECT_GT(unfused_differs, 10000u);
  const Buffer<float> ba = buffer_of(a), bb = buffer_of(b), bc = buffer_of(c);
  for (bool native : {false, true})
    expect_everywhere<float>(
        [&](const Var& x) { return fused_multiply_add(ba(x), bb(x), bc(x), native); }, want,
        [&](size_t i) {
          std::ostringstream s;
          s.precision(9);
          s << (native ? "native " : "emulated ") << "fma(" << a[i] << ", " << b[i] << ", " << c[i]
            << ")";
          return s.str();
        },
        native);
}

// ---- Whole conv requantization.

TEST(RequantizeConv, BothModesPerChannelAndPerTensor) {
  std::mt19937 rng(6);
  std::uniform_int_distribution<int32_t> acc_of(-3000000, 3000000), any(kMin, kMax);
  const int channels = 37;
  for (Requantize mode : {Requantize::Tflite, Requantize::Onnx})
    for (DType dtype : {DType::I8, DType::U8})
      for (bool per_channel : {true, false})
        for (Activation act : {Activation::None, Activation::Relu6}) {
          const auto [qmin, qmax] = range_of(dtype);
          const QuantParams in{log_uniform(rng, -3, 0), qmin + 7};
          const QuantParams out{log_uniform(rng, -2, 0), (qmin + qmax) / 2};
          std::vector<float> sw;
          for (int c = 0; c < (per_channel ? channels : 1); ++c)
            sw.push_back(log_uniform(rng, -4, -1));
          Layer L = quantized_layer(mode, dtype, {in}, out, sw, act);
          L.out_channels = channels;
          // The peers' clamp: CalculateActivationRangeQuantized, or the Q of a QDQ Clip(0, 6).
          int32_t lo = qmin, hi = qmax;
          if (act == Activation::Relu6) {
            lo = std::max(qmin, out.zero_point);
            const float six = 6.f / out.scale;
            const float r = mode == Requantize::Tflite ? std::round(six) : std::nearbyint(six);
            hi = std::min<int32_t>(qmax, out.zero_point + static_cast<int32_t>(r));
          }
          std::vector<int32_t> accs, chans, want;
          for (int i = 0; i < 200000; ++i) {
            const int32_t c = i % channels;
            const int32_t acc = i % 50 ? acc_of(rng) : any(rng);
            const float w = sw[per_channel ? c : 0];
            int32_t y = 0;
            if (mode == Requantize::Tflite) {
              // PopulateConvolutionQuantizationParams; conv.h's acc += output_offset wraps.
              const FixedPointMultiplier m =
                  peer::quantize_multiplier(static_cast<double>(in.scale) * static_cast<double>(w) /
                                            static_cast<double>(out.scale));
              y = static_cast<int32_t>(
                  static_cast<uint32_t>(peer::mbqm(acc, m.multiplier, m.shift)) +
                  static_cast<uint32_t>(out.zero_point));
            } else {
              // QLinearConv::ComputeOutputScale, then MlasRequantizeOutput.
              y = peer::mlas_requantize(acc, in.scale * w / out.scale, out.zero_point, qmin, qmax);
            }
            accs.push_back(acc);
            chans.push_back(c);
            want.push_back(std::max(lo, std::min(y, hi)));
          }
          const Buffer<int32_t> ba = buffer_of(accs), bc = buffer_of(chans);
          // One shared scale is a constant, not a table.
          std::ostringstream text;
          // The channel is data here, so it is clamped for Halide to bound the table's reads (in a
          // kernel it is the output's channel variable).
          const auto channel_of = [&](const Var& x) { return clamp(bc(x), 0, channels - 1); };
          text << requantize_conv(L, ba(Var("x")), channel_of(Var("x")));
          const bool table =
              text.str().find(mode == Requantize::Tflite ? "q_multiplier" : "q_scale") !=
              std::string::npos;
          EXPECT_EQ(table, per_channel) << text.str();
          expect_everywhere<int32_t>(
              [&](const Var& x) { return requantize_conv(L, ba(x), channel_of(x)); }, want,
              [&](size_t i) {
                return to_string(mode) + " " + to_string(dtype) + " acc " +
                       std::to_string(accs[i]) + " channel " + std::to_string(chans[i]);
              });
        }
}

// TFLite adds the output zero point in int32: just below INT32_MAX it wraps, and the clamp then
// sees a negative number. M = 1 - 2^-24 keeps the shift at 0 (a left shift would wrap first).
TEST(RequantizeConv, TfliteZeroPointAddWraps) {
  const float sw = 1.f - std::ldexp(1.f, -24);
  const Layer L = quantized_layer(Requantize::Tflite, DType::U8, {{1.f, 0}}, {1.f, 200}, {sw});
  const FixedPointMultiplier m = peer::quantize_multiplier(static_cast<double>(sw));
  ASSERT_EQ(m.shift, 0);
  const std::vector<int32_t> accs = {kMax, kMax - 100, kMax - 1000, 5, kMin};
  std::vector<int32_t> want;
  for (int32_t acc : accs) {
    const auto y =
        static_cast<int32_t>(static_cast<uint32_t>(peer::mbqm(acc, m.multiplier, 0)) + 200u);
    want.push_back(std::clamp(y, 0, 255));
  }
  EXPECT_EQ(want, (std::vector<int32_t>{0, 255, 255, 205, 0}));
  const Buffer<int32_t> ba = buffer_of(accs);
  expect_everywhere<int32_t>([&](const Var& x) { return requantize_conv(L, ba(x), Expr(0)); }, want,
                             [&](size_t i) { return std::to_string(accs[i]); });
}

// ---- Average pooling.

TEST(AveragePool, TfliteRoundsHalfAwayFromZero) {
  std::vector<int32_t> sums, counts, want;
  for (int32_t n = 1; n <= 30; ++n)
    for (int32_t s = -128 * n - 3; s <= 255 * n + 3; ++s) {
      sums.push_back(s);
      counts.push_back(n);
      want.push_back(peer::tflite_average(s, n));
    }
  EXPECT_EQ(peer::tflite_average(2, 4), 1);    // 0.5 -> 1
  EXPECT_EQ(peer::tflite_average(-2, 4), -1);  // -0.5 -> -1
  EXPECT_EQ(peer::tflite_average(-6, 4), -2);  // -1.5 -> -2
  const Buffer<int32_t> bs = buffer_of(sums), bn = buffer_of(counts);
  const Describe describe = [&](size_t i) {
    return std::to_string(sums[i]) + " / " + std::to_string(counts[i]);
  };
  expect_everywhere<int32_t>([&](const Var& x) { return average_pool_tflite(bs(x), bn(x)); }, want,
                             describe);

  // Through the layer: the sum of the integers, then its activation clamp.
  const Layer L = quantized_layer(Requantize::Tflite, DType::I8, {{0.1f, -5}}, {0.1f, -5}, {},
                                  Activation::Relu, Op::AvgPool);
  EXPECT_EQ(average_pool_zero(L).type(), Halide::Int(32));
  std::vector<int32_t> clamped;
  for (int32_t v : want) clamped.push_back(std::min(127, std::max(v, -5)));
  expect_everywhere<int32_t>([&](const Var& x) { return average_pool_quantized(L, bs(x), bn(x)); },
                             clamped, describe);
}

// Windows of `taps` values; the first `summed` of window w take part and `count` divides.
struct Windows {
  int taps = 0;
  std::vector<int32_t> values, summed, count;
  std::vector<int32_t> window(size_t w) const {
    const auto begin = values.begin() + static_cast<std::ptrdiff_t>(w * static_cast<size_t>(taps));
    return {begin, begin + summed[w]};
  }
  std::string describe(size_t w) const {
    std::string s = "window";
    for (int32_t v : window(w)) s += " " + std::to_string(v);
    return s + " / " + std::to_string(count[w]);
  }
};

// The layer's reduction as the lead writes it: average_pool_accumulate over the summed taps of
// each window, in order, from average_pool_zero.
Expr layer_average(const Layer& L, const Windows& ws, const Var& x, std::vector<Func>& stages) {
  const Buffer<int32_t> values = buffer_of(ws.values), summed = buffer_of(ws.summed),
                        count = buffer_of(ws.count);
  const Halide::Type t = L.dtype == DType::I8 ? Halide::Int(8) : Halide::UInt(8);
  Halide::RDom r(0, ws.taps, "r");
  Func sum("sum");
  sum(x) = average_pool_zero(L);
  const Expr tap = Halide::cast(t, values(x * ws.taps + r));
  sum(x) = Halide::select(r < summed(x), average_pool_accumulate(L, sum(x), tap), sum(x));
  stages.push_back(sum);
  return average_pool_quantized(L, sum(x), count(x));
}

// QLinearAveragePool sums dequantized floats in window order, divides, and adds the zero point
// before rounding. Scales with sy = sx or 2 sx and two-tap windows put exact averages on .5, where
// the float roundings decide: there the integer sum times sx, or rounding before adding the zero
// point, give other results (the test counts such windows, so it would notice either).
TEST(AveragePool, OnnxDequantizesSumsInOrderAndRounds) {
  std::mt19937 rng(7);
  for (DType dtype : {DType::I8, DType::U8}) {
    const auto [qmin, qmax] = range_of(dtype);
    std::uniform_int_distribution<int32_t> value(qmin, qmax);
    const float s = 0.0371f;
    for (QuantParams out : {QuantParams{s, qmin + 40}, QuantParams{2 * s, qmax - 3},
                            QuantParams{0.0123f, qmin + 100}}) {
      const QuantParams in{s, qmin + 11};
      Layer L =
          quantized_layer(Requantize::Onnx, dtype, {in}, out, {}, Activation::None, Op::AvgPool);
      L.kernel = {3, 3};
      L.in_spatial = {8, 8};
      ASSERT_FALSE(average_pool_onnx_global(L));
      ASSERT_EQ(average_pool_zero(L).type(), Halide::Float(32));
      Windows ws;
      ws.taps = 9;
      // Every two-tap window, then random windows of up to nine taps, some divided by nine (what
      // count_include_pad does: ORT sums only the taps inside the input).
      for (int32_t u = qmin; u <= qmax; ++u)
        for (int32_t v = qmin; v <= qmax; ++v) {
          ws.values.insert(ws.values.end(), {u, v, 0, 0, 0, 0, 0, 0, 0});
          ws.summed.push_back(2);
          ws.count.push_back(2);
        }
      for (int w = 0; w < 50000; ++w) {
        for (int k = 0; k < ws.taps; ++k) ws.values.push_back(value(rng));
        ws.summed.push_back(1 + w % ws.taps);
        ws.count.push_back(w % 5 ? ws.summed.back() : ws.taps);
      }
      std::vector<int32_t> want;
      size_t integer_sum_differs = 0, late_zero_point_differs = 0;
      for (size_t w = 0; w < ws.summed.size(); ++w) {
        const std::vector<int32_t> window = ws.window(w);
        want.push_back(peer::ort_average(window, ws.count[w], in, out, qmin, qmax));
        int32_t sum = 0;
        for (int32_t v : window) sum += v - in.zero_point;
        const float average = in.scale * static_cast<float>(sum) / static_cast<float>(ws.count[w]);
        const float exact = std::nearbyint(average / out.scale + out.zero_point);
        integer_sum_differs += std::clamp(static_cast<int32_t>(exact), qmin, qmax) != want.back();
        float y = 0.f;
        for (int32_t v : window)
          y += peer::rounded(in.scale * static_cast<float>(v - in.zero_point));
        const float late = std::nearbyint(y / static_cast<float>(ws.count[w]) / out.scale) +
                           static_cast<float>(out.zero_point);
        late_zero_point_differs +=
            std::clamp(static_cast<int32_t>(late), qmin, qmax) != want.back();
      }
      if (out.scale == s) {
        EXPECT_GT(integer_sum_differs, 5u);
        EXPECT_GT(late_zero_point_differs, 5u);
      }
      expect_everywhere<int32_t>(
          [&](const Var& x, std::vector<Func>& stages) { return layer_average(L, ws, x, stages); },
          want, [&](size_t w) { return ws.describe(w); });
    }
  }
}

// A kernel covering the whole unpadded input takes ORT's global-pool path: an integer sum
// requantized by MlasRequantizeOutput with sx / (sy * taps).
TEST(AveragePool, OnnxGlobalPath) {
  std::mt19937 rng(8);
  for (DType dtype : {DType::I8, DType::U8}) {
    const auto [qmin, qmax] = range_of(dtype);
    std::uniform_int_distribution<int32_t> value(qmin, qmax);
    const QuantParams in{0.05f, qmin + 9}, out{0.02f, qmin + 120};
    Layer L =
        quantized_layer(Requantize::Onnx, dtype, {in}, out, {}, Activation::Relu, Op::AvgPool);
    L.kernel = L.in_spatial = {3, 4};
    L.pads.axes.resize(2);
    ASSERT_TRUE(average_pool_onnx_global(L));
    EXPECT_EQ(average_pool_zero(L).type(), Halide::Int(32));
    Windows ws;
    ws.taps = 12;
    std::vector<int32_t> want;
    for (int w = 0; w < 100000; ++w) {
      for (int k = 0; k < ws.taps; ++k) ws.values.push_back(value(rng));
      ws.summed.push_back(ws.taps);
      ws.count.push_back(ws.taps);
      const int32_t y =
          peer::ort_global_average(ws.window(static_cast<size_t>(w)), in, out, qmin, qmax);
      want.push_back(std::max(y, out.zero_point));
    }
    expect_everywhere<int32_t>(
        [&](const Var& x, std::vector<Func>& stages) { return layer_average(L, ws, x, stages); },
        want, [&](size_t w) { return ws.describe(w); });
    L.pads.axes[1].after = 1;
    EXPECT_FALSE(average_pool_onnx_global(L));
    L.pads.axes[1].after = 0;
    L.quant->output.scale = 1e-6f;  // sx / (sy * taps) >= 256: ORT refuses the model
    EXPECT_THROW(average_pool_quantized(L, Expr(0), Expr(12)), std::invalid_argument);
  }
}

// ---- Add.

// Every pair of inputs of the dtype, for random quantizations: two as drawn, and then those that
// tell the peer from each misreading (left shift 19, single rounding; ORT's fixed part unfused,
// the inputs' roles swapped), which rounding ties make rare.
TEST(Add, BothModesOnEveryPair) {
  std::mt19937 rng(9);
  for (Requantize mode : {Requantize::Tflite, Requantize::Onnx})
    for (DType dtype : {DType::I8, DType::U8}) {
      const auto [qmin, qmax] = range_of(dtype);
      std::uniform_int_distribution<int32_t> zero_point(qmin, qmax);
      int plain = 0;
      std::vector<bool> told(2, false);
      for (int candidate = 0; candidate < 3000; ++candidate) {
        if (plain == 2 && told[0] && told[1]) break;
        const QuantParams a{log_uniform(rng, -3, 0), zero_point(rng)};
        const QuantParams b{candidate % 3 == 0 ? a.scale : log_uniform(rng, -3, 0),
                            zero_point(rng)};
        const QuantParams out{log_uniform(rng, -2.5, 0.5), zero_point(rng)};
        const Activation act = candidate % 4 == 1 ? Activation::Relu6 : Activation::None;
        const Layer L = quantized_layer(mode, dtype, {a, b}, out, {}, act, Op::Add);
        const auto [lo, hi] = activation_range(L);
        const peer::TfliteAdd p = peer::tflite_add_params(a, b, out);
        const peer::TfliteAdd p19 = peer::tflite_add_params(a, b, out, 19);
        std::vector<int32_t> x0, x1, want;
        std::vector<bool> tells(2, false);
        for (int32_t u = qmin; u <= qmax; ++u)
          for (int32_t v = qmin; v <= qmax; ++v) {
            x0.push_back(u);
            x1.push_back(v);
            if (mode == Requantize::Tflite) {
              want.push_back(peer::tflite_add(u, v, p, lo, hi));
              tells[0] = tells[0] || peer::tflite_add(u, v, p19, lo, hi) != want.back();
              tells[1] = tells[1] ||
                         peer::tflite_add(u, v, p, lo, hi, misread::single_rounding) != want.back();
            } else {
              want.push_back(std::clamp(peer::ort_add(u, v, a, b, out, qmin, qmax), lo, hi));
              for (bool unfused : {true, false})
                tells[unfused] = tells[unfused] ||
                                 std::clamp(misread::ort_add(u, v, a, b, out, qmin, qmax, unfused),
                                            lo, hi) != want.back();
            }
          }
        const bool new_tell = (tells[0] && !told[0]) || (tells[1] && !told[1]);
        if (!new_tell && plain == 2) continue;
        if (!new_tell) ++plain;
        told[0] = told[0] || tells[0];
        told[1] = told[1] || tells[1];
        const Buffer<int32_t> b0 = buffer_of(x0), b1 = buffer_of(x1);
        for (bool native : {false, true})
          expect_everywhere<int32_t>(
              [&](const Var& x) { return add_quantized(L, b0(x), b1(x), native); }, want,
              [&](size_t i) {
                return to_string(mode) + (native ? " native " : " ") + std::to_string(x0[i]) +
                       " + " + std::to_string(x1[i]);
              },
              native);
      }
      EXPECT_TRUE(told[0] && told[1]) << to_string(mode) << " " << to_string(dtype);
    }
}

// The ONNX add's fmas as a double multiply-add (onnx_add_exact_in_double): taken for the scales a
// model has (ratios within a few powers of ten of 1), and bit-exact with ORT's fmas on every pair
// where taken; refused where a ratio is so much finer than the sum that double cannot hold both.
TEST(Add, OnnxInDoubleWhereExactEqualsTheFmas) {
  std::mt19937 rng(41);
  int taken = 0;
  for (DType dtype : {DType::I8, DType::U8}) {
    const auto [qmin, qmax] = range_of(dtype);
    std::uniform_int_distribution<int32_t> zero_point(qmin, qmax);
    for (int candidate = 0; candidate < 12; ++candidate) {
      const QuantParams a{log_uniform(rng, -2.5, -0.5), zero_point(rng)};
      const QuantParams b{log_uniform(rng, -2.5, -0.5), zero_point(rng)};
      const QuantParams out{log_uniform(rng, -2.5, -0.5), zero_point(rng)};
      const Layer L =
          quantized_layer(Requantize::Onnx, dtype, {a, b}, out, {}, Activation::None, Op::Add);
      ASSERT_TRUE(onnx_add_exact_in_double(L)) << a.scale << " " << b.scale << " " << out.scale;
      ++taken;
      std::vector<int32_t> x0, x1, want;
      for (int32_t u = qmin; u <= qmax; ++u)
        for (int32_t v = qmin; v <= qmax; ++v) {
          x0.push_back(u);
          x1.push_back(v);
          want.push_back(peer::ort_add(u, v, a, b, out, qmin, qmax));
        }
      const Buffer<int32_t> b0 = buffer_of(x0), b1 = buffer_of(x1);
      expect_everywhere<int32_t>(
          [&](const Var& x) { return add_quantized(L, b0(x), b1(x), false); }, want,
          [&](size_t i) { return std::to_string(x0[i]) + " + " + std::to_string(x1[i]); });
    }
  }
  EXPECT_EQ(taken, 24);
  // A ratio of 1e-6 next to a fixed part near 255: 53 bits and more.
  const Layer fine = quantized_layer(Requantize::Onnx, DType::U8, {{1e-6f, 0}, {1.f, 0}},
                                     {1.f, 255}, {}, Activation::None, Op::Add);
  EXPECT_FALSE(onnx_add_exact_in_double(fine));
  EXPECT_FALSE(onnx_add_exact_in_double(quantized_layer(Requantize::Tflite, DType::I8,
                                                        {{0.1f, 0}, {0.1f, 0}}, {0.1f, 0}, {},
                                                        Activation::None, Op::Add)));
}

// Past int32, x86's conversion gives INT32_MIN and the saturating packs the dtype's minimum.
TEST(Add, OnnxOverflowGivesTheMinimum) {
  const Layer L = quantized_layer(Requantize::Onnx, DType::U8, {{3000.f, 0}, {3000.f, 0}},
                                  {1e-4f, 0}, {}, Activation::None, Op::Add);
  const std::vector<int32_t> x0 = {229, 0, 1}, x1 = {0, 0, 0};
  std::vector<int32_t> want;
  for (size_t i = 0; i < x0.size(); ++i)
    want.push_back(peer::ort_add(x0[i], x1[i], {3000.f, 0}, {3000.f, 0}, {1e-4f, 0}, 0, 255));
  EXPECT_EQ(want, (std::vector<int32_t>{0, 0, 255}));
  const Buffer<int32_t> b0 = buffer_of(x0), b1 = buffer_of(x1);
  for (bool native : {false, true})
    expect_everywhere<int32_t>([&](const Var& x) { return add_quantized(L, b0(x), b1(x), native); },
                               want, [&](size_t i) { return std::to_string(x0[i]); }, native);
}

TEST(Add, TfliteRefusesWhatTfliteRefuses) {
  const Layer L = quantized_layer(Requantize::Tflite, DType::I8, {{1.f, 0}, {1.f, 0}}, {1e-6f, 0},
                                  {}, Activation::None, Op::Add);
  EXPECT_THROW(add_quantized(L, Expr(0), Expr(0), false), std::invalid_argument);
}

// ---- The integer reference (reference/quant_reference), the kernels' oracle, reads the peers
// the same way.

TEST(IntegerReference, AgreesWithThisModule) {
  std::mt19937 rng(12);
  const auto qmode = [](Requantize mode) {
    return mode == Requantize::Tflite ? ref::QMode::Tflite : ref::QMode::Onnx;
  };
  for (int i = 0; i < 20000; ++i) {
    const double real = std::pow(10.0, std::uniform_real_distribution<double>(-10, 3)(rng));
    const ref::QuantizedMultiplier r = ref::quantize_multiplier(real);
    const FixedPointMultiplier m = quantize_multiplier(real);
    ASSERT_EQ(m.multiplier, r.multiplier) << real;
    ASSERT_EQ(m.shift, r.shift) << real;
  }
  for (Requantize mode : {Requantize::Tflite, Requantize::Onnx})
    for (DType dtype : {DType::I8, DType::U8}) {
      const auto [qmin, qmax] = range_of(dtype);
      std::uniform_int_distribution<int32_t> zero_point(qmin, qmax);
      for (int i = 0; i < 2000; ++i) {
        const QuantParams q{log_uniform(rng, -3, 1), zero_point(rng)};
        const float v = std::uniform_real_distribution<float>(-300.f, 300.f)(rng) * q.scale;
        ASSERT_EQ(quantize_value(v, q, dtype, mode),
                  ref::qround_quantize(v, {q.scale, q.zero_point}, qmin, qmax, qmode(mode)));
        const Activation acts[] = {Activation::None, Activation::Relu, Activation::Relu6};
        for (int act = 0; act < 3; ++act)
          ASSERT_EQ(activation_range(quantized_layer(mode, dtype, {q}, q, {1.f}, acts[act])),
                    ref::qactivation_range(act, {q.scale, q.zero_point}, qmin, qmax, qmode(mode)))
              << q.scale << " " << q.zero_point;
      }
      // Add on every pair, through the reference's layer.
      const QuantParams a{log_uniform(rng, -3, 0), zero_point(rng)};
      const QuantParams b{log_uniform(rng, -3, 0), zero_point(rng)};
      const QuantParams out{log_uniform(rng, -2, 0), zero_point(rng)};
      const Layer L = quantized_layer(mode, dtype, {a, b}, out, {}, Activation::Relu6, Op::Add);
      const auto [lo, hi] = activation_range(L);
      std::vector<int32_t> x0, x1;
      for (int32_t u = qmin; u <= qmax; ++u)
        for (int32_t v = qmin; v <= qmax; ++v) {
          x0.push_back(u);
          x1.push_back(v);
        }
      const std::vector<int64_t> shape = {1, static_cast<int64_t>(x0.size()), 1};
      const ref::QTensor y = ref::qadd(
          ref::QTensor(shape, x0), ref::QTensor(shape, x1), {a.scale, a.zero_point},
          {b.scale, b.zero_point}, {out.scale, out.zero_point}, lo, hi, qmin, qmax, qmode(mode));
      const Buffer<int32_t> b0 = buffer_of(x0), b1 = buffer_of(x1);
      expect_everywhere<int32_t>(
          [&](const Var& x) { return add_quantized(L, b0(x), b1(x), false); }, y.data,
          [&](size_t i) {
            return to_string(mode) + " " + std::to_string(x0[i]) + " + " + std::to_string(x1[i]);
          });
    }
}

}  // namespace
}  // namespace padfold
