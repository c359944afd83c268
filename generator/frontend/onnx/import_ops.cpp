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

const char* const kAutoPads[] = {"NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"};

}  // namespace

TensorLayout layout_for(int dims) {
  return {false, dims};
}

bool quantized_type(int elem_type) {
  return elem_type == onnx::TensorProto::INT8 || elem_type == onnx::TensorProto::UINT8;
}

std::string check_float_input(const Context& c, int i, const std::string& t, TensorType& type,
                              const DraftOptions& o) {
  if (std::string why = check_data_input(c, t, type); !why.empty()) return why;
  if (type.elem_type != kFloat && !(o.quantized && quantized_type(type.elem_type)))
    c.fail(i, "input '" + t + "' is " + elem_type_name(type.elem_type) +
                  "; expected float32 (padfold generates float32 kernels)");
  return "";
}

const onnx::TensorProto* float_constant(const Context& c, int node, const std::string& t,
                                        const std::string& role, std::string& why,
                                        const DraftOptions& o) {
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

std::optional<std::vector<int64_t>> onnx_shape(const Context& c, const std::string& t) {
  const auto ty = c.graph().type(t);
  if (!ty || !ty->is_static()) return std::nullopt;
  return ty->shape;
}

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

namespace {

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

}  // namespace

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
