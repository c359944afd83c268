#include "padding/resize.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

#include "base/enum_names.h"
#include "base/limits.h"
#include "padding/padding.h"

namespace padfold {
namespace {

constexpr EnumName<ResizeMode> kModeNames[] = {{ResizeMode::Nearest, "nearest"},
                                               {ResizeMode::Linear, "linear"},
                                               {ResizeMode::Linear, "bilinear", Spelling::Alias},
                                               {ResizeMode::Linear, "trilinear", Spelling::Alias}};
constexpr EnumName<ResizeCoordinates> kCoordinateNames[] = {
    {ResizeCoordinates::HalfPixel, "half_pixel"},
    {ResizeCoordinates::PytorchHalfPixel, "pytorch_half_pixel"},
    {ResizeCoordinates::AlignCorners, "align_corners"},
    {ResizeCoordinates::Asymmetric, "asymmetric"},
    {ResizeCoordinates::TfHalfPixelForNn, "tf_half_pixel_for_nn"},
    {ResizeCoordinates::TfCropAndResize, "tf_crop_and_resize"}};
constexpr EnumName<NearestRounding> kRoundingNames[] = {
    {NearestRounding::RoundPreferFloor, "round_prefer_floor"},
    {NearestRounding::RoundPreferCeil, "round_prefer_ceil"},
    {NearestRounding::Floor, "floor"},
    {NearestRounding::Ceil, "ceil"}};

template <typename E, size_t N>
E parse(const EnumName<E> (&table)[N], const std::string& name, const char* what,
        const char* refused = nullptr, const char* why = nullptr) {
  if (const std::optional<E> v = value_of(table, name)) return *v;
  if (refused && name == refused)
    throw std::invalid_argument(std::string(what) + " '" + name + "' is not generated: " + why);
  throw std::invalid_argument(std::string(what) + " '" + name + "'; expected " +
                              names_of(table, Spelling::Name, ", ", " or "));
}

// v is integral here; past the edge the edge pixel.
int64_t clamp_index(float v, int64_t in) {
  return static_cast<int64_t>(std::clamp(v, 0.f, static_cast<float>(in - 1)));
}

// A float coordinate a few ulps off a half (14.499999 for (4 + 0.5) / 0.3f - 0.5, a tie in real
// numbers) is a tie, as ONNX Runtime decides it (since its issue 28291).
constexpr float kNearestTieTolerance = 1e-6f;

constexpr float kMaxRoi = 1e6f;

// ONNX Runtime's nearest rounding of a source coordinate.
int64_t nearest_index(float v, NearestRounding r, int64_t in) {
  const float below = std::floor(v);
  const bool tie = std::fabs(v - below - 0.5f) <= kNearestTieTolerance;
  switch (r) {
    case NearestRounding::RoundPreferFloor:
      return clamp_index(tie ? below : std::round(v), in);
    case NearestRounding::RoundPreferCeil:
      return clamp_index(tie ? below + 1.f : std::round(v), in);
    case NearestRounding::Floor:
      return clamp_index(std::floor(v), in);
    case NearestRounding::Ceil:
      return clamp_index(std::ceil(v), in);
  }
  return 0;
}

}  // namespace

ResizeMode parse_resize_mode(const std::string& name) {
  return parse(kModeNames, name, "mode", "cubic",
               "padfold resizes with nearest and linear interpolation");
}
ResizeCoordinates parse_resize_coordinates(const std::string& name) {
  return parse(kCoordinateNames, name, "coordinate_transformation_mode");
}
NearestRounding parse_nearest_rounding(const std::string& name) {
  return parse(kRoundingNames, name, "nearest_mode");
}
std::string to_string(ResizeMode m) {
  return name_of(kModeNames, m);
}
std::string to_string(ResizeCoordinates c) {
  return name_of(kCoordinateNames, c);
}
std::string to_string(NearestRounding r) {
  return name_of(kRoundingNames, r);
}

int64_t resized_size(int64_t input, float scale) {
  // The product in float, as ONNX Runtime takes it: 0.7f * 10 is 7 there, 6.99999988 in double.
  const double v = std::floor(static_cast<double>(scale * static_cast<float>(input)));
  if (!(v > -1e18 && v < 1e18)) return v > 0 ? std::numeric_limits<int64_t>::max() : -1;
  return static_cast<int64_t>(v);
}

namespace {
std::string float_text(float v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", static_cast<double>(v));
  return text;
}
}  // namespace

void resolve_resize_sizes(ResizeSpec& spec, const std::vector<int64_t>& in) {
  const size_t dims = in.size();
  const std::string per_axis =
      "; expected " + std::to_string(dims) + " values, one per spatial axis";
  if (!spec.output.empty() && spec.output.size() != dims)
    throw PaddingError(std::to_string(spec.output.size()) + " values" + per_axis, "output_size");
  if (!spec.scales.empty() && spec.scales.size() != dims)
    throw PaddingError(std::to_string(spec.scales.size()) + " values" + per_axis, "scales");
  for (float s : spec.scales)
    if (!(s > 0.f) || !std::isfinite(s))
      throw PaddingError(float_text(s) + "; expected finite scales above 0", "scales");
  const bool crop = spec.coordinates == ResizeCoordinates::TfCropAndResize;
  if (!spec.roi.empty() && !crop)
    throw PaddingError("given with coordinate_transformation_mode '" + to_string(spec.coordinates) +
                           "'; only tf_crop_and_resize reads it",
                       "roi");
  if (!spec.roi.empty() && spec.roi.size() != dims)
    throw PaddingError(std::to_string(spec.roi.size()) + " pairs; expected " +
                           std::to_string(dims) + " [start, end] pairs, one per spatial axis",
                       "roi");
  // Bounded so that every coordinate computed from it is a finite float (1e30 would make nan).
  for (const auto& [start, end] : spec.roi)
    if (!(std::fabs(start) <= kMaxRoi) || !(std::fabs(end) <= kMaxRoi))
      throw PaddingError(float_text(start) + ", " + float_text(end) + "; expected numbers from -" +
                             float_text(kMaxRoi) + " to " + float_text(kMaxRoi),
                         "roi");
  if (!std::isfinite(spec.extrapolation_value))
    throw PaddingError(float_text(spec.extrapolation_value) + "; expected a finite number",
                       "extrapolation_value");
  if (crop && spec.roi.empty()) spec.roi.assign(dims, {0.f, 1.f});
  const std::string limit = std::to_string(kMaxSize);
  for (size_t i = 0; i < dims; ++i) {
    if (spec.output.size() < dims) {
      const int64_t out = resized_size(in[i], spec.scales[i]);
      if (out < 1 || out > kMaxSize)
        throw PaddingError(float_text(spec.scales[i]) + " for an input of " +
                               std::to_string(in[i]) + " (an output of " + std::to_string(out) +
                               "); expected an output of 1 to " + limit,
                           "scales");
      spec.output.push_back(out);
    }
    if (spec.output[i] < 1 || spec.output[i] > kMaxSize)
      throw PaddingError(std::to_string(spec.output[i]) + "; expected 1 to " + limit,
                         "output_size");
  }
  if (spec.scales.empty())
    for (size_t i = 0; i < dims; ++i)
      spec.scales.push_back(static_cast<float>(spec.output[i]) / static_cast<float>(in[i]));
  // ONNX Runtime copies the input whose output has its sizes, whatever the scales (1.1 of 9 is 9).
  if (spec.output == in) spec.scales.assign(dims, 1.f);
}

std::vector<ResizeTap> resize_taps(const ResizeSpec& spec, size_t axis, int64_t in) {
  const int64_t out = spec.output.at(axis);
  const float scale = spec.scales.at(axis);
  std::vector<ResizeTap> taps(static_cast<size_t>(out));
  for (int64_t x = 0; x < out; ++x) {
    const std::pair<float, float> roi = spec.roi.empty() ? std::pair{0.f, 1.f} : spec.roi[axis];
    const float v = resize_source(static_cast<float>(x), in, out, scale, spec.coordinates, roi);
    ResizeTap& t = taps[static_cast<size_t>(x)];
    // ONNX Runtime extrapolates where the unclamped coordinate leaves [0, in - 1].
    t.outside = spec.coordinates == ResizeCoordinates::TfCropAndResize &&
                (v < 0.f || v > static_cast<float>(in - 1));
    if (spec.mode == ResizeMode::Nearest) {
      t.first = t.second = nearest_index(v, spec.rounding, in);
      continue;
    }
    const float c = std::clamp(v, 0.f, static_cast<float>(in - 1));
    t.first = static_cast<int64_t>(c);
    t.second = std::min(t.first + 1, in - 1);
    t.first_weight = t.second == t.first ? 0.5f : std::fabs(c - static_cast<float>(t.second));
    t.second_weight = t.second == t.first ? 0.5f : std::fabs(c - static_cast<float>(t.first));
  }
  return taps;
}

}  // namespace padfold
