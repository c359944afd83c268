// A model as padfold sees it: layers with every field resolved (shapes, pads, channels), the model
// inputs and outputs. The spec parser (spec.h) and the ONNX importer build these; everything
// downstream (algorithms, schedules, emitted artifacts) reads only these structs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "frontend/activation.h"
#include "padding/padding.h"
#include "padding/resize.h"
#include "padfold_registry.h"

namespace padfold {

// Add, Mul and Concat join branches of a model graph: no weights, no padding, several inputs.
// Softmax normalizes over channels: one input, no window (a classifier's probabilities).
// Quantize (float32 -> int8/uint8) and Dequantize (int8/uint8 -> float32) convert a tensor
// element by element at a quantized model's edges (docs/int8.md); their dtype is the quantized
// side. Resize scales the spatial axes by interpolation (padding/resize.h). GatherChannels copies
// input channels in any order, each any number of times: a channel Split or Slice, a permutation
// such as a channel shuffle, and their compositions. LayerNorm normalizes each pixel over the
// channels, (x - mean) / sqrt(var + epsilon) (ConvNeXt's LayerNorm; its scale and shift are a
// per-channel affine the importer folds into the next conv).
enum class Op {
  Conv,
  ConvTranspose,
  MaxPool,
  AvgPool,
  Add,
  Mul,
  Concat,
  Softmax,
  Quantize,
  Dequantize,
  Transpose,
  Resize,
  GatherChannels,
  LayerNorm,
  Activation  // its activation alone, element by element (int8: a table of the 256 values)
};
inline constexpr size_t kOpCount = static_cast<size_t>(Op::Activation) + 1;  // the last op + 1
enum class DType { F32, F16, I8, U8 };  // F32, and I8/U8 quantized layers (quant below)

// The runtime's dtype of a spec's tensor type (a model input's, a layer's activations).
inline pf_dtype pf_dtype_of(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return PF_F32;
    case DType::F16:
      return PF_F16;
    case DType::I8:
      return PF_I8;
    case DType::U8:
      return PF_U8;
  }
  return PF_F32;
}

// A quantized tensor's integers q stand for scale * (q - zero_point).
struct QuantParams {
  float scale = 1.f;
  int32_t zero_point = 0;
};

// Whose integer arithmetic a quantized layer reproduces bit for bit: TFLite's (gemmlowp fixed-point
// multipliers, double rounding) or ONNX Runtime's (float scales, round half to even).
enum class Requantize { Tflite, Onnx };

// The quantization of an int8/uint8 layer (docs/int8.md). Weights are int8 with zero point 0, one
// scale per tensor or per output channel; bias is int32 with scale input scale x weight scale.
struct LayerQuant {
  std::vector<QuantParams>
      inputs;          // one per input (add: two; quantize, whose input is float: none)
  QuantParams output;  // dequantize, whose output is float: its input's
  std::vector<float> weight_scales;  // conv: 1 (per tensor) or out_channels (per channel)
  Requantize requantize = Requantize::Tflite;
  // An activation layer's silu, as ONNX Runtime runs a quantized SiLU: the sigmoid quantized with
  // these parameters (QLinearSigmoid), then multiplied by the input (QLinearMul) into `output`.
  std::optional<QuantParams> gate;
};

// Tensor layout: channels-first (NCHW-style) or channels-last (NHWC-style), 1-3 spatial dims.
// Spatial dims are always listed outermost-first: D, H, W.
struct TensorLayout {
  bool channels_last = false;
  int spatial_dims = 2;
  std::string name() const;  // e.g. "NCHW", "NWC", "NDHWC"
};

// Weight layout, as a string of axis letters outermost-first: O (output channels), I (input
// channels per group) and the spatial letters, e.g. "OIHW" (ONNX/PyTorch conv), "HWIO"
// (TensorFlow conv), "IOHW" (ONNX/PyTorch ConvTranspose), "HWOI" (TensorFlow conv_transpose).
struct WeightLayout {
  std::string order = "OIHW";
  int axis_of(char letter) const;  // position of O, I, or 'S'+k for spatial k (0 = outermost)
};

// Convolutions and pools: a kernel window, strides, padding and a border (op_table.h).
bool has_window(Op op);

struct Layer {
  std::string name;
  std::string description;  // free text (the importer says which ONNX nodes the layer covers)
  // The ops outside padfold that read this layer's output ("ONNX node 'sig' (Sigmoid)"), or "": the
  // layer is then a model output that is not the model's result, and the model runs whole only
  // in part (padfold run --model --partial).
  std::string read_by;
  Op op = Op::Conv;
  std::string op_name;  // as written: conv2d, max_pool, ...
  int spatial_dims = 2;
  TensorLayout layout;
  WeightLayout weight_layout;
  DType dtype = DType::F32;
  std::optional<LayerQuant> quant;  // set exactly for I8/U8 layers

  int64_t batch = 1;
  int64_t in_channels = 1;
  int64_t out_channels = 1;  // == in_channels for pooling
  int64_t groups = 1;
  std::vector<int64_t> in_spatial;  // D, H, W order
  std::vector<int64_t> kernel, stride, dilation;
  std::vector<int64_t> output_padding;               // conv_transpose only
  std::optional<std::vector<int64_t>> output_shape;  // conv_transpose: requested spatial output

  PaddingSpec padding;
  // transpose: output axis k is input axis perm[k] (outermost first; perm[0] == 0, the batch stays
  // first), and the layout the input is read in (the layer's `layout` is its output's: the other
  // one where perm exchanges channels first and last, else the input's).
  std::vector<int64_t> perm;
  TensorLayout input_layout;
  // A convolution or pool that reads its input in input_layout, the other one than its own (spec
  // field input_layout): the change of layout folded into the kernel, no transpose layer.
  bool relayout_input = false;
  // mul: input 1 holds one value per channel ([N, C, 1..], squeeze-and-excite's scale),
  // broadcast over the spatial dims. Set by resolution, from the inputs' shapes.
  bool channel_broadcast = false;
  // resize: the interpolation, its coordinates, the output size and scales (resolution fills
  // whichever of the two the spec left out).
  ResizeSpec resize;
  // gather_channels: output channel k is input channel channels[k].
  std::vector<int64_t> channels;
  // layer_norm: added to the variance.
  float epsilon = 1e-5f;
  bool ceil_mode = false;          // pooling
  bool count_include_pad = false;  // avg_pool
  Border border = Border::Zeros;
  float border_value = 0.f;  // Border::Constant

  bool bias = false;
  Activation activation = Activation::None;
  float activation_alpha = 0.f;  // leaky_relu slope; hard_sigmoid: alpha * x + beta, clamped
  float activation_beta = 0.f;

  // The tensors this layer reads, in order: model inputs' names (ModelInput) or earlier layers'
  // names (a layer's output tensor is named after it). One, except for add, mul and concat.
  std::vector<std::string> inputs;
  std::vector<int64_t> input_channels;  // per input: in_channels, or concat's parts

  // The .npy files holding the weights and bias (spec field weight_files), as paths resolved
  // against the spec file's folder; empty when not given.
  std::string weights_file, bias_file;

  // Filled by resolution.
  Resolved pads;
  std::vector<int64_t> out_spatial;

  std::vector<AxisParams> axes() const;                  // one per spatial dim
  std::vector<int64_t> input_shape(size_t i = 0) const;  // input i's, in its read layout's order
  // The layout the layer reads its (first) input in: input_layout for a transpose or a window op
  // that relays its input out, else its own.
  const TensorLayout& read_layout() const {
    return op == Op::Transpose || relayout_input ? input_layout : layout;
  }
  std::vector<int64_t> output_shape_full() const;  // in layout order, with N and C
  std::vector<int64_t> weight_shape() const;       // in weight layout order; empty for pooling
  // The op's traits (op_table.h): weights and bias, several inputs, a kernel window.
  bool has_weights() const;
  bool is_join() const;
  bool has_window() const { return padfold::has_window(op); }
  bool quantized() const { return dtype == DType::I8 || dtype == DType::U8; }
  // The dtype of the inputs and of the output: the layer's, but for quantize (float32 in) and
  // dequantize (float32 out).
  DType input_dtype() const { return op == Op::Quantize ? DType::F32 : dtype; }
  DType output_dtype() const { return op == Op::Dequantize ? DType::F32 : dtype; }
  // A pool that ignores its padding (padding.h's pool_ignores_padding): padded taps are left out.
  bool ignores_padding() const;
  double flops() const;  // 2*MACs over every output, taps in the padding included
};

// A tensor that comes from outside padfold: a model input, or the output of an op padfold does not
// generate (produced_by names it; such a model's kernels compile but it cannot run whole).
struct ModelInput {
  std::string name;  // a layer with input_shape and no input reads "<layer>.input"
  std::string description, produced_by;
  TensorLayout layout;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;  // in layout order
};

// The layers in the spec's order, which is topological: a layer reads model inputs and earlier
// layers only.
struct Model {
  std::string name;
  std::string description;
  std::string file;  // where it was read from
  std::vector<ModelInput> inputs;
  std::vector<Layer> layers;
  std::vector<std::string> outputs;  // layer names: the spec's, or every layer no layer reads
  // The shape an output is read in where it is not its layer's: the same values with unit dims
  // dropped or added (an ONNX classifier's [N, K] for padfold's [N, K, 1, 1]). Spec output_shapes.
  std::map<std::string, std::vector<int64_t>> output_shapes;

  const Layer* find_layer(const std::string& name) const;
  const ModelInput* find_input(const std::string& name) const;
};

// Raised for any invalid spec. what() names the file, the layer, the field, what was found and
// what was expected.
struct SpecError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The size of a tensor of `shape` in bytes; nullopt where it does not fit an int64_t.
std::optional<int64_t> buffer_bytes(const std::vector<int64_t>& shape, DType dtype);

// `shape` without its unit dims: two shapes that agree on it hold the same values in memory.
std::vector<int64_t> without_unit_dims(std::vector<int64_t> shape);

// The positions (>= 2, after N and C; ascending) of unit dims of `full` whose removal leaves
// `lower`, a channels-first shape of lower rank; empty where there are none or no such positions.
std::vector<size_t> inserted_unit_axes(const std::vector<int64_t>& full,
                                       const std::vector<int64_t>& lower);

// "W", "HW" or "DHW": the spatial axis letters of a 1-3 dimensional layer, outermost first.
std::string spatial_letters(int dims);

// The transpose perms between channels-first (NCHW-style) and channels-last (NHWC-style) tensors
// of `rank` (3 to 5): channels_last_perm moves C to the end, channels_first_perm moves it back.
std::vector<int64_t> channels_last_perm(size_t rank);
std::vector<int64_t> channels_first_perm(size_t rank);

// The model input a layer without "inputs" reads in a chain spec: "<layer>.input".
std::string implicit_input_name(const std::string& layer);

std::string to_string(Op op);
std::string to_string(Activation act);
std::string to_string(DType dtype);
std::string to_string(Requantize mode);

}  // namespace padfold
