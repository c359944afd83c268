#include "frontend/onnx/names.h"

#include <cctype>

namespace padfold::onnx_import {
namespace {

const char* const kSymbolSuffixes[] = {"_argv", "_metadata"};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::string sanitize_identifier(const std::string& name, size_t max_length) {
  std::string s;
  for (char ch : name) {
    const auto c = static_cast<unsigned char>(ch);
    const bool ok = std::isalnum(c) && c < 0x80;
    if (ok)
      s += static_cast<char>(c);
    else if (!s.empty() && s.back() != '_')
      s += '_';
  }
  while (!s.empty() && s.back() == '_') s.pop_back();
  if (s.empty()) return s;
  if (std::isdigit(static_cast<unsigned char>(s[0]))) s = "n" + s;
  if (s.size() > max_length) s.resize(max_length);
  while (!s.empty() && s.back() == '_') s.pop_back();
  return s;
}

bool NameAllocator::taken(const std::string& name) const {
  if (used_.count(name)) return true;
  for (const char* suffix : kSymbolSuffixes) {
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
  for (int n = 2; taken(name); ++n) {
    const std::string suffix = "_" + std::to_string(n);
    name = sanitize_identifier(base, 64 - suffix.size()) + suffix;
  }
  used_.insert(name);
  return name;
}

}  // namespace padfold::onnx_import
