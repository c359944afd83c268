// Every op x padding convention x border mode x layout x target family, element-wise against the
// naive reference (double accumulation, no Halide) on random data in [-1, 1]. The families are
// `host` (what $PADFOLD_HOST_TARGET names, else this CPU) and forced AVX-512, AVX2 and SSE4.1;
// a family this CPU cannot run is compiled without running (tests/kernels/kernels_compile_test.cpp
// compiles every family's whole matrix, the cross targets too).
//
// Tolerance: |padfold - reference| <= 1e-5 * (taps per output + 1) * max(|reference|, 1), i.e.
// float32 rounding growing with the length of each dot product, relative to the output's size.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>

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
  nlohmann::json schedule = nlohmann::json::object();  // overrides of the default schedule
};

void PrintTo(const TargetCase& c, std::ostream* os) {
  *os << c.target << "/" << c.layer.name << " " << c.schedule.dump();
}

class KernelVsReference : public ::testing::TestWithParam<TargetCase> {};

TEST_P(KernelVsReference, MatchesElementwise) {
  const KernelCase& c = GetParam().layer;
  SCOPED_TRACE("spec: " + c.spec);
  const Model model = parse_spec(c.spec, c.name);
  const Layer& L = model.layers.at(0);
  if (!runs_here(GetParam().target)) {
    // This CPU lacks the family's features: the kernel must still compile.
    EXPECT_GT(compile_only(L, GetParam().target, GetParam().schedule), 0) << c.spec;
    return;
  }
  const ref::LayerData data = ref::random_data(L, 1234);
  ASSERT_GT(ref::max_abs(data.input), 0.1) << "inputs must not be all zeros";
  const ref::Tensor expected = ref::reference_output(L, data);
  const ref::Tensor actual = kernel_output(L, data, GetParam().target, GetParam().schedule);
  ASSERT_EQ(actual.shape, expected.shape);
  const double scale = std::max(ref::max_abs(expected), 1.0);
  const double tol = 1e-5 * static_cast<double>(taps_per_output(L) + 1) * scale;
  for (size_t i = 0; i < expected.data.size(); ++i)
    ASSERT_NEAR(actual.data[i], expected.data[i], tol)
        << "element " << i << " of " << expected.data.size() << "\nspec: " << c.spec
        << "\nschedule overrides: " << GetParam().schedule.dump();
}

// Each target family's schedules on its own random draw of every combination.
std::vector<TargetCase> cases_for(const std::string& target, unsigned seed) {
  std::vector<TargetCase> out;
  for (KernelCase& k : make_kernel_cases(seed, 1)) out.push_back({target, std::move(k)});
  return out;
}

// The schedule options the default rows turn on only for some shapes, forced on for a quarter of
// the cases each, so every option is checked on shapes the benchmark does not have.
std::vector<TargetCase> option_cases() {
  const char* options[] = {
      R"({"fit_tiles": true})",
      R"({"taps_inner": true})",
      R"({"unroll_channels": 2})",
      R"({"unroll_taps_outer": 5})",
      R"({"unroll_taps_rows": 64})",
      R"({"channels_outer_kb": 1, "parallel_channels": true})",
      R"({"channels_outer_kb": 1})",
      R"({"inline_border": false})",
      R"({"channels_outer_kb": 1, "pack_weights_kb": 4096})",
      R"({"channels_outer_kb": 1, "pack_weights_kb": 4096, "channel_tasks_rows": 256})"};
  std::vector<TargetCase> out;
  const std::vector<KernelCase> layers = make_kernel_cases(31337, 1);
  for (size_t o = 0; o < std::size(options); ++o)
    for (size_t i = o % 4; i < layers.size(); i += 4)
      out.push_back({"host", layers[i], nlohmann::json::parse(options[o])});
  return out;
}

// Every CPU knob at a random in-range value on a random draw of the layer matrix: a combination
// the schedule cannot honour as given must be resolved to one it can, never a kernel that fails
// or is wrong.
std::vector<TargetCase> random_knob_cases() {
  std::mt19937 rng(4242);
  std::vector<TargetCase> out;
  const std::vector<KernelCase> layers = make_kernel_cases(777, 1);
  for (size_t j = 0; 3 * j + j % 3 < layers.size(); ++j)  // a third of them, every border
    out.push_back({"host", layers[3 * j + j % 3], random_cpu_knobs(rng)});
  return out;
}

// The example's stem (1x4x4x8 output, one row tile of 4 rows) with two row tiles per task: one
// task is all the rows there are.
TEST(KernelOptions, MoreRowsPerTaskThanRowTilesIsResolved) {
  const Model model = parse_spec(R"({"model": "tiny", "layers": [{"name": "stem", "op": "conv2d",
      "input_shape": [1, 7, 7, 3], "layout": "NHWC", "weight_layout": "HWIO", "out_channels": 8,
      "kernel": 4, "stride": 2, "padding": "same", "convention": "tensorflow", "bias": true}]})",
                                 "tiny");
  const Layer& L = model.layers.at(0);
  const ref::LayerData data = ref::random_data(L, 3);
  const ref::Tensor expected = ref::reference_output(L, data);
  for (int rows : {2, 3, 256}) {
    SCOPED_TRACE("rows_per_task " + std::to_string(rows));
    const ref::Tensor actual =
        kernel_output(L, data, "host", {{"tile_y", 4}, {"rows_per_task", rows}});
    ASSERT_EQ(actual.shape, expected.shape);
    for (size_t i = 0; i < expected.data.size(); ++i)
      ASSERT_NEAR(actual.data[i], expected.data[i], 1e-4) << "element " << i;
  }
}

// Row tiles grouped into larger parallel tasks (min_task_kflop) on an output tall enough for it
// (at least 32 row tiles), at 1, 2, 4 and 8 rows per task.
TEST(KernelOptions, GroupedRowTasksMatchReference) {
  const Model model = parse_spec(R"({"model": "grain", "layers": [{"name": "dw", "op": "conv2d",
      "input_shape": [1, 128, 20, 16], "layout": "NHWC", "weight_layout": "HWIO",
      "out_channels": 16, "groups": 16, "kernel": 3, "padding": "same_upper"}]})",
                                 "grain");
  const Layer& L = model.layers.at(0);
  const ref::LayerData data = ref::random_data(L, 7);
  const ref::Tensor expected = ref::reference_output(L, data);
  for (int kflop : {0, 10, 20, 1000000}) {  // 5.8 kFLOP per row: 1, 2, 4 and 8 rows per task
    SCOPED_TRACE("min_task_kflop " + std::to_string(kflop));
    const nlohmann::json schedule = {{"tile_y", 1}, {"min_task_kflop", kflop}};
    const ref::Tensor actual = kernel_output(L, data, "host", schedule);
    ASSERT_EQ(actual.shape, expected.shape);
    const double tol =
        1e-5 * static_cast<double>(taps_per_output(L) + 1) * std::max(ref::max_abs(expected), 1.0);
    for (size_t i = 0; i < expected.data.size(); ++i)
      ASSERT_NEAR(actual.data[i], expected.data[i], tol) << "element " << i;
  }
}

// Grouped convs of 8 and 24 channels per group, channels last, strided and not, both weight
// layouts: with the default knobs (group_lanes: vectors within a group on AVX-512) and with
// vectors that span groups (16 lanes), against the reference.
TEST(KernelOptions, GroupedConvsMatchReferenceAtEveryVectorWidth) {
  struct Case {
    int channels, groups, stride;
    const char* weights;
  };
  for (const Case& c : {Case{24, 3, 2, "OIHW"}, Case{24, 3, 1, "HWIO"}, Case{48, 2, 1, "OIHW"}}) {
    const std::string spec = fmt::format(
        R"({{"model": "grouped", "layers": [{{"name": "conv", "op": "conv2d",
        "input_shape": [1, 11, 9, {}], "layout": "NHWC", "weight_layout": "{}", "out_channels": {},
        "groups": {}, "kernel": 3, "stride": {}, "padding": "same_upper", "bias": true}}]}})",
        c.channels, c.weights, c.channels, c.groups, c.stride);
    const Model model = parse_spec(spec, "grouped");
    const Layer& L = model.layers.at(0);
    const ref::LayerData data = ref::random_data(L, 13);
    const ref::Tensor expected = ref::reference_output(L, data);
    for (const char* knobs : {"{}", R"({"vector_lanes": 8})", R"({"vector_lanes": 16})"}) {
      SCOPED_TRACE(spec + "\nschedule " + knobs);
      const ref::Tensor actual = kernel_output(L, data, "host", nlohmann::json::parse(knobs));
      ASSERT_EQ(actual.shape, expected.shape);
      for (size_t i = 0; i < expected.data.size(); ++i)
        ASSERT_NEAR(actual.data[i], expected.data[i], 1e-4) << "element " << i;
    }
  }
}

// Channel blocks outermost with each block's weights packed (pack_weights_kb), channels last, in
// both weight layouts, dense and pointwise, strided and asymmetric, on channel counts that leave a
// last block shifted inwards and on 7 columns (a prime), with threads over rows or over blocks.
TEST(KernelOptions, PackedBlockWeightsMatchReference) {
  struct Case {
    const char* weights;
    int kernel, stride, channels;
    const char* padding;
    const char* border;
  };
  const Case cases[] = {{"HWIO", 3, 1, 20, "same_upper", "zeros"},
                        {"OIHW", 3, 2, 24, "same_upper", "reflect"},
                        {"HWIO", 1, 2, 40, "valid", "zeros"},
                        {"OIHW", 1, 1, 32, "valid", "zeros"},
                        {"HWIO", 2, 1, 12, "same_lower", "replicate"}};
  for (const Case& c : cases) {
    const std::string spec = fmt::format(
        R"({{"model": "packed", "layers": [{{"name": "conv", "op": "conv2d",
        "input_shape": [1, 7, 13, 9], "layout": "NHWC", "weight_layout": "{}", "out_channels": {},
        "kernel": {}, "stride": {}, "padding": "{}", "border": "{}", "bias": true}}]}})",
        c.weights, c.channels, c.kernel, c.stride, c.padding, c.border);
    const Model model = parse_spec(spec, "packed");
    const Layer& L = model.layers.at(0);
    const ref::LayerData data = ref::random_data(L, 11);
    const ref::Tensor expected = ref::reference_output(L, data);
    for (const char* knobs :
         {R"({"channels_outer_kb": 1, "pack_weights_kb": 4096})",
          R"({"channels_outer_kb": 1, "pack_weights_kb": 4096, "channel_vectors": 1, "tile_x": 7})",
          R"({"channels_outer_kb": 1, "pack_weights_kb": 4096, "channel_tasks_rows": 256})",
          R"({"channels_outer_kb": 1, "pack_weights_kb": 4096, "vector_lanes": 4,
              "channel_vectors": 3, "parallel_channels": true})"}) {
      SCOPED_TRACE(spec + "\nschedule " + knobs);
      const ref::Tensor actual = kernel_output(L, data, "host", nlohmann::json::parse(knobs));
      ASSERT_EQ(actual.shape, expected.shape);
      for (size_t i = 0; i < expected.data.size(); ++i)
        ASSERT_NEAR(actual.data[i], expected.data[i], 1e-4) << "element " << i;
    }
  }
}

// A window op's case reading its input in the other layout (spec field input_layout): the change
// of layout folded into the kernel, whose output stays in the layer's layout.
std::optional<KernelCase> relaid(const KernelCase& c) {
  nlohmann::json spec = nlohmann::json::parse(c.spec);
  nlohmann::json& layer = spec["layers"][0];
  const std::string op = layer["op"], layout = layer["layout"];
  if (op.rfind("conv", 0) != 0 && op.find("pool") == std::string::npos) return std::nullopt;
  const bool channels_last = layout.back() == 'C';
  std::vector<int64_t> shape = layer["input_shape"];
  std::string other = layout;
  if (channels_last) {  // N S... C -> N C S...
    std::rotate(shape.begin() + 1, shape.end() - 1, shape.end());
    std::rotate(other.begin() + 1, other.end() - 1, other.end());
  } else {  // N C S... -> N S... C
    std::rotate(shape.begin() + 1, shape.begin() + 2, shape.end());
    std::rotate(other.begin() + 1, other.begin() + 2, other.end());
  }
  layer["input_shape"] = shape;
  layer["input_layout"] = other;
  return KernelCase{c.name + "_from_" + other, spec.dump()};
}

// A draw of the matrix's convs and pools, each reading the other layout, on the host; an eighth of
// them with random knobs.
std::vector<TargetCase> relaid_cases() {
  std::mt19937 rng(2612);
  std::vector<TargetCase> out;
  const std::vector<KernelCase> layers = make_kernel_cases(1205, 1);
  for (size_t i = 0; i < layers.size(); ++i)
    if (const std::optional<KernelCase> c = relaid(layers[i]))
      out.push_back({"host", *c, i % 8 == 0 ? random_cpu_knobs(rng) : nlohmann::json::object()});
  return out;
}

TEST(KernelRelayout, CasesCoverEveryWindowOpAndBothDirections) {
  std::set<std::string> seen;
  for (const TargetCase& c : relaid_cases()) {
    const Model m = parse_spec(c.layer.spec, c.layer.name);
    const Layer& L = m.layers.at(0);
    ASSERT_TRUE(L.relayout_input) << c.layer.spec;
    EXPECT_NE(L.read_layout().channels_last, L.layout.channels_last);
    std::string op = L.op_name;  // conv2d -> conv, max_pool stays
    if (op.size() > 2 && op.back() == 'd' && std::isdigit(op[op.size() - 2]))
      op.resize(op.size() - 2);
    seen.insert(op + (L.layout.channels_last ? "_cl" : "_cf"));
  }
  for (const char* op : {"conv", "conv_transpose", "max_pool", "avg_pool"})
    for (const char* dir : {"_cl", "_cf"})
      EXPECT_TRUE(seen.count(std::string(op) + dir)) << op << dir;
}

std::string case_name(const ::testing::TestParamInfo<TargetCase>& info) {
  return info.param.layer.name;
}

std::string option_case_name(const ::testing::TestParamInfo<TargetCase>& info) {
  return info.param.layer.name + "_option" + std::to_string(info.index);
}

INSTANTIATE_TEST_SUITE_P(Host, KernelVsReference, ::testing::ValuesIn(cases_for("host", 20261130)),
                         case_name);
INSTANTIATE_TEST_SUITE_P(Avx512, KernelVsReference,
                         ::testing::ValuesIn(cases_for(cpu_target_families()[0].target,
                                                       cpu_target_families()[0].seed)),
                         case_name);
INSTANTIATE_TEST_SUITE_P(Avx2, KernelVsReference,
                         ::testing::ValuesIn(cases_for(cpu_target_families()[1].target,
                                                       cpu_target_families()[1].seed)),
                         case_name);
INSTANTIATE_TEST_SUITE_P(Generic, KernelVsReference,
                         ::testing::ValuesIn(cases_for(cpu_target_families()[2].target,
                                                       cpu_target_families()[2].seed)),
                         case_name);
INSTANTIATE_TEST_SUITE_P(Options, KernelVsReference, ::testing::ValuesIn(option_cases()),
                         option_case_name);
INSTANTIATE_TEST_SUITE_P(RandomKnobs, KernelVsReference, ::testing::ValuesIn(random_knob_cases()),
                         option_case_name);
INSTANTIATE_TEST_SUITE_P(Relayout, KernelVsReference, ::testing::ValuesIn(relaid_cases()),
                         option_case_name);

}  // namespace
}  // namespace padfold::testing
