// Index arithmetic shared by the float and the integer references (reference.cpp,
// quant_reference.cpp). Internal to reference/.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace padfold::ref::detail {

// Row-major strides of a shape.
inline std::vector<int64_t> strides_of(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

// Advances a multi-index over `extent` (row-major); returns false after the last one.
inline bool next_index(std::vector<int64_t>& idx, const std::vector<int64_t>& extent) {
  for (size_t i = idx.size(); i-- > 0;) {
    if (++idx[i] < extent[i]) return true;
    idx[i] = 0;
  }
  return false;
}

// Per-axis parameter with a default when the vector is empty.
inline std::vector<int64_t> per_axis(const std::vector<int64_t>& v, size_t dims, int64_t dflt,
                                     const char* what) {
  if (v.empty()) return std::vector<int64_t>(dims, dflt);
  if (v.size() != dims)
    throw std::invalid_argument(std::string("reference: ") + what + " has " +
                                std::to_string(v.size()) + " values, expected " +
                                std::to_string(dims));
  return v;
}

inline int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

}  // namespace padfold::ref::detail
