// The rules for names that become C symbols: model, layer and tensor names end up in kernel
// function names (pf_<model>_<layer>), registry symbols and generated headers.
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

// `name` as a C identifier for generated code, character for character (every other character
// becomes '_'), "m_" before an empty name or a leading digit.
std::string c_identifier(const std::string& name);

}  // namespace padfold
