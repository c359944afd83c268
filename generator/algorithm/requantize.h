// The integer arithmetic of quantized (int8/uint8) layers, bit for bit as the peers do it
// (docs/int8.md): TFLite's reference kernels (gemmlowp fixed point, double rounding, the default
// build without TFLITE_SINGLE_ROUNDING) and ONNX Runtime's x86-64 CPU kernels (MLAS float
// requantization). Compile-time constants are plain C++; the per-element arithmetic is Halide
// expressions on int32 (or float) Exprs that vectorize and call no extern function per lane.
//
// Float arithmetic here is wrapped in Halide::strict_float: by default Halide lets LLVM
// reassociate and contract (fma) float operations, which would change the peers' roundings.
#pragma once

#include <Halide.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "frontend/layer.h"
#include "frontend/quant_arithmetic.h"

namespace padfold {

// ---- Halide expressions. Integer arguments are Int(32) Exprs, scalar or vector.

// gemmlowp's SaturatingRoundingDoublingHighMul: round(a * b / 2^31), ties toward +infinity,
// INT32_MIN * INT32_MIN saturating to INT32_MAX (ARM's VQRDMULH).
Halide::Expr saturating_rounding_doubling_high_mul(Halide::Expr a, Halide::Expr b);
// gemmlowp's RoundingDivideByPOT: x / 2^exponent rounded half away from zero; exponent in [0, 31].
Halide::Expr rounding_divide_by_pot(Halide::Expr x, Halide::Expr exponent);
// TFLite's MultiplyByQuantizedMultiplier (double rounding); shift in [-31, 30]. The x * 2^shift of
// a positive shift wraps as TFLite's int32 product does.
Halide::Expr multiply_by_quantized_multiplier(Halide::Expr x, Halide::Expr multiplier,
                                              Halide::Expr shift);
// MLAS's MlasRequantizeOutput on an int32 accumulator and a float scale, then clamped to
// [lo, hi]: float(acc) * scale, clamped in float to [lo - zp, hi - zp], rounded half to even,
// plus zp. With [lo, hi] the dtype's range this is MLAS itself; a narrower [lo, hi] (an activation
// range) gives the same as MLAS followed by that clamp.
Halide::Expr requantize_float(Halide::Expr acc, Halide::Expr scale, int32_t zero_point, int32_t lo,
                              int32_t hi);
// A conv's output from its int32 accumulator (bias added) for output channel `channel`: the mode's
// requantization with conv_requantization(L)'s constants (a scalar when every channel shares one,
// else an embedded buffer indexed by `channel`), zy added, clamped to activation_range(L).
Halide::Expr requantize_conv(const Layer& L, Halide::Expr acc, Halide::Expr channel);

// A quantize layer's element (ONNX QuantizeLinear, TFLite QUANTIZE): the float32 `real` divided by
// the output scale, clamped to [qmin - zp, qmax - zp], rounded (onnx: half to even, as MLAS's
// QuantizeLinear kernels; tflite: half away from zero, TfLiteRound), plus zp: quantize_value's
// arithmetic element by element. A NaN input gives an unspecified value of the dtype.
Halide::Expr quantize_element(const Layer& L, Halide::Expr real);
// A dequantize layer's element: float(q - zp) * scale (ONNX DequantizeLinear; TFLite's
// double-precision product rounds to the same float).
Halide::Expr dequantize_element(const Layer& L, Halide::Expr q);

// Whether `target` computes a float fma in one instruction (x86 FMA, 64-bit ARM; not a GPU
// target, whose C-like backends cannot spell LLVM's intrinsic).
bool native_fma(const Halide::Target& target);

// A correctly rounded float fma(a, b, c): LLVM's fma intrinsic with `native` (one vfmadd per
// vector), else from double arithmetic (no fma instruction needed).
Halide::Expr fused_multiply_add(Halide::Expr a, Halide::Expr b, Halide::Expr c, bool native);

// ---- Average pooling. The taps that count are summed in a reduction the caller writes:
//   sum = average_pool_zero(L); for each counted tap: sum = average_pool_accumulate(L, sum, x)
// over the taps inside the input, in row-major window order (the last spatial axis innermost):
// TFLite skips the padding; ORT sums only the taps inside the input even with count_include_pad
// (which only changes `count`). A tap in the padding may instead add average_pool_zero(L).

// The 0 the sum starts from: int32 (Tflite; Onnx's global path) or float (Onnx).
Halide::Expr average_pool_zero(const Layer& L);
// sum plus tap x (L's input dtype): Tflite sum + x; Onnx (QLinearAveragePool) the float
// sum + sx * float(x - zx), strict; Onnx's global path sum + x.
Halide::Expr average_pool_accumulate(const Layer& L, Halide::Expr sum, Halide::Expr x);
// The output from the finished sum and the number of counted taps `count` (Int(32)), clamped to
// activation_range(L).
Halide::Expr average_pool_quantized(const Layer& L, Halide::Expr sum, Halide::Expr count);

// reference_integer_ops AveragePool: sum (of the integers) > 0 ? (sum + count / 2) / count :
// (sum - count / 2) / count in C's truncating division.
Halide::Expr average_pool_tflite(Halide::Expr sum, Halide::Expr count);
// QLinearAveragePool's float path: nearbyint(sum / float(count) / sy + float(zy)) (sum the float
// sum of dequantized taps), saturated as x86 does it: a value past int32 (cvttss2si's INT32_MIN)
// gives the dtype's minimum.
Halide::Expr average_pool_onnx(Halide::Expr sum, Halide::Expr count, const QuantParams& out,
                               DType dtype);

// ---- Add: int32 inputs (each in its dtype's range), the final clamped int32.
// Tflite (kernels/add.cc, reference_integer_ops::Add): left shift 20, multipliers s_i / (2 max s)
// and 2 max s / (2^20 sy); ONNX Runtime: MLAS's AVX2 QLinearAdd kernel (float ratios and fma).
// Throws std::invalid_argument where the peer refuses the scales. `native_fma`: the target's
// (native_fma); without it the fmas are emulated in double.
Halide::Expr add_quantized(const Layer& L, Halide::Expr x0, Halide::Expr x1, bool native_fma);

// ---- Mul: int32 inputs, the final clamped int32. ONNX Runtime's QLinearMul (onnx_mul_ratio).
Halide::Expr mul_quantized(const Layer& L, Halide::Expr x0, Halide::Expr x1);

// Whether an ONNX-mode add of these scales and zero points computes each of its two fmas exactly
// with a double multiply-add and one rounding to float: every product and sum of an input in
// [-255, 255] with its ratio and the float it is added to fits in double's 53 bits, so the double
// result is exact and its rounding to float is the fma's. Else add_quantized emulates the fmas
// (fused_multiply_add), several times the work. Both only where the target has no native fma.
bool onnx_add_exact_in_double(const Layer& L);

}  // namespace padfold
