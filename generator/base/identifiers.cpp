#include "base/identifiers.h"

#include <algorithm>
#include <cctype>

namespace padfold {
namespace {

bool ascii_alnum(char ch) {
  const auto c = static_cast<unsigned char>(ch);
  return c < 0x80 && std::isalnum(c);
}

bool ascii_digit(char ch) {
  return ch >= '0' && ch <= '9';
}

}  // namespace

bool is_identifier(const std::string& s) {
  if (s.empty() || ascii_digit(s[0])) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return ascii_alnum(c) || c == '_'; });
}

std::string sanitize_identifier(const std::string& name, size_t max_length) {
  std::string s;
  for (char ch : name) {
    if (ascii_alnum(ch))
      s += ch;
    else if (!s.empty() && s.back() != '_')
      s += '_';
  }
  while (!s.empty() && s.back() == '_') s.pop_back();
  if (s.empty()) return s;
  if (ascii_digit(s[0])) s = "n" + s;
  if (s.size() > max_length) s.resize(max_length);
  while (!s.empty() && s.back() == '_') s.pop_back();
  return s;
}

std::string c_identifier(const std::string& name) {
  std::string id;
  for (char ch : name) id += ascii_alnum(ch) ? ch : '_';
  if (id.empty() || ascii_digit(id[0])) id = "m_" + id;
  return id;
}

std::string kernel_symbol(const std::string& model, const std::string& layer) {
  const std::string id = c_identifier(model);
  return "pf_" + std::to_string(id.size()) + "_" + id + "_" + layer;
}

}  // namespace padfold
