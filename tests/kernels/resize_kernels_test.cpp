// resize kernels against the reference (ref::resize, written from ONNX's definition): nearest with
// every coordinate mode and rounding, linear with every coordinate mode, up- and downsampling by
// scales and by sizes, 1-3 spatial dims, channels first and last, on every CPU target family this
// machine runs, compiled for the others and for CUDA. Nearest copies values: bit for bit.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>

#include "kernel_runner.h"

namespace padfold::testing {
namespace {

using json = nlohmann::json;

const char* const kCoordinates[] = {"half_pixel", "pytorch_half_pixel",   "align_corners",
                                    "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"};
const char* const kRoundings[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};

Layer resize_layer(const std::vector<int64_t>& shape, bool channels_last, const json& fields) {
  json layer = {{"name", "rs"}, {"op", "resize"}};
  layer.update(fields);
  return layer_reading(shape, channels_last, layer);
}

struct Case {
  std::vector<int64_t> shape;  // channels first
  bool channels_last;
  json fields;
};

std::vector<Case> cases(std::mt19937& rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<Case> all = {
      // FCN's and LR-ASPP's upsampling (torch: linear, pytorch_half_pixel, sizes).
      {{1, 5, 7, 9},
       false,
       {{"mode", "linear"},
        {"coordinate_transformation_mode", "pytorch_half_pixel"},
        {"output_size", {56, 72}}}},
      // Keras UpSampling2D(2): nearest, asymmetric, floor.
      {{1, 6, 5, 4},
       true,
       {{"mode", "nearest"},
        {"coordinate_transformation_mode", "asymmetric"},
        {"nearest_mode", "floor"},
        {"scales", {2.0, 2.0}}}},
      // A non-integer downscale and an output of one pixel.
      {{2, 3, 13, 11},
       false,
       {{"mode", "linear"},
        {"coordinate_transformation_mode", "align_corners"},
        {"output_size", {1, 4}}}},
      {{1, 4, 6, 5, 7},
       true,
       {{"mode", "linear"},
        {"coordinate_transformation_mode", "half_pixel"},
        {"scales", {1.5, 0.5, 2.0}}}},
      // A crop past the edges: those outputs are the extrapolation value.
      {{1, 3, 8, 6},
       true,
       {{"mode", "linear"},
        {"coordinate_transformation_mode", "tf_crop_and_resize"},
        {"roi", {{-0.3, 0.9}, {0.2, 1.4}}},
        {"extrapolation_value", -2.5},
        {"output_size", {9, 5}}}},
  };
  for (int i = 0; i < 14; ++i) {
    const int dims = pick(1, 3);
    Case c{{pick(1, 2), pick(1, 9)}, pick(0, 1) == 1, json::object()};
    json sizes = json::array(), scales = json::array();
    for (int d = 0; d < dims; ++d) {
      c.shape.push_back(pick(1, dims == 3 ? 6 : 15));
      sizes.push_back(pick(1, dims == 3 ? 9 : 31));
      scales.push_back(std::uniform_real_distribution<double>(0.4, 3.2)(rng));
    }
    const bool linear = pick(0, 1) == 1;
    c.fields["mode"] = linear ? "linear" : "nearest";
    const std::string coordinates = kCoordinates[pick(0, 5)];
    c.fields["coordinate_transformation_mode"] = coordinates;
    if (coordinates == "tf_crop_and_resize") {
      std::uniform_real_distribution<double> start(-0.3, 0.8), length(-0.2, 1.2);
      json roi = json::array();
      for (int d = 0; d < dims; ++d) {
        const double s = start(rng);
        roi.push_back({s, s + length(rng)});
      }
      c.fields["roi"] = roi;
      c.fields["extrapolation_value"] = pick(-4, 4) * 0.75;
    }
    if (!linear) c.fields["nearest_mode"] = kRoundings[pick(0, 3)];
    if (pick(0, 1) == 1) {
      c.fields["output_size"] = sizes;
    } else {
      c.fields["scales"] = scales;
      for (int d = 0; d < dims; ++d)  // an output of at least one pixel
        if (scales[d].get<double>() * c.shape[2 + d] < 1) c.fields["scales"][d] = 1.0;
    }
    all.push_back(c);
  }
  return all;
}

class ResizeKernels : public ::testing::TestWithParam<TargetFamilyCase> {};

TEST_P(ResizeKernels, EqualTheReference) {
  const TargetFamilyCase& family = GetParam();
  std::mt19937 rng(family.seed);
  for (const Case& c : cases(rng)) {
    const Layer L = resize_layer(layout_order(c.shape, c.channels_last), c.channels_last, c.fields);
    SCOPED_TRACE(
        fmt::format("{} {} {}", L.layout.name(), fmt::join(c.shape, "x"), c.fields.dump()));
    const auto run = run_or_compile(L, family.target, family.seed);
    if (!run) continue;
    ASSERT_EQ(run->got.shape, run->want.shape);
    if (L.resize.mode == ResizeMode::Nearest) {
      ASSERT_EQ(run->got.data, run->want.data);
    } else {
      EXPECT_LE(ref::max_abs_diff(run->got, run->want),
                1e-5 * std::max(1.0, ref::max_abs(run->want)));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Families, ResizeKernels, ::testing::ValuesIn(cpu_target_families()),
                         [](const auto& info) { return info.param.name; });

TEST(ResizeKernels, CompileForCuda) {
  std::mt19937 rng(7);
  for (const Case& c : cases(rng)) {
    const Layer L = resize_layer(layout_order(c.shape, c.channels_last), c.channels_last, c.fields);
    SCOPED_TRACE(c.fields.dump());
    EXPECT_GT(compile_only(L, "host-cuda"), 0);
  }
}

// Sizes and scales resolve as ONNX's: floor(input * scale), else output / input; what cannot be
// resized is a spec error naming the field.
TEST(Resize, SizesScalesAndErrors) {
  const Layer up = resize_layer({1, 2, 5, 7}, false, {{"scales", {2.5, 0.5}}});
  EXPECT_EQ(up.out_spatial, (std::vector<int64_t>{12, 3}));
  EXPECT_EQ(up.output_shape_full(), (std::vector<int64_t>{1, 2, 12, 3}));
  const Layer sized = resize_layer({1, 4, 6, 2}, true, {{"output_size", {8, 9}}});
  EXPECT_EQ(sized.resize.scales, (std::vector<float>{2.f, 1.5f}));
  // ONNX Runtime copies an input whose output has its sizes: scales 1, whatever the model's.
  const Layer kept = resize_layer({1, 2, 9, 12}, false, {{"scales", {1.1, 1.05}}});
  EXPECT_EQ(kept.out_spatial, (std::vector<int64_t>{9, 12}));
  EXPECT_EQ(kept.resize.scales, (std::vector<float>{1.f, 1.f}));
  const Layer moved = resize_layer({1, 2, 9, 12}, false, {{"scales", {1.1, 1.1}}});
  EXPECT_EQ(moved.out_spatial, (std::vector<int64_t>{9, 13}));
  EXPECT_EQ(moved.resize.scales, (std::vector<float>{1.1f, 1.1f}));
  EXPECT_EQ(sized.output_shape_full(), (std::vector<int64_t>{1, 8, 9, 2}));
  const std::pair<json, const char*> bad[] = {
      {{{"scales", {2.0}}}, "field 'scales'"},
      {{{"scales", {0.0, 1.0}}}, "field 'scales'"},
      {{{"scales", {0.1, 1.0}}}, "field 'scales'"},   // an output of 0
      {{{"scales", {1e30, 1.0}}}, "field 'scales'"},  // past every size limit
      {{{"output_size", {3}}}, "field 'output_size'"},
      {json::object(), "field 'output_size'"},
      {{{"scales", {2.0, 2.0}}, {"mode", "cubic"}}, "field 'mode'"},
      {{{"scales", {2.0, 2.0}}, {"roi", {{0, 1}, {0, 1}}}}, "field 'roi'"},  // half_pixel's
      {{{"scales", {2.0, 2.0}},
        {"coordinate_transformation_mode", "tf_crop_and_resize"},
        {"roi", {{0, 1}}}},
       "field 'roi'"},
      {{{"scales", {2.0, 2.0}},
        {"coordinate_transformation_mode", "tf_crop_and_resize"},
        {"roi", {0, 1, 0, 1}}},
       "field 'roi'"},
      {{{"scales", {2.0, 2.0}},
        {"coordinate_transformation_mode", "tf_crop_and_resize"},
        {"roi", {{0, 1}, {-1e30, 1e30}}}},  // its coordinates would be nan
       "field 'roi'"},
      {{{"scales", {2.0, 2.0}},
        {"coordinate_transformation_mode", "tf_crop_and_resize"},
        {"extrapolation_value", "zero"}},
       "field 'extrapolation_value'"},
      {{{"scales", {2.0, 2.0}}, {"nearest_mode", "up"}}, "field 'nearest_mode'"},
      {{{"scales", {2.0, 2.0}}, {"kernel", {3, 3}}}, "field 'kernel'"},
  };
  for (const auto& [fields, want] : bad) {
    try {
      resize_layer({1, 2, 5, 7}, false, fields);
      ADD_FAILURE() << fields.dump() << " accepted";
    } catch (const SpecError& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  }
}

// Float coordinates one ulp off a half, ties in real numbers: ONNX Runtime 1.32 (checked on 1,192
// random nearest resizes) rounds them as ties where they lie within 1e-6 of the half.
TEST(Resize, NearestNearTiesAreTies) {
  struct NearTie {
    int64_t in;
    json fields;
    int64_t x, want;
  };
  const NearTie ties[] = {
      // 18 / 2.4f = 7.4999995: prefer ceil takes 8.
      {20, {{"coordinate_transformation_mode", "asymmetric"}, {"scales", {2.4}}}, 18, 8},
      // (4 + 0.5) / 0.3f - 0.5 = 14.499999: 15.
      {27, {{"coordinate_transformation_mode", "half_pixel"}, {"scales", {0.3}}}, 4, 15},
      // 66 / 2.4f = 27.499998, one ulp under the half but that ulp is 1.9e-6: 27.
      {29, {{"coordinate_transformation_mode", "asymmetric"}, {"scales", {2.4}}}, 66, 27},
      // (17 + 0.5) / 2.3333333f = 7.5000005: prefer floor takes 7.
      {11,
       {{"coordinate_transformation_mode", "tf_half_pixel_for_nn"},
        {"scales", {7.0 / 3.0}},
        {"nearest_mode", "round_prefer_floor"}},
       17,
       7},
  };
  for (const NearTie& t : ties) {
    json fields = t.fields;
    fields["mode"] = "nearest";
    if (!fields.contains("nearest_mode")) fields["nearest_mode"] = "round_prefer_ceil";
    const Layer l = resize_layer({1, 1, t.in}, false, fields);
    EXPECT_EQ(resize_taps(l.resize, 0, t.in).at(static_cast<size_t>(t.x)).first, t.want)
        << fields.dump() << " x " << t.x;
    // The reference decides the same.
    std::vector<float> pixels(static_cast<size_t>(t.in));
    for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<float>(i);
    ref::ResizeParams p;
    p.coordinates = fields["coordinate_transformation_mode"];
    p.rounding = fields["nearest_mode"];
    p.output = l.resize.output;
    p.scales = l.resize.scales;
    const ref::Tensor y = ref::resize(ref::Tensor({1, 1, t.in}, pixels), p);
    EXPECT_EQ(y.data.at(static_cast<size_t>(t.x)), static_cast<float>(t.want))
        << fields.dump() << " x " << t.x;
  }
}

}  // namespace
}  // namespace padfold::testing
