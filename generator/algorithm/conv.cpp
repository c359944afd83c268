// Convolutions and transposed convolutions, float and quantized (builders.h).
#include <stdexcept>
#include <string>
#include <vector>

#include "algorithm/access.h"
#include "algorithm/builders.h"
#include "algorithm/requantize.h"
#include "algorithm/winograd.h"

namespace padfold {

using namespace Halide;

namespace {

bool dot_product_conv(const Layer& L) {
  return L.quantized() && L.op == Op::Conv && L.layout.channels_last;
}

}  // namespace

bool quantized_dot_product(const Layer& L) {
  return dot_product_conv(L) && (L.groups == 1 || (L.in_channels / L.groups) % 4 == 0);
}

int64_t reduction_channels(const Layer& L) {
  if (!L.has_weights()) return 1;
  const int64_t per_group = L.in_channels / L.groups;
  return dot_product_conv(L) && L.groups == 1 ? (per_group + 3) / 4 * 4 : per_group;
}

DotOperands dot_operands(const Target& target) {
  return target.arch == Target::ARM ? DotOperands::I8xI8 : DotOperands::U8xI8;
}

int32_t dot_zero_point(const Layer& L, DotOperands dot) {
  const bool want_signed = dot == DotOperands::I8xI8;
  const int32_t zx = L.quant->inputs[0].zero_point;
  if ((L.dtype == DType::I8) == want_signed) return zx;
  return want_signed ? zx - 128 : zx + 128;
}

namespace {

// The bordered input as the conv's reduction reads it: in the type the target's dot-product
// instructions take (a.dot; uint8 and int8 convert by flipping the top bit, that is offsetting by
// 128, and the zero point moves with them), over reduction_channels. A Func of its own replacing
// a.bordered, so that a schedule staging the bordered input stages it flipped (read at every tap,
// the flip cost an instruction per multiply-add). Returns the input zero point in that type.
int32_t dot_input(Algorithm& a, const Layer& L) {
  const bool want_signed = a.dot == DotOperands::I8xI8;
  const bool flip = (L.dtype == DType::I8) != want_signed;
  const int32_t zx = dot_zero_point(L, a.dot);
  const bool padded = reduction_channels(L) != L.in_channels / L.groups;
  if (!flip && !padded) return zx;
  const std::vector<Var> args = a.bordered.args();
  std::vector<Expr> at(args.begin(), args.end());
  // Channels past the input's (reduction_channels) read its last channel again; their weight is 0
  // (dot_weights), so they add nothing to either sum.
  const int ch = L.layout.channels_last ? 0 : L.spatial_dims;
  if (padded) at[ch] = min(at[ch], static_cast<int>(L.in_channels) - 1);
  Expr x = a.bordered(at);
  if (flip && want_signed) x = reinterpret<int8_t>(x ^ cast<uint8_t>(128));
  if (flip && !want_signed) x = reinterpret<uint8_t>(x) ^ cast<uint8_t>(128);
  Func read(L.name + "_dot_input");
  read(args) = x;
  a.bordered = read;
  return zx;
}

// A quantized conv's output from its accumulator (bias and zero point's term in): requantized, and
// with a residual add in its epilogue the add's arithmetic, the conv's integers in their place
// among the add's inputs.
Expr quantized_output(const Algorithm& a, const Layer& L, const Expr& acc) {
  Expr y = requantize_conv(L, acc, a.c);
  if (a.residual) {
    const Expr other = cast<int32_t>(a.addend(a.vars));
    y = a.residual->inputs[0] == L.name ? add_quantized(*a.residual, y, other, a.native_fma)
                                        : add_quantized(*a.residual, other, y, a.native_fma);
  }
  return cast(element_type(L), y);
}

// sum (x - zx) * w as sum x * w - zx * sum w, x and zx in the dot-product type
// (dot_input). The weights' sums per output channel are tabulated once per call, or folded into
// the bias by the compile (WeightForm::zero_point_in_bias). Every
// tap is counted, so the identity holds at the border too: a padded tap reads the zero point
// under zeros (x = zx, adding zx * w to both terms), and a value under the other borders.
// Subtracting zx * sum w only where the window is inside (apache/tvm#13364) would be wrong there.
// x and w: the tap's input (bordered, flipped) and weight at reduction channel rc and taps rk.
void build_quantized_conv(Algorithm& a, const Layer& L, const Expr& x, Expr w, int32_t zx,
                          const Expr& rc, const std::vector<Expr>& rk) {
  const int64_t in_per_group = L.in_channels / L.groups;
  const int D = static_cast<int>(L.in_spatial.size());
  const bool dot = quantized_dot_product(L);
  // The table is the weights buffer where the compile prepared it (WeightForm::dot_table).
  Func table;
  if (dot && a.weight_form.dot_table) {
    table = a.weights;
  } else if (dot) {
    table = a.dot_weights = define_dot_table(L, a.weights);
    a.helpers.push_back(table);
  }
  const auto table_at = [](const Expr& c, const Expr& o, const std::vector<Expr>& k) {
    std::vector<Expr> at{c % 4, o, c / 4};
    at.insert(at.end(), k.begin(), k.end());
    return at;
  };
  if (dot) w = table(table_at(rc, a.c, rk));
  a.reduce(a.vars) = 0;
  a.reduce(a.vars) += cast<int32_t>(x) * cast<int32_t>(w);

  if (a.weight_form.zero_point_in_bias) {
    const int32_t folded = a.weight_form.folded_zero_point;
    if (folded != zx || !L.bias)
      throw std::logic_error("layer '" + L.name + "': its bias folds zero point " +
                             std::to_string(folded) + ", its products see " + std::to_string(zx));
    a.output(a.vars) = quantized_output(a, L, a.reduce(a.vars) + a.bias(a.c));
    return;
  }
  // The dot products sum their own table (the padded channels' weights are 0 there): its output
  // channels are dense whatever the weights' layout, so a schedule can vectorize across them.
  const int64_t summed = dot ? reduction_channels(L) : in_per_group;
  const RDom rw = make_rdom(L, summed, "_rw");
  Expr wc;
  std::vector<Expr> wk;
  split_rdom(rw, summed, wc, wk);
  Func weight_sum(L.name + kWeightSumStage);
  weight_sum(a.c) = 0;
  weight_sum(a.c) += cast<int32_t>(dot ? table(table_at(wc, a.c, wk))
                                       : a.weights(weight_args(L.weight_layout, D, a.c, wc, wk)));
  a.weight_sum = weight_sum;
  a.helpers.push_back(weight_sum);

  Expr acc = a.reduce(a.vars) - zx * weight_sum(a.c);
  if (L.bias) acc = acc + a.bias(a.c);
  a.output(a.vars) = quantized_output(a, L, acc);
}

}  // namespace

void build_conv(Algorithm& a, const Layer& L) {
  const size_t D = L.in_spatial.size();
  const int64_t in_per_group = L.in_channels / L.groups;
  const int64_t out_per_group = L.out_channels / L.groups;
  a.bordered = apply_border(a, L, L.border, border_fill(L));
  const int32_t zx = L.quantized() ? dot_input(a, L) : 0;
  a.r = make_rdom(L, reduction_channels(L));
  Expr rc;
  std::vector<Expr> rk;
  split_rdom(a.r, reduction_channels(L), rc, rk);

  Expr ic = rc;
  if (L.groups > 1)
    ic = (a.c / static_cast<int>(out_per_group)) * static_cast<int>(in_per_group) + rc;
  const Expr x = a.bordered(tensor_args(L.layout, ic, tap_positions(a, L, rk), a.n));
  const std::vector<Expr> w_at = weight_args(L.weight_layout, static_cast<int>(D), a.c, rc, rk);
  const Expr w = a.weight_form.dot_table       ? Expr()  // the table, build_quantized_conv
                 : a.blocked_weights.defined() ? a.blocked_weights(w_at)
                                               : a.weights(w_at);
  if (L.quantized()) {
    build_quantized_conv(a, L, x, w, zx, rc, rk);
    return;
  }
  if (a.pixel_runs) {
    // The same product at pixel p of the output plane: x = p % W, y = p / W.
    const Var p("p");
    const Expr W = static_cast<int>(L.out_spatial[1]);
    Expr term = Internal::substitute(a.spatial[0].name(), p % W, x * w);
    term = Internal::substitute(a.spatial[1].name(), p / W, term);
    a.reduce(a.c, p, a.n) = 0.f;
    a.reduce(a.c, p, a.n) += term;
    return;
  }
  a.reduce(a.vars) = 0.f;
  a.reduce(a.vars) += x * w;
}

void build_conv_transpose(Algorithm& a, const Layer& L) {
  const size_t D = L.in_spatial.size();
  const int64_t in_per_group = L.in_channels / L.groups;
  const int64_t out_per_group = L.out_channels / L.groups;
  // Taps that miss the input contribute nothing: a transposed convolution's pads crop its output,
  // so its border is zeros (validate_transposed_border).
  a.bordered = apply_border(a, L, Border::Zeros, 0.f);
  a.r = make_rdom(L, in_per_group);
  Expr rc;
  std::vector<Expr> rk;
  split_rdom(a.r, in_per_group, rc, rk);

  const Expr group = a.c / static_cast<int>(out_per_group);
  const Expr ic = group * static_cast<int>(in_per_group) + rc;
  const Expr oc = a.c % static_cast<int>(out_per_group);
  // Input i reaches output y through tap k when i*stride == transposed_source_times_stride(y, k).
  Expr hits = Internal::const_true();
  std::vector<Expr> pos;
  for (size_t j = 0; j < D; ++j) {
    const size_t ax = axis_of(j, D);
    const int s = static_cast<int>(L.stride[ax]);
    const Expr num = transposed_source_times_stride<Expr>(a.spatial[j], rk[j],
                                                          L.pads.axes[ax].before, L.dilation[ax]);
    if (s > 1) hits = hits && (num % s == 0);
    pos.push_back(s > 1 ? num / s : num);
  }
  const Expr x = a.bordered(tensor_args(L.layout, ic, pos, a.n));
  const Expr w = a.weights(weight_args(L.weight_layout, static_cast<int>(D), oc, ic, rk));
  a.reduce(a.vars) = 0.f;
  a.reduce(a.vars) += select(hits, x * w, 0.f);
}

}  // namespace padfold
