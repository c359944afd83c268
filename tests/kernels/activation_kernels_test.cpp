// activation layers (float32) against the reference (ref::activation, in double): every activation
// of the table on random data, random shapes of 1-3 spatial dims, channels first and last, on every
// CPU target family this machine runs, compiled for the others.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>

#include "frontend/activation.h"
#include "kernel_runner.h"

namespace padfold::testing {
namespace {

class ActivationKernels : public ::testing::TestWithParam<TargetFamilyCase> {};

TEST_P(ActivationKernels, MatchTheReference) {
  const TargetFamilyCase& family = GetParam();
  std::mt19937 rng(family.seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (const ActivationDef& act : kActivations) {
    const int dims = pick(1, 3);
    std::vector<int64_t> shape = {pick(1, 2), pick(1, 40)};
    for (int d = 0; d < dims; ++d) shape.push_back(pick(1, dims == 3 ? 5 : 13));
    const bool channels_last = pick(0, 1) == 1;
    const Layer L =
        layer_reading(layout_order(shape, channels_last), channels_last,
                      {{"name", "act"}, {"op", "activation"}, {"activation", act.name}});
    SCOPED_TRACE(fmt::format("{} {} {}", act.name, L.layout.name(), fmt::join(shape, "x")));
    EXPECT_EQ(L.activation, act.value);
    const auto r = run_or_compile(L, family.target, family.seed);
    if (!r) continue;
    ASSERT_EQ(r->got.shape, r->want.shape);
    for (size_t k = 0; k < r->want.data.size(); ++k)
      ASSERT_NEAR(r->got.data[k], r->want.data[k], 1e-5f * (1 + std::abs(r->want.data[k])))
          << "at " << k;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, ActivationKernels, ::testing::ValuesIn(cpu_target_families()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace padfold::testing
