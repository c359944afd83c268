// Which layers padfold fuses: the chain rules (one reader, no model output, a fused kind), the cost
// model's choices (on examples/inverted_residual_blocks.json, as measured in
// bench/results-blocks.md), the row strips a block's window allows and the loop levels its
// consumer hands its producers, --fuse lists and their errors.
#include "compile/fusion.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "schedules/block.h"
#include "spec_snippets.h"

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

// A block's consumer in row strips hands its row tile and strip to the producers read through a
// window (returned in its ScheduleResult), with the strips the window allows; without strips,
// its pixel tile.
TEST(BlockSchedule, ResultCarriesTheStripsAndTheKnobs) {
  const Model m = blocks_model();
  const Halide::Target t = Halide::Target("x86-64-linux-avx512_skylake");
  const std::vector<const Layer*> layers = chain_of(m, {"b2b_expand", "b2b_dw", "b2b_project"});
  auto schedule = [&](const ScheduleParams& requested) {
    std::vector<Algorithm> chain;
    Halide::Func source;
    for (const Layer* L : layers) {
      chain.push_back(build_algorithm(*L, {}, source));
      source = chain.back().output;
    }
    const ScheduleResult r = apply_block_schedule(chain, requested, t);
    EXPECT_EQ(r.resolved, resolve_block_schedule(layers, t, requested));
    Halide::LoopLevel row = r.row_tile, tile = r.pixel_tile;
    row.lock();
    tile.lock();
    EXPECT_EQ(tile.func(), chain.back().output.name());
    EXPECT_EQ(r.strips, !row.is_root());
    return r;
  };
  ScheduleParams requested = default_schedule(*layers.back(), t);
  ASSERT_EQ(requested.fused_strips, 4);
  const ScheduleResult strips = schedule(requested);
  EXPECT_TRUE(strips.strips);
  EXPECT_EQ(strips.resolved.fused_strips, 4);  // at most 7 (StripsAreAtLeastFourWindowOverlapsLong)
  requested.fused_strips = 0;
  const ScheduleResult tiles = schedule(requested);
  EXPECT_FALSE(tiles.strips);
  EXPECT_EQ(tiles.resolved.fused_strips, 0);
}

using json = nlohmann::json;
using json = nlohmann::json;

using padfold::testing::dw_pw_spec;

std::vector<std::string> block_names(const FusionPlan& p) {
  std::vector<std::string> names;
  for (const Block& b : p.blocks) names.push_back(b.names());
  return names;
}

TEST(Fusion, DwPwFusedWhenTheIntermediateLeavesTheCache) {
  const Model big = parse_spec(dw_pw_spec(128).dump(), "f.json");  // 2 MiB intermediate
  const FusionPlan p = plan_fusion(big, {});
  ASSERT_EQ(block_names(p), (std::vector<std::string>{"dw+pw"}));
  EXPECT_EQ(p.blocks[0].kind(), "dw->pw");
  EXPECT_NE(p.blocks[0].reason.find("saves 4096.0 KB"), std::string::npos) << p.blocks[0].reason;
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
  json two = dw_pw_spec(128);
  two["layers"].push_back({{"name", "p2"}, {"op", "max_pool"}, {"input", "dw"}, {"kernel", 2}});
  EXPECT_EQ(block_names(plan_fusion(parse_spec(two.dump(), "f.json"), {})),
            (std::vector<std::string>{"dw", "pw", "p2"}));
  json output = dw_pw_spec(128);
  output["outputs"] = {"dw", "pw"};
  EXPECT_EQ(block_names(plan_fusion(parse_spec(output.dump(), "f.json"), {})),
            (std::vector<std::string>{"dw", "pw"}));
}

TEST(Fusion, TheLongestChainFirstAndEveryLayerOnce) {
  json spec = dw_pw_spec(128);
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
            "--fuse pw+q: not a fused kind (dw->pw, pw->dw->pw, conv->max_pool, conv->avg_pool, "
            "each of the convs or dw->pw and pw->dw->pw followed by a residual add)");
  EXPECT_EQ(error(m, "dw+pw,pw+dw"), "--fuse pw+dw: 'pw' is in another block");
  EXPECT_THROW(parse_fuse_option("dw"), std::invalid_argument);
  EXPECT_THROW(parse_fuse_option("dw++pw"), std::invalid_argument);
  EXPECT_THROW(parse_fuse_option(""), std::invalid_argument);
}

// A ResNet bottleneck's tail: c2 (3x3) and the shortcut "down" (1x1, after c2 in model order) both
// feed "sum". The add goes into the epilogue of c2, the first conv it can join, as a block at the
// add's place (after "down", which it reads); its buffers are c2's plus the shortcut.
json bottleneck_spec() {
  return {
      {"model", "r"},
      {"defaults", {{"layout", "NHWC"}}},
      {"inputs", {{{"name", "x"}, {"shape", {1, 14, 14, 64}}}}},
      {"layers",
       {{{"name", "c1"}, {"op", "conv2d"}, {"input", "x"}, {"out_channels", 16}, {"kernel", 1}},
        {{"name", "c2"},
         {"op", "conv2d"},
         {"out_channels", 64},
         {"kernel", 3},
         {"padding", "same"},
         {"bias", true}},
        {{"name", "down"}, {"op", "conv2d"}, {"input", "x"}, {"out_channels", 64}, {"kernel", 1}},
        {{"name", "sum"}, {"op", "add"}, {"input", {"c2", "down"}}, {"activation", "relu"}}}}};
}

TEST(Fusion, ResidualAddInTheConvsEpilogue) {
  const Model m = parse_spec(bottleneck_spec().dump(), "r.json");
  const FusionPlan p = plan_fusion(m, {});
  ASSERT_EQ(block_names(p), (std::vector<std::string>{"c1", "down", "c2+sum"}));
  const Block& b = p.blocks[2];
  EXPECT_EQ(b.kind(), "conv2d->add");
  EXPECT_EQ(b.residual(), &m.layers[3]);
  EXPECT_EQ(&b.consumer(), &m.layers[1]);
  EXPECT_EQ(b.chain(), (std::vector<const Layer*>{&m.layers[1]}));
  EXPECT_EQ(b.residual_source(), "down");
  EXPECT_NE(b.reason.find("the add in c2's epilogue saves 98.0 KB"), std::string::npos) << b.reason;
  std::vector<std::string> names;
  for (const BufferInfo& info : block_buffers(b)) names.push_back(info.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"input", "c2_weights", "c2_bias", "residual", "output"}));
  EXPECT_EQ(block_buffers(b).back().layer, "sum");
  EXPECT_EQ(block_input_sources(b), (std::vector<std::string>{"c1", "down"}));

  // Listed (the shortcut joins the add instead); the add's inputs in the other order change
  // nothing.
  EXPECT_EQ(block_names(plan_fusion(m, parse_fuse_option("down+sum"))),
            (std::vector<std::string>{"c1", "c2", "down+sum"}));
  json swapped = bottleneck_spec();
  swapped["layers"][3]["input"] = {"down", "c2"};
  const Model s = parse_spec(swapped.dump(), "r.json");
  EXPECT_EQ(block_names(plan_fusion(s, {})), (std::vector<std::string>{"c1", "down", "c2+sum"}));

  // Not a residual: the conv's output read again, or a model output, or added to itself.
  json twice = bottleneck_spec();
  twice["layers"][3]["input"] = {"c2", "c2"};
  EXPECT_EQ(block_names(plan_fusion(parse_spec(twice.dump(), "r.json"), {})),
            (std::vector<std::string>{"c1", "c2", "down", "sum"}));
  json output = bottleneck_spec();
  output["outputs"] = {"c2", "down", "sum"};
  EXPECT_EQ(block_names(plan_fusion(parse_spec(output.dump(), "r.json"), {})),
            (std::vector<std::string>{"c1", "c2", "down", "sum"}));
  FuseOptions none;
  none.mode = FuseOptions::Mode::None;
  EXPECT_EQ(block_names(plan_fusion(m, none)),
            (std::vector<std::string>{"c1", "c2", "down", "sum"}));
}

// An inverted residual block that pays fused (pw->dw->pw) takes its add too; one that does not
// pay leaves the add to its projection.
TEST(Fusion, InvertedResidualTakesTheAddWhenTheChainPays) {
  for (int size : {128, 8}) {
    json spec = dw_pw_spec(size);
    spec["layers"] = {
        {{"name", "e"}, {"op", "conv2d"}, {"input", "x"}, {"out_channels", 96}, {"kernel", 1}},
        {{"name", "d"},
         {"op", "conv2d"},
         {"depth_multiplier", 1},
         {"kernel", 3},
         {"padding", "same"}},
        {{"name", "p"}, {"op", "conv2d"}, {"out_channels", 32}, {"kernel", 1}},
        {{"name", "sum"}, {"op", "add"}, {"input", {"x", "p"}}}};
    const Model m = parse_spec(spec.dump(), "f.json");
    const FusionPlan plan = plan_fusion(m, {});
    if (size == 128) {
      ASSERT_EQ(block_names(plan), (std::vector<std::string>{"e+d+p+sum"}));
      EXPECT_EQ(plan.blocks[0].kind(), "pw->dw->pw->add");
      EXPECT_EQ(plan.blocks[0].chain().size(), 3u);
    } else {
      EXPECT_EQ(block_names(plan), (std::vector<std::string>{"e", "d", "p+sum"}));
      EXPECT_EQ(plan.blocks[2].kind(), "pw->add");
    }
  }
}

TEST(Fusion, ConvPoolRecomputesTheHaloOfOverlappingWindows) {
  json spec = dw_pw_spec(128);
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
  // The conv slides along each row strip of the block; a strip's first pool row needs the
  // 3 - 2 = 1 conv row above it again: one of the conv's 128 rows per strip.
  const int strips = std::min(kNominalStrips, max_block_strips({&m.layers[0], &m.layers[1]}));
  EXPECT_GE(strips, 2);
  EXPECT_NEAR(e.recompute_flops, m.layers[0].flops() * strips / 128.0, 1.0);
  // A pool whose stride equals its kernel reads each conv point once: no halo.
  spec["layers"][1]["kernel"] = 2;
  const Model n = parse_spec(spec.dump(), "f.json");
  EXPECT_NEAR(estimate_fusion({&n.layers[0], &n.layers[1]}).recompute_flops, 0.0, 1.0);
}

}  // namespace
}  // namespace padfold
