// padfold port: a whole model (an ONNX file or a padfold spec) resolved at its fixed input size,
// and for every convolution and pool what a target framework's own padding option gives, whether
// a naive port differs and by how many pixels, and the exact fix; optionally the PyTorch module
// or Keras model that computes exactly what the source model computes. The CLI prints the report;
// the Python package reads its JSON (padfold.port, padfold.torch.from_onnx).
#pragma once

#include <string>
#include <vector>

namespace padfold {

struct PortRequest {
  std::string model;                // an .onnx file or a padfold spec (.json)
  std::string to = "pytorch";       // pytorch, keras or onnx
  std::vector<std::string> inputs;  // ONNX: NAME=SIZES for graph inputs with dynamic dims
  bool json = false;                // the JSON document instead of text
  // pytorch, keras: also write the nn.Module (the keras.Model's builder) here, a .py file; from an
  // ONNX model the imported spec and weights go beside it, in <stem>_padfold/, its default.
  std::string emit;
  bool with_module = false;  // JSON, --to pytorch or keras: include its source ("module")
};

struct PortOutput {
  std::string report;              // text or JSON
  std::vector<std::string> wrote;  // the paths --emit wrote
};

// Throws std::runtime_error naming the file, layer or option at fault; --emit writes nothing
// unless everything is known first (the module, then the weights, then the .py file).
PortOutput port_model(const PortRequest& request);

}  // namespace padfold
