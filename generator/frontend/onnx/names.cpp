#include "frontend/onnx/names.h"

#include "base/text.h"

namespace padfold::onnx_import {

bool NameAllocator::taken(const std::string& name) const {
  if (used_.count(name)) return true;
  for (const char* suffix : kHalideSymbolSuffixes) {
    if (used_.count(name + suffix)) return true;
    if (ends_with(name, suffix) &&
        used_.count(name.substr(0, name.size() - std::string(suffix).size())))
      return true;
  }
  return false;
}

std::string NameAllocator::allocate(const std::string& wanted, const std::string& fallback) {
  std::string base = sanitize_identifier(wanted);
  if (base.empty()) base = sanitize_identifier(fallback);
  if (base.empty()) base = "t";
  std::string name = base;
  // Resumes where the last name from this base stopped: names are never given back, so every
  // suffix before it is still taken (and 40k nodes named alike stay linear).
  for (int& n = next_suffix_.emplace(base, 2).first->second; taken(name); ++n) {
    const std::string suffix = "_" + std::to_string(n);
    name = sanitize_identifier(base, kMaxNameLength - suffix.size()) + suffix;
  }
  used_.insert(name);
  return name;
}

}  // namespace padfold::onnx_import
