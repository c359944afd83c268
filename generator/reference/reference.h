// Naive reference implementations of the ops padfold generates: the oracle of the tests and of the
// tuner's correctness check (a candidate schedule must compute what the reference computes).
//
// Independent of Halide and of generator/padding/: every function takes concrete per-side pads
// (or crops) and computes the answer straight from the definition, accumulating in double.
//
// Logical layout: activations are N, C, then spatial dims (D, H, W as present), row-major. Conv
// weights are (O, I/groups, k...), transposed-conv weights are (C_in, C_out/groups, k...). Use
// permute() / to_channels_last() / from_channels_last() to move between this and other layouts.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "frontend/activation.h"

namespace padfold::ref {

struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> data;

  Tensor() = default;
  explicit Tensor(std::vector<int64_t> shape_, float fill = 0.f);
  Tensor(std::vector<int64_t> shape_, std::vector<float> data_);

  int64_t numel() const;
  int rank() const { return static_cast<int>(shape.size()); }
  int spatial_dims() const { return rank() - 2; }
};

// Number of elements of a shape (1 for an empty shape).
int64_t numel(const std::vector<int64_t>& shape);

// What fills the padded region. Names follow numpy's np.pad modes.
enum class BorderKind {
  Zeros,      // 0
  Constant,   // a given value
  Reflect,    // numpy 'reflect': mirror without repeating the edge; |overshoot| < n
  Symmetric,  // numpy 'symmetric': mirror repeating the edge; overshoot <= n
  Replicate,  // numpy 'edge': clamp; any overshoot
  Circular,   // numpy 'wrap': periodic; overshoot <= n
};

// Where index i (possibly outside [0, n)) reads from, for an axis of length n. Returns -1 when the
// value is the constant (Zeros/Constant outside the axis). Throws std::out_of_range when the mode
// cannot produce index i with a single fold (see the limits above).
int64_t border_index(int64_t i, int64_t n, BorderKind kind);

// np.pad of a 1-D sequence, for testing border_index (numpy semantics within the limits above).
std::vector<float> pad1d(const std::vector<float>& v, int64_t before, int64_t after,
                         BorderKind kind, float value = 0.f);

struct ConvParams {
  std::vector<int64_t> stride, dilation, pad_before, pad_after;  // empty: 1 / 1 / 0 / 0
  int64_t groups = 1;
  BorderKind border = BorderKind::Zeros;
  float border_value = 0.f;
};

// Cross-correlation (what every DL framework calls convolution). x: (N, C, s...), w: (O, C/groups,
// k...), bias: (O) or null. Output spatial size floor((in + pb + pa - ke)/s) + 1 unless
// out_spatial is given. Taps at padded positions read the border values; taps beyond
// [-pad_before, in + pad_after) (only possible with a larger out_spatial) contribute nothing.
Tensor conv(const Tensor& x, const Tensor& w, const Tensor* bias, const ConvParams& p,
            std::vector<int64_t> out_spatial = {});

// Transposed convolution. x: (N, C_in, s...), w: (C_in, C_out/groups, k...). The full output along
// an axis is stride*(in-1) + ke long; output index j is full index j + crop_before. Positions
// outside the full output (negative crop_after, output_padding, a larger out_spatial) are zero
// (plus bias). Output size full - crop_before - crop_after unless out_spatial is given.
Tensor conv_transpose(const Tensor& x, const Tensor& w, const Tensor* bias,
                      const std::vector<int64_t>& stride, const std::vector<int64_t>& dilation,
                      const std::vector<int64_t>& crop_before,
                      const std::vector<int64_t>& crop_after, int64_t groups = 1,
                      std::vector<int64_t> out_spatial = {});

struct PoolParams {
  std::vector<int64_t> kernel, stride, dilation, pad_before, pad_after;  // kernel required
  BorderKind border = BorderKind::Zeros;
  float border_value = 0.f;
  bool count_include_pad = false;  // avg_pool only
};

// Max pool. Zeros border: padded taps never win (-inf, as every framework does). Constant border:
// the constant takes part. Reflect/Symmetric/Replicate/Circular: the border values take part. Taps
// beyond [-pad_before, in + pad_after) (ceil_mode overhang) never take part.
// Output size floor((in + pb + pa - ke)/s) + 1 unless out_spatial is given (e.g. ceil_mode sizes).
Tensor max_pool(const Tensor& x, const PoolParams& p, std::vector<int64_t> out_spatial = {});

// Average pool (no dilation in any framework; p.dilation must be empty or all 1).
// count_include_pad=false: only taps inside the input are summed and counted.
// count_include_pad=true: taps inside [-pad_before, in + pad_after) are summed (border values) and
// counted; overhang beyond that (ceil_mode) is excluded (PyTorch semantics).
Tensor avg_pool(const Tensor& x, const PoolParams& p, std::vector<int64_t> out_spatial = {});

// In double. hard_sigmoid: clamp(alpha*v + beta, 0, 1); hard_swish: v*clamp(v/6 + 1/2, 0, 1)
// (ONNX HardSwish); silu: v*sigmoid(v); gelu: v*Phi(v), v/2*(1 + erf(v/sqrt 2)).
float activation(float v, Activation kind, float alpha = 0.f, float beta = 0.f);
Tensor activation(const Tensor& t, Activation kind, float alpha = 0.f, float beta = 0.f);
// Softmax over axis 1 (channels) of an N C s... tensor, in double.
Tensor softmax_channels(const Tensor& x);
// (x - mean) / sqrt(variance + epsilon) over axis 1 (channels) at each pixel, in double.
Tensor layer_norm_channels(const Tensor& x, double epsilon);

// ONNX Resize of the spatial axes of an N C s... tensor. `linear` interpolates (in double), else
// the nearest pixel; coordinates (ONNX's coordinate_transformation_mode: half_pixel,
// pytorch_half_pixel, align_corners, asymmetric, tf_half_pixel_for_nn) are computed in float, as
// the runtimes do, and rounding is ONNX's nearest_mode (round_prefer_floor, round_prefer_ceil,
// floor, ceil). An axis of scale 1 keeps its pixels, and an output of the input's sizes is the
// input, whatever the scales (ONNX Runtime's rules, which ONNX's formulas do not have). Sources
// past the edge read the edge.
struct ResizeParams {
  bool linear = false;
  std::string coordinates = "half_pixel", rounding = "round_prefer_floor";
  std::vector<int64_t> output;  // per spatial axis
  std::vector<float> scales;    // per spatial axis
  // tf_crop_and_resize: per spatial axis the region [start, end] (empty: 0 to 1), and the value
  // of an output whose coordinate leaves the input along any axis.
  std::vector<std::pair<float, float>> roi;
  float extrapolation_value = 0.f;
};
Tensor resize(const Tensor& x, const ResizeParams& p);

// N C spatial... -> N K spatial...: output channel k is x's channel channels[k]
// (numpy.take(x, channels, axis=1)).
Tensor gather_channels(const Tensor& x, const std::vector<int64_t>& channels);

// Layout helpers. Letters name axes; `from` and `to` must be permutations of each other, e.g.
// permute(w, "OIHW", "HWIO"). Spatial letters are D, H, W; N, C, O, I as usual.
Tensor permute(const Tensor& t, const std::string& from, const std::string& to);
// Output axis k is t's axis perm[k] (numpy.transpose(t, perm)).
Tensor transpose(const Tensor& t, const std::vector<int64_t>& perm);

// Letter string for a logical layout: "NC" + spatial ("W", "HW", "DHW").
std::string spatial_letters(int spatial_dims);
Tensor to_channels_last(const Tensor& t);    // N C s... -> N s... C
Tensor from_channels_last(const Tensor& t);  // N s... C -> N C s...
// Conv weights (O, I, k...) -> any order of "OI" + spatial letters, e.g. "HWIO", "WIO", "HWOI".
Tensor weights_to(const Tensor& oi, const std::string& order);
Tensor weights_from(const Tensor& t, const std::string& order);  // back to O, I, k...

// max |a - b| over all elements; throws if the shapes differ.
double max_abs_diff(const Tensor& a, const Tensor& b);
double max_abs(const Tensor& t);

}  // namespace padfold::ref
