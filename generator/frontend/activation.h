// The activations a layer applies to its output: one row each, read by the spec parser and writer,
// the tuner's signature, the ONNX importer and both ports. Its formula is written twice on purpose:
// the kernels' in algorithm/elementwise.cpp and the reference's (in double) in
// reference/reference.cpp. A new activation is a row here, a case in each of those two and its
// name in spec.schema.json.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

#include "base/enum_names.h"

namespace padfold {

enum class Activation {
  None,
  Relu,
  Relu6,
  LeakyRelu,
  Sigmoid,
  Tanh,
  HardSigmoid,
  HardSwish,
  Silu,
  Gelu,
  GeluTanh  // GELU's tanh approximation
};

struct ActivationDef {
  Activation value;
  const char* name;  // the spec's
  // The parameters it takes: 0, 1 (alpha) or 2 (alpha and beta), and their defaults (ONNX's).
  int params = 0;
  float alpha = 0.f, beta = 0.f;
  const char* onnx_op = "";  // the ONNX op computing it (its attributes are alpha and beta)
  // The ports' code, formatted with {x} (the tensor), {alpha} and {beta}: a PyTorch expression
  // and a Keras layer.
  const char* torch = "{x}";
  const char* keras = "";
};

inline constexpr ActivationDef kActivations[] = {
    {Activation::None, "none"},
    {Activation::Relu, "relu", 0, 0.f, 0.f, "Relu", "F.relu({x})", "layers.ReLU()"},
    {Activation::Relu6, "relu6", 0, 0.f, 0.f, "", "F.hardtanh({x}, 0.0, 6.0)",
     "layers.ReLU(max_value=6.0)"},
    {Activation::LeakyRelu, "leaky_relu", 1, 0.01f, 0.f, "LeakyRelu", "F.leaky_relu({x}, {alpha})",
     "layers.LeakyReLU(negative_slope={alpha})"},
    {Activation::Sigmoid, "sigmoid", 0, 0.f, 0.f, "Sigmoid", "torch.sigmoid({x})",
     "layers.Activation('sigmoid')"},
    {Activation::Tanh, "tanh", 0, 0.f, 0.f, "Tanh", "torch.tanh({x})", "layers.Activation('tanh')"},
    {Activation::HardSigmoid, "hard_sigmoid", 2, 0.2f, 0.5f, "HardSigmoid",
     "torch.clamp({x} * {alpha} + {beta}, 0.0, 1.0)",
     "layers.Lambda(lambda t: ops.clip(t * {alpha} + {beta}, 0.0, 1.0))"},
    {Activation::HardSwish, "hard_swish", 0, 0.f, 0.f, "HardSwish", "_hard_swish({x})",
     "layers.Lambda(lambda t: t * ops.clip(t / 6 + 0.5, 0.0, 1.0))"},
    {Activation::Silu, "silu", 0, 0.f, 0.f, "", "F.silu({x})", "layers.Activation('silu')"},
    // Keras's and ONNX's Gelu default to the erf form; approximate "tanh" is gelu_tanh.
    {Activation::Gelu, "gelu", 0, 0.f, 0.f, "Gelu", "F.gelu({x})", "layers.Activation('gelu')"},
    {Activation::GeluTanh, "gelu_tanh", 0, 0.f, 0.f, "", "F.gelu({x}, approximate='tanh')",
     "layers.Lambda(lambda t: ops.gelu(t, approximate=True))"},
};

static_assert(
    [] {
      for (size_t i = 0; i < std::size(kActivations); ++i)
        if (static_cast<size_t>(kActivations[i].value) != i) return false;
      return std::size(kActivations) == static_cast<size_t>(Activation::GeluTanh) + 1;
    }(),
    "kActivations: one row per Activation, in the enum's order");

constexpr const ActivationDef& activation_def(Activation a) {
  return kActivations[static_cast<size_t>(a)];
}

// The activation ONNX op `op` computes, or nullptr (Clip is relu or relu6 by its bounds).
constexpr const ActivationDef* activation_of_onnx_op(std::string_view op) {
  for (const ActivationDef& d : kActivations)
    if (*d.onnx_op && op == d.onnx_op) return &d;
  return nullptr;
}

// GELU's tanh approximation, 0.5 x (1 + tanh(kScale (x + kCubic x^3))): the kernels compute it
// and the importer recognizes and writes its chain with these.
namespace gelu_tanh {
constexpr float kScale = 0.7978845608f;  // sqrt(2 / pi)
constexpr float kCubic = 0.044715f;
}  // namespace gelu_tanh

// The spec's names (to_string and the parser read them): each row's, and "swish" for silu.
inline constexpr auto kActivationNames = [] {
  std::array<EnumName<Activation>, std::size(kActivations) + 1> names{};
  size_t i = 0;
  for (const ActivationDef& d : kActivations) names[i++] = {d.value, d.name, Spelling::Name};
  names[i] = {Activation::Silu, "swish", Spelling::Alias};
  return names;
}();

}  // namespace padfold
