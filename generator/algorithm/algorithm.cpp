#include "algorithm/algorithm.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "algorithm/access.h"
#include "algorithm/builders.h"
#include "algorithm/requantize.h"
#include "algorithm/winograd.h"
#include "base/enum_names.h"

namespace padfold {

using namespace Halide;

namespace {

constexpr EnumName<pf_role> kRoleNames[] = {{PF_ROLE_INPUT, "input"},
                                            {PF_ROLE_WEIGHTS, "weights"},
                                            {PF_ROLE_BIAS, "bias"},
                                            {PF_ROLE_OUTPUT, "output"}};

}  // namespace

const char* role_name(pf_role role) {
  const char* name = find_name(kRoleNames, role);
  if (!name)
    throw std::logic_error("no name for buffer role " + std::to_string(static_cast<int>(role)));
  return name;
}

Halide::Type halide_type(pf_dtype dtype) {
  switch (dtype) {
    case PF_F32:
      return Float(32);
    case PF_F16:
      return Float(16);
    case PF_I8:
      return Int(8);
    case PF_U8:
      return UInt(8);
    case PF_I32:
      return Int(32);
  }
  throw std::logic_error("no Halide type for dtype " + std::to_string(static_cast<int>(dtype)));
}

Halide::Type element_type(const Layer& L) {
  return halide_type(pf_dtype_of(L.output_dtype()));
}

std::vector<BufferInfo> buffer_infos(const Layer& L, const WeightForm& weights) {
  const pf_dtype act = pf_dtype_of(L.input_dtype());
  const bool q = L.quantized();
  std::vector<BufferInfo> out;
  if (L.is_join()) {
    for (size_t i = 0; i < L.inputs.size(); ++i)
      out.push_back({"input" + std::to_string(i), PF_ROLE_INPUT, L.layout.name(), L.input_shape(i),
                     L.name, act});
  } else {
    out.push_back({"input", PF_ROLE_INPUT, L.read_layout().name(), L.input_shape(), L.name, act});
  }
  if (L.has_weights())
    out.push_back({"weights", PF_ROLE_WEIGHTS, weight_form_layout(L, weights),
                   weight_form_shape(L, weights), L.name, q ? PF_I8 : PF_F32});
  if (L.bias)
    out.push_back({"bias",
                   PF_ROLE_BIAS,
                   bias_form_layout(weights),
                   {L.out_channels},
                   L.name,
                   q ? PF_I32 : PF_F32});
  out.push_back({"output", PF_ROLE_OUTPUT, L.layout.name(), L.output_shape_full(), L.name,
                 pf_dtype_of(L.output_dtype())});
  return out;
}

std::vector<BufferInfo> preparation_buffers(const Layer& L, const WeightForm& form) {
  const pf_dtype dtype = L.quantized() ? PF_I8 : PF_F32;
  return {{"weights", PF_ROLE_INPUT, weight_form_layout(L, {}), weight_form_shape(L, {}), L.name,
           dtype},
          {"prepared", PF_ROLE_OUTPUT, weight_form_layout(L, form), weight_form_shape(L, form),
           L.name, dtype}};
}

BufferInfo residual_buffer(const Layer& add) {
  return {"residual", PF_ROLE_INPUT,         add.layout.name(), add.output_shape_full(),
          add.name,   pf_dtype_of(add.dtype)};
}

bool pixel_runs_apply(const Layer& L) {
  if (L.op != Op::Conv || L.dtype != DType::F32 || L.groups != 1 || !L.layout.channels_last ||
      L.spatial_dims != 2 || L.relayout_input)
    return false;
  for (int64_t k : L.kernel)
    if (k != 1) return false;
  // No padding: every pixel reads inside the input (a stride may leave its last rows unread).
  for (const AxisPads& p : L.pads.axes)
    if (p.before != 0 || p.after > 0) return false;
  return true;
}

Algorithm build_algorithm(const Layer& L, const AlgorithmVariant& variant, const Func& source) {
  const Layer* residual = variant.residual;
  const int winograd_m = variant.winograd_m;
  if (L.dtype != DType::F32 && !L.quantized())
    throw std::runtime_error("layer '" + L.name + "': " + to_string(L.dtype) +
                             " kernels are not generated (float32, int8 and uint8 are)");
  if (L.quantized() && (source.defined() || winograd_m > 0))
    throw std::logic_error("layer '" + L.name + "': a quantized layer is its own kernel");
  if (residual && residual->dtype != L.dtype)
    throw std::logic_error("layer '" + L.name + "': its residual add has another dtype");
  if (source.defined() && L.is_join())
    throw std::logic_error("layer '" + L.name + "': add, mul and concat are not fused");
  if (residual && (L.op != Op::Conv || residual->op != Op::Add))
    throw std::logic_error("layer '" + L.name + "': only a conv takes a residual add");
  const WeightForm& form = variant.weights;
  if ((form.winograd_m > 0 && form.winograd_m != winograd_m) ||
      (form.dot_table && !quantized_dot_product(L)) ||
      (form.block_channels > 0 &&
       (winograd_m > 0 || !blocked_weights_apply(L, form.block_channels))))
    throw std::logic_error("layer '" + L.name + "': its weights are prepared for another kernel");
  Algorithm a;
  a.layer = &L;
  a.source = source;
  a.explicit_border = variant.explicit_border;
  a.dot = variant.dot;
  a.native_fma = variant.native_fma;
  for (const BufferInfo& b : buffer_infos(L, variant.weights)) {
    if (source.defined() && b.role == PF_ROLE_INPUT) continue;  // the producer's Func instead
    BufferParam bp{b, {}};
    if (b.role != PF_ROLE_OUTPUT) {
      bp.param =
          ImageParam(halide_type(b.dtype), static_cast<int>(b.shape.size()), L.name + "_" + b.name);
      fix_shape(bp.param, b.shape);
      (b.role == PF_ROLE_INPUT     ? a.input
       : b.role == PF_ROLE_WEIGHTS ? a.weights
                                   : a.bias) = bp.param;
      if (b.role == PF_ROLE_INPUT) a.inputs.push_back(bp.param);
    }
    a.buffers.push_back(bp);
  }
  if (variant.pixel_runs && (!pixel_runs_apply(L) || winograd_m > 0 || source.defined()))
    throw std::logic_error("layer '" + L.name + "': not a conv computed as runs of pixels");
  a.pixel_runs = variant.pixel_runs;
  a.weight_form = form;
  if (form.block_channels > 0)
    a.blocked_weights = blocked_weights_view(L, form.block_channels, a.weights);

  a.c = Var("c");
  a.n = Var("n");
  const char* names[] = {"x", "y", "z"};
  for (int j = 0; j < L.spatial_dims; ++j) a.spatial.emplace_back(names[j]);
  if (L.layout.channels_last) a.vars.push_back(a.c);
  for (const Var& v : a.spatial) a.vars.push_back(v);
  if (!L.layout.channels_last) a.vars.push_back(a.c);
  a.vars.push_back(a.n);

  if (L.has_window()) a.reduce = Func(L.name + "_reduce");
  a.output = Func(L.name);
  ImageParam addend;
  if (residual) {  // before the output, as the buffers are in manifest order
    const BufferInfo b = residual_buffer(*residual);
    addend = ImageParam(element_type(*residual), static_cast<int>(b.shape.size()),
                        residual->name + "_residual");
    fix_shape(addend, b.shape);
    a.buffers.insert(a.buffers.end() - 1, BufferParam{b, addend});
    a.buffers.back().info = buffer_infos(*residual).back();  // the add's output
    a.residual = residual;
    a.addend = addend;
  }
  switch (L.op) {
    case Op::Conv:
      if (winograd_m > 0)
        build_winograd_conv(a, L, winograd_m, variant.weights.prepared());
      else
        build_conv(a, L);
      break;
    case Op::ConvTranspose:
      build_conv_transpose(a, L);
      break;
    case Op::MaxPool:
      build_max_pool(a, L);
      break;
    case Op::AvgPool:
      build_avg_pool(a, L);
      break;
    case Op::Add:
      build_add(a);
      break;
    case Op::Mul:
      build_mul(a);
      break;
    case Op::Softmax:
      build_softmax(a);
      break;
    case Op::Concat:
      build_concat(a);
      break;
    case Op::Quantize:
      build_quantize(a);
      break;
    case Op::Dequantize:
      build_dequantize(a);
      break;
    case Op::Transpose:
      build_transpose(a);
      break;
    case Op::Resize:
      build_resize(a);
      break;
    case Op::GatherChannels:
      build_gather_channels(a);
      break;
    case Op::LayerNorm:
      build_layer_norm(a);
      break;
    case Op::Activation:
      build_activation(a);
      break;
  }
  if (!a.output.defined() && L.quantized()) {
    Expr acc = a.reduce(a.vars);
    if (L.bias) acc = acc + a.bias(a.c);
    a.output(a.vars) = cast(element_type(L), requantize_conv(L, acc, a.c));
  }
  if (!a.output.defined() && a.pixel_runs) {
    // Written pixel by pixel from the run: the output's rows are where a pixel lands, not what a
    // tile of the run covers (bounds through x = p % W and y = p / W would span whole rows).
    const int W = static_cast<int>(L.out_spatial[1]);
    a.pixels = RDom(0, static_cast<int>(L.out_spatial[0]) * W, L.name + "_pixels");
    const Expr p = a.pixels.x;
    const std::vector<Expr> at{a.c, p % W, p / W, a.n};
    Expr v = a.reduce(a.c, p, a.n);
    if (L.bias) v = v + a.bias(a.c);
    v = activate(v, L);
    if (residual) v = activate(v + addend(at), *residual);
    a.output(a.vars) = undef<float>();
    a.output(at) = v;
  }
  if (!a.output.defined()) {
    Expr v = a.reduce(a.vars);
    if (L.bias) v = v + a.bias(a.c);
    v = activate(v, L);
    if (residual) v = activate(v + addend(a.vars), *residual);
    a.output(a.vars) = v;
  }
  fix_shape(a.output.output_buffer(), L.output_shape_full());
  return a;
}

}  // namespace padfold
