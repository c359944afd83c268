#include "frontend/resolve.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/limits.h"
#include "base/text.h"
#include "frontend/quant_arithmetic.h"

namespace padfold {
namespace {

[[noreturn]] void fail(const std::string& field, const std::string& found,
                       const std::string& expected) {
  throw LayerError(field, found + "; expected " + expected);
}

// Whether `s` holds one value per channel of `first` ([N, C, 1..]).
bool per_channel_of(const TensorSource& s, const TensorSource& first, size_t ch) {
  if (s.shape.size() != first.shape.size() || s.shape == first.shape) return false;
  for (size_t d = 0; d < s.shape.size(); ++d)
    if (s.shape[d] != (d == 0 || d == ch ? first.shape[d] : 1)) return false;
  return true;
}

// Add: every input of one shape; mul: two, the second of one shape or one value per channel;
// concat: the same but for channels, which add up.
void join_shapes(const std::vector<TensorSource>& sources, Layer& l) {
  const TensorSource& first = sources[0];
  const size_t rank = first.shape.size(), ch = l.layout.channels_last ? rank - 1 : 1;
  int64_t channels = 0;
  l.input_channels.clear();
  if (l.op == Op::Mul && sources.size() != 2)
    fail("input", fmt::format("{} inputs", sources.size()),
         "two: a tensor and what it is multiplied by");
  l.channel_broadcast = l.op == Op::Mul && per_channel_of(sources[1], first, ch);
  for (const TensorSource& s : sources) {
    if (s.layout.channels_last != l.layout.channels_last || s.layout.spatial_dims != l.spatial_dims)
      fail("input",
           fmt::format("{} produces {}, but {} produces {}", s.what, s.layout.name(), first.what,
                       first.layout.name()),
           "inputs of one layout (padfold does not transpose between layers)");
    const bool broadcast = l.channel_broadcast && &s == &sources[1];
    for (size_t d = 0; d < rank && !broadcast; ++d)
      if (s.shape[d] != first.shape[d] && (l.op != Op::Concat || d != ch))
        fail("input",
             fmt::format("{} produces {} but {} produces {}", s.what, shape_text(s.shape),
                         first.what, shape_text(first.shape)),
             l.op == Op::Add   ? "inputs of one shape (add does not broadcast)"
             : l.op == Op::Mul ? "inputs of one shape, or a second input of one value per "
                                 "channel (batch and channels of the first, spatial sizes 1)"
                               : "inputs that differ only in channels");
    l.input_channels.push_back(s.shape[ch]);
    channels += s.shape[ch];
  }
  if (channels > kMaxSize)
    fail("input", fmt::format("{} channels in all", channels),
         fmt::format("at most {} (the int32 limit)", kMaxSize));
  l.batch = first.shape[0];
  l.in_channels = l.op == Op::Concat ? channels : first.shape[ch];
  l.out_channels = l.in_channels;
  l.in_spatial.clear();
  for (size_t d = 1; d < rank; ++d)
    if (d != ch) l.in_spatial.push_back(first.shape[d]);
  const size_t dims = l.in_spatial.size();
  l.kernel = l.stride = l.dilation = std::vector<int64_t>(dims, 1);
}

// Transpose: the source's shape permuted. The output layout is the other one where the perm
// exchanges channels first and last, else the source's (a permutation of the spatial axes).
void transpose_shapes(const TensorSource& src, Layer& l) {
  const size_t rank = src.shape.size();
  if (rank < 3 || rank > 5)
    fail("input", fmt::format("{} produces {} (rank {})", src.what, shape_text(src.shape), rank),
         "a tensor of rank 3 to 5");
  std::vector<int64_t> sorted = l.perm;
  std::sort(sorted.begin(), sorted.end());
  bool permutation = sorted.size() == rank;
  for (size_t k = 0; permutation && k < rank; ++k) permutation = sorted[k] == int64_t(k);
  if (!permutation || l.perm[0] != 0)
    fail("perm", shape_text(l.perm),
         fmt::format("a permutation of 0..{} that keeps the batch first (perm[0] = 0)", rank - 1));
  l.input_layout = src.layout;
  l.spatial_dims = static_cast<int>(rank) - 2;
  l.layout = src.layout;
  if (l.perm == channels_last_perm(rank) && !src.layout.channels_last)
    l.layout.channels_last = true;
  else if (l.perm == channels_first_perm(rank) && src.layout.channels_last)
    l.layout.channels_last = false;
  auto split = [&](const TensorLayout& layout, const std::vector<int64_t>& shape, int64_t& channels,
                   std::vector<int64_t>& spatial) {
    const size_t ch = layout.channels_last ? rank - 1 : 1;
    channels = shape[ch];
    spatial.clear();
    for (size_t k = 1; k < rank; ++k)
      if (k != ch) spatial.push_back(shape[k]);
  };
  std::vector<int64_t> out;
  for (int64_t a : l.perm) out.push_back(src.shape[static_cast<size_t>(a)]);
  l.batch = src.shape[0];
  split(src.layout, src.shape, l.in_channels, l.in_spatial);
  split(l.layout, out, l.out_channels, l.out_spatial);
  l.kernel = l.stride = l.dilation = std::vector<int64_t>(rank - 2, 1);
}

// A conv or pool reads its input in its own layout, or in input_layout (relayout_input).
void window_input_shape(const TensorSource& src, Layer& l) {
  const size_t rank = static_cast<size_t>(l.spatial_dims) + 2;
  const TensorLayout& reads = l.read_layout();
  if (src.layout.channels_last != reads.channels_last ||
      src.layout.spatial_dims != l.spatial_dims || src.shape.size() != rank)
    fail(l.relayout_input ? "input_layout" : "layout",
         fmt::format("{}, but {} produces {}", reads.name(), src.what, src.layout.name()),
         "the input's layout (a layer that computes in another one says input_layout: the "
         "input's, and reads it so)");
  const std::vector<int64_t>& shape = src.shape;
  const size_t ch = reads.channels_last ? rank - 1 : 1;
  l.batch = shape[0];
  l.in_channels = shape[ch];
  l.in_spatial.clear();
  for (size_t i = 1; i < rank; ++i)
    if (i != ch) l.in_spatial.push_back(shape[i]);
  if (l.batch <= 0 || l.in_channels <= 0)
    fail("input_shape", shape_text(shape) + " has a non-positive batch or channel count",
         "positive sizes");
}

void check_channels(Layer& l) {
  if (l.op == Op::GatherChannels) {
    for (int64_t k : l.channels)
      if (k < 0 || k >= l.in_channels)
        fail("channels", std::to_string(k),
             fmt::format("input channels 0 to {} (the input has {})", l.in_channels - 1,
                         l.in_channels));
    if (l.channels.size() > static_cast<size_t>(kMaxSize))
      fail("channels", fmt::format("{} values", l.channels.size()),
           fmt::format("at most {} (the int32 limit)", kMaxSize));
    l.out_channels = static_cast<int64_t>(l.channels.size());
    return;
  }
  if (!l.has_weights()) {
    if (!l.is_join()) l.out_channels = l.in_channels;
    return;
  }
  if (l.groups < 1) fail("groups", std::to_string(l.groups), "a positive integer");
  if (l.out_channels < 1)
    fail("out_channels", std::to_string(l.out_channels), "a positive integer");
  if (l.in_channels % l.groups != 0)
    throw LayerError(
        "groups", fmt::format("{} groups do not divide the {} input channels; expected a divisor "
                              "of the input channel count",
                              l.groups, l.in_channels));
  if (l.out_channels % l.groups != 0)
    throw LayerError("groups",
                     fmt::format("{} groups do not divide the {} output channels; expected a "
                                 "divisor of out_channels",
                                 l.groups, l.out_channels));
}

// A resize's output size from its scales (floor(input * scale), as ONNX), or its scales from its
// output size (output / input, the scale ONNX's coordinates use then). No padding: pads of 0.
void resolve_resize(Layer& l) {
  if (l.dtype != DType::F32)
    fail("dtype", to_string(l.dtype), "float32 (padfold resizes float32 tensors)");
  try {
    resolve_resize_sizes(l.resize, l.in_spatial);
  } catch (const PaddingError& e) {
    throw LayerError(e.field, e.what());
  }
  l.pads = {};
  for (int64_t out : l.resize.output) l.pads.axes.push_back({0, 0, out});
  l.out_spatial = l.resize.output;
}

void resolve_pads(Layer& l) {
  if (l.op == Op::Resize) return resolve_resize(l);
  const auto axes = l.axes();
  try {
    if (l.op == Op::ConvTranspose)
      l.pads = resolve_transposed(l.padding, axes, l.output_padding, l.output_shape);
    else
      l.pads = resolve_forward(l.padding, axes, l.ceil_mode);
  } catch (const PaddingError& e) {
    throw LayerError(e.field, e.what());
  }
  try {
    if (l.op == Op::ConvTranspose)
      validate_transposed_border(l.border, l.op_name);
    else
      validate_border(l.border, l.pads, axes);
  } catch (const PaddingError& e) {
    throw LayerError("border", e.what());
  }
  // Pools that ignore the padding have no value for a window lying wholly in it.
  try {
    if (l.ignores_padding()) validate_pool_windows(l.pads, axes);
  } catch (const PaddingError& e) {
    throw LayerError("padding", e.what());
  }
  l.out_spatial.clear();
  for (const auto& a : l.pads.axes) l.out_spatial.push_back(a.output);
}

// Every buffer of the layer under kMaxBufferBytes, naming the field that makes it too large
// (out_channels stands for depth_multiplier too: the parser says which was written).
void check_buffers(const Layer& l) {
  auto check = [&](const std::string& field, const char* what, const std::vector<int64_t>& shape) {
    const std::optional<int64_t> bytes = buffer_bytes(shape, l.dtype);
    if (bytes && *bytes < kMaxBufferBytes) return;
    fail(field,
         fmt::format("the {} buffer {} is {} bytes of {}", what, shape_text(shape),
                     bytes ? std::to_string(*bytes) : "more than 2^63", to_string(l.dtype)),
         fmt::format("every buffer under {} bytes (2 GiB: Halide indexes buffers with 32-bit "
                     "integers)",
                     kMaxBufferBytes));
  };
  check("input_shape", "input", l.input_shape());
  if (l.has_weights()) {
    // The largest factor of the weights: output channels, input channels or kernel taps.
    const std::vector<int64_t> w = l.weight_shape();
    const bool t = l.op == Op::ConvTranspose;
    const int64_t o = t ? l.out_channels / l.groups : l.out_channels;
    const int64_t in = t ? l.in_channels : l.in_channels / l.groups;
    const int64_t taps = checked_product(l.kernel).value_or(std::numeric_limits<int64_t>::max());
    check(taps >= o && taps >= in ? "kernel"
          : o >= in               ? "out_channels"
                                  : "input_shape",
          "weights", w);
    if (l.bias) check("out_channels", "bias", {l.out_channels});
  }
  // A larger output than input: more channels, or a larger spatial size.
  std::string field = l.op == Op::Resize ? "output_size" : "padding";
  if (l.out_channels > l.in_channels)
    field = "out_channels";
  else if (l.op == Op::ConvTranspose)
    field = l.output_shape ? "output_shape"
            : std::any_of(l.stride.begin(), l.stride.end(), [](int64_t s) { return s > 1; })
                ? "stride"
                : "kernel";
  check(field, "output", l.output_shape_full());
}

}  // namespace

void take_input_shapes(Layer& l, const std::vector<TensorSource>& inputs) {
  if (l.op == Op::Transpose) {
    if (inputs.size() != 1)
      fail("input", fmt::format("{} inputs", inputs.size()), "one input tensor");
    transpose_shapes(inputs[0], l);
    return;
  }
  if (!l.has_window()) {
    if (l.is_join() && inputs.size() < 2)
      fail("input", fmt::format("{} input(s)", inputs.size()),
           "two or more earlier layers or model inputs");
    if (!l.is_join() && inputs.size() != 1)
      fail("input", fmt::format("{} inputs", inputs.size()), "one input tensor");
    join_shapes(inputs, l);  // softmax: the one input's shape, as a join of one
    return;
  }
  if (inputs.size() != 1)
    fail("input", fmt::format("{} inputs", inputs.size()), "one input tensor");
  window_input_shape(inputs[0], l);
}

void resolve_shapes(Layer& l) {
  if (l.op != Op::Transpose) {  // its output shape is its input's, permuted
    check_channels(l);
    resolve_pads(l);  // add and concat: unit windows, no padding
  }
  check_buffers(l);
  try {  // what the peers refuse is refused here, not by the compile
    check_quantized_arithmetic(l);
  } catch (const QuantRefused& e) {
    const bool tflite = l.quant && l.quant->requantize == Requantize::Tflite;
    throw LayerError("quant", e.reason + "; expected parameters " +
                                  (tflite ? "TFLite" : "ONNX Runtime") +
                                  " accepts (its arithmetic is the layer's requantize mode)");
  }
}

void resolve_layer(Layer& l, const std::vector<TensorSource>& inputs) {
  take_input_shapes(l, inputs);
  resolve_shapes(l);
}

}  // namespace padfold
