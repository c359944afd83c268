#include "api/python_code.h"

#include <fmt/format.h>

#include <cctype>

#include "base/text.h"

namespace padfold {

std::string python_string(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\\' || c == '\'') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {  // a newline or carriage return would end the literal
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string python_text(const std::string& s) {
  std::string out;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    // A carriage return or newline would end a comment and make the rest code; a quote could
    // close the docstring, a backslash start an escape there.
    out += u < 0x20 || u == 0x7f ? ' ' : c == '"' ? '\'' : c == '\\' ? '/' : c;
  }
  return out;
}

std::string torch_pad_order(const std::vector<int64_t>& before, const std::vector<int64_t>& after) {
  std::string s = "(";
  for (size_t i = before.size(); i-- > 0;) {
    s += std::to_string(before[i]) + ", " + std::to_string(after[i]);
    if (i) s += ", ";
  }
  return s + ")";
}

std::string keras_pairs(const std::vector<int64_t>& before, const std::vector<int64_t>& after) {
  if (before.size() == 1) return fmt::format("({}, {})", before[0], after[0]);
  std::string s = "(";
  for (size_t i = 0; i < before.size(); ++i)
    s += fmt::format("{}({}, {})", i ? ", " : "", before[i], after[i]);
  return s + ")";
}

std::string python_float(float v) {
  return fmt::format("{:.9g}", v);
}

std::string python_tuple(const std::vector<int64_t>& v) {
  return v.size() == 1 ? fmt::format("({},)", v[0]) : "(" + join(v) + ")";
}

std::string python_ints(const std::vector<int64_t>& v) {
  return v.size() == 1 ? std::to_string(v[0]) : "(" + join(v) + ")";
}

std::string python_identifier(const std::string& name, std::set<std::string>& used) {
  std::string s;
  for (char c : name) s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) s = "l_" + s;
  std::string unique = s;
  for (int i = 2; !used.insert(unique).second; ++i) unique = s + "_" + std::to_string(i);
  return unique;
}

std::vector<int64_t> channel_perm(int rank, bool from_channels_last, bool to_channels_last) {
  std::vector<int64_t> p = {0};
  if (from_channels_last == to_channels_last) {
    for (int i = 1; i < rank; ++i) p.push_back(i);
  } else if (from_channels_last) {  // N..C -> NC..
    p.push_back(rank - 1);
    for (int i = 1; i < rank - 1; ++i) p.push_back(i);
  } else {  // NC.. -> N..C
    for (int i = 2; i < rank; ++i) p.push_back(i);
    p.push_back(1);
  }
  return p;
}

bool is_identity(const std::vector<int64_t>& perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int64_t>(i)) return false;
  return true;
}

}  // namespace padfold
