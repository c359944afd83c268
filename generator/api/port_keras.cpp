// padfold port --to keras --emit: the Keras model of a resolved model, in Keras's functional API.
// Inside the model every tensor is channels last (Keras's CPU layout); the inputs and outputs keep
// the source model's layouts. Pads are Keras's own 'same'/'valid'/'causal' where those give them,
// else ZeroPadding or a gather of the border's indices, then 'valid'.
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

// The gather modes of the generated _pad helper, per border.
const char* pad_mode(Border b) {
  switch (b) {
    case Border::Reflect:
      return "reflect";
    case Border::Symmetric:
      return "symmetric";
    case Border::Replicate:
      return "edge";
    case Border::Circular:
      return "wrap";
    default:
      return "constant";
  }
}

struct Emitter {
  const Model& model;
  std::set<std::string> used;
  std::map<std::string, std::string> var;  // tensor name -> Python variable (channels last)
  std::vector<std::string> body, load;
  int next = 0;

  [[noreturn]] void refuse(const Layer& L, const std::string& why) const {
    throw std::runtime_error(fmt::format("layer '{}' ({}): {}", L.name, L.op_name, why));
  }

  // Appends `expr` applied to `in` as a new variable; returns it.
  std::string add(const std::string& layer_expr, const std::string& in) {
    const std::string v = "t" + std::to_string(next++);
    body.push_back(fmt::format("    {} = {}({})", v, layer_expr, in));
    return v;
  }

  std::string activation(const Layer& L, const std::string& t) {
    if (L.activation == Activation::None) return t;
    return add(fmt::format(fmt::runtime(activation_def(L.activation).keras),
                           fmt::arg("alpha", python_float(L.activation_alpha)),
                           fmt::arg("beta", python_float(L.activation_beta))),
               t);
  }

  // A layer's pads as Keras applies them: the negative ones crop first, then the rest pads.
  struct SplitPads {
    std::vector<int64_t> before, after, crop_before, crop_after;
  };
  static SplitPads split_pads(const Layer& L) {
    SplitPads s;
    for (const AxisPads& ax : L.pads.axes) {
      s.before.push_back(std::max<int64_t>(ax.before, 0));
      s.after.push_back(std::max<int64_t>(ax.after, 0));
      s.crop_before.push_back(std::max<int64_t>(-ax.before, 0));
      s.crop_after.push_back(std::max<int64_t>(-ax.after, 0));
    }
    return s;
  }

  // The input padded by the layer's pads (and `ext` zeros or -inf after), or as it is:
  // Cropping*D for the crops, then the padding.
  std::string padded(const Layer& L, const std::string& t, const std::vector<int64_t>& ext,
                     bool neg_inf_pads) {
    const SplitPads pads = split_pads(L);
    const std::vector<int64_t>&b = pads.before, &a = pads.after, &cb = pads.crop_before,
          &ca = pads.crop_after;
    const std::vector<int64_t> zero(ext.size(), 0);
    std::string out = t;
    if (std::any_of(cb.begin(), cb.end(), [](int64_t v) { return v; }) ||
        std::any_of(ca.begin(), ca.end(), [](int64_t v) { return v; }))
      out = add(fmt::format("layers.Cropping{}D({})", L.spatial_dims, keras_pairs(cb, ca)), out);
    const bool any_pad = std::any_of(b.begin(), b.end(), [](int64_t v) { return v; }) ||
                         std::any_of(a.begin(), a.end(), [](int64_t v) { return v; });
    const bool any_ext = std::any_of(ext.begin(), ext.end(), [](int64_t v) { return v; });
    const char* fill = L.op == Op::MaxPool ? "float('-inf')" : "0.0";
    if (any_pad) {
      if (neg_inf_pads)
        out = add(fmt::format("_pad({}, 'constant', float('-inf'))", keras_pairs(b, a)), out);
      else if (L.border == Border::Zeros && !is_pool(L))
        out = add(fmt::format("layers.ZeroPadding{}D({})", L.spatial_dims, keras_pairs(b, a)), out);
      else
        out = add(fmt::format("_pad({}, '{}', {})", keras_pairs(b, a), pad_mode(L.border),
                              python_float(L.border_value)),
                  out);
    }
    if (any_ext)
      out = add(fmt::format("_pad({}, 'constant', {})", keras_pairs(zero, ext), fill), out);
    return out;
  }

  static bool is_pool(const Layer& L) { return L.op == Op::MaxPool || L.op == Op::AvgPool; }

  // The kernel (and the bias, into the conv itself or the _Bias layer `<name>_bias`).
  void weights(const Layer& L, const std::string& name, const std::string& root, bool depthwise,
               bool own_bias) {
    if (L.weights_file.empty())
      refuse(L, "the spec names no weight file (weight_files); the model could not load them");
    std::string want = std::string("DHW").substr(static_cast<size_t>(3 - L.spatial_dims));
    want += L.op == Op::ConvTranspose ? "OI" : "IO";
    std::vector<int64_t> perm;
    for (char c : want) perm.push_back(static_cast<int64_t>(L.weight_layout.order.find(c)));
    std::string shape = "None";
    if (depthwise) {
      std::vector<int64_t> s = L.kernel;
      s.push_back(L.in_channels);
      s.push_back(L.out_channels / L.in_channels);
      shape = python_tuple(s);
    }
    std::string files =
        fmt::format("({}, {}, {})", python_string(relative_weight_path(L.weights_file, root)),
                    python_tuple(perm), shape);
    const std::string bias =
        fmt::format("({}, None, None)", python_string(relative_weight_path(L.bias_file, root)));
    if (L.bias && own_bias) files += ", " + bias;
    load.push_back(
        fmt::format("    _set(model.get_layer({}), weights, [{}])", python_string(name), files));
    if (L.bias && !own_bias)
      load.push_back(fmt::format("    _set(model.get_layer({}), weights, [{}])",
                                 python_string(name + "_bias"), bias));
  }

  std::string conv(const Layer& L, const std::string& t, const std::string& name,
                   const std::string& root) {
    const bool strided =
        std::any_of(L.stride.begin(), L.stride.end(), [](int64_t s) { return s > 1; });
    const bool dilated =
        std::any_of(L.dilation.begin(), L.dilation.end(), [](int64_t d) { return d > 1; });
    if (strided && dilated) refuse(L, "Keras's convolutions take strides or dilation, not both");
    const std::string common =
        fmt::format("{}, strides={}, dilation_rate={}, use_bias={}, name={}",
                    python_tuple(L.kernel), python_tuple(L.stride), python_tuple(L.dilation),
                    L.bias ? "True" : "False", python_string(name));
    if (L.op == Op::ConvTranspose) {
      if (L.groups != 1) refuse(L, "Keras's Conv*DTranspose has no groups");
      // Cropped by the pads; an output extended past the full one gets zeros there, then the bias
      // everywhere (added after the extension).
      std::vector<int64_t> b, a, zero, ext;
      for (size_t i = 0; i < L.pads.axes.size(); ++i) {
        const int64_t after = transposed_crop_after(L, i);
        b.push_back(L.pads.axes[i].before);
        a.push_back(std::max<int64_t>(after, 0));
        ext.push_back(std::max<int64_t>(-after, 0));
        zero.push_back(0);
      }
      const bool extends = std::any_of(ext.begin(), ext.end(), [](int64_t v) { return v; });
      const bool own_bias = L.bias && !extends;
      weights(L, name, root, false, own_bias);
      std::string y =
          add(fmt::format(
                  "layers.Conv{}DTranspose({}, {}, strides={}, dilation_rate={}, use_bias={}, "
                  "name={}, padding='valid')",
                  L.spatial_dims, L.out_channels, python_tuple(L.kernel), python_tuple(L.stride),
                  python_tuple(L.dilation), own_bias ? "True" : "False", python_string(name)),
              t);
      if (std::any_of(b.begin(), b.end(), [](int64_t v) { return v; }) ||
          std::any_of(a.begin(), a.end(), [](int64_t v) { return v; }))
        y = add(fmt::format("layers.Cropping{}D({})", L.spatial_dims, keras_pairs(b, a)), y);
      if (extends)
        y = add(fmt::format("layers.ZeroPadding{}D({})", L.spatial_dims, keras_pairs(zero, ext)),
                y);
      if (L.bias && !own_bias)
        y = add(fmt::format("_Bias(name={})", python_string(name + "_bias")), y);
      return activation(L, y);
    }
    const bool depthwise = L.spatial_dims == 2 && L.groups > 1 && L.groups == L.in_channels &&
                           L.out_channels % L.in_channels == 0;
    std::string in = t;
    std::string padding = "valid";
    if (L.border == Border::Zeros && pads_read_as(L, PadMode::SameUpper) &&
        !pads_read_as(L, PadMode::Valid))
      padding = "same";
    else if (L.border == Border::Zeros && L.spatial_dims == 1 && pads_read_as(L, PadMode::Causal) &&
             !pads_read_as(L, PadMode::Valid))
      padding = "causal";
    else
      in = padded(L, t, std::vector<int64_t>(L.kernel.size(), 0), false);
    weights(L, name, root, depthwise, true);
    const std::string layer =
        depthwise ? fmt::format("layers.DepthwiseConv2D({}, depth_multiplier={}, padding='{}')",
                                common, L.out_channels / L.in_channels, padding)
                  : fmt::format("layers.Conv{}D({}, {}, groups={}, padding='{}')", L.spatial_dims,
                                L.out_channels, common, L.groups, padding);
    return activation(L, add(layer, in));
  }

  std::string pool(const Layer& L, const std::string& t) {
    if (std::any_of(L.dilation.begin(), L.dilation.end(), [](int64_t d) { return d != 1; }))
      refuse(L, "Keras's pooling layers have no dilation");
    const bool avg = L.op == Op::AvgPool;
    const std::vector<int64_t> ext = pool_extension(L);
    const bool any_ext = std::any_of(ext.begin(), ext.end(), [](int64_t v) { return v; });
    const std::string cls =
        fmt::format("layers.{}Pooling{}D", avg ? "Average" : "Max", L.spatial_dims);
    const std::string args =
        fmt::format("{}, strides={}", python_tuple(L.kernel), python_tuple(L.stride));
    if (!any_ext && pads_read_as(L, PadMode::Valid))
      return add(fmt::format("{}({}, padding='valid')", cls, args), t);
    // Keras's 'same' ignores the padding, as a zero-border max pool and an average pool without
    // count_include_pad do.
    if (!any_ext && L.ignores_padding() && pads_read_as(L, PadMode::SameUpper))
      return add(fmt::format("{}({}, padding='same')", cls, args), t);
    if (!avg) {
      const std::string in = padded(L, t, ext, L.ignores_padding());
      return add(fmt::format("{}({}, padding='valid')", cls, args), in);
    }
    // The mean over the taps that count: the sum over the padded window divided by the count of
    // taps inside the input (padding ignored) or inside input and pads (count_include_pad).
    const std::string in = padded(L, t, ext, false);
    // The mask of the input as padded() crops it, padded by the rest.
    const SplitPads pads = split_pads(L);
    std::vector<int64_t> zero(ext.size(), 0), mask_shape = {1};
    for (size_t k = 0; k < L.pads.axes.size(); ++k)
      mask_shape.push_back(L.in_spatial[k] - pads.crop_before[k] - pads.crop_after[k]);
    mask_shape.push_back(1);
    const std::string count = fmt::format(
        "_window_mean({}, {}, {}, {}, {}, {}, '{}')", python_tuple(mask_shape),
        keras_pairs(pads.before, pads.after), keras_pairs(zero, ext),
        L.ignores_padding() ? "0.0" : "1.0", python_tuple(L.kernel), python_tuple(L.stride), cls);
    const std::string mean = add(fmt::format("{}({}, padding='valid')", cls, args), in);
    return add(fmt::format("layers.Lambda(lambda t, c={}: t / c)", count), mean);
  }

  std::string layer(const Layer& L, const std::string& root) {
    check_portable(L);
    std::vector<std::string> in;
    for (const std::string& name : L.inputs) in.push_back(var.at(name));
    const std::string name = python_identifier(L.name, used);
    const std::string list = "[" + fmt::format("{}", fmt::join(in, ", ")) + "]";
    switch (L.op) {
      case Op::Conv:
      case Op::ConvTranspose:
        return conv(L, in[0], name, root);
      case Op::MaxPool:
      case Op::AvgPool:
        return pool(L, in[0]);
      case Op::Add:
        return activation(L, add("layers.Add()", list));
      case Op::Mul:
        return activation(L, L.channel_broadcast
                                 ? add("layers.Lambda(lambda ts: ts[0] * ts[1])", list)
                                 : add("layers.Multiply()", list));
      case Op::Concat:
        return add("layers.Concatenate(axis=-1)", list);
      case Op::Activation:
        return activation(L, in[0]);
      case Op::Softmax:
        return add("layers.Softmax(axis=-1)", in[0]);
      case Op::LayerNorm:
        return add(fmt::format("layers.LayerNormalization(axis=-1, epsilon={}, center=False, "
                               "scale=False)",
                               python_float(L.epsilon)),
                   in[0]);
      case Op::Transpose: {
        // Channels last -> the input's layout -> perm -> the output's layout -> channels last.
        const int rank = L.input_layout.spatial_dims + 2;
        const auto to_in = channel_perm(rank, true, L.input_layout.channels_last);
        const auto to_last = channel_perm(rank, L.layout.channels_last, true);
        std::vector<int64_t> p(static_cast<size_t>(rank));
        for (size_t i = 0; i < p.size(); ++i)
          p[i] = to_in[static_cast<size_t>(L.perm[static_cast<size_t>(to_last[i])])];
        return permute(p, in[0]);
      }
      default:
        refuse(L, "this op is not ported yet");
    }
  }

  std::string permute(const std::vector<int64_t>& p, const std::string& t) {
    if (is_identity(p)) return t;
    return add(fmt::format("layers.Permute({})",
                           python_tuple(std::vector<int64_t>(p.begin() + 1, p.end()))),
               t);
  }
};

}  // namespace

std::string keras_model_source(const Model& model, const PortModuleOptions& o) {
  Emitter e{model, {}, {}, {}, {}, 0};
  std::vector<std::string> inputs;
  for (const ModelInput& in : model.inputs) {
    check_portable(in);
    const std::string arg = python_identifier(in.name, e.used);
    e.body.push_back(
        fmt::format("    {} = keras.Input(shape={}, batch_size={}, name={})", arg,
                    python_tuple(std::vector<int64_t>(in.shape.begin() + 1, in.shape.end())),
                    in.shape[0], python_string(in.name)));
    inputs.push_back(arg);
    const int rank = static_cast<int>(in.shape.size());
    e.var[in.name] = e.permute(channel_perm(rank, in.layout.channels_last, true), arg);
  }
  for (const Layer& L : model.layers) {
    const std::string about = python_text(L.description.empty() ? L.op_name : L.description);
    e.body.push_back(fmt::format("    # {}: {}", python_text(L.name), about));
    e.var[L.name] = e.layer(L, o.weights_root);
  }
  std::vector<std::string> outputs;
  for (const std::string& name : model.outputs) {
    const Layer* L = model.find_layer(name);
    std::string r =
        e.permute(channel_perm(L->spatial_dims + 2, true, L->layout.channels_last), e.var.at(name));
    const auto shape = model.output_shapes.find(name);
    if (shape != model.output_shapes.end())
      r = e.add(
          fmt::format("layers.Reshape({})", python_tuple(std::vector<int64_t>(
                                                shape->second.begin() + 1, shape->second.end()))),
          r);
    outputs.push_back(r);
  }
  std::string inputs_doc;
  for (const ModelInput& in : model.inputs)
    inputs_doc += fmt::format("{}{} {} ({})", inputs_doc.empty() ? "" : ", ", python_text(in.name),
                              shape_text(in.shape), in.layout.name());
  std::string src = fmt::format(
      R"("""Keras port of {source}, written by `padfold port --to keras` ({n} layers).

Every pad is resolved for the model's fixed input size: {inputs}. Keras's own padding='same',
'valid' and 'causal' where they give the source's pads, else explicit padding then 'valid'; pools
pad and count exactly as the source does. build(weights) returns the keras.Model with the .npy
files padfold import wrote loaded (default: {default_doc}); build(None) leaves them unset.
"""
import os

import numpy as np
import keras
from keras import layers, ops

WEIGHTS = {default}


def _index(n, before, after, mode):
    i = np.arange(-before, n + after)
    if mode == "reflect":
        i = np.abs(i)
        i = np.where(i >= n, 2 * (n - 1) - i, i)
    elif mode == "symmetric":
        i = np.where(i < 0, -i - 1, i)
        i = np.where(i >= n, 2 * n - 1 - i, i)
    elif mode == "edge":
        i = np.clip(i, 0, n - 1)
    else:  # wrap
        i = np.mod(i, n)
    return i


def _pad(pads, mode, value):
    """Pads the spatial axes of a channels-last tensor: a constant, or a gather of the border's
    indices (reflect, symmetric, edge, wrap). pads: (before, after) per axis."""
    pads = [pads] if isinstance(pads[0], int) else list(pads)

    def pad(t):
        if mode == "constant":
            return ops.pad(t, [[0, 0], *pads, [0, 0]], constant_values=value)
        for axis, (b, a) in enumerate(pads, start=1):
            t = ops.take(t, _index(t.shape[axis], b, a, mode), axis=axis)
        return t
    return layers.Lambda(pad)


def _window_mean(shape, pads, ext, fill, kernel, strides, pooling):
    """How many of a window's taps count, as a fraction of the window: ones over the input (and
    `fill` over the pads), averaged by the same pooling."""
    mask = _pad(pads, "constant", fill)(np.ones(shape, np.float32))
    mask = _pad(ext, "constant", 0.0)(mask)
    pool = getattr(layers, pooling.split(".")[-1])(kernel, strides=strides, padding="valid")
    return ops.convert_to_numpy(pool(mask))


class _Bias(layers.Layer):
    """A per-channel bias, added after a transposed conv's output was extended past its end."""

    def build(self, shape):
        self.bias = self.add_weight(shape=(shape[-1],), initializer="zeros", name="bias")

    def call(self, t):
        return t + self.bias


def _set(layer, root, files):
    values = []
    for path, perm, shape in files:
        w = np.load(os.path.join(root, path))
        if perm is not None:
            w = w.transpose(perm)
        if shape is not None:
            w = w.reshape(shape)
        values.append(w.astype(np.float32))
    layer.set_weights(values)


def build(weights=WEIGHTS):
)",
      fmt::arg("source", python_text(o.source_label)), fmt::arg("n", model.layers.size()),
      fmt::arg("inputs", inputs_doc), fmt::arg("default", o.default_weights_expr),
      fmt::arg("default_doc", python_text(o.default_weights_doc)));
  for (const std::string& line : e.body) src += line + "\n";
  const auto one_or_list = [](const std::vector<std::string>& v) {
    return v.size() == 1 ? v[0] : "[" + fmt::format("{}", fmt::join(v, ", ")) + "]";
  };
  src += fmt::format("    model = keras.Model({}, {}, name={})\n", one_or_list(inputs),
                     one_or_list(outputs), python_string(python_identifier(model.name, e.used)));
  src += "    if weights is not None:\n        load(model, weights)\n    return model\n\n\n";
  src += "def load(model, weights):\n";
  for (const std::string& line : e.load) src += line + "\n";
  if (e.load.empty()) src += "    pass\n";
  return src;
}

}  // namespace padfold
