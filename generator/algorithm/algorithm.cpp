#include "algorithm/algorithm.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>

#include "algorithm/access.h"
#include "algorithm/requantize.h"
#include "algorithm/winograd.h"
#include "base/enum_names.h"

namespace padfold {

using namespace Halide;

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Fixes a buffer's bounds and dense row-major strides (shape is outermost first).
void fix_shape(OutputImageParam param, const std::vector<int64_t>& shape) {
  int64_t stride = 1;
  const int rank = static_cast<int>(shape.size());
  for (int i = 0; i < rank; ++i) {
    const int64_t extent = shape[rank - 1 - i];
    param.dim(i).set_bounds(0, static_cast<int>(extent)).set_stride(static_cast<int>(stride));
    stride *= extent;
  }
}

// Spatial index j of Halide (innermost first) is axis D-1-j of the layer (outermost first).
size_t axis_of(size_t j, size_t dims) {
  return dims - 1 - j;
}

// The spatial extent of the input in Halide dimension order (channel and batch unbounded): the
// buffer's, or the fixed input shape of a fused block's intermediate.
Region spatial_region(const TensorLayout& layout, const std::function<Range(int)>& spatial_range) {
  Region region;
  const int rank = layout.spatial_dims + 2;
  for (int d = 0; d < rank; ++d) {
    const bool is_channel = layout.channels_last ? d == 0 : d == layout.spatial_dims;
    const bool is_batch = d == rank - 1;
    region.push_back(is_channel || is_batch ? Range() : spatial_range(d));
  }
  return region;
}

template <typename Source>
Func bounded(const Source& in, const Region& region, Border border, Expr value) {
  switch (border) {
    case Border::Zeros:
    case Border::Constant:  // the caller's value: zero, the constant, or a zero point
      return BoundaryConditions::constant_exterior(in, value, region);
    case Border::Reflect:
      return BoundaryConditions::mirror_interior(in, region);
    case Border::Symmetric:
      return BoundaryConditions::mirror_image(in, region);
    case Border::Replicate:
      return BoundaryConditions::repeat_edge(in, region);
    case Border::Circular:
      return BoundaryConditions::repeat_image(in, region);
  }
  return Func();
}

// A relayout_input layer's bordered input, which lies in input_layout, seen in the layer's own
// layout: the change of layout costs an index permutation, no copy.
Func in_own_layout(const Func& in, const Layer& L) {
  const Var c("c"), n("n");
  std::vector<Expr> sp;
  for (int j = 0; j < L.spatial_dims; ++j) sp.push_back(Var("s" + std::to_string(j)));
  Func f(L.name + "_relaid");
  f(tensor_args(L.layout, c, sp, n)) = in(tensor_args(L.input_layout, c, sp, n));
  return f;
}

// The border written out as clamps and selects on the input buffer (for GPU schedules, which
// stage this Func: the likely() tags of Halide's BoundaryConditions make Halide partition the
// staging loops). Reads stay inside the buffer; zeros and constants select the value. The
// mirrored coordinates are clamped too, though they never leave [0, e): Halide's bounds of a
// select span both branches, so without it a staged tile would claim rows past the buffer.
Func explicit_border(const ImageParam& in, const Layer& L, Border border, Expr value) {
  const std::vector<int64_t> shape = L.input_shape();
  const int rank = in.dimensions();
  std::vector<Var> args;
  std::vector<Expr> coords;
  Expr inside = Internal::const_true();
  for (int d = 0; d < rank; ++d) {
    args.push_back(Var("b" + std::to_string(d)));
    const bool spatial =
        L.read_layout().channels_last ? d >= 1 && d <= L.spatial_dims : d < L.spatial_dims;
    const Expr x = args.back();
    if (!spatial) {
      coords.push_back(x);
      continue;
    }
    const int e = static_cast<int>(shape[static_cast<size_t>(rank - 1 - d)]);
    switch (border) {
      case Border::Zeros:
      case Border::Constant:
        inside = inside && x >= 0 && x < e;
        coords.push_back(clamp(x, 0, e - 1));
        break;
      case Border::Replicate:
        coords.push_back(clamp(x, 0, e - 1));
        break;
      case Border::Circular:
        coords.push_back(x % e);  // Halide's % of an int is never negative
        break;
      case Border::Symmetric: {  // edge repeated: period 2e
        const Expr m = x % (2 * e);
        coords.push_back(clamp(select(m < e, m, 2 * e - 1 - m), 0, e - 1));
        break;
      }
      case Border::Reflect: {  // edge not repeated: period 2e - 2
        if (e == 1) {
          coords.push_back(0);
          break;
        }
        const Expr m = x % (2 * e - 2);
        coords.push_back(clamp(select(m < e, m, 2 * e - 2 - m), 0, e - 1));
        break;
      }
    }
  }
  Func f(L.name + "_bordered");
  const bool selects = border == Border::Zeros || border == Border::Constant;
  f(args) = selects ? select(inside, in(coords), value) : in(coords);
  return f;
}

}  // namespace

// Builds arguments in a tensor's Halide dimension order from logical channel, spatial
// (innermost first) and batch expressions.
std::vector<Expr> tensor_args(const TensorLayout& layout, Expr ch, const std::vector<Expr>& sp,
                              Expr batch) {
  std::vector<Expr> args;
  if (layout.channels_last) args.push_back(ch);
  for (const Expr& e : sp) args.push_back(e);
  if (!layout.channels_last) args.push_back(ch);
  args.push_back(batch);
  return args;
}

// Builds arguments in the weight buffer's Halide order (reverse of the layout letters).
std::vector<Expr> weight_args(const WeightLayout& layout, int dims, Expr o, Expr i,
                              const std::vector<Expr>& k) {
  std::vector<Expr> args;
  const std::string& order = layout.order;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (*it == 'O') {
      args.push_back(o);
    } else if (*it == 'I') {
      args.push_back(i);
    } else {
      const int outer_index = static_cast<int>(spatial_letters(dims).find(*it));
      args.push_back(k[axis_of(static_cast<size_t>(outer_index), static_cast<size_t>(dims))]);
    }
  }
  return args;
}

namespace {

// The layer's input through `border` in the layout it lies in (read_layout), infinite along
// spatial axes: its buffer, or in a fused block the producer's Func over its output extent.
Func border_as_read(const Algorithm& a, const Layer& L, Border border, Expr value) {
  if (a.explicit_border && !a.source.defined()) return explicit_border(a.input, L, border, value);
  const TensorLayout& layout = L.read_layout();
  if (a.source.defined()) {
    const std::vector<int64_t> shape = L.input_shape();
    return bounded(
        a.source,
        spatial_region(
            layout, [&](int d) { return Range(0, static_cast<int>(shape[shape.size() - 1 - d])); }),
        border, value);
  }
  const ImageParam& in = a.input;
  return bounded(
      in, spatial_region(layout, [&](int d) { return Range(in.dim(d).min(), in.dim(d).extent()); }),
      border, value);
}

}  // namespace

// The layer's input seen through `border` in the layer's own layout.
Func apply_border(const Algorithm& a, const Layer& L, Border border, Expr value) {
  const Func bordered = border_as_read(a, L, border, value);
  return L.relayout_input ? in_own_layout(bordered, L) : bordered;
}

namespace {

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
  }
  return v;
}

// Reduction domain: input channels of a group (when more than one), then kernel taps innermost
// spatial axis first.
RDom make_rdom(const Layer& L, int64_t channels, const std::string& suffix = "_r") {
  Region dom;
  if (channels > 1) dom.emplace_back(0, static_cast<int>(channels));
  for (size_t j = 0; j < L.kernel.size(); ++j)
    dom.emplace_back(0, static_cast<int>(L.kernel[axis_of(j, L.kernel.size())]));
  return RDom(dom, L.name + suffix);
}

void split_rdom(const RDom& r, int64_t channels, Expr& rc, std::vector<Expr>& rk) {
  int next = 0;
  rc = channels > 1 ? Expr(r[next++]) : Expr(0);
  for (; next < r.dimensions(); ++next) rk.push_back(r[next]);
}

std::vector<Expr> tap_positions(const Algorithm& a, const Layer& L, const std::vector<Expr>& rk) {
  std::vector<Expr> pos;
  const size_t D = L.in_spatial.size();
  for (size_t j = 0; j < D; ++j) {
    const size_t ax = axis_of(j, D);
    pos.push_back(tap_position<Expr>(a.spatial[j], rk[j], L.stride[ax], L.pads.axes[ax].before,
                                     L.dilation[ax]));
  }
  return pos;
}

Expr inside_padding(const Layer& L, const std::vector<Expr>& pos) {
  Expr ok = Internal::const_true();
  const size_t D = L.in_spatial.size();
  const std::vector<AxisParams> axes = L.axes();
  for (size_t j = 0; j < D; ++j) {
    const size_t ax = axis_of(j, D);
    const AxisPads& p = L.pads.axes[ax];
    if (last_window_overhangs(axes[ax], p))
      ok = ok && pos[j] < static_cast<int>(axes[ax].input + p.after);
  }
  return ok;
}

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
    // Taps on the input (less its crops, negative pads) or, counted, on its padding too.
    const AxisPads& pads = L.pads.axes[ax];
    const int lo = static_cast<int>(ignored ? std::max<int64_t>(0, -pads.before) : -pads.before);
    const int hi =
        static_cast<int>(p.input + (ignored ? std::min<int64_t>(0, pads.after) : pads.after));
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

Expr border_fill(const Layer& L) {
  if (L.quantized()) {
    const QuantParams& in = L.quant->inputs[0];
    const Halide::Type t = L.dtype == DType::U8 ? UInt(8) : Int(8);
    return cast(t, L.border == Border::Constant
                       ? quantize_value(L.border_value, in, L.dtype, L.quant->requantize)
                       : in.zero_point);
  }
  return L.border == Border::Constant ? L.border_value : 0.f;
}

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
    a.output(a.vars) =
        cast(element_type(L), requantize_conv(L, a.reduce(a.vars) + a.bias(a.c), a.c));
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
  a.output(a.vars) = cast(element_type(L), requantize_conv(L, acc, a.c));
}

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

void build_add(Algorithm& a) {
  const Layer& L = *a.layer;
  if (L.quantized()) {
    a.output(a.vars) = cast(element_type(L), add_quantized(L, cast<int32_t>(a.inputs[0](a.vars)),
                                                           cast<int32_t>(a.inputs[1](a.vars))));
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
  a.output(a.vars) = activate(a.inputs[0](a.vars) * a.inputs[1](scale_args), L);
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

// Output axis k is input axis perm[k] (outermost first); Halide's orders are the reverse.
void build_transpose(Algorithm& a) {
  const Layer& L = *a.layer;
  const size_t rank = L.perm.size();
  std::vector<Expr> args(rank);
  for (size_t k = 0; k < rank; ++k)
    args[rank - 1 - static_cast<size_t>(L.perm[k])] = a.vars[rank - 1 - k];
  a.output(a.vars) = a.input(args);
}

// Output channel k reads input channel channels[k]: at an offset and step where the channels are a
// run (a Split or Slice: plain loads, and bounds inference asks for the run alone), else through a
// table embedded in the kernel, its entries promised inside the input.
void build_gather_channels(Algorithm& a) {
  const Layer& L = *a.layer;
  const std::vector<int64_t>& ch = L.channels;
  const int64_t step = ch.size() > 1 ? ch[1] - ch[0] : 1;
  bool run = true;
  for (size_t k = 0; k < ch.size(); ++k)
    run = run && ch[k] == ch[0] + step * static_cast<int64_t>(k);
  Expr source;
  if (run) {
    source = a.c * static_cast<int>(step) + static_cast<int>(ch[0]);
  } else {
    Buffer<int32_t> table(static_cast<int>(ch.size()), L.name + "_channels");
    for (size_t k = 0; k < ch.size(); ++k) table(static_cast<int>(k)) = static_cast<int32_t>(ch[k]);
    source = unsafe_promise_clamped(table(a.c), 0, static_cast<int>(L.in_channels) - 1);
  }
  // a.vars is c, W, H, (D,) n channels last, else W, H, (D,) c, n.
  std::vector<Expr> at(a.vars.begin(), a.vars.end());
  at[L.layout.channels_last ? 0 : L.in_spatial.size()] = source;
  a.output(a.vars) = a.input(at);
}

// Each spatial axis reads through a table of its taps (padding/resize.h's resize_taps, computed
// here for the fixed sizes and embedded in the kernel): nearest one index, linear two indices and
// their weights, clamped to the input, so the edge is folded in and no read leaves the input.
// Linear sums the 2^dims neighbours, the outermost axis's first neighbour first, as ONNX Runtime
// does.
void build_resize(Algorithm& a) {
  const Layer& L = *a.layer;
  const size_t dims = L.in_spatial.size();
  const bool linear = L.resize.mode == ResizeMode::Linear;
  std::vector<Buffer<int32_t>> index;  // per axis, outermost first: (output index, neighbour)
  std::vector<Buffer<float>> weight;
  std::vector<size_t> var_of;  // the position of the axis's Var in a.vars
  for (size_t i = 0; i < dims; ++i) {
    const std::vector<ResizeTap> taps = resize_taps(L.resize, i, L.in_spatial[i]);
    const int out = static_cast<int>(taps.size());
    const std::string axis = L.name + "_" + std::string(1, spatial_letters(L.spatial_dims)[i]);
    Buffer<int32_t> ix(out, 2, axis + "_taps");
    Buffer<float> w(out, 2, axis + "_weights");
    for (int x = 0; x < out; ++x) {
      const ResizeTap& t = taps[static_cast<size_t>(x)];
      ix(x, 0) = static_cast<int32_t>(t.first);
      ix(x, 1) = static_cast<int32_t>(t.second);
      w(x, 0) = t.first_weight;
      w(x, 1) = t.second_weight;
    }
    index.push_back(ix);
    weight.push_back(w);
    // a.vars is (c,) W, H, (D,) (c,) n: spatial axis i (outermost first) is the (dims - 1 - i)th.
    var_of.push_back(dims - 1 - i + (L.layout.channels_last ? 1 : 0));
  }
  const int corners = linear ? 1 << dims : 1;
  Expr sum;
  for (int corner = 0; corner < corners; ++corner) {
    std::vector<Expr> at(a.vars.begin(), a.vars.end());
    Expr w;
    for (size_t k = dims; k-- > 0;) {  // innermost axis first: x's weight times y's
      const int side = (corner >> (dims - 1 - k)) & 1;
      const Expr v = a.vars[var_of[k]];
      // The table holds indices inside the input: promised, so bounds are the input's.
      at[var_of[k]] =
          unsafe_promise_clamped(index[k](v, side), 0, static_cast<int>(L.in_spatial[k]) - 1);
      if (linear) w = w.defined() ? w * weight[k](v, side) : weight[k](v, side);
    }
    const Expr term = linear ? w * a.input(at) : a.input(at);
    sum = sum.defined() ? sum + term : term;
  }
  a.output(a.vars) = sum;
}

// The edges of a quantized model: float32 -> int8/uint8 and back, element by element.
void build_quantize(Algorithm& a) {
  a.output(a.vars) = quantize_element(*a.layer, a.input(a.vars));
}

void build_dequantize(Algorithm& a) {
  a.output(a.vars) = dequantize_element(*a.layer, a.input(a.vars));
}

// One update per input, writing its channel block (the pure definition writes nothing): each
// element is read once, from its own input, where a select over the inputs read every input,
// clamped, for every output element (a gather per input and vector: 20x a copy at 24 inputs).
void build_concat(Algorithm& a) {
  const Layer& L = *a.layer;
  const size_t ch = L.layout.channels_last ? 0 : a.vars.size() - 2;  // Halide order
  a.output(a.vars) = undef(a.inputs[0].type());
  int start = 0;
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    const int channels = static_cast<int>(L.input_channels[i]);
    const RDom r(0, channels, L.name + "_in" + std::to_string(i));
    std::vector<Expr> at(a.vars.begin(), a.vars.end()), from = at;
    at[ch] = r.x + start;
    from[ch] = r.x;
    a.output(at) = a.inputs[i](from);
    start += channels;
  }
}

constexpr EnumName<pf_role> kRoleNames[] = {{PF_ROLE_INPUT, "input"},
                                            {PF_ROLE_WEIGHTS, "weights"},
                                            {PF_ROLE_BIAS, "bias"},
                                            {PF_ROLE_OUTPUT, "output"}};

}  // namespace

std::vector<VarOrRVar> concat_loops(const Algorithm& a, int u) {
  const RVar r = a.output.rvars(u)[0];
  std::vector<VarOrRVar> loops;
  for (const Var& v : a.vars) loops.push_back(v.name() == a.c.name() ? VarOrRVar(r) : VarOrRVar(v));
  return loops;
}

const char* role_name(pf_role role) {
  const char* name = find_name(kRoleNames, role);
  if (!name)
    throw std::logic_error("no name for buffer role " + std::to_string(static_cast<int>(role)));
  return name;
}

Halide::Type halide_type(pf_dtype dtype) {
  switch (dtype) {
    case PF_F32:
      return Float(32);
    case PF_F16:
      return Float(16);
    case PF_I8:
      return Int(8);
    case PF_U8:
      return UInt(8);
    case PF_I32:
      return Int(32);
  }
  throw std::logic_error("no Halide type for dtype " + std::to_string(static_cast<int>(dtype)));
}

Halide::Type element_type(const Layer& L) {
  return halide_type(pf_dtype_of(L.output_dtype()));
}

std::vector<BufferInfo> buffer_infos(const Layer& L, const WeightForm& weights) {
  const pf_dtype act = pf_dtype_of(L.input_dtype());
  const bool q = L.quantized();
  std::vector<BufferInfo> out;
  if (L.is_join()) {
    for (size_t i = 0; i < L.inputs.size(); ++i)
      out.push_back({"input" + std::to_string(i), PF_ROLE_INPUT, L.layout.name(), L.input_shape(i),
                     L.name, act});
  } else {
    out.push_back({"input", PF_ROLE_INPUT, L.read_layout().name(), L.input_shape(), L.name, act});
  }
  if (L.has_weights())
    out.push_back({"weights", PF_ROLE_WEIGHTS, weight_form_layout(L, weights),
                   weight_form_shape(L, weights), L.name, q ? PF_I8 : PF_F32});
  if (L.bias)
    out.push_back({"bias",
                   PF_ROLE_BIAS,
                   bias_form_layout(weights),
                   {L.out_channels},
                   L.name,
                   q ? PF_I32 : PF_F32});
  out.push_back({"output", PF_ROLE_OUTPUT, L.layout.name(), L.output_shape_full(), L.name,
                 pf_dtype_of(L.output_dtype())});
  return out;
}

std::vector<BufferInfo> preparation_buffers(const Layer& L, const WeightForm& form) {
  const pf_dtype dtype = L.quantized() ? PF_I8 : PF_F32;
  return {{"weights", PF_ROLE_INPUT, weight_form_layout(L, {}), weight_form_shape(L, {}), L.name,
           dtype},
          {"prepared", PF_ROLE_OUTPUT, weight_form_layout(L, form), weight_form_shape(L, form),
           L.name, dtype}};
}

BufferInfo residual_buffer(const Layer& add) {
  return {"residual", PF_ROLE_INPUT, add.layout.name(), add.output_shape_full(), add.name, PF_F32};
}

bool pixel_runs_apply(const Layer& L) {
  if (L.op != Op::Conv || L.dtype != DType::F32 || L.groups != 1 || !L.layout.channels_last ||
      L.spatial_dims != 2 || L.relayout_input)
    return false;
  for (int64_t k : L.kernel)
    if (k != 1) return false;
  // No padding: every pixel reads inside the input (a stride may leave its last rows unread).
  for (const AxisPads& p : L.pads.axes)
    if (p.before != 0 || p.after > 0) return false;
  return true;
}

Algorithm build_algorithm(const Layer& L, const AlgorithmVariant& variant, const Func& source) {
  const Layer* residual = variant.residual;
  const int winograd_m = variant.winograd_m;
  if (L.dtype != DType::F32 && !L.quantized())
    throw std::runtime_error("layer '" + L.name + "': " + to_string(L.dtype) +
                             " kernels are not generated (float32, int8 and uint8 are)");
  if (L.quantized() && (source.defined() || residual || winograd_m > 0))
    throw std::logic_error("layer '" + L.name + "': a quantized layer is its own kernel");
  if (source.defined() && L.is_join())
    throw std::logic_error("layer '" + L.name + "': add, mul and concat are not fused");
  if (residual && (L.op != Op::Conv || residual->op != Op::Add))
    throw std::logic_error("layer '" + L.name + "': only a conv takes a residual add");
  const WeightForm& form = variant.weights;
  if ((form.winograd_m > 0 && form.winograd_m != winograd_m) ||
      (form.dot_table && !quantized_dot_product(L)) ||
      (form.block_channels > 0 &&
       (winograd_m > 0 || !blocked_weights_apply(L, form.block_channels))))
    throw std::logic_error("layer '" + L.name + "': its weights are prepared for another kernel");
  Algorithm a;
  a.layer = &L;
  a.source = source;
  a.explicit_border = variant.explicit_border;
  a.dot = variant.dot;
  for (const BufferInfo& b : buffer_infos(L, variant.weights)) {
    if (source.defined() && b.role == PF_ROLE_INPUT) continue;  // the producer's Func instead
    BufferParam bp{b, {}};
    if (b.role != PF_ROLE_OUTPUT) {
      bp.param =
          ImageParam(halide_type(b.dtype), static_cast<int>(b.shape.size()), L.name + "_" + b.name);
      fix_shape(bp.param, b.shape);
      (b.role == PF_ROLE_INPUT     ? a.input
       : b.role == PF_ROLE_WEIGHTS ? a.weights
                                   : a.bias) = bp.param;
      if (b.role == PF_ROLE_INPUT) a.inputs.push_back(bp.param);
    }
    a.buffers.push_back(bp);
  }
  if (variant.pixel_runs && (!pixel_runs_apply(L) || winograd_m > 0 || source.defined()))
    throw std::logic_error("layer '" + L.name + "': not a conv computed as runs of pixels");
  a.pixel_runs = variant.pixel_runs;
  a.weight_form = form;
  if (form.block_channels > 0)
    a.blocked_weights = blocked_weights_view(L, form.block_channels, a.weights);

  a.c = Var("c");
  a.n = Var("n");
  const char* names[] = {"x", "y", "z"};
  for (int j = 0; j < L.spatial_dims; ++j) a.spatial.emplace_back(names[j]);
  if (L.layout.channels_last) a.vars.push_back(a.c);
  for (const Var& v : a.spatial) a.vars.push_back(v);
  if (!L.layout.channels_last) a.vars.push_back(a.c);
  a.vars.push_back(a.n);

  if (L.has_window()) a.reduce = Func(L.name + "_reduce");
  a.output = Func(L.name);
  ImageParam addend;
  if (residual) {  // before the output, as the buffers are in manifest order
    const BufferInfo b = residual_buffer(*residual);
    addend = ImageParam(Float(32), static_cast<int>(b.shape.size()), residual->name + "_residual");
    fix_shape(addend, b.shape);
    a.buffers.insert(a.buffers.end() - 1, BufferParam{b, addend});
    a.buffers.back().info = buffer_infos(*residual).back();  // the add's output
  }
  switch (L.op) {
    case Op::Conv:
      if (winograd_m > 0)
        build_winograd_conv(a, L, winograd_m, variant.weights.prepared());
      else
        build_conv(a, L);
      break;
    case Op::ConvTranspose:
      build_conv_transpose(a, L);
      break;
    case Op::MaxPool:
      build_max_pool(a, L);
      break;
    case Op::AvgPool:
      build_avg_pool(a, L);
      break;
    case Op::Add:
      build_add(a);
      break;
    case Op::Mul:
      build_mul(a);
      break;
    case Op::Softmax:
      build_softmax(a);
      break;
    case Op::Concat:
      build_concat(a);
      break;
    case Op::Quantize:
      build_quantize(a);
      break;
    case Op::Dequantize:
      build_dequantize(a);
      break;
    case Op::Transpose:
      build_transpose(a);
      break;
    case Op::Resize:
      build_resize(a);
      break;
    case Op::GatherChannels:
      build_gather_channels(a);
      break;
    case Op::LayerNorm:
      build_layer_norm(a);
      break;
  }
  if (!a.output.defined() && L.quantized()) {
    Expr acc = a.reduce(a.vars);
    if (L.bias) acc = acc + a.bias(a.c);
    a.output(a.vars) = cast(element_type(L), requantize_conv(L, acc, a.c));
  }
  if (!a.output.defined() && a.pixel_runs) {
    // Written pixel by pixel from the run: the output's rows are where a pixel lands, not what a
    // tile of the run covers (bounds through x = p % W and y = p / W would span whole rows).
    const int W = static_cast<int>(L.out_spatial[1]);
    a.pixels = RDom(0, static_cast<int>(L.out_spatial[0]) * W, L.name + "_pixels");
    const Expr p = a.pixels.x;
    const std::vector<Expr> at{a.c, p % W, p / W, a.n};
    Expr v = a.reduce(a.c, p, a.n);
    if (L.bias) v = v + a.bias(a.c);
    v = activate(v, L);
    if (residual) v = activate(v + addend(at), *residual);
    a.output(a.vars) = undef<float>();
    a.output(at) = v;
  }
  if (!a.output.defined()) {
    Expr v = a.reduce(a.vars);
    if (L.bias) v = v + a.bias(a.c);
    v = activate(v, L);
    if (residual) v = activate(v + addend(a.vars), *residual);
    a.output(a.vars) = v;
  }
  fix_shape(a.output.output_buffer(), L.output_shape_full());
  return a;
}

}  // namespace padfold
