#include "algorithm/requantize.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>

namespace padfold {

using namespace Halide;

namespace {

constexpr int32_t kInt32Max = std::numeric_limits<int32_t>::max();
// x86's float -> int32 conversions (cvtps2dq, cvttss2si) give INT32_MIN for a value past int32.
constexpr float kTwoTo31 = 2147483648.f;

const LayerQuant& quant_of(const Layer& L) {
  if (!L.quant) throw QuantRefused(L.name, "it has no quantization");
  return *L.quant;
}

[[noreturn]] void refuse(const Layer& L, const std::string& why) {
  throw QuantRefused(L.name, why);
}

template <typename T>
bool all_equal(const std::vector<T>& values) {
  return std::adjacent_find(values.begin(), values.end(), std::not_equal_to<>()) == values.end();
}

// A per-channel constant: a scalar when every channel shares it, else an embedded buffer.
template <typename T>
Expr per_channel(const std::vector<T>& values, Expr channel, const std::string& name) {
  if (all_equal(values)) return Expr(values.front());
  Buffer<T> buffer({static_cast<int>(values.size())}, Internal::unique_name(name));
  for (size_t i = 0; i < values.size(); ++i) buffer(static_cast<int>(i)) = values[i];
  // Read as any input is: Halide checks the channels a schedule computes lie in the table.
  return buffer(channel);
}

// An already rounded float to the dtype as x86 ORT converts it: past int32 the conversion gives
// INT32_MIN, which the saturating packs (or clamp) then take to the dtype's minimum.
Expr x86_saturate(Expr rounded, DType dtype) {
  const auto [qmin, qmax] = dtype_range(dtype);
  const Expr in_dtype =
      cast<int32_t>(clamp(rounded, static_cast<float>(qmin), static_cast<float>(qmax)));
  return select(strict_float(rounded >= kTwoTo31), qmin, in_dtype);
}

}  // namespace

Expr saturating_rounding_doubling_high_mul(Expr a, Expr b) {
  // gemmlowp adds a nudge of 2^30 (1 - 2^30 when a * b < 0) and divides by 2^31 truncating. For a
  // negative n, trunc((n + 1 - 2^30) / 2^31) == floor((n + 2^30) / 2^31), so both signs are one
  // rounding shift: ties go toward +infinity. Only INT32_MIN * INT32_MIN leaves int32. A faster
  // vector form: Halide's rounding_mul_shift_right(a, b, 31) is the same operation (one VQRDMULH on
  // ARM), where this one spells out the 64-bit product.
  const Expr product = cast<int64_t>(std::move(a)) * cast<int64_t>(std::move(b));
  return cast<int32_t>(min((product + (1 << 30)) >> 31, kInt32Max));
}

namespace {

// saturating_rounding_doubling_high_mul for a b that is not INT32_MIN (TFLite's multipliers are
// positive), which never saturates: floor((p + 2^30) / 2^31) as floor(p / 2^31) plus p's bit 30.
// Halide rewrites the sum-and-shift forms as its rounding_mul_shift_right, whose x86 lowering
// (an overflow-safe rounding of the int64 product) spent about a third more instructions; a conv
// with few taps per output spends about half its time requantizing.
Expr rounding_doubling_high_mul(Expr a, Expr b) {
  const Expr product = cast<int64_t>(std::move(a)) * cast<int64_t>(std::move(b));
  return cast<int32_t>(product >> 31) + cast<int32_t>((product >> 30) & 1);
}

}  // namespace

Expr rounding_divide_by_pot(Expr x, Expr exponent) {
  // Unsigned shift counts: Halide reads a signed count's sign as a direction.
  const Expr e = cast<uint32_t>(std::move(exponent));
  const Expr mask = cast<int32_t>((cast<int64_t>(1) << cast<uint64_t>(e)) - 1);
  const Expr remainder = x & mask;
  const Expr threshold = (mask >> 1) + select(x < 0, 1, 0);
  return (x >> e) + select(remainder > threshold, 1, 0);
}

Expr multiply_by_quantized_multiplier(Expr x, Expr multiplier, Expr shift) {
  const Expr left = cast<uint64_t>(max(shift, 0));
  const Expr right = max(-shift, 0);
  // TFLite's int32 x * (1 << left) wraps; Halide assumes int32 arithmetic does not, so wrap
  // explicitly through int64.
  const Expr shifted = cast<int32_t>(cast<int64_t>(std::move(x)) << left);
  return rounding_divide_by_pot(rounding_doubling_high_mul(shifted, std::move(multiplier)), right);
}

Expr requantize_float(Expr acc, Expr scale, int32_t zero_point, int32_t lo, int32_t hi) {
  // MlasRequantizeOutput (and the ConvSym kernels' post-processing): mulps, maxps, minps,
  // cvtps2dq (round half to even), paddd. The clamp keeps the conversion inside int32.
  const Expr scaled = strict_float(
      min(max(cast<float>(std::move(acc)) * std::move(scale), static_cast<float>(lo - zero_point)),
          static_cast<float>(hi - zero_point)));
  return cast<int32_t>(round(scaled)) + zero_point;
}

Expr requantize_conv(const Layer& L, Expr acc, Expr channel) {
  const LayerQuant& q = quant_of(L);
  const auto [lo, hi] = activation_range(L);
  const int32_t zy = q.output.zero_point;
  const ConvRequantization r = conv_requantization(L);
  if (q.requantize == Requantize::Onnx)
    return requantize_float(std::move(acc), per_channel(r.scale, channel, L.name + "_scale"), zy,
                            lo, hi);
  std::vector<int32_t> multipliers, shifts;
  for (const FixedPointMultiplier& m : r.fixed) {
    multipliers.push_back(m.multiplier);
    shifts.push_back(m.shift);
  }
  const Expr scaled = multiply_by_quantized_multiplier(
      std::move(acc), per_channel(multipliers, channel, L.name + "_multiplier"),
      per_channel(shifts, channel, L.name + "_shift"));
  // TFLite's acc += output_offset wraps in int32.
  return clamp(cast<int32_t>(cast<int64_t>(scaled) + zy), lo, hi);
}

bool native_fma(const Target& target) {
  if (target.has_gpu_feature()) return false;
  return (target.arch == Target::X86 && target.has_feature(Target::FMA)) ||
         (target.arch == Target::ARM && target.bits == 64);
}

Expr fused_multiply_add(Expr a, Expr b, Expr c, bool native) {
  if (native) {
    // A call per lane as Halide writes an extern call on a vector; LLVM makes the lanes' fmas one
    // vector fma again. llvm.fma rounds once whatever the fast-math flags.
    const Type t = Float(32, a.type().lanes());
    return Internal::Call::make(
        t, "llvm.fma.f32", {cast(t, std::move(a)), cast(t, std::move(b)), cast(t, std::move(c))},
        Internal::Call::PureExtern);
  }
  // The product of two floats is exact in double. TwoSum (Knuth) gives the error of the double sum,
  // and rounding that sum to odd before rounding to float gives the correctly rounded result
  // (Boldo and Melquiond, "Emulation of FMA and correctly rounded sums", 2008).
  const Expr p = strict_float(cast<double>(std::move(a)) * cast<double>(std::move(b)));
  const Expr cd = cast<double>(std::move(c));
  const Expr sum = strict_float(p + cd);
  const Expr cv = strict_float(sum - p);
  const Expr pv = strict_float(sum - cv);
  const Expr error = strict_float((p - pv) + (cd - cv));
  const Expr bits = reinterpret<int64_t>(sum);
  // Moving one ulp toward the error makes the last bit odd; in sign-magnitude that is +1 when the
  // error has the sum's sign.
  const Expr zero = Expr(0.0);
  const Expr away_from_zero = strict_float((error > zero) == (sum > zero));
  const Expr odd = select(strict_float(error != zero) && (bits & 1) == 0,
                          bits + select(away_from_zero, Expr(int64_t{1}), Expr(int64_t{-1})), bits);
  return cast<float>(reinterpret<double>(odd));
}

Expr average_pool_zero(const Layer& L) {
  const bool float_sum = quant_of(L).requantize == Requantize::Onnx && !average_pool_onnx_global(L);
  return float_sum ? Expr(0.f) : Expr(0);
}

Expr average_pool_accumulate(const Layer& L, Expr sum, Expr x) {
  const LayerQuant& q = quant_of(L);
  if (q.requantize == Requantize::Tflite || average_pool_onnx_global(L))
    return std::move(sum) + cast<int32_t>(std::move(x));
  // QLinearAveragePool dequantizes the input (x_scale * (int(x) - x_zero_point)) and sums floats.
  const QuantParams& in = q.inputs.at(0);
  return strict_float(std::move(sum) +
                      in.scale * cast<float>(cast<int32_t>(std::move(x)) - in.zero_point));
}

Expr average_pool_tflite(Expr sum, Expr count) {
  // C's truncating division, from Halide's flooring one on non-negative numerators (Halide's `/`
  // also stays defined in masked vector lanes whose count is 0).
  const Expr half = count / 2;
  return select(sum > 0, (sum + half) / count, -((half - sum) / count));
}

Expr average_pool_onnx(Expr sum, Expr count, const QuantParams& out, DType dtype) {
  // qlinear_pool.cc: AveragePool::Finalize divides by the count, then quantize_value computes
  // nearbyintf(y / y_scale + y_zero_point): the zero point is added before rounding.
  const Expr value = strict_float(std::move(sum) / cast<float>(std::move(count)) / out.scale +
                                  static_cast<float>(out.zero_point));
  return x86_saturate(round(value), dtype);
}

Expr average_pool_quantized(const Layer& L, Expr sum, Expr count) {
  const LayerQuant& q = quant_of(L);
  const auto [lo, hi] = activation_range(L);
  if (q.requantize == Requantize::Tflite)
    return clamp(average_pool_tflite(std::move(sum), std::move(count)), lo, hi);
  if (!average_pool_onnx_global(L))
    return clamp(average_pool_onnx(std::move(sum), std::move(count), q.output, L.dtype), lo, hi);
  // MlasQLinearGlobalAveragePoolNchw/Nhwc: sum(x) - zx * taps, requantized with one float scale.
  const float scale = onnx_global_pool_scale(L);
  int64_t taps = 1;
  for (int64_t extent : L.in_spatial) taps *= extent;
  const QuantParams& in = q.inputs.at(0);
  const Expr acc = std::move(sum) - in.zero_point * static_cast<int32_t>(taps);
  return requantize_float(acc, scale, q.output.zero_point, lo, hi);
}

namespace {

// The ratios and the fixed part of an ONNX-mode add (qladd_avx2.cpp): each element is
// round(fma(x0, ra, fma(x1, rb, fixed))). The fixed part is the C++ expression
// zc - (ra * za + rb * zb), which GCC contracts to zc - fma(ra, za, rb * zb) (ORT 1.32 agrees on
// every int8 and uint8 pair).
struct OnnxAdd {
  float ra, rb, fixed;
};

OnnxAdd onnx_add(const LayerQuant& q) {
  const QuantParams &a = q.inputs[0], &b = q.inputs[1], &out = q.output;
  const float ra = a.scale / out.scale, rb = b.scale / out.scale;
  return {ra, rb,
          static_cast<float>(out.zero_point) - std::fma(ra, static_cast<float>(a.zero_point),
                                                        rb * static_cast<float>(b.zero_point))};
}

// The exponent of v's last mantissa bit (v a nonzero float).
int lowest_bit(float v) {
  int e = 0;
  std::frexp(v, &e);  // v = m * 2^e, 0.5 <= |m| < 1: bits 2^(e-1) down to 2^(e-24)
  return e - 24;
}

}  // namespace

bool onnx_add_exact_in_double(const Layer& L) {
  const LayerQuant& q = quant_of(L);
  if (q.requantize != Requantize::Onnx || q.inputs.size() != 2) return false;
  const OnnxAdd f = onnx_add(q);
  if (f.ra == 0 || f.rb == 0 || !std::isfinite(f.ra) || !std::isfinite(f.rb) ||
      !std::isfinite(f.fixed))
    return false;
  // Every value involved is a multiple of 2^low (x1 * rb + fixed exactly; its float rounding, the
  // inner fma, keeps that; x0 * ra likewise) and below 2^high in magnitude.
  int low = std::min(lowest_bit(f.ra), lowest_bit(f.rb));
  if (f.fixed != 0) low = std::min(low, lowest_bit(f.fixed));
  const double bound = 256.0 * (std::fabs(f.ra) + std::fabs(f.rb)) + std::fabs(f.fixed) + 1.0;
  const int high = static_cast<int>(std::ceil(std::log2(bound))) + 1;
  return high - low <= 52;
}

Expr add_quantized(const Layer& L, Expr x0, Expr x1, bool native_fma) {
  const LayerQuant& q = quant_of(L);
  if (q.inputs.size() != 2) refuse(L, "a quantized add needs the quantization of two inputs");
  const QuantParams &a = q.inputs[0], &b = q.inputs[1], &out = q.output;
  const auto [lo, hi] = activation_range(L);
  if (q.requantize == Requantize::Tflite) {
    const auto [ma, mb, mo] = tflite_add_multipliers(L);
    const auto scaled = [](Expr x, int32_t zero_point, FixedPointMultiplier m) {
      return multiply_by_quantized_multiplier(
          (std::move(x) - zero_point) * (1 << kTfliteAddLeftShift), m.multiplier, m.shift);
    };
    const Expr sum =
        scaled(std::move(x0), a.zero_point, ma) + scaled(std::move(x1), b.zero_point, mb);
    return clamp(multiply_by_quantized_multiplier(sum, mo.multiplier, mo.shift) + out.zero_point,
                 lo, hi);
  }
  // qladd_avx2.cpp (what ORT runs on every AVX2 x86-64 CPU): each element is
  // cvtps2dq(fma(a, ra, fma(b, rb, fixed))).
  const OnnxAdd f = onnx_add(q);
  Expr value;
  if (native_fma) {
    const Expr with_b = fused_multiply_add(cast<float>(std::move(x1)), f.rb, f.fixed, true);
    value = fused_multiply_add(cast<float>(std::move(x0)), f.ra, with_b, true);
  } else if (onnx_add_exact_in_double(L)) {
    const auto fma_exact = [](Expr x, float r, Expr c) {
      return cast<float>(strict_float(cast<double>(std::move(x)) * Expr(static_cast<double>(r)) +
                                      cast<double>(std::move(c))));
    };
    value = fma_exact(std::move(x0), f.ra, fma_exact(std::move(x1), f.rb, Expr(f.fixed)));
  } else {
    const Expr with_b = fused_multiply_add(cast<float>(std::move(x1)), f.rb, f.fixed, false);
    value = fused_multiply_add(cast<float>(std::move(x0)), f.ra, with_b, false);
  }
  return clamp(x86_saturate(round(value), L.dtype), lo, hi);
}

Expr mul_quantized(const Layer& L, Expr x0, Expr x1) {
  const LayerQuant& q = quant_of(L);
  const float ratio = onnx_mul_ratio(L);
  const auto [lo, hi] = activation_range(L);
  // |product| <= 255 * 255: exact in float.
  const Expr product =
      (std::move(x0) - q.inputs[0].zero_point) * (std::move(x1) - q.inputs[1].zero_point);
  const Expr value =
      strict_float(cast<float>(product) * ratio + static_cast<float>(q.output.zero_point));
  return clamp(x86_saturate(round(value), L.dtype), lo, hi);
}

Expr quantize_element(const Layer& L, Expr real) {
  const QuantParams& out = quant_of(L).output;
  const auto [qmin, qmax] = dtype_range(L.dtype);
  const Expr scaled =
      strict_float(clamp(std::move(real) / out.scale, static_cast<float>(qmin - out.zero_point),
                         static_cast<float>(qmax - out.zero_point)));
  Expr rounded;
  if (quant_of(L).requantize == Requantize::Onnx) {
    rounded = round(scaled);  // half to even
  } else {                    // half away from zero; scaled - trunc(scaled) is exact
    const Expr t = trunc(scaled);
    rounded = strict_float(select(abs(scaled - t) >= 0.5f, t + select(scaled < 0.f, -1.f, 1.f), t));
  }
  return cast(L.dtype == DType::U8 ? UInt(8) : Int(8), cast<int32_t>(rounded) + out.zero_point);
}

Expr dequantize_element(const Layer& L, Expr q) {
  const QuantParams& in = quant_of(L).output;
  return strict_float(cast<float>(cast<int32_t>(std::move(q)) - in.zero_point) * in.scale);
}

}  // namespace padfold
