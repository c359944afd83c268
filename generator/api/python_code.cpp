#include "api/python_code.h"

namespace padfold {

std::string python_string(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\\' || c == '\'') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "'";
}

std::string torch_pad_order(const std::vector<int64_t>& before, const std::vector<int64_t>& after) {
  std::string s = "(";
  for (size_t i = before.size(); i-- > 0;) {
    s += std::to_string(before[i]) + ", " + std::to_string(after[i]);
    if (i) s += ", ";
  }
  return s + ")";
}

}  // namespace padfold
