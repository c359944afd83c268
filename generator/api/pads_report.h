// padfold pads as a report: one padding request resolved, and the same layer under every other
// convention with code reproducing it elsewhere. The CLI prints it; the Python package reads its
// JSON (padfold.pads, padfold.compare).
#pragma once

#include <cstdint>
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

// "7x7", "7,7" or "7" given as `option`; a single value is repeated for every dim (dims 0: as many
// as given). Every value must fit an int32 (base/limits.h), so no arithmetic on them overflows.
// Throws std::runtime_error naming the option.
std::vector<int64_t> parse_sizes(const std::string& text, const std::string& option, size_t dims);

// The report as text or JSON. Throws std::runtime_error (a padfold::PaddingError from the padding
// module, or a size error naming the option) for a request that cannot be resolved.
std::string pads_report(const PadsRequest& request);

}  // namespace padfold
