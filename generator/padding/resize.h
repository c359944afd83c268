// Resize's conventions, the second zoo after padding: where output pixel x of a resized axis reads
// its input (ONNX's coordinate_transformation_mode, nearest_mode and the interpolation), resolved
// for the fixed sizes. What PyTorch's align_corners, TF1's half_pixel_centers and Keras's
// UpSampling2D write are these modes:
//   half_pixel          (x + 0.5) / scale - 0.5    TF2 tf.image.resize, F.interpolate(linear)
//   pytorch_half_pixel  the same, 0 for an output of one pixel   torch.onnx's linear
//   align_corners       x * (in - 1) / (out - 1)   F.interpolate(align_corners=True)
//   asymmetric          x / scale                  nearest everywhere, Keras UpSampling2D
//   tf_half_pixel_for_nn  (x + 0.5) / scale        TF1 nearest with half_pixel_centers
//   tf_crop_and_resize  start * (in - 1) + x * (end - start) * (in - 1) / (out - 1)
//                       TF tf.image.crop_and_resize: a region of interest [start, end] of the
//                       axis (1 is the last pixel); where it reads outside the input, the
//                       output is extrapolation_value
// The source coordinate is computed in float32 as ONNX Runtime does, from the scale a model gives
// (or output / input where it gives sizes); an axis of scale 1 maps to itself. Linear reads the two
// neighbours of the coordinate clamped to [0, in - 1]: the border is the edge pixel, folded into
// the kernel like padding.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace padfold {

enum class ResizeMode { Nearest, Linear };
enum class ResizeCoordinates {
  HalfPixel,
  PytorchHalfPixel,
  AlignCorners,
  Asymmetric,
  TfHalfPixelForNn,
  TfCropAndResize
};
enum class NearestRounding { RoundPreferFloor, RoundPreferCeil, Floor, Ceil };

struct ResizeSpec {
  ResizeMode mode = ResizeMode::Nearest;
  ResizeCoordinates coordinates = ResizeCoordinates::HalfPixel;
  NearestRounding rounding = NearestRounding::RoundPreferFloor;
  // Per spatial axis, outermost first: the output size, and the scale the coordinates use (the
  // model's where it gives scales, else output / input).
  std::vector<int64_t> output;
  std::vector<float> scales;
  // tf_crop_and_resize only: per spatial axis, the region read (0 to 1 where empty), and the
  // value written where a coordinate falls outside the input.
  std::vector<std::pair<float, float>> roi;
  float extrapolation_value = 0.f;
};

// ONNX's names (mode: nearest, linear (bilinear and trilinear are aliases)); throws
// std::invalid_argument listing the accepted names, and for what padfold does not generate (cubic)
// saying so.
ResizeMode parse_resize_mode(const std::string& name);
ResizeCoordinates parse_resize_coordinates(const std::string& name);
NearestRounding parse_nearest_rounding(const std::string& name);
std::string to_string(ResizeMode m);
std::string to_string(ResizeCoordinates c);
std::string to_string(NearestRounding r);

// ONNX's output size for a scale: floor(input * scale), the product rounded to float first as
// ONNX Runtime computes it (0.7 of 10 is 7); INT64_MAX (or -1) past 10^18.
int64_t resized_size(int64_t input, float scale);

// Completes `spec` for the input sizes `in` (one per spatial axis): the output from the scales
// where the spec gives no sizes, the scales as output / input where it gives no scales, and scales
// of 1 where the output has the input's sizes (ONNX Runtime then copies the input). Throws
// PaddingError naming the field (output_size, scales) for a count other than one per axis, a scale
// that is not finite and above 0, or an output outside 1..kMaxSize.
void resolve_resize_sizes(ResizeSpec& spec, const std::vector<int64_t>& in);

// The input coordinate output index x maps to, before clamping (roi: tf_crop_and_resize's region).
// In float32, as ONNX Runtime computes it.
inline float resize_source(float x, int64_t in, int64_t out, float scale, ResizeCoordinates c,
                           std::pair<float, float> roi = {0.f, 1.f}) {
  // ONNX Runtime (and TensorFlow) keep an axis of scale 1 as it is, whatever the mode: only
  // tf_half_pixel_for_nn would move it, by half a pixel.
  if (scale == 1.f) return x;
  switch (c) {
    case ResizeCoordinates::HalfPixel:
      return (x + 0.5f) / scale - 0.5f;
    case ResizeCoordinates::PytorchHalfPixel:
      return out > 1 ? (x + 0.5f) / scale - 0.5f : x * 0.f;
    case ResizeCoordinates::AlignCorners:
      return out > 1 ? x * static_cast<float>(in - 1) / static_cast<float>(out - 1) : x * 0.f;
    case ResizeCoordinates::Asymmetric:
      return x / scale;
    case ResizeCoordinates::TfHalfPixelForNn:
      return (x + 0.5f) / scale;
    case ResizeCoordinates::TfCropAndResize: {
      const float last = static_cast<float>(in - 1);
      if (out == 1)  // the region's middle: the sum in float, the rest in double (ONNX Runtime)
        return static_cast<float>(0.5 * static_cast<double>(roi.first + roi.second) * last);
      return roi.first * last + x * (roi.second - roi.first) * last / static_cast<float>(out - 1);
    }
  }
  return x;
}

// Where one output index reads along an axis: nearest reads `first`; linear reads
// first_weight * first + second_weight * second, each weight the coordinate's distance to the
// other pixel (0.5 each where the two are one edge pixel), as ONNX Runtime weighs them.
// tf_crop_and_resize: an output reading outside the input along any axis is extrapolation_value.
struct ResizeTap {
  int64_t first = 0, second = 0;
  float first_weight = 1.f, second_weight = 0.f;
  bool outside = false;
};

// The taps of every output index of an axis (sizes in and out, the axis's scale): the rules the
// kernel folds in, for the calculator and the tests.
std::vector<ResizeTap> resize_taps(const ResizeSpec& spec, size_t axis, int64_t in);

}  // namespace padfold
