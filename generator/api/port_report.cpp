// padfold port's report: every convolution and pool of a resolved model, what its pads read as,
// and for the target framework its own padding option, the naive port and the exact fix.
#include "api/port_report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>

#include "api/port_emit.h"
#include "api/python_code.h"
#include "base/text.h"
#include "padding/padding.h"

namespace padfold {
namespace {

bool same_pads(const Resolved& a, const Resolved& b) {
  return pads_before(a) == pads_before(b) && pads_after(a) == pads_after(b) &&
         output_sizes(a) == output_sizes(b);
}
bool all_zero(const Resolved& r) {
  return std::all_of(r.axes.begin(), r.axes.end(),
                     [](const AxisPads& a) { return a.before == 0 && a.after == 0; });
}
bool symmetric(const Resolved& r) {
  return std::all_of(r.axes.begin(), r.axes.end(),
                     [](const AxisPads& a) { return a.before == a.after; });
}

// The layer resolved under another padding mode, or nothing where that mode does not apply.
std::optional<Resolved> resolve_as(const Layer& L, PadMode mode) {
  PaddingSpec spec;
  spec.mode = mode;
  try {
    if (L.op == Op::ConvTranspose) return resolve_transposed(spec, L.axes(), L.output_padding);
    return resolve_forward(spec, L.axes(), L.ceil_mode);
  } catch (const PaddingError&) {
    return std::nullopt;
  }
}

Resolved resolve_explicit(const Layer& L, const std::vector<int64_t>& before,
                          const std::vector<int64_t>& after) {
  std::vector<int64_t> onnx = before;
  onnx.insert(onnx.end(), after.begin(), after.end());
  const PaddingSpec spec = explicit_padding(onnx, L.spatial_dims);
  if (L.op == Op::ConvTranspose) return resolve_transposed(spec, L.axes(), {});
  return resolve_forward(spec, L.axes(), L.ceil_mode);
}

// Python literals as PyTorch and Keras take them: one value bare, else a tuple.
bool is_pool(const Layer& L) {
  return L.op == Op::MaxPool || L.op == Op::AvgPool;
}
bool dilated(const Layer& L) {
  return std::any_of(L.dilation.begin(), L.dilation.end(), [](int64_t d) { return d != 1; });
}

// The arguments every framework's layer call shares, in PyTorch's or Keras's spelling.
std::string window_args(const Layer& L, bool keras) {
  std::string s = fmt::format("kernel_size={}, {}={}", python_ints(L.kernel),
                              keras ? "strides" : "stride", python_ints(L.stride));
  if (dilated(L))
    s += fmt::format(", {}={}", keras ? "dilation_rate" : "dilation", python_ints(L.dilation));
  return s;
}

// A layer call as code: `cls(..., args)` for convs (their channels elided), `cls(args)` for pools.
std::string call(const Layer& L, const std::string& cls, const std::string& args) {
  return fmt::format("{}({}{})", cls, is_pool(L) ? "" : "..., ", args);
}

std::string torch_class(const Layer& L) {
  switch (L.op) {
    case Op::Conv:
      return fmt::format("nn.Conv{}d", L.spatial_dims);
    case Op::ConvTranspose:
      return fmt::format("nn.ConvTranspose{}d", L.spatial_dims);
    case Op::MaxPool:
      return fmt::format("nn.MaxPool{}d", L.spatial_dims);
    default:
      return fmt::format("nn.AvgPool{}d", L.spatial_dims);
  }
}
std::string keras_class(const Layer& L) {
  switch (L.op) {
    case Op::Conv:
      return L.groups > 1 && L.groups == L.in_channels && L.spatial_dims == 2
                 ? "layers.DepthwiseConv2D"
                 : fmt::format("layers.Conv{}D", L.spatial_dims);
    case Op::ConvTranspose:
      return fmt::format("layers.Conv{}DTranspose", L.spatial_dims);
    case Op::MaxPool:
      return fmt::format("layers.MaxPooling{}D", L.spatial_dims);
    default:
      return fmt::format("layers.AveragePooling{}D", L.spatial_dims);
  }
}

// PyTorch's padding_mode for a conv's border, or "" where nn.Conv has none.
std::string torch_padding_mode(Border b) {
  switch (b) {
    case Border::Zeros:
      return "zeros";
    case Border::Reflect:
      return "reflect";
    case Border::Replicate:
      return "replicate";
    case Border::Circular:
      return "circular";
    default:
      return "";
  }
}

// F.pad's call filling the layer's pads with its border (or -inf: a max pool's ignored padding).
std::string torch_pad_call(const Layer& L) {
  const std::vector<int64_t> before = pads_before(L.pads), after = pads_after(L.pads);
  if (L.op == Op::MaxPool && L.ignores_padding())
    return fmt::format("F.pad(x, {}, value=float('-inf'))", torch_pad_order(before, after));
  if (L.border == Border::Symmetric)
    return fmt::format("torch.cat of flipped edges (PyTorch has no symmetric mode), pads {}",
                       torch_pad_order(before, after));
  return torch_bordered(L, "x", before, after);
}

// Pads of a naive PyTorch port: dilation*(k-1)//2 on both sides where the layer pads at all
// (the padding=k//2 habit), else none.
Resolved naive_torch(const Layer& L) {
  if (all_zero(L.pads)) return L.pads;
  std::vector<int64_t> half;
  for (size_t i = 0; i < L.kernel.size(); ++i)
    half.push_back(L.dilation[i] * (L.kernel[i] - 1) / 2);
  return resolve_explicit(L, half, half);
}

PortWay torch_way(const Layer& L, const std::string& reads_as) {
  PortWay w;
  const Resolved& p = L.pads;
  const auto b = pads_before(p), a = pads_after(p);
  const std::string cls = torch_class(L), args = window_args(L, false);
  w.naive_pads = naive_torch(L);
  w.naive =
      call(L, cls, fmt::format("{}, padding={}", args, python_ints(pads_before(w.naive_pads))));
  if (L.op == Op::ConvTranspose) {
    // PyTorch crops `padding` from both ends, then adds output_padding at the end.
    const int64_t limit = std::max(*std::max_element(L.stride.begin(), L.stride.end()),
                                   *std::max_element(L.dilation.begin(), L.dilation.end()));
    bool native = true;
    std::vector<int64_t> op;
    for (size_t i = 0; i < b.size(); ++i) {
      op.push_back(b[i] - transposed_crop_after(L, i));
      native = native && b[i] >= 0 && op.back() >= 0 && op.back() < limit;
    }
    if (native) {
      const bool any_op = std::any_of(op.begin(), op.end(), [](int64_t v) { return v != 0; });
      w.native = fmt::format("{}(..., {}, padding={}{})", cls, args, python_ints(b),
                             any_op ? ", output_padding=" + python_ints(op) : "");
      w.native_exact = true;
    } else {
      w.native = fmt::format("{}(..., {}, padding=0)", cls, args);
      std::vector<std::string> crops;
      for (size_t i = 0; i < b.size(); ++i)
        crops.push_back(
            transposed_crop_after(L, i) >= 0
                ? fmt::format("{}:{}", b[i], p.axes[i].output + b[i])
                : fmt::format("{}: then zeros after ({})", b[i], -transposed_crop_after(L, i)));
      w.fix = fmt::format("{} then crop y[..., {}]", w.native, fmt::join(crops, ", "));
    }
    w.naive = w.native_exact ? w.native : w.fix;
    w.naive_pads = p;
    return w;
  }
  const bool sym = symmetric(p);
  if (L.op == Op::Conv) {
    const std::string mode = torch_padding_mode(L.border);
    const std::string mode_arg = L.border == Border::Zeros ? "" : ", padding_mode='" + mode + "'";
    if (sym && !mode.empty()) {
      w.native = fmt::format("{}(..., {}, padding={}{})", cls, args, python_ints(b), mode_arg);
      w.native_exact = true;
    } else if (reads_as == "same_upper" && L.border == Border::Zeros &&
               std::all_of(L.stride.begin(), L.stride.end(), [](int64_t s) { return s == 1; })) {
      w.native = fmt::format("{}(..., {}, padding='same')", cls, args);  // extra pixel after
      w.native_exact = true;
    } else {
      w.native = fmt::format("{}(..., {}, padding={})", cls, args,
                             python_ints(pads_before(naive_torch(L))));
      w.fix = fmt::format("{} then {}(..., {}, padding=0)", torch_pad_call(L), cls, args);
    }
  } else {
    // nn.MaxPool/AvgPool pad symmetrically, at most half the kernel, and ignore a max pool's
    // padding; AvgPool has no dilation.
    bool fits = sym;
    for (size_t i = 0; i < b.size(); ++i) fits = fits && b[i] <= L.kernel[i] / 2;
    const bool avg = L.op == Op::AvgPool;
    const bool border_ok =
        avg ? (L.ignores_padding() || L.border == Border::Zeros) : L.ignores_padding();
    const std::string extra = fmt::format(
        "{}{}", L.ceil_mode ? ", ceil_mode=True" : "",
        avg ? fmt::format(", count_include_pad={}", L.count_include_pad ? "True" : "False") : "");
    w.naive =
        call(L, cls,
             fmt::format("{}, padding={}{}", args, python_ints(pads_before(w.naive_pads)), extra));
    if (fits && border_ok && !(avg && dilated(L))) {
      w.native = call(L, cls, fmt::format("{}, padding={}{}", args, python_ints(b), extra));
      w.native_exact = true;
    } else {
      w.native = call(
          L, cls,
          fmt::format("{}, padding={}{}", args, python_ints(pads_before(naive_torch(L))), extra));
      if (!avg)
        w.fix = fmt::format("{} then {}({}, padding=0{})", torch_pad_call(L), cls, args,
                            L.ceil_mode ? ", ceil_mode=True" : "");
      else if (L.ignores_padding())
        w.fix = fmt::format(
            "the mean over the taps inside the input: F.avg_pool{0}d(F.pad(x, {1}), {2}) / "
            "F.avg_pool{0}d(F.pad(torch.ones_like(x), {1}), {2})",
            L.spatial_dims, torch_pad_order(b, a), args);
      else
        w.fix = fmt::format("{} then {}({}, padding=0)", torch_pad_call(L), cls, args);
    }
  }
  if (w.native_exact) w.naive = w.native, w.naive_pads = p;
  return w;
}

PortWay keras_way(const Layer& L, const std::string& reads_as) {
  PortWay w;
  const Resolved& p = L.pads;
  const auto b = pads_before(p), a = pads_after(p);
  const std::string cls = keras_class(L), args = window_args(L, true);
  const std::optional<Resolved> same = resolve_as(L, PadMode::SameUpper);
  const bool zeros = L.border == Border::Zeros;
  // A naive port writes padding='same' wherever the source pads, 'valid' elsewhere.
  w.naive_pads = all_zero(p) || !same ? p : *same;
  w.naive = call(L, cls, fmt::format("{}, padding='{}'", args, all_zero(p) ? "valid" : "same"));
  const bool pool = is_pool(L);
  const bool border_ok = pool ? L.ignores_padding() : zeros;
  if (L.op == Op::ConvTranspose) {
    const bool any_op = std::any_of(L.output_padding.begin(), L.output_padding.end(),
                                    [](int64_t v) { return v != 0; });
    if (all_zero(p) && !any_op) {
      w.native = fmt::format("{}(..., {}, padding='valid')", cls, args);
      w.native_exact = true;
    } else if (reads_as == "same_upper") {
      w.native = fmt::format("{}(..., {}, padding='same')", cls, args);
      w.native_exact = true;
    } else {
      w.native = fmt::format("{}(..., {}, padding='valid')", cls, args);
      std::vector<int64_t> crop_after;
      for (size_t i = 0; i < b.size(); ++i) crop_after.push_back(transposed_crop_after(L, i));
      w.fix = std::all_of(crop_after.begin(), crop_after.end(), [](int64_t v) { return v >= 0; })
                  ? fmt::format("{} then layers.Cropping{}D({})", w.native, L.spatial_dims,
                                keras_pairs(b, crop_after))
                  : fmt::format("{} then crop {} and zero-extend the end", w.native,
                                keras_pairs(b, crop_after));
    }
  } else if (all_zero(p) && !L.ceil_mode) {
    w.native = call(L, cls, args + ", padding='valid'");
    w.native_exact = true;
  } else if (reads_as == "causal" && zeros && !pool) {
    w.native = fmt::format("{}(..., {}, padding='causal')", cls, args);
    w.native_exact = true;
  } else if (pads_read_as(L, PadMode::SameUpper) && border_ok && !(pool && L.count_include_pad)) {
    w.native = call(L, cls, args + ", padding='same'");
    w.native_exact = true;
  } else {
    w.native = w.naive;
    const std::string padded = call(L, cls, args + ", padding='valid'");
    if (!pool && zeros)
      w.fix = fmt::format("layers.ZeroPadding{}D({}) then {}", L.spatial_dims, keras_pairs(b, a),
                          padded);
    else if (L.border == Border::Reflect || L.border == Border::Symmetric ||
             L.border == Border::Constant || (pool && !L.ignores_padding() && zeros))
      w.fix = fmt::format("tf.pad(x, [[0, 0], {}, [0, 0]], mode='{}') then {}",
                          fmt::join(
                              [&] {
                                std::vector<std::string> v;
                                for (size_t i = 0; i < b.size(); ++i)
                                  v.push_back(fmt::format("[{}, {}]", b[i], a[i]));
                                return v;
                              }(),
                              ", "),
                          L.border == Border::Reflect     ? "REFLECT"
                          : L.border == Border::Symmetric ? "SYMMETRIC"
                                                          : "CONSTANT",
                          padded);
    else if (L.op == Op::MaxPool)
      w.fix = fmt::format("tf.pad(x, ..., constant_values=-inf) with pads {} / {} then {}",
                          shape_text(b), shape_text(a), padded);
    else
      w.fix = fmt::format("no Keras padding gives this ({} border, pads {} / {}): pad by hand",
                          to_string(L.border), shape_text(b), shape_text(a));
  }
  if (w.native_exact) w.naive = w.native, w.naive_pads = p;
  return w;
}

PortWay onnx_way(const Layer& L, const std::string& reads_as) {
  PortWay w;
  std::vector<int64_t> pads = pads_before(L.pads);
  for (int64_t v : pads_after(L.pads)) pads.push_back(v);
  const char* op = L.op == Op::Conv            ? "Conv"
                   : L.op == Op::ConvTranspose ? "ConvTranspose"
                   : L.op == Op::MaxPool       ? "MaxPool"
                                               : "AveragePool";
  w.native = reads_as == "same_upper" || reads_as == "same_lower"
                 ? fmt::format("{}(..., auto_pad='{}')", op,
                               reads_as == "same_upper" ? "SAME_UPPER" : "SAME_LOWER")
                 : fmt::format("{}(..., pads={})", op, shape_text(pads));
  // ONNX has no border modes: a non-zero border is a Pad node before the op.
  w.native_exact = L.op == Op::ConvTranspose || L.border == Border::Zeros || L.ignores_padding();
  if (!w.native_exact)
    w.fix = fmt::format("Pad(mode='{}') then {}(..., pads=[0, ...])",
                        L.border == Border::Replicate  ? "edge"
                        : L.border == Border::Circular ? "wrap"
                        : L.border == Border::Reflect  ? "reflect"
                                                       : "constant",
                        op);
  w.naive = w.native;
  w.naive_pads = L.pads;
  return w;
}

// What the layer's pads are, among the conventions, for this input size.
std::string reads_as(const Layer& L) {
  for (PadMode m :
       {PadMode::Valid, PadMode::SameUpper, PadMode::SameLower, PadMode::Causal, PadMode::Full}) {
    if (m == PadMode::Causal && L.spatial_dims != 1) continue;
    const auto r = resolve_as(L, m);
    if (r && same_pads(*r, L.pads)) return to_string(m);
  }
  return symmetric(L.pads) ? "explicit (symmetric)" : "explicit (asymmetric)";
}

}  // namespace

bool pads_read_as(const Layer& L, PadMode mode) {
  const std::optional<Resolved> r = resolve_as(L, mode);
  return r && same_pads(*r, L.pads);
}

std::vector<int64_t> pool_extension(const Layer& L) {
  std::vector<int64_t> ext;
  const std::vector<AxisParams> axes = L.axes();
  for (size_t i = 0; i < L.pads.axes.size(); ++i) {
    const AxisPads& p = L.pads.axes[i];
    const int64_t reach = window_extent(axes[i], p.output);
    ext.push_back(std::max<int64_t>(0, reach - (L.in_spatial[i] + p.before + p.after)));
  }
  return ext;
}

void check_portable(const Layer& L) {
  if (L.quantized() || L.op == Op::Quantize || L.op == Op::Dequantize)
    throw std::runtime_error(
        fmt::format("layer '{}' ({}): int8 layers are not ported yet (float32 models only)", L.name,
                    L.op_name));
  if (!L.read_by.empty())
    throw std::runtime_error(
        fmt::format("layer '{}' ({}): its output is read by {}, which padfold does not generate: "
                    "the port would not compute the model",
                    L.name, L.op_name, L.read_by));
}

void check_portable(const ModelInput& in) {
  if (!in.produced_by.empty())
    throw std::runtime_error(fmt::format(
        "tensor '{}' is computed by {}, which padfold does not generate: the port would not "
        "compute the model",
        in.name, in.produced_by));
  if (in.dtype != DType::F32)
    throw std::runtime_error(fmt::format(
        "input '{}' is not float32: int8 models are not ported yet (float32 models only)",
        in.name));
}

int64_t transposed_crop_after(const Layer& L, size_t axis) {
  const int64_t full = transposed_full_output(L.axes()[axis]);
  return full - L.pads.axes[axis].before - L.pads.axes[axis].output;
}

PortTarget parse_port_target(const std::string& name) {
  const std::string n = ascii_lower(name);
  if (n == "pytorch" || n == "torch") return PortTarget::PyTorch;
  if (n == "keras" || n == "tensorflow" || n == "tf") return PortTarget::Keras;
  if (n == "onnx") return PortTarget::Onnx;
  throw std::runtime_error(fmt::format("--to '{}': expected pytorch, keras or onnx", name));
}

std::string to_string(PortTarget t) {
  switch (t) {
    case PortTarget::PyTorch:
      return "pytorch";
    case PortTarget::Keras:
      return "keras";
    case PortTarget::Onnx:
      return "onnx";
  }
  return "";
}

std::vector<LayerPort> port_layers(const Model& model, PortTarget target) {
  std::vector<LayerPort> out;
  for (const Layer& L : model.layers) {
    if (!L.has_window()) continue;
    LayerPort lp;
    lp.layer = &L;
    lp.reads_as = reads_as(L);
    if (lp.reads_as.rfind("explicit", 0) != 0) {
      const auto r = resolve_as(L, parse_padding_name(lp.reads_as).mode);
      lp.input_dependent = r && r->input_dependent;
    }
    lp.way = target == PortTarget::PyTorch ? torch_way(L, lp.reads_as)
             : target == PortTarget::Keras ? keras_way(L, lp.reads_as)
                                           : onnx_way(L, lp.reads_as);
    const Resolved& n = lp.way.naive_pads;
    for (size_t i = 0; i < L.pads.axes.size(); ++i) {
      lp.shift.push_back(n.axes[i].before - L.pads.axes[i].before);
      lp.output_delta.push_back(n.axes[i].output - L.pads.axes[i].output);
    }
    lp.naive_differs = !same_pads(n, L.pads);
    out.push_back(std::move(lp));
  }
  return out;
}

}  // namespace padfold
