// plan_fusion's choices with --fuse auto on examples/inverted_residual_blocks.json, as measured in
// bench/results-blocks.md, and the row strips a block's window allows (max_block_strips).
#include "compile/fusion.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "schedules/schedule.h"

namespace padfold {
namespace {

Model blocks_model() {
  return load_spec(PADFOLD_EXAMPLES_DIR "/inverted_residual_blocks.json");
}

std::vector<const Layer*> chain_of(const Model& m, const std::vector<std::string>& names) {
  std::vector<const Layer*> c;
  for (const std::string& n : names)
    for (const Layer& L : m.layers)
      if (L.name == n) c.push_back(&L);
  return c;
}

TEST(FusionAuto, PicksTheBlocksThatPayOnTheBenchmarkChains) {
  const Model m = blocks_model();
  const FusionPlan plan = plan_fusion(m, FuseOptions{});
  std::vector<std::string> fused;
  for (const Block& b : plan.blocks)
    if (b.fused()) fused.push_back(b.names());
  // b6 (14x14): a 5x5 window allows a single strip (one thread), and its dw->pw intermediate
  // (527 KB) stays in L2: unfused. The ResNet stem conv -> max pool slides along its strips.
  EXPECT_EQ(fused,
            (std::vector<std::string>{"b1_dw+b1_pw", "b2a_expand+b2a_dw+b2a_project",
                                      "b2b_expand+b2b_dw+b2b_project",
                                      "b3a_expand+b3a_dw+b3a_project", "stem_conv+stem_pool"}));
  const bool b6_noted = std::any_of(plan.notes.begin(), plan.notes.end(), [](const std::string& n) {
    return n.find("b6_expand+b6_dw+b6_project not fused") != std::string::npos &&
           n.find("single row strip") != std::string::npos;
  });
  EXPECT_TRUE(b6_noted);
}

TEST(FusionAuto, StripsAreAtLeastFourWindowOverlapsLong) {
  const Model m = blocks_model();
  // 56 output rows; a 3x3 stride-1 window recomputes 2 rows per strip: 56 / (4 * 2) = 7.
  EXPECT_EQ(max_block_strips(chain_of(m, {"b2b_expand", "b2b_dw", "b2b_project"})), 7);
  // Stride 2: 1 producer row (half an output row) per strip: 56 / 2 = 28.
  EXPECT_EQ(max_block_strips(chain_of(m, {"b2a_expand", "b2a_dw", "b2a_project"})), 28);
  // 14 rows and a 5x5 window: one strip.
  EXPECT_EQ(max_block_strips(chain_of(m, {"b6_expand", "b6_dw", "b6_project"})), 1);
  // The pool's 3x3 stride-2 window over the conv: 56 / 2.
  EXPECT_EQ(max_block_strips(chain_of(m, {"stem_conv", "stem_pool"})), 28);
  // No producer read through a window.
  EXPECT_GT(max_block_strips(chain_of(m, {"b1_dw", "b1_pw"})), 1000);
}

}  // namespace
}  // namespace padfold
