#include "padding/resize.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "base/enum_names.h"

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
    {ResizeCoordinates::TfHalfPixelForNn, "tf_half_pixel_for_nn"}};
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

// ONNX Runtime's nearest rounding of a source coordinate.
int64_t nearest_index(float v, NearestRounding r, int64_t in) {
  switch (r) {
    case NearestRounding::RoundPreferFloor:  // halves down
      return clamp_index(v - std::floor(v) == 0.5f ? std::floor(v) : std::round(v), in);
    case NearestRounding::RoundPreferCeil:
      return clamp_index(std::round(v), in);  // halves away from zero: up for v >= 0
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
  return parse(kCoordinateNames, name, "coordinate_transformation_mode", "tf_crop_and_resize",
               "it reads a region of interest, which padfold does not");
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
  const double v = std::floor(static_cast<double>(input) * static_cast<double>(scale));
  if (!(v > -1e18 && v < 1e18)) return v > 0 ? std::numeric_limits<int64_t>::max() : -1;
  return static_cast<int64_t>(v);
}

std::vector<ResizeTap> resize_taps(const ResizeSpec& spec, size_t axis, int64_t in) {
  const int64_t out = spec.output.at(axis);
  const float scale = spec.scales.at(axis);
  std::vector<ResizeTap> taps(static_cast<size_t>(out));
  for (int64_t x = 0; x < out; ++x) {
    const float v = resize_source(static_cast<float>(x), in, out, scale, spec.coordinates);
    ResizeTap& t = taps[static_cast<size_t>(x)];
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
