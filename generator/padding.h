// The one place where padding conventions are turned into concrete per-side pads and output sizes.
// Every op, the CLI and the tests call this module; no other file restates a padding rule.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

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

int64_t effective_kernel(const AxisParams& a);  // (k-1)*d+1

// Parses a padding mode name or alias: valid, same (needs a convention, default tensorflow),
// same_upper, same_lower, torch_same, scipy_same, causal, full. `convention` may be empty or one of
// tensorflow, keras, onnx (= same_upper), onnx_lower, pytorch/torch, scipy.
PaddingSpec parse_padding_name(const std::string& name, const std::string& convention = "");

// Explicit pads: one value for all dims, one per dim, or 2*dims in ONNX order (all befores, then
// all afters).
PaddingSpec explicit_padding(const std::vector<int64_t>& values, int spatial_dims);

// Convolution and pooling (forward). `ceil_mode` applies the PyTorch/ONNX pooling rule, including
// dropping a last window that would start inside the right padding.
Resolved resolve_forward(const PaddingSpec& spec, const std::vector<AxisParams>& axes,
                         bool ceil_mode = false);

// Transposed convolution. Here before/after are amounts cropped from the full output
// (stride*(in-1) + ke). Explicit pads use output_padding; SameUpper/SameLower follow ONNX auto_pad
// (output = input*stride); an explicit output_shape overrides the pads as in ONNX.
Resolved resolve_transposed(const PaddingSpec& spec, const std::vector<AxisParams>& axes,
                            const std::vector<int64_t>& output_padding,
                            const std::optional<std::vector<int64_t>>& output_shape = std::nullopt);

std::string to_string(PadMode mode);

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

// Checks that a border mode can produce the resolved pads (reflect needs pad < input, symmetric and
// circular need pad <= input). Throws PaddingError naming the axis.
void validate_border(Border border, const Resolved& pads, const std::vector<AxisParams>& axes);

// For pooling that ignores the padding (max pool over zero padding, average pool without
// count_include_pad), a window lying wholly in the padding has no value; it is an error naming the
// axis and the window.
void validate_pool_windows(const Resolved& pads, const std::vector<AxisParams>& axes);

}  // namespace padfold
