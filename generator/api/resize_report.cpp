#include "api/resize_report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <vector>

#include "api/pads_report.h"
#include "base/text.h"
#include "frontend/layer.h"
#include "padding/padding.h"
#include "padding/resize.h"

namespace padfold {
namespace {

using json = nlohmann::ordered_json;

// Who writes each coordinate mode (padding/resize.h has the formulas).
struct Convention {
  ResizeCoordinates coordinates;
  const char* who;
};
constexpr Convention kConventions[] = {
    {ResizeCoordinates::HalfPixel,
     "TF2 tf.image.resize, PyTorch F.interpolate(align_corners=False), Keras "
     "UpSampling2D(interpolation='bilinear')"},
    {ResizeCoordinates::PytorchHalfPixel,
     "torch.onnx's export of F.interpolate(align_corners=False): half_pixel, but 0 for an output "
     "of one pixel"},
    {ResizeCoordinates::AlignCorners, "PyTorch and TF1 align_corners=True"},
    {ResizeCoordinates::Asymmetric,
     "PyTorch F.interpolate(mode='nearest'), Keras UpSampling2D (nearest), TF1 without "
     "half_pixel_centers"},
    {ResizeCoordinates::TfHalfPixelForNn, "TF1 nearest with half_pixel_centers=True"},
    {ResizeCoordinates::TfCropAndResize,
     "TF tf.image.crop_and_resize: the region --roi (0:1 reads as align_corners), "
     "extrapolation_value outside the input"},
};

std::vector<float> parse_scales(const std::string& text, size_t dims) {
  return parse_dims_option<float>(text, "--scales", dims, [&](const std::string& item) {
    size_t used = 0;
    float s = 0.f;
    try {
      s = std::stof(item, &used);
    } catch (const std::exception&) {
      used = std::string::npos;
    }
    if (used != item.size() || item.empty())
      throw std::runtime_error(
          fmt::format("--scales '{}': expected scales such as 2, 1.5x2 or 0.5,0.5", text));
    return s;
  });
}

std::vector<std::pair<float, float>> parse_roi(const std::string& text, size_t dims) {
  using Range = std::pair<float, float>;
  return parse_dims_option<Range>(text, "--roi", dims, [&](const std::string& item) {
    const size_t colon = item.find(':');
    size_t used_start = 0, used_end = 0;
    Range r;
    try {
      if (colon == std::string::npos) throw std::invalid_argument("no colon");
      r = {std::stof(item.substr(0, colon), &used_start),
           std::stof(item.substr(colon + 1), &used_end)};
    } catch (const std::exception&) {
      used_start = std::string::npos;
    }
    if (used_start != colon || used_end != item.size() - colon - 1)
      throw std::runtime_error(fmt::format(
          "--roi '{}': expected start:end per axis such as 0.2:0.8 or 0:1,0.1:0.9", text));
    return r;
  });
}

std::string option_of(const std::string& field) {
  if (field == "roi") return "--roi";
  if (field == "extrapolation_value") return "--extrapolation-value";
  return field == "scales" ? "--scales" : "--output";
}

// The taps of every axis of `spec` for input sizes `in`.
std::vector<std::vector<ResizeTap>> all_taps(const ResizeSpec& spec,
                                             const std::vector<int64_t>& in) {
  std::vector<std::vector<ResizeTap>> taps;
  for (size_t i = 0; i < in.size(); ++i) taps.push_back(resize_taps(spec, i, in[i]));
  return taps;
}

bool same_tap(const ResizeTap& a, const ResizeTap& b, bool linear) {
  if (a.outside != b.outside) return false;
  if (!linear) return a.first == b.first;
  return a.first == b.first && a.second == b.second && a.first_weight == b.first_weight &&
         a.second_weight == b.second_weight;
}

// Per axis, the output indices where `taps` reads otherwise than `chosen`.
std::vector<std::vector<int64_t>> differences(const std::vector<std::vector<ResizeTap>>& taps,
                                              const std::vector<std::vector<ResizeTap>>& chosen,
                                              bool linear) {
  std::vector<std::vector<int64_t>> out(taps.size());
  for (size_t i = 0; i < taps.size(); ++i)
    for (size_t x = 0; x < taps[i].size(); ++x)
      if (!same_tap(taps[i][x], chosen[i][x], linear)) out[i].push_back(static_cast<int64_t>(x));
  return out;
}

json taps_json(const std::vector<ResizeTap>& taps, bool linear) {
  json a = json::array();
  for (const ResizeTap& t : taps) {
    if (t.outside) {
      a.push_back({{"outside", true}});
      continue;
    }
    if (!linear) {
      a.push_back({{"first", t.first}});
      continue;
    }
    a.push_back({{"first", t.first},
                 {"second", t.second},
                 {"first_weight", t.first_weight},
                 {"second_weight", t.second_weight}});
  }
  return a;
}

std::string tap_text(const ResizeTap& t, bool linear) {
  if (t.outside) return "outside: extrapolation_value";
  if (!linear || t.second_weight == 0.f || t.first == t.second) return std::to_string(t.first);
  return fmt::format("{}*{:.4g} + {}*{:.4g}", t.first, t.first_weight, t.second, t.second_weight);
}

}  // namespace

std::string resize_report(const ResizeRequest& o) {
  const std::vector<int64_t> in = parse_sizes(o.input, "--input", 0);
  if (in.empty() || in.size() > 3)
    throw std::runtime_error(fmt::format("--input '{}': expected 1 to 3 spatial sizes", o.input));
  for (int64_t v : in)
    if (v < 1) throw std::runtime_error(fmt::format("--input '{}': sizes must be >= 1", o.input));
  if (o.output.empty() == o.scales.empty())
    throw std::runtime_error("expected --output or --scales (one of them)");
  ResizeSpec spec;
  try {
    spec.mode = parse_resize_mode(o.mode);
    spec.coordinates = parse_resize_coordinates(o.coordinates);
    spec.rounding = parse_nearest_rounding(o.rounding);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(e.what());
  }
  if (!o.output.empty()) spec.output = parse_sizes(o.output, "--output", in.size());
  if (!o.scales.empty()) spec.scales = parse_scales(o.scales, in.size());
  if (!o.roi.empty()) spec.roi = parse_roi(o.roi, in.size());
  spec.extrapolation_value = o.extrapolation_value;
  try {
    resolve_resize_sizes(spec, in);
  } catch (const PaddingError& e) {
    throw std::runtime_error(option_of(e.field) + ": " + e.what());
  }
  const bool linear = spec.mode == ResizeMode::Linear;
  const auto chosen = all_taps(spec, in);
  json j = {{"input", in},
            {"output", spec.output},
            {"scales", spec.scales},
            {"mode", to_string(spec.mode)},
            {"coordinate_transformation_mode", to_string(spec.coordinates)}};
  if (!linear) j["nearest_mode"] = to_string(spec.rounding);
  if (spec.coordinates == ResizeCoordinates::TfCropAndResize) {
    json roi = json::array();
    for (const auto& [start, end] : spec.roi) roi.push_back({start, end});
    j["roi"] = roi;
    j["extrapolation_value"] = spec.extrapolation_value;
  }
  json axes = json::array(), rows = json::array();
  std::string table;
  for (const auto& t : chosen) axes.push_back(taps_json(t, linear));
  j["taps"] = axes;
  std::string text = fmt::format(
      "resize {} -> {} (scales {}), {}, {}{}\n", shape_text(in), shape_text(spec.output),
      fmt::format("{}", fmt::join(spec.scales, ", ")), to_string(spec.mode),
      to_string(spec.coordinates), linear ? "" : ", " + to_string(spec.rounding));
  const std::string letters = spatial_letters(static_cast<int>(in.size()));
  for (size_t i = 0; i < in.size(); ++i) {
    text += fmt::format("axis {}: output index -> input index{}\n", letters[i],
                        linear ? " * weight (+ the second neighbour * its weight)" : "");
    for (size_t x = 0; x < chosen[i].size(); ++x)
      text += fmt::format("  {:>4} -> {}\n", x, tap_text(chosen[i][x], linear));
  }
  for (const Convention& c : kConventions) {
    if (!linear && c.coordinates == ResizeCoordinates::PytorchHalfPixel) continue;
    ResizeSpec other = spec;
    other.coordinates = c.coordinates;
    const auto d = differences(all_taps(other, in), chosen, linear);
    size_t count = 0;
    for (const auto& axis : d) count += axis.size();
    json row = {{"coordinate_transformation_mode", to_string(c.coordinates)},
                {"used_by", c.who},
                {"chosen", c.coordinates == spec.coordinates},
                {"differs_at", d}};
    rows.push_back(row);
    std::string where;
    for (size_t i = 0; i < d.size(); ++i)
      if (!d[i].empty())
        where +=
            fmt::format("{}{}: {}", where.empty() ? "" : "; ", letters[i], fmt::join(d[i], ","));
    table += fmt::format("  {:<21} {}\n  {:<21} used by: {}\n", to_string(c.coordinates),
                         c.coordinates == spec.coordinates ? "(chosen)"
                         : count == 0                      ? "reads the same"
                                                           : "reads otherwise at outputs " + where,
                         "", c.who);
  }
  j["compare"] = rows;
  if (o.json) return j.dump(2) + "\n";
  if (o.compare)
    text +=
        "Every coordinate mode on this resize (output indices where it reads otherwise):\n" + table;
  return text;
}

}  // namespace padfold
