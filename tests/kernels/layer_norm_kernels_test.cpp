// layer_norm kernels against the reference (ref::layer_norm_channels, in double): each pixel's
// channels normalized to mean 0 and variance 1, with ConvNeXt's 96 channels and random counts
// 1-70, 1-3 spatial dims, channels first and last, epsilons from 1e-6 to 1e-1, inputs with an
// offset far above their spread (a one-pass variance would cancel there), on every CPU target
// family this machine runs, compiled for the others and for CUDA.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>

#include "kernel_runner.h"

namespace padfold::testing {
namespace {

using json = nlohmann::json;

Layer layer_norm(const std::vector<int64_t>& shape, bool channels_last, double epsilon) {
  return layer_reading(shape, channels_last,
                       {{"name", "ln"}, {"op", "layer_norm"}, {"epsilon", epsilon}});
}

struct Case {
  std::vector<int64_t> shape;  // channels first
  bool channels_last;
  double epsilon;
};

std::vector<Case> cases(std::mt19937& rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<Case> all = {
      {{1, 96, 14, 14}, true, 1e-6},  // ConvNeXt-T's first stage, as padfold computes it
      {{2, 7, 5, 3}, false, 1e-5},
      {{1, 1, 9}, true, 1e-5},  // one channel: all zeros
  };
  const double epsilons[] = {1e-6, 1e-5, 1e-3, 0.1};
  for (int i = 0; i < 10; ++i) {
    const int dims = pick(1, 3);
    Case c{{pick(1, 2), pick(1, 70)}, pick(0, 1) == 1, epsilons[pick(0, 3)]};
    for (int d = 0; d < dims; ++d) c.shape.push_back(pick(1, dims == 3 ? 5 : 11));
    all.push_back(c);
  }
  return all;
}

void expect_close(const ref::Tensor& got, const ref::Tensor& want) {
  ASSERT_EQ(got.shape, want.shape);
  for (size_t k = 0; k < want.data.size(); ++k)
    ASSERT_NEAR(got.data[k], want.data[k], 2e-5f * (1 + std::abs(want.data[k]))) << "at " << k;
}

class LayerNormKernels : public ::testing::TestWithParam<TargetFamilyCase> {};

TEST_P(LayerNormKernels, MatchTheReference) {
  const TargetFamilyCase& family = GetParam();
  std::mt19937 rng(family.seed);
  for (const Case& c : cases(rng)) {
    const Layer L = layer_norm(layout_order(c.shape, c.channels_last), c.channels_last, c.epsilon);
    SCOPED_TRACE(
        fmt::format("{} {} epsilon {}", L.layout.name(), fmt::join(c.shape, "x"), c.epsilon));
    const auto r = run_or_compile(L, family.target, family.seed);
    if (!r) continue;
    expect_close(r->got, r->want);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, LayerNormKernels, ::testing::ValuesIn(cpu_target_families()),
                         [](const auto& info) { return info.param.name; });

TEST(LayerNormKernels, CompileForCuda) {
  std::mt19937 rng(13);
  for (const Case& c : cases(rng)) {
    const Layer L = layer_norm(layout_order(c.shape, c.channels_last), c.channels_last, c.epsilon);
    EXPECT_GT(compile_only(L, "host-cuda"), 0);
  }
}

// Channels 1000, 1000.25, 1000.5, 1000.75 (+ w / 64 at pixel w): the mean is taken first, so the
// variance keeps the spread of 0.28 (E[x^2] - E[x]^2 in float32 would lose it to the rounding of
// 1e6), within float32's rounding of inputs near 1000.
TEST(LayerNormKernels, AnOffsetDoesNotCancelTheVariance) {
  const Layer L = layer_norm({1, 4, 1, 8}, false, 1e-5);
  ref::LayerData data;
  data.input = ref::Tensor(std::vector<int64_t>{1, 4, 1, 8});
  for (size_t k = 0; k < 32; ++k)
    data.input.data[k] =
        1000.f + 0.25f * static_cast<float>(k / 8) + static_cast<float>(k % 8) / 64.f;
  const ref::Tensor got = kernel_output(L, data, "host");
  const ref::Tensor want = ref::layer_norm_channels(data.input, 1e-5);
  ASSERT_EQ(got.shape, want.shape);
  for (size_t k = 0; k < want.data.size(); ++k)
    EXPECT_NEAR(got.data[k], want.data[k], 2e-3f) << "at " << k;
  EXPECT_NEAR(want.data[0], -1.3416f, 1e-3f);  // (0 - 0.375) / sqrt(0.078125)
}

// The reference on a pixel small enough to work out: [1, 3] has mean 2, variance 1.
TEST(LayerNorm, ReferenceNormalizesEachPixel) {
  const ref::Tensor y = ref::layer_norm_channels(ref::Tensor({1, 2, 1}, {1, 3}), 0);
  EXPECT_EQ(y.data, (std::vector<float>{-1, 1}));
}

TEST(LayerNorm, EpsilonIsChecked) {
  EXPECT_FLOAT_EQ(layer_norm({1, 4, 5, 6}, false, 1e-6).epsilon, 1e-6f);
  EXPECT_FLOAT_EQ(layer_reading({1, 4, 5}, false, {{"name", "ln"}, {"op", "layer_norm"}}).epsilon,
                  1e-5f);
  const std::pair<json, const char*> bad[] = {
      {{{"epsilon", 0}}, "field 'epsilon'"},
      {{{"epsilon", -1e-5}}, "field 'epsilon'"},
      {{{"epsilon", "small"}}, "field 'epsilon'"},
      {{{"kernel", {3, 3}}}, "field 'kernel'"},
  };
  for (const auto& [fields, want] : bad) {
    json layer = {{"name", "ln"}, {"op", "layer_norm"}};
    layer.update(fields);
    try {
      layer_reading({1, 4, 5, 6}, false, layer);
      ADD_FAILURE() << fields.dump() << " accepted";
    } catch (const SpecError& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  }
  // epsilon on another op is refused.
  EXPECT_THROW(layer_reading({1, 4, 5}, false, {{"name", "s"}, {"op", "softmax"}, {"epsilon", 1}}),
               SpecError);
}

}  // namespace
}  // namespace padfold::testing
