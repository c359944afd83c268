#include "frontend/onnx/import_ops.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/limits.h"
#include "base/text.h"

namespace padfold::onnx_import::detail {

// The data input of a layer: computed (not a constant), of a known static shape of rank 3 to 5.
// Returns the reason it is not, or "" and sets `type`.
std::string check_data_input(const Context& c, const std::string& t, TensorType& type) {
  if (c.constant(t))
    return "input '" + t + "' is a constant; padfold layers read tensors computed at run time";
  const auto ty = c.type(t);
  if (!ty || !ty->has_shape)
    return "the shape of input '" + t + "' is unknown after ONNX shape inference";
  if (ty->shape.size() < 3 || ty->shape.size() > 5)
    return "input '" + t + "' has rank " + std::to_string(ty->shape.size()) + " " +
           shape_text(ty->shape, true) +
           "; padfold layers take N, C and 1 to 3 spatial dims (rank 3 to 5)";
  if (!ty->is_static())
    return "input '" + t + "' has the dynamic shape " + shape_text(ty->shape, true) +
           " after ONNX shape inference";
  type = *ty;
  return "";
}

namespace {

constexpr int kFloat = onnx::TensorProto::FLOAT;

const char* const kAutoPads[] = {"NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"};

// The layout of ONNX tensors: channels first.
TensorLayout layout_for(int dims) {
  return {false, dims};
}

// Input `k` of a node, or "" when absent.

bool quantized_type(int elem_type) {
  return elem_type == onnx::TensorProto::INT8 || elem_type == onnx::TensorProto::UINT8;
}

// check_data_input for a conv or pool, whose data input must be float32 (an error, naming node i),
// or, drafting a quantized graph's layer, int8/uint8 too.
std::string check_float_input(const Context& c, int i, const std::string& t, TensorType& type,
                              const DraftOptions& o = {}) {
  if (std::string why = check_data_input(c, t, type); !why.empty()) return why;
  if (type.elem_type != kFloat && !(o.quantized && quantized_type(type.elem_type)))
    c.fail(i, "input '" + t + "' is " + elem_type_name(type.elem_type) +
                  "; expected float32 (padfold generates float32 kernels)");
  return "";
}

// A float32 constant input (weights, bias); `role` names it in messages.
const onnx::TensorProto* float_constant(const Context& c, int node, const std::string& t,
                                        const std::string& role, std::string& why,
                                        const DraftOptions& o = {}) {
  if (o.quantized) {  // int8 weights, int32 bias: an initializer, or one DequantizeLinear'd (QDQ)
    const onnx::TensorProto* q = c.constant(t);
    const int p = c.graph().producer(c.canon(t));
    if (!q && p >= 0 && c.graph().node(p).op_type() == "DequantizeLinear" &&
        c.graph().node(p).input_size() > 0)
      q = c.constant(c.graph().node(p).input(0));
    if (!q)
      c.fail(node, role + " '" + t +
                       "' are neither an initializer nor a DequantizeLinear of one; expected the "
                       "quantized " +
                       role + " as a constant");
    return q;
  }
  const onnx::TensorProto* w = c.constant(t);
  if (!w) {
    why = role + " '" + t +
          "' are computed at run time; padfold takes them from an initializer or a Constant";
    return nullptr;
  }
  if (w->data_type() != kFloat)
    c.fail(node, role + " '" + t + "' are " + elem_type_name(w->data_type()) +
                     "; expected float32 (padfold generates float32 kernels)");
  return w;
}

std::vector<int64_t> dims_of(const onnx::TensorProto& t) {
  return {t.dims().begin(), t.dims().end()};
}

}  // namespace

std::vector<int64_t> per_dim(const Context& c, int node, const NodeAttributes& a,
                             const std::string& name, int dims, int64_t dflt, int64_t min) {
  const auto v = c.at_node(node, [&] { return a.find_ints(name); });
  if (!v) return std::vector<int64_t>(static_cast<size_t>(dims), dflt);
  if (v->size() != static_cast<size_t>(dims))
    c.fail(node, "attribute '" + name + "': " + shape_text(*v) + " has " +
                     std::to_string(v->size()) + " values; expected one per spatial dim (" +
                     std::to_string(dims) + ")");
  for (int64_t x : *v)
    if (x < min)
      c.fail(node, "attribute '" + name + "': " + shape_text(*v) +
                       "; expected values >= " + std::to_string(min));
  return *v;
}

PaddingSpec read_padding(const Context& c, int node, const NodeAttributes& a, int dims) {
  std::string auto_pad = c.at_node(node, [&] { return a.get_string("auto_pad", "NOTSET"); });
  if (auto_pad.empty()) auto_pad = "NOTSET";
  if (std::find(std::begin(kAutoPads), std::end(kAutoPads), auto_pad) == std::end(kAutoPads))
    c.fail(node, "attribute 'auto_pad': '" + auto_pad +
                     "'; expected NOTSET, VALID, SAME_UPPER or SAME_LOWER");
  const auto pads = c.at_node(node, [&] { return a.find_ints("pads"); });
  if (pads) {
    if (pads->size() != 2 * static_cast<size_t>(dims))
      c.fail(node, "attribute 'pads': " + shape_text(*pads) + " has " +
                       std::to_string(pads->size()) + " values; expected " +
                       std::to_string(2 * dims) + " (all befores, then all afters)");
    const bool nonzero = std::any_of(pads->begin(), pads->end(), [](int64_t p) { return p != 0; });
    if (auto_pad != "NOTSET" && nonzero)
      c.fail(node, "attribute 'pads': " + shape_text(*pads) + " together with auto_pad '" +
                       auto_pad +
                       "'; expected pads only with auto_pad NOTSET (ONNX: pads cannot be used "
                       "together with auto_pad)");
    for (int64_t p : *pads)
      if (p < 0)
        c.fail(node, "attribute 'pads': " + shape_text(*pads) +
                         " has a negative value; expected pads >= 0");
  }
  // VALID, SAME_UPPER and SAME_LOWER are padfold's padding names in lower case.
  if (auto_pad != "NOTSET") return parse_padding_name(ascii_lower(auto_pad));
  return explicit_padding(pads ? *pads : std::vector<int64_t>(2 * static_cast<size_t>(dims), 0),
                          dims);
}

namespace {

// The unit spatial axes that the window op's ONNX input `onnx_x` has and padfold's tensor `xt` for
// it lacks (an Unsqueeze padfold bypasses, or a layer it computes at a lower rank): xt then takes
// the ONNX shape, so that the node is drafted at its own rank and lowered by lower_rank.
std::vector<size_t> at_node_rank(const Context& c, const std::string& onnx_x, TensorType& xt) {
  const auto full = c.graph().type(onnx_x);
  if (!full || !full->is_static() || full->shape.size() > 5) return {};
  std::vector<size_t> axes = inserted_unit_axes(full->shape, xt.shape);
  if (!axes.empty()) xt.shape = full->shape;
  return axes;
}

// Drops axes `dropped` (positions in the ONNX shapes) from a window op drafted at its node's rank,
// where the op does nothing along them: kernel 1, no padding, no output growth.
std::string lower_rank(Layer& l, const std::vector<size_t>& dropped) {
  for (size_t axis : dropped) {
    const size_t s = axis - 2;
    const auto nonzero = [&](const std::vector<int64_t>& v) { return s < v.size() && v[s] != 0; };
    if (l.kernel[s] != 1 || nonzero(l.padding.before) || nonzero(l.padding.after) ||
        nonzero(l.output_padding) || (l.op == Op::ConvTranspose && l.stride[s] != 1) ||
        (l.output_shape && s < l.output_shape->size() && (*l.output_shape)[s] != 1))
      return "its unit axis " + std::to_string(axis) +
             " (from an Unsqueeze) has a kernel, stride or padding that is not 1 x 1 x 0";
  }
  for (auto it = dropped.rbegin(); it != dropped.rend(); ++it) {
    const auto s = static_cast<std::ptrdiff_t>(*it - 2);
    std::vector<std::vector<int64_t>*> per_axis = {
        &l.kernel, &l.stride, &l.dilation, &l.padding.before, &l.padding.after, &l.output_padding};
    if (l.output_shape) per_axis.push_back(&*l.output_shape);
    for (std::vector<int64_t>* v : per_axis)
      if (static_cast<std::ptrdiff_t>(v->size()) > s) v->erase(v->begin() + s);
  }
  l.spatial_dims -= static_cast<int>(dropped.size());
  l.layout = layout_for(l.spatial_dims);
  l.op_name = l.op_name.substr(0, l.op_name.size() - 2) + std::to_string(l.spatial_dims) + "d";
  if (l.has_weights())
    l.weight_layout.order = l.weight_layout.order.substr(0, 2) + spatial_letters(l.spatial_dims);
  return "";
}

// A ConvTranspose with auto_pad SAME whose kernel (with output_padding) spans less than its
// stride: the ONNX spec and padfold give input x stride, ONNX Runtime (1.32) the uncropped
// (input - 1) x stride + span + output_padding. Neither is imposed on the caller.
std::string same_transpose_disagrees(const Layer& l) {
  const bool same = l.padding.mode == PadMode::SameUpper || l.padding.mode == PadMode::SameLower;
  if (!same || l.output_shape) return "";
  for (size_t k = 0; k < l.kernel.size(); ++k) {
    const int64_t pad = k < l.output_padding.size() ? l.output_padding[k] : 0;
    const int64_t span = (l.kernel[k] - 1) * l.dilation[k] + 1;
    if (span + pad < l.stride[k])
      return fmt::format(
          "auto_pad {} with a kernel spanning {} (output_padding {}) on spatial axis {}, less "
          "than the stride {}: the ONNX spec gives an output of input x stride, ONNX Runtime "
          "(input - 1) x stride + {}; padfold leaves the node rather than pick one (give "
          "output_shape or explicit pads)",
          l.padding.mode == PadMode::SameUpper ? "SAME_UPPER" : "SAME_LOWER", span, pad, k,
          l.stride[k], span + pad);
  }
  return "";
}

std::variant<Draft, Left> draft_conv(const Context& c, int i, const DraftOptions& o) {
  const onnx::NodeProto& n = c.graph().node(i);
  const bool transposed = n.op_type() == "ConvTranspose";
  const std::string w_in = input_of(n, o.w);
  if (input_of(n, o.x).empty() || w_in.empty())
    c.fail(i, "expected inputs X and W; found " + std::to_string(n.input_size()) + " input(s)");
  Draft d;
  d.node = i;
  Layer& l = d.layer;
  l.op = transposed ? Op::ConvTranspose : Op::Conv;
  const std::string x = c.canon(n.input(o.x));
  TensorType xt;
  if (std::string why = check_float_input(c, i, x, xt, o); !why.empty()) return Left{why};
  d.dropped_axes = at_node_rank(c, n.input(o.x), xt);
  std::string why;
  d.weights = float_constant(c, i, w_in, "weights", why, o);
  if (!d.weights) return Left{why};
  const std::string b = input_of(n, o.b);
  if (!b.empty()) {
    d.bias = float_constant(c, i, b, "bias", why, o);
    if (!d.bias) return Left{why};
  }
  const std::vector<int64_t> w = dims_of(*d.weights);
  if (w.size() != xt.shape.size())
    c.fail(i, "input " + std::to_string(o.w) + " (weights) '" + w_in + "' has shape " +
                  shape_text(w) + "; expected rank " + std::to_string(xt.shape.size()) +
                  " like input '" + x + "' " + shape_text(xt.shape, true));
  const int dims = static_cast<int>(xt.shape.size()) - 2;
  l.spatial_dims = dims;
  l.layout = layout_for(dims);
  l.inputs = {x};
  d.output = n.output(0);
  const NodeAttributes a = c.at_node(i, [&] { return NodeAttributes(n); });
  l.padding = read_padding(c, i, a, dims);
  const std::vector<int64_t> kernel(w.begin() + 2, w.end());
  if (const auto ks = c.at_node(i, [&] { return a.find_ints("kernel_shape"); });
      ks && *ks != kernel)
    c.fail(i, "attribute 'kernel_shape': " + shape_text(*ks) +
                  "; expected the weights' spatial shape " + shape_text(kernel));
  const int64_t group = c.at_node(i, [&] { return a.get_int("group", 1); });
  if (group < 1) c.fail(i, "attribute 'group': " + std::to_string(group) + "; expected >= 1");
  l.op_name = (transposed ? "conv_transpose" : "conv") + std::to_string(dims) + "d";
  l.weight_layout.order = (transposed ? "IO" : "OI") + spatial_letters(dims);
  const auto out_channels = transposed ? checked_mul(w[1], group) : std::optional<int64_t>(w[0]);
  if (!out_channels)
    c.fail(i, "input 1 (weights) '" + n.input(1) + "' has shape " + shape_text(w) + " and group " +
                  std::to_string(group) + ": the output channels overflow");
  l.out_channels = *out_channels;
  l.kernel = kernel;
  l.stride = per_dim(c, i, a, "strides", dims, 1, 1);
  l.dilation = per_dim(c, i, a, "dilations", dims, 1, 1);
  l.groups = group;
  if (transposed) {
    if (a.has("output_padding")) l.output_padding = per_dim(c, i, a, "output_padding", dims, 0, 0);
    if (const auto os = c.at_node(i, [&] { return a.find_ints("output_shape"); })) {
      std::vector<int64_t> spatial = *os;
      if (spatial.size() == static_cast<size_t>(dims) + 2)  // N, C and the spatial sizes
        spatial.erase(spatial.begin(), spatial.begin() + 2);
      if (spatial.size() != static_cast<size_t>(dims))
        c.fail(i, "attribute 'output_shape': " + shape_text(*os) + "; expected " +
                      std::to_string(dims) + " spatial sizes");
      l.output_shape = spatial;
    }
    if (std::string why = same_transpose_disagrees(l); !why.empty()) return Left{why};
  }
  l.bias = d.bias != nullptr;
  return d;
}

// ReduceMean/ReduceMax's axes, or why they are not the spatial axes of a rank-`rank` tensor
// (then the reduce is no global pool).
std::string reduce_axes_are_spatial(const Context& c, int i, size_t rank) {
  const onnx::NodeProto& n = c.graph().node(i);
  const NodeAttributes a = c.at_node(i, [&] { return NodeAttributes(n); });
  std::optional<std::vector<int64_t>> axes = c.at_node(i, [&] { return a.find_ints("axes"); });
  if (!axes && !input_of(n, 1).empty()) {  // opset 18: an input
    const onnx::TensorProto* t = c.constant(input_of(n, 1));
    if (!t) return "its axes '" + input_of(n, 1) + "' are computed at run time";
    axes = c.at_node(i, [&] { return to_int64s(*t, "input 1 (axes) '" + input_of(n, 1) + "'"); });
  }
  if (!axes || axes->empty())
    return c.at_node(i, [&] { return a.get_int("noop_with_empty_axes", 0); }) != 0
               ? "it has no axes and noop_with_empty_axes: an identity"
               : "it reduces every axis, batch and channels included";
  std::vector<int64_t> sorted;
  for (int64_t x : *axes) sorted.push_back(x < 0 ? x + static_cast<int64_t>(rank) : x);
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> spatial;
  for (size_t k = 2; k < rank; ++k) spatial.push_back(static_cast<int64_t>(k));
  if (sorted != spatial)
    return "its axes " + shape_text(*axes) + " are not the spatial axes " + shape_text(spatial) +
           "; padfold computes a reduce over every spatial axis (a global pool)";
  return "";
}

// MaxPool and AveragePool; GlobalMaxPool and GlobalAveragePool, and ReduceMax and ReduceMean over
// the spatial axes, as the pool whose one window is the whole input (VALID, stride 1).
std::variant<Draft, Left> draft_pool(const Context& c, int i, const DraftOptions& o) {
  const onnx::NodeProto& n = c.graph().node(i);
  const std::string op = o.as_op.empty() ? n.op_type() : o.as_op;
  const bool max = op == "MaxPool" || op == "GlobalMaxPool" || op == "ReduceMax";
  const bool reduce = op.rfind("Reduce", 0) == 0;
  const bool global = reduce || op.rfind("Global", 0) == 0;
  if (input_of(n, 0).empty()) c.fail(i, "expected input X");
  Draft d;
  d.node = i;
  Layer& l = d.layer;
  l.op = max ? Op::MaxPool : Op::AvgPool;
  const std::string x = c.canon(n.input(0));
  TensorType xt;
  if (std::string why = check_float_input(c, i, x, xt, o); !why.empty()) return Left{why};
  if (!reduce) d.dropped_axes = at_node_rank(c, n.input(0), xt);
  const int dims = static_cast<int>(xt.shape.size()) - 2;
  if (reduce) {
    if (std::string why = reduce_axes_are_spatial(c, i, xt.shape.size()); !why.empty())
      return Left{why};
    const NodeAttributes a = c.at_node(i, [&] { return NodeAttributes(n); });
    if (c.at_node(i, [&] { return a.get_int("keepdims", 1); }) == 0)
      d.onnx_shape = std::vector<int64_t>{xt.shape[0], xt.shape[1]};
  }
  l.spatial_dims = dims;
  l.layout = layout_for(dims);
  l.inputs = {x};
  d.output = n.output(0);
  const NodeAttributes a = c.at_node(i, [&] { return NodeAttributes(n); });
  if (max && n.output_size() > 1 && !n.output(1).empty() &&
      (!c.readers(n.output(1)).empty() || c.reaches_graph_output(n.output(1))))
    return Left{"its Indices output '" + n.output(1) +
                "' is used; padfold does not produce MaxPool indices"};
  // storage_order (row- or column-major) only says how Indices are counted: with Indices unused,
  // any order gives the same output.
  c.at_node(i, [&] { return a.get_int("storage_order", 0); });
  l.op_name = std::string(max ? "max_pool" : "avg_pool") + std::to_string(dims) + "d";
  if (global) {
    l.kernel.assign(xt.shape.begin() + 2, xt.shape.end());
    l.stride.assign(static_cast<size_t>(dims), 1);
    l.dilation.assign(static_cast<size_t>(dims), 1);
    l.padding.mode = PadMode::Valid;
    l.padding.written = "valid (" + n.op_type() + ")";
    return d;
  }
  if (!a.has("kernel_shape"))
    c.fail(i, "attribute 'kernel_shape' is missing; expected one size per spatial dim");
  l.padding = read_padding(c, i, a, dims);
  l.kernel = per_dim(c, i, a, "kernel_shape", dims, 1, 1);
  l.stride = per_dim(c, i, a, "strides", dims, 1, 1);
  l.dilation = per_dim(c, i, a, "dilations", dims, 1, 1);
  l.ceil_mode = c.at_node(i, [&] { return a.get_int("ceil_mode", 0); }) != 0;
  if (!max)
    l.count_include_pad = c.at_node(i, [&] { return a.get_int("count_include_pad", 0); }) != 0;
  return d;
}

// The channels-last layout Transpose (perm 0, 2, ..., 1) producing `x` from a feature map, read by
// node `reader` alone; -1 when there is none.
int channels_last_transpose(const Context& c, const std::string& x, int reader) {
  const int p = c.graph().producer(x);
  if (p < 0 || c.readers(x) != std::vector<int>{reader} || c.reaches_graph_output(x)) return -1;
  const onnx::NodeProto& n = c.graph().node(p);
  if (!default_domain(n) || n.op_type() != "Transpose" || input_of(n, 0).empty()) return -1;
  const auto mt = c.type(c.canon(n.input(0)));
  if (!mt || !mt->is_static() || mt->shape.size() < 3 || mt->shape.size() > 5) return -1;
  const auto perm = c.at_node(p, [&] { return NodeAttributes(n).find_ints("perm"); });
  return perm && *perm == channels_last_perm(mt->shape.size()) ? p : -1;
}

// The Flatten or Reshape producing `x` from a feature map of rank 3 or more whose spatial dims are
// not all 1, as ONNX's [N, C*H*W] (the map's own element order) or, through a channels-last
// Transpose (Keras's Flatten as tf2onnx writes it), [N, H*W*C]; read by node `reader` alone.
Flattening flattening_node(const Context& c, const std::string& x, int reader) {
  const int p = c.graph().producer(x);
  if (p < 0 || c.readers(x) != std::vector<int>{reader} || c.reaches_graph_output(x)) return {};
  const onnx::NodeProto& n = c.graph().node(p);
  if (!default_domain(n) || (n.op_type() != "Flatten" && n.op_type() != "Reshape") ||
      input_of(n, 0).empty())
    return {};
  Flattening f{p, channels_last_transpose(c, c.canon(n.input(0)), p)};
  const std::string map =
      f.transpose >= 0 ? c.canon(c.graph().node(f.transpose).input(0)) : c.canon(n.input(0));
  const auto xt = c.type(x), mt = c.type(map);
  if (c.constant(map) || !xt || !xt->is_static() || !mt || !mt->is_static() ||
      mt->shape.size() < 3 || unit_spatial(mt->shape))
    return {};
  int64_t features = 1;
  for (size_t k = 1; k < mt->shape.size(); ++k) features *= mt->shape[k];
  if (xt->shape != std::vector<int64_t>{mt->shape[0], features}) return {};
  return f;
}

// Gemm (A * B * alpha + C * beta, transA 0) and MatMul with a constant 2-D B, on an A that
// padfold holds as [N, C, 1..] (a global pool's output, seen as [N, C] through Flatten, Reshape,
// Squeeze or ReduceMean's keepdims 0): the 1x1 conv with K output channels. On a feature map
// flattened to [N, C*H*W] (AlexNet's and VGG's classifiers): the valid H x W conv. Quantized
// (QDQ): int8 B as [K, C] (transB 1), int32 C, alpha and beta 1, on a global pool's output.
std::variant<Draft, Left> draft_dense(const Context& c, int i, const DraftOptions& o) {
  const onnx::NodeProto& n = c.graph().node(i);
  const bool gemm = n.op_type() == "Gemm";
  if (input_of(n, 0).empty() || input_of(n, 1).empty())
    c.fail(i, "expected inputs A and B; found " + std::to_string(n.input_size()) + " input(s)");
  Draft d;
  d.node = i;
  Draft::Dense dense;
  std::string x = c.canon(n.input(0));
  if (c.constant(x)) return Left{"input A '" + x + "' is a constant"};
  d.flatten = flattening_node(c, x, i);
  if (d.flatten.node >= 0)
    x = c.canon(
        c.graph().node(d.flatten.transpose >= 0 ? d.flatten.transpose : d.flatten.node).input(0));
  const auto xt = c.type(x);
  if (!xt || !xt->is_static())
    return Left{"the shape of input A '" + x + "' is not static after ONNX shape inference"};
  if (d.flatten.node < 0 && !unit_spatial(xt->shape))
    return Left{"input A '" + x + "' has the shape " + shape_text(xt->shape, true) +
                "; padfold computes " + n.op_type() +
                " as a 1x1 convolution of a padfold layer's output whose spatial dims are all 1 "
                "(a global pool's, flattened)"};
  if (xt->elem_type != kFloat)
    c.fail(i, "input A '" + x + "' is " + elem_type_name(xt->elem_type) +
                  "; expected float32 (padfold generates float32 kernels)");
  if (gemm) {
    const NodeAttributes a = c.at_node(i, [&] { return NodeAttributes(n); });
    if (c.at_node(i, [&] { return a.get_int("transA", 0); }) != 0)
      return Left{"transA is set; padfold computes Gemm with A as it is ([N, C])"};
    dense.trans_b = c.at_node(i, [&] { return a.get_int("transB", 0); }) != 0;
    dense.alpha = c.at_node(i, [&] { return a.get_float("alpha", 1.f); });
    dense.beta = c.at_node(i, [&] { return a.get_float("beta", 1.f); });
  } else if (n.input_size() != 2) {
    c.fail(i, "expected inputs A and B; found " + std::to_string(n.input_size()) + " input(s)");
  }
  if (o.quantized && (d.flatten.node >= 0 || !dense.trans_b || dense.alpha != 1 || dense.beta != 1))
    c.fail(i, "a quantized " + n.op_type() +
                  " is imported with transB 1, alpha and beta 1, on a tensor whose spatial dims "
                  "are 1 (a global pool's, flattened)");
  std::string why;
  d.weights = float_constant(c, i, n.input(1), "B", why, o);
  if (!d.weights) return Left{why};
  const std::vector<int64_t> w = dims_of(*d.weights);
  if (w.size() != 2)
    return Left{"input B '" + n.input(1) + "' has the shape " + shape_text(w) +
                "; padfold takes a 2-D B"};
  int64_t channels = 1;  // per batch: C, or C*H*W of a flattened map
  for (size_t a = 1; a < xt->shape.size(); ++a) channels *= xt->shape[a];
  const int64_t k = dense.trans_b ? w[0] : w[1];
  if ((dense.trans_b ? w[1] : w[0]) != channels)
    c.fail(i, "input B '" + n.input(1) + "' has the shape " + shape_text(w) + "; expected " +
                  (dense.trans_b ? "[K, " + std::to_string(channels) + "] (transB 1)"
                                 : "[" + std::to_string(channels) + ", K]") +
                  " for A " + shape_text(xt->shape, true));
  if (const std::string b = input_of(n, 2); gemm && !b.empty() && dense.beta != 0) {
    d.bias = float_constant(c, i, b, "C", why, o);
    if (!d.bias) return Left{why};
    const std::vector<int64_t> bs = dims_of(*d.bias);
    int64_t values = 1;
    for (int64_t v : bs) values *= v;
    const bool per_output = !bs.empty() && bs.back() == values && (values == k || values == 1);
    if (!(bs.empty() || per_output) || bs.size() > 2)
      return Left{"input C '" + b + "' has the shape " + shape_text(bs) +
                  "; padfold takes a C of one value per output ([" + std::to_string(k) +
                  "]) or a scalar"};
  }
  Layer& l = d.layer;
  const int dims = static_cast<int>(xt->shape.size()) - 2;
  l.op = Op::Conv;
  l.op_name = "conv" + std::to_string(dims) + "d";
  l.spatial_dims = dims;
  l.layout = layout_for(dims);
  l.weight_layout.order = "OI" + spatial_letters(dims);
  l.inputs = {x};
  d.output = n.output(0);
  l.out_channels = k;
  l.kernel = l.stride = l.dilation = std::vector<int64_t>(static_cast<size_t>(dims), 1);
  if (d.flatten.node >= 0) l.kernel.assign(xt->shape.begin() + 2, xt->shape.end());
  l.padding.mode = PadMode::Valid;
  l.padding.written = "valid (" + n.op_type() + ")";
  l.bias = d.bias != nullptr;
  d.dense = dense;
  return d;
}

// Softmax over the channel axis (axis 1, or -1 of a classifier's [N, K]); before opset 13 it
// flattens from its axis, which is the channels alone only when the spatial dims are 1.
std::variant<Draft, Left> draft_softmax(const Context& c, int i) {
  const onnx::NodeProto& n = c.graph().node(i);
  if (input_of(n, 0).empty()) c.fail(i, "expected input 'input'");
  Draft d;
  d.node = i;
  const std::string x = c.canon(n.input(0));
  TensorType xt;
  if (std::string why = check_float_input(c, i, x, xt); !why.empty()) return Left{why};
  const auto onnx_type = c.graph().type(n.input(0));
  const int64_t rank = onnx_type && onnx_type->has_shape
                           ? static_cast<int64_t>(onnx_type->shape.size())
                           : static_cast<int64_t>(xt.shape.size());
  const bool opset13 = c.graph().opset() >= 13;
  const NodeAttributes a = c.at_node(i, [&] { return NodeAttributes(n); });
  int64_t axis = c.at_node(i, [&] { return a.get_int("axis", opset13 ? -1 : 1); });
  if (axis < 0) axis += rank;
  if (axis != 1 || (!opset13 && !unit_spatial(xt.shape)))
    return Left{
        "axis " + std::to_string(axis) + " of a rank-" + std::to_string(rank) +
        " tensor; padfold's softmax normalizes over the channels (axis 1" +
        (opset13 ? std::string(")") : std::string(", with unit spatial dims before opset 13)"))};
  Layer& l = d.layer;
  l.op = Op::Softmax;
  l.op_name = "softmax";
  l.spatial_dims = static_cast<int>(xt.shape.size()) - 2;
  l.layout = layout_for(l.spatial_dims);
  l.inputs = {x};
  d.output = n.output(0);
  return d;
}

// Resize (opset 10: X, scales; 11 on: X, roi, scales, sizes) and Upsample (X, scales) of the
// spatial axes: scales or sizes from constants, or the output size from shape inference where
// sizes are computed (torch's F.interpolate(size=...) writes Shape -> Slice -> Concat, constant
// once the input size is fixed).
std::variant<Draft, Left> draft_resize(const Context& c, int i) {
  const onnx::NodeProto& n = c.graph().node(i);
  if (input_of(n, 0).empty()) c.fail(i, "expected input 'X'");
  Draft d;
  d.node = i;
  const std::string x = c.canon(n.input(0));
  TensorType xt;
  if (std::string why = check_float_input(c, i, x, xt); !why.empty()) return Left{why};
  const size_t rank = xt.shape.size();
  if (rank < 3 || rank > 5)
    return Left{"input 'X' has rank " + std::to_string(rank) +
                "; padfold resizes N, C and 1-3 spatial axes"};
  const NodeAttributes a = c.at_node(i, [&] { return NodeAttributes(n); });
  const bool upsample = n.op_type() == "Upsample";
  const int64_t opset = c.graph().opset();
  const bool v10 = upsample || opset < 11;  // scales only, asymmetric coordinates
  ResizeSpec r;
  try {
    r.mode = parse_resize_mode(c.at_node(i, [&] { return a.get_string("mode", "nearest"); }));
    r.coordinates =
        v10 ? ResizeCoordinates::Asymmetric : parse_resize_coordinates(c.at_node(i, [&] {
          return a.get_string("coordinate_transformation_mode", "half_pixel");
        }));
    if (!v10)
      r.rounding = parse_nearest_rounding(
          c.at_node(i, [&] { return a.get_string("nearest_mode", "round_prefer_floor"); }));
  } catch (const std::invalid_argument& e) {
    return Left{e.what()};
  }
  if (c.at_node(i, [&] { return a.get_int("antialias", 0); }) != 0)
    return Left{"antialias is set; padfold resizes without an antialiasing filter"};
  if (a.find_ints("axes"))
    return Left{"axes is given; padfold reads scales or sizes for every axis"};
  if (c.at_node(i, [&] { return a.get_string("keep_aspect_ratio_policy", "stretch"); }) !=
      "stretch")
    return Left{"keep_aspect_ratio_policy is not 'stretch'"};
  const std::string scales_name = input_of(n, v10 ? 1 : 2), sizes_name = v10 ? "" : input_of(n, 3);
  std::vector<float> scales;
  std::vector<int64_t> sizes;
  if (!scales_name.empty()) {
    const onnx::TensorProto* t = c.constant(scales_name);
    if (!t) return Left{"its scales '" + scales_name + "' are computed, not a constant"};
    scales = c.at_node(i, [&] { return to_float_tensor(*t, "scales").data; });
  }
  if (scales.empty() && !sizes_name.empty()) {
    if (const onnx::TensorProto* t = c.constant(sizes_name)) {
      sizes = c.at_node(i, [&] { return to_int64s(*t, "sizes"); });
    } else if (const auto out = onnx_shape(c, n.output(0)); out && out->size() == rank) {
      sizes = *out;  // shape inference's, for this input size
    } else {
      return Left{"its sizes '" + sizes_name +
                  "' are computed and ONNX shape inference gives no static output shape"};
    }
  }
  if (scales.empty() && sizes.empty())
    c.fail(i, "expected scales or sizes (one of them non-empty)");
  const size_t given = scales.empty() ? sizes.size() : scales.size();
  if (given != rank)
    c.fail(i, std::string(scales.empty() ? "sizes" : "scales") + " has " + std::to_string(given) +
                  " values; expected " + std::to_string(rank) + " (one per axis of X " +
                  shape_text(xt.shape, true) + ")");
  for (size_t k = 0; k < 2; ++k)
    if (scales.empty() ? sizes[k] != xt.shape[k] : scales[k] != 1.f)
      return Left{std::string(scales.empty() ? "sizes" : "scales") + " change axis " +
                  std::to_string(k) + " (" + (k == 0 ? "the batch" : "the channels") +
                  "); padfold resizes the spatial axes"};
  if (scales.empty())
    r.output.assign(sizes.begin() + 2, sizes.end());
  else
    r.scales.assign(scales.begin() + 2, scales.end());
  if (v10 && r.mode == ResizeMode::Nearest) {
    // Opset 10's nearest rounds down when upsampling and up when downsampling, per axis.
    const bool down = std::any_of(r.scales.begin(), r.scales.end(), [](float s) { return s < 1; });
    const bool up = std::any_of(r.scales.begin(), r.scales.end(), [](float s) { return s > 1; });
    if (down && up) return Left{"nearest at opset 10 upsamples one axis and downsamples another"};
    r.rounding = down ? NearestRounding::Ceil : NearestRounding::Floor;
  }
  Layer& l = d.layer;
  l.op = Op::Resize;
  l.op_name = "resize";
  l.spatial_dims = static_cast<int>(rank) - 2;
  l.layout = layout_for(l.spatial_dims);
  l.resize = r;
  l.inputs = {x};
  d.output = n.output(0);
  return d;
}

// The indices ONNX's Slice takes along an axis of `dim` elements: start and end counted from the
// end where negative, then clamped ([0, dim] for a positive step, [-1, dim - 1] for a negative).
std::vector<int64_t> slice_indices(int64_t dim, int64_t start, int64_t end, int64_t step) {
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  std::vector<int64_t> out;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    for (int64_t k = start; k < end; k += step) out.push_back(k);
  } else {
    start = std::clamp<int64_t>(start, 0, dim - 1);
    end = std::clamp<int64_t>(end, -1, dim - 1);
    for (int64_t k = start; k > end; k += step) out.push_back(k);
  }
  return out;
}

// A Slice along the channels (torch's chunk and split, a Split's part): the gather of its
// channels. Every other axis must be kept whole.
struct SliceKept {
  std::string input;
  TensorType type;
  std::vector<std::vector<int64_t>> kept;  // per axis of the input

  bool keeps_whole(size_t axis) const {
    const std::vector<int64_t>& idx = kept[axis];
    return static_cast<int64_t>(idx.size()) == type.shape[axis] &&
           (idx.empty() || idx.front() == 0) && std::is_sorted(idx.begin(), idx.end());
  }
};

// The indices Slice node `i` keeps of each axis of its input (of rank 3 to 5), in order.
std::variant<SliceKept, Left> slice_kept(const Context& c, int i) {
  const onnx::NodeProto& n = c.graph().node(i);
  if (input_of(n, 0).empty()) c.fail(i, "expected input 'data'");
  SliceKept r;
  r.input = c.canon(n.input(0));
  TensorType& xt = r.type;
  if (std::string why = check_float_input(c, i, r.input, xt); !why.empty()) return Left{why};
  const int64_t rank = static_cast<int64_t>(xt.shape.size());
  if (rank < 3 || rank > 5)
    return Left{"input 'data' has rank " + std::to_string(rank) +
                "; padfold slices tensors of N, C and 1-3 spatial axes"};
  std::vector<int64_t> starts, ends, axes, steps;
  if (c.graph().opset() < 10) {
    const NodeAttributes a = c.at_node(i, [&] { return NodeAttributes(n); });
    starts = c.at_node(i, [&] { return a.get_ints("starts"); });
    ends = c.at_node(i, [&] { return a.get_ints("ends"); });
    axes = c.at_node(i, [&] { return a.get_ints("axes"); });
  } else {
    const char* const names[] = {"", "starts", "ends", "axes", "steps"};
    std::vector<int64_t>* values[] = {nullptr, &starts, &ends, &axes, &steps};
    for (int k = 1; k <= 4; ++k) {
      const std::string t = input_of(n, k);
      if (t.empty()) continue;
      const onnx::TensorProto* v = c.constant(t);
      if (!v)
        return Left{std::string("its ") + names[k] + " '" + t + "' are computed, not constants"};
      *values[k] = c.at_node(i, [&] { return to_int64s(*v, names[k]); });
    }
  }
  if (axes.empty())
    for (int64_t k = 0; k < static_cast<int64_t>(starts.size()); ++k) axes.push_back(k);
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    c.fail(i, fmt::format("starts, ends, axes and steps have {}, {}, {} and {} values; expected "
                          "one each per sliced axis",
                          starts.size(), ends.size(), axes.size(), steps.size()));
  std::vector<std::vector<int64_t>>& kept = r.kept;
  kept.resize(static_cast<size_t>(rank));
  for (int64_t k = 0; k < rank; ++k)
    for (int64_t e = 0; e < xt.shape[static_cast<size_t>(k)]; ++e)
      kept[static_cast<size_t>(k)].push_back(e);
  std::set<int64_t> seen;
  for (size_t s = 0; s < starts.size(); ++s) {
    int64_t axis = axes[s] < 0 ? axes[s] + rank : axes[s];
    if (axis < 0 || axis >= rank || !seen.insert(axis).second)
      c.fail(i, fmt::format("axes {} names axis {} of a rank-{} input twice or not at all",
                            shape_text(axes), axes[s], rank));
    if (steps[s] == 0) c.fail(i, "a step of 0; expected steps other than 0");
    kept[static_cast<size_t>(axis)] =
        slice_indices(xt.shape[static_cast<size_t>(axis)], starts[s], ends[s], steps[s]);
  }
  return r;
}

std::variant<Draft, Left> draft_slice(const Context& c, int i) {
  const onnx::NodeProto& n = c.graph().node(i);
  auto sliced = slice_kept(c, i);
  if (auto* left = std::get_if<Left>(&sliced)) return *left;
  const SliceKept& sk = std::get<SliceKept>(sliced);
  const std::vector<std::vector<int64_t>>& kept = sk.kept;
  const TensorType& xt = sk.type;
  const int64_t rank = static_cast<int64_t>(xt.shape.size());
  const std::string& x = sk.input;
  for (int64_t k = 0; k < rank; ++k) {
    if (k == 1) continue;
    if (!sk.keeps_whole(static_cast<size_t>(k)))
      return Left{"it slices axis " + std::to_string(k) + " (" +
                  (k == 0 ? std::string("the batch")
                          : std::string("a spatial axis: a crop, which folds only into the convs "
                                        "and pools reading it")) +
                  "); padfold slices the channels (axis 1)"};
  }
  if (kept[1].empty()) return Left{"it takes no channels (an empty tensor)"};
  Draft d;
  d.node = i;
  Layer& l = d.layer;
  l.op = Op::GatherChannels;
  l.op_name = "gather_channels";
  l.spatial_dims = static_cast<int>(rank) - 2;
  l.layout = layout_for(l.spatial_dims);
  l.channels = kept[1];
  l.inputs = {x};
  d.output = n.output(0);
  return d;
}

}  // namespace

std::variant<PadInfo, Left> crop_info(const Context& c, int i) {
  auto sliced = slice_kept(c, i);
  if (auto* left = std::get_if<Left>(&sliced)) return *left;
  const SliceKept& sk = std::get<SliceKept>(sliced);
  const std::vector<int64_t>& shape = sk.type.shape;
  bool crops = false;
  for (size_t k = 2; k < shape.size(); ++k) crops = crops || !sk.keeps_whole(k);
  if (!crops) return Left{""};  // no crop: the drafter's reason stands
  for (size_t k = 0; k < 2; ++k)
    if (!sk.keeps_whole(k))
      return Left{"it slices axis " + std::to_string(k) + " (" +
                  (k == 0 ? std::string("the batch") : std::string("the channels")) +
                  ") and a spatial axis; padfold slices the channels or crops the spatial axes"};
  PadInfo p;
  p.input = sk.input;
  p.mode = "crop";
  for (size_t k = 2; k < shape.size(); ++k) {
    const std::vector<int64_t>& idx = sk.kept[k];
    bool run = !idx.empty();
    for (size_t j = 1; run && j < idx.size(); ++j) run = idx[j] == idx[j - 1] + 1;
    if (!run)
      return Left{"it takes " +
                  (idx.empty() ? std::string("nothing") : "a strided or reversed run") +
                  " of spatial axis " + std::to_string(k) +
                  "; padfold folds crops (a run of step 1) into the conv or pool reading them"};
    p.pad.before.push_back(-idx.front());
    p.pad.after.push_back(idx.back() + 1 - shape[k]);
  }
  return p;
}

std::optional<std::vector<int64_t>> onnx_shape(const Context& c, const std::string& t) {
  const auto ty = c.graph().type(t);
  if (!ty || !ty->is_static()) return std::nullopt;
  return ty->shape;
}

namespace {

// Whether `s`, aligned to the right against `x` as ONNX broadcasts, is one value per channel of
// x (axis 1): [C, 1, 1] or [N or 1, C, 1, 1] against [N, C, H, W], but not [C] or [N, C].
bool broadcasts_per_channel(const std::vector<int64_t>& x, const std::vector<int64_t>& s) {
  if (x.size() < 3 || s.size() > x.size()) return false;
  const size_t lead = x.size() - s.size();
  for (size_t k = 0; k < s.size(); ++k) {
    const size_t axis = lead + k;
    if (axis == 1 ? s[k] != x[1] : axis == 0 ? (s[k] != 1 && s[k] != x[0]) : s[k] != 1)
      return false;
  }
  return true;
}

// Add and Concat read two or more computed float32 tensors of rank 3 to 5; Mul two, the second
// (or, swapped, the first) of one value per channel: squeeze-and-excite's scale. How the inputs
// broadcast is ONNX's rule on ONNX's shapes (rank and dims), checked before padfold's shapes are:
// a [N, C] tensor that padfold holds as [N, C, 1, 1] broadcasts along ONNX's last axis.
std::variant<Draft, Left> draft_join(const Context& c, int i) {
  const onnx::NodeProto& n = c.graph().node(i);
  const bool add = n.op_type() == "Add", mul = n.op_type() == "Mul";
  Draft d;
  d.node = i;
  Layer& l = d.layer;
  l.op = add ? Op::Add : mul ? Op::Mul : Op::Concat;
  l.op_name = add ? "add" : mul ? "mul" : "concat";
  d.output = n.output(0);
  std::vector<TensorType> types;
  std::vector<std::vector<int64_t>> onnx_shapes;
  for (int k = 0; k < n.input_size(); ++k) {
    const std::string t = c.canon(n.input(k));
    TensorType ty;
    if (std::string why = check_data_input(c, t, ty); !why.empty()) return Left{why};
    if (ty.elem_type != kFloat)
      return Left{"input '" + t + "' is " + elem_type_name(ty.elem_type) + "; padfold's " +
                  l.op_name + " is float32"};
    const auto shape = onnx_shape(c, n.input(k));
    if (!shape)
      return Left{"the shape of input '" + n.input(k) +
                  "' is not static after ONNX shape inference; padfold decides broadcasting "
                  "from it"};
    l.inputs.push_back(t);
    types.push_back(ty);
    onnx_shapes.push_back(*shape);
  }
  if (types.size() < 2) return Left{"it has a single input"};
  if (add && types.size() > 2) return Left{"it has " + std::to_string(types.size()) + " inputs"};
  if (mul) {
    if (broadcasts_per_channel(onnx_shapes[1], onnx_shapes[0]) &&
        !broadcasts_per_channel(onnx_shapes[0], onnx_shapes[1])) {
      std::swap(l.inputs[0], l.inputs[1]);
      std::swap(types[0], types[1]);
      std::swap(onnx_shapes[0], onnx_shapes[1]);
    }
    const std::vector<int64_t>& x = types[0].shape;
    std::vector<int64_t> per_channel(x.size(), 1);
    per_channel[0] = x[0];
    per_channel[1] = x[1];
    if (!broadcasts_per_channel(onnx_shapes[0], onnx_shapes[1]) || types[1].shape != per_channel ||
        x == per_channel)
      return Left{"its inputs have the shapes " + shape_text(onnx_shapes[0], true) + " and " +
                  shape_text(onnx_shapes[1], true) +
                  "; padfold's mul scales a tensor by one value per channel " +
                  shape_text(per_channel) + " (squeeze-and-excite)"};
  }
  if (add && onnx_shapes[0] != onnx_shapes[1])
    return Left{"its inputs have the shapes " + shape_text(onnx_shapes[0], true) + " and " +
                shape_text(onnx_shapes[1], true) +
                "; padfold's add takes tensors of one shape (no broadcasting)"};
  const std::vector<int64_t>& s0 = types[0].shape;
  l.spatial_dims = static_cast<int>(s0.size()) - 2;
  l.layout = layout_for(l.spatial_dims);
  if (mul) return d;
  if (add) {
    if (types[1].shape != s0)
      return Left{"its inputs have the shapes " + shape_text(s0, true) + " and " +
                  shape_text(types[1].shape, true) +
                  "; padfold's add takes tensors of one shape (no broadcasting)"};
    return d;
  }
  if (l.inputs.size() > kMaxJoinInputs)
    return Left{"it has " + std::to_string(l.inputs.size()) +
                " inputs; padfold's concat takes at most " + std::to_string(kMaxJoinInputs)};
  const NodeAttributes a = c.at_node(i, [&] { return NodeAttributes(n); });
  int64_t axis = c.at_node(i, [&] { return a.get_int("axis", 1); });
  if (axis < 0) axis += static_cast<int64_t>(onnx_shapes[0].size());
  if (axis != 1)
    return Left{"axis " + std::to_string(axis) + "; padfold's concat joins channels (axis 1)"};
  int64_t channels = 0;
  for (size_t k = 0; k < types.size(); ++k) {
    // Equal but for the channels, in ONNX's shapes and in padfold's.
    for (const auto& [a0, b0] :
         {std::pair{onnx_shapes[k], onnx_shapes[0]}, std::pair{types[k].shape, s0}}) {
      std::vector<int64_t> x = a0, y = b0;
      if (x.size() == y.size() && x.size() >= 2) x[1] = y[1] = 0;
      if (x != y)
        return Left{"its inputs have the shapes " + shape_text(b0, true) + " and " +
                    shape_text(a0, true) +
                    "; padfold's concat takes equal batch and spatial sizes"};
    }
    const auto sum = checked_add(channels, types[k].shape[1]);
    if (!sum) return Left{"its inputs' channels overflow"};
    channels = *sum;
  }
  return d;
}

// A scalar constant input of Clip or Pad, or nullopt when the input is absent. `ok` turns false
// for a value computed at run time.
std::optional<float> scalar_input(const Context& c, int node, int k, bool& ok) {
  const onnx::NodeProto& n = c.graph().node(node);
  const std::string t = input_of(n, k);
  if (t.empty()) return std::nullopt;
  const onnx::TensorProto* v = c.constant(t);
  if (!v) {
    ok = false;
    return std::nullopt;
  }
  const FloatTensor f = to_float_tensor(*v, "input " + std::to_string(k) + " '" + t + "'");
  if (f.data.size() != 1)
    c.fail(node, "input " + std::to_string(k) + " '" + t + "' has " +
                     std::to_string(f.data.size()) + " values; expected a scalar");
  return f.data[0];
}

}  // namespace

std::vector<int64_t> weight_dims(const Draft& d) {
  std::vector<int64_t> w = dims_of(*d.weights);
  for (auto it = d.dropped_axes.rbegin(); it != d.dropped_axes.rend(); ++it)
    if (*it < w.size()) w.erase(w.begin() + static_cast<std::ptrdiff_t>(*it));
  return w;
}

bool unit_spatial(const std::vector<int64_t>& shape) {
  return shape.size() >= 3 && shape.size() <= 5 &&
         std::all_of(shape.begin() + 2, shape.end(), [](int64_t d) { return d == 1; });
}

void dense_as_conv(const Draft::Dense& dense, bool channels_last, const Layer& l,
                   std::vector<int64_t>& weight_shape, std::vector<float>& weights,
                   std::vector<float>& bias) {
  // Per output: the input channels, times the taps of a flattened map (ONNX's C, H, W order is
  // OIHW's I, H, W; a channels-last map's H, W, C order is feature (tap * C + channel)).
  const auto c = static_cast<size_t>(l.in_channels);
  size_t taps = 1;
  for (int64_t t : l.kernel) taps *= static_cast<size_t>(t);
  const size_t ch = c * taps;
  const auto k = static_cast<size_t>(l.out_channels);
  std::vector<float> w(k * ch);
  for (size_t o = 0; o < k; ++o)
    for (size_t i = 0; i < ch; ++i) {                                  // i: OIHW's (channel, tap)
      const size_t f = channels_last ? (i % taps) * c + i / taps : i;  // the feature B holds
      w[o * ch + i] =
          static_cast<float>(dense.alpha * weights[dense.trans_b ? o * ch + f : f * k + o]);
    }
  weights = std::move(w);
  weight_shape = l.weight_shape();
  if (bias.empty()) return;
  std::vector<float> b(k);
  for (size_t o = 0; o < k; ++o)
    b[o] = static_cast<float>(dense.beta * bias[bias.size() == 1 ? 0 : o]);
  bias = std::move(b);
}

void Context::fail(int node, const std::string& what) const {
  throw ImportError(g_.label() + ": " + node_label(g_.node(node), node) + ": " + what);
}

std::optional<TensorType> Context::type(const std::string& t) const {
  auto ty = g_.type(t);
  const auto it = layer_shapes_.find(t);
  if (it == layer_shapes_.end()) return ty;
  if (!ty) ty = TensorType{};
  if (ty->elem_type == 0) ty->elem_type = kFloat;  // padfold's layers produce float32
  ty->has_shape = true;
  ty->shape = it->second;
  return ty;
}

std::string Context::canon(const std::string& t) const {
  std::string cur = t;
  for (auto it = alias_.find(cur); it != alias_.end(); it = alias_.find(cur)) cur = it->second;
  return cur;
}

std::vector<int> Context::readers(const std::string& t) const {
  std::vector<int> out;
  std::vector<std::string> todo = {t};
  while (!todo.empty()) {
    const std::string cur = todo.back();
    todo.pop_back();
    for (int r : g_.consumers(cur)) {
      if (bypassed(r)) {
        todo.push_back(g_.node(r).output(0));
      } else if (std::find(out.begin(), out.end(), r) == out.end()) {
        out.push_back(r);
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool Context::reaches_graph_output(const std::string& t) const {
  if (g_.is_graph_output(t)) return true;
  for (int r : g_.consumers(t))
    if (bypassed(r) && reaches_graph_output(g_.node(r).output(0))) return true;
  return false;
}

std::optional<Left> bypass_check(const Context& c, int i) {
  const onnx::NodeProto& n = c.graph().node(i);
  if (n.input_size() < 1 || n.input(0).empty() || n.output_size() < 1)
    c.fail(i, "expected one input and one output");
  if (n.op_type() == "Dropout") {
    if (n.output_size() > 1 && !n.output(1).empty() &&
        (!c.graph().consumers(n.output(1)).empty() || c.graph().is_graph_output(n.output(1))))
      return Left{"its mask output '" + n.output(1) + "' is used"};
    const std::string training = input_of(n, 2);
    if (!training.empty()) {
      const onnx::TensorProto* t = c.constant(training);
      if (!t) return Left{"training_mode '" + training + "' is computed at run time"};
      const FloatTensor f =
          c.at_node(i, [&] { return to_float_tensor(*t, "input 2 '" + training + "'"); });
      if (f.data.size() != 1 || f.data[0] != 0.f)
        return Left{"training_mode is true (padfold runs inference)"};
    }
  }
  return std::nullopt;
}

bool same_values(const std::vector<int64_t>& onnx, const std::vector<int64_t>& ours) {
  return onnx == ours || (unit_spatial(ours) && onnx == std::vector<int64_t>{ours[0], ours[1]}) ||
         !inserted_unit_axes(onnx, ours).empty();
}

OutputShape check_output_shape(const Context& c, const Draft& d, const std::string& tensor) {
  const auto onnx = onnx_shape(c, tensor);
  const std::vector<int64_t> ours = d.layer.output_shape_full();
  if (!onnx || same_values(*onnx, ours)) return {};
  const std::string differ = "ONNX shape inference gives " + shape_text(*onnx, true) + " for '" +
                             tensor + "', padfold computes " + shape_text(ours);
  // One window more per axis: Debian's ONNX shape inference lacks ceil_mode's rule that drops a
  // last window starting in the padding, which ONNX Runtime and padfold apply.
  const Layer& l = d.layer;
  bool one_window_more =
      l.ceil_mode && onnx->size() == ours.size() && (*onnx)[0] == ours[0] && (*onnx)[1] == ours[1];
  for (size_t k = 2; one_window_more && k < ours.size(); ++k)
    one_window_more = (*onnx)[k] == ours[k] || (*onnx)[k] == ours[k] + 1;
  if (one_window_more) return {"", differ + " (ceil_mode's last window)"};
  // ConvTranspose with auto_pad SAME: ONNX gives input x stride, and ONNX Runtime and padfold
  // compute that (same_transpose_disagrees leaves the kernels where ONNX Runtime does not); the
  // ONNX shape inference padfold links gives the uncropped (in - 1) x stride + span.
  bool uncropped = l.op == Op::ConvTranspose && !l.output_shape &&
                   (l.padding.mode == PadMode::SameUpper || l.padding.mode == PadMode::SameLower) &&
                   onnx->size() == ours.size() && (*onnx)[0] == ours[0] && (*onnx)[1] == ours[1];
  for (size_t k = 0; uncropped && k < l.in_spatial.size(); ++k) {
    const int64_t pad = k < l.output_padding.size() ? l.output_padding[k] : 0;
    uncropped = (*onnx)[k + 2] ==
                (l.in_spatial[k] - 1) * l.stride[k] + (l.kernel[k] - 1) * l.dilation[k] + 1 + pad;
  }
  if (uncropped) return {"", differ + " (ConvTranspose's SAME output is input x stride)"};
  // An input ONNX shapes otherwise than padfold (that pool upstream): ONNX's output shape follows
  // from it, and padfold's stands.
  const onnx::NodeProto& n = c.graph().node(d.node);
  for (const std::string& t : n.input()) {
    if (t.empty() || c.constant(t)) continue;
    const auto in_onnx = onnx_shape(c, t);
    const auto in_ours = c.type(c.canon(t));
    if (in_onnx && in_ours && in_ours->is_static() && !same_values(*in_onnx, in_ours->shape))
      return {"", differ + " (from its input '" + t + "')"};
  }
  return {differ + "; padfold makes no layer whose output ONNX shapes otherwise", ""};
}

std::variant<Draft, Left> draft_layer(const Context& c, int i, const DraftOptions& o) {
  const onnx::NodeProto& n = c.graph().node(i);
  if (n.output_size() < 1 || n.output(0).empty()) return Left{"it has no output"};
  std::variant<Draft, Left> r;
  const std::string op = o.as_op.empty() ? n.op_type() : o.as_op;
  if (op == "Conv" || op == "ConvTranspose")
    r = draft_conv(c, i, o);
  else if (op.find("Pool") != std::string::npos || op.rfind("Reduce", 0) == 0)
    r = draft_pool(c, i, o);
  else if (n.op_type() == "Gemm" || n.op_type() == "MatMul")
    r = draft_dense(c, i, o);
  else if (n.op_type() == "Softmax")
    r = draft_softmax(c, i);
  else if (n.op_type() == "Resize" || n.op_type() == "Upsample")
    r = draft_resize(c, i);
  else if (n.op_type() == "Slice")
    r = draft_slice(c, i);
  else
    r = draft_join(c, i);
  if (std::holds_alternative<Left>(r)) return r;
  Draft& d = std::get<Draft>(r);
  if (!d.dropped_axes.empty())
    if (std::string why = lower_rank(d.layer, d.dropped_axes); !why.empty()) return Left{why};
  if (std::string why = resolve_draft(c, d); !why.empty())
    return Left{"padfold refuses the layer: " + why};
  if (std::string why = check_output_shape(c, d, n.output(0)).refuse; !why.empty())
    return Left{why};
  const Layer& l = d.layer;
  if (!l.has_window() || d.dense) return r;  // a dense draft's B and C are checked as B and C
  if (d.weights && l.weight_shape() != weight_dims(d))
    c.fail(i, "input " + std::to_string(o.w) + " (weights) '" + n.input(o.w) + "' has shape " +
                  shape_text(dims_of(*d.weights)) + "; expected " + shape_text(l.weight_shape()) +
                  " for " + std::to_string(l.in_channels) + " input channels in " +
                  std::to_string(l.groups) + " group(s)");
  if (d.bias && dims_of(*d.bias) != std::vector<int64_t>{l.out_channels})
    c.fail(i, "input " + std::to_string(o.b) + " (bias) '" + n.input(o.b) + "' has shape " +
                  shape_text(dims_of(*d.bias)) + "; expected [" + std::to_string(l.out_channels) +
                  "]");
  return r;
}

std::optional<Draft> draft_channel_permutation(const Context& c, int i) {
  const GraphIndex& g = c.graph();
  auto node_of = [&](const std::string& t, const char* op) {
    const int p = g.producer(c.canon(t));
    const bool ok = p >= 0 && default_domain(g.node(p)) && g.node(p).op_type() == op &&
                    g.node(p).input_size() >= 1 && g.node(p).output_size() == 1 &&
                    c.readers(g.node(p).output(0)).size() == 1 &&
                    !c.reaches_graph_output(g.node(p).output(0));
    return ok ? p : -1;
  };
  const onnx::NodeProto& last = g.node(i);
  if (last.op_type() != "Reshape" || last.input_size() < 1 || last.output_size() != 1) return {};
  const int t = node_of(last.input(0), "Transpose");
  const int first = t < 0 ? -1 : node_of(g.node(t).input(0), "Reshape");
  if (first < 0) return {};
  const std::string x = c.canon(g.node(first).input(0));
  TensorType xt;
  if (!check_data_input(c, x, xt).empty() || xt.elem_type != kFloat) return {};
  const auto mid = onnx_shape(c, g.node(first).output(0));
  const auto out = onnx_shape(c, last.output(0));
  const std::vector<int64_t>& in = xt.shape;
  const size_t rank = in.size();
  if (!mid || !out || *out != in || mid->size() <= rank) return {};
  const size_t factors = mid->size() - rank + 1;  // axes 1..factors of mid split the channels
  int64_t product = 1;
  for (size_t a = 1; a <= factors; ++a) product *= (*mid)[a];
  if ((*mid)[0] != in[0] || product != in[1] ||
      !std::equal(in.begin() + 2, in.end(), mid->begin() + static_cast<int64_t>(factors) + 1))
    return {};
  const auto perm = c.at_node(t, [&] { return NodeAttributes(g.node(t)).find_ints("perm"); });
  if (!perm || perm->size() != mid->size()) return {};
  std::vector<bool> used(factors + 1, false);
  for (size_t a = 0; a < perm->size(); ++a) {
    const int64_t p = (*perm)[a];
    const bool factor = a >= 1 && a <= factors;
    if (factor ? p < 1 || p > static_cast<int64_t>(factors) || used[static_cast<size_t>(p)]
               : p != static_cast<int64_t>(a))
      return {};
    if (factor) used[static_cast<size_t>(p)] = true;
  }
  // Output channel j, in the mixed radix of the permuted factors, is the input channel with the
  // same digits in the input's order of factors.
  Draft d;
  d.node = i;
  d.part_nodes = {first, t};
  Layer& l = d.layer;
  for (int64_t j = 0; j < in[1]; ++j) {
    std::vector<int64_t> digit(factors + 1);
    int64_t rest = j;
    for (size_t a = factors; a >= 1; --a) {
      const size_t from = static_cast<size_t>((*perm)[a]);
      digit[from] = rest % (*mid)[from];
      rest /= (*mid)[from];
    }
    int64_t channel = 0;
    for (size_t a = 1; a <= factors; ++a) channel = channel * (*mid)[a] + digit[a];
    l.channels.push_back(channel);
  }
  l.op = Op::GatherChannels;
  l.op_name = "gather_channels";
  l.spatial_dims = static_cast<int>(rank) - 2;
  l.layout = layout_for(l.spatial_dims);
  l.inputs = {x};
  d.output = last.output(0);
  if (!resolve_draft(c, d).empty()) return {};
  return d;
}

std::optional<Draft> draft_layer_norm(const Context& c, int i) {
  const GraphIndex& g = c.graph();
  // The node producing `t`, of type `op`, read only by `readers` nodes and no graph output.
  auto node_of = [&](const std::string& t, const char* op, size_t readers) {
    const int p = g.producer(c.canon(t));
    const bool ok = p >= 0 && default_domain(g.node(p)) && g.node(p).op_type() == op &&
                    g.node(p).input_size() >= 1 && g.node(p).output_size() == 1 &&
                    c.readers(g.node(p).output(0)).size() == readers &&
                    !c.reaches_graph_output(g.node(p).output(0));
    return ok ? p : -1;
  };
  auto scalar = [&](const std::string& t) -> std::optional<double> {
    const onnx::TensorProto* k = c.constant(t);
    if (!k) return std::nullopt;
    try {
      const FloatTensor f = to_float_tensor(*k, t);
      if (f.data.size() == 1) return f.data[0];
    } catch (const ImportError&) {  // not a number: no layer norm
    }
    return std::nullopt;
  };
  auto channel_mean_of = [&](int r, size_t rank) {
    const NodeAttributes a = c.at_node(r, [&] { return NodeAttributes(g.node(r)); });
    std::optional<std::vector<int64_t>> axes = a.find_ints("axes");
    if (!axes && !input_of(g.node(r), 1).empty())
      if (const onnx::TensorProto* t = c.constant(input_of(g.node(r), 1)))
        axes = c.at_node(
            r, [&] { return to_int64s(*t, "input 1 (axes) '" + input_of(g.node(r), 1) + "'"); });
    return axes && axes->size() == 1 &&
           ((*axes)[0] == 1 || (*axes)[0] == 1 - static_cast<int64_t>(rank)) &&
           a.get_int("keepdims", 1) == 1;
  };
  const onnx::NodeProto& div = g.node(i);
  if (!default_domain(div) || div.op_type() != "Div" || div.input_size() != 2) return {};
  const int sub = node_of(div.input(0), "Sub", 2);
  const int sqrt = node_of(div.input(1), "Sqrt", 1);
  const int add = sqrt < 0 ? -1 : node_of(g.node(sqrt).input(0), "Add", 1);
  if (sub < 0 || add < 0 || g.node(sub).input_size() != 2 || g.node(add).input_size() != 2)
    return {};
  const std::string x = c.canon(g.node(sub).input(0));
  const int mean = node_of(g.node(sub).input(1), "ReduceMean", 1);
  const int var = node_of(g.node(add).input(0), "ReduceMean", 1);
  const int pow = var < 0 ? -1 : node_of(g.node(var).input(0), "Pow", 1);
  const std::optional<double> eps = scalar(g.node(add).input(1));
  TensorType xt;
  if (mean < 0 || pow < 0 || !eps || !(*eps > 0) || *eps > 1 || g.node(pow).input_size() != 2 ||
      c.canon(g.node(mean).input(0)) != x ||
      c.canon(g.node(pow).input(0)) != c.canon(div.input(0)) ||
      scalar(g.node(pow).input(1)) != 2.0 || !check_data_input(c, x, xt).empty() ||
      xt.elem_type != kFloat)
    return {};
  const size_t rank = xt.shape.size();
  if (!channel_mean_of(mean, rank) || !channel_mean_of(var, rank)) return {};
  Draft d;
  d.node = i;
  d.part_nodes = {mean, sub, pow, var, add, sqrt};
  Layer& l = d.layer;
  l.op = Op::LayerNorm;
  l.op_name = "layer_norm";
  l.epsilon = static_cast<float>(*eps);
  l.spatial_dims = static_cast<int>(rank) - 2;
  l.layout = layout_for(l.spatial_dims);
  l.inputs = {x};
  d.output = div.output(0);
  if (!resolve_draft(c, d).empty()) return {};
  return d;
}

std::string fold_pad_into(const Context& c, Draft& d, int pad_node, const PadInfo& p) {
  const onnx::NodeProto& rn = c.graph().node(d.node);
  const std::string reader = "'" + rn.name() + "' (" + rn.op_type() + ")";
  const Layer& l = d.layer;
  if (l.op == Op::ConvTranspose)
    return "its reader " + reader +
           " is a ConvTranspose, whose pads crop its output: a Pad before it is no border";
  const WindowOp op = l.op == Op::Conv      ? WindowOp::Conv
                      : l.op == Op::MaxPool ? WindowOp::MaxPool
                                            : WindowOp::AvgPool;
  const auto folded =
      fold_explicit_pad(p.pad, {op, &l.pads, l.border, l.count_include_pad, l.border_value});
  if (const auto* why = std::get_if<std::string>(&folded))
    return "its reader " + reader + " " + *why;
  const FoldedPad& f = std::get<FoldedPad>(folded);
  Draft nd = d;
  nd.layer.inputs[0] = p.input;
  std::vector<int64_t> pads = f.before;
  pads.insert(pads.end(), f.after.begin(), f.after.end());
  nd.layer.border = f.border;
  nd.layer.border_value = f.border_value;
  nd.layer.count_include_pad = f.count_include_pad;
  std::string why;
  try {
    nd.layer.padding = explicit_padding(pads, l.spatial_dims);
    why = resolve_draft(c, nd);
  } catch (const PaddingError& e) {
    why = e.what();
  }
  if (!why.empty()) return "folded into " + reader + ", padfold refuses it: " + why;
  const std::vector<int64_t> shape = nd.layer.output_shape_full();
  if (shape != l.output_shape_full())
    return "folding it into " + reader + " gives the output " + shape_text(shape) + " instead of " +
           shape_text(l.output_shape_full()) +
           " (ceil_mode counts from the input, not the padded tensor)";
  (p.mode == "crop" ? nd.crop_node : nd.pad_node) = pad_node;
  d = std::move(nd);
  return "";
}

std::variant<PadInfo, Left> pad_info(const Context& c, int i) {
  const onnx::NodeProto& n = c.graph().node(i);
  if (input_of(n, 0).empty()) c.fail(i, "expected input data");
  PadInfo p;
  p.input = c.canon(n.input(0));
  TensorType xt;
  if (std::string why = check_data_input(c, p.input, xt); !why.empty()) return Left{why};
  const NodeAttributes a = c.at_node(i, [&] { return NodeAttributes(n); });
  p.mode = c.at_node(i, [&] { return a.get_string("mode", "constant"); });
  if (p.mode != "constant" && p.mode != "reflect" && p.mode != "edge")
    c.fail(i, "attribute 'mode': '" + p.mode + "'; expected constant, reflect or edge");
  p.pad.fill = p.mode == "reflect" ? PadFill::Reflect
               : p.mode == "edge"  ? PadFill::Edge
                                   : PadFill::Constant;
  std::vector<int64_t> pads;
  if (c.graph().opset() < 11) {
    pads = c.at_node(i, [&] { return a.get_ints("pads"); });
    p.pad.value = c.at_node(i, [&] { return a.get_float("value", 0.f); });
  } else {
    const std::string t = input_of(n, 1);
    if (t.empty()) c.fail(i, "input 1 (pads) is missing; expected the pads");
    const onnx::TensorProto* v = c.constant(t);
    if (!v) return Left{"its pads '" + t + "' are computed at run time"};
    pads = c.at_node(i, [&] { return to_int64s(*v, "input 1 (pads) '" + t + "'"); });
    bool ok = true;
    const auto value = c.at_node(i, [&] { return scalar_input(c, i, 2, ok); });
    if (!ok) return Left{"its constant_value '" + input_of(n, 2) + "' is computed at run time"};
    p.pad.value = value.value_or(0.f);
  }
  const size_t rank = xt.shape.size();
  if (pads.size() != 2 * rank)
    c.fail(i, "pads " + shape_text(pads) + " have " + std::to_string(pads.size()) +
                  " values; expected " + std::to_string(2 * rank) + " for the rank-" +
                  std::to_string(rank) + " input '" + p.input + "'");
  if (pads[0] || pads[1] || pads[rank] || pads[rank + 1])
    return Left{"its pads " + shape_text(pads) +
                " pad the batch or channel axis; padfold folds spatial pads only"};
  for (size_t k = 2; k < rank; ++k) {
    if (std::abs(pads[k]) > kMaxSize || std::abs(pads[rank + k]) > kMaxSize)
      return Left{"its pads " + shape_text(pads) + " exceed " + std::to_string(kMaxSize)};
    p.pad.before.push_back(pads[k]);
    p.pad.after.push_back(pads[rank + k]);
  }
  if (p.pad.fill == PadFill::Constant && !std::isfinite(p.pad.value))
    return Left{"its constant value is not a finite number"};  // a spec's border value is one
  return p;
}

std::variant<ActInfo, Left> act_info(const Context& c, int i) {
  const onnx::NodeProto& n = c.graph().node(i);
  if (input_of(n, 0).empty()) c.fail(i, "expected an input");
  ActInfo r;
  r.input = c.canon(n.input(0));
  const NodeAttributes a = c.at_node(i, [&] { return NodeAttributes(n); });
  if (n.op_type() == "Relu") {
    r.activation = Activation::Relu;
  } else if (n.op_type() == "Sigmoid") {
    r.activation = Activation::Sigmoid;
  } else if (n.op_type() == "Tanh") {
    r.activation = Activation::Tanh;
  } else if (n.op_type() == "HardSwish") {
    r.activation = Activation::HardSwish;
  } else if (n.op_type() == "Gelu") {
    const std::string approximate =
        c.at_node(i, [&] { return a.get_string("approximate", "none"); });
    if (approximate != "none" && approximate != "tanh")
      c.fail(i, "approximate is '" + approximate + "'; expected none or tanh");
    r.activation = approximate == "tanh" ? Activation::GeluTanh : Activation::Gelu;
  } else if (n.op_type() == "HardSigmoid") {
    r.activation = Activation::HardSigmoid;
    r.alpha = c.at_node(i, [&] { return a.get_float("alpha", 0.2f); });
    r.beta = c.at_node(i, [&] { return a.get_float("beta", 0.5f); });
    if (!std::isfinite(r.alpha) || !std::isfinite(r.beta))
      return Left{"its alpha or beta is not a finite number"};
  } else if (n.op_type() == "LeakyRelu") {
    r.activation = Activation::LeakyRelu;
    r.alpha = c.at_node(i, [&] { return a.get_float("alpha", 0.01f); });
    // A spec's alpha is a JSON number, which inf and NaN are not.
    if (!std::isfinite(r.alpha)) return Left{"its alpha is not a finite number"};
  } else {  // Clip
    constexpr float kMax = std::numeric_limits<float>::max();
    float lo = std::numeric_limits<float>::lowest(), hi = kMax;
    if (c.graph().opset() < 11) {
      lo = c.at_node(i, [&] { return a.get_float("min", lo); });
      hi = c.at_node(i, [&] { return a.get_float("max", hi); });
    } else {
      bool ok = true;
      const auto mn = c.at_node(i, [&] { return scalar_input(c, i, 1, ok); });
      const auto mx = c.at_node(i, [&] { return scalar_input(c, i, 2, ok); });
      if (!ok) return Left{"its min or max is computed at run time"};
      lo = mn.value_or(lo);
      hi = mx.value_or(hi);
    }
    if (lo == 0.f && hi == 6.f)
      r.activation = Activation::Relu6;
    else if (lo == 0.f && hi >= kMax)
      r.activation = Activation::Relu;
    else
      return Left{"Clip(" + std::to_string(lo) + ", " + std::to_string(hi) +
                  ") is neither relu (min 0) nor relu6 (min 0, max 6)"};
  }
  return r;
}

std::vector<TensorSource> sources_of(const Context& c, const Layer& l) {
  std::vector<TensorSource> sources;
  for (const std::string& t : l.inputs) {
    const std::vector<int64_t> shape = c.type(t)->shape;  // the drafts check it is known
    sources.push_back({t,
                       "input '" + t + "'",
                       layout_for(static_cast<int>(shape.size()) - 2),
                       shape,
                       l.input_dtype(),
                       {}});
  }
  return sources;
}

std::string resolve_draft(const Context& c, Draft& d) {
  try {
    resolve_layer(d.layer, sources_of(c, d.layer));
  } catch (const LayerError& e) {
    return "field '" + e.field + "': " + e.what();
  }
  return "";
}

}  // namespace padfold::onnx_import::detail
