// padfold pads as a report: one padding request resolved, and the same layer under every other
// convention with code reproducing it elsewhere. The CLI prints it; the Python package reads its
// JSON (padfold.pads, padfold.compare).
#pragma once

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace padfold {

// Sizes as the CLI takes them: "7x7", "7,7" or "7" (one value for every dim of `input`).
struct PadsRequest {
  std::string input, kernel, stride = "1", dilation = "1";
  std::string padding = "same";  // a mode name, or explicit pads such as 1 or 1,1,2,2
  std::string convention;        // for same: tensorflow (default), keras, onnx, ...
  std::string output_padding;    // transposed only
  bool ceil_mode = false, transposed = false;
  bool compare = false;  // text: also the table of conventions and the code reproducing it
  bool json = false;     // the JSON document of docs/spec-and-cli.md instead of text
};

// The values of a per-dim option such as "7x7", "7,7" or "7", each item read by `item` (which
// throws naming the option); a single value is repeated for every dim (dims 0: as many as given),
// else there must be `dims`. Throws std::runtime_error naming the option.
template <typename T, typename Item>
std::vector<T> parse_dims_option(const std::string& text, const std::string& option, size_t dims,
                                 Item item) {
  std::vector<T> v;
  for (size_t start = 0; start <= text.size();) {
    const size_t end = std::min(text.find_first_of("x,", start), text.size());
    v.push_back(item(text.substr(start, end - start)));
    start = end + 1;
  }
  if (dims && v.size() == 1) v.assign(dims, v[0]);
  if (dims && v.size() != dims)
    throw std::runtime_error(option + " '" + text + "' has " + std::to_string(v.size()) +
                             " values; --input has " + std::to_string(dims) + " dims");
  return v;
}

// "7x7", "7,7" or "7" given as `option`; a single value is repeated for every dim (dims 0: as many
// as given). Every value must fit an int32 (base/limits.h), so no arithmetic on them overflows.
// Throws std::runtime_error naming the option.
std::vector<int64_t> parse_sizes(const std::string& text, const std::string& option, size_t dims);

// The report as text or JSON. Throws std::runtime_error (a padfold::PaddingError from the padding
// module, or a size error naming the option) for a request that cannot be resolved.
std::string pads_report(const PadsRequest& request);

}  // namespace padfold
