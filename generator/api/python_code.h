// Pieces of Python source the reports and the ported module write: a string literal, and pads in
// F.pad's order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace padfold {

// A Python string literal of `s`.
std::string python_string(const std::string& s);

// "(b_last, a_last, ..., b_first, a_first)": per-axis pads (outermost axis first) in the order
// F.pad and nn.ZeroPad*d take them, the last axis first.
std::string torch_pad_order(const std::vector<int64_t>& before, const std::vector<int64_t>& after);

}  // namespace padfold
