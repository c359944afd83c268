// The analysis behind padfold port (api/port.h): for each convolution and pool of a resolved
// model, what its pads read as and how a target framework reproduces them.
#pragma once

#include <string>
#include <vector>

#include "frontend/layer.h"

namespace padfold {

enum class PortTarget { PyTorch, Keras, Onnx };
PortTarget parse_port_target(const std::string& name);  // pytorch (torch), keras (tf), onnx
std::string to_string(PortTarget target);

// How the target framework pads one layer.
struct PortWay {
  std::string native;         // its own padding option, as code: exact, or the closest there is
  bool native_exact = false;  // that option computes the layer exactly
  std::string fix;            // where it does not: the exact code (pad, then the layer)
  std::string naive;          // what a naive port writes (PyTorch padding=k//2, Keras 'same')
  Resolved naive_pads;        // and the pads it resolves to
};

struct LayerPort {
  const Layer* layer = nullptr;
  std::string reads_as;          // valid, same_upper, same_lower, causal, full, or explicit (...)
  bool input_dependent = false;  // the pads would change with the input size
  PortWay way;
  bool naive_differs = false;
  std::vector<int64_t> shift;         // per axis: naive pad_before - exact (>0: shifted right)
  std::vector<int64_t> output_delta;  // per axis: naive output size - exact
};

// Whether the layer's pads (and output) are what `mode` gives for its input.
bool pads_read_as(const Layer& L, PadMode mode);

// Per axis, how far a pool's last window reaches past its pads (ceil_mode), or 0: the taps there
// read nothing.
std::vector<int64_t> pool_extension(const Layer& L);

// Throw std::runtime_error naming what a port cannot compute: an int8 layer or input, a layer
// read by ops padfold does not generate, a tensor computed by one.
void check_portable(const Layer& L);
void check_portable(const ModelInput& in);

// A transposed conv's output cropped from the end of its full output, output_padding taken off
// (negative: the output extends past the full one).
int64_t transposed_crop_after(const Layer& L, size_t axis);

// Every layer with a window (conv, conv_transpose, pools), in the model's order.
std::vector<LayerPort> port_layers(const Model& model, PortTarget target);

}  // namespace padfold
