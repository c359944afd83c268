// The GEMM-like pointwise implementation (schedules/cpu/gemm.cpp, the `gemm_pixels` knob): which
// layers it can compute, that its knobs choose it and resolve stably, and its kernels against the
// naive reference on drawn shapes (pixel tiles spanning rows and cut by the plane's end, channel
// counts that are not multiples of the vector, strides, bias, activations, threads over pixels or
// channel blocks), reading the weights raw and blocked as the compile prepares them, ending in a
// residual add, and compiled for every CPU family.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "compile/block.h"
#include "compile/lower.h"
#include "compile/target.h"
#include "kernel_runner.h"
#include "schedules/schedule.h"

namespace padfold::testing {
namespace {

using json = nlohmann::json;

Layer one_layer(const std::string& fields) {
  return parse_spec(R"({"model": "g", "defaults": {"layout": "NHWC", "weight_layout": "HWIO"},
                        "layers": [{"name": "l", )" +
                        fields + "}]}",
                    "g.json")
      .layers.at(0);
}

TEST(Gemm, AppliesToUnpaddedFloatPointwiseConvsChannelsLast) {
  const std::string in = R"("input_shape": [1, 9, 7, 8], )";
  const struct {
    const char* fields;
    bool applies;
  } cases[] = {
      {R"("op": "conv2d", "out_channels": 8, "kernel": 1)", true},
      {R"("op": "conv2d", "out_channels": 8, "kernel": 1, "stride": 2, "bias": true)", true},
      {R"("op": "conv2d", "out_channels": 8, "kernel": 1, "stride": 2, "padding": "same")", true},
      {R"("op": "conv2d", "out_channels": 8, "kernel": 1, "padding": 1)", false},
      {R"("op": "conv2d", "out_channels": 8, "kernel": 3, "padding": "valid")", false},
      {R"("op": "conv2d", "out_channels": 8, "kernel": 1, "groups": 2)", false},
      {R"("op": "conv2d", "out_channels": 8, "kernel": 1, "layout": "NCHW",
          "input_shape": [1, 8, 9, 7])",
       false},
      {R"("op": "max_pool", "kernel": 1)", false},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.fields);
    const std::string fields = std::string(c.fields).find("input_shape") == std::string::npos
                                   ? in + c.fields
                                   : std::string(c.fields);
    EXPECT_EQ(pixel_runs_apply(one_layer(fields)), c.applies);
  }
  const Layer one_d = parse_spec(R"({"model": "g", "layers": [{"name": "l", "op": "conv1d",
      "input_shape": [1, 9, 8], "layout": "NWC", "weight_layout": "WIO", "out_channels": 8,
      "kernel": 1}]})",
                                 "g.json")
                          .layers.at(0);
  EXPECT_FALSE(pixel_runs_apply(one_d));
}

// gemm_pixels > 0 chooses it where it applies and the plane holds 4 tiles or more; resolved, its
// tile divides the channels, and resolving again changes nothing.
TEST(Gemm, TheKnobChoosesItAndResolvesStably) {
  const Halide::Target avx2 = resolve_target("x86-64-linux-avx2-fma");
  const Layer L = one_layer(R"("op": "conv2d", "input_shape": [1, 6, 5, 8], "out_channels": 36,
                               "kernel": 1)");
  const Layer padded = one_layer(R"("op": "conv2d", "input_shape": [1, 6, 5, 8],
                                    "out_channels": 36, "kernel": 1, "padding": 1)");
  const json knobs = {{"gemm_pixels", 7}, {"gemm_vectors", 4}, {"vector_lanes", 8}};
  const ScheduleParams r = resolve_schedule(L, avx2, requested_schedule(L, avx2, knobs));
  EXPECT_EQ(r.implementation, "gemm");
  EXPECT_EQ(r.gemm_pixels, 7);
  EXPECT_EQ(r.vector_lanes, 4);  // 36 channels: vectors of 4
  EXPECT_EQ(36 % (r.vector_lanes * r.gemm_vectors), 0);
  EXPECT_EQ(resolve_schedule(L, avx2, r), r);
  const auto implementation = [&](const Layer& layer, const json& k) {
    return resolve_schedule(layer, avx2, requested_schedule(layer, avx2, k)).implementation;
  };
  EXPECT_EQ(implementation(L, {{"gemm_pixels", 0}}), "direct");
  EXPECT_EQ(implementation(L, {{"gemm_pixels", 8}}), "direct");  // 30 pixels: under 4 tiles
  const ScheduleParams direct =
      resolve_schedule(padded, avx2, requested_schedule(padded, avx2, knobs));
  EXPECT_EQ(direct.implementation, "direct");
  EXPECT_EQ(direct.gemm_pixels, 0);
}

struct GemmCase {
  std::string name, spec;
  json knobs;
};

void PrintTo(const GemmCase& c, std::ostream* os) {
  *os << c.name << " " << c.knobs.dump();
}

std::vector<GemmCase> gemm_cases() {
  const char* acts[] = {"none", "relu", "relu6", "leaky_relu"};
  std::mt19937 rng(1206);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<GemmCase> out;
  for (int i = 0; i < 24; ++i) {
    const int s = pick(1, 2);
    const int64_t h = pick(4, 15), w = pick(4, 15), c = pick(1, 40), k = pick(1, 70);
    const int64_t plane = ((h - 1) / s + 1) * ((w - 1) / s + 1);  // 4 pixels or more
    const json layer = {{"name", "conv"},
                        {"op", "conv2d"},
                        {"input_shape", {1, h, w, c}},
                        {"layout", "NHWC"},
                        {"weight_layout", "HWIO"},
                        {"out_channels", k},
                        {"kernel", 1},
                        {"stride", s},
                        {"bias", pick(0, 1) == 1},
                        {"activation", acts[pick(0, 3)]}};
    json knobs = {{"gemm_pixels", pick(1, static_cast<int>(std::min<int64_t>(12, plane / 4)))},
                  {"gemm_vectors", pick(1, 4)},
                  {"vector_lanes", 1 << pick(2, 4)},
                  {"rows_per_task", pick(0, 2)},
                  {"channels_outer_kb", i % 2},
                  {"parallel_channels", pick(0, 1) == 1}};
    out.push_back({fmt::format("g{}_{}x{}x{}_to_{}_s{}", i, h, w, c, k, s),
                   json{{"model", "g"}, {"layers", {layer}}}.dump(), knobs});
  }
  return out;
}

void expect_close(const ref::Tensor& got, const ref::Tensor& want) {
  ASSERT_EQ(got.shape, want.shape);
  const double tol = 1e-5 * std::max(ref::max_abs(want), 1e-30);
  for (size_t i = 0; i < want.data.size(); ++i)
    ASSERT_NEAR(got.data[i], want.data[i], tol) << "element " << i << " of " << want.data.size();
}

class GemmVsReference : public ::testing::TestWithParam<GemmCase> {};

TEST_P(GemmVsReference, MatchesRawAndPrepared) {
  const Model model = parse_spec(GetParam().spec, "g.json");
  const Layer& L = model.layers.at(0);
  SCOPED_TRACE(GetParam().spec);
  const Halide::Target host = resolve_target("host");
  const ScheduleParams resolved =
      resolve_schedule(L, host, requested_schedule(L, host, GetParam().knobs));
  ASSERT_EQ(resolved.implementation, "gemm");
  const ref::LayerData data = ref::random_data(L, 7);
  const ref::Tensor want = ref::reference_output(L, data);
  expect_close(kernel_output(L, data, "host", GetParam().knobs), want);

  // Where its channel blocks run outermost the compile stores the weights blocked, and the kernel
  // reads them so.
  const WeightForm form = weight_form_for(L, host, resolved);
  const bool outer =
      GetParam().knobs["channels_outer_kb"] == 1 && L.in_channels * L.out_channels > 256;
  ASSERT_EQ(form.block_channels > 0, outer);
  if (!outer) return;
  expect_close(kernel_output(L, data, "host", GetParam().knobs, form), want);
}

INSTANTIATE_TEST_SUITE_P(Drawn, GemmVsReference, ::testing::ValuesIn(gemm_cases()),
                         [](const auto& info) { return info.param.name; });

// A pointwise conv ending in a residual add (one kernel, the add in the epilogue).
TEST(Gemm, ResidualEpilogue) {
  const Model model = parse_spec(R"({"model": "r",
      "defaults": {"layout": "NHWC", "weight_layout": "HWIO"},
      "inputs": [{"name": "x", "shape": [1, 7, 9, 40]}, {"name": "r", "shape": [1, 7, 9, 48]}],
      "layers": [
        {"name": "conv", "op": "conv2d", "input": "x", "out_channels": 48, "kernel": 1,
         "bias": true, "activation": "relu"},
        {"name": "add", "op": "add", "input": ["r", "conv"], "activation": "relu"}]})",
                                 "r.json");
  const ResidualCase c = residual_case(model, 3);
  const Halide::Target host = resolve_target("host");
  const json knobs = {{"gemm_pixels", 5}, {"gemm_vectors", 3}, {"vector_lanes", 8}};
  ASSERT_EQ(
      resolved_schedule(c.block, host, requested_schedule(c.block, host, knobs)).implementation,
      "gemm");
  expect_close(residual_kernel_output(c.block, c.data, c.residual, "host", knobs), c.want);
}

TEST(Gemm, CompilesForEveryCpuFamily) {
  const Layer L = one_layer(R"("op": "conv2d", "input_shape": [1, 10, 7, 12], "out_channels": 20,
                               "kernel": 1, "bias": true, "activation": "relu")");
  for (const TargetFamilyCase& f : cpu_target_families()) {
    SCOPED_TRACE(f.target);
    EXPECT_GT(compile_only(L, f.target, {{"gemm_pixels", 6}, {"gemm_vectors", 2}}), 0);
  }
}

}  // namespace
}  // namespace padfold::testing
