// Max and average pools, float and quantized (builders.h).
#include <limits>
#include <vector>

#include "algorithm/access.h"
#include "algorithm/builders.h"
#include "algorithm/requantize.h"

namespace padfold {

using namespace Halide;

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

Expr pool_tap(Algorithm& a, const Layer& L, Border border, Expr value, std::vector<Expr>& pos) {
  a.bordered = apply_border(a, L, border, value);
  a.r = make_rdom(L, 1);
  Expr rc;
  std::vector<Expr> rk;
  split_rdom(a.r, 1, rc, rk);
  pos = tap_positions(a, L, rk);
  return a.bordered(tensor_args(L.layout, a.c, pos, a.n));
}

Expr counted_taps(Algorithm& a, const Layer& L, bool ignored) {
  // The count is separable: per axis, tabulated once.
  Expr count = 1;
  const size_t D = L.in_spatial.size();
  for (size_t j = 0; j < D; ++j) {
    const size_t ax = axis_of(j, D);
    const AxisParams p = L.axes()[ax];
    const CountedRange counted = counted_positions(p, L.pads.axes[ax], ignored);
    const int lo = static_cast<int>(counted.lo), hi = static_cast<int>(counted.hi);
    Var x("x");
    RDom k(0, static_cast<int>(p.kernel), L.name + "_count_k" + std::to_string(j));
    const Expr tap = tap_position<Expr>(x, k, p.stride, L.pads.axes[ax].before, p.dilation);
    Func axis_count(L.name + "_count" + std::to_string(j));
    axis_count(x) = 0;
    axis_count(x) += select(tap >= lo && tap < hi, 1, 0);
    a.helpers.push_back(axis_count);
    count = count * axis_count(a.spatial[j]);
  }
  return count;
}

}  // namespace

void build_max_pool(Algorithm& a, const Layer& L) {
  // Padding that is ignored (pool_ignores_padding) reads as the lowest value: it never wins.
  const bool excluded = L.ignores_padding();
  const Expr lowest = L.quantized() ? element_type(L).min() : Expr(kNegInf);
  std::vector<Expr> pos;
  const Expr x = pool_tap(a, L, excluded ? Border::Constant : L.border,
                          excluded ? lowest : border_fill(L), pos);
  a.reduce(a.vars) = lowest;
  a.reduce(a.vars) = max(a.reduce(a.vars), select(inside_padding(L, pos), x, lowest));
  if (L.quantized()) {
    const auto [lo, hi] = activation_range(L);
    a.output(a.vars) = cast(element_type(L), clamp(cast<int32_t>(a.reduce(a.vars)), lo, hi));
  }
}

void build_avg_pool(Algorithm& a, const Layer& L) {
  // Padding that is ignored (pool_ignores_padding) adds nothing and is not counted.
  const bool ignored = L.ignores_padding();
  std::vector<Expr> pos;
  const Expr count = counted_taps(a, L, ignored);
  if (L.quantized()) {
    // The taps summed as the peer sums them (average_pool_accumulate), in the window's row-major
    // order (the RDom's). An ignored tap adds integer 0 to TFLite's sum of integers, and the zero
    // point (0.0) to ONNX Runtime's float sum of dequantized taps.
    const bool float_sum = L.quant->requantize == Requantize::Onnx && !average_pool_onnx_global(L);
    const Expr nothing = cast(element_type(L), float_sum ? L.quant->inputs[0].zero_point : 0);
    const Expr x =
        pool_tap(a, L, ignored ? Border::Zeros : L.border, ignored ? nothing : border_fill(L), pos);
    a.reduce(a.vars) = average_pool_zero(L);
    const Expr sum = a.reduce(a.vars);
    a.reduce(a.vars) = select(inside_padding(L, pos), average_pool_accumulate(L, sum, x), sum);
    a.output(a.vars) = cast(element_type(L), average_pool_quantized(L, a.reduce(a.vars), count));
    return;
  }
  const Expr x =
      pool_tap(a, L, ignored ? Border::Zeros : L.border, ignored ? Expr(0.f) : border_fill(L), pos);
  a.reduce(a.vars) = 0.f;
  a.reduce(a.vars) += select(inside_padding(L, pos), x, 0.f);
  a.output(a.vars) = a.reduce(a.vars) / cast<float>(count);
}

}  // namespace padfold
