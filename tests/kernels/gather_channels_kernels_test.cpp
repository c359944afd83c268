// gather_channels kernels against the reference (ref::gather_channels, numpy.take over channels):
// runs of channels (a Split's or Slice's part, steps other than 1 and negative ones), channel
// shuffles, and random lists with repeats, 1-3 spatial dims, channels first and last, on every CPU
// target family this machine runs, compiled for the others and for CUDA. A copy: bit for bit.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>

#include "kernel_runner.h"

namespace padfold::testing {
namespace {

using json = nlohmann::json;

Layer gather_layer(const std::vector<int64_t>& shape, bool channels_last,
                   const std::vector<int64_t>& channels) {
  return layer_reading(shape, channels_last,
                       {{"name", "gc"}, {"op", "gather_channels"}, {"channels", channels}});
}

// ShuffleNet's channel shuffle of c channels in g groups: output j is input (j % g) * (c / g) +
// j / g.
std::vector<int64_t> shuffle(int64_t c, int64_t g) {
  std::vector<int64_t> out;
  for (int64_t j = 0; j < c; ++j) out.push_back((j % g) * (c / g) + j / g);
  return out;
}

std::vector<int64_t> run(int64_t start, int64_t count, int64_t step) {
  std::vector<int64_t> out;
  for (int64_t k = 0; k < count; ++k) out.push_back(start + k * step);
  return out;
}

struct Case {
  std::vector<int64_t> shape;  // channels first
  bool channels_last;
  std::vector<int64_t> channels;
};

std::vector<Case> cases(std::mt19937& rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<Case> all = {
      {{1, 48, 8, 8}, true, shuffle(48, 2)},    // ShuffleNetV2's shuffle
      {{1, 48, 8, 8}, true, run(24, 24, 1)},    // and its second half
      {{2, 12, 5, 7}, false, shuffle(12, 3)},   // three groups, channels first
      {{1, 9, 6}, true, run(8, 9, -1)},         // reversed
      {{1, 10, 3, 4, 5}, false, run(0, 4, 3)},  // every third
  };
  for (int i = 0; i < 10; ++i) {
    const int dims = pick(1, 3);
    Case c{{pick(1, 2), pick(1, 37)}, pick(0, 1) == 1, {}};
    for (int d = 0; d < dims; ++d) c.shape.push_back(pick(1, dims == 3 ? 5 : 11));
    const int count = pick(1, 40);
    for (int k = 0; k < count; ++k) c.channels.push_back(pick(0, static_cast<int>(c.shape[1]) - 1));
    all.push_back(c);
  }
  return all;
}

class GatherChannelsKernels : public ::testing::TestWithParam<TargetFamilyCase> {};

TEST_P(GatherChannelsKernels, EqualTheReferenceBitForBit) {
  const TargetFamilyCase& family = GetParam();
  std::mt19937 rng(family.seed);
  for (const Case& c : cases(rng)) {
    const Layer L =
        gather_layer(layout_order(c.shape, c.channels_last), c.channels_last, c.channels);
    SCOPED_TRACE(fmt::format("{} {} channels {}", L.layout.name(), fmt::join(c.shape, "x"),
                             fmt::join(c.channels, ",")));
    ASSERT_EQ(L.out_channels, static_cast<int64_t>(c.channels.size()));
    const auto r = run_or_compile(L, family.target, family.seed);
    if (!r) continue;
    ASSERT_EQ(r->got.shape, r->want.shape);
    ASSERT_EQ(r->got.data, r->want.data);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, GatherChannelsKernels,
                         ::testing::ValuesIn(cpu_target_families()),
                         [](const auto& info) { return info.param.name; });

TEST(GatherChannelsKernels, CompileForCuda) {
  std::mt19937 rng(11);
  for (const Case& c : cases(rng)) {
    const Layer L =
        gather_layer(layout_order(c.shape, c.channels_last), c.channels_last, c.channels);
    EXPECT_GT(compile_only(L, "host-cuda"), 0);
  }
}

// The reference is numpy.take: checked on a case small enough to write out.
TEST(GatherChannels, ReferenceTakesChannels) {
  const ref::Tensor x({1, 3, 2}, {0, 1, 10, 11, 20, 21});
  const ref::Tensor y = ref::gather_channels(x, {2, 0, 2});
  EXPECT_EQ(y.shape, (std::vector<int64_t>{1, 3, 2}));
  EXPECT_EQ(y.data, (std::vector<float>{20, 21, 0, 1, 20, 21}));
}

// A channel outside the input, or no channels, is a spec error naming the field.
TEST(GatherChannels, ChannelsAreChecked) {
  EXPECT_EQ(gather_layer({1, 4, 5, 6}, false, {3, 3}).output_shape_full(),
            (std::vector<int64_t>{1, 2, 5, 6}));
  const std::pair<json, const char*> bad[] = {
      {{{"channels", {0, 4}}}, "field 'channels'"},
      {{{"channels", {-1}}}, "field 'channels'"},
      {{{"channels", json::array()}}, "field 'channels'"},
      {{{"channels", "all"}}, "field 'channels'"},
      {json::object(), "field 'channels'"},
      {{{"channels", {0}}, {"kernel", {3, 3}}}, "field 'kernel'"},
  };
  for (const auto& [fields, want] : bad) {
    json layer = {{"name", "gc"}, {"op", "gather_channels"}};
    layer.update(fields);
    try {
      layer_reading({1, 4, 5, 6}, false, layer);
      ADD_FAILURE() << fields.dump() << " accepted";
    } catch (const SpecError& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace padfold::testing
