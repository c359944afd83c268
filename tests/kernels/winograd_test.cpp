// Winograd F(2,3) and F(4,3) (the `winograd` knob): the transforms themselves, where the knob
// applies, and the kernels against the naive reference (double accumulation) on every border,
// padding convention, layout and weight layout, output sizes that are not multiples of the tile,
// channel counts that are not multiples of the vector, with and without threads, and ending in a
// residual add; run on this CPU and compiled for the other families. The bound is the one the
// tuner enforces before a candidate can win (1e-4 of the largest output).
#include "algorithm/winograd.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "compile/block.h"
#include "compile/lower.h"
#include "compile/target.h"
#include "kernel_runner.h"
#include "schedules/schedule.h"

namespace padfold::testing {
namespace {

using json = nlohmann::json;

// y = AT [(G g) .* (BT d)] is the correlation y_i = sum_k d_{i+k} g_k, in exact arithmetic.
TEST(Winograd, TransformsComputeTheCorrelation) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int m : {2, 4}) {
    const WinogradMatrices& W = winograd_matrices(m);
    ASSERT_EQ(W.t, m + 2);
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<double> d(static_cast<size_t>(W.t)), g(3);
      for (double& v : d) v = u(rng);
      for (double& v : g) v = u(rng);
      std::vector<double> product(static_cast<size_t>(W.t));
      for (int a = 0; a < W.t; ++a) {
        double gg = 0, dd = 0;
        for (int r = 0; r < 3; ++r) gg += W.G[a][r] * g[r];
        for (int i = 0; i < W.t; ++i) dd += W.BT[a][i] * d[i];
        product[a] = gg * dd;
      }
      for (int i = 0; i < m; ++i) {
        double y = 0, want = 0;
        for (int a = 0; a < W.t; ++a) y += W.AT[i][a] * product[a];
        for (int k = 0; k < 3; ++k) want += d[i + k] * g[k];
        EXPECT_NEAR(y, want, 1e-12) << "F(" << m << ",3) output " << i;
      }
    }
  }
  EXPECT_THROW(winograd_matrices(3), std::invalid_argument);
}

Layer one_layer(const std::string& fields) {
  return parse_spec(R"({"model": "w", "defaults": {"layout": "NHWC", "weight_layout": "HWIO"},
                        "layers": [{"name": "l", )" +
                        fields + "}]}",
                    "w.json")
      .layers.at(0);
}

TEST(Winograd, TheKnobHoldsOnlyWhereFm3Applies) {
  const Halide::Target host = resolve_target("x86-64-linux-avx2-fma");
  const std::string in = R"("input_shape": [1, 9, 9, 8], )";
  const struct {
    const char* fields;
    bool applies;
  } cases[] = {
      {R"("op": "conv2d", "out_channels": 8, "kernel": 3, "padding": "same")", true},
      {R"("op": "conv2d", "out_channels": 8, "kernel": 3, "padding": "valid", "bias": true)", true},
      {R"("op": "conv2d", "out_channels": 8, "kernel": 3, "stride": 2, "padding": "same")", false},
      {R"("op": "conv2d", "out_channels": 8, "kernel": 3, "dilation": 2, "padding": "same")",
       false},
      {R"("op": "conv2d", "out_channels": 8, "kernel": 5, "padding": "same")", false},
      {R"("op": "conv2d", "out_channels": 8, "kernel": [3, 1], "padding": "same")", false},
      {R"("op": "conv2d", "out_channels": 8, "kernel": 1)", false},
      {R"("op": "conv2d", "out_channels": 8, "kernel": 3, "groups": 8, "padding": "same")", false},
      {R"("op": "conv2d", "out_channels": 8, "kernel": 3, "groups": 2, "padding": "same")", false},
      {R"("op": "max_pool", "kernel": 3, "padding": "same")", false},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.fields);
    const Layer L = one_layer(in + c.fields);
    EXPECT_EQ(winograd_applies(L), c.applies);
    for (int knob : {1, 2}) {
      ScheduleParams p = default_schedule(L, host);
      p.winograd = knob;
      p.winograd_min_tiles = 0;
      const ScheduleParams r = resolve_schedule(L, host, p);
      EXPECT_EQ(r.winograd, c.applies ? knob : 0);
      EXPECT_EQ(to_json(resolve_schedule(L, host, r)), to_json(r)) << "not idempotent";
      // GPU schedules are direct convolutions.
      EXPECT_EQ(resolve_schedule(L, resolve_target("host-cuda"), p).winograd, 0);
    }
  }
  const Layer one_d = parse_spec(R"({"model": "w", "layers": [{"name": "l", "op": "conv1d",
      "input_shape": [1, 9, 8], "layout": "NWC", "weight_layout": "WIO", "out_channels": 8,
      "kernel": 3, "padding": "same"}]})",
                                 "w.json")
                          .layers.at(0);
  EXPECT_FALSE(winograd_applies(one_d));
}

// winograd_min_tiles: outputs of fewer F(4,3) tiles compute as F(2,3) where that has enough, others
// directly; the knob is cleared once resolved (so candidates differing only in it are one kernel).
TEST(Winograd, OutputsOfFewTilesComputeDirectly) {
  const Halide::Target host = resolve_target("x86-64-linux-avx2-fma");
  for (const auto& [size, knob, min_tiles, resolved] :
       std::vector<std::tuple<int, int, int, int>>{{14, 2, 32, 1},  // 4x4 tiles of 4x4: 7x7 of 2x2
                                                   {28, 2, 32, 2},  // 7x7
                                                   {14, 1, 32, 1},  // 7x7 tiles of 2x2
                                                   {14, 1, 64, 0},
                                                   {14, 2, 64, 0},
                                                   {7, 2, 32, 0},  // 2x2, 4x4
                                                   {14, 2, 16, 2}}) {
    SCOPED_TRACE(fmt::format("{0}x{0}, winograd {1}, min tiles {2}", size, knob, min_tiles));
    const Layer L = one_layer(fmt::format(
        R"("op": "conv2d", "input_shape": [1, {0}, {0}, 16], "out_channels": 16, "kernel": 3,
           "padding": "same")",
        size));
    const ScheduleParams r = resolve_schedule(
        L, host,
        requested_schedule(L, host, {{"winograd", knob}, {"winograd_min_tiles", min_tiles}}));
    EXPECT_EQ(r.winograd, resolved);
    EXPECT_EQ(r.winograd_min_tiles, 0);
    EXPECT_EQ(to_json(resolve_schedule(L, host, r)), to_json(r));
  }
}

struct WinogradCase {
  std::string name, spec;
  json knobs;
};

void PrintTo(const WinogradCase& c, std::ostream* os) {
  *os << c.name << " " << c.knobs.dump();
}

// Each border once per tile size and layout, the paddings in turn, the shapes drawn.
std::vector<WinogradCase> winograd_cases() {
  const json paddings[] = {"same", "valid", json{{2, 0}, {0, 1}}, "same_lower"};
  const json borders[] = {"zeros",    "reflect",   "replicate",
                          "circular", "symmetric", {{"mode", "constant"}, {"value", 0.5}}};
  const char* acts[] = {"none", "relu", "leaky_relu"};
  std::mt19937 rng(2026);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<WinogradCase> out;
  int index = 0;
  for (int knob : {1, 2})
    for (bool cl : {true, false})
      for (size_t b = 0; b < std::size(borders); ++b, ++index) {
        const int64_t h = pick(3, 14), w = pick(3, 14), c = pick(5, 20), k = pick(1, 35);
        const json shape = cl ? json{1, h, w, c} : json{1, c, h, w};
        const json layer = {{"name", "conv"},
                            {"op", "conv2d"},
                            {"input_shape", shape},
                            {"layout", cl ? "NHWC" : "NCHW"},
                            {"weight_layout", pick(0, 1) ? "HWIO" : "OIHW"},
                            {"out_channels", k},
                            {"kernel", 3},
                            {"padding", paddings[(b + static_cast<size_t>(knob)) % 4]},
                            {"border", borders[b]},
                            {"bias", pick(0, 1) == 1},
                            {"activation", acts[pick(0, 2)]}};
        json knobs = {{"winograd", knob},
                      {"winograd_min_tiles", 0},
                      {"rows_per_task", pick(0, 2)},
                      {"channel_vectors", pick(1, 3)},
                      {"tile_x", pick(1, 6)},
                      {"unroll_channels", pick(0, 4)}};
        if (pick(0, 1)) knobs["vector_lanes"] = 4;
        out.push_back({fmt::format("f{}_{}_{}", knob == 1 ? 2 : 4, cl ? "nhwc" : "nchw", index),
                       json{{"model", "w"}, {"layers", {layer}}}.dump(), knobs});
      }
  return out;
}

// The bound: 1e-4 of the largest output, as the tuner's check (tune/measure.cpp).
void expect_within_bound(const ref::Tensor& got, const ref::Tensor& want) {
  ASSERT_EQ(got.shape, want.shape);
  const double tol = 1e-4 * std::max(ref::max_abs(want), 1e-30);
  for (size_t i = 0; i < want.data.size(); ++i)
    ASSERT_NEAR(got.data[i], want.data[i], tol) << "element " << i << " of " << want.data.size();
}

// The layer's weights transformed once (prepare_weights, as `padfold compile` stores them for a
// bundle with weight files): U, (t, t, in_channels, out_channels).
void expect_u_shape(const Layer& L, const ref::Tensor& weights, int m) {
  NpyData raw;
  raw.shape = weights.shape;
  raw.bytes.resize(weights.data.size() * sizeof(float));
  std::memcpy(raw.bytes.data(), weights.data.data(), raw.bytes.size());
  EXPECT_EQ(prepare_weights(L, WeightForm{m}, raw).shape,
            (std::vector<int64_t>{m + 2, m + 2, L.in_channels, L.out_channels}));
}

class WinogradVsReference : public ::testing::TestWithParam<WinogradCase> {};

TEST_P(WinogradVsReference, MatchesWithinTheBound) {
  const Model model = parse_spec(GetParam().spec, "w.json");
  const Layer& L = model.layers.at(0);
  SCOPED_TRACE(GetParam().spec);
  const Halide::Target host = resolve_target("host");
  ASSERT_EQ(resolve_schedule(L, host, requested_schedule(L, host, GetParam().knobs)).winograd,
            GetParam().knobs["winograd"].get<int>());
  const ref::LayerData data = ref::random_data(L, 99);
  const ref::Tensor want = ref::reference_output(L, data);
  const ref::Tensor per_call = kernel_output(L, data, "host", GetParam().knobs);
  expect_within_bound(per_call, want);

  // The same kernel reading the weights prepared once gives the per-call kernel's outputs (the
  // same transform, run ahead): within float rounding of it (F(4,3) magnifies a rounding of U
  // differently fused into one ulp of the largest output), and within the bound.
  const int m = winograd_outputs(GetParam().knobs["winograd"].get<int>());
  expect_u_shape(L, data.weights, m);
  const ref::Tensor got = kernel_output(L, data, "host", GetParam().knobs, WeightForm{m});
  expect_within_bound(got, want);
  const double tol = 1e-5 * std::max(ref::max_abs(per_call), 1e-30);
  for (size_t i = 0; i < got.data.size(); ++i)
    ASSERT_NEAR(got.data[i], per_call.data[i], tol) << "element " << i;
}

INSTANTIATE_TEST_SUITE_P(Matrix, WinogradVsReference, ::testing::ValuesIn(winograd_cases()),
                         [](const auto& info) { return info.param.name; });

// Every CPU family compiles both tile sizes (the ones this CPU runs were run above as host).
TEST(Winograd, CompilesForEveryCpuFamily) {
  const Layer L = one_layer(
      R"("op": "conv2d", "input_shape": [1, 10, 7, 12], "out_channels": 20, "kernel": 3,
         "padding": "same", "bias": true, "activation": "relu")");
  for (const TargetFamilyCase& f : cpu_target_families())
    for (int knob : {1, 2}) {
      SCOPED_TRACE(f.target + " winograd " + std::to_string(knob));
      EXPECT_GT(compile_only(L, f.target, {{"winograd", knob}, {"winograd_min_tiles", 0}}), 0);
    }
}

// A conv ending in a residual add (one kernel, the add in the epilogue) computed as Winograd.
TEST(Winograd, ResidualEpilogue) {
  const Model model = parse_spec(R"({"model": "r",
      "defaults": {"layout": "NHWC", "weight_layout": "HWIO"},
      "inputs": [{"name": "x", "shape": [1, 11, 9, 16]}, {"name": "r", "shape": [1, 11, 9, 24]}],
      "layers": [
        {"name": "conv", "op": "conv2d", "input": "x", "out_channels": 24, "kernel": 3,
         "padding": "same", "border": "reflect", "bias": true, "activation": "relu"},
        {"name": "add", "op": "add", "input": ["r", "conv"], "activation": "relu"}]})",
                                 "r.json");
  const ResidualCase c = residual_case(model, 3);
  const Halide::Target host = resolve_target("host");
  for (int knob : {1, 2})
    for (bool prepared : {false, true}) {
      SCOPED_TRACE("winograd " + std::to_string(knob) + (prepared ? ", prepared" : ""));
      const json knobs = {{"winograd", knob}, {"winograd_min_tiles", 0}};
      ASSERT_EQ(resolved_schedule(c.block, host, requested_schedule(c.block, host, knobs)).winograd,
                knob);
      const WeightForm form = prepared ? WeightForm{winograd_outputs(knob)} : WeightForm{};
      expect_within_bound(residual_kernel_output(c.block, c.data, c.residual, "host", knobs, form),
                          c.want);
    }
}

}  // namespace
}  // namespace padfold::testing
