// The one place where padding conventions are turned into concrete per-side pads and output sizes,
// and where every other padding rule lives:
//   - the pads and output size of each convention (resolve_forward, resolve_transposed), with the
//     ceil_mode rule and the overhang of a ceil_mode window past the padding
//     (last_window_overhangs);
//   - where a window's taps read (tap_position) and, for a transposed convolution, which input a
//     tap comes from (transposed_source_times_stride); header-only, for int64_t and Halide::Expr;
//   - what may fill the padding (Border), where a border mode can fill it (validate_border) and
//     that a transposed convolution, whose pads crop, takes zeros only
//     (validate_transposed_border);
//   - which pools ignore the padding (pool_ignores_padding) and that their windows must then touch
//     the input (validate_pool_windows);
//   - which frameworks define which modes (keras_has_causal), and the names of modes, conventions
//     and border modes;
//   - the size limits of one axis (base/limits.h): every size given or derived must fit an
//     int32, which resolve_forward and resolve_transposed enforce (PaddingLimitError).
// The frontend, the algorithms and the CLI call this module; no other file restates a padding
// rule. (generator/reference re-derives them on purpose, independently.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "base/limits.h"

namespace padfold {

enum class PadMode {
  Explicit,   // pads given per side
  Valid,      // no padding
  SameUpper,  // TensorFlow/Keras SAME, ONNX SAME_UPPER: odd pixel after
  SameLower,  // ONNX SAME_LOWER: odd pixel before
  TorchSame,  // PyTorch padding='same': stride 1 only, odd pixel after
  ScipySame,  // scipy.signal correlate/convolve mode='same': odd pixel before
  Causal,     // Keras Conv1D causal: all of dilation*(k-1) before
  Full,       // dilation*(k-1) on both sides
};

// A padding request as a user wrote it, before it is resolved against shapes.
struct PaddingSpec {
  PadMode mode = PadMode::Valid;
  std::vector<int64_t> before, after;  // Explicit only; one entry per spatial dim
  std::string written;                 // how the user spelled it, for messages
};

// Raised for any request that cannot be resolved; the message says what is wrong and what is valid.
// `field` names the layer-spec field at fault (padding, kernel, stride, dilation, input_shape,
// output_padding, output_shape), so callers can point at it without parsing the message.
struct PaddingError : std::runtime_error {
  explicit PaddingError(const std::string& message, std::string field_name = "padding")
      : std::runtime_error(message), field(std::move(field_name)) {}
  std::string field;
};

// A PaddingError for a size beyond a limit of base/limits.h (an input, kernel, stride,
// dilation, pad, output_padding or output_shape, or a size derived from them, over kMaxSize).
struct PaddingLimitError : PaddingError {
  using PaddingError::PaddingError;
};

// One spatial axis of a layer.
struct AxisParams {
  int64_t input = 1;
  int64_t kernel = 1;
  int64_t stride = 1;
  int64_t dilation = 1;
};

struct AxisPads {
  int64_t before = 0;
  int64_t after = 0;  // for transposed conv: negative means zero-extension at the end
  int64_t output = 0;
};

struct Resolved {
  std::vector<AxisPads> axes;
  bool asymmetric = false;       // some axis has before != after
  bool input_dependent = false;  // the pads would change with the input size
};

// One value per axis: the pads before, the pads after, the output sizes.
std::vector<int64_t> pads_before(const Resolved& r);
std::vector<int64_t> pads_after(const Resolved& r);
std::vector<int64_t> output_sizes(const Resolved& r);

// (k-1)*d+1. Throws PaddingLimitError (field "dilation") where it does not fit an int64_t;
// resolve_forward and resolve_transposed also reject one over kMaxSize.
int64_t effective_kernel(const AxisParams& a);

// The input positions that `tile` consecutive outputs of a forward convolution or pool read
// along an axis, from the first tap of the first window to the last tap of the last (the gaps a
// dilation or stride leaves included): (tile-1)*stride + (k-1)*d+1, the effective kernel for one
// output. A tile's halo, as the schedules and the fusion cost model size it. Throws
// std::invalid_argument for a tile under 1, PaddingLimitError where it does not fit an int64_t.
int64_t window_extent(const AxisParams& a, int64_t tile = 1);

// A transposed convolution's output along an axis before its pads crop it (the positions every
// input's window reaches): stride*(input-1) + (k-1)*d+1, plus output_padding.
int64_t transposed_full_output(const AxisParams& a, int64_t output_padding = 0);

namespace detail {
// A layer constant as an operand of T's arithmetic: a T for an integer T, an int otherwise (for
// Halide::Expr, whose operators with int keep the expression's type).
template <typename T>
auto operand(int64_t v) {
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(v);
  else
    return static_cast<int>(v);
}
}  // namespace detail

// Forward convolution and pooling: the input position that tap `tap` of output `out_index` reads,
// out_index*stride - pad_before + tap*dilation. Positions outside [0, input) are in the padding.
// T is int64_t or Halide::Expr (call it as tap_position<Halide::Expr>(...) with Vars or RVars).
template <typename T>
T tap_position(const T& out_index, const T& tap, int64_t stride, int64_t pad_before,
               int64_t dilation) {
  return out_index * detail::operand<T>(stride) - detail::operand<T>(pad_before) +
         tap * detail::operand<T>(dilation);
}

// Transposed convolution, the inverse of tap_position: input position i reaches position
// `out_index` of the cropped output (pad_before = the crop before it) through tap `tap` when
// i*stride == out_index + pad_before - tap*dilation. This returns that right-hand side: a tap
// contributes only where it is a multiple of the stride, from input position (it / stride).
template <typename T>
T transposed_source_times_stride(const T& out_index, const T& tap, int64_t pad_before,
                                 int64_t dilation) {
  return out_index + detail::operand<T>(pad_before) - tap * detail::operand<T>(dilation);
}

// Parses a padding mode name or alias: valid, same (needs a convention, default tensorflow),
// same_upper, same_lower, torch_same, scipy_same, causal, full. `convention` may be empty or one of
// tensorflow, keras, onnx (= same_upper), onnx_lower, pytorch/torch, scipy.
PaddingSpec parse_padding_name(const std::string& name, const std::string& convention = "");

// Explicit pads: one value for all dims, one per dim, or 2*dims in ONNX order (all befores, then
// all afters).
PaddingSpec explicit_padding(const std::vector<int64_t>& values, int spatial_dims);

// Convolution and pooling (forward). `ceil_mode` applies the PyTorch/ONNX pooling rule, including
// dropping a last window that would start inside the right padding. Every axis parameter, the
// effective kernel, the pads and the padded input must be at most kMaxSize (PaddingLimitError
// naming the field otherwise), so no arithmetic on them overflows.
Resolved resolve_forward(const PaddingSpec& spec, const std::vector<AxisParams>& axes,
                         bool ceil_mode = false);

// Transposed convolution. Here before/after are amounts cropped from the full output
// (stride*(in-1) + ke). Explicit pads use output_padding; SameUpper/SameLower follow ONNX auto_pad
// (output = input*stride); an explicit output_shape overrides the pads as in ONNX. The limits of
// resolve_forward apply, and to output_shape, the full output and the output too.
Resolved resolve_transposed(const PaddingSpec& spec, const std::vector<AxisParams>& axes,
                            const std::vector<int64_t>& output_padding,
                            const std::optional<std::vector<int64_t>>& output_shape = std::nullopt);

// Whether the last window of an axis reaches past the right padding (possible with ceil_mode only).
// Taps beyond input + pad_after read nothing: they are left out of the window in every op.
bool last_window_overhangs(const AxisParams& a, const AxisPads& p);

std::string to_string(PadMode mode);

// The padding names a user may write, for messages and help: "valid, same<same_note>, same_upper,
// same_lower, torch_same, scipy_same, causal, full".
std::string padding_names(const std::string& same_note = "");

// Keras defines padding='causal' for Conv1D only. padfold resolves causal on any number of spatial
// dims (all of dilation*(k-1) before, on every axis); these say whether Keras has it.
bool keras_has_causal(size_t spatial_dims);
// Throws PaddingError ("Keras has causal padding for Conv1D only") for a causal request on other
// than one spatial dim.
void validate_keras_causal(const PaddingSpec& spec, size_t spatial_dims);

// What fills the padded region (the values, not the amounts). Names follow numpy; the aliases other
// frameworks use are accepted by parse_border.
enum class Border {
  Zeros,
  Constant,   // a user-given value
  Reflect,    // edge not repeated: numpy reflect, PyTorch reflect, TF REFLECT, ndimage mirror
  Symmetric,  // edge repeated: numpy symmetric, TF SYMMETRIC, ndimage reflect
  Replicate,  // numpy edge, PyTorch replicate, ndimage nearest
  Circular,   // numpy wrap, PyTorch circular, ndimage grid-wrap
};

Border parse_border(const std::string& name);
std::string to_string(Border border);

// Whether the border fills the padding with copies of input values (replicate, reflect, symmetric,
// circular): a per-channel map of the input then maps the padding the same way.
bool border_copies_input(Border border);

// Checks that a border mode can produce the resolved pads (reflect needs pad < input, symmetric and
// circular need pad <= input). Throws PaddingError naming the axis.
void validate_border(Border border, const Resolved& pads, const std::vector<AxisParams>& axes);

// A transposed convolution's pads crop its output instead of extending its input, so there is no
// padded region for a border mode to fill: it takes Border::Zeros only. Throws PaddingError (field
// "border") naming the border and the op ("'reflect' on a conv_transpose2d layer; expected zeros:
// ...").
void validate_transposed_border(Border border, const std::string& op_name);

enum class PoolKind { Max, Avg };

// Whether a pool ignores the padding: max pool over zero padding (padded taps never win a max, as
// in ONNX and PyTorch) and average pool without count_include_pad (only real taps are summed and
// counted, whatever the border). Other pools read the padding through the border mode, like a
// convolution, and average pools then count the padded taps.
bool pool_ignores_padding(PoolKind kind, Border border, bool count_include_pad);

// The positions along one axis whose taps an average pool counts, [lo, hi) in input coordinates:
// the input less its crops (negative pads), and the pads too unless the pool ignores its padding.
// A ceil_mode window's overhang past the pads is never counted (as in PyTorch and ONNX).
struct CountedRange {
  int64_t lo = 0, hi = 0;
};
CountedRange counted_positions(const AxisParams& axis, const AxisPads& pads, bool ignores_padding);

// For pooling that ignores the padding (pool_ignores_padding), a window lying wholly in the padding
// has no value; it is an error naming the axis and the first such window. Closed form: the time
// does not grow with the number of windows (pads as resolve_forward gives them).
void validate_pool_windows(const Resolved& pads, const std::vector<AxisParams>& axes);

// A Pad op before a convolution or pool (ONNX Pad, tf.pad): explicit spatial pads and what fills
// them. Folding it into its reader makes one layer that reads the unpadded tensor.
enum class PadFill { Constant, Reflect, Edge };
struct ExplicitPad {
  std::vector<int64_t> before, after;  // per spatial axis; negative: a crop
  PadFill fill = PadFill::Constant;
  float value = 0.f;  // PadFill::Constant
};
enum class WindowOp { Conv, MaxPool, AvgPool };
// The reader as it is: its own resolved pads, border and (avg pools) count_include_pad.
struct PadReader {
  WindowOp op = WindowOp::Conv;
  const Resolved* own_pads = nullptr;
  Border border = Border::Zeros;
  bool count_include_pad = false;
  float border_value = 0.f;  // Border::Constant
};
// The folded layer's explicit pads, border and count_include_pad.
struct FoldedPad {
  std::vector<int64_t> before, after;
  Border border = Border::Zeros;
  float border_value = 0.f;
  bool count_include_pad = false;
};
// Folds `pad` into `reader`, or says why no single layer computes both (a reason that reads after
// "its reader ... "): a reader that pads nothing takes the Pad's pads and fill as its border (a
// zero fill is Border::Zeros, except before a max pool, where the Pad's zeros take part in the max:
// Border::Constant 0; an average pool then counts the Pad's values); a zero fill before a
// zero-bordered conv, or an average pool that counts its padding, adds to the reader's own pads;
// other combinations have no single border. Negative pads are crops: a Pad that only crops adds
// to any reader's pads, keeping its border; the reader's own crops (a Slice after the Pad, folded
// first) cut into the Pad's pads; a crop under the reader's own padding on the same side is
// refused.
std::variant<FoldedPad, std::string> fold_explicit_pad(const ExplicitPad& pad,
                                                       const PadReader& reader);

}  // namespace padfold
