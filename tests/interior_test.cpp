// The border is folded into the kernel: reading the lowered statement `padfold compile
// --emit-stmt` writes, the innermost reduction loops of the interior contain no boundary test
// (no select), while the border strips do; and each kernel's object stays small.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "bundle.h"

namespace padfold {
namespace {

namespace fs = std::filesystem;

struct InnermostLoops {
  int with_select = 0;
  int without_select = 0;
};

// Classifies the innermost `for` loops of the reduction's update (names containing
// "_reduce.s1.") by whether their bodies contain a select.
InnermostLoops classify_reduction_loops(const std::string& stmt) {
  std::vector<std::string> lines;
  std::istringstream in(stmt);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  InnermostLoops result;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find("for (") == std::string::npos) continue;
    if (lines[i].find("_reduce.s1.") == std::string::npos) continue;
    int depth = 0;
    bool nested = false, select = false;
    for (size_t j = i; j < lines.size(); ++j) {
      if (j > i && lines[j].find("for (") != std::string::npos) nested = true;
      if (lines[j].find("select(") != std::string::npos) select = true;
      for (char c : lines[j]) depth += c == '{' ? 1 : c == '}' ? -1 : 0;
      if (depth == 0) break;
    }
    if (nested) continue;
    (select ? result.with_select : result.without_select)++;
  }
  return result;
}

class Interior : public ::testing::Test {
 protected:
  void compile(const std::string& name, const nlohmann::json& layer) {
    nlohmann::json spec = {{"model", "interior"}, {"layers", {layer}}};
    spec["layers"][0]["name"] = name;
    const Model model = parse_spec(spec.dump(), "interior_test");
    CompileOptions opt;
    opt.out_dir =
        (fs::temp_directory_path() / ("padfold_interior_" + name + "_" + std::to_string(getpid())))
            .string();
    fs::remove_all(opt.out_dir);
    opt.targets = {"x86-64-linux-avx2-fma"};
    opt.emit_stmt = true;
    const auto reports = compile_bundle(model, opt);
    ASSERT_EQ(reports.size(), 1u);
    object_bytes_ = reports[0].object_bytes;
    std::ifstream f(fs::path(opt.out_dir) / "x86-64-linux-avx2-fma" / (name + ".stmt"));
    ASSERT_TRUE(f) << "no .stmt written";
    std::stringstream ss;
    ss << f.rdbuf();
    loops_ = classify_reduction_loops(ss.str());
    fs::remove_all(opt.out_dir);
  }
  InnermostLoops loops_;
  int64_t object_bytes_ = 0;
};

const nlohmann::json kStridedSame = {{"op", "conv2d"},     {"input_shape", {1, 28, 28, 32}},
                                     {"layout", "NHWC"},   {"weight_layout", "HWIO"},
                                     {"out_channels", 32}, {"kernel", 3},
                                     {"stride", 2},        {"padding", "same_upper"}};

TEST(InteriorParser, ClassifiesInnermostLoops) {
  const std::string stmt =
      "for (a_reduce.s1.r, 0, 4) {\n x = select(c, 1, 0)\n}\n"
      "for (b_reduce.s1.r, 0, 4) {\n x = 1\n}\n"
      "for (c_reduce.s1.outer, 0, 4) {\n for (c_reduce.s1.r, 0, 2) {\n  x = 2\n }\n}\n";
  const InnermostLoops l = classify_reduction_loops(stmt);
  EXPECT_EQ(l.with_select, 1);
  EXPECT_EQ(l.without_select, 2);
}

TEST_F(Interior, StridedAsymmetricSameConv) {
  compile("strided_same", kStridedSame);
  EXPECT_GT(loops_.without_select, 0) << "no boundary-free interior loop";
  EXPECT_GT(loops_.with_select, 0) << "the border strips should carry the boundary tests";
  EXPECT_LT(object_bytes_, 96 * 1024);
}

TEST_F(Interior, DepthwiseSameLower) {
  nlohmann::json l = kStridedSame;
  l["groups"] = 32;
  l["kernel"] = 5;
  l["padding"] = "same_lower";
  compile("depthwise", l);
  EXPECT_GT(loops_.without_select, 0);
  EXPECT_GT(loops_.with_select, 0);
  EXPECT_LT(object_bytes_, 96 * 1024);
}

TEST_F(Interior, ValidPaddingHasNoBoundaryTestAtAll) {
  nlohmann::json l = kStridedSame;
  l["padding"] = "valid";
  compile("valid", l);
  EXPECT_GT(loops_.without_select, 0);
  EXPECT_EQ(loops_.with_select, 0);
}

}  // namespace
}  // namespace padfold
