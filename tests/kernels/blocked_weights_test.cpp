// Weights prepared in blocks of output channels (WeightForm::block_channels, "Ohwi<b>o"): the
// CPU schedule asks for them where its kernel copies each channel block's weights per call, and a
// kernel reading them computes, bit for bit, what the same kernel computes from the file's weights
// copied per call; both against the reference, over 1D, 2D and 3D convs, borders, strides,
// dilations, bias and activations, block sizes and threads.
#include <gtest/gtest.h>

#include <cstring>
#include <regex>

#include "algorithm/weight_form.h"
#include "compile/block.h"
#include "compile/lower.h"
#include "compile/target.h"
#include "kernel_runner.h"
#include "schedules/schedule.h"

namespace padfold::testing {
namespace {

using json = nlohmann::json;

struct BlockedCase {
  std::string name, spec;
  json knobs;  // channel blocks outermost, each block's weights copied (pack_weights_kb)
};

void PrintTo(const BlockedCase& c, std::ostream* os) {
  *os << c.name;
}

std::string one_layer_spec(const std::string& layout, const std::string& weight_layout,
                           const std::string& fields) {
  return R"({"model": "b", "defaults": {"layout": ")" + layout + R"(", "weight_layout": ")" +
         weight_layout + R"("}, "layers": [{"name": "l", )" + fields + "}]}";
}

std::vector<BlockedCase> blocked_cases() {
  // Register tiles of fixed widths, so that the blocks are the same on every CPU; the direct loops
  // (the GEMM implementation's blocked weights: gemm_test).
  const json blocks = {{"channels_outer_kb", 1},
                       {"pack_weights_kb", 4096},
                       {"winograd", 0},
                       {"gemm_pixels", 0},
                       {"vector_lanes", 8},
                       {"channel_vectors", 2}};
  json eight = blocks, threads = blocks, one_vector = blocks;
  eight["vector_lanes"] = 4;
  eight["channel_vectors"] = 2;
  threads["rows_per_task"] = 1;
  threads["parallel_channels"] = true;
  one_vector["channel_vectors"] = 1;
  return {
      {"same_3x3_reflect", one_layer_spec("NHWC", "HWIO", R"("op": "conv2d",
        "input_shape": [1, 9, 7, 12], "out_channels": 32, "kernel": 3, "padding": "same",
        "border": "reflect", "bias": true, "activation": "relu")"),
       blocks},
      {"tf_same_stride2_even_kernel", one_layer_spec("NHWC", "HWIO", R"("op": "conv2d",
        "input_shape": [1, 11, 10, 8], "out_channels": 48, "kernel": 4, "stride": 2,
        "padding": "same", "bias": true)"),
       eight},
      {"dilated_constant_border", one_layer_spec("NHWC", "HWIO", R"("op": "conv2d",
        "input_shape": [1, 12, 12, 16], "out_channels": 16, "kernel": 3, "dilation": 2,
        "padding": [[2, 1], [1, 2]], "border": {"mode": "constant", "value": 0.5})"),
       threads},
      {"pointwise", one_layer_spec("NHWC", "HWIO", R"("op": "conv2d",
        "input_shape": [1, 7, 7, 40], "out_channels": 64, "kernel": 1, "bias": true,
        "activation": "relu6")"),
       one_vector},
      {"conv1d_causal", one_layer_spec("NWC", "WIO", R"("op": "conv1d",
        "input_shape": [1, 20, 6], "out_channels": 24, "kernel": 5, "padding": "causal",
        "bias": true)"),
       eight},
      {"conv3d_replicate", one_layer_spec("NDHWC", "DHWIO", R"("op": "conv3d",
        "input_shape": [1, 5, 6, 7, 4], "out_channels": 16, "kernel": 3, "padding": "same",
        "border": "replicate")"),
       blocks},
  };
}

NpyData npy_of(const ref::Tensor& t) {
  NpyData n;
  n.shape = t.shape;
  n.bytes.resize(t.data.size() * sizeof(float));
  std::memcpy(n.bytes.data(), t.data.data(), n.bytes.size());
  return n;
}

class BlockedWeights : public ::testing::TestWithParam<BlockedCase> {};

TEST_P(BlockedWeights, KernelEqualsTheOneCopyingPerCall) {
  const Model model = parse_spec(GetParam().spec, "b.json");
  const Layer& L = model.layers.at(0);
  const Halide::Target host = resolve_target("host");
  const ScheduleParams requested = requested_schedule(L, host, GetParam().knobs);
  const ScheduleParams resolved = resolve_schedule(L, host, requested);
  const WeightForm form = weight_form_for(L, host, resolved);
  ASSERT_GT(form.block_channels, 0) << "the schedule copies no weight blocks";
  EXPECT_EQ(form.block_channels, resolved.vector_lanes * resolved.channel_vectors);
  EXPECT_EQ(L.out_channels % form.block_channels, 0);

  const ref::LayerData data = ref::random_data(L, 17);
  const ref::Tensor want = ref::reference_output(L, data);
  const ref::Tensor per_call = kernel_output(L, data, "host", GetParam().knobs);
  const double tol = 1e-5 * std::max(ref::max_abs(want), 1e-30);
  for (size_t i = 0; i < want.data.size(); ++i)
    ASSERT_NEAR(per_call.data[i], want.data[i], tol) << "element " << i;

  NpyData blocked = prepare_weights(L, form, npy_of(data.weights));
  std::vector<int64_t> shape = L.weight_shape();
  shape.back() = form.block_channels;
  shape.insert(shape.begin(), L.out_channels / form.block_channels);
  EXPECT_EQ(blocked.shape, shape);
  EXPECT_TRUE(std::regex_match(weight_form_layout(L, form), std::regex("O[dhw]+i[0-9]+o")))
      << weight_form_layout(L, form);
  const ref::Tensor got = kernel_output(L, data, "host", GetParam().knobs, form);
  EXPECT_EQ(std::memcmp(got.data.data(), per_call.data.data(), got.data.size() * sizeof(float)), 0)
      << "the kernel reading blocked weights differs from the one copying them per call";
}

INSTANTIATE_TEST_SUITE_P(Matrix, BlockedWeights, ::testing::ValuesIn(blocked_cases()),
                         [](const auto& info) { return info.param.name; });

// Where the kernel reads the weights as they are (no channel blocks outermost, or blocks too
// large to copy, or quantized, or channels first), the schedule asks for no blocked form, and a
// form that does not fit the layer is refused.
TEST(BlockedWeights, OnlyWhereTheKernelCopiesBlocks) {
  const Halide::Target host = resolve_target("x86-64-linux-avx2-fma");
  const Model model = parse_spec(one_layer_spec("NHWC", "HWIO", R"("op": "conv2d",
        "input_shape": [1, 8, 8, 16], "out_channels": 32, "kernel": 3, "padding": "same")"),
                                 "b.json");
  const Layer& L = model.layers.at(0);
  const auto form_of = [&](const json& knobs) {
    return weight_form_for(L, host, resolve_schedule(L, host, requested_schedule(L, host, knobs)));
  };
  EXPECT_GT(form_of({{"channels_outer_kb", 1}, {"winograd", 0}}).block_channels, 0);
  EXPECT_EQ(form_of({{"channels_outer_kb", 0}, {"winograd", 0}}), WeightForm{});
  EXPECT_EQ(form_of({{"channels_outer_kb", 1}, {"pack_weights_kb", 0}, {"winograd", 0}}),
            WeightForm{});
  EXPECT_EQ(form_of({{"channels_outer_kb", 1}, {"winograd", 1}, {"winograd_min_tiles", 0}}),
            (WeightForm{2, 0}));

  const Model nchw = parse_spec(one_layer_spec("NCHW", "OIHW", R"("op": "conv2d",
        "input_shape": [1, 16, 8, 8], "out_channels": 32, "kernel": 3, "padding": "same")"),
                                "b.json");
  EXPECT_FALSE(blocked_weights_apply(nchw.layers.at(0), 16));
  EXPECT_TRUE(blocked_weights_apply(L, 16));
  EXPECT_FALSE(blocked_weights_apply(L, 24));  // does not divide 32 output channels
  Block block;
  block.layers.push_back(&L);
  EXPECT_THROW(lower(block, host, requested_schedule(L, host, json::object()), WeightForm{0, 24}),
               std::logic_error);
  NpyData raw;
  raw.shape = {3, 3, 16, 32};
  raw.bytes.resize(3 * 3 * 16 * 32 * sizeof(float));
  EXPECT_THROW(prepare_weights(L, WeightForm{0, 24}, raw), std::logic_error);
}

}  // namespace
}  // namespace padfold::testing
