// padfold resize as a report: where each output pixel of a resize reads its input, for one ONNX
// coordinate mode and, side by side, the others (what PyTorch, TensorFlow and Keras write), so a
// user porting an upsampling sees which convention a model's numbers need. The CLI prints it;
// the Python package reads its JSON (padfold.resize).
#pragma once

#include <string>

namespace padfold {

// Sizes as the CLI takes them: "5x7", "5,7" or "5" (one value for every axis of `input`).
struct ResizeRequest {
  std::string input, output, scales;  // output or scales (scales: "2" or "1.5x2")
  std::string mode = "linear";
  std::string coordinates = "half_pixel";
  std::string rounding = "round_prefer_floor";
  std::string roi;                  // tf_crop_and_resize: start:end per axis ("0.2:0.8,0:1")
  float extrapolation_value = 0.f;  // tf_crop_and_resize: outside the input
  bool compare = false;             // text: also every other coordinate mode, and where it differs
  bool json = false;                // the JSON document of docs/spec-and-cli.md instead of text
};

// The report as text or JSON. Throws std::runtime_error naming the option for a request that
// cannot be resolved (a size or scale out of range, an unknown mode).
std::string resize_report(const ResizeRequest& request);

}  // namespace padfold
