// The rules for names that become C symbols: model, layer and tensor names end up in kernel
// function names (kernel_symbol), registry symbols and generated headers.
#pragma once

#include <array>
#include <cstddef>
#include <string>

#include "base/limits.h"

namespace padfold {

// Halide defines, beside each kernel function, symbols with these suffixes: a name that ends in
// one of them can collide with another kernel's.
inline constexpr std::array<const char*, 2> kHalideSymbolSuffixes = {"_argv", "_metadata"};

// A C identifier: [A-Za-z_][A-Za-z0-9_]*.
bool is_identifier(const std::string& s);

// `name` as a C identifier for a spec (ONNX names such as "conv1/Conv:0"): every run of other
// characters becomes one '_', leading/trailing '_' dropped, "n" before a leading digit, at most
// `max_length` characters. "" when nothing of the name is usable.
std::string sanitize_identifier(const std::string& name, size_t max_length = kMaxNameLength);

// The C symbol of a layer's kernel: pf_<n>_<model>_<layer>, n the length of the model's
// c_identifier. The length says where the model part ends, so no two models' symbols are alike
// (model a_b layer c: pf_3_a_b_c; model a layer b_c: pf_1_a_b_c) and bundles of different models
// link into one program. Within a model the spec parser refuses layer names that would meet
// another layer's Halide symbols (kHalideSymbolSuffixes).
std::string kernel_symbol(const std::string& model, const std::string& layer);

// `name` as a C identifier for generated code, character for character (every other character
// becomes '_'), "m_" before an empty name or a leading digit.
std::string c_identifier(const std::string& name);

}  // namespace padfold
