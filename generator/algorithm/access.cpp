#include "algorithm/access.h"

#include <functional>
#include <string>
#include <vector>

#include "algorithm/requantize.h"

namespace padfold {

using namespace Halide;

void fix_shape(OutputImageParam param, const std::vector<int64_t>& shape) {
  int64_t stride = 1;
  const int rank = static_cast<int>(shape.size());
  for (int i = 0; i < rank; ++i) {
    const int64_t extent = shape[rank - 1 - i];
    param.dim(i).set_bounds(0, static_cast<int>(extent)).set_stride(static_cast<int>(stride));
    stride *= extent;
  }
}

size_t axis_of(size_t j, size_t dims) {
  return dims - 1 - j;
}

namespace {

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

RDom make_rdom(const Layer& L, int64_t channels, const std::string& suffix) {
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

}  // namespace padfold
