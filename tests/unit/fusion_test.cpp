// Which layers padfold fuses: the chain rules (one reader, no model output, a fused kind), the cost
// model's choice, --fuse lists and their errors.
#include "compile/fusion.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace padfold {
namespace {

using json = nlohmann::json;

// dw (k3) -> pw on an input of `size` x `size` x 32 channels, NHWC.
json dw_pw_spec(int size) {
  return {{"model", "f"},
          {"defaults", {{"layout", "NHWC"}}},
          {"inputs", {{{"name", "x"}, {"shape", {1, size, size, 32}}}}},
          {"layers",
           {{{"name", "dw"},
             {"op", "conv2d"},
             {"input", "x"},
             {"depth_multiplier", 1},
             {"kernel", 3},
             {"padding", "same"}},
            {{"name", "pw"}, {"op", "conv2d"}, {"out_channels", 16}, {"kernel", 1}}}}};
}

std::vector<std::string> block_names(const FusionPlan& p) {
  std::vector<std::string> names;
  for (const Block& b : p.blocks) names.push_back(b.names());
  return names;
}

TEST(Fusion, DwPwFusedWhenTheIntermediateLeavesTheCache) {
  const Model big = parse_spec(dw_pw_spec(64).dump(), "f.json");  // 512 KB intermediate
  const FusionPlan p = plan_fusion(big, {});
  ASSERT_EQ(block_names(p), (std::vector<std::string>{"dw+pw"}));
  EXPECT_EQ(p.blocks[0].kind(), "dw->pw");
  EXPECT_NE(p.blocks[0].reason.find("saves 1024.0 KB"), std::string::npos) << p.blocks[0].reason;
  EXPECT_NE(p.blocks[0].reason.find("recomputes 0.00 MFLOP"), std::string::npos);

  const Model small = parse_spec(dw_pw_spec(8).dump(), "f.json");  // 8 KB
  const FusionPlan q = plan_fusion(small, {});
  EXPECT_EQ(block_names(q), (std::vector<std::string>{"dw", "pw"}));
  ASSERT_EQ(q.notes.size(), 1u);
  EXPECT_NE(q.notes[0].find("dw+pw not fused"), std::string::npos) << q.notes[0];
  EXPECT_NE(q.notes[0].find("stays in cache"), std::string::npos) << q.notes[0];

  FuseOptions none;
  none.mode = FuseOptions::Mode::None;
  EXPECT_EQ(block_names(plan_fusion(big, none)), (std::vector<std::string>{"dw", "pw"}));
}

TEST(Fusion, AnIntermediateWithTwoReadersOrThatIsAnOutputIsNotFused) {
  json two = dw_pw_spec(64);
  two["layers"].push_back({{"name", "p2"}, {"op", "max_pool"}, {"input", "dw"}, {"kernel", 2}});
  EXPECT_EQ(block_names(plan_fusion(parse_spec(two.dump(), "f.json"), {})),
            (std::vector<std::string>{"dw", "pw", "p2"}));
  json output = dw_pw_spec(64);
  output["outputs"] = {"dw", "pw"};
  EXPECT_EQ(block_names(plan_fusion(parse_spec(output.dump(), "f.json"), {})),
            (std::vector<std::string>{"dw", "pw"}));
}

TEST(Fusion, TheLongestChainFirstAndEveryLayerOnce) {
  json spec = dw_pw_spec(64);
  // pw -> dw -> pw, then another layer reading the input.
  spec["layers"] = {
      {{"name", "e"}, {"op", "conv2d"}, {"input", "x"}, {"out_channels", 64}, {"kernel", 1}},
      {{"name", "d"},
       {"op", "conv2d"},
       {"depth_multiplier", 1},
       {"kernel", 3},
       {"stride", 2},
       {"padding", "same"}},
      {{"name", "p"}, {"op", "conv2d"}, {"out_channels", 16}, {"kernel", 1}},
      {{"name", "side"}, {"op", "avg_pool"}, {"input", "x"}, {"kernel", 2}}};
  const Model m = parse_spec(spec.dump(), "f.json");  // blocks point into the model
  const FusionPlan plan = plan_fusion(m, {});
  EXPECT_EQ(block_names(plan), (std::vector<std::string>{"e+d+p", "side"}));
  EXPECT_EQ(plan.blocks[0].kind(), "pw->dw->pw");
}

TEST(Fusion, ListedBlocks) {
  const Model m = parse_spec(dw_pw_spec(8).dump(), "f.json");  // auto would not fuse it
  const FusionPlan p = plan_fusion(m, parse_fuse_option("dw+pw"));
  ASSERT_EQ(block_names(p), (std::vector<std::string>{"dw+pw"}));
  EXPECT_EQ(p.blocks[0].reason.rfind("listed in --fuse; dw->pw", 0), 0u) << p.blocks[0].reason;
  auto error = [&](const Model& model, const std::string& text) {
    try {
      plan_fusion(model, parse_fuse_option(text));
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(error(m, "dw+nope"), "--fuse dw+nope: 'nope' is not a layer");
  EXPECT_EQ(error(m, "pw+dw"),
            "--fuse pw+dw: 'pw' is not read by 'dw' alone (a fused intermediate has one reader "
            "and is no model output)");
  json pools = dw_pw_spec(8);
  pools["layers"][1] = {{"name", "pw"}, {"op", "avg_pool"}, {"kernel", 2}};
  pools["layers"].push_back({{"name", "q"}, {"op", "max_pool"}, {"kernel", 2}});
  EXPECT_EQ(error(parse_spec(pools.dump(), "f.json"), "pw+q"),
            "--fuse pw+q: not a fused kind (dw->pw, pw->dw->pw, conv->max_pool, conv->avg_pool)");
  EXPECT_EQ(error(m, "dw+pw,pw+dw"), "--fuse pw+dw: 'pw' is in another block");
  EXPECT_THROW(parse_fuse_option("dw"), std::invalid_argument);
  EXPECT_THROW(parse_fuse_option("dw++pw"), std::invalid_argument);
  EXPECT_THROW(parse_fuse_option(""), std::invalid_argument);
}

TEST(Fusion, ConvPoolRecomputesTheHaloOfOverlappingWindows) {
  json spec = dw_pw_spec(64);
  spec["layers"] = {
      {{"name", "c"},
       {"op", "conv2d"},
       {"input", "x"},
       {"out_channels", 32},
       {"kernel", 3},
       {"padding", "same"}},
      {{"name", "p"}, {"op", "max_pool"}, {"kernel", 3}, {"stride", 2}, {"padding", "same"}}};
  const Model m = parse_spec(spec.dump(), "f.json");
  const FusionEstimate e = estimate_fusion({&m.layers[0], &m.layers[1]});
  EXPECT_EQ(e.kind, "conv2d->max_pool");
  // A 2-row by 8-column pool tile reads (2-1)*2+3 = 5 rows and (8-1)*2+3 = 17 columns of conv
  // output for the 4 x 16 it would compute alone.
  EXPECT_NEAR(e.recompute_flops, m.layers[0].flops() * (5.0 / 4 * 17.0 / 16 - 1), 1.0);
  // A pool whose stride equals its kernel reads each conv point once: no halo.
  spec["layers"][1]["kernel"] = 2;
  const Model n = parse_spec(spec.dump(), "f.json");
  EXPECT_NEAR(estimate_fusion({&n.layers[0], &n.layers[1]}).recompute_flops, 0.0, 1.0);
}

}  // namespace
}  // namespace padfold
