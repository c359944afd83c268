// Every op x padding convention x border mode x layout x target family, element-wise against the naive reference
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

struct TargetCase {
  std::string target;
  KernelCase layer;
};

void PrintTo(const TargetCase& c, std::ostream* os) { *os << c.target << "/" << c.layer.name; }

class KernelVsReference : public ::testing::TestWithParam<TargetCase> {};

TEST_P(KernelVsReference, MatchesElementwise) {
  const KernelCase& c = GetParam().layer;
  const Model model = parse_spec(c.spec, c.name);
  const Layer& L = model.layers.at(0);
  const LayerData data = random_data(L, 1234);
  ASSERT_GT(ref::max_abs(data.input), 0.1) << "inputs must not be all zeros";
  const ref::Tensor expected = reference_output(L, data);
  const ref::Tensor actual = kernel_output(L, data, GetParam().target);
  ASSERT_EQ(actual.shape, expected.shape);
  const double scale = std::max(ref::max_abs(expected), 1.0);
  const double tol = 1e-5 * static_cast<double>(taps_per_output(L) + 1) * scale;
  for (size_t i = 0; i < expected.data.size(); ++i)
    ASSERT_NEAR(actual.data[i], expected.data[i], tol)
        << "element " << i << " of " << expected.data.size() << "\nspec: " << c.spec;
}

// Each target family's schedules (AVX-512 on this host, AVX2, and the generic SSE4.1 fallback) on
// its own random draw of every combination.
std::vector<TargetCase> cases_for(const std::string& target, unsigned seed) {
  std::vector<TargetCase> out;
  for (KernelCase& k : make_kernel_cases(seed, 1)) out.push_back({target, std::move(k)});
  return out;
}

std::string case_name(const ::testing::TestParamInfo<TargetCase>& info) {
  return info.param.layer.name;
}

INSTANTIATE_TEST_SUITE_P(Host, KernelVsReference,
                         ::testing::ValuesIn(cases_for("host", 20261130)), case_name);
INSTANTIATE_TEST_SUITE_P(Avx2, KernelVsReference,
                         ::testing::ValuesIn(cases_for("x86-64-linux-avx2-fma", 7)), case_name);
INSTANTIATE_TEST_SUITE_P(Generic, KernelVsReference,
                         ::testing::ValuesIn(cases_for("x86-64-linux-sse41", 99)), case_name);

}  // namespace
}  // namespace padfold::testing
