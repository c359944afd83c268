// Every op x padding convention x border mode x layout, element-wise against the naive reference
// (double accumulation, no Halide) on random data in [-1, 1].
//
// Tolerance: |padfold - reference| <= 1e-5 * (taps per output + 1) * max(|reference|, 1), i.e.
// float32 rounding growing with the length of each dot product, relative to the output's size.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "kernel_cases.h"
#include "kernel_runner.h"

namespace padfold::testing {
namespace {

int64_t taps_per_output(const Layer& L) {
  int64_t taps = 1;
  for (int64_t k : L.kernel) taps *= k;
  if (L.has_weights()) taps *= L.in_channels / L.groups;
  return taps;
}

class KernelVsReference : public ::testing::TestWithParam<KernelCase> {};

TEST_P(KernelVsReference, MatchesElementwise) {
  const Model model = parse_spec(GetParam().spec, GetParam().name);
  const Layer& L = model.layers.at(0);
  const LayerData data = random_data(L, 1234);
  ASSERT_GT(ref::max_abs(data.input), 0.1) << "inputs must not be all zeros";
  const ref::Tensor expected = reference_output(L, data);
  const ref::Tensor actual = kernel_output(L, data);
  ASSERT_EQ(actual.shape, expected.shape);
  const double scale = std::max(ref::max_abs(expected), 1.0);
  const double tol = 1e-5 * static_cast<double>(taps_per_output(L) + 1) * scale;
  for (size_t i = 0; i < expected.data.size(); ++i)
    ASSERT_NEAR(actual.data[i], expected.data[i], tol)
        << "element " << i << " of " << expected.data.size() << "\nspec: " << GetParam().spec;
}

std::string case_name(const ::testing::TestParamInfo<KernelCase>& info) {
  return info.param.name;
}

INSTANTIATE_TEST_SUITE_P(AllOps, KernelVsReference,
                         ::testing::ValuesIn(make_kernel_cases(20261130, 1)), case_name);

}  // namespace
}  // namespace padfold::testing
