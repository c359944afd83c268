// padfold port --emit: the PyTorch module of a resolved model. Every tensor lives in PyTorch's
// channels-first order inside the module (a padfold tensor T in layout L is
// from_layout(T, L)), so convolutions, pools and joins are plain torch calls; the model's inputs
// and outputs keep the layouts the source model gives them.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

#include "api/port_emit.h"
#include "api/port_report.h"
#include "api/python_code.h"
#include "base/text.h"
#include "padding/padding.h"

namespace padfold {
namespace {

// The permutation taking a tensor in `layout`'s order to channels-first, and back.
std::vector<int64_t> from_layout_perm(const TensorLayout& layout) {
  return channel_perm(layout.spatial_dims + 2, layout.channels_last, false);
}
std::vector<int64_t> to_layout_perm(const TensorLayout& layout) {
  return channel_perm(layout.spatial_dims + 2, false, layout.channels_last);
}
std::string permuted(const std::string& t, const std::vector<int64_t>& p) {
  return is_identity(p) ? t : fmt::format("{}.permute({})", t, join(p));
}

std::string activation(const Layer& L, const std::string& y) {
  return fmt::format(fmt::runtime(activation_def(L.activation).torch), fmt::arg("x", y),
                     fmt::arg("alpha", python_float(L.activation_alpha)),
                     fmt::arg("beta", python_float(L.activation_beta)));
}

struct Emitter {
  const Model& model;
  std::set<std::string> used;
  std::map<std::string, std::string> var;  // tensor name -> Python expression (channels-first)
  std::vector<std::string> init, forward, load;

  [[noreturn]] void refuse(const Layer& L, const std::string& why) const {
    throw std::runtime_error(fmt::format("layer '{}' ({}): {}", L.name, L.op_name, why));
  }

  // The weights' axes permuted to PyTorch's order: O, I, spatial for conv; I, O, spatial for
  // conv_transpose.
  std::vector<int64_t> weight_perm(const Layer& L) const {
    std::string want = L.op == Op::ConvTranspose ? "IO" : "OI";
    want += std::string("DHW").substr(static_cast<size_t>(3 - L.spatial_dims));
    std::vector<int64_t> p;
    for (char c : want) p.push_back(static_cast<int64_t>(L.weight_layout.order.find(c)));
    return p;
  }

  // The bias goes to the conv's own (`.bias`) or to the parameter `<attr>_bias`.
  void weights(const Layer& L, const std::string& attr, const std::string& root,
               const std::string& bias_suffix) {
    if (L.weights_file.empty())
      refuse(L, "the spec names no weight file (weight_files); the module could not load them");
    auto rel = [&](const std::string& f) { return relative_weight_path(f, root); };
    load.push_back(fmt::format("        _load(self.{}.weight, weights, {}, {})", attr,
                               python_string(rel(L.weights_file)), python_tuple(weight_perm(L))));
    if (L.bias)
      load.push_back(fmt::format("        _load(self.{}{}, weights, {}, None)", attr,
                                 bias_suffix.empty() ? ".bias" : bias_suffix,
                                 python_string(rel(L.bias_file))));
  }

  std::string conv(const Layer& L, const std::string& x, const std::string& attr,
                   const std::string& root) {
    const auto& p = L.pads.axes;
    std::vector<int64_t> b, a;
    for (const auto& ax : p) b.push_back(ax.before), a.push_back(ax.after);
    const bool transposed = L.op == Op::ConvTranspose;
    const bool sym_zero = L.border == Border::Zeros && b == a &&
                          std::all_of(b.begin(), b.end(), [](int64_t v) { return v >= 0; });
    // A transposed output extended past its full size gets the bias there too (ONNX's rule), so
    // the bias is added after the extension; everywhere else it is the module's own.
    const bool extends = transposed && std::any_of(p.begin(), p.end(),
                                                   [](const AxisPads& ax) { return ax.after < 0; });
    const bool own_bias = L.bias && !extends;
    init.push_back(fmt::format(
        "        self.{} = nn.Conv{}{}d({}, {}, {}, stride={}, padding={}, dilation={}, "
        "groups={}, bias={})",
        attr, transposed ? "Transpose" : "", L.spatial_dims, L.in_channels, L.out_channels,
        python_tuple(L.kernel), python_tuple(L.stride),
        !transposed && sym_zero ? python_tuple(b) : "0", python_tuple(L.dilation), L.groups,
        own_bias ? "True" : "False"));
    if (L.bias && !own_bias)
      init.push_back(fmt::format("        self.{}_bias = nn.Parameter(torch.zeros({}))", attr,
                                 L.out_channels));
    weights(L, attr, root, own_bias ? "" : "_bias");
    std::string y;
    if (!transposed) {
      y = fmt::format("self.{}({})", attr, sym_zero ? x : torch_bordered(L, x, b, a));
    } else {
      // The full output cropped by the pads; a negative crop after extends it with zeros.
      forward.push_back(fmt::format("        y = self.{}({})", attr, x));
      for (size_t i = 0; i < p.size(); ++i) {
        const size_t dim = 2 + i;
        const int64_t full = transposed_full_output(L.axes()[i]);
        const int64_t keep = std::min(full - p[i].before, p[i].output);
        if (p[i].before != 0 || keep != full)
          forward.push_back(
              fmt::format("        y = y.narrow({}, {}, {})", dim, p[i].before, keep));
        if (keep < p[i].output) {
          std::vector<int64_t> zb(p.size(), 0), za(p.size(), 0);
          za[i] = p[i].output - keep;
          forward.push_back(fmt::format("        y = F.pad(y, {})", torch_pad_order(zb, za)));
        }
      }
      y = "y";
    }
    if (L.bias && !own_bias) {
      std::string unit;
      for (int i = 0; i < L.spatial_dims; ++i) unit += ", 1";
      y = fmt::format("({} + self.{}_bias.view(1, -1{}))", y, attr, unit);
    }
    return activation(L, y);
  }

  std::string pool(const Layer& L, const std::string& x, const std::string& attr) {
    const auto& p = L.pads.axes;
    const bool avg = L.op == Op::AvgPool;
    if (avg && std::any_of(L.dilation.begin(), L.dilation.end(), [](int64_t d) { return d != 1; }))
      refuse(L, "a dilated average pool has no PyTorch op (torch's avg_pool has no dilation)");
    // Pads as the layer resolves them, then an extension to exactly the extent its windows read
    // (ceil_mode's last window past the pads reads nothing there): a pool without padding after.
    std::vector<int64_t> b, a, zero(p.size(), 0);
    for (const AxisPads& ax : p) b.push_back(ax.before), a.push_back(ax.after);
    const std::vector<int64_t> ext = pool_extension(L);
    const bool any_ext = std::any_of(ext.begin(), ext.end(), [](int64_t v) { return v; });
    const std::string k = python_tuple(L.kernel), s = python_tuple(L.stride);
    const int d = L.spatial_dims;
    if (!avg) {
      std::string in = L.ignores_padding() ? fmt::format("F.pad({}, {}, value=float('-inf'))", x,
                                                         torch_pad_order(b, a))
                                           : torch_bordered(L, x, b, a);
      if (any_ext)
        in = fmt::format("F.pad({}, {}, value=float('-inf'))", in, torch_pad_order(zero, ext));
      return fmt::format("F.max_pool{}d({}, {}, {}, 0, {})", d, in, k, s, python_tuple(L.dilation));
    }
    // The mean over the taps that count: the layer's border over the pads, divided by the count
    // of taps inside the input (padding ignored) or inside input and pads (count_include_pad).
    std::string in = torch_bordered(L, x, b, a);
    if (any_ext) in = fmt::format("F.pad({}, {})", in, torch_pad_order(zero, ext));
    std::vector<int64_t> ones_shape = {1, 1};
    for (int64_t v : L.in_spatial) ones_shape.push_back(v);
    const std::string mask = fmt::format(
        "F.pad(F.pad(torch.ones({}), {}, value={}), {})", python_tuple(ones_shape),
        torch_pad_order(b, a), L.ignores_padding() ? "0.0" : "1.0", torch_pad_order(zero, ext));
    init.push_back(
        fmt::format("        self.register_buffer('{}_count', F.avg_pool{}d({}, {}, {}))", attr, d,
                    mask, k, s));
    return fmt::format("(F.avg_pool{}d({}, {}, {}) / self.{}_count)", d, in, k, s, attr);
  }

  // A run of channels as a slice (a Split's part), any other list as an index.
  static std::string gathered_channels(const Layer& L, const std::string& x) {
    const std::vector<int64_t>& ch = L.channels;
    const int64_t step = ch.size() > 1 ? ch[1] - ch[0] : 1;
    bool run = step > 0;
    for (size_t k = 0; k < ch.size() && run; ++k)
      run = ch[k] == ch[0] + step * static_cast<int64_t>(k);
    if (!run) return fmt::format("{}[:, [{}]]", x, join(ch));
    const int64_t stop = ch.back() + 1;
    return step == 1 ? fmt::format("{}[:, {}:{}]", x, ch[0], stop)
                     : fmt::format("{}[:, {}:{}:{}]", x, ch[0], stop, step);
  }

  // Each spatial axis through a gather of the taps padfold resolved (padding/resize.h): exactly
  // the pixels and weights the kernel reads, whatever the coordinate mode; F.interpolate has no
  // option for most of ONNX's modes.
  static std::string resized(const Layer& L, std::string x) {
    std::vector<std::string> fills;  // tf_crop_and_resize's outputs outside the input, last
    for (size_t i = 0; i < L.in_spatial.size(); ++i) {
      std::vector<int64_t> first, second, outside;
      std::vector<std::string> wf, ws;
      for (const ResizeTap& t : resize_taps(L.resize, i, L.in_spatial[i])) {
        if (t.outside) outside.push_back(static_cast<int64_t>(first.size()));
        first.push_back(t.first);
        second.push_back(t.second);
        wf.push_back(python_float(t.first_weight));
        ws.push_back(python_float(t.second_weight));
      }
      const size_t dim = 2 + i;
      x = L.resize.mode == ResizeMode::Nearest
              ? fmt::format("_resize_axis({}, {}, [{}])", x, dim, join(first))
              : fmt::format("_resize_axis({}, {}, [{}], [{}], [{}], [{}])", x, dim, join(first),
                            join(second), fmt::join(wf, ", "), fmt::join(ws, ", "));
      if (!outside.empty()) fills.push_back(fmt::format(", {}, [{}], ", dim, join(outside)));
    }
    for (const std::string& f : fills)  // after every axis: extrapolated outputs are exact
      x = "_fill(" + x + f + python_float(L.resize.extrapolation_value) + ")";
    return x;
  }

  std::string layer(const Layer& L, const std::string& root) {
    check_portable(L);
    std::vector<std::string> in;
    for (const std::string& name : L.inputs) in.push_back(var.at(name));
    const std::string attr = python_identifier(L.name, used);
    switch (L.op) {
      case Op::Conv:
      case Op::ConvTranspose:
        return conv(L, in[0], attr, root);
      case Op::MaxPool:
      case Op::AvgPool:
        return pool(L, in[0], attr);
      case Op::Add:
        return activation(L, "(" + fmt::format("{}", fmt::join(in, " + ")) + ")");
      case Op::Mul:
        return activation(L, "(" + fmt::format("{}", fmt::join(in, " * ")) + ")");
      case Op::Concat:
        return fmt::format("torch.cat([{}], 1)", fmt::join(in, ", "));
      case Op::Activation:
        return activation(L, in[0]);
      case Op::Softmax:
        return fmt::format("F.softmax({}, 1)", in[0]);
      case Op::Resize:
        return resized(L, in[0]);
      case Op::GatherChannels:
        return gathered_channels(L, in[0]);
      case Op::LayerNorm:  // over the channels: they go last for F.layer_norm and back
        return fmt::format("F.layer_norm({}.movedim(1, -1), ({},), eps={}).movedim(-1, 1)", in[0],
                           L.in_channels, python_float(L.epsilon));
      case Op::Transpose: {
        const std::string t = permuted(in[0], to_layout_perm(L.input_layout));
        return permuted(fmt::format("{}.permute({})", t, join(L.perm)), from_layout_perm(L.layout));
      }
      default:
        refuse(L, "this op is not ported yet");
    }
  }
};

}  // namespace

std::string relative_weight_path(const std::string& file, const std::string& root) {
  namespace fs = std::filesystem;
  if (root.empty()) return fs::path(file).generic_string();
  return fs::path(file).lexically_proximate(fs::path(root)).generic_string();
}

std::string torch_module_source(const Model& model, const PortModuleOptions& o) {
  Emitter e{model, {}, {}, {}, {}, {}};
  std::vector<std::string> args;
  for (const ModelInput& in : model.inputs) {
    check_portable(in);
    const std::string arg = python_identifier(in.name, e.used);
    args.push_back(arg);
    e.forward.push_back(
        fmt::format("        {} = {}", arg, permuted(arg, from_layout_perm(in.layout))));
    e.var[in.name] = arg;
  }
  int t = 0;
  for (const Layer& L : model.layers) {
    const std::string expr = e.layer(L, o.weights_root);
    const std::string v = "t" + std::to_string(t++);
    const std::string about = python_text(L.description.empty() ? L.op_name : L.description);
    e.forward.push_back(fmt::format("        # {}: {}", python_text(L.name), about));
    e.forward.push_back(fmt::format("        {} = {}", v, expr));
    e.var[L.name] = v;
  }
  std::vector<std::string> results;
  for (const std::string& name : model.outputs) {
    const Layer* L = model.find_layer(name);
    std::string r = permuted(e.var.at(name), to_layout_perm(L->layout));
    const auto shape = model.output_shapes.find(name);
    if (shape != model.output_shapes.end())
      r = fmt::format("{}.reshape({})", r, python_tuple(shape->second));
    results.push_back(r);
  }
  std::string inputs_doc;
  for (const ModelInput& in : model.inputs)
    inputs_doc += fmt::format("{}{} {} ({})", inputs_doc.empty() ? "" : ", ", python_text(in.name),
                              shape_text(in.shape), in.layout.name());

  std::string src = fmt::format(
      R"("""PyTorch port of {source}, written by `padfold port --to pytorch` ({n} layers).

Every pad is resolved for the model's fixed input size: {inputs}. Asymmetric pads and non-zero
borders are explicit F.pad calls, pools pad and count exactly as the source does. Model(weights)
loads the .npy files padfold import wrote (default: {default_doc}); Model(None) leaves the
parameters unset.
"""
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

WEIGHTS = {default}


def _load(param, root, path, perm):
    w = np.load(os.path.join(root, path))
    if perm is not None:
        w = w.transpose(perm)
    with torch.no_grad():
        param.copy_(torch.from_numpy(np.ascontiguousarray(w, dtype=np.float32)))


def _hard_swish(x):
    return x * torch.clamp(x / 6 + 0.5, 0.0, 1.0)


def _pad_symmetric(x, pads):
    """NumPy's 'symmetric' padding (the edge repeated), which F.pad has no mode for."""
    for i in range(len(pads) // 2):
        dim, before, after = x.dim() - 1 - i, pads[2 * i], pads[2 * i + 1]
        n = x.shape[dim]
        idx = list(range(before - 1, -1, -1)) + list(range(n)) + list(range(n - 1, n - 1 - after, -1))
        x = x.index_select(dim, torch.tensor(idx, device=x.device))
    return x


def _resize_axis(x, dim, first, second=None, first_weight=None, second_weight=None):
    """One axis of a resize, as padfold resolved it: each output index reads input `first`
    (nearest) or first_weight * `first` + second_weight * `second` (linear)."""
    at = lambda idx: x.index_select(dim, torch.tensor(idx, device=x.device))
    if second is None:
        return at(first)
    shape = [1] * x.dim()
    shape[dim] = -1
    weight = lambda w: torch.tensor(w, dtype=x.dtype, device=x.device).view(shape)
    return at(first) * weight(first_weight) + at(second) * weight(second_weight)


def _fill(x, dim, indices, value):
    """tf_crop_and_resize: the outputs along `dim` whose source lies outside the input."""
    return x.index_fill(dim, torch.tensor(indices, device=x.device), value)


class Model(nn.Module):
    def __init__(self, weights=WEIGHTS):
        super().__init__()
)",
      fmt::arg("source", python_text(o.source_label)), fmt::arg("n", model.layers.size()),
      fmt::arg("inputs", inputs_doc), fmt::arg("default", o.default_weights_expr),
      fmt::arg("default_doc", python_text(o.default_weights_doc)));
  for (const std::string& line : e.init) src += line + "\n";
  src += "        if weights is not None:\n            self.load(weights)\n\n";
  src += "    def load(self, weights):\n";
  for (const std::string& line : e.load) src += line + "\n";
  if (e.load.empty()) src += "        pass\n";
  src += fmt::format("\n    def forward(self, {}):\n", fmt::join(args, ", "));
  for (const std::string& line : e.forward) src += line + "\n";
  src += fmt::format(
      "        return {}\n",
      results.size() == 1 ? results[0] : "(" + fmt::format("{}", fmt::join(results, ", ")) + ")");
  return src;
}

std::string torch_bordered(const Layer& L, const std::string& x, const std::vector<int64_t>& before,
                           const std::vector<int64_t>& after) {
  const std::string pads = torch_pad_order(before, after);
  switch (L.border) {
    case Border::Zeros:
      return fmt::format("F.pad({}, {})", x, pads);
    case Border::Constant:
      return fmt::format("F.pad({}, {}, value={})", x, pads, python_float(L.border_value));
    case Border::Reflect:
      return fmt::format("F.pad({}, {}, mode='reflect')", x, pads);
    case Border::Replicate:
      return fmt::format("F.pad({}, {}, mode='replicate')", x, pads);
    case Border::Circular:
      return fmt::format("F.pad({}, {}, mode='circular')", x, pads);
    case Border::Symmetric:
      return fmt::format("_pad_symmetric({}, {})", x, pads);
  }
  return x;
}

}  // namespace padfold
