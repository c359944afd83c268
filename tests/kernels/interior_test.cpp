// The border is folded into the kernel: reading the lowered statement `padfold compile
// --emit-stmt` writes (generator/compile/stmt_check.h, the same check `padfold stmt-check` and the
// benchmark run), the innermost loops of the steady state contain no boundary test while the
// border tiles do; for every benchmark layer on AVX-512, AVX2 and SSE4.1 (compiled, not run).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/npy.h"
#include "compile/stmt_check.h"
#include "emit/bundle.h"

namespace padfold {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Compiles `model` for `target` with --emit-stmt and returns each layer's statement check.
std::map<std::string, StmtReport> compile_and_check(const Model& model, const std::string& target,
                                                    int64_t* max_object_bytes = nullptr) {
  CompileOptions opt;
  opt.out_dir = (fs::temp_directory_path() /
                 ("padfold_interior_" + model.name + "_" + std::to_string(getpid())))
                    .string();
  opt.targets = {target};
  opt.emit_stmt = true;
  opt.jobs = 1;
  const auto reports = compile_bundle(model, opt);
  std::map<std::string, StmtReport> checks;
  for (const KernelReport& r : reports) {
    const fs::path stmt = fs::path(opt.out_dir) / r.target / (r.layer + ".stmt");
    EXPECT_TRUE(fs::exists(stmt)) << stmt;
    checks[r.layer] = check_stmt(read_text(stmt));
    if (max_object_bytes) *max_object_bytes = std::max(*max_object_bytes, r.object_bytes);
  }
  fs::remove_all(opt.out_dir);
  return checks;
}

StmtReport compile_one(const std::string& name, const nlohmann::json& layer,
                       int64_t* object_bytes) {
  nlohmann::json spec = {{"model", name}, {"layers", {layer}}};
  spec["layers"][0]["name"] = name;
  return compile_and_check(parse_spec(spec.dump(), "interior_test"),
                           "x86-64-linux-avx-avx2-avx512-avx512_skylake-f16c-fma-sse41",
                           object_bytes)
      .at(name);
}

const nlohmann::json kStridedSame = {{"op", "conv2d"},     {"input_shape", {1, 28, 28, 32}},
                                     {"layout", "NHWC"},   {"weight_layout", "HWIO"},
                                     {"out_channels", 32}, {"kernel", 3},
                                     {"stride", 2},        {"padding", "same_upper"}};

TEST(StmtCheck, SteadyStateIsTheBranchAndLoopThatRunMost) {
  // Rows 0..9 in parallel: row 0 is a border branch, 1..8 the steady state, 9 the epilogue;
  // inside the steady rows, a peeled column tile, the steady column loop and an epilogue loop.
  const std::string stmt =
      "internal func k_par_for_out_s0_y (__user_context, out.s0.y, closure_arg) {\n"
      "if (out.s0.y < 1) {\n"
      " for (out.s0.x, 0, 4) {\n  for (r.s1.r$x, 0, 3) {\n   a = select(c, 1, 0)\n  }\n }\n"
      "} else if (out.s0.y < 9) {\n"
      " for (out.s0.c, 0, 2) {\n  for (r.s1.r$x, 0, 3) {\n   a = max(b, 0)\n  }\n }\n"
      " let t1 = min(out.s0.y, 3)\n"
      " for (out.s0.x.rebased, 0, t1 + 2) {\n  for (r.s1.r$x, 0, 3) {\n   a = b\n  }\n }\n"
      " for (out.s0.x.rebased, 0, 1) {\n  for (r.s1.r$x, 0, 3) {\n   a = select(c, 1, 0)\n  }\n }\n"
      "} else {\n"
      " for (out.s0.x, 0, 4) {\n  for (r.s1.r$x, 0, 3) {\n   a = likely(c)\n  }\n }\n"
      "}\n}\n"
      "external_plus_metadata func k (in, out) {\n"
      " let r = halide_do_par_for((halide_task_t)::k_par_for_out_s0_y, 0, 10, (uint8_t *)(c))\n"
      "}\n";
  const StmtReport r = check_stmt(stmt);
  ASSERT_EQ(r.innermost.size(), 5u);
  EXPECT_EQ(r.steady_loops(), 1);
  EXPECT_EQ(r.steady_loops_with_tests(), 0);
  EXPECT_EQ(r.border_loops_with_tests(), 4);
  EXPECT_TRUE(r.interior_is_clean());
  // The steady column loop: 8 rows x (min(y,3)+2 tiles) x 3 taps.
  for (const StmtLoop& l : r.innermost) {
    if (!l.steady) continue;
    EXPECT_DOUBLE_EQ(l.iterations, 3.0 * (3 + 4 + 5 * 6));
  }
}

// ReLU and ReLU6 in the epilogue clamp values against float constants: not tests. A clamp of an
// integer position is one.
TEST(StmtCheck, AnActivationsClampIsNoTest) {
  const auto test_of = [](const std::string& body) {
    const StmtReport r = check_stmt(
        "external_plus_metadata func k (in, out) {\n"
        " for (out.s0.x, 0, 16) {\n  " +
        body + "\n }\n}\n");
    EXPECT_EQ(r.innermost.size(), 1u);
    return r.innermost.at(0).test;
  };
  EXPECT_EQ(test_of("out[ramp(x, 1, 16)] = max(b[ramp(x, 1, 16)], x16(0.000000f))"), "");
  EXPECT_EQ(test_of("out[x] = min(max(a[x] + b[min(c, 3)], 0.000000f), 6.000000f)"),
            "out[x] = min(max(a[x] + b[min(c, 3)], 0.000000f), 6.000000f)");
  EXPECT_EQ(test_of("out[x] = max(min(a[x], x8(-1.5e-05f)), x8(-6.000000f))"), "");
  EXPECT_EQ(test_of("out[x] = a[max(x, 1)]"), "out[x] = a[max(x, 1)]");
  EXPECT_EQ(test_of("out[x] = max(a[x], b[x])"), "out[x] = max(a[x], b[x])");
}

// An update stage's parallel loop (a GEMM over pixel runs) is a task whose closure argument
// Halide numbers: its loops are simulated and checked like a pure stage's.
TEST(StmtCheck, AnUpdateStagesParallelTaskIsChecked) {
  const StmtReport r = check_stmt(
      "internal func k_par_for_out_s1_c (__user_context, out.s1.c, closure_arg$1) {\n"
      " for (out.s1.x, 0, 16) {\n  a = select(out.s1.c < 1, 0, b)\n }\n}\n"
      "external_plus_metadata func k (in, out) {\n"
      " let closure_result$1 = halide_do_par_for((halide_task_t)::k_par_for_out_s1_c, 0, 8, "
      "(uint8_t *)(c))\n}\n");
  ASSERT_EQ(r.innermost.size(), 1u);
  EXPECT_DOUBLE_EQ(r.innermost[0].iterations, 8.0 * 16);
  EXPECT_EQ(r.steady_loops_with_tests(), 1);
}

TEST(StmtCheck, ATestInTheSteadyStateFails) {
  const std::string stmt =
      "external_plus_metadata func k (in, out) {\n"
      " for (out.s0.x, 0, 16) {\n  for (r.s1.r$x, 0, 3) {\n   a = select(x < 1, 0, b)\n  }\n }\n"
      "}\n";
  const StmtReport r = check_stmt(stmt);
  EXPECT_EQ(r.steady_loops_with_tests(), 1);
  EXPECT_FALSE(r.interior_is_clean());
}

// A Winograd conv and an int8 dot-product conv passed their weights per call put them in another
// form in their loops (U's first pass; the table and the weight sums); with weight files the
// compile prepares both (and folds the sums into the bias), and no stage of either statement
// transforms weights.
TEST(StmtCheck, FindsTheStagesTransformingWeightsPerCall) {
  const fs::path dir =
      fs::temp_directory_path() / ("padfold_weight_stages_" + std::to_string(getpid()));
  fs::create_directories(dir);
  nlohmann::json q = {{"name", "q"},      {"op", "conv2d"}, {"input_shape", {1, 8, 8, 64}},
                      {"layout", "NHWC"}, {"kernel", 1},    {"out_channels", 64},
                      {"dtype", "int8"},  {"bias", true},   {"padding", "valid"}};
  q["quant"] = {{"requantize", "tflite"},
                {"input", {{"scale", 0.02}, {"zero_point", 5}}},
                {"weight_scale", 0.004},
                {"output", {{"scale", 0.05}, {"zero_point", -128}}}};
  const nlohmann::json wg = {{"name", "wg"},     {"op", "conv2d"}, {"input_shape", {1, 24, 24, 8}},
                             {"layout", "NHWC"}, {"kernel", 3},    {"out_channels", 16},
                             {"padding", "same"}};
  const std::string target = "x86-64-linux-avx-avx2-avx512-avx512_skylake-f16c-fma-sse41";
  const auto stages = [&](const nlohmann::json& layers) {
    CompileOptions opt;
    opt.out_dir = (dir / "bundle").string();
    opt.targets = {target};
    opt.emit_stmt = true;
    opt.jobs = 1;
    opt.fuse.mode = FuseOptions::Mode::None;
    const Model model = parse_spec(nlohmann::json{{"model", "m"}, {"layers", layers}}.dump(),
                                   (dir / "spec.json").string());
    std::map<std::string, std::vector<std::string>> found;
    for (const KernelReport& r : compile_bundle(model, opt))
      found[r.layer] =
          per_call_weight_stages(read_text(fs::path(opt.out_dir) / r.target / (r.layer + ".stmt")));
    fs::remove_all(opt.out_dir);
    return found;
  };
  auto per_call = stages({wg, q});
  EXPECT_EQ(per_call["wg"], (std::vector<std::string>{"wg_wg_weights_rows"}));
  // The table's blocks staged in registers (schedule_dot_weights) are part of building it.
  EXPECT_EQ(per_call["q"], (std::vector<std::string>{
                               "q_dot_weights", "q_weights_im_in_q_dot_weights", "q_weight_sum"}));

  const std::vector<float> w(3 * 3 * 8 * 16, 0.5f);
  write_npy_f32((dir / "wg_w.npy").string(), {3, 3, 8, 16}, w.data());
  const std::vector<int8_t> qw(64 * 64, 3);
  const std::vector<int32_t> qb(64, 100);
  write_npy((dir / "q_w.npy").string(), {1, 1, 64, 64}, NpyDType::I8, qw.data());
  write_npy((dir / "q_b.npy").string(), {64}, NpyDType::I32, qb.data());
  nlohmann::json wg_files = wg, q_files = q;
  wg_files["weight_files"] = {{"weights", "wg_w.npy"}};
  q_files["weight_files"] = {{"weights", "q_w.npy"}, {"bias", "q_b.npy"}};
  const auto prepared = stages({wg_files, q_files});
  EXPECT_TRUE(prepared.at("wg").empty()) << prepared.at("wg").front();
  EXPECT_TRUE(prepared.at("q").empty()) << prepared.at("q").front();
  fs::remove_all(dir);
}

TEST(Interior, StridedAsymmetricSameConv) {
  int64_t bytes = 0;
  const StmtReport r = compile_one("strided_same", kStridedSame, &bytes);
  EXPECT_TRUE(r.interior_is_clean()) << "steady loops with tests: " << r.steady_loops_with_tests();
  EXPECT_GT(r.border_loops(), 0) << "no border tiles partitioned off";
  EXPECT_LT(bytes, 96 * 1024);
}

TEST(Interior, DepthwiseSameLower) {
  nlohmann::json l = kStridedSame;
  l["groups"] = 32;
  l["kernel"] = 5;
  l["padding"] = "same_lower";
  int64_t bytes = 0;
  const StmtReport r = compile_one("depthwise", l, &bytes);
  EXPECT_TRUE(r.interior_is_clean());
  EXPECT_GT(r.border_loops(), 0);
  EXPECT_LT(bytes, 96 * 1024);
}

TEST(Interior, ValidPaddingHasNoBoundaryTestAtAll) {
  nlohmann::json l = kStridedSame;
  l["padding"] = "valid";
  const StmtReport r = compile_one("valid", l, nullptr);
  EXPECT_TRUE(r.interior_is_clean());
  EXPECT_EQ(r.border_loops_with_tests(), 0);
}

// A 3x3 stride-1 conv of 7x7 tiles: Winograd F(4,3) by default on AVX-512; the border is read in
// the input transform, whose border tiles Halide peels off.
TEST(Interior, WinogradSameLower) {
  nlohmann::json l = kStridedSame;
  l["stride"] = 1;
  l["padding"] = "same_lower";
  l["border"] = "reflect";
  const StmtReport r = compile_one("winograd", l, nullptr);
  EXPECT_GT(r.steady_loops(), 0);
  EXPECT_TRUE(r.interior_is_clean()) << "steady loops with tests: " << r.steady_loops_with_tests();
}

// The transposes padfold import puts at a model's edges (an image into NHWC, a feature map back to
// NCHW, odd sizes among them) and another permutation: no boundary test in their steady state.
TEST(Interior, Transposes) {
  const nlohmann::json spec = {
      {"model", "tr"},
      {"inputs",
       {{{"name", "img"}, {"shape", {1, 3, 224, 224}}, {"layout", "NCHW"}},
        {{"name", "map"}, {"shape", {1, 14, 14, 40}}, {"layout", "NHWC"}},
        {{"name", "odd"}, {"shape", {1, 17, 13}}, {"layout", "NWC"}}}},
      {"layers",
       {{{"name", "img_nhwc"}, {"op", "transpose"}, {"input", "img"}, {"perm", {0, 2, 3, 1}}},
        {{"name", "map_nchw"}, {"op", "transpose"}, {"input", "map"}, {"perm", {0, 3, 1, 2}}},
        {{"name", "odd_ncw"}, {"op", "transpose"}, {"input", "odd"}, {"perm", {0, 2, 1}}},
        {{"name", "swap"}, {"op", "transpose"}, {"input", "img"}, {"perm", {0, 1, 3, 2}}}}}};
  for (const char* target :
       {"x86-64-linux-avx-avx2-avx512-avx512_skylake-f16c-fma-sse41", "x86-64-linux-avx2-fma"}) {
    for (const auto& [layer, r] : compile_and_check(parse_spec(spec.dump(), "tr.json"), target)) {
      EXPECT_GT(r.steady_loops(), 0) << layer;
      EXPECT_EQ(r.steady_loops_with_tests(), 0) << layer << " on " << target;
    }
  }
}

// The edge kernels padfold import writes for a torch export: stems and a pool reading the NCHW
// image as it is and computing channels last (input_layout), with asymmetric SAME pads and a
// reflect border; and the reverse, a channels-first conv reading an NHWC map. Each one's
// statement has the shape of its twin's, the same layer reading its own layout (the same loops
// and tests: a pool's max counts as one, in both); the stems' steady state has none.
TEST(Interior, EdgeKernelsReadingTheOtherLayout) {
  nlohmann::json layers = nlohmann::json::array();
  auto add = [&](const std::string& name, const std::string& input, const char* layout,
                 const char* input_layout, nlohmann::json fields) {
    fields["name"] = name;
    fields["input"] = input;
    fields["layout"] = layout;
    fields["input_layout"] = input_layout;
    layers.push_back(fields);
    fields["name"] = name + "_twin";
    fields["input"] = input + "_twin";
    fields["input_layout"] = layout;
    layers.push_back(fields);
  };
  const nlohmann::json stem3 = {{"op", "conv2d"}, {"out_channels", 32}, {"kernel", 3},
                                {"stride", 2},    {"padding", "same"},  {"bias", true}};
  const nlohmann::json stem7 = {{"op", "conv2d"}, {"out_channels", 64}, {"kernel", 7},
                                {"stride", 2},    {"padding", 3},       {"border", "reflect"}};
  add("stem3", "img", "NHWC", "NCHW", stem3);
  add("stem7", "img", "NHWC", "NCHW", stem7);
  add("pool", "img", "NHWC", "NCHW",
      {{"op", "max_pool"}, {"kernel", 3}, {"stride", 2}, {"padding", "same"}});
  add("cf", "map", "NCHW", "NHWC",
      {{"op", "conv2d"}, {"out_channels", 16}, {"kernel", 3}, {"padding", "same"}});
  const nlohmann::json spec = {
      {"model", "edges"},
      {"inputs",
       {{{"name", "img"}, {"shape", {1, 3, 224, 224}}, {"layout", "NCHW"}},
        {{"name", "img_twin"}, {"shape", {1, 224, 224, 3}}, {"layout", "NHWC"}},
        {{"name", "map"}, {"shape", {1, 28, 28, 32}}, {"layout", "NHWC"}},
        {{"name", "map_twin"}, {"shape", {1, 32, 28, 28}}, {"layout", "NCHW"}}}},
      {"layers", layers}};
  for (const char* target :
       {"x86-64-linux-avx-avx2-avx512-avx512_skylake-f16c-fma-sse41", "x86-64-linux-avx2-fma"}) {
    const auto checks = compile_and_check(parse_spec(spec.dump(), "edges.json"), target);
    for (const char* layer : {"stem3", "stem7", "pool", "cf"}) {
      SCOPED_TRACE(std::string(layer) + " on " + target);
      const StmtReport& r = checks.at(layer);
      const StmtReport& twin = checks.at(std::string(layer) + "_twin");
      EXPECT_GT(r.steady_loops(), 0);
      EXPECT_EQ(r.steady_loops(), twin.steady_loops());
      EXPECT_EQ(r.steady_loops_with_tests(), twin.steady_loops_with_tests());
      EXPECT_EQ(r.border_loops(), twin.border_loops());
    }
    for (const char* layer : {"stem3", "stem7"}) {
      EXPECT_TRUE(checks.at(layer).interior_is_clean()) << layer << " on " << target;
      EXPECT_GT(checks.at(layer).border_loops(), 0) << layer << ": no border tiles partitioned off";
    }
  }
}

// Every benchmark layer (bench/layers.json, as bench/make_bench_spec.py writes it).
class BenchLayers : public ::testing::TestWithParam<const char*> {};

TEST_P(BenchLayers, SteadyStateHasNoBoundaryTest) {
  const Model model = load_spec(PADFOLD_BENCH_SPEC);
  ASSERT_GE(model.layers.size(), 10u);
  const auto checks = compile_and_check(model, GetParam());
  ASSERT_EQ(checks.size(), model.layers.size());
  for (const auto& [layer, r] : checks) {
    EXPECT_GT(r.steady_loops(), 0) << layer << ": no steady-state loop found";
    for (const StmtLoop& l : r.innermost)
      EXPECT_FALSE(l.steady && !l.test.empty())
          << layer << " on " << GetParam() << ": line " << l.line << " " << l.header
          << "\n  test: " << l.test;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Targets, BenchLayers,
    ::testing::Values("x86-64-linux-avx-avx2-avx512-avx512_skylake-f16c-fma-sse41",
                      "x86-64-linux-tune_znver3-avx-avx2-f16c-fma-sse41", "x86-64-linux-sse41"),
    [](const auto& info) {
      const std::string t = info.param;
      return t.find("avx512") != std::string::npos ? std::string("Avx512")
             : t.find("avx2") != std::string::npos ? std::string("Avx2Zen3")
                                                   : std::string("Sse41");
    });

}  // namespace
}  // namespace padfold
