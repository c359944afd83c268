// write_file, render, dense_strides and c_string (emit/writers.h).
#include "emit/writers.h"

#include <fmt/format.h>

#include <fstream>
#include <stdexcept>

namespace padfold {

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  if (!f) throw std::runtime_error("cannot write " + path.string());
}

std::string render(const char* tmpl, const kainjow::mustache::data& data) {
  kainjow::mustache::mustache m{std::string(tmpl)};
  if (!m.is_valid()) throw std::logic_error("bad template: " + m.error_message());
  return m.render(data);
}

std::vector<int64_t> dense_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

std::string c_string(const std::string& text) {
  std::string out = "\"";
  for (unsigned char ch : text) {
    if (ch == '"' || ch == '\\')
      out += std::string("\\") + static_cast<char>(ch);
    else if (ch >= 0x20 && ch < 0x7f && ch != '?')  // '?': no trigraphs
      out += static_cast<char>(ch);
    else
      out += fmt::format("\\{:03o}", ch);
  }
  return out + "\"";
}

}  // namespace padfold
