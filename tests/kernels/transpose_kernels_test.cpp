// transpose kernels against the reference (ref::transpose, numpy.transpose's rule), bit for bit:
// the layout changes (channels first <-> last, 1-3 spatial dims, 3 channels and many) and random
// permutations that keep the batch first, on every CPU target family this machine runs, and
// compiled for the others; every schedule path (a short output axis unrolled, square register
// tiles, a plain copy) is taken.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "kernel_runner.h"

namespace padfold::testing {
namespace {

using json = nlohmann::json;

Layer transpose_layer(const std::vector<int64_t>& shape, bool channels_last,
                      const std::vector<int64_t>& perm) {
  return layer_reading(shape, channels_last, {{"name", "tr"}, {"op", "transpose"}, {"perm", perm}});
}

struct Case {
  std::vector<int64_t> shape;
  bool channels_last;
  std::vector<int64_t> perm;
};

std::vector<Case> cases(std::mt19937& rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<Case> all = {
      {{1, 3, 37, 29}, false, channels_last_perm(4)},   // an image into NHWC: 3 channels unrolled
      {{1, 21, 13, 40}, true, channels_first_perm(4)},  // square tiles
      {{2, 17, 9, 6}, false, channels_last_perm(4)},
      {{1, 5, 11}, true, channels_first_perm(3)},
      {{1, 4, 3, 5, 7}, false, channels_last_perm(5)},
      {{1, 3, 8, 8}, false, {0, 1, 3, 2}},  // H and W swapped: the innermost axis moves
      {{1, 6, 7, 9}, true, {0, 2, 1, 3}},   // the innermost axis stays: a plain copy
  };
  for (int i = 0; i < 8; ++i) {
    const int rank = pick(3, 5);
    Case c{{pick(1, 2)}, pick(0, 1) == 1, {0}};
    for (int d = 1; d < rank; ++d) c.shape.push_back(pick(1, rank == 5 ? 6 : 23));
    std::vector<int64_t> rest;
    for (int d = 1; d < rank; ++d) rest.push_back(d);
    std::shuffle(rest.begin(), rest.end(), rng);
    c.perm.insert(c.perm.end(), rest.begin(), rest.end());
    all.push_back(c);
  }
  return all;
}

class TransposeKernels : public ::testing::TestWithParam<TargetFamilyCase> {};

TEST_P(TransposeKernels, EqualTheReferenceBitForBit) {
  const TargetFamilyCase& family = GetParam();
  std::mt19937 rng(family.seed);
  for (const Case& c : cases(rng)) {
    const Layer L = transpose_layer(c.shape, c.channels_last, c.perm);
    SCOPED_TRACE(fmt::format("{} {} perm {}", L.input_layout.name(), fmt::join(c.shape, "x"),
                             fmt::join(c.perm, ",")));
    const auto run = run_or_compile(L, family.target, family.seed);
    if (!run) continue;
    ASSERT_EQ(run->got.shape, run->want.shape);
    ASSERT_EQ(run->got.data, run->want.data);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, TransposeKernels, ::testing::ValuesIn(cpu_target_families()),
                         [](const auto& info) { return info.param.name; });

// What a layout change is: NCHW -> NHWC is an NHWC output, and back; another permutation keeps the
// input's layout label; a perm moving the batch, or of the wrong rank, is a spec error.
TEST(Transpose, LayoutsAndPermsAreChecked) {
  EXPECT_EQ(transpose_layer({1, 3, 5, 7}, false, {0, 2, 3, 1}).layout.name(), "NHWC");
  EXPECT_EQ(transpose_layer({1, 5, 7, 3}, true, {0, 3, 1, 2}).layout.name(), "NCHW");
  const Layer swap = transpose_layer({1, 3, 5, 7}, false, {0, 1, 3, 2});
  EXPECT_EQ(swap.layout.name(), "NCHW");
  EXPECT_EQ(swap.output_shape_full(), (std::vector<int64_t>{1, 3, 7, 5}));
  EXPECT_EQ(swap.input_shape(), (std::vector<int64_t>{1, 3, 5, 7}));
  for (const std::vector<int64_t>& bad :
       {std::vector<int64_t>{1, 0, 2, 3}, {0, 1, 2}, {0, 1, 1, 2}, {0, 1, 2, 4}}) {
    try {
      transpose_layer({1, 3, 5, 7}, false, bad);
      ADD_FAILURE() << fmt::format("perm {} accepted", fmt::join(bad, ","));
    } catch (const SpecError& e) {
      EXPECT_NE(std::string(e.what()).find("field 'perm'"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace padfold::testing
