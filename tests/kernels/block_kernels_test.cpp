// Fused blocks (dw->pw, pw->dw->pw, conv->max_pool, conv->avg_pool, and a conv, dw->pw or
// pw->dw->pw ending in a residual add) as one kernel, against the naive reference applied layer by
// layer: random shapes, every convention (TF SAME strided and asymmetric, SAME_LOWER, explicit),
// border modes and both layouts, on every CPU family this machine runs (compiled for the others).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "compile/block.h"
#include "compile/lower.h"
#include "compile/target.h"
#include "kernel_runner.h"

namespace padfold::testing {
namespace {

using json = nlohmann::json;

enum class Kind { DwPw, PwDwPw, ConvMaxPool, ConvAvgPool, ConvAdd, DwPwAdd, PwDwPwAdd };
const char* kKindNames[] = {"dw_pw",    "pw_dw_pw",  "conv_max_pool", "conv_avg_pool",
                            "conv_add", "dw_pw_add", "pw_dw_pw_add"};
constexpr int kKinds = 7, kFirstResidualKind = 4;

struct BlockCase {
  std::string name;
  Model model;
  Block block() const {
    Block b;
    for (const Layer& L : model.layers) b.layers.push_back(&L);
    return b;
  }
};

json padding_of(int which, int dims) {
  switch (which) {
    case 0:
      return "same";  // TF SAME: asymmetric when the total is odd
    case 1:
      return "same_lower";
    default:
      return json(std::vector<int>(2 * static_cast<size_t>(dims), 1));  // explicit, symmetric
  }
}

json border_of(int which) {
  const char* names[] = {"zeros", "reflect", "replicate", "symmetric", "circular"};
  if (which == 5) return {{"mode", "constant"}, {"value", 0.75}};
  return names[which];
}

// Which convention, border and layout a case uses; -1 draws it at random.
struct Combination {
  int padding = -1, border = -1, channels_last = -1;
};

// A chain of the kind's layers on a random input; nullopt when the parser refuses the draw (a
// border wider than the input, say).
std::optional<BlockCase> random_case(std::mt19937& rng, Kind kind, int index,
                                     Combination combo = {}) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto given = [&](int v, int lo, int hi) { return v >= 0 ? v : pick(lo, hi); };
  const int dims = pick(1, 3) == 3 ? pick(1, 3) : 2;  // mostly 2-D
  const bool cl = given(combo.channels_last, 0, 1) == 1;
  const int64_t c = pick(1, 12), n = pick(1, 2);
  std::vector<int64_t> shape{n};
  if (!cl) shape.push_back(c);
  for (int d = 0; d < dims; ++d) shape.push_back(pick(dims == 3 ? 3 : 4, dims == 3 ? 6 : 13));
  if (cl) shape.push_back(c);
  const std::string letters = spatial_letters(dims);
  const int conv_pad = given(combo.padding, 0, 2), border = given(combo.border, 0, 5);
  const char* acts[] = {"none", "relu", "relu6", "leaky_relu"};
  auto act = [&] { return acts[pick(0, 3)]; };
  json dw = {{"op", "conv" + std::to_string(dims) + "d"},
             {"depth_multiplier", 1},
             {"kernel", pick(2, 5)},
             {"stride", pick(1, 2)},
             {"padding", padding_of(conv_pad, dims)},
             {"border", border_of(border)},
             {"bias", pick(0, 1) == 1},
             {"activation", act()}};
  auto pw = [&](int64_t out) {
    return json{{"op", "conv" + std::to_string(dims) + "d"},
                {"out_channels", out},
                {"kernel", 1},
                {"bias", pick(0, 1) == 1},
                {"activation", act()}};
  };
  json layers = json::array();
  switch (kind) {
    case Kind::DwPw:
    case Kind::DwPwAdd:
      layers = {dw, pw(pick(1, 20))};
      break;
    case Kind::PwDwPw:
    case Kind::PwDwPwAdd: {
      const int64_t expand = c * pick(1, 3);
      layers = {pw(expand), dw, pw(pick(1, 12))};
      break;
    }
    case Kind::ConvAdd:  // a dense conv, or a depthwise one
      layers = {pick(0, 1) == 1 ? dw
                                : json{{"op", "conv" + std::to_string(dims) + "d"},
                                       {"out_channels", pick(1, 20)},
                                       {"kernel", pick(1, 4)},
                                       {"stride", pick(1, 2)},
                                       {"padding", padding_of(conv_pad, dims)},
                                       {"border", border_of(border)},
                                       {"bias", pick(0, 1) == 1},
                                       {"activation", act()}}};
      break;
    case Kind::ConvMaxPool:
    case Kind::ConvAvgPool: {
      json conv = {{"op", "conv" + std::to_string(dims) + "d"},
                   {"out_channels", pick(1, 10)},
                   {"kernel", pick(1, 3)},
                   {"stride", 1},
                   {"padding", padding_of(conv_pad, dims)},
                   {"border", border_of(border)},
                   {"bias", true},
                   {"activation", act()}};
      json pool = {{"op", kind == Kind::ConvMaxPool ? "max_pool" : "avg_pool"},
                   {"kernel", pick(2, 3)},
                   {"stride", pick(1, 3)},
                   {"padding", padding_of(pick(0, 2), dims)},
                   {"ceil_mode", pick(0, 3) == 0}};
      if (kind == Kind::ConvAvgPool) pool["count_include_pad"] = pick(0, 1) == 1;
      if (pick(0, 3) == 0) pool["border"] = border_of(pick(0, 5));
      layers = {conv, pool};
      break;
    }
  }
  for (size_t i = 0; i < layers.size(); ++i) layers[i]["name"] = "l" + std::to_string(i);
  layers[0]["input_shape"] = shape;
  json spec = {{"model", "b"},
               {"defaults", {{"layout", cl ? "N" + letters + "C" : "NC" + letters}}},
               {"layers", layers}};
  if (kind == Kind::ConvAdd || kind == Kind::DwPwAdd || kind == Kind::PwDwPwAdd) {
    // The chain's output plus a model input "r" of its shape, in either order.
    try {
      const Model chain = parse_spec(spec.dump(), "block.json");
      const std::string last = chain.layers.back().name;
      spec["inputs"] = {{{"name", "x"}, {"shape", shape}},
                        {{"name", "r"}, {"shape", chain.layers.back().output_shape_full()}}};
      spec["layers"][0].erase("input_shape");
      spec["layers"][0]["input"] = "x";
      const bool first = pick(0, 1) == 1;
      spec["layers"].push_back({{"name", "l" + std::to_string(layers.size())},
                                {"op", "add"},
                                {"input", first ? json{last, "r"} : json{"r", last}},
                                {"activation", act()}});
    } catch (const SpecError&) {
      return std::nullopt;
    }
  }
  try {
    BlockCase bc{
        fmt::format("{}_{}_{}", kKindNames[static_cast<int>(kind)], cl ? "cl" : "cf", index),
        parse_spec(spec.dump(), "block.json")};
    return bc;
  } catch (const SpecError&) {
    return std::nullopt;
  }
}

Halide::Buffer<float> as_buffer(const ref::Tensor& t) {
  std::vector<int> sizes(t.shape.rbegin(), t.shape.rend());
  return Halide::Buffer<float>(const_cast<float*>(t.data.data()), sizes);
}

// The reference layer by layer, and the fused kernel on the same data.
void check_block(const BlockCase& c, const std::string& target, unsigned seed,
                 const json& knobs = json::object()) {
  const Block block = c.block();
  std::vector<ref::LayerData> data;
  ref::Tensor x;
  ref::Tensor residual;
  for (size_t i = 0; i < block.layers.size(); ++i) {
    const Layer& L = *block.layers[i];
    if (&L == block.residual()) {
      residual = ref::Tensor(x.shape);
      for (size_t e = 0; e < x.data.size(); ++e)
        residual.data[e] = std::sin(0.7f * static_cast<float>(e) + static_cast<float>(seed));
      x = ref::add_output(L, x, residual);
      data.emplace_back();
      continue;
    }
    ref::LayerData d = ref::random_data(L, seed + static_cast<unsigned>(i));
    if (i > 0) d.input = x;
    x = ref::reference_output(L, d);
    data.push_back(std::move(d));
  }
  const Halide::Target t = resolve_target(target);
  Kernel k = lower(block, t, requested_schedule(block, t, knobs));
  k.param("input").set(as_buffer(data[0].input));
  if (block.residual()) k.param("residual").set(as_buffer(residual));
  for (size_t i = 0; i < block.layers.size(); ++i) {
    const Layer& L = *block.layers[i];
    if (L.has_weights()) k.param(L.name + "_weights").set(as_buffer(data[i].weights));
    if (L.bias) k.param(L.name + "_bias").set(as_buffer(data[i].bias));
  }
  ref::Tensor got(block.last().output_shape_full());
  Halide::Buffer<float> out = as_buffer(got);
  k.pipeline.realize(out, codegen_target(t));
  ASSERT_EQ(got.shape, x.shape);
  for (size_t e = 0; e < x.data.size(); ++e)
    ASSERT_NEAR(got.data[e], x.data[e], 1e-4f * (1 + std::abs(x.data[e]))) << "element " << e;
}

// Lowers and compiles a block for a target this CPU cannot run.
void compile_block(const BlockCase& c, const std::string& target) {
  const Halide::Target t = resolve_target(target);
  const Kernel k = lower(c.block(), t, requested_schedule(c.block(), t));
  const std::string obj = ::testing::TempDir() + "padfold_block_" + std::to_string(getpid()) + ".o";
  compile_kernel_files(k, t, {{Halide::OutputFileType::object, obj}}, "block");
  EXPECT_GT(std::filesystem::file_size(obj), 0u);
  std::filesystem::remove(obj);
}

void run_case(const BlockCase& c, const TargetFamilyCase& family, bool runs, unsigned seed) {
  SCOPED_TRACE(c.name + ": " + c.block().kind());
  try {
    if (runs)
      check_block(c, family.target, seed);
    else
      compile_block(c, family.target);
  } catch (const Halide::Error& e) {
    FAIL() << "Halide: " << e.what();
  }
}

// The whole matrix on this machine's own target: every kind x convention (TF SAME, SAME_LOWER,
// explicit) x border mode, layouts alternating so each kind has both, random shapes.
TEST(BlockKernelMatrix, EveryKindConventionBorderAndLayout) {
  std::mt19937 rng(20261201);
  const TargetFamilyCase host{"Host", "host", 3};
  int checked = 0;
  for (int kind = 0; kind < kKinds; ++kind)
    for (int padding = 0; padding < 3; ++padding)
      for (int border = 0; border < 6; ++border) {
        const Combination combo{padding, border, (padding + border) % 2};
        std::optional<BlockCase> c;
        for (int attempt = 0; attempt < 50 && !c; ++attempt)
          c = random_case(rng, static_cast<Kind>(kind), checked, combo);
        ASSERT_TRUE(c) << "no valid shape drawn for kind " << kKindNames[kind];
        run_case(*c, host, true, static_cast<unsigned>(checked));
        ++checked;
      }
  EXPECT_EQ(checked, kKinds * 3 * 6);
}

// Every CPU knob, fused_strips included, at a random in-range value on random blocks of each
// kind: what a block cannot take as given is resolved.
TEST(BlockKernelMatrix, RandomInRangeKnobs) {
  std::mt19937 rng(4243);
  int checked = 0;
  for (int kind = 0; kind < kKinds; ++kind)
    for (int i = 0; i < (kind < kFirstResidualKind ? 6 : 2);) {
      const auto c = random_case(rng, static_cast<Kind>(kind), i);
      if (!c) continue;
      ++i;
      const json knobs = random_cpu_knobs(rng);
      SCOPED_TRACE(c->name + " knobs " + knobs.dump());
      try {
        check_block(*c, "host", static_cast<unsigned>(checked), knobs);
      } catch (const Halide::Error& e) {
        FAIL() << "Halide: " << e.what();
      }
      ++checked;
    }
  EXPECT_EQ(checked, kFirstResidualKind * 6 + (kKinds - kFirstResidualKind) * 2);
}

// Random draws on every CPU family: run where this CPU can, compiled elsewhere.
class BlockKernels : public ::testing::TestWithParam<TargetFamilyCase> {};

TEST_P(BlockKernels, MatchReferenceLayerByLayer) {
  const TargetFamilyCase& family = GetParam();
  const bool runs = runs_here(family.target);
  std::mt19937 rng(family.seed * 31 + 7);
  const int per_kind = runs ? 6 : 3;
  int checked = 0;
  for (int kind = 0; kind < kKinds; ++kind)
    for (int i = 0; i < per_kind;) {
      const auto c = random_case(rng, static_cast<Kind>(kind), i);
      if (!c) continue;
      ++i;
      run_case(*c, family, runs, family.seed + static_cast<unsigned>(i));
      ++checked;
    }
  EXPECT_EQ(checked, kKinds * per_kind);
}

INSTANTIATE_TEST_SUITE_P(Families, BlockKernels, ::testing::ValuesIn(cpu_target_families()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace padfold::testing
