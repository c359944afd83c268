// Internal to the importer: what one ONNX node becomes (a layer draft, a foldable Pad, a fusable
// activation), or why it is left to the caller. import.cpp decides which drafts are joined.
// import_ops.cpp holds the Context, the checks every drafter shares and draft_layer, which calls
// the drafter of the node's family: draft_windows.cpp (convs, pools, dense ops as convs),
// draft_elementwise.cpp (joins, Softmax, LayerNorm, activations), draft_data_movement.cpp (Resize,
// channel Slices, crops, channel shuffles); folds.cpp reads and folds Pads.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "frontend/layer.h"
#include "frontend/onnx/onnx_graph.h"
#include "frontend/resolve.h"

namespace padfold::onnx_import::detail {

// A padfold layer in the making: the Layer with the node's attributes (inputs name ONNX tensors
// until the spec is assembled), resolved by frontend/resolve.h against the shapes padfold
// computes, plus where it comes from.
// A Flatten or Reshape of a feature map to [N, features] (node), and the channels-last Transpose
// it reads (transpose; -1 when it flattens the map in its own C, H, W order).
struct Flattening {
  int node = -1, transpose = -1;
};

struct Draft {
  int node = -1;  // the ONNX node it comes from
  // Quantized graphs: the QuantizeLinear writing its output and the DequantizeLinears of its
  // weights and bias (quant_graph.h), for the report.
  std::vector<int> quant_nodes;
  // Other nodes the layer computes, before `node` (a channel shuffle's Reshape and Transpose).
  std::vector<int> part_nodes;
  Layer layer;
  std::string output;  // the tensor it produces (the activation's, once fused)
  const onnx::TensorProto* weights = nullptr;
  const onnx::TensorProto* bias = nullptr;
  int pad_node = -1;   // a folded Pad
  int crop_node = -1;  // a folded Slice of the spatial axes, read before pad_node's Pad
  int act_node = -1;   // a fused activation
  // Gemm or MatMul, drafted as a 1x1 conv of a tensor with unit spatial dims: `weights` is B,
  // [C, K] or (trans_b) [K, C]; alpha scales it and beta the bias C (dense_as_conv).
  struct Dense {
    bool trans_b = false;
    double alpha = 1.0, beta = 1.0;
  };
  std::optional<Dense> dense;
  // The Flatten or Reshape whose [N, C*H*W] output a dense node reads, of a feature map with
  // spatial dims above 1: the dense node is the valid conv whose kernel is the whole map, and the
  // Flatten is bypassed (its only reader is the dense node), with the map's channels-last
  // Transpose before it if there is one.
  Flattening flatten;
  // A per-channel affine op that folds into no conv, as the depthwise 1x1 conv of its scale and
  // shift (no weights tensor: ones, with the affine folded in).
  bool affine_layer = false;
  // Unit spatial axes of the node's ONNX tensors that the layer does not have (positions in the
  // ONNX shapes, ascending): tf2onnx writes a Keras Conv1D as a Conv of kernel 1 x k between an
  // Unsqueeze and a Squeeze, which padfold computes as the conv1d it is. Its weights lose them too.
  std::vector<size_t> dropped_axes;
  // The output's ONNX shape where it differs from the layer's by unit dims and ONNX's shape
  // inference may not give it (a ReduceMean or ReduceMax with keepdims 0: [N, C]).
  std::optional<std::vector<int64_t>> onnx_shape;
};

// Why a node is left to the caller.
struct Left {
  std::string reason;
};

// A Pad that could be folded into the conv/pool reading its output.
struct PadInfo {
  std::string input;  // the tensor it pads
  ExplicitPad pad;    // spatial pads and fill
  std::string mode;   // as the node says: constant, reflect, edge; "crop" for a Slice
};

// An activation that could be fused into the layer producing its input.
struct ActInfo {
  std::string input;
  Activation activation = Activation::None;
  float alpha = 0.f, beta = 0.f;  // leaky_relu, hard_sigmoid
};

// The graph and how its tensors alias through bypassed nodes (Identity, Dropout).
class Context {
 public:
  explicit Context(const GraphIndex& g) : g_(g) {}
  const GraphIndex& graph() const { return g_; }
  // Throws ImportError "<file>: node '<name>' (<op>, #i): <what>".
  [[noreturn]] void fail(int node, const std::string& what) const;
  // Runs `f`, prefixing an ImportError it throws (an attribute of the wrong type) with the node.
  template <typename F>
  auto at_node(int node, F&& f) const -> decltype(f()) {
    try {
      return f();
    } catch (const ImportError& e) {
      fail(node, e.what());
    }
  }
  // The tensor `t` stands for once bypassed nodes are removed.
  std::string canon(const std::string& t) const;
  // Stored resolved (nodes come in topological order), so that canon is one lookup however long
  // a run of bypassed nodes is.
  void add_alias(const std::string& from, const std::string& to) { alias_[from] = canon(to); }
  bool bypassed(int node) const { return bypassed_.count(node) != 0; }
  void set_bypassed(int node) { bypassed_.insert(node); }
  // The nodes reading `t` or an alias of it, bypassed nodes excluded.
  std::vector<int> readers(const std::string& t) const;
  // Whether `t` or an alias of it is a graph output.
  bool reaches_graph_output(const std::string& t) const;
  // The type after shape inference, with the shape padfold computes for a layer's output
  // (set_layer_shape), which is what the layers reading it get.
  std::optional<TensorType> type(const std::string& t) const;
  void set_layer_shape(const std::string& t, const std::vector<int64_t>& shape) {
    layer_shapes_[t] = shape;
  }
  const onnx::TensorProto* constant(const std::string& t) const { return g_.constant(canon(t)); }

 private:
  const GraphIndex& g_;
  std::map<std::string, std::string> alias_;
  std::set<int> bypassed_;
  std::map<std::string, std::vector<int64_t>> layer_shapes_;
};

// The per-dim attribute `name` (strides, dilations, kernel_shape...), checked to have `dims`
// values of at least `min`; `dflt` on every dim when absent.
std::vector<int64_t> per_dim(const Context& c, int node, const NodeAttributes& a,
                             const std::string& name, int dims, int64_t dflt, int64_t min);

// auto_pad and pads of a conv or pool node as a padding request, checked: pads only with auto_pad
// NOTSET (a pads attribute of zeros is tolerated), 2*dims values, none negative.
PaddingSpec read_padding(const Context& c, int node, const NodeAttributes& a, int dims);

// The data input of a layer: computed (not a constant), of a known static shape of rank 3 to 5.
// Returns the reason it is not, or "" and sets `type`.
std::string check_data_input(const Context& c, const std::string& t, TensorType& type);

// The weights' shape without the draft's dropped unit axes.
std::vector<int64_t> weight_dims(const Draft& d);

// Whether the spatial dims of a rank 3-5 shape are all 1: [N, C] as a padfold tensor holds it
// (the same memory in either layout).
bool unit_spatial(const std::vector<int64_t>& shape);

// A Dense draft's B and C as a conv's OI.. weights (alpha applied) and [K] bias (beta applied, a
// scalar C broadcast); `bias` is empty when the node has no C. channels_last: B's rows are the
// features of a map flattened channels last (H, W, C order; Flattening::transpose).
void dense_as_conv(const Draft::Dense& dense, bool channels_last, const Layer& l,
                   std::vector<int64_t>& weight_shape, std::vector<float>& weights,
                   std::vector<float>& bias);

// The shape ONNX's shape inference gives tensor `t` (as written in the graph, not through
// padfold's aliases: a Flatten's [N, C] stays [N, C]), when static.
std::optional<std::vector<int64_t>> onnx_shape(const Context& c, const std::string& t);

// Whether ONNX's shape `onnx` of a tensor holds the values padfold's `ours` holds, in the same
// order: equal, [N, C] for padfold's [N, C, 1..] (a Flatten, a Gemm's output), or `ours` with the
// unit axes of a lowered rank.
bool same_values(const std::vector<int64_t>& onnx, const std::vector<int64_t>& ours);

// ONNX's shape of a draft's output `tensor` against padfold's: `refuse` says why no layer may be
// made of it (a broadcast padfold would not compute); `note`, a difference ONNX's shape inference
// is wrong about (a ceil_mode pool's last window, upstream of it or here).
struct OutputShape {
  std::string refuse, note;
};
OutputShape check_output_shape(const Context& c, const Draft& d, const std::string& tensor);

// Identity / Dropout: whether the node can be bypassed (output 0 stands for input 0).
std::optional<Left> bypass_check(const Context& c, int node);

// How draft_layer reads a node of a quantized graph (quant_graph.h): its data input may be
// int8/uint8 (QOperator), its weights and bias int8/int32 initializers, directly or through a
// DequantizeLinear (QDQ); x, w, b are the positions of X, W and B (QLinearConv: 0, 3, 8), and
// as_op the op it is drafted as (QLinearAveragePool: AveragePool).
struct DraftOptions {
  bool quantized = false;
  int x = 0, w = 1, b = 2;
  std::string as_op;
};

// Conv, ConvTranspose, MaxPool, AveragePool, their Global forms, ReduceMean/ReduceMax over the
// spatial axes, Gemm, MatMul, Add, Concat: a draft, or why not. Errors for a node
// that breaks the ONNX spec in a way that matters (pads with auto_pad, a wrong weight shape...).
std::variant<Draft, Left> draft_layer(const Context& c, int node, const DraftOptions& o = {});

// Reshape -> Transpose -> Reshape ending at Reshape node `i` that splits the channels into factors,
// permutes the factors and merges them back (ShuffleNet's channel shuffle: [N, g, C/g, H, W],
// perm [0, 2, 1, 3, 4], [N, C, H, W]): the gather_channels layer of that permutation, resolved,
// with the first two nodes as part_nodes. nullopt where the nodes are not that pattern (or a node
// between reads something else or is read by another).
std::optional<Draft> draft_channel_permutation(const Context& c, int i);

// ReduceMean(x, channels) -> Sub -> Pow(2) -> ReduceMean(channels) -> Add(epsilon) -> Sqrt -> Div
// ending at Div node `i` (torch.onnx's LayerNorm before opset 17, over the channels once
// last_axis_regions.h has relaid it): the layer_norm layer, resolved, with the other six nodes as
// part_nodes. nullopt where the nodes are not that pattern or an inner tensor has other readers.
std::optional<Draft> draft_layer_norm(const Context& c, int i);

// Folds Pad node `pad_node` (`p`) into the conv or pool `d` reading its output: d then reads
// p.input with the pads and border of the padding module's fold_explicit_pad, resolved; "" or why
// not (a reason that reads after "its reader ...").
std::string fold_pad_into(const Context& c, Draft& d, int pad_node, const PadInfo& p);
std::variant<PadInfo, Left> pad_info(const Context& c, int node);
// A Slice that crops the spatial axes (runs of step 1, batch and channels whole) as a Pad of
// negative pads, mode "crop"; a reason of "" where it slices no spatial axis.
std::variant<PadInfo, Left> crop_info(const Context& c, int node);
std::variant<ActInfo, Left> act_info(const Context& c, int node);

// The tensors a layer reads, with the shapes padfold computes for them (Context::type).
std::vector<TensorSource> sources_of(const Context& c, const Layer& layer);

// Resolves d.layer (frontend/resolve.h) against its sources: "" or why padfold refuses it.
std::string resolve_draft(const Context& c, Draft& d);

// Shared by the drafters.
inline constexpr int kFloat = onnx::TensorProto::FLOAT;
// The layout of ONNX tensors: channels first.
TensorLayout layout_for(int dims);
bool quantized_type(int elem_type);
// check_data_input for a conv or pool, whose data input must be float32 (an error, naming node i),
// or, drafting a quantized graph's layer, int8/uint8 too.
std::string check_float_input(const Context& c, int i, const std::string& t, TensorType& type,
                              const DraftOptions& o = {});
// A float32 constant input (weights, bias), or the int8/int32 one of a quantized graph; `role`
// names it in messages, `why` says why there is none (computed at run time).
const onnx::TensorProto* float_constant(const Context& c, int node, const std::string& t,
                                        const std::string& role, std::string& why,
                                        const DraftOptions& o = {});
std::vector<int64_t> dims_of(const onnx::TensorProto& t);
// A scalar constant input of Clip or Pad, or nullopt when the input is absent. `ok` turns false
// for a value computed at run time.
std::optional<float> scalar_input(const Context& c, int node, int k, bool& ok);

// The drafters draft_layer calls, by family.
std::variant<Draft, Left> draft_conv(const Context& c, int i, const DraftOptions& o);
std::variant<Draft, Left> draft_pool(const Context& c, int i, const DraftOptions& o);
std::variant<Draft, Left> draft_dense(const Context& c, int i, const DraftOptions& o);
// Whether `s`, aligned to the right against `x` as ONNX broadcasts, is one value per channel of
// x (axis 1): [C, 1, 1] or [N or 1, C, 1, 1] against [N, C, H, W], but not [C] or [N, C].
bool broadcasts_per_channel(const std::vector<int64_t>& x, const std::vector<int64_t>& s);

std::variant<Draft, Left> draft_join(const Context& c, int i);
// Node i as an activation layer of `input` (a tensor of `rank` dims: N, C, spatial), its
// activation `act` alone; the caller adds the activation's parameters or quantization.
Draft draft_activation(const Context& c, int i, const std::string& input, size_t rank,
                       Activation act);
std::variant<Draft, Left> draft_softmax(const Context& c, int i);
std::variant<Draft, Left> draft_resize(const Context& c, int i);
std::variant<Draft, Left> draft_slice(const Context& c, int i);

}  // namespace padfold::onnx_import::detail
