// The bundle writer (emit/) and the dtypes of quantized layers (docs/int8.md: int8/uint8
// activations, int8 weights, int32 bias), without compiling a kernel: the plan of a float spec
// with its buffers given those dtypes writes them into manifest.json (the runtime's names) and
// registry.c (its constants; the file compiles as C99 with -Werror), embeds int8 and int32 weights
// as C arrays of exactly their values, and weight files are checked against their buffer's dtype,
// refused naming the spec, the layer, the file and both dtypes.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "base/npy.h"
#include "bundle_util.h"
#include "emit/bundle_plan.h"
#include "emit/manifest.h"
#include "emit/registry.h"
#include "emit/weights.h"
#include "frontend/spec.h"

namespace {

namespace fs = std::filesystem;
using padfold::testing::contains;
using padfold::testing::run_command;
using padfold::testing::shell_quote;

fs::path work_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const fs::path dir =
      fs::path(PF_WORK_DIR) / (std::string(info->test_suite_name()) + "." + info->name());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// q: a 3x3 conv with weight files, 1x6x6x2 -> 1x6x6x4 (weights HWIO 3x3x2x4, bias 4); p: a max
// pool reading q.
const char* kSpec = R"({
  "model": "qmodel",
  "defaults": {"layout": "NHWC", "weight_layout": "HWIO", "dtype": "float32", "border": "zeros"},
  "layers": [
    {"name": "q", "op": "conv2d", "input_shape": [1, 6, 6, 2], "out_channels": 4, "kernel": 3,
     "padding": "same", "bias": true, "weight_files": {"weights": "w.npy", "bias": "b.npy"}},
    {"name": "p", "op": "max_pool", "kernel": 2, "stride": 2}
  ]
})";

const std::vector<int64_t> kWShape = {3, 3, 2, 4}, kBShape = {4};

class EmitDtypes : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = work_dir();
    std::ofstream(dir / "spec.json") << kSpec;
    std::vector<float> w(72), b(4);
    for (size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * static_cast<float>(i);
    padfold::write_npy_f32((dir / "w.npy").string(), kWShape, w.data());
    padfold::write_npy_f32((dir / "b.npy").string(), kBShape, b.data());
    model = padfold::load_spec((dir / "spec.json").string());
  }
  fs::path dir;
  padfold::Model model;
};

// The plan of the float spec, unfused, with q's buffers given a quantized layer's dtypes (int8
// input and weights, int32 bias, uint8 output), p's uint8, and the model input int8.
padfold::BundlePlan quantized_plan(padfold::Model& model, const fs::path& out, bool embed) {
  model.inputs.at(0).dtype = padfold::DType::I8;
  padfold::CompileOptions opt;
  opt.out_dir = out.string();
  opt.fuse.mode = padfold::FuseOptions::Mode::None;
  opt.embed_weights = embed;
  padfold::BundlePlan plan = padfold::plan_bundle(model, opt);
  EXPECT_EQ(plan.kernels.size(), 2u);
  for (padfold::BufferPlan& b : plan.kernels.at(0).buffers)
    b.dtype = b.role == PF_ROLE_BIAS ? PF_I32 : b.role == PF_ROLE_OUTPUT ? PF_U8 : PF_I8;
  for (padfold::BufferPlan& b : plan.kernels.at(1).buffers) b.dtype = PF_U8;
  for (padfold::WeightFile& w : plan.weight_files)
    w.dtype = w.role == PF_ROLE_BIAS ? PF_I32 : PF_I8;
  return plan;
}

TEST_F(EmitDtypes, ManifestNamesEachBuffersDtype) {
  const padfold::BundlePlan plan = quantized_plan(model, dir / "bundle", false);
  const nlohmann::json m = padfold::bundle_manifest(plan, {}, {std::nullopt});
  std::vector<std::string> q, p;
  for (const auto& b : m.at("kernels").at(0).at("buffers")) q.push_back(b.at("dtype"));
  for (const auto& b : m.at("kernels").at(1).at("buffers")) p.push_back(b.at("dtype"));
  EXPECT_EQ(q, (std::vector<std::string>{"int8", "int8", "int32", "uint8"}));
  EXPECT_EQ(p, (std::vector<std::string>{"uint8", "uint8"}));
  EXPECT_EQ(m.at("graph").at("inputs").at(0).at("dtype"), "int8");
}

TEST_F(EmitDtypes, RegistryWritesDtypeConstantsAndEmbeddedIntegerWeights) {
  padfold::BundlePlan plan = quantized_plan(model, dir / "bundle", true);
  ASSERT_EQ(plan.weight_files.size(), 2u);
  std::vector<int8_t> w(72);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int8_t>(static_cast<int>(i * 7) - 128);
  const std::vector<int32_t> b = {std::numeric_limits<int32_t>::min(), -1, 0,
                                  std::numeric_limits<int32_t>::max()};
  std::vector<padfold::NpyData> data(2);
  data[0].shape = kWShape;
  data[0].dtype = padfold::NpyDType::I8;
  data[0].bytes.assign(reinterpret_cast<const unsigned char*>(w.data()),
                       reinterpret_cast<const unsigned char*>(w.data()) + w.size());
  data[1].shape = kBShape;
  data[1].dtype = padfold::NpyDType::I32;
  data[1].bytes.resize(16);
  std::memcpy(data[1].bytes.data(), b.data(), 16);
  const std::string embedded = padfold::embedded_weights_c(plan, data);
  EXPECT_TRUE(contains(embedded, "static const int8_t ")) << embedded;
  EXPECT_TRUE(contains(embedded, "static const int32_t ")) << embedded;
  EXPECT_TRUE(contains(embedded, "(-2147483647 - 1), -1, 0, 2147483647}")) << embedded;

  const fs::path root = dir / "bundle";
  fs::create_directories(padfold::target_dir(root, plan.targets.at(0)));
  padfold::write_registry_sources(plan, plan.targets.at(0), root, embedded, "");
  const fs::path registry = padfold::target_dir(root, plan.targets.at(0)) / "registry.c";
  const std::string text = read_file(registry);
  EXPECT_TRUE(contains(text, "{\"input\", PF_ROLE_INPUT, PF_I8, \"NHWC\"")) << text;
  EXPECT_TRUE(contains(text, "{\"weights\", PF_ROLE_WEIGHTS, PF_I8, \"HWIO\"")) << text;
  EXPECT_TRUE(contains(text, "{\"bias\", PF_ROLE_BIAS, PF_I32, ")) << text;
  EXPECT_TRUE(contains(text, "{\"output\", PF_ROLE_OUTPUT, PF_U8, ")) << text;
  EXPECT_FALSE(contains(text, "PF_F32")) << text;
  // registry.c compiles as the bundle's consumers compile it.
  const auto cc = run_command(
      shell_quote(PF_C_COMPILER) + " -std=c99 -Wall -Wextra -pedantic -Werror -c " +
      shell_quote(registry.string()) + " -o " + shell_quote((dir / "registry.o").string()) + " -I" +
      shell_quote(PF_RUNTIME_INCLUDE) + " -isystem " + shell_quote(PF_HALIDE_INCLUDE));
  EXPECT_EQ(cc.status, 0) << cc.output;

  // The arrays hold exactly the values, at a 64-byte boundary: a C program prints them back.
  const std::string symbol = padfold::kernel_function_name(model, model.layers.at(0));
  std::ofstream(dir / "values.c") << "#include <stdint.h>\n#include <stdio.h>\n"
                                  << "#include \"padfold_registry.h\"\n"
                                  << embedded << "int main(void) {\n  size_t i;\n"
                                  << "  if ((uintptr_t)" << symbol << "_weights_data % 64 || "
                                  << "(uintptr_t)" << symbol << "_bias_data % 64) return 2;\n"
                                  << "  for (i = 0; i < 72; i++) printf(\"%d \", (int)" << symbol
                                  << "_weights_data[i]);\n"
                                  << "  for (i = 0; i < 4; i++) printf(\"%ld \", (long)" << symbol
                                  << "_bias_data[i]);\n"
                                  << "  return 0;\n}\n";
  std::string want;
  for (int8_t v : w) want += std::to_string(v) + " ";
  for (int32_t v : b) want += std::to_string(v) + " ";
  const std::string exe = (dir / "values").string();
  const auto built =
      run_command(shell_quote(PF_C_COMPILER) + " -std=c99 -Wall -Werror " +
                  shell_quote((dir / "values.c").string()) + " -o " + shell_quote(exe) + " -I" +
                  shell_quote(PF_RUNTIME_INCLUDE) + " -isystem " + shell_quote(PF_HALIDE_INCLUDE));
  ASSERT_EQ(built.status, 0) << built.output << "\n" << read_file(dir / "values.c");
  const auto ran = run_command(shell_quote(exe));
  EXPECT_EQ(ran.status, 0);
  EXPECT_EQ(ran.output, want);
}

TEST_F(EmitDtypes, WeightFilesMustHaveTheirBuffersDtype) {
  padfold::BundlePlan plan = quantized_plan(model, dir / "bundle", false);
  const padfold::WeightFile& wf = plan.weight_files.at(0);
  ASSERT_EQ(wf.buffer, "weights");
  // w.npy is float32; the buffer int8.
  try {
    padfold::read_weight_file(model, wf);
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(contains(e.what(), "spec.json: layer 'q': field 'weight_files.weights': " +
                                       (dir / "w.npy").string() +
                                       " holds float32 ('<f4'); expected int8 ('|i1'), the dtype "
                                       "of the layer's weights buffer"))
        << e.what();
  }
  const std::vector<int8_t> w(72, -3);
  padfold::write_npy((dir / "w.npy").string(), kWShape, padfold::NpyDType::I8, w.data());
  const padfold::NpyData got = padfold::read_weight_file(model, wf);
  EXPECT_EQ(got.dtype, padfold::NpyDType::I8);
  EXPECT_EQ(got.shape, kWShape);
  EXPECT_EQ(got.bytes, std::vector<unsigned char>(72, static_cast<unsigned char>(-3)));
  // The float layer itself (padfold check, padfold compile) refuses the int8 file.
  try {
    padfold::check_weight_files(model);
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(contains(e.what(),
                         "holds int8 ('|i1'); expected float32 ('<f4'), the dtype of "
                         "the layer's weights buffer"))
        << e.what();
  }
}

}  // namespace
