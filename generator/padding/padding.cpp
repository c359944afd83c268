#include "padding/padding.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <optional>
#include <string>

#include "base/enum_names.h"
#include "base/text.h"

namespace padfold {
namespace {

// Padding modes by name. "explicit" is printed only: explicit pads are written as integers.
constexpr EnumName<PadMode> kPadModeNames[] = {
    {PadMode::Explicit, "explicit"},    {PadMode::Valid, "valid"},
    {PadMode::SameUpper, "same_upper"}, {PadMode::SameLower, "same_lower"},
    {PadMode::TorchSame, "torch_same"}, {PadMode::ScipySame, "scipy_same"},
    {PadMode::Causal, "causal"},        {PadMode::Full, "full"},
};

// The conventions of padding 'same' (none given: tensorflow).
constexpr EnumName<PadMode> kSameConventions[] = {
    {PadMode::SameUpper, "tensorflow"},
    {PadMode::SameUpper, "tf", Spelling::Quiet},
    {PadMode::SameUpper, "keras"},
    {PadMode::SameUpper, "onnx"},
    {PadMode::SameUpper, "onnx_upper", Spelling::Quiet},
    {PadMode::SameUpper, "same_upper", Spelling::Quiet},
    {PadMode::SameLower, "onnx_lower"},
    {PadMode::SameLower, "same_lower", Spelling::Quiet},
    {PadMode::TorchSame, "pytorch"},
    {PadMode::TorchSame, "torch", Spelling::Quiet},
    {PadMode::ScipySame, "scipy"},
};

// Border modes: numpy's names, then the other frameworks' aliases.
constexpr EnumName<Border> kBorderNames[] = {
    {Border::Zeros, "zeros"},
    {Border::Zeros, "zero", Spelling::Quiet},
    {Border::Constant, "constant"},
    {Border::Reflect, "reflect"},
    {Border::Reflect, "mirror", Spelling::Alias},
    {Border::Symmetric, "symmetric"},
    {Border::Replicate, "replicate"},
    {Border::Replicate, "edge", Spelling::Alias},
    {Border::Replicate, "nearest", Spelling::Alias},
    {Border::Circular, "circular"},
    {Border::Circular, "wrap", Spelling::Alias},
    {Border::Circular, "grid-wrap", Spelling::Quiet},
};

// Floor division that is right for negative numerators too.
int64_t floor_div(int64_t a, int64_t b) {
  return a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
}
int64_t ceil_div(int64_t a, int64_t b) {
  return -floor_div(-a, b);
}

std::string axis_name(size_t i) {
  return "spatial axis " + std::to_string(i);
}

std::string limit_text() {
  return std::to_string(kMaxSize) + " (the int32 limit)";
}

// Every axis parameter in [1, kMaxSize], and the effective kernel at most kMaxSize: past this
// check, sums and products of a few of them fit an int64_t (each is below 2^31).
void check_axis(const AxisParams& a, size_t i) {
  auto require = [&](int64_t v, const char* what, const char* field) {
    if (v <= 0)
      throw PaddingError(
          axis_name(i) + ": " + what + " must be a positive integer, got " + std::to_string(v),
          field);
    if (v > kMaxSize)
      throw PaddingLimitError(axis_name(i) + ": " + what + " must be at most " + limit_text() +
                                  ", got " + std::to_string(v),
                              field);
  };
  require(a.input, "input size", "input_shape");
  require(a.kernel, "kernel size", "kernel");
  require(a.stride, "stride", "stride");
  require(a.dilation, "dilation", "dilation");
  const int64_t ke = effective_kernel(a);
  if (ke > kMaxSize)
    throw PaddingLimitError(axis_name(i) + ": the effective kernel (" + std::to_string(a.kernel) +
                                "-1)*" + std::to_string(a.dilation) + "+1 = " + std::to_string(ke) +
                                " exceeds " + limit_text() + "; use a smaller dilation or kernel",
                            "dilation");
}

// A size derived from the axis parameters (pads, padded input, output), at most kMaxSize.
void check_derived(int64_t v, size_t i, const std::string& what, const std::string& advice,
                   const std::string& field) {
  if (v > kMaxSize)
    throw PaddingLimitError(axis_name(i) + ": " + what + " is " + std::to_string(v) + ", beyond " +
                                limit_text() + "; " + advice,
                            field);
}

// Callers pass checked sizes (each below 2^62), so this cannot overflow; it throws rather than
// wrap should one not be.
int64_t add3(int64_t a, int64_t b, int64_t c) {
  const auto ab = checked_add(a, b);
  const auto abc = ab ? checked_add(*ab, c) : std::nullopt;
  if (!abc) throw PaddingLimitError("size arithmetic overflowed", "padding");
  return *abc;
}

// Splits a total pad; `extra_before` puts the odd pixel first.
AxisPads split(int64_t total, bool extra_before) {
  AxisPads p;
  p.before = extra_before ? total - total / 2 : total / 2;
  p.after = total - p.before;
  return p;
}

void finish(Resolved& r) {
  r.asymmetric = std::any_of(r.axes.begin(), r.axes.end(),
                             [](const AxisPads& p) { return p.before != p.after; });
}

// sum over x in [0, n) of floor((a*x + b) / m), for m > 0 (the AtCoder Library's floor_sum).
// Exact while n and m are below 2^32 and the sum fits: the products stay below 2^64 and any
// wrap-around of the unsigned intermediate sums cancels in the result.
uint64_t floor_sum(uint64_t n, uint64_t m, uint64_t a, uint64_t b) {
  uint64_t sum = 0;
  while (true) {
    if (a >= m) {
      sum += n * (n - 1) / 2 * (a / m);
      a %= m;
    }
    if (b >= m) {
      sum += n * (b / m);
      b %= m;
    }
    const uint64_t y_max = a * n + b;
    if (y_max < m) break;
    n = y_max / m;
    b = y_max % m;
    std::swap(m, a);
  }
  return sum;
}

// How many x in [0, n) have (a*x + b) mod m < limit, for 0 <= a, b < m and 0 < limit <= m:
// [y mod m < limit] = floor(y/m) - floor((y + m - limit)/m) + 1.
int64_t count_residues_below(int64_t n, int64_t m, int64_t a, int64_t b, int64_t limit) {
  const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  return static_cast<int64_t>(floor_sum(u(n), u(m), u(a), u(b)) -
                              floor_sum(u(n), u(m), u(a), u(b + m - limit)) + u(n));
}

// The first pooling window with no tap on the input, or nullopt. Window o starts at
// s(o) = o*stride - pad_before and has taps s(o) + k*dilation, k < kernel; s(o) grows with o.
//   - Window 0 is checked directly. If it reads the input, its last tap is >= 0, and so is every
//     later window's: windows 0..last_in (those with s(o) <= input-1) all overlap the input, and
//     every window after last_in lies wholly past it.
//   - A window that overlaps the input reads it unless its taps step over the input, which needs
//     dilation > input (and two taps): the tap grid s(o) + k*dilation then meets [0, input) in
//     at most one place, s(o) mod dilation, and the window reads the input iff that is < input.
//     The first window with s(o) mod dilation >= input is found by counting the residues below
//     input over prefixes of the windows (count_residues_below) and bisecting.
std::optional<int64_t> first_empty_window(const AxisParams& a, const AxisPads& p) {
  const int64_t in = a.input, k = a.kernel, s = a.stride, d = a.dilation;
  auto reads_input = [&](int64_t o) {
    const int64_t start = o * s - p.before;
    const int64_t first = std::max<int64_t>(0, ceil_div(-start, d));
    const int64_t last = std::min<int64_t>(k - 1, floor_div(in - 1 - start, d));
    return first <= last;
  };
  if (!reads_input(0)) return 0;
  const int64_t last_in = std::min<int64_t>(p.output - 1, floor_div(in - 1 + p.before, s));
  if (k > 1 && d > in) {
    const int64_t step = s % d, offset = ((-p.before) % d + d) % d;
    auto misses_before = [&](int64_t n) {  // some window o < n steps over the input
      return count_residues_below(n, d, step, offset, in) < n;
    };
    if (misses_before(last_in + 1)) {
      int64_t lo = 1, hi = last_in + 1;  // the first n with a miss among windows 0..n-1
      while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (misses_before(mid))
          hi = mid;
        else
          lo = mid + 1;
      }
      return lo - 1;
    }
  }
  if (last_in + 1 < p.output) return last_in + 1;
  return std::nullopt;
}

void check_explicit(const PaddingSpec& spec, size_t dims) {
  if (spec.before.size() != dims || spec.after.size() != dims)
    throw PaddingError("explicit pads '" + spec.written + "' give " +
                       std::to_string(spec.before.size()) + " axes but the layer has " +
                       std::to_string(dims) + " spatial dims");
  // explicit_padding checks this too; a PaddingSpec may also be built by hand.
  for (const auto* side : {&spec.before, &spec.after})
    for (int64_t v : *side)
      if (v > kMaxSize || v < -kMaxSize)
        throw PaddingLimitError("explicit pads '" + spec.written + "' contain " +
                                std::to_string(v) + ", beyond " + limit_text());
}

// A negative pad crops the input (ONNX Pad's negative pads; a Slice folded into its reader). A
// crop leaves part of the input on its axis, and only forward windows take one.
void check_crops(const PaddingSpec& spec, const std::vector<AxisParams>& axes, bool transposed) {
  for (size_t i = 0; i < axes.size() && i < spec.before.size() && i < spec.after.size(); ++i)
    for (const int64_t pad : {spec.before[i], spec.after[i]}) {
      if (pad >= 0) continue;
      if (transposed)
        throw PaddingError("explicit pads '" + spec.written + "' contain " + std::to_string(pad) +
                           ": a transposed convolution's pads crop its output and must be >= 0 "
                           "(output_padding extends it)");
      if (-pad >= axes[i].input)
        throw PaddingError(axis_name(i) + ": explicit pads '" + spec.written + "' crop " +
                           std::to_string(-pad) + " of an input of " +
                           std::to_string(axes[i].input) +
                           "; a negative pad (a crop) must leave part of the input");
    }
}

}  // namespace

int64_t effective_kernel(const AxisParams& a) {
  const auto span = checked_mul(a.kernel - 1, a.dilation);
  const auto ke = span ? checked_add(*span, 1) : std::nullopt;
  if (!ke)
    throw PaddingLimitError("the effective kernel (" + std::to_string(a.kernel) + "-1)*" +
                                std::to_string(a.dilation) + "+1 does not fit a 64-bit integer",
                            "dilation");
  return *ke;
}

int64_t window_extent(const AxisParams& a, int64_t tile) {
  if (tile < 1)
    throw std::invalid_argument("window_extent: a tile of " + std::to_string(tile) +
                                " outputs; expected at least 1");
  const auto steps = checked_mul(tile - 1, a.stride);
  const auto extent = steps ? checked_add(*steps, effective_kernel(a)) : std::nullopt;
  if (!extent)
    throw PaddingLimitError(
        "the window extent (" + std::to_string(tile) + "-1)*" + std::to_string(a.stride) + "+" +
            std::to_string(effective_kernel(a)) + " does not fit a 64-bit integer",
        "stride");
  return *extent;
}

int64_t transposed_full_output(const AxisParams& a, int64_t output_padding) {
  return add3(window_extent(a, a.input), output_padding, 0);
}

std::vector<int64_t> pads_before(const Resolved& r) {
  std::vector<int64_t> v;
  for (const AxisPads& p : r.axes) v.push_back(p.before);
  return v;
}
std::vector<int64_t> pads_after(const Resolved& r) {
  std::vector<int64_t> v;
  for (const AxisPads& p : r.axes) v.push_back(p.after);
  return v;
}
std::vector<int64_t> output_sizes(const Resolved& r) {
  std::vector<int64_t> v;
  for (const AxisPads& p : r.axes) v.push_back(p.output);
  return v;
}

bool last_window_overhangs(const AxisParams& a, const AxisPads& p) {
  const int64_t last_tap =
      tap_position<int64_t>(p.output - 1, a.kernel - 1, a.stride, p.before, a.dilation);
  return last_tap >= a.input + p.after;
}

std::string to_string(PadMode mode) {
  return name_of(kPadModeNames, mode);
}

std::string padding_names(const std::string& same_note) {
  std::string text;
  for (const auto& e : kPadModeNames) {
    if (e.value == PadMode::Explicit) continue;
    // The bare "same", resolved through a convention, comes just before its variants.
    if (e.value == PadMode::SameUpper) text += ", same" + same_note;
    text += (text.empty() ? "" : ", ") + std::string(e.name);
  }
  return text;
}

bool keras_has_causal(size_t spatial_dims) {
  return spatial_dims == 1;
}

void validate_keras_causal(const PaddingSpec& spec, size_t spatial_dims) {
  if (spec.mode == PadMode::Causal && !keras_has_causal(spatial_dims))
    throw PaddingError("Keras has causal padding for Conv1D only");
}

PaddingSpec parse_padding_name(const std::string& name, const std::string& convention) {
  PaddingSpec spec;
  spec.written = convention.empty() ? name : name + " (" + convention + ")";
  const std::string n = ascii_lower(name);
  const std::string c = ascii_lower(convention);
  if (n == "same") {
    const std::optional<PadMode> mode =
        c.empty() ? std::optional(PadMode::SameUpper) : value_of(kSameConventions, c);
    if (!mode)
      throw PaddingError("unknown convention '" + convention +
                         "' for padding 'same'; expected one of " +
                         names_of(kSameConventions, Spelling::Name));
    spec.mode = *mode;
    return spec;
  }
  if (!c.empty())
    throw PaddingError("a convention ('" + convention + "') only applies to padding 'same', not '" +
                       name + "'");
  const auto mode = value_of(kPadModeNames, n);
  if (!mode || *mode == PadMode::Explicit)
    throw PaddingError("unknown padding '" + name + "'; expected " +
                       padding_names(" (with a convention)") + ", or explicit integer pads");
  spec.mode = *mode;
  return spec;
}

PaddingSpec explicit_padding(const std::vector<int64_t>& values, int spatial_dims) {
  PaddingSpec spec;
  spec.mode = PadMode::Explicit;
  spec.written = "[";
  for (size_t i = 0; i < values.size(); ++i)
    spec.written += (i ? "," : "") + std::to_string(values[i]);
  spec.written += "]";
  const size_t d = static_cast<size_t>(spatial_dims);
  if (values.size() == 1) {
    spec.before.assign(d, values[0]);
    spec.after.assign(d, values[0]);
  } else if (values.size() == d) {
    spec.before = spec.after = values;
  } else if (values.size() == 2 * d) {
    spec.before.assign(values.begin(), values.begin() + d);
    spec.after.assign(values.begin() + d, values.end());
  } else {
    throw PaddingError("explicit pads " + spec.written + " have " + std::to_string(values.size()) +
                       " values; a layer with " + std::to_string(d) + " spatial dims takes 1, " +
                       std::to_string(d) + " (one per dim) or " + std::to_string(2 * d) +
                       " (ONNX order: all befores, then all afters)");
  }
  for (int64_t v : values)
    if (v > kMaxSize || v < -kMaxSize)
      throw PaddingLimitError("explicit pads " + spec.written + " contain " + std::to_string(v) +
                              ", beyond " + limit_text() + "; pads must be within +-" +
                              std::to_string(kMaxSize));
  return spec;
}

Resolved resolve_forward(const PaddingSpec& spec, const std::vector<AxisParams>& axes,
                         bool ceil_mode) {
  if (spec.mode == PadMode::Explicit) {
    check_explicit(spec, axes.size());
    check_crops(spec, axes, false);
  }
  Resolved r;
  for (size_t i = 0; i < axes.size(); ++i) {
    const AxisParams& a = axes[i];
    check_axis(a, i);
    const int64_t ke = effective_kernel(a);
    const bool strided = a.stride != 1;
    AxisPads p;
    switch (spec.mode) {
      case PadMode::Explicit:
        p.before = spec.before[i];
        p.after = spec.after[i];
        break;
      case PadMode::Valid:
        break;
      case PadMode::SameUpper:
      case PadMode::SameLower: {
        const int64_t out = ceil_div(a.input, a.stride);
        const int64_t total = std::max<int64_t>((out - 1) * a.stride + ke - a.input, 0);
        p = split(total, spec.mode == PadMode::SameLower);
        // The total is ke - (in mod s, or s): it varies with the input unless ke == 1.
        if (strided && ke > 1) r.input_dependent = true;
        break;
      }
      case PadMode::TorchSame:
      case PadMode::ScipySame:
        if (strided)
          throw PaddingError(axis_name(i) + ": padding '" + spec.written +
                             "' is only defined for stride 1 (got " + std::to_string(a.stride) +
                             "); for strided layers use same_upper (TensorFlow/Keras "
                             "SAME) or same_lower, or give explicit pads");
        p = split(ke - 1, spec.mode == PadMode::ScipySame);
        break;
      case PadMode::Causal:
        p.before = ke - 1;
        break;
      case PadMode::Full:
        p.before = p.after = ke - 1;
        break;
    }
    // Pads: explicit ones are at most kMaxSize, derived ones at most ke - 1 < kMaxSize.
    const int64_t padded = add3(a.input, p.before, p.after);
    if (padded < ke)
      throw PaddingError(axis_name(i) + ": the effective kernel (" + std::to_string(ke) +
                             ") is larger than the padded input (" + std::to_string(a.input) +
                             " + " + std::to_string(p.before) + " + " + std::to_string(p.after) +
                             " = " + std::to_string(padded) +
                             "); use a smaller kernel or dilation, or more "
                             "padding",
                         "kernel");
    check_derived(padded, i,
                  "the padded input (" + std::to_string(a.input) + " + " +
                      std::to_string(p.before) + " + " + std::to_string(p.after) + ")",
                  "use a smaller input or less padding", "padding");
    // From here on the output is at most the padded input.
    if (ceil_mode) {
      p.output = ceil_div(padded - ke, a.stride) + 1;
      // The last window must start inside the input or the left padding (PyTorch rule).
      if ((p.output - 1) * a.stride >= a.input + p.before) --p.output;
    } else {
      p.output = floor_div(padded - ke, a.stride) + 1;
    }
    r.axes.push_back(p);
  }
  finish(r);
  return r;
}

Resolved resolve_transposed(const PaddingSpec& spec, const std::vector<AxisParams>& axes,
                            const std::vector<int64_t>& output_padding,
                            const std::optional<std::vector<int64_t>>& output_shape) {
  if (!output_padding.empty() && output_padding.size() != axes.size())
    throw PaddingError("output_padding has " + std::to_string(output_padding.size()) +
                           " values; expected one per spatial dim (" + std::to_string(axes.size()) +
                           ")",
                       "output_padding");
  if (output_shape && output_shape->size() != axes.size())
    throw PaddingError("output_shape has " + std::to_string(output_shape->size()) +
                           " values; expected one per spatial dim (" + std::to_string(axes.size()) +
                           ")",
                       "output_shape");
  const bool auto_same = spec.mode == PadMode::SameUpper || spec.mode == PadMode::SameLower;
  if (!auto_same && spec.mode != PadMode::Explicit && spec.mode != PadMode::Valid)
    throw PaddingError(
        "transposed convolution takes explicit pads, valid, same_upper or "
        "same_lower (ONNX auto_pad), not '" +
        spec.written + "'");
  if (spec.mode == PadMode::Explicit && !output_shape) {
    check_explicit(spec, axes.size());
    check_crops(spec, axes, true);
  }
  Resolved r;
  for (size_t i = 0; i < axes.size(); ++i) {
    const AxisParams& a = axes[i];
    check_axis(a, i);
    const int64_t op = output_padding.empty() ? 0 : output_padding[i];
    if (op < 0 || op >= std::max(a.stride, a.dilation))
      throw PaddingError(axis_name(i) + ": output_padding " + std::to_string(op) +
                             " must be >= 0 and smaller than the stride or the dilation (" +
                             std::to_string(std::max(a.stride, a.dilation)) + ")",
                         "output_padding");
    // stride*(input-1) < 2^62, op and ke < 2^31: no overflow; the result must fit an int32.
    const int64_t full = transposed_full_output(a, op);
    check_derived(full, i,
                  "the full transposed output (" + std::to_string(a.stride) + "*(" +
                      std::to_string(a.input) + "-1) + " + std::to_string(op) + " + " +
                      std::to_string(effective_kernel(a)) + ")",
                  "use a smaller input, stride or kernel", a.stride > 1 ? "stride" : "kernel");
    AxisPads p;
    if (output_shape || auto_same) {
      p.output = output_shape ? (*output_shape)[i] : a.input * a.stride;  // < 2^62
      check_derived(p.output, i, output_shape ? "output_shape" : "the output size (input*stride)",
                    output_shape ? "use a smaller output_shape" : "use a smaller input or stride",
                    output_shape ? "output_shape" : "stride");
      const int64_t total = full - p.output;
      if (total < 0) {
        p.after = total;  // zero-extension at the end (ONNX)
      } else {
        p = split(total, spec.mode != PadMode::SameUpper);
      }
    } else if (spec.mode == PadMode::Explicit) {
      p.before = spec.before[i];
      p.after = spec.after[i];
    }
    p.output = full - p.before - p.after;
    if (p.output <= 0)
      throw PaddingError(axis_name(i) + ": pads " + std::to_string(p.before) + "+" +
                         std::to_string(p.after) + " crop the whole transposed output (full size " +
                         std::to_string(full) + "); use smaller pads");
    r.axes.push_back(p);
  }
  finish(r);
  return r;
}

bool border_copies_input(Border border) {
  return border != Border::Zeros && border != Border::Constant;
}

Border parse_border(const std::string& name) {
  if (const auto border = value_of(kBorderNames, ascii_lower(name))) return *border;
  throw PaddingError("unknown border mode '" + name + "'; expected " +
                     names_of(kBorderNames, Spelling::Name, ", ", " or ") +
                     " (aliases: " + names_of(kBorderNames, Spelling::Alias) + ")");
}

std::string to_string(Border border) {
  return name_of(kBorderNames, border);
}

void validate_border(Border border, const Resolved& pads, const std::vector<AxisParams>& axes) {
  for (size_t i = 0; i < axes.size() && i < pads.axes.size(); ++i) {
    // Reflected, replicated or wrapped values would be taken from the cropped input's edge, where
    // padfold's border reads the whole input's.
    if ((pads.axes[i].before < 0 || pads.axes[i].after < 0) && border != Border::Zeros &&
        border != Border::Constant)
      throw PaddingError(axis_name(i) + ": " + to_string(border) + " border with a crop (pads " +
                         std::to_string(pads.axes[i].before) + ", " +
                         std::to_string(pads.axes[i].after) +
                         "); a negative pad takes a zeros or constant border");
    const int64_t widest = std::max(pads.axes[i].before, pads.axes[i].after);
    const int64_t n = axes[i].input;
    if (border == Border::Reflect && widest >= n)
      throw PaddingError(axis_name(i) + ": reflect padding of " + std::to_string(widest) +
                         " needs an input larger than the pad, but the input is " +
                         std::to_string(n) + "; use symmetric or replicate, or pads < " +
                         std::to_string(n));
    if ((border == Border::Symmetric || border == Border::Circular) && widest > n)
      throw PaddingError(axis_name(i) + ": " + to_string(border) + " padding of " +
                         std::to_string(widest) + " exceeds the input size " + std::to_string(n) +
                         "; use replicate, or pads <= " + std::to_string(n));
  }
}

void validate_transposed_border(Border border, const std::string& op_name) {
  if (border != Border::Zeros)
    throw PaddingError("'" + to_string(border) + "' on a " + op_name + " layer; expected " +
                           to_string(Border::Zeros) +
                           ": a transposed convolution's pads crop its output instead of "
                           "extending its input, so there is no padded region for a border mode "
                           "to fill",
                       "border");
}

bool pool_ignores_padding(PoolKind kind, Border border, bool count_include_pad) {
  switch (kind) {
    case PoolKind::Max:
      return border == Border::Zeros;
    case PoolKind::Avg:
      return !count_include_pad;
  }
  return false;
}

CountedRange counted_positions(const AxisParams& axis, const AxisPads& pads, bool ignores_padding) {
  if (ignores_padding)
    return {std::max<int64_t>(0, -pads.before), axis.input + std::min<int64_t>(0, pads.after)};
  return {-pads.before, axis.input + pads.after};
}

void validate_pool_windows(const Resolved& pads, const std::vector<AxisParams>& axes) {
  for (size_t i = 0; i < axes.size() && i < pads.axes.size(); ++i) {
    const AxisParams& a = axes[i];
    const AxisPads& p = pads.axes[i];
    check_axis(a, i);
    if (p.output <= 0) continue;
    check_derived(p.output, i, "the output size", "use a smaller input or less padding", "padding");
    check_derived(p.before, i, "the pad before", "use less padding", "padding");
    const std::optional<int64_t> empty = first_empty_window(a, p);
    if (empty)
      throw PaddingError(axis_name(i) + ": with pads " + std::to_string(p.before) + "/" +
                         std::to_string(p.after) + ", pooling window " + std::to_string(*empty) +
                         " has every tap in the padding and no input to pool; use pads "
                         "smaller than the window (PyTorch requires pad <= kernel/2), or "
                         "count_include_pad / a non-zero border");
  }
}

std::variant<FoldedPad, std::string> fold_explicit_pad(const ExplicitPad& pad,
                                                       const PadReader& reader) {
  // The reader's own negative pads crop the Pad's output; a negative pad of the Pad's (ONNX Pad's
  // crop, a Slice) before the reader's own padding on the same side would move that padding
  // inwards, over values: no pads say both.
  bool own_zero = true, crop_only = true;
  const std::vector<AxisPads>& own = reader.own_pads->axes;
  for (size_t k = 0; k < own.size(); ++k) {
    own_zero = own_zero && own[k].before <= 0 && own[k].after <= 0;
    crop_only = crop_only && pad.before[k] <= 0 && pad.after[k] <= 0;
    if ((pad.before[k] < 0 && own[k].before > 0) || (pad.after[k] < 0 && own[k].after > 0))
      return std::string(
          "pads the cropped tensor (pads of its own where the crop cuts): no pads say both");
  }
  const bool zero_fill = pad.fill == PadFill::Constant && pad.value == 0.f;
  // Every fold below keeps the reader's own pads (crops, or zeros the Pad's zeros add to).
  FoldedPad f{pad.before, pad.after, reader.border, reader.border_value, reader.count_include_pad};
  for (size_t k = 0; k < own.size(); ++k) {
    f.before[k] += own[k].before;
    f.after[k] += own[k].after;
  }
  if (crop_only) return f;  // no values added: the reader's border and counting stand
  if (own_zero) {           // no padding of its own: the Pad's, less the reader's crops
    if (pad.fill == PadFill::Reflect) {
      f.border = Border::Reflect;
    } else if (pad.fill == PadFill::Edge) {
      f.border = Border::Replicate;
    } else if (zero_fill && reader.op != WindowOp::MaxPool) {
      f.border = Border::Zeros;
    } else {
      f.border = Border::Constant;
      f.border_value = pad.value;
    }
    if (reader.op == WindowOp::AvgPool) f.count_include_pad = true;  // the Pad's values are data
    return f;
  }
  const bool adds =
      zero_fill && reader.border == Border::Zeros &&
      (reader.op == WindowOp::Conv || (reader.op == WindowOp::AvgPool && reader.count_include_pad));
  if (adds) return f;
  if (reader.op == WindowOp::MaxPool)
    return std::string(
        "has pads of its own, which never win the max, while the Pad's values do: no single "
        "border");
  if (reader.op == WindowOp::AvgPool && zero_fill)
    return std::string(
        "leaves its own pads out of the average (count_include_pad 0) but counts the Pad's: no "
        "single border");
  const char* mode = pad.fill == PadFill::Reflect ? "reflect" : "edge";
  char value[32];
  std::snprintf(value, sizeof value, "%g", static_cast<double>(pad.value));
  return "has pads of its own (zeros) and the Pad fills " +
         (pad.fill == PadFill::Constant ? std::string("with ") + value
                                        : std::string("in mode ") + mode) +
         ": no single border";
}

}  // namespace padfold
