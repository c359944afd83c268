// Runs the padfold binary and checks what it prints.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>

#include "base/npy.h"
#include "bundle_util.h"

namespace {

using json = nlohmann::json;

struct Result {
  int status = -1;
  std::string out;  // stdout, or stderr when run with stderr_only
};

Result run(const std::string& args, bool stderr_only = false) {
  const auto r = padfold::testing::run_shell(std::string(PADFOLD_BIN) + " " + args +
                                             (stderr_only ? " 2>&1 >/dev/null" : " 2>/dev/null"));
  return {r.status, r.output};
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

const std::string kSeed = "pads --input 7x7 --kernel 4x4 --stride 2 --padding same";

TEST(CliPads, SeedCase) {
  const Result r = run(kSeed);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r.out,
                  "same (default convention: tensorflow) = same_upper: TensorFlow/Keras "
                  "SAME, ONNX SAME_UPPER"))
      << r.out;
  EXPECT_TRUE(has(r.out, "H               1            2       4")) << r.out;
  EXPECT_TRUE(has(r.out, "W               1            2       4")) << r.out;
  EXPECT_TRUE(has(r.out, "output size: 4x4")) << r.out;
  EXPECT_TRUE(has(r.out, "asymmetric: yes")) << r.out;
  EXPECT_TRUE(has(r.out, "input-dependent: yes")) << r.out;
}

TEST(CliPads, Compare) {
  const Result r = run(kSeed + " --compare");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r.out, "PyTorch padding='same'")) << r.out;
  EXPECT_TRUE(has(r.out, "n/a: padding 'torch_same' is only defined for stride 1")) << r.out;
  EXPECT_TRUE(has(r.out, "ONNX SAME_LOWER                              (2,1)->4    (2,1)->4"))
      << r.out;
  EXPECT_TRUE(has(r.out, "nn.ZeroPad2d((1, 2, 1, 2))")) << r.out;
  EXPECT_TRUE(has(r.out, "padding='same'")) << r.out;
  EXPECT_TRUE(has(r.out, "pads=[1, 1, 2, 2]")) << r.out;
  EXPECT_TRUE(has(r.out, "np.pad(x, ((0, 0), (0, 0), (1, 2), (1, 2)))")) << r.out;
}

TEST(CliPads, CompareSymmetricAnd1d) {
  Result r = run("pads --input 8 --kernel 3 --padding same --convention pytorch --compare");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r.out, "nn.Conv1d(..., kernel_size=3, stride=1, padding=1)")) << r.out;
  EXPECT_TRUE(has(r.out, "* PyTorch padding='same'")) << r.out;
  r = run("pads --input 10 --kernel 3 --dilation 2 --padding causal --compare");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r.out, "nn.ZeroPad1d((4, 0))")) << r.out;
  EXPECT_TRUE(has(r.out, "padding='causal'")) << r.out;
  r = run("pads --input 6x6x6 --kernel 2 --padding 1,1,1,0,0,0 --compare");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r.out, "nn.ConstantPad3d((1, 0, 1, 0, 1, 0), 0.0)")) << r.out;
  EXPECT_TRUE(has(r.out, "ZeroPadding3D(((1, 0), (1, 0), (1, 0)))")) << r.out;
}

TEST(CliPads, Json) {
  const Result r = run(kSeed + " --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["mode"], "same_upper");
  EXPECT_EQ(j["convention"], "TensorFlow/Keras SAME, ONNX SAME_UPPER");
  ASSERT_EQ(j["axes"].size(), 2u);
  for (const auto& a : j["axes"]) {
    EXPECT_EQ(a["before"], 1);
    EXPECT_EQ(a["after"], 2);
    EXPECT_EQ(a["output"], 4);
  }
  EXPECT_EQ(j["asymmetric"], true);
  EXPECT_EQ(j["input_dependent"], true);
  ASSERT_EQ(j["compare"].size(), 6u);
  EXPECT_EQ(j["compare"][0]["chosen"], true);
  EXPECT_TRUE(j["compare"][2].contains("error"));
  EXPECT_TRUE(has(j["reproduce"]["pytorch"].get<std::string>(), "ZeroPad2d((1, 2, 1, 2))"));
}

// padfold resize: the taps of the chosen coordinate mode (matching padding/resize.h's
// resize_taps, which resize_kernels_test checks against ONNX's definition), every other mode side
// by side, and errors naming the option.
TEST(CliResize, TapsCompareAndErrors) {
  Result r = run("resize --input 4 --output 8 --compare");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r.out, "resize [4] -> [8] (scales 2), linear, half_pixel")) << r.out;
  EXPECT_TRUE(has(r.out, "     1 -> 0*0.75 + 1*0.25")) << r.out;
  EXPECT_TRUE(has(r.out, "     7 -> 3\n")) << r.out;
  EXPECT_TRUE(has(r.out, "align_corners         reads otherwise at outputs W: 1,2,3,4,5,6"))
      << r.out;
  EXPECT_TRUE(has(r.out, "pytorch_half_pixel    reads the same")) << r.out;
  r =
      run("resize --input 3x5 --scales 2 --mode nearest --coordinate-transformation-mode "
          "asymmetric --nearest-mode floor --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["output"], json({6, 10}));
  ASSERT_EQ(j["taps"].size(), 2u);
  for (int x = 0; x < 10; ++x) EXPECT_EQ(j["taps"][1][x]["first"], x / 2) << x;
  // The size ONNX Runtime gives: the product in float (0.7f * 10 is 6.99999988 in double).
  r = run("resize --input 10 --scales 0.7 --mode nearest --json");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(json::parse(r.out)["output"], json({7}));
  r = run("resize --input 4 --scales 0.1", true);
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.out, "--scales: 0.1 for an input of 4 (an output of 0)")) << r.out;
  r = run("resize --input 4 --output 8 --scales 2", true);
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.out, "expected --output or --scales (one of them)")) << r.out;
  // A crop of [-0.5, 1] of 3 pixels to 4: -0.5 * 2 + x * 1.5 * 2 / 3 = x - 1, outside at 0.
  r =
      run("resize --input 3 --output 4 --coordinate-transformation-mode tf_crop_and_resize "
          "--roi -0.5:1 --extrapolation-value 7 --mode nearest --nearest-mode floor --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const json crop = json::parse(r.out);
  EXPECT_EQ(crop["roi"], json({{-0.5, 1.0}})) << r.out;
  EXPECT_EQ(crop["extrapolation_value"], 7.0) << r.out;
  EXPECT_EQ(crop["taps"][0][0], json({{"outside", true}})) << r.out;
  for (int x = 1; x < 4; ++x) EXPECT_EQ(crop["taps"][0][x]["first"], x - 1) << r.out;
  r = run("resize --input 4 --output 8 --roi 0:1", true);
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.out, "--roi: given with coordinate_transformation_mode 'half_pixel'")) << r.out;
  r =
      run("resize --input 4 --output 8 --coordinate-transformation-mode tf_crop_and_resize "
          "--roi 0.5",
          true);
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.out, "--roi '0.5': expected start:end per axis")) << r.out;
}

TEST(CliPads, Transposed) {
  const Result r =
      run("pads --input 3 --kernel 3 --stride 2 --padding same_lower --transposed --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["axes"][0]["before"], 1);
  EXPECT_EQ(j["axes"][0]["after"], 0);
  EXPECT_EQ(j["axes"][0]["output"], 6);
}

TEST(CliPads, Errors) {
  Result r = run("pads --input 7 --kernel 4 --stride 2 --padding same --convention pytorch", true);
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.out, "padfold: error: ")) << r.out;
  EXPECT_TRUE(has(r.out, "same_upper")) << r.out;
  r = run("pads --input 7x7 --kernel 4x4x4", true);
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.out, "--kernel '4x4x4' has 3 values")) << r.out;
  r = run("pads --kernel 3", true);
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(has(r.out, "--input")) << r.out;
}

// Sizes beyond int32 are refused naming the option (they once printed wrong output sizes).
TEST(CliPads, SizesBeyondInt32NameTheOption) {
  Result r = run("pads --input 7 --kernel 3 --dilation 9223372036854775807 --padding same", true);
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.out,
                  "padfold: error: --dilation '9223372036854775807': 9223372036854775807 is out "
                  "of range; sizes must be at most 2147483647 (the int32 limit)"))
      << r.out;
  r = run("pads --input 7 --kernel 3 --dilation 9223372036854775807 --padding same");
  EXPECT_FALSE(has(r.out, "output size")) << r.out;
  r = run("pads --input 7 --kernel 3 --dilation 4611686018427387904", true);
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.out, "--dilation '4611686018427387904'")) << r.out;
  r = run("pads --input 99999999999999999999 --kernel 3", true);
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.out, "--input '99999999999999999999': 99999999999999999999 is out of range"))
      << r.out;
  r = run("pads --input 7 --kernel 3 --dilation 2147483647 --padding full", true);
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.out,
                  "padfold: error: --dilation: spatial axis 0: the effective kernel "
                  "(3-1)*2147483647+1 = 4294967295 exceeds 2147483647"))
      << r.out;
  r = run("pads --input 7 --kernel 3 --padding 2147483647", true);
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.out, "padfold: error: --padding: spatial axis 0: the padded input")) << r.out;
  r = run("pads --input 2000000000 --kernel 3 --stride 2 --transposed", true);
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.out, "padfold: error: --stride: spatial axis 0: the full transposed output"))
      << r.out;
  // At the limit: an ordinary answer, and --compare copes with conventions beyond it.
  r = run("pads --input 2147483647 --kernel 3 --padding valid --compare");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r.out, "output size: 2147483645")) << r.out;
}

// Writes `text` to a fresh temporary file and returns its path.
std::string temp_spec(const std::string& name, const std::string& text) {
  const std::string path = testing::TempDir() + std::to_string(getpid()) + "_padfold_" + name;
  std::ofstream(path) << text;
  return path;
}

// A max pool whose 2^25 windows of 2^24 taps were once walked one tap at a time (hours).
TEST(CliCheck, WidePoolIsCheckedAtOnce) {
  const std::string path = temp_spec(
      "wide_pool.json",
      R"({"model": "m", "layers": [{"name": "p", "op": "max_pool1d", "input_shape": [1, 1, 16777216],
          "kernel": 16777216, "padding": 16777215}]})");
  const Result r = run("check " + path + " --json");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(json::parse(r.out)["layers"][0]["output_shape"], json({1, 1, 33554431}));
  std::remove(path.c_str());
}

// A directory once read as "invalid JSON", /dev/zero without end.
TEST(CliCheck, RefusesWhatIsNotARegularFile) {
  Result r = run("check " + testing::TempDir(), true);
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.out, ": is a directory, not a spec file")) << r.out;
  r = run("check /dev/zero", true);
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.out, "padfold: error: /dev/zero: not a regular file (a character device)"))
      << r.out;
}

// 100k nested arrays once overflowed the stack (SIGSEGV).
TEST(CliCheck, DeeplyNestedJsonIsAnError) {
  const std::string path =
      temp_spec("deep.json", std::string(100000, '[') + std::string(100000, ']'));
  for (const char* cmd : {"check ", "compile "}) {
    const Result r = run(cmd + path + (cmd[1] == 'o' ? " -o " + path + ".out" : ""), true);
    EXPECT_EQ(r.status, 1) << cmd;
    EXPECT_TRUE(has(r.out, "padfold: error: " + path +
                               ":1:65: arrays and objects nested deeper than 64 levels"))
        << r.out;
  }
  std::remove(path.c_str());
}

// Layers named a and a_argv once failed in the linker with raw ld output.
TEST(CliCheck, NamesClashingWithHalideSymbolsAreSpecErrors) {
  const std::string path = temp_spec(
      "clash.json",
      R"({"model": "m", "layers": [{"name": "a", "op": "max_pool2d", "input_shape": [1, 1, 4, 4],
          "kernel": 2}, {"name": "a_argv", "op": "max_pool2d", "kernel": 1}]})");
  const Result r = run("check " + path, true);
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.out, "layer 'a_argv' (#1): field 'name': 'a_argv' clashes with layer 'a' (#0)"))
      << r.out;
  std::remove(path.c_str());
}

TEST(CliCheck, TinyJsonChains) {
  const Result r = run(std::string("check ") + PADFOLD_EXAMPLES_DIR + "/tiny.json --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["model"], "tiny");
  const auto& layers = j["layers"];
  ASSERT_GE(layers.size(), 4u);
  for (size_t i = 1; i < layers.size(); ++i)
    EXPECT_EQ(layers[i]["input_shape"], layers[i - 1]["output_shape"]) << i;
  const auto& stem = layers[0];
  EXPECT_EQ(stem["output_shape"], json({1, 4, 4, 8}));
  EXPECT_EQ(stem["pads_before"], json({1, 1}));
  EXPECT_EQ(stem["pads_after"], json({2, 2}));
  EXPECT_EQ(stem["asymmetric"], true);
  EXPECT_EQ(stem["padding_mode"], "same_upper");
  EXPECT_EQ(stem["layout"], "NHWC");
  EXPECT_EQ(stem["border"], "zeros");
  EXPECT_EQ(stem["weight_shape"], json({4, 4, 3, 8}));
  EXPECT_DOUBLE_EQ(stem["flops"].get<double>(), 2.0 * 16 * 8 * 3 * 16);
  EXPECT_TRUE(j.contains("file"));
  for (const char* field :
       {"name", "op", "input_shape", "output_shape", "layout", "pads_before", "pads_after",
        "asymmetric", "padding_mode", "border", "weight_shape", "flops"})
    EXPECT_TRUE(stem.contains(field)) << field;
}

TEST(CliCheck, Table) {
  const Result r = run(std::string("check ") + PADFOLD_EXAMPLES_DIR + "/tiny.json");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r.out, "H(1,2) W(1,2)")) << r.out;
  EXPECT_TRUE(has(r.out, "same (tensorflow) -> same_upper")) << r.out;
}

TEST(CliCheck, BadSpecFails) {
  const std::string path = testing::TempDir() + std::to_string(getpid()) + "_padfold_bad_spec.json";
  std::ofstream(path) << R"({"model": "m", "layers": [{"name": "c", "op": "conv2d",
    "input_shape": [1, 3, 8, 8], "out_channels": 4, "kernel": 3, "strides": 2}]})";
  const Result r = run("check " + path, true);
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.out, "padfold: error: " + path +
                             ": layer 'c' (#0): field 'strides': unknown field; did you mean "
                             "'stride'?"))
      << r.out;
  const Result missing = run("check /nonexistent.json", true);
  EXPECT_EQ(missing.status, 1);
  EXPECT_TRUE(has(missing.out, "/nonexistent.json: cannot open")) << missing.out;
}

// Quantization parameters a peer refuses (TFLite: a requantization scale above 2^30, an add
// whose input scales reach 2^20 times the output's; ONNX Runtime: a global average pool's scale
// ratio) are spec errors `check` reports; `compile` fails at once with the same reason, retrying
// no other schedule (a schedule cannot change them).
TEST(CliCheck, QuantizationThePeersRefuseIsASpecError) {
  const std::string conv = R"({"name": "c", "op": "conv2d", "dtype": "int8",
    "input_shape": [1, 7, 7, 4], "out_channels": 4, "kernel": 3, "padding": "same",
    "quant": {"requantize": "tflite", "input": {"scale": 1e20, "zero_point": 0},
              "output": {"scale": 1e-20, "zero_point": 0}, "weight_scale": 0.01}})";
  const std::string add = R"({"name": "a", "op": "add", "dtype": "int8", "input": ["x", "y"],
    "quant": {"requantize": "tflite", "inputs": [{"scale": 1.0, "zero_point": 0},
              {"scale": 0.5, "zero_point": 0}], "output": {"scale": 1e-7, "zero_point": 0}}})";
  const std::string pool = R"({"name": "p", "op": "avg_pool", "dtype": "uint8",
    "input_shape": [1, 4, 2, 2], "kernel": 2, "padding": "valid",
    "quant": {"requantize": "onnx", "input": {"scale": 1000.0, "zero_point": 0},
              "output": {"scale": 0.001, "zero_point": 0}}})";
  struct Case {
    std::string spec, message;
  } cases[] = {
      {R"({"model": "q", "defaults": {"layout": "NHWC", "weight_layout": "HWIO"}, "layers": [)" +
           conv + "]}",
       "layer 'c' (#0): field 'quant': requantization scale above 2^30; expected parameters "
       "TFLite accepts"},
      {R"({"model": "q", "inputs": [{"name": "x", "shape": [1, 2, 3, 3], "dtype": "int8"},
           {"name": "y", "shape": [1, 2, 3, 3], "dtype": "int8"}], "layers": [)" +
           add + "]}",
       "field 'quant': TFLite's add needs 2 * max(input scales) < 2^20 * output scale"},
      {R"({"model": "q", "layers": [)" + pool + "]}",
       "field 'quant': ONNX Runtime's global average pool refuses this input size or scale "
       "ratio; expected parameters ONNX Runtime accepts"},
  };
  for (const Case& c : cases) {
    const std::string path = testing::TempDir() + std::to_string(getpid()) + "_padfold_q.json";
    std::ofstream(path) << c.spec;
    Result r = run("check " + path, true);
    EXPECT_EQ(r.status, 1) << c.spec;
    EXPECT_TRUE(has(r.out, c.message)) << r.out;
    const std::string out = testing::TempDir() + std::to_string(getpid()) + "_padfold_q_bundle";
    r = run("compile " + path + " -o " + out, true);
    EXPECT_EQ(r.status, 1) << c.spec;
    EXPECT_TRUE(has(r.out, c.message)) << r.out;
    EXPECT_FALSE(has(r.out, "retried")) << r.out;
    EXPECT_FALSE(std::filesystem::exists(out));
  }
}

// "  <label>  <text> <data> <bss>" rows of a size report or of binutils' `size` ("<text> <data>
// <bss> <dec> <hex> <name> (ex <archive>)"), keyed by label or member name.
using Sizes = std::map<std::string, std::array<long, 3>>;

Sizes ReportRows(const std::string& out) {
  static const std::regex row(R"(^  (\S.*?)\s+(\d+)\s+(\d+)\s+(\d+)$)");
  Sizes rows;
  std::istringstream lines(out);
  for (std::string l; std::getline(lines, l);)
    if (std::smatch m; std::regex_match(l, m, row))
      rows[m[1]] = {std::stol(m[2]), std::stol(m[3]), std::stol(m[4])};
  return rows;
}

Sizes BinutilsSize(const std::string& files) {
  static const std::regex row(R"(^\s*(\d+)\s+(\d+)\s+(\d+)\s+\d+\s+[0-9a-f]+\s+(\S+).*$)");
  const auto r = padfold::testing::run_command("size " + files);
  EXPECT_EQ(r.status, 0) << r.output;
  Sizes rows;
  std::istringstream lines(r.output);
  for (std::string l; std::getline(lines, l);)
    if (std::smatch m; std::regex_match(l, m, row))
      rows[m[4]] = {std::stol(m[1]), std::stol(m[2]), std::stol(m[3])};
  return rows;
}

// --report-size: each kernel's, the Halide runtime's and the runtime core's text, data and bss are
// what binutils' size says of the bundle's objects (the core compiled here the same way).
TEST(CliCompile, ReportSizeAgreesWithBinutilsSize) {
  const std::string out = testing::TempDir() + std::to_string(getpid()) + "_padfold_cli_size";
  const Result r = run(std::string("compile ") + PADFOLD_EXAMPLES_DIR + "/tiny.json -o " + out +
                       " --target host --report-size");
  ASSERT_EQ(r.status, 0) << r.out;
  const json m = json::parse(std::ifstream(out + "/manifest.json"));
  const std::string dir = out + "/" + m.at("targets")[0].at("dir").get<std::string>();
  EXPECT_TRUE(
      has(r.out, "size report, target " + m.at("targets")[0].at("target").get<std::string>()))
      << r.out;
  const Sizes report = ReportRows(r.out);
  const Sizes kernels = BinutilsSize(dir + "/libpadfold_tiny.a");
  const Sizes runtime = BinutilsSize(dir + "/halide_runtime.a");
  std::array<long, 3> all{};
  for (const char* layer : {"stem", "dw", "pool", "avg"}) {
    const std::string member = std::string("pf_4_tiny_") + layer + ".o";
    ASSERT_EQ(kernels.count(member), 1u) << member;
    ASSERT_EQ(report.count(layer), 1u) << r.out;
    EXPECT_EQ(report.at(layer), kernels.at(member)) << layer;
    EXPECT_GT(kernels.at(member)[0], 0) << layer;
    for (int i = 0; i < 3; i++) all[i] += kernels.at(member)[i];
  }
  EXPECT_EQ(report.at("all kernels"), all);
  ASSERT_EQ(runtime.size(), 1u);
  EXPECT_EQ(report.at("Halide runtime"), runtime.begin()->second);
  std::array<long, 3> core{};
  for (const char* source : {"status.c", "core.c", "cpu.c", "model.c"}) {
    const std::string object = out + "/" + source + ".o";
    const auto c =
        padfold::testing::run_command("cc -c -O2 -std=c99 -I" + out + "/runtime/include -I" + out +
                                      "/include -o " + object + " " + out + "/runtime/" + source);
    ASSERT_EQ(c.status, 0) << c.output;
    const Sizes s = BinutilsSize(object);
    ASSERT_EQ(s.size(), 1u);
    for (int i = 0; i < 3; i++) core[i] += s.begin()->second[i];
    std::filesystem::remove(object);
  }
  EXPECT_EQ(report.at("padfold runtime core"), core) << r.out;
  EXPECT_TRUE(has(r.out, "  weights 0 bytes (0 buffers)\n")) << r.out;
  EXPECT_TRUE(has(r.out, "  arena 1024 bytes (pf_model_run_static, lower bound 1024)\n")) << r.out;
  // The line of the normal output.
  EXPECT_TRUE(has(r.out, ": kernels " + std::to_string(report.at("all kernels")[0]) + " text + "))
      << r.out;
  std::filesystem::remove_all(out);
}

TEST(CliCompile, WritesBundleAndReportsEachKernel) {
  const std::string out = testing::TempDir() + std::to_string(getpid()) + "_padfold_cli_bundle";
  const Result r = run(std::string("compile ") + PADFOLD_EXAMPLES_DIR + "/tiny.json -o " + out +
                       " --target x86-64-linux-avx2-fma");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r.out, "target x86-64-linux-avx2-fma")) << r.out;
  for (const char* layer : {"stem", "dw", "pool", "avg"}) EXPECT_TRUE(has(r.out, layer)) << r.out;
  EXPECT_TRUE(has(r.out, "4 kernels in")) << r.out;
  std::ifstream manifest(out + "/manifest.json");
  ASSERT_TRUE(manifest) << "no manifest.json";
  const json m = json::parse(manifest);
  EXPECT_EQ(m.at("format_version"), 5);
  // The arena of the chain: stem and dw ([1, 4, 4, 8] float32, 512 bytes each) are live together
  // while dw runs; pool ([1, 3, 3, 8], 288 bytes, 320 aligned) then takes stem's place; avg is the
  // model output, the caller's buffer. 1024 bytes, the lower bound.
  EXPECT_EQ(m.at("memory_plan").at("arena_bytes"), 1024);
  EXPECT_EQ(m.at("memory_plan").at("lower_bound"), 1024);
  EXPECT_EQ(m.at("memory_plan").at("intermediates_bytes"), 1344);
  EXPECT_EQ(m.at("kernels")[0].at("arena_offset"), 0);
  EXPECT_EQ(m.at("kernels")[1].at("arena_offset"), 512);
  EXPECT_EQ(m.at("kernels")[2].at("arena_offset"), 0);
  EXPECT_TRUE(m.at("kernels")[3].at("arena_offset").is_null());
  EXPECT_TRUE(has(r.out,
                  "memory plan: arena 1024 bytes for pf_model_run_static (lower bound 1024, "
                  "all intermediates 1344; 64-byte aligned)"))
      << r.out;
  EXPECT_EQ(m.at("targets").size(), 1u);
  EXPECT_EQ(m.at("kernels").size(), 4u);
  EXPECT_EQ(m.at("kernels")[0].at("buffers")[0].at("shape"), json({1, 7, 7, 3}));
  // The chain as a graph: stem reads the model input, pool reads dw (named), avg reads pool.
  EXPECT_EQ(m.at("graph").at("inputs")[0].at("name"), "stem.input");
  EXPECT_EQ(m.at("graph").at("inputs")[0].at("shape"), json({1, 7, 7, 3}));
  EXPECT_EQ(m.at("graph").at("outputs"), json({"avg"}));
  EXPECT_EQ(m.at("kernels")[0].at("buffers")[0].at("source"), "stem.input");
  EXPECT_EQ(m.at("kernels")[2].at("buffers")[0].at("source"), "dw");
  EXPECT_EQ(m.at("kernels")[0].at("buffers")[1].at("source"), nullptr);  // no weight_files
  EXPECT_EQ(m.at("embedded_weights"), false);
}

// Models named "case_m" and "Case_M" get the same macro names (PADFOLD_CASE_M_ARENA_BYTES): each
// umbrella header compiles alone, the second one included refuses by name.
TEST(CliCompile, ModelsDifferingOnlyByCaseRefuseInOneTranslationUnit) {
  const std::string dir = testing::TempDir() + std::to_string(getpid()) + "_padfold_case";
  std::filesystem::create_directories(dir);
  std::string includes;
  for (const std::string model : {"case_m", "Case_M"}) {
    const std::string spec = dir + "/" + model + ".json";
    std::ofstream(spec) << R"({"model": ")" << model << R"(", "layers": [{"name": "p",
        "op": "max_pool", "input_shape": [1, 4, 4, 8], "layout": "NHWC", "kernel": 2}]})";
    const Result r = run("compile " + spec + " -o " + dir + "/" + model + " --target host");
    ASSERT_EQ(r.status, 0) << r.out;
    includes += " -I" + dir + "/" + model + "/include";
  }
  const auto cc = [&](const std::string& text) {
    std::ofstream(dir + "/use.c") << text;
    return padfold::testing::run_command("cc -fsyntax-only -std=c11" + includes + " " + dir +
                                         "/use.c");
  };
  EXPECT_EQ(cc("#include \"padfold_case_m.h\"\nchar a[PADFOLD_CASE_M_ARENA_BYTES + 1];\n").status,
            0);
  EXPECT_EQ(cc("#include \"padfold_Case_M.h\"\nchar a[PADFOLD_CASE_M_ARENA_BYTES + 1];\n").status,
            0);
  const auto both = cc("#include \"padfold_case_m.h\"\n#include \"padfold_Case_M.h\"\n");
  EXPECT_NE(both.status, 0);
  EXPECT_TRUE(has(both.output,
                  "padfold_Case_M.h: PADFOLD_CASE_M_ARENA_BYTES is defined already, by the header "
                  "of another model whose name differs from 'Case_M' only by case; rename one of "
                  "the models"))
      << both.output;
  std::filesystem::remove_all(dir);
}

TEST(CliCompile, ErrorsNameWhatIsWrong) {
  const std::string tiny = std::string(PADFOLD_EXAMPLES_DIR) + "/tiny.json";
  const std::string out = testing::TempDir() + std::to_string(getpid()) + "_padfold_cli_bad";
  const Result target = run("compile " + tiny + " -o " + out + " --target x86-64-lnux", true);
  EXPECT_EQ(target.status, 1);
  EXPECT_TRUE(has(target.out, "unknown target 'x86-64-lnux'")) << target.out;
  // --target is one comma-separated value: an empty one is refused, and the option after it is
  // not taken for a target.
  for (const char* empty : {",,", "host,,x86-64-linux", "''"}) {
    const Result r = run("compile " + tiny + " -o " + out + " --target " + empty + " -j1", true);
    EXPECT_EQ(r.status, 1) << empty;
    EXPECT_TRUE(has(r.out,
                    "': an empty target name; expected target names separated by single "
                    "commas, e.g. host-cuda,host"))
        << r.out;
    EXPECT_FALSE(has(r.out, "-j1")) << r.out;
  }
  EXPECT_FALSE(std::filesystem::exists(out));

  const std::string sched = testing::TempDir() + std::to_string(getpid()) + "_padfold_sched.json";
  std::ofstream(sched) << R"({"nosuchlayer": {"tile_x": 2}})";
  const Result layer = run("compile " + tiny + " -o " + out + " --schedules " + sched, true);
  EXPECT_EQ(layer.status, 1);
  EXPECT_TRUE(has(layer.out, "layer 'nosuchlayer' is not in")) << layer.out;

  std::ofstream(sched) << R"({"stem": {"tile_z": 2}})";
  const Result param = run("compile " + tiny + " -o " + out + " --schedules " + sched, true);
  EXPECT_EQ(param.status, 1);
  EXPECT_TRUE(has(param.out, "layer 'stem': unknown schedule knob 'tile_z'")) << param.out;
}

// stmt-check reports the stages that transform a kernel's weights on each call and, with
// --no-weight-transforms, fails their kernel; a kernel reading its weights as they are passes.
TEST(CliStmtCheck, NoWeightTransformsFailsAKernelTransformingItsWeights) {
  const std::string dir = testing::TempDir() + std::to_string(getpid()) + "_padfold_stmts";
  std::filesystem::create_directories(dir);
  const std::string loop =
      " for (out.s0.x, 0, 16) {\n  for (r.s1.r$x, 0, 3) {\n   a = b\n  }\n }\n";
  std::ofstream(dir + "/q.stmt") << "module name=q, target=x86-64-linux\n"
                                    "external_plus_metadata func q (in, out) {\n"
                                    " produce q_dot_weights {\n"
                                 << loop << " }\n produce q_weight_sum$0 {\n"
                                 << loop << " }\n"
                                 << loop << "}\n";
  std::ofstream(dir + "/p.stmt") << "module name=p, target=x86-64-linux\n"
                                    "external_plus_metadata func p (in, out) {\n"
                                 << loop << "}\n";
  const std::string q = dir + "/q.stmt", p = dir + "/p.stmt";
  Result r = run("stmt-check " + q + " " + p);
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r.out, "weights transformed on each call: q_dot_weights, q_weight_sum\n"))
      << r.out;
  r = run("stmt-check --no-weight-transforms " + q + " " + p);
  EXPECT_EQ(r.status, 1) << r.out;
  const std::string folder = std::to_string(getpid()) + "_padfold_stmts/";  // the file's folder
  EXPECT_TRUE(has(r.out, "FAIL " + folder + "q.stmt")) << r.out;
  EXPECT_TRUE(has(r.out, "ok   " + folder + "p.stmt")) << r.out;
  r = run("stmt-check --no-weight-transforms " + p);
  EXPECT_EQ(r.status, 0) << r.out;
  std::filesystem::remove_all(dir);
}

// A bundle's weight files are shared by its targets: where they want different prepared forms
// (channel blocks of a 1x1 conv: AVX-512's wider than AVX2's), the files keep the spec's form and
// the compile says which kernels transform them on every call; one target alone prepares them.
TEST(CliCompile, SaysWhichKernelsTargetsWantWeightsInDifferentForms) {
  const std::string dir = testing::TempDir() + std::to_string(getpid()) + "_padfold_forms";
  std::filesystem::create_directories(dir);
  const std::vector<float> w(256 * 512, 0.25f);
  padfold::write_npy_f32(dir + "/w.npy", {1, 1, 256, 512}, w.data());
  std::ofstream(dir + "/s.json") << json{{"model", "forms"},
                                         {"layers",
                                          {{{"name", "down"},
                                            {"op", "conv2d"},
                                            {"input_shape", {1, 56, 56, 256}},
                                            {"layout", "NHWC"},
                                            {"out_channels", 512},
                                            {"kernel", 1},
                                            {"stride", 2},
                                            {"padding", "valid"},
                                            {"weight_files", {{"weights", "w.npy"}}}}}}};
  const std::string avx512 = "x86-64-linux-avx-avx2-avx512-avx512_skylake-f16c-fma-sse41";
  Result r = run("compile " + dir + "/s.json -o " + dir + "/both --target " + avx512 +
                 ",x86-64-linux-avx2-fma");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r.out,
                  "weights as their files hold them for 1 kernel(s) whose targets want "
                  "different forms (down): some target transforms them on every call"))
      << r.out;
  EXPECT_FALSE(has(r.out, "prepared weights")) << r.out;
  r = run("compile " + dir + "/s.json -o " + dir + "/one --target " + avx512);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r.out, "prepared weights: 1 kernel(s) (Ohwi")) << r.out;
  EXPECT_FALSE(has(r.out, "different forms")) << r.out;
  std::filesystem::remove_all(dir);
}

}  // namespace
