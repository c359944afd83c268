// Drafts of the window ops: Conv, ConvTranspose, the pools and the reduces that are global pools,
// Gemm and MatMul as convolutions.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/limits.h"
#include "base/text.h"
#include "frontend/onnx/import_ops.h"

namespace padfold::onnx_import::detail {

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

}  // namespace

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

namespace {

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

}  // namespace

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

namespace {

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

}  // namespace

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

}  // namespace padfold::onnx_import::detail
