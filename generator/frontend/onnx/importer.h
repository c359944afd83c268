// The importer of one prepared model (import.h's import_model): its passes in pass order are
// import.cpp (node classes, pass order), layout_edges.cpp (tf2onnx's layout Transposes),
// folds.cpp (Pads, affine ops and activations folded into layers), weight_files.cpp (each
// layer's weights as padfold reads them) and assemble.cpp (names, the Model, the report).
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "frontend/onnx/affine.h"
#include "frontend/onnx/import.h"
#include "frontend/onnx/import_ops.h"

namespace padfold::onnx_import::detail {

using ojson = nlohmann::ordered_json;

enum class Role {
  Left,
  Layer,
  FoldedPad,
  FoldedAffine,
  FusedActivation,
  Bypassed,
  Constant,
  LayoutEdge,
  Quantization  // a QuantizeLinear or DequantizeLinear absorbed into quantized layers
};

inline constexpr const char* kLayerOps[] = {
    "Conv",          "ConvTranspose", "MaxPool",   "AveragePool", "GlobalAveragePool",
    "GlobalMaxPool", "ReduceMean",    "ReduceMax", "Gemm",        "MatMul",
    "Add",           "Mul",           "Concat",    "Softmax",     "Resize",
    "Upsample",      "Slice"};
// Reshapes that are no op on a tensor with unit spatial dims (classify_unit_reshape).
inline constexpr const char* kReshapeOps[] = {"Flatten", "Reshape", "Squeeze", "Unsqueeze"};
// An op that is an activation (activation.h's, or Clip: relu or relu6 by its bounds).
inline bool is_activation_op(const std::string& op) {
  return op == "Clip" || activation_of_onnx_op(op) != nullptr;
}
inline constexpr const char* kAffineOps[] = {"BatchNormalization", "Mul", "Add", "Sub", "Div"};

inline std::string quoted_node(const onnx::NodeProto& n) {
  return "'" + n.name() + "' (" + n.op_type() + ")";
}

inline std::string pad_mode_text(const PadInfo& p) {
  return p.mode == "constant" ? fmt::format("constant {}", p.pad.value) : p.mode;
}

class Importer {
 public:
  Importer(const PreparedModel& p, const ImportOptions& o)
      : p_(p), o_(o), g_(p.inferred, p.label), c_(g_) {}

  ImportResult run();

 private:
  // ---- Node classes and pass order (import.cpp).

  // A quantized graph: every node becomes part of an int8/uint8 layer (quant_graph.h) or the
  // import fails naming the node; none is left to the caller.
  ImportResult run_quantized();

  // Node i's output stands for tensor `stands_for`: the node is bypassed.
  void bypass(int i, const std::string& stands_for);

  // Identity, Dropout and a Concat of one input (torchvision's DenseNet writes one): the output
  // stands for the input.
  void classify_bypass(int i);

  // Flatten, Reshape, Squeeze or Unsqueeze whose output is the same memory as its input as padfold
  // holds it, so that its output stands for its input: a tensor with unit spatial dims into [N, C]
  // (before a classifier's Gemm); any tensor into the shape padfold computes for it (tf2onnx's
  // squeeze-and-excite: Squeeze, then Reshape to [N, C, 1, 1] for the 1x1 conv; the Squeeze after
  // a conv1d that tf2onnx writes as a Conv with a unit axis); unit spatial axes added for window
  // ops alone (the Unsqueeze before that Conv: the op is drafted without them, import_ops.cpp's
  // lower_rank).
  void classify_unit_reshape(int i);

  void classify_layer(int i);

  // Reshape -> Transpose -> Reshape permuting the channels (a channel shuffle): a gather_channels
  // layer, drafted at the last Reshape.
  void classify_channel_permutation(int i);

  // The decomposed LayerNorm over channels: a layer_norm layer, drafted at its Div.
  void classify_layer_norm(int i);

  // A draft of several nodes, at node i: its part nodes are part of the layer.
  void take_draft(int i, Draft& d);

  // A gather_channels layer reading another's output reads that one's input, its channels taken
  // through the other's; the other goes where every reader took it (ShuffleNetV2: the shuffle of
  // a concat, then its two halves, become two gathers of the concat).
  void compose_channel_gathers();

  // The draft a tensor comes out of, or null.
  Draft* draft_producing(const std::string& tensor);

  // Why a fold or fusion cannot happen, or "".
  std::string single_reader(const std::string& tensor, int& reader) const;

  void classify_rest(int i);

  bool computes_constant(int i) const;

  // A Constant, or a node computing one from constants (folded at import), is absorbed where only
  // padfold's layers and other absorbed constants read it. Called last to first, so that a
  // constant's readers are classified before it.
  void classify_constant(int i);

  // A bypassed node or constant whose output a node left to the caller reads is the caller's too.
  void settle_bypassed();

  // ---- tf2onnx's layout Transposes at the model's edges, and Transpose pairs (layout_edges.cpp).

  // tf2onnx's layout Transposes at a quantized model's edges (a TFLite model's NHWC integers):
  // an integer graph input's Transpose to channels first read only by DequantizeLinears, and the
  // Transpose to channels last of a graph output, folded as in float graphs (fold_layout_edges):
  // the caller passes and gets the model's own NHWC tensors, and no transpose runs for them.
  void fold_quantized_layout_edges();

  // Whether every reader of `t` is a conv or pool reading it as its data input.
  bool read_by_window_ops_only(const std::string& t) const;

  // A Transpose's perm when it is a layout change (channels first <-> last) of a rank 3-5 tensor.
  std::optional<std::vector<int64_t>> layout_perm(int i) const;

  // A Transpose that undoes the one before it (NHWC -> NCHW -> NHWC, as tf2onnx writes around
  // ops it keeps channels-last): its output stands for the first one's input. The first is
  // bypassed too when the pair is all that reads it.
  void cancel_transpose_pair(int i);

  // Layout Transposes at the model's edges (tf2onnx: NHWC -> NCHW after each input, NCHW -> NHWC
  // before each output) become the layout the layers compute in: the spec's inputs and outputs
  // keep the user's NHWC and no transpose runs. Only when every input the layers read and every
  // output has one: padfold computes a model in one layout, without transpose kernels.
  void fold_layout_edges();

  static constexpr const char* kEdgeNotFolded =
      "a layout Transpose at the model's edge, not folded: padfold folds them when every model "
      "input the layers read and every output has one (it computes in one layout and runs no "
      "transpose kernel)";

  // padfold's shape for a layer's output, and for what elementwise ops make of it (activations,
  // affine ops, Identity: fused, folded or left, their output has the input's shape), so that
  // layers reading through them are drafted with it even where ONNX's shape inference differs.
  void set_shape_onwards(const std::string& t, const std::vector<int64_t>& shape);

  // Affine ops per channel along the last axis between a graph input and its layout Transpose
  // `t` (a Keras model's Rescaling and Normalization, which tf2onnx leaves on the NHWC input):
  // held for fold_layout_edges, which makes them the depthwise 1x1 conv after the edge.
  void mark_edge_affine_chain(int t);

  // The affine chains of edge Transposes that do not fold: left to the caller, saying why.
  void release_edge_chains(const std::string& why);
  // The chain before Transpose `t` when a layer takes `t` as its own (a dense layer's flatten
  // through a channels-last Transpose, which rank 3 cannot tell from a layout one): its nodes are
  // affine ops as any other, for the folds after.
  void unmark_edge_chain(int t);

  // The graph input an edge Transpose reads, through its affine chain.
  std::string edge_source(int t) const;

  // Edge Transpose `t` with its affine chain: the chain as one depthwise 1x1 conv reading the
  // model input (channels first as the layers see it) and producing the Transpose's output.
  void fold_edge_affine_chain(int t, const std::vector<int>& chain);

  // ---- Pads, affine ops and activations folded into the layers next to them (folds.cpp).

  void fold_pad(int i);
  // A Slice cropping the spatial axes folds into the convs and pools reading it as negative pads,
  // before the Pads (a Pad then a crop, Keras's ZeroPadding2D then Cropping2D, then fold too).
  void fold_crop(int i);

  // Folds Pad or crop `i` into every reader or none; "" or why not.
  std::string try_fold(int i, const PadInfo& p);

  bool affine_candidate(int i) const;

  // A BatchNormalization or per-channel Mul/Add/Sub/Div on a conv's output: its output channels'
  // scale and shift, in the weights and bias.
  void fold_affine_after(int i);

  // The same on a conv's input: its input channels' scale in the weights, the shift in the bias
  // where that is exact (detail::folds_before_exactly).
  void fold_affine_before(int i);

  // A per-channel affine op left by the folds (a shift before a zero-padded conv, an input's
  // normalization before a Pad): the depthwise 1x1 conv with its scale as weights and its shift as
  // bias, exact on every pixel. The affine ops after it fold into it as into any conv.
  void affine_as_layer(int i);

  // An activation that fuses into no layer (a pool's output, or a tensor with other readers:
  // Xception's ReLU of a residual sum the next sum reads too) as a layer of its own: an activation
  // layer (its activation alone, no weights). `why_not_fused` is the node's reason where it cannot
  // be one either.
  void activation_as_layer(int i, const ActInfo& a, const std::string& why_not_fused);

  // The depthwise 1x1 conv (weights ones, the affine folded in as after_) of node `i`, reading
  // `input` (channels first) and producing `output`.
  Draft affine_draft(int i, const std::string& input, const std::string& output) const;

  // The Mul of x by its own gate: x * sigmoid(x) is SiLU (swish), x * hard_sigmoid(x) with ONNX
  // HardSwish's 1/6 and 1/2 is hard swish (torch.onnx's hardswish below opset 14). The gate `s`
  // on tensor `x`: x and the gate are read by nothing else and the Mul multiplies the two. -1
  // when there is none.
  int gating_mul(int s, const std::string& x) const;

  static std::optional<Activation> gated(const ActInfo& a);

  void fuse_activation(int i);

  // ---- Each layer's weight files as padfold reads them (weight_files.cpp).

  // The layer's weight files, with the affine ops folded into it; a folded shift needs a bias.
  void add_weight_files(const Draft& d, const std::string& name, Layer& l,
                        std::vector<WeightFile>& out) const;

  // ONNX's O, I, spatial... weights as spatial..., I, O (HWIO-style): the layout padfold's
  // channels-last schedules read fastest (2-6x on 3x3 and 1x1 convs than OIHW-style, measured
  // with padfold bench on an AVX-512 host).
  static void to_spatial_in_out(WeightFile& w, Layer& l);

  WeightFile int_weight_file(const std::string& path, const onnx::TensorProto& t, int node,
                             NpyDType dtype) const;

  WeightFile weight_file(const std::string& path, const onnx::TensorProto& t, int node,
                         int input) const;

  // ---- Names, the Model, the spec and the report (assemble.cpp).

  std::string model_name() const;

  std::string node_text(int i) const;

  ojson node_ref(int i, const char* role) const;

  std::string layer_description(const Draft& d) const;

  ImportResult assemble();

  // The shape ONNX gives the output that draft d's output is (output_name; where shape inference
  // gives none, the shape the drafter knows ONNX gives it), where it differs from
  // padfold's `shape` (in the layers' layout) by unit dims only: [N, K] after a Flatten, from a
  // Gemm or a ReduceMean's keepdims 0, and (unless --io-layout nhwc asked for channels-last
  // outputs) [N, C, 1, 1] for a channels-last [N, 1, 1, C]. Otherwise the output keeps the layers'
  // layout.
  std::optional<std::vector<int64_t>> output_view(const Draft& d, const std::vector<int64_t>& shape,
                                                  bool io_last) const;

  // The ONNX tensor a user reads as layer output `t`: `t` if it is a graph output, else the graph
  // output it reaches through bypassed nodes (a Flatten, a folded layout Transpose), else `t`
  // (read by a node left to the caller, or by nothing).
  std::string output_name(const std::string& t) const;

  // Graph outputs that are a graph input itself (through bypassed nodes at most): no layer
  // computes them, and the caller has them already. Said in the report and as a warning.
  ojson outputs_that_are_inputs(std::vector<std::string>& warnings) const;

  // An ONNX (channels-first) shape in channels-last order.
  static std::vector<int64_t> channels_last_order(std::vector<int64_t> shape);

  // Whether the user's tensor (a spec input's ONNX tensor, or a draft's output) is read or written
  // channels last: as the model file has it (a folded tf2onnx layout Transpose: channels last;
  // any other ONNX tensor channels first) unless --io-layout says otherwise.
  bool io_channels_last(const std::string& input) const;

  bool io_channels_last(const Draft& d) const;

  // Whether every layer that reads tensor `t` reads the other layout at no cost (layout_cost.h).
  bool only_cheap_relayout_readers(const std::string& t) const;

  // Whether a tensor of ONNX shape `shape` (channels first) goes through a transpose between the
  // user's layout and the layers': rank 3 to 5, other layouts, and not the same memory in both
  // (spatial dims all 1: an output_shapes view instead).
  bool relayout(const std::vector<int64_t>& shape, bool io_last) const;

  std::string compute_layout(const Draft& d) const;

  std::string compute_name(const TensorType& ty) const;

  // A spec output: a graph output, read by a node left to the caller, or read by nobody.
  bool is_spec_output(const Draft& d) const;

  // An int8/uint8 model input's quantization, as the quantized layers reading it take it (a
  // DequantizeLinear of it made them agree), or none for a float input.
  std::optional<LayerQuant> input_quant(const std::string& t) const;

  // The transpose of tensor `in` (a model input, or a layer's output, quantized with `quant`) into
  // channels last or first.
  static Layer transpose_layer(const std::string& name, const ModelInput& in, bool to_last,
                               const std::optional<LayerQuant>& quant = std::nullopt);

  // padfold's output shape against ONNX shape inference's, at the tensor the layer writes once
  // fused (draft_layer refused the node's own output shape already): a difference ONNX's
  // inference is wrong about is a warning, any other a bug.
  void check_inferred_shape(const Draft& d, const std::string& name,
                            std::vector<std::string>& warnings) const;

  const PreparedModel& p_;
  const ImportOptions& o_;
  GraphIndex g_;
  Context c_;
  std::vector<Role> role_;
  std::vector<std::string> reason_;
  std::map<int, Draft> drafts_;
  std::map<std::string, int> draft_by_output_;  // a draft's output tensor -> its node
  std::map<int, std::string> pad_mode_;  // layer node -> the folded Pad's mode, for descriptions
  std::map<int, detail::Affine> before_, after_;  // conv node -> the affine folded in
  std::map<int, std::vector<int>> affine_nodes_;  // conv node -> the affine nodes, in order
  std::map<int, int> gating_mul_;   // layer node -> the Mul of its x * sigmoid(x) or hard sigmoid
  std::map<int, int> folded_into_;  // a Pad or affine folded into a conv's input -> the conv
  std::map<std::string, std::string> edge_input_;  // layout Transpose's output -> graph input
  std::map<int, std::vector<int>> edge_chain_;     // edge Transpose -> the affine nodes before it
  bool channels_last_ = false;                     // the layers compute channels last
  std::set<std::string> edge_outputs_;  // drafts' outputs a folded layout Transpose makes NHWC
};

}  // namespace padfold::onnx_import::detail
